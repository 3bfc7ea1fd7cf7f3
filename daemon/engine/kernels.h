/* SPDX-License-Identifier: MIT */
/*
 * hbgd's kernel table: every kernel's signature (common/kernel_sig.h's
 * struct) and code (run, check and cost), built-in or from a module.
 *
 * A task names a kernel per lane by its stable id and passes tensors (heap
 * byte ranges with a direction) and raw 64-bit scalars. The daemon copies
 * the arguments into a struct hbg_kernel_args, validates the copy once with
 * kernel_validate() against the heap size it trusts, and only then runs
 * the kernel, split into `parts` blocks that may run concurrently and in any
 * order (a kernel whose signature is not splittable: one part, validation
 * decides). Every kernel is split-invariant: the heap after all parts ran
 * is bit-identical whatever `parts` is and whatever order the parts ran in.
 * Kernels that may run in place (an output the very range of an input)
 * read each element before writing it and carry no `restrict`.
 *
 * Errors: -EINVAL wrong signature or shape, -ERANGE a value outside its
 * range (a tensor outside the heap included), -EOVERFLOW an offset or size
 * computation overflowing 64 bits. Every message is static and starts with
 * the kernel name. At run time also hbg_kernel_check()'s -ETIME (the time
 * budget) and -ECANCELED (the stop flag), see below.
 */
#pragma once

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <hbg/kernel.h>

#include "common/kernel_sig.h"
#include "daemon/engine/engine_kernels.h"
#include "shm/layout.h"

/* A validated, daemon-private copy of one task's arguments: the module
 * API's struct (hbg/kernel.h), the very layout of the submission
 * region's struct hbg_task_args. */
_Static_assert(sizeof(struct hbg_kernel_tensor_arg) == sizeof(struct hbg_tensor_arg) &&
                       offsetof(struct hbg_kernel_tensor_arg, direction) ==
                               offsetof(struct hbg_tensor_arg, direction) &&
                       HBG_KERNEL_MAX_TENSORS == HBG_MAX_TENSOR_ARGS && HBG_KERNEL_MAX_SCALARS == HBG_MAX_SCALAR_ARGS,
               "hbg/kernel.h's arguments are the layout's");
_Static_assert((int)HBG_KERNEL_IN == (int)HBG_DIR_IN && (int)HBG_KERNEL_OUT == (int)HBG_DIR_OUT &&
                       (int)HBG_KERNEL_INOUT == (int)HBG_DIR_INOUT && (int)HBG_KERNEL_F32 == (int)HBG_SCALAR_F32 &&
                       (int)HBG_KERNEL_U64 == (int)HBG_SCALAR_U64 && (int)HBG_KERNEL_I64 == (int)HBG_SCALAR_I64 &&
                       (int)HBG_KERNEL_LENGTH_ANY == (int)HBG_LENGTH_ANY &&
                       (int)HBG_KERNEL_LENGTH_EQUAL == (int)HBG_LENGTH_EQUAL &&
                       (int)HBG_KERNEL_LENGTH_SHAPE == (int)HBG_LENGTH_SHAPE,
               "hbg/kernel.h's enums are the signature table's");

/*
 * The run contract: how long a kernel may run (RUNTIME_LOGIC.md §10.6).
 *
 * A kernel's time must not depend on its data beyond a bound the daemon
 * sets: subnormal floats make a multiply-add up to ~100 times slower than
 * max_task_cost's count of work assumes, and hbgd keeps IEEE results (no
 * flush-to-zero), so the cost check alone cannot bound time. Instead every
 * run function, built-in or a module's, gets the public struct
 * hbg_kernel_ctx (hbg/kernel.h) and calls hbg_kernel_check(ctx, work)
 * between rows or blocks of its work, never per element:
 *   - `work` is the work done since the last call, in cost units (about one
 *     element operation, or one nanosecond for spin_ns); a kernel calls it
 *     at least once per KERNEL_CHECK_CHUNK elements it touches (a loop over
 *     more is cut into chunks of that many, a row of gemm_f32 into blocks
 *     of that many multiply-adds), so the time between two calls is
 *     bounded whatever the data and the shape;
 *   - hbg_kernel_check() returns 0 (go on) or a negative errno, which the
 *     kernel returns at once, as its result, having written only part of
 *     its outputs;
 *   - the check is cheap: a subtraction from a credit (inline, in the
 *     public header); only once per KERNEL_CHECK_WORK units does it call
 *     the context's slow path, kernel_check_slow(), through the pointer
 *     the context carries (a module links no symbol of hbgd's), which
 *     reads the clock and the stop word.
 *
 * struct kernel_run_ctx is hbgd's side of that context: the public part
 * first, then what the slow path needs. It is the single place a running
 * kernel learns it must stop, for every reason there is or will be:
 *   - the time budget ([limits] kernel_time_budget_ms): counted from the
 *     first time the clock is read (after at most KERNEL_CHECK_WORK units),
 *     so a run lasts at most the budget plus two check intervals; then
 *     -ETIME and `stopped` = KERNEL_STOP_BUDGET. The dispatcher names the
 *     kernel and its budget in the graph's message, not strerror;
 *   - the stop word: a word someone else changes to stop the run early (a
 *     cancel of a running graph); then -ECANCELED and `stopped` =
 *     KERNEL_STOP_CANCEL. The run stops when the word differs from the
 *     value it started with (0 unless kernel_run_ctx_filter() says
 *     otherwise); with a filter, a change only asks the filter whether it
 *     concerns this run (the engine's word changes for every cancel of a
 *     ring, RUNTIME_LOGIC §12.6), and the new value becomes the one seen.
 * Once stopped, every later check on the context fails at once with the
 * same code, so a caller running several parts with one context stops
 * them all. The context belongs to one thread; only *stop is shared.
 */
