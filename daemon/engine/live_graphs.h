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

/* When hbgd first saw graph record k: slot k & (G-1). Only the
 * thread calling ring_note_graphs()/ring_live_graphs()
 * (hbgd's io thread) touches these (live_graphs.c, §12.5): a ring's
 * (hbg_ring.live). */
struct ring_live_graphs {
        struct graph_seen *seen;
        uint64_t noted;                   /* records below: stamped or retired */
};
size_t live_graphs_seen_bytes(const struct hbg_geometry *g);
