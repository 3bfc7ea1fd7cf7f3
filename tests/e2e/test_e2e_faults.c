/* SPDX-License-Identifier: MIT */
/*
 * Faults around a real hbgd (tests/e2e/daemon_util.c), one test each:
 *   producers_killed       producers SIGKILLed at random points, in waves,
 *                          while an honest producer checks its results:
 *                          hbgd survives and its fds and RSS come back;
 *   hbgd_killed_mid_graph  hbgd SIGKILLed under pending graphs: every wait
 *                          fails with -ECONNRESET within 1 s, and the same
 *                          process connects to a restarted hbgd;
 *   fd_exhaustion          hbgd at a low RLIMIT_NOFILE, sessions opened
 *                          until one is refused: a clear error, the open
 *                          sessions go on, recovery once they close;
 *   spare_regions_after_exhaustion
 *                          the same with sessions that take sets of
 *                          regions made ahead: the failed fill is made
 *                          again once they are freed;
 *   memory_exhaustion      hbgd at a low RLIMIT_AS (shared regions) and
 *                          RLIMIT_DATA (private arrays): the same;
 *   allocation_failures    hbgd's own allocations failing (a link-time
 *                          wrapper): clear errors, no crash, recovery;
 *   hanging_host_task      a producer whose host function hangs: the stall
 *                          detector fails its graph, an honest producer
 *                          alongside keeps running in time.
 *
 * HBG_TEST_SCALE=N divides the work (default 10, what make check runs;
 * 1 is the full scale of make hostile: 1000 killed producers);
 * HBG_TEST_SEED fixes the random kill points; HBG_TEST_VERBOSE=1 shows
 * hbgd's log.
 */
#include <check.h>
#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "hbg/hbg.h"
#include "tests/e2e/e2e_kid.h"
#include "tests/e2e/e2e_util.h"
#include "tests/test_util.h"
#include "tests/check_main.h"

/* Sessions small enough for hundreds at once. */
static hbg_connect_options small_session(const char *path) {
        hbg_connect_options o = HBG_CONNECT_OPTIONS_INIT;
        o.socket_path = path;
        o.heap_bytes = 1u << 20;
        o.task_window = 1024;
        o.flag_window = 1024;
        return o;
}

/* Limits that let one uid (this one, when not root) open many sessions. */
#define MANY_SESSIONS "[limits]\nmax_sessions = 1024\nmax_sessions_per_uid = 1024\n" \
                      "max_connections_per_uid = 1024\n"

/* A size of hbgd from /proc/PID/status, KiB. */
static long status_kib(struct hbgd_proc *d, const char *field) {
        long kib = daemon_status_kib(d->pid, field);
        D_ASSERT(d, kib >= 0, "cannot read hbgd's %s: %s", field, strerror((int)-kib));
        return kib;
}

/* ------------------------------------------------------------ producers killed */

/* Connect, then run verified graphs until killed. */
static int doomed_fn(int sock, void *arg) {
        hbg_connect_options o = small_session(arg);
        hbg_client *c = NULL;
        int err = hbg_connect_opts(&c, &o);
        if (err < 0) {
                kid_say(sock, "FAIL hbg_connect: %s [%s]", hbg_strerror(err), hbg_last_error(NULL));
                return 1;
        }
        struct workload w;
        if (wl_init(&w, c, (unsigned)getpid() % 5 + 1) < 0) {
                kid_say(sock, "FAIL %s", w.msg);
                return 1;
        }
        kid_say(sock, "READY");
        long n = wl_run(&w, 0, -1);
        kid_say(sock, "FAIL graphs: %s", n < 0 ? w.msg : "wl_run returned");
        return 1;
}

#define WAVE 20                 /* producers alive at once */
#define KILL_MAX_MS 80          /* the random kill point: 0..80 ms after fork */

struct wave_tally {
        unsigned started, connected;
};

/* WAVE producers forked at once, each SIGKILLed at its own random point
 * (before, during or after its handshake, mostly with graphs in flight).
 * A producer that reports a failure before its kill fails the test. */
