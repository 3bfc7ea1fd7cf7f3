/* SPDX-License-Identifier: MIT */
/*
 * Errors that explain, against a real hbgd, through the public API only:
 *   validator      a task hbgd's validator refuses (a gemm shape the
 *                  library cannot check): hbg_graph_wait()'s code,
 *                  hbg_graph_error()'s task, kernel and the validator's
 *                  own reason, hbg_last_error() saying the same;
 *   kernel_runtime the fail kernel's error at run time ("kernel fail
 *                  returned -EIO"), a skipped dependant not hiding it, and a
 *                  later good graph's empty info;
 *   host_task      a host function's error: "host task returned -ENOSPC";
 *   skipped_writer_read_later
 *                  a task that reads what a skipped task of its graph
 *                  should have written is skipped although the watermark
 *                  passed the skipped one before it was added (a window of
 *                  256, more tasks between them), and so is an in-place
 *                  (INOUT) one: their outputs keep their bytes; the next
 *                  graph, a retry that reads the tensor, runs, and one
 *                  that writes it again, then reads it, runs;
 *   complete_writes_free_after_failed_graph
 *                  after a failed graph, a later graph's reader of 17
 *                  pieces its complete tasks wrote depends on none of them
 *                  (no joining dummy); with a failure in its own graph, on
 *                  all 17 (a dummy joins them);
 *   stall          a session stall limit of 200 ms fails a hung host task
 *                  with -ETIME, while a short wait on a long kernel gives
 *                  -ETIMEDOUT (hbg_graph_error(): 1, running) and the
 *                  kernel then finishes (the detector does not fail
 *                  running kernels);
 *   stall_counts_from_the_request
 *                  a host function under the limit, after an idle second
 *                  in which hbgd's threads had checked the idle ring, is
 *                  not failed by the stall detector;
 *   stall_limit    [limits] max_stall_timeout_ms at N (granted) and N + 1
 *                  (-E2BIG with hbgd's message);
 *   kernel_time_budget
 *                  [limits] kernel_time_budget_ms = 1: a gemm_f32 on
 *                  subnormal A (1e-39) far longer than that fails with
 *                  -ETIME and the kernel's own message ("gemm_f32: kernel
 *                  exceeded its time budget of 1 ms", not the stall
 *                  limit's), and the session goes on; with the default
 *                  budget the same graph on ordinary numbers, and on
 *                  subnormal ones, gives the results computed here, bit
 *                  for bit (IEEE: no flush-to-zero);
 *   bad_arguments  hbg_graph_error()'s -EINVAL cases;
 *   hbgd_killed    after hbgd was killed (and reaped) the next
 *                  hbg_graph_submit() fails with -ECONNRESET, with the
 *                  io_uring hang-up watch and without it (HBG_IO_URING=0);
 *                  a running graph's hbg_graph_error() too;
 *   hangup_watch_at_first_submit  a connect sets up no io_uring, the first
 *                  submit does (one, kept); a client killed out from under
 *                  before its first submit still gets -ECONNRESET from it.
 */
#include <check.h>
#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "hbg/hbg.h"
#include "tests/e2e/daemon_util.h"
#include "tests/e2e/e2e_util.h"
#include "tests/check_main.h"

static hbg_client *connect_opts(struct hbgd_proc *d, hbg_connect_options *o) {
        o->socket_path = d->socket_path;
        o->heap_bytes = 1u << 20;
        hbg_client *c = NULL;
        int err = hbg_connect_opts(&c, o);
        D_ASSERT(d, err == 0, "hbg_connect_opts: %s [%s]", hbg_strerror(err), hbg_last_error(NULL));
        return c;
}

static hbg_client *connect_with(struct hbgd_proc *d) {
        hbg_connect_options o = HBG_CONNECT_OPTIONS_INIT;
        return connect_opts(d, &o);
}

static uint64_t submit(struct hbgd_proc *d, hbg_client *c) {
        uint64_t g;
        int err = hbg_graph_submit(c, &g);
        D_ASSERT(d, err == 0, "submit: %s [%s]", hbg_strerror(err), hbg_last_error(c));
        return g;
}

static void add(struct hbgd_proc *d, hbg_client *c, const hbg_task *t, uint64_t *ret_id) {
        int err = hbg_graph_add(c, t, ret_id);
        D_ASSERT(d, err == 0, "add: %s [%s]", hbg_strerror(err), hbg_last_error(c));
}

/* The graph failed with code at task, naming kernel ("" none) and saying
 * `what`; hbg_last_error() of the wait says the same. */
