/* SPDX-License-Identifier: MIT */
/*
 * End-to-end test support: run the real hbgd on a private socket.
 *
 * daemon_start() forks build/bin/hbgd (or $HBGD) with
 *   --socket DIR/hbgd.sock [extra args]
 * in a fresh directory DIR (mkdtemp under $TMPDIR or /tmp), with
 * NOTIFY_SOCKET=DIR/notify bound here, and returns once hbgd sent
 * "READY=1" there (or fails if hbgd exits or stays silent for 20 s). hbgd's
 * stdout and stderr go to DIR/hbgd.log (to the test's stderr when
 * HBG_TEST_VERBOSE is set); the log is printed when startup fails.
 *
 * Clean-up never depends on the test getting to its end: hbgd is forked
 * with PR_SET_PDEATHSIG=SIGKILL (it dies with the thread that started it,
 * also when Check _exit()s a failed test or kills one that timed out), an
 * atexit() handler kills every hbgd still running and removes its
 * directory, and daemon_util_init() makes one parent directory for all of
 * them that daemon_util_cleanup() (and an atexit() handler in the process
 * that called daemon_util_init(), e.g. the Check runner) removes whole.
 *
 * Not thread-safe; call from the thread that owns the daemons.
 */
#pragma once

#include <stdbool.h>
#include <sys/types.h>

struct hbgd_proc {
        pid_t pid;
        int pidfd;                /* pidfd_open(), -1 if unavailable */
        int notify_fd;            /* our end of NOTIFY_SOCKET */
        bool reaped;
        int wstatus;              /* valid once reaped */
        char dir[256];
        char socket_path[108];
        char notify_path[108];
        char log_path[300];
};

/* Optional, from main() before the tests fork: one parent directory for
 * every daemon directory, removed by daemon_util_cleanup() or at exit.
 * 0 or -errno. */
int daemon_util_init(void);
void daemon_util_cleanup(void);

/* A file of the tests' own (a config file to change and reload) in that
 * parent directory, so that a test that fails before unlinking it leaves
 * nothing behind: its path into path (len bytes), written with text.
 * 0 or -errno (-ENOENT before daemon_util_init()). */
int daemon_util_write_file(char *path, size_t len, const char *name, const char *text);

/* The hbgd binary: $HBGD, else the one of this build (compiled in). */
const char *daemon_binary(void);

/* An e2e test's setup (struct check_main, tests/check_main.h): the hbgd
 * binary must be there (else a message naming it and $HBGD), then
 * daemon_util_init(). 0 or -errno. */
int daemon_util_setup(void);

/*
 * Start hbgd. args: extra arguments (NULL-terminated, may be NULL); env:
 * "NAME=VALUE" strings set in hbgd's environment (NULL-terminated, may be
 * NULL); HBGD_IO is removed from hbgd's environment unless env sets it.
 * 0 and *ret, or -errno with a message on stderr.
 */
int daemon_start(struct hbgd_proc **ret, const char *const *args, const char *const *env);
/* The same with hbgd's stdout and stderr on out_fd (a pipe of the test's,
 * say) instead of DIR/hbgd.log; out_fd -1 is daemon_start(). The caller
 * keeps its out_fd. */
int daemon_start_fd(struct hbgd_proc **ret, const char *const *args, const char *const *env, int out_fd);

/* Wait up to timeout_ms for hbgd to exit and reap it (d->wstatus).
 * 0, or -ETIMEDOUT. */
int daemon_wait_exit(struct hbgd_proc *d, int timeout_ms);

/* SIGTERM, wait up to timeout_ms, then SIGKILL. Returns the wait status
 * (>= 0). Sessions still open get hbgd's grace period (5 s). */
int daemon_stop(struct hbgd_proc *d, int timeout_ms);

/* Stop hbgd if it still runs, remove its directory, free d. NULL is fine. */
void daemon_destroy(struct hbgd_proc *d);

/* Wait up to timeout_ms for a notification datagram containing `what`
 * (e.g. "STOPPING=1"). 0, -ETIMEDOUT. */
int daemon_wait_notify(struct hbgd_proc *d, const char *what, int timeout_ms);

/* Copy DIR/hbgd.log to stderr (for failures). */
void daemon_dump_log(const struct hbgd_proc *d);

/* Open fds of a process (entries of /proc/PID/fd), or -errno. */
int daemon_fd_count(pid_t pid);
/* Threads of a process named `name` (/proc/PID/task/TID/comm), or -errno. */
int daemon_threads_named(pid_t pid, const char *name);
/* Their time on a CPU so far (/proc/PID/task/TID/schedstat), ns, or -errno. */
long long daemon_threads_cpu_ns(pid_t pid, const char *name);

/* A size field of /proc/PID/status ("VmRSS", "RssAnon", "VmSize"...) in
 * KiB, or -errno. */
long daemon_status_kib(pid_t pid, const char *field);

/* Poll daemon_fd_count(pid) every few ms until it equals want or timeout_ms
 * passed. Returns the last count seen (or -errno). */
int daemon_wait_fd_count(pid_t pid, int want, int timeout_ms);

/* Milliseconds of CLOCK_MONOTONIC. */
long long daemon_now_ms(void);
