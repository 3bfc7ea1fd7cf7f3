/* SPDX-License-Identifier: MIT */
/*
 * The built-in kernel table of hbgd.
 *
 * A task names a kernel per lane by a stable 16-bit id and passes tensors
 * (heap byte ranges with a direction) and raw 64-bit scalars. The daemon
 * copies the arguments into a struct kernel_args, validates the copy once
 * with kernel_validate() against the heap size it trusts, and only then runs
 * the kernel, split into `parts` blocks that may run concurrently and in any
 * order. Every kernel is split-invariant: the heap after all parts ran is
 * bit-identical whatever `parts` is and whatever order the parts ran in.
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

#include "shm/layout.h"

enum hbg_kernel_id {          /* stable ids: part of the protocol, never renumber */
        HBG_KERNEL_NONE = 0,  /* unused lane */
        HBG_KERNEL_NOOP = 1,
        HBG_KERNEL_SPIN_NS = 2,
        HBG_KERNEL_FILL_F32 = 3,
        HBG_KERNEL_COPY_F32 = 4,
        HBG_KERNEL_ADD_F32 = 5,
        HBG_KERNEL_MUL_F32 = 6,
        HBG_KERNEL_AXPY_F32 = 7,
        HBG_KERNEL_SCALE_F32 = 8,
        HBG_KERNEL_REDUCE_SUM_F32 = 9,
        HBG_KERNEL_GEMM_F32 = 10,
        HBG_KERNEL_SOFTMAX_ROWS_F32 = 11,
        HBG_KERNEL_FAIL = 12,
        HBG_KERNEL_COUNT,
};

enum kernel_scalar_kind {
        KERNEL_SCALAR_F32 = 1, /* low 32 bits of the u64 hold an IEEE float; upper 32 zero */
        KERNEL_SCALAR_U64 = 2,
        KERNEL_SCALAR_I64 = 3,
};

/* A validated, daemon-private copy of one task's arguments. */
struct kernel_args {
        uint8_t n_tensors, n_scalars;
        struct hbg_tensor_arg tensors[HBG_MAX_TENSOR_ARGS];
        uint64_t scalars[HBG_MAX_SCALAR_ARGS];
};

struct kernel_info {
        uint16_t id;
        const char *name;
        uint8_t n_tensors;
        uint8_t dirs[HBG_MAX_TENSOR_ARGS];           /* enum hbg_direction */
        const char *tensor_names[HBG_MAX_TENSOR_ARGS];
        uint8_t n_scalars;
        uint8_t scalar_kinds[HBG_MAX_SCALAR_ARGS];   /* enum kernel_scalar_kind */
        const char *scalar_names[HBG_MAX_SCALAR_ARGS];
        bool splittable;   /* false: part 0 does all the work, other parts nothing */
        /* Kernel-specific checks beyond the generic ones (never NULL); only
         * meaningful after the generic checks passed, so call
         * kernel_validate(), not this. 0, or -EINVAL/-ERANGE/-EOVERFLOW with
         * *why set. */
        int (*check)(const struct kernel_args *a, const char **why);
        /* kernel_cost() for one full run of all parts (never NULL). */
        uint64_t (*cost)(const struct kernel_args *a, uint32_t parts);
        /* Run part `part` of `parts` (1 <= parts, part < parts, else -EINVAL)
         * on the heap; arguments must have passed kernel_validate(). Returns
         * 0 or a negative errno. */
        int (*run)(uint8_t *heap, const struct kernel_args *a, uint32_t part, uint32_t parts);
};

/* NULL if unknown (HBG_KERNEL_NONE included). */
const struct kernel_info *kernel_lookup(uint16_t id);
/* NULL if unknown or name is NULL. */
const struct kernel_info *kernel_lookup_name(const char *name);
/* For listing (hbgctl kernels): kernel_at(i) for i < kernel_count(), in id
 * order; NULL past the end. */
size_t kernel_count(void);
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
 *   - no OUT/INOUT tensor overlaps any other tensor           -EINVAL
 *     (IN tensors may overlap each other)
 *   - F32 scalars have the upper 32 bits zero                 -EINVAL
 *   - k->check                                                (kernel's own)
 * Returns 0 or a negative errno with *why (if why is not NULL) a static
 * message starting with the kernel name (*why NULL on success). k must come
 * from kernel_lookup()/kernel_at(); NULL or anything else: -EINVAL.
 */
int kernel_validate(const struct kernel_info *k, const struct kernel_args *a, uint64_t heap_size,
                    const char **why);
