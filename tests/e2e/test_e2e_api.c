/* SPDX-License-Identifier: MIT */
/*
 * libhbgclient's API 1.0 against a real hbgd:
 *   versions      HBG_VERSION_* against hbg_version() and
 *                 hbg_version_check();
 *   options       hbg_connect_opts(): sizes too small, fields newer than
 *                 the library (refused unless zero), the heap and window
 *                 asked for are what the session gets, a window beyond
 *                 hbgd's limit is refused with hbgd's message;
 *   kernel_ids    hbg_kernel_id() and tasks that name their kernel by id;
 *   client_kernels  API 1.4: hbgd's kernel table through the client
 *                 (hbg_client_kernel_count/_info/_id) lists every built-in
 *                 with its signature as compiled; unknown names -ENOENT;
 *                 a failed graph's kernel name is the table's string;
 *   task_size     hbg_task.size and .reserved are checked;
 *   add_n         hbg_graph_add_n(): ids in order, a bad task stops the
 *                 batch where it is and the message names its index;
 *   small_window  a chain 40x longer than a 256-task window (the producer
 *                 sleeps for window space again and again) with results
 *                 checked: a missed wake-up would hang it (the watchdog
 *                 fails the test);
 *   tensor_free   API 1.6: hbg_tensor_free() while a graph using the
 *                 tensor is pending (gated by a host task, which runs only
 *                 inside hbg_graph_wait()): an alloc of the same size gets
 *                 other bytes, the pending graph's results are intact, and
 *                 after the wait the bytes are reused; a task added after
 *                 the free on the freed bytes does not wait for their old
 *                 user; slices, double and unknown frees -EINVAL; tensors
 *                 of a recording -EBUSY;
 *   tensor_free_cycles  1,000 alloc + graph + free cycles in a 64 KiB heap
 *                 leave the whole heap free;
 *   tensor_wait_ready  hbg_tensor_wait_ready(): 0 ms only looks
 *                 (-ETIMEDOUT, the writer named), a wait returns once the
 *                 tensor's writer completed while a task added before it
 *                 still runs (the watermark held back) and again once the
 *                 watermark passes a writer, with the values written;
 *                 -EINVAL for NULL or an empty tensor, -EDEADLK from a
 *                 host function.
 */
#include <check.h>
#include <errno.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hbg/hbg.h"
#include "common/kernel_sig.h"
#include "tests/e2e/daemon_util.h"
#include "tests/e2e/e2e_util.h"
#include "tests/check_main.h"

static hbg_client *connect_ok(struct hbgd_proc *d, const hbg_connect_options *o) {
        hbg_client *c = NULL;
        int err = hbg_connect_opts(&c, o);
        D_ASSERT(d, err == 0, "hbg_connect_opts: %s [%s]", hbg_strerror(err), hbg_last_error(NULL));
        return c;
}

/* A client of d whose task and flag windows are both `window`. */
static hbg_client *connect_window(struct hbgd_proc *d, uint64_t window) {
        hbg_connect_options o = HBG_CONNECT_OPTIONS_INIT;
        o.socket_path = d->socket_path;
        o.task_window = window;
        o.flag_window = window;
        return connect_ok(d, &o);
}

START_TEST(versions) {
        char want[32];
        snprintf(want, sizeof(want), "%d.%d.%d", HBG_VERSION_MAJOR, HBG_VERSION_MINOR, HBG_VERSION_PATCH);
        ck_assert_str_eq(hbg_version(), want);
        ck_assert_int_eq(HBG_VERSION_CHECK(), 0);
        ck_assert_int_eq(hbg_version_check(HBG_VERSION_MAJOR, 0), 0);
        ck_assert_int_eq(hbg_version_check(HBG_VERSION_MAJOR, HBG_VERSION_MINOR + 1), -ENOTSUP);
        ck_assert_int_eq(hbg_version_check(HBG_VERSION_MAJOR + 1, 0), -ENOTSUP);
        ck_assert_int_eq(hbg_version_check(HBG_VERSION_MAJOR - 1, HBG_VERSION_MINOR), -ENOTSUP);
}
END_TEST

START_TEST(options) {
        struct hbgd_proc *d = start_hbgd(MODE_URING, NULL);
        hbg_client *c = NULL;

        hbg_connect_options o = HBG_CONNECT_OPTIONS_INIT;
        o.socket_path = d->socket_path;
        /* Version 1.0's struct ends with mailbox: one byte less is refused. */
        o.size = offsetof(hbg_connect_options, mailbox) + sizeof(o.mailbox) - 1;
        ck_assert_int_eq(hbg_connect_opts(&c, &o), -EINVAL);
        ck_assert_ptr_null(c);
        ck_assert_ptr_nonnull(strstr(hbg_last_error(NULL), "HBG_CONNECT_OPTIONS_INIT"));

        /* A caller built against a newer header: its extra fields must be
         * zero for this library to accept the struct. */
        struct {
                hbg_connect_options v1;
                uint64_t newer;
        } big = { .v1 = o };
        big.v1.size = sizeof(big);
        big.newer = 1;
        ck_assert_int_eq(hbg_connect_opts(&c, &big.v1), -E2BIG);
        ck_assert_ptr_nonnull(strstr(hbg_last_error(NULL), "newer"));
        big.newer = 0;
        c = connect_ok(d, &big.v1);
        hbg_disconnect(c);

        /* A caller built against 1.0 or 1.1 (no stall_timeout_ms): its
         * struct ends at mailbox, and nothing past it is read. */
        struct {
                hbg_connect_options v;
        } *old = malloc(sizeof(*old));
        ck_assert_ptr_nonnull(old);
        memset(old, 0xff, sizeof(*old)); /* bytes a 1.0 caller does not own */
        memcpy(old, &o, offsetof(hbg_connect_options, stall_timeout_ms));
        old->v.size = offsetof(hbg_connect_options, stall_timeout_ms);
        c = connect_ok(d, &old->v);
        hbg_disconnect(c);
        free(old);

        /* What is asked for is what the session gets. */
        o.size = sizeof(o);
        o.heap_bytes = 1u << 20;
        o.task_window = 1024;
        o.flag_window = 256;
        o.name = "api-test";
        c = connect_ok(d, &o);
        hbg_tensor t;
        ck_assert_int_eq(hbg_tensor_alloc(c, 1u << 20, &t), 0); /* the whole heap */
        ck_assert_int_eq(hbg_tensor_alloc(c, 64, &t), -ENOMEM);
        hbg_disconnect(c);

        /* Beyond hbgd's limits: hbgd's refusal, with its message. */
        o.task_window = 1ull << 40;
        ck_assert_int_lt(hbg_connect_opts(&c, &o), 0);
        ck_assert_ptr_null(c);
        ck_assert_msg(strlen(hbg_last_error(NULL)) > 0, "no message for the refused window");

        /* NULL options: the defaults, $HBG_SOCKET. */
        setenv("HBG_SOCKET", d->socket_path, 1);
        c = connect_ok(d, NULL);
        hbg_disconnect(c);
        unsetenv("HBG_SOCKET");
        stop_hbgd(d);
}
END_TEST

