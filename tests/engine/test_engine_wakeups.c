/* SPDX-License-Identifier: MIT */
/*
 * The engine's parking and wake-ups end to end: an idle engine parks;
 * NEED_WAKEUP saves doorbells; a woken thread clears idle rings' flags;
 * window, watermark and task waiters are signalled; a graph retires, and
 * a task published beside a long one runs, without waiting for it; the
 * caps on spinning and awake threads; a small surplus wakes nobody
 * (helpers: behaviour_util.h).
 *
 * HBG_TEST_SCALE=N (default 1) divides the tasks the doorbell test streams.
 * No test asserts a duration; the idle test bounds the CPU time an idle
 * engine consumes, which is a count of work done, not a latency.
 */
#include <check.h>
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <poll.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "daemon/engine/engine.h"
#include "daemon/engine/engine_stats.h"
#include "daemon/engine/ktime.h"
#include "daemon/engine/kernels.h"
#include "tests/engine/behaviour_util.h"
#include "tests/engine/harness.h"
#include "tests/test_util.h"
#include "common/clock.h"
#include "tests/check_main.h"

/* ------------------------------------------------------------ helpers */

/* One block of spin_ns on lane AIV0 (mask 2): the long tasks below that
 * hold a watermark back or follow a graph. */
static struct harness_task spin_aiv0(uint64_t ns) {
        struct harness_task t = { .kernel = { 0, HBG_KERNEL_SPIN_NS }, .lane_mask = 2, .block_num = 1,
                                  .n_scalars = 1, .scalars = { ns } };
        return t;
}

/* ------------------------------------------------------------ idle */

START_TEST(idle_engine_parks) {
        /* No stall timeout: a thread that parked while the ring still
         * looked unfinished would otherwise wake on its 1 s timer, clear
         * need_wakeup and take the new graph without a doorbell. */
        struct hbg_engine *e = engine_new_with(2, 2, 0);
        struct harness_ring h;
        ring_open(&h, e, 1024, 1024, 0);
        uint64_t o = harness_alloc(&h, 1024 * 4);
        for (int g = 0; g < 20; g++) {
                for (int i = 0; i < 50; i++) {
                        struct harness_task t = fill_task(o, 1024, (float)g, 1, 4);
                        if (i)
                                add_dep(&t, h.prod.next_id - 1);
                        harness_add_task(&h, &t);
                }
                wait_graph_ok(&h, harness_end_graph(&h, (uint64_t)g));
        }

        /* Wait until every thread parked (need_wakeup set by the last). */
        int64_t deadline = clock_now_ms() + WAIT_MS;
        while (!atomic_load(&h.ch->need_wakeup)) {
                ck_assert_msg(clock_now_ms() < deadline, "engine never set need_wakeup");
                sleep_ms(5);
        }
        struct hbg_thread_stats s0, s1;
        stats_sum(e, &s0);
        ck_assert_uint_gt(s0.parks, 0);
        int64_t c0 = test_cpu_ns();
        sleep_ms(1000);
        int64_t used = test_cpu_ns() - c0;
        stats_sum(e, &s1);
        ck_assert_msg(used < 50 * 1000000, "idle engine used %lld us of CPU in 1 s", (long long)(used / 1000));
        /* A parked thread that wakes for anything (a timer, a stray
         * wake) clears need_wakeup until it parks again: wait for it. */
        deadline = clock_now_ms() + WAIT_MS;
        while (!atomic_load(&h.ch->need_wakeup)) {
                ck_assert_msg(clock_now_ms() < deadline, "engine never set need_wakeup again");
                sleep_ms(5);
        }
        ck_assert_uint_gt(s1.parks, 0);

        /* The doorbell path: a new graph rings and completes. */
        uint64_t bells = h.doorbells;
        struct harness_task t = fill_task(o, 1024, 42.0f, 2, 3);
        harness_add_task(&h, &t);
        wait_graph_ok(&h, harness_end_graph(&h, 100));
        ck_assert_uint_gt(h.doorbells, bells);
        ck_assert(all_eq(&h, o, 1024, 42.0f));
        harness_ring_destroy(&h);
        engine_free(e);
}
END_TEST

