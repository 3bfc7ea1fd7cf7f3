/* SPDX-License-Identifier: MIT */
/* cancel.c: cancelled graphs (RUNTIME_LOGIC.md §12.6): the table a ring
 * holds, the checks, the status. */
#pragma once

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "shm/layout.h"

/* A cancelled graph (§12.6): record `number`, ids first..last, the
 * message its cancelled tasks and its entry carry. Free once the graph's
 * entry is published (cancel_prune), so the message outlives every
 * failure record that points to it. */
#define RING_CANCELS 8u
#define CANCEL_COUNT 0xffu                /* ring_cancels.word: entries in use */
#define CANCEL_GENERATION 0x100u          /* ring_cancels.word: one change */
struct ring_cancel {
        bool used;
        uint64_t number, first, last;
        char why[HBG_GRAPH_MESSAGE_MAX];
};

/* A ring's cancels (§12.6, hbg_ring.cancel): the table under cold_lock;
 * word is CANCEL_COUNT (entries in use) in its low bits and a generation
 * above, bumped on every change of the table. Stored under
 * cold_lock (relaxed: a reader that acts on it takes the lock),
 * read relaxed before every task runs and by running kernels as
 * their stop word. Read-mostly, beside removing and broken (the ring
 * keeps it there). */
struct ring_cancels {
        _Atomic uint32_t word;
        struct ring_cancel table[RING_CANCELS];
        /* cold_lock: graphs whose status is decided (set by
         * cancel_status_locked() as failures_graph_status() decides one,
         * read by ring_cancel_graph()). */
        uint64_t graphs_decided;
};

struct hbg_ring;
struct failure;

/* cancel_find: the message of a cancel covering id,
 * or NULL (takes cold_lock: call only when the cancel word counts entries).
 * cancel_applies: kernel_run_ctx_filter()'s filter, arg a struct
 * cancel_watch. cancel_status_locked: graph `number` [first, last]
 * is being decided (cold_lock held): if it was cancelled and *f holds no
 * real failure, *f becomes the cancel. cancel_prune: free the
 * entries of published graphs (retire lock held). */
struct cancel_watch {
        struct hbg_ring *r;
        uint64_t id;
};
const char *cancel_find(struct hbg_ring *r, uint64_t id);
bool cancel_applies(void *arg);
void cancel_status_locked(struct hbg_ring *r, uint64_t number, uint64_t first, struct failure *f,
                          bool real);
void cancel_prune(struct hbg_ring *r, uint64_t published);
