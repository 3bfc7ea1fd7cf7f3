/* SPDX-License-Identifier: MIT */
#include "daemon/kernels.h"

#include <errno.h>
#include <math.h>
#include <string.h>
#include <time.h>

/* ------------------------------------------------------------ messages */

/* Every message is a static string that starts with the kernel name, so the
 * generic checks need one set per kernel and per argument; the macros below
 * build them from the same literals as the table. */
struct tensor_msgs {
        const char *dir, *reserved, *align, *empty, *overflow, *range, *overlap;
};

struct kernel_msgs {
        const char *n_tensors, *n_scalars, *cost;
        struct tensor_msgs t[HBG_MAX_TENSOR_ARGS];
        const char *f32_high[HBG_MAX_SCALAR_ARGS];
};

#define COUNT_MSGS(kn)                                                          \
        .n_tensors = kn ": wrong number of tensor arguments",                   \
        .n_scalars = kn ": wrong number of scalar arguments",                   \
        .cost = kn ": work above the per-task limit ([limits] max_task_cost)"

#define TENSOR_MSGS(kn, tn)                                                     \
        {                                                                       \
                .dir = kn ": tensor " tn " has the wrong direction",            \
                .reserved = kn ": tensor " tn " reserved field is not zero",    \
                .align = kn ": tensor " tn " offset or length is not a multiple of 4", \
                .empty = kn ": tensor " tn " is empty",                         \
                .overflow = kn ": tensor " tn " offset + length overflows",     \
                .range = kn ": tensor " tn " extends past the end of the heap", \
                .overlap = kn ": output " tn " overlaps another tensor",        \
        }

#define F32_MSG(kn, sn) kn ": f32 scalar " sn " has its upper 32 bits set"

#define N_NOOP "noop"
#define N_SPIN "spin_ns"
#define N_FILL "fill_f32"
#define N_COPY "copy_f32"
#define N_ADD "add_f32"
#define N_MUL "mul_f32"
#define N_AXPY "axpy_f32"
#define N_SCALE "scale_f32"
#define N_REDUCE "reduce_sum_f32"
#define N_GEMM "gemm_f32"
#define N_SOFTMAX "softmax_rows_f32"
#define N_FAIL "fail"

/* Indexed by id - 1, like the kernel table. */
static const struct kernel_msgs msgs[HBG_KERNEL_COUNT - 1] = {
        [HBG_KERNEL_NOOP - 1] = { COUNT_MSGS(N_NOOP) },
        [HBG_KERNEL_SPIN_NS - 1] = { COUNT_MSGS(N_SPIN) },
        [HBG_KERNEL_FILL_F32 - 1] = {
                COUNT_MSGS(N_FILL),
                .t = { TENSOR_MSGS(N_FILL, "out") },
                .f32_high = { F32_MSG(N_FILL, "v") },
        },
        [HBG_KERNEL_COPY_F32 - 1] = {
                COUNT_MSGS(N_COPY),
                .t = { TENSOR_MSGS(N_COPY, "in"), TENSOR_MSGS(N_COPY, "out") },
        },
        [HBG_KERNEL_ADD_F32 - 1] = {
                COUNT_MSGS(N_ADD),
                .t = { TENSOR_MSGS(N_ADD, "a"), TENSOR_MSGS(N_ADD, "b"),
                       TENSOR_MSGS(N_ADD, "out") },
        },
        [HBG_KERNEL_MUL_F32 - 1] = {
                COUNT_MSGS(N_MUL),
                .t = { TENSOR_MSGS(N_MUL, "a"), TENSOR_MSGS(N_MUL, "b"),
                       TENSOR_MSGS(N_MUL, "out") },
        },
        [HBG_KERNEL_AXPY_F32 - 1] = {
                COUNT_MSGS(N_AXPY),
                .t = { TENSOR_MSGS(N_AXPY, "x"), TENSOR_MSGS(N_AXPY, "y") },
                .f32_high = { F32_MSG(N_AXPY, "alpha") },
        },
        [HBG_KERNEL_SCALE_F32 - 1] = {
                COUNT_MSGS(N_SCALE),
                .t = { TENSOR_MSGS(N_SCALE, "x") },
                .f32_high = { F32_MSG(N_SCALE, "alpha") },
        },
        [HBG_KERNEL_REDUCE_SUM_F32 - 1] = {
                COUNT_MSGS(N_REDUCE),
                .t = { TENSOR_MSGS(N_REDUCE, "x"), TENSOR_MSGS(N_REDUCE, "s") },
        },
        [HBG_KERNEL_GEMM_F32 - 1] = {
                COUNT_MSGS(N_GEMM),
                .t = { TENSOR_MSGS(N_GEMM, "A"), TENSOR_MSGS(N_GEMM, "B"),
                       TENSOR_MSGS(N_GEMM, "C") },
        },
        [HBG_KERNEL_SOFTMAX_ROWS_F32 - 1] = {
                COUNT_MSGS(N_SOFTMAX),
                .t = { TENSOR_MSGS(N_SOFTMAX, "X") },
        },
        [HBG_KERNEL_FAIL - 1] = { COUNT_MSGS(N_FAIL) },
};

