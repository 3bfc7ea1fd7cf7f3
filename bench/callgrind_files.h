/* SPDX-License-Identifier: MIT */
/*
 * A callgrind profile's instructions by source file: each function's own
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