static void expect_failure(struct hbgd_proc *d, hbg_client *c, uint64_t g, int code, uint64_t task,
                           const char *kernel, const char *what) {
        int err = hbg_graph_wait(c, g, WAIT_MS);
        D_ASSERT(d, err == code, "graph %llu: wait returned %d (%s), expected %d [%s]", (unsigned long long)g, err,
                 hbg_strerror(err), code, hbg_last_error(c));
        char want[64];
        snprintf(want, sizeof(want), "at task %llu", (unsigned long long)task);
        const char *le = hbg_last_error(c);
        D_ASSERT(d, strstr(le, want) && strstr(le, what) && (!kernel[0] || strstr(le, kernel)),
                 "hbg_last_error does not name task %llu, kernel '%s' and '%s': %s", (unsigned long long)task,
                 kernel, what, le);

        hbg_graph_error_info info = HBG_GRAPH_ERROR_INFO_INIT;
        err = hbg_graph_error(c, g, &info);
        D_ASSERT(d, err == 0, "hbg_graph_error: %d [%s]", err, hbg_last_error(c));
        ck_assert_int_eq(info.code, code);
        ck_assert_uint_eq(info.task, task);
        ck_assert_str_eq(info.kernel, kernel);
        ck_assert_int_eq(info.kernel_id, kernel[0] ? hbg_kernel_id(kernel) : -1);
        D_ASSERT(d, strstr(info.message, what), "message '%s' does not say '%s'", info.message, what);
        ck_assert_ptr_nonnull(memchr(info.message, '\0', sizeof(info.message)));
        uint64_t t = 0;
        ck_assert_int_eq(hbg_graph_status(c, g, &t), code);
        ck_assert_uint_eq(t, task);
        fprintf(stderr, "graph %llu: %s\n", (unsigned long long)g, le);
}

static void expect_success_info(struct hbgd_proc *d, hbg_client *c, uint64_t g) {
        int err = hbg_graph_wait(c, g, WAIT_MS);
        D_ASSERT(d, err == 0, "graph %llu failed: %s [%s]", (unsigned long long)g, hbg_strerror(err),
                 hbg_last_error(c));
        hbg_graph_error_info info = HBG_GRAPH_ERROR_INFO_INIT;
        info.code = 99;
        ck_assert_int_eq(hbg_graph_error(c, g, &info), 0);
        ck_assert_int_eq(info.code, 0);
        ck_assert_uint_eq(info.task, 0);
        ck_assert_int_eq(info.kernel_id, -1);
        ck_assert_str_eq(info.kernel, "");
        ck_assert_str_eq(info.message, "");
}

static hbg_task fill(hbg_tensor t, float v) {
        hbg_task k = HBG_TASK_INIT("fill_f32");
        k.n_args = 1;
        k.args[0].tensor = t;
        k.args[0].dir = HBG_OUT;
        k.n_scalars = 1;
        k.scalars[0] = hbg_f32(v);
        return k;
}
/* After a failed graph the session goes on: a 1-task graph succeeds. */
static void expect_session_goes_on(struct hbgd_proc *d, hbg_client *c) {
        hbg_tensor x;
        ck_assert_int_eq(hbg_tensor_alloc(c, 64, &x), 0);
        hbg_task w = fill(x, 1.0f);
        add(d, c, &w, NULL);
        expect_success_info(d, c, submit(d, c));
}


/* gemm_f32 of A (4 x k) by B (k x 4) into X (4 x 4). */
static hbg_task gemm(hbg_tensor a, hbg_tensor b, hbg_tensor x, uint64_t k) {
        hbg_task t = HBG_TASK_INIT("gemm_f32");
        t.n_args = 3;
        t.args[0].tensor = a, t.args[0].dir = HBG_IN;
        t.args[1].tensor = b, t.args[1].dir = HBG_IN;
        t.args[2].tensor = x, t.args[2].dir = HBG_INOUT;
        t.n_scalars = 3;
        t.scalars[0] = t.scalars[1] = 4;
        t.scalars[2] = k;
        return t;
}

START_TEST(validator) {
        struct hbgd_proc *d = start_hbgd(MODE_URING, NULL);
        hbg_client *c = connect_with(d);
        hbg_tensor a, b, x;
        ck_assert_int_eq(hbg_tensor_alloc(c, 16, &a), 0);
        ck_assert_int_eq(hbg_tensor_alloc(c, 16, &b), 0);
        ck_assert_int_eq(hbg_tensor_alloc(c, 16, &x), 0);
        hbg_task f = fill(a, 1.0f);
        add(d, c, &f, NULL);
        /* 4 x 4 times 4 x 4 needs 64 bytes per tensor: hbgd's gemm check
         * refuses it (the library knows only the signature). */
        hbg_task t = gemm(a, b, x, 4);
        uint64_t bad;
        add(d, c, &t, &bad);
        uint64_t g = submit(d, c);
        /* With the numbers behind it, as a dry run says them. */
        expect_failure(d, c, g, -EINVAL, bad, "gemm_f32",
                       "gemm_f32: shape does not fit A: m*k = 4*4 = 16 elements, A has 4");
        hbg_disconnect(c);
        stop_hbgd(d);
}
END_TEST

/* A refusal's numbers make each message distinct: past the library's
 * table of distinct messages (1024), every graph still says its own.
 * Waited for 32 at a time: hbgd keeps the numbers of 64 refusals of
 * graphs not yet decided (RUNTIME_LOGIC §12.2). */
