/* SPDX-License-Identifier: MIT */
/* The kernel table learned from hbgd (proto/kernel_table.h): checked, copied,
 * indexed. */
#include "proto/kernel_table.h"

#include <errno.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The kinds an argument may have, tensors' then scalars' (the names are
 * common/kernel_sig.c's). */
static const uint8_t tensor_dirs[] = { HBG_DIR_IN, HBG_DIR_OUT, HBG_DIR_INOUT };
static const uint8_t scalar_kinds[] = { HBG_SCALAR_F32, HBG_SCALAR_U64, HBG_SCALAR_I64 };

/* The value whose name is kind, 0 if none. */
static uint8_t kind_of(const char *kind, const uint8_t *values, size_t n, const char *(*name)(uint8_t)) {
        for (size_t i = 0; i < n; i++)
                if (strcmp(kind, name(values[i])) == 0)
                        return values[i];
        return 0;
}

static const char *str(const char *s) {
        return s ? s : "";
}

static int refuse(char *buf, size_t len, size_t row, const Hbg__KernelInfo *k, const char *fmt, ...)
        __attribute__((format(printf, 5, 6)));
static int refuse(char *buf, size_t len, size_t row, const Hbg__KernelInfo *k, const char *fmt, ...) {
        char why[160];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(why, sizeof(why), fmt, ap);
        va_end(ap);
        if (k)
                snprintf(buf, len, "hbgd's kernel table, row %zu (id %u): %s", row, k->id, why);
        else
                snprintf(buf, len, "hbgd's kernel table: %s", why);
        return -EPROTO;
}

/* Row k's rules (kernel_table_import()); the bytes its strings take. */
static int check_row(size_t i, const Hbg__KernelInfo *k, uint32_t prev_id, size_t *strings, char *buf, size_t len) {
        const char *name = str(k->name), *module = str(k->module);
        bool builtin = module[0] == 0;
        if (!kernel_sig_name_ok(name, false))
                return refuse(buf, len, i, k, "kernel name is not [a-z0-9_]{1,31}");
        if (builtin ? k->id == 0 || k->id >= HBG_KERNEL_MODULE_FIRST
                    : k->id < HBG_KERNEL_MODULE_FIRST || k->id >= HBG_KERNEL_MODULE_FIRST + HBG_KERNEL_MODULE_MAX)
                return refuse(buf, len, i, k, "id out of range for a %s kernel (%u to %u)",
                              builtin ? "built-in" : "module", builtin ? 1u : HBG_KERNEL_MODULE_FIRST,
                              builtin ? HBG_KERNEL_MODULE_FIRST - 1 : HBG_KERNEL_MODULE_FIRST + HBG_KERNEL_MODULE_MAX - 1);
        if (k->id <= prev_id)
                return refuse(buf, len, i, k, "ids are not unique and in increasing order");
        if (!kernel_sig_text_ok(str(k->summary), HBG_KERNEL_TEXT_MAX) || !kernel_sig_text_ok(str(k->length_rule), HBG_KERNEL_TEXT_MAX) ||
            !kernel_sig_text_ok(module, HBG_KERNEL_MODULE_TEXT_MAX))
                return refuse(buf, len, i, k, "summary, length rule or module too long, not UTF-8 or with control characters");
        if (k->length != HBG__KERNEL_LENGTH__LENGTH_ANY && k->length != HBG__KERNEL_LENGTH__LENGTH_EQUAL &&
            k->length != HBG__KERNEL_LENGTH__LENGTH_SHAPE)
                return refuse(buf, len, i, k, "unknown length rule %d", (int)k->length);
        if (k->n_args > HBG_MAX_TENSOR_ARGS + HBG_MAX_SCALAR_ARGS)
                return refuse(buf, len, i, k, "%zu arguments", k->n_args);
        unsigned nt = 0, ns = 0;
        size_t bytes = strlen(name) + strlen(str(k->summary)) + strlen(str(k->length_rule)) + strlen(module) + 4;
        for (size_t a = 0; a < k->n_args; a++) {
                const Hbg__KernelArg *arg = k->args[a];
                if (!kernel_sig_name_ok(str(arg->name), true))
                        return refuse(buf, len, i, k, "argument %zu: name is not [A-Za-z0-9_]{1,31}", a);
                const char *kind = str(arg->kind);
                if (kind_of(kind, tensor_dirs, sizeof(tensor_dirs), kernel_sig_dir_name)) {
                        if (ns || ++nt > HBG_MAX_TENSOR_ARGS)
                                return refuse(buf, len, i, k, "argument %zu: a tensor after a scalar, or more "
                                              "than %u tensors", a, HBG_MAX_TENSOR_ARGS);
                } else if (kind_of(kind, scalar_kinds, sizeof(scalar_kinds), kernel_sig_scalar_kind_name)) {
                        if (++ns > HBG_MAX_SCALAR_ARGS)
                                return refuse(buf, len, i, k, "more than %u scalars", HBG_MAX_SCALAR_ARGS);
                } else {
                        return refuse(buf, len, i, k, "argument %zu: unknown kind", a);
                }
                bytes += strlen(arg->name) + 1;
        }
        *strings += bytes;
        return 0;
}

/* A kernel name's slot: [a-z0-9_]{1,31} and its NUL. */
#define NAME_SLOT 32u
_Static_assert(NAME_SLOT % 16 == 0 && NAME_SLOT >= 31 + 1, "a name and its NUL fit a slot");

/* s into the string area at *at; the copy. */
static const char *copy_str(char **at, const char *s) {
        size_t n = strlen(s) + 1;
        char *p = *at;
        memcpy(p, s, n);
        *at += n;
        return p;
}

