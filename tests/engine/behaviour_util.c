/* SPDX-License-Identifier: MIT */
/*
 * behaviour_util.c: what the engine behaviour tests share
 * (behaviour_util.h).
 */
#include "tests/engine/behaviour_util.h"

#include <check.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "daemon/engine/engine_stats.h"
#include "daemon/engine/kernels.h"
#include "shm/layout.h"
#include "tests/test_util.h"

_Atomic unsigned log_lines;        /* stall reports */
_Atomic unsigned host_stall_lines; /* of those: at a host task */
_Atomic unsigned graph_fail_lines;

void quiet_log(void *ud, int priority, const struct hbg_log_fields *f, const char *fmt, va_list ap) {
        (void)ud;
        (void)priority;
        (void)f;
        char buf[512];
        vsnprintf(buf, sizeof(buf), fmt, ap);
        if (strstr(buf, "no progress for"))
                atomic_fetch_add(&log_lines, 1);
        if (strstr(buf, "no progress for") &&
            strstr(buf, "frontier task is a host task waiting for its host function's result"))
                atomic_fetch_add(&host_stall_lines, 1);
        if (strstr(buf, ": graph ") && strstr(buf, "failed:"))
                atomic_fetch_add(&graph_fail_lines, 1);
}

unsigned test_scale(void) {
        return test_scale_or(1);
}

void sleep_ms(long ms) {
        struct timespec ts = { .tv_sec = ms / 1000, .tv_nsec = (ms % 1000) * 1000000 };
        while (nanosleep(&ts, &ts) != 0)
                ;
}

struct hbg_engine *engine_new_with(unsigned threads, unsigned clusters, uint64_t stall_ms) {
        struct hbg_engine_config cfg;
        struct hbg_engine *e = NULL;
        engine_config_default(&cfg);
        cfg.threads = threads;
        cfg.clusters = clusters;
        cfg.stall_timeout_ms = stall_ms;
        cfg.log = quiet_log;
        ck_assert_int_eq(engine_new(&e, &cfg), 0);
        ck_assert_ptr_nonnull(e);
        return e;
}

/* A ring in fair share `share` (weight 0: 1, as harness_ring_init()). */
void ring_open_share(struct harness_ring *h, struct hbg_engine *e, uint64_t d, uint64_t f, uint64_t first_id,
                     uint32_t share) {
        struct hbg_geometry_request req;
        geometry_request_default(&req);
        req.task_window = d;
        req.flag_window = f;
        req.heap_size = 1u << 20;
        req.graph_table_entries = 64;
        req.mailbox_entries = 64;
        ck_assert_int_eq(harness_ring_init_share(h, e, &req, first_id, share, 0), 0);
}

void ring_open(struct harness_ring *h, struct hbg_engine *e, uint64_t d, uint64_t f, uint64_t first_id) {
        ring_open_share(h, e, d, f, first_id, 0);
}

void stats_sum(struct hbg_engine *e, struct hbg_thread_stats *s) {
        memset(s, 0, sizeof(*s));
        for (unsigned i = 0; i < engine_threads(e); i++) {
                struct hbg_thread_stats t;
                engine_thread_stats(e, i, &t);
                s->classified += t.classified;
                s->batch_linked += t.batch_linked;
                s->dispatched += t.dispatched;
                s->executed_tasks += t.executed_tasks;
                s->continued += t.continued;
                s->stolen += t.stolen;
                s->retired_inline += t.retired_inline;
                s->failed += t.failed;
                s->published += t.published;
                s->failsafe_pushes += t.failsafe_pushes;
                s->failsafe_retries += t.failsafe_retries;
                s->watermark_advances += t.watermark_advances;
                s->watermark_cas_failures += t.watermark_cas_failures;
                s->parks += t.parks;
                s->wakeups += t.wakeups;
                s->clusters += t.clusters;
        }
}

void wait_graph(struct harness_ring *h, uint64_t k, struct hbg_graph_entry *ge) {
        int rc = harness_wait_graph(h, k, WAIT_MS, ge);
        ck_assert_msg(rc == 0, "graph %llu not retired within %d ms", (unsigned long long)k, WAIT_MS);
}