static void kill_wave(struct hbgd_proc *d, unsigned n, uint64_t *seed, struct wave_tally *t) {
        struct kid kids[WAVE];
        long long at[WAVE];
        long long t0 = daemon_now_ms();
        for (unsigned i = 0; i < n; i++) {
                kid_start(&kids[i], SAME_UID, doomed_fn, d->socket_path);
                at[i] = t0 + (long long)(xorshift(seed) % (KILL_MAX_MS + 1));
        }
        for (unsigned left = n; left > 0;) {
                unsigned next = n;
                for (unsigned i = 0; i < n; i++)
                        if (kids[i].pid > 0 && (next == n || at[i] < at[next]))
                                next = i;
                long long wait = at[next] - daemon_now_ms();
                if (wait > 0)
                        sleep_us(wait * 1000);
                kill(kids[next].pid, SIGKILL);
                kid_reap(&kids[next], WAIT_MS);
                /* What it said before it died, up to the EOF of its end. */
                char line[512];
                bool connected = false;
                while (kid_line(&kids[next], IO_MS, line, sizeof(line)) == 0) {
                        D_ASSERT(d, strncmp(line, "FAIL", 4) != 0, "a producer before its kill: %s", line + 4);
                        connected |= strcmp(line, "READY") == 0;
                }
                t->connected += connected;
                t->started++;
                kid_kill(&kids[next]);
                kids[next].pid = 0;
                left--;
        }
}

/*
 * Memory, measured after a first wave (the warm-up: malloc arenas, thread
 * caches and the io backend's buffers reach their working size) and after
 * the last one, from /proc/PID/status:
 *   RssAnon  hbgd's private memory in use (malloc, the rings' arrays):
 *            within max(16 MiB, a quarter) of the warm-up's. glibc keeps
 *            freed memory for reuse, so it does not fall back to the value
 *            before any session, and it grows in 2 MiB steps (huge pages)
 *            to a plateau: 3 MiB to 9.5 MiB over the first 500 of 1000
 *            producers here, flat after. One session not released keeps
 *            its ring's arrays (~240 KiB, measured below with sessions
 *            held open).
 *   VmSize   the address space: a session not released keeps its regions
 *            mapped (~2 MiB here; their memfds are closed once sent, so no
 *            fd shows it): within 64 MiB of the warm-up's, i.e. 30 such
 *            sessions, where the default scale kills 100 producers.
 * Under ASan freed memory sits in the quarantine (up to 256 MiB, large
 * blocks mapped apart), under TSan the shadow and sync metadata of memory
 * once used stay resident (+26 MiB over 1000 producers here): both
 * margins include 256 MiB there. RssShmem is not
 * compared: the shared pages of the honest producer's regions count in
 * hbgd's RSS as its window's slots are first touched.
 */
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define SANITIZER_SLACK_KIB (256L * 1024)
#else
#define SANITIZER_SLACK_KIB 0L
#endif
#define ANON_MARGIN_KIB (16L * 1024)
#define VM_MARGIN_KIB (64L * 1024 + SANITIZER_SLACK_KIB)

struct mem {
        long anon, shmem, vm;
};

static struct mem mem_of(struct hbgd_proc *d) {
        return (struct mem){ status_kib(d, "RssAnon"), status_kib(d, "RssShmem"), status_kib(d, "VmSize") };
}

