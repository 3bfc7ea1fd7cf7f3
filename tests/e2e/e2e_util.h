/* SPDX-License-Identifier: MIT */
/*
 * Helpers of the end-to-end tests against a real hbgd (test_e2e_daemon.c,
 * test_e2e_hostile.c and most others), on top of tests/e2e/daemon_util.h:
 *   - starting and stopping hbgd per io backend, D_ASSERT with hbgd's log;
 *     hbgd's test build with its hooks (start_hooks_hbgd);
 *   - hbgd's fd count: fd_baseline(), abuse_epilogue(), list_fds();
 *   - hbgd with a config file, SIGTERM within the grace period;
 *   - a session's mappings in this process.
 * Included here: raw protocol records, for clients that do what
 * libhbgclient never would (tests/e2e/raw_proto.h); hbgd's liveness and
 * its state from status replies (tests/e2e/status_query.h); a verified
 * workload and the forked clients that run it (tests/e2e/workload.h).
 * Failures are Check assertions: call these from a test, never from a
 * forked child; only raw_proto.h's cx_* functions (results, no
 * assertions), the workload's wl_* and client_main(), and
 * find_session_mapping() are for children (tests/e2e/e2e_kid.h).
 */
#pragma once

#include <check.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

#include "hbg.pb-c.h"
#include "hbg/hbg.h"
#include "proto/wire.h"
#include "shm/layout.h"
#include "tests/e2e/daemon_util.h"
#include "tests/e2e/raw_proto.h"
#include "tests/e2e/status_query.h"
#include "tests/e2e/workload.h"

enum { MODE_URING, MODE_EPOLL, N_MODES };

#define WAIT_MS 60000           /* "never hangs": far beyond any real wait */
#define IO_MS 20000             /* a reply or EOF from hbgd */
#define FD_SETTLE_MS 20000      /* hbgd closing what hung-up clients held */

const char *mode_name(int mode);

/* The completion policies hbgd offers (--completion=NAME), as hbgd lists
 * them (--completion=help, from the engine's table): end-to-end tests
 * that take them as a parameter run once per entry. */
unsigned completion_count(void);
const char *completion_name(unsigned i);
/* Loop index i of a test run under every io mode and completion policy:
 * io mode i % N_MODES, policy i / N_MODES. */
#define IO_MODE_OF(i) ((i) % N_MODES)
#define COMPLETION_OF(i) (completion_name((unsigned)(i) / N_MODES))
/* Start hbgd in io mode `mode` with --completion=`completion`, asserting
 * that its status reports that completion_mode. */
struct hbgd_proc *start_hbgd_completion(int mode, const char *completion);

/* On failure: hbgd's log to stderr (it is removed afterwards), and
 * whether hbgd still runs at the end of the message (a crash shows up as
 * a refusal that never came, a connection closed early...). */
const char *d_state(struct hbgd_proc *d);

#define D_ASSERT(d, cond, ...)                                                  \
        do {                                                                    \
                if (!(cond)) {                                                  \
                        char d_msg_[1024];                                      \
                        snprintf(d_msg_, sizeof(d_msg_), __VA_ARGS__);          \
                        ck_abort_msg("%s%s", d_msg_, d_state(d));               \
                }                                                               \
        } while (0)

/* hbgd's test build (tests/e2e/hbgd_hooks.c, $(B)/tests/hbgd-hooks),
 * reading the hooks in env. */
struct hbgd_proc *start_hooks_hbgd(const char *const *env);
/* hbgd with `args`, on io_uring (MODE_URING) or epoll (MODE_EPOLL). */
struct hbgd_proc *start_hbgd(int mode, const char *const *args);
/* SIGTERM; hbgd must exit 0. Frees d. */
void stop_hbgd(struct hbgd_proc *d);
void assert_alive(struct hbgd_proc *d);
bool uring_available(void);

/* $HBG_TEST_SEED or the time; xorshift64 steps; sleeping through EINTR. */
uint64_t seed_value(void);
uint64_t xorshift(uint64_t *s);
void sleep_us(long us);

/* hbgd's open fds and what they are, to stderr. */
void list_fds(pid_t pid);

/* ------------------------------------------------------------ a recorded task; hbgd's fds at rest */

/* One noop task depending on the launch's gate, as a recording holds it
 * (id 1: callers set the id of each copy). */
struct hbg_recorded_task noop_recorded(void);
/* hbgd's fd count returns to base within FD_SETTLE_MS (else its fds are
 * listed and the test fails). */
void assert_fd_baseline(struct hbgd_proc *d, int base, const char *what);
/* Each abuse case: hbgd refuses, closes, leaks no fd and goes on serving;
 * then SIGTERM and exit 0 (stop_hbgd). */
void abuse_epilogue(struct hbgd_proc *d, int base, const char *what);

/*
 * hbgd's fds when idle. Not simply a count right after READY=1: sd_notify()
 * closes its socket only after sending. A hello answered on a connection
 * proves the io thread is past that, and the connection is exactly one fd.
 * After wait_slow_work_idle(): the regions made ahead count.
 */
int fd_baseline(struct hbgd_proc *d);

/* ------------------------------------------------------------ hbgd with a config file */

#define NOBODY ((uid_t)65534)   /* the uid per-user limits are tested as */
#define LIVE_MS 5000            /* liveness bound: a fresh client is answered */
#define GRACE_MS 5000           /* hbgd's default shutdown grace period */

/* hbgd (like start_hbgd) with `conf` (INI text) as its --config file,
 * removed once hbgd has read it. */
struct hbgd_proc *start_hbgd_conf(int mode, const char *conf);
/* The same with hbgd's stdout and stderr on out_fd (daemon_start_fd()). */
struct hbgd_proc *start_hbgd_conf_fd(int mode, const char *conf, int out_fd);

/* SIGTERM; hbgd must exit 0 within the grace period (and some slack).
 * Frees d. */
void stop_within_grace(struct hbgd_proc *d, const char *what);
/* hbgd's log holds `needle` (waits up to IO_MS for it to be written). */
bool log_has(struct hbgd_proc *d, const char *needle);
/* Let any uid reach hbgd's socket (daemon_util makes its directories
 * 0700): for tests acting as NOBODY. */
void open_to_all(struct hbgd_proc *d);

/* ------------------------------------------------------------ session mappings */

/* This process's mapping of hbgd's memfd "hbg-<what>-<session>" (what:
 * "sub" or "cpl"; *session 0: the first found, its id stored), its size
 * in *ret_size; NULL if none. Regions hbgd made ahead of the session
 * (the default geometry's, spare_regions.h) are "hbg-<what>-ahead-N":
 * their id reads 0, so that a session of the default geometry is found
 * as the first (with *session 0) only. */
void *find_session_mapping(const char *what, uint64_t *session, uint64_t *ret_size);
/* ------------------------------------------------------------ test conditions */

/* An io-backend test in io_uring mode where io_uring is missing: says so
 * and returns true (the test then passes without running). */
bool skip_mode(int mode, const char *test);
/* hbgd stopped (SIGSTOP, confirmed) while a burst arrives, as on a loaded
 * machine: the wakeups of its sockets pile up into few events. thaw():
 * SIGCONT. */
void freeze(struct hbgd_proc *d);
void thaw(struct hbgd_proc *d);