/* ------------------------------------------------------------ NEED_WAKEUP */

/*
 * While the engine is awake the client must not ring: count the doorbells
 * (publishes that found need_wakeup set) against the publishes, streaming
 * single-block noop tasks. The count follows how often the engine parks,
 * which the machine's load influences; it stays far below the bound
 * because the doorbell (ring_kick) clears need_wakeup itself. When
 * only the woken thread cleared it, every publish made while that thread
 * waited for a CPU rang again: 65-93% doorbells under CPU contention.
 */
START_TEST(need_wakeup_saves_doorbells) {
        struct hbg_engine *e = engine_new_with(2, 2, 10000);
        struct harness_ring h;
        ring_open(&h, e, 4096, 1024, 0);
        /* Tasks of 3 us of work: the engine has more to do per publish
         * than the client needs to publish, so it stays awake and the
         * client should almost never find need_wakeup set. */
        const uint64_t total = 200000 / test_scale();
        uint64_t publishes = stream_tasks(&h, total, 1, 3000);
        struct hbg_thread_stats s;
        stats_sum(e, &s);
        fprintf(stderr, "need_wakeup: %llu tasks, %llu publishes, %llu doorbells, %llu parks\n",
                (unsigned long long)total, (unsigned long long)publishes,
                (unsigned long long)h.doorbells, (unsigned long long)s.parks);
        ck_assert_uint_eq(s.classified, total);
        ck_assert_uint_eq(s.published, total);
        ck_assert_uint_eq(s.dispatched, total);
        ck_assert_msg(h.doorbells < publishes / 10, "%llu doorbells for %llu publishes",
                      (unsigned long long)h.doorbells, (unsigned long long)publishes);
        harness_ring_destroy(&h);
        engine_free(e);
}
END_TEST

/* An engine of `threads` threads (a cluster each) that spin 1 s (the
 * most allowed) before they park, `spinners` at once at most; no stall
 * limit (its timer would wake parked threads). */
static struct hbg_engine *engine_new_spinning(unsigned threads, unsigned spinners) {
        struct hbg_engine_config cfg;
        struct hbg_engine *e = NULL;
        engine_config_default(&cfg);
        cfg.threads = threads;
        cfg.clusters = threads;
        cfg.stall_timeout_ms = 0;
        cfg.spin_before_park_ns = UINT64_C(1000000000);
        cfg.max_spinning_threads = spinners;
        cfg.log = quiet_log;
        ck_assert_int_eq(engine_new(&e, &cfg), 0);
        return e;
}

/* At most max_spinning_threads threads spin idle (RUNTIME_LOGIC §9.4):
 * with a spin of 1 s (the most allowed) and one spinning place, three of
 * four threads park right after a graph; without the cap none would
 * before 1 s. */
START_TEST(spinning_threads_capped) {
        struct hbg_engine *e = engine_new_spinning(4, 1);
        struct harness_ring h;
        ring_open(&h, e, 1024, 1024, 0);
        struct harness_task t = { .block_num = 1 };
        harness_add_task(&h, &t);
        wait_graph_ok(&h, harness_end_graph(&h, 0));
        struct hbg_thread_stats s;
        int64_t deadline = clock_now_ms() + 800;
        do {
                sleep_ms(5);
                stats_sum(e, &s);
        } while (s.parks < 3 && clock_now_ms() < deadline);
        ck_assert_msg(s.parks >= 3, "%llu parks within 800 ms of a 1 s spin: more than one thread spins",
                      (unsigned long long)s.parks);
        harness_ring_destroy(&h);
        engine_free(e);
}
END_TEST

/* Threads that ran at least one task of the graph, from each thread's
 * dispatched count before and after. */
