/* SPDX-License-Identifier: MIT */
/* retire.c: graph retirement (RUNTIME_LOGIC.md §12.1), and failing a
 * ring's graphs when it stops (§12.2). */
#pragma once

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "daemon/engine/engine_stats.h"
#include "daemon/engine/histogram.h"
#include "shm/layout.h"

struct hbg_ring;

/* Graph retirement, combining lock (§12.1): a ring's (hbg_ring.retirer,
 * starting a cache line). */
struct ring_retire {
        _Atomic uint32_t pending;
        _Atomic uint32_t lock;
        uint64_t next;                    /* next record number to retire */
        uint64_t expected_first;
        bool have;                        /* cur holds a validated copy */
        struct hbg_graph_record cur;
        _Atomic uint64_t graphs_seen;     /* graphs_submitted as last read by the retirer */
        /* The watermark at which the next graph the retirer knows of
         * retires (its last id + 1); 0: none known, every move must ask.
         * Written under the retire lock (relaxed), read by completers
         * (relaxed): a hint whose every stored value is at most the true
         * one while its graph is unretired (§12.1). */
        _Atomic uint64_t at;
        _Atomic uint64_t graphs_failed;
        /* Metrics (engine_metrics), written under the retire lock:
         * graph records noticed so far (the next record number to notice),
         * when each one in the graph ring was noticed (CLOCK_MONOTONIC ns,
         * entry n & (graph_table_entries - 1)), the time from there to
         * retirement of every retired graph, and failed graphs by errno.
         * The times are also read by hbgd's io thread (ring_live_graphs):
         * each is stored with release before graphs_noticed passes it
         * (release), and an entry is stored again for record k + G only
         * after graphs_retired passed k (an earlier retirement pass); the
         * reader loads both with acquire. One exception: failing a broken
         * ring's graphs (retire.c, fail_graphs_locked) notices and retires
         * in one pass, so a client that keeps raising graphs_submitted
         * meanwhile can make the reader see record k + G's time for k: a
         * wrong start of its own in-flight graph in its own trace, nothing
         * else. */
        _Atomic uint64_t graphs_noticed;
        _Atomic int64_t *graph_noticed_ns;
        struct hbg_histogram graph_latency;
        _Atomic uint64_t graphs_failed_by_errno[HBG_ERRNO_SLOTS];
};

/* After this thread moved the watermark, must it look at the
 * graphs (a graph or a producer waiting for window space it reached)? */
bool retire_due(struct hbg_ring *r);
/* Retire the graphs the watermark passed; tell the client. Any thread. */
void retire_graphs(struct hbg_ring *r);
/* Stop the ring on an error (the first reason wins, logged): it serves
 * nothing more and every graph it holds is retired as failed. */
void retire_fail(struct hbg_ring *r, int code, uint64_t task, const char *why);
/* retire_fail() without the warning (a session that ended normally): mark
 * the ring broken and fail its pending graphs. Any thread. */
void retire_fail_quietly(struct hbg_ring *r, int code);
/* The last retirement, once no scheduler thread can touch the ring any
 * more: every graph left fails with code. */
void retire_stopped(struct hbg_ring *r, int code);
