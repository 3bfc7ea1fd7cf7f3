/* SPDX-License-Identifier: MIT */
/*
 * hbgd end to end: the real daemon (tests/e2e/daemon_util.c starts one per test
 * on a private socket) and real clients through libhbgclient. Every test
 * runs once per io backend: _i = MODE_URING (the default) and MODE_EPOLL
 * (HBGD_IO=epoll). Here: producers at once, killed clients, the io
 * backend's probe, status over the socket and thread names, SIGTERM with
 * work in flight, reconnects, the housekeeping tick. Raw records at hbgd's
 * door are test_e2e_handshake.c, spare rings and regions
 * test_e2e_spares.c (the CPU moves are test_e2e_affinity's).
 *
 * Run one group with CK_RUN_CASE=producers|killed|probe|status|sigterm|
 * reconnect|tick; HBG_TEST_SEED fixes the random numbers; STRESS=long
 * kills more clients; HBG_TEST_VERBOSE=1 shows hbgd's log as it runs.
 */
#include <check.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <linux/futex.h>
#include <linux/io_uring.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "hbg/hbg.h"
#include "proto/wire.h"
#include "shm/layout.h"
#include "tests/e2e/e2e_util.h"
#include "tests/test_util.h"
#include "tests/check_main.h"

/* ------------------------------------------------------------ producers */

#define N_PRODUCERS 8
#define PRODUCER_GRAPHS 100

/* Under every io mode and completion policy (one body, eight runs). */
START_TEST(producers_8x100) {
        int mode = IO_MODE_OF(_i);
        struct hbgd_proc *d = start_hbgd_completion(mode, COMPLETION_OF(_i));
        int base = fd_baseline(d);
        pid_t kids[N_PRODUCERS];

        fflush(NULL);
        for (unsigned p = 0; p < N_PRODUCERS; p++) {
                kids[p] = fork();
                ck_assert_int_ge(kids[p], 0);
                if (kids[p] == 0) {
                        char who[64];
                        snprintf(who, sizeof(who), "producer %u (%s, %s)", p, mode_name(mode), COMPLETION_OF(_i));
                        client_main(d->socket_path, p + 1, PRODUCER_GRAPHS, -1, -1, who);
                }
        }
        /* Every child is reaped before any assertion. */
        int st[N_PRODUCERS];
        for (unsigned p = 0; p < N_PRODUCERS; p++)
                while (waitpid(kids[p], &st[p], 0) < 0 && errno == EINTR)
                        ;
        for (unsigned p = 0; p < N_PRODUCERS; p++) {
                char how[96];
                describe(st[p], how, sizeof(how));
                D_ASSERT(d, WIFEXITED(st[p]) && WEXITSTATUS(st[p]) == KID_OK, "%s: producer %u: %s",
                         mode_name(mode), p, how);
        }
        int n = daemon_wait_fd_count(d->pid, base, FD_SETTLE_MS);
        D_ASSERT(d, n == base, "%s: hbgd holds %d fds after the producers left, %d before", mode_name(mode),
                 n, base);
        assert_serving(d);
        stop_hbgd(d);
}
END_TEST

/* ------------------------------------------------------------ killed clients */

/* Under every io mode and completion policy (one body, eight runs). 100
 * kills each in the plain build; the sanitizer and -O3 builds take a
 * quarter (TSan an eighth): the kills are the same code paths, and each
 * costs a fork and up to 20 ms of waiting whatever the build. */
