/* SPDX-License-Identifier: MIT */
/*
 * Helpers of the end-to-end tests against a real hbgd (test_e2e_daemon.c,
 * test_e2e_hostile.c and most others), on top of tests/e2e/daemon_util.h:
 *   - starting and stopping hbgd per io backend, D_ASSERT with hbgd's log;
 *     hbgd's test build with its hooks (start_hooks_hbgd);
 *   - a small verified workload over libhbgclient (wl_*), a forked client
 *     running it (client_main), and assert_serving();
 *   - hbgd's fd count: fd_baseline(), abuse_epilogue(), list_fds();
 *   - hbgd with a config file, SIGTERM within the grace period;
 *   - a session's mappings in this process, liveness (fresh_status) and
 *     the scheduler's counters from status replies.
 * Raw protocol records, for clients that do what libhbgclient never
 * would, are tests/e2e/raw_proto.h, included here. Failures are Check
 * assertions: call these from a test, never from a forked child; only
 * raw_proto.h's cx_* functions (results, no assertions) and
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

/* ------------------------------------------------------------ workload */

/*
 * Small graphs over one client's tensors, dependencies all derived:
 *   fill a = k; fill b = (g % 7) + 1; s = a + b; s *= 2; res[g % R] = sum(s)
 * so res[g % R] = 2 (k + g % 7 + 1) WL_N, exact in f32. Graphs are kept
 * WL_DEPTH deep in flight (the fills of graph g+1 wait for the add of
 * graph g: WAR), each one's result checked once it is waited for.
 */
#define WL_N 1024
#define WL_SLOTS 256
#define WL_DEPTH 8

struct workload {
        hbg_client *c;
        hbg_tensor a, b, s, res;
        unsigned k;
        char msg[512];
};

/* Tensors of c. 0, or -errno with w->msg set. */
int wl_init(struct workload *w, hbg_client *c, unsigned k);
/* n graphs (n == 0: until stop_fd is readable or hangs up; for ever if
 * stop_fd < 0). Returns the number of graphs verified, or -errno with
 * w->msg set. */
long wl_run(struct workload *w, uint64_t n, int stop_fd);

/* The daemon serves: a new client connects and runs a few graphs. */
void assert_serving(struct hbgd_proc *d);

/* Exit codes of the forked clients. */
enum { KID_OK = 0, KID_CONNECT = 10, KID_INIT = 11, KID_RUN = 12, KID_PIPE = 13 };

const char *kid_code(int code);
/* A wait status of a forked client, in words. */
void describe(int st, char *buf, size_t size);

/* A client process: connect, tensors, then `ready_fd` gets 'R', then n
 * graphs (see wl_run). Never returns. */
void __attribute__((noreturn)) client_main(const char *socket_path, unsigned k, uint64_t n, int ready_fd,
                                           int stop_fd, const char *who);

/* Read one byte from fd within timeout_ms: 1, 0 on EOF, -ETIMEDOUT. */
int read_byte(int fd, int timeout_ms, char *ret);

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
/* Until hbgd's slow-work thread has nothing to do, twice 10 ms apart:
 * sessions' pre-faults and the spare rings ([session] spare_rings) made,
 * so that its memory is what it keeps (an RSS baseline). */
void wait_slow_work_idle(struct hbgd_proc *d);

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
/* ------------------------------------------------------------ liveness */

/* A fresh connection gets hbgd's Hello and a status reply within bound_ms
 * (asserted); returns the milliseconds it took. */
long long fresh_status(struct hbgd_proc *d, int bound_ms, const char *what);
/* The same, retrying a connection hbgd closes unanswered (shed while it
 * is out of descriptors); *ret_shed counts those. */
long long fresh_status_shed(struct hbgd_proc *d, int bound_ms, const char *what, unsigned *ret_shed);
/* One status request of `kind` on fd (hello done): the reply, asserted
 * (wire_free() it). */
Hbg__Envelope *status_of(struct hbgd_proc *d, int fd, Hbg__StatusKind kind);
/* STATUS_DAEMON on a connection of its own, closed before it returns
 * (hbgd closes one that stays idle without a session past its handshake
 * timeout); the caller frees it with wire_free(). */
Hbg__Envelope *daemon_status_fresh(struct hbgd_proc *d);
/* hbgd's sets of regions made ahead now ([session] spare_regions), and in
 * *ret_taken how many sessions took one (daemon_status_fresh()). */
unsigned spare_regions_now(struct hbgd_proc *d, uint64_t *ret_taken);
/* Bytes charged to every session now (status METRICS on fd, hello done). */
uint64_t memory_charged_now(struct hbgd_proc *d, int fd);
/* Sums of the scheduler threads' counters (STATUS_THREADS on fd). */
void thread_counts(struct hbgd_proc *d, int fd, uint64_t *classified, uint64_t *dispatched);
/* The scheduler threads' wake-ups and spurious wake-ups summed, and
 * whether every thread is parked now (each one's parks = its wake-ups +
 * 1) (STATUS_THREADS on fd). */
void thread_wakes(struct hbgd_proc *d, int fd, uint64_t *wakeups, uint64_t *spurious, bool *all_parked);
/* Poll until the scheduler threads classified at least n tasks. */
void wait_classified(struct hbgd_proc *d, int fd, uint64_t n, const char *what);
/* The kernels of pid's session are running: none of its tasks completed
 * (a task failing validation completes at once) or failed. */
void assert_running(struct hbgd_proc *d, int fd, pid_t pid, const char *what);
/* Is there a session of pid (STATUS_SESSIONS on fd)? */
bool session_listed(struct hbgd_proc *d, int fd, pid_t pid);
/* An honest client in this process: n verified graphs (wl_run). */
void honest_graphs(struct hbgd_proc *d, unsigned n, const char *what);

/* ------------------------------------------------------------ test conditions */

/* An io-backend test in io_uring mode where io_uring is missing: says so
 * and returns true (the test then passes without running). */
bool skip_mode(int mode, const char *test);
/* hbgd stopped (SIGSTOP, confirmed) while a burst arrives, as on a loaded
 * machine: the wakeups of its sockets pile up into few events. thaw():
 * SIGCONT. */
void freeze(struct hbgd_proc *d);
void thaw(struct hbgd_proc *d);
