/* SPDX-License-Identifier: MIT */
/*
 * An hbgd of the benchmark's own, on a private socket: started with the
 * completion policy and thread count of a run (and optionally under
 * valgrind, for instruction counts), waited for until it says READY=1 on a
 * NOTIFY_SOCKET of ours, stopped with SIGTERM, its peak RSS and CPU time
 * read from /proc.
 */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

struct bench_hbgd {
        pid_t pid;
        int notify_fd;
        char dir[128];
        char socket[160];
        char log[160];
};

/*
 * Start `hbgd` (path) with --completion=mode --threads=threads on a socket
 * in a fresh directory. With `wrap` (e.g. "valgrind --tool=callgrind
 * --callgrind-out-file=F"), it runs under that command. Waits up to
 * timeout_ms for READY=1. 0, or -errno after printing why.
 */
int bench_hbgd_start(struct bench_hbgd *h, const char *hbgd, const char *mode, unsigned threads,
                     const char *const *wrap, int timeout_ms);
/* The same with `config` (text of an hbgd.conf, or NULL) written next to
 * the socket and passed as --config. */
int bench_hbgd_start_config(struct bench_hbgd *h, const char *hbgd, const char *mode, unsigned threads,
                            const char *config, const char *const *wrap, int timeout_ms);
/* Let any uid reach h's socket (its directory is 0700): 0 or -errno;
 * and close it to them again. */
int bench_hbgd_open_to_all(const struct bench_hbgd *h);
void bench_hbgd_close_to_others(const struct bench_hbgd *h);
/* SIGTERM and wait (SIGKILL after timeout_ms); removes the directory.
 * Returns hbgd's exit status (as waitpid's), or -errno. */
int bench_hbgd_stop(struct bench_hbgd *h, int timeout_ms);

/* Peak resident set (VmHWM), KiB; 0 if unknown. */
uint64_t bench_proc_peak_rss_kib(pid_t pid);
/* CPU time of all its threads alive now, in ns; -1 if unknown. */
int64_t bench_proc_cpu_ns(pid_t pid);
/* Until pid used under 1 % of a core over 100 ms (hbgd: spare rings made
 * again, rings of closed sessions freed), at most max_ms. */
void bench_proc_settle(pid_t pid, int max_ms);
/* The directory of the running program (for hbgd and the peers next to
 * it), into buf. */
const char *bench_self_dir(char *buf, size_t len);
