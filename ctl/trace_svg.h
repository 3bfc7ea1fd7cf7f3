/* SPDX-License-Identifier: MIT */
/* `hbgctl trace --svg` (ctl/trace_svg.c): the timeline drawn as SVG. */
#pragma once

#include <stddef.h>

struct trace_data;

/* The timeline as an SVG document (malloc()ed, *ret_len bytes); NULL:
 * out of memory. */
char *trace_svg(const struct trace_data *t, size_t *ret_len);
