/* SPDX-License-Identifier: MIT */
/*
 * The built-in kernels' checks of a task's arguments
 * (daemon/engine/kernels.c): every generic rule for every kernel and
 * every kernel's own rules, with the errno and the message checked; a
 * canary heap stays untouched throughout.
 *
 * Error convention under test: -EINVAL wrong signature or shape, -ERANGE a
 * value out of range (a tensor past the end of the heap included),
 * -EOVERFLOW offset + length or a shape product overflowing 64 bits.
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

/* Validation never touches a heap; it gets only heap_size. Still, the
 * validation tests keep a canary heap and check it after every rejection. */
static uint8_t *canary_heap, *canary_ref;

static void canary_setup(void) {
        canary_heap = heap_alloc();
        canary_ref = heap_alloc();
        memset(canary_heap, CANARY, HEAP_SIZE);
        memset(canary_ref, CANARY, HEAP_SIZE);
}

static void canary_teardown(void) {
        free(canary_heap);
        free(canary_ref);
        canary_heap = canary_ref = NULL;
}

static void canary_check(void) {
        ck_assert_msg(memcmp(canary_heap, canary_ref, HEAP_SIZE) == 0, "canary heap changed");
}

/* A valid task for every kernel: tensors of 64 bytes at 0, 128, 256. */
static struct hbg_kernel_args good_args(const struct kernel_info *k) {
        struct hbg_kernel_args a = { .n_tensors = k->sig->n_tensors, .n_scalars = k->sig->n_scalars };

        for (unsigned t = 0; t < k->sig->n_tensors; t++)
                a.tensors[t] = T(128 * t, 64, k->sig->tensors[t].dir);
        switch (k->sig->id) {
        case HBG_KERNEL_SPIN_NS:
                a.scalars[0] = 1000;
                break;
        case HBG_KERNEL_FILL_F32:
        case HBG_KERNEL_AXPY_F32:
        case HBG_KERNEL_SCALE_F32:
                a.scalars[0] = f32_bits(-1.5f);
                break;
        case HBG_KERNEL_GEMM_F32:
                a.scalars[0] = 4; /* 4x4x4: every tensor exactly 64 bytes */
                a.scalars[1] = 4;
                a.scalars[2] = 4;
                break;
        case HBG_KERNEL_SOFTMAX_ROWS_F32:
                a.scalars[0] = 2;
                a.scalars[1] = 8;
                break;
        case HBG_KERNEL_FAIL:
                a.scalars[0] = (uint64_t)-EIO;
                break;
        default:
                break;
        }
        return a;
}

/* Copy `what` to dst (size > 0), "%s" replaced by `arg` (without printf:
 * the format would not be a literal). */
static void expand(char *dst, size_t size, const char *what, const char *arg) {
        size_t o = 0;

        for (const char *c = what; *c && o + 1 < size; c++) {
                if (c[0] == '%' && c[1] == 's' && arg) {
                        for (const char *x = arg; *x && o + 1 < size; x++)
                                dst[o++] = *x;
                        c++;
                } else {
                        dst[o++] = *c;
                }
        }
        dst[o] = '\0';
}

/* Expect rejection with `err` and a message starting with "<kernel>: " and
 * then `what` (if not NULL; "%s" in it stands for `arg`). */
static void expect_reject_at(const struct kernel_info *k, const struct hbg_kernel_args *a,
                             uint64_t heap_size, int err, const char *what, const char *arg,
                             int line) {
        const char *why = NULL;
        char prefix[256];
        int r;

        r = kernel_validate(k, a, heap_size, &why);
        ck_assert_msg(r == err, "line %d: %s: validate returned %d, expected %d (%s)", line,
                      k->sig->name, r, err, why ? why : "no message");
        ck_assert_msg(why != NULL, "line %d: %s: no message", line, k->sig->name);
        snprintf(prefix, sizeof(prefix), "%s: ", k->sig->name);
        if (what)
                expand(prefix + strlen(prefix), sizeof(prefix) - strlen(prefix), what, arg);
        ck_assert_msg(strncmp(why, prefix, strlen(prefix)) == 0,
                      "line %d: message '%s' does not start with '%s'", line, why, prefix);
        /* Same answer without a message pointer. */
        ck_assert_int_eq(kernel_validate(k, a, heap_size, NULL), err);
        canary_check();
}

