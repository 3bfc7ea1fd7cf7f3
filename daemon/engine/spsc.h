/* SPDX-License-Identifier: MIT */
/*
 * Bounded single-producer single-consumer queue of 64-bit values: the
 * hand-off of finished task ids from one scheduler thread to the resolver
 * thread (completion policy "resolver", RUNTIME_LOGIC.md §11.3). The cells
 * are a lazy zero mapping; the cursors sit on their own lines.
 */
#pragma once

#include <errno.h>
#include <stdalign.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "daemon/engine/lazy_alloc.h"

struct spsc {
        alignas(64) _Atomic uint64_t tail;   /* written by the producer */
        alignas(64) _Atomic uint64_t head;   /* written by the consumer */
        uint64_t *cells;
        uint64_t mask;
};

/* capacity: a power of two. 0 or -ENOMEM. */
static inline int spsc_init(struct spsc *q, uint64_t capacity) {
        q->cells = lazy_zalloc(capacity * sizeof(*q->cells));
        if (!q->cells)
                return -ENOMEM;
        q->mask = capacity - 1;
        atomic_store_explicit(&q->tail, 0, memory_order_relaxed);
        atomic_store_explicit(&q->head, 0, memory_order_relaxed);
        return 0;
}

/* Accepts a queue spsc_init() never set up (zeroed). */
static inline void spsc_destroy(struct spsc *q) {
        if (q->cells)
                lazy_free(q->cells, (q->mask + 1) * sizeof(*q->cells));
        q->cells = NULL;
}

/*
 * Producer. The value is written, then the tail published: seq_cst, so
 * that the producer's later look at whether the consumer sleeps and the
 * consumer's "say I sleep; look at the tails" cannot both miss (a
 * store->load pair on each side, RUNTIME_LOGIC.md §11.3); as a release it
 * also hands the value (and the task's effects) over. false: full.
 */
static inline bool spsc_push(struct spsc *q, uint64_t value) {
        uint64_t t = atomic_load_explicit(&q->tail, memory_order_relaxed);
        if (t - atomic_load_explicit(&q->head, memory_order_acquire) > q->mask)
                return false;
        q->cells[t & q->mask] = value;
        atomic_store_explicit(&q->tail, t + 1, memory_order_seq_cst);
        return true;
}

/* Consumer: acquire pairs with the producer's tail store; the head is
 * released so the producer may reuse the cell. */
static inline bool spsc_pop(struct spsc *q, uint64_t *ret) {
        uint64_t h = atomic_load_explicit(&q->head, memory_order_relaxed);
        if (h == atomic_load_explicit(&q->tail, memory_order_acquire))
                return false;
        *ret = q->cells[h & q->mask];
        atomic_store_explicit(&q->head, h + 1, memory_order_release);
        return true;
}

/* The consumer's look before it sleeps (seq_cst: the other half of the
 * pair described at spsc_push()). */
static inline bool spsc_nonempty_seq_cst(struct spsc *q) {
        return atomic_load_explicit(&q->tail, memory_order_seq_cst) !=
               atomic_load_explicit(&q->head, memory_order_relaxed);
}