static unsigned threads_that_ran(struct hbg_engine *e, const uint64_t *before) {
        unsigned n = 0;
        for (unsigned i = 0; i < engine_threads(e); i++) {
                struct hbg_thread_stats t;
                engine_thread_stats(e, i, &t);
                n += t.dispatched > before[i];
        }
        return n;
}

/* The parks of every thread, summed. */
static uint64_t parks_now(struct hbg_engine *e) {
        struct hbg_thread_stats s;
        stats_sum(e, &s);
        return s.parks;
}

/* Until all of e's n threads are parked and stay so for 10 ms (a thread
 * counts as parked just before its futex call). */
static void wait_all_parked(struct hbg_engine *e, unsigned n) {
        int64_t deadline = clock_now_ms() + WAIT_MS;
        for (;;) {
                ck_assert_msg(clock_now_ms() < deadline, "threads not parked within %d ms", WAIT_MS);
                unsigned parked = 0;
                for (unsigned i = 0; i < n; i++) {
                        struct hbg_thread_alive a;
                        engine_thread_alive(e, i, &a);
                        parked += a.parked;
                }
                uint64_t parks = parks_now(e);
                sleep_ms(10);
                if (parked == n && parks_now(e) == parks)
                        return;
        }
}

/*
 * The need_wakeup flags the last thread to park set in every ring, idle
 * ones included (RUNTIME_LOGIC §9.4): the thread woken for one ring's
 * graph clears the others' at its first idle turn after the answer, so a
 * client of an idle ring that publishes while hbgd is awake need not
 * ring. Every thread spins a second after work here, so a cleared flag
 * stays clear long enough to be seen; a thread that took the flags and
 * never cleared them would leave it set until it parked again and set it
 * anew (the first pass after the wake makes no stall check, whose full
 * visits would not clear it either).
 */
START_TEST(woken_thread_clears_idle_rings_flags) {
        struct hbg_engine *e = engine_new_spinning(2, 2);
        struct harness_ring busy, idle;
        ring_open(&busy, e, 1024, 1024, 0);
        ring_open(&idle, e, 1024, 1024, 0);
        struct harness_task t = { .block_num = 1 };
        harness_add_task(&busy, &t);
        wait_graph_ok(&busy, harness_end_graph(&busy, 0));

        /* Both parked after their second of spin: both flags set. */
        int64_t deadline = clock_now_ms() + WAIT_MS + 2000;
        while (!atomic_load(&busy.ch->need_wakeup) || !atomic_load(&idle.ch->need_wakeup)) {
                ck_assert_msg(clock_now_ms() < deadline, "the engine never set need_wakeup in both rings");
                sleep_ms(5);
        }
        wait_all_parked(e, 2);
        uint64_t wakeups = 0;
        for (unsigned i = 0; i < 2; i++) {
                struct hbg_thread_stats st;
                engine_thread_stats(e, i, &st);
                wakeups += st.wakeups;
        }

        harness_add_task(&busy, &t);
        wait_graph_ok(&busy, harness_end_graph(&busy, 1));
        deadline = clock_now_ms() + 900; /* within the woken thread's spin */
        bool still_set;
        while ((still_set = atomic_load(&idle.ch->need_wakeup)) && clock_now_ms() < deadline)
                sleep_ms(1);
        uint64_t after = 0;
        for (unsigned i = 0; i < 2; i++) {
                struct hbg_thread_stats st;
                engine_thread_stats(e, i, &st);
                after += st.wakeups;
        }
        ck_assert_uint_gt(after, wakeups);
        ck_assert_msg(!still_set,
                      "the idle ring's need_wakeup still set 900 ms after a woken thread answered");
        harness_ring_destroy(&idle);
        harness_ring_destroy(&busy);
        engine_free(e);
}
END_TEST

static void dispatched_now(struct hbg_engine *e, uint64_t *ret) {
        for (unsigned i = 0; i < engine_threads(e); i++) {
                struct hbg_thread_stats t;
                engine_thread_stats(e, i, &t);
                ret[i] = t.dispatched;
        }
}