#define expect_reject(k, a, err, what, arg)                                     \
        expect_reject_at(k, a, HEAP_SIZE, err, what, arg, __LINE__)

static void expect_ok_at(const struct kernel_info *k, const struct hbg_kernel_args *a, int line) {
        const char *why = NULL;
        int r = kernel_validate(k, a, HEAP_SIZE, &why);

        ck_assert_msg(r == 0, "line %d: %s: validate returned %d (%s)", line, k->sig->name, r,
                      why ? why : "no message");
        canary_check();
}

#define expect_ok(k, a) expect_ok_at(k, a, __LINE__)

START_TEST(test_validate_counts) {
        for (size_t i = 0; i < kernel_count(); i++) {
                const struct kernel_info *k = kernel_at(i);
                struct hbg_kernel_args good = good_args(k), a;

                expect_ok(k, &good);
                for (int d = -2; d <= 2; d++) {
                        if (d == 0 || (int)k->sig->n_tensors + d < 0 ||
                            (int)k->sig->n_tensors + d > (int)HBG_MAX_TENSOR_ARGS)
                                continue;
                        a = good;
                        a.n_tensors = (uint8_t)(k->sig->n_tensors + d);
                        if (d > 0) /* the extra tensors are otherwise fine */
                                for (unsigned t = k->sig->n_tensors; t < a.n_tensors; t++)
                                        a.tensors[t] = T(2048 + 128 * t, 64, IN);
                        expect_reject(k, &a, -EINVAL, "wrong number of tensor", NULL);
                }
                a = good;
                a.n_tensors = 255;
                expect_reject(k, &a, -EINVAL, "wrong number of tensor", NULL);
                for (int d = -2; d <= 2; d++) {
                        if (d == 0 || (int)k->sig->n_scalars + d < 0 ||
                            (int)k->sig->n_scalars + d > (int)HBG_MAX_SCALAR_ARGS)
                                continue;
                        a = good;
                        a.n_scalars = (uint8_t)(k->sig->n_scalars + d);
                        expect_reject(k, &a, -EINVAL, "wrong number of scalar", NULL);
                }
                a = good;
                a.n_scalars = 255;
                expect_reject(k, &a, -EINVAL, "wrong number of scalar", NULL);
        }
}
END_TEST

