/* SPDX-License-Identifier: MIT */
/* The kernels' signatures (common/kernel_sig.h): the table. */
#include "common/kernel_sig.h"

#include <stdio.h>
#include <string.h>

#include "common/text.h"

#define IN HBG_DIR_IN
#define OUT HBG_DIR_OUT
#define INOUT HBG_DIR_INOUT
#define F32 HBG_SCALAR_F32
#define U64 HBG_SCALAR_U64
#define I64 HBG_SCALAR_I64

#define EQUAL_RULE "every tensor exactly as long as the output"

/* Indexed by id - 1. */
const struct hbg_kernel_sig kernel_sigs[HBG_KERNEL_COUNT - 1] = {
        [HBG_KERNEL_NOOP - 1] = {
                .id = HBG_KERNEL_NOOP, .name = "noop", .splittable = true,
                .summary = "does nothing (ordering, benchmarks)",
                .length_rule = "no tensors",
        },
        [HBG_KERNEL_SPIN_NS - 1] = {
                .id = HBG_KERNEL_SPIN_NS, .name = "spin_ns", .splittable = true,
                .summary = "busy-waits ns nanoseconds (at most 1 s) in every block",
                .n_scalars = 1, .scalars = { { "ns", U64 } },
                .length_rule = "no tensors",
        },
        [HBG_KERNEL_FILL_F32 - 1] = {
                .id = HBG_KERNEL_FILL_F32, .name = "fill_f32", .splittable = true,
                .summary = "out[i] = v",
                .n_tensors = 1, .tensors = { { "out", OUT } },
                .n_scalars = 1, .scalars = { { "v", F32 } },
                .length_rule = "any length",
        },
        [HBG_KERNEL_COPY_F32 - 1] = {
                .id = HBG_KERNEL_COPY_F32, .name = "copy_f32", .splittable = true,
                .summary = "out[i] = in[i]",
                .n_tensors = 2, .tensors = { { "in", IN }, { "out", OUT } },
                .length = HBG_LENGTH_EQUAL, .in_place = true, .length_rule = EQUAL_RULE,
        },
        [HBG_KERNEL_ADD_F32 - 1] = {
                .id = HBG_KERNEL_ADD_F32, .name = "add_f32", .splittable = true,
                .summary = "out[i] = a[i] + b[i]",
                .n_tensors = 3, .tensors = { { "a", IN }, { "b", IN }, { "out", OUT } },
                .length = HBG_LENGTH_EQUAL, .in_place = true, .length_rule = EQUAL_RULE,
        },
        [HBG_KERNEL_MUL_F32 - 1] = {
                .id = HBG_KERNEL_MUL_F32, .name = "mul_f32", .splittable = true,
                .summary = "out[i] = a[i] * b[i]",
                .n_tensors = 3, .tensors = { { "a", IN }, { "b", IN }, { "out", OUT } },
                .length = HBG_LENGTH_EQUAL, .in_place = true, .length_rule = EQUAL_RULE,
        },
        [HBG_KERNEL_AXPY_F32 - 1] = {
                .id = HBG_KERNEL_AXPY_F32, .name = "axpy_f32", .splittable = true,
                .summary = "y[i] = alpha * x[i] + y[i]",
                .n_tensors = 2, .tensors = { { "x", IN }, { "y", INOUT } },
                .n_scalars = 1, .scalars = { { "alpha", F32 } },
                .length = HBG_LENGTH_EQUAL, .in_place = true, .length_rule = EQUAL_RULE,
        },
        [HBG_KERNEL_SCALE_F32 - 1] = {
                .id = HBG_KERNEL_SCALE_F32, .name = "scale_f32", .splittable = true,
                .summary = "x[i] = alpha * x[i]",
                .n_tensors = 1, .tensors = { { "x", INOUT } },
                .n_scalars = 1, .scalars = { { "alpha", F32 } },
                .length_rule = "any length",
        },
        [HBG_KERNEL_REDUCE_SUM_F32 - 1] = {
                .id = HBG_KERNEL_REDUCE_SUM_F32, .name = "reduce_sum_f32", .splittable = false,
                .summary = "s[0] = the sum of x, in index order, in double",
                .n_tensors = 2, .tensors = { { "x", IN }, { "s", OUT } },
                .length_rule = "x any length; s at least one element, only s[0] is written",
        },
        [HBG_KERNEL_GEMM_F32 - 1] = {
                .id = HBG_KERNEL_GEMM_F32, .name = "gemm_f32", .splittable = true,
                .summary = "C += A * B, row-major, A m x k, B k x n, C m x n (split by rows of C)",
                .n_tensors = 3, .tensors = { { "A", IN }, { "B", IN }, { "C", INOUT } },
                .n_scalars = 3, .scalars = { { "m", U64 }, { "n", U64 }, { "k", U64 } },
                .length = HBG_LENGTH_SHAPE,
                .length_rule = "A at least m*k, B k*n, C m*n elements; m, n, k from 1 to 2^20",
        },
        [HBG_KERNEL_SOFTMAX_ROWS_F32 - 1] = {
                .id = HBG_KERNEL_SOFTMAX_ROWS_F32, .name = "softmax_rows_f32", .splittable = true,
                .summary = "softmax of each row of X, rows x cols, in place",
                .n_tensors = 1, .tensors = { { "X", INOUT } },
                .n_scalars = 2, .scalars = { { "rows", U64 }, { "cols", U64 } },
                .length = HBG_LENGTH_SHAPE,
                .length_rule = "X at least rows*cols elements",
        },
        [HBG_KERNEL_FAIL - 1] = {
                .id = HBG_KERNEL_FAIL, .name = "fail", .splittable = true,
                .summary = "fails with code, a negative errno (tests of error paths)",
                .n_scalars = 1, .scalars = { { "code", I64 } },
                .length_rule = "no tensors",
        },
        [HBG_KERNEL_TIMESTAMP_NS - 1] = {
                .id = HBG_KERNEL_TIMESTAMP_NS, .name = "timestamp_ns", .splittable = true,
                .summary = "t[part] = when the part started: CLOCK_MONOTONIC ns as an i64 (graph profiling)",
                .n_tensors = 1, .tensors = { { "t", OUT } },
                .length_rule = "a whole number of i64; parts beyond it write nothing",
        },
};

