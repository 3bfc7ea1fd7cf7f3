/* SPDX-License-Identifier: MIT */
/*
 * Loading the operator's kernel modules ([kernels] modules, docs/KERNELS.md,
 * docs/SECURITY.md "Kernel modules"): at start, before the engine starts,
 * once. Each module's file is checked (owner, permissions, every directory
 * above it), opened once and loaded from that open file, its
 * hbg_kernel_module_init() called, and every kernel it registers checked
 * by the kernel table (daemon/engine/engine_kernels.h). A module refused for any
 * reason registers nothing.
 */
#pragma once

#include <stddef.h>

/*
 * Load the modules of `list` (absolute paths separated by spaces; "" none)
 * in order. Every problem is one line of err, "kernel module PATH: REASON"
 * (a kernel's name in REASON where there is one); all the modules are
 * tried. 0, or -EINVAL when any was refused. Not thread-safe: call before
 * any scheduler thread runs. A module loaded stays for hbgd's life.
 */
int kernel_modules_load(const char *list, char *err, size_t errlen);
