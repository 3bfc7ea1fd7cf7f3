/* SPDX-License-Identifier: MIT */
/*
 * The built-in kernels' signatures: the one table both sides read.
 *
 * Each entry says what a task naming the kernel must pass: its tensors (name
 * and direction), its scalars (name and how the 64 raw bits are read), how
 * tensor lengths relate, and whether an output may be the very same range
 * as an input (in place). hbgd validates every task against it (and adds
 * the kernels' code, daemon/engine/kernels.c); libhbgclient resolves names and
 * refuses malformed tasks early with it; the graph-file compiler and
 * `hbgctl kernels` read it; the kernel list of libhbgclient(3) is checked
 * against it by a test. Ids are stable: part of the protocol.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "shm/layout.h"

enum hbg_kernel_id {          /* stable ids: never renumber */
        HBG_KERNEL_NONE = 0,  /* unused lane */
        HBG_KERNEL_NOOP = 1,
        HBG_KERNEL_SPIN_NS = 2,
        HBG_KERNEL_FILL_F32 = 3,
        HBG_KERNEL_COPY_F32 = 4,
        HBG_KERNEL_ADD_F32 = 5,
        HBG_KERNEL_MUL_F32 = 6,
        HBG_KERNEL_AXPY_F32 = 7,
        HBG_KERNEL_SCALE_F32 = 8,
        HBG_KERNEL_REDUCE_SUM_F32 = 9,
        HBG_KERNEL_GEMM_F32 = 10,
        HBG_KERNEL_SOFTMAX_ROWS_F32 = 11,
        HBG_KERNEL_FAIL = 12,
        HBG_KERNEL_TIMESTAMP_NS = 13,
        HBG_KERNEL_COUNT,
};

/* Kernels of operator-loaded modules (docs/KERNELS.md) get ids from here
 * up, in load order, fixed for the life of one hbgd; ids between the
 * built-ins' and this one stay free for future built-ins. */
#define HBG_KERNEL_MODULE_FIRST 256u
/* The protocol's most module kernels: ids below FIRST + MAX. Clients refuse
 * a kernel table beyond it (proto/kernel_table.h); an hbgd loads at most
 * its own cap, no more than this (KERNEL_MODULE_MAX, 256 today:
 * daemon/engine/kernels.h), so a client accepts the table of any hbgd of
 * this protocol and of one raising its cap up to here. */
#define HBG_KERNEL_MODULE_MAX 1024u

enum hbg_scalar_kind {
        HBG_SCALAR_F32 = 1, /* low 32 bits hold an IEEE float; upper 32 zero */
        HBG_SCALAR_U64 = 2,
        HBG_SCALAR_I64 = 3,
};

/* How tensor lengths relate (each checked on top of "inside the heap,
 * 4-byte aligned, not empty"). */
enum hbg_length_rule {
        HBG_LENGTH_ANY = 0,     /* no relation */
        HBG_LENGTH_EQUAL = 1,   /* every tensor exactly as long as the last (the output) */
        HBG_LENGTH_SHAPE = 2,   /* at least what the scalar shape needs (the kernel's check) */
};

struct hbg_kernel_sig {
        uint16_t id;
        const char *name;
        const char *summary;          /* what it computes, one line */
        bool splittable;              /* false: hbgd runs a task of it as one part */
        uint8_t n_tensors;
        struct {
                const char *name;
                uint8_t dir;          /* enum hbg_direction */
        } tensors[HBG_MAX_TENSOR_ARGS];
        uint8_t n_scalars;
        struct {
                const char *name;
                uint8_t kind;         /* enum hbg_scalar_kind */
        } scalars[HBG_MAX_SCALAR_ARGS];
        enum hbg_length_rule length;
        /* true: an output may be the same range (offset and length) as an
         * input: the kernel reads each element before writing it. Any other
         * overlap of an output with another tensor is refused. */
        bool in_place;
        const char *length_rule;      /* the rule in words, for docs and errors */
        const char *module;           /* the module that defines it; NULL: built-in */
};

