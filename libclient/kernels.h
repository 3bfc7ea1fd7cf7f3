/* SPDX-License-Identifier: MIT */
/* libclient/kernels.c for the other files of libhbgclient: hbgd's kernel table: names, signatures. */
#pragma once

#include "libclient/client_private.h"

/* The kernel table of session reply r into c->kernels (the built-ins when
 * hbgd is older than protocol 1.3): 0, or -EPROTO with the message (a
 * table that breaks proto/kernel_table.h's rules, or none from an hbgd
 * that should send one). */
struct Hbg__SessionReply;
int hbgc_kernels_take(hbg_client *c, const struct Hbg__SessionReply *r);
/* Kernel `name` of c's table, or NULL with c's last error saying why
 * (prefixed with fn). */
const struct hbg_kernel_sig *hbgc_kernel_by_name(hbg_client *c, const char *name, const char *fn);