/* Index t->rows by id and name (the rows are checked). */
static void index_rows(struct kernel_table *t) {
        memset(t->builtin, 0, sizeof(t->builtin));
        for (size_t i = 0; i < t->n; i++) {
                const struct hbg_kernel_sig *s = kernel_table_at(t, i);
                if (s->id < HBG_KERNEL_MODULE_FIRST)
                        t->builtin[s->id] = s;
                else
                        t->module[s->id - HBG_KERNEL_MODULE_FIRST] = s;
        }
}

int kernel_table_import(struct kernel_table *t, Hbg__KernelInfo *const *rows, size_t n, char *buf, size_t len) {
        *t = (struct kernel_table){ 0 };
        if (n == 0 || n > KERNEL_TABLE_MAX)
                return refuse(buf, len, 0, NULL, "%zu kernels (1 to %u)", n, KERNEL_TABLE_MAX);
        size_t strings = 0;
        uint32_t prev = 0;
        for (size_t i = 0; i < n; i++) {
                int err = check_row(i, rows[i], prev, &strings, buf, len);
                if (err < 0)
                        return err;
                prev = rows[i]->id;
        }
        /* Names unique: n^2 / 2 compares once per connect (n is small;
         * the lookups after are by id, or by name with a cache). */
        for (size_t i = 0; i < n; i++)
                for (size_t j = 0; j < i; j++)
                        if (strcmp(rows[i]->name, rows[j]->name) == 0)
                                return refuse(buf, len, i, rows[i], "name '%s' is also row %zu's", rows[i]->name, j);
        size_t n_module = prev >= HBG_KERNEL_MODULE_FIRST ? prev - HBG_KERNEL_MODULE_FIRST + 1 : 0;
        /* One allocation: the names, each in a 32-byte slot of its own
         * (hbg_graph_add() compares the name a task gives with its last
         * kernel's: a slot never crosses a page, so the vector strcmp
         * takes its short path), signatures, row pointers, the module
         * index, the other strings. */
        size_t names = n * NAME_SLOT;
        size_t bytes = names + n * sizeof(struct hbg_kernel_sig) + (n + n_module) * sizeof(void *) + strings;
        char *mem = aligned_alloc(NAME_SLOT, (bytes + NAME_SLOT - 1) / NAME_SLOT * NAME_SLOT);
        if (!mem)
                return refuse(buf, len, 0, NULL, "out of memory for %zu kernels", n);
        memset(mem, 0, bytes);
        char *name_at = mem;
        struct hbg_kernel_sig *sigs = (struct hbg_kernel_sig *)(mem + names);
        const struct hbg_kernel_sig **ptrs = (const struct hbg_kernel_sig **)(sigs + n);
        char *at = (char *)(ptrs + n + n_module);
        for (size_t i = 0; i < n; i++) {
                const Hbg__KernelInfo *k = rows[i];
                struct hbg_kernel_sig *s = &sigs[i];
                s->id = (uint16_t)k->id;
                s->name = memcpy(name_at + i * NAME_SLOT, k->name, strlen(k->name) + 1);
                s->summary = copy_str(&at, str(k->summary));
                s->length_rule = copy_str(&at, str(k->length_rule));
                s->module = str(k->module)[0] ? copy_str(&at, k->module) : NULL;
                s->splittable = k->splittable;
                s->in_place = k->in_place;
                s->length = (enum hbg_length_rule)k->length;
                for (size_t a = 0; a < k->n_args; a++) {
                        const char *kind = k->args[a]->kind;
                        uint8_t dir = kind_of(kind, tensor_dirs, sizeof(tensor_dirs), kernel_sig_dir_name);
                        if (dir) {
                                s->tensors[s->n_tensors].name = copy_str(&at, k->args[a]->name);
                                s->tensors[s->n_tensors++].dir = dir;
                        } else {
                                s->scalars[s->n_scalars].name = copy_str(&at, k->args[a]->name);
                                s->scalars[s->n_scalars++].kind =
                                        kind_of(kind, scalar_kinds, sizeof(scalar_kinds), kernel_sig_scalar_kind_name);
                        }
                }
                ptrs[i] = s;
        }
        t->owned = mem;
        t->rows = ptrs;
        t->n = n;
        t->module = ptrs + n;
        t->n_module = n_module;
        t->from_hbgd = true;
        index_rows(t);
        return 0;
}

void kernel_table_builtin(struct kernel_table *t) {
        *t = (struct kernel_table){ .n = kernel_sig_count() };
        index_rows(t);
}

uint64_t kernel_table_builtin_digest(void) {
        /* Any thread may work it out; all get the same value. Relaxed:
         * the value is the whole of what is shared. */
        static _Atomic uint64_t done;
        uint64_t h = atomic_load_explicit(&done, memory_order_relaxed);
        if (h)
                return h;
        h = KERNEL_SIG_DIGEST_START;
        for (size_t i = 0; i < kernel_sig_count(); i++)
                h = kernel_sig_digest(h, kernel_sig_at(i));
        h = kernel_sig_digest_end(h, kernel_sig_count());
        atomic_store_explicit(&done, h, memory_order_relaxed);
        return h;
}

void kernel_table_free(struct kernel_table *t) {
        free(t->owned);
        *t = (struct kernel_table){ 0 };
}

const struct hbg_kernel_sig *kernel_table_by_name(const struct kernel_table *t, const char *name) {
        if (!name)
                return NULL;
        for (size_t i = 0; i < t->n; i++)
                if (strcmp(kernel_table_at(t, i)->name, name) == 0)
                        return kernel_table_at(t, i);
        return NULL;
}
