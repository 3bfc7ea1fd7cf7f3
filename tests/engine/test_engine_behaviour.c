/* SPDX-License-Identifier: MIT */
/*
 * Engine behaviour end to end, one behaviour per test: host-inline tasks,
 * predicates, external tasks and the mailbox, the stall detector, protocol
 * errors that stop a ring, tasks of several blocks, continuations and
 * theft, a failed dependency far back. Parking and wake-ups are
 * test_engine_wakeups.c, configuration and rings test_engine_config.c,
 * the counters test_engine_counters.c (helpers: behaviour_util.h).
 *
 * HBG_TEST_SCALE=N (default 1) divides the size of the streaming workload.
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

static struct harness_task copy_task(uint64_t in, uint64_t out, uint64_t n) {
        struct harness_task t = { .kernel = { 0, HBG_KERNEL_COPY_F32 }, .lane_mask = 2, .block_num = 2,
                                  .n_tensors = 2 };
        t.tensors[0] = harness_tensor(in, n * 4, HBG_DIR_IN);
        t.tensors[1] = harness_tensor(out, n * 4, HBG_DIR_OUT);
        return t;
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

/* One case per area, so CK_RUN_CASE=<area> runs one area. */
static Suite *suite(void) {
        Suite *s = suite_create("engine_behaviour");
        TCase *tc = behaviour_case(s, "tasks");
        tcase_add_test(tc, host_inline_completes_without_dispatch);
        tcase_add_test(tc, predicates);
        tc = behaviour_case(s, "external");
        tcase_add_test(tc, external_tasks);
        tcase_add_test(tc, external_error_status);
        tc = behaviour_case(s, "stall");
        tcase_add_test(tc, stall_times_out_external);
        tcase_add_test(tc, stall_graph_beyond_submitted);
        tc = behaviour_case(s, "protocol");
        tcase_add_loop_test(tc, bogus_mailbox_breaks_ring, 0, 3);
        tcase_add_test(tc, late_external_answer_ignored);
        tc = behaviour_case(s, "blocks");
        tcase_add_test(tc, multi_block_tasks_stream);
        tcase_add_test(tc, chain_runs_as_continuations);
        tcase_add_test(tc, heartbeat_per_task);
        tcase_add_loop_test(tc, idle_thread_steals, 0, 2);
        tc = behaviour_case(s, "failures");
        tcase_add_test(tc, failed_dependency_far_back_seen);
        return s;
}

const struct check_main check_main = { .suite = suite };