/* ------------------------------------------------------------ helpers */

static float *f32_at(uint8_t *heap, const struct hbg_tensor_arg *t) {
        /* The heap base is 64-byte aligned and offsets are validated to be
         * multiples of 4. */
        return (float *)(void *)(heap + t->offset);
}

static uint64_t n_f32(const struct hbg_tensor_arg *t) {
        return t->length / sizeof(float);
}

static float scalar_f32(uint64_t raw) {
        uint32_t bits = (uint32_t)raw;
        float v;

        memcpy(&v, &bits, sizeof(v));
        return v;
}

/* [*lo, *hi) = [n*part/parts, n*(part+1)/parts) without a 128-bit product:
 * with n = q*parts + r, n*p/parts = q*p + r*p/parts exactly, and
 * r*p < parts^2 < 2^64 for 32-bit parts. */
static uint64_t split_point(uint64_t n, uint64_t p, uint64_t parts) {
        uint64_t q = n / parts, r = n % parts;

        return q * p + r * p / parts;
}

static bool bad_part(uint32_t part, uint32_t parts) {
        return parts == 0 || part >= parts;
}

static int part_range(uint64_t n, uint32_t part, uint32_t parts, uint64_t *lo, uint64_t *hi) {
        if (bad_part(part, parts))
                return -EINVAL;
        *lo = split_point(n, part, parts);
        *hi = split_point(n, (uint64_t)part + 1, parts);
        return 0;
}

/* ------------------------------------------------------------ checks */

static int check_none(const struct kernel_args *a, const char **why) {
        (void)a;
        (void)why;
        return 0;
}

#define SPIN_NS_MAX UINT64_C(1000000000)

static int check_spin(const struct kernel_args *a, const char **why) {
        if (a->scalars[0] > SPIN_NS_MAX) {
                *why = N_SPIN ": ns must not exceed 1000000000 (1 s)";
                return -ERANGE;
        }
        return 0;
}

static int check_copy(const struct kernel_args *a, const char **why) {
        if (a->tensors[0].length < a->tensors[1].length) {
                *why = N_COPY ": input in shorter than output";
                return -EINVAL;
        }
        return 0;
}

/* a, b, out: both inputs at least as long as the output. */
static int check_binary(const struct kernel_args *a, const char **why, const char *short_a,
                        const char *short_b) {
        if (a->tensors[0].length < a->tensors[2].length) {
                *why = short_a;
                return -EINVAL;
        }
        if (a->tensors[1].length < a->tensors[2].length) {
                *why = short_b;
                return -EINVAL;
        }
        return 0;
}

static int check_add(const struct kernel_args *a, const char **why) {
        return check_binary(a, why, N_ADD ": input a shorter than output",
                            N_ADD ": input b shorter than output");
}

static int check_mul(const struct kernel_args *a, const char **why) {
        return check_binary(a, why, N_MUL ": input a shorter than output",
                            N_MUL ": input b shorter than output");
}

static int check_axpy(const struct kernel_args *a, const char **why) {
        if (a->tensors[0].length < a->tensors[1].length) {
                *why = N_AXPY ": input x shorter than y";
                return -EINVAL;
        }
        return 0;
}

#define GEMM_DIM_MAX (UINT64_C(1) << 20)