static void run_graph(struct hbgd_proc *d, hbg_client *c, const char *what) {
        uint64_t g;
        int err = hbg_graph_submit(c, &g);
        D_ASSERT(d, err == 0, "%s: submit: %s [%s]", what, hbg_strerror(err), hbg_last_error(c));
        err = hbg_graph_wait(c, g, 60000);
        D_ASSERT(d, err == 0, "%s: the graph failed: %s [%s]", what, hbg_strerror(err), hbg_last_error(c));
}

START_TEST(kernel_ids) {
        struct hbgd_proc *d = start_hbgd(MODE_URING, NULL);
        hbg_connect_options o = HBG_CONNECT_OPTIONS_INIT;
        o.socket_path = d->socket_path;
        hbg_client *c = connect_ok(d, &o);
        int add = hbg_kernel_id("add_f32"), noop = hbg_kernel_id("noop");
        ck_assert_int_gt(add, 0);
        ck_assert_int_gt(noop, 0);
        ck_assert_int_ne(add, noop);
        ck_assert_int_eq(hbg_kernel_id("no_such_kernel"), -ENOENT);
        ck_assert_int_eq(hbg_kernel_id(NULL), -ENOENT);

        enum { N = 256 };
        hbg_tensor x;
        ck_assert_int_eq(hbg_tensor_alloc(c, N * sizeof(float), &x), 0);
        float *px = hbg_tensor_data(c, x);
        for (unsigned i = 0; i < N; i++)
                px[i] = (float)i;
        hbg_task t = HBG_TASK_INIT(NULL);
        t.kernel_id = (uint16_t)add; /* x += x, in place, by id */
        t.n_args = 3;
        t.args[0].tensor = t.args[1].tensor = t.args[2].tensor = x;
        t.args[0].dir = t.args[1].dir = HBG_IN;
        t.args[2].dir = HBG_OUT;
        ck_assert_int_eq(hbg_graph_add(c, &t, NULL), 0);
        /* By id, the signature is still checked; the message names the
         * wrong argument, then the signature. */
        t.n_args = 2;
        ck_assert_int_eq(hbg_graph_add(c, &t, NULL), -EINVAL);
        ck_assert_msg(strstr(hbg_last_error(c), "add_f32 takes 3 tensor and 0 scalar arguments, not 2 and 0"),
                      "%s", hbg_last_error(c));
        t.n_args = 3;
        t.args[1].dir = HBG_OUT;
        ck_assert_int_eq(hbg_graph_add(c, &t, NULL), -EINVAL);
        ck_assert_msg(strstr(hbg_last_error(c), "argument 1 (b) must be an input (HBG_IN), not an output (HBG_OUT)") &&
                              strstr(hbg_last_error(c), "add_f32(in a, in b, out out)"),
                      "%s", hbg_last_error(c));
        run_graph(d, c, "add_f32 by id");
        for (unsigned i = 0; i < N; i++)
                ck_assert_float_eq(px[i], 2.0f * (float)i);
        hbg_disconnect(c);
        stop_hbgd(d);
}
END_TEST

