/* SPDX-License-Identifier: MIT */
/*
 * hbgd's scheduler against one hostile local user (as test_e2e_hostile.c,
 * which says what each test checks after its attack): a dead client's
 * long kernel, one session keeping every thread busy, tasks that cost too
 * much or run slow on subnormal floats, a big window's cost, and hbgd's
 * wake page woken, waited on and requeued (shared helpers: hostile_util.h).
 * HBG_TEST_SCALE=N divides the honest clients' work.
 *
 * Tests of per-uid limits act as uid 65534 (nobody) from a forked child
 * and need root: without root they are left out and the binary exits 77
 * when everything else passed. HBG_TEST_VERBOSE=1 shows hbgd's log.
 */
#include <check.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <linux/futex.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/userfaultfd.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/clock.h"
#include "hbg/hbg.h"
#include "proto/wire.h"
#include "shm/layout.h"
#include "daemon/engine/wakeup.h"
#include "tests/e2e/e2e_kid.h"
#include "tests/e2e/e2e_util.h"
#include "tests/e2e/hostile_util.h"
#include "tests/test_util.h"
#include "tests/check_main.h"

/* ------------------------------------------------------------ 7. dead client, long kernel */

/* One graph of spin_ns tasks (ns each, `blocks` blocks), `graphs` times;
 * says "SUBMITTED" and waits to be killed. */
struct spinner {
        const char *path;
        uint64_t ns;
        unsigned tasks, blocks, graphs;
        uint64_t first_ns; /* > 0: the first graph's first task runs this long */
};

static int spinner_fn(int sock, void *arg) {
        const struct spinner *s = arg;
        hbg_client *c = NULL;
        int err = hbg_connect(&c, s->path);
        if (err < 0) {
                kid_say(sock, "FAIL hbg_connect: %s [%s]", hbg_strerror(err), hbg_last_error(NULL));
                return 1;
        }
        for (unsigned g = 0; g < s->graphs; g++) {
                for (unsigned i = 0; i < s->tasks; i++) {
                        hbg_task t = HBG_TASK_INIT("spin_ns");
                        t.blocks = (uint16_t)s->blocks;
                        t.n_scalars = 1;
                        t.scalars[0] = s->first_ns && g == 0 && i == 0 ? s->first_ns : s->ns;
                        if ((err = hbg_graph_add(c, &t, NULL)) < 0)
                                break;
                }
                uint64_t graph;
                if (err < 0 || (err = hbg_graph_submit(c, &graph)) < 0) {
                        kid_say(sock, "FAIL graph %u: %s [%s]", g, hbg_strerror(err), hbg_last_error(c));
                        return 1;
                }
        }
        kid_say(sock, "SUBMITTED");
        kid_cmd(sock);
        hbg_disconnect(c);
        return 0;
}

START_TEST(dead_client_long_kernel) {
        struct hbgd_proc *d =
                start_hbgd_conf(MODE_URING, "[scheduler]\nthreads = 2\nclusters = 2\n[limits]\nmax_task_cost = 0\n");
        int base = fd_baseline(d);
        int mon = raw_connect(d->socket_path);
        raw_hello(mon);
        struct spinner s = { .path = d->socket_path, .ns = 1000000000, .tasks = 1, .blocks = 4, .graphs = 1 };
        struct kid k;
        char buf[256];
        kid_start(&k, SAME_UID, spinner_fn, &s);
        kid_expect(d, &k, "SUBMITTED", IO_MS, buf, sizeof(buf), "the client of the long kernel");
        wait_classified(d, mon, 1, "dead_client_long_kernel");
        sleep_us(100000);
        assert_running(d, mon, k.pid, "dead_client_long_kernel");

        /* hbgd sees the hang-up (the session leaves its list) and answers
         * a new client within 1 s, while the kernel still runs. */
        pid_t pid = k.pid;
        long long t0 = daemon_now_ms();
        kid_kill(&k);
        while (session_listed(d, mon, pid) && daemon_now_ms() - t0 < 1000)
                sleep_us(2000);
        long long t_gone = daemon_now_ms() - t0;
        D_ASSERT(d, t_gone < 1000, "the killed client's session was still listed %lld ms after the kill", t_gone);
        long long ms = fresh_status(d, 1000, "dead_client_long_kernel: right after the client was killed");
        /* dispatched counts blocks once they returned: still none. */
        uint64_t classified, dispatched;
        thread_counts(d, mon, &classified, &dispatched);
        fprintf(stderr, "dead_client_long_kernel: session closed %lld ms after the kill, a new client answered in "
                "%lld ms, kernel blocks returned: %" PRIu64 "\n", t_gone, ms, dispatched);
        D_ASSERT(d, dispatched == 0, "hbgd answered only after the killed client's kernel returned");
        close(mon);
        assert_fd_baseline(d, base, "dead_client_long_kernel: after the long kernel returned");
        assert_serving(d);
        stop_hbgd(d);
}
END_TEST

/* ------------------------------------------------------------ 8. one session, all threads */

/* Another uid's ready task waits for at most one running kernel of a
 * session that keeps every thread busy (the attacker runs as uid 65534:
 * fair share is per uid, and a user's own sessions share its turns). */

/* The honest client of one_session_all_threads' chain case: on 'G', one
 * graph of CHAIN_FILLS fills of one tensor (each waits for the one
 * before), then "DONE 1 MS" with the graph's time. */