START_TEST(test_validate_tensor_fields) {
        static const uint32_t all_dirs[] = { 0, IN, OUT, INOUT, 4, 0x80000001u, UINT32_MAX };

        for (size_t i = 0; i < kernel_count(); i++) {
                const struct kernel_info *k = kernel_at(i);
                struct hbg_kernel_args good = good_args(k), a;

                for (unsigned t = 0; t < k->sig->n_tensors; t++) {
                        const char *tn = k->sig->tensors[t].name;
                        struct hbg_kernel_tensor_arg *x = &a.tensors[t];

                        for (size_t d = 0; d < sizeof(all_dirs) / sizeof(all_dirs[0]); d++) {
                                if (all_dirs[d] == k->sig->tensors[t].dir)
                                        continue;
                                a = good;
                                x->direction = all_dirs[d];
                                expect_reject(k, &a, -EINVAL, "tensor %s has the wrong direction", tn);
                        }
                        a = good;
                        x->reserved = 1;
                        expect_reject(k, &a, -EINVAL, "tensor %s reserved", tn);
                        a = good;
                        x->reserved = 0x80000000u;
                        expect_reject(k, &a, -EINVAL, "tensor %s reserved", tn);

                        /* Misaligned offset or length. */
                        for (uint64_t d = 1; d < 4; d++) {
                                a = good;
                                x->offset += d;
                                expect_reject(k, &a, -EINVAL, "tensor %s offset or length", tn);
                                a = good;
                                x->length -= d;
                                expect_reject(k, &a, -EINVAL, "tensor %s offset or length", tn);
                        }
                        a = good;
                        x->offset = UINT64_MAX;
                        expect_reject(k, &a, -EINVAL, "tensor %s offset or length", tn);

                        a = good;
                        x->length = 0;
                        expect_reject(k, &a, -EINVAL, "tensor %s is empty", tn);

                        /* offset + length overflows 2^64: -EOVERFLOW. */
                        a = good;
                        x->offset = UINT64_MAX - 3;
                        x->length = 8;
                        expect_reject(k, &a, -EOVERFLOW, "tensor %s offset + length overflows", tn);
                        a = good;
                        x->offset = 4;
                        x->length = UINT64_MAX - 3;
                        expect_reject(k, &a, -EOVERFLOW, "tensor %s offset + length overflows", tn);
                        a = good;
                        x->offset = UINT64_MAX - 3;
                        x->length = UINT64_MAX - 3;
                        expect_reject(k, &a, -EOVERFLOW, "tensor %s offset + length overflows", tn);

                        /* Past the end of the heap: -ERANGE. An end of
                         * 2^64 - 4 does not overflow, so it is a range error. */
                        a = good;
                        x->offset = UINT64_MAX - 7;
                        x->length = 4;
                        expect_reject(k, &a, -ERANGE, "tensor %s extends past", tn);
                        a = good;
                        x->offset = HEAP_SIZE - x->length + 4;
                        expect_reject(k, &a, -ERANGE, "tensor %s extends past", tn);
                        a = good;
                        x->offset = HEAP_SIZE;
                        x->length = 4;
                        expect_reject(k, &a, -ERANGE, "tensor %s extends past", tn);
                        a = good;
                        x->length = HEAP_SIZE + 4;
                        x->offset = 0;
                        expect_reject(k, &a, -ERANGE, "tensor %s extends past", tn);
                        /* ... against a smaller heap_size, with the same args. */
                        expect_reject_at(k, &good, 128 * t + 60, -ERANGE, "tensor %s extends past",
                                         tn, __LINE__);
                        expect_reject_at(k, &good, 0, -ERANGE, "tensor %s extends past",
                                         k->sig->tensors[0].name, __LINE__);

                        /* Ending exactly at the end of the heap is fine. */
                        a = good;
                        x->offset = HEAP_SIZE - x->length;
                        expect_ok(k, &a);
                }
                /* Argument slots past n_tensors / n_scalars are not looked at. */
                a = good;
                for (unsigned t = k->sig->n_tensors; t < HBG_MAX_TENSOR_ARGS; t++)
                        a.tensors[t] = T(UINT64_MAX, 3, 77);
                expect_ok(k, &a);
        }
}
END_TEST

START_TEST(test_validate_overlap) {
        for (size_t i = 0; i < kernel_count(); i++) {
                const struct kernel_info *k = kernel_at(i);
                struct hbg_kernel_args good = good_args(k), a;

                for (unsigned o = 0; o < k->sig->n_tensors; o++) {
                        if (k->sig->tensors[o].dir == IN)
                                continue;
                        const char *on = k->sig->tensors[o].name;
                        uint64_t base = good.tensors[o].offset;

                        for (unsigned t = 0; t < k->sig->n_tensors; t++) {
                                if (t == o)
                                        continue;
                                struct hbg_kernel_tensor_arg *x = &a.tensors[t];

                                /* exact: in place where the kernel allows it
                                 * and the other is an input; refused otherwise */
                                a = good;
                                x->offset = base;
                                x->length = good.tensors[o].length;
                                if (k->sig->in_place && k->sig->tensors[t].dir == IN)
                                        expect_ok(k, &a);
                                else
                                        expect_reject(k, &a, -EINVAL, "output %s overlaps", on);
                                /* partial: the last element of the output;
                                 * the message names both tensors */
                                a = good;
                                x->offset = base + 60;
                                expect_reject(k, &a, -EINVAL, "output %s overlaps", on);
                                const char *why = NULL;
                                kernel_validate(k, &a, HEAP_SIZE, &why);
                                ck_assert_msg(why && strstr(why, k->sig->tensors[t].name),
                                              "%s: message '%s' does not name tensor %s", k->sig->name,
                                              why ? why : "", k->sig->tensors[t].name);
                                /* partial: the first element of the output */
                                if (base >= 60) {
                                        a = good;
                                        x->offset = base - 60;
                                        expect_reject(k, &a, -EINVAL, "output %s overlaps", on);
                                }
                                /* the other inside the output */
                                a = good;
                                x->offset = base + 4;
                                x->length = 4;
                                expect_reject(k, &a, -EINVAL, "output %s overlaps", on);
                                /* the output inside the other */
                                a = good;
                                x->offset = base - (base >= 4 ? 4 : 0);
                                x->length = 128;
                                expect_reject(k, &a, -EINVAL, "output %s overlaps", on);
                                /* adjacent, either side: fine (unless it
                                 * lands on a third tensor) */
                                a = good;
                                x->offset = base + 64;
                                expect_ok(k, &a);
                                if (base >= 64) {
                                        a = good;
                                        x->offset = base - 64;
                                        expect_ok(k, &a);
                                }
                        }
                }
        }
}
END_TEST