START_TEST(client_kernels) {
        struct hbgd_proc *d = start_hbgd(MODE_URING, NULL);
        hbg_connect_options o = HBG_CONNECT_OPTIONS_INIT;
        o.socket_path = d->socket_path;
        hbg_client *c = connect_ok(d, &o);
        /* Without modules, hbgd's table is the built-ins, as compiled. */
        ck_assert_uint_eq(hbg_client_kernel_count(c), kernel_sig_count());
        ck_assert_uint_eq(hbg_client_kernel_count(NULL), 0);
        const char *fail_name = NULL;
        for (size_t i = 0; i < kernel_sig_count(); i++) {
                const struct hbg_kernel_sig *k = kernel_sig_at(i);
                hbg_kernel_desc kd = HBG_KERNEL_DESC_INIT;
                ck_assert_int_eq(hbg_client_kernel_info(c, i, &kd), 0);
                ck_assert_uint_eq(kd.size, sizeof(kd));
                ck_assert_int_eq(kd.id, k->id);
                ck_assert_str_eq(kd.name, k->name);
                ck_assert_str_eq(kd.summary, k->summary);
                ck_assert_str_eq(kd.length_rule, k->length_rule);
                ck_assert_ptr_null(kd.module);
                ck_assert_int_eq(kd.length, (int)k->length);
                ck_assert_int_eq(kd.in_place, k->in_place);
                ck_assert_int_eq(kd.splittable, k->splittable);
                ck_assert_uint_eq(kd.n_tensors, k->n_tensors);
                ck_assert_uint_eq(kd.n_scalars, k->n_scalars);
                for (unsigned a = 0; a < k->n_tensors; a++) {
                        ck_assert_str_eq(kd.tensor_names[a], k->tensors[a].name);
                        ck_assert_int_eq(kd.tensor_dirs[a], k->tensors[a].dir);
                }
                for (unsigned a = 0; a < k->n_scalars; a++) {
                        ck_assert_str_eq(kd.scalar_names[a], k->scalars[a].name);
                        ck_assert_int_eq(kd.scalar_types[a], k->scalars[a].kind);
                }
                ck_assert_int_eq(hbg_client_kernel_id(c, k->name), k->id);
                if (k->id == HBG_KERNEL_FAIL)
                        fail_name = kd.name;
        }
        hbg_kernel_desc kd = HBG_KERNEL_DESC_INIT;
        ck_assert_int_eq(hbg_client_kernel_info(c, kernel_sig_count(), &kd), -ENOENT);
        kd.size = 0;
        ck_assert_int_eq(hbg_client_kernel_info(c, 0, &kd), -EINVAL);
        ck_assert_int_eq(hbg_client_kernel_info(c, 0, NULL), -EINVAL);
        ck_assert_int_eq(hbg_client_kernel_info(NULL, 0, &kd), -EINVAL);
        ck_assert_int_eq(hbg_client_kernel_id(c, "no_such_kernel"), -ENOENT);
        ck_assert_msg(strstr(hbg_last_error(c), "unknown kernel 'no_such_kernel' (hbgd runs"), "%s",
                      hbg_last_error(c));
        ck_assert_int_eq(hbg_client_kernel_id(c, NULL), -EINVAL);
        ck_assert_int_eq(hbg_client_kernel_id(NULL, "noop"), -EINVAL);
        hbg_task t = HBG_TASK_INIT("no_such_kernel");
        ck_assert_int_eq(hbg_graph_add(c, &t, NULL), -ENOENT);
        ck_assert_msg(strstr(hbg_last_error(c), "hbg_graph_add: unknown kernel 'no_such_kernel' (hbgd runs"), "%s",
                      hbg_last_error(c));

        /* A failed graph names its kernel with the table's string. */
        t = (hbg_task)HBG_TASK_INIT(NULL);
        t.kernel_id = (uint16_t)hbg_client_kernel_id(c, "fail");
        t.n_scalars = 1;
        t.scalars[0] = hbg_i64(-EIO);
        uint64_t g;
        ck_assert_int_eq(hbg_graph_add(c, &t, NULL), 0);
        ck_assert_int_eq(hbg_graph_submit(c, &g), 0);
        ck_assert_int_eq(hbg_graph_wait(c, g, 60000), -EIO);
        hbg_graph_error_info info = HBG_GRAPH_ERROR_INFO_INIT;
        ck_assert_int_eq(hbg_graph_error(c, g, &info), 0);
        ck_assert_ptr_eq(info.kernel, fail_name);
        hbg_disconnect(c);
        stop_hbgd(d);
}
END_TEST

START_TEST(task_size) {
        struct hbgd_proc *d = start_hbgd(MODE_URING, NULL);
        hbg_client *c = NULL;
        int err = hbg_connect(&c, d->socket_path);
        D_ASSERT(d, err == 0, "hbg_connect: %s", hbg_strerror(err));
        hbg_task t = HBG_TASK_INIT("noop");
        t.size = 8;
        ck_assert_int_eq(hbg_graph_add(c, &t, NULL), -EINVAL);
        ck_assert_ptr_nonnull(strstr(hbg_last_error(c), "HBG_TASK_INIT"));
        t = HBG_TASK_INIT("noop");
        t.reserved = 1;
        ck_assert_int_eq(hbg_graph_add(c, &t, NULL), -EINVAL);
        /* size 0: a zero-initialised task of this version. */
        memset(&t, 0, sizeof(t));
        t.kernel = "noop";
        ck_assert_int_eq(hbg_graph_add(c, &t, NULL), 0);
        run_graph(d, c, "a task with size 0");
        hbg_disconnect(c);
        stop_hbgd(d);
}
END_TEST

START_TEST(add_n) {
        struct hbgd_proc *d = start_hbgd(MODE_URING, NULL);
        hbg_client *c = NULL;
        int err = hbg_connect(&c, d->socket_path);
        D_ASSERT(d, err == 0, "hbg_connect: %s", hbg_strerror(err));
        enum { N = 100 };
        static hbg_task tasks[N];
        uint64_t ids[N];
        for (unsigned i = 0; i < N; i++)
                tasks[i] = HBG_TASK_INIT("noop");
        ck_assert_int_eq(hbg_graph_add_n(c, tasks, N, ids), 0);
        for (unsigned i = 1; i < N; i++)
                ck_assert_uint_eq(ids[i], ids[0] + i);
        run_graph(d, c, "100 tasks in one call");
        ck_assert_int_eq(hbg_graph_add_n(c, tasks, 0, NULL), 0);
        ck_assert_int_eq(hbg_graph_add_n(c, NULL, 1, NULL), -EINVAL);

        /* Task 5 is bad: 0-4 are added, the message names task 5. */
        tasks[5].kernel = "no_such_kernel";
        memset(ids, 0, sizeof(ids));
        ck_assert_int_eq(hbg_graph_add_n(c, tasks, N, ids), -ENOENT);
        ck_assert_ptr_nonnull(strstr(hbg_last_error(c), "task 5 of 100"));
        ck_assert_ptr_nonnull(strstr(hbg_last_error(c), "no_such_kernel"));
        for (unsigned i = 1; i < 5; i++)
                ck_assert_uint_eq(ids[i], ids[0] + i);
        ck_assert_uint_eq(ids[5], 0);
        run_graph(d, c, "the 5 tasks before the bad one");
        hbg_disconnect(c);
        stop_hbgd(d);
}
END_TEST

