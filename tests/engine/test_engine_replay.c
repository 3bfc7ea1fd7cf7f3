/* SPDX-License-Identifier: MIT */
/*
 * Graph replay in the engine (RUNTIME_LOGIC.md §14), the client played by
 * the in-process harness, which writes launch records with the producer's
 * own code or forges them, under each completion policy:
 *   launches        a recorded chain (x += 1, ten times) launched whole,
 *                   in two runs of ids (as a window too small for it makes
 *                   the client do), and several times in one graph, each
 *                   launch after a gate: x counts every task;
 *   forged          launch records a hostile client may write: a graph
 *                   never recorded, tasks beyond the recorded ones, a
 *                   count of 0 or beyond the window, a field that must be
 *                   zero, a gate before the ring's first id, a launch in a
 *                   ring that recorded nothing. Each fails its own graph
 *                   with the documented error, the ring stays usable and
 *                   the next honest graph succeeds;
 *   long_launch     a launch longer than a classification batch, good and
 *                   bad (classified over several visits);
 *   launch_beyond_submitted  a launch record whose ids are not all
 *                   published: the threads park, the stall detector stops
 *                   the ring (-ETIME);
 *   recording       ring_record() refuses an invalid task and names it,
 *                   an empty graph, and more than max_recorded_graphs;
 *   recorded_forms  every part of a task a recording keeps comes back at
 *                   each launch: tensors and scalars, fanins beyond the
 *                   inline ones, a predicate (off and on), three lanes of
 *                   four blocks, a task without a kernel, a host task
 *                   (external), a host-inline one; and a graph whose
 *                   tasks keep nothing but their fixed part.
 */
#include <check.h>
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "daemon/engine/engine.h"
#include "daemon/engine/engine_recorded.h"
#include "daemon/engine/engine_stats.h"
#include "common/kernel_sig.h"
#include "tests/engine/harness.h"
#include "tests/test_util.h"
#include "tests/check_main.h"

#define WAIT_MS 20000
enum { N = 64, CHAIN = 10 };


static void quiet_log(void *ud, int priority, const struct hbg_log_fields *f, const char *fmt, va_list ap) {
        (void)ud;
        (void)priority;
        (void)f;
        (void)fmt;
        (void)ap;
}

static uint64_t stall_ms = 10000;

static struct hbg_engine *replay_engine(unsigned mode) {
        struct hbg_engine_config cfg;
        struct hbg_engine *e = NULL;
        engine_config_default(&cfg);
        cfg.stall_timeout_ms = stall_ms;
        cfg.threads = 3;
        cfg.clusters = 2;
        cfg.completion_mode = mode;
        cfg.max_recorded_graphs = 2;
        cfg.log = quiet_log;
        ck_assert_int_eq(engine_new(&e, &cfg), 0);
        return e;
}

static void ring_open(struct harness_ring *h, struct hbg_engine *e) {
        struct hbg_geometry_request req;
        geometry_request_default(&req);
        req.task_window = 256;
        req.flag_window = 256;
        req.heap_size = 1u << 20;
        req.graph_table_entries = 64;
        req.mailbox_entries = 64;
        ck_assert_int_eq(harness_ring_init(h, e, &req, 0), 0);
}

struct fixture {
        struct hbg_engine *e;
        struct harness_ring h;
        uint64_t x, one;
};

/* x += one, in place: task i of the recorded chain depends on task i - 1
 * (relative id i), the first on the gate (0). */
static struct hbg_recorded_task chain_task(const struct fixture *f, unsigned i) {
        struct hbg_task_record t = { .kernel = { 0, HBG_KERNEL_ADD_F32 }, .lane_mask = 2, .block_num = 1,
                                     .n_tensors = 3 };
        t.tensors[0] = harness_tensor(f->x, N * 4, HBG_DIR_IN);
        t.tensors[1] = harness_tensor(f->one, N * 4, HBG_DIR_IN);
        t.tensors[2] = harness_tensor(f->x, N * 4, HBG_DIR_OUT);
        uint64_t fanin = i;
        struct hbg_recorded_task rt;
        memset(&rt, 0, sizeof(rt));
        producer_task_encode(&rt.desc, rt.payload.fanins, &rt.payload.args, i + 1, &t, &fanin, 1);
        return rt;
}

