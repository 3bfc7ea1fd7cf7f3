/* SPDX-License-Identifier: MIT */
/*
 * The completion policies under stress, one test body run once per policy
 * of the engine's table (eager-batched, eager, lazy, resolver): millions
 * of completions through a tiny flag window (F = 256, D = 1024), so every
 * flag slot is reused thousands of times and ids that complete more than F
 * ahead of the frontier go through the failsafe heap. Tasks are noops and
 * dummies with fanins reaching up to 3F back, in graphs of 20000, three
 * threads on two clusters (a thread without cores, or the resolver, only
 * completes). A graph that does not finish within WAIT_MS is a hang: the
 * watermark froze or a completion was lost.
 *
 * Checked: every graph succeeds; the watermark ends at the last id; every
 * task completed exactly once (ring counters); the failsafe heap was used.
 * 5M completions per policy at scale 1 (HBG_TEST_SCALE divides; sanitizer
 * builds run a twentieth unless told otherwise).
 */
#include <check.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "daemon/engine/engine.h"
#include "daemon/engine/engine_stats.h"
#include "common/kernel_sig.h"
#include "common/clock.h"
#include "tests/engine/harness.h"
#include "tests/test_util.h"
#include "tests/check_main.h"

#define D 1024u
#define F 256u
#define GRAPH 20000u
#define WAIT_MS 120000
#define TOTAL UINT64_C(5000000)

static unsigned scale(void) {
        return test_scale_or(HBG_TEST_BUILD_SCALE > 1 ? 20u : 1u);
}

START_TEST(stress) {
        unsigned mode = (unsigned)_i;
        const char *name = completion_mode_name(mode);
        struct hbg_engine_config cfg;
        struct hbg_engine *e = NULL;
        engine_config_default(&cfg);
        cfg.threads = 3;
        cfg.clusters = 2;
        cfg.completion_mode = mode;
        cfg.stall_timeout_ms = 0;
        ck_assert_int_eq(engine_new(&e, &cfg), 0);

        struct harness_ring h;
        struct hbg_geometry_request req;
        geometry_request_default(&req);
        req.task_window = D;
        req.flag_window = F;
        req.heap_size = 1u << 16;
        req.graph_table_entries = 16;
        /* Ids cross 2^32 halfway. */
        uint64_t first = (UINT64_C(1) << 32) - TOTAL / scale() / 2;
        ck_assert_int_eq(harness_ring_init(&h, e, &req, first), 0);

        struct rng rng = { .s = 0x57e55 ^ (uint64_t)mode };
        uint64_t total = TOTAL / scale(), done = 0;
        int64_t t0 = clock_now_ms();
        uint64_t pending[4], npending = 0;
        while (done < total) {
                uint64_t n = total - done < GRAPH ? total - done : GRAPH;
                uint64_t gfirst = h.prod.next_id;
                for (uint64_t i = 0; i < n; i++) {
                        uint64_t id = h.prod.next_id;
                        struct harness_task t = { .block_num = 1 };
                        if (!rng_chance(&rng, 20)) {
                                t.kernel[0] = HBG_KERNEL_NOOP;
                                t.lane_mask = 1;
                        }
                        unsigned k = rng_below(&rng, 4);
                        for (unsigned j = 0; j < k; j++) {
                                uint64_t back = 1 + rng_below(&rng, 3 * F);
                                if (id - back >= first && id - back >= gfirst)
                                        t.fanins[t.n_fanins++] = id - back;
                        }
                        harness_add_task(&h, &t);
                }
                pending[npending++] = harness_end_graph(&h, done);
                done += n;
                /* Up to four graphs in flight; wait for the oldest. */
                if (npending == 4 || done == total) {
                        for (uint64_t g = 0; g < npending; g++) {
                                struct hbg_graph_entry ge;
                                int rc = harness_wait_graph(&h, pending[g], WAIT_MS, &ge);
                                ck_assert_msg(rc == 0,
                                              "%s: graph %" PRIu64 " did not finish: watermark %" PRIu64
                                              ", next id %" PRIu64,
                                              name, pending[g],
                                              (uint64_t)atomic_load(&h.ch->completed_watermark), h.prod.next_id);
                                ck_assert_msg(ge.status == 0, "%s: graph %" PRIu64 " failed: %d", name,
                                              pending[g], ge.status);
                        }
                        npending = 0;
                }
        }
        struct ring_stats rs;
        ring_stats(h.ring, &rs);
        uint64_t pushes = 0, published = 0;
        for (unsigned i = 0; i < engine_threads(e); i++) {
                struct hbg_thread_stats st;
                engine_thread_stats(e, i, &st);
                pushes += st.failsafe_pushes;
                published += st.published;
        }
        ck_assert_uint_eq(rs.watermark, h.prod.next_id);
        ck_assert_uint_eq(rs.completed, total);
        ck_assert_uint_eq(rs.failed, 0);
        ck_assert_uint_eq(published, total);
        ck_assert_msg(pushes > 0, "%s: F = %u < D = %u but the failsafe heap was never used", name, F, D);
        printf("stress %-8s: %" PRIu64 " completions (ids %" PRIu64 "..%" PRIu64 "), %" PRIu64
               " failsafe pushes, %" PRId64 " ms\n",
               name, total, first, h.prod.next_id - 1, pushes, clock_now_ms() - t0);
        fflush(stdout);
        harness_ring_destroy(&h);
        engine_free(e);
}
END_TEST

static Suite *suite(void) {
        Suite *s = suite_create("engine_stress");
        TCase *tc = tcase_create("stress");
        tcase_set_timeout(tc, 600);
        tcase_add_loop_test(tc, stress, 0, (int)completion_mode_count());
        suite_add_tcase(s, tc);
        return s;
}

const struct check_main check_main = { .suite = suite };