START_TEST(distinct_messages_all_kept) {
        enum { GRAPHS = 1100 };
        struct hbgd_proc *d = start_hbgd(MODE_URING, NULL);
        hbg_client *c = connect_with(d);
        hbg_tensor a, b, x;
        ck_assert_int_eq(hbg_tensor_alloc(c, 16, &a), 0);
        ck_assert_int_eq(hbg_tensor_alloc(c, 16, &b), 0);
        ck_assert_int_eq(hbg_tensor_alloc(c, 16, &x), 0);
        uint64_t first = 0, g = 0;
        for (unsigned i = 0; i < GRAPHS; i++) {
                hbg_task t = gemm(a, b, x, 4 + i); /* A needs 4 * k elements */
                add(d, c, &t, NULL);
                g = submit(d, c);
                if (i == 0)
                        first = g;
                if (i % 32 == 31)
                        ck_assert_int_eq(hbg_graph_wait(c, g, WAIT_MS), -EINVAL);
        }
        ck_assert_int_eq(hbg_graph_wait(c, g, WAIT_MS), -EINVAL);
        for (unsigned i = 0; i < GRAPHS; i++) {
                hbg_graph_error_info info = HBG_GRAPH_ERROR_INFO_INIT;
                ck_assert_int_eq(hbg_graph_error(c, first + i, &info), 0);
                char want[128];
                snprintf(want, sizeof(want), "gemm_f32: shape does not fit A: m*k = 4*%u = %u elements, A has 4",
                         4 + i, 4 * (4 + i));
                D_ASSERT(d, strcmp(info.message, want) == 0, "graph %u says '%s', expected '%s'", i, info.message,
                         want);
        }
        hbg_disconnect(c);
        stop_hbgd(d);
}
END_TEST

START_TEST(kernel_runtime) {
        struct hbgd_proc *d = start_hbgd(MODE_URING, NULL);
        hbg_client *c = connect_with(d);
        hbg_tensor x;
        ck_assert_int_eq(hbg_tensor_alloc(c, 64, &x), 0);
        hbg_task w = fill(x, 2.0f);
        add(d, c, &w, NULL);
        hbg_task f = HBG_TASK_INIT("fail");
        f.n_scalars = 1;
        f.scalars[0] = (uint64_t)(int64_t)-EIO;
        f.blocks = 4; /* every block fails: one of them names it */
        uint64_t bad;
        add(d, c, &f, &bad);
        /* A dependant: skipped (-ECANCELED), which must not hide the cause. */
        hbg_task s = fill(x, 3.0f);
        s.n_deps = 1;
        s.deps[0] = bad;
        add(d, c, &s, NULL);
        uint64_t g = submit(d, c);
        expect_failure(d, c, g, -EIO, bad, "fail", "kernel fail returned -EIO");

        /* The next graph succeeds, and says so. */
        add(d, c, &w, NULL);
        expect_success_info(d, c, submit(d, c));
        /* The failed graph is still known after the good one. */
        hbg_graph_error_info info = HBG_GRAPH_ERROR_INFO_INIT;
        ck_assert_int_eq(hbg_graph_error(c, g, &info), 0);
        ck_assert_int_eq(info.code, -EIO);
        ck_assert_str_eq(info.message, "kernel fail returned -EIO");
        hbg_disconnect(c);
        stop_hbgd(d);
}
END_TEST

static hbg_task copy(hbg_tensor in, hbg_tensor out) {
        hbg_task k = HBG_TASK_INIT("copy_f32");
        k.n_args = 2;
        k.args[0].tensor = in, k.args[0].dir = HBG_IN;
        k.args[1].tensor = out, k.args[1].dir = HBG_OUT;
        return k;
}

/* The first float of t. */
static float first_of(hbg_client *c, hbg_tensor t) {
        return ((const float *)hbg_tensor_data(c, t))[0];
}

START_TEST(skipped_writer_read_later) {
        struct hbgd_proc *d = start_hbgd(MODE_URING, NULL);
        hbg_connect_options o = HBG_CONNECT_OPTIONS_INIT;
        o.task_window = 256;
        hbg_client *c = connect_opts(d, &o);
        hbg_tensor a, z, junk, ones;
        ck_assert_int_eq(hbg_tensor_alloc(c, 64, &a), 0);
        ck_assert_int_eq(hbg_tensor_alloc(c, 64, &z), 0);
        ck_assert_int_eq(hbg_tensor_alloc(c, 64, &junk), 0);
        ck_assert_int_eq(hbg_tensor_alloc(c, 16, &ones), 0);
        hbg_task t = fill(z, 3.0f);
        add(d, c, &t, NULL);
        t = fill(ones, 1.0f);
        add(d, c, &t, NULL);
        expect_success_info(d, c, submit(d, c));

        hbg_task f = HBG_TASK_INIT("fail");
        f.n_scalars = 1;
        f.scalars[0] = (uint64_t)(int64_t)-EIO;
        uint64_t bad, skipped;
        add(d, c, &f, &bad);
        t = fill(a, 7.0f); /* skipped: a keeps its zeros */
        t.n_deps = 1;
        t.deps[0] = bad;
        add(d, c, &t, &skipped);
        /* More than the window: the watermark passes both before the reads. */
        for (unsigned i = 0; i < 600; i++) {
                t = fill(junk, (float)i);
                add(d, c, &t, NULL);
        }
        /* a += A B (4 x 1 by 1 x 4 of ones): an INOUT access reads a. */
        t = gemm(ones, ones, a, 1);
        add(d, c, &t, NULL);
        t = copy(a, z);
        add(d, c, &t, NULL);
        expect_failure(d, c, submit(d, c), -EIO, bad, "fail", "kernel fail returned -EIO");
        D_ASSERT(d, first_of(c, z) == 3.0f, "the copy of what task %llu (skipped) should have written ran in its "
                 "graph: z[0] = %g", (unsigned long long)skipped, first_of(c, z));
        D_ASSERT(d, first_of(c, a) == 0.0f, "the gemm into what task %llu (skipped) should have written ran in its "
                 "graph: a[0] = %g", (unsigned long long)skipped, first_of(c, a));

        /* A retry that reads a: a new graph, it runs on a as it is. */
        t = copy(a, z);
        add(d, c, &t, NULL);
        expect_success_info(d, c, submit(d, c));
        ck_assert_float_eq(first_of(c, z), 0.0f);

        /* Written again, then read: runs. */
        t = fill(a, 5.0f);
        add(d, c, &t, NULL);
        t = copy(a, z);
        add(d, c, &t, NULL);
        expect_success_info(d, c, submit(d, c));
        ck_assert_float_eq(first_of(c, z), 5.0f);
        hbg_disconnect(c);
        stop_hbgd(d);
}
END_TEST