START_TEST(killed_clients) {
        int mode = IO_MODE_OF(_i);
        const char *stress = getenv("STRESS");
        unsigned kills = stress && strcmp(stress, "long") == 0 ? 400 : 100 / test_scale_or(HBG_TEST_BUILD_SCALE);
        if (kills == 0)
                kills = 1;
        uint64_t rng = seed_value() + (uint64_t)mode;
        fprintf(stderr, "killed_clients (%s, %s): %u kills, HBG_TEST_SEED=%" PRIu64 "\n", mode_name(mode),
                COMPLETION_OF(_i), kills, seed_value());

        struct hbgd_proc *d = start_hbgd_completion(mode, COMPLETION_OF(_i));
        int base = fd_baseline(d);

        /* The steady client: runs graphs until stop[1] is closed. */
        int stop[2], ready[2];
        ck_assert_int_eq(pipe2(stop, O_CLOEXEC), 0);
        ck_assert_int_eq(pipe2(ready, O_CLOEXEC), 0);
        fflush(NULL);
        pid_t steady = fork();
        ck_assert_int_ge(steady, 0);
        if (steady == 0) {
                close(stop[1]);
                close(ready[0]);
                client_main(d->socket_path, 3, 0, ready[1], stop[0], "steady client");
        }
        close(stop[0]);
        close(ready[1]);
        char b = 0;
        int r = read_byte(ready[0], IO_MS, &b);
        close(ready[0]);
        if (r != 1) {
                kill(steady, SIGKILL);
                waitpid(steady, NULL, 0);
        }
        D_ASSERT(d, r == 1, "%s: the steady client did not start (%s)", mode_name(mode),
                 r == 0 ? "it exited" : strerror(-r));

        unsigned failures = 0;
        char first_failure[256] = "";
        long long t0 = daemon_now_ms();
        for (unsigned i = 0; i < kills; i++) {
                ck_assert_int_eq(pipe2(ready, O_CLOEXEC), 0);
                fflush(NULL);
                pid_t kid = fork();
                ck_assert_int_ge(kid, 0);
                if (kid == 0) {
                        close(stop[1]);
                        close(ready[0]);
                        client_main(d->socket_path, 1 + i % 7, 0, ready[1], -1, "doomed client");
                }
                close(ready[1]);
                r = read_byte(ready[0], IO_MS, &b);
                close(ready[0]);
                /* Killed 0-20 ms after it started submitting. */
                if (r == 1)
                        sleep_us((long)(xorshift(&rng) % 20001));
                kill(kid, SIGKILL);
                int st;
                while (waitpid(kid, &st, 0) < 0 && errno == EINTR)
                        ;
                if (r != 1 || !WIFSIGNALED(st) || WTERMSIG(st) != SIGKILL) {
                        char how[96];
                        describe(st, how, sizeof(how));
                        if (!failures++)
                                snprintf(first_failure, sizeof(first_failure),
                                         "doomed client %u: %s before the kill (%s)", i,
                                         r == 1 ? "ended" : r == 0 ? "exited" : "did not start", how);
                }
        }
        long long t_kills = daemon_now_ms() - t0;

        close(stop[1]);
        int st;
        while (waitpid(steady, &st, 0) < 0 && errno == EINTR)
                ;
        char how[96];
        describe(st, how, sizeof(how));
        fprintf(stderr, "killed_clients (%s): %u kills in %lld ms; steady client: %s\n", mode_name(mode),
                kills, t_kills, how);
        D_ASSERT(d, failures == 0, "%s: %u of %u doomed clients misbehaved; first: %s", mode_name(mode),
                 failures, kills, first_failure);
        D_ASSERT(d, WIFEXITED(st) && WEXITSTATUS(st) == KID_OK,
                 "%s: the steady client failed while others were killed: %s", mode_name(mode), how);

        int n = daemon_wait_fd_count(d->pid, base, FD_SETTLE_MS);
        if (n != base)
                list_fds(d->pid);
        D_ASSERT(d, n == base, "%s: hbgd holds %d fds %d ms after the last client left, %d before",
                 mode_name(mode), n, FD_SETTLE_MS, base);
        assert_serving(d);
        stop_hbgd(d);
}
END_TEST

/* ------------------------------------------------------------ io probe */

/* hbgd needs io_uring's multishot poll (5.13): a kernel with io_uring but
 * without it must get epoll, not a loop that fails every client. The probe
 * is forced to say "no multishot" (HBGD_TEST_IO_PROBE, read by the test
 * build tests/hbgd-hooks). */
START_TEST(io_probe_fallback) {
        static const char *const env[] = { "HBGD_TEST_IO_PROBE=no-multishot", NULL };
        struct hbgd_proc *d = start_hooks_hbgd(env);
        int fd = raw_connect(d->socket_path);
        raw_hello(fd);
        send_status_request(fd, HBG__STATUS_KIND__STATUS_DAEMON, NULL, 0);
        Hbg__Envelope *e = expect_env(fd, HBG__ENVELOPE__MSG_STATUS_REPLY, NULL, 0);
        D_ASSERT(d, strcmp(e->status_reply->daemon->io_backend, "epoll") == 0,
                 "io backend %s with multishot poll unavailable, expected epoll",
                 e->status_reply->daemon->io_backend);
        wire_free(e);
        close(fd);
        char log[8192] = "";
        FILE *f = fopen(d->log_path, "r");
        if (f) {
                size_t n = fread(log, 1, sizeof(log) - 1, f);
                log[n] = 0;
                fclose(f);
        }
        D_ASSERT(d, strstr(log, "lacks multishot poll") && strstr(log, "using epoll"),
                 "hbgd did not log why it uses epoll");
        assert_serving(d);
        stop_hbgd(d);
}
END_TEST

/* ------------------------------------------------------------ status */

static const Hbg__SessionStatus *find_session(const Hbg__StatusReply *s, pid_t pid) {
        for (size_t i = 0; i < s->n_sessions; i++)
                if (s->sessions[i]->pid == (uint32_t)pid)
                        return s->sessions[i];
        return NULL;
}

