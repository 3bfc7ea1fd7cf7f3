/* SPDX-License-Identifier: MIT */
/* run --dot: a compiled graph file in Graphviz form. */
#pragma once

#include <stddef.h>
#include <stdio.h>

#include "ctl/graph_file.h"

/* Write the compiled plan (p->compiled, deps as file indices) as a dot
 * digraph: tasks with name and kernel, edges for the explicit and the
 * derived dependencies (the client library's rules). 0 or -errno (with
 * *ret_edges the number of edges written). */
int dot_write(struct plan *p, FILE *f, size_t *ret_edges);