/* Four threads on four clusters, no stall limit, no idle spin, at most
 * max_awake of them awake for surplus work: threads that park at once
 * and that nothing but the work under test wakes. */
static struct hbg_engine *quiet_engine_new(unsigned max_awake) {
        struct hbg_engine_config cfg;
        struct hbg_engine *e = NULL;
        engine_config_default(&cfg);
        cfg.threads = 4;
        cfg.clusters = 4;
        cfg.stall_timeout_ms = 0;
        cfg.spin_before_park_ns = 0;
        cfg.max_awake_threads = max_awake;
        cfg.log = quiet_log;
        ck_assert_int_eq(engine_new(&e, &cfg), 0);
        return e;
}

/* Peers are woken only while fewer than max_awake_threads threads are
 * awake, and only while one user has sessions (RUNTIME_LOGIC §9.4). From
 * four parked threads, one graph of 128 independent 1 ms tasks, one
 * doorbell: with max_awake_threads 1 the thread the doorbell woke runs
 * them all (no stall check wakes the others: no stall limit); with 4,
 * or with 1 while a second share's ring is open, its surplus wakes bring
 * peers in. */
START_TEST(awake_threads_capped) {
        const struct {
                unsigned cap;
                bool second_share;
                bool one_thread;
        } cases[] = { { 1, false, true }, { 4, false, false }, { 1, true, false } };
        struct hbg_engine *e = quiet_engine_new(cases[_i].cap);
        struct harness_ring h, other;
        ring_open(&h, e, 1024, 1024, 0);
        if (cases[_i].second_share)
                ring_open_share(&other, e, 256, 256, 0, 1);
        wait_all_parked(e, 4);
        uint64_t before[4];
        dispatched_now(e, before);
        for (unsigned i = 0; i < 128; i++) {
                struct harness_task t = { .kernel = { 0, HBG_KERNEL_SPIN_NS }, .lane_mask = 2,
                                          .block_num = 1, .n_scalars = 1, .scalars = { 1000000 } };
                harness_add_task(&h, &t);
        }
        wait_graph_ok(&h, harness_end_graph(&h, 0));
        unsigned ran = threads_that_ran(e, before);
        if (cases[_i].one_thread)
                ck_assert_msg(ran == 1, "max_awake_threads %u: %u threads ran tasks", cases[_i].cap, ran);
        else
                ck_assert_msg(ran > 1, "max_awake_threads %u%s: only %u thread ran tasks", cases[_i].cap,
                              cases[_i].second_share ? ", two shares" : "", ran);
        if (cases[_i].second_share)
                harness_ring_destroy(&other);
        harness_ring_destroy(&h);
        engine_free(e);
}
END_TEST

/* A surplus wakes a peer only if it is worth the wake-up (RUNTIME_LOGIC
 * §9.4, READY_SURPLUS_WAKE_NS): once every thread has run no-op tasks and
 * spin_ns tasks of 0 ns (its estimates of both kernels are small), a
 * graph of 4 no-op tasks after an idle moment runs on the one thread its
 * doorbell woke (4: under the sanitizers a no-op run takes far longer,
 * and 3 of them must stay under the line); 16 spin_ns tasks of 1 ms,
 * which the estimate takes for little work too, bring a peer in once the
 * thread has run that long with them held (the recheck). No cap in the
 * way: max_awake_threads 4. Where the cycle counter's rate is in doubt
 * every surplus is worth a wake: the first half is skipped. */