START_TEST(producers_killed) {
        unsigned total = 1000 / hostile_scale();
        total = total < 2 * WAVE ? 2 * WAVE : total;
        struct hbgd_proc *d = start_hbgd_conf(MODE_URING, MANY_SESSIONS);
        int base = fd_baseline(d);
        uint64_t seed = seed_value();
        bool verbose = getenv("HBG_TEST_VERBOSE") != NULL;
        fprintf(stderr, "producers_killed: %u producers, HBG_TEST_SEED=%" PRIu64 "\n", total, seed);

        struct kid honest;
        honest_start(d, &honest);
        kid_tell(&honest, 'G');
        int base_honest = fd_baseline(d);

        struct wave_tally t = { 0 };
        kill_wave(d, WAVE, &seed, &t);
        assert_fd_baseline(d, base_honest, "producers_killed: after the first wave");
        struct mem m0 = mem_of(d);
        while (t.started < total) {
                kill_wave(d, total - t.started < WAVE ? total - t.started : WAVE, &seed, &t);
                if (verbose) {
                        daemon_wait_fd_count(d->pid, base_honest, FD_SETTLE_MS);
                        struct mem m = mem_of(d);
                        fprintf(stderr, "producers_killed: %u killed: RssAnon %ld RssShmem %ld VmSize %ld KiB, "
                                "%d fds\n", t.started, m.anon, m.shmem, m.vm, daemon_fd_count(d->pid));
                }
        }
        assert_alive(d);
        assert_fd_baseline(d, base_honest, "producers_killed: after every wave");
        struct mem m1 = mem_of(d);

        long long worst;
        unsigned graphs = honest_stop(d, &honest, &worst);
        assert_fd_baseline(d, base, "producers_killed: after the honest producer left");

        /* What one session left behind would cost: 8 sessions held open. */
        struct kid held[8];
        char buf[256];
        struct mem before = mem_of(d);
        for (unsigned i = 0; i < 8; i++) {
                kid_start(&held[i], SAME_UID, doomed_fn, d->socket_path);
                kid_expect(d, &held[i], "READY", IO_MS, buf, sizeof(buf), "a held producer");
        }
        struct mem held_m = mem_of(d);
        for (unsigned i = 0; i < 8; i++)
                kid_kill(&held[i]);
        assert_fd_baseline(d, base, "producers_killed: after the held producers");

        long margin = (m0.anon / 4 > ANON_MARGIN_KIB ? m0.anon / 4 : ANON_MARGIN_KIB) + SANITIZER_SLACK_KIB;
        fprintf(stderr, "producers_killed: %u killed (%u after connecting); hbgd after the first wave / after all: "
                "RssAnon %ld / %ld KiB (margin %ld), VmSize %ld / %ld KiB (margin %ld), RssShmem %ld / %ld KiB; "
                "one live session: RssAnon %ld, VmSize %ld KiB; honest producer: %u graphs, worst %lld ms\n",
                t.started, t.connected, m0.anon, m1.anon, margin, m0.vm, m1.vm, VM_MARGIN_KIB, m0.shmem, m1.shmem,
                (held_m.anon - before.anon) / 8, (held_m.vm - before.vm) / 8, graphs, worst);
        D_ASSERT(d, m1.anon <= m0.anon + margin, "hbgd's RssAnon grew from %ld to %ld KiB over %u killed producers",
                 m0.anon, m1.anon, t.started);
        D_ASSERT(d, m1.vm <= m0.vm + VM_MARGIN_KIB, "hbgd's VmSize grew from %ld to %ld KiB over %u killed "
                 "producers", m0.vm, m1.vm, t.started);
        D_ASSERT(d, t.connected > 0, "no producer connected before its kill: nothing was tested");
        assert_serving(d);
        stop_hbgd(d);
}
END_TEST

/* ------------------------------------------------------------ hbgd killed */

#define PENDING 4               /* graphs of one 1 s kernel each */
#define DETECT_MS 1000          /* the bound; detection takes ms */

static void submit_spin(struct hbgd_proc *d, hbg_client *c, uint64_t *ret_graph) {
        hbg_task t = HBG_TASK_INIT("spin_ns");
        t.n_scalars = 1;
        t.scalars[0] = 1000000000;
        int err = hbg_graph_add(c, &t, NULL);
        D_ASSERT(d, err == 0, "hbg_graph_add(spin_ns): %s [%s]", hbg_strerror(err), hbg_last_error(c));
        err = hbg_graph_submit(c, ret_graph);
        D_ASSERT(d, err == 0, "hbg_graph_submit: %s [%s]", hbg_strerror(err), hbg_last_error(c));
}

static int never_run(void *arg) {
        (void)arg;
        return 0;
}

