/* SPDX-License-Identifier: MIT */
/*
 * The built-in kernels' code: check, cost and run of each, by id. With
 * the shared signature table (common/kernel_sig.h) each makes one struct
 * hbg_kernel_def, the definition a module's kernel has too: kernels.c
 * registers them as the module "built-in" (docs/ARCHITECTURE.md, "Adding
 * a kernel"). Each run function checks its context as the run contract
 * says (kernels.h, hbg/kernel.h).
 */
#include "daemon/engine/kernels_builtin.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "common/clock.h"

/* ------------------------------------------------------------ helpers */

static float *f32_at(uint8_t *heap, const struct hbg_kernel_tensor_arg *t) {
        /* The heap base is 64-byte aligned and offsets are validated to be
         * multiples of 4. */
        return (float *)(void *)(heap + t->offset);
}

static uint64_t n_f32(const struct hbg_kernel_tensor_arg *t) {
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

/* Each check returns the index of its reason in the kernel's message
 * list; kernel_validate() puts the kernel's name in front. */

#define SPIN_NS_MAX UINT64_C(1000000000)

static const char *const spin_msgs[] = { "ns must not exceed 1000000000 (1 s)" };

static int check_spin(const struct hbg_kernel_args *a, unsigned *ret_msg) {
        if (a->scalars[0] > SPIN_NS_MAX) {
                *ret_msg = 0;
                return -ERANGE;
        }
        return 0;
}

#define GEMM_DIM_MAX (UINT64_C(1) << 20)

/* *ret = x * y * 4 or false on overflow. */
static bool f32_bytes(uint64_t x, uint64_t y, uint64_t *ret) {
        uint64_t n;

        return !__builtin_mul_overflow(x, y, &n) && !__builtin_mul_overflow(n, sizeof(float), ret);
}

enum {
        GEMM_ZERO, GEMM_BIG, GEMM_A_OVF, GEMM_A_FIT, GEMM_B_OVF, GEMM_B_FIT, GEMM_C_OVF, GEMM_C_FIT,
};

static const char *const gemm_msgs[] = {
        [GEMM_ZERO] = "m, n and k must be at least 1",
        [GEMM_BIG] = "m, n and k must not exceed 2^20",
        [GEMM_A_OVF] = "size of A (m*k*4) overflows",
        [GEMM_A_FIT] = "shape does not fit A",
        [GEMM_B_OVF] = "size of B (k*n*4) overflows",
        [GEMM_B_FIT] = "shape does not fit B",
        [GEMM_C_OVF] = "size of C (m*n*4) overflows",
        [GEMM_C_FIT] = "shape does not fit C",
};

static int check_gemm(const struct hbg_kernel_args *a, unsigned *ret_msg) {
        uint64_t m = a->scalars[0], n = a->scalars[1], k = a->scalars[2], bytes;
        const uint64_t dims[3][2] = { { m, k }, { k, n }, { m, n } };

        if (m == 0 || n == 0 || k == 0) {
                *ret_msg = GEMM_ZERO;
                return -EINVAL;
        }
        if (m > GEMM_DIM_MAX || n > GEMM_DIM_MAX || k > GEMM_DIM_MAX) {
                *ret_msg = GEMM_BIG;
                return -ERANGE;
        }
        /* With every dimension <= 2^20 these products cannot overflow; the
         * checks stay so a raised limit cannot silently break them. */
        for (unsigned t = 0; t < 3; t++) {
                if (!f32_bytes(dims[t][0], dims[t][1], &bytes)) {
                        *ret_msg = GEMM_A_OVF + 2 * t;
                        return -EOVERFLOW;
                }
                if (bytes > a->tensors[t].length) {
                        *ret_msg = GEMM_A_FIT + 2 * t;
                        return -EINVAL;
                }
        }
        return 0;
}

/* The numbers behind a failed check (kernel_explain()), in f32 elements. */
static int explain_gemm(const struct hbg_kernel_args *a, unsigned cm, char *buf, size_t len) {
        static const char *const dim_names[3][2] = { { "m", "k" }, { "k", "n" }, { "m", "n" } };
        static const char *const tensor_names[3] = { "A", "B", "C" };
        uint64_t m = a->scalars[0], n = a->scalars[1], k = a->scalars[2];
        const uint64_t dims[3][2] = { { m, k }, { k, n }, { m, n } };
        if (cm < GEMM_A_FIT || (cm - GEMM_A_FIT) % 2 != 0)
                return snprintf(buf, len, ": m = %" PRIu64 ", n = %" PRIu64 ", k = %" PRIu64, m, n, k);
        unsigned t = (cm - GEMM_A_FIT) / 2;
        return snprintf(buf, len, ": %s*%s = %" PRIu64 "*%" PRIu64 " = %" PRIu64 " elements, %s has %" PRIu64,
                        dim_names[t][0], dim_names[t][1], dims[t][0], dims[t][1], dims[t][0] * dims[t][1],
                        tensor_names[t], n_f32(&a->tensors[t]));
}

enum { SOFTMAX_ZERO, SOFTMAX_OVF, SOFTMAX_FIT };

static const char *const softmax_msgs[] = {
        [SOFTMAX_ZERO] = "rows and cols must be at least 1",
        [SOFTMAX_OVF] = "size of X (rows*cols*4) overflows",
        [SOFTMAX_FIT] = "shape does not fit X",
};

static int check_softmax(const struct hbg_kernel_args *a, unsigned *ret_msg) {
        uint64_t rows = a->scalars[0], cols = a->scalars[1], bytes;

        if (rows == 0 || cols == 0) {
                *ret_msg = SOFTMAX_ZERO;
                return -EINVAL;
        }
        if (!f32_bytes(rows, cols, &bytes)) {
                *ret_msg = SOFTMAX_OVF;
                return -EOVERFLOW;
        }
        if (bytes > a->tensors[0].length) {
                *ret_msg = SOFTMAX_FIT;
                return -EINVAL;
        }
        return 0;
}

static int explain_softmax(const struct hbg_kernel_args *a, unsigned cm, char *buf, size_t len) {
        uint64_t rows = a->scalars[0], cols = a->scalars[1];
        if (cm != SOFTMAX_FIT)
                return snprintf(buf, len, ": rows = %" PRIu64 ", cols = %" PRIu64, rows, cols);
        return snprintf(buf, len, ": rows*cols = %" PRIu64 "*%" PRIu64 " = %" PRIu64 " elements, X has %" PRIu64,
                        rows, cols, rows * cols, n_f32(&a->tensors[0]));
}

#define FAIL_CODE_MIN (-4095)

static const char *const fail_msgs[] = { "code must be a negative errno in [-4095, -1]" };

static int check_fail(const struct hbg_kernel_args *a, unsigned *ret_msg) {
        int64_t code = (int64_t)a->scalars[0];

        if (code < FAIL_CODE_MIN || code > -1) {
                *ret_msg = 0;
                return -ERANGE;
        }
        return 0;
}

static const char *const timestamp_msgs[] = { "t must hold whole i64 values (a multiple of 8 bytes)" };

static int check_timestamp(const struct hbg_kernel_args *a, unsigned *ret_msg) {
        if (a->tensors[0].length % sizeof(int64_t) != 0) {
                *ret_msg = 0;
                return -EINVAL;
        }
        return 0;
}

/* ------------------------------------------------------------ costs */

static uint64_t sat_mul(uint64_t x, uint64_t y) {
        uint64_t r;
        return __builtin_mul_overflow(x, y, &r) ? UINT64_MAX : r;
}

/* A task that runs nothing still costs its dispatch. */
static uint64_t cost_unit(const struct hbg_kernel_args *a, uint32_t parts) {
        (void)a;
        return parts;
}

static uint64_t cost_spin(const struct hbg_kernel_args *a, uint32_t parts) {
        return sat_mul(a->scalars[0], parts);
}

/* Elements of tensor i. */
static uint64_t cost_elems0(const struct hbg_kernel_args *a, uint32_t parts) {
        (void)parts;
        return n_f32(&a->tensors[0]) + 1;
}

static uint64_t cost_elems1(const struct hbg_kernel_args *a, uint32_t parts) {
        (void)parts;
        return n_f32(&a->tensors[1]) + 1;
}

static uint64_t cost_elems2(const struct hbg_kernel_args *a, uint32_t parts) {
        (void)parts;
        return n_f32(&a->tensors[2]) + 1;
}

static uint64_t cost_gemm(const struct hbg_kernel_args *a, uint32_t parts) {
        (void)parts;
        return sat_mul(sat_mul(a->scalars[0], a->scalars[1]), a->scalars[2]);
}

/* Max, exp, sum and divide per element. */
static uint64_t cost_softmax(const struct hbg_kernel_args *a, uint32_t parts) {
        (void)parts;
        return sat_mul(sat_mul(a->scalars[0], a->scalars[1]), 4);
}

/* ------------------------------------------------------------ the run contract */

/* End of the chunk starting at i of [i, hi). */
static uint64_t chunk_end(uint64_t i, uint64_t hi) {
        return hi - i > KERNEL_CHECK_CHUNK ? i + KERNEL_CHECK_CHUNK : hi;
}

/* Elementwise kernels: `op` on elements [lo, hi) of their tensors. */
typedef void elementwise_fn(uint8_t *heap, const struct hbg_kernel_args *a, uint64_t lo, uint64_t hi);

/* Part `part` of `parts` of an elementwise kernel over the elements of
 * tensor `out`, in chunks with a check after each. */
static int run_elementwise(struct hbg_kernel_ctx *ctx, uint8_t *heap, const struct hbg_kernel_args *a, unsigned out,
                           uint32_t part, uint32_t parts, elementwise_fn *op) {
        uint64_t lo, hi;
        int r;

        if (part_range(n_f32(&a->tensors[out]), part, parts, &lo, &hi) < 0)
                return -EINVAL;
        for (uint64_t i = lo, e; i < hi; i = e) {
                e = chunk_end(i, hi);
                op(heap, a, i, e);
                if ((r = hbg_kernel_check(ctx, e - i)) < 0)
                        return r;
        }
        return 0;
}
/* ------------------------------------------------------------ kernels */

static int run_noop(struct hbg_kernel_ctx *ctx, uint8_t *heap, const struct hbg_kernel_args *a, uint32_t part,
                    uint32_t parts) {
        (void)ctx;
        (void)heap;
        (void)a;
        return bad_part(part, parts) ? -EINVAL : 0;
}


/* Every part spins the full time: it models per-block work. Its work
 * units are nanoseconds, handed to the check as they pass. */
static int run_spin(struct hbg_kernel_ctx *ctx, uint8_t *heap, const struct hbg_kernel_args *a, uint32_t part,
                    uint32_t parts) {
        uint64_t ns = a->scalars[0], start, last, now;
        int r;

        (void)heap;
        if (bad_part(part, parts))
                return -EINVAL;
        if (ns == 0)
                return 0;
        start = last = (uint64_t)clock_now_ns();
        while ((now = (uint64_t)clock_now_ns()) - start < ns) {
                if ((r = hbg_kernel_check(ctx, now - last)) < 0)
                        return r;
                last = now;
                cpu_relax();
        }
        return 0;
}

static void fill_range(uint8_t *heap, const struct hbg_kernel_args *a, uint64_t lo, uint64_t hi) {
        float *out = f32_at(heap, &a->tensors[0]);
        float v = scalar_f32(a->scalars[0]);

        for (uint64_t i = lo; i < hi; i++)
                out[i] = v;
}

static int run_fill(struct hbg_kernel_ctx *ctx, uint8_t *heap, const struct hbg_kernel_args *a, uint32_t part,
                    uint32_t parts) {
        return run_elementwise(ctx, heap, a, 0, part, parts, fill_range);
}

/* In place allowed: in and out are the same range or disjoint
 * (validated); memmove keeps every bit either way. */
static void copy_range(uint8_t *heap, const struct hbg_kernel_args *a, uint64_t lo, uint64_t hi) {
        const float *in = f32_at(heap, &a->tensors[0]);
        float *out = f32_at(heap, &a->tensors[1]);

        if (in != out)
                memmove(out + lo, in + lo, (size_t)(hi - lo) * sizeof(float));
}

static int run_copy(struct hbg_kernel_ctx *ctx, uint8_t *heap, const struct hbg_kernel_args *a, uint32_t part,
                    uint32_t parts) {
        return run_elementwise(ctx, heap, a, 1, part, parts, copy_range);
}

/* In place allowed (out may be a or b): element i is read, then written. */
static void add_range(uint8_t *heap, const struct hbg_kernel_args *a, uint64_t lo, uint64_t hi) {
        const float *x = f32_at(heap, &a->tensors[0]);
        const float *y = f32_at(heap, &a->tensors[1]);
        float *out = f32_at(heap, &a->tensors[2]);

        for (uint64_t i = lo; i < hi; i++)
                out[i] = x[i] + y[i];
}

static int run_add(struct hbg_kernel_ctx *ctx, uint8_t *heap, const struct hbg_kernel_args *a, uint32_t part,
                   uint32_t parts) {
        return run_elementwise(ctx, heap, a, 2, part, parts, add_range);
}

/* In place allowed (out may be a or b): element i is read, then written. */
static void mul_range(uint8_t *heap, const struct hbg_kernel_args *a, uint64_t lo, uint64_t hi) {
        const float *x = f32_at(heap, &a->tensors[0]);
        const float *y = f32_at(heap, &a->tensors[1]);
        float *out = f32_at(heap, &a->tensors[2]);

        for (uint64_t i = lo; i < hi; i++)
                out[i] = x[i] * y[i];
}

static int run_mul(struct hbg_kernel_ctx *ctx, uint8_t *heap, const struct hbg_kernel_args *a, uint32_t part,
                   uint32_t parts) {
        return run_elementwise(ctx, heap, a, 2, part, parts, mul_range);
}

/* In place allowed (y may be x): element i is read, then written. */
static void axpy_range(uint8_t *heap, const struct hbg_kernel_args *a, uint64_t lo, uint64_t hi) {
        const float *x = f32_at(heap, &a->tensors[0]);
        float *y = f32_at(heap, &a->tensors[1]);
        float alpha = scalar_f32(a->scalars[0]);

        for (uint64_t i = lo; i < hi; i++)
                y[i] = alpha * x[i] + y[i];
}

static int run_axpy(struct hbg_kernel_ctx *ctx, uint8_t *heap, const struct hbg_kernel_args *a, uint32_t part,
                    uint32_t parts) {
        return run_elementwise(ctx, heap, a, 1, part, parts, axpy_range);
}

static void scale_range(uint8_t *heap, const struct hbg_kernel_args *a, uint64_t lo, uint64_t hi) {
        float *x = f32_at(heap, &a->tensors[0]);
        float alpha = scalar_f32(a->scalars[0]);

        for (uint64_t i = lo; i < hi; i++)
                x[i] = alpha * x[i];
}

static int run_scale(struct hbg_kernel_ctx *ctx, uint8_t *heap, const struct hbg_kernel_args *a, uint32_t part,
                     uint32_t parts) {
        return run_elementwise(ctx, heap, a, 0, part, parts, scale_range);
}

/* Not splittable: hbgd runs it as one part, 0 of 1 (any other is a
 * dispatch bug, refused), which sums everything in index order, in
 * double. */
static int run_reduce(struct hbg_kernel_ctx *ctx, uint8_t *heap, const struct hbg_kernel_args *a, uint32_t part,
                      uint32_t parts) {
        const float *x;
        uint64_t n;
        double sum = 0.0;
        int r;

        if (part != 0 || parts != 1)
                return -EINVAL;
        x = f32_at(heap, &a->tensors[0]);
        n = n_f32(&a->tensors[0]);
        for (uint64_t c = 0, e; c < n; c = e) {
                e = chunk_end(c, n);
                for (uint64_t i = c; i < e; i++)
                        sum += (double)x[i];
                if ((r = hbg_kernel_check(ctx, e - c)) < 0)
                        return r;
        }
        f32_at(heap, &a->tensors[1])[0] = (float)sum;
        return 0;
}

/* C[m x n] += A[m x k] * B[k x n] for rows [lo, hi) of C. Each C element is
 * accumulated in float, starting from its old value, in p order: the i-p-j
 * loop order adds the same terms in the same order as the textbook i-j-p
 * loop, while the inner loop runs along rows of B and C. For the checks a
 * row is cut into blocks of about KERNEL_CHECK_CHUNK multiply-adds: several
 * p steps of a narrow C, or chunks of j of a wide one; within a block p
 * still goes up for every element, so the sums are those of the plain
 * loop, bit for bit. Aligned to a cache line: where the link put it after
 * unrelated code grew, its inner loop's branches fell across a 32-byte
 * boundary and gemm tasks took 15 % longer (docs/PERFORMANCE.md, "The gemm
 * kernel on a cache line"). */
__attribute__((aligned(64))) int kernel_gemm_f32_rows(struct hbg_kernel_ctx *ctx, const float *restrict A,
                                                      const float *restrict B, float *restrict C, uint64_t n,
                                                      uint64_t k, uint64_t lo, uint64_t hi) {
        uint64_t jstep = n < KERNEL_CHECK_CHUNK ? n : KERNEL_CHECK_CHUNK;
        uint64_t pstep = KERNEL_CHECK_CHUNK / jstep;
        int r;

        for (uint64_t i = lo; i < hi; i++) {
                float *restrict c = C + i * n;

                for (uint64_t p0 = 0, p1; p0 < k; p0 = p1) {
                        p1 = k - p0 > pstep ? p0 + pstep : k;
                        for (uint64_t j0 = 0, j1; j0 < n; j0 = j1) {
                                j1 = chunk_end(j0, n);
                                for (uint64_t p = p0; p < p1; p++) {
                                        const float *restrict b = B + p * n;
                                        float aip = A[i * k + p];

                                        for (uint64_t j = j0; j < j1; j++)
                                                c[j] += aip * b[j];
                                }
                                if ((r = hbg_kernel_check(ctx, (p1 - p0) * (j1 - j0))) < 0)
                                        return r;
                        }
                }
        }
        return 0;
}

/* Split by rows of C. */
static int run_gemm(struct hbg_kernel_ctx *ctx, uint8_t *heap, const struct hbg_kernel_args *a, uint32_t part,
                    uint32_t parts) {
        uint64_t m = a->scalars[0], n = a->scalars[1], k = a->scalars[2], lo, hi;

        if (part_range(m, part, parts, &lo, &hi) < 0)
                return -EINVAL;
        return kernel_gemm_f32_rows(ctx, f32_at(heap, &a->tensors[0]), f32_at(heap, &a->tensors[1]),
                                    f32_at(heap, &a->tensors[2]), n, k, lo, hi);
}

/* Each row: subtract the row max, e = expf(x - max) in float, sum the e in
 * double in column order, then x = (float)(e / sum) in double. Each pass
 * over a row goes in chunks with a check after each (a row may be the
 * whole heap). */
static int run_softmax(struct hbg_kernel_ctx *ctx, uint8_t *heap, const struct hbg_kernel_args *a, uint32_t part,
                       uint32_t parts) {
        float *X = f32_at(heap, &a->tensors[0]);
        uint64_t cols = a->scalars[1], lo, hi, e;
        int r;

        if (part_range(a->scalars[0], part, parts, &lo, &hi) < 0)
                return -EINVAL;
        for (uint64_t row = lo; row < hi; row++) {
                float *x = X + row * cols;
                float max = x[0];
                double sum = 0.0;

                for (uint64_t c = 1; c < cols; c = e) {
                        e = chunk_end(c, cols);
                        for (uint64_t j = c; j < e; j++)
                                if (x[j] > max)
                                        max = x[j];
                        if ((r = hbg_kernel_check(ctx, e - c)) < 0)
                                return r;
                }
                for (uint64_t c = 0; c < cols; c = e) {
                        e = chunk_end(c, cols);
                        for (uint64_t j = c; j < e; j++) {
                                x[j] = expf(x[j] - max);
                                sum += (double)x[j];
                        }
                        if ((r = hbg_kernel_check(ctx, 2 * (e - c))) < 0)
                                return r;
                }
                for (uint64_t c = 0; c < cols; c = e) {
                        e = chunk_end(c, cols);
                        for (uint64_t j = c; j < e; j++)
                                x[j] = (float)((double)x[j] / sum);
                        if ((r = hbg_kernel_check(ctx, e - c)) < 0)
                                return r;
                }
        }
        return 0;
}

/* Part p stamps t[p] (when it fits): hbgd's CLOCK_MONOTONIC, the clock
 * every process of the host reads, so a client can place the part's start
 * among its own events and other tasks' stamps. */
static int run_timestamp(struct hbg_kernel_ctx *ctx, uint8_t *heap, const struct hbg_kernel_args *a, uint32_t part,
                         uint32_t parts) {
        int64_t now = clock_now_ns();

        (void)ctx; /* one store: nothing to bound */
        if (bad_part(part, parts))
                return -EINVAL;
        if (part < a->tensors[0].length / sizeof(int64_t))
                memcpy(heap + a->tensors[0].offset + (uint64_t)part * sizeof(int64_t), &now, sizeof(now));
        return 0;
}

/* Every part returns the code (validated to be in [-4095, -1]). */
static int run_fail(struct hbg_kernel_ctx *ctx, uint8_t *heap, const struct hbg_kernel_args *a, uint32_t part,
                    uint32_t parts) {
        (void)ctx;
        (void)heap;
        if (bad_part(part, parts))
                return -EINVAL;
        return (int)(int64_t)a->scalars[0];
}
/* ------------------------------------------------------------ table */

/* The code of each kernel, indexed by id - 1 like the signatures. */
static const struct builtin_code {
        int (*check)(const struct hbg_kernel_args *a, unsigned *ret_msg);
        const char *const *reasons;
        unsigned n_reasons;
        int (*explain)(const struct hbg_kernel_args *a, unsigned msg, char *buf, size_t len);
        int (*run)(struct hbg_kernel_ctx *ctx, uint8_t *heap, const struct hbg_kernel_args *a, uint32_t part,
                   uint32_t parts);
        uint64_t (*cost)(const struct hbg_kernel_args *a, uint32_t parts);
} code[HBG_KERNEL_COUNT - 1] = {
#define K(ID, RUN, COST) [ID - 1] = { .run = RUN, .cost = COST }
#define KC(ID, CHECK, MSGS, RUN, COST)                                                                 \
        [ID - 1] = { .check = CHECK, .reasons = MSGS, .n_reasons = sizeof(MSGS) / sizeof(MSGS[0]), \
                     .run = RUN, .cost = COST }
#define KCE(ID, CHECK, MSGS, EXPLAIN, RUN, COST)                                                       \
        [ID - 1] = { .check = CHECK, .reasons = MSGS, .n_reasons = sizeof(MSGS) / sizeof(MSGS[0]), \
                     .explain = EXPLAIN, .run = RUN, .cost = COST }
        K(HBG_KERNEL_NOOP, run_noop, cost_unit),
        KC(HBG_KERNEL_SPIN_NS, check_spin, spin_msgs, run_spin, cost_spin),
        K(HBG_KERNEL_FILL_F32, run_fill, cost_elems0),
        K(HBG_KERNEL_COPY_F32, run_copy, cost_elems1),
        K(HBG_KERNEL_ADD_F32, run_add, cost_elems2),
        K(HBG_KERNEL_MUL_F32, run_mul, cost_elems2),
        K(HBG_KERNEL_AXPY_F32, run_axpy, cost_elems1),
        K(HBG_KERNEL_SCALE_F32, run_scale, cost_elems0),
        K(HBG_KERNEL_REDUCE_SUM_F32, run_reduce, cost_elems0),
        KCE(HBG_KERNEL_GEMM_F32, check_gemm, gemm_msgs, explain_gemm, run_gemm, cost_gemm),
        KCE(HBG_KERNEL_SOFTMAX_ROWS_F32, check_softmax, softmax_msgs, explain_softmax, run_softmax, cost_softmax),
        KC(HBG_KERNEL_FAIL, check_fail, fail_msgs, run_fail, cost_unit),
        KC(HBG_KERNEL_TIMESTAMP_NS, check_timestamp, timestamp_msgs, run_timestamp, cost_unit),
#undef K
#undef KC
#undef KCE
};

int kernel_builtin_def(uint16_t id, struct hbg_kernel_def *def) {
        const struct hbg_kernel_sig *s = kernel_sig_by_id(id);
        if (!s)
                return -ENOENT;
        const struct builtin_code *c = &code[id - 1];
        *def = (struct hbg_kernel_def){
                .size = sizeof(*def), .name = s->name, .summary = s->summary,
                .n_tensors = s->n_tensors, .n_scalars = s->n_scalars, .length = (uint8_t)s->length,
                .length_rule = s->length_rule, .in_place = s->in_place, .splittable = s->splittable,
                .check = c->check, .reasons = c->reasons, .n_reasons = c->n_reasons, .explain = c->explain,
                .cost = c->cost, .run = c->run,
        };
        for (unsigned i = 0; i < s->n_tensors && i < HBG_KERNEL_MAX_TENSORS; i++) {
                def->tensors[i].name = s->tensors[i].name;
                def->tensors[i].dir = s->tensors[i].dir;
        }
        for (unsigned i = 0; i < s->n_scalars && i < HBG_KERNEL_MAX_SCALARS; i++) {
                def->scalars[i].name = s->scalars[i].name;
                def->scalars[i].kind = s->scalars[i].kind;
        }
        return 0;
}