#define KERNEL_CHECK_CHUNK HBG_KERNEL_CHECK_CHUNK  /* most work units per check */
#define KERNEL_CHECK_WORK (4u * KERNEL_CHECK_CHUNK) /* units between clock reads */

enum kernel_stop {
        KERNEL_STOP_NONE = 0,
        KERNEL_STOP_BUDGET,  /* -ETIME: past the deadline */
        KERNEL_STOP_CANCEL,  /* -ECANCELED: *stop became nonzero */
};

struct kernel_run_ctx {
        struct hbg_kernel_ctx k;        /* what kernels see: credit, slow path */
        uint64_t budget_ns;             /* 0: no time budget */
        int64_t deadline_ns;            /* CLOCK_MONOTONIC; 0 until the first slow check */
        /* Changed from stop_seen: stop, or ask stop_applies (read relaxed
         * at each slow check: whoever changes it publishes nothing through
         * it; a filter that needs more takes its own lock). NULL: none. */
        const _Atomic uint32_t *stop;
        uint32_t stop_seen;
        bool (*stop_applies)(void *arg); /* NULL: every change stops */
        void *stop_arg;
        enum kernel_stop stopped;       /* why the check failed, NONE until it does */
};

/* The context's slow path (clock, stop flag): 0, -ETIME or -ECANCELED.
 * Reached only through hbg_kernel_check(); ctx is a kernel_run_ctx's k. */
int kernel_check_slow(struct hbg_kernel_ctx *ctx);

/* A budget of budget_ms in nanoseconds, as kernel_run_ctx_init() takes it
 * (0: none; at most INT64_MAX / 2, so a deadline never overflows). */
static inline uint64_t kernel_budget_ns(uint64_t budget_ms) {
        uint64_t ns;
        if (__builtin_mul_overflow(budget_ms, UINT64_C(1000000), &ns) || ns > (uint64_t)INT64_MAX / 2)
                ns = (uint64_t)INT64_MAX / 2;
        return ns;
}

/* A context for one run of one or more kernel parts: budget_ns from
 * kernel_budget_ns(), 0 meaning no time budget (tests and benchmarks);
 * stop may be NULL. Reads no clock. */
static inline void kernel_run_ctx_init(struct kernel_run_ctx *ctx, uint64_t budget_ns,
                                       const _Atomic uint32_t *stop) {
        *ctx = (struct kernel_run_ctx){ .k = { .credit = KERNEL_CHECK_WORK, .slow = kernel_check_slow },
                                        .budget_ns = budget_ns, .stop = stop };
}

/* Stop only when the stop word differs from `seen` and applies(arg) says
 * the change concerns this run (called on the running thread). */
static inline void kernel_run_ctx_filter(struct kernel_run_ctx *ctx, uint32_t seen, bool (*applies)(void *arg),
                                         void *arg) {
        ctx->stop_seen = seen;
        ctx->stop_applies = applies;
        ctx->stop_arg = arg;
}

struct kernel_msgs;

/*
 * A kernel in hbgd's table: its signature and its code, made by
 * kernel_register() from a struct hbg_kernel_def (hbg/kernel.h), the one
 * way in for the built-ins (module "built-in", kernels_builtin.c) and for
 * every loaded module's kernels.
 */