#define CHAIN_FILLS 16u
static int honest_chain_fn(int sock, void *arg) {
        hbg_client *c = NULL;
        hbg_tensor t;
        int err = hbg_connect(&c, arg);
        if (err < 0 || (err = hbg_tensor_alloc(c, 1024 * sizeof(float), &t)) < 0) {
                kid_say(sock, "FAIL hbg_connect/alloc: %s [%s]", hbg_strerror(err), hbg_last_error(c));
                return 1;
        }
        kid_say(sock, "READY");
        if (kid_cmd(sock) != 'G')
                return 0;
        long long t0 = daemon_now_ms();
        uint64_t graph;
        for (unsigned i = 0; i < CHAIN_FILLS && err == 0; i++) {
                hbg_task task = HBG_TASK_INIT("fill_f32");
                task.n_args = 1;
                task.args[0].tensor = t;
                task.args[0].dir = HBG_OUT;
                task.n_scalars = 1;
                task.scalars[0] = hbg_f32((float)i);
                err = hbg_graph_add(c, &task, NULL);
        }
        if (err < 0 || (err = hbg_graph_submit(c, &graph)) < 0 || (err = hbg_graph_wait(c, graph, WAIT_MS)) < 0) {
                kid_say(sock, "FAIL the chain: %s [%s]", hbg_strerror(err), hbg_last_error(c));
                return 1;
        }
        const float *v = hbg_tensor_data(c, t);
        if (v[0] != (float)(CHAIN_FILLS - 1)) {
                kid_say(sock, "FAIL the chain's last fill is not the one left: %g", (double)v[0]);
                return 1;
        }
        kid_cmd(sock); /* 'Q' */
        kid_say(sock, "DONE 1 %lld", daemon_now_ms() - t0);
        hbg_disconnect(c);
        return 0;
}

/* _i == 0: the honest client connects first; _i == 1: it connects while
 * the attacker's kernels already hold every thread (a lone session's
 * visits must notice the newcomer, not finish their batch first); _i ==
 * 2: the same with a chain of CHAIN_FILLS tasks, each ready only when the
 * one before is done, and the attacker's first kernels of 0.2, 1, 1 and
 * 1 s: the three it started while it was alone and still runs count
 * against its cap, so the thread that comes free at 0.2 s runs the whole
 * chain. Before, kernels started alone did not count: that thread ran
 * the chain's first task, then one of the attacker's kernels, and the
 * chain went on only when the others came free, at 1 s. Bound 0.5 s. */
START_TEST(one_session_all_threads) {
        ck_assert_msg(geteuid() == 0, "one_session_all_threads needs root");
        bool late = _i >= 1, chain = _i == 2;
        struct hbgd_proc *d =
                start_hbgd_conf(MODE_URING, "[scheduler]\nthreads = 4\nclusters = 8\nstall_timeout_ms = 2000\n");
        open_to_all(d);
        int base = fd_baseline(d);
        int mon = raw_connect(d->socket_path);
        raw_hello(mon);
        struct kid attacker, honest;
        char buf[256];
        if (!late)
                honest_start(d, &honest);
        /* 3 graphs of 8 independent 1 s kernels (spin_ns caps a block at
         * 1 s): 8 ready at all times, and each thread (2 clusters, 4 vector
         * cores) could run 4 of them back to back in one visit. */
        struct spinner s = { .path = d->socket_path, .ns = 1000000000, .tasks = 8, .blocks = 1, .graphs = 3,
                             .first_ns = chain ? 200000000 : 0 };
        kid_start(&attacker, NOBODY, spinner_fn, &s);
        kid_expect(d, &attacker, "SUBMITTED", IO_MS, buf, sizeof(buf), "the attacker");
        wait_classified(d, mon, 8, "one_session_all_threads");
        sleep_us(chain ? 100000 : 300000); /* the chain's case: before its first kernel ends */
        assert_running(d, mon, attacker.pid, "one_session_all_threads");
        if (chain) {
                kid_start(&honest, SAME_UID, honest_chain_fn, (void *)d->socket_path);
                kid_expect(d, &honest, "READY", IO_MS, buf, sizeof(buf), "the honest client");
        } else if (late) {
                honest_start(d, &honest);
        }
        /* Exactly one graph: 'Q' is there before it ends. */
        kid_tell(&honest, 'G');
        kid_tell(&honest, 'Q');
        long long ms = 0;
        honest_stop(d, &honest, &ms);
        long long bound = chain ? 500 : 3000;
        fprintf(stderr, "one_session_all_threads (honest client connects %s): the honest %u-task graph took "
                "%lld ms (bound %lld)\n", late ? "late" : "first", chain ? CHAIN_FILLS : 1u, ms, bound);
        D_ASSERT(d, ms <= bound,
                 "another uid's %u-task graph took %lld ms with one session's kernels of up to 1 s on every thread "
                 "(it may wait for one running kernel: bound %lld ms with margin)", chain ? CHAIN_FILLS : 1u, ms,
                 bound);
        fresh_status(d, LIVE_MS, "one_session_all_threads");
        kid_kill(&attacker);
        close(mon);
        assert_fd_baseline(d, base, "one_session_all_threads: after the attacker left");
        assert_serving(d);
        stop_hbgd(d);
}
END_TEST

/* ------------------------------------------------------------ wake page */

/*
 * A client spinning FUTEX_WAKE on the wake page's word (docs/SECURITY.md,
 * RUNTIME_LOGIC.md §9.4): it burns its own CPU and wakes hbgd's parked
 * threads for nothing, which hbgd counts (spurious_wakeups) and bounds
 * (WAKEUP_SPURIOUS_MAX per thread and window, then the thread sleeps out
 * of the clients' reach until the window ends, where the doorbell still
 * wakes it). Counts only: the bound on hbgd's wake-ups is computed from
 * the windows the attack lasted, however long that was on a busy
 * machine. An honest client's graphs complete meanwhile.
 */