START_TEST(status_over_socket) {
        int mode = _i;
        static const char *const args[] = { "--threads", "3", "--clusters", "2", NULL };
        struct hbgd_proc *d = start_hbgd(mode, args);

        /* Two sessions: ours (in this process) and a child's. */
        hbg_client *c = NULL;
        int err = hbg_connect(&c, d->socket_path);
        D_ASSERT(d, err == 0, "hbg_connect: %s [%s]", hbg_strerror(err), hbg_last_error(NULL));
        struct workload w;
        ck_assert_msg(wl_init(&w, c, 2) == 0, "%s", w.msg);
        long ran = wl_run(&w, 4, -1);
        ck_assert_msg(ran == 4, "%s", w.msg);

        int hold[2], ready[2];
        ck_assert_int_eq(pipe2(hold, O_CLOEXEC), 0);
        ck_assert_int_eq(pipe2(ready, O_CLOEXEC), 0);
        fflush(NULL);
        pid_t kid = fork();
        ck_assert_int_ge(kid, 0);
        if (kid == 0) {
                close(hold[1]);
                close(ready[0]);
                hbg_client *kc = NULL;
                if (hbg_connect(&kc, d->socket_path) < 0)
                        _exit(KID_CONNECT);
                if (write(ready[1], "R", 1) != 1)
                        _exit(KID_PIPE);
                char x;
                while (read(hold[0], &x, 1) < 0 && errno == EINTR)
                        ;
                hbg_disconnect(kc);
                _exit(KID_OK);
        }
        close(hold[0]);
        close(ready[1]);
        char b;
        int r = read_byte(ready[0], IO_MS, &b);
        close(ready[0]);
        if (r != 1) {
                kill(kid, SIGKILL);
                waitpid(kid, NULL, 0);
        }
        ck_assert_msg(r == 1, "the second client did not connect");

        int fd = raw_connect(d->socket_path);
        raw_hello(fd);
        Hbg__Envelope *env;

        /* STATUS_DAEMON: daemon, threads and sessions. */
        const Hbg__StatusReply *s = status_reply(fd, HBG__STATUS_KIND__STATUS_DAEMON, &env);
        const Hbg__DaemonStatus *ds = s->daemon;
        ck_assert_str_eq(ds->version, HBG_VERSION);
        ck_assert_str_eq(ds->version, hbg_version());
        ck_assert_uint_eq(ds->pid, (uint32_t)d->pid);
        ck_assert_uint_eq(ds->threads, 3);
        ck_assert_uint_eq(ds->clusters, 2);
        ck_assert_uint_eq(ds->sessions, 2);
        ck_assert_ptr_nonnull(ds->io_backend);
        const char *want_io = mode == MODE_EPOLL || !uring_available() ? "epoll" : "io_uring";
        ck_assert_str_eq(ds->io_backend, want_io);
        ck_assert_uint_ge(ds->graphs_retired, 4);
        ck_assert_uint_eq(ds->graphs_failed, 0);
        ck_assert_uint_ge(ds->tasks_completed, 4 * 5);
        ck_assert_uint_lt(ds->uptime_ms, 24ull * 3600 * 1000);
        ck_assert_uint_eq(s->n_threads, 3);
        for (size_t i = 0; i < s->n_threads; i++)
                ck_assert_uint_eq(s->threads[i]->index, i);
        ck_assert_uint_eq(s->n_sessions, 2);
        const Hbg__SessionStatus *mine = find_session(s, getpid()), *theirs = find_session(s, kid);
        ck_assert_msg(mine, "our session (pid %d) is not listed", (int)getpid());
        ck_assert_msg(theirs, "the child's session (pid %d) is not listed", (int)kid);
        ck_assert_uint_eq(mine->uid, getuid());
        ck_assert_str_eq(mine->name, program_invocation_short_name);
        ck_assert_uint_ge(mine->submitted, 4 * 5);
        ck_assert_uint_ge(mine->completed, 4 * 5);
        ck_assert_uint_eq(mine->graphs_retired, 4);
        ck_assert_uint_eq(mine->graphs_failed, 0);
        ck_assert_int_eq(mine->error, 0);
        ck_assert_uint_ne(mine->session_id, theirs->session_id);
        ck_assert_uint_eq(theirs->submitted, 0);
        ck_assert_uint_eq(s->n_kernels, 0);
        uint64_t my_session = mine->session_id;
        wire_free(env);

        /* STATUS_THREADS: threads only. */
        s = status_reply(fd, HBG__STATUS_KIND__STATUS_THREADS, &env);
        ck_assert_uint_eq(s->n_threads, 3);
        ck_assert_uint_eq(s->n_sessions, 0);
        uint64_t executed = 0;
        for (size_t i = 0; i < s->n_threads; i++)
                executed += s->threads[i]->executed_tasks;
        ck_assert_uint_ge(executed, 4 * 5);
        wire_free(env);

        /* STATUS_SESSIONS */
        s = status_reply(fd, HBG__STATUS_KIND__STATUS_SESSIONS, &env);
        ck_assert_uint_eq(s->n_sessions, 2);
        ck_assert_uint_eq(s->n_threads, 0);
        ck_assert_ptr_nonnull(find_session(s, getpid()));
        ck_assert_ptr_nonnull(find_session(s, kid));
        wire_free(env);

        /* STATUS_GRAPHS */
        s = status_reply(fd, HBG__STATUS_KIND__STATUS_GRAPHS, &env);
        ck_assert_uint_eq(s->n_graphs, 2);
        bool found = false;
        for (size_t i = 0; i < s->n_graphs; i++)
                if (s->graphs[i]->session_id == my_session) {
                        found = true;
                        ck_assert_uint_eq(s->graphs[i]->graphs_submitted, 4);
                        ck_assert_uint_eq(s->graphs[i]->graphs_retired, 4);
                        ck_assert_uint_eq(s->graphs[i]->graphs_failed, 0);
                }
        ck_assert_msg(found, "our session is not in STATUS_GRAPHS");
        wire_free(env);

        /* STATUS_KERNELS: the built-in table. */
        s = status_reply(fd, HBG__STATUS_KIND__STATUS_KERNELS, &env);
        ck_assert_uint_ge(s->n_kernels, 12);
        const Hbg__KernelInfo *gemm = NULL;
        static const char *const names[] = { "noop", "spin_ns", "fill_f32", "copy_f32", "add_f32", "mul_f32",
                                             "axpy_f32", "scale_f32", "reduce_sum_f32", "gemm_f32",
                                             "softmax_rows_f32", "fail" };
        for (size_t n = 0; n < sizeof(names) / sizeof(names[0]); n++) {
                unsigned hits = 0;
                for (size_t i = 0; i < s->n_kernels; i++)
                        if (s->kernels[i]->name && strcmp(s->kernels[i]->name, names[n]) == 0) {
                                hits++;
                                if (n == 9)
                                        gemm = s->kernels[i];
                        }
                ck_assert_msg(hits == 1, "kernel %s listed %u times", names[n], hits);
        }
        for (size_t i = 0; i < s->n_kernels; i++)
                for (size_t j = i + 1; j < s->n_kernels; j++)
                        ck_assert_uint_ne(s->kernels[i]->id, s->kernels[j]->id);
        ck_assert_ptr_nonnull(gemm);
        ck_assert_uint_eq(gemm->n_args, 6);
        static const char *const gemm_kinds[] = { "in", "in", "inout", "u64", "u64", "u64" };
        for (size_t i = 0; i < 6; i++)
                ck_assert_str_eq(gemm->args[i]->kind, gemm_kinds[i]);
        ck_assert(gemm->splittable);
        wire_free(env);

        /* The second client leaves: one session remains. */
        close(hold[1]);
        int st;
        while (waitpid(kid, &st, 0) < 0 && errno == EINTR)
                ;
        ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == KID_OK, "second client failed");
        long long deadline = daemon_now_ms() + FD_SETTLE_MS;
        unsigned sessions;
        for (;;) {
                s = status_reply(fd, HBG__STATUS_KIND__STATUS_SESSIONS, &env);
                sessions = s->daemon->sessions;
                bool gone = !find_session(s, kid);
                wire_free(env);
                if ((sessions == 1 && gone) || daemon_now_ms() >= deadline)
                        break;
                sleep_us(5000);
        }
        ck_assert_uint_eq(sessions, 1);

        close(fd);
        hbg_disconnect(c);
        stop_hbgd(d);
}
END_TEST

