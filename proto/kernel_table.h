/* SPDX-License-Identifier: MIT */
/*
 * The kernel table a client learned from hbgd (docs/PROTOCOL.md, "The
 * kernel table"): every kernel the running hbgd runs, built-in and from
 * modules, as owned copies of their signatures, indexed by id and by name.
 * libhbgclient keeps one per client (from the session reply), hbgctl one
 * per run (from STATUS_KERNELS). The rows come from hbgd and are checked as
 * hostile input: a table that breaks a rule below is refused whole.
 *
 * An hbgd older than protocol 1.3 sends no table: kernel_table_builtin()
 * then takes the compiled-in table (common/kernel_sig.h), and only the
 * built-in kernels this build knows are known.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/kernel_sig.h"
#include "hbg.pb-c.h"

/* The most kernels a table may hold: every built-in id below
 * HBG_KERNEL_MODULE_FIRST and HBG_KERNEL_MODULE_MAX module kernels. */
#define KERNEL_TABLE_MAX (HBG_KERNEL_MODULE_FIRST - 1 + HBG_KERNEL_MODULE_MAX)

struct kernel_table {
        const struct hbg_kernel_sig *const *rows; /* hbgd's, in id order (NULL: the compiled table's) */
        size_t n;
        /* By id: built-ins (id < HBG_KERNEL_MODULE_FIRST) and module
         * kernels (id - HBG_KERNEL_MODULE_FIRST < n_module): one load. */
        const struct hbg_kernel_sig *builtin[HBG_KERNEL_MODULE_FIRST];
        const struct hbg_kernel_sig **module;
        size_t n_module;
        bool from_hbgd;        /* false: the compiled-in table (an older hbgd) */
        void *owned;           /* the copies: one allocation */
};

/*
 * Take hbgd's rows (n of them) as the table: 0, or -EPROTO with *why (a
 * static message, or why[] formatted into buf) saying which row broke
 * which rule:
 *   - at least one row, at most KERNEL_TABLE_MAX;
 *   - ids unique, in id order; a built-in's (module "") from 1 to
 *     HBG_KERNEL_MODULE_FIRST - 1, a module kernel's from
 *     HBG_KERNEL_MODULE_FIRST to HBG_KERNEL_MODULE_FIRST + HBG_KERNEL_MODULE_MAX - 1;
 *   - names [a-z0-9_]{1,31}, unique; argument names [A-Za-z0-9_]{1,31};
 *   - tensors first (kinds in, out, inout, at most HBG_MAX_TENSOR_ARGS),
 *     then scalars (f32, u64, i64, at most HBG_MAX_SCALAR_ARGS);
 *   - a known length rule; summary and rule words
 *     shorter than HBG_KERNEL_TEXT_MAX bytes, module than
 *     HBG_KERNEL_MODULE_TEXT_MAX, each valid UTF-8 without control or format
 *     characters (kernel_sig_text_ok()).
 * On failure *t is left empty (kernel_table_free() is still fine).
 */
int kernel_table_import(struct kernel_table *t, Hbg__KernelInfo *const *rows, size_t n, char *buf, size_t len);
/* The compiled-in table (built-ins only). */
void kernel_table_builtin(struct kernel_table *t);
/* The digest of that table (kernel_sig_digest()), worked out once. */
uint64_t kernel_table_builtin_digest(void);
void kernel_table_free(struct kernel_table *t);

/* Row i (i < t->n), in id order. */
static inline const struct hbg_kernel_sig *kernel_table_at(const struct kernel_table *t, size_t i) {
        return t->rows ? t->rows[i] : kernel_sig_at(i);
}
/* NULL if unknown (0 included). O(1): the producer's per-task path. */
static inline const struct hbg_kernel_sig *kernel_table_by_id(const struct kernel_table *t, uint16_t id) {
        if (id < HBG_KERNEL_MODULE_FIRST)
                return t->builtin[id];
        size_t m = (size_t)id - HBG_KERNEL_MODULE_FIRST;
        return m < t->n_module ? t->module[m] : NULL;
}
/* NULL if unknown or name is NULL. */
const struct hbg_kernel_sig *kernel_table_by_name(const struct kernel_table *t, const char *name);