START_TEST(hbgd_killed_mid_graph) {
        struct hbgd_proc *d = start_hbgd_conf(MODE_URING, "[scheduler]\nthreads = 2\nclusters = 2\n");
        hbg_client *c = NULL;
        hbg_connect_options o = small_session(d->socket_path);
        int err = hbg_connect_opts(&c, &o);
        D_ASSERT(d, err == 0, "hbg_connect: %s [%s]", hbg_strerror(err), hbg_last_error(NULL));
        uint64_t graphs[PENDING + 1];
        for (unsigned i = 0; i < PENDING; i++)
                submit_spin(d, c, &graphs[i]);
        /* And a host task behind a kernel: its graph is pending too. */
        hbg_tensor x;
        ck_assert_int_eq(hbg_tensor_alloc(c, 64, &x), 0);
        hbg_task t = HBG_TASK_INIT("spin_ns");
        t.n_scalars = 1;
        t.scalars[0] = 1000000000;
        t.has_predicate = 1;
        t.predicate = (hbg_tensor){ x.offset, 4 };
        *(float *)hbg_tensor_data(c, x) = 1.0f;
        uint64_t first;
        ck_assert_int_eq(hbg_graph_add(c, &t, &first), 0);
        t = (hbg_task)HBG_TASK_INIT(NULL);
        t.host_fn = never_run;
        t.n_deps = 1;
        t.deps[0] = first;
        ck_assert_int_eq(hbg_graph_add(c, &t, NULL), 0);
        ck_assert_int_eq(hbg_graph_submit(c, &graphs[PENDING]), 0);
        int mon = raw_connect(d->socket_path);
        raw_hello(mon);
        wait_classified(d, mon, 2, "hbgd_killed_mid_graph");
        close(mon);
        /* On a loaded machine the first graphs may be done already; with
         * two threads at most two 1 s kernels finish per second. */
        bool running[PENDING + 1];
        unsigned n_running = 0;
        for (unsigned i = 0; i <= PENDING; i++)
                n_running += running[i] = hbg_graph_status(c, graphs[i], NULL) == 1;
        D_ASSERT(d, running[PENDING] && n_running >= 2, "only %u graphs still run", n_running);

        /* SIGKILL: the kernel closes hbgd's end of the control socket and
         * of the completion pipe; the library's waits poll both. */
        int cfd = hbg_client_fd(c);
        ck_assert_int_ge(cfd, 0);
        /* It starts readable, tasks having been added (hbg_client_fd(3)):
         * the loop's first call takes that, so that only hbgd's end can
         * make it readable below. */
        ck_assert_int_ge(hbg_client_process(c), 0);
        long long t0 = daemon_now_ms();
        ck_assert_int_eq(kill(d->pid, SIGKILL), 0);
        long long waits[PENDING + 1];
        for (unsigned i = 0; i <= PENDING; i++) {
                err = hbg_graph_wait(c, graphs[i], WAIT_MS);
                waits[i] = daemon_now_ms() - t0;
                const char *msg = hbg_last_error(c);
                if (!running[i]) {
                        ck_assert_msg(err == 0, "graph %u, done before the kill: %s", i, hbg_strerror(err));
                        continue;
                }
                ck_assert_msg(err == -ECONNRESET, "graph %u: hbg_graph_wait returned %d (%s) after hbgd was killed, "
                              "expected -ECONNRESET", i, err, hbg_strerror(err));
                ck_assert_msg(strstr(msg, "hbgd went away"), "graph %u: unclear message: %s", i, msg);
        }
        ck_assert_msg(waits[PENDING] < DETECT_MS, "the pending waits returned %lld ms after hbgd was killed",
                      waits[PENDING]);
        /* The caller's own event loop hears of it too. */
        struct pollfd p = { .fd = cfd, .events = POLLIN };
        ck_assert_msg(poll(&p, 1, DETECT_MS) == 1, "hbg_client_fd() not readable after hbgd was killed");
        ck_assert_int_eq(hbg_client_process(c), -ECONNRESET);
        ck_assert_int_eq(hbg_graph_status(c, graphs[PENDING], NULL), -ECONNRESET);
        err = hbg_graph_add(c, &t, NULL);
        ck_assert_msg(err == -ECONNRESET, "hbg_graph_add on the dead session: %d (%s)", err, hbg_strerror(err));
        fprintf(stderr, "hbgd_killed_mid_graph: %u pending waits failed with -ECONNRESET, the last %lld ms after "
                "the kill: %s\n", n_running, waits[PENDING], hbg_last_error(c));
        hbg_disconnect(c);
        ck_assert_int_eq(daemon_wait_exit(d, IO_MS), 0);
        ck_assert_msg(WIFSIGNALED(d->wstatus) && WTERMSIG(d->wstatus) == SIGKILL, "hbgd: wait status 0x%x",
                      (unsigned)d->wstatus);

        /* Meanwhile a connect fails, with a reason. */
        err = hbg_connect_opts(&c, &o);
        ck_assert_msg(err < 0 && c == NULL, "hbg_connect with hbgd dead: %d", err);
        fprintf(stderr, "hbgd_killed_mid_graph: hbg_connect while hbgd is down: %s [%s]\n", hbg_strerror(err),
                hbg_last_error(NULL));
        ck_assert_msg(hbg_last_error(NULL)[0], "hbg_connect failed without a message");

        /* hbgd again, on the socket file the killed one left behind. */
        const char *const args[] = { "--socket", d->socket_path, NULL };
        struct hbgd_proc *d2 = start_hbgd(MODE_URING, args);
        snprintf(d2->socket_path, sizeof(d2->socket_path), "%s", d->socket_path);
        err = hbg_connect_opts(&c, &o);
        D_ASSERT(d2, err == 0, "the same process, reconnecting: %s [%s]", hbg_strerror(err), hbg_last_error(NULL));
        struct workload w;
        D_ASSERT(d2, wl_init(&w, c, 3) == 0, "%s", w.msg);
        long n = wl_run(&w, 20, -1);
        D_ASSERT(d2, n == 20, "graphs after reconnecting: %s", w.msg);
        hbg_disconnect(c);
        stop_hbgd(d2);
        daemon_destroy(d);
}
END_TEST