/* hbgd's threads carry names ps -L, top -H and perf show: its io thread
 * keeps the process's (a sanitizer's own thread may share it), the others
 * say what they are. */
START_TEST(thread_names) {
        static const char *const names[] = { "hbgd-log", "hbgd-slow", "hbgd-sched0", "hbgd-sched1", "hbgd-sched2",
                                             "hbgd-sched3" };
        struct hbgd_proc *d = start_hbgd(_i, NULL);
        int io = daemon_threads_named(d->pid, "hbgd");
        D_ASSERT(d, io >= 1, "no thread of hbgd named hbgd (the io thread): %d", io);
        for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
                int n = daemon_threads_named(d->pid, names[i]);
                D_ASSERT(d, n == 1, "%d threads of hbgd named %s, not 1", n, names[i]);
        }
        stop_hbgd(d);
        /* The resolver's own thread (RUNTIME_LOGIC §11.3). */
        d = start_hbgd_conf(_i, "[scheduler]\ncompletion_mode = resolver\n");
        int n = daemon_threads_named(d->pid, "hbgd-resolver");
        D_ASSERT(d, n == 1, "%d threads of hbgd named hbgd-resolver under the resolver, not 1", n);
        D_ASSERT(d, daemon_threads_named(d->pid, "hbgd-sched2") == 1 && daemon_threads_named(d->pid, "hbgd-sched3") == 0,
                 "the resolver's hbgd has not three scheduler threads and the resolver's");
        stop_hbgd(d);
}
END_TEST

/* ------------------------------------------------------------ SIGTERM */

