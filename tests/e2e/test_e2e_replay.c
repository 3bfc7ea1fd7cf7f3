/* SPDX-License-Identifier: MIT */
/*
 * Graph replay (RUNTIME_LOGIC.md §14) through libhbgclient against a real
 * hbgd, under each completion policy:
 *   results         a recorded graph (an in-place chain, a copy, a host
 *                   function, a predicated task) launched again and again
 *                   gives the results of adding its tasks anew each time;
 *                   plain tasks before a launch run before it (x *= 2
 *                   first) and after it run after it (a copy of its
 *                   output), with no wait in between;
 *   larger_than_window  a recorded chain four windows long and 600
 *                   independent tasks, launched several times, streamed
 *                   through a 256-task window;
 *   refusals        what the library and hbgd refuse, and that nothing of
 *                   a refused recording stays: a task hbgd finds invalid
 *                   (its message names it; its tasks count against
 *                   the budget all the same), max_recorded_tasks,
 *                   max_recorded_graphs, a launch of a graph never
 *                   recorded, submit and launch while recording, an empty
 *                   recording; then a good graph still records and runs;
 *   host_tasks_across_records  host functions at the edges of the launch
 *                   records a launch is written in (the library's records
 *                   stand for 64 tasks at most): each runs once per
 *                   launch, noop tasks around them;
 *   recording_charge  what a recording keeps is charged, not the most its
 *                   tasks could take: a chain of 4096 noop tasks costs
 *                   its uid 56 to 64 bytes a task (a validated task slot
 *                   is 512), the charge stays while it is launched, and
 *                   all of it goes with the session.
 */
#include <check.h>
#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "hbg/hbg.h"
#include "tests/e2e/daemon_util.h"
#include "tests/e2e/e2e_util.h"
#include "tests/check_main.h"


static hbg_client *connect_ok(struct hbgd_proc *d, unsigned window) {
        hbg_connect_options o = HBG_CONNECT_OPTIONS_INIT;
        o.socket_path = d->socket_path;
        o.task_window = window;
        o.flag_window = window;
        hbg_client *c = NULL;
        int err = hbg_connect_opts(&c, &o);
        D_ASSERT(d, err == 0, "hbg_connect_opts: %s [%s]", hbg_strerror(err), hbg_last_error(NULL));
        return c;
}

static void add_ok(struct hbgd_proc *d, hbg_client *c, const hbg_task *t, const char *what) {
        int err = hbg_graph_add(c, t, NULL);
        D_ASSERT(d, err == 0, "%s: %s [%s]", what, hbg_strerror(err), hbg_last_error(c));
}

static uint32_t record_end_ok(struct hbgd_proc *d, hbg_client *c) {
        uint32_t rec = 99;
        int err = hbg_graph_record_end(c, &rec);
        D_ASSERT(d, err == 0, "hbg_graph_record_end: %s [%s]", hbg_strerror(err), hbg_last_error(c));
        return rec;
}

/* Launch recorded graph rec as a graph of its own and wait for it. */
static void launch_wait_ok(struct hbgd_proc *d, hbg_client *c, uint32_t rec, unsigned round) {
        uint64_t g;
        int err = hbg_graph_launch(c, rec, &g);
        D_ASSERT(d, err == 0, "hbg_graph_launch: %s [%s]", hbg_strerror(err), hbg_last_error(c));
        err = hbg_graph_wait(c, g, 60000);
        D_ASSERT(d, err == 0, "launch %u: %s [%s]", round, hbg_strerror(err), hbg_last_error(c));
}

static hbg_task binary(const char *kernel, hbg_tensor a, hbg_tensor b, hbg_tensor out) {
        hbg_task t = HBG_TASK_INIT(kernel);
        t.n_args = 3;
        t.args[0].tensor = a;
        t.args[0].dir = HBG_IN;
        t.args[1].tensor = b;
        t.args[1].dir = HBG_IN;
        t.args[2].tensor = out;
        t.args[2].dir = HBG_OUT;
        return t;
}

