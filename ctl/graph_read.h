/* SPDX-License-Identifier: MIT */
/* Reading a graph file's values (ctl/graph_read.c): where a value is, its
 * errors, numbers and tensor references; for the compiler (graph_file.c).
 * And the plan's errors and the file's name, for the compiler and for
 * what reports them (run, dry run, dot): noted here, below the compiler,
 * since every value read may note one. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <json-c/json.h>

#include "hbg/hbg.h"

struct plan;

/* The file's name in messages ("<stdin>" for "-"). */
const char *graph_file_name(const struct plan *p);
/* Note an error at a JSON path ("by": who found it, "hbgctl" or "hbgd"):
 * every one is kept in p->errors, the first also in p->err. */
void graph_file_error(struct plan *p, const char *path, const char *msg, const char *by);
size_t graph_file_n_errors(const struct plan *p);
/* A tensor reference ("x", "x[2:5]") as a tensor; -EINVAL after noting
 * its error. */
int graph_file_ref(struct plan *p, const char *s, const char *path, bool single, hbg_tensor *ret);

/*
 * Where a value is in the file, as an error says it: a path as text, or
 * member `key` of task `task` ("$.tasks[3].after"; NULL: the task
 * itself), its element `index` unless NO_INDEX ("$.tasks[3].after[1]").
 * Put into words only for an error: formatting the path of every task
 * value read cost more than parsing the document.
 */
struct jpath {
        const char *text;
        size_t task;
        const char *key;
        size_t index;
};
#define NO_INDEX SIZE_MAX
#define AT_TEXT(s) (&(const struct jpath){ .text = (s) })
#define AT_TASK(i, k) (&(const struct jpath){ .task = (i), .key = (k), .index = NO_INDEX })
#define AT_ELEM(i, k, x) (&(const struct jpath){ .task = (i), .key = (k), .index = (x) })

/* An error of the file at its JSON path: kept (every one is reported),
 * the first also in p->err. Returns -EINVAL. */
int graph_read_error(struct plan *p, const struct jpath *at, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* A JSON value's type as an error says it ("null" for none). */
const char *graph_read_type_name(json_object *o);
/* Key k's place in the NULL-terminated list keys (that of the NULL when
 * it is not there). */
size_t graph_read_key_index(const char *const *keys, const char *k);
/* Keys of object o must be among the NULL-terminated list. */
int graph_read_check_keys(struct plan *p, json_object *o, const struct jpath *at, const char *const *keys);
int graph_read_number(struct plan *p, json_object *o, const struct jpath *at, double *ret);
int graph_read_uint(struct plan *p, json_object *o, const struct jpath *at, uint64_t max, uint64_t *ret);
/* "name" or "name[lo:hi]" (elements) or, with single, "name[i]". */
int graph_read_ref(struct plan *p, const char *s, const struct jpath *at, bool single, hbg_tensor *ret);