#define CHAIN_TASKS 200
#define CHAIN_TASK_NS 50000000ull /* 50 ms: 10 s in all, ten times the grace period */
#define SIGTERM_GRACE_CONF "[limits]\nshutdown_grace_ms = 1000\n"

/* A client that leaves with a graph running: hbgd's log says the session
 * closed, not that hbgd went away (the client's words for -ECONNRESET). */
START_TEST(client_gone_logged) {
        struct hbgd_proc *d = start_hbgd(MODE_URING, NULL);
        hbg_client *c = NULL;
        int err = hbg_connect(&c, d->socket_path);
        D_ASSERT(d, err == 0, "hbg_connect: %s [%s]", hbg_strerror(err), hbg_last_error(NULL));
        hbg_task t = HBG_TASK_INIT("spin_ns");
        t.n_scalars = 1;
        t.scalars[0] = 900000000; /* spin_ns takes up to 1 s */
        uint64_t graph;
        ck_assert_int_eq(hbg_graph_add(c, &t, NULL), 0);
        ck_assert_int_eq(hbg_graph_submit(c, &graph), 0);
        hbg_disconnect(c);
        long long deadline = daemon_now_ms() + WAIT_MS;
        while (!log_has(d, "failed: the session closed (its client went away") && daemon_now_ms() < deadline)
                usleep(10000);
        D_ASSERT(d, log_has(d, "failed: the session closed (its client went away"),
                 "the graph's failure after its client left was not logged as the session's close");
        D_ASSERT(d, !log_has(d, "hbgd went away"), "hbgd's log blames hbgd for its client's leaving");
        stop_hbgd(d);
}
END_TEST

START_TEST(sigterm_in_flight) {
        int mode = _i;
        struct hbgd_proc *d = start_hbgd_conf(mode, SIGTERM_GRACE_CONF);
        hbg_client *c = NULL;
        int err = hbg_connect(&c, d->socket_path);
        D_ASSERT(d, err == 0, "hbg_connect: %s [%s]", hbg_strerror(err), hbg_last_error(NULL));

        uint64_t prev = 0;
        for (unsigned i = 0; i < CHAIN_TASKS; i++) {
                hbg_task t = HBG_TASK_INIT("spin_ns");
                t.n_scalars = 1;
                t.scalars[0] = CHAIN_TASK_NS;
                if (i > 0) {
                        t.n_deps = 1;
                        t.deps[0] = prev;
                }
                err = hbg_graph_add(c, &t, &prev);
                ck_assert_msg(err == 0, "hbg_graph_add(spin_ns #%u): %s [%s]", i, hbg_strerror(err),
                              hbg_last_error(c));
        }
        uint64_t graph;
        err = hbg_graph_submit(c, &graph);
        ck_assert_msg(err == 0, "hbg_graph_submit: %s [%s]", hbg_strerror(err), hbg_last_error(c));
        /* 200 x 50 ms cannot be done yet. */
        ck_assert_int_eq(hbg_graph_status(c, graph, NULL), 1);

        long long t0 = daemon_now_ms();
        ck_assert_int_eq(kill(d->pid, SIGTERM), 0);
        err = hbg_graph_wait(c, graph, WAIT_MS);
        long long t_wait = daemon_now_ms() - t0;
        D_ASSERT(d, err == -ESHUTDOWN || err == -ECONNRESET,
                 "%s: hbg_graph_wait after SIGTERM: %d (%s) [%s], expected -ESHUTDOWN or -ECONNRESET",
                 mode_name(mode), err, hbg_strerror(err), hbg_last_error(c));
        int st = hbg_graph_status(c, graph, NULL);
        ck_assert_msg(st < 0, "graph status %d after hbgd stopped", st);

        int w = daemon_wait_exit(d, WAIT_MS);
        long long t_exit = daemon_now_ms() - t0;
        D_ASSERT(d, w == 0, "%s: hbgd still runs %d ms after SIGTERM", mode_name(mode), WAIT_MS);
        D_ASSERT(d, WIFEXITED(d->wstatus) && WEXITSTATUS(d->wstatus) == 0,
                 "%s: hbgd did not exit 0 after the grace period (wait status 0x%x)", mode_name(mode),
                 (unsigned)d->wstatus);
        D_ASSERT(d, daemon_wait_notify(d, "STOPPING=1", 0) == 0, "%s: no STOPPING=1 from hbgd", mode_name(mode));
        D_ASSERT(d, log_has(d, "not accepting sessions; 1 open session gets 1000 ms to finish their graphs"),
                 "%s: hbgd did not log the one session's grace period", mode_name(mode));
        fprintf(stderr, "sigterm_in_flight (%s): wait returned %s after %lld ms, hbgd exited after %lld ms\n",
                mode_name(mode), hbg_strerror(err), t_wait, t_exit);

        /* Without hbgd, new work fails (-ECONNRESET) instead of hanging. */
        hbg_task t = HBG_TASK_INIT("noop");
        uint64_t g2 = 0;
        err = hbg_graph_add(c, &t, NULL);
        if (err == 0)
                err = hbg_graph_submit(c, &g2);
        if (err == 0)
                err = hbg_graph_wait(c, g2, IO_MS);
        ck_assert_msg(err == -ECONNRESET, "a graph after hbgd exited: %d (%s), expected -ECONNRESET", err,
                      hbg_strerror(err));
        hbg_disconnect(c);
        daemon_destroy(d);

        /* Without sessions there is nothing to give the grace period. */
        d = start_hbgd_conf(mode, SIGTERM_GRACE_CONF);
        ck_assert_int_eq(kill(d->pid, SIGTERM), 0);
        D_ASSERT(d, daemon_wait_exit(d, WAIT_MS) == 0, "%s: hbgd still runs after SIGTERM", mode_name(mode));
        D_ASSERT(d, log_has(d, "not accepting sessions; none open"), "%s: hbgd's log of stopping idle",
                 mode_name(mode));
        daemon_destroy(d);
}
END_TEST