START_TEST(small_surplus_wakes_nobody) {
        struct hbg_engine *e = quiet_engine_new(4);
        struct harness_ring h;
        ring_open(&h, e, 1024, 1024, 0);
        struct harness_task noop = { .kernel = { 0, HBG_KERNEL_NOOP }, .lane_mask = 2, .block_num = 1 };
        struct harness_task spin0 = { .kernel = { 0, HBG_KERNEL_SPIN_NS }, .lane_mask = 2, .block_num = 1,
                                      .n_scalars = 1, .scalars = { 0 } };
        /* Warm-up: graphs of no-op and 0 ns spin_ns tasks until every
         * thread ran 128 or more (a kernel a thread never ran counts as
         * worth a wake, so the first graphs wake them all). */
        uint64_t start[4], now[4];
        dispatched_now(e, start);
        int64_t deadline = clock_now_ms() + WAIT_MS;
        for (bool all = false; !all;) {
                ck_assert_msg(clock_now_ms() < deadline, "not every thread ran no-op tasks within %d ms", WAIT_MS);
                for (unsigned i = 0; i < 1000; i++)
                        harness_add_task(&h, i % 2 ? &noop : &spin0);
                wait_graph_ok(&h, harness_end_graph(&h, 0));
                dispatched_now(e, now);
                all = true;
                for (unsigned i = 0; i < 4; i++)
                        all &= now[i] - start[i] >= 128;
        }
        /* The doorbell's wake-up, and no peer's (a peer woken too late to
         * take a task still counts). Three tries: a preemption of the
         * woken thread inside one of its last no-op runs can lift its
         * estimate over the line for once. */
        struct ktime_clock clock;
        ktime_calibrate(&clock);
        if (clock.doubt)
                fprintf(stderr, "small_surplus_wakes_nobody: the cycle counter is in doubt (%s): every surplus "
                        "wakes a peer, the no-op half is skipped\n", clock.doubt);
        unsigned ran = 1;
        uint64_t wakeups = 1;
        for (unsigned try = 0; !clock.doubt && try < 3 && (try == 0 || !(ran == 1 && wakeups == 1)); try++) {
                wait_all_parked(e, 4);
                dispatched_now(e, start);
                struct hbg_thread_stats before, after;
                stats_sum(e, &before);
                for (unsigned i = 0; i < 4; i++)
                        harness_add_task(&h, &noop);
                wait_graph_ok(&h, harness_end_graph(&h, 0));
                wait_all_parked(e, 4);
                stats_sum(e, &after);
                ran = threads_that_ran(e, start);
                wakeups = after.wakeups - before.wakeups;
        }
        ck_assert_msg(ran == 1 && wakeups == 1,
                      "4 no-op tasks after an idle moment, three times: ran on %u threads, %" PRIu64
                      " wake-ups the last time, not one and the doorbell's one", ran, wakeups);

        wait_all_parked(e, 4);
        dispatched_now(e, start);
        for (unsigned i = 0; i < 16; i++) {
                struct harness_task t = { .kernel = { 0, HBG_KERNEL_SPIN_NS }, .lane_mask = 2,
                                          .block_num = 1, .n_scalars = 1, .scalars = { 1000000 } };
                harness_add_task(&h, &t);
        }
        wait_graph_ok(&h, harness_end_graph(&h, 0));
        ran = threads_that_ran(e, start);
        ck_assert_msg(ran > 1, "16 spin_ns tasks of 1 ms ran on one thread: the held surplus woke no peer");
        harness_ring_destroy(&h);
        engine_free(e);
}
END_TEST

/* A producer out of window space asks to be woken (RUNTIME_LOGIC §2.1):
 * the engine writes the completion pipe once the watermark reaches what
 * it asked for, and clears the request. No graph record is written, so
 * nothing else can write the pipe. A request beyond anything reachable is
 * left alone. */