enum { WAKE_ATTACK_THREADS = 2, WAKE_ATTACK_WAKES = 400000 };

/* A session of the kid's own, and the wake page (its fifth fd) mapped
 * as a client maps it, then the doorbell rung, as a client rings once it
 * has mapped its regions: hbgd serves the session, and the thread its
 * serving kick wakes parks again on the page (a page's making wakes
 * nobody, §9.4). NULL after saying why. */
static const struct hbg_wake_page *kid_wake_page(int sock, void *arg) {
        int fds[SESSION_FDS];
        if (kid_session(sock, arg, fds) < 0)
                return NULL;
        const struct hbg_wake_page *p = mmap(NULL, HBG_WAKE_PAGE_SIZE, PROT_READ, MAP_SHARED, fds[4], 0);
        if (p == MAP_FAILED) {
                kid_say(sock, "FAIL mapping the wake page: %s", strerror(errno));
                return NULL;
        }
        if (send(fds[2], "", 1, MSG_DONTWAIT | MSG_NOSIGNAL) != 1) {
                kid_say(sock, "FAIL ringing the doorbell: %s", strerror(errno));
                return NULL;
        }
        return p;
}

static int wake_attack_fn(int sock, void *arg) {
        const struct hbg_wake_page *p = kid_wake_page(sock, arg);
        if (!p)
                return 1;
        kid_say(sock, "READY");
        kid_cmd(sock);
        unsigned long woke = 0;
        for (unsigned i = 0; i < WAKE_ATTACK_WAKES; i++) {
                long n = syscall(SYS_futex, &p->word, FUTEX_WAKE, INT_MAX, NULL, NULL, 0);
                if (n < 0) {
                        kid_say(sock, "FAIL FUTEX_WAKE: %s", strerror(errno));
                        return 1;
                }
                woke += (unsigned long)n;
        }
        kid_say(sock, "DONE %lu", woke);
        /* And on, while the honest client runs, until told to stop. */
        while (!kid_cmd_pending(sock))
                syscall(SYS_futex, &p->word, FUTEX_WAKE, INT_MAX, NULL, NULL, 0);
        kid_cmd(sock);
        _exit(0);
}

/* The threads' wake-ups and spurious wake-ups, summed. */
static void wake_counts(struct hbgd_proc *d, int fd, uint64_t *wakeups, uint64_t *spurious) {
        bool parked;
        thread_wakes(d, fd, wakeups, spurious, &parked);
}

/* Until a thread has woken since the threads' wake-ups summed to `since`
 * and every thread is parked again (each one's parks = its wake-ups + 1):
 * a thread parks on the wake pages in use then (§9.4). */
static void wait_parked_since(struct hbgd_proc *d, int fd, uint64_t since, const char *what) {
        long long deadline = daemon_now_ms() + IO_MS;
        for (;;) {
                uint64_t wakeups, spurious;
                bool parked;
                thread_wakes(d, fd, &wakeups, &spurious, &parked);
                if (wakeups > since && parked)
                        return;
                D_ASSERT(d, daemon_now_ms() < deadline, "%s: no thread woke and parked again (wake-ups %" PRIu64
                         ", %" PRIu64 " before; all parked: %d)", what, wakeups, since, parked);
                usleep(2000);
        }
}

START_TEST(wake_page_abuse) {
        char conf[128];
        snprintf(conf, sizeof(conf), "[scheduler]\nthreads = %d\n", WAKE_ATTACK_THREADS);
        struct hbgd_proc *d = start_hbgd_conf(MODE_URING, conf);
        int base = fd_baseline(d);
        int mon = raw_connect(d->socket_path);
        raw_hello(mon);
        struct kid k;
        char buf[256];
        uint64_t w0, s0, w1, s1;
        wake_counts(d, mon, &w0, &s0);
        kid_start(&k, SAME_UID, wake_attack_fn, d->socket_path);
        kid_expect(d, &k, "READY", IO_MS, buf, sizeof(buf), "wake_page_abuse: the attacker");
        /* The serving kick's thread parked again, on the page now. */
        wait_parked_since(d, mon, w0, "wake_page_abuse: the attacker's doorbell");
        wake_counts(d, mon, &w0, &s0);
        long long t0 = daemon_now_ms();
        kid_tell(&k, 'G');
        kid_expect(d, &k, "DONE", WAIT_MS, buf, sizeof(buf), "wake_page_abuse: the attacker");
        long long windows = (daemon_now_ms() - t0) / WAKEUP_SPURIOUS_WINDOW_MS + 2;
        wake_counts(d, mon, &w1, &s1);
        unsigned long woke = strtoul(buf + strlen("DONE "), NULL, 10);
        /* Per thread and window: the budget, the wake that ends the
         * window's calm sleep, and a little more for status requests and
         * the stall check. */
        uint64_t bound = (uint64_t)WAKE_ATTACK_THREADS * (WAKEUP_SPURIOUS_MAX + 4) * (uint64_t)windows;
        fprintf(stderr, "wake_page_abuse: %u wakes sent, %lu sleepers woken, hbgd woke %" PRIu64
                " times (%" PRIu64 " spurious) in %lld windows, bound %" PRIu64 "\n",
                (unsigned)WAKE_ATTACK_WAKES, woke, w1 - w0, s1 - s0, windows, bound);
        D_ASSERT(d, s1 > s0, "a client's %u FUTEX_WAKEs on the wake page counted no spurious wake-up",
                 (unsigned)WAKE_ATTACK_WAKES);
        D_ASSERT(d, w1 - w0 <= bound,
                 "a client's FUTEX_WAKEs woke hbgd's threads %" PRIu64 " times in %lld windows (bound %" PRIu64 ")",
                 w1 - w0, windows, bound);
        /* The attacker still spinning: an honest client runs. */
        honest_graphs(d, 64 / hostile_scale() + 1, "wake_page_abuse");
        kid_tell(&k, 'Q');
        kid_end(d, &k, IO_MS, "wake_page_abuse: the attacker");
        close(mon);
        assert_fd_baseline(d, base, "wake_page_abuse: after the attacker left");
        assert_serving(d);
        stop_hbgd(d);
}
END_TEST

