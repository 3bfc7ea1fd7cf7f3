/* SPDX-License-Identifier: MIT */
/* The built-in kernels' code (kernels_builtin.c). */
#pragma once

#include <stdint.h>

#include "daemon/engine/kernels.h"

/* The definition of built-in kernel id: its signature from kernel_sigs,
 * its code from kernels_builtin.c. 0, or -ENOENT for an id that is not a
 * built-in's. */
int kernel_builtin_def(uint16_t id, struct hbg_kernel_def *def);