void wait_graph_ok(struct harness_ring *h, uint64_t k) {
        struct hbg_graph_entry ge;
        wait_graph(h, k, &ge);
        ck_assert_msg(ge.status == 0, "graph %llu failed: %d at task %llu", (unsigned long long)k,
                      ge.status, (unsigned long long)ge.first_error_task);
}

void fill_host(struct harness_ring *h, uint64_t off, uint64_t n, float v) {
        for (uint64_t i = 0; i < n; i++)
                harness_f32(h, off)[i] = v;
}

bool all_eq(struct harness_ring *h, uint64_t off, uint64_t n, float v) {
        for (uint64_t i = 0; i < n; i++)
                if (memcmp(&harness_f32(h, off)[i], &v, 4) != 0)
                        return false;
        return true;
}

struct harness_task fill_task(uint64_t off, uint64_t n, float v, uint8_t mask, uint16_t blocks) {
        struct harness_task t = { .lane_mask = mask, .block_num = blocks, .n_tensors = 1, .n_scalars = 1 };
        for (unsigned l = 0; l < HBG_LANES; l++)
                if (mask & (1u << l))
                        t.kernel[l] = HBG_KERNEL_FILL_F32;
        t.tensors[0] = harness_tensor(off, n * 4, HBG_DIR_OUT);
        t.scalars[0] = harness_f32_scalar(v);
        return t;
}

struct harness_task spin_task(uint64_t ns, uint16_t blocks) {
        struct harness_task t = { .kernel = { HBG_KERNEL_SPIN_NS }, .lane_mask = 1, .block_num = blocks,
                                  .n_scalars = 1, .scalars = { ns } };
        return t;
}

void add_dep(struct harness_task *t, uint64_t f) {
        ck_assert_uint_lt(t->n_fanins, HBG_MAX_FANINS);
        t->fanins[t->n_fanins++] = f;
}

/* Stream `total` noop AIV tasks of `blocks` blocks in graphs of 500,
 * publishing every 25 tasks; returns the publishes (including those
 * harness_add_task makes when the window is full, and graph records). */
uint64_t stream_tasks(struct harness_ring *h, uint64_t total, uint16_t blocks, uint64_t spin_ns) {
        const unsigned per_graph = 500, per_publish = 25;
        uint64_t publishes = 0, graphs = 0;

        for (uint64_t n = 0; n < total;) {
                for (unsigned i = 0; i < per_graph && n < total; i++, n++) {
                        struct harness_task t = { .kernel = { 0, HBG_KERNEL_NOOP }, .lane_mask = 2,
                                                  .block_num = blocks };
                        if (spin_ns) {
                                t.kernel[1] = HBG_KERNEL_SPIN_NS;
                                t.n_scalars = 1;
                                t.scalars[0] = spin_ns;
                        }
                        if (i % 4 == 3)
                                add_dep(&t, h->prod.next_id - 1);
                        uint64_t before = h->prod.published;
                        harness_add_task(h, &t); /* publishes by itself when the window is full */
                        publishes += h->prod.published != before;
                        if (i % per_publish == per_publish - 1) {
                                before = h->prod.published;
                                harness_publish(h);
                                publishes += h->prod.published != before;
                        }
                }
                uint64_t before = h->prod.published;
                uint64_t k = harness_end_graph(h, graphs);
                publishes += 1 + (h->prod.published != before); /* the record, and any tasks */
                graphs++;
                if (k >= 32)
                        wait_graph_ok(h, k - 32);
        }
        for (uint64_t k = graphs > 32 ? graphs - 32 : 0; k < graphs; k++)
                wait_graph_ok(h, k);
        return publishes;
}

TCase *behaviour_case(Suite *s, const char *name) {
        TCase *tc = tcase_create(name);
        tcase_set_timeout(tc, 300);
        suite_add_tcase(s, tc);
        return tc;
}