/* Inputs may overlap each other. */
START_TEST(test_validate_inputs_may_overlap) {
        static const uint16_t ids[] = { HBG_KERNEL_ADD_F32, HBG_KERNEL_MUL_F32, HBG_KERNEL_GEMM_F32 };

        for (size_t i = 0; i < sizeof(ids) / sizeof(ids[0]); i++) {
                const struct kernel_info *k = K(ids[i]);
                struct hbg_kernel_args a = good_args(k);

                a.tensors[1].offset = a.tensors[0].offset;
                expect_ok(k, &a);
                a.tensors[1].offset = a.tensors[0].offset + 8;
                expect_ok(k, &a);
        }
}
END_TEST

START_TEST(test_validate_f32_scalars) {
        static const uint64_t high[] = { UINT64_C(1) << 32, UINT64_C(1) << 63,
                                         UINT64_C(0xffffffff00000000) };

        for (size_t i = 0; i < kernel_count(); i++) {
                const struct kernel_info *k = kernel_at(i);
                struct hbg_kernel_args good = good_args(k), a;

                for (unsigned s = 0; s < k->sig->n_scalars; s++) {
                        if (k->sig->scalars[s].kind != HBG_SCALAR_F32)
                                continue;
                        for (size_t h = 0; h < sizeof(high) / sizeof(high[0]); h++) {
                                a = good;
                                a.scalars[s] |= high[h];
                                expect_reject(k, &a, -EINVAL, "f32 scalar %s has its upper",
                                              k->sig->scalars[s].name);
                        }
                        /* Any low 32 bits are a float, NaN included. */
                        a = good;
                        a.scalars[s] = UINT64_C(0xffffffff);
                        expect_ok(k, &a);
                }
        }
}
END_TEST

/* EQUAL kernels: every tensor exactly as long as the output, shorter or
 * longer; the message names both tensors. */
START_TEST(test_validate_lengths) {
        for (size_t i = 0; i < kernel_count(); i++) {
                const struct kernel_info *k = kernel_at(i);
                if (k->sig->length != HBG_LENGTH_EQUAL)
                        continue;
                unsigned out = k->sig->n_tensors - 1u;
                for (unsigned t = 0; t < out; t++) {
                        struct hbg_kernel_args a = good_args(k);
                        ck_assert_uint_eq(a.tensors[t].length, a.tensors[out].length);
                        a.tensors[t].length -= 4;
                        expect_reject(k, &a, -EINVAL, "tensor %s is not as long as", k->sig->tensors[t].name);
                        a.tensors[t].length += 8;
                        expect_reject(k, &a, -EINVAL, "tensor %s is not as long as", k->sig->tensors[t].name);
                }
        }
}
END_TEST