/* Graph g (submitted) with a fail task of -EIO at task `bad`. */
static uint64_t fail_graph(struct hbgd_proc *d, hbg_client *c, uint64_t *bad) {
        hbg_task f = HBG_TASK_INIT("fail");
        f.n_scalars = 1;
        f.scalars[0] = (uint64_t)(int64_t)-EIO;
        add(d, c, &f, bad);
        return submit(d, c);
}

/* PIECES tasks each writing a piece of x, then more tasks than the window
 * (the watermark passes the writers), then a copy reading all of x: its
 * id. With a failure in the graph, the copy depends on the PIECES
 * complete writers (joined by a dummy task: the id skips one); without,
 * on none. */
#define PIECES 17u
static uint64_t read_complete_pieces(struct hbgd_proc *d, hbg_client *c, hbg_tensor x, hbg_tensor y,
                                     hbg_tensor junk, bool fail_in_graph, uint64_t *ret_before) {
        for (unsigned i = 0; i < PIECES; i++) {
                hbg_task t = fill((hbg_tensor){ x.offset + 64u * i, 64 }, (float)(i + 1));
                add(d, c, &t, NULL);
        }
        if (fail_in_graph) {
                hbg_task f = HBG_TASK_INIT("fail");
                f.n_scalars = 1;
                f.scalars[0] = (uint64_t)(int64_t)-EIO;
                add(d, c, &f, NULL);
        }
        uint64_t before = 0, id;
        for (unsigned i = 0; i < 600; i++) {
                hbg_task t = fill(junk, (float)i);
                add(d, c, &t, &before);
        }
        hbg_task r = copy(x, y);
        add(d, c, &r, &id);
        *ret_before = before;
        return id;
}

/*
 * A failure keeps a graph's complete writes as dependencies only within
 * that graph: after a failed graph, a later one's reader of bytes its
 * complete tasks wrote depends on nothing (hbgd says which task failed
 * last: failed_high); with a failure of its own, on those writers.
 */
START_TEST(complete_writes_free_after_failed_graph) {
        struct hbgd_proc *d = start_hbgd(MODE_URING, NULL);
        hbg_connect_options o = HBG_CONNECT_OPTIONS_INIT;
        o.task_window = 256;
        hbg_client *c = connect_opts(d, &o);
        hbg_tensor x, y, junk;
        ck_assert_int_eq(hbg_tensor_alloc(c, 64 * PIECES, &x), 0);
        ck_assert_int_eq(hbg_tensor_alloc(c, 64 * PIECES, &y), 0);
        ck_assert_int_eq(hbg_tensor_alloc(c, 64, &junk), 0);
        uint64_t bad, failed = fail_graph(d, c, &bad);
        expect_failure(d, c, failed, -EIO, bad, "fail", "kernel fail returned -EIO");

        uint64_t before, id = read_complete_pieces(d, c, x, y, junk, false, &before);
        D_ASSERT(d, id == before + 1, "after a failed graph, a reader of its own graph's complete writes got "
                 "dependencies on them: its id %llu, the task before %llu", (unsigned long long)id,
                 (unsigned long long)before);
        expect_success_info(d, c, submit(d, c));
        for (unsigned i = 0; i < PIECES; i++)
                ck_assert_float_eq(((const float *)hbg_tensor_data(c, y))[16 * i], (float)(i + 1));

        id = read_complete_pieces(d, c, x, y, junk, true, &before);
        D_ASSERT(d, id == before + 2, "with a failure in its graph, the reader's %u complete writers were not "
                 "joined: its id %llu, the task before %llu", PIECES, (unsigned long long)id,
                 (unsigned long long)before);
        uint64_t g = submit(d, c);
        hbg_graph_error_info info = HBG_GRAPH_ERROR_INFO_INIT;
        ck_assert_int_eq(hbg_graph_wait(c, g, 10000), -EIO);
        ck_assert_int_eq(hbg_graph_error(c, g, &info), 0);
        ck_assert_int_eq(info.code, -EIO);
        hbg_disconnect(c);
        stop_hbgd(d);
}
END_TEST