static void setup(struct fixture *f, unsigned mode, bool record) {
        f->e = replay_engine(mode);
        ring_open(&f->h, f->e);
        f->x = harness_alloc(&f->h, N * 4);
        f->one = harness_alloc(&f->h, N * 4);
        for (unsigned i = 0; i < N; i++) {
                harness_f32(&f->h, f->x)[i] = 0.0f;
                harness_f32(&f->h, f->one)[i] = 1.0f;
        }
        if (!record)
                return;
        struct hbg_recorded_task tasks[CHAIN];
        for (unsigned i = 0; i < CHAIN; i++)
                tasks[i] = chain_task(f, i);
        uint32_t bad;
        const char *why;
        ck_assert_int_eq(ring_record(f->h.ring, tasks, CHAIN, &bad, &why), 0);
}

static void teardown(struct fixture *f) {
        harness_ring_destroy(&f->h);
        engine_free(f->e);
}

/* A gate after `after` (UINT64_MAX: none). */
static uint64_t gate(struct fixture *f, uint64_t after) {
        struct harness_task t = { .block_num = 1 };
        if (after != UINT64_MAX)
                t.fanins[t.n_fanins++] = after;
        return harness_add_task(&f->h, &t);
}

static int run_graph(struct fixture *f, uint64_t *ret_task) {
        struct hbg_graph_entry ge;
        uint64_t k = harness_end_graph(&f->h, 7);
        ck_assert_int_eq(harness_wait_graph(&f->h, k, WAIT_MS, &ge), 0);
        if (ret_task)
                *ret_task = ge.first_error_task;
        return ge.status;
}

static float x0(struct fixture *f) {
        return harness_f32(&f->h, f->x)[0];
}

START_TEST(launches) {
        struct fixture f;
        setup(&f, (unsigned)_i, true);
        /* Whole. */
        gate(&f, UINT64_MAX);
        uint64_t first = producer_write_launch(&f.h.prod, 0, 0, CHAIN);
        ck_assert_int_eq(run_graph(&f, NULL), 0);
        ck_assert_float_eq(x0(&f), (float)CHAIN);

        /* In two runs of ids. */
        gate(&f, first + CHAIN - 1);
        producer_write_launch(&f.h.prod, 0, 0, 4);
        first = producer_write_launch(&f.h.prod, 0, 4, CHAIN - 4);
        ck_assert_int_eq(run_graph(&f, NULL), 0);
        ck_assert_float_eq(x0(&f), (float)(2 * CHAIN));

        /* Five launches in one graph, each gate after the last launch. */
        uint64_t last = first + CHAIN - 5;
        for (int k = 0; k < 5; k++) {
                gate(&f, last);
                last = producer_write_launch(&f.h.prod, 0, 0, CHAIN) + CHAIN - 1;
        }
        ck_assert_int_eq(run_graph(&f, NULL), 0);
        for (unsigned i = 0; i < N; i++)
                ck_assert_float_eq(harness_f32(&f.h, f.x)[i], (float)(7 * CHAIN));
        teardown(&f);
}
END_TEST

/* A forged launch record at the next id, covering `count` ids of the
 * client's window (advanced by `advance`). */
static uint64_t forge(struct fixture *f, struct hbg_task_desc d, uint64_t advance) {
        uint64_t id = f->h.prod.next_id;
        d.id = id;
        d.flags = HBG_DESC_LAUNCH;
        f->h.prod.descs[id & (f->h.g.task_window - 1)] = d;
        f->h.prod.next_id += advance;
        return id;
}

enum forgery {
        F_UNKNOWN_GRAPH,
        F_BEYOND_RECORDED,
        F_COUNT_ZERO,
        F_COUNT_BEYOND_WINDOW,
        F_FIELD_NOT_ZERO,
        F_GATE_BEFORE_FIRST_ID,
        N_FORGERIES,
};