/* ------------------------------------------------------------ resource exhaustion */

#define MAX_OPEN 256

/* Sessions of o opened until hbgd refuses one (at most MAX_OPEN): how many
 * are open, and the refusal's code and message. */
static unsigned open_until_refused(struct hbgd_proc *d, const hbg_connect_options *o, hbg_client **c, int *ret_err,
                                   char *msg, size_t size) {
        unsigned n = 0;
        int err = 0;
        while (n < MAX_OPEN && (err = hbg_connect_opts(&c[n], o)) == 0)
                n++;
        snprintf(msg, size, "%s", hbg_last_error(NULL));
        D_ASSERT(d, n < MAX_OPEN, "%u sessions and no refusal", n);
        *ret_err = err;
        return n;
}

/* Every open session still runs verified graphs; then all close. */
static void run_and_close(struct hbgd_proc *d, hbg_client **c, unsigned n, const char *what) {
        for (unsigned i = 0; i < n; i++) {
                struct workload w;
                D_ASSERT(d, wl_init(&w, c[i], i % 5 + 1) == 0, "%s: session %u: %s", what, i, w.msg);
                long ok = wl_run(&w, 3, -1);
                D_ASSERT(d, ok == 3, "%s: session %u, opened before the refusal: %s", what, i, w.msg);
        }
        while (n > 0)
                hbg_disconnect(c[--n]);
}

/* After the clients closed: a new session runs graphs, under the same
 * limit. */
static void recovers(struct hbgd_proc *d, const hbg_connect_options *o, const char *what) {
        hbg_client *c = NULL;
        int err = -EAGAIN;
        long long t0 = daemon_now_ms();
        while (daemon_now_ms() - t0 < IO_MS && (err = hbg_connect_opts(&c, o)) < 0)
                sleep_us(10000);
        D_ASSERT(d, err == 0, "%s: no session after the others closed: %s [%s]", what, hbg_strerror(err),
                 hbg_last_error(NULL));
        run_and_close(d, &c, 1, what);
}

START_TEST(fd_exhaustion) {
        int mode = _i;
        if (skip_mode(mode, "fd_exhaustion"))
                return;
        struct hbgd_proc *d = start_hbgd_conf(mode, MANY_SESSIONS);
        int base = fd_baseline(d);
        struct rlimit rl = { (rlim_t)base + 24, (rlim_t)base + 24 };
        ck_assert_msg(prlimit(d->pid, RLIMIT_NOFILE, &rl, NULL) == 0, "prlimit: %s", strerror(errno));
        hbg_connect_options o = small_session(d->socket_path);
        hbg_client *c[MAX_OPEN];
        int err;
        char msg[512];
        unsigned n = open_until_refused(d, &o, c, &err, msg, sizeof(msg));
        fprintf(stderr, "fd_exhaustion (%s): %u sessions at RLIMIT_NOFILE %d, then: %s [%s]\n", mode_name(mode), n,
                base + 24, hbg_strerror(err), msg);
        assert_alive(d);
        D_ASSERT(d, n >= 2, "only %u sessions fit in %d fds", n, 24);
        D_ASSERT(d, err == -EMFILE, "refused with %d (%s), expected -EMFILE", err, hbg_strerror(err));
        D_ASSERT(d, strstr(msg, "hbgd") && strstr(msg, "open files"), "unclear message: %s", msg);
        run_and_close(d, c, n, "fd_exhaustion");
        recovers(d, &o, "fd_exhaustion");
        abuse_epilogue(d, base, "fd_exhaustion");
}
END_TEST

/* The sets of regions made ahead ([session] spare_regions) run out of
 * fds with hbgd: sessions of the default geometry (each takes a set, and
 * the fill makes it again) opened until one is refused at a low
 * RLIMIT_NOFILE, so the fill fails. Once they closed and were freed, the
 * fill is tried again without a new session: status shows every set
 * again and hbgd's fds are back where they were. */