/*
 * A client that closes its session and connects again at once, 1000
 * times, never finds max_sessions (64) reached: hbg_disconnect() hangs up
 * there and then (its io_uring's poll would keep the socket open until the
 * kernel tears the ring down, later: before, the sessions of a fast loop
 * piled up in hbgd and the 65th connect was refused), and hbgd frees a
 * ring a scheduler thread still held within a few ms, not at its next
 * 100 ms tick.
 */
START_TEST(reconnect_at_once) {
        struct hbgd_proc *d = start_hbgd(_i, NULL);
        for (int i = 0; i < 1000; i++) {
                hbg_client *c = NULL;
                int err = hbg_connect(&c, d->socket_path);
                D_ASSERT(d, err == 0, "connect %d: %s [%s]", i, hbg_strerror(err), hbg_last_error(NULL));
                struct workload w;
                ck_assert_msg(wl_init(&w, c, 2) == 0, "%s", w.msg);
                ck_assert_msg(wl_run(&w, 1, -1) == 1, "connect %d: %s", i, w.msg);
                hbg_disconnect(c);
        }
        stop_hbgd(d);
}
END_TEST

/* Wait until all `want` sessions are served (the doorbell each rang at
 * its connect read). */
static void wait_served(struct hbgd_proc *d, int fd, size_t want) {
        long long deadline = daemon_now_ms() + IO_MS;
        for (;;) {
                Hbg__Envelope *r = status_of(d, fd, HBG__STATUS_KIND__STATUS_SESSIONS);
                size_t served = 0;
                for (size_t i = 0; i < r->status_reply->n_sessions; i++)
                        served += strcmp(r->status_reply->sessions[i]->serving, "served") == 0;
                wire_free(r);
                if (served >= want)
                        return;
                D_ASSERT(d, daemon_now_ms() < deadline, "%zu of %zu sessions served", served, want);
                sleep_us(1000);
        }
}

/*
 * A session set up wakes no scheduler thread when its client has not
 * published yet and its uid's wake page exists already (RUNTIME_LOGIC
 * §9.3): the threads' wake-ups stay where they were through several
 * connects of the same uid, and each session's first graph still runs
 * (its publish wakes a thread). Before, every serve woke one thread,
 * which found nothing and spun and parked again: about 20 us of
 * scheduler CPU per connect (docs/PERFORMANCE.md).
 */
START_TEST(idle_connect_wakes_nobody) {
        enum { SESSIONS = 4, SETTLE_MS = 200 };
        struct hbgd_proc *d = start_hbgd(_i, NULL);
        int mon = raw_connect(d->socket_path);
        raw_hello(mon);
        /* The uid's first session makes its page: its serve wakes a
         * thread, which parks again on it. Once it is served, wait until
         * every thread is parked and the count stays for a while. */
        hbg_client *first = NULL;
        int err = hbg_connect(&first, d->socket_path);
        D_ASSERT(d, err == 0, "connect: %s [%s]", hbg_strerror(err), hbg_last_error(NULL));
        wait_served(d, mon, 1);
        uint64_t w0 = UINT64_MAX, w, spurious;
        bool parked = false;
        long long deadline = daemon_now_ms() + IO_MS;
        for (;;) {
                sleep_us(SETTLE_MS * 1000L);
                thread_wakes(d, mon, &w, &spurious, &parked);
                if (parked && w == w0)
                        break;
                w0 = w;
                D_ASSERT(d, daemon_now_ms() < deadline, "the threads did not settle: wake-ups %" PRIu64 ", all "
                         "parked: %d", w, parked);
        }
        hbg_client *c[SESSIONS];
        for (int i = 0; i < SESSIONS; i++) {
                err = hbg_connect(&c[i], d->socket_path);
                D_ASSERT(d, err == 0, "connect %d: %s [%s]", i, hbg_strerror(err), hbg_last_error(NULL));
        }
        /* Then a while for a thread that was woken to show it. */
        wait_served(d, mon, SESSIONS + 1);
        sleep_us(SETTLE_MS * 1000L);
        thread_wakes(d, mon, &w, &spurious, &parked);
        fprintf(stderr, "idle_connect_wakes_nobody (%s): %d sessions set up, the threads woke %" PRIu64
                " times\n", mode_name(_i), SESSIONS, w - w0);
        D_ASSERT(d, w == w0 && parked, "%d idle sessions set up woke the scheduler threads %" PRIu64 " times "
                 "(all parked: %d)", SESSIONS, w - w0, parked);
        for (int i = 0; i < SESSIONS; i++) {
                struct workload wl;
                ck_assert_msg(wl_init(&wl, c[i], 2) == 0, "%s", wl.msg);
                ck_assert_msg(wl_run(&wl, 1, -1) == 1, "session %d's first graph: %s", i, wl.msg);
                hbg_disconnect(c[i]);
        }
        thread_wakes(d, mon, &w, &spurious, &parked);
        D_ASSERT(d, w > w0, "the sessions' graphs ran, yet no thread woke");
        hbg_disconnect(first);
        close(mon);
        stop_hbgd(d);
}
END_TEST