START_TEST(small_window) {
        struct hbgd_proc *d = start_hbgd(MODE_URING, NULL);
        hbg_client *c = connect_window(d, 256);
        enum { N = 64 };
        const unsigned steps = 256 * 40;
        hbg_tensor x, one;
        ck_assert_int_eq(hbg_tensor_alloc(c, N * sizeof(float), &x), 0);
        ck_assert_int_eq(hbg_tensor_alloc(c, N * sizeof(float), &one), 0);
        float *px = hbg_tensor_data(c, x), *p1 = hbg_tensor_data(c, one);
        for (unsigned i = 0; i < N; i++) {
                px[i] = 0.0f;
                p1[i] = 1.0f;
        }
        /* x += 1, steps times: a chain through x (derived dependencies). */
        hbg_task t = HBG_TASK_INIT("add_f32");
        t.n_args = 3;
        t.args[0].tensor = x;
        t.args[0].dir = HBG_IN;
        t.args[1].tensor = one;
        t.args[1].dir = HBG_IN;
        t.args[2].tensor = x;
        t.args[2].dir = HBG_OUT;
        for (unsigned s = 0; s < steps; s++) {
                int err = hbg_graph_add(c, &t, NULL);
                D_ASSERT(d, err == 0, "step %u: %s [%s]", s, hbg_strerror(err), hbg_last_error(c));
        }
        run_graph(d, c, "a chain 40 windows long");
        for (unsigned i = 0; i < N; i++)
                ck_assert_float_eq(px[i], (float)steps);
        hbg_disconnect(c);
        stop_hbgd(d);
}
END_TEST

/* hbg_graph_room(): the window's free ids, exactly; 0 when the next add
 * would wait; what completes comes back; refused from a host function. */
struct room_probe {
        hbg_client *c;
        int64_t seen;
};

static int room_probe_fn(void *arg) {
        struct room_probe *p = arg;
        p->seen = hbg_graph_room(p->c);
        return 0;
}

START_TEST(graph_room) {
        struct hbgd_proc *d = start_hbgd(MODE_URING, NULL);
        hbg_client *c = connect_window(d, 256);
        ck_assert_int_eq(hbg_graph_room(NULL), -EINVAL);
        ck_assert_int_eq(hbg_graph_room(c), 256);
        /* A host task first: nothing completes until the wait runs it. */
        struct room_probe probe = { .c = c, .seen = 1 };
        hbg_task h = HBG_TASK_INIT(NULL);
        h.host_fn = room_probe_fn;
        h.host_userdata = &probe;
        ck_assert_int_eq(hbg_graph_add(c, &h, NULL), 0);
        hbg_task dummy = HBG_TASK_INIT(NULL);
        uint64_t last = 0;
        for (unsigned i = 1; i < 256; i++) {
                ck_assert_int_eq(hbg_graph_room(c), 256 - i);
                dummy.n_deps = 1;
                dummy.deps[0] = last;
                ck_assert_int_eq(hbg_graph_add(c, &dummy, &last), 0);
        }
        ck_assert_int_eq(hbg_graph_room(c), 0);
        uint64_t g;
        ck_assert_int_eq(hbg_graph_submit(c, &g), 0);
        int err = hbg_graph_wait(c, g, 10000);
        D_ASSERT(d, err == 0, "wait: %s [%s]", hbg_strerror(err), hbg_last_error(c));
        ck_assert_int_eq(probe.seen, -EDEADLK);
        ck_assert_int_eq(hbg_graph_room(c), 256);
        /* Recording does not use the window. */
        ck_assert_int_eq(hbg_graph_record_begin(c), 0);
        ck_assert_int_eq(hbg_graph_add(c, &HBG_TASK_INIT(NULL), NULL), 0);
        ck_assert_int_eq(hbg_graph_room(c), 256);
        uint32_t rec;
        ck_assert_int_eq(hbg_graph_record_end(c, &rec), 0);
        hbg_disconnect(c);
        stop_hbgd(d);
}
END_TEST

/* A task with more than 16 dependencies takes one more id for every 15
 * beyond them (hbg_graph_room(3)): the joining dummies. The dependencies
 * here are derived: a fill of `src` after R readers of it waits for all
 * R and for the fill before them, R + 1 in all. Then the graph runs and
 * every reader must have summed the fill before its round. (That a dummy
 * keeps every fanin is test_fanin_join's to show: a dropped one here
 * would rarely change what a reader saw.) */
static const unsigned join_readers[] = { 16, 17, 30, 31, 45, 46, 299 };
#define JOIN_ROUNDS (sizeof(join_readers) / sizeof(join_readers[0]))
#define JOIN_SRC 256u

/* A fill_f32 of x with v, after task *after (NULL: no explicit
 * dependency). */
static void add_fill(struct hbgd_proc *d, hbg_client *c, hbg_tensor x, float v, const uint64_t *after) {
        hbg_task t = HBG_TASK_INIT("fill_f32");
        t.n_args = 1;
        t.args[0].tensor = x;
        t.args[0].dir = HBG_OUT;
        t.n_scalars = 1;
        t.scalars[0] = hbg_f32(v);
        if (after) {
                t.n_deps = 1;
                t.deps[0] = *after;
        }
        int err = hbg_graph_add(c, &t, NULL);
        D_ASSERT(d, err == 0, "fill_f32: %s [%s]", hbg_strerror(err), hbg_last_error(c));
}

struct join_graph {
        hbg_tensor src, out;
        unsigned readers;
};

/* A reduce_sum_f32 of src into element k of out. */
static void add_reader(hbg_client *c, hbg_tensor src, hbg_tensor out, unsigned k) {
        hbg_tensor slot;
        ck_assert_int_eq(hbg_tensor_slice_f32(out, k, k + 1, &slot), 0);
        hbg_task t = HBG_TASK_INIT("reduce_sum_f32");
        t.n_args = 2;
        t.args[0].tensor = src;
        t.args[0].dir = HBG_IN;
        t.args[1].tensor = slot;
        t.args[1].dir = HBG_OUT;
        ck_assert_int_eq(hbg_graph_add(c, &t, NULL), 0);
}

static void join_tensors(hbg_client *c, struct join_graph *j) {
        j->readers = 0;
        for (size_t r = 0; r < JOIN_ROUNDS; r++)
                j->readers += join_readers[r];
        ck_assert_int_eq(hbg_tensor_alloc(c, JOIN_SRC * sizeof(float), &j->src), 0);
        ck_assert_int_eq(hbg_tensor_alloc(c, j->readers * sizeof(float), &j->out), 0);
}

