/* SPDX-License-Identifier: MIT */
/*
 * libhbgclient's argument rules against a real hbgd, as a producer meets
 * them:
 *   in_place    numpy's out= style runs: add_f32(x, x, x), mul_f32(x, y, x),
 *               axpy_f32(x, x), copy_f32(x, x), in blocks too, with the
 *               results checked element by element;
 *   refused     a partial overlap of an output with an input, and inputs
 *               shorter or longer than the output, are refused by
 *               hbg_graph_add() with -EINVAL and a message naming both
 *               arguments (hbgd refuses them too: test_kernels and
 *               test_engine_validation).
 */
#include <check.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>

#include "hbg/hbg.h"
#include "tests/e2e/daemon_util.h"
#include "tests/e2e/e2e_util.h"
#include "tests/check_main.h"

#define N 1000u

static hbg_task binary(const char *kernel, hbg_tensor a, hbg_tensor b, hbg_tensor out, uint16_t blocks) {
        hbg_task t = HBG_TASK_INIT(kernel);
        t.blocks = blocks;
        t.n_args = 3;
        t.args[0].tensor = a;
        t.args[0].dir = HBG_IN;
        t.args[1].tensor = b;
        t.args[1].dir = HBG_IN;
        t.args[2].tensor = out;
        t.args[2].dir = HBG_OUT;
        return t;
}

static void run(struct hbgd_proc *d, hbg_client *c, const hbg_task *t, const char *what) {
        uint64_t g;
        int err = hbg_graph_add(c, t, NULL);
        D_ASSERT(d, err == 0, "%s: hbg_graph_add: %s [%s]", what, hbg_strerror(err), hbg_last_error(c));
        err = hbg_graph_submit(c, &g);
        D_ASSERT(d, err == 0, "%s: submit: %s", what, hbg_strerror(err));
        err = hbg_graph_wait(c, g, 60000);
        D_ASSERT(d, err == 0, "%s: the graph failed: %s [%s]", what, hbg_strerror(err), hbg_last_error(c));
}

START_TEST(in_place) {
        struct hbgd_proc *d = start_hbgd(MODE_URING, NULL);
        hbg_client *c = NULL;
        int err = hbg_connect(&c, d->socket_path);
        D_ASSERT(d, err == 0, "hbg_connect: %s [%s]", hbg_strerror(err), hbg_last_error(NULL));
        hbg_tensor x, y;
        ck_assert_int_eq(hbg_tensor_alloc(c, N * sizeof(float), &x), 0);
        ck_assert_int_eq(hbg_tensor_alloc(c, N * sizeof(float), &y), 0);
        float *px = hbg_tensor_data(c, x), *py = hbg_tensor_data(c, y);
        float want[N];
        for (unsigned i = 0; i < N; i++) {
                px[i] = want[i] = (float)i * 0.5f - 7.0f;
                py[i] = (float)(i % 13) - 3.0f;
        }
        /* x += x, in 4 blocks. */
        hbg_task t = binary("add_f32", x, x, x, 4);
        run(d, c, &t, "add_f32(x, x, x)");
        for (unsigned i = 0; i < N; i++)
                want[i] = want[i] + want[i];
        /* x *= y. */
        t = binary("mul_f32", x, y, x, 3);
        run(d, c, &t, "mul_f32(x, y, x)");
        for (unsigned i = 0; i < N; i++)
                want[i] = want[i] * py[i];
        /* y = x + y, the output the second input. */
        t = binary("add_f32", x, y, y, 1);
        run(d, c, &t, "add_f32(x, y, y)");
        float wy[N];
        for (unsigned i = 0; i < N; i++)
                wy[i] = want[i] + ((float)(i % 13) - 3.0f);
        /* x = 2.5 x + x. */
        t = (hbg_task)HBG_TASK_INIT("axpy_f32");
        t.blocks = 2;
        t.n_args = 2;
        t.args[0].tensor = x;
        t.args[0].dir = HBG_IN;
        t.args[1].tensor = x;
        t.args[1].dir = HBG_INOUT;
        t.n_scalars = 1;
        t.scalars[0] = hbg_f32(2.5f);
        run(d, c, &t, "axpy_f32(x, x)");
        for (unsigned i = 0; i < N; i++)
                want[i] = 2.5f * want[i] + want[i];
        /* copy x to x: nothing changes. */
        t = (hbg_task)HBG_TASK_INIT("copy_f32");
        t.n_args = 2;
        t.args[0].tensor = x;
        t.args[0].dir = HBG_IN;
        t.args[1].tensor = x;
        t.args[1].dir = HBG_OUT;
        run(d, c, &t, "copy_f32(x, x)");
        for (unsigned i = 0; i < N; i++) {
                D_ASSERT(d, memcmp(&px[i], &want[i], sizeof(float)) == 0, "x[%u] = %.9g, expected %.9g", i,
                         (double)px[i], (double)want[i]);
                D_ASSERT(d, memcmp(&py[i], &wy[i], sizeof(float)) == 0, "y[%u] = %.9g, expected %.9g", i,
                         (double)py[i], (double)wy[i]);
        }
        hbg_disconnect(c);
        stop_hbgd(d);
}
END_TEST

