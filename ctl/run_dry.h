/* SPDX-License-Identifier: MIT */
/* hbgctl run --dry-run and --dot: a graph file compiled without a session
 * and, for --dry-run, its tasks validated by hbgd (ctl/run_dry.c). */
#pragma once

#include <stdint.h>

#include "ctl/ctl.h"
#include "ctl/graph_file.h"

/* Pass 2 of the graph file: every task as an hbg_task, before the run
 * (those with errors of pass 1 left out, as zero tasks), for the run and
 * the dry run. Every error noted; -EINVAL if any (-ENOMEM: no room). */
int run_compile(struct plan *p);
/* The tensors laid out as hbg_tensor_alloc() would (64-byte aligned, in
 * file order) in an empty heap; the bytes they take. */
uint64_t run_dry_layout(struct plan *p);
/* The dry run (or --dot) of a compiled plan: its exit status. */
int run_dry(const struct ctl_opts *o, struct plan *p, int64_t compile_ns);
