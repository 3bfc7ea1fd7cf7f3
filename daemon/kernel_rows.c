/* SPDX-License-Identifier: MIT */
/* hbgd's kernel table as protocol rows (daemon/kernel_rows.h). */
#include "daemon/kernel_rows.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "common/kernel_sig.h"
#include "daemon/engine/engine_kernels.h"
#include "proto/wire.h"

/* The protocol's length rule for the table's (the values are the same;
 * a table, not a cast, so that a new rule is added on both sides). */
static const Hbg__KernelLength lengths[] = {
        [HBG_LENGTH_ANY] = HBG__KERNEL_LENGTH__LENGTH_ANY,
        [HBG_LENGTH_EQUAL] = HBG__KERNEL_LENGTH__LENGTH_EQUAL,
        [HBG_LENGTH_SHAPE] = HBG__KERNEL_LENGTH__LENGTH_SHAPE,
};

/* The strings point into the signatures, which live as long as hbgd (a
 * module is never unloaded). */
void *kernel_rows_new(Hbg__KernelInfo ***ret_rows, size_t *ret_n) {
        size_t nk = kernel_count(), max_args = nk * (HBG_MAX_TENSOR_ARGS + HBG_MAX_SCALAR_ARGS);
        size_t bytes = nk * (sizeof(Hbg__KernelInfo) + sizeof(Hbg__KernelInfo *)) +
                       max_args * (sizeof(Hbg__KernelArg) + sizeof(Hbg__KernelArg *));
        char *mem = calloc(1, bytes ? bytes : 1);
        if (!mem)
                return NULL;
        Hbg__KernelInfo *ks = (Hbg__KernelInfo *)mem;
        Hbg__KernelArg *ka = (Hbg__KernelArg *)(ks + nk);
        Hbg__KernelInfo **ksp = (Hbg__KernelInfo **)(ka + max_args);
        Hbg__KernelArg **kap = (Hbg__KernelArg **)(ksp + nk);
        size_t na = 0;
        for (size_t i = 0; i < nk; i++) {
                const struct hbg_kernel_sig *k = engine_kernel_sig(i);
                Hbg__KernelInfo *r = &ks[i];
                hbg__kernel_info__init(r);
                r->id = k->id;
                r->name = (char *)k->name;
                r->summary = (char *)(k->summary ? k->summary : "");
                r->module = (char *)(k->module ? k->module : "");
                r->splittable = k->splittable;
                r->in_place = k->in_place;
                r->length = lengths[k->length];
                r->length_rule = (char *)(k->length_rule ? k->length_rule : "");
                r->args = &kap[na];
                for (unsigned j = 0; j < k->n_tensors + k->n_scalars; j++, na++) {
                        bool t = j < k->n_tensors;
                        hbg__kernel_arg__init(&ka[na]);
                        ka[na].name = (char *)(t ? k->tensors[j].name : k->scalars[j - k->n_tensors].name);
                        ka[na].kind = (char *)(t ? kernel_sig_dir_name(k->tensors[j].dir)
                                                 : kernel_sig_scalar_kind_name(k->scalars[j - k->n_tensors].kind));
                        kap[na] = &ka[na];
                        r->n_args++;
                }
                ksp[i] = r;
        }
        *ret_rows = ksp;
        *ret_n = nk;
        return mem;
}

int kernel_rows_check_fit(char *msg, size_t len) {
        Hbg__SessionReply r = HBG__SESSION_REPLY__INIT;
        void *rows = kernel_rows_new(&r.kernels, &r.n_kernels);
        if (!rows)
                return -ENOMEM;
        /* Every number at its longest varint. */
        r.session_id = r.task_window = r.flag_window = r.heap_size = r.mailbox_entries = UINT64_MAX;
        r.graph_table_entries = r.sub_region_size = r.cpl_region_size = r.first_id = UINT64_MAX;
        r.stall_timeout_ms = UINT64_MAX;
        r.fds = UINT32_MAX;
        Hbg__Envelope env = HBG__ENVELOPE__INIT;
        env.msg_case = HBG__ENVELOPE__MSG_SESSION_REPLY;
        env.session_reply = &r;
        size_t packed = hbg__envelope__get_packed_size(&env), n = r.n_kernels;
        free(rows);
        if (packed <= HBG_WIRE_SESSION_REPLY_MAX)
                return 0;
        snprintf(msg, len,
                 "the kernel table (%zu kernels, %zu from modules) packs to %zu bytes in the session reply; a "
                 "client reads at most %u bytes: load fewer module kernels (or ones with shorter summaries, "
                 "argument names and module paths)",
                 n, kernel_module_kernels(), packed, (unsigned)HBG_WIRE_SESSION_REPLY_MAX);
        return -EMSGSIZE;
}

/* A varint's bytes (protobuf's base-128, least significant group first). */
static size_t varint(uint64_t v, uint8_t *out) {
        size_t n = 0;
        for (; v >= 0x80; v >>= 7)
                out[n++] = (uint8_t)(v | 0x80);
        out[n++] = (uint8_t)v;
        return n;
}

int kernel_rows_pack(struct kernel_rows_packed *p) {
        *p = (struct kernel_rows_packed){ 0 };
        const ProtobufCFieldDescriptor *f =
                protobuf_c_message_descriptor_get_field_by_name(&hbg__session_reply__descriptor, "kernels");
        if (!f)
                return -EINVAL; /* proto/hbg.proto without it: cannot be */
        Hbg__KernelInfo **rows;
        size_t n, bytes = 0;
        void *mem = kernel_rows_new(&rows, &n);
        if (!mem)
                return -ENOMEM;
        for (size_t i = 0; i < n; i++)
                bytes += 10 + hbg__kernel_info__get_packed_size(rows[i]);
        p->fields = calloc(n ? n : 1, sizeof(*p->fields));
        p->bytes = malloc(bytes ? bytes : 1);
        if (!p->fields || !p->bytes) {
                free(mem);
                kernel_rows_packed_free(p);
                return -ENOMEM;
        }
        uint8_t *at = p->bytes;
        uint64_t digest = KERNEL_SIG_DIGEST_START;
        for (size_t i = 0; i < n; i++)
                digest = kernel_sig_digest(digest, engine_kernel_sig(i));
        p->digest = kernel_sig_digest_end(digest, n);
        for (size_t i = 0; i < n; i++) {
                /* A length-delimited field's data begins with its length. */
                size_t len = hbg__kernel_info__get_packed_size(rows[i]), k = varint(len, at);
                hbg__kernel_info__pack(rows[i], at + k);
                p->fields[i] = (ProtobufCMessageUnknownField){ .tag = f->id,
                                                               .wire_type = PROTOBUF_C_WIRE_TYPE_LENGTH_PREFIXED,
                                                               .len = k + len,
                                                               .data = at };
                at += k + len;
        }
        p->n = n;
        free(mem);
        return 0;
}

void kernel_rows_packed_free(struct kernel_rows_packed *p) {
        free(p->fields);
        free(p->bytes);
        *p = (struct kernel_rows_packed){ 0 };
}

void kernel_rows_attach(const struct kernel_rows_packed *p, uint64_t client_digest, Hbg__SessionReply *r) {
        r->kernels = NULL;
        r->n_kernels = 0;
        r->kernels_by_digest = client_digest != 0 && client_digest == p->digest;
        r->base.n_unknown_fields = r->kernels_by_digest ? 0 : (unsigned)p->n;
        r->base.unknown_fields = r->kernels_by_digest ? NULL : p->fields;
}
