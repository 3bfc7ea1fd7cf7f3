/* SPDX-License-Identifier: MIT */
/*
 * The engine's counters end to end: the threads' counters add up, with
 * failures too, and stay once their ring is removed; a task's ready stamp
 * is its own (helpers: behaviour_util.h).
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

/*
 * A task made ready by a completion takes the end of the run that
 * completed its input as its ready stamp (no second read of the counter,
 * daemon/engine/sched.h); that tick is the thread's only while it hands
 * the dependants on. A task the same thread makes ready 300 ms later, at
 * its ingest, must not take it: its wait would read 300 ms. The chain's
 * own waits are counted, one a task, and add up to less than its graph
 * took.
 */
START_TEST(ready_stamp_of_a_later_task) {
        struct hbg_engine *e = engine_new_with(1, 2, 10000);
        struct harness_ring h;
        ring_open(&h, e, 1024, 1024, 1);
        const uint64_t n = 64;
        int64_t t0 = clock_now_ns();
        for (uint64_t i = 0; i < n; i++) {
                struct harness_task t = { .kernel = { 0, HBG_KERNEL_NOOP }, .lane_mask = 2, .block_num = 1 };
                if (i > 0)
                        add_dep(&t, h.prod.next_id - 1);
                harness_add_task(&h, &t);
        }
        wait_graph_ok(&h, harness_end_graph(&h, 0));
        int64_t chain_ns = clock_now_ns() - t0;
        struct ktime_snapshot noop;
        engine_kernel_times(e, kernel_lookup(HBG_KERNEL_NOOP)->index, &noop);
        ck_assert_uint_eq(noop.tasks, n);
        ck_assert_msg(noop.wait.sum_ns <= (uint64_t)chain_ns, "the chain's waits add up to %" PRIu64
                      " ns, its graph took %" PRId64, noop.wait.sum_ns, chain_ns);

        sleep_ms(300);
        struct harness_task later = { .kernel = { 0, HBG_KERNEL_SPIN_NS }, .lane_mask = 2, .block_num = 1,
                                      .n_scalars = 1, .scalars = { 0 } };
        harness_add_task(&h, &later);
        wait_graph_ok(&h, harness_end_graph(&h, 1));
        struct ktime_snapshot spin;
        engine_kernel_times(e, kernel_lookup(HBG_KERNEL_SPIN_NS)->index, &spin);
        ck_assert_uint_eq(spin.tasks, 1);
        ck_assert_msg(spin.wait.sum_ns < 150000000, "a task made ready 300 ms after the chain waited %" PRIu64
                      " ns: the chain's last end tick was its ready stamp", spin.wait.sum_ns);
        harness_ring_destroy(&h);
        engine_free(e);
}
END_TEST

/* ------------------------------------------------------------ counters */

/*
 * A workload without failures or external tasks, through a window that
 * wraps (F < D, more tasks than D): every task is classified and published
 * once and ends in exactly one of executed / retired without running.
 */