START_TEST(window_waiter_signalled) {
        struct hbg_engine *e = engine_new_with(2, 2, 10000);
        struct harness_ring h;
        ring_open(&h, e, 256, 256, 0);
        struct harness_task dummy = { .block_num = 1 };
        for (unsigned i = 0; i < 256; i++) {
                dummy.n_fanins = i ? 1 : 0;
                dummy.fanins[0] = i - 1;
                harness_add_task(&h, &dummy);
        }
        /* Nothing published: no room, and the request is for id 1. */
        ck_assert_uint_eq(producer_arm_window_wait(&h.prod), 0);
        ck_assert_uint_eq(atomic_load(&h.sh->window_waiting), 1);
        harness_publish(&h);
        struct pollfd p = { .fd = h.efd, .events = POLLIN };
        ck_assert_msg(poll(&p, 1, WAIT_MS) == 1, "no signal for the window waiter within %d ms", WAIT_MS);
        char byte;
        ck_assert_int_eq(read(h.efd, &byte, 1), 1);
        ck_assert_uint_eq(atomic_load(&h.sh->window_waiting), 0);
        ck_assert_uint_gt(producer_room(&h.prod), 0);

        /* A request the watermark never reaches stays as it is. */
        atomic_store(&h.sh->window_waiting, UINT64_MAX);
        for (unsigned i = 0; i < 256; i++)
                harness_add_task(&h, &dummy);
        uint64_t k = harness_end_graph(&h, 0);
        wait_graph_ok(&h, k);
        ck_assert_uint_eq(atomic_load(&h.sh->window_waiting), UINT64_MAX);
        harness_ring_destroy(&h);
        engine_free(e);
}
END_TEST

/* A graph whose last task is followed, on the same thread, by a long one
 * (its continuation: a task of the next graph that depends on it) retires
 * while the long one runs, under every policy: eager-batched walks the
 * watermark before a task whose kernel's recent runs were long, or that
 * the thread never ran, not only at the visit's end (RUNTIME_LOGIC
 * §11.4). One scheduler thread (and a policy's own thread); both graphs are
 * written before the ring is served, so that the thread's first visit
 * takes both and the long task is its continuation. */
START_TEST(graph_retires_before_long_successor) {
        struct hbg_engine_config cfg;
        struct hbg_engine *e = NULL;
        engine_config_default(&cfg);
        cfg.completion_mode = (unsigned)_i;
        /* One scheduler thread, and the policy's own if it has one. */
        cfg.threads = completion_mode_min_threads(cfg.completion_mode);
        cfg.clusters = 1;
        cfg.log = quiet_log;
        ck_assert_int_eq(engine_new(&e, &cfg), 0);
        struct hbg_geometry_request req;
        geometry_request_default(&req);
        req.task_window = req.flag_window = 256;
        req.heap_size = 1u << 20;
        req.graph_table_entries = req.mailbox_entries = 64;
        struct harness_task noop = { .kernel = { 0, HBG_KERNEL_NOOP }, .lane_mask = 2, .block_num = 1 };
        struct harness_task spin = spin_aiv0(1000000000);
        /* Twice: the first time the spin's kernel is new to the thread,
         * the second time its estimate follows its first run. */
        for (unsigned round = 0; round < 2; round++) {
                struct harness_ring h;
                ck_assert_int_eq(harness_ring_init_unserved(&h, e, &req, 0), 0);
                uint64_t a = harness_add_task(&h, &noop);
                uint64_t ka = harness_end_graph(&h, 0);
                spin.n_fanins = 1;
                spin.fanins[0] = a;
                uint64_t b = harness_add_task(&h, &spin);
                uint64_t kb = harness_end_graph(&h, 1);
                harness_ring_serve(&h);
                struct hbg_graph_entry ge;
                wait_graph(&h, ka, &ge);
                ck_assert_int_eq(ge.status, 0);
                ck_assert_msg(atomic_load(&h.ch->completed_watermark) <= b,
                              "round %u: graph %llu retired only after its successor's 1 s task (%s)", round,
                              (unsigned long long)ka, completion_mode_name((unsigned)_i));
                wait_graph_ok(&h, kb);
                harness_ring_destroy(&h);
        }
        engine_free(e);
}
END_TEST

/* A tensor wait's request (RUNTIME_LOGIC §2.1): the watermark past task
 * 1, which completes at once while task 0 runs for a second. No byte
 * while task 0 holds the watermark back (200 ms of its second), one once
 * it has passed; a request withdrawn is zero, and a later watermark move
 * writes nothing for it. */