static const struct {
        const char *what;
        int err;
} forgeries[N_FORGERIES] = {
        [F_UNKNOWN_GRAPH] = { "a graph never recorded", -EINVAL },
        [F_BEYOND_RECORDED] = { "tasks beyond the recorded ones", -EINVAL },
        [F_COUNT_ZERO] = { "count 0", -EINVAL },
        [F_COUNT_BEYOND_WINDOW] = { "count beyond the window", -EINVAL },
        [F_FIELD_NOT_ZERO] = { "a field that must be zero", -EPROTO },
        [F_GATE_BEFORE_FIRST_ID] = { "a gate before the ring's first id", -EINVAL },
};

START_TEST(forged) {
        for (int k = 0; k < N_FORGERIES; k++) {
                struct fixture f;
                setup(&f, (unsigned)_i, true);
                struct hbg_task_desc d = { .launch = { .graph = 0, .first = 0, .count = 2 } };
                uint64_t advance = 2;
                switch ((enum forgery)k) {
                case F_UNKNOWN_GRAPH: d.launch.graph = 5; break;
                case F_BEYOND_RECORDED: d.launch.first = CHAIN - 1; break;
                case F_COUNT_ZERO: d.launch.count = 0; advance = 1; break;
                case F_COUNT_BEYOND_WINDOW: d.launch.count = f.h.g.task_window + 1; advance = 1; break;
                case F_FIELD_NOT_ZERO: d.kernel[1] = HBG_KERNEL_NOOP; break;
                case F_GATE_BEFORE_FIRST_ID: d.launch.first = 3; break;
                case N_FORGERIES: break;
                }
                if (k != F_GATE_BEFORE_FIRST_ID)
                        gate(&f, UINT64_MAX);
                uint64_t id = forge(&f, d, advance), task;
                int st = run_graph(&f, &task);
                ck_assert_msg(st == forgeries[k].err, "%s: graph status %d, want %d", forgeries[k].what, st,
                              forgeries[k].err);
                ck_assert_msg(task == id, "%s: first failing task %llu, want %llu", forgeries[k].what,
                              (unsigned long long)task, (unsigned long long)id);
                ck_assert_msg(x0(&f) == 0.0f, "%s: a task ran", forgeries[k].what);
                /* Only that graph: the ring goes on. */
                struct ring_stats rs;
                ring_stats(f.h.ring, &rs);
                ck_assert_msg(!rs.broken, "%s: the ring is broken", forgeries[k].what);
                gate(&f, UINT64_MAX);
                producer_write_launch(&f.h.prod, 0, 0, CHAIN);
                ck_assert_int_eq(run_graph(&f, NULL), 0);
                ck_assert_float_eq(x0(&f), (float)CHAIN);
                teardown(&f);
        }

        /* A ring that recorded nothing does not know launch records. */
        struct fixture f;
        setup(&f, (unsigned)_i, false);
        gate(&f, UINT64_MAX);
        struct hbg_task_desc d = { .launch = { .graph = 0, .first = 0, .count = 1 } };
        forge(&f, d, 1);
        ck_assert_int_eq(run_graph(&f, NULL), -EINVAL);
        struct harness_task t = { .block_num = 1 };
        harness_add_task(&f.h, &t);
        ck_assert_int_eq(run_graph(&f, NULL), 0);
        teardown(&f);
}
END_TEST

/* A launch longer than classify_batch is classified over several visits
 * (the claimer goes on with it batch by batch); a bad one fails all its
 * ids the same way. */
START_TEST(long_launch) {
        enum { LONG = 250 };
        struct fixture f;
        setup(&f, (unsigned)_i, false);
        struct hbg_recorded_task tasks[LONG];
        for (unsigned i = 0; i < LONG; i++)
                tasks[i] = chain_task(&f, i);
        uint32_t bad;
        const char *why;
        ck_assert_int_eq(ring_record(f.h.ring, tasks, LONG, &bad, &why), 0);
        gate(&f, UINT64_MAX);
        uint64_t first = producer_write_launch(&f.h.prod, 0, 0, LONG);
        ck_assert_int_eq(run_graph(&f, NULL), 0);
        ck_assert_float_eq(x0(&f), (float)LONG);

        gate(&f, first + LONG - 1);
        struct hbg_task_desc d = { .launch = { .graph = 3, .first = 0, .count = LONG } };
        uint64_t id = forge(&f, d, LONG), task;
        ck_assert_int_eq(run_graph(&f, &task), -EINVAL);
        ck_assert_uint_eq(task, id);
        ck_assert_float_eq(x0(&f), (float)LONG);
        gate(&f, UINT64_MAX);
        producer_write_launch(&f.h.prod, 0, 0, LONG);
        ck_assert_int_eq(run_graph(&f, NULL), 0);
        ck_assert_float_eq(x0(&f), (float)(2 * LONG));
        teardown(&f);
}
END_TEST