/* *ret = x * y * 4 or false on overflow. */
static bool f32_bytes(uint64_t x, uint64_t y, uint64_t *ret) {
        uint64_t n;

        return !__builtin_mul_overflow(x, y, &n) && !__builtin_mul_overflow(n, sizeof(float), ret);
}

static int check_gemm(const struct kernel_args *a, const char **why) {
        uint64_t m = a->scalars[0], n = a->scalars[1], k = a->scalars[2], bytes;

        if (m == 0 || n == 0 || k == 0) {
                *why = N_GEMM ": m, n and k must be at least 1";
                return -EINVAL;
        }
        if (m > GEMM_DIM_MAX || n > GEMM_DIM_MAX || k > GEMM_DIM_MAX) {
                *why = N_GEMM ": m, n and k must not exceed 2^20";
                return -ERANGE;
        }
        /* With every dimension <= 2^20 these products cannot overflow; the
         * checks stay so a raised limit cannot silently break them. */
        if (!f32_bytes(m, k, &bytes)) {
                *why = N_GEMM ": size of A (m*k*4) overflows";
                return -EOVERFLOW;
        }
        if (bytes > a->tensors[0].length) {
                *why = N_GEMM ": shape does not fit A";
                return -EINVAL;
        }
        if (!f32_bytes(k, n, &bytes)) {
                *why = N_GEMM ": size of B (k*n*4) overflows";
                return -EOVERFLOW;
        }
        if (bytes > a->tensors[1].length) {
                *why = N_GEMM ": shape does not fit B";
                return -EINVAL;
        }
        if (!f32_bytes(m, n, &bytes)) {
                *why = N_GEMM ": size of C (m*n*4) overflows";
                return -EOVERFLOW;
        }
        if (bytes > a->tensors[2].length) {
                *why = N_GEMM ": shape does not fit C";
                return -EINVAL;
        }
        return 0;
}

static int check_softmax(const struct kernel_args *a, const char **why) {
        uint64_t rows = a->scalars[0], cols = a->scalars[1], bytes;

        if (rows == 0 || cols == 0) {
                *why = N_SOFTMAX ": rows and cols must be at least 1";
                return -EINVAL;
        }
        if (!f32_bytes(rows, cols, &bytes)) {
                *why = N_SOFTMAX ": size of X (rows*cols*4) overflows";
                return -EOVERFLOW;
        }
        if (bytes > a->tensors[0].length) {
                *why = N_SOFTMAX ": shape does not fit X";
                return -EINVAL;
        }
        return 0;
}

#define FAIL_CODE_MIN (-4095)

static int check_fail(const struct kernel_args *a, const char **why) {
        int64_t code = (int64_t)a->scalars[0];

        if (code < FAIL_CODE_MIN || code > -1) {
                *why = N_FAIL ": code must be a negative errno in [-4095, -1]";
                return -ERANGE;
        }
        return 0;
}

/* ------------------------------------------------------------ costs */

static uint64_t sat_mul(uint64_t x, uint64_t y) {
        uint64_t r;
        return __builtin_mul_overflow(x, y, &r) ? UINT64_MAX : r;
}

/* A task that runs nothing still costs its dispatch. */
static uint64_t cost_unit(const struct kernel_args *a, uint32_t parts) {
        (void)a;
        return parts;
}

static uint64_t cost_spin(const struct kernel_args *a, uint32_t parts) {
        return sat_mul(a->scalars[0], parts);
}

/* Elements of tensor i. */
static uint64_t cost_elems0(const struct kernel_args *a, uint32_t parts) {
        (void)parts;
        return n_f32(&a->tensors[0]) + 1;
}

static uint64_t cost_elems1(const struct kernel_args *a, uint32_t parts) {
        (void)parts;
        return n_f32(&a->tensors[1]) + 1;
}

static uint64_t cost_elems2(const struct kernel_args *a, uint32_t parts) {
        (void)parts;
        return n_f32(&a->tensors[2]) + 1;
}

static uint64_t cost_gemm(const struct kernel_args *a, uint32_t parts) {
        (void)parts;
        return sat_mul(sat_mul(a->scalars[0], a->scalars[1]), a->scalars[2]);
}

