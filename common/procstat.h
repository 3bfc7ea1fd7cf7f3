/* SPDX-License-Identifier: MIT */
/*
 * A process's own resource figures, as Prometheus' process_* metrics name
 * them: resident and virtual memory, open fds, CPU time, start time. Read from
 * /proc/self (and /proc/stat for the boot time); hbgd sends its own in
 * the metrics reply, the exporter (hbgctl metrics --listen) shows its own.
 */
#pragma once

#include <stdint.h>

struct procstat {
        uint64_t resident_bytes;       /* /proc/self/statm: resident pages */
        uint64_t virtual_bytes;        /* /proc/self/statm: the whole mapping's pages */
        uint64_t open_fds;             /* entries of /proc/self/fd */
        uint64_t max_fds;              /* RLIMIT_NOFILE's soft limit */
        uint64_t cpu_us;               /* user + system, getrusage(RUSAGE_SELF) */
        uint64_t start_time_ms;        /* Unix time, ms: boot time + starttime of /proc/self/stat */
};

/* The calling process's figures. 0, or a negative errno (no /proc):
 * then the fields that could be read are set, the others 0. */
int procstat_self(struct procstat *ret);