/* A launch record covering ids the client never publishes: the threads
 * park (it is no work until they come), and the stall detector stops the
 * ring as it does for a graph waiting for a task never submitted. */
START_TEST(launch_beyond_submitted) {
        stall_ms = 1500;
        struct fixture f;
        setup(&f, (unsigned)_i, true);
        stall_ms = 10000;
        gate(&f, UINT64_MAX);
        struct hbg_task_desc d = { .launch = { .graph = 0, .first = 0, .count = 4 } };
        forge(&f, d, 2);
        uint64_t k = harness_end_graph(&f.h, 9);
        /* The threads park: they do not spin on the record. */
        struct timespec nap = { .tv_nsec = 200 * 1000000 };
        nanosleep(&nap, NULL);
        int64_t c0 = test_cpu_ns();
        nap.tv_nsec = 500 * 1000000;
        nanosleep(&nap, NULL);
        int64_t used = test_cpu_ns() - c0;
        ck_assert_msg(used < 250 * 1000000, "threads used %lld ms of CPU in 500 ms waiting for the launch",
                      (long long)(used / 1000000));
        struct hbg_graph_entry ge;
        ck_assert_int_eq(harness_wait_graph(&f.h, k, WAIT_MS, &ge), 0);
        ck_assert_int_eq(ge.status, -ETIME);
        ck_assert_msg(strstr(ge.message, "launch record covers tasks that were never submitted"), "message: %s",
                      ge.message);
        teardown(&f);
}
END_TEST

START_TEST(recording) {
        struct fixture f;
        setup(&f, HBG_COMPLETION_DEFAULT, false);
        struct hbg_recorded_task tasks[3];
        for (unsigned i = 0; i < 3; i++)
                tasks[i] = chain_task(&f, i);
        uint32_t bad = 99;
        const char *why = NULL;

        /* Task 1 depends on itself (relative id 2). */
        tasks[1].desc.fanins_inline[0] = 2;
        ck_assert_int_eq(ring_record(f.h.ring, tasks, 3, &bad, &why), -EINVAL);
        ck_assert_uint_eq(bad, 1);
        ck_assert_ptr_nonnull(why);
        ck_assert_ptr_nonnull(strstr(why, "fanin"));
        tasks[1] = chain_task(&f, 1);

        /* A task whose id is not its place. */
        tasks[2].desc.id = 7;
        ck_assert_int_eq(ring_record(f.h.ring, tasks, 3, &bad, &why), -EPROTO);
        ck_assert_uint_eq(bad, 2);
        tasks[2] = chain_task(&f, 2);

        ck_assert_int_eq(ring_record(f.h.ring, tasks, 0, &bad, &why), -EINVAL);
        ck_assert_int_eq(ring_record(f.h.ring, tasks, 3, &bad, &why), 0);
        ck_assert_int_eq(ring_record(f.h.ring, tasks, 2, &bad, &why), 1);
        ck_assert_int_eq(ring_record(f.h.ring, tasks, 1, &bad, &why), -ENOSPC);

        /* Both run: 3 + 2. */
        uint64_t g = gate(&f, UINT64_MAX);
        uint64_t first = producer_write_launch(&f.h.prod, 0, 0, 3);
        ck_assert_uint_eq(first, g + 1);
        gate(&f, first + 2);
        producer_write_launch(&f.h.prod, 1, 0, 2);
        ck_assert_int_eq(run_graph(&f, NULL), 0);
        ck_assert_float_eq(x0(&f), 5.0f);
        teardown(&f);
}
END_TEST

/* A task of a recorded graph: `t`, its fanins relative ids (0: the gate,
 * j + 1: task j), as task i. */
