/* SPDX-License-Identifier: MIT */
/*
 * The built-in kernels (daemon/engine/kernels.c, common/kernel_sig.c):
 * what they compute. Their run contract is test_kernel_budget, their
 * checks of a task's arguments test_kernel_validation.
 *
 *   lookup      ids and names round-trip, unknown ids are NULL, every
 *               signature is the one the protocol fixes;
 *   results     every kernel against a reference computed here by the
 *               plainest possible loop, on small and odd-sized inputs at
 *               4-byte (not 64-byte) aligned offsets; the whole heap is
 *               compared, so a write outside the outputs fails too;
 *   split       the same tasks run as 2, 3, 7 and 16 parts in shuffled
 *               order are bit-identical to 1 part (a kernel that does not
 *               split runs as one part only, and refuses any other).
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

static const uint32_t split_parts[] = { 2, 3, 7, 16 };

/* ------------------------------------------------------------ helpers */

static uint8_t *heap_random(uint64_t seed) {
        uint8_t *h = heap_alloc();

        for (size_t i = 0; i < HEAP_SIZE / sizeof(float); i++) {
                float v = rnd_f32(&seed);
                memcpy(h + i * sizeof(float), &v, sizeof(v));
        }
        return h;
}

static uint8_t *heap_dup(const uint8_t *src) {
        uint8_t *h = heap_alloc();

        memcpy(h, src, HEAP_SIZE);
        return h;
}

static float *F(uint8_t *heap, uint64_t off) {
        return (float *)(void *)(heap + off);
}

/* One part, with no time budget and no stop flag. */
static int run_part(const struct kernel_info *k, uint8_t *heap, const struct hbg_kernel_args *a, uint32_t part,
                    uint32_t parts) {
        struct kernel_run_ctx ctx;

        kernel_run_ctx_init(&ctx, kernel_budget_ns(0), NULL);
        return k->run(&ctx.k, heap, a, part, parts);
}

/* Run every part 0..parts-1 once, in an order shuffled by `seed`, each
 * returning `expect`. */
static void run_parts(const struct kernel_info *k, uint8_t *heap, const struct hbg_kernel_args *a,
                      uint32_t parts, uint64_t seed, int expect) {
        uint32_t order[64];

        ck_assert_uint_le(parts, 64);
        for (uint32_t i = 0; i < parts; i++)
                order[i] = i;
        for (uint32_t i = parts; i > 1; i--) {
                uint32_t j = (uint32_t)(splitmix(&seed) % i);
                uint32_t t = order[i - 1];
                order[i - 1] = order[j];
                order[j] = t;
        }
        for (uint32_t i = 0; i < parts; i++) {
                int r = run_part(k, heap, a, order[i], parts);
                HOT_ASSERT_MSG(r == expect, "%s: part %u of %u returned %d, expected %d", k->sig->name,
                               order[i], parts, r, expect);
        }
}

/* First differing float index of two heaps, or -1. */
static long first_diff(const uint8_t *x, const uint8_t *y) {
        for (size_t i = 0; i < HEAP_SIZE; i += sizeof(float))
                if (memcmp(x + i, y + i, sizeof(float)) != 0)
                        return (long)(i / sizeof(float));
        return -1;
}

typedef void (*ref_fn)(uint8_t *heap, const struct hbg_kernel_args *a);

/*
 * One task: validates; 1 part equals the reference `ref` applied to the same
 * initial heap, bit for bit over the whole heap; 2, 3, 7, 16 parts in
 * shuffled order equal 1 part bit for bit (a splittable kernel: hbgd runs
 * the others as one part). Returns the 1-part heap (caller frees).
 */
static uint8_t *check_task(uint16_t id, const struct hbg_kernel_args *a, ref_fn ref, uint64_t seed,
                           const char *label) {
        const struct kernel_info *k = K(id);
        const char *why = NULL;
        uint8_t *init, *want, *one;
        long d;
        int r;

        r = kernel_validate(k, a, HEAP_SIZE, &why);
        ck_assert_msg(r == 0, "%s (%s): valid task rejected: %d %s", k->sig->name, label, r,
                      why ? why : "");

        init = heap_random(seed);
        want = heap_dup(init);
        ref(want, a);
        one = heap_dup(init);
        run_parts(k, one, a, 1, seed, 0);

        d = first_diff(one, want);
        ck_assert_msg(d < 0, "%s (%s): float %ld differs from the reference", k->sig->name, label, d);

        for (size_t p = 0; k->sig->splittable && p < sizeof(split_parts) / sizeof(split_parts[0]); p++) {
                uint8_t *h = heap_dup(init);

                run_parts(k, h, a, split_parts[p], seed + p, 0);
                d = first_diff(h, one);
                ck_assert_msg(d < 0, "%s (%s): %u parts differ from 1 part at float %ld", k->sig->name,
                              label, split_parts[p], d);
                free(h);
        }
        free(init);
        free(want);
        return one;
}

/* Tensors of `elems[i]` floats placed one after another from byte 4 with
 * 12-byte gaps (4-aligned, never 64-aligned); with at_end, the last one
 * instead ends exactly at the end of the heap. */
static void place(struct hbg_kernel_args *a, const uint64_t *elems, const uint32_t *dirs, uint8_t n,
                  bool at_end) {
        uint64_t off = 4;

        a->n_tensors = n;
        for (uint8_t i = 0; i < n; i++) {
                a->tensors[i] = T(off, elems[i] * 4, dirs[i]);
                off += elems[i] * 4 + 12;
        }
        ck_assert_uint_le(off, HEAP_SIZE);
        if (at_end)
                a->tensors[n - 1].offset = HEAP_SIZE - a->tensors[n - 1].length;
}