/* Max, exp, sum and divide per element. */
static uint64_t cost_softmax(const struct kernel_args *a, uint32_t parts) {
        (void)parts;
        return sat_mul(sat_mul(a->scalars[0], a->scalars[1]), 4);
}

/* ------------------------------------------------------------ kernels */

static int run_noop(uint8_t *heap, const struct kernel_args *a, uint32_t part, uint32_t parts) {
        (void)heap;
        (void)a;
        return bad_part(part, parts) ? -EINVAL : 0;
}

static uint64_t now_ns(void) {
        struct timespec ts;

        clock_gettime(CLOCK_MONOTONIC, &ts); /* cannot fail for CLOCK_MONOTONIC */
        return (uint64_t)ts.tv_sec * UINT64_C(1000000000) + (uint64_t)ts.tv_nsec;
}

static void cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
        __builtin_ia32_pause();
#elif defined(__aarch64__)
        __asm__ volatile("yield" ::: "memory");
#endif
}

/* Every part spins the full time: it models per-block work. */
static int run_spin(uint8_t *heap, const struct kernel_args *a, uint32_t part, uint32_t parts) {
        uint64_t ns = a->scalars[0], start;

        (void)heap;
        if (bad_part(part, parts))
                return -EINVAL;
        if (ns == 0)
                return 0;
        start = now_ns();
        while (now_ns() - start < ns)
                cpu_relax();
        return 0;
}

static int run_fill(uint8_t *heap, const struct kernel_args *a, uint32_t part, uint32_t parts) {
        float *out = f32_at(heap, &a->tensors[0]);
        float v = scalar_f32(a->scalars[0]);
        uint64_t lo, hi;

        if (part_range(n_f32(&a->tensors[0]), part, parts, &lo, &hi) < 0)
                return -EINVAL;
        for (uint64_t i = lo; i < hi; i++)
                out[i] = v;
        return 0;
}

static int run_copy(uint8_t *heap, const struct kernel_args *a, uint32_t part, uint32_t parts) {
        const float *in = f32_at(heap, &a->tensors[0]);
        float *out = f32_at(heap, &a->tensors[1]);
        uint64_t lo, hi;

        if (part_range(n_f32(&a->tensors[1]), part, parts, &lo, &hi) < 0)
                return -EINVAL;
        /* in and out do not overlap (validated); memcpy keeps every bit. */
        if (hi > lo)
                memcpy(out + lo, in + lo, (size_t)(hi - lo) * sizeof(float));
        return 0;
}

static int run_add(uint8_t *heap, const struct kernel_args *a, uint32_t part, uint32_t parts) {
        const float *restrict x = f32_at(heap, &a->tensors[0]);
        const float *restrict y = f32_at(heap, &a->tensors[1]);
        float *restrict out = f32_at(heap, &a->tensors[2]);
        uint64_t lo, hi;

        if (part_range(n_f32(&a->tensors[2]), part, parts, &lo, &hi) < 0)
                return -EINVAL;
        for (uint64_t i = lo; i < hi; i++)
                out[i] = x[i] + y[i];
        return 0;
}

static int run_mul(uint8_t *heap, const struct kernel_args *a, uint32_t part, uint32_t parts) {
        const float *restrict x = f32_at(heap, &a->tensors[0]);
        const float *restrict y = f32_at(heap, &a->tensors[1]);
        float *restrict out = f32_at(heap, &a->tensors[2]);
        uint64_t lo, hi;

        if (part_range(n_f32(&a->tensors[2]), part, parts, &lo, &hi) < 0)
                return -EINVAL;
        for (uint64_t i = lo; i < hi; i++)
                out[i] = x[i] * y[i];
        return 0;
}

static int run_axpy(uint8_t *heap, const struct kernel_args *a, uint32_t part, uint32_t parts) {
        const float *restrict x = f32_at(heap, &a->tensors[0]);
        float *restrict y = f32_at(heap, &a->tensors[1]);
        float alpha = scalar_f32(a->scalars[0]);
        uint64_t lo, hi;

        if (part_range(n_f32(&a->tensors[1]), part, parts, &lo, &hi) < 0)
                return -EINVAL;
        for (uint64_t i = lo; i < hi; i++)
                y[i] = alpha * x[i] + y[i];
        return 0;
}

