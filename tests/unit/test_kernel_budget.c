/* SPDX-License-Identifier: MIT */
/*
 * The built-in kernels' run contract (daemon/engine/kernels.h): every
 * kernel whose time depends on its data stops at its first look at the
 * clock past its deadline (-ETIME) or with its stop flag set (-ECANCELED),
 * having written part of its output; gemm_f32 on subnormal data with a
 * 1 ms budget stops early; the checked gemm loop is the plain one bit for
 * bit whatever the shape, subnormal results kept (no flush-to-zero).
 */
#include <check.h>
#include <errno.h>
#include <math.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#include "daemon/engine/kernels.h"
#include "common/kernel_sig.h"
#include "shm/layout.h"
#include "tests/check_main.h"
#include "tests/test_util.h"
#include "tests/unit/kernel_test_util.h"

/* A heap of `bytes` for the run contract's tests (bigger than HEAP_SIZE:
 * the chunks are KERNEL_CHECK_CHUNK elements). */
static uint8_t *big_heap(size_t bytes) {
        uint8_t *h = aligned_alloc(64, bytes);

        ck_assert_ptr_nonnull(h);
        memset(h, 0, bytes);
        return h;
}

static void fill_f32(uint8_t *h, const struct hbg_kernel_tensor_arg *t, float v) {
        for (uint64_t i = 0; i < t->length; i += 4)
                put_f32(h, t->offset + i, v);
}

/* Elements of t not equal to v, bit for bit. */
static uint64_t count_not(const uint8_t *h, const struct hbg_kernel_tensor_arg *t, float v) {
        uint64_t n = 0;

        for (uint64_t i = 0; i < t->length; i += 4)
                n += f32_bits(get_f32(h, t->offset + i)) != f32_bits(v);
        return n;
}

/* One task per kernel whose time depends on its data, on tensors that
 * take several clock checks: inputs 2.0, outputs 1.0 (so a written output
 * differs from 1.0); `written` is what a kernel stopped at its first look
 * at the clock has written: exactly KERNEL_CHECK_WORK elements of an
 * elementwise kernel, else -1 (some, not all: gemm and softmax rows). */
#define BUDGET_N (4u * KERNEL_CHECK_WORK)
#define BUDGET_HEAP ((size_t)BUDGET_N * 4u * 3u + 64u)

struct budget_case {
        uint16_t id;
        uint8_t n_tensors, n_scalars, out;  /* out: the tensor that is written */
        uint64_t elems[3], scalars[3];
        uint32_t dirs[3];
        int64_t written;
};

static const struct budget_case budget_cases[] = {
        { HBG_KERNEL_FILL_F32, 1, 1, 0, { BUDGET_N }, { 0x40000000u /* 2.0f */ }, { OUT }, KERNEL_CHECK_WORK },
        { HBG_KERNEL_COPY_F32, 2, 0, 1, { BUDGET_N, BUDGET_N }, { 0 }, { IN, OUT }, KERNEL_CHECK_WORK },
        { HBG_KERNEL_ADD_F32, 3, 0, 2, { BUDGET_N, BUDGET_N, BUDGET_N }, { 0 }, { IN, IN, OUT },
          KERNEL_CHECK_WORK },
        { HBG_KERNEL_MUL_F32, 3, 0, 2, { BUDGET_N, BUDGET_N, BUDGET_N }, { 0 }, { IN, IN, OUT },
          KERNEL_CHECK_WORK },
        { HBG_KERNEL_AXPY_F32, 2, 1, 1, { BUDGET_N, BUDGET_N }, { 0x3f800000u /* 1.0f */ }, { IN, INOUT },
          KERNEL_CHECK_WORK },
        { HBG_KERNEL_SCALE_F32, 1, 1, 0, { BUDGET_N }, { 0x40000000u }, { INOUT }, KERNEL_CHECK_WORK },
        { HBG_KERNEL_REDUCE_SUM_F32, 2, 0, 1, { BUDGET_N, 1 }, { 0 }, { IN, OUT }, 0 },
        { HBG_KERNEL_GEMM_F32, 3, 3, 2, { 64 * 64, 64 * 64, 64 * 64 }, { 64, 64, 64 }, { IN, IN, INOUT }, -1 },
        { HBG_KERNEL_SOFTMAX_ROWS_F32, 1, 2, 0, { 64 * 1024 }, { 64, 1024 }, { INOUT }, -1 },
};

