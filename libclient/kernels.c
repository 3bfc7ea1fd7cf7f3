/* SPDX-License-Identifier: MIT */
/*
 * The kernels of the hbgd a client is connected to: the table of its
 * session reply (proto/kernel_table.h checks and copies it), or the
 * built-ins of this build when hbgd is older than protocol 1.3; names
 * resolved and kernels listed through it (hbg_client_kernel_*).
 */
#include <errno.h>
#include <string.h>

#include "libclient/client_private.h"
#include "libclient/errors.h"
#include "libclient/kernels.h"
#include "proto/wire.h"

/* The public enums are the table's values. */
_Static_assert((int)HBG_IN == (int)HBG_DIR_IN && (int)HBG_OUT == (int)HBG_DIR_OUT &&
               (int)HBG_INOUT == (int)HBG_DIR_INOUT, "directions");
_Static_assert((int)HBG_SCALAR_TYPE_F32 == (int)HBG_SCALAR_F32 && (int)HBG_SCALAR_TYPE_U64 == (int)HBG_SCALAR_U64 &&
               (int)HBG_SCALAR_TYPE_I64 == (int)HBG_SCALAR_I64, "scalar kinds");
_Static_assert((int)HBG_LENGTH_RULE_ANY == (int)HBG_LENGTH_ANY && (int)HBG_LENGTH_RULE_EQUAL == (int)HBG_LENGTH_EQUAL &&
               (int)HBG_LENGTH_RULE_SHAPE == (int)HBG_LENGTH_SHAPE, "length rules");

/* The first protocol minor version whose hbgd sends its kernel table. */
#define KERNEL_TABLE_MINOR 3u

int hbgc_kernels_take(hbg_client *c, const Hbg__SessionReply *r) {
        if (r->kernels_by_digest && r->n_kernels == 0) {
                /* hbgd's table has our built-in table's digest: it is that
                 * table, and needs no checks (connect.c sent the digest). */
                kernel_table_builtin(&c->kernels);
                c->kernels.from_hbgd = true;
                return 0;
        }
        if (r->n_kernels == 0) {
                if (c->hbgd_minor >= KERNEL_TABLE_MINOR)
                        return hbgc_fail(NULL, -EPROTO, "hbgd speaks protocol %u.%u but sent no kernel table",
                                         HBG_PROTO_MAJOR, c->hbgd_minor);
                kernel_table_builtin(&c->kernels);
                return 0;
        }
        char why[256];
        if (kernel_table_import(&c->kernels, r->kernels, r->n_kernels, why, sizeof(why)) < 0)
                return hbgc_fail(NULL, -EPROTO, "%s", why);
        return 0;
}

const struct hbg_kernel_sig *hbgc_kernel_by_name(hbg_client *c, const char *name, const char *fn) {
        const struct hbg_kernel_sig *k = kernel_table_by_name(&c->kernels, name);
        if (k)
                return k;
        if (c->kernels.from_hbgd)
                hbgc_fail(c, -ENOENT, "%s: unknown kernel '%.64s' (hbgd runs %zu kernels; hbgctl kernels lists "
                          "them)", fn, name ? name : "(null)", c->kernels.n);
        else
                hbgc_fail(c, -ENOENT, "%s: unknown kernel '%.64s': hbgd speaks protocol %u.%u, which does not "
                          "send its kernel table (this libhbgclient %s speaks %u.%u), so only the %zu built-in "
                          "kernels this library knows can be named", fn, name ? name : "(null)", HBG_PROTO_MAJOR,
                          c->hbgd_minor, HBG_VERSION, HBG_PROTO_MAJOR, HBG_PROTO_MINOR, c->kernels.n);
        return NULL;
}

/* The table is read-only from connect to disconnect: these calls take no
 * lock and work from host functions too. */

HBG_EXPORT int hbg_client_kernel_id(hbg_client *c, const char *name) {
        if (!c || !name)
                return c ? hbgc_fail(c, -EINVAL, "hbg_client_kernel_id: name is NULL") : -EINVAL;
        const struct hbg_kernel_sig *k = hbgc_kernel_by_name(c, name, "hbg_client_kernel_id");
        return k ? k->id : -ENOENT;
}

HBG_EXPORT size_t hbg_client_kernel_count(hbg_client *c) {
        return c ? c->kernels.n : 0;
}

HBG_EXPORT int hbg_client_kernel_info(hbg_client *c, size_t i, hbg_kernel_desc *ret) {
        if (!c)
                return -EINVAL;
        /* The first version of the struct is the smallest one accepted; a
         * later library writes only the fields a caller's size covers. */
        if (!ret || ret->size < sizeof(hbg_kernel_desc))
                return hbgc_fail(c, -EINVAL, "hbg_client_kernel_info: ret is NULL or its size is not set "
                                 "(HBG_KERNEL_DESC_INIT)");
        if (i >= c->kernels.n)
                return hbgc_fail(c, -ENOENT, "hbg_client_kernel_info: kernel %zu of %zu", i, c->kernels.n);
        const struct hbg_kernel_sig *k = kernel_table_at(&c->kernels, i);
        hbg_kernel_desc d = {
                .size = ret->size, /* the caller's: fields past ours stay as they were */
                .id = k->id,
                .name = k->name,
                .summary = k->summary,
                .module = k->module,
                .n_tensors = k->n_tensors,
                .n_scalars = k->n_scalars,
                .length = (enum hbg_length_rule_kind)k->length,
                .length_rule = k->length_rule,
                .in_place = k->in_place,
                .splittable = k->splittable,
        };
        for (unsigned a = 0; a < k->n_tensors; a++) {
                d.tensor_names[a] = k->tensors[a].name;
                d.tensor_dirs[a] = (enum hbg_dir)k->tensors[a].dir;
        }
        for (unsigned a = 0; a < k->n_scalars; a++) {
                d.scalar_names[a] = k->scalars[a].name;
                d.scalar_types[a] = (enum hbg_scalar_type)k->scalars[a].kind;
        }
        memcpy(ret, &d, sizeof(d));
        return 0;
}