/* ------------------------------------------------------------ references */

static void ref_fill(uint8_t *h, const struct hbg_kernel_args *a) {
        uint32_t b = (uint32_t)a->scalars[0];

        for (uint64_t i = 0; i < a->tensors[0].length; i += 4)
                memcpy(h + a->tensors[0].offset + i, &b, 4);
}

static void ref_copy(uint8_t *h, const struct hbg_kernel_args *a) {
        for (uint64_t i = 0; i < a->tensors[1].length; i += 4)
                put_f32(h, a->tensors[1].offset + i, get_f32(h, a->tensors[0].offset + i));
}

static void ref_add(uint8_t *h, const struct hbg_kernel_args *a) {
        for (uint64_t i = 0; i < a->tensors[2].length; i += 4) {
                float x = get_f32(h, a->tensors[0].offset + i);
                float y = get_f32(h, a->tensors[1].offset + i);
                put_f32(h, a->tensors[2].offset + i, x + y);
        }
}

static void ref_mul(uint8_t *h, const struct hbg_kernel_args *a) {
        for (uint64_t i = 0; i < a->tensors[2].length; i += 4) {
                float x = get_f32(h, a->tensors[0].offset + i);
                float y = get_f32(h, a->tensors[1].offset + i);
                put_f32(h, a->tensors[2].offset + i, x * y);
        }
}

static void ref_axpy(uint8_t *h, const struct hbg_kernel_args *a) {
        float alpha = bits_f32(a->scalars[0]);

        for (uint64_t i = 0; i < a->tensors[1].length; i += 4) {
                float x = get_f32(h, a->tensors[0].offset + i);
                float y = get_f32(h, a->tensors[1].offset + i);
                put_f32(h, a->tensors[1].offset + i, alpha * x + y);
        }
}

static void ref_scale(uint8_t *h, const struct hbg_kernel_args *a) {
        float alpha = bits_f32(a->scalars[0]);

        for (uint64_t i = 0; i < a->tensors[0].length; i += 4)
                put_f32(h, a->tensors[0].offset + i, alpha * get_f32(h, a->tensors[0].offset + i));
}

static void ref_reduce(uint8_t *h, const struct hbg_kernel_args *a) {
        double s = 0;

        for (uint64_t i = 0; i < a->tensors[0].length; i += 4)
                s += get_f32(h, a->tensors[0].offset + i);
        put_f32(h, a->tensors[1].offset, (float)s);
}

/* Textbook i-j-p order, one float accumulator per element. */
/* The formula kernels.c documents: subtract the row max, expf in float, sum
 * in double, divide in double. */
static void ref_softmax(uint8_t *h, const struct hbg_kernel_args *a) {
        uint64_t rows = a->scalars[0], cols = a->scalars[1], X = a->tensors[0].offset;

        for (uint64_t r = 0; r < rows; r++) {
                uint64_t row = X + r * cols * 4;
                float mx = -INFINITY;
                double sum = 0;

                for (uint64_t j = 0; j < cols; j++)
                        mx = fmaxf(mx, get_f32(h, row + j * 4));
                for (uint64_t j = 0; j < cols; j++)
                        sum += (double)expf(get_f32(h, row + j * 4) - mx);
                for (uint64_t j = 0; j < cols; j++)
                        put_f32(h, row + j * 4,
                                (float)((double)expf(get_f32(h, row + j * 4) - mx) / sum));
        }
}

/* ------------------------------------------------------------ docs */

/* The kernel lists of docs/GRAPH_FILES.md and libhbgclient(3) are the
 * signature table, rendered; they must match it line for line. On a
 * mismatch the expected text is printed, to paste between the markers. */
static char *read_source_file(const char *rel) {
        char path[512];
        snprintf(path, sizeof(path), "%s/%s", HBG_SRCDIR, rel);
        FILE *f = fopen(path, "r");
        ck_assert_msg(f, "cannot open %s", path);
        static char buf[1 << 18];
        size_t n = fread(buf, 1, sizeof(buf) - 1, f);
        fclose(f);
        buf[n] = 0;
        return buf;
}

static void list_args(const struct hbg_kernel_sig *k, bool scalars, char *out, size_t len) {
        size_t at = 0;
        unsigned n = scalars ? k->n_scalars : k->n_tensors;
        out[0] = 0;
        for (unsigned i = 0; i < n && at < len; i++) {
                int w = snprintf(out + at, len - at, "%s%s %s", i ? ", " : "",
                                 scalars ? kernel_sig_scalar_kind_name(k->scalars[i].kind)
                                         : kernel_sig_dir_name(k->tensors[i].dir),
                                 scalars ? k->scalars[i].name : k->tensors[i].name);
                at += w > 0 ? (size_t)w : 0;
        }
        if (n == 0)
                snprintf(out, len, "\u2014"); /* an em dash: "none" */
}

static void render(bool man, char *out, size_t len) {
        size_t at = 0;
        for (size_t i = 0; i < kernel_sig_count(); i++) {
                const struct hbg_kernel_sig *k = kernel_sig_at(i);
                char a[200], sc[200], usage[200];
                int w;
                list_args(k, false, a, sizeof(a));
                list_args(k, true, sc, sizeof(sc));
                if (man)
                        w = snprintf(out + at, len - at, ".TP\n.B %s\n%s.\nLengths: %s.%s%s\n",
                                     kernel_sig_usage(k, usage, sizeof(usage)), k->summary,
                                     k->length_rule,
                                     k->in_place ? " May run in place: an output may be the very range of an input."
                                                 : "",
                                     k->splittable ? "" : " Does not split: runs once, whatever hbg_task.blocks.");
                else
                        w = snprintf(out + at, len - at, "| `%s` | %s | %s | %s | %s | %s | %s |\n", k->name, a, sc,
                                     k->summary, k->length_rule, k->in_place ? "yes" : "no",
                                     k->splittable ? "yes" : "no: runs once");
                at += w > 0 ? (size_t)w : 0;
        }
}

