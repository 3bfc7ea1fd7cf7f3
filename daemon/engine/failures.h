/* SPDX-License-Identifier: MIT */
/* failures.c: the failure list of a ring (RUNTIME_LOGIC.md §12.2), below
 * the stages that write it (complete.c) and read it (retire.c); and the
 * failed ids' tags (inline), which ready.c reads for a task's fanins. */
#pragma once

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

struct hbg_ring;

/* Failed or skipped ids (§12.2): entry id & mask (2D-1) holds id + 1.
 * A ring's (hbg_ring.fail.tags): tagged as a task fails (complete.c),
 * looked up for a fanin as a task is made ready (ready.c). */
struct failure_tags {
        _Atomic uint64_t *entries;
        uint64_t mask;
};

/* Task id failed or was skipped. Before its stamp (release there,
 * acquire by whoever sees the task complete): a dependant checks this
 * entry. */
static inline void failures_tag(struct failure_tags *ft, uint64_t id) {
        atomic_store_explicit(&ft->entries[id & ft->mask], id + 1, memory_order_relaxed);
}

/* The completion region's failed_high raised to v (a failed or skipped
 * task's id + 1; UINT64_MAX once the ring is stopped), never lowered.
 * Relaxed: a task's raise comes before its stamp's release store, which
 * is what orders it for a client that sees the watermark past the task
 * (RUNTIME_LOGIC §12.2); a later raise only makes it higher. */
static inline void failures_raise_high(_Atomic uint64_t *high, uint64_t v) {
        uint64_t cur = atomic_load_explicit(high, memory_order_relaxed);
        while (cur < v && !atomic_compare_exchange_weak_explicit(high, &cur, v, memory_order_relaxed,
                                                                 memory_order_relaxed))
                ;
}

/* Did complete producer f fail (or was it skipped)? The table answers
 * for every f >= WM - D. */
static inline bool failures_tagged(const struct failure_tags *ft, uint64_t f) {
        return atomic_load_explicit(&ft->entries[f & ft->mask], memory_order_acquire) == f + 1;
}

/* Failure record (§12.2): the kernel is the one named when the task
 * failed (its slot may be reused before its graph retires). why: static
 * (or, from failures_graph_status(), a refusal's detail in the ring's
 * buffer for the retirer, valid until its next call); NULL when the
 * kernel returned the error (the graph's message is then "kernel NAME
 * returned -EIO"). */
struct failure {
        uint64_t id;
        int32_t code;
        uint16_t kernel;
        const char *why;
};

/* Task id failed with `code` (or was skipped, -ECANCELED). Any thread. */
void failures_record(struct hbg_ring *r, uint64_t id, int code, uint16_t kernel, const char *why);

/* The numbers behind a refused task's `why` (validate_explain()), which
 * only the thread that refused it can work out (the slot's copy of its
 * arguments is gone once it completes). The ring keeps them for the
 * lowest FAILURE_DETAILS ids of graphs not yet decided, in a table
 * allocated at its first refusal; a graph whose status is that task's
 * failure says them instead of `why`. Any thread, before the task
 * completes. */
#define FAILURE_DETAILS 64u
/* Longer than a graph entry's message: hbgd's log line says it whole. */
#define FAILURE_DETAIL_MAX 256u
struct failure_detail {
        uint64_t id_plus_1;            /* 0: free */
        char text[FAILURE_DETAIL_MAX];
};
void failures_record_detail(struct hbg_ring *r, uint64_t id, const char *text);
/* The reason of a graph whose failure the full list did not keep, but
 * the failure tags show (failures_graph_status()). */
#define FAILURE_NOT_KEPT "a task failed or was skipped, not kept: more failed tasks awaited their graphs than hbgd keeps"
/* The status of graph `number` [first, last]: its lowest real failure,
 * else its cancel (§12.6), else its lowest skipped task (-ECANCELED), in
 * *ret (its why the failure's detail, if one was kept: then in the ring's
 * buffer for the retirer, valid until its next call). Entries of the
 * graph are dropped. */
int failures_graph_status(struct hbg_ring *r, uint64_t number, uint64_t first, uint64_t last, struct failure *ret);

/* A ring's failures (hbg_ring.fail), under its cold_lock but where said. */
struct ring_failures {
        struct failure *list;
        struct failure_tags tags;         /* failed or skipped ids: no lock (failure_tags) */
        uint32_t n;
        uint32_t max;
        uint32_t hi;                      /* the highest id's entry, when known */
        bool hi_known;
        /* Failures the full list did not keep (failures.c): the lowest
         * one whole, and the highest id; none while !dropped. */
        bool dropped;
        struct failure dropped_low;
        uint64_t dropped_hi;
        /* Refusals' numbers (failures_record_detail()), under cold_lock,
         * and the copy of the one a graph's status takes (its retirer's,
         * under the retire lock). */
        struct failure_detail *details;   /* NULL until a refusal's */
        uint32_t n_details;               /* entries in use */
        char detail_out[FAILURE_DETAIL_MAX];
};