static int fail_enospc(void *arg) {
        (void)arg;
        return -ENOSPC;
}

START_TEST(host_task) {
        struct hbgd_proc *d = start_hbgd(MODE_URING, NULL);
        hbg_client *c = connect_with(d);
        hbg_task h = HBG_TASK_INIT(NULL);
        h.host_fn = fail_enospc;
        uint64_t bad;
        add(d, c, &h, &bad);
        uint64_t g = submit(d, c);
        char want[160];
        snprintf(want, sizeof(want), "host task returned -ENOSPC");
        expect_failure(d, c, g, -ENOSPC, bad, "", want);
        hbg_disconnect(c);
        stop_hbgd(d);
}
END_TEST

#define STALL_MS 200            /* the session's stall limit in `stall` */
#define MAX_STALL_MS 1000       /* [limits] max_stall_timeout_ms here */

static const char conf[] = "[limits]\nmax_stall_timeout_ms = 1000\n";

static hbg_client *connect_stall(struct hbgd_proc *d, uint64_t stall_ms) {
        hbg_connect_options o = HBG_CONNECT_OPTIONS_INIT;
        o.stall_timeout_ms = stall_ms;
        return connect_opts(d, &o);
}

/* The hung host function's view of hbgd: a control connection of its own
 * (STATUS_SESSIONS), so that it returns once hbgd failed its graph rather
 * than after a guess at how long the detector takes. */
struct hang {
        struct hbgd_proc *d;
        int fd;
};

static bool own_graph_failed(struct hang *h) {
        Hbg__Envelope *r = status_of(h->d, h->fd, HBG__STATUS_KIND__STATUS_SESSIONS);
        bool failed = false;
        for (size_t i = 0; i < r->status_reply->n_sessions; i++)
                if (r->status_reply->sessions[i]->pid == (uint32_t)getpid() &&
                    r->status_reply->sessions[i]->graphs_failed > 0)
                        failed = true;
        wire_free(r);
        return failed;
}

static int hang(void *arg) {
        struct hang *h = arg;
        long long until = daemon_now_ms() + WAIT_MS;
        while (!own_graph_failed(h) && daemon_now_ms() < until)
                sleep_us(20000);
        return 0;
}

START_TEST(stall) {
        struct hbgd_proc *d = start_hbgd_conf(MODE_URING, conf);
        hbg_client *c = connect_stall(d, STALL_MS);

        /* A kernel running longer than the stall limit is not a stall, and
         * a wait shorter than it is the wait's own timeout. */
        hbg_task spin = HBG_TASK_INIT("spin_ns");
        spin.n_scalars = 1;
        spin.scalars[0] = 3 * STALL_MS * 1000000ull;
        add(d, c, &spin, NULL);
        uint64_t g = submit(d, c);
        int err = hbg_graph_wait(c, g, 10);
        D_ASSERT(d, err == -ETIMEDOUT, "a 10 ms wait on a %d ms kernel: %d (%s)", 3 * STALL_MS, err,
                 hbg_strerror(err));
        ck_assert_ptr_nonnull(strstr(hbg_last_error(c), "still running"));
        hbg_graph_error_info info = HBG_GRAPH_ERROR_INFO_INIT;
        ck_assert_int_eq(hbg_graph_error(c, g, &info), 1);
        expect_success_info(d, c, g);

        /* A host function hanging past the session's limit: its graph
         * fails with -ETIME (the wait returns once the function does). */
        struct hang hg = { .d = d, .fd = raw_connect(d->socket_path) };
        char why[256];
        send_hello(hg.fd, HBG_PROTO_MAJOR, NULL, 0);
        D_ASSERT(d, cx_expect(hg.fd, HBG__ENVELOPE__MSG_HELLO, IO_MS, why, sizeof(why)) == 0, "%s", why);
        hbg_task h = HBG_TASK_INIT(NULL);
        h.host_fn = hang;
        h.host_userdata = &hg;
        uint64_t hung;
        add(d, c, &h, &hung);
        g = submit(d, c);
        expect_failure(d, c, g, -ETIME, hung, "", "stall limit");
        close(hg.fd);
        ck_assert_str_eq(hbg_strerror(-ETIME), "a task exceeded the stall limit or a kernel time budget");

        expect_session_goes_on(d, c);
        hbg_disconnect(c);
        stop_hbgd(d);
}
END_TEST

static int nap_100ms(void *arg) {
        (void)arg;
        sleep_us(100 * 1000);
        return 0;
}

/*
 * The stall limit counts from when hbgd first saw the work pending, not
 * from a check made while the ring was idle: another session keeps the
 * scheduler threads awake (they check every ring, this idle one too),
 * then everything sleeps for two seconds, then a host function of 100 ms
 * runs under a limit of 1 s (margins for a slow machine). Counted from the
 * idle checks, it was over the limit before it began, and its graph
 * failed with -ETIME.
 */