static void expect_refused(struct hbgd_proc *d, hbg_client *c, const hbg_task *t, const char *a,
                           const char *b, const char *what) {
        int err = hbg_graph_add(c, t, NULL);
        const char *msg = hbg_last_error(c);
        D_ASSERT(d, err == -EINVAL, "%s: hbg_graph_add returned %d (%s), expected -EINVAL", what, err,
                 hbg_strerror(err));
        D_ASSERT(d, strstr(msg, a) && strstr(msg, b), "%s: the message does not name %s and %s: %s", what, a,
                 b, msg);
        fprintf(stderr, "%s: %s\n", what, msg);
}

START_TEST(refused) {
        struct hbgd_proc *d = start_hbgd(MODE_URING, NULL);
        hbg_client *c = NULL;
        int err = hbg_connect(&c, d->socket_path);
        D_ASSERT(d, err == 0, "hbg_connect: %s [%s]", hbg_strerror(err), hbg_last_error(NULL));
        hbg_tensor x, y, big, part;
        ck_assert_int_eq(hbg_tensor_alloc(c, N * sizeof(float), &x), 0);
        ck_assert_int_eq(hbg_tensor_alloc(c, N * sizeof(float), &y), 0);
        ck_assert_int_eq(hbg_tensor_alloc(c, 2 * N * sizeof(float), &big), 0);
        /* The output shifted by one element over input a: partial. */
        ck_assert_int_eq(hbg_tensor_slice_f32(big, 1, N + 1, &part), 0);
        hbg_tensor a0;
        ck_assert_int_eq(hbg_tensor_slice_f32(big, 0, N, &a0), 0);
        hbg_task t = binary("add_f32", a0, y, part, 1);
        expect_refused(d, c, &t, "argument 2 (out)", "argument 0 (a)", "add_f32 out overlapping a partly");
        /* Lengths: a shorter, a longer than the output. */
        hbg_tensor shorter;
        ck_assert_int_eq(hbg_tensor_slice_f32(x, 0, N - 1, &shorter), 0);
        t = binary("mul_f32", shorter, y, big, 1);
        expect_refused(d, c, &t, "argument 0 (a)", "argument 2 (out)", "mul_f32 a shorter than out");
        t = binary("mul_f32", big, y, x, 1);
        expect_refused(d, c, &t, "argument 0 (a)", "argument 2 (out)", "mul_f32 a longer than out");
        /* Nothing was added: the session goes on. */
        t = binary("add_f32", x, y, y, 1);
        run(d, c, &t, "a good task after the refusals");
        hbg_disconnect(c);
        stop_hbgd(d);
}
END_TEST

static Suite *suite(void) {
        Suite *s = suite_create("e2e_client");
        TCase *tc = tcase_create("arguments");
        tcase_set_timeout(tc, 120);
        tcase_add_test(tc, in_place);
        tcase_add_test(tc, refused);
        suite_add_tcase(s, tc);
        return s;
}

const struct check_main check_main = {
        .suite = suite,
        .ignore_sigpipe = true,
        .setup = daemon_util_setup,
        .teardown = daemon_util_cleanup,
};