static void check_block(const char *rel, const char *begin, const char *end, bool man) {
        char want[8192];
        render(man, want, sizeof(want));
        const char *doc = read_source_file(rel);
        const char *b = strstr(doc, begin);
        ck_assert_msg(b, "%s: marker '%s' missing", rel, begin);
        b = strchr(b, '\n');
        ck_assert_ptr_nonnull(b);
        b++;
        if (!man) /* the table's two header lines */
                for (int i = 0; i < 2; i++)
                        b = strchr(b, '\n') + 1;
        const char *e = strstr(b, end);
        ck_assert_msg(e, "%s: marker '%s' missing", rel, end);
        bool same = (size_t)(e - b) == strlen(want) && memcmp(b, want, strlen(want)) == 0;
        if (!same)
                fprintf(stderr, "%s: the kernel list differs from common/kernel_sig.c; it should read:\n%s", rel,
                        want);
        ck_assert_msg(same, "%s: kernel list out of date (expected text printed above)", rel);
}

START_TEST(test_docs_list_every_kernel) {
        check_block("docs/GRAPH_FILES.md", "<!-- kernels: generated", "<!-- end of kernels -->", false);
        check_block("docs/man/libhbgclient.3", ".\\\" kernels: generated", ".\\\" end of kernels", true);
}
END_TEST

/* ------------------------------------------------------------ lookup */

struct sig {
        const char *name;
        uint8_t n_tensors;
        uint8_t dirs[3];
        uint8_t n_scalars;
        uint8_t kinds[3];
        bool splittable;
};

/* The protocol's signatures, indexed by id. */
static const struct sig sigs[HBG_KERNEL_COUNT] = {
        [HBG_KERNEL_NOOP] = { "noop", 0, { 0 }, 0, { 0 }, true },
        [HBG_KERNEL_SPIN_NS] = { "spin_ns", 0, { 0 }, 1, { HBG_SCALAR_U64 }, true },
        [HBG_KERNEL_FILL_F32] = { "fill_f32", 1, { OUT }, 1, { HBG_SCALAR_F32 }, true },
        [HBG_KERNEL_COPY_F32] = { "copy_f32", 2, { IN, OUT }, 0, { 0 }, true },
        [HBG_KERNEL_ADD_F32] = { "add_f32", 3, { IN, IN, OUT }, 0, { 0 }, true },
        [HBG_KERNEL_MUL_F32] = { "mul_f32", 3, { IN, IN, OUT }, 0, { 0 }, true },
        [HBG_KERNEL_AXPY_F32] = { "axpy_f32", 2, { IN, INOUT }, 1, { HBG_SCALAR_F32 }, true },
        [HBG_KERNEL_SCALE_F32] = { "scale_f32", 1, { INOUT }, 1, { HBG_SCALAR_F32 }, true },
        [HBG_KERNEL_REDUCE_SUM_F32] = { "reduce_sum_f32", 2, { IN, OUT }, 0, { 0 }, false },
        [HBG_KERNEL_GEMM_F32] = { "gemm_f32", 3, { IN, IN, INOUT }, 3,
                                  { HBG_SCALAR_U64, HBG_SCALAR_U64, HBG_SCALAR_U64 }, true },
        [HBG_KERNEL_SOFTMAX_ROWS_F32] = { "softmax_rows_f32", 1, { INOUT }, 2,
                                          { HBG_SCALAR_U64, HBG_SCALAR_U64 }, true },
        [HBG_KERNEL_FAIL] = { "fail", 0, { 0 }, 1, { HBG_SCALAR_I64 }, true },
        [HBG_KERNEL_TIMESTAMP_NS] = { "timestamp_ns", 1, { OUT }, 0, { 0 }, true },
};

START_TEST(test_ids_and_names) {
        ck_assert_uint_eq(HBG_KERNEL_COUNT, 14);
        ck_assert_uint_eq(kernel_count(), HBG_KERNEL_COUNT - 1);
        for (uint16_t id = 1; id < HBG_KERNEL_COUNT; id++) {
                const struct kernel_info *k = kernel_lookup(id);

                ck_assert_ptr_nonnull(k);
                ck_assert_uint_eq(k->sig->id, id);
                ck_assert_str_eq(k->sig->name, sigs[id].name);
                ck_assert_ptr_eq(kernel_lookup_name(sigs[id].name), k);
                ck_assert_ptr_eq(kernel_at(id - 1u), k);
        }
        ck_assert_ptr_null(kernel_at(kernel_count()));
        ck_assert_ptr_null(kernel_at(SIZE_MAX));
}
END_TEST

START_TEST(test_unknown) {
        static const uint16_t bad_ids[] = { 0, 14, 15, 255, 256, 4096, 65535 };
        static const char *const bad_names[] = { "", "nop", "ADD_F32", "add_f32 ", "add_f3",
                                                 "add_f32\n", "gemm", "unknown" };

        for (size_t i = 0; i < sizeof(bad_ids) / sizeof(bad_ids[0]); i++)
                ck_assert_msg(kernel_lookup(bad_ids[i]) == NULL, "id %u found", bad_ids[i]);
        ck_assert_ptr_null(kernel_lookup(HBG_KERNEL_NONE));
        ck_assert_ptr_null(kernel_lookup(HBG_KERNEL_COUNT));
        for (size_t i = 0; i < sizeof(bad_names) / sizeof(bad_names[0]); i++)
                ck_assert_msg(kernel_lookup_name(bad_names[i]) == NULL, "name '%s' found",
                              bad_names[i]);
        ck_assert_ptr_null(kernel_lookup_name(NULL));
}
END_TEST