START_TEST(stall_counts_from_the_request) {
        struct hbgd_proc *d = start_hbgd_conf(MODE_URING, conf);
        hbg_client *c = connect_stall(d, MAX_STALL_MS);
        hbg_client *busy = connect_stall(d, 0);
        struct workload w;
        ck_assert_msg(wl_init(&w, busy, 2) == 0, "%s", w.msg);
        for (int round = 0; round < 3; round++) {
                long long until = daemon_now_ms() + 500;
                while (daemon_now_ms() < until)
                        ck_assert_msg(wl_run(&w, 1, -1) == 1, "%s", w.msg);
                sleep_us(2 * MAX_STALL_MS * 1000L);
                hbg_task h = HBG_TASK_INIT(NULL);
                h.host_fn = nap_100ms;
                add(d, c, &h, NULL);
                uint64_t g = submit(d, c);
                int err = hbg_graph_wait(c, g, WAIT_MS);
                D_ASSERT(d, err == 0, "round %d: a 100 ms host function under a %d ms stall limit, after two idle "
                         "seconds: %s [%s]", round, MAX_STALL_MS, hbg_strerror(err), hbg_last_error(c));
        }
        hbg_disconnect(busy);
        hbg_disconnect(c);
        stop_hbgd(d);
}
END_TEST

START_TEST(stall_limit) {
        struct hbgd_proc *d = start_hbgd_conf(MODE_URING, conf);
        hbg_client *c = connect_stall(d, MAX_STALL_MS);
        hbg_disconnect(c);

        hbg_connect_options o = HBG_CONNECT_OPTIONS_INIT;
        o.socket_path = d->socket_path;
        o.stall_timeout_ms = MAX_STALL_MS + 1;
        c = NULL;
        int err = hbg_connect_opts(&c, &o);
        ck_assert_int_eq(err, -E2BIG);
        ck_assert_ptr_null(c);
        D_ASSERT(d, strstr(hbg_last_error(NULL), "max_stall_timeout_ms = 1000"),
                 "the refusal does not name the limit: %s", hbg_last_error(NULL));
        /* Refused, not dropped: the same connection's defaults work. */
        assert_serving(d);
        stop_hbgd(d);
}
END_TEST

/* C (m x n) += A (m x k) B (k x n), the kernel's documented order: one
 * float accumulator per element, p ascending (-ffp-contract=off). */
static void reference_gemm(const float *A, const float *B, float *C, unsigned m, unsigned n, unsigned k) {
        for (unsigned i = 0; i < m; i++)
                for (unsigned j = 0; j < n; j++) {
                        float c = C[i * n + j];
                        for (unsigned p = 0; p < k; p++)
                                c += A[i * k + p] * B[p * n + j];
                        C[i * n + j] = c;
                }
}

/* Big enough (56 M multiply-adds) to take far longer than 1 ms even on
 * ordinary numbers, so the test does not depend on how slow this CPU is on
 * subnormals; small enough to run in well under a second. */
enum { BUDGET_M = 384, BUDGET_N = 384, BUDGET_K = 384 };

struct budget_gemm {
        hbg_tensor a, b, c;
        uint64_t task, graph;
};

/* One graph of one gemm_f32 task: A all `av` (or, av == 0, a pattern of
 * subnormals and ordinary numbers), B a pattern in [-2, 2), C ones. */
static void budget_gemm_submit(struct hbgd_proc *d, hbg_client *c, struct budget_gemm *g, float av) {
        const size_t na = BUDGET_M * BUDGET_K, nb = BUDGET_K * BUDGET_N, nc = BUDGET_M * BUDGET_N;
        ck_assert_int_eq(hbg_tensor_alloc(c, na * 4, &g->a), 0);
        ck_assert_int_eq(hbg_tensor_alloc(c, nb * 4, &g->b), 0);
        ck_assert_int_eq(hbg_tensor_alloc(c, nc * 4, &g->c), 0);
        float *A = hbg_tensor_data(c, g->a), *B = hbg_tensor_data(c, g->b), *C = hbg_tensor_data(c, g->c);
        for (size_t i = 0; i < na; i++)
                A[i] = av != 0.0f ? av : (i % 3 ? 1e-39f * (float)(i % 7) : 0.25f * (float)(i % 5));
        for (size_t i = 0; i < nb; i++)
                B[i] = (float)((int)(i % 17) - 8) / 4.0f;
        for (size_t i = 0; i < nc; i++)
                C[i] = 1.0f;
        hbg_task t = HBG_TASK_INIT("gemm_f32");
        t.n_args = 3;
        t.args[0].tensor = g->a, t.args[0].dir = HBG_IN;
        t.args[1].tensor = g->b, t.args[1].dir = HBG_IN;
        t.args[2].tensor = g->c, t.args[2].dir = HBG_INOUT;
        t.n_scalars = 3;
        t.scalars[0] = BUDGET_M, t.scalars[1] = BUDGET_N, t.scalars[2] = BUDGET_K;
        add(d, c, &t, &g->task);
        g->graph = submit(d, c);
}

/* The graph succeeded and C is the reference's, bit for bit; how many of
 * C's elements are subnormal. */
