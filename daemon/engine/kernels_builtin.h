/* SPDX-License-Identifier: MIT */
/* The built-in kernels' code (kernels_builtin.c). */
#pragma once

#include <stdint.h>

#include "daemon/engine/kernels.h"

/* The definition of built-in kernel id: its signature from kernel_sigs,
 * its code from kernels_builtin.c. 0, or -ENOENT for an id that is not a
 * built-in's. */
int kernel_builtin_def(uint16_t id, struct hbg_kernel_def *def);

/* gemm_f32's arithmetic for rows [lo, hi) of C (C += A B, row-major, A m x
 * k, B k x n), checking ctx as the run contract says: the benchmarks call
 * it for the same tile work on every system. A, B and C must not overlap.
 * 0, or the check's error (C then holds part of the result). */
int kernel_gemm_f32_rows(struct hbg_kernel_ctx *ctx, const float *restrict A, const float *restrict B,
                         float *restrict C, uint64_t n, uint64_t k, uint64_t lo, uint64_t hi);
