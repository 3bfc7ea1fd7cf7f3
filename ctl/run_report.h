/* SPDX-License-Identifier: MIT */
/* hbgctl run's failures as it reports them, on stderr and with --json
 * (ctl/run_report.c). */
#pragma once

#include "ctl/graph_file.h"

/* With --json: {"status": "error", "error": {code, exit, message, name}}
 * from the last ctl_error(); "name" the task's. */
void run_fail_json(int exit_code, const char *task);
/* A failure of the run (code: a negative errno or 0): EXIT_FAIL. */
int run_fail_code(struct plan *p, int code, const char *msg, const char *task);
int run_fail(struct plan *p, const char *msg, const char *task);
/* Every noted error of the file on stderr, one a line, in file order,
 * then how many there are with `unlisted` more (tasks hbgd refused beyond
 * what its reply listed); exit_code. */
int run_print_errors(struct plan *p, int exit_code, uint64_t unlisted);
/* The file's errors as the JSON answer of a run that did not start:
 * EXIT_FAIL. */
int run_file_errors(struct plan *p);