static size_t budget_gemm_check(struct hbgd_proc *d, hbg_client *c, const struct budget_gemm *g) {
        const size_t nc = BUDGET_M * BUDGET_N;
        expect_success_info(d, c, g->graph);
        float *want = malloc(nc * sizeof(float));
        ck_assert_ptr_nonnull(want);
        for (size_t i = 0; i < nc; i++)
                want[i] = 1.0f;
        reference_gemm(hbg_tensor_data(c, g->a), hbg_tensor_data(c, g->b), want, BUDGET_M, BUDGET_N, BUDGET_K);
        const float *C = hbg_tensor_data(c, g->c);
        size_t subnormal = 0;
        for (size_t i = 0; i < nc; i++) {
                D_ASSERT(d, memcmp(&C[i], &want[i], sizeof(float)) == 0, "C[%zu] = %a, reference %a", i,
                         (double)C[i], (double)want[i]);
                subnormal += fpclassify(C[i]) == FP_SUBNORMAL;
        }
        free(want);
        return subnormal;
}

/* A session with room for three 384 x 384 matrices. */
static hbg_client *connect_big(struct hbgd_proc *d) {
        hbg_connect_options o = HBG_CONNECT_OPTIONS_INIT;
        o.socket_path = d->socket_path;
        o.heap_bytes = 4u << 20;
        hbg_client *c = NULL;
        int err = hbg_connect_opts(&c, &o);
        D_ASSERT(d, err == 0, "hbg_connect_opts: %s [%s]", hbg_strerror(err), hbg_last_error(NULL));
        return c;
}

START_TEST(kernel_time_budget) {
        /* The smallest budget: a gemm of subnormal A stops, with its own
         * message and -ETIME, at a time no test asserts. */
        struct hbgd_proc *d = start_hbgd_conf(MODE_URING, "[limits]\nkernel_time_budget_ms = 1\n");
        hbg_client *c = connect_big(d);
        struct budget_gemm g;
        budget_gemm_submit(d, c, &g, 1e-39f);
        expect_failure(d, c, g.graph, -ETIME, g.task, "gemm_f32", "gemm_f32: kernel exceeded its time budget of 1 ms");
        hbg_graph_error_info info = HBG_GRAPH_ERROR_INFO_INIT;
        ck_assert_int_eq(hbg_graph_error(c, g.graph, &info), 0);
        ck_assert_str_eq(info.message, "gemm_f32: kernel exceeded its time budget of 1 ms");
        D_ASSERT(d, !strstr(info.message, "stall"), "the stall limit's words: %s", info.message);
        expect_session_goes_on(d, c); /* (a task too small to look at the clock) */
        hbg_disconnect(c);
        stop_hbgd(d);

        /* The default budget (10 s): the same graph on ordinary numbers,
         * then on subnormal ones, is right to the bit. */
        d = start_hbgd(MODE_URING, NULL);
        c = connect_big(d);
        budget_gemm_submit(d, c, &g, 1.0f);
        budget_gemm_check(d, c, &g);
        hbg_disconnect(c);
        c = connect_big(d);
        budget_gemm_submit(d, c, &g, 0.0f);
        size_t subnormal = budget_gemm_check(d, c, &g);
        D_ASSERT(d, subnormal > 0, "no subnormal result: flushed to zero?");
        fprintf(stderr, "kernel_time_budget: %zu subnormal results of %u, equal to the reference\n", subnormal,
                BUDGET_M * BUDGET_N);
        hbg_disconnect(c);
        stop_hbgd(d);
}
END_TEST

START_TEST(bad_arguments) {
        struct hbgd_proc *d = start_hbgd(MODE_URING, NULL);
        hbg_client *c = connect_with(d);
        hbg_graph_error_info info = HBG_GRAPH_ERROR_INFO_INIT;
        ck_assert_int_eq(hbg_graph_error(NULL, 0, &info), -EINVAL);
        ck_assert_int_eq(hbg_graph_error(c, 0, &info), -EINVAL); /* never submitted */
        ck_assert_ptr_nonnull(strstr(hbg_last_error(c), "has not been submitted"));
        hbg_task n = HBG_TASK_INIT("noop");
        add(d, c, &n, NULL);
        uint64_t g = submit(d, c);
        ck_assert_int_eq(hbg_graph_error(c, g, NULL), -EINVAL);
        hbg_graph_error_info unset = { .size = 0 };
        ck_assert_int_eq(hbg_graph_error(c, g, &unset), -EINVAL);
        ck_assert_ptr_nonnull(strstr(hbg_last_error(c), "HBG_GRAPH_ERROR_INFO_INIT"));
        expect_success_info(d, c, g);
        hbg_disconnect(c);
        stop_hbgd(d);
}
END_TEST

