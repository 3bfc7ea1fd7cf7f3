/* SPDX-License-Identifier: MIT */
/*
 * hbg/kernel.h: the kernel module API of hbgd (docs/KERNELS.md,
 * hbg_kernel_module_init(3)).
 *
 * A kernel module is a shared object the operator names in hbgd.conf
 * ([kernels] modules). hbgd loads it at start, before its scheduler threads
 * run, and calls the one function it exports,
 *
 *     int hbg_kernel_module_init(struct hbg_kernel_host *host);
 *
 * which registers its kernels with hbg_kernel_register(host, &def) and
 * returns 0 (or a negative errno: hbgd then refuses to start). hbgd's
 * thirteen built-in kernels are registered through the same definitions.
 *
 * The header needs no library: a module links nothing of hbg's, and hbgd
 * gives it what it calls through the host handle and the run context.
 * Versioned like the client API: HBG_KERNEL_API_VERSION travels with every
 * registration, and each definition carries its size; a hbgd refuses
 * a version it does not speak and fields it does not know unless zero.
 */
#ifndef HBG_KERNEL_H
#define HBG_KERNEL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define HBG_KERNEL_API_VERSION 1u

/* The module's one exported function (the visibility a module built with
 * -fvisibility=hidden needs). */
#if defined(__GNUC__)
#  define HBG_KERNEL_MODULE_EXPORT __attribute__((visibility("default")))
#else
#  define HBG_KERNEL_MODULE_EXPORT
#endif
#define HBG_KERNEL_MODULE_INIT_NAME "hbg_kernel_module_init"

#define HBG_KERNEL_MAX_TENSORS 8u       /* tensor arguments of one kernel */
#define HBG_KERNEL_MAX_SCALARS 8u       /* scalar arguments of one kernel */
#define HBG_KERNEL_MAX_REASONS 8u       /* check() reasons of one kernel */
#define HBG_KERNEL_NAME_MAX 31u         /* [a-z0-9_]{1,31} */

enum hbg_kernel_dir { HBG_KERNEL_IN = 1, HBG_KERNEL_OUT = 2, HBG_KERNEL_INOUT = 3 };

/* How a scalar's 64 raw bits are read. */
enum hbg_kernel_scalar_kind {
        HBG_KERNEL_F32 = 1,     /* the low 32 bits hold an IEEE float; hbgd
                                   refuses a task with the upper 32 set */
        HBG_KERNEL_U64 = 2,
        HBG_KERNEL_I64 = 3,
};

/* How tensor lengths relate (on top of: inside the heap, offset and length
 * multiples of 4, not empty). */
enum hbg_kernel_length_rule {
        HBG_KERNEL_LENGTH_ANY = 0,      /* no relation */
        HBG_KERNEL_LENGTH_EQUAL = 1,    /* every tensor exactly as long as the last */
        HBG_KERNEL_LENGTH_SHAPE = 2,    /* what the scalars say: the kernel's check() */
};

/* One tensor argument of a task: a byte range of the session's heap. */
struct hbg_kernel_tensor_arg {
        uint64_t offset;                /* bytes from the heap base (a multiple of 4) */
        uint64_t length;                /* bytes (a multiple of 4, > 0) */
        uint32_t direction;             /* enum hbg_kernel_dir, as the definition says */
        uint32_t reserved;              /* zero */
};

/* A task's arguments: hbgd's private copy, validated before check(),
 * cost() and run() see it (as many as the definition says). */
struct hbg_kernel_args {
        uint8_t n_tensors, n_scalars;
        struct hbg_kernel_tensor_arg tensors[HBG_KERNEL_MAX_TENSORS];
        uint64_t scalars[HBG_KERNEL_MAX_SCALARS];
};

/*
 * The run context: how a running kernel learns it must stop (its time
 * budget, [limits] kernel_time_budget_ms, or a cancel of its graph).
 *
 * The contract: run() calls hbg_kernel_check(ctx, work) between rows or
 * blocks of its work, never per element, with `work` the work done since
 * the last call in cost units (about one element operation), at least once
 * every HBG_KERNEL_CHECK_CHUNK units, so the time between two calls is
 * bounded whatever the data. A nonzero return is a negative errno (-ETIME,
 * -ECANCELED) that run() returns at once, as its result, having written
 * part of its outputs. The fast path is a subtraction from `credit`; only
 * when the credit runs out does hbgd's slow path read the clock and the
 * stop word. Built-in kernels check exactly so, through this struct.
 * The context belongs to the calling thread; a kernel touches no field.
 */
#define HBG_KERNEL_CHECK_CHUNK 4096u

struct hbg_kernel_ctx {
        uint64_t credit;                                /* units before the slow path */
        int (*slow)(struct hbg_kernel_ctx *ctx);        /* hbgd's: clock, stop word */
};

static inline int hbg_kernel_check(struct hbg_kernel_ctx *ctx, uint64_t work) {
        if (work < ctx->credit) {
                ctx->credit -= work;
                return 0;
        }
        return ctx->slow(ctx);
}

/* Element i of tensor t as floats (hbgd keeps the heap base 64-byte
 * aligned and offsets multiples of 4). */