START_TEST(spare_regions_after_exhaustion) {
        /* A small default geometry: the sessions run out of fds long
         * before memory. */
        struct hbgd_proc *d = start_hbgd_conf(MODE_URING, MANY_SESSIONS "[session]\nheap_size = 1M\n"
                                                                         "task_window = 1024\nflag_window = 1024\n");
        int base = fd_baseline(d);
        uint64_t taken;
        unsigned sets = spare_regions_now(d, &taken);
        D_ASSERT(d, sets == 8, "%u sets made ahead, not 8", sets);
        struct rlimit rl = { (rlim_t)base + 16, (rlim_t)base + 16 };
        ck_assert_msg(prlimit(d->pid, RLIMIT_NOFILE, &rl, NULL) == 0, "prlimit: %s", strerror(errno));
        hbg_connect_options o = HBG_CONNECT_OPTIONS_INIT;
        o.socket_path = d->socket_path;
        hbg_client *c[MAX_OPEN];
        int err;
        char msg[512];
        unsigned n = open_until_refused(d, &o, c, &err, msg, sizeof(msg));
        D_ASSERT(d, n >= 1 && err == -EMFILE, "%u sessions, then %s [%s]", n, hbg_strerror(err), msg);
        D_ASSERT(d, log_has(d, "cannot make a session's regions ahead"), "no failed fill in hbgd's log");
        run_and_close(d, c, n, "spare_regions_after_exhaustion");
        /* The sets are made again on the slow-work thread: their fds come
         * before status counts them, so the fds alone do not say it is
         * done (under ASan status read 2 of 8 with the fds back). */
        wait_slow_work_idle(d);
        assert_fd_baseline(d, base, "the sessions freed, the sets made again");
        sets = spare_regions_now(d, &taken);
        D_ASSERT(d, sets == 8 && taken >= 1, "after the sessions: %u sets made ahead (%" PRIu64 " taken)", sets,
                 taken);
        stop_hbgd(d);
}
END_TEST

/* _i == 0: RLIMIT_AS, sessions with big heaps (the shared regions hbgd
 * maps); _i == 1: RLIMIT_DATA, sessions with big task windows (the ring's
 * private arrays). */
START_TEST(memory_exhaustion) {
        bool data = _i == 1;
        const char *what = data ? "memory_exhaustion (RLIMIT_DATA, big windows)" : "memory_exhaustion "
                                                                                    "(RLIMIT_AS, big heaps)";
        struct hbgd_proc *d = start_hbgd_conf(MODE_URING, MANY_SESSIONS "max_task_window = 1048576\n");
        int base = fd_baseline(d);
        hbg_connect_options o = small_session(d->socket_path);
        struct rlimit rl;
#if defined(__SANITIZE_THREAD__)
        /* TSan's allocator dies when it cannot map ("failed to allocate
         * ... errno 12", exit 66) whenever it happens to grow, under either
         * limit: hbgd's own handling cannot be seen there. The plain,
         * ASan (RLIMIT_AS) and -O3 passes run this case. */
        fprintf(stderr, "%s: skipped under TSan\n", what);
        stop_hbgd(d);
        return;
#endif
        if (data) {
#if defined(__SANITIZE_ADDRESS__)
                /* ASan's allocator dies when it cannot map ("Failed to
                 * mmap"): the same. */
                fprintf(stderr, "%s: skipped under ASan\n", what);
                stop_hbgd(d);
                return;
#endif
                o.task_window = o.flag_window = 1u << 18;
                long vm = status_kib(d, "VmData");
                rl.rlim_cur = rl.rlim_max = ((rlim_t)vm << 10) + (256ull << 20);
                ck_assert_msg(prlimit(d->pid, RLIMIT_DATA, &rl, NULL) == 0, "prlimit: %s", strerror(errno));
        } else {
                o.heap_bytes = 128u << 20;
                long vm = status_kib(d, "VmSize");
                rl.rlim_cur = rl.rlim_max = ((rlim_t)vm << 10) + (512ull << 20);
                ck_assert_msg(prlimit(d->pid, RLIMIT_AS, &rl, NULL) == 0, "prlimit: %s", strerror(errno));
        }
        hbg_client *c[MAX_OPEN];
        int err;
        char msg[512];
        unsigned n = open_until_refused(d, &o, c, &err, msg, sizeof(msg));
        fprintf(stderr, "%s: %u sessions, then: %s [%s]\n", what, n, hbg_strerror(err), msg);
        assert_alive(d);
        D_ASSERT(d, n >= 1, "%s: no session at all", what);
        D_ASSERT(d, err == -ENOMEM, "%s: refused with %d (%s), expected -ENOMEM", what, err, hbg_strerror(err));
        D_ASSERT(d, strstr(msg, "hbgd") && strstr(msg, "memory"), "%s: unclear message: %s", what, msg);
        run_and_close(d, c, n, what);
        recovers(d, &o, what);
        abuse_epilogue(d, base, what);
}
END_TEST