START_TEST(hbgd_killed) {
        struct hbgd_proc *d = start_hbgd(MODE_URING, NULL);
        /* One client with the io_uring watch, one without. */
        hbg_client *c = connect_with(d);
        setenv("HBG_IO_URING", "0", 1);
        hbg_client *p = connect_with(d);
        unsetenv("HBG_IO_URING");

        hbg_task n = HBG_TASK_INIT("noop");
        add(d, c, &n, NULL);
        expect_success_info(d, c, submit(d, c));
        add(d, p, &n, NULL);
        expect_success_info(d, p, submit(d, p));

        /* A graph running when hbgd dies, and one being built. */
        hbg_task spin = HBG_TASK_INIT("spin_ns");
        spin.n_scalars = 1;
        spin.scalars[0] = 900000000ull;
        add(d, c, &spin, NULL);
        uint64_t running = submit(d, c);
        hbg_graph_error_info info = HBG_GRAPH_ERROR_INFO_INIT;
        ck_assert_int_eq(hbg_graph_error(c, running, &info), 1);
        add(d, c, &n, NULL);
        add(d, p, &n, NULL);

        ck_assert_int_eq(kill(d->pid, SIGKILL), 0);
        D_ASSERT(d, daemon_wait_exit(d, IO_MS) == 0, "hbgd did not die");

        uint64_t g;
        int err = hbg_graph_submit(c, &g);
        ck_assert_msg(err == -ECONNRESET, "submit after hbgd was killed: %d (%s)", err, hbg_strerror(err));
        ck_assert_ptr_nonnull(strstr(hbg_last_error(c), "hbgd went away"));
        err = hbg_graph_submit(p, &g);
        ck_assert_msg(err == -ECONNRESET, "submit (no io_uring) after hbgd was killed: %d (%s)", err,
                      hbg_strerror(err));
        ck_assert_int_eq(hbg_graph_error(c, running, &info), -ECONNRESET);
        ck_assert_int_eq(hbg_graph_add(c, &n, NULL), -ECONNRESET);
        hbg_tensor t;
        ck_assert_int_eq(hbg_tensor_alloc(c, 64, &t), -ECONNRESET);
        ck_assert_int_eq(hbg_tensor_alloc(p, 64, &t), -ECONNRESET);
        hbg_disconnect(c);
        hbg_disconnect(p);
        daemon_destroy(d);
}
END_TEST

/* This process's io_uring fds. */
static unsigned my_io_urings(void) {
        unsigned n = 0;
        DIR *dir = opendir("/proc/self/fd");
        ck_assert_ptr_nonnull(dir);
        struct dirent *e;
        while ((e = readdir(dir))) {
                char link[300], target[64];
                snprintf(link, sizeof(link), "/proc/self/fd/%s", e->d_name);
                ssize_t len = readlink(link, target, sizeof(target) - 1);
                target[len > 0 ? len : 0] = 0;
                n += strcmp(target, "anon_inode:[io_uring]") == 0;
        }
        closedir(dir);
        return n;
}

START_TEST(hangup_watch_at_first_submit) {
        if (!uring_available()) {
                fprintf(stderr, "hangup_watch_at_first_submit: skipped: io_uring is unavailable here\n");
                return;
        }
        struct hbgd_proc *d = start_hbgd(MODE_URING, NULL);
        unsigned before = my_io_urings();
        hbg_client *c = connect_with(d), *idle = connect_with(d);
        ck_assert_uint_eq(my_io_urings(), before);
        hbg_task n = HBG_TASK_INIT("noop");
        add(d, c, &n, NULL);
        expect_success_info(d, c, submit(d, c));
        ck_assert_uint_eq(my_io_urings(), before + 1);
        add(d, c, &n, NULL);
        expect_success_info(d, c, submit(d, c));
        ck_assert_uint_eq(my_io_urings(), before + 1);

        ck_assert_int_eq(kill(d->pid, SIGKILL), 0);
        D_ASSERT(d, daemon_wait_exit(d, IO_MS) == 0, "hbgd did not die");
        /* The add may see it already (its doorbell fails), else the
         * submit must. */
        uint64_t g;
        int err = hbg_graph_add(idle, &n, NULL);
        if (err == 0)
                err = hbg_graph_submit(idle, &g);
        ck_assert_msg(err == -ECONNRESET, "first add and submit after hbgd was killed: %d (%s)", err,
                      hbg_strerror(err));
        err = hbg_graph_add(c, &n, NULL);
        if (err == 0)
                err = hbg_graph_submit(c, &g);
        ck_assert_msg(err == -ECONNRESET, "add and submit after hbgd was killed: %d (%s)", err, hbg_strerror(err));
        hbg_disconnect(c);
        hbg_disconnect(idle);
        ck_assert_uint_eq(my_io_urings(), before);
        daemon_destroy(d);
}
END_TEST

static Suite *suite(void) {
        Suite *s = suite_create("e2e_errors");
        TCase *tc = tcase_create("errors");
        tcase_set_timeout(tc, 60);
        tcase_add_test(tc, validator);
        tcase_add_test(tc, distinct_messages_all_kept);
        tcase_add_test(tc, kernel_runtime);
        tcase_add_test(tc, host_task);
        tcase_add_test(tc, skipped_writer_read_later);
        tcase_add_test(tc, complete_writes_free_after_failed_graph);
        tcase_add_test(tc, stall);
        tcase_add_test(tc, stall_counts_from_the_request);
        tcase_add_test(tc, stall_limit);
        tcase_add_test(tc, kernel_time_budget);
        tcase_add_test(tc, bad_arguments);
        tcase_add_test(tc, hbgd_killed);
        tcase_add_test(tc, hangup_watch_at_first_submit);
        suite_add_tcase(s, tc);
        return s;
}

const struct check_main check_main = {
        .suite = suite,
        .ignore_sigpipe = true,
        .setup = daemon_util_setup,
        .teardown = daemon_util_cleanup,
};
