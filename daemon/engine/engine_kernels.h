/* SPDX-License-Identifier: MIT */
/*
 * The engine's kernel table as hbgd's io side sees it: loading the
 * operator's modules into it (daemon/kernel_modules.c) and listing its
 * kernels' signatures (the session reply, status, metrics). The table
 * itself, and how a kernel runs, is daemon/engine/kernels.h.
 */
#pragma once

#include <stddef.h>
#include <stdint.h>

#include "common/kernel_sig.h"

struct hbg_kernel_def;

/* Module kernels one hbgd loads: its own cap, within the protocol's
 * HBG_KERNEL_MODULE_MAX (the module ids a client accepts,
 * common/kernel_sig.h). The session reply may hold fewer: hbgd also
 * refuses to start when the table would not fit it (daemon/kernel_rows.h). */
#define KERNEL_MODULE_MAX 256u
_Static_assert(KERNEL_MODULE_MAX <= HBG_KERNEL_MODULE_MAX, "hbgd's module kernels must be ids clients accept");

/* How many kernels there are; the signature of the i-th in id order
 * (NULL past the end): the built-ins, then the modules' kernels (ids
 * HBG_KERNEL_MODULE_FIRST up, in load order). */
size_t kernel_count(void);
const struct hbg_kernel_sig *engine_kernel_sig(size_t i);

/*
 * Registration (kernels.c): the built-ins at program start, modules'
 * kernels while hbgd loads them (daemon/kernel_modules.c), before any
 * scheduler thread runs; the table is read-only afterwards. The first
 * module kernel gets id HBG_KERNEL_MODULE_FIRST, the next one more.
 */
/* Check def (made for api_version) and add it as a kernel of `module` (a
 * path, kept by the caller for hbgd's lifetime). 0, or a negative errno
 * with the reason in why (naming the kernel where there is one). */
int kernel_register(const struct hbg_kernel_def *def, uint32_t api_version, const char *module, char *why,
                    size_t len);
/* How many module kernels there are; kernel_unregister_to(n) drops those
 * registered after the count was n (a module refused part way). */
size_t kernel_module_kernels(void);
void kernel_unregister_to(size_t n);