/*
 * Waiters of its own on the wake page's word: FUTEX_WAIT sleepers that
 * take other clients' wakes (a FUTEX_WAKE of 1 that reaches one of them
 * says 1: "woke somebody"), a FUTEX_WAIT_REQUEUE_PI sleeper that makes
 * every FUTEX_WAKE of the word fail, and FUTEX_CMP_REQUEUEs that move
 * hbgd's sleepers onto a word of its own. hbgd's own wakes never go
 * through that word. As another uid the attacker has a page of its own
 * and never sees the honest client's wakes; as the same uid it shares
 * the honest client's page and takes its wakes, and the honest client,
 * which skipped the doorbell after a wake that "woke somebody", rings
 * it before it sleeps (need_wakeup still set): its graphs after idle
 * moments all run, either way. Each graph also publishes from inside the
 * wait (a kernel, then a host task the waiting thread runs, whose answer
 * wakes hbgd, then a task after it), under a stall limit of 0 (no timed
 * wake of the parked threads): a trusted wake made there is confirmed
 * too. The attacker counts the wakes its waiters took: none as another
 * uid, some as the same uid. _i: bit 0 the PI sleeper and requeues, bit
 * 1 as uid 65534.
 */
enum { PAGE_WAITERS = 4 };

struct page_waiter {
        const _Atomic uint32_t *word;
        _Atomic uint32_t own;          /* the requeue target / PI word */
        int pi;
};

static _Atomic unsigned long page_waiter_wakes; /* wakes the waiters took */

static void *page_waiter_main(void *arg) {
        struct page_waiter *w = arg;
        for (;;) {
                if (w->pi) {
                        syscall(SYS_futex, w->word, FUTEX_WAIT_REQUEUE_PI, 0, NULL, &w->own, 0);
                } else if (syscall(SYS_futex, w->word, FUTEX_WAIT, 0, NULL, NULL, 0) == 0) {
                        atomic_fetch_add(&page_waiter_wakes, 1);
                }
        }
        return NULL;
}

/* What the attacker does: 0 plain waiters only, 1 also the PI sleeper
 * and the requeues. Set before the kid is forked. */
static int page_attack;

static int page_waiters_fn(int sock, void *arg) {
        const struct hbg_wake_page *p = kid_wake_page(sock, arg);
        if (!p)
                return 1;
        static struct page_waiter w[PAGE_WAITERS + 1];
        for (unsigned i = 0; i < PAGE_WAITERS + (page_attack ? 1u : 0u); i++) {
                w[i] = (struct page_waiter){ .word = &p->word, .pi = i == PAGE_WAITERS };
                pthread_t th;
                if (pthread_create(&th, NULL, page_waiter_main, &w[i]) != 0) {
                        kid_say(sock, "FAIL pthread_create");
                        return 1;
                }
        }
        kid_say(sock, "READY");
        /* Requeue whatever sleeps on the word (hbgd's threads among them)
         * onto a word of our own, until told to stop. */
        while (!kid_cmd_pending(sock)) {
                if (page_attack)
                        syscall(SYS_futex, &p->word, FUTEX_CMP_REQUEUE, 0, INT_MAX, &w[0].own, 0);
                usleep(1000);
        }
        kid_cmd(sock);
        kid_say(sock, "TOOK %lu", atomic_load(&page_waiter_wakes));
        kid_cmd(sock);
        _exit(0);
}

static int page_host_fn(void *arg) {
        (void)arg;
        usleep(2000);
        return 0;
}