bool kernel_sig_name_ok(const char *s, bool capitals) {
        size_t n = 0;
        if (!s)
                return false;
        for (; s[n] && n <= 31; n++) {
                char c = s[n];
                if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' ||
                      (capitals && c >= 'A' && c <= 'Z')))
                        return false;
        }
        return n >= 1 && n <= 31;
}

bool kernel_sig_text_ok(const char *s, size_t max) {
        return text_is_plain(s, max);
}

const struct hbg_kernel_sig *kernel_sig_by_id(uint16_t id) {
        if (id == HBG_KERNEL_NONE || id >= HBG_KERNEL_COUNT)
                return NULL;
        return &kernel_sigs[id - 1];
}

const struct hbg_kernel_sig *kernel_sig_by_name(const char *name) {
        if (!name)
                return NULL;
        for (size_t i = 0; i < HBG_KERNEL_COUNT - 1; i++)
                if (strcmp(kernel_sigs[i].name, name) == 0)
                        return &kernel_sigs[i];
        return NULL;
}

size_t kernel_sig_count(void) {
        return HBG_KERNEL_COUNT - 1;
}

const struct hbg_kernel_sig *kernel_sig_at(size_t i) {
        return i < HBG_KERNEL_COUNT - 1 ? &kernel_sigs[i] : NULL;
}

/* FNV-1a's multiply, over 8 bytes at a time (the tail zero-filled, the
 * length after it): two tables share a digest only by chance, and a
 * client's first connect pays about 8,000 instructions for it, where a
 * byte a step took 20,000. */
static uint64_t digest_bytes(uint64_t h, const void *p, size_t n) {
        const uint8_t *b = p;
        size_t i = 0;
        for (; i + 8 <= n; i += 8) {
                uint64_t w;
                memcpy(&w, b + i, 8);
                h = (h ^ w) * 0x100000001b3ull;
        }
        uint64_t tail = 0;
        memcpy(&tail, b + i, n - i);
        h = (h ^ tail) * 0x100000001b3ull;
        return (h ^ n) * 0x100000001b3ull;
}

static uint64_t digest_str(uint64_t h, const char *s) {
        s = s ? s : "";
        return digest_bytes(h, s, strlen(s));
}

static uint64_t digest_u64(uint64_t h, uint64_t v) {
        return (h ^ v) * 0x100000001b3ull;
}

/* Every field below goes into the digest: a field added to the struct
 * must be added there too (then this size; the unit test builtin_digest
 * changes each field and wants another digest). */