static void budget_case_setup(const struct budget_case *c, uint8_t *h, struct hbg_kernel_args *a) {
        uint64_t off = 64;

        *a = (struct hbg_kernel_args){ .n_tensors = c->n_tensors, .n_scalars = c->n_scalars };
        for (unsigned i = 0; i < c->n_tensors; i++) {
                a->tensors[i] = T(off, c->elems[i] * 4, c->dirs[i]);
                off += c->elems[i] * 4;
                fill_f32(h, &a->tensors[i], c->dirs[i] == IN ? 2.0f : 1.0f);
        }
        ck_assert_uint_le(off, BUDGET_HEAP);
        for (unsigned i = 0; i < c->n_scalars; i++)
                a->scalars[i] = c->scalars[i];
        ck_assert_int_eq(kernel_validate(K(c->id), a, BUDGET_HEAP, NULL), 0);
}

/* Every kernel whose time depends on its data stops at its first look at
 * the clock once its deadline has passed (-ETIME), or once its stop flag
 * is set (-ECANCELED), having written only part of its output; the context
 * then stays stopped. Counted, not timed: a deadline in the past. */
START_TEST(test_budget_stops_every_kernel) {
        const struct budget_case *c = &budget_cases[_i];
        const struct kernel_info *k = K(c->id);
        uint8_t *h = big_heap(BUDGET_HEAP);
        struct hbg_kernel_args a;
        _Atomic uint32_t stop = 0;

        for (int cancel = 0; cancel < 2; cancel++) {
                struct kernel_run_ctx ctx;
                int want = cancel ? -ECANCELED : -ETIME;

                budget_case_setup(c, h, &a);
                if (cancel) {
                        kernel_run_ctx_init(&ctx, kernel_budget_ns(3600000), &stop);
                        atomic_store(&stop, 1);
                } else {
                        kernel_run_ctx_init(&ctx, kernel_budget_ns(1), NULL);
                        ctx.deadline_ns = 1; /* long past */
                }
                int r = k->run(&ctx.k, h, &a, 0, 1);
                ck_assert_msg(r == want, "%s: returned %d, expected %d", k->sig->name, r, want);
                ck_assert_int_eq(ctx.stopped, cancel ? KERNEL_STOP_CANCEL : KERNEL_STOP_BUDGET);
                const struct hbg_kernel_tensor_arg *out = &a.tensors[c->out];
                uint64_t n = count_not(h, out, 1.0f), total = out->length / 4;
                if (c->written >= 0)
                        ck_assert_msg(n == (uint64_t)c->written, "%s: wrote %llu elements before stopping, "
                                      "expected %lld", k->sig->name, (unsigned long long)n,
                                      (long long)c->written);
                else
                        ck_assert_msg(n > 0 && n < total, "%s: wrote %llu of %llu elements before stopping",
                                      k->sig->name, (unsigned long long)n, (unsigned long long)total);
                /* Sticky: the next check, or the next part, stops at once. */
                ck_assert_int_eq(hbg_kernel_check(&ctx.k, 0), want);
                ck_assert_int_eq(k->run(&ctx.k, h, &a, 0, 1), want);
                atomic_store(&stop, 0);
        }

        /* With no budget and no flag the same task runs to the end. */
        struct kernel_run_ctx ctx;
        budget_case_setup(c, h, &a);
        kernel_run_ctx_init(&ctx, kernel_budget_ns(0), NULL);
        ck_assert_int_eq(k->run(&ctx.k, h, &a, 0, 1), 0);
        ck_assert_int_eq(ctx.stopped, KERNEL_STOP_NONE);
        ck_assert_uint_eq(count_not(h, &a.tensors[c->out], 1.0f), a.tensors[c->out].length / 4);
        free(h);
}
END_TEST

