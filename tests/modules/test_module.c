/* SPDX-License-Identifier: MIT */
/*
 * Kernel modules for the loader's tests (tests/unit/test_kernel_modules.c,
 * tests/e2e/test_e2e_modules.c): one source, built once per variant
 * (-DVARIANT="name", the Makefile's tests/modules rule), each registering
 * what its name says. "counting" is a good module whose kernel counts its
 * check() calls; the others are each refused for one reason, except
 * "many_fit" and "many_over": many kernels with long texts, whose table
 * fits the session reply and does not (hbgd refuses to start),
 * "misbehaving": kernels that break the run contract in the ways hbgd
 * must still turn into a failed task, and "unsplit": a kernel that does
 * not split and one that does, each counting the parts it is run as, and
 * a splittable one whose part 0 fails.
 */
#include <errno.h>
#include <stdint.h>
#include <string.h>

#include <hbg/kernel.h>

#ifndef VARIANT
#error "build with -DVARIANT=\"name\""
#endif

static unsigned checks;

static const char *const reasons[] = { "k must be 7" };

/* Counts its calls: hbgd's generic checks must have refused hostile
 * arguments before this runs. */
static int count_check(const struct hbg_kernel_args *a, unsigned *reason) {
        checks++;
        if (a->scalars[0] != 7) {
                *reason = 0;
                return -ERANGE;
        }
        return 0;
}

static uint64_t count_cost(const struct hbg_kernel_args *a, uint32_t parts) {
        (void)a;
        return parts;
}

/* out[0] = how many times check() ran so far. */
static int count_run(struct hbg_kernel_ctx *ctx, uint8_t *heap, const struct hbg_kernel_args *a, uint32_t part,
                     uint32_t parts) {
        (void)ctx;
        (void)parts;
        if (part == 0)
                hbg_kernel_f32(heap, &a->tensors[1])[0] = (float)checks;
        return 0;
}

/* Checks until told to stop, then returns 0 as if it had finished. */
static int ignore_stop_run(struct hbg_kernel_ctx *ctx, uint8_t *heap, const struct hbg_kernel_args *a,
                           uint32_t part, uint32_t parts) {
        (void)heap;
        (void)a;
        (void)part;
        (void)parts;
        while (hbg_kernel_check(ctx, HBG_KERNEL_CHECK_CHUNK) == 0)
                ;
        return 0;
}

/* Returns what is no errno. */
static int bad_return_run(struct hbg_kernel_ctx *ctx, uint8_t *heap, const struct hbg_kernel_args *a,
                          uint32_t part, uint32_t parts) {
        (void)ctx;
        (void)heap;
        (void)a;
        (void)part;
        (void)parts;
        return 7;
}

/* Three u32 counters in its one tensor: calls, the sum of the `part`s and
 * of the `parts` it was given. Atomic: a split task's parts run at once on
 * several threads. No guard against parts beyond the first: hbgd runs a
 * kernel that does not split as one part. */
static int calls_run(struct hbg_kernel_ctx *ctx, uint8_t *heap, const struct hbg_kernel_args *a, uint32_t part,
                     uint32_t parts) {
        (void)ctx;
        uint32_t *n = (uint32_t *)(void *)(heap + a->tensors[0].offset);
        __atomic_fetch_add(&n[0], 1, __ATOMIC_RELAXED);
        __atomic_fetch_add(&n[1], part, __ATOMIC_RELAXED);
        __atomic_fetch_add(&n[2], parts, __ATOMIC_RELAXED);
        return 0;
}

/* calls_run(), and part 0 fails its task. */
static int calls_fail_first_run(struct hbg_kernel_ctx *ctx, uint8_t *heap, const struct hbg_kernel_args *a,
                                uint32_t part, uint32_t parts) {
        calls_run(ctx, heap, a, part, parts);
        return part == 0 ? -EIO : 0;
}

static const char *const calls_reasons[] = { "counts must hold 3 u32" };

static int calls_check(const struct hbg_kernel_args *a, unsigned *reason) {
        if (a->tensors[0].length < 3 * sizeof(uint32_t)) {
                *reason = 0;
                return -ERANGE;
        }
        return 0;
}

static int variant(const char *name) {
        return strcmp(VARIANT, name) == 0;
}

/* n kernels tm_many_0.. with 8 tensors and 8 scalars, all names 31
 * characters, a summary and rule of 400: about 1.3 KB each in the table. */