START_TEST(wake_page_waiters) {
        page_attack = _i & 1;
        bool other_uid = (_i & 2) != 0;
        if (other_uid && geteuid() != 0) {
                fprintf(stderr, "wake_page_waiters: the attacker as uid 65534 skipped: it needs root\n");
                return;
        }
        struct hbgd_proc *d = start_hbgd_conf(MODE_URING, "[scheduler]\nstall_timeout_ms = 0\n");
        if (other_uid)
                open_to_all(d);
        struct kid k;
        char buf[256];
        kid_start(&k, other_uid ? NOBODY : SAME_UID, page_waiters_fn, d->socket_path);
        kid_expect(d, &k, "READY", IO_MS, buf, sizeof(buf), "wake_page_waiters: the attacker");
        hbg_client *c = NULL;
        int err = hbg_connect(&c, d->socket_path);
        D_ASSERT(d, err == 0, "wake_page_waiters: hbg_connect: %s", hbg_strerror(err));
        /* One-task graphs after idle moments: hbgd's threads park between
         * them, so each one needs a wake-up from the client. */
        unsigned n = 20, ok = 0;
        for (unsigned i = 0; i < n; i++) {
                usleep(20000);
                hbg_task t = HBG_TASK_INIT("noop");
                uint64_t g, id;
                err = hbg_graph_add(c, &t, NULL);
                if (err == 0)
                        err = hbg_graph_submit(c, &g);
                if (err == 0)
                        err = hbg_graph_wait(c, g, WAIT_MS);
                D_ASSERT(d, err == 0, "wake_page_waiters: graph %u after an idle moment: %s", i, hbg_strerror(err));
                /* Publishes from inside the wait: the host task's answer
                 * (the kernel before it let hbgd's threads park). */
                hbg_task spin = HBG_TASK_INIT("spin_ns");
                spin.n_scalars = 1;
                spin.scalars[0] = 2000000;
                err = hbg_graph_add(c, &spin, &id);
                hbg_task host = { .size = sizeof(hbg_task), .host_fn = page_host_fn, .n_deps = 1, .deps = { id } };
                err = err ? err : hbg_graph_add(c, &host, &id);
                hbg_task after = HBG_TASK_INIT("noop");
                after.n_deps = 1;
                after.deps[0] = id;
                err = err ? err : hbg_graph_add(c, &after, NULL);
                err = err ? err : hbg_graph_submit(c, &g);
                err = err ? err : hbg_graph_wait(c, g, WAIT_MS);
                D_ASSERT(d, err == 0, "wake_page_waiters: graph %u with a host task: %s", i, hbg_strerror(err));
                ok++;
        }
        fprintf(stderr, "wake_page_waiters: %u of %u graphs after idle moments ran while %d waiters%s of %s held "
                "its wake page's word\n", ok, n, PAGE_WAITERS,
                page_attack ? ", a FUTEX_WAIT_REQUEUE_PI sleeper and requeues" : "",
                other_uid ? "uid 65534" : "the same uid");
        hbg_disconnect(c);
        kid_tell(&k, 'Q');
        const char *took = kid_expect(d, &k, "TOOK", IO_MS, buf, sizeof(buf), "wake_page_waiters: the attacker");
        unsigned long stolen = strtoul(took, NULL, 10);
        fprintf(stderr, "wake_page_waiters: the attacker's waiters took %lu wakes\n", stolen);
        if (other_uid)
                D_ASSERT(d, stolen == 0, "uid 65534's waiters took %lu wakes through its page", stolen);
        else if (!page_attack)
                D_ASSERT(d, stolen > 0, "the same uid's waiters took no wake: is the page its uid's?");
        kid_tell(&k, 'Q');
        kid_end(d, &k, IO_MS, "wake_page_waiters: the attacker");
        assert_serving(d);
        stop_hbgd(d);
}
END_TEST

/*
 * One wake page per uid (RUNTIME_LOGIC.md §9.4): sessions of one uid share
 * a page marked HBG_WAKE_OWN, each uid has its own, the uids past the
 * first WAKE_PAGES_OWN with a page share one without the mark; a page
 * goes with its uid's last session (hbgd keeps no fd) and a new uid gets
 * a fresh one. Each kid opens a session as uid PAGE_UID0 + its number and
 * says its page's inode and flags.
 */
enum { PAGE_UID0 = 61000, PAGE_OWN = 32, PAGE_KIDS = PAGE_OWN + 2 };

static int page_of_uid_fn(int sock, void *arg) {
        int fds[SESSION_FDS];
        if (kid_session(sock, arg, fds) < 0)
                return 1;
        struct stat st;
        const struct hbg_wake_page *p = mmap(NULL, HBG_WAKE_PAGE_SIZE, PROT_READ, MAP_SHARED, fds[4], 0);
        if (p == MAP_FAILED || fstat(fds[4], &st) < 0) {
                kid_say(sock, "FAIL the wake page: %s", strerror(errno));
                return 1;
        }
        kid_say(sock, "PAGE %lu %u", (unsigned long)st.st_ino, (unsigned)p->flags);
        kid_cmd(sock); /* hold the session until told */
        _exit(0);
}

static void page_of_uid(struct hbgd_proc *d, struct kid *k, uid_t uid, unsigned long *ino, unsigned *flags) {
        char buf[128], what[64];
        snprintf(what, sizeof(what), "wake_page_per_uid: uid %u", (unsigned)uid);
        kid_start(k, uid, page_of_uid_fn, d->socket_path);
        const char *msg = kid_expect(d, k, "PAGE", IO_MS, buf, sizeof(buf), what);
        D_ASSERT(d, sscanf(msg, "%lu %u", ino, flags) == 2, "%s: %s", what, msg);
}