#if UINTPTR_MAX == UINT64_MAX
_Static_assert(sizeof(struct hbg_kernel_sig) == 320, "a field of hbg_kernel_sig not in kernel_sig_digest()?");
#endif

uint64_t kernel_sig_digest(uint64_t h, const struct hbg_kernel_sig *k) {
        h = digest_u64(h, k->id);
        h = digest_str(h, k->name);
        h = digest_str(h, k->summary);
        h = digest_str(h, k->length_rule);
        h = digest_str(h, k->module);
        h = digest_u64(h, (uint64_t)k->length | (uint64_t)k->splittable << 8 | (uint64_t)k->in_place << 9);
        h = digest_u64(h, (uint64_t)k->n_tensors | (uint64_t)k->n_scalars << 8);
        for (unsigned i = 0; i < k->n_tensors && i < HBG_MAX_TENSOR_ARGS; i++)
                h = digest_u64(digest_str(h, k->tensors[i].name), k->tensors[i].dir);
        for (unsigned i = 0; i < k->n_scalars && i < HBG_MAX_SCALAR_ARGS; i++)
                h = digest_u64(digest_str(h, k->scalars[i].name), k->scalars[i].kind);
        return h;
}

uint64_t kernel_sig_digest_end(uint64_t h, size_t rows) {
        h = digest_u64(h, rows);
        /* The high bits' changes into the low ones too (a final mix). */
        h ^= h >> 32;
        h *= 0xd6e8feb86659fd93ull;
        h ^= h >> 32;
        return h ? h : 1; /* 0: no digest (a request from an older client) */
}

const char *kernel_sig_dir_name(uint8_t dir) {
        return dir == IN ? "in" : dir == OUT ? "out" : dir == INOUT ? "inout" : "?";
}

const char *kernel_sig_scalar_kind_name(uint8_t kind) {
        return kind == F32 ? "f32" : kind == U64 ? "u64" : kind == I64 ? "i64" : "?";
}

const char *kernel_sig_usage(const struct hbg_kernel_sig *k, char *buf, size_t len) {
        size_t at = 0;
        int n = snprintf(buf, len, "%s(", k->name);
        at = n > 0 ? (size_t)n : 0;
        for (unsigned i = 0; i < k->n_tensors + k->n_scalars && at < len; i++) {
                bool t = i < k->n_tensors;
                n = snprintf(buf + at, len - at, "%s%s %s", i ? ", " : "",
                             t ? kernel_sig_dir_name(k->tensors[i].dir)
                               : kernel_sig_scalar_kind_name(k->scalars[i - k->n_tensors].kind),
                             t ? k->tensors[i].name : k->scalars[i - k->n_tensors].name);
                at += n > 0 ? (size_t)n : 0;
        }
        if (at < len)
                snprintf(buf + at, len - at, ")");
        return buf;
}

static bool is_output(uint8_t dir) {
        return dir == OUT || dir == INOUT;
}

enum hbg_kernel_tensor_problem kernel_sig_check_tensors(const struct hbg_kernel_sig *k,
                                                        const struct hbg_kernel_tensor *t,
                                                        unsigned *ret_i, unsigned *ret_j) {
        unsigned n = k->n_tensors;
        for (unsigned i = 0; i < n; i++) {
                if (!is_output(k->tensors[i].dir))
                        continue;
                for (unsigned j = 0; j < n; j++) {
                        if (j == i)
                                continue;
                        /* Both inside the heap: no overflow. */
                        bool overlap = t[i].offset < t[j].offset + t[j].length &&
                                       t[j].offset < t[i].offset + t[i].length;
                        bool same = t[i].offset == t[j].offset && t[i].length == t[j].length;
                        /* In place: an output may be exactly an input; two
                         * outputs never share memory. */
                        if (overlap && !(same && k->in_place && !is_output(k->tensors[j].dir))) {
                                *ret_i = i;
                                *ret_j = j;
                                return HBG_TENSORS_OVERLAP;
                        }
                }
        }
        if (k->length == HBG_LENGTH_EQUAL && n > 0) {
                for (unsigned i = 0; i + 1 < n; i++)
                        if (t[i].length != t[n - 1].length) {
                                *ret_i = i;
                                *ret_j = n - 1;
                                return HBG_TENSORS_LENGTH;
                        }
        }
        return HBG_TENSORS_OK;
}
