/* SPDX-License-Identifier: MIT */
/* live_graphs.c: when hbgd first saw each graph (RUNTIME_LOGIC.md §12.5). */
#pragma once

#include <stddef.h>
#include <stdint.h>

struct hbg_geometry;

struct graph_seen {
        uint64_t number_plus_1;           /* whose stamp: record number + 1 */
        int64_t ms;                       /* CLOCK_MONOTONIC */
};
size_t live_graphs_seen_bytes(const struct hbg_geometry *g);
