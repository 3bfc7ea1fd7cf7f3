/* SPDX-License-Identifier: MIT */
/*
 * hbgd's kernel table as protocol rows (hbg.KernelInfo): every kernel
 * kernel_at() lists, built-in and from modules, in id order, with its full
 * signature. The one builder of both STATUS_KERNELS and the session
 * reply's table (docs/PROTOCOL.md, "The kernel table").
 */
#pragma once

#include <stddef.h>

#include "hbg.pb-c.h"

/* The rows, in one allocation the caller frees with free(); *ret_rows and
 * *ret_n point into it. NULL: out of memory. */
void *kernel_rows_new(Hbg__KernelInfo ***ret_rows, size_t *ret_n);
