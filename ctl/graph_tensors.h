/* SPDX-License-Identifier: MIT */
/* A graph file's tensors (ctl/graph_tensors.c), for the compiler
 * (graph_file.c). */
#pragma once

struct plan;

/* "tensors" of the loaded document into p->tensors and p->tensor_index,
 * every error noted (a tensor with errors left out of the index, its
 * name in p->broken_tensors), then the tensors used only through element
 * ranges (p->implicit). 0, or -EINVAL if there was any error. */
int graph_tensors_parse(struct plan *p);
