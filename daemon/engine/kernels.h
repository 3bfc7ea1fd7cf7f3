/* SPDX-License-Identifier: MIT */
/*
 * The built-in kernels' code: run, check and cost, attached to the shared
 * signature table (shm/kernel_sig.h), which says what each kernel takes.
 *
 * A task names a kernel per lane by its stable id and passes tensors (heap
 * byte ranges with a direction) and raw 64-bit scalars. The daemon copies
 * the arguments into a struct kernel_args, validates the copy once with
 * kernel_validate() against the heap size it trusts, and only then runs
 * the kernel, split into `parts` blocks that may run concurrently and in any
 * order. Every kernel is split-invariant: the heap after all parts ran is
 * bit-identical whatever `parts` is and whatever order the parts ran in.
 * Kernels that may run in place (an output the very range of an input)
 * read each element before writing it and carry no `restrict`.
 *
 * Errors: -EINVAL wrong signature or shape, -ERANGE a value outside its
 * range (a tensor outside the heap included), -EOVERFLOW an offset or size
 * computation overflowing 64 bits. Every message is static and starts with
 * the kernel name.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "shm/kernel_sig.h"
#include "shm/layout.h"

/* A validated, daemon-private copy of one task's arguments. */
struct kernel_args {
        uint8_t n_tensors, n_scalars;
        struct hbg_tensor_arg tensors[HBG_MAX_TENSOR_ARGS];
        uint64_t scalars[HBG_MAX_SCALAR_ARGS];
};

struct kernel_info {
        const struct hbg_kernel_sig *sig;
        /* Kernel-specific checks beyond the generic ones (never NULL); only
         * meaningful after the generic checks passed, so call
         * kernel_validate(), not this. 0, or -EINVAL/-ERANGE/-EOVERFLOW with
         * *ret_msg the index of the reason in check_msgs. */
        int (*check)(const struct kernel_args *a, unsigned *ret_msg);
        const char *const *check_msgs;  /* reasons, without the kernel name */
        unsigned n_check_msgs;
        /* Run part `part` of `parts` (1 <= parts, part < parts, else -EINVAL)
         * on the heap; arguments must have passed kernel_validate(). Returns
         * 0 or a negative errno. */
        int (*run)(uint8_t *heap, const struct kernel_args *a, uint32_t part, uint32_t parts);
        /* kernel_cost() for one full run of all parts (never NULL). */
        uint64_t (*cost)(const struct kernel_args *a, uint32_t parts);
};

/* NULL if unknown (HBG_KERNEL_NONE included). */
const struct kernel_info *kernel_lookup(uint16_t id);
/* NULL if unknown or name is NULL. */
const struct kernel_info *kernel_lookup_name(const char *name);
/* In id order: kernel_at(i) for i < kernel_count(); NULL past the end. */
size_t kernel_count(void);
const struct kernel_info *kernel_at(size_t i);

/* gemm_f32's arithmetic for rows [lo, hi) of C (C += A B, row-major, A m x
 * k, B k x n): the benchmarks call it for the same tile work on every
 * system. A, B and C must not overlap. */
void kernel_gemm_f32_rows(const float *restrict A, const float *restrict B, float *restrict C, uint64_t n,
                          uint64_t k, uint64_t lo, uint64_t hi);

/*
 * The work of a task running kernel k on arguments a (already validated)
 * as `parts` parts, in cost units: one unit is about one element operation
 * (a multiply-add of gemm_f32, one element of an elementwise kernel) or one
 * nanosecond of spin_ns, so 2^30 units are roughly a second of one core.
 * Split kernels cost the same whatever `parts` is; spin_ns spins in every
 * part. Saturates at UINT64_MAX. hbgd refuses a task whose cost exceeds
 * its per-task limit (docs/SECURITY.md).
 */
uint64_t kernel_cost(const struct kernel_info *k, const struct kernel_args *a, uint32_t parts);
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
int kernel_validate(const struct kernel_info *k, const struct kernel_args *a, uint64_t heap_size,
                    const char **why);