/* The rounds: a fill, its readers, the next fill... after *gate (NULL:
 * none). With count_ids, each fill after readers must take exactly 1 +
 * the dummies of the window's room (nothing may complete meanwhile). */
static void add_join_rounds(struct hbgd_proc *d, hbg_client *c, const struct join_graph *j, const uint64_t *gate,
                            bool count_ids) {
        add_fill(d, c, j->src, 1.0f, gate);
        unsigned reader = 0;
        for (size_t r = 0; r < JOIN_ROUNDS; r++) {
                unsigned n = join_readers[r];
                for (unsigned k = 0; k < n; k++, reader++)
                        add_reader(c, j->src, j->out, reader);
                int64_t before = hbg_graph_room(c);
                add_fill(d, c, j->src, (float)(r + 2), NULL);
                unsigned deps = n + 1;
                int64_t took = before - hbg_graph_room(c), dummies = (deps - 16 + 14) / 15;
                ck_assert_msg(!count_ids || took == 1 + dummies,
                              "a task with %u dependencies took %lld ids, not 1 + %lld", deps, (long long)took,
                              (long long)dummies);
        }
}

static void join_outputs_reset(hbg_client *c, const struct join_graph *j) {
        float *res = hbg_tensor_data(c, j->out);
        for (unsigned k = 0; k < j->readers; k++)
                res[k] = -1.0f;
}

static void join_outputs_check(hbg_client *c, const struct join_graph *j, const char *what) {
        const float *res = hbg_tensor_data(c, j->out);
        unsigned reader = 0;
        for (size_t r = 0; r < JOIN_ROUNDS; r++)
                for (unsigned k = 0; k < join_readers[r]; k++, reader++)
                        ck_assert_msg(res[reader] == (float)((r + 1) * JOIN_SRC),
                                      "%s: reader %u of round %zu saw a sum of %g, not %g", what, k, r,
                                      (double)res[reader], (double)((r + 1) * JOIN_SRC));
}

/* Added straight to the window: nothing completes during the adds
 * (everything waits for a host task that runs in the wait), so the room
 * drops by exactly 1 + the dummies. */
START_TEST(graph_room_joins) {
        struct hbgd_proc *d = start_hbgd(MODE_URING, NULL);
        hbg_client *c = connect_window(d, 1024);
        struct join_graph j;
        join_tensors(c, &j);
        join_outputs_reset(c, &j);
        struct room_probe probe = { .c = c, .seen = 1 };
        hbg_task h = HBG_TASK_INIT(NULL);
        h.host_fn = room_probe_fn;
        h.host_userdata = &probe;
        uint64_t gate;
        ck_assert_int_eq(hbg_graph_add(c, &h, &gate), 0);
        add_join_rounds(d, c, &j, &gate, true);
        run_graph(d, c, "the join rounds");
        join_outputs_check(c, &j, "added");
        ck_assert_int_eq(probe.seen, -EDEADLK); /* the gate ran, in the wait */
        hbg_disconnect(c);
        stop_hbgd(d);
}
END_TEST

/* The same rounds recorded (their joins in the recording's ids, checked
 * by hbgd as it validates the recording), then launched twice. */
START_TEST(recorded_joins) {
        struct hbgd_proc *d = start_hbgd(MODE_URING, NULL);
        hbg_client *c = connect_window(d, 1024);
        struct join_graph j;
        join_tensors(c, &j);
        ck_assert_int_eq(hbg_graph_record_begin(c), 0);
        add_join_rounds(d, c, &j, NULL, false);
        uint32_t rec;
        int err = hbg_graph_record_end(c, &rec);
        D_ASSERT(d, err == 0, "record_end: %s [%s]", hbg_strerror(err), hbg_last_error(c));
        for (int launch = 0; launch < 2; launch++) {
                join_outputs_reset(c, &j);
                uint64_t g;
                err = hbg_graph_launch(c, rec, &g);
                D_ASSERT(d, err == 0, "launch: %s [%s]", hbg_strerror(err), hbg_last_error(c));
                err = hbg_graph_wait(c, g, WAIT_MS);
                D_ASSERT(d, err == 0, "wait: %s [%s]", hbg_strerror(err), hbg_last_error(c));
                join_outputs_check(c, &j, launch ? "second launch" : "first launch");
        }
        hbg_disconnect(c);
        stop_hbgd(d);
}
END_TEST

/* A launch's gate waits for the earlier tasks that conflict with the
 * recorded graph; more than 16 of them are joined by dummies before the
 * gate, as for an added task. Here the recorded graph fills `src` and
 * each round has R readers of it (after a fill) waiting: the gate waits
 * for R + 1 tasks and the launch takes 1 + the dummies + 1 ids. Every
 * reader must then have summed the fill before the launch. */
static const unsigned gate_readers[] = { 15, 16, 17, 46, 299 };

