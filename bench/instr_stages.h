/* SPDX-License-Identifier: MIT */
/*
 * The comparison's instructions per task by stage (docs/PERFORMANCE.md,
 * "Instructions by stage"): a process's callgrind profile split by the
 * source file of each function (bench/callgrind_files.h), the files
 * grouped into the stages of a task's path (RUNTIME_LOGIC.md §10-§12 for
 * hbgd; adding, dependencies and the descriptor for the producer).
 * Code inlined from a header counts in the stage of the function it was
 * inlined into; a C library call counts in "other".
 */
#pragma once

#include <stdint.h>

#include "bench/callgrind_files.h"

struct instr_stage {
        const char *name;               /* a word: the column and the metric's suffix */
        /* Source files, matched at the end of the profile's path ("ready.c"
         * matches ".../daemon/engine/ready.c"); a name ending in '/' is a
         * directory anywhere in the path. NULL-terminated. */
        const char *const *files;
};

/* One process's stages; the last is "other", every file the others do
 * not name (so the stages add up to the process's total). */
struct instr_stages {
        const char *process;            /* "hbgd", "producer" */
        const struct instr_stage *v;
        unsigned n;
};

#define INSTR_STAGES_MAX 12

extern const struct instr_stages instr_stages_hbgd, instr_stages_producer;

/* The stage of s a profile's file name falls in (s->n - 1: other). */
unsigned instr_stage_of(const struct instr_stages *s, const char *file);

/* Per task, stage by stage: (run - base) / (tasks - 1) into out[0..s->n),
 * as the totals are worked out (bench/compare_instr.c). */
void instr_stages_per_task(const struct instr_stages *s, const struct cg_files *run, const struct cg_files *base,
                           uint64_t tasks, double *out);