START_TEST(test_signatures) {
        for (size_t i = 0; i < kernel_count(); i++) {
                const struct kernel_info *k = kernel_at(i);
                const struct sig *s = &sigs[k->sig->id];

                ck_assert_ptr_nonnull(k->check);
                ck_assert_ptr_nonnull(k->run);
                ck_assert_msg(k->sig->n_tensors == s->n_tensors, "%s: n_tensors", k->sig->name);
                ck_assert_msg(k->sig->n_scalars == s->n_scalars, "%s: n_scalars", k->sig->name);
                ck_assert_msg(k->sig->splittable == s->splittable, "%s: splittable", k->sig->name);
                for (unsigned t = 0; t < k->sig->n_tensors; t++) {
                        ck_assert_msg(k->sig->tensors[t].dir == s->dirs[t], "%s: dir %u", k->sig->name, t);
                        ck_assert_msg(k->sig->tensors[t].name && k->sig->tensors[t].name[0], "%s: tensor %u name",
                                      k->sig->name, t);
                }
                for (unsigned t = 0; t < k->sig->n_scalars; t++) {
                        ck_assert_msg(k->sig->scalars[t].kind == s->kinds[t], "%s: kind %u", k->sig->name, t);
                        ck_assert_msg(k->sig->scalars[t].name && k->sig->scalars[t].name[0], "%s: scalar %u name",
                                      k->sig->name, t);
                }
        }
}
END_TEST

/* ------------------------------------------------------------ results */

START_TEST(test_noop_spin_fail_run) {
        uint8_t *canary = heap_alloc(), *h = heap_alloc();
        struct hbg_kernel_args a = { 0 };
        struct timespec t0, t1;
        const uint64_t ns = 2000000; /* 2 ms */

        memset(canary, CANARY, HEAP_SIZE);
        memcpy(h, canary, HEAP_SIZE);

        run_parts(K(HBG_KERNEL_NOOP), h, &a, 1, 1, 0);
        run_parts(K(HBG_KERNEL_NOOP), h, &a, 16, 2, 0);

        a.n_scalars = 1;
        a.scalars[0] = ns;
        ck_assert_int_eq(kernel_validate(K(HBG_KERNEL_SPIN_NS), &a, HEAP_SIZE, NULL), 0);
        /* Every part spins the full time: each part alone takes >= ns. */
        for (uint32_t p = 0; p < 3; p++) {
                uint64_t dt;

                clock_gettime(CLOCK_MONOTONIC, &t0);
                ck_assert_int_eq(run_part(K(HBG_KERNEL_SPIN_NS), h, &a, p, 3), 0);
                clock_gettime(CLOCK_MONOTONIC, &t1);
                dt = (uint64_t)(t1.tv_sec - t0.tv_sec) * 1000000000u + (uint64_t)t1.tv_nsec -
                     (uint64_t)t0.tv_nsec;
                ck_assert_msg(dt >= ns, "spin_ns part %u took %llu ns < %llu", p,
                              (unsigned long long)dt, (unsigned long long)ns);
        }
        a.scalars[0] = 0;
        run_parts(K(HBG_KERNEL_SPIN_NS), h, &a, 7, 3, 0);

        static const int64_t codes[] = { -1, -EIO, -ENOMEM, -4095 };
        for (size_t i = 0; i < sizeof(codes) / sizeof(codes[0]); i++) {
                a.scalars[0] = (uint64_t)codes[i];
                ck_assert_int_eq(kernel_validate(K(HBG_KERNEL_FAIL), &a, HEAP_SIZE, NULL), 0);
                run_parts(K(HBG_KERNEL_FAIL), h, &a, 1, 4, (int)codes[i]);
                run_parts(K(HBG_KERNEL_FAIL), h, &a, 7, 5, (int)codes[i]);
        }

        ck_assert_msg(memcmp(h, canary, HEAP_SIZE) == 0, "noop/spin_ns/fail touched the heap");
        free(h);
        free(canary);
}
END_TEST

static const uint64_t odd_sizes[] = { 1, 2, 5, 13, 37, 1001 };
#define N_ODD (sizeof(odd_sizes) / sizeof(odd_sizes[0]))

/* timestamp_ns: part p stamps t[p] with CLOCK_MONOTONIC when it runs
 * (parts in order: non-decreasing, within the calls' own clock reads);
 * parts beyond t write nothing; t must hold whole i64 values. */