START_TEST(test_validate_gemm) {
        const struct kernel_info *k = K(HBG_KERNEL_GEMM_F32);
        const uint64_t lim = UINT64_C(1) << 20;
        struct hbg_kernel_args good = good_args(k), a; /* 4x4x4, 64-byte tensors */

        for (unsigned s = 0; s < 3; s++) {
                a = good;
                a.scalars[s] = 0;
                expect_reject(k, &a, -EINVAL, "m, n and k must be at least 1", NULL);
                a = good;
                a.scalars[s] = lim + 1;
                expect_reject(k, &a, -ERANGE, "m, n and k must not exceed", NULL);
                a = good;
                a.scalars[s] = UINT64_MAX;
                expect_reject(k, &a, -ERANGE, "m, n and k must not exceed", NULL);
                /* At the limit the dimension is legal; the shape does not fit. */
                a = good;
                a.scalars[s] = lim;
                expect_reject(k, &a, -EINVAL, "shape does not fit", NULL);
        }
        /* m*k would overflow 64 bits: caught by the per-dimension limit. */
        a = good;
        a.scalars[0] = UINT64_C(1) << 33;
        a.scalars[2] = UINT64_C(1) << 33;
        expect_reject(k, &a, -ERANGE, "m, n and k must not exceed", NULL);

        /* Which tensor the shape does not fit. m=2, n=2, k=8: A 64, B 64, C 16. */
        a = good;
        a.scalars[0] = 2;
        a.scalars[1] = 2;
        a.scalars[2] = 8;
        expect_ok(k, &a);
        a.scalars[2] = 9; /* A needs 72, B 72 */
        expect_reject(k, &a, -EINVAL, "shape does not fit A", NULL);
        a.tensors[0].length = 72;
        expect_reject(k, &a, -EINVAL, "shape does not fit B", NULL);
        a.tensors[1].length = 72;
        expect_ok(k, &a);
        a = good;
        a.tensors[2].length = 60; /* C needs 64 */
        expect_reject(k, &a, -EINVAL, "shape does not fit C", NULL);
        a.scalars[0] = 3; /* 3x4x4: A 48, B 64, C 48 */
        expect_ok(k, &a);
        /* Shape checks come after the generic ones. */
        a = good;
        a.scalars[0] = 0;
        a.tensors[2].reserved = 1;
        expect_reject(k, &a, -EINVAL, "tensor C reserved", NULL);
}
END_TEST

START_TEST(test_validate_softmax) {
        const struct kernel_info *k = K(HBG_KERNEL_SOFTMAX_ROWS_F32);
        struct hbg_kernel_args good = good_args(k), a; /* 2x8, X 64 bytes */

        a = good;
        a.scalars[0] = 0;
        expect_reject(k, &a, -EINVAL, "rows and cols must be at least 1", NULL);
        a = good;
        a.scalars[1] = 0;
        expect_reject(k, &a, -EINVAL, "rows and cols must be at least 1", NULL);
        a = good;
        a.scalars[0] = 3;
        expect_reject(k, &a, -EINVAL, "shape does not fit X", NULL);
        a = good;
        a.scalars[0] = 1;
        a.scalars[1] = 17;
        expect_reject(k, &a, -EINVAL, "shape does not fit X", NULL);
        a.scalars[1] = 16;
        expect_ok(k, &a);
        a.scalars[0] = 16;
        a.scalars[1] = 1;
        expect_ok(k, &a);
        a.scalars[0] = 4;
        a.scalars[1] = 3;
        expect_ok(k, &a); /* 48 of 64 bytes */

        /* rows*cols overflows 64 bits. */
        a = good;
        a.scalars[0] = UINT64_C(1) << 33;
        a.scalars[1] = UINT64_C(1) << 33;
        expect_reject(k, &a, -EOVERFLOW, "size of X", NULL);
        a.scalars[0] = UINT64_MAX;
        a.scalars[1] = UINT64_MAX;
        expect_reject(k, &a, -EOVERFLOW, "size of X", NULL);
        /* rows*cols fits, *4 does not. */
        a.scalars[0] = UINT64_C(1) << 61;
        a.scalars[1] = 2;
        expect_reject(k, &a, -EOVERFLOW, "size of X", NULL);
        a.scalars[0] = UINT64_C(1) << 62;
        a.scalars[1] = 1;
        expect_reject(k, &a, -EOVERFLOW, "size of X", NULL);
        /* *4 fits, the heap does not. */
        a.scalars[0] = UINT64_C(1) << 30;
        a.scalars[1] = UINT64_C(1) << 30;
        expect_reject(k, &a, -EINVAL, "shape does not fit X", NULL);
}
END_TEST

