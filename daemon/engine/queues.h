/* SPDX-License-Identifier: MIT */
/* queues.c: the primitives the completion path's stages share, below all
 * of them: the wake lists' two halves (RUNTIME_LOGIC.md §10.2), a
 * thread's continuation and the deques (§10.4). The ready queues and the
 * retire queue themselves are struct hbg_ring's (mpmc.h). */
#pragma once

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "daemon/engine/engine_state.h"
#include "daemon/engine/ring.h"

enum wake_result { WAKE_REGISTERED, WAKE_PRODUCER_DONE };

/*
 * Push consumer slot `s` on the wake list of producer `f` (§10.2). The
 * head carries f's lap, so a list that has passed to a later occupant is
 * never written: the CAS fails and the lap tells us f is done.
 */
static inline enum wake_result queues_wake_register(struct hbg_ring *r, uint64_t f, struct task_slot *s) {
        struct task_slot *p = ring_slot(r, f);
        uint32_t lap = ring_lap(r, f);
        uint32_t link = (uint32_t)((s->id & r->task_mask) + 1);
        uint64_t h = atomic_load_explicit(&p->wake_head, memory_order_acquire);
        unsigned spins = 0;

        for (;;) {
                uint32_t hl = (uint32_t)(h >> 32);
                if (hl == lap) {
                        s->next_link = (uint32_t)h;
                        /* release: next_link and the consumer's slot
                         * contents reach the drainer (acquire exchange). */
                        if (atomic_compare_exchange_weak_explicit(&p->wake_head, &h,
                                                                  ((uint64_t)lap << 32) | link,
                                                                  memory_order_release,
                                                                  memory_order_acquire))
                                return WAKE_REGISTERED;
                        continue;
                }
                if ((int32_t)(hl - lap) > 0)
                        return WAKE_PRODUCER_DONE;
                /* The previous occupant f - D is complete (we are in flight,
                 * so f - D < WM) but its completer has not drained yet: it
                 * is between its stamp store and its exchange. */
                engine_relax(&spins);
                h = atomic_load_explicit(&p->wake_head, memory_order_acquire);
        }
}

/* Completed id's two lists of waiting tasks: its batch list (linked at
 * classification, §10.1) and its wake list, closed. */
struct queues_wake_lists {
        uint32_t batch;
        uint32_t link;
};

/* Close id's wake list once its stamp is visible; the lists' tasks are
 * the caller's to route. */
static inline struct queues_wake_lists queues_wake_close(struct hbg_ring *r, uint64_t id) {
        struct task_slot *p = ring_slot(r, id);
        uint32_t lap = ring_lap(r, id);
        /* Its batch list: written before the task was handed on, which
         * happened before this completion (§10.1); read before the slot
         * is released to the next occupant. */
        uint32_t batch = p->batch_head;
        /* Close id's list and open the next occupant's in one step; acquire
         * pairs with the registrants' release (§10.2). */
        uint64_t h = atomic_exchange_explicit(&p->wake_head, (uint64_t)(lap + 1) << 32,
                                              memory_order_acq_rel);
        return (struct queues_wake_lists){ .batch = batch, .link = (uint32_t)h };
}

/* Some thread's deque of r holds tasks (a hint, relaxed loads): work a
 * thread could steal (§10.4). */
bool queues_deques_nonempty(struct hbg_ring *r);
/* Kernel tasks queued for t in r: its deque and the ready queues (hints:
 * the shared cursors read relaxed). */
uint64_t queues_ready_hint(struct sched_thread *t, struct hbg_ring *r);
/* This thread's continuation in r, taken (§10.4); false if none. */
bool queues_continuation_take(struct sched_thread *t, struct hbg_ring *r, uint64_t *ret_id);
