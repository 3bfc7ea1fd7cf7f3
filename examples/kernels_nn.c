/* SPDX-License-Identifier: MIT */
/*
 * An example kernel module (docs/KERNELS.md): two kernels none of hbgd's
 * built-ins covers.
 *
 *   relu_f32(in x, out y)                 y[i] = max(x[i], 0); may run in
 *                                         place (y the very range of x)
 *   rownorm_f32(inout X, u64 rows, u64 cols)
 *                                         each row of X (row-major) scaled
 *                                         to unit L2 norm; split by rows
 *
 * Build (the header needs no library):
 *   cc -O2 -fPIC -shared -ffp-contract=off $(pkg-config --cflags hbgclient) \
 *      -o hbg-nn.so kernels_nn.c -lm
 * Load: [kernels] modules = /usr/local/lib/hbg/kernels/hbg-nn.so in
 * hbgd.conf, then restart hbgd.
 */
#include <errno.h>
#include <math.h>
#include <stdint.h>

#include <hbg/kernel.h>

/* ------------------------------------------------------------ relu_f32 */

/* Element i is read, then written: correct in place. */
static int relu_run(struct hbg_kernel_ctx *ctx, uint8_t *heap, const struct hbg_kernel_args *a, uint32_t part,
                    uint32_t parts) {
        const float *x = hbg_kernel_f32(heap, &a->tensors[0]);
        float *y = hbg_kernel_f32(heap, &a->tensors[1]);
        uint64_t lo, hi;
        hbg_kernel_part_range(a->tensors[1].length / sizeof(float), part, parts, &lo, &hi);
        for (uint64_t i = lo; i < hi;) {
                uint64_t e = hi - i > HBG_KERNEL_CHECK_CHUNK ? i + HBG_KERNEL_CHECK_CHUNK : hi;
                for (; i < e; i++)
                        y[i] = x[i] > 0.0f ? x[i] : 0.0f; /* NaN and -0.0 become 0 */
                int r = hbg_kernel_check(ctx, HBG_KERNEL_CHECK_CHUNK);
                if (r < 0)
                        return r;
        }
        return 0;
}

/* One unit per element, whatever the split; a task that runs nothing
 * still costs one. */
static uint64_t relu_cost(const struct hbg_kernel_args *a, uint32_t parts) {
        (void)parts;
        return a->tensors[1].length / sizeof(float) + 1;
}

/* ------------------------------------------------------------ rownorm_f32 */

enum { RN_ZERO, RN_OVERFLOW, RN_FIT };
static const char *const rownorm_reasons[] = {
        [RN_ZERO] = "rows and cols must be at least 1",
        [RN_OVERFLOW] = "size of X (rows*cols*4) overflows",
        [RN_FIT] = "shape does not fit X",
};

/* After hbgd's own checks (X inside the heap, aligned, not empty). */
static int rownorm_check(const struct hbg_kernel_args *a, unsigned *reason) {
        uint64_t rows = a->scalars[0], cols = a->scalars[1], n, bytes;
        if (rows == 0 || cols == 0) {
                *reason = RN_ZERO;
                return -EINVAL;
        }
        if (__builtin_mul_overflow(rows, cols, &n) || __builtin_mul_overflow(n, sizeof(float), &bytes)) {
                *reason = RN_OVERFLOW;
                return -EOVERFLOW;
        }
        if (bytes > a->tensors[0].length) {
                *reason = RN_FIT;
                return -EINVAL;
        }
        return 0;
}

/* Two passes over each element (sum of squares, scale). */
static uint64_t rownorm_cost(const struct hbg_kernel_args *a, uint32_t parts) {
        uint64_t n, c;
        (void)parts;
        if (__builtin_mul_overflow(a->scalars[0], a->scalars[1], &n) || __builtin_mul_overflow(n, 2, &c))
                return UINT64_MAX;
        return c + 1;
}

/* Each row on its own: the sum of squares in double, in column order,
 * then x = (float)(x / sqrt(sum)) in double; a row of zeros stays. A part
 * takes whole rows, so any split gives the same bits. The check runs
 * between chunks of a row (a row may be the whole heap). */
static int rownorm_run(struct hbg_kernel_ctx *ctx, uint8_t *heap, const struct hbg_kernel_args *a, uint32_t part,
                       uint32_t parts) {
        float *X = hbg_kernel_f32(heap, &a->tensors[0]);
        uint64_t cols = a->scalars[1], lo, hi;
        int r;
        hbg_kernel_part_range(a->scalars[0], part, parts, &lo, &hi);
        for (uint64_t row = lo; row < hi; row++) {
                float *x = X + row * cols;
                double sum = 0.0;
                for (uint64_t c = 0, e; c < cols; c = e) {
                        e = cols - c > HBG_KERNEL_CHECK_CHUNK ? c + HBG_KERNEL_CHECK_CHUNK : cols;
                        for (uint64_t j = c; j < e; j++)
                                sum += (double)x[j] * (double)x[j];
                        if ((r = hbg_kernel_check(ctx, e - c)) < 0)
                                return r;
                }
                if (sum == 0.0)
                        continue;
                double norm = sqrt(sum);
                for (uint64_t c = 0, e; c < cols; c = e) {
                        e = cols - c > HBG_KERNEL_CHECK_CHUNK ? c + HBG_KERNEL_CHECK_CHUNK : cols;
                        for (uint64_t j = c; j < e; j++)
                                x[j] = (float)((double)x[j] / norm);
                        if ((r = hbg_kernel_check(ctx, e - c)) < 0)
                                return r;
                }
        }
        return 0;
}

/* ------------------------------------------------------------ the module */

HBG_KERNEL_MODULE_EXPORT int hbg_kernel_module_init(struct hbg_kernel_host *host) {
        static const struct hbg_kernel_def relu = {
                .size = sizeof(struct hbg_kernel_def),
                .name = "relu_f32",
                .summary = "y[i] = max(x[i], 0) (NaN becomes 0)",
                .n_tensors = 2,
                .tensors = { { "x", HBG_KERNEL_IN }, { "y", HBG_KERNEL_OUT } },
                .length = HBG_KERNEL_LENGTH_EQUAL,
                .length_rule = "every tensor exactly as long as the output",
                .in_place = true,
                .splittable = true,
                .cost = relu_cost,
                .run = relu_run,
        };
        static const struct hbg_kernel_def rownorm = {
                .size = sizeof(struct hbg_kernel_def),
                .name = "rownorm_f32",
                .summary = "each row of X, rows x cols, scaled to unit L2 norm, in place (split by rows)",
                .n_tensors = 1,
                .tensors = { { "X", HBG_KERNEL_INOUT } },
                .n_scalars = 2,
                .scalars = { { "rows", HBG_KERNEL_U64 }, { "cols", HBG_KERNEL_U64 } },
                .length = HBG_KERNEL_LENGTH_SHAPE,
                .length_rule = "X at least rows*cols elements",
                .splittable = true,
                .check = rownorm_check,
                .reasons = rownorm_reasons,
                .n_reasons = sizeof(rownorm_reasons) / sizeof(rownorm_reasons[0]),
                .cost = rownorm_cost,
                .run = rownorm_run,
        };
        int r = hbg_kernel_register(host, &relu);
        if (r == 0)
                r = hbg_kernel_register(host, &rownorm);
        return r;
}