static hbg_task copy(hbg_tensor from, hbg_tensor to) {
        hbg_task t = HBG_TASK_INIT("copy_f32");
        t.n_args = 2;
        t.args[0].tensor = from;
        t.args[0].dir = HBG_IN;
        t.args[1].tensor = to;
        t.args[1].dir = HBG_OUT;
        return t;
}

static hbg_tensor alloc_fill(struct hbgd_proc *d, hbg_client *c, unsigned n, float v) {
        hbg_tensor t;
        int err = hbg_tensor_alloc(c, n * sizeof(float), &t);
        D_ASSERT(d, err == 0, "hbg_tensor_alloc: %s", hbg_strerror(err));
        float *p = hbg_tensor_data(c, t);
        for (unsigned i = 0; i < n; i++)
                p[i] = v;
        return t;
}

static void all_eq(hbg_client *c, hbg_tensor t, unsigned n, float want, const char *what, unsigned round) {
        const float *p = hbg_tensor_data(c, t);
        for (unsigned i = 0; i < n; i++)
                ck_assert_msg(p[i] == want, "%s, round %u: element %u is %g, want %g", what, round, i,
                              (double)p[i], (double)want);
}

struct host_seen {
        hbg_client *c;
        hbg_tensor y;
        unsigned calls;
        float last_y0;
};

static int host_reads_y(void *userdata) {
        struct host_seen *h = userdata;
        h->calls++;
        h->last_y0 = ((const float *)hbg_tensor_data(h->c, h->y))[0];
        return 0;
}

enum { N = 64 };

START_TEST(results) {
        const char *mode = completion_name((unsigned)_i);
        struct hbgd_proc *d = start_hbgd_completion(MODE_URING, mode);
        hbg_client *c = connect_ok(d, 0);
        hbg_tensor x = alloc_fill(d, c, N, 0.0f), one = alloc_fill(d, c, N, 1.0f), two = alloc_fill(d, c, N, 2.0f);
        hbg_tensor y = alloc_fill(d, c, N, 0.0f), y2 = alloc_fill(d, c, N, 0.0f), z = alloc_fill(d, c, N, 0.0f);
        hbg_tensor p = alloc_fill(d, c, 1, 0.0f);
        struct host_seen seen = { .c = c, .y = y };

        /* x += 1 three times; y = x; the host reads y; z = 1 if p. */
        ck_assert_int_eq(hbg_graph_record_begin(c), 0);
        hbg_task inc = binary("add_f32", x, one, x);
        for (int i = 0; i < 3; i++) {
                uint64_t id = 99;
                ck_assert_int_eq(hbg_graph_add(c, &inc, &id), 0);
                ck_assert_uint_eq(id, (uint64_t)i); /* recording ids */
        }
        hbg_task cp = copy(x, y);
        add_ok(d, c, &cp, "record the copy");
        hbg_task host = HBG_TASK_INIT(NULL);
        host.host_fn = host_reads_y;
        host.host_userdata = &seen;
        host.host_reads = &y;
        host.n_host_reads = 1;
        add_ok(d, c, &host, "record the host function");
        hbg_task pred = copy(one, z);
        pred.has_predicate = 1;
        pred.predicate = p;
        add_ok(d, c, &pred, "record the predicated copy");
        uint32_t rec = record_end_ok(d, c);
        ck_assert_uint_eq(rec, 0);
        int err;
        /* Nothing ran while recording. */
        all_eq(c, x, N, 0.0f, "x after recording", 0);

        float want_x = 0.0f;
        float *pp = hbg_tensor_data(c, p);
        for (unsigned round = 1; round <= 6; round++) {
                pp[0] = (round % 2) ? 0.0f : 1.0f;
                /* Before the launch, in the same graph: x *= 2. */
                hbg_task dbl = binary("mul_f32", x, two, x);
                add_ok(d, c, &dbl, "x *= 2");
                uint64_t g1, g2;
                err = hbg_graph_launch(c, rec, &g1);
                D_ASSERT(d, err == 0, "hbg_graph_launch: %s [%s]", hbg_strerror(err), hbg_last_error(c));
                /* After the launch, another graph: y2 = y. */
                hbg_task after = copy(y, y2);
                add_ok(d, c, &after, "y2 = y");
                ck_assert_int_eq(hbg_graph_submit(c, &g2), 0);
                err = hbg_graph_wait(c, g1, 60000);
                D_ASSERT(d, err == 0, "launch %u: %s [%s]", round, hbg_strerror(err), hbg_last_error(c));
                err = hbg_graph_wait(c, g2, 60000);
                D_ASSERT(d, err == 0, "after launch %u: %s [%s]", round, hbg_strerror(err), hbg_last_error(c));
                want_x = want_x * 2.0f + 3.0f;
                all_eq(c, x, N, want_x, "x", round);
                all_eq(c, y, N, want_x, "y", round);
                all_eq(c, y2, N, want_x, "y2", round);
                ck_assert_uint_eq(seen.calls, round);
                ck_assert_msg(seen.last_y0 == want_x, "host function saw y = %g, want %g", (double)seen.last_y0,
                              (double)want_x);
                all_eq(c, z, N, round >= 2 ? 1.0f : 0.0f, "z (predicated)", round);
        }
        hbg_disconnect(c);
        stop_hbgd(d);
}
END_TEST