START_TEST(launch_gate_joins) {
        struct hbgd_proc *d = start_hbgd(MODE_URING, NULL);
        hbg_client *c = connect_window(d, 1024);
        hbg_tensor src, out;
        ck_assert_int_eq(hbg_tensor_alloc(c, JOIN_SRC * sizeof(float), &src), 0);
        ck_assert_int_eq(hbg_tensor_alloc(c, 299 * sizeof(float), &out), 0);
        ck_assert_int_eq(hbg_graph_record_begin(c), 0);
        add_fill(d, c, src, 2.0f, NULL);
        uint32_t rec;
        int err = hbg_graph_record_end(c, &rec);
        D_ASSERT(d, err == 0, "record_end: %s [%s]", hbg_strerror(err), hbg_last_error(c));
        for (size_t r = 0; r < sizeof(gate_readers) / sizeof(gate_readers[0]); r++) {
                unsigned n = gate_readers[r];
                float *res = hbg_tensor_data(c, out);
                for (unsigned k = 0; k < n; k++)
                        res[k] = -1.0f;
                /* Nothing completes before the wait: all after a host task. */
                struct room_probe probe = { .c = c, .seen = 1 };
                hbg_task h = HBG_TASK_INIT(NULL);
                h.host_fn = room_probe_fn;
                h.host_userdata = &probe;
                uint64_t first;
                ck_assert_int_eq(hbg_graph_add(c, &h, &first), 0);
                add_fill(d, c, src, 1.0f, &first);
                for (unsigned k = 0; k < n; k++)
                        add_reader(c, src, out, k);
                int64_t before = hbg_graph_room(c);
                uint64_t g;
                err = hbg_graph_launch(c, rec, &g);
                D_ASSERT(d, err == 0, "launch after %u readers: %s [%s]", n, hbg_strerror(err), hbg_last_error(c));
                unsigned deps = n + 1;
                int64_t took = before - hbg_graph_room(c), dummies = deps > 16 ? (deps - 16 + 14) / 15 : 0;
                ck_assert_msg(took == 1 + dummies + 1, "a launch whose gate has %u dependencies took %lld ids, not %lld",
                              deps, (long long)took, (long long)(2 + dummies));
                err = hbg_graph_wait(c, g, WAIT_MS);
                D_ASSERT(d, err == 0, "wait: %s [%s]", hbg_strerror(err), hbg_last_error(c));
                ck_assert_int_eq(probe.seen, -EDEADLK); /* the host task ran, in the wait */
                for (unsigned k = 0; k < n; k++)
                        ck_assert_msg(res[k] == (float)JOIN_SRC, "reader %u of %u saw a sum of %g, not %g", k, n,
                                      (double)res[k], (double)JOIN_SRC);
                const float *s = hbg_tensor_data(c, src);
                for (unsigned i = 0; i < JOIN_SRC; i++)
                        ck_assert_msg(s[i] == 2.0f, "src[%u] is %g after the launch, not 2", i, (double)s[i]);
        }
        hbg_disconnect(c);
        stop_hbgd(d);
}
END_TEST

/* ---------------------------------------------------------------- tensor_free */

enum { FREE_N = 1024 }; /* floats: 4 KiB tensors */

struct gate {
        hbg_client *c;
        hbg_tensor t;
        unsigned runs;
};

/* The old user of a freed tensor: writes 5.0 into it. Without host
 * threads it runs only inside hbg_graph_wait() (never in
 * hbg_graph_status()), so the test decides when it completes. */
static int gate_fn(void *arg) {
        struct gate *g = arg;
        float *p = hbg_tensor_data(g->c, g->t);
        for (unsigned i = 0; i < FREE_N; i++)
                p[i] = 5.0f;
        g->runs++;
        return 0;
}

static uint64_t add_checked(struct hbgd_proc *d, hbg_client *c, const hbg_task *t, const char *what) {
        uint64_t id = 0;
        int err = hbg_graph_add(c, t, &id);
        D_ASSERT(d, err == 0, "hbg_graph_add(%s): %s [%s]", what, hbg_strerror(err), hbg_last_error(c));
        return id;
}

static uint64_t submit_checked(struct hbgd_proc *d, hbg_client *c) {
        uint64_t g = 0;
        int err = hbg_graph_submit(c, &g);
        D_ASSERT(d, err == 0, "hbg_graph_submit: %s [%s]", hbg_strerror(err), hbg_last_error(c));
        return g;
}

static hbg_tensor alloc_checked(struct hbgd_proc *d, hbg_client *c, size_t bytes) {
        hbg_tensor t;
        int err = hbg_tensor_alloc(c, bytes, &t);
        D_ASSERT(d, err == 0, "hbg_tensor_alloc(%zu): %s [%s]", bytes, hbg_strerror(err), hbg_last_error(c));
        return t;
}