static int run_scale(uint8_t *heap, const struct kernel_args *a, uint32_t part, uint32_t parts) {
        float *x = f32_at(heap, &a->tensors[0]);
        float alpha = scalar_f32(a->scalars[0]);
        uint64_t lo, hi;

        if (part_range(n_f32(&a->tensors[0]), part, parts, &lo, &hi) < 0)
                return -EINVAL;
        for (uint64_t i = lo; i < hi; i++)
                x[i] = alpha * x[i];
        return 0;
}

/* Not splittable: part 0 sums everything in index order, in double. */
static int run_reduce(uint8_t *heap, const struct kernel_args *a, uint32_t part, uint32_t parts) {
        const float *x;
        uint64_t n;
        double sum = 0.0;

        if (bad_part(part, parts))
                return -EINVAL;
        if (part != 0)
                return 0;
        x = f32_at(heap, &a->tensors[0]);
        n = n_f32(&a->tensors[0]);
        for (uint64_t i = 0; i < n; i++)
                sum += (double)x[i];
        f32_at(heap, &a->tensors[1])[0] = (float)sum;
        return 0;
}

/* C[m x n] += A[m x k] * B[k x n], split by rows of C. Each C element is
 * accumulated in float, starting from its old value, in p order: the i-p-j
 * loop order adds the same terms in the same order as the textbook i-j-p
 * loop, while the inner loop runs along rows of B and C. */
static int run_gemm(uint8_t *heap, const struct kernel_args *a, uint32_t part, uint32_t parts) {
        const float *restrict A = f32_at(heap, &a->tensors[0]);
        const float *restrict B = f32_at(heap, &a->tensors[1]);
        float *restrict C = f32_at(heap, &a->tensors[2]);
        uint64_t m = a->scalars[0], n = a->scalars[1], k = a->scalars[2], lo, hi;

        if (part_range(m, part, parts, &lo, &hi) < 0)
                return -EINVAL;
        for (uint64_t i = lo; i < hi; i++) {
                float *restrict c = C + i * n;

                for (uint64_t p = 0; p < k; p++) {
                        const float *restrict b = B + p * n;
                        float aip = A[i * k + p];

                        for (uint64_t j = 0; j < n; j++)
                                c[j] += aip * b[j];
                }
        }
        return 0;
}

/* Each row: subtract the row max, e = expf(x - max) in float, sum the e in
 * double in column order, then x = (float)(e / sum) in double. */
static int run_softmax(uint8_t *heap, const struct kernel_args *a, uint32_t part, uint32_t parts) {
        float *X = f32_at(heap, &a->tensors[0]);
        uint64_t cols = a->scalars[1], lo, hi;

        if (part_range(a->scalars[0], part, parts, &lo, &hi) < 0)
                return -EINVAL;
        for (uint64_t r = lo; r < hi; r++) {
                float *x = X + r * cols;
                float max = x[0];
                double sum = 0.0;

                for (uint64_t j = 1; j < cols; j++)
                        if (x[j] > max)
                                max = x[j];
                for (uint64_t j = 0; j < cols; j++) {
                        x[j] = expf(x[j] - max);
                        sum += (double)x[j];
                }
                for (uint64_t j = 0; j < cols; j++)
                        x[j] = (float)((double)x[j] / sum);
        }
        return 0;
}

/* Every part returns the code (validated to be in [-4095, -1]). */
static int run_fail(uint8_t *heap, const struct kernel_args *a, uint32_t part, uint32_t parts) {
        (void)heap;
        if (bad_part(part, parts))
                return -EINVAL;
        return (int)(int64_t)a->scalars[0];
}

/* ------------------------------------------------------------ table */

#define IN HBG_DIR_IN
#define OUT HBG_DIR_OUT
#define INOUT HBG_DIR_INOUT
#define F32 KERNEL_SCALAR_F32
#define U64 KERNEL_SCALAR_U64
#define I64 KERNEL_SCALAR_I64