START_TEST(watermark_waiter_signalled) {
        struct hbg_engine *e = engine_new_with(2, 2, 10000);
        struct harness_ring h;
        ring_open(&h, e, 256, 256, 0);
        struct harness_task hold = spin_aiv0(1000000000);
        struct harness_task dummy = { .block_num = 1 };
        harness_add_task(&h, &hold);
        harness_add_task(&h, &dummy);
        ck_assert_uint_eq(producer_arm_watermark_wait(&h.prod, 2), 0);
        ck_assert_uint_eq(atomic_load(&h.sh->window_waiting), 2);
        harness_publish(&h);
        struct pollfd p = { .fd = h.efd, .events = POLLIN };
        ck_assert_msg(poll(&p, 1, 200) == 0, "a byte while task 0 held the watermark back");
        ck_assert_uint_eq(atomic_load(&h.sh->window_waiting), 2);
        ck_assert_msg(poll(&p, 1, WAIT_MS) == 1, "no byte once the watermark passed task 1 within %d ms", WAIT_MS);
        char byte;
        ck_assert_int_eq(read(h.efd, &byte, 1), 1);
        ck_assert_uint_eq(atomic_load(&h.sh->window_waiting), 0);
        ck_assert_uint_ge(atomic_load(&h.ch->completed_watermark), 2);

        /* Withdrawn before the watermark could reach it: nothing. */
        ck_assert_uint_lt(producer_arm_watermark_wait(&h.prod, 3), 3);
        producer_disarm_watermark_wait(&h.prod);
        ck_assert_uint_eq(atomic_load(&h.sh->window_waiting), 0);
        harness_add_task(&h, &dummy);
        harness_publish(&h);
        ck_assert_msg(poll(&p, 1, 200) == 0, "a byte for a withdrawn request");
        harness_ring_destroy(&h);
        engine_free(e);
}
END_TEST

/* Work published while a long task runs on the only scheduler thread
 * awake (RUNTIME_LOGIC §9.4): need_wakeup is set for the task (by the
 * thread, or by its peer as it parks), so the client's publish wakes a
 * parked peer, which runs the new task while the long one still runs.
 * Without it the new task waits for the long one: need_wakeup is clear
 * once an awake thread found work in the ring, and the client does not
 * ring. */
START_TEST(published_beside_long_task_runs) {
        struct hbg_engine *e = engine_new_with(2, 2, 10000);
        struct harness_ring h;
        ring_open(&h, e, 256, 256, 0);
        uint64_t out = harness_alloc(&h, 16 * 4);
        struct harness_task hold = spin_aiv0(1000000000);
        harness_add_task(&h, &hold);
        harness_end_graph(&h, 0);
        harness_publish(&h);
        /* The hold runs (1 s), and the other thread has parked again. */
        struct ring_stats rs = { 0 };
        for (int64_t end = clock_now_ms() + WAIT_MS; rs.classified < 1 && clock_now_ms() < end; usleep(1000))
                ring_stats(h.ring, &rs);
        ck_assert_uint_eq(rs.classified, 1);
        usleep(50000);
        ck_assert_uint_eq(atomic_load(&h.ch->completed_watermark), 0);
        struct harness_task fill = fill_task(out, 16, 7.0f, 2, 1);
        harness_add_task(&h, &fill);
        harness_end_graph(&h, 1);
        harness_publish(&h);
        bool written = false;
        for (int64_t end = clock_now_ms() + 300; !written && clock_now_ms() < end; usleep(1000))
                written = all_eq(&h, out, 16, 7.0f);
        ck_assert_msg(written, "the task published beside the long one did not run within 300 ms");
        ck_assert_uint_eq(atomic_load(&h.ch->completed_watermark), 0);
        wait_graph_ok(&h, 0);
        wait_graph_ok(&h, 1);
        harness_ring_destroy(&h);
        engine_free(e);
}
END_TEST

/* A tensor wait's request for one task (task_waiting, RUNTIME_LOGIC
 * §2.1), under every policy: task 1 completes at once while task 0 runs
 * for a second, and the byte comes while the watermark is still held
 * back, the request taken. A request for a task not run yet, or for an id
 * far past the ring's (a client's garbage, whose 32-bit stamp would read
 * as complete), writes nothing. */
