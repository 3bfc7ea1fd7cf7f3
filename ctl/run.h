/* SPDX-License-Identifier: MIT */
/* `hbgctl run FILE` (ctl/run.c): a graph file compiled and run via
 * libhbgclient. */
#pragma once

#include <stdint.h>

#include "ctl/ctl.h"

int cmd_run(const struct ctl_opts *o, const char *file);
/* "1048576", "64K", "80M", "1G" (binary suffixes) into *ret; -EINVAL if
 * not a size (--heap, --window). */
int run_parse_size(const char *s, uint64_t *ret);