static struct hbg_recorded_task recorded(struct hbg_task_record t, unsigned i, const uint64_t *fanins,
                                         unsigned n_fanins) {
        struct hbg_recorded_task rt;
        memset(&rt, 0, sizeof(rt));
        producer_task_encode(&rt.desc, rt.payload.fanins, &rt.payload.args, i + 1, &t, fanins, n_fanins);
        return rt;
}

static struct hbg_task_record fill_record(uint64_t off, float v, uint8_t mask, uint16_t blocks) {
        struct hbg_task_record t = { .lane_mask = mask, .block_num = blocks, .n_tensors = 1, .n_scalars = 1 };
        for (unsigned l = 0; l < HBG_LANES; l++)
                if (mask & (1u << l))
                        t.kernel[l] = HBG_KERNEL_FILL_F32;
        t.tensors[0] = harness_tensor(off, N * 4, HBG_DIR_OUT);
        t.scalars[0] = harness_f32_scalar(v);
        return t;
}

static int count_host(void *userdata, uint64_t id) {
        (void)id;
        ++*(unsigned *)userdata;
        return 0;
}

static void expect_all(struct fixture *f, uint64_t off, float v, const char *what, int launch) {
        for (unsigned i = 0; i < N; i++)
                ck_assert_msg(harness_f32(&f->h, off)[i] == v, "launch %d: %s[%u] = %g, not %g", launch, what, i,
                              (double)harness_f32(&f->h, off)[i], (double)v);
}