/* Indexed by id - 1. */
static const struct kernel_info kernels[HBG_KERNEL_COUNT - 1] = {
        [HBG_KERNEL_NOOP - 1] = {
                .id = HBG_KERNEL_NOOP, .name = N_NOOP,
                .splittable = true, .check = check_none, .run = run_noop, .cost = cost_unit,
        },
        [HBG_KERNEL_SPIN_NS - 1] = {
                .id = HBG_KERNEL_SPIN_NS, .name = N_SPIN,
                .n_scalars = 1, .scalar_kinds = { U64 }, .scalar_names = { "ns" },
                .splittable = true, .check = check_spin, .run = run_spin, .cost = cost_spin,
        },
        [HBG_KERNEL_FILL_F32 - 1] = {
                .id = HBG_KERNEL_FILL_F32, .name = N_FILL,
                .n_tensors = 1, .dirs = { OUT }, .tensor_names = { "out" },
                .n_scalars = 1, .scalar_kinds = { F32 }, .scalar_names = { "v" },
                .splittable = true, .check = check_none, .run = run_fill, .cost = cost_elems0,
        },
        [HBG_KERNEL_COPY_F32 - 1] = {
                .id = HBG_KERNEL_COPY_F32, .name = N_COPY,
                .n_tensors = 2, .dirs = { IN, OUT }, .tensor_names = { "in", "out" },
                .splittable = true, .check = check_copy, .run = run_copy, .cost = cost_elems1,
        },
        [HBG_KERNEL_ADD_F32 - 1] = {
                .id = HBG_KERNEL_ADD_F32, .name = N_ADD,
                .n_tensors = 3, .dirs = { IN, IN, OUT }, .tensor_names = { "a", "b", "out" },
                .splittable = true, .check = check_add, .run = run_add, .cost = cost_elems2,
        },
        [HBG_KERNEL_MUL_F32 - 1] = {
                .id = HBG_KERNEL_MUL_F32, .name = N_MUL,
                .n_tensors = 3, .dirs = { IN, IN, OUT }, .tensor_names = { "a", "b", "out" },
                .splittable = true, .check = check_mul, .run = run_mul, .cost = cost_elems2,
        },
        [HBG_KERNEL_AXPY_F32 - 1] = {
                .id = HBG_KERNEL_AXPY_F32, .name = N_AXPY,
                .n_tensors = 2, .dirs = { IN, INOUT }, .tensor_names = { "x", "y" },
                .n_scalars = 1, .scalar_kinds = { F32 }, .scalar_names = { "alpha" },
                .splittable = true, .check = check_axpy, .run = run_axpy, .cost = cost_elems1,
        },
        [HBG_KERNEL_SCALE_F32 - 1] = {
                .id = HBG_KERNEL_SCALE_F32, .name = N_SCALE,
                .n_tensors = 1, .dirs = { INOUT }, .tensor_names = { "x" },
                .n_scalars = 1, .scalar_kinds = { F32 }, .scalar_names = { "alpha" },
                .splittable = true, .check = check_none, .run = run_scale, .cost = cost_elems0,
        },
        [HBG_KERNEL_REDUCE_SUM_F32 - 1] = {
                .id = HBG_KERNEL_REDUCE_SUM_F32, .name = N_REDUCE,
                .n_tensors = 2, .dirs = { IN, OUT }, .tensor_names = { "x", "s" },
                .splittable = false, .check = check_none, .run = run_reduce, .cost = cost_elems0,
        },
        [HBG_KERNEL_GEMM_F32 - 1] = {
                .id = HBG_KERNEL_GEMM_F32, .name = N_GEMM,
                .n_tensors = 3, .dirs = { IN, IN, INOUT }, .tensor_names = { "A", "B", "C" },
                .n_scalars = 3, .scalar_kinds = { U64, U64, U64 }, .scalar_names = { "m", "n", "k" },
                .splittable = true, .check = check_gemm, .run = run_gemm, .cost = cost_gemm,
        },
        [HBG_KERNEL_SOFTMAX_ROWS_F32 - 1] = {
                .id = HBG_KERNEL_SOFTMAX_ROWS_F32, .name = N_SOFTMAX,
                .n_tensors = 1, .dirs = { INOUT }, .tensor_names = { "X" },
                .n_scalars = 2, .scalar_kinds = { U64, U64 }, .scalar_names = { "rows", "cols" },
                .splittable = true, .check = check_softmax, .run = run_softmax, .cost = cost_softmax,
        },
        [HBG_KERNEL_FAIL - 1] = {
                .id = HBG_KERNEL_FAIL, .name = N_FAIL,
                .n_scalars = 1, .scalar_kinds = { I64 }, .scalar_names = { "code" },
                .splittable = true, .check = check_fail, .run = run_fail, .cost = cost_unit,
        },
};