START_TEST(larger_than_window) {
        const char *mode = completion_name((unsigned)_i);
        struct hbgd_proc *d = start_hbgd_completion(MODE_URING, mode);
        hbg_client *c = connect_ok(d, 256);
        enum { CHAIN = 1024, WIDE = 600 };
        hbg_tensor x = alloc_fill(d, c, N, 0.0f), one = alloc_fill(d, c, WIDE, 1.0f);
        hbg_tensor w = alloc_fill(d, c, WIDE, 0.0f);

        ck_assert_int_eq(hbg_graph_record_begin(c), 0);
        hbg_task inc = binary("add_f32", x, (hbg_tensor){ one.offset, N * sizeof(float) }, x);
        for (int i = 0; i < CHAIN; i++)
                add_ok(d, c, &inc, "record the chain");
        for (unsigned i = 0; i < WIDE; i++) {
                hbg_tensor wi, oi;
                ck_assert_int_eq(hbg_tensor_slice_f32(w, i, i + 1, &wi), 0);
                ck_assert_int_eq(hbg_tensor_slice_f32(one, i, i + 1, &oi), 0);
                hbg_task t = binary("add_f32", wi, oi, wi);
                add_ok(d, c, &t, "record the wide part");
        }
        uint32_t rec = record_end_ok(d, c);
        for (unsigned round = 1; round <= 3; round++) {
                launch_wait_ok(d, c, rec, round);
                all_eq(c, x, N, (float)(CHAIN * round), "chain", round);
                all_eq(c, w, WIDE, (float)round, "wide", round);
        }
        hbg_disconnect(c);
        stop_hbgd(d);
}
END_TEST