START_TEST(wake_page_per_uid) {
        ck_assert_msg(geteuid() == 0, "wake_page_per_uid needs root");
        struct hbgd_proc *d = start_hbgd_conf(MODE_URING, "[limits]\nmax_sessions = 256\n[session]\n"
                                                          "heap_size = 1048576\ntask_window = 1024\nflag_window = 1024\n");
        open_to_all(d);
        int base = fd_baseline(d);
        struct kid k[PAGE_KIDS + 1];
        unsigned long ino[PAGE_KIDS + 1];
        unsigned flags[PAGE_KIDS + 1];
        for (unsigned i = 0; i < PAGE_KIDS; i++)
                page_of_uid(d, &k[i], PAGE_UID0 + i, &ino[i], &flags[i]);
        /* A second session of the first uid: its page again. */
        page_of_uid(d, &k[PAGE_KIDS], PAGE_UID0, &ino[PAGE_KIDS], &flags[PAGE_KIDS]);
        for (unsigned i = 0; i < PAGE_OWN; i++) {
                D_ASSERT(d, flags[i] & HBG_WAKE_OWN, "uid %u: its page is not marked its own", PAGE_UID0 + i);
                for (unsigned j = 0; j < i; j++)
                        D_ASSERT(d, ino[i] != ino[j], "uids %u and %u share a page", PAGE_UID0 + j, PAGE_UID0 + i);
        }
        D_ASSERT(d, ino[PAGE_KIDS] == ino[0] && (flags[PAGE_KIDS] & HBG_WAKE_OWN),
                 "a second session of uid %u got another page", PAGE_UID0);
        for (unsigned i = PAGE_OWN; i < PAGE_KIDS; i++) {
                D_ASSERT(d, !(flags[i] & HBG_WAKE_OWN), "uid %u, past %u uids: its page is marked its own",
                         PAGE_UID0 + i, (unsigned)PAGE_OWN);
                D_ASSERT(d, ino[i] == ino[PAGE_OWN], "the uids past %u do not share one page", (unsigned)PAGE_OWN);
                for (unsigned j = 0; j < PAGE_OWN; j++)
                        D_ASSERT(d, ino[i] != ino[j], "uid %u got uid %u's own page", PAGE_UID0 + i, PAGE_UID0 + j);
        }
        for (unsigned i = 0; i <= PAGE_KIDS; i++) {
                kid_tell(&k[i], 'Q');
                kid_end(d, &k[i], IO_MS, "wake_page_per_uid");
        }
        /* Every uid gone: hbgd holds no page of theirs. */
        assert_fd_baseline(d, base, "wake_page_per_uid: after every uid left");
        /* A new uid: a page of its own, none seen before. */
        unsigned long fresh;
        unsigned fresh_flags;
        page_of_uid(d, &k[0], PAGE_UID0 + 100, &fresh, &fresh_flags);
        D_ASSERT(d, fresh_flags & HBG_WAKE_OWN, "a new uid after the others left: no page of its own");
        for (unsigned i = 0; i <= PAGE_KIDS; i++)
                D_ASSERT(d, fresh != ino[i], "a new uid got a page uid %u had", PAGE_UID0 + (i % PAGE_KIDS));
        kid_tell(&k[0], 'Q');
        kid_end(d, &k[0], IO_MS, "wake_page_per_uid");
        fprintf(stderr, "wake_page_per_uid: %u uids, %u pages of their own, the rest on one shared page; all "
                "closed with their sessions\n", (unsigned)PAGE_KIDS, (unsigned)PAGE_OWN);
        assert_fd_baseline(d, base, "wake_page_per_uid: at the end");
        assert_serving(d);
        stop_hbgd(d);
}
END_TEST

/* ------------------------------------------------------------ 9. task cost */

/* One graph of one task; hbg_graph_wait's result. */
static int run_one(hbg_client *c, const hbg_task *t) {
        uint64_t graph;
        int err = hbg_graph_add(c, t, NULL);
        if (err == 0)
                err = hbg_graph_submit(c, &graph);
        if (err == 0)
                err = hbg_graph_wait(c, graph, WAIT_MS);
        return err;
}

static hbg_task gemm_task(hbg_tensor a, hbg_tensor b, hbg_tensor cm, uint64_t m, uint64_t n, uint64_t k) {
        hbg_task t = HBG_TASK_INIT("gemm_f32");
        t.n_args = 3;
        t.args[0].tensor = a;
        t.args[0].dir = HBG_IN;
        t.args[1].tensor = b;
        t.args[1].dir = HBG_IN;
        t.args[2].tensor = cm;
        t.args[2].dir = HBG_INOUT;
        t.n_scalars = 3;
        t.scalars[0] = m;
        t.scalars[1] = n;
        t.scalars[2] = k;
        return t;
}

static hbg_tensor alloc_filled(struct hbgd_proc *d, hbg_client *c, size_t n, float v) {
        hbg_tensor t;
        int err = hbg_tensor_alloc(c, n * sizeof(float), &t);
        D_ASSERT(d, err == 0, "hbg_tensor_alloc(%zu floats): %s [%s]", n, hbg_strerror(err), hbg_last_error(c));
        float *p = hbg_tensor_data(c, t);
        for (size_t i = 0; i < n; i++)
                p[i] = v;
        return t;
}