const struct kernel_info *kernel_lookup(uint16_t id) {
        if (id == HBG_KERNEL_NONE || id >= HBG_KERNEL_COUNT)
                return NULL;
        return &kernels[id - 1];
}

const struct kernel_info *kernel_lookup_name(const char *name) {
        if (!name)
                return NULL;
        for (size_t i = 0; i < HBG_KERNEL_COUNT - 1; i++)
                if (strcmp(kernels[i].name, name) == 0)
                        return &kernels[i];
        return NULL;
}

size_t kernel_count(void) {
        return HBG_KERNEL_COUNT - 1;
}

const struct kernel_info *kernel_at(size_t i) {
        return i < HBG_KERNEL_COUNT - 1 ? &kernels[i] : NULL;
}

uint64_t kernel_cost(const struct kernel_info *k, const struct kernel_args *a, uint32_t parts) {
        return k->cost(a, parts ? parts : 1);
}

const char *kernel_cost_message(const struct kernel_info *k) {
        return msgs[k->id - 1].cost;
}

/* ------------------------------------------------------------ validation */

static bool is_output(uint32_t dir) {
        return dir == HBG_DIR_OUT || dir == HBG_DIR_INOUT;
}

/* Both ranges are already known to lie inside the heap. */
static bool overlaps(const struct hbg_tensor_arg *x, const struct hbg_tensor_arg *y) {
        return x->offset < y->offset + y->length && y->offset < x->offset + x->length;
}

static int check_tensor(const struct hbg_tensor_arg *t, uint8_t dir, uint64_t heap_size,
                        const struct tensor_msgs *m, const char **why) {
        uint64_t end;

        if (t->direction != dir) {
                *why = m->dir;
                return -EINVAL;
        }
        if (t->reserved != 0) {
                *why = m->reserved;
                return -EINVAL;
        }
        if (t->offset % sizeof(float) != 0 || t->length % sizeof(float) != 0) {
                *why = m->align;
                return -EINVAL;
        }
        if (t->length == 0) {
                *why = m->empty;
                return -EINVAL;
        }
        if (__builtin_add_overflow(t->offset, t->length, &end)) {
                *why = m->overflow;
                return -EOVERFLOW;
        }
        if (end > heap_size) {
                *why = m->range;
                return -ERANGE;
        }
        return 0;
}

int kernel_validate(const struct kernel_info *k, const struct kernel_args *a, uint64_t heap_size,
                    const char **why) {
        const struct kernel_msgs *m;
        const char *dummy;
        int r;

        if (!why)
                why = &dummy;
        *why = NULL;
        if (!k || k->id == HBG_KERNEL_NONE || k->id >= HBG_KERNEL_COUNT ||
            k != &kernels[k->id - 1]) {
                *why = "kernel: not an entry of the kernel table";
                return -EINVAL;
        }
        m = &msgs[k->id - 1];

        if (a->n_tensors != k->n_tensors) {
                *why = m->n_tensors;
                return -EINVAL;
        }
        if (a->n_scalars != k->n_scalars) {
                *why = m->n_scalars;
                return -EINVAL;
        }
        for (unsigned i = 0; i < k->n_tensors; i++) {
                r = check_tensor(&a->tensors[i], k->dirs[i], heap_size, &m->t[i], why);
                if (r < 0)
                        return r;
        }
        for (unsigned i = 0; i < k->n_tensors; i++) {
                if (!is_output(a->tensors[i].direction))
                        continue;
                for (unsigned j = 0; j < k->n_tensors; j++) {
                        if (j != i && overlaps(&a->tensors[i], &a->tensors[j])) {
                                *why = m->t[i].overlap;
                                return -EINVAL;
                        }
                }
        }
        for (unsigned i = 0; i < k->n_scalars; i++) {
                if (k->scalar_kinds[i] == KERNEL_SCALAR_F32 && (a->scalars[i] >> 32) != 0) {
                        *why = m->f32_high[i];
                        return -EINVAL;
                }
        }
        return k->check(a, why);
}