/*
 * Allocations failing inside hbgd: tests/hbgd-failalloc is hbgd with one in
 * FAIL_EVERY allocations of its own code failing (malloc, calloc, realloc,
 * wrapped at link time), for FAIL_CALLS allocations after it is ready. Clients connect and run graphs meanwhile: each connect and each
 * graph succeeds with the right values or fails with an error and a
 * message; hbgd never crashes, holds no fd more once they left, and
 * serves normally once the failures stop. (Allocations inside the
 * libraries hbgd uses, protobuf-c and liburing, are not injected.)
 */
#define FAIL_EVERY 8
#define FAIL_CALLS 1500
#define ALLOC_CLIENTS 400

START_TEST(allocation_failures) {
        setenv("HBGD", HBG_TEST_HBGD_FAILALLOC, 1);
        char every[64], calls[64];
        snprintf(every, sizeof(every), "HBGD_FAIL_ALLOC_EVERY=%d", FAIL_EVERY);
        snprintf(calls, sizeof(calls), "HBGD_FAIL_ALLOC_CALLS=%d", FAIL_CALLS);
        const char *const env[] = { every, calls, NULL };
        struct hbgd_proc *d = NULL;
        int err = daemon_start(&d, NULL, env);
        ck_assert_msg(err == 0, "%s did not start: %s", HBG_TEST_HBGD_FAILALLOC, strerror(-err));
        /* Not fd_baseline(): its hello may meet a failing allocation. The
         * count may include sd_notify's socket, closed just after READY. */
        sleep_us(200000);
        int base = daemon_fd_count(d->pid);
        hbg_connect_options o = small_session(d->socket_path);
        unsigned refused = 0, graphs_failed = 0, clean = 0, i;
        char first_refusal[300] = "", first_graph_error[600] = "";
        for (i = 0; i < ALLOC_CLIENTS && clean < 10; i++) {
                hbg_client *c = NULL;
                err = hbg_connect_opts(&c, &o);
                if (err < 0) {
                        const char *msg = hbg_last_error(NULL);
                        D_ASSERT(d, msg[0], "client %u: hbg_connect failed (%s) without a message", i,
                                 hbg_strerror(err));
                        if (!refused++)
                                snprintf(first_refusal, sizeof(first_refusal), "%s [%s]", hbg_strerror(err), msg);
                        clean = 0;
                        continue;
                }
                struct workload w;
                long n = wl_init(&w, c, i % 5 + 1) == 0 ? wl_run(&w, 3, -1) : -1;
                D_ASSERT(d, n != -EBADMSG, "client %u: a graph completed with wrong values: %s", i, w.msg);
                if (n == 3) {
                        clean++;
                } else {
                        D_ASSERT(d, w.msg[0], "client %u: graphs failed without a message", i);
                        if (!graphs_failed++)
                                snprintf(first_graph_error, sizeof(first_graph_error), "%s", w.msg);
                        clean = 0;
                }
                hbg_disconnect(c);
        }
        fprintf(stderr, "allocation_failures: %u clients: %u refused (first: %s), %u with failed graphs (first: %s)\n",
                i, refused, first_refusal, graphs_failed, first_graph_error);
        assert_alive(d);
        D_ASSERT(d, clean >= 10, "hbgd did not serve 10 clients in a row after the failures stopped");
        D_ASSERT(d, refused + graphs_failed > 0, "no allocation failure reached a client: nothing was tested");
        /* The last client's session is freed once the engine lets go of its
         * ring (a tick later): wait for it rather than count at once. */
        int now = daemon_wait_fd_count(d->pid, base, FD_SETTLE_MS);
        D_ASSERT(d, now <= base, "hbgd holds %d fds after the clients left, %d before", now, base);
        assert_serving(d);
        stop_hbgd(d);
}
END_TEST

/* ------------------------------------------------------------ hanging host task */

#define STALL_MS 3000           /* hbgd's stall_timeout_ms here */
#define HANG_MS 5000            /* how long the host function hangs */

