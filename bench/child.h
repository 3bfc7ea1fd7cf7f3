/* SPDX-License-Identifier: MIT */
/*
 * A process the benchmark talks to by lines: a producer (hbg-bench
 * producer) or a peer program. Its stdin and stdout are pipes to us, its
 * stderr is ours (so that its errors reach the user as they happen).
 */
#pragma once

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

struct bench_child {
        pid_t pid;
        int to_fd;              /* its stdin */
        int from_fd;            /* its stdout */
        char buf[4096];         /* bytes read, not yet returned as lines */
        size_t len;
        char name[64];          /* for messages */
};

/* Start argv (argv[0] found in $PATH or by path). 0 or -errno. */
int bench_child_start(struct bench_child *c, const char *name, const char *const *argv);
/* The same as uid (and group uid), not ours: root only; (uid_t)-1 is
 * bench_child_start(). A child that cannot change exits 126. */
int bench_child_start_as(struct bench_child *c, const char *name, const char *const *argv, uid_t uid);
/* Write the line s ("\n" added). 0, or -errno (-EPIPE once it exited). */
int bench_child_send(struct bench_child *c, const char *s);
/* The next line of its output, without "\n", into line (truncated to len);
 * waits up to timeout_ms (< 0: for ever). 1 with a line, 0 at end of its
 * output, -ETIMEDOUT, or -errno. */
int bench_child_line(struct bench_child *c, char *line, size_t len, int timeout_ms);
/* Close its stdin, wait up to timeout_ms for it to exit (then SIGKILL).
 * Returns its exit code (0..255), 128 + signal if it was killed, or -errno. */
int bench_child_finish(struct bench_child *c, int timeout_ms);

/* Peak resident memory of this process, KiB (getrusage). */
long bench_self_peak_rss_kib(void);