/* The engine's stop word (a cancel, RUNTIME_LOGIC §12.6): a change of
 * the word asks the filter; a change that is not about this run is
 * remembered and the run goes on, the next one that is stops it. */
struct filter_probe {
        unsigned asked;
        bool applies;
};

static bool probe_applies(void *arg) {
        struct filter_probe *p = arg;
        p->asked++;
        return p->applies;
}

START_TEST(test_stop_filter) {
        _Atomic uint32_t word = 0x105;
        struct filter_probe probe = { 0, false };
        struct kernel_run_ctx ctx;
        kernel_run_ctx_init(&ctx, kernel_budget_ns(0), &word);
        kernel_run_ctx_filter(&ctx, 0x105, probe_applies, &probe);
        /* unchanged: never asked, however much work */
        for (int i = 0; i < 4; i++)
                ck_assert_int_eq(hbg_kernel_check(&ctx.k, KERNEL_CHECK_WORK), 0);
        ck_assert_uint_eq(probe.asked, 0);
        /* changed, not about us: asked once, the run goes on */
        atomic_store(&word, 0x206);
        for (int i = 0; i < 4; i++)
                ck_assert_int_eq(hbg_kernel_check(&ctx.k, KERNEL_CHECK_WORK), 0);
        ck_assert_uint_eq(probe.asked, 1);
        ck_assert_int_eq(ctx.stopped, KERNEL_STOP_NONE);
        /* changed again, about us: stopped, and stays so */
        probe.applies = true;
        atomic_store(&word, 0x306);
        ck_assert_int_eq(hbg_kernel_check(&ctx.k, KERNEL_CHECK_WORK), -ECANCELED);
        ck_assert_int_eq(ctx.stopped, KERNEL_STOP_CANCEL);
        ck_assert_int_eq(hbg_kernel_check(&ctx.k, 1), -ECANCELED);
        ck_assert_uint_eq(probe.asked, 2);
}
END_TEST

/* spin_ns counts nanoseconds against its budget: a 1 s spin with its
 * deadline past stops at the first look at the clock. */
START_TEST(test_budget_spin) {
        struct hbg_kernel_args a = { .n_scalars = 1, .scalars = { 1000000000 } };
        struct kernel_run_ctx ctx;

        kernel_run_ctx_init(&ctx, kernel_budget_ns(1), NULL);
        ctx.deadline_ns = 1;
        ck_assert_int_eq(K(HBG_KERNEL_SPIN_NS)->run(&ctx.k, NULL, &a, 0, 1), -ETIME);
        ck_assert_int_eq(ctx.stopped, KERNEL_STOP_BUDGET);
        /* A real 1 ms budget (the smallest) on a 1 s spin. */
        kernel_run_ctx_init(&ctx, kernel_budget_ns(1), NULL);
        ck_assert_int_eq(K(HBG_KERNEL_SPIN_NS)->run(&ctx.k, NULL, &a, 0, 1), -ETIME);
        ck_assert_int_eq(ctx.stopped, KERNEL_STOP_BUDGET);
}
END_TEST

/* kernel_check's accounting: no clock and no deadline for a run shorter
 * than KERNEL_CHECK_WORK units, the deadline set at the first slow check. */