START_TEST(task_waiter_signalled) {
        const char *policy = completion_mode_name((unsigned)_i);
        struct hbg_engine_config cfg;
        struct hbg_engine *e = NULL;
        engine_config_default(&cfg);
        cfg.completion_mode = (unsigned)_i;
        /* Two scheduler threads, one held by task 0, and the policy's own
         * thread if it has one (min_threads counts it beside one). */
        cfg.threads = 1 + completion_mode_min_threads(cfg.completion_mode);
        cfg.clusters = 2;
        cfg.log = quiet_log;
        ck_assert_int_eq(engine_new(&e, &cfg), 0);
        struct harness_ring h;
        ring_open(&h, e, 256, 256, 0);
        struct harness_task hold = spin_aiv0(1000000000);
        struct harness_task dummy = { .block_num = 1 };
        harness_add_task(&h, &hold);
        harness_add_task(&h, &dummy);
        producer_arm_task_wait(&h.prod, 1);
        ck_assert_uint_eq(atomic_load(&h.sh->task_waiting), 2);
        harness_publish(&h);
        struct pollfd p = { .fd = h.efd, .events = POLLIN };
        ck_assert_msg(poll(&p, 1, WAIT_MS) == 1, "%s: no byte for task 1 within %d ms", policy, WAIT_MS);
        ck_assert_msg(atomic_load(&h.ch->completed_watermark) == 0,
                      "%s: the byte came only once the watermark passed task 0", policy);
        char byte;
        ck_assert_int_eq(read(h.efd, &byte, 1), 1);
        ck_assert_uint_eq(atomic_load(&h.sh->task_waiting), 0);

        const uint64_t never[] = { 5, UINT64_MAX - 5 };
        for (unsigned i = 0; i < 2; i++) {
                producer_arm_task_wait(&h.prod, never[i]);
                harness_add_task(&h, &dummy); /* tasks 2, 3: a visit's walk each */
                harness_publish(&h);
                struct ring_stats rs = { 0 };
                for (int64_t end = clock_now_ms() + WAIT_MS; rs.completed < 2 + i && clock_now_ms() < end;
                     usleep(1000))
                        ring_stats(h.ring, &rs);
                ck_assert_uint_ge(rs.completed, 2 + i);
                ck_assert_msg(poll(&p, 1, 100) == 0, "%s: a byte for task %llu, which never ran", policy,
                              (unsigned long long)never[i]);
                ck_assert_uint_eq(atomic_load(&h.sh->task_waiting), never[i] + 1);
                producer_disarm_task_wait(&h.prod);
                ck_assert_uint_eq(atomic_load(&h.sh->task_waiting), 0);
        }
        harness_ring_destroy(&h);
        engine_free(e);
}
END_TEST

/* One case per area, so CK_RUN_CASE=<area> runs one area. */
static Suite *suite(void) {
        Suite *s = suite_create("engine_wakeups");
        TCase *tc = behaviour_case(s, "idle");
        tcase_add_test(tc, idle_engine_parks);
        tcase_add_test(tc, need_wakeup_saves_doorbells);
        tcase_add_test(tc, woken_thread_clears_idle_rings_flags);
        tcase_add_test(tc, window_waiter_signalled);
        tcase_add_test(tc, watermark_waiter_signalled);
        tcase_add_loop_test(tc, task_waiter_signalled, 0, (int)completion_mode_count());
        tcase_add_test(tc, published_beside_long_task_runs);
        tcase_add_loop_test(tc, graph_retires_before_long_successor, 0, (int)completion_mode_count());
        tcase_add_test(tc, spinning_threads_capped);
        tcase_add_loop_test(tc, awake_threads_capped, 0, 3);
        tcase_add_test(tc, small_surplus_wakes_nobody);
        return s;
}

const struct check_main check_main = { .suite = suite };
