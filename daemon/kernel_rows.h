/* SPDX-License-Identifier: MIT */
/*
 * hbgd's kernel table as protocol rows (hbg.KernelInfo): every kernel
 * engine_kernel_sig() lists, built-in and from modules, in id order, with
 * its full signature. The one builder of both STATUS_KERNELS and the session
 * reply's table (docs/PROTOCOL.md, "The kernel table"), and the check
 * that the session reply can carry it.
 */
#pragma once

#include <stddef.h>
#include <stdint.h>

#include "hbg.pb-c.h"

/* The rows, in one allocation the caller frees with free(); *ret_rows and
 * *ret_n point into it. NULL: out of memory. */
void *kernel_rows_new(Hbg__KernelInfo ***ret_rows, size_t *ret_n);

/*
 * Whether the table fits a session reply: packed into one with every
 * other field at its largest (what daemon/conn.c sends is no larger), it
 * must not exceed HBG_WIRE_SESSION_REPLY_MAX, the most a client reads.
 * hbgd checks this once its modules are loaded and refuses to start
 * otherwise. 0; -EMSGSIZE with the sizes said in msg; -ENOMEM.
 */
int kernel_rows_check_fit(char *msg, size_t len);

/*
 * The rows packed once for the session replies: hbgd's table does not
 * change once its modules are loaded (before hbgd_new()), and packing it
 * into every reply cost the io thread about 50,000 instructions a
 * connect. Each row is kept as a field in wire form (its number, type,
 * length and bytes), which protobuf-c writes as it is after a message's
 * known fields; a reader cannot tell it from a packed kernels field.
 */
struct kernel_rows_packed {
        uint64_t digest;   /* the table's (kernel_sig_digest()): a session request
                              with it gets no rows, the client has them */
        size_t n;
        ProtobufCMessageUnknownField *fields;
        uint8_t *bytes;
};
/* 0, or -ENOMEM, -EINVAL (nothing held). The rows come out after the reply's
 * other fields, as protobuf-c packs a message's own: kernels is the last
 * field of SessionReply but kernels_by_digest, which is never set beside
 * rows, so the record is byte for byte the same. */
int kernel_rows_pack(struct kernel_rows_packed *p);
void kernel_rows_packed_free(struct kernel_rows_packed *p);
/* r carries p's rows as its kernels (r->kernels itself left empty); p
 * must outlive r's packing. A client whose request gave p's digest
 * (client_digest) has the table already: r says so instead. */
void kernel_rows_attach(const struct kernel_rows_packed *p, uint64_t client_digest, Hbg__SessionReply *r);