struct kernel_info {
        const struct hbg_kernel_sig *sig;
        /* Kernel-specific checks beyond the generic ones (never NULL); only
         * meaningful after the generic checks passed, so call
         * kernel_validate(), not this. 0, or -EINVAL/-ERANGE/-EOVERFLOW with
         * *ret_msg the index of the reason in check_msgs. */
        int (*check)(const struct hbg_kernel_args *a, unsigned *ret_msg);
        const char *const *check_msgs;  /* reasons, without the kernel name */
        unsigned n_check_msgs;
        /* The numbers behind check's reason msg (may be NULL): appended to
         * it by kernel_explain(); snprintf's return. */
        int (*explain)(const struct hbg_kernel_args *a, unsigned msg, char *buf, size_t len);
        /* Run part `part` of `parts` (1 <= parts, part < parts; 0 of 1 if
         * the kernel does not split) on the heap; arguments must have
         * passed kernel_validate(). Checks ctx as the run contract says
         * (above) and returns its error as is. Returns 0 or a negative
         * errno. */
        int (*run)(struct hbg_kernel_ctx *ctx, uint8_t *heap, const struct hbg_kernel_args *a, uint32_t part,
                   uint32_t parts);
        /* kernel_cost() for one full run of all parts (never NULL). */
        uint64_t (*cost)(const struct hbg_kernel_args *a, uint32_t parts);
        uint32_t index;                 /* its place in kernel_at()'s order */
        const struct kernel_msgs *msgs; /* kernel_validate()'s messages */
};

/* NULL if unknown (HBG_KERNEL_NONE included). */
const struct kernel_info *kernel_lookup(uint16_t id);
/* NULL if unknown or name is NULL. */
const struct kernel_info *kernel_lookup_name(const char *name);
/* In id order: kernel_at(i) for i < kernel_count() (engine_kernels.h);
 * NULL past the end. Registration is engine_kernels.h's too. */
const struct kernel_info *kernel_at(size_t i);

/*
 * The work of a task running kernel k on arguments a (already validated)
 * as `parts` parts, in cost units: one unit is about one element operation
 * (a multiply-add of gemm_f32, one element of an elementwise kernel) or one
 * nanosecond of spin_ns, so 2^30 units are roughly a second of one core.
 * Split kernels cost the same whatever `parts` is; spin_ns spins in every
 * part. Saturates at UINT64_MAX. hbgd refuses a task whose cost exceeds
 * its per-task limit (docs/SECURITY.md).
 */
uint64_t kernel_cost(const struct kernel_info *k, const struct hbg_kernel_args *a, uint32_t parts);
/* "KERNEL: work above the per-task limit ..." (static). */
const char *kernel_cost_message(const struct kernel_info *k);

/*
 * Full validation of one task's arguments for kernel k against a heap of
 * heap_size bytes. Reads only *a, never the heap. Checks, in this order:
 *   - n_tensors and n_scalars equal the signature's          -EINVAL
 *   - per tensor: direction equals the signature's, reserved zero,
 *     offset and length multiples of 4, length > 0            -EINVAL
 *     offset + length does not overflow 64 bits               -EOVERFLOW
 *     offset + length <= heap_size                            -ERANGE
 *   - no output overlaps another tensor, except an output that is the
 *     same range as an input of an in-place kernel; the message names
 *     both tensors                                            -EINVAL
 *   - the signature's length rule (EQUAL: every tensor as long as the
 *     output), naming both tensors                            -EINVAL
 *   - F32 scalars have the upper 32 bits zero                 -EINVAL
 *   - the kernel's own check                                  (kernel's own)
 * Returns 0 or a negative errno with *why (if why is not NULL) a static
 * message starting with the kernel name (*why NULL on success). k must come
 * from kernel_lookup()/kernel_at(); NULL or anything else: -EINVAL.
 */
int kernel_validate(const struct kernel_info *k, const struct hbg_kernel_args *a, uint64_t heap_size,
                    const char **why);
/* The same for k just returned by kernel_lookup() (the per-task path,
 * which has it: no second look-up); why must not be NULL. */
int kernel_validate_entry(const struct kernel_info *k, const struct hbg_kernel_args *a, uint64_t heap_size,
                          const char **why);

/*
 * kernel_validate() with the numbers: its message, then (where they say
 * more) the values that failed, in f32 elements as graph files count:
 * a tensor past the end of the heap, tensors of different lengths, a
 * shape that does not fit its tensor. Into buf (cut to len); the same
 * return. For answers to a client (validate-only requests), not the
 * scheduler's path: it formats.
 */
int kernel_explain(const struct kernel_info *k, const struct hbg_kernel_args *a, uint64_t heap_size, char *buf,
                   size_t len);
