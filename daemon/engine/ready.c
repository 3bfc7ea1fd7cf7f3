/* SPDX-License-Identifier: MIT */
/*
 * Wake lists and readiness (RUNTIME_LOGIC.md §10.2-§10.3): registering a
 * task on its latest unmet producer, draining a producer's list when it
 * completes, making a task ready (a ready queue, the retire queue, or the
 * client for external tasks), and retiring kernel-less ready tasks.
 */
#include "daemon/engine/ready.h"

#include <errno.h>
#include <string.h>

#include "daemon/engine/engine_state.h"
#include "daemon/engine/graphs.h"
#include "daemon/engine/ring.h"
#include "daemon/engine/wakeup.h"

enum wake_result { WAKE_REGISTERED, WAKE_PRODUCER_DONE };

/*
 * Push consumer slot `s` on the wake list of producer `f` (§10.2). The
 * head carries f's lap, so a list that has passed to a later occupant is
 * never written: the CAS fails and the lap tells us f is done.
 */
static enum wake_result wake_register(struct hbg_ring *r, uint64_t f, struct task_slot *s) {
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

/* Did complete producer f fail (or was it skipped)? The failure table
 * (§12.2) answers for every f >= WM - D. */
static bool fanin_failed(struct hbg_ring *r, uint64_t f) {
        return atomic_load_explicit(&r->fail_tags[f & r->fail_mask], memory_order_acquire) == f + 1;
}

static void make_ready(struct sched_thread *t, struct hbg_ring *r, struct task_slot *s, bool inline_ok);

/* Route `s` to a queue, or onto the wake list of its latest unmet fanin. */
void ready_route(struct sched_thread *t, struct hbg_ring *r, struct task_slot *s, bool inline_ok) {
        struct hbg_completer *c = ring_completer(t, r);

        for (;;) {
                bool any = false;
                uint64_t latest = 0;
                for (unsigned i = 0; i < s->n_fanins; i++) {
                        uint64_t f = s->fanins[i];
                        if ((!any || f > latest) && !completer_flag_is_set(c, f)) {
                                latest = f;
                                any = true;
                        }
                }
                if (!any) {
                        make_ready(t, r, s, inline_ok);
                        return;
                }
                if (wake_register(r, latest, s) == WAKE_REGISTERED)
                        return;
                /* That producer finished meanwhile: look again. Each round
                 * sees one more fanin complete, so this ends. */
        }
}

static void publish_external(struct hbg_ring *r, struct task_slot *s) {
        atomic_store_explicit(&s->state, SLOT_EXTERNAL, memory_order_release);
        pthread_mutex_lock(&r->cold_lock);
        uint64_t k = r->ext_ready_count++;
        atomic_store_explicit(&r->ext_ready[k & r->task_mask], s->id, memory_order_relaxed);
        atomic_store_explicit(&r->cpl->ext_ready_tail, k + 1, memory_order_release);
        pthread_mutex_unlock(&r->cold_lock);
        graphs_signal(r);
}

static bool predicate_false(struct hbg_ring *r, struct task_slot *s) {
        if (!(s->flags & HBG_TASK_HAS_PREDICATE))
                return false;
        /* One 4-byte read of client memory, copied before use. */
        float v;
        memcpy(&v, r->heap + s->predicate_offset, sizeof(v));
        return v == 0.0f;
}

static void retire_later(struct sched_thread *t, struct hbg_ring *r, struct task_slot *s,
                         bool inline_ok) {
        if (inline_ok) {
                int st = atomic_load_explicit(&s->status, memory_order_relaxed);
                stat_add(&t->stats.retired_inline, 1);
                ring_task_done(t, r, s->id, st, st ? "a dependency failed" : NULL);
                return;
        }
        atomic_store_explicit(&s->state, SLOT_QUEUED, memory_order_relaxed);
        if (!mpmc_push(&r->retire, s->id))
                graphs_fail(r, -EOVERFLOW, s->id, "retire queue full (engine bug)");
}

static void make_ready(struct sched_thread *t, struct hbg_ring *r, struct task_slot *s, bool inline_ok) {
        for (unsigned i = 0; i < s->n_fanins; i++) {
                if (fanin_failed(r, s->fanins[i])) {
                        /* A dependency failed: skip, do not run. */
                        atomic_store_explicit(&s->status, -ECANCELED, memory_order_relaxed);
                        retire_later(t, r, s, inline_ok);
                        return;
                }
        }
        switch (s->kind) {
        case KIND_DUMMY:
        case KIND_INLINE:
                retire_later(t, r, s, inline_ok);
                return;
        case KIND_EXTERNAL:
                if (predicate_false(r, s))
                        retire_later(t, r, s, inline_ok);
                else
                        publish_external(r, s);
                return;
        default:
                break;
        }
        if (predicate_false(r, s)) {
                retire_later(t, r, s, inline_ok);
                return;
        }
        atomic_store_explicit(&s->state, SLOT_QUEUED, memory_order_relaxed);
        /* The first kernel task a thread that runs kernels makes ready
         * during its visit is its continuation: it runs it next, with no
         * queue traffic and warm caches (a chain stays on one core). */
        struct ring_thread *rt = &r->per_thread[t->index];
        if (t->clusters > 0) {
                if (!rt->has_continuation) {
                        rt->continuation = s->id;
                        rt->has_continuation = true;
                        return;
                }
                /* The next ones to the thread's deque, which idle peers
                 * steal from; the queue when it is full. */
                if (ws_push(&rt->deque, s->id))
                        return;
        }
        if (!mpmc_push(&r->ready[s->shape], s->id)) {
                graphs_fail(r, -EOVERFLOW, s->id, "ready queue full (engine bug)");
                return;
        }
        /* No wake-up here: the batch's caller wakes a peer once if a
         * surplus is left (ready_wake_for_surplus), not once per task. */
}

bool ready_deques_nonempty(struct hbg_ring *r) {
        for (unsigned i = 0; i < r->engine->nthreads; i++)
                if (ws_size_hint(&r->per_thread[i].deque) > 0)
                        return true;
        return false;
}

bool ready_continuation_take(struct sched_thread *t, struct hbg_ring *r, uint64_t *ret_id) {
        struct ring_thread *rt = &r->per_thread[t->index];
        if (!rt->has_continuation)
                return false;
        rt->has_continuation = false;
        *ret_id = rt->continuation;
        return true;
}

void ready_continuation_flush(struct sched_thread *t, struct hbg_ring *r) {
        struct ring_thread *rt = &r->per_thread[t->index];
        uint64_t id;
        bool any = false;
        /* Bounded: the deque holds at most its capacity, and only its
         * owner (this thread) adds to it. */
        for (unsigned n = 0; n <= WS_DEQUE_CAPACITY &&
                             (ready_continuation_take(t, r, &id) || ws_take(&rt->deque, &id));
             n++) {
                any = true;
                if (!mpmc_push(&r->ready[ring_slot(r, id)->shape], id)) {
                        graphs_fail(r, -EOVERFLOW, id, "ready queue full (engine bug)");
                        return;
                }
        }
        if (any)
                wakeup_executor(r->engine);
}

/* After making tasks ready: if more are queued than this thread will take
 * next, wake a parked peer (one futex wake per batch at most). A thread
 * that owns no cluster takes no ready task itself: any is a surplus. */
void ready_wake_for_surplus(struct sched_thread *t, struct hbg_ring *r) {
        /* Nobody to wake: skip reading the queues' shared cursors. The
         * wake functions below make the same relaxed check. */
        if (atomic_load_explicit(&r->engine->idle, memory_order_relaxed) == 0)
                return;
        uint64_t ready = ws_size_hint(&r->per_thread[t->index].deque);
        for (unsigned i = 0; i < SHAPE_EXEC_COUNT; i++)
                ready += mpmc_size_hint(&r->ready[i]);
        /* A completion policy's own thread (the resolver, §11.3) retires
         * nothing itself. A thread holding a continuation runs that next:
         * every queued task is a surplus; otherwise it takes one of them
         * itself. */
        bool policy_thread = t->index >= r->engine->nschedulers;
        bool takes_one = t->clusters > 0 && !r->per_thread[t->index].has_continuation;
        if (ready > (takes_one ? 1u : 0u))
                wakeup_executor(r->engine);
        else if (mpmc_size_hint(&r->retire) > (policy_thread ? 0u : 1u))
                wakeup_one(r->engine);
}

/* Route every task of a list of links (a wake or batch list), at most D:
 * a list never holds more, the bound only makes it certain. */
static void route_list(struct sched_thread *t, struct hbg_ring *r, uint32_t link) {
        for (uint64_t n = 0; link != WAKE_LINK_EMPTY && n < r->g.task_window; n++) {
                struct task_slot *w = &r->slots[link - 1];
                link = w->next_link; /* before ready_route() reuses it */
                ready_route(t, r, w, false);
        }
}

void ready_drain_wake_list(struct sched_thread *t, struct hbg_ring *r, uint64_t id) {
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
        uint32_t link = (uint32_t)h;

        if (link == WAKE_LINK_EMPTY && batch == WAKE_LINK_EMPTY)
                return;
        route_list(t, r, batch);
        route_list(t, r, link);
        ready_wake_for_surplus(t, r);
}

bool ready_retire(struct sched_thread *t, struct hbg_ring *r, unsigned max) {
        uint64_t id;
        unsigned n = 0;

        if (atomic_load_explicit(&r->broken, memory_order_relaxed))
                return false;
        while (n < max && mpmc_pop(&r->retire, &id)) {
                struct task_slot *s = ring_slot(r, id);
                int st = atomic_load_explicit(&s->status, memory_order_relaxed);
                stat_add(&t->stats.retired_inline, 1);
                ring_task_done(t, r, id, st, st ? "a dependency failed" : NULL);
                n++;
        }
        return n > 0;
}

void ready_task_released(struct sched_thread *t, struct hbg_ring *r, uint64_t id) {
        /* The list closes only after the stamp is visible: a waiter that
         * finds it closed finds the producer complete (§10.2, seed P5). */
        ready_drain_wake_list(t, r, id);
        ring_slot_release(r, id);
}