static int hang_fn(void *arg) {
        sleep_us(*(long *)arg * 1000);
        return 0;
}

/* One graph: a host function that hangs for HANG_MS. "HUNG" once it runs
 * (it says so first), then "DONE <status of its graph> <ms>"; then a
 * kernel graph on the same session: "AFTER <status>". */
static int hanging_fn(int sock, void *arg) {
        hbg_client *c = NULL;
        int err = hbg_connect(&c, arg);
        if (err < 0) {
                kid_say(sock, "FAIL hbg_connect: %s [%s]", hbg_strerror(err), hbg_last_error(NULL));
                return 1;
        }
        static long hang_ms = HANG_MS;
        hbg_task t = HBG_TASK_INIT(NULL);
        t.host_fn = hang_fn;
        t.host_userdata = &hang_ms;
        uint64_t g;
        if ((err = hbg_graph_add(c, &t, NULL)) < 0 || (err = hbg_graph_submit(c, &g)) < 0) {
                kid_say(sock, "FAIL the hanging graph: %s [%s]", hbg_strerror(err), hbg_last_error(c));
                return 1;
        }
        kid_say(sock, "HUNG");
        long long t0 = daemon_now_ms();
        err = hbg_graph_wait(c, g, WAIT_MS);
        kid_say(sock, "DONE %d %lld %s", err, daemon_now_ms() - t0, hbg_last_error(c));
        struct workload w;
        if (wl_init(&w, c, 2) < 0 || wl_run(&w, 5, -1) != 5) {
                kid_say(sock, "FAIL graphs after the hang: %s", w.msg);
                return 1;
        }
        kid_say(sock, "AFTER");
        hbg_disconnect(c);
        return 0;
}

START_TEST(hanging_host_task) {
        char conf[128];
        snprintf(conf, sizeof(conf), "[scheduler]\nstall_timeout_ms = %d\n", STALL_MS);
        struct hbgd_proc *d = start_hbgd_conf(MODE_URING, conf);
        int base = fd_baseline(d);
        struct kid honest, hung;
        char buf[512];
        honest_start(d, &honest);
        kid_tell(&honest, 'G');
        kid_start(&hung, SAME_UID, hanging_fn, d->socket_path);
        kid_expect(d, &hung, "HUNG", IO_MS, buf, sizeof(buf), "the producer with the hanging host task");
        const char *done = kid_expect(d, &hung, "DONE", WAIT_MS, buf, sizeof(buf), "the hanging producer");
        int status = 0, off = 0;
        long long ms = 0;
        sscanf(done, "%d %lld %n", &status, &ms, &off);
        fprintf(stderr, "hanging_host_task: its graph: %s after %lld ms [%s]\n", hbg_strerror(status), ms,
                done + off);
        D_ASSERT(d, status == -ETIME, "the hung host task's graph ended with %d (%s), expected -ETIME",
                 status, hbg_strerror(status));
        kid_expect(d, &hung, "AFTER", WAIT_MS, buf, sizeof(buf), "the hanging producer, after its hang");
        kid_end(d, &hung, IO_MS, "the hanging producer");

        long long worst;
        unsigned graphs = honest_stop(d, &honest, &worst);
        fprintf(stderr, "hanging_host_task: the honest producer ran %u graphs meanwhile, worst %lld ms\n", graphs,
                worst);
        /* Waiting for the hang (or the stall detector) would take seconds. */
        D_ASSERT(d, worst < STALL_MS, "an honest graph took %lld ms while another producer's host task hung",
                 worst);
        abuse_epilogue(d, base, "hanging_host_task");
}
END_TEST

static Suite *suite(void) {
        Suite *s = suite_create("e2e_faults");
        TCase *tc = tcase_create("faults");
        tcase_set_timeout(tc, 600);
        tcase_add_test(tc, producers_killed);
        tcase_add_test(tc, hbgd_killed_mid_graph);
        tcase_add_loop_test(tc, fd_exhaustion, MODE_URING, N_MODES);
        tcase_add_test(tc, spare_regions_after_exhaustion);
        tcase_add_loop_test(tc, memory_exhaustion, 0, 2);
        tcase_add_test(tc, allocation_failures);
        tcase_add_test(tc, hanging_host_task);
        suite_add_tcase(s, tc);
        return s;
}

const struct check_main check_main = {
        .suite = suite,
        .ignore_sigpipe = true,
        .setup = daemon_util_setup,
        .teardown = daemon_util_cleanup,
};