/* ------------------------------------------------------------ the housekeeping tick */

/* Times hbgd's io thread has slept and woken: /proc/PID/status counts
 * the switches of the thread-group leader, hbgd's main thread, which runs
 * the io loop. */
static long io_thread_wakes(struct hbgd_proc *d) {
        long n = daemon_status_kib(d->pid, "voluntary_ctxt_switches");
        D_ASSERT(d, n >= 0, "no voluntary_ctxt_switches in hbgd's /proc status: %ld", n);
        return n;
}

/* Until hbgd's housekeeping timer has the period "(S, NS)" (as
 * /proc/PID/fdinfo shows a timerfd's it_interval), within IO_MS. */
static void wait_tick_period(struct hbgd_proc *d, const char *period) {
        char want[64], path[64], line[128];
        snprintf(want, sizeof(want), "it_interval: %s", period);
        long long until = daemon_now_ms() + IO_MS;
        for (;;) {
                bool found = false;
                snprintf(path, sizeof(path), "/proc/%d/fdinfo", (int)d->pid);
                DIR *dir = opendir(path);
                for (struct dirent *e; dir && !found && (e = readdir(dir));) {
                        char file[sizeof(path) + sizeof(e->d_name) + 1];
                        snprintf(file, sizeof(file), "%s/%s", path, e->d_name);
                        FILE *f = fopen(file, "r");
                        while (f && !found && fgets(line, sizeof(line), f))
                                found = strncmp(line, want, strlen(want)) == 0;
                        if (f)
                                fclose(f);
                }
                if (dir)
                        closedir(dir);
                if (found)
                        return;
                D_ASSERT(d, daemon_now_ms() < until, "hbgd's tick never got the period %s", period);
                sleep_us(2000);
        }
}

#define TICK_QUICK "(0, 100000000)"
#define TICK_SLOW "(1, 0)"

static int count_host_runs(void *userdata) {
        ++*(int *)userdata;
        return 0;
}

/*
 * Open sessions with nothing in flight leave hbgd's io thread to the slow
 * tick (once a second, as with no session at all): a service holding its
 * connection between requests costs hbgd hardly any CPU. Counted, not
 * timed: the io thread's wake-ups over windows of 2 s once the slow-work
 * thread is done, at most 8 in one of them (the quick tick alone makes
 * 20; up to three windows, in case something else woke it). A graph in
 * flight brings the quick tick back (its age, RUNTIME_LOGIC §12.5): a
 * host task nobody runs until the wait holds it there. The sessions work
 * afterwards.
 */
