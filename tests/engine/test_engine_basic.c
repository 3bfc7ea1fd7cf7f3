/* SPDX-License-Identifier: MIT */
/* The engine end to end on small graphs, one behaviour per test. */
#include <check.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "daemon/engine/engine.h"
#include "daemon/engine/kernels.h"
#include "tests/engine/harness.h"
#include "tests/check_main.h"

static struct hbg_engine *engine_start(unsigned threads, unsigned clusters) {
        struct hbg_engine_config cfg;
        struct hbg_engine *e = NULL;
        engine_config_default(&cfg);
        cfg.threads = threads;
        cfg.clusters = clusters;
        cfg.stall_timeout_ms = 2000;
        ck_assert_int_eq(engine_new(&e, &cfg), 0);
        return e;
}

static void ring_start(struct harness_ring *h, struct hbg_engine *e, uint64_t d, uint64_t f,
                       uint64_t first_id) {
        struct hbg_geometry_request req;
        geometry_request_default(&req);
        req.task_window = d;
        req.flag_window = f;
        req.heap_size = 4u << 20;
        ck_assert_int_eq(harness_ring_init(h, e, &req, first_id), 0);
}

static uint64_t fill(struct harness_ring *h, uint64_t off, uint64_t n, float v) {
        struct harness_task t = { .kernel = { HBG_KERNEL_FILL_F32 }, .lane_mask = 1, .block_num = 3,
                                  .n_tensors = 1, .n_scalars = 1 };
        t.tensors[0] = harness_tensor(off, n * 4, HBG_DIR_OUT);
        t.scalars[0] = harness_f32_scalar(v);
        return harness_add_task(h, &t);
}

START_TEST(add_then_reduce) {
        struct hbg_engine *e = engine_start(4, 8);
        struct harness_ring h;
        ring_start(&h, e, 1024, 256, 0);
        uint64_t n = 1000;
        uint64_t a = harness_alloc(&h, n * 4), b = harness_alloc(&h, n * 4), c = harness_alloc(&h, n * 4);
        uint64_t s = harness_alloc(&h, 4);
        uint64_t ta = fill(&h, a, n, 1.5f), tb = fill(&h, b, n, 2.0f);
        struct harness_task add = { .kernel = { 0, HBG_KERNEL_ADD_F32 }, .lane_mask = 2, .block_num = 7,
                                    .n_fanins = 2, .fanins = { ta, tb }, .n_tensors = 3 };
        add.tensors[0] = harness_tensor(a, n * 4, HBG_DIR_IN);
        add.tensors[1] = harness_tensor(b, n * 4, HBG_DIR_IN);
        add.tensors[2] = harness_tensor(c, n * 4, HBG_DIR_OUT);
        uint64_t tadd = harness_add_task(&h, &add);
        struct harness_task red = { .kernel = { HBG_KERNEL_REDUCE_SUM_F32, HBG_KERNEL_REDUCE_SUM_F32 },
                                    .lane_mask = 3, .block_num = 2, .n_fanins = 1, .fanins = { tadd },
                                    .n_tensors = 2 };
        red.tensors[0] = harness_tensor(c, n * 4, HBG_DIR_IN);
        red.tensors[1] = harness_tensor(s, 4, HBG_DIR_OUT);
        harness_add_task(&h, &red);
        uint64_t k = harness_end_graph(&h, 42);
        struct hbg_graph_entry ge;
        ck_assert_int_eq(harness_wait_graph(&h, k, 10000, &ge), 0);
        ck_assert_int_eq(ge.status, 0);
        ck_assert_uint_eq(ge.graph_id, 42);
        for (uint64_t i = 0; i < n; i++)
                ck_assert_float_eq(harness_f32(&h, c)[i], 3.5f);
        ck_assert_float_eq(harness_f32(&h, s)[0], 3500.0f);
        harness_ring_destroy(&h);
        engine_free(e);
}
END_TEST

/* Many graphs of noop chains through a small window: streaming, slot reuse,
 * the failsafe heap (F < D). */
START_TEST(stream_many_graphs) {
        struct hbg_engine *e = engine_start(4, 4);
        struct harness_ring h;
        ring_start(&h, e, 512, 256, (UINT64_C(1) << 32) - 5000);
        uint64_t last_k = 0;
        for (int g = 0; g < 100; g++) {
                for (int i = 0; i < 300; i++) {
                        struct harness_task t = { .kernel = { HBG_KERNEL_NOOP }, .lane_mask = 1, .block_num = 1 };
                        uint64_t id = h.prod.next_id;
                        if (id > h.first_id) {
                                t.n_fanins = 2;
                                t.fanins[0] = id - 1;
                                t.fanins[1] = id - 1 - (uint64_t)(rand() % (int)(id - h.first_id < 400 ? id - h.first_id : 400));
                        }
                        harness_add_task(&h, &t);
                }
                last_k = harness_end_graph(&h, (uint64_t)g);
        }
        for (uint64_t k = 0; k <= last_k; k++) {
                struct hbg_graph_entry ge;
                ck_assert_int_eq(harness_wait_graph(&h, k, 20000, &ge), 0);
                ck_assert_int_eq(ge.status, 0);
        }
        harness_ring_destroy(&h);
        engine_free(e);
}
END_TEST

static Suite *suite(void) {
        Suite *s = suite_create("engine_basic");
        TCase *tc = tcase_create("basic");
        tcase_set_timeout(tc, 120);
        tcase_add_test(tc, add_then_reduce);
        tcase_add_test(tc, stream_many_graphs);
        suite_add_tcase(s, tc);
        return s;
}

const struct check_main check_main = { .suite = suite };