START_TEST(task_cost_limit) {
        struct hbgd_proc *d = start_hbgd_conf(MODE_URING, "[session]\nheap_size = 64M\n");
        hbg_client *c = NULL;
        int err = hbg_connect(&c, d->socket_path);
        D_ASSERT(d, err == 0, "hbg_connect: %s [%s]", hbg_strerror(err), hbg_last_error(NULL));
        enum { BIG = 2048, SMALL = 64 };
        hbg_tensor a = alloc_filled(d, c, BIG * BIG, 0), b = alloc_filled(d, c, BIG * BIG, 0),
                   cm = alloc_filled(d, c, BIG * BIG, 0);
        hbg_task t = gemm_task(a, b, cm, BIG, BIG, BIG);
        err = run_one(c, &t);
        D_ASSERT(d, err == -E2BIG, "gemm_f32 of 2048^3 (8.6e9 > max_task_cost 2^31): %d (%s), expected -E2BIG",
                 err, hbg_strerror(err));
        t = HBG_TASK_INIT("spin_ns");
        t.blocks = 4;
        t.n_scalars = 1;
        t.scalars[0] = 1000000000;
        long long t0 = daemon_now_ms();
        err = run_one(c, &t);
        long long took = daemon_now_ms() - t0;
        D_ASSERT(d, err == -E2BIG, "spin_ns of 4 blocks x 1 s (cost 4e9): %d (%s) after %lld ms, expected -E2BIG",
                 err, hbg_strerror(err), took);
        /* Small work still runs, and right: C += A B = 0.5 + 64 * 2. */
        hbg_tensor sa = alloc_filled(d, c, SMALL * SMALL, 1.0f), sb = alloc_filled(d, c, SMALL * SMALL, 2.0f),
                   sc = alloc_filled(d, c, SMALL * SMALL, 0.5f);
        t = gemm_task(sa, sb, sc, SMALL, SMALL, SMALL);
        err = run_one(c, &t);
        D_ASSERT(d, err == 0, "gemm_f32 of 64^3: %s [%s]", hbg_strerror(err), hbg_last_error(c));
        const float *v = hbg_tensor_data(c, sc);
        for (unsigned i = 0; i < SMALL * SMALL; i++)
                D_ASSERT(d, v[i] == 128.5f, "gemm 64^3: C[%u] = %g, expected 128.5", i, (double)v[i]);
        hbg_disconnect(c);
        fresh_status(d, LIVE_MS, "task_cost_limit");
        stop_hbgd(d);

        d = start_hbgd_conf(MODE_URING, "[limits]\nmax_task_cost = 1000\n");
        err = hbg_connect(&c, d->socket_path);
        D_ASSERT(d, err == 0, "hbg_connect: %s [%s]", hbg_strerror(err), hbg_last_error(NULL));
        hbg_tensor f = alloc_filled(d, c, 4096, 0), g = alloc_filled(d, c, 256, 0);
        t = HBG_TASK_INIT("fill_f32");
        t.n_args = 1;
        t.args[0].tensor = f;
        t.args[0].dir = HBG_OUT;
        t.n_scalars = 1;
        t.scalars[0] = hbg_f32(1.0f);
        err = run_one(c, &t);
        D_ASSERT(d, err == -E2BIG, "fill_f32 of 4096 elements with max_task_cost = 1000: %d (%s), expected -E2BIG",
                 err, hbg_strerror(err));
        t.args[0].tensor = g;
        err = run_one(c, &t);
        D_ASSERT(d, err == 0, "fill_f32 of 256 elements with max_task_cost = 1000: %s", hbg_strerror(err));
        D_ASSERT(d, ((const float *)hbg_tensor_data(c, g))[255] == 1.0f, "fill_f32 of 256 did not write");
        hbg_disconnect(c);
        fresh_status(d, LIVE_MS, "task_cost_limit (max_task_cost = 1000)");
        stop_hbgd(d);
}
END_TEST

/* The same attack with data that makes the work slow: subnormal A (1e-39)
 * multiplies 40-100 times slower on many x86 cores than max_task_cost's
 * count assumes, and hbgd keeps IEEE results. Two sessions each submit a
 * graph of 4 gemm_f32 tasks at 1/64 of max_task_cost (320^3 multiply-adds,
 * accepted by the cost check) beside an honest client; with
 * kernel_time_budget_ms = 1 every one of them stops with -ETIME and the
 * kernel's own message (320^3 takes far longer than 1 ms on any data, so
 * nothing here depends on how slow this CPU is on subnormals). The
 * sessions go on (a gemm too small to look at the clock is right), the
 * honest client's results stay right, hbgd keeps serving. */
