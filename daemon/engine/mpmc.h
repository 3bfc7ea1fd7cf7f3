/* SPDX-License-Identifier: MIT */
/*
 * Bounded multi-producer multi-consumer queue of 64-bit values (D. Vyukov's
 * design: a sequence number per cell, enqueue and dequeue cursors on their
 * own cache lines). Used for the per-ring ready and retire queues; each
 * queue has capacity >= the ring's task window and a task sits in at most
 * one queue at a time, so the queue is never full by count
 * (RUNTIME_LOGIC.md §10.4).
 */
#pragma once

#include <stdalign.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <sched.h>
#include <stdlib.h>


/* Vyukov's cell sequence, stored relative to the cell's index (seq - i),
 * so that an all-zero cell array is an empty queue: no initialisation
 * pass over the cells, which are allocated lazily. */
struct mpmc_cell {
        _Atomic uint64_t seq;
        uint64_t value;
};

struct mpmc {
        struct mpmc_cell *cells;
        uint64_t mask;
        alignas(64) _Atomic uint64_t enqueue_pos;
        alignas(64) _Atomic uint64_t dequeue_pos;
};

/* capacity must be a power of two; cells: capacity zeroed cells (a lazy
 * array: zero pages until used), owned by the caller. */
static inline void mpmc_init(struct mpmc *q, struct mpmc_cell *cells, uint64_t capacity) {
        q->cells = cells;
        q->mask = capacity - 1;
        atomic_store_explicit(&q->enqueue_pos, 0, memory_order_relaxed);
        atomic_store_explicit(&q->dequeue_pos, 0, memory_order_relaxed);
}

/* The absolute sequence of cell i (its relative encoding above). */
static inline uint64_t mpmc_seq_load(struct mpmc *q, struct mpmc_cell *cell, memory_order order) {
        return atomic_load_explicit(&cell->seq, order) + (uint64_t)(cell - q->cells);
}

static inline void mpmc_seq_store(struct mpmc *q, struct mpmc_cell *cell, uint64_t seq,
                                  memory_order order) {
        atomic_store_explicit(&cell->seq, seq - (uint64_t)(cell - q->cells), order);
}

/*
 * A cell is free for the producer at position pos when its seq == pos, and
 * full for the consumer at pos when seq == pos + 1. The cursor CAS only
 * reserves the position (relaxed); the value is handed over by the release
 * store of seq and the acquire load on the other side.
 */
static inline bool mpmc_push(struct mpmc *q, uint64_t value) {
        uint64_t pos = atomic_load_explicit(&q->enqueue_pos, memory_order_relaxed);
        struct mpmc_cell *cell;

        for (;;) {
                cell = &q->cells[pos & q->mask];
                uint64_t seq = mpmc_seq_load(q, cell, memory_order_acquire);
                int64_t diff = (int64_t)(seq - pos);
                if (diff == 0) {
                        if (atomic_compare_exchange_weak_explicit(&q->enqueue_pos, &pos, pos + 1,
                                                                  memory_order_relaxed,
                                                                  memory_order_relaxed))
                                break;
                } else if (diff < 0) {
                        /* The cell of the previous lap is not released yet.
                         * Full by count: refuse. Otherwise a consumer has
                         * claimed it (its dequeue CAS is done) and is about
                         * to release it, needing nothing from anyone: wait
                         * for it (it may be preempted, so yield). */
                        uint64_t deq = atomic_load_explicit(&q->dequeue_pos, memory_order_relaxed);
                        if (pos - deq > q->mask)
                                return false;
                        sched_yield();
                        pos = atomic_load_explicit(&q->enqueue_pos, memory_order_relaxed);
                } else {
                        pos = atomic_load_explicit(&q->enqueue_pos, memory_order_relaxed);
                }
        }
        cell->value = value;
        mpmc_seq_store(q, cell, pos + 1, memory_order_release);
        return true;
}

static inline bool mpmc_pop(struct mpmc *q, uint64_t *ret_value) {
        uint64_t pos = atomic_load_explicit(&q->dequeue_pos, memory_order_relaxed);
        struct mpmc_cell *cell;

        for (;;) {
                cell = &q->cells[pos & q->mask];
                uint64_t seq = mpmc_seq_load(q, cell, memory_order_acquire);
                int64_t diff = (int64_t)(seq - (pos + 1));
                if (diff == 0) {
                        if (atomic_compare_exchange_weak_explicit(&q->dequeue_pos, &pos, pos + 1,
                                                                  memory_order_relaxed,
                                                                  memory_order_relaxed))
                                break;
                } else if (diff < 0) {
                        return false; /* empty */
                } else {
                        pos = atomic_load_explicit(&q->dequeue_pos, memory_order_relaxed);
                }
        }
        *ret_value = cell->value;
        mpmc_seq_store(q, cell, pos + q->mask + 1, memory_order_release);
        return true;
}

/* Entries queued, as a hint (stale by the time the caller acts on it). */
static inline uint64_t mpmc_size_hint(struct mpmc *q) {
        uint64_t enq = atomic_load_explicit(&q->enqueue_pos, memory_order_relaxed);
        uint64_t deq = atomic_load_explicit(&q->dequeue_pos, memory_order_relaxed);
        return enq > deq ? enq - deq : 0;
}

/* A hint: may be stale by the time the caller acts on it. */
static inline bool mpmc_maybe_nonempty(struct mpmc *q) {
        return atomic_load_explicit(&q->enqueue_pos, memory_order_relaxed) !=
               atomic_load_explicit(&q->dequeue_pos, memory_order_relaxed);
}