START_TEST(refusals) {
        struct hbgd_proc *d = start_hbgd_conf(MODE_URING, "[limits]\nmax_recorded_tasks = 8\n"
                                                          "max_recorded_graphs = 2\n");
        hbg_client *c = connect_ok(d, 0);
        hbg_tensor x = alloc_fill(d, c, N, 0.0f), one = alloc_fill(d, c, N, 1.0f);
        hbg_task inc = binary("add_f32", x, one, x);
        uint32_t rec;
        uint64_t g;

        ck_assert_int_eq(hbg_graph_record_end(c, &rec), -EINVAL);
        ck_assert_int_eq(hbg_graph_launch(c, 0, &g), -EINVAL);
        ck_assert_ptr_nonnull(strstr(hbg_last_error(c), "not a recorded graph"));

        /* Empty. */
        ck_assert_int_eq(hbg_graph_record_begin(c), 0);
        ck_assert_int_eq(hbg_graph_record_begin(c), -EBUSY);
        ck_assert_int_eq(hbg_graph_record_end(c, &rec), -EINVAL);

        /* A kernel id this library does not know passes its generic checks;
         * hbgd refuses it and names the task. */
        ck_assert_int_eq(hbg_graph_record_begin(c), 0);
        add_ok(d, c, &inc, "record");
        hbg_task unknown = HBG_TASK_INIT(NULL);
        unknown.kernel_id = 4000;
        add_ok(d, c, &unknown, "record an unknown kernel id");
        ck_assert_int_eq(hbg_graph_submit(c, &g), -EBUSY);
        ck_assert_int_eq(hbg_graph_launch(c, 0, &g), -EBUSY);
        int err = hbg_graph_record_end(c, &rec);
        ck_assert_int_eq(err, -ENOENT);
        ck_assert_msg(strstr(hbg_last_error(c), "task 1: unknown kernel"), "message: %s", hbg_last_error(c));

        /* The session's budget of recorded tasks. */
        ck_assert_int_eq(hbg_graph_record_begin(c), 0);
        for (int i = 0; i < 9; i++)
                add_ok(d, c, &inc, "record");
        ck_assert_int_eq(hbg_graph_record_end(c, &rec), -E2BIG);
        ck_assert_msg(strstr(hbg_last_error(c), "max_recorded_tasks"), "message: %s", hbg_last_error(c));
        /* The refused recording's 2 tasks count: hbgd validated them. */
        ck_assert_msg(strstr(hbg_last_error(c), "has recorded 2"), "message: %s", hbg_last_error(c));

        /* Two graphs fit; a third does not. */
        for (int k = 0; k < 3; k++) {
                ck_assert_int_eq(hbg_graph_record_begin(c), 0);
                add_ok(d, c, &inc, "record");
                err = hbg_graph_record_end(c, &rec);
                if (k < 2) {
                        D_ASSERT(d, err == 0, "record %d: %s [%s]", k, hbg_strerror(err), hbg_last_error(c));
                        ck_assert_uint_eq(rec, (uint32_t)k);
                } else {
                        ck_assert_int_eq(err, -ENOSPC);
                        ck_assert_msg(strstr(hbg_last_error(c), "max_recorded_graphs"), "message: %s",
                                      hbg_last_error(c));
                }
        }
        /* The ones that were recorded run. */
        for (uint32_t k = 0; k < 2; k++) {
                err = hbg_graph_launch(c, k, &g);
                D_ASSERT(d, err == 0, "launch %u: %s [%s]", k, hbg_strerror(err), hbg_last_error(c));
                err = hbg_graph_wait(c, g, 60000);
                D_ASSERT(d, err == 0, "launch %u: %s [%s]", k, hbg_strerror(err), hbg_last_error(c));
        }
        all_eq(c, x, N, 2.0f, "x", 0);
        ck_assert_int_eq(hbg_graph_launch(c, 2, &g), -EINVAL);
        hbg_disconnect(c);
        stop_hbgd(d);
}
END_TEST

static int count_call(void *userdata) {
        ++*(unsigned *)userdata;
        return 0;
}