START_TEST(task_cost_subnormal) {
        struct hbgd_proc *d = start_hbgd_conf(MODE_URING, "[session]\nheap_size = 16M\n[limits]\n"
                                                          "kernel_time_budget_ms = 1\n");
        int base = fd_baseline(d);
        struct kid honest;
        honest_start(d, &honest);
        kid_tell(&honest, 'G');
        enum { DIM = 320, TASKS = 4, SESSIONS = 2, SMALL = 16 };
        _Static_assert((uint64_t)DIM * DIM * DIM <= (UINT64_C(1) << 31) / 64, "within 1/64 of max_task_cost");
        hbg_client *c[SESSIONS];
        uint64_t graph[SESSIONS];
        for (unsigned s = 0; s < SESSIONS; s++) {
                int err = hbg_connect(&c[s], d->socket_path);
                D_ASSERT(d, err == 0, "hbg_connect: %s [%s]", hbg_strerror(err), hbg_last_error(NULL));
                hbg_tensor a = alloc_filled(d, c[s], DIM * DIM, 1e-39f), b = alloc_filled(d, c[s], DIM * DIM, 1.5f);
                for (unsigned i = 0; i < TASKS; i++) {
                        hbg_task t = gemm_task(a, b, alloc_filled(d, c[s], DIM * DIM, 0), DIM, DIM, DIM);
                        err = hbg_graph_add(c[s], &t, NULL);
                        D_ASSERT(d, err == 0, "hbg_graph_add: %s [%s]", hbg_strerror(err), hbg_last_error(c[s]));
                }
                err = hbg_graph_submit(c[s], &graph[s]);
                D_ASSERT(d, err == 0, "hbg_graph_submit: %s [%s]", hbg_strerror(err), hbg_last_error(c[s]));
        }
        for (unsigned s = 0; s < SESSIONS; s++) {
                int err = hbg_graph_wait(c[s], graph[s], WAIT_MS);
                D_ASSERT(d, err == -ETIME, "session %u: %d gemm_f32 tasks of %u^3 on subnormal data with "
                         "kernel_time_budget_ms = 1: %d (%s) [%s], expected -ETIME", s, TASKS, DIM, err,
                         hbg_strerror(err), hbg_last_error(c[s]));
                hbg_graph_error_info info = HBG_GRAPH_ERROR_INFO_INIT;
                D_ASSERT(d, hbg_graph_error(c[s], graph[s], &info) == 0, "hbg_graph_error");
                D_ASSERT(d, strcmp(info.message, "gemm_f32: kernel exceeded its time budget of 1 ms") == 0 &&
                                    strcmp(info.kernel, "gemm_f32") == 0,
                         "session %u: message '%s', kernel '%s'", s, info.message, info.kernel);
                /* The session goes on: 16^3 never looks at the clock. */
                hbg_tensor sa = alloc_filled(d, c[s], SMALL * SMALL, 1e-39f),
                           sb = alloc_filled(d, c[s], SMALL * SMALL, 2.0f),
                           sc = alloc_filled(d, c[s], SMALL * SMALL, 0.0f);
                hbg_task t = gemm_task(sa, sb, sc, SMALL, SMALL, SMALL);
                err = run_one(c[s], &t);
                D_ASSERT(d, err == 0, "session %u: gemm_f32 of 16^3 after the budget failures: %s [%s]", s,
                         hbg_strerror(err), hbg_last_error(c[s]));
                /* 16 terms of 2e-39, each exact: a subnormal sum, not 0. */
                float want = 0.0f;
                for (unsigned p = 0; p < SMALL; p++)
                        want += 1e-39f * 2.0f;
                const float *v = hbg_tensor_data(c[s], sc);
                for (unsigned i = 0; i < SMALL * SMALL; i++)
                        D_ASSERT(d, memcmp(&v[i], &want, sizeof(float)) == 0, "C[%u] = %a, expected %a", i,
                                 (double)v[i], (double)want);
                hbg_disconnect(c[s]);
        }
        long long worst = 0;
        unsigned graphs = honest_stop(d, &honest, &worst);
        fprintf(stderr, "task_cost_subnormal: %u x %u subnormal gemm_f32 of %u^3 stopped by the 1 ms budget; "
                "honest client: %u graphs, worst %lld ms\n", SESSIONS, TASKS, DIM, graphs, worst);
        fresh_status(d, LIVE_MS, "task_cost_subnormal");
        assert_fd_baseline(d, base, "task_cost_subnormal: after the sessions left");
        assert_serving(d);
        stop_hbgd(d);
}
END_TEST

/* ------------------------------------------------------------ 11. big windows */

START_TEST(big_window_session_cheap) {
        struct hbgd_proc *d = start_hbgd_conf(MODE_URING, "[limits]\nmax_task_window = 1048576\nmax_heap_size = 1G\n"
                                                     "max_memory = 64G\n");
        int base = fd_baseline(d);
        struct kid k;
        honest_start(d, &k);
        kid_tell(&k, 'G');
        long long worst_session = 0;
        for (unsigned i = 0; i < 10; i++) {
                long long t0 = daemon_now_ms();
                int fd = raw_connect(d->socket_path);
                raw_hello(fd);
                Hbg__SessionRequest sr = HBG__SESSION_REQUEST__INIT;
                Hbg__Envelope env = HBG__ENVELOPE__INIT;
                sr.task_window = UINT64_C(1) << 20;
                sr.heap_size = UINT64_C(1) << 30;
                env.msg_case = HBG__ENVELOPE__MSG_SESSION_REQUEST;
                env.session_request = &sr;
                send_env(fd, &env, NULL, 0);
                int fds[SESSION_FDS];
                Hbg__Envelope *e = expect_env(fd, HBG__ENVELOPE__MSG_SESSION_REPLY, fds, SESSION_FDS);
                D_ASSERT(d, e->session_reply->task_window == sr.task_window &&
                                    e->session_reply->heap_size == sr.heap_size,
                         "session %u: granted window %" PRIu64 ", heap %" PRIu64, i, e->session_reply->task_window,
                         e->session_reply->heap_size);
                wire_free(e);
                for (unsigned j = 0; j < SESSION_FDS; j++)
                        close(fds[j]);
                close(fd);
                long long took = daemon_now_ms() - t0;
                worst_session = took > worst_session ? took : worst_session;
        }
        long long worst = 0;
        unsigned graphs = honest_stop(d, &k, &worst);
        fprintf(stderr, "big_window_session_cheap: 10 sessions of 2^20 tasks + 1 GiB heap, each answered within "
                "%lld ms; honest client: %u graphs, worst %lld ms\n", worst_session, graphs, worst);
        D_ASSERT(d, worst < 1000, "an honest 1-task graph took %lld ms while big sessions were created", worst);
        abuse_epilogue(d, base, "big_window_session_cheap");
}
END_TEST

static Suite *suite(void) {
        Suite *s = suite_create("e2e_hostile_engine");
        TCase *tc = hostile_case(s, "engine");
        hostile_add(tc, dead_client_long_kernel, false, 0);
        hostile_add(tc, one_session_all_threads, true, 3 /* honest client first, late, a late chain */);
        hostile_add(tc, task_cost_limit, false, 0);
        hostile_add(tc, task_cost_subnormal, false, 0);
        hostile_add(tc, big_window_session_cheap, false, 0);
        hostile_add(tc, wake_page_abuse, false, 0);
        hostile_add(tc, wake_page_waiters, false, 4 /* plain waiters; and PI, requeues; other uid */);
        hostile_add(tc, wake_page_per_uid, true, 0);
        return s;
}

HOSTILE_CHECK_MAIN(suite);
