/* SPDX-License-Identifier: MIT */
/* queues.c: the primitives the completion path's stages share, below all
 * of them: the wake lists' two halves (RUNTIME_LOGIC.md §10.2), a
 * thread's continuation and the deques (§10.4), the surplus a thread
 * holds back (§9.4). The ready queues and the retire queue themselves
 * are struct hbg_ring's (mpmc.h). */
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

/*
 * The surplus a thread queued in a ring (§9.4): ready.c counts it and
 * decides whether it is worth a peer's wake-up (ready_wake_for_surplus());
 * dispatch.c counts the runs while it is held back and lets it go before
 * a long task. The fields are the thread's own (struct ring_thread):
 * plain accesses.
 */

/* A task queued: its estimated work (ticks) counted towards the surplus. */
static inline void queues_surplus_add(struct ring_thread *rt, uint64_t work) {
        rt->queued = true;
        rt->queued_work += work;
}

/* A held surplus gone (woken for, drained, run, or the thread parks):
 * its count starts again. */
static inline void queues_surplus_release(struct ring_thread *rt) {
        rt->queued_work = 0;
        rt->surplus_held = false;
}

/* A look held the surplus back as too little work: its runs are counted
 * from the first such hold on (queues_surplus_ran()). */
static inline void queues_surplus_hold(struct ring_thread *rt) {
        if (!rt->surplus_held)
                rt->held_ran = 0;
        rt->surplus_held = true;
}

static inline bool queues_surplus_held(const struct ring_thread *rt) {
        return rt->surplus_held;
}

/* A run of `ran` ticks with the surplus held: whether the runs since the
 * first hold now make `worth` (its estimate was low). */
static inline bool queues_surplus_ran(struct ring_thread *rt, uint64_t ran, uint64_t worth) {
        return (rt->held_ran += ran) >= worth;
}

/* Some thread's deque of r holds tasks (a hint, relaxed loads): work a
 * thread could steal (§10.4). */
bool queues_deques_nonempty(struct hbg_ring *r);
/* Kernel tasks queued for t in r: its deque and the ready queues (hints:
 * the shared cursors read relaxed). */
uint64_t queues_ready_hint(struct sched_thread *t, struct hbg_ring *r);
/* This thread's continuation in r, taken (§10.4); false if none. */
bool queues_continuation_take(struct sched_thread *t, struct hbg_ring *r, uint64_t *ret_id);