START_TEST(test_timestamp) {
        const struct kernel_info *k = K(HBG_KERNEL_TIMESTAMP_NS);
        uint8_t *h = heap_alloc(), *before = heap_alloc();
        struct hbg_kernel_args a = { .n_tensors = 1 };
        struct timespec ts;

        a.tensors[0] = T(64, 4 * sizeof(int64_t), OUT);
        ck_assert_int_eq(kernel_validate(k, &a, HEAP_SIZE, NULL), 0);
        memcpy(before, h, HEAP_SIZE);
        clock_gettime(CLOCK_MONOTONIC, &ts);
        int64_t t0 = (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
        for (uint32_t p = 0; p < 6; p++)
                ck_assert_int_eq(run_part(k, h, &a, p, 6), 0);
        clock_gettime(CLOCK_MONOTONIC, &ts);
        int64_t t1 = (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
        int64_t prev = t0;
        for (unsigned i = 0; i < 4; i++) {
                int64_t v;
                memcpy(&v, h + 64 + i * sizeof(v), sizeof(v));
                ck_assert_msg(v >= prev && v <= t1, "t[%u] = %lld outside [%lld, %lld]", i, (long long)v,
                              (long long)prev, (long long)t1);
                prev = v;
        }
        /* Parts 4 and 5 had no element: nothing else changed. */
        memcpy(h + 64, before + 64, 4 * sizeof(int64_t));
        ck_assert(memcmp(h, before, HEAP_SIZE) == 0);
        a.tensors[0] = T(64, 12, OUT);
        ck_assert_int_eq(kernel_validate(k, &a, HEAP_SIZE, NULL), -EINVAL);
        free(h);
        free(before);
}
END_TEST

START_TEST(test_fill) {
        static const float vals[] = { 1.5f, -0.0f, 3.0e38f, -7.25f };
        uint64_t seed = 100;

        for (size_t v = 0; v < 5; v++) {
                for (size_t i = 0; i < N_ODD; i++) {
                        struct hbg_kernel_args a = { .n_scalars = 1 };
                        uint64_t elems[] = { odd_sizes[i] };
                        uint32_t dirs[] = { OUT };

                        place(&a, elems, dirs, 1, i % 2 == 1);
                        /* v == 4: a quiet NaN with a payload must be stored bit for bit. */
                        a.scalars[0] = v < 4 ? f32_bits(vals[v]) : UINT64_C(0x7fc01234);
                        free(check_task(HBG_KERNEL_FILL_F32, &a, ref_fill, seed++, "fill"));
                }
        }
}
END_TEST

START_TEST(test_copy) {
        uint64_t seed = 200;

        for (size_t i = 0; i < N_ODD; i++) {
                for (uint64_t at_end = 0; at_end < 2; at_end++) {
                        struct hbg_kernel_args a = { 0 };
                        uint64_t elems[] = { odd_sizes[i], odd_sizes[i] };
                        uint32_t dirs[] = { IN, OUT };

                        place(&a, elems, dirs, 2, at_end == 1);
                        free(check_task(HBG_KERNEL_COPY_F32, &a, ref_copy, seed++, "copy"));
                        /* In place: out is the very range of in. */
                        a.tensors[1].offset = a.tensors[0].offset;
                        free(check_task(HBG_KERNEL_COPY_F32, &a, ref_copy, seed++, "copy x to x"));
                }
        }
}
END_TEST

START_TEST(test_add_mul) {
        uint64_t seed = 300;

        for (size_t i = 0; i < N_ODD; i++) {
                for (uint64_t at_end = 0; at_end < 2; at_end++) {
                        struct hbg_kernel_args a = { 0 };
                        uint64_t n = odd_sizes[i];
                        uint64_t elems[] = { n, n, n };
                        uint32_t dirs[] = { IN, IN, OUT };

                        place(&a, elems, dirs, 3, at_end == 1);
                        free(check_task(HBG_KERNEL_ADD_F32, &a, ref_add, seed++, "add"));
                        free(check_task(HBG_KERNEL_MUL_F32, &a, ref_mul, seed++, "mul"));
                        /* In place, numpy's out= style: out is a, out is b,
                         * everything is one range. */
                        struct hbg_kernel_args x = a;
                        x.tensors[2].offset = x.tensors[0].offset;
                        free(check_task(HBG_KERNEL_ADD_F32, &x, ref_add, seed++, "add(x, y, x)"));
                        free(check_task(HBG_KERNEL_MUL_F32, &x, ref_mul, seed++, "mul(x, y, x)"));
                        x = a;
                        x.tensors[2].offset = x.tensors[1].offset;
                        free(check_task(HBG_KERNEL_ADD_F32, &x, ref_add, seed++, "add(x, y, y)"));
                        free(check_task(HBG_KERNEL_MUL_F32, &x, ref_mul, seed++, "mul(x, y, y)"));
                        x = a;
                        x.tensors[1].offset = x.tensors[2].offset = x.tensors[0].offset;
                        free(check_task(HBG_KERNEL_ADD_F32, &x, ref_add, seed++, "add(x, x, x)"));
                        free(check_task(HBG_KERNEL_MUL_F32, &x, ref_mul, seed++, "mul(x, x, x)"));
                }
                /* Inputs may overlap each other: a == b. */
                struct hbg_kernel_args a = { 0 };
                uint64_t elems[] = { odd_sizes[i], 1, odd_sizes[i] };
                uint32_t dirs[] = { IN, IN, OUT };

                place(&a, elems, dirs, 3, false);
                a.tensors[1] = a.tensors[0];
                free(check_task(HBG_KERNEL_ADD_F32, &a, ref_add, seed++, "add a==b"));
                free(check_task(HBG_KERNEL_MUL_F32, &a, ref_mul, seed++, "mul a==b"));
        }
}
END_TEST

START_TEST(test_axpy_scale) {
        static const float alphas[] = { 0.75f, -3.25f, 0.0f, 1.0e-3f };
        uint64_t seed = 400;

        for (size_t v = 0; v < sizeof(alphas) / sizeof(alphas[0]); v++) {
                for (size_t i = 0; i < N_ODD; i++) {
                        struct hbg_kernel_args a = { .n_scalars = 1 };
                        uint64_t elems[] = { odd_sizes[i], odd_sizes[i] };
                        uint32_t dirs[] = { IN, INOUT };

                        a.scalars[0] = f32_bits(alphas[v]);
                        place(&a, elems, dirs, 2, v % 2 == 1);
                        free(check_task(HBG_KERNEL_AXPY_F32, &a, ref_axpy, seed++, "axpy"));
                        /* In place: y is x. */
                        struct hbg_kernel_args x = a;
                        x.tensors[1].offset = x.tensors[0].offset;
                        free(check_task(HBG_KERNEL_AXPY_F32, &x, ref_axpy, seed++, "axpy(x, x)"));

                        uint32_t sdirs[] = { INOUT };
                        place(&a, elems + 1, sdirs, 1, v % 2 == 0);
                        free(check_task(HBG_KERNEL_SCALE_F32, &a, ref_scale, seed++, "scale"));
                }
        }
}
END_TEST

START_TEST(test_reduce_sum) {
        uint64_t seed = 500;

        for (size_t i = 0; i < N_ODD; i++) {
                for (uint64_t slen = 1; slen <= 3; slen += 2) {
                        struct hbg_kernel_args a = { 0 };
                        uint64_t elems[] = { odd_sizes[i], slen };
                        uint32_t dirs[] = { IN, OUT };

                        place(&a, elems, dirs, 2, slen == 3);
                        free(check_task(HBG_KERNEL_REDUCE_SUM_F32, &a, ref_reduce, seed++,
                                        "reduce_sum"));
                }
        }
}
END_TEST

/* 1e8 followed by 1000 ones: a float accumulator never moves off 1e8 (the
 * spacing of floats there is 8), a double one reaches 100001000, which is
 * exactly representable as a float. */
START_TEST(test_reduce_sum_double) {
        const struct kernel_info *k = K(HBG_KERNEL_REDUCE_SUM_F32);
        struct hbg_kernel_args a = { .n_tensors = 2 };
        uint8_t *h = heap_alloc();
        float fsum = 0.0f;
        const uint64_t n = 1001;

        memset(h, 0, HEAP_SIZE);
        a.tensors[0] = T(64, n * 4, IN);
        a.tensors[1] = T(64 + n * 4, 4, OUT);
        ck_assert_int_eq(kernel_validate(k, &a, HEAP_SIZE, NULL), 0);
        put_f32(h, 64, 1.0e8f);
        for (uint64_t i = 1; i < n; i++)
                put_f32(h, 64 + i * 4, 1.0f);
        for (uint64_t i = 0; i < n; i++)
                fsum += get_f32(h, 64 + i * 4);
        ck_assert(fsum == 1.0e8f); /* the case discriminates */

        put_f32(h, 64 + n * 4, -1.0f);
        run_parts(k, h, &a, 1, 0, 0);
        ck_assert_msg(get_f32(h, 64 + n * 4) == 100001000.0f, "sum %.1f", (double)get_f32(h, 64 + n * 4));
        /* hbgd runs it as one part (validate.c): any other part is a
         * dispatch bug, refused without a write. */
        put_f32(h, 64 + n * 4, -1.0f);
        for (uint32_t p = 0; p < 7; p++)
                ck_assert_int_eq(run_part(k, h, &a, p, 7), -EINVAL);
        ck_assert(get_f32(h, 64 + n * 4) == -1.0f);
        free(h);
}
END_TEST

START_TEST(test_gemm) {
        static const uint64_t shapes[][3] = {
                /* m, n, k */
                { 1, 1, 1 }, { 3, 5, 7 }, { 17, 4, 9 }, { 2, 3, 1 }, { 33, 7, 5 }, { 5, 1, 13 },
                { 16, 16, 16 }, { 40, 3, 2 },
        };
        uint64_t seed = 600;

        for (size_t s = 0; s < sizeof(shapes) / sizeof(shapes[0]); s++) {
                for (uint64_t extra = 0; extra < 2; extra++) {
                        uint64_t m = shapes[s][0], n = shapes[s][1], k = shapes[s][2];
                        struct hbg_kernel_args a = { .n_scalars = 3, .scalars = { m, n, k } };
                        uint64_t elems[] = { m * k + extra, k * n + 2 * extra, m * n + 3 * extra };
                        uint32_t dirs[] = { IN, IN, INOUT };
                        char label[64];

                        snprintf(label, sizeof(label), "gemm %llux%llux%llu",
                                 (unsigned long long)m, (unsigned long long)n,
                                 (unsigned long long)k);
                        place(&a, elems, dirs, 3, extra == 1);
                        free(check_task(HBG_KERNEL_GEMM_F32, &a, ref_gemm, seed++, label));
                }
        }
}
END_TEST

/* A small worked example, so the reference itself is checked too:
 * C = [1 2; 3 4] + [1 2 3; 4 5 6] * [1 0; 0 1; 1 1] = [5 7; 13 15]. */
START_TEST(test_gemm_known) {
        static const float A[] = { 1, 2, 3, 4, 5, 6 }, B[] = { 1, 0, 0, 1, 1, 1 },
                           C[] = { 1, 2, 3, 4 }, want[] = { 5, 7, 13, 15 };
        struct hbg_kernel_args a = { .n_tensors = 3, .n_scalars = 3, .scalars = { 2, 2, 3 } };
        uint8_t *h = heap_alloc();

        memset(h, 0, HEAP_SIZE);
        a.tensors[0] = T(0, sizeof(A), IN);
        a.tensors[1] = T(64, sizeof(B), IN);
        a.tensors[2] = T(128, sizeof(C), INOUT);
        memcpy(h, A, sizeof(A));
        memcpy(h + 64, B, sizeof(B));
        memcpy(h + 128, C, sizeof(C));
        ck_assert_int_eq(kernel_validate(K(HBG_KERNEL_GEMM_F32), &a, HEAP_SIZE, NULL), 0);
        run_parts(K(HBG_KERNEL_GEMM_F32), h, &a, 3, 9, 0);
        for (int i = 0; i < 4; i++)
                ck_assert_msg(F(h, 128)[i] == want[i], "C[%d] = %g", i, (double)F(h, 128)[i]);
        free(h);
}
END_TEST

static void check_rows_sum_to_one(const uint8_t *h, const struct hbg_kernel_args *a) {
        uint64_t rows = a->scalars[0], cols = a->scalars[1], X = a->tensors[0].offset;

        for (uint64_t r = 0; r < rows; r++) {
                double s = 0;
                for (uint64_t j = 0; j < cols; j++) {
                        float v = get_f32(h, X + (r * cols + j) * 4);
                        ck_assert_msg(v >= 0.0f && v <= 1.0f, "softmax value %g", (double)v);
                        s += v;
                }
                ck_assert_msg(fabs(s - 1.0) <= 1e-5, "row %llu sums to %.9f",
                              (unsigned long long)r, s);
        }
}

START_TEST(test_softmax) {
        static const uint64_t shapes[][2] = {
                { 1, 1 }, { 3, 5 }, { 5, 1 }, { 1, 37 }, { 17, 33 }, { 40, 3 }, { 7, 100 },
        };
        uint64_t seed = 700;

        for (size_t s = 0; s < sizeof(shapes) / sizeof(shapes[0]); s++) {
                for (uint64_t extra = 0; extra < 2; extra++) {
                        uint64_t rows = shapes[s][0], cols = shapes[s][1];
                        struct hbg_kernel_args a = { .n_scalars = 2, .scalars = { rows, cols } };
                        uint64_t elems[] = { rows * cols + 5 * extra };
                        uint32_t dirs[] = { INOUT };
                        uint8_t *one;

                        place(&a, elems, dirs, 1, extra == 1);
                        one = check_task(HBG_KERNEL_SOFTMAX_ROWS_F32, &a, ref_softmax, seed++,
                                         "softmax");
                        check_rows_sum_to_one(one, &a);
                        free(one);
                }
        }
}
END_TEST

/* Large inputs: without subtracting the row max expf would overflow. */
START_TEST(test_softmax_large) {
        struct hbg_kernel_args a = { .n_tensors = 1, .n_scalars = 2, .scalars = { 2, 3 } };
        static const float X[] = { 100.0f, 100.0f, 100.0f, 1000.0f, 999.0f, -1000.0f };
        uint8_t *h = heap_alloc();

        memset(h, 0, HEAP_SIZE);
        a.tensors[0] = T(4, sizeof(X), INOUT);
        memcpy(h + 4, X, sizeof(X));
        ck_assert_int_eq(kernel_validate(K(HBG_KERNEL_SOFTMAX_ROWS_F32), &a, HEAP_SIZE, NULL), 0);
        run_parts(K(HBG_KERNEL_SOFTMAX_ROWS_F32), h, &a, 2, 1, 0);
        check_rows_sum_to_one(h, &a);
        for (int j = 0; j < 3; j++)
                ck_assert(fabsf(get_f32(h, 4 + (uint64_t)j * 4) - 1.0f / 3.0f) <= 1e-7f);
        ck_assert(fabsf(get_f32(h, 16) - (float)(1.0 / (1.0 + exp(-1.0)))) <= 1e-6f);
        ck_assert(get_f32(h, 24) == 0.0f);
        free(h);
}
END_TEST

/* Bad part numbers are refused before any memory is touched. */
START_TEST(test_bad_part) {
        uint8_t *canary = heap_alloc(), *h = heap_alloc();

        memset(canary, CANARY, HEAP_SIZE);
        memcpy(h, canary, HEAP_SIZE);
        for (size_t i = 0; i < kernel_count(); i++) {
                const struct kernel_info *k = kernel_at(i);
                struct hbg_kernel_args a = { .n_tensors = k->sig->n_tensors, .n_scalars = k->sig->n_scalars };

                for (unsigned t = 0; t < k->sig->n_tensors; t++)
                        a.tensors[t] = T(256 * t, 64, k->sig->tensors[t].dir);
                a.scalars[0] = k->sig->id == HBG_KERNEL_FAIL ? (uint64_t)-EIO : 2;
                a.scalars[1] = 2;
                a.scalars[2] = 2;
                ck_assert_int_eq(kernel_validate(k, &a, HEAP_SIZE, NULL), 0);
                ck_assert_int_eq(run_part(k, h, &a, 0, 0), -EINVAL);
                ck_assert_int_eq(run_part(k, h, &a, 1, 1), -EINVAL);
                ck_assert_int_eq(run_part(k, h, &a, 7, 3), -EINVAL);
                ck_assert_int_eq(run_part(k, h, &a, UINT32_MAX, UINT32_MAX), -EINVAL);
        }
        ck_assert(memcmp(h, canary, HEAP_SIZE) == 0);
        free(h);
        free(canary);
}
END_TEST

/* The part formula with large part counts: the parts of n tile [0, n),
 * each element in exactly one part, up to UINT32_MAX parts (where
 * n * parts does not fit in 32 bits and most parts are empty). */
START_TEST(test_many_parts) {
        const struct kernel_info *k = K(HBG_KERNEL_FILL_F32);
        struct hbg_kernel_args a = { .n_tensors = 1, .n_scalars = 1 };
        uint8_t *h = heap_alloc(), *before = heap_alloc();
        const uint64_t n = 1001;

        memset(h, 0, HEAP_SIZE);
        a.tensors[0] = T(8, n * 4, OUT);
        for (uint32_t parts = 999; parts < 1003; parts++) {
                a.scalars[0] = f32_bits((float)parts);
                for (uint32_t p = 0; p < parts; p++)
                        ck_assert_int_eq(run_part(k, h, &a, p, parts), 0);
                for (uint64_t i = 0; i < n; i++)
                        ck_assert(F(h, 8)[i] == (float)parts);
        }

        const uint32_t parts = UINT32_MAX;
        a.scalars[0] = f32_bits(-1.0f);
        for (uint64_t e = 0; e < n; e++) {
                /* The one part whose range holds e: the p with
                 * n*p/parts <= e < n*(p+1)/parts. */
                uint64_t p = ((e + 1) * parts + n - 1) / n - 1;

                memcpy(before, h, HEAP_SIZE);
                ck_assert_int_eq(run_part(k, h, &a, (uint32_t)p, parts), 0);
                ck_assert_msg(F(h, 8)[e] == -1.0f, "element %llu not written by part %llu",
                              (unsigned long long)e, (unsigned long long)p);
                F(before, 8)[e] = -1.0f;
                ck_assert_msg(memcmp(before, h, HEAP_SIZE) == 0, "part %llu wrote more than %llu",
                              (unsigned long long)p, (unsigned long long)e);
                /* its neighbours are empty */
                if (p > 0 && (p - 1) * n / parts == p * n / parts) {
                        ck_assert_int_eq(run_part(k, h, &a, (uint32_t)(p - 1), parts), 0);
                        ck_assert(memcmp(before, h, HEAP_SIZE) == 0);
                }
        }
        ck_assert(get_f32(h, 4) == 0.0f && get_f32(h, 8 + n * 4) == 0.0f);
        free(before);
        free(h);
}
END_TEST

/* n * part overflows 64 bits for large tensors and part counts: a 2^33
 * element tensor (32 GiB of reserved, untouched address space) split into
 * up to UINT32_MAX parts. Each part run writes exactly its range, computed
 * here in 128 bits. Skipped when the address space cannot be reserved. */
START_TEST(test_huge_split) {
        const uint64_t bytes = UINT64_C(1) << 35, n = bytes / 4;
        static const uint32_t parts_list[] = { 65536, 3000000001u, UINT32_MAX };
        const struct kernel_info *k = K(HBG_KERNEL_FILL_F32);
        struct hbg_kernel_args a = { .n_tensors = 1, .n_scalars = 1 };
        uint8_t *h;

        h = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
                 -1, 0);
        if (h == MAP_FAILED) {
                fprintf(stderr, "test_huge_split: cannot reserve 32 GiB, skipped\n");
                return;
        }
        a.tensors[0] = T(0, bytes, OUT);
        a.scalars[0] = f32_bits(5.0f);
        ck_assert_int_eq(kernel_validate(k, &a, bytes, NULL), 0);
        for (size_t i = 0; i < sizeof(parts_list) / sizeof(parts_list[0]); i++) {
                uint32_t parts = parts_list[i];
                uint32_t ps[] = { 1, parts / 3, parts / 2 + 7, parts - 2, parts - 1 };

                for (size_t j = 0; j < sizeof(ps) / sizeof(ps[0]); j++) {
                        uint64_t lo = (uint64_t)((unsigned __int128)n * ps[j] / parts);
                        uint64_t hi = (uint64_t)((unsigned __int128)n * (ps[j] + 1u) / parts);
                        float *x = F(h, 0);

                        ck_assert_uint_lt(lo, hi); /* never empty: n > parts */
                        ck_assert_int_eq(run_part(k, h, &a, ps[j], parts), 0);
                        for (uint64_t e = lo; e < hi; e++)
                                ck_assert_msg(x[e] == 5.0f, "parts %u part %u: element %llu",
                                              parts, ps[j], (unsigned long long)e);
                        ck_assert_msg(x[lo - 1] == 0.0f && (hi == n || x[hi] == 0.0f),
                                      "parts %u part %u wrote past [%llu, %llu)", parts, ps[j],
                                      (unsigned long long)lo, (unsigned long long)hi);
                        memset(x + lo, 0, (hi - lo) * 4);
                }
        }
        munmap(h, bytes);
}
END_TEST

/* ------------------------------------------------------------ main */

static Suite *kernels_suite(void) {
        Suite *s = suite_create("kernels");
        TCase *tc;

        tc = tcase_create("lookup");
        tcase_add_test(tc, test_ids_and_names);
        tcase_add_test(tc, test_docs_list_every_kernel);
        tcase_add_test(tc, test_unknown);
        tcase_add_test(tc, test_signatures);
        suite_add_tcase(s, tc);

        tc = tcase_create("results");
        tcase_set_timeout(tc, 60);
        tcase_add_test(tc, test_noop_spin_fail_run);
        tcase_add_test(tc, test_timestamp);
        tcase_add_test(tc, test_fill);
        tcase_add_test(tc, test_copy);
        tcase_add_test(tc, test_add_mul);
        tcase_add_test(tc, test_axpy_scale);
        tcase_add_test(tc, test_reduce_sum);
        tcase_add_test(tc, test_reduce_sum_double);
        tcase_add_test(tc, test_gemm);
        tcase_add_test(tc, test_gemm_known);
        tcase_add_test(tc, test_softmax);
        tcase_add_test(tc, test_softmax_large);
        tcase_add_test(tc, test_bad_part);
        tcase_add_test(tc, test_many_parts);
        tcase_add_test(tc, test_huge_split);
        suite_add_tcase(s, tc);

        return s;
}

const struct check_main check_main = { .suite = kernels_suite };
