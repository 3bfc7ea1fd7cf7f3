/* SPDX-License-Identifier: MIT */
/*
 * Reading callgrind profiles: a whole profile's total, one function's
 * inclusive cost, and the instructions by source file: each function's own
 * cost (Ir) counted under the file that defines it (its `fl=`), code
 * inlined into it from headers included, the inclusive cost of the calls
 * it makes left out. The files' sums add up to the profile's total.
 */
#pragma once

#include <stddef.h>
#include <stdint.h>

struct cg_file_cost {
        char *name;             /* as the profile names it */
        uint64_t ir;
};

struct cg_files {
        struct cg_file_cost *v;
        size_t n;
        uint64_t total;         /* the profile's summary (or totals) line */
};

/* Read the callgrind out file at path into *ret (cg_files_free() it).
 * 0, -errno, or -EPROTO if it is not a profile with Ir as its first
 * event. */
int cg_files_read(const char *path, struct cg_files *ret);
void cg_files_free(struct cg_files *f);

/* The total instruction count (Ir) of a callgrind out file; 0 if none. */
uint64_t cg_profile_total(const char *path);
/* The inclusive Ir of function fn in a callgrind out file (one event,
 * Ir): its own cost, inlined parts from other files included, plus that
 * of the calls it makes (but not to itself); 0 if fn is not there. */
uint64_t cg_function_inclusive(const char *path, const char *fn);