START_TEST(test_validate_spin_fail) {
        const struct kernel_info *k = K(HBG_KERNEL_SPIN_NS);
        struct hbg_kernel_args a = good_args(k);
        static const uint64_t ok_ns[] = { 0, 1, 999999999, 1000000000 };
        static const uint64_t bad_ns[] = { 1000000001, UINT64_C(1) << 32, UINT64_MAX };
        static const int64_t ok_codes[] = { -1, -EIO, -EPROTO, -4095 };
        static const int64_t bad_codes[] = { 0, 1, 4095, -4096, INT64_MIN, INT64_MAX,
                                             (int64_t)UINT32_C(0xfffffffb) /* -5 as u32 */ };

        for (size_t i = 0; i < sizeof(ok_ns) / sizeof(ok_ns[0]); i++) {
                a.scalars[0] = ok_ns[i];
                expect_ok(k, &a);
        }
        for (size_t i = 0; i < sizeof(bad_ns) / sizeof(bad_ns[0]); i++) {
                a.scalars[0] = bad_ns[i];
                expect_reject(k, &a, -ERANGE, "ns must not exceed", NULL);
        }

        k = K(HBG_KERNEL_FAIL);
        a = good_args(k);
        for (size_t i = 0; i < sizeof(ok_codes) / sizeof(ok_codes[0]); i++) {
                a.scalars[0] = (uint64_t)ok_codes[i];
                expect_ok(k, &a);
        }
        for (size_t i = 0; i < sizeof(bad_codes) / sizeof(bad_codes[0]); i++) {
                a.scalars[0] = (uint64_t)bad_codes[i];
                expect_reject(k, &a, -ERANGE, "code must be", NULL);
        }
}
END_TEST

START_TEST(test_validate_no_kernel) {
        struct hbg_kernel_args a = { 0 };
        struct kernel_info copy = *K(HBG_KERNEL_NOOP);
        const char *why = NULL;

        ck_assert_int_eq(kernel_validate(NULL, &a, HEAP_SIZE, &why), -EINVAL);
        ck_assert_ptr_nonnull(why);
        ck_assert_int_eq(kernel_validate(NULL, &a, HEAP_SIZE, NULL), -EINVAL);
        /* Only entries of the table are trusted. */
        ck_assert_int_eq(kernel_validate(&copy, &a, HEAP_SIZE, NULL), -EINVAL);
        /* why is reset on success */
        why = "stale";
        ck_assert_int_eq(kernel_validate(K(HBG_KERNEL_NOOP), &a, HEAP_SIZE, &why), 0);
        ck_assert_ptr_null(why);
        canary_check();
}
END_TEST

/* ------------------------------------------------------------ main */

static Suite *kernels_suite(void) {
        Suite *s = suite_create("kernel_validation");
        TCase *tc;

        tc = tcase_create("validation");
        tcase_add_checked_fixture(tc, canary_setup, canary_teardown);
        tcase_add_test(tc, test_validate_counts);
        tcase_add_test(tc, test_validate_tensor_fields);
        tcase_add_test(tc, test_validate_overlap);
        tcase_add_test(tc, test_validate_inputs_may_overlap);
        tcase_add_test(tc, test_validate_f32_scalars);
        tcase_add_test(tc, test_validate_lengths);
        tcase_add_test(tc, test_validate_gemm);
        tcase_add_test(tc, test_validate_softmax);
        tcase_add_test(tc, test_validate_spin_fail);
        tcase_add_test(tc, test_validate_no_kernel);
        suite_add_tcase(s, tc);

        return s;
}

const struct check_main check_main = { .suite = kernels_suite };