START_TEST(counters_add_up) {
        struct hbg_engine *e = engine_new_with(3, 4, 10000);
        struct harness_ring h;
        ring_open(&h, e, 512, 256, 100);
        uint64_t pz = harness_alloc(&h, 4), p1 = harness_alloc(&h, 4);
        harness_f32(&h, pz)[0] = 0.0f;
        harness_f32(&h, p1)[0] = 1.0f;
        uint64_t tasks = 0, kernels = 0, blocks = 0, no_run = 0;
        const int graphs = 20;
        for (int g = 0; g < graphs; g++) {
                for (int i = 0; i < 250; i++) {
                        struct harness_task t = { .kernel = { 0, HBG_KERNEL_NOOP }, .lane_mask = 2,
                                                  .block_num = (uint16_t)(1 + i % 3) };
                        int kind = (i * 7 + g) % 6;
                        if (kind == 1)
                                t = (struct harness_task){ .flags = HBG_TASK_HOST_INLINE };
                        else if (kind == 2)
                                t = (struct harness_task){ 0 }; /* dummy */
                        else if (kind == 3) {
                                t.flags = HBG_TASK_HAS_PREDICATE;
                                t.predicate_offset = (i & 1) ? pz : p1;
                        } else if (kind == 4) {
                                t.lane_mask = 7; /* MIX */
                                t.kernel[0] = t.kernel[1] = t.kernel[2] = HBG_KERNEL_NOOP;
                        }
                        if (i > 0)
                                add_dep(&t, h.prod.next_id - 1 - (uint64_t)(i % 5 == 0 && i > 3 ? 3 : 0));
                        harness_add_task(&h, &t);
                        tasks++;
                        bool pred_off = kind == 3 && (i & 1);
                        if (kind == 1 || kind == 2 || pred_off) {
                                no_run++;
                        } else {
                                kernels++;
                                blocks += t.block_num;
                        }
                }
                harness_end_graph(&h, (uint64_t)g);
        }
        for (int g = 0; g < graphs; g++)
                wait_graph_ok(&h, (uint64_t)g);
        struct hbg_thread_stats s;
        stats_sum(e, &s);
        struct ring_stats rs;
        ring_stats(h.ring, &rs);
        ck_assert_uint_eq(s.classified, tasks);
        ck_assert_uint_eq(s.published, tasks);
        ck_assert_uint_eq(s.failed, 0);
        ck_assert_uint_eq(s.executed_tasks + s.retired_inline + s.failed, tasks);
        ck_assert_uint_eq(s.executed_tasks, kernels);
        ck_assert_uint_eq(s.retired_inline, no_run);
        ck_assert_uint_eq(s.dispatched, blocks);
        ck_assert_uint_eq(rs.completed, tasks);
        ck_assert_uint_eq(rs.failed, 0);
        ck_assert_uint_eq(rs.classified, 100 + tasks);
        ck_assert_uint_eq(rs.watermark, 100 + tasks);
        ck_assert_uint_eq(rs.graphs_retired, (uint64_t)graphs);
        ck_assert_uint_eq(rs.graphs_failed, 0);
        /* The only ring: its counters are the threads' (hbgctl sessions
         * against hbgctl threads). */
        struct ring_counters rc;
        ring_counters(h.ring, &rc);
        ck_assert_uint_eq(rc.dispatched, blocks);
        ck_assert_uint_eq(rc.published, tasks);
        ck_assert_uint_eq(rc.failsafe_pushes, s.failsafe_pushes);
        ck_assert_uint_eq(rc.failsafe_retries, s.failsafe_retries);
        ck_assert_uint_eq(rc.watermark_advances, s.watermark_advances);
        ck_assert_uint_gt(rc.watermark_advances, 0);
        ck_assert_uint_eq(rc.watermark_cas_failures, s.watermark_cas_failures);
        harness_ring_destroy(&h);
        engine_free(e);
}
END_TEST

/*
 * The same with failures and external tasks, against the meaning of each
 * counter in daemon/engine/engine_stats.h: executed_tasks = kernel tasks whose last
 * block ran (a failing kernel included), retired_inline = dummies,
 * host-inline, false predicates and skipped tasks, failed = tasks failed
 * by validation or by their kernel. External tasks completed by the
 * client are in neither of the first two.
 */
START_TEST(counters_with_failures) {
        struct hbg_engine *e = engine_new_with(2, 2, 10000);
        struct harness_ring h;
        ring_open(&h, e, 256, 256, 0);
        uint64_t o = harness_alloc(&h, 64);
        uint64_t ran = 0, no_run = 0, skipped = 0, invalid = 0, kernel_failed = 0, externals = 0, tasks = 0;

        for (int g = 0; g < 5; g++) {
                struct harness_task ok = fill_task(o, 16, 1.0f, 1, 2);
                uint64_t t_ok = harness_add_task(&h, &ok);
                ran++;
                struct harness_task bad = fill_task(o, 16, 1.0f, 1, 2);
                bad.kernel[0] = 99;
                uint64_t t_bad = harness_add_task(&h, &bad);
                invalid++;
                struct harness_task f = { .kernel = { HBG_KERNEL_FAIL }, .lane_mask = 1, .block_num = 2,
                                          .n_scalars = 1, .scalars = { (uint64_t)(int64_t)-EIO } };
                uint64_t t_f = harness_add_task(&h, &f);
                ran++;
                kernel_failed++;
                struct harness_task s1 = fill_task(o, 16, 2.0f, 2, 1);
                add_dep(&s1, t_bad);
                harness_add_task(&h, &s1);
                skipped++;
                struct harness_task s2 = { .n_fanins = 1, .fanins = { t_f } };
                uint64_t t_s2 = harness_add_task(&h, &s2);
                skipped++;
                struct harness_task s3 = { .flags = HBG_TASK_HOST_INLINE, .n_fanins = 1, .fanins = { t_s2 } };
                harness_add_task(&h, &s3);
                skipped++;
                struct harness_task x = { .flags = HBG_TASK_EXTERNAL, .n_fanins = 1, .fanins = { t_ok } };
                harness_add_task(&h, &x);
                externals++;
                struct harness_task d = { .n_fanins = 1, .fanins = { t_ok } };
                harness_add_task(&h, &d);
                no_run++;
                tasks += 8;
                struct hbg_graph_entry ge;
                wait_graph(&h, harness_end_graph(&h, (uint64_t)g), &ge);
                ck_assert_int_eq(ge.status, -ENOENT);
                ck_assert_uint_eq(ge.first_error_task, t_bad);
        }
        struct hbg_thread_stats s;
        stats_sum(e, &s);
        struct ring_stats rs;
        ring_stats(h.ring, &rs);
        fprintf(stderr,
                "counters_with_failures: tasks %llu: classified %llu published %llu executed %llu "
                "retired_inline %llu failed %llu (ran %llu, no-run %llu, skipped %llu, invalid %llu, "
                "kernel failed %llu, external %llu)\n",
                (unsigned long long)tasks, (unsigned long long)s.classified,
                (unsigned long long)s.published, (unsigned long long)s.executed_tasks,
                (unsigned long long)s.retired_inline, (unsigned long long)s.failed,
                (unsigned long long)ran, (unsigned long long)no_run, (unsigned long long)skipped,
                (unsigned long long)invalid, (unsigned long long)kernel_failed,
                (unsigned long long)externals);
        ck_assert_uint_eq(s.classified, tasks);
        ck_assert_uint_eq(s.published, tasks);
        ck_assert_uint_eq(s.executed_tasks, ran);
        ck_assert_uint_eq(s.retired_inline, no_run + skipped);
        /* Ring counter: "tasks failed or skipped". */
        ck_assert_uint_eq(rs.failed, invalid + kernel_failed + skipped);
        ck_assert_uint_eq(rs.completed, tasks);
        /* Thread counter: "tasks failed (validation or kernel)". */
        ck_assert_msg(s.failed == invalid + kernel_failed,
                      "thread stats count %llu failed tasks; engine_stats.h defines failed as "
                      "validation or kernel failures: %llu (skipped tasks: %llu)",
                      (unsigned long long)s.failed, (unsigned long long)(invalid + kernel_failed),
                      (unsigned long long)skipped);
        harness_ring_destroy(&h);
        engine_free(e);
}
END_TEST