START_TEST(recorded_forms) {
        struct fixture f;
        setup(&f, (unsigned)_i, false);
        uint64_t a = harness_alloc(&f.h, N * 4), b = harness_alloc(&f.h, N * 4), c = harness_alloc(&f.h, N * 4),
                 m = harness_alloc(&f.h, N * 4), off = harness_alloc(&f.h, 4), on = harness_alloc(&f.h, 4);
        harness_f32(&f.h, off)[0] = 0.0f;
        harness_f32(&f.h, on)[0] = 1.0f;
        /* Offset 0 (x) reads nonzero: a launch that lost the predicate's
         * offset would run the task predicated off. */
        ck_assert_uint_eq(f.x, 0);
        harness_f32(&f.h, f.x)[0] = 1.0f;
        unsigned host_calls = 0;
        f.h.external = count_host;
        f.h.external_userdata = &host_calls;

        enum { T_A, T_B, T_AXPY, T_OFF, T_MIX, T_JOIN, T_SCALE, T_HOST, T_INLINE, T_N };
        struct hbg_recorded_task tasks[T_N];
        const uint64_t gate_only[] = { 0 };
        /* a = 2, b = 3 */
        tasks[T_A] = recorded(fill_record(a, 2.0f, 2, 1), T_A, gate_only, 1);
        tasks[T_B] = recorded(fill_record(b, 3.0f, 2, 1), T_B, gate_only, 1);
        /* b = 0.5 a + b = 4: two tensors and a scalar, after both fills */
        struct hbg_task_record axpy = { .kernel = { 0, HBG_KERNEL_AXPY_F32 }, .lane_mask = 2, .block_num = 2,
                                        .n_tensors = 2, .n_scalars = 1 };
        axpy.tensors[0] = harness_tensor(a, N * 4, HBG_DIR_IN);
        axpy.tensors[1] = harness_tensor(b, N * 4, HBG_DIR_INOUT);
        axpy.scalars[0] = harness_f32_scalar(0.5f);
        const uint64_t after_fills[] = { T_A + 1, T_B + 1 };
        tasks[T_AXPY] = recorded(axpy, T_AXPY, after_fills, 2);
        /* c = 7 under a predicate that is 0: never runs */
        struct hbg_task_record never = fill_record(c, 7.0f, 2, 1);
        never.flags = HBG_TASK_HAS_PREDICATE;
        never.predicate_offset = off;
        tasks[T_OFF] = recorded(never, T_OFF, gate_only, 1);
        /* m = 9 by three lanes of four blocks */
        tasks[T_MIX] = recorded(fill_record(m, 9.0f, 7, 4), T_MIX, gate_only, 1);
        /* No kernel, five fanins: more than the descriptor holds inline. */
        struct hbg_task_record join = { .block_num = 1 };
        const uint64_t five[] = { T_A + 1, T_B + 1, T_AXPY + 1, T_OFF + 1, T_MIX + 1 };
        tasks[T_JOIN] = recorded(join, T_JOIN, five, 5);
        /* b = 2 b = 8 after the join, under a predicate that is 1 */
        struct hbg_task_record scale = { .kernel = { 0, HBG_KERNEL_SCALE_F32 }, .lane_mask = 2, .block_num = 1,
                                         .n_tensors = 1, .n_scalars = 1, .flags = HBG_TASK_HAS_PREDICATE,
                                         .predicate_offset = on };
        scale.tensors[0] = harness_tensor(b, N * 4, HBG_DIR_INOUT);
        scale.scalars[0] = harness_f32_scalar(2.0f);
        const uint64_t after_join[] = { T_JOIN + 1 };
        tasks[T_SCALE] = recorded(scale, T_SCALE, after_join, 1);
        /* Host tasks: one the client runs (external), one it ran inline. */
        struct hbg_task_record host = { .block_num = 1, .flags = HBG_TASK_EXTERNAL };
        tasks[T_HOST] = recorded(host, T_HOST, after_join, 1);
        struct hbg_task_record host_inline = { .block_num = 1, .flags = HBG_TASK_HOST_INLINE };
        tasks[T_INLINE] = recorded(host_inline, T_INLINE, gate_only, 1);
        uint32_t bad;
        const char *why;
        ck_assert_int_eq(ring_record(f.h.ring, tasks, T_N, &bad, &why), 0);
        /* Tasks with no fanins and no arguments: a graph with no words. */
        struct hbg_recorded_task bare[4];
        struct hbg_task_record noop = { .kernel = { HBG_KERNEL_NOOP }, .lane_mask = 1, .block_num = 1 };
        for (unsigned i = 0; i < 4; i++)
                bare[i] = recorded(i % 2 ? noop : (struct hbg_task_record){ .block_num = 1 }, i, NULL, 0);
        ck_assert_int_eq(ring_record(f.h.ring, bare, 4, &bad, &why), 1);

        uint64_t last = UINT64_MAX;
        for (int launch = 0; launch < 3; launch++) {
                for (unsigned i = 0; i < N; i++)
                        harness_f32(&f.h, a)[i] = harness_f32(&f.h, b)[i] = harness_f32(&f.h, m)[i] = 0.0f,
                        harness_f32(&f.h, c)[i] = -1.0f;
                gate(&f, last);
                last = producer_write_launch(&f.h.prod, 0, 0, T_N) + T_N - 1;
                uint64_t failed = 0;
                int st = run_graph(&f, &failed);
                ck_assert_msg(st == 0, "launch %d: status %d (task %" PRIu64 ")", launch, st, failed);
                expect_all(&f, a, 2.0f, "a", launch);
                expect_all(&f, b, 8.0f, "b", launch);
                expect_all(&f, c, -1.0f, "c (predicated off)", launch);
                expect_all(&f, m, 9.0f, "m (three lanes, four blocks)", launch);
                ck_assert_msg(host_calls == (unsigned)launch + 1, "launch %d: the host task ran %u times in all",
                              launch, host_calls);
                gate(&f, last);
                last = producer_write_launch(&f.h.prod, 1, 0, 4) + 3;
                st = run_graph(&f, &failed);
                ck_assert_msg(st == 0, "launch %d of the bare graph: status %d (task %" PRIu64 ")", launch, st,
                              failed);
        }
        teardown(&f);
}
END_TEST

static Suite *suite(void) {
        Suite *s = suite_create("engine_replay");
        TCase *tc = tcase_create("replay");
        tcase_set_timeout(tc, 120);
        tcase_add_loop_test(tc, launches, 0, (int)completion_mode_count());
        tcase_add_loop_test(tc, forged, 0, (int)completion_mode_count());
        tcase_add_loop_test(tc, long_launch, 0, (int)completion_mode_count());
        tcase_add_loop_test(tc, launch_beyond_submitted, 0, (int)completion_mode_count());
        tcase_add_test(tc, recording);
        tcase_add_loop_test(tc, recorded_forms, 0, (int)completion_mode_count());
        suite_add_tcase(s, tc);
        return s;
}

const struct check_main check_main = { .suite = suite };