START_TEST(idle_sessions_tick_slowly) {
        enum { SESSIONS = 4, WINDOWS = 3, WINDOW_MS = 2000, MAX_WAKES = 8 };
        struct hbgd_proc *d = start_hbgd(_i, NULL);
        hbg_client *c[SESSIONS];
        struct workload w[SESSIONS];
        for (int i = 0; i < SESSIONS; i++) {
                int err = hbg_connect(&c[i], d->socket_path);
                D_ASSERT(d, err == 0, "connect %d: %s [%s]", i, hbg_strerror(err), hbg_last_error(NULL));
                ck_assert_msg(wl_init(&w[i], c[i], 2) == 0, "%s", w[i].msg);
                ck_assert_msg(wl_run(&w[i], 1, -1) == 1, "session %d: %s", i, w[i].msg);
        }
        wait_slow_work_idle(d);
        wait_tick_period(d, TICK_SLOW);
        long fewest = -1;
        for (int k = 0; k < WINDOWS && (fewest < 0 || fewest > MAX_WAKES); k++) {
                long before = io_thread_wakes(d);
                sleep_us(WINDOW_MS * 1000L);
                long wakes = io_thread_wakes(d) - before;
                if (fewest < 0 || wakes < fewest)
                        fewest = wakes;
        }
        fprintf(stderr, "idle_sessions_tick_slowly (%s): %d idle sessions, the io thread woke %ld times in %d ms\n",
                mode_name(_i), SESSIONS, fewest, WINDOW_MS);
        D_ASSERT(d, fewest <= MAX_WAKES, "%d idle sessions: the io thread woke %ld times in every %d ms window "
                 "(the slow tick makes 2)", SESSIONS, fewest, WINDOW_MS);

        int runs = 0;
        hbg_task t = HBG_TASK_INIT(NULL);
        t.host_fn = count_host_runs;
        t.host_userdata = &runs;
        uint64_t g;
        ck_assert_int_eq(hbg_graph_add(c[0], &t, NULL), 0);
        ck_assert_int_eq(hbg_graph_submit(c[0], &g), 0);
        wait_tick_period(d, TICK_QUICK);
        ck_assert_int_eq(runs, 0);
        int err = hbg_graph_wait(c[0], g, IO_MS);
        D_ASSERT(d, err == 0 && runs == 1, "the held graph: %s, its host function ran %d times", hbg_strerror(err),
                 runs);
        wait_tick_period(d, TICK_SLOW);
        for (int i = 0; i < SESSIONS; i++) {
                ck_assert_msg(wl_run(&w[i], 2, -1) == 2, "session %d after idling: %s", i, w[i].msg);
                hbg_disconnect(c[i]);
        }
        stop_hbgd(d);
}
END_TEST

/*
 * A ring stopped for a protocol error is closed when it stops, not at the
 * next tick: with the slow tick made 10 minutes (HBGD_TEST_IDLE_TICK_MS,
 * read by the test build tests/hbgd-hooks), an idle session that then
 * claims more graphs than its graph ring holds still gets its hang-up
 * within IO_MS.
 */
START_TEST(stopped_ring_closed_at_once) {
        static const char *const env[] = { "HBGD_TEST_IDLE_TICK_MS=600000", NULL };
        struct hbgd_proc *d = start_hooks_hbgd(env);
        int sock = raw_connect(d->socket_path);
        raw_hello(sock);
        int fds[SESSION_FDS];
        Hbg__Envelope *e = session_by_hand(sock, fds);
        size_t sub_size = e->session_reply->sub_region_size;
        uint64_t graph_table = e->session_reply->graph_table_entries;
        wire_free(e);
        struct hbg_sub_header *h = mmap(NULL, sub_size, PROT_READ | PROT_WRITE, MAP_SHARED, fds[0], 0);
        ck_assert(h != MAP_FAILED);
        /* The tick's first look finds the session idle: the slow period. */
        wait_tick_period(d, "(600, 0)");
        atomic_store_explicit(&h->graphs_submitted, graph_table + 1, memory_order_release);
        ck_assert_int_eq(send(fds[2], "x", 1, MSG_DONTWAIT | MSG_NOSIGNAL), 1);
        expect_refusal(d, sock, 0, CLOSE_EOF_ONLY_OK, "a session stopped while the tick was slow");
        D_ASSERT(d, log_has(d, "closed: session stopped"), "the stopped session's close was not logged");
        munmap(h, sub_size);
        for (unsigned i = 0; i < SESSION_FDS; i++)
                close(fds[i]);
        stop_hbgd(d);
}
END_TEST

static Suite *suite(void) {
        Suite *s = suite_create("e2e_daemon");
        struct {
                const char *name;
                const TTest *tests[2];
        } cases[] = {
                { "producers", { producers_8x100 } },
                { "killed", { killed_clients, client_gone_logged } },
                { "probe", { io_probe_fallback } },
                { "status", { status_over_socket, thread_names } },
                { "sigterm", { sigterm_in_flight } },
                { "reconnect", { reconnect_at_once, idle_connect_wakes_nobody } },
                { "tick", { idle_sessions_tick_slowly, stopped_ring_closed_at_once } },
        };
        for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
                TCase *tc = tcase_create(cases[i].name);
                tcase_set_timeout(tc, 600);
                for (size_t j = 0; j < 2 && cases[i].tests[j]; j++) {
                        const TTest *t = cases[i].tests[j];
                        if (t == producers_8x100 || t == killed_clients)
                                tcase_add_loop_test(tc, t, 0, (int)(N_MODES * completion_count()));
                        else if (t == io_probe_fallback || t == stopped_ring_closed_at_once || t == client_gone_logged)
                                tcase_add_test(tc, t);
                        else
                                tcase_add_loop_test(tc, t, MODE_URING, N_MODES);
                }
                suite_add_tcase(s, tc);
        }
        return s;
}

const struct check_main check_main = {
        .suite = suite,
        .ignore_sigpipe = true,
        .setup = daemon_util_setup,
        .teardown = daemon_util_cleanup,
};