START_TEST(test_budget_check_cadence) {
        struct kernel_run_ctx ctx;

        kernel_run_ctx_init(&ctx, kernel_budget_ns(5), NULL);
        ck_assert_uint_eq(ctx.budget_ns, 5000000);
        for (unsigned i = 0; i + 1 < KERNEL_CHECK_WORK / 1024; i++)
                ck_assert_int_eq(hbg_kernel_check(&ctx.k, 1024), 0);
        ck_assert_int_eq(ctx.deadline_ns, 0);
        ck_assert_int_eq(hbg_kernel_check(&ctx.k, 1024), 0);
        ck_assert_int_ne(ctx.deadline_ns, 0);
        ck_assert_uint_eq(ctx.k.credit, KERNEL_CHECK_WORK);
        /* The largest budget does not overflow the deadline. */
        ck_assert_uint_eq(kernel_budget_ns(UINT64_MAX), (uint64_t)INT64_MAX / 2);
        kernel_run_ctx_init(&ctx, kernel_budget_ns(UINT64_MAX), NULL);
        ck_assert_int_eq(hbg_kernel_check(&ctx.k, KERNEL_CHECK_WORK), 0);
        ck_assert_int_eq(hbg_kernel_check(&ctx.k, KERNEL_CHECK_WORK), 0);
        ck_assert_int_gt(ctx.deadline_ns, 0);
}
END_TEST

/* A float in [2^-149, 2^-127) (subnormal), random sign. */
static float rnd_subnormal(uint64_t *s) {
        uint64_t z = splitmix(s);
        uint32_t bits = (uint32_t)(z & 0x3fffffu) | 1u | (uint32_t)(z >> 63) << 31;

        return bits_f32(bits);
}

/*
 * gemm_f32's checked loop is the plain loop, bit for bit, whatever shape
 * its check blocks take (several p steps of a narrow C, chunks of j of a
 * wide one, an odd split), on subnormal A with a budget that is not met:
 * IEEE results (no flush-to-zero), equal to ref_gemm's i-j-p sums.
 */
START_TEST(test_budget_gemm_bit_identical) {
        static const uint64_t shapes[][3] = {
                /* m, n, k */
                { 2, 5000, 3 }, { 3, 4096, 2 }, { 2, 4097, 5 }, { 4, 3, 3000 }, { 2, 1, 9000 },
                { 3, 100, 200 }, { 5, 4095, 2 }, { 32, 32, 32 },
        };
        uint64_t seed = 2000, subnormal_out = 0;

        for (size_t s = 0; s < sizeof(shapes) / sizeof(shapes[0]); s++) {
                uint64_t m = shapes[s][0], n = shapes[s][1], k = shapes[s][2];
                struct hbg_kernel_args a = { .n_tensors = 3, .n_scalars = 3, .scalars = { m, n, k } };
                /* aligned_alloc() wants a multiple of the alignment. */
                size_t bytes = ((size_t)(m * k + k * n + m * n) * 4 + 64 + 63) & ~(size_t)63;
                uint8_t *h = big_heap(bytes), *want;

                a.tensors[0] = T(4, m * k * 4, IN);
                a.tensors[1] = T(4 + m * k * 4, k * n * 4, IN);
                a.tensors[2] = T(4 + (m * k + k * n) * 4, m * n * 4, INOUT);
                ck_assert_int_eq(kernel_validate(K(HBG_KERNEL_GEMM_F32), &a, bytes, NULL), 0);
                for (uint64_t i = 0; i < m * k; i++)
                        put_f32(h, a.tensors[0].offset + i * 4, rnd_subnormal(&seed));
                for (uint64_t i = 0; i < k * n; i++)
                        put_f32(h, a.tensors[1].offset + i * 4, rnd_f32(&seed));
                for (uint64_t i = 0; i < m * n; i++)
                        put_f32(h, a.tensors[2].offset + i * 4, i % 2 ? rnd_subnormal(&seed) : 0.0f);
                want = aligned_alloc(64, bytes);
                ck_assert_ptr_nonnull(want);
                memcpy(want, h, bytes);
                ref_gemm(want, &a);

                struct kernel_run_ctx ctx;
                kernel_run_ctx_init(&ctx, kernel_budget_ns(3600000), NULL);
                ck_assert_int_eq(K(HBG_KERNEL_GEMM_F32)->run(&ctx.k, h, &a, 0, 1), 0);
                for (uint64_t i = 0; i < m * n; i++) {
                        float got = get_f32(h, a.tensors[2].offset + i * 4);
                        float ref = get_f32(want, a.tensors[2].offset + i * 4);
                        ck_assert_msg(f32_bits(got) == f32_bits(ref),
                                      "gemm %llux%llux%llu: C[%llu] = %a, reference %a", (unsigned long long)m,
                                      (unsigned long long)n, (unsigned long long)k, (unsigned long long)i,
                                      (double)got, (double)ref);
                        subnormal_out += fpclassify(got) == FP_SUBNORMAL;
                }
                ck_assert(memcmp(h, want, bytes) == 0);
                free(want);
                free(h);
        }
        /* Flush-to-zero would have made these 0. */
        ck_assert_msg(subnormal_out > 1000, "only %llu subnormal results", (unsigned long long)subnormal_out);
}
END_TEST