static int register_many(struct hbg_kernel_host *host, unsigned n, const struct hbg_kernel_def *base) {
        static char names[64][32], args[16][32];
        static char text[401];
        memset(text, 's', 400);
        for (unsigned a = 0; a < 16; a++) {
                memset(args[a], 'a', 31);
                args[a][0] = (char)('A' + a);
        }
        for (unsigned i = 0; i < n && i < 64; i++) {
                struct hbg_kernel_def d = *base;
                memcpy(names[i], "tm_many_", 8);
                names[i][8] = (char)('a' + i / 26);
                names[i][9] = (char)('a' + i % 26);
                d.name = names[i];
                d.summary = text;
                d.length_rule = text;
                d.length = HBG_KERNEL_LENGTH_ANY;
                d.check = NULL;
                d.reasons = NULL;
                d.n_reasons = 0;
                d.n_tensors = HBG_KERNEL_MAX_TENSORS;
                d.n_scalars = HBG_KERNEL_MAX_SCALARS;
                for (unsigned a = 0; a < 8; a++) {
                        d.tensors[a].name = args[a];
                        d.tensors[a].dir = HBG_KERNEL_IN;
                        d.scalars[a].name = args[8 + a];
                        d.scalars[a].kind = HBG_KERNEL_U64;
                }
                int r = hbg_kernel_register(host, &d);
                if (r < 0)
                        return r;
        }
        return 0;
}

#ifdef NO_INIT
/* Everything but the function hbgd looks for: the init under another name. */
#define hbg_kernel_module_init hbg_kernel_module_start
HBG_KERNEL_MODULE_EXPORT int hbg_kernel_module_start(struct hbg_kernel_host *host);
#endif

HBG_KERNEL_MODULE_EXPORT int hbg_kernel_module_init(struct hbg_kernel_host *host) {
        struct hbg_kernel_def d = {
                .size = sizeof(d),
                .name = "tm_count",
                .summary = "out[0] = check() calls so far (tests)",
                .n_tensors = 2,
                .tensors = { { "in", HBG_KERNEL_IN }, { "out", HBG_KERNEL_OUT } },
                .n_scalars = 2,
                .scalars = { { "k", HBG_KERNEL_U64 }, { "f", HBG_KERNEL_F32 } },
                .length = HBG_KERNEL_LENGTH_EQUAL,
                .length_rule = "in as long as out",
                .splittable = true,
                .check = count_check,
                .reasons = reasons,
                .n_reasons = 1,
                .cost = count_cost,
                .run = count_run,
        };
        if (variant("init_fail"))
                return -ENOTSUP;
        if (variant("clash_builtin"))
                d.name = "add_f32";
        if (variant("clash_a") || variant("clash_b"))
                d.name = "tm_clash";
        if (variant("bad_name"))
                d.name = "Bad-Name";
        if (variant("dummy_name"))
                d.name = "dummy";
        if (variant("no_run"))
                d.run = NULL;
        if (variant("too_many_args"))
                d.n_tensors = HBG_KERNEL_MAX_TENSORS + 1;
        if (variant("long_summary")) {
                static char text[513];
                memset(text, 's', 512);
                d.summary = text;
        }
        if (variant("bad_dir"))
                d.tensors[1].dir = 9;
        if (variant("bad_version"))
                return host->add(host, HBG_KERNEL_API_VERSION + 1, &d);
        if (variant("bad_size")) {
                /* A definition from a newer header: one field this hbgd
                 * does not know, set. */
                struct {
                        struct hbg_kernel_def def;
                        uint64_t newer;
                } big = { d, 1 };
                big.def.size = sizeof(big);
                return hbg_kernel_register(host, &big.def);
        }
        if (variant("small_size")) {
                /* A definition shorter than version 1's (no run): its
                 * name is there to read all the same. */
                d.size = offsetof(struct hbg_kernel_def, run);
                return hbg_kernel_register(host, &d);
        }
        if (variant("empty"))
                return 0;
        if (variant("misbehaving")) {
                struct hbg_kernel_def m = HBG_KERNEL_DEF_INIT;
                m.summary = "breaks the run contract (tests)";
                m.length_rule = "no tensors";
                m.splittable = true;
                m.cost = count_cost;
                m.name = "tm_ignore_stop";
                m.run = ignore_stop_run;
                int r = hbg_kernel_register(host, &m);
                m.name = "tm_bad_return";
                m.run = bad_return_run;
                return r < 0 ? r : hbg_kernel_register(host, &m);
        }
        if (variant("unsplit")) {
                struct hbg_kernel_def u = HBG_KERNEL_DEF_INIT;
                u.summary = "counts its calls and parts (tests)";
                u.n_tensors = 1;
                u.tensors[0].name = "counts";
                u.tensors[0].dir = HBG_KERNEL_INOUT;
                u.length_rule = "counts holds 3 u32";
                u.check = calls_check;
                u.reasons = calls_reasons;
                u.n_reasons = 1;
                u.cost = count_cost;
                u.run = calls_run;
                u.name = "tm_calls";
                u.splittable = false;
                int r = hbg_kernel_register(host, &u);
                u.name = "tm_calls_split";
                u.splittable = true;
                if (r == 0)
                        r = hbg_kernel_register(host, &u);
                u.name = "tm_calls_fail_first";
                u.summary = "counts its calls and parts; part 0 fails (tests)";
                u.run = calls_fail_first_run;
                return r < 0 ? r : hbg_kernel_register(host, &u);
        }
        if (variant("many_fit"))
                return register_many(host, 30, &d);
        if (variant("many_over"))
                return register_many(host, 60, &d);
        return hbg_kernel_register(host, &d);
}