START_TEST(tensor_free) {
        struct hbgd_proc *d = start_hbgd(MODE_URING, NULL);
        hbg_connect_options o = HBG_CONNECT_OPTIONS_INIT;
        o.socket_path = d->socket_path;
        o.heap_bytes = 64 * 1024;
        hbg_client *c = connect_ok(d, &o);
        const size_t bytes = FREE_N * sizeof(float);

        /* Graph 1: the gate writes x, then y = x. Pending until waited. */
        hbg_tensor x = alloc_checked(d, c, bytes), y = alloc_checked(d, c, bytes);
        struct gate gate = { .c = c, .t = x };
        hbg_task h = HBG_TASK_INIT(NULL);
        h.host_fn = gate_fn;
        h.host_userdata = &gate;
        h.host_writes = &x;
        h.n_host_writes = 1;
        add_checked(d, c, &h, "the gate");
        hbg_task cp = HBG_TASK_INIT("copy_f32");
        cp.n_args = 2;
        cp.args[0].tensor = x;
        cp.args[0].dir = HBG_IN;
        cp.args[1].tensor = y;
        cp.args[1].dir = HBG_OUT;
        add_checked(d, c, &cp, "y = x");
        uint64_t g1 = submit_checked(d, c);

        /* Slices, unknown tensors, NULL: refused, x stays live. */
        hbg_tensor part;
        ck_assert_int_eq(hbg_tensor_slice_f32(x, 0, FREE_N - 1, &part), 0);
        ck_assert_int_eq(hbg_tensor_free(c, part), -EINVAL);
        ck_assert_ptr_nonnull(strstr(hbg_last_error(c), "not a live tensor"));
        ck_assert_int_eq(hbg_tensor_slice_f32(x, 16, FREE_N, &part), 0);
        ck_assert_int_eq(hbg_tensor_free(c, part), -EINVAL);
        ck_assert_int_eq(hbg_tensor_free(c, (hbg_tensor){ .offset = 40 * 1024, .bytes = 64 }), -EINVAL);
        ck_assert_int_eq(hbg_tensor_free(NULL, x), -EINVAL);

        /* Free x while graph 1 is pending: its bytes are not handed out. */
        ck_assert_int_eq(hbg_tensor_free(c, x), 0);
        ck_assert_int_eq(hbg_tensor_free(c, x), -EINVAL);
        ck_assert_ptr_nonnull(strstr(hbg_last_error(c), "freed already"));
        hbg_tensor z = alloc_checked(d, c, bytes);
        ck_assert_uint_ne(z.offset, x.offset);
        float *pz = hbg_tensor_data(c, z);
        for (unsigned i = 0; i < FREE_N; i++)
                pz[i] = -1.0f;
        /* The heap minus y, z and x's pending bytes: 52 KiB, not 56. */
        hbg_tensor big;
        ck_assert_int_eq(hbg_tensor_alloc(c, 56 * 1024, &big), -ENOMEM);
        ck_assert_ptr_nonnull(strstr(hbg_last_error(c), "hbg_tensor_free()"));
        ck_assert_ptr_nonnull(strstr(hbg_last_error(c), "4096 bytes are freed"));

        /* Dependency tracking forgot x: a task added now on x's old bytes
         * does not wait for the gate (which has not run). */
        hbg_task fill = HBG_TASK_INIT("fill_f32");
        fill.n_args = 1;
        fill.args[0].tensor = (hbg_tensor){ .offset = x.offset, .bytes = x.bytes };
        fill.args[0].dir = HBG_OUT;
        fill.n_scalars = 1;
        fill.scalars[0] = hbg_f32(2.0f);
        add_checked(d, c, &fill, "a fill of the freed bytes");
        submit_checked(d, c);
        /* Its graph is reported only after graph 1 retired (graphs retire
         * in order), so watch its result in the heap instead. Were it
         * after the gate, it would run only once graph 1 failed at the
         * stall limit: graph 1's wait below would fail. */
        const uint32_t *px = hbg_tensor_data(c, fill.args[0].tensor), two = (uint32_t)hbg_f32(2.0f);
        unsigned done = 0;
        for (unsigned ms = 0; done < FREE_N && ms < WAIT_MS; ms++) {
                while (done < FREE_N && __atomic_load_n(&px[done], __ATOMIC_ACQUIRE) == two)
                        done++;
                if (done < FREE_N)
                        sleep_us(1000);
        }
        D_ASSERT(d, done == FREE_N, "the task on the freed bytes did not run (waits for the old user?)");
        ck_assert_uint_eq(gate.runs, 0);

        /* Graph 1 completes with its own results; then x's bytes are free. */
        gate.t = (hbg_tensor){ .offset = x.offset, .bytes = x.bytes };
        int err = hbg_graph_wait(c, g1, WAIT_MS);
        D_ASSERT(d, err == 0, "graph 1: %s [%s]", hbg_strerror(err), hbg_last_error(c));
        ck_assert_uint_eq(gate.runs, 1);
        const float *py = hbg_tensor_data(c, y);
        for (unsigned i = 0; i < FREE_N; i++) {
                ck_assert_float_eq(py[i], 5.0f);
                ck_assert_float_eq(pz[i], -1.0f);
        }
        hbg_tensor x2 = alloc_checked(d, c, bytes);
        ck_assert_uint_eq(x2.offset, x.offset);

        /* A freed tensor nothing used is free at once. */
        hbg_tensor w = alloc_checked(d, c, bytes);
        ck_assert_int_eq(hbg_tensor_free(c, w), 0);
        hbg_tensor w2 = alloc_checked(d, c, bytes);
        ck_assert_uint_eq(w2.offset, w.offset);

        /* Tensors of a recording: -EBUSY while recording and after. */
        hbg_tensor r = alloc_checked(d, c, bytes), other = alloc_checked(d, c, bytes);
        ck_assert_int_eq(hbg_graph_record_begin(c), 0);
        fill.args[0].tensor = r;
        add_checked(d, c, &fill, "a recorded fill");
        ck_assert_int_eq(hbg_tensor_free(c, r), -EBUSY);
        ck_assert_ptr_nonnull(strstr(hbg_last_error(c), "recorded"));
        ck_assert_int_eq(hbg_tensor_free(c, other), 0);
        uint32_t rec;
        err = hbg_graph_record_end(c, &rec);
        D_ASSERT(d, err == 0, "hbg_graph_record_end: %s [%s]", hbg_strerror(err), hbg_last_error(c));
        ck_assert_int_eq(hbg_tensor_free(c, r), -EBUSY);
        ck_assert_ptr_nonnull(strstr(hbg_last_error(c), "recorded graph"));
        uint64_t g3;
        ck_assert_int_eq(hbg_graph_launch(c, rec, &g3), 0);
        err = hbg_graph_wait(c, g3, WAIT_MS);
        D_ASSERT(d, err == 0, "the launch: %s [%s]", hbg_strerror(err), hbg_last_error(c));
        const float *pr = hbg_tensor_data(c, r);
        for (unsigned i = 0; i < FREE_N; i++)
                ck_assert_float_eq(pr[i], 2.0f);
        hbg_disconnect(c);
        stop_hbgd(d);
}
END_TEST

START_TEST(tensor_free_cycles) {
        struct hbgd_proc *d = start_hbgd(MODE_URING, NULL);
        hbg_connect_options o = HBG_CONNECT_OPTIONS_INIT;
        o.socket_path = d->socket_path;
        o.heap_bytes = 64 * 1024;
        hbg_client *c = connect_ok(d, &o);
        /* 3/8 of the heap each: two never fit beside a pending third. */
        const size_t bytes = 24 * 1024;
        hbg_task fill = HBG_TASK_INIT("fill_f32");
        fill.n_args = 1;
        fill.args[0].dir = HBG_OUT;
        fill.n_scalars = 1;
        for (unsigned i = 0; i < 1000; i++) {
                hbg_tensor t = alloc_checked(d, c, bytes);
                fill.args[0].tensor = t;
                fill.scalars[0] = hbg_f32((float)i);
                add_checked(d, c, &fill, "a fill");
                uint64_t g = submit_checked(d, c);
                /* Freed while the graph may run: the next alloc waits on
                 * nothing, it takes the other bytes. */
                ck_assert_int_eq(hbg_tensor_free(c, t), 0);
                if (i % 2) {
                        int err = hbg_graph_wait(c, g, WAIT_MS);
                        D_ASSERT(d, err == 0, "cycle %u: %s [%s]", i, hbg_strerror(err), hbg_last_error(c));
                        ck_assert_float_eq(*(const float *)hbg_tensor_data(c, t), (float)i);
                }
        }
        hbg_tensor all = alloc_checked(d, c, 64 * 1024);
        ck_assert_uint_eq(all.offset, 0);
        hbg_disconnect(c);
        stop_hbgd(d);
}
END_TEST

