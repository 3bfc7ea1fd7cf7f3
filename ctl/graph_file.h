/* SPDX-License-Identifier: MIT */
/* The graph-file compiler (docs/GRAPH_FILES.md): a JSON document checked
 * as a whole, then turned into hbg_tasks. Errors are noted in the plan
 * (every one, at its JSON path: graph_read.h) and returned as -EINVAL. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <json-c/json.h>

#include "hbg/hbg.h"
#include "proto/kernel_table.h"

enum { INIT_ZERO, INIT_FILL, INIT_IOTA };

/* A tensor's length, in elements, at most. */
#define GRAPH_TENSOR_MAX_LEN (UINT64_C(1) << 36)

struct gtensor {
        const char *name;
        uint64_t len;
        int init;
        double value, start, step;
        hbg_tensor t;   /* offset valid once allocated */
};

struct plan {
        const char *file;            /* "-": standard input */
        /* The kernels names are checked against: the running hbgd's
         * (STATUS_KERNELS), or the built-ins of this build, kernels_note
         * saying why (an unknown kernel's error quotes it). */
        struct kernel_table kernels;
        char kernels_note[256];
        json_object *root, *tasks, *outputs;
        struct gtensor *tensors;
        size_t n_tensors, cap_tensors;
        json_object *tensor_index;   /* name -> index */
        json_object *implicit;       /* tensors used only through ranges, not declared: name -> length */
        json_object *task_index;     /* task name -> task index */
        size_t n_tasks;
        bool resolved;               /* pass 2: tensors allocated */
        hbg_task *compiled;          /* pass 2: every task, deps as file indices */
        uint64_t *ids;               /* task index -> id, as they are added */
        bool *bad;                   /* task index -> has an error (pass 1, then 2) */
        json_object *errors;         /* every error: [{path, message, by}], NULL none */
        json_object *broken_tensors; /* names of tensors with errors */
        char err[512];               /* the first error, "FILE: PATH: message" */
};

/* A graph file on standard input may be at most this long. */
#define GRAPH_FILE_STDIN_MAX ((size_t)64 << 20)

/* Read and parse the file (p->file; "-" reads standard input, at most
 * GRAPH_FILE_STDIN_MAX bytes); 0, or a negative errno with p->err set. */
int graph_file_load(struct plan *p);
/* Check the whole document and index tensors and tasks, every error
 * noted (a task's first); -EINVAL if there was any. */
int graph_file_parse(struct plan *p);
/* Does the loaded file name a kernel p->kernels does not have (before
 * graph_file_parse(); a malformed document: false, parse says why)? */
bool graph_file_names_unknown_kernel(const struct plan *p);
/* Task i as an hbg_task (tensors allocated: with the kernel's rules
 * between its tensors checked), its deps the file indices of earlier
 * tasks; -EINVAL after noting its error. */
int graph_file_task(struct plan *p, size_t i, hbg_task *t);
/* The task's "name", or "tasks[i]". */
const char *graph_file_task_name(struct plan *p, size_t i, char *buf, size_t sz);
void graph_file_free(struct plan *p);