/* The table, indexed by id - 1. */
extern const struct hbg_kernel_sig kernel_sigs[HBG_KERNEL_COUNT - 1];

/* The rules of the kernel table's texts, one for hbgd registering a
 * kernel and for a client importing hbgd's table (docs/PROTOCOL.md): a
 * summary or length rule is shorter than HBG_KERNEL_TEXT_MAX bytes, a
 * module's name (its path) than HBG_KERNEL_MODULE_TEXT_MAX, and each is
 * valid UTF-8 without control characters (protobuf strings must be UTF-8,
 * and hbgctl prints them). */
#define HBG_KERNEL_TEXT_MAX 512u
#define HBG_KERNEL_MODULE_TEXT_MAX 4096u
/* [a-z0-9_]{1,31}; with capitals, an argument's name ([A-Za-z0-9_]{1,31}).
 * false for NULL. */
bool kernel_sig_name_ok(const char *s, bool capitals);
/* The name graph files give a task that runs nothing (docs/GRAPH_FILES.md):
 * no kernel may take it, or no graph file could call that kernel. */
#define HBG_KERNEL_NAME_DUMMY "dummy"
/* Shorter than max bytes, valid UTF-8, no control or format characters
 * (text_is_plain()); false for NULL. */
bool kernel_sig_text_ok(const char *s, size_t max);

/* NULL if unknown (HBG_KERNEL_NONE included) or name is NULL. */
const struct hbg_kernel_sig *kernel_sig_by_id(uint16_t id);
const struct hbg_kernel_sig *kernel_sig_by_name(const char *name);
/* In id order: at(i) for i < kernel_sig_count(); NULL past the end. */
size_t kernel_sig_count(void);
const struct hbg_kernel_sig *kernel_sig_at(size_t i);
/*
 * A kernel table's digest, row by row in id order: h = kernel_sig_digest(h,
 * row) from KERNEL_SIG_DIGEST_START, then kernel_sig_digest_end(h, rows).
 * Every field a client keeps goes in (FNV-1a's multiply over them, 8
 * bytes at a time, strings with their length, NULL as ""), so two tables
 * share a digest only by chance (or by a module author's design: modules
 * are the administrator's, and a client that trusted a wrong table hurts
 * only its own graphs, which hbgd checks against its own table). A
 * client sends its built-in table's in its session request, and hbgd
 * whose own table has it sends no rows (docs/PROTOCOL.md, "The kernel
 * table"). Never 0.
 */
#define KERNEL_SIG_DIGEST_START 0xcbf29ce484222325ull
uint64_t kernel_sig_digest(uint64_t h, const struct hbg_kernel_sig *k);
uint64_t kernel_sig_digest_end(uint64_t h, size_t rows);

/* "add_f32(in a, in b, out out)" into buf; returns buf. */
const char *kernel_sig_usage(const struct hbg_kernel_sig *k, char *buf, size_t len);
/* "in", "out", "inout", "f32", "u64", "i64". */
const char *kernel_sig_dir_name(uint8_t dir);
const char *kernel_sig_scalar_kind_name(uint8_t kind);

/* One tensor argument as both sides see it: offset and length in bytes. */
struct hbg_kernel_tensor {
        uint64_t offset, length;
};

enum hbg_kernel_tensor_problem {
        HBG_TENSORS_OK = 0,
        HBG_TENSORS_OVERLAP,     /* output *i overlaps tensor *j, not identically
                                    (or identically where in_place is false) */
        HBG_TENSORS_LENGTH,      /* tensor *i's length breaks the length rule
                                    (relative to tensor *j) */
};

/*
 * The rules between a task's tensors, for kernel k (n == k->n_tensors,
 * ranges already known to lie inside the heap): overlaps and the EQUAL
 * length rule (SHAPE is the kernel's own check). Returns
 * HBG_TENSORS_OK, or the problem with the two argument indexes.
 */
enum hbg_kernel_tensor_problem kernel_sig_check_tensors(const struct hbg_kernel_sig *k,
                                                        const struct hbg_kernel_tensor *t,
                                                        unsigned *ret_i, unsigned *ret_j);