/*
 * A removed ring's counters stay in its threads' totals while the ring
 * waits to be freed (a thread or the owner still holds it), and after it
 * was folded in: no counter goes down in between (hbgctl metrics' counters
 * must only grow).
 */
START_TEST(counters_keep_removed_rings) {
        struct hbg_engine *e = engine_new_with(2, 2, 10000);
        struct harness_ring h;
        ring_open(&h, e, 512, 256, 0);
        for (int i = 0; i < 200; i++) {
                struct harness_task t = { .kernel = { 0, HBG_KERNEL_NOOP }, .lane_mask = 2, .block_num = 1 };
                harness_add_task(&h, &t);
        }
        wait_graph_ok(&h, harness_end_graph(&h, 1));
        struct hbg_thread_stats s0, s1, s2;
        stats_sum(e, &s0);
        ck_assert_uint_eq(s0.published, 200);

        struct hbg_ring *r = h.ring;
        ring_hold(e, r);
        engine_ring_remove(e, r, -ESHUTDOWN);
        h.ring = NULL;
        engine_collect(e);
        ck_assert_uint_eq(engine_rings_removed(e), 1);
        stats_sum(e, &s1);
        ring_unhold(e, r);
        while (!atomic_load_explicit(&h.released, memory_order_acquire))
                engine_collect(e);
        stats_sum(e, &s2);
        const struct {
                const char *name;
                uint64_t before, held, freed;
        } c[] = {
                { "published", s0.published, s1.published, s2.published },
                { "dispatched", s0.dispatched, s1.dispatched, s2.dispatched },
                { "failsafe_pushes", s0.failsafe_pushes, s1.failsafe_pushes, s2.failsafe_pushes },
                { "failsafe_retries", s0.failsafe_retries, s1.failsafe_retries, s2.failsafe_retries },
                { "watermark_advances", s0.watermark_advances, s1.watermark_advances, s2.watermark_advances },
                { "watermark_cas_failures", s0.watermark_cas_failures, s1.watermark_cas_failures,
                  s2.watermark_cas_failures },
        };
        for (size_t i = 0; i < sizeof(c) / sizeof(c[0]); i++)
                ck_assert_msg(c[i].held >= c[i].before && c[i].freed >= c[i].held,
                              "%s went down: %" PRIu64 " before the removal, %" PRIu64 " while held, %" PRIu64
                              " once freed",
                              c[i].name, c[i].before, c[i].held, c[i].freed);
        harness_ring_destroy(&h);
        engine_free(e);
}
END_TEST

/* One case per area, so CK_RUN_CASE=<area> runs one area. */
static Suite *suite(void) {
        Suite *s = suite_create("engine_counters");
        TCase *tc = behaviour_case(s, "counters");
        tcase_add_test(tc, counters_add_up);
        tcase_add_test(tc, counters_with_failures);
        tcase_add_test(tc, counters_keep_removed_rings);
        tcase_add_test(tc, ready_stamp_of_a_later_task);
        return s;
}

const struct check_main check_main = { .suite = suite };
