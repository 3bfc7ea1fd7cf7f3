/* SPDX-License-Identifier: MIT */
/*
 * A bounded work-stealing deque of task ids (Chase and Lev's deque, in the
 * C11 form of Lê, Pop, Cohen and Zappa Nardelli, PPoPP 2013, without
 * growth): one per scheduler thread and ring (RUNTIME_LOGIC.md §10.4). The
 * owner pushes and takes at the bottom (newest first); other threads
 * steal at the top (oldest first).
 *
 * Orders. `top` only grows, by CAS (seq_cst), so a cell is taken once.
 * The owner's take (store bottom, then load top) and a thief's steal (load
 * top, then load bottom) are each a store->load or load->load pair that
 * must not be reordered against the other side: all four are seq_cst, so
 * when one task is left either the owner or the thief sees the other and
 * the CAS on top decides. Every store of `bottom` is at least release and
 * a thief's load of it is seq_cst (acquire): whatever the owner wrote
 * before pushing a task (its slot, the cell) happens-before the thief's
 * use of it. A thief may read a cell the owner has since overwritten
 * (the deque wrapped): its CAS on top then fails, as top has moved.
 */
#pragma once

#include <stdalign.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#define WS_DEQUE_CAPACITY 64u

struct ws_deque {
        alignas(64) _Atomic uint64_t bottom;   /* the owner's end */
        alignas(64) _Atomic uint64_t top;      /* the thieves' end */
        _Atomic uint64_t cells[WS_DEQUE_CAPACITY];
};

/* Owner only. false: full (the caller queues the task elsewhere). */
static inline bool ws_push(struct ws_deque *q, uint64_t v) {
        uint64_t b = atomic_load_explicit(&q->bottom, memory_order_relaxed);
        uint64_t t = atomic_load_explicit(&q->top, memory_order_acquire);
        if (b - t >= WS_DEQUE_CAPACITY)
                return false;
        atomic_store_explicit(&q->cells[b % WS_DEQUE_CAPACITY], v, memory_order_relaxed);
        /* Release: the cell and the task's slot reach the thief. */
        atomic_store_explicit(&q->bottom, b + 1, memory_order_release);
        return true;
}

/* Owner only: the newest task, or false if none is left. */
static inline bool ws_take(struct ws_deque *q, uint64_t *ret) {
        uint64_t b = atomic_load_explicit(&q->bottom, memory_order_relaxed);
        /* top <= bottom at all times outside this function and top only
         * grows: a top as large as bottom means empty, even if stale. */
        if (atomic_load_explicit(&q->top, memory_order_relaxed) >= b)
                return false;
        b--;
        atomic_store_explicit(&q->bottom, b, memory_order_seq_cst);
        uint64_t t = atomic_load_explicit(&q->top, memory_order_seq_cst);
        bool got = false;
        if (t <= b) {
                *ret = atomic_load_explicit(&q->cells[b % WS_DEQUE_CAPACITY], memory_order_relaxed);
                got = true;
                if (t == b) {
                        /* The last one: race the thieves for it. */
                        got = atomic_compare_exchange_strong_explicit(&q->top, &t, t + 1, memory_order_seq_cst,
                                                                      memory_order_relaxed);
                        atomic_store_explicit(&q->bottom, b + 1, memory_order_release);
                }
        } else {
                atomic_store_explicit(&q->bottom, b + 1, memory_order_release);
        }
        return got;
}

/* Any other thread: the oldest task, or false if none was taken (empty,
 * or another thread won it). */
static inline bool ws_steal(struct ws_deque *q, uint64_t *ret) {
        uint64_t t = atomic_load_explicit(&q->top, memory_order_seq_cst);
        uint64_t b = atomic_load_explicit(&q->bottom, memory_order_seq_cst);
        if (t >= b || b - t > WS_DEQUE_CAPACITY)
                return false;
        uint64_t v = atomic_load_explicit(&q->cells[t % WS_DEQUE_CAPACITY], memory_order_relaxed);
        if (!atomic_compare_exchange_strong_explicit(&q->top, &t, t + 1, memory_order_seq_cst,
                                                     memory_order_relaxed))
                return false;
        *ret = v;
        return true;
}

/* A hint for wake-up decisions: tasks in the deque now. */
static inline uint64_t ws_size_hint(struct ws_deque *q) {
        uint64_t b = atomic_load_explicit(&q->bottom, memory_order_relaxed);
        uint64_t t = atomic_load_explicit(&q->top, memory_order_relaxed);
        return b > t ? b - t : 0;
}