START_TEST(host_tasks_across_records) {
        struct hbgd_proc *d = start_hbgd_completion(MODE_URING, completion_name((unsigned)_i));
        hbg_client *c = connect_ok(d, 0);
        enum { TASKS = 200 };
        /* Recording positions at, before and after the 64-task edges. */
        static const unsigned at[] = { 0, 62, 63, 64, 65, 127, 128, 129, 191, 192, 199 };
        enum { HOSTS = sizeof(at) / sizeof(at[0]) };
        unsigned calls[HOSTS] = { 0 };
        ck_assert_int_eq(hbg_graph_record_begin(c), 0);
        for (unsigned i = 0, h = 0; i < TASKS; i++) {
                hbg_task t = HBG_TASK_INIT("noop");
                if (h < HOSTS && at[h] == i) {
                        t = (hbg_task)HBG_TASK_INIT(NULL);
                        t.host_fn = count_call;
                        t.host_userdata = &calls[h++];
                }
                add_ok(d, c, &t, "record");
        }
        uint32_t rec = record_end_ok(d, c);
        for (unsigned round = 1; round <= 3; round++) {
                launch_wait_ok(d, c, rec, round);
                for (unsigned h = 0; h < HOSTS; h++)
                        D_ASSERT(d, calls[h] == round, "launch %u: the host function of recorded task %u ran %u "
                                 "times in all", round, at[h], calls[h]);
        }
        hbg_disconnect(c);
        stop_hbgd(d);
}
END_TEST

START_TEST(recording_charge) {
        struct hbgd_proc *d = start_hbgd_conf(MODE_URING, "[session]\nspare_rings = 0\n");
        int sock = raw_connect(d->socket_path);
        raw_hello(sock);
        uint64_t idle = memory_charged_now(d, sock);
        hbg_client *c = connect_ok(d, 1024);
        uint64_t connected = memory_charged_now(d, sock);
        enum { TASKS = 4096 };
        ck_assert_int_eq(hbg_graph_record_begin(c), 0);
        uint64_t prev = 0;
        for (int i = 0; i < TASKS; i++) {
                hbg_task t = HBG_TASK_INIT("noop");
                if (i) {
                        t.deps[0] = prev;
                        t.n_deps = 1;
                }
                int err = hbg_graph_add(c, &t, &prev);
                D_ASSERT(d, err == 0, "record task %d: %s [%s]", i, hbg_strerror(err), hbg_last_error(c));
        }
        uint32_t rec = record_end_ok(d, c);
        uint64_t recorded = memory_charged_now(d, sock);
        /* 56 bytes a task, 8 its fanin (the first has none), 32 the graph. */
        D_ASSERT(d, recorded >= connected + (uint64_t)TASKS * 56 && recorded <= connected + (uint64_t)TASKS * 64 + 64,
                 "a recording of %d noop tasks charged %" PRIu64 " bytes (%" PRIu64 " a task), not 56 to 64 a task",
                 TASKS, recorded - connected, (recorded - connected) / TASKS);
        for (unsigned round = 1; round <= 2; round++)
                launch_wait_ok(d, c, rec, round);
        D_ASSERT(d, memory_charged_now(d, sock) == recorded, "the charge changed while the graph was launched: %" PRIu64
                 " bytes, was %" PRIu64, memory_charged_now(d, sock), recorded);
        hbg_disconnect(c);
        /* The session's close gives back all of it, recording included. */
        uint64_t now = 0;
        for (int tries = 0; tries < 500 && (now = memory_charged_now(d, sock)) != idle; tries++)
                usleep(10000);
        D_ASSERT(d, now == idle, "after the session: %" PRIu64 " bytes charged, %" PRIu64 " before it", now, idle);
        close(sock);
        stop_hbgd(d);
}
END_TEST

static Suite *suite(void) {
        Suite *s = suite_create("e2e_replay");
        TCase *tc = tcase_create("replay");
        tcase_set_timeout(tc, 180);
        tcase_add_loop_test(tc, results, 0, (int)completion_count());
        tcase_add_loop_test(tc, larger_than_window, 0, (int)completion_count());
        tcase_add_test(tc, refusals);
        tcase_add_loop_test(tc, host_tasks_across_records, 0, (int)completion_count());
        tcase_add_test(tc, recording_charge);
        suite_add_tcase(s, tc);
        return s;
}

const struct check_main check_main = {
        .suite = suite,
        .ignore_sigpipe = true,
        .setup = daemon_util_setup,
        .teardown = daemon_util_cleanup,
};
