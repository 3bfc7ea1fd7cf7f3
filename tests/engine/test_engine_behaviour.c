/* SPDX-License-Identifier: MIT */
/*
 * Engine behaviour end to end, one behaviour per test: host-inline tasks,
 * predicates, external tasks and the mailbox, the stall detector, protocol
 * errors that stop a ring, parking and NEED_WAKEUP, configuration limits,
 * ring add/remove, and the counters.
 *
 * HBG_TEST_SCALE=N (default 1) divides the size of the streaming workload.
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
#include "tests/engine/harness.h"
#include "tests/test_util.h"
#include "common/clock.h"
#include "tests/check_main.h"

#define WAIT_MS 20000

/* ------------------------------------------------------------ helpers */

static _Atomic unsigned log_lines;      /* stall reports */
static _Atomic unsigned host_stall_lines; /* of those: at a host task */
static _Atomic unsigned graph_fail_lines;

static void quiet_log(void *ud, int priority, const struct hbg_log_fields *f, const char *fmt, va_list ap) {
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

static unsigned test_scale(void) {
        return test_scale_or(1);
}

static void sleep_ms(long ms) {
        struct timespec ts = { .tv_sec = ms / 1000, .tv_nsec = (ms % 1000) * 1000000 };
        while (nanosleep(&ts, &ts) != 0)
                ;
}

static struct hbg_engine *engine_new_with(unsigned threads, unsigned clusters, uint64_t stall_ms) {
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
static void ring_open_share(struct harness_ring *h, struct hbg_engine *e, uint64_t d, uint64_t f,
                            uint64_t first_id, uint32_t share) {
        struct hbg_geometry_request req;
        geometry_request_default(&req);
        req.task_window = d;
        req.flag_window = f;
        req.heap_size = 1u << 20;
        req.graph_table_entries = 64;
        req.mailbox_entries = 64;
        ck_assert_int_eq(harness_ring_init_share(h, e, &req, first_id, share, 0), 0);
}

static void ring_open(struct harness_ring *h, struct hbg_engine *e, uint64_t d, uint64_t f,
                      uint64_t first_id) {
        ring_open_share(h, e, d, f, first_id, 0);
}

static void stats_sum(struct hbg_engine *e, struct hbg_thread_stats *s) {
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

static void wait_graph(struct harness_ring *h, uint64_t k, struct hbg_graph_entry *ge) {
        int rc = harness_wait_graph(h, k, WAIT_MS, ge);
        ck_assert_msg(rc == 0, "graph %llu not retired within %d ms", (unsigned long long)k, WAIT_MS);
}

static void wait_graph_ok(struct harness_ring *h, uint64_t k) {
        struct hbg_graph_entry ge;
        wait_graph(h, k, &ge);
        ck_assert_msg(ge.status == 0, "graph %llu failed: %d at task %llu", (unsigned long long)k,
                      ge.status, (unsigned long long)ge.first_error_task);
}

/* Poll the graph table without serving external tasks (a client that
 * never answers). 0 and the entry, or -ETIMEDOUT. */
static int poll_graph(struct harness_ring *h, uint64_t k, int timeout_ms, struct hbg_graph_entry *ret) {
        struct hbg_graph_entry *e = (struct hbg_graph_entry *)(void *)((char *)h->cpl + h->g.cpl_graphs_offset) +
                                    (k & (h->g.graph_table_entries - 1));
        int64_t deadline = clock_now_ms() + timeout_ms;
        while (layout_graph_entry_read(e, k, ret) != 0) {
                if (clock_now_ms() > deadline)
                        return -ETIMEDOUT;
                sleep_ms(2);
        }
        return 0;
}

static void fill_host(struct harness_ring *h, uint64_t off, uint64_t n, float v) {
        for (uint64_t i = 0; i < n; i++)
                harness_f32(h, off)[i] = v;
}

static bool all_eq(struct harness_ring *h, uint64_t off, uint64_t n, float v) {
        for (uint64_t i = 0; i < n; i++)
                if (memcmp(&harness_f32(h, off)[i], &v, 4) != 0)
                        return false;
        return true;
}

static struct harness_task fill_task(uint64_t off, uint64_t n, float v, uint8_t mask, uint16_t blocks) {
        struct harness_task t = { .lane_mask = mask, .block_num = blocks, .n_tensors = 1, .n_scalars = 1 };
        for (unsigned l = 0; l < HBG_LANES; l++)
                if (mask & (1u << l))
                        t.kernel[l] = HBG_KERNEL_FILL_F32;
        t.tensors[0] = harness_tensor(off, n * 4, HBG_DIR_OUT);
        t.scalars[0] = harness_f32_scalar(v);
        return t;
}

static struct harness_task copy_task(uint64_t in, uint64_t out, uint64_t n) {
        struct harness_task t = { .kernel = { 0, HBG_KERNEL_COPY_F32 }, .lane_mask = 2, .block_num = 2,
                                  .n_tensors = 2 };
        t.tensors[0] = harness_tensor(in, n * 4, HBG_DIR_IN);
        t.tensors[1] = harness_tensor(out, n * 4, HBG_DIR_OUT);
        return t;
}

static struct harness_task spin_task(uint64_t ns, uint16_t blocks) {
        struct harness_task t = { .kernel = { HBG_KERNEL_SPIN_NS }, .lane_mask = 1, .block_num = blocks,
                                  .n_scalars = 1, .scalars = { ns } };
        return t;
}

/* One block of spin_ns on lane AIV0 (mask 2): the long tasks below that
 * hold a watermark back or follow a graph. */
static struct harness_task spin_aiv0(uint64_t ns) {
        struct harness_task t = { .kernel = { 0, HBG_KERNEL_SPIN_NS }, .lane_mask = 2, .block_num = 1,
                                  .n_scalars = 1, .scalars = { ns } };
        return t;
}

static void add_dep(struct harness_task *t, uint64_t f) {
        ck_assert_uint_lt(t->n_fanins, HBG_MAX_FANINS);
        t->fanins[t->n_fanins++] = f;
}

static struct hbg_mailbox_entry *mailbox(struct harness_ring *h) {
        return (struct hbg_mailbox_entry *)(void *)((char *)h->sub + h->g.sub_mailbox_offset);
}

/* Post a mailbox completion by hand, as a (buggy) client would. */
static void post_mailbox(struct harness_ring *h, uint64_t id, int status) {
        uint64_t k = atomic_fetch_add(&h->prod.mailbox_next, 1);
        struct hbg_mailbox_entry *e = &mailbox(h)[k & (h->g.mailbox_entries - 1)];
        e->task_id = id;
        e->status = status;
        e->reserved0 = 0;
        e->reserved1 = 0;
        atomic_store_explicit(&e->seq, k + 1, memory_order_release);
        atomic_store(&h->sh->mailbox_tail, k + 1);
        if (atomic_load(&h->ch->need_wakeup)) {
                h->doorbells++;
                ring_kick(h->ring);
        }
}

/* ------------------------------------------------------------ host-inline */

START_TEST(host_inline_completes_without_dispatch) {
        struct hbg_engine *e = engine_new_with(2, 2, 10000);
        struct harness_ring h;
        ring_open(&h, e, 1024, 1024, 0);
        uint64_t out = harness_alloc(&h, 256 * 4), out2 = harness_alloc(&h, 256 * 4);
        fill_host(&h, out, 256, -1.0f);
        fill_host(&h, out2, 256, -1.0f);
        struct hbg_thread_stats s0, s1, s2;
        stats_sum(e, &s0);

        /* Graph A: host-inline tasks only, chained and independent. */
        uint64_t prev = 0;
        for (int i = 0; i < 10; i++) {
                struct harness_task t = { .flags = HBG_TASK_HOST_INLINE };
                if (i % 3 != 0)
                        add_dep(&t, prev);
                if (i >= 4)
                        add_dep(&t, prev - 2);
                prev = harness_add_task(&h, &t);
        }
        wait_graph_ok(&h, harness_end_graph(&h, 1));
        stats_sum(e, &s1);
        ck_assert_uint_eq(s1.dispatched, s0.dispatched);
        ck_assert_uint_eq(s1.executed_tasks, s0.executed_tasks);
        ck_assert_uint_eq(s1.retired_inline, s0.retired_inline + 10);
        ck_assert_uint_eq(s1.classified, s0.classified + 10);
        ck_assert_uint_eq(s1.failed, 0);

        /* Graph B: kernels depending on host-inline tasks (and one of the
         * previous graph), host-inline depending on a kernel. */
        struct harness_task hi = { .flags = HBG_TASK_HOST_INLINE };
        uint64_t t_hi = harness_add_task(&h, &hi);
        struct harness_task k1 = fill_task(out, 256, 6.0f, 2, 4);
        add_dep(&k1, t_hi);
        add_dep(&k1, prev);
        uint64_t t_k1 = harness_add_task(&h, &k1);
        struct harness_task hi2 = { .flags = HBG_TASK_HOST_INLINE };
        add_dep(&hi2, t_k1);
        uint64_t t_hi2 = harness_add_task(&h, &hi2);
        struct harness_task k2 = copy_task(out, out2, 256);
        add_dep(&k2, t_hi2);
        harness_add_task(&h, &k2);
        wait_graph_ok(&h, harness_end_graph(&h, 2));
        ck_assert(all_eq(&h, out, 256, 6.0f));
        ck_assert(all_eq(&h, out2, 256, 6.0f));
        stats_sum(e, &s2);
        ck_assert_uint_eq(s2.dispatched, s1.dispatched + 4 + 2);
        ck_assert_uint_eq(s2.executed_tasks, s1.executed_tasks + 2);
        ck_assert_uint_eq(s2.retired_inline, s1.retired_inline + 2);
        ck_assert_uint_eq(s2.failed, 0);
        harness_ring_destroy(&h);
        engine_free(e);
}
END_TEST

/* ------------------------------------------------------------ predicates */

struct ext_count {
        uint64_t first;
        unsigned calls[4096];
        uint64_t order[4096];
        unsigned n;
};

static int count_external(void *ud, uint64_t id) {
        struct ext_count *x = ud;
        ck_assert_uint_ge(id, x->first);
        ck_assert_uint_lt(id - x->first, 4096);
        x->calls[id - x->first]++;
        x->order[x->n++ % 4096] = id;
        return 0;
}

START_TEST(predicates) {
        struct hbg_engine *e = engine_new_with(2, 2, 10000);
        struct harness_ring h;
        ring_open(&h, e, 1024, 256, 77);
        static struct ext_count xc;
        memset(&xc, 0, sizeof(xc));
        xc.first = 77;
        h.external = count_external;
        h.external_userdata = &xc;

        enum { P_ZERO, P_NEGZERO, P_ONE, P_NAN, P_TINY, P_SET0, P_SET5, NP };
        uint64_t p[NP];
        const float init[NP] = { 0.0f, -0.0f, 2.5f, NAN, 1e-40f /* subnormal */, 1.0f, 0.0f };
        for (int i = 0; i < NP; i++) {
                p[i] = harness_alloc(&h, 4);
                harness_f32(&h, p[i])[0] = init[i];
        }
        enum { NO = 10 };
        uint64_t o[NO];
        for (int i = 0; i < NO; i++) {
                o[i] = harness_alloc(&h, 64 * 4);
                fill_host(&h, o[i], 64, -1.0f);
        }
        struct hbg_thread_stats s0, s1;
        stats_sum(e, &s0);

        /* expected: ran or not, per output */
        bool ran[NO] = { false };
        uint64_t ids[NO];
        const struct { int pred; uint8_t mask; bool runs; } cases[] = {
                { P_ZERO, 1, false }, { P_NEGZERO, 2, false }, { P_ONE, 4, true },
                { P_NAN, 1, true },   { P_TINY, 2, true },     { P_ZERO, 7, false },
        };
        unsigned nc = sizeof(cases) / sizeof(cases[0]);
        for (unsigned i = 0; i < nc; i++) {
                struct harness_task t = fill_task(o[i], 64, (float)(i + 1), cases[i].mask, 3);
                t.flags = HBG_TASK_HAS_PREDICATE;
                t.predicate_offset = p[cases[i].pred];
                ids[i] = harness_add_task(&h, &t);
                ran[i] = cases[i].runs;
        }
        /* Predicates written by producers: read when ready, not before. */
        struct harness_task f0 = fill_task(p[P_SET0], 1, 0.0f, 1, 1);
        uint64_t t_f0 = harness_add_task(&h, &f0);
        struct harness_task c0 = fill_task(o[nc], 64, 100.0f, 2, 2);
        c0.flags = HBG_TASK_HAS_PREDICATE;
        c0.predicate_offset = p[P_SET0];
        add_dep(&c0, t_f0);
        ids[nc] = harness_add_task(&h, &c0);
        ran[nc] = false;
        struct harness_task f5 = fill_task(p[P_SET5], 1, 5.0f, 1, 1);
        uint64_t t_f5 = harness_add_task(&h, &f5);
        struct harness_task c5 = fill_task(o[nc + 1], 64, 101.0f, 4, 2);
        c5.flags = HBG_TASK_HAS_PREDICATE;
        c5.predicate_offset = p[P_SET5];
        add_dep(&c5, t_f5);
        ids[nc + 1] = harness_add_task(&h, &c5);
        ran[nc + 1] = true;
        /* A task depending on a predicated-off task runs: not a failure. */
        struct harness_task dep = fill_task(o[nc + 2], 64, 102.0f, 1, 1);
        add_dep(&dep, ids[0]);
        add_dep(&dep, ids[nc]);
        ids[nc + 2] = harness_add_task(&h, &dep);
        ran[nc + 2] = true;
        /* External tasks: false predicate → never handed over. */
        struct harness_task ex0 = { .flags = HBG_TASK_EXTERNAL | HBG_TASK_HAS_PREDICATE,
                                    .predicate_offset = p[P_ZERO] };
        uint64_t t_ex0 = harness_add_task(&h, &ex0);
        struct harness_task ex1 = { .flags = HBG_TASK_EXTERNAL | HBG_TASK_HAS_PREDICATE,
                                    .predicate_offset = p[P_ONE] };
        uint64_t t_ex1 = harness_add_task(&h, &ex1);
        wait_graph_ok(&h, harness_end_graph(&h, 5));

        unsigned off = 0, on = 0;
        for (unsigned i = 0; i < nc + 3; i++) {
                float want = ran[i] ? (i < nc ? (float)(i + 1) : 100.0f + (float)(i - nc)) : -1.0f;
                ck_assert_msg(all_eq(&h, o[i], 64, want), "predicate case %u (task %llu): %s", i,
                              (unsigned long long)ids[i], ran[i] ? "did not run" : "ran");
                if (ran[i])
                        on++;
                else
                        off++;
        }
        ck_assert_uint_eq(xc.calls[t_ex0 - 77], 0);
        ck_assert_uint_eq(xc.calls[t_ex1 - 77], 1);
        ck_assert_uint_eq(xc.n, 1);
        stats_sum(e, &s1);
        /* Predicated-off tasks retire without running. */
        ck_assert_uint_eq(s1.retired_inline - s0.retired_inline, off + 1 /* ex0 */);
        ck_assert_uint_eq(s1.executed_tasks - s0.executed_tasks, on + 2 /* f0, f5 */);
        ck_assert_uint_eq(s1.failed, 0);
        harness_ring_destroy(&h);
        engine_free(e);
}
END_TEST

/* ------------------------------------------------------------ external */

#define EXT_MAX 4096

struct ext_ctx {
        struct harness_ring *h;
        uint64_t first;
        unsigned calls[EXT_MAX];
        unsigned pos[EXT_MAX];      /* call position + 1 */
        int status[EXT_MAX];        /* to report */
        bool is_external[EXT_MAX];
        uint64_t deps[EXT_MAX][4];  /* external ids that must come first */
        unsigned n_deps[EXT_MAX];
        bool write[EXT_MAX];        /* the callback writes 16 f32 at write_off */
        uint64_t write_off[EXT_MAX];
        float write_val[EXT_MAX];
        bool check[EXT_MAX];        /* the callback must see 16 f32 at check_off */
        uint64_t check_off[EXT_MAX];
        float check_val[EXT_MAX];
        unsigned n;
};

static int ext_callback(void *ud, uint64_t id) {
        struct ext_ctx *x = ud;
        ck_assert_uint_ge(id, x->first);
        uint64_t i = id - x->first;
        ck_assert_uint_lt(i, EXT_MAX);
        ck_assert_msg(x->is_external[i], "task %llu handed over but not external", (unsigned long long)id);
        x->calls[i]++;
        x->pos[i] = ++x->n;
        for (unsigned d = 0; d < x->n_deps[i]; d++) {
                uint64_t di = x->deps[i][d] - x->first;
                ck_assert_msg(x->pos[di] != 0 && x->pos[di] < x->pos[i],
                              "external %llu handed over before its dependency %llu",
                              (unsigned long long)id, (unsigned long long)x->deps[i][d]);
        }
        if (x->check[i])
                ck_assert_msg(all_eq(x->h, x->check_off[i], 16, x->check_val[i]),
                              "external %llu does not see its producer's output", (unsigned long long)id);
        if (x->write[i])
                fill_host(x->h, x->write_off[i], 16, x->write_val[i]);
        return x->status[i];
}

static uint64_t add_external(struct harness_ring *h, struct ext_ctx *x, const uint64_t *fanins, unsigned nf,
                             int status) {
        struct harness_task t = { .flags = HBG_TASK_EXTERNAL };
        for (unsigned i = 0; i < nf; i++)
                add_dep(&t, fanins[i]);
        uint64_t id = h->prod.next_id;
        ck_assert_uint_lt(id - x->first, EXT_MAX);
        x->is_external[id - x->first] = true;
        x->status[id - x->first] = status;
        ck_assert_uint_eq(harness_add_task(h, &t), id);
        return id;
}

START_TEST(external_tasks) {
        struct hbg_engine *e = engine_new_with(2, 2, 10000);
        struct harness_ring h;
        const uint64_t first = (UINT64_C(1) << 32) - 40; /* cross the 32-bit stamp boundary */
        ring_open(&h, e, 256, 256, first);
        static struct ext_ctx x;
        memset(&x, 0, sizeof(x));
        x.h = &h;
        x.first = first;
        h.external = ext_callback;
        h.external_userdata = &x;

        enum { rounds = 40 };
        uint64_t ys[rounds], ws[rounds], xs[rounds];
        for (int r = 0; r < rounds; r++) {
                uint64_t xb = harness_alloc(&h, 64), yb = harness_alloc(&h, 64);
                uint64_t zb = harness_alloc(&h, 64), wb = harness_alloc(&h, 64);
                fill_host(&h, xb, 16, -1.0f);
                fill_host(&h, yb, 16, -1.0f);
                fill_host(&h, zb, 16, -1.0f);
                fill_host(&h, wb, 16, -1.0f);
                float v = (float)r + 0.5f;

                /* E1 writes x; K1 copies x to y; E2 (after K1) sees y and
                 * writes z; K2 copies z to w; E3 after E1; E4 after a dummy
                 * joining E2 and E3. */
                uint64_t e1 = add_external(&h, &x, NULL, 0, 0);
                x.write[e1 - first] = true;
                x.write_off[e1 - first] = xb;
                x.write_val[e1 - first] = v;
                struct harness_task k1 = copy_task(xb, yb, 16);
                add_dep(&k1, e1);
                uint64_t t_k1 = harness_add_task(&h, &k1);
                uint64_t e2 = add_external(&h, &x, &t_k1, 1, 0);
                x.deps[e2 - first][x.n_deps[e2 - first]++] = e1;
                x.check[e2 - first] = true;
                x.check_off[e2 - first] = yb;
                x.check_val[e2 - first] = v;
                x.write[e2 - first] = true;
                x.write_off[e2 - first] = zb;
                x.write_val[e2 - first] = v * 2;
                struct harness_task k2 = copy_task(zb, wb, 16);
                add_dep(&k2, e2);
                harness_add_task(&h, &k2);
                uint64_t e3 = add_external(&h, &x, &e1, 1, 0);
                x.deps[e3 - first][x.n_deps[e3 - first]++] = e1;
                struct harness_task dj = { .n_fanins = 2, .fanins = { e2, e3 } };
                uint64_t t_dj = harness_add_task(&h, &dj);
                uint64_t e4 = add_external(&h, &x, &t_dj, 1, 0);
                x.deps[e4 - first][x.n_deps[e4 - first]++] = e2;
                x.deps[e4 - first][x.n_deps[e4 - first]++] = e3;
                struct harness_task last = fill_task(xb, 16, -2.0f, 1, 1);
                add_dep(&last, e4);
                add_dep(&last, e2); /* x is read by K1, which e2 follows */
                harness_add_task(&h, &last);
                uint64_t k = harness_end_graph(&h, (uint64_t)r);
                if (r % 3 == 2) {
                        wait_graph_ok(&h, k - 2);
                        wait_graph_ok(&h, k - 1);
                        wait_graph_ok(&h, k);
                }
                if (r == rounds - 1) {
                        wait_graph_ok(&h, k);
                }
                xs[r] = xb;
                ys[r] = yb;
                ws[r] = wb;
        }
        for (int r = 0; r < rounds; r++) {
                float v = (float)r + 0.5f;
                ck_assert(all_eq(&h, xs[r], 16, -2.0f));
                ck_assert(all_eq(&h, ys[r], 16, v));
                ck_assert(all_eq(&h, ws[r], 16, v * 2));
        }
        /* Every external task handed over exactly once, nothing else. */
        for (uint64_t id = first; id < h.prod.next_id; id++)
                ck_assert_msg(x.calls[id - first] == (x.is_external[id - first] ? 1u : 0u),
                              "task %llu handed over %u times", (unsigned long long)id, x.calls[id - first]);
        ck_assert_uint_eq(x.n, 4u * rounds);
        ck_assert_uint_eq(atomic_load(&h.ch->ext_ready_tail), 4u * rounds);
        ck_assert_uint_eq(atomic_load(&h.ch->mailbox_consumed), 4u * rounds);
        harness_ring_destroy(&h);
        engine_free(e);
}
END_TEST

START_TEST(external_error_status) {
        struct hbg_engine *e = engine_new_with(2, 2, 10000);
        struct harness_ring h;
        ring_open(&h, e, 256, 256, 0);
        static struct ext_ctx x;
        memset(&x, 0, sizeof(x));
        x.h = &h;
        h.external = ext_callback;
        h.external_userdata = &x;
        uint64_t o1 = harness_alloc(&h, 64), o2 = harness_alloc(&h, 64);

        /* status reported → graph status */
        const struct { int report, graph; } cases[] = {
                { -EPIPE, -EPIPE }, { 5, -EINVAL }, { -5000, -EINVAL }, { -4095, -4095 },
                { INT32_MIN, -EINVAL }, { -1, -1 },
        };
        for (unsigned i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
                fill_host(&h, o1, 16, -1.0f);
                fill_host(&h, o2, 16, -1.0f);
                struct harness_task g = fill_task(o2, 16, 1.0f, 1, 1);
                uint64_t t_g = harness_add_task(&h, &g);
                uint64_t ex = add_external(&h, &x, &t_g, 1, cases[i].report);
                struct harness_task dep = fill_task(o1, 16, 2.0f, 2, 1);
                add_dep(&dep, ex);
                uint64_t t_dep = harness_add_task(&h, &dep);
                struct harness_task dep2 = { .n_fanins = 1, .fanins = { t_dep } };
                harness_add_task(&h, &dep2);
                struct harness_task ind = fill_task(o2, 16, 3.0f, 4, 1);
                add_dep(&ind, t_g);
                harness_add_task(&h, &ind);
                struct hbg_graph_entry ge;
                wait_graph(&h, harness_end_graph(&h, i), &ge);
                ck_assert_msg(ge.status == cases[i].graph, "external reported %d: graph status %d, expected %d",
                              cases[i].report, ge.status, cases[i].graph);
                ck_assert_uint_eq(ge.first_error_task, ex);
                ck_assert_msg(all_eq(&h, o1, 16, -1.0f), "dependant of a failed external ran");
                ck_assert_msg(all_eq(&h, o2, 16, 3.0f), "independent task did not run");
                ck_assert_uint_eq(x.calls[ex], 1);
        }
        /* The ring goes on. */
        uint64_t ex = add_external(&h, &x, NULL, 0, 0);
        struct harness_task dep = fill_task(o1, 16, 9.0f, 1, 1);
        add_dep(&dep, ex);
        harness_add_task(&h, &dep);
        wait_graph_ok(&h, harness_end_graph(&h, 99));
        ck_assert(all_eq(&h, o1, 16, 9.0f));
        struct ring_stats rs;
        ring_stats(h.ring, &rs);
        ck_assert(!rs.broken);
        ck_assert_int_eq(rs.error, -EPIPE); /* the latch keeps the first */
        harness_ring_destroy(&h);
        engine_free(e);
}
END_TEST

/* ------------------------------------------------------------ stalls */

static int must_not_be_called(void *ud, uint64_t id) {
        (void)ud;
        ck_abort_msg("external %llu served although the client was not answering", (unsigned long long)id);
        return 0;
}

START_TEST(stall_times_out_external) {
        struct hbg_engine *e = engine_new_with(2, 2, 300);
        struct harness_ring h;
        ring_open(&h, e, 256, 256, 5);
        uint64_t a = harness_alloc(&h, 64), b = harness_alloc(&h, 64), c = harness_alloc(&h, 64);
        fill_host(&h, a, 16, -1.0f);
        fill_host(&h, b, 16, -1.0f);
        fill_host(&h, c, 16, -1.0f);
        h.external = must_not_be_called;

        struct harness_task ta = fill_task(a, 16, 1.0f, 1, 2);
        uint64_t t_a = harness_add_task(&h, &ta);
        struct harness_task te = { .flags = HBG_TASK_EXTERNAL, .n_fanins = 1, .fanins = { t_a } };
        uint64_t t_e = harness_add_task(&h, &te);
        struct harness_task tb = fill_task(b, 16, 2.0f, 2, 1);
        add_dep(&tb, t_e);
        harness_add_task(&h, &tb);
        struct harness_task tc = fill_task(c, 16, 3.0f, 4, 1);
        add_dep(&tc, t_a);
        harness_add_task(&h, &tc);
        uint64_t k = harness_end_graph(&h, 1);

        /* Never answer: poll the graph table ourselves. */
        struct hbg_graph_entry ge;
        ck_assert_msg(poll_graph(&h, k, WAIT_MS, &ge) == 0, "stalled graph never failed");
        ck_assert_int_eq(ge.status, -ETIME);
        ck_assert_uint_eq(ge.first_error_task, t_e);
        ck_assert_uint_eq(ge.kernel, HBG_KERNEL_NONE);
        ck_assert_msg(strstr(ge.message, "stall limit"), "message: %s", ge.message);
        ck_assert(all_eq(&h, a, 16, 1.0f));
        ck_assert(all_eq(&h, b, 16, -1.0f));
        ck_assert(all_eq(&h, c, 16, 3.0f));
        /* It was handed over (once). The client answers now, after the
         * timeout: a late answer, ignored (§10.5); the ring goes on. */
        ck_assert_uint_eq(atomic_load(&h.ch->ext_ready_tail), 1);
        h.external = NULL;
        harness_serve_external(&h);
        ck_assert_uint_eq(atomic_load(&h.prod.mailbox_next), 1);
        struct ring_stats rs;
        ring_stats(h.ring, &rs);
        ck_assert(!rs.broken);
        ck_assert_uint_gt(atomic_load(&log_lines), 0); /* the stall was logged */
        ck_assert_msg(atomic_load(&host_stall_lines) > 0,
                      "no stall report says the frontier is a host task waiting for its host function's result");
        ck_assert_uint_gt(atomic_load(&graph_fail_lines), 0); /* and the failed graph */

        /* The ring keeps working, external tasks included. */
        static struct ext_ctx x;
        memset(&x, 0, sizeof(x));
        x.h = &h;
        x.first = 5;
        h.external = ext_callback;
        h.external_userdata = &x;
        uint64_t e2 = add_external(&h, &x, NULL, 0, 0);
        struct harness_task tb2 = fill_task(b, 16, 4.0f, 1, 1);
        add_dep(&tb2, e2);
        harness_add_task(&h, &tb2);
        wait_graph_ok(&h, harness_end_graph(&h, 2));
        ck_assert(all_eq(&h, b, 16, 4.0f));
        ck_assert_uint_eq(x.calls[e2 - 5], 1);
        ring_stats(h.ring, &rs);
        ck_assert(!rs.broken);
        harness_ring_destroy(&h);
        engine_free(e);
}
END_TEST

/* A graph record whose last_id was never submitted: the watermark stops at
 * `submitted` and nothing can move it; the ring must stop with -ETIME, the
 * graph naming the first task never submitted and why. */
START_TEST(stall_graph_beyond_submitted) {
        struct hbg_engine *e = engine_new_with(2, 2, 300);
        struct harness_ring h;
        ring_open(&h, e, 256, 256, 0);
        uint64_t a = harness_alloc(&h, 64);
        struct harness_task ta = fill_task(a, 16, 1.0f, 1, 1);
        uint64_t t_a = harness_add_task(&h, &ta);
        add_dep(&ta, t_a);
        harness_add_task(&h, &ta);
        harness_publish(&h);

        uint64_t k = h.prod.graphs;
        struct hbg_graph_record *rec = (struct hbg_graph_record *)(void *)((char *)h.sub + h.g.sub_graphs_offset) +
                                       (k & (h.g.graph_table_entries - 1));
        rec->graph_id = 77;
        rec->first_id = h.prod.graph_first;
        rec->last_id = h.prod.next_id - 1 + 5; /* five tasks that never come */
        rec->reserved = 0;
        h.prod.graphs = k + 1;
        atomic_store(&h.sh->graphs_submitted, h.prod.graphs);
        if (atomic_load(&h.ch->need_wakeup)) {
                h.doorbells++;
                ring_kick(h.ring);
        }

        struct hbg_graph_entry ge;
        int rc = poll_graph(&h, k, 10000, &ge);
        struct ring_stats rs;
        ring_stats(h.ring, &rs);
        ck_assert_msg(rc == 0, "graph waiting for unsubmitted tasks never failed (watermark %llu, "
                               "broken %d, error %d)",
                      (unsigned long long)rs.watermark, rs.broken, rs.error);
        ck_assert_int_eq(ge.status, -ETIME);
        ck_assert_uint_eq(ge.graph_id, 77);
        ck_assert_uint_eq(ge.first_error_task, 2);
        ck_assert_msg(strstr(ge.message, "never submitted"), "message: %s", ge.message);
        ck_assert(rs.broken);
        ck_assert_int_eq(rs.error, -ETIME);
        ck_assert_uint_eq(rs.watermark, 2);
        harness_ring_destroy(&h);
        engine_free(e);
}
END_TEST

/* ------------------------------------------------------------ protocol errors */

/* A mailbox completion for a task that is not an external task waiting
 * for one: (0) a kernel task of the pending graph, (1) a kernel task
 * completed earlier, (2) an id never submitted. The ring stops with
 * -EPROTO, its pending graphs fail, another ring is unaffected. (A second
 * answer for an external task is a late answer and is ignored:
 * late_external_answer_ignored.) The pending graph holds an external task the client never
 * answers, so it cannot finish before the bogus entry is consumed. */
START_TEST(bogus_mailbox_breaks_ring) {
        struct hbg_engine *e = engine_new_with(2, 2, 10000);
        struct harness_ring ha, hb;
        ring_open(&ha, e, 256, 256, 0);
        ring_open(&hb, e, 512, 256, 1000);
        uint64_t a = harness_alloc(&ha, 64), a2 = harness_alloc(&ha, 64), bo = harness_alloc(&hb, 256 * 4);
        fill_host(&ha, a2, 16, -1.0f);

        /* Graph 0 on A completes normally (the harness answers its external). */
        struct harness_task ta = fill_task(a, 16, 1.0f, 1, 1);
        uint64_t done = harness_add_task(&ha, &ta);
        struct harness_task tx = { .flags = HBG_TASK_EXTERNAL };
        uint64_t ext = harness_add_task(&ha, &tx);
        wait_graph_ok(&ha, harness_end_graph(&ha, 0));
        ha.external = must_not_be_called;

        /* Graph 1 on A: a kernel task, an unanswered external, dependants. */
        struct harness_task ts = spin_task(20 * 1000 * 1000, 1);
        uint64_t spin = harness_add_task(&ha, &ts);
        struct harness_task td = fill_task(a, 16, 5.0f, 2, 1);
        add_dep(&td, spin);
        harness_add_task(&ha, &td);
        struct harness_task tw = { .flags = HBG_TASK_EXTERNAL };
        uint64_t wait_ext = harness_add_task(&ha, &tw);
        struct harness_task tl = fill_task(a2, 16, 6.0f, 4, 1);
        add_dep(&tl, wait_ext);
        harness_add_task(&ha, &tl);
        uint64_t k1 = harness_end_graph(&ha, 1);
        /* B works meanwhile. */
        struct harness_task tb = fill_task(bo, 256, 2.0f, 7, 8);
        harness_add_task(&hb, &tb);
        uint64_t kb0 = harness_end_graph(&hb, 10);

        (void)ext;
        uint64_t target = _i == 0 ? spin : _i == 1 ? done : spin + 100;
        post_mailbox(&ha, target, 0);

        struct hbg_graph_entry ge;
        ck_assert_msg(poll_graph(&ha, k1, WAIT_MS, &ge) == 0, "case %d: pending graph never failed", _i);
        ck_assert_msg(ge.status == -EPROTO, "case %d: pending graph status %d", _i, ge.status);
        ck_assert_uint_eq(ge.graph_id, 1);
        struct ring_stats rs;
        ring_stats(ha.ring, &rs);
        ck_assert(rs.broken);
        ck_assert_int_eq(rs.error, -EPROTO);
        ck_assert_uint_eq(atomic_load(&ha.ch->error_task), target);
        ck_assert(all_eq(&ha, a2, 16, -1.0f));
        /* A graph submitted after the break fails too. */
        struct harness_task t2 = fill_task(a2, 16, 7.0f, 1, 1);
        harness_add_task(&ha, &t2);
        uint64_t k2 = harness_end_graph(&ha, 2);
        ck_assert_msg(poll_graph(&ha, k2, WAIT_MS, &ge) == 0, "case %d: graph after the break never failed", _i);
        ck_assert_int_eq(ge.status, -EPROTO);
        ck_assert_uint_eq(atomic_load(&ha.ch->graphs_retired), 3);
        ck_assert(all_eq(&ha, a2, 16, -1.0f));

        /* The other ring is served throughout. */
        wait_graph_ok(&hb, kb0);
        ck_assert(all_eq(&hb, bo, 256, 2.0f));
        for (int g = 0; g < 5; g++) {
                struct harness_task t = fill_task(bo, 256, 3.0f + (float)g, 6, 3);
                harness_add_task(&hb, &t);
                wait_graph_ok(&hb, harness_end_graph(&hb, 11 + (uint64_t)g));
                ck_assert(all_eq(&hb, bo, 256, 3.0f + (float)g));
        }
        ring_stats(hb.ring, &rs);
        ck_assert(!rs.broken);
        ck_assert_int_eq(rs.error, 0);
        harness_ring_destroy(&ha);
        harness_ring_destroy(&hb);
        engine_free(e);
}
END_TEST

/* An external task answered twice (a client retrying, or answering after
 * the stall detector gave up on it): the second answer is ignored and the
 * session goes on. */
START_TEST(late_external_answer_ignored) {
        struct hbg_engine *e = engine_new_with(2, 2, 10000);
        struct harness_ring h;
        ring_open(&h, e, 256, 256, 0);
        uint64_t a = harness_alloc(&h, 64);
        struct harness_task tx = { .flags = HBG_TASK_EXTERNAL };
        uint64_t ext = harness_add_task(&h, &tx);
        wait_graph_ok(&h, harness_end_graph(&h, 0));
        post_mailbox(&h, ext, 0);
        for (int g = 0; g < 3; g++) {
                struct harness_task t = fill_task(a, 16, 1.0f + (float)g, 1, 1);
                harness_add_task(&h, &t);
                wait_graph_ok(&h, harness_end_graph(&h, 1 + (uint64_t)g));
                ck_assert(all_eq(&h, a, 16, 1.0f + (float)g));
        }
        struct ring_stats rs;
        ring_stats(h.ring, &rs);
        ck_assert(!rs.broken);
        ck_assert_int_eq(rs.error, 0);
        harness_ring_destroy(&h);
        engine_free(e);
}
END_TEST

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
/* Stream `total` noop AIV tasks of `blocks` blocks in graphs of 500,
 * publishing every 25 tasks; returns the publishes (including those
 * harness_add_task makes when the window is full, and graph records). */
static uint64_t stream_tasks(struct harness_ring *h, uint64_t total, uint16_t blocks, uint64_t spin_ns) {
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

/* ------------------------------------------------------------ config */

START_TEST(config_limits) {
        const struct {
                const char *field;
                unsigned threads, clusters, batch, rings;
                uint64_t spin;
        } bad[] = {
                { "threads", 0, 8, 64, 256, 0 },     { "threads", 65, 8, 64, 256, 0 },
                { "clusters", 4, 0, 64, 256, 0 },    { "clusters", 4, 1025, 64, 256, 0 },
                { "classify_batch", 4, 8, 0, 256, 0 }, { "classify_batch", 4, 8, 4097, 256, 0 },
                { "max_rings", 4, 8, 64, 0, 0 },     { "max_rings", 4, 8, 64, 1025, 0 },
                { "spin_before_park_ns", 4, 8, 64, 256, UINT64_C(1000000001) },
        };
        for (unsigned i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
                struct hbg_engine_config cfg;
                engine_config_default(&cfg);
                cfg.threads = bad[i].threads;
                cfg.clusters = bad[i].clusters;
                cfg.classify_batch = bad[i].batch;
                cfg.max_rings = bad[i].rings;
                if (bad[i].spin)
                        cfg.spin_before_park_ns = bad[i].spin;
                cfg.log = quiet_log;
                const char *why = NULL;
                ck_assert_int_eq(engine_config_validate(&cfg, &why), -ERANGE);
                ck_assert_ptr_nonnull(why);
                ck_assert_msg(strncmp(why, bad[i].field, strlen(bad[i].field)) == 0,
                              "case %u: message \"%s\" does not name %s", i, why, bad[i].field);
                struct hbg_engine *e = NULL;
                ck_assert_int_eq(engine_new(&e, &cfg), -ERANGE);
                ck_assert_ptr_null(e);
        }
        struct hbg_engine_config cfg;
        engine_config_default(&cfg);
        ck_assert_int_eq(engine_config_validate(&cfg, NULL), 0);
        /* Every policy of the table is valid; anything else is not. */
        for (unsigned m = 0; m < completion_mode_count(); m++) {
                cfg.completion_mode = m;
                ck_assert_int_eq(engine_config_validate(&cfg, NULL), 0);
        }
        cfg.completion_mode = completion_mode_count();
        ck_assert_int_eq(engine_config_validate(&cfg, NULL), -EINVAL);
        cfg.completion_mode = 99;
        ck_assert_int_eq(engine_config_validate(&cfg, NULL), -EINVAL);
        /* The resolver needs a thread besides the schedulers. */
        ck_assert_int_eq(completion_mode_parse("resolver", &cfg.completion_mode), 0);
        ck_assert_uint_eq(completion_mode_min_threads(cfg.completion_mode), 2);
        cfg.threads = 1;
        const char *why = NULL;
        ck_assert_int_eq(engine_config_validate(&cfg, &why), -EINVAL);
        ck_assert_ptr_nonnull(strstr(why, "resolver"));
        cfg.threads = 2;
        ck_assert_int_eq(engine_config_validate(&cfg, NULL), 0);
}
END_TEST

/* Every place a doc lists the completion modes names every mode of the
 * engine's table: from `begin` to `end` (exclusive) in the file. */
static const struct {
        const char *file, *begin, *end;
} mode_lists[] = {
        { "README.md", "eager completion watermark", "\n\n" },
        { "docs/GLOSSARY.md", "| **completion mode** |", "\n" },
        { "docs/OPERATIONS.md", "| scheduler | `completion_mode` |", "\n" },
        { "docs/RUNTIME_LOGIC.md", "The seed's three designs", "\n\n" },
        { "docs/man/hbgd.8", ".BI \\-\\-completion= MODE", "\n.TP" },
        { "docs/man/hbgd.conf.5", ".BR completion_mode ", "\n.SH" },
        { "systemd/hbgd.conf.example", "; How completions move", ";completion_mode" },
        { "tests/fuzz/corpus/config/example.conf", "; How completions move", ";completion_mode" },
};

static bool names_word(const char *b, const char *e, const char *word) {
        size_t n = strlen(word);
        for (const char *p = b; p + n <= e; p++) {
                if (memcmp(p, word, n) != 0)
                        continue;
                bool left = p == b || !(p[-1] == '-' || (p[-1] >= 'a' && p[-1] <= 'z'));
                bool right = p + n == e || !(p[n] == '-' || (p[n] >= 'a' && p[n] <= 'z'));
                if (left && right)
                        return true;
        }
        return false;
}

START_TEST(docs_list_every_completion_mode) {
        static char doc[1 << 18];
        for (size_t i = 0; i < sizeof(mode_lists) / sizeof(mode_lists[0]); i++) {
                char path[512];
                snprintf(path, sizeof(path), "%s/%s", HBG_SRCDIR, mode_lists[i].file);
                FILE *f = fopen(path, "r");
                ck_assert_msg(f, "cannot open %s", path);
                size_t n = fread(doc, 1, sizeof(doc) - 1, f);
                fclose(f);
                doc[n] = 0;
                const char *b = strstr(doc, mode_lists[i].begin);
                ck_assert_msg(b, "%s: no '%s'", mode_lists[i].file, mode_lists[i].begin);
                const char *e = strstr(b + strlen(mode_lists[i].begin), mode_lists[i].end);
                ck_assert_msg(e, "%s: no '%s' after '%s'", mode_lists[i].file, mode_lists[i].end,
                              mode_lists[i].begin);
                for (unsigned m = 0; m < completion_mode_count(); m++)
                        ck_assert_msg(names_word(b, e, completion_mode_name(m)),
                                      "%s: the completion modes at '%s' leave out %s", mode_lists[i].file,
                                      mode_lists[i].begin, completion_mode_name(m));
        }
}
END_TEST

/* Every place a doc names the default completion mode names the table's
 * default (HBG_COMPLETION_DEFAULT): `before`, the mode's name, `after`
 * occur together in the file. */
static const struct {
        const char *file, *before, *after;
} default_mentions[] = {
        { "README.md", "(`", "`, the default" },
        { "docs/GLOSSARY.md", "`", "` (default)" },
        { "docs/OPERATIONS.md", "| scheduler | `completion_mode` | ", " |" },
        { "docs/RUNTIME_LOGIC.md", "The default is the table's first entry, `", "`" },
        { "docs/man/hbgd.8", ".B ", "\n(default" },
        { "docs/man/hbgd.conf.5", ".BR completion_mode \" (name, default ", ";" },
        { "systemd/hbgd.conf.example", "\n;completion_mode = ", "\n" },
        { "tests/fuzz/corpus/config/example.conf", "\n;completion_mode = ", "\n" },
};

START_TEST(docs_name_the_default_completion_mode) {
        static char doc[1 << 18];
        const char *mode = completion_mode_name(HBG_COMPLETION_DEFAULT);
        ck_assert_ptr_nonnull(mode);
        for (size_t i = 0; i < sizeof(default_mentions) / sizeof(default_mentions[0]); i++) {
                char path[512], want[256];
                snprintf(path, sizeof(path), "%s/%s", HBG_SRCDIR, default_mentions[i].file);
                FILE *f = fopen(path, "r");
                ck_assert_msg(f, "cannot open %s", path);
                size_t n = fread(doc, 1, sizeof(doc) - 1, f);
                fclose(f);
                doc[n] = 0;
                snprintf(want, sizeof(want), "%s%s%s", default_mentions[i].before, mode, default_mentions[i].after);
                ck_assert_msg(strstr(doc, want), "%s does not name the default completion mode %s: no '%s'",
                              default_mentions[i].file, mode, want);
        }
}
END_TEST

/* One graph of every shape on the engine; checks outputs. */
static void run_shapes(struct hbg_engine *e) {
        struct harness_ring h;
        ring_open(&h, e, 256, 256, 3);
        uint64_t n = 999;
        uint64_t a = harness_alloc(&h, n * 4), b = harness_alloc(&h, n * 4), c = harness_alloc(&h, n * 4);
        uint64_t s = harness_alloc(&h, 4);
        struct harness_task fa = fill_task(a, n, 1.25f, 7, 6);  /* MIX */
        uint64_t t_a = harness_add_task(&h, &fa);
        struct harness_task fb = fill_task(b, n, 2.0f, 1, 5);   /* AIC */
        uint64_t t_b = harness_add_task(&h, &fb);
        struct harness_task ad = { .kernel = { 0, HBG_KERNEL_ADD_F32 }, .lane_mask = 2, .block_num = 9,
                                   .n_tensors = 3 };            /* AIV */
        ad.tensors[0] = harness_tensor(a, n * 4, HBG_DIR_IN);
        ad.tensors[1] = harness_tensor(b, n * 4, HBG_DIR_IN);
        ad.tensors[2] = harness_tensor(c, n * 4, HBG_DIR_OUT);
        add_dep(&ad, t_a);
        add_dep(&ad, t_b);
        uint64_t t_c = harness_add_task(&h, &ad);
        struct harness_task red = { .kernel = { HBG_KERNEL_REDUCE_SUM_F32, 0, HBG_KERNEL_REDUCE_SUM_F32 },
                                    .lane_mask = 5, .block_num = 3, .n_tensors = 2 };
        red.tensors[0] = harness_tensor(c, n * 4, HBG_DIR_IN);
        red.tensors[1] = harness_tensor(s, 4, HBG_DIR_OUT);
        add_dep(&red, t_c);
        harness_add_task(&h, &red);
        wait_graph_ok(&h, harness_end_graph(&h, 1));
        ck_assert(all_eq(&h, c, n, 3.25f));
        ck_assert_float_eq(harness_f32(&h, s)[0], 3.25f * (float)n);
        harness_ring_destroy(&h);
}

START_TEST(config_small_and_uneven) {
        /* 1 thread owns the only cluster. */
        struct hbg_engine *e = engine_new_with(1, 1, 10000);
        struct hbg_thread_stats t;
        ck_assert_uint_eq(engine_threads(e), 1);
        engine_thread_stats(e, 0, &t);
        ck_assert_uint_eq(t.clusters, 1);
        run_shapes(e);
        engine_free(e);

        /* 8 threads, 2 clusters: two threads own one each, six own none. */
        e = engine_new_with(8, 2, 10000);
        ck_assert_uint_eq(engine_threads(e), 8);
        unsigned sum = 0, owners = 0;
        for (unsigned i = 0; i < 8; i++) {
                engine_thread_stats(e, i, &t);
                ck_assert_uint_le(t.clusters, 1);
                sum += t.clusters;
                owners += t.clusters != 0;
        }
        ck_assert_uint_eq(sum, 2);
        ck_assert_uint_eq(owners, 2);
        run_shapes(e);
        struct hbg_thread_stats s;
        stats_sum(e, &s);
        ck_assert_uint_gt(s.dispatched, 0);
        for (unsigned i = 0; i < 8; i++) {
                engine_thread_stats(e, i, &t);
                if (t.clusters == 0)
                        ck_assert_msg(t.dispatched == 0, "thread %u owns no cluster but dispatched %llu",
                                      i, (unsigned long long)t.dispatched);
        }
        engine_free(e);

        /* The upper bounds are accepted. */
        e = engine_new_with(64, 1024, 10000);
        sum = 0;
        for (unsigned i = 0; i < 64; i++) {
                engine_thread_stats(e, i, &t);
                ck_assert_uint_eq(t.clusters, 16);
                sum += t.clusters;
        }
        ck_assert_uint_eq(sum, 1024);
        run_shapes(e);
        engine_free(e);
}
END_TEST

/* ------------------------------------------------------------ rings */

START_TEST(ring_add_beyond_max) {
        struct hbg_engine_config cfg;
        struct hbg_engine *e = NULL;
        engine_config_default(&cfg);
        cfg.threads = 2;
        cfg.clusters = 2;
        cfg.max_rings = 2;
        cfg.log = quiet_log;
        ck_assert_int_eq(engine_new(&e, &cfg), 0);
        struct harness_ring r1, r2, r3;
        ring_open(&r1, e, 256, 256, 0);
        ring_open(&r2, e, 256, 256, 0);
        struct hbg_geometry_request req;
        geometry_request_default(&req);
        req.task_window = 256;
        req.flag_window = 256;
        req.heap_size = 1u << 16;
        ck_assert_int_eq(harness_ring_init(&r3, e, &req, 0), -ENOSPC);
        ck_assert_ptr_null(r3.ring);
        harness_ring_destroy(&r3);
        /* A freed slot is reusable. */
        harness_ring_destroy(&r1);
        ck_assert_int_eq(harness_ring_init(&r3, e, &req, 0), 0);
        struct harness_ring *rs[2] = { &r2, &r3 };
        for (int i = 0; i < 2; i++) {
                uint64_t o = harness_alloc(rs[i], 64);
                struct harness_task t = fill_task(o, 16, 7.0f, 1, 1);
                harness_add_task(rs[i], &t);
                wait_graph_ok(rs[i], harness_end_graph(rs[i], 0));
                ck_assert(all_eq(rs[i], o, 16, 7.0f));
        }
        harness_ring_destroy(&r2);
        harness_ring_destroy(&r3);
        engine_free(e);
}
END_TEST

START_TEST(ring_remove_with_graph_in_flight) {
        struct hbg_engine *e = engine_new_with(2, 2, 10000);
        struct harness_ring ha, hb;
        ring_open(&ha, e, 256, 256, 0);
        ring_open(&hb, e, 256, 256, 0);
        uint64_t ao = harness_alloc(&ha, 64), bo = harness_alloc(&hb, 64);
        fill_host(&ha, ao, 16, -1.0f);

        /* A: a chain of long tasks (~2 s if run to the end). */
        uint64_t prev = 0;
        for (int i = 0; i < 10; i++) {
                struct harness_task t = spin_task(200 * 1000 * 1000, 2);
                if (i)
                        add_dep(&t, prev);
                prev = harness_add_task(&ha, &t);
        }
        struct harness_task tail = fill_task(ao, 16, 1.0f, 1, 1);
        add_dep(&tail, prev);
        harness_add_task(&ha, &tail);
        uint64_t ka = harness_end_graph(&ha, 0xa);
        /* B: in flight too. */
        struct harness_task tb = spin_task(50 * 1000 * 1000, 1);
        uint64_t t_b = harness_add_task(&hb, &tb);
        struct harness_task fb = fill_task(bo, 16, 2.0f, 2, 1);
        add_dep(&fb, t_b);
        harness_add_task(&hb, &fb);
        uint64_t kb = harness_end_graph(&hb, 0xb);

        /* Wait until A's first task was claimed, then remove A. */
        int64_t deadline = clock_now_ms() + WAIT_MS;
        while (atomic_load(&ha.ch->classified) == 0) {
                ck_assert(clock_now_ms() < deadline);
                sleep_ms(1);
        }
        harness_ring_remove(&ha, -ECONNRESET);
        struct hbg_graph_entry ge;
        ck_assert_int_eq(layout_graph_entry_read((struct hbg_graph_entry *)(void *)((char *)ha.cpl +
                                                                                 ha.g.cpl_graphs_offset) + ka,
                                              ka, &ge), 0);
        ck_assert_int_eq(ge.status, -ECONNRESET);
        ck_assert_uint_eq(ge.graph_id, 0xa);
        ck_assert_str_eq(ge.message, "session stopped");
        ck_assert_uint_eq(atomic_load(&ha.ch->graphs_retired), 1);
        ck_assert(all_eq(&ha, ao, 16, -1.0f));
        /* Free A's regions now: a thread still touching them is a
         * use-after-free under ASan. */
        harness_ring_destroy(&ha);

        wait_graph_ok(&hb, kb);
        ck_assert(all_eq(&hb, bo, 16, 2.0f));
        for (int g = 0; g < 3; g++) {
                struct harness_task t = fill_task(bo, 16, 3.0f + (float)g, 4, 2);
                harness_add_task(&hb, &t);
                wait_graph_ok(&hb, harness_end_graph(&hb, (uint64_t)g));
                ck_assert(all_eq(&hb, bo, 16, 3.0f + (float)g));
        }
        harness_ring_destroy(&hb);
        engine_free(e);
}
END_TEST

/* ------------------------------------------------------------ blocks */

/*
 * Multi-block tasks streaming through the window, so slots are reused
 * while the threads that ran the other blocks of their previous occupant
 * may still be finishing: every task completes exactly once (a second
 * completion would show in `completed`, `executed_tasks` and the block
 * count) and every graph succeeds. Under TSan this also checks that no
 * thread reads a slot after its task may have completed; four scheduler
 * threads on a small machine get preempted between blocks, which is what
 * opens that window.
 */
START_TEST(multi_block_tasks_stream) {
        struct hbg_engine *e = engine_new_with(4, 4, 10000);
        struct harness_ring h;
        ring_open(&h, e, 4096, 1024, 9);
        const uint64_t total = 50000 / test_scale();
        stream_tasks(&h, total, 64, 0);
        struct hbg_thread_stats s;
        stats_sum(e, &s);
        struct ring_stats rs;
        ring_stats(h.ring, &rs);
        ck_assert_uint_eq(rs.completed, total);
        ck_assert_uint_eq(rs.failed, 0);
        ck_assert_uint_eq(rs.watermark, 9 + total);
        ck_assert_uint_eq(s.executed_tasks, total);
        ck_assert_uint_eq(s.published, total);
        ck_assert_uint_eq(s.dispatched, 64 * total);
        ck_assert(!rs.broken);
        harness_ring_destroy(&h);
        engine_free(e);
}
END_TEST

/*
 * Continuation (RUNTIME_LOGIC.md §10.4): with one thread, each task of a
 * chain is made ready by that thread (its predecessor's completion, or
 * classification after it) and runs as its continuation, not through the
 * ready queue; only the per-visit cap sends some through the queue. With
 * four threads the chain still runs whole. Batched ingest (§10.1): every
 * task but the first of each classified batch waits for its predecessor
 * in that batch, so it is linked there without touching a wake list.
 */
START_TEST(chain_runs_as_continuations) {
        for (unsigned threads = 1; threads <= 4; threads += 3) {
                struct hbg_engine *e = engine_new_with(threads, 4, 10000);
                struct harness_ring h;
                ring_open(&h, e, 4096, 1024, 1);
                const uint64_t n = 4000;
                for (uint64_t i = 0; i < n; i++) {
                        struct harness_task t = { .kernel = { 0, HBG_KERNEL_NOOP }, .lane_mask = 2,
                                                  .block_num = 1 };
                        if (i > 0)
                                add_dep(&t, h.prod.next_id - 1);
                        harness_add_task(&h, &t);
                }
                harness_end_graph(&h, 0);
                wait_graph_ok(&h, 0);
                struct hbg_thread_stats s;
                stats_sum(e, &s);
                ck_assert_uint_eq(s.executed_tasks, n);
                ck_assert_uint_le(s.continued, n);
                ck_assert_uint_eq(s.classified, n);
                ck_assert_uint_le(s.batch_linked, n - 1);
                ck_assert_msg(s.batch_linked >= n / 2, "%llu of %llu tasks linked in their batch",
                              (unsigned long long)s.batch_linked, (unsigned long long)n);
                if (threads == 1)
                        ck_assert_msg(s.continued >= n / 2, "%llu of %llu tasks continued",
                                      (unsigned long long)s.continued, (unsigned long long)n);
                harness_ring_destroy(&h);
                engine_free(e);
        }
}
END_TEST

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

/*
 * Whether a fanin failed is kept in the failure table, whose entry for a
 * task a later failing task may take over (RUNTIME_LOGIC §12.2). With a
 * window of 4096, a table of 2D entries let the failure of task 8192 take
 * task 0's entry, and a task depending on task 0 then ran; the table has
 * 2^15 entries at least now, so that it is skipped: its graph fails.
 */
START_TEST(failed_dependency_far_back_seen) {
        struct hbg_engine *e = engine_new_with(1, 2, 10000);
        struct harness_ring h;
        ring_open(&h, e, 4096, 4096, 0);
        struct harness_task fail = { .kernel = { HBG_KERNEL_FAIL }, .lane_mask = 1, .block_num = 1,
                                     .n_scalars = 1, .scalars = { (uint64_t)(int64_t)-EIO } };
        struct harness_task noop = { .kernel = { 0, HBG_KERNEL_NOOP }, .lane_mask = 2, .block_num = 1 };
        uint64_t first = harness_add_task(&h, &fail);
        struct hbg_graph_entry ge;
        wait_graph(&h, harness_end_graph(&h, 0), &ge);
        ck_assert_int_eq(ge.status, -EIO);
        while (h.prod.next_id < first + 2 * 4096)
                harness_add_task(&h, &noop);
        wait_graph_ok(&h, harness_end_graph(&h, 1));
        uint64_t later = harness_add_task(&h, &fail);
        ck_assert_uint_eq(later, first + 2 * 4096);
        wait_graph(&h, harness_end_graph(&h, 2), &ge);
        ck_assert_int_eq(ge.status, -EIO);
        struct harness_task dependant = noop;
        add_dep(&dependant, first);
        uint64_t d = harness_add_task(&h, &dependant);
        wait_graph(&h, harness_end_graph(&h, 3), &ge);
        ck_assert_msg(ge.status != 0, "task %" PRIu64 " ran although task %" PRIu64 ", %" PRIu64
                      " ids before it, failed", d, first, d - first);
        harness_ring_destroy(&h);
        engine_free(e);
}
END_TEST

/*
 * The watchdog's heartbeat moves at every task start, not only at every
 * loop turn: one visit runs these 8 tasks of 40 ms back to back (the
 * first as the continuation, the rest from the thread's deque), so a
 * heartbeat per loop turn would stand still for 320 ms, as for one wedged
 * kernel.
 */
START_TEST(heartbeat_per_task) {
        struct hbg_engine *e = engine_new_with(1, 1, 10000);
        struct harness_ring h;
        ring_open(&h, e, 1024, 1024, 1);
        for (unsigned i = 0; i < 8; i++) {
                struct harness_task t = spin_task(40 * 1000 * 1000, 1);
                harness_add_task(&h, &t);
        }
        uint64_t k = harness_end_graph(&h, 0);
        struct hbg_graph_entry ge;
        unsigned moves = 0, samples = 0;
        struct hbg_thread_alive a;
        engine_thread_alive(e, 0, &a);
        uint64_t last = a.heartbeat;
        while (poll_graph(&h, k, 0, &ge) != 0) {
                ck_assert_msg(++samples < 4000, "graph not retired within 20 s");
                sleep_ms(5);
                engine_thread_alive(e, 0, &a);
                moves += a.heartbeat != last;
                last = a.heartbeat;
        }
        ck_assert_int_eq(ge.status, 0);
        ck_assert_msg(moves >= 6, "the heartbeat moved %u times in %u samples while 8 tasks of 40 ms ran", moves,
                      samples);
        harness_ring_destroy(&h);
        engine_free(e);
}
END_TEST

/*
 * Stealing (§10.4): a root's completion makes 48 tasks of 2 ms ready on
 * the thread that ran it: one becomes its continuation, the rest go to its
 * deque, and its idle peer (woken for the surplus) steals from the deque's
 * other end while the owner works through its own end. Every task runs
 * once. With a second ring present (idle), the thief's visit is counted
 * for fair share and it still steals.
 */
START_TEST(idle_thread_steals) {
        struct hbg_engine *e = engine_new_with(2, 2, 10000);
        struct harness_ring h, other;
        ring_open(&h, e, 4096, 1024, 1);
        if (_i == 1)
                ring_open(&other, e, 4096, 1024, 1);
        const unsigned fan = 48;
        struct harness_task root = spin_task(1000, 1);
        uint64_t r = harness_add_task(&h, &root);
        for (unsigned i = 0; i < fan; i++) {
                struct harness_task t = spin_task(2000000, 1);
                add_dep(&t, r);
                harness_add_task(&h, &t);
        }
        harness_end_graph(&h, 0);
        wait_graph_ok(&h, 0);
        struct hbg_thread_stats s;
        stats_sum(e, &s);
        ck_assert_uint_eq(s.executed_tasks, fan + 1);
        ck_assert_msg(s.stolen >= 1, "no task stolen (continued %llu)", (unsigned long long)s.continued);
        if (_i == 1)
                harness_ring_destroy(&other);
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

static TCase *tcase(Suite *s, const char *name) {
        TCase *tc = tcase_create(name);
        tcase_set_timeout(tc, 300);
        suite_add_tcase(s, tc);
        return tc;
}

/* One case per area, so CK_RUN_CASE=<area> runs one area. */
static Suite *suite(void) {
        Suite *s = suite_create("engine_behaviour");
        TCase *tc = tcase(s, "tasks");
        tcase_add_test(tc, host_inline_completes_without_dispatch);
        tcase_add_test(tc, predicates);
        tc = tcase(s, "external");
        tcase_add_test(tc, external_tasks);
        tcase_add_test(tc, external_error_status);
        tc = tcase(s, "stall");
        tcase_add_test(tc, stall_times_out_external);
        tcase_add_test(tc, stall_graph_beyond_submitted);
        tc = tcase(s, "protocol");
        tcase_add_loop_test(tc, bogus_mailbox_breaks_ring, 0, 3);
        tcase_add_test(tc, late_external_answer_ignored);
        tc = tcase(s, "idle");
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
        tc = tcase(s, "config");
        tcase_add_test(tc, config_limits);
        tcase_add_test(tc, docs_list_every_completion_mode);
        tcase_add_test(tc, docs_name_the_default_completion_mode);
        tcase_add_test(tc, config_small_and_uneven);
        tc = tcase(s, "rings");
        tcase_add_test(tc, ring_add_beyond_max);
        tcase_add_test(tc, ring_remove_with_graph_in_flight);
        tc = tcase(s, "blocks");
        tcase_add_test(tc, multi_block_tasks_stream);
        tcase_add_test(tc, chain_runs_as_continuations);
        tcase_add_test(tc, heartbeat_per_task);
        tcase_add_loop_test(tc, idle_thread_steals, 0, 2);
        tc = tcase(s, "counters");
        tcase_add_test(tc, counters_add_up);
        tcase_add_test(tc, counters_with_failures);
        tcase_add_test(tc, counters_keep_removed_rings);
        tcase_add_test(tc, ready_stamp_of_a_later_task);
        tcase_add_test(tc, failed_dependency_far_back_seen);
        return s;
}

const struct check_main check_main = { .suite = suite };