/* A host function that tries hbg_tensor_wait_ready() on its client. */
struct wait_in_host {
        hbg_client *c;
        hbg_tensor t;
        int ret;
};

static int wait_in_host_fn(void *arg) {
        struct wait_in_host *w = arg;
        w->ret = hbg_tensor_wait_ready(w->c, w->t, 0);
        return 0;
}

static void add_spin(struct hbgd_proc *d, hbg_client *c, uint64_t ns, uint64_t *ret_id) {
        hbg_task t = HBG_TASK_INIT("spin_ns");
        t.n_scalars = 1;
        t.scalars[0] = ns;
        int err = hbg_graph_add(c, &t, ret_id);
        D_ASSERT(d, err == 0, "spin_ns: %s [%s]", hbg_strerror(err), hbg_last_error(c));
}

START_TEST(tensor_wait_ready) {
        /* Two threads awake, whatever the CPUs: the second task must run
         * beside the first. */
        struct hbgd_proc *d = start_hbgd_conf(MODE_URING, "[scheduler]\nmax_awake_threads = 2\n");
        hbg_connect_options o = HBG_CONNECT_OPTIONS_INIT;
        o.socket_path = d->socket_path;
        hbg_client *c = connect_ok(d, &o);
        enum { N = 1024 };
        hbg_tensor x, y;
        ck_assert_int_eq(hbg_tensor_alloc(c, N * sizeof(float), &x), 0);
        ck_assert_int_eq(hbg_tensor_alloc(c, N * sizeof(float), &y), 0);
        const float *px = hbg_tensor_data(c, x), *py = hbg_tensor_data(c, y);

        /* A 1 s task first, then a 200 ms one and x's writer after it:
         * the writer completes while the first task holds the watermark
         * back, so no pipe byte says so; the wait sees it anyway. */
        uint64_t hold, spin;
        add_spin(d, c, 1000000000, &hold);
        add_spin(d, c, 200000000, &spin);
        add_fill(d, c, x, 7.0f, &spin);
        uint64_t g;
        ck_assert_int_eq(hbg_graph_submit(c, &g), 0);
        ck_assert_int_eq(hbg_tensor_wait_ready(c, x, 0), -ETIMEDOUT);
        ck_assert_msg(strstr(hbg_last_error(c), "has not completed in time"), "%s", hbg_last_error(c));
        int err = hbg_tensor_wait_ready(c, x, 30000);
        D_ASSERT(d, err == 0, "x: %s [%s]", hbg_strerror(err), hbg_last_error(c));
        for (unsigned i = 0; i < N; i++)
                ck_assert_float_eq(px[i], 7.0f);
        /* Returned for x, not for the graph: the first task still runs. */
        ck_assert_int_eq(hbg_graph_wait(c, g, 0), -ETIMEDOUT);
        ck_assert_int_eq(hbg_graph_wait(c, g, 60000), 0);

        /* Nothing before the writer: the watermark passing it wakes the
         * wait. */
        add_spin(d, c, 20000000, &spin);
        add_fill(d, c, y, 3.0f, &spin);
        ck_assert_int_eq(hbg_graph_submit(c, &g), 0);
        err = hbg_tensor_wait_ready(c, y, 30000);
        D_ASSERT(d, err == 0, "y: %s [%s]", hbg_strerror(err), hbg_last_error(c));
        for (unsigned i = 0; i < N; i++)
                ck_assert_float_eq(py[i], 3.0f);
        ck_assert_int_eq(hbg_graph_wait(c, g, 60000), 0);
        ck_assert_int_eq(hbg_tensor_wait_ready(c, y, 0), 0);

        ck_assert_int_eq(hbg_tensor_wait_ready(NULL, y, 0), -EINVAL);
        ck_assert_int_eq(hbg_tensor_wait_ready(c, (hbg_tensor){ 0 }, 0), -EINVAL);
        /* From a host function of the client (run inside the wait). */
        struct wait_in_host w = { c, y, 1 };
        hbg_task h = HBG_TASK_INIT(NULL);
        h.host_fn = wait_in_host_fn;
        h.host_userdata = &w;
        ck_assert_int_eq(hbg_graph_add(c, &h, NULL), 0);
        run_graph(d, c, "host function");
        ck_assert_int_eq(w.ret, -EDEADLK);
        hbg_disconnect(c);
        stop_hbgd(d);
}
END_TEST

static Suite *suite(void) {
        Suite *s = suite_create("e2e_api");
        TCase *tc = tcase_create("api");
        tcase_set_timeout(tc, 120);
        tcase_add_test(tc, versions);
        tcase_add_test(tc, options);
        tcase_add_test(tc, kernel_ids);
        tcase_add_test(tc, client_kernels);
        tcase_add_test(tc, task_size);
        tcase_add_test(tc, add_n);
        tcase_add_test(tc, small_window);
        tcase_add_test(tc, graph_room);
        tcase_add_test(tc, graph_room_joins);
        tcase_add_test(tc, recorded_joins);
        tcase_add_test(tc, launch_gate_joins);
        tcase_add_test(tc, tensor_free);
        tcase_add_test(tc, tensor_free_cycles);
        tcase_add_test(tc, tensor_wait_ready);
        suite_add_tcase(s, tc);
        return s;
}

const struct check_main check_main = {
        .suite = suite,
        .ignore_sigpipe = true,
        .setup = daemon_util_setup,
        .teardown = daemon_util_cleanup,
};