static inline float *hbg_kernel_f32(uint8_t *heap, const struct hbg_kernel_tensor_arg *t) {
        return (float *)(void *)(heap + t->offset);
}

/* Rows [*lo, *hi) of n that part `part` of `parts` takes: the blocks
 * partition [0, n) in order, whatever parts is. */
static inline void hbg_kernel_part_range(uint64_t n, uint32_t part, uint32_t parts, uint64_t *lo,
                                         uint64_t *hi) {
        uint64_t q = n / parts, r = n % parts;
        *lo = q * part + r * part / parts;
        *hi = q * (part + 1u) + r * (part + 1u) / parts;
}

/*
 * One kernel. Initialise with HBG_KERNEL_DEF_INIT (sets size), then fill
 * in. Strings and the reasons array must stay valid while hbgd runs (a
 * module is never unloaded): string literals and static arrays. size and
 * name stay the first two fields in every version of this header (an hbgd
 * refusing a version names the kernel).
 */
struct hbg_kernel_def {
        size_t size;                    /* sizeof(struct hbg_kernel_def) */
        const char *name;               /* [a-z0-9_]{1,31}, unique in hbgd */
        const char *summary;            /* what it computes, one line */
        uint8_t n_tensors;              /* <= HBG_KERNEL_MAX_TENSORS */
        struct {
                const char *name;       /* [A-Za-z0-9_]{1,31} */
                uint8_t dir;            /* enum hbg_kernel_dir */
        } tensors[HBG_KERNEL_MAX_TENSORS];
        uint8_t n_scalars;              /* <= HBG_KERNEL_MAX_SCALARS */
        struct {
                const char *name;       /* [A-Za-z0-9_]{1,31} */
                uint8_t kind;           /* enum hbg_kernel_scalar_kind */
        } scalars[HBG_KERNEL_MAX_SCALARS];
        uint8_t length;                 /* enum hbg_kernel_length_rule */
        const char *length_rule;        /* the rule in words, for docs and errors */
        /* An output may be the very same range as an input: the kernel
         * reads each element before writing it (and uses no restrict). */
        bool in_place;
        /* Parts may run concurrently and in any order; false: hbgd runs
         * the task as one part, part 0 of 1, whatever its blocks and
         * lanes (run needs no guard against other parts). */
        bool splittable;
        /*
         * The kernel's own checks, after hbgd's generic ones passed (counts,
         * directions, ranges inside the heap, overlaps, the length rule,
         * f32 scalars): 0, or -EINVAL/-ERANGE/-EOVERFLOW with *reason the
         * index of the reason in reasons[]. hbgd prefixes it with the
         * kernel's name. NULL: no checks of its own (not with
         * HBG_KERNEL_LENGTH_SHAPE). Must not read the heap.
         */
        int (*check)(const struct hbg_kernel_args *a, unsigned *reason);
        const char *const *reasons;     /* one line each, without the kernel name */
        unsigned n_reasons;             /* <= HBG_KERNEL_MAX_REASONS */
        /* The numbers behind reason `reason` (may be NULL): appended to the
         * message of a validate-only request; snprintf's return. */
        int (*explain)(const struct hbg_kernel_args *a, unsigned reason, char *buf, size_t len);
        /* The work of all `parts` parts in cost units (about one element
         * operation; saturate at UINT64_MAX): hbgd refuses a task above
         * [limits] max_task_cost. A split kernel costs the same whatever
         * parts is. Never NULL. */
        uint64_t (*cost)(const struct hbg_kernel_args *a, uint32_t parts);
        /* Run part `part` of `parts` (part < parts; 0 of 1 if not
         * splittable) on the heap, checking ctx as the contract above
         * says. Split-invariant: the heap after all parts ran is
         * bit-identical whatever parts is and whatever order they ran in.
         * 0 or a negative errno (fails the graph). Never NULL. */
        int (*run)(struct hbg_kernel_ctx *ctx, uint8_t *heap, const struct hbg_kernel_args *a, uint32_t part,
                   uint32_t parts);
};
#define HBG_KERNEL_DEF_INIT { .size = sizeof(struct hbg_kernel_def) }

/* What hbgd hands hbg_kernel_module_init(). */
struct hbg_kernel_host {
        size_t size;                    /* sizeof(struct hbg_kernel_host) of hbgd */
        uint32_t api_version;           /* the newest HBG_KERNEL_API_VERSION hbgd speaks */
        /* Use hbg_kernel_register(). 0, or a negative errno (the reason is
         * in hbgd's message; the module should return it). */
        int (*add)(struct hbg_kernel_host *host, uint32_t api_version, const struct hbg_kernel_def *def);
        void *hbgd;                     /* hbgd's, not the module's */
};

static inline int hbg_kernel_register(struct hbg_kernel_host *host, const struct hbg_kernel_def *def) {
        return host->add(host, HBG_KERNEL_API_VERSION, def);
}

/* The function a module defines (HBG_KERNEL_MODULE_EXPORT). */
HBG_KERNEL_MODULE_EXPORT int hbg_kernel_module_init(struct hbg_kernel_host *host);

#ifdef __cplusplus
}
#endif

#endif /* HBG_KERNEL_H */