/* A real deadline, on data as slow as it gets: gemm_f32 on subnormal A
 * with the smallest budget (1 ms) stops early with -ETIME, rows left
 * unwritten. Sized so that even ordinary numbers take far longer than
 * 1 ms, so the test does not depend on how slow a CPU is on subnormals:
 * ~268 M multiply-adds, over 2.5 ms at 100 GFLOP/s (16 M, the size
 * before, ran in under 1 ms at -O3 on a CPU that does subnormal
 * multiply-adds at full speed, and the kernel finished). */
START_TEST(test_budget_gemm_subnormal_deadline) {
        const uint64_t m = 1024, n = 512, k = 512;
        struct hbg_kernel_args a = { .n_tensors = 3, .n_scalars = 3, .scalars = { m, n, k } };
        size_t bytes = (size_t)(m * k + k * n + m * n) * 4;
        uint8_t *h = big_heap(bytes);

        a.tensors[0] = T(0, m * k * 4, IN);
        a.tensors[1] = T(m * k * 4, k * n * 4, IN);
        a.tensors[2] = T((m * k + k * n) * 4, m * n * 4, INOUT);
        fill_f32(h, &a.tensors[0], 1e-39f);
        fill_f32(h, &a.tensors[1], 1.5f);
        fill_f32(h, &a.tensors[2], 1.0f);
        ck_assert_int_eq(kernel_validate(K(HBG_KERNEL_GEMM_F32), &a, bytes, NULL), 0);
        struct kernel_run_ctx ctx;
        kernel_run_ctx_init(&ctx, kernel_budget_ns(1), NULL);
        ck_assert_int_eq(K(HBG_KERNEL_GEMM_F32)->run(&ctx.k, h, &a, 0, 1), -ETIME);
        ck_assert_int_eq(ctx.stopped, KERNEL_STOP_BUDGET);
        /* The last row of C was never reached. */
        struct hbg_kernel_tensor_arg last = T(a.tensors[2].offset + (m - 1) * n * 4, n * 4, INOUT);
        ck_assert_uint_eq(count_not(h, &last, 1.0f), 0);
        free(h);
}
END_TEST

/* ------------------------------------------------------------ main */

static Suite *kernels_suite(void) {
        Suite *s = suite_create("kernel_budget");
        TCase *tc;

        tc = tcase_create("budget");
        tcase_set_timeout(tc, 60);
        tcase_add_loop_test(tc, test_budget_stops_every_kernel, 0,
                            (int)(sizeof(budget_cases) / sizeof(budget_cases[0])));
        tcase_add_test(tc, test_budget_spin);
        tcase_add_test(tc, test_stop_filter);
        tcase_add_test(tc, test_budget_check_cadence);
        tcase_add_test(tc, test_budget_gemm_bit_identical);
        tcase_add_test(tc, test_budget_gemm_subnormal_deadline);
        suite_add_tcase(s, tc);

        return s;
}

const struct check_main check_main = { .suite = kernels_suite };
