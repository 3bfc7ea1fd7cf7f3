/* SPDX-License-Identifier: MIT */
/*
 * Making a task ready (RUNTIME_LOGIC.md §10.2-§10.4), the stage after
 * classification: a task is registered on the wake list of its latest
 * unmet producer, or made ready: its continuation, its thread's deque or
 * a ready queue for a kernel task, the retire queue (or completed inline)
 * for a kernel-less one, the client for an external one. A completed
 * task's dependants come back here (ready_dependants(), called by the
 * completion policy) to be routed again.
 */
#include "daemon/engine/ready.h"

#include <errno.h>
#include <string.h>

#include "daemon/engine/complete.h"
#include "daemon/engine/engine_state.h"
#include "daemon/engine/failures.h"
#include "daemon/engine/queues.h"
#include "daemon/engine/retire.h"
#include "daemon/engine/ring.h"
#include "daemon/engine/signal.h"
#include "daemon/engine/wakeup.h"

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
                if (queues_wake_register(r, latest, s) == WAKE_REGISTERED)
                        return;
                /* That producer finished meanwhile: look again. Each round
                 * sees one more fanin complete, so this ends. */
        }
}

static void publish_external(struct hbg_ring *r, struct task_slot *s) {
        s->host_ready_ns = trace_epoch(&r->engine->trace) ? clock_now_ns() : 0; /* for trace_host() */
        atomic_store_explicit(&s->state, SLOT_EXTERNAL, memory_order_release);
        pthread_mutex_lock(&r->cold_lock);
        uint64_t k = r->ext_ready_count++;
        atomic_store_explicit(&r->ext_ready[k & r->task_mask], s->id, memory_order_relaxed);
        atomic_store_explicit(&r->cpl->ext_ready_tail, k + 1, memory_order_release);
        pthread_mutex_unlock(&r->cold_lock);
        signal_ext_wake(r, k + 1);
        if (signal_pipe_wanted(r))
                signal_pipe(r);
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
                complete_task(t, r, s->id, st, st ? "a dependency failed" : NULL);
                return;
        }
        atomic_store_explicit(&s->state, SLOT_QUEUED, memory_order_relaxed);
        r->per_thread[t->index].queued = true;
        if (!mpmc_push(&r->retire, s->id))
                retire_fail(r, -EOVERFLOW, s->id, "retire queue full (engine bug)");
}

static void make_ready(struct sched_thread *t, struct hbg_ring *r, struct task_slot *s, bool inline_ok) {
        for (unsigned i = 0; i < s->n_fanins; i++) {
                if (failures_tagged(&r->fail.tags, s->fanins[i])) {
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
        /* Ready since the input that held it back completed: the end of
         * the run whose completion hands it on, where this thread has it
         * (sched.h); else now. */
        if (t->ready_tick)
                s->ready_tick = t->ready_tick;
        else
                ktime_stamp(&s->ready_tick);
        atomic_store_explicit(&s->state, SLOT_QUEUED, memory_order_relaxed);
        /* The first kernel task a thread that runs kernels makes ready
         * during its visit is its continuation: it runs it next, with no
         * queue traffic and warm caches (a chain stays on one core). */
        struct ring_thread *rt = &r->per_thread[t->index];
        if (t->clusters > 0 && !rt->has_continuation) {
                rt->continuation = s->id;
                rt->has_continuation = true;
                return;
        }
        /* Queued: a surplus to look at, and its estimated work. */
        queues_surplus_add(rt, t->run_avg[s->ktime_kernel]);
        /* The next ones to the thread's deque, which idle peers steal
         * from; the queue when it is full (or the thread runs none). */
        if (t->clusters > 0 && ws_push(&rt->deque, s->id))
                return;
        if (!mpmc_push(&r->ready[s->shape], s->id)) {
                retire_fail(r, -EOVERFLOW, s->id, "ready queue full (engine bug)");
                return;
        }
        /* No wake-up here: the batch's caller wakes a peer once if a
         * surplus is left (ready_wake_for_surplus), not once per task. */
}

void ready_continuation_flush(struct sched_thread *t, struct hbg_ring *r) {
        struct ring_thread *rt = &r->per_thread[t->index];
        uint64_t id;
        bool any = false;
        /* Bounded: the deque holds at most its capacity, and only its
         * owner (this thread) adds to it. */
        for (unsigned n = 0; n <= WS_DEQUE_CAPACITY &&
                             (queues_continuation_take(t, r, &id) || ws_take(&rt->deque, &id));
             n++) {
                any = true;
                if (!mpmc_push(&r->ready[ring_slot(r, id)->shape], id)) {
                        retire_fail(r, -EOVERFLOW, id, "ready queue full (engine bug)");
                        return;
                }
        }
        if (any)
                wakeup_executor(r->engine);
}

void ready_surplus_forget(struct sched_thread *t, struct hbg_ring *r) {
        struct ring_thread *rt = &r->per_thread[t->index];
        if (queues_surplus_held(rt) || rt->queued_work)
                queues_surplus_release(rt);
}

/* After making tasks ready: if more are queued than this thread will take
 * next, and they are worth it, wake a parked peer (one futex wake per
 * batch at most). Worth it: the tasks queued since the surplus was last
 * released (a wake, or none left) are at least READY_SURPLUS_WAKE_NS of
 * work by this thread's estimate of each one's kernel
 * (ring_thread.queued_work: an over-estimate once the thread has run some
 * of them, which only wakes a peer sooner). Sixteen no-op tasks are not (the thread runs them in about 2
 * us; waking a peer for them made such a graph 2-3 times slower), 16
 * tasks of a kernel that took 1 ms are. A thread that owns no cluster
 * takes no ready task itself: any is a surplus, always worth a wake (so
 * the resolver's fenced look at the end of its pass, §11.3, loses none).
 * Returns whether the look
 * settled it: a peer woken, nothing queued at all, or a ready surplus held
 * back as too little work (looked at again once the thread has run that
 * long in r, dispatch.c's held_surplus_ran()). Otherwise (nobody idle as far
 * as the relaxed count says, a wake the cap or the owners' count skipped,
 * one task left for this thread to take) the verdict may go stale without
 * a push, and the next call looks again. */
static bool wake_for_surplus(struct sched_thread *t, struct hbg_ring *r, bool policy_thread) {
        struct ring_thread *rt = &r->per_thread[t->index];
        /* Nobody to wake: skip reading the queues' shared cursors. The
         * wake functions below make the same relaxed check. The count
         * stays: the first peer to park is woken at the next surplus (a
         * form that counted afresh here, at every look without a ready
         * surplus, and without the run that made a surplus, read 3-15 %
         * slower on chain, wavefront and attention). */
        if (atomic_load_explicit(&r->engine->idle, memory_order_relaxed) == 0)
                return false;
        uint64_t ready = queues_ready_hint(t, r);
        uint64_t retire = mpmc_size_hint(&r->retire);
        /* The policy's thread takes none of them. A thread holding a
         * continuation runs that next: every queued task is a surplus;
         * otherwise it takes one of them itself. */
        bool takes_one = t->clusters > 0 && !r->per_thread[t->index].has_continuation;
        bool held = false;
        if (ready > (takes_one ? 1u : 0u)) {
                /* A thread that runs no kernels (the policy's, one
                 * without clusters) holds nothing back: nobody would
                 * run it, and no run of its would look again. */
                if (t->clusters == 0 || rt->queued_work >= r->engine->surplus_wake_ticks) {
                        bool woke = wakeup_executor(r->engine);
                        if (woke)
                                queues_surplus_release(rt);
                        return woke;
                }
                held = true;
        }
        /* Kernel-less tasks (nothing to estimate) wake as before, held or
         * not. */
        if (retire > (policy_thread ? 0u : 1u))
                return wakeup_one(r->engine);
        if (held) {
                queues_surplus_hold(rt); /* its runs counted in run_blocks() */
                return true;
        }
        if (ready == 0 && retire == 0)
                queues_surplus_release(rt);
        return ready == 0 && retire == 0;
}

/* A scheduler thread stays awake and sees its own surplus before it
 * parks: a relaxed look is enough. A completion policy's own thread
 * (policy_thread: the resolver, §11.3) runs nothing itself, so a wake it
 * skips must be made up for: the same look now (a prompt wake, usually)
 * and a fenced one at the end of its pass, one fence per pass rather
 * than per task (ready_policy_wake_check()). Returns whether it looked,
 * i.e. whether tasks were queued since the last look that settled it. */
static inline bool look_for_surplus(struct sched_thread *t, struct hbg_ring *r, bool policy_thread) {
        struct ring_thread *rt = &r->per_thread[t->index];
        /* Nothing queued since the last look that settled it (a chain's
         * next task is the continuation): no surplus to wake a peer for. */
        if (!rt->queued)
                return false;
        rt->queued = !wake_for_surplus(t, r, policy_thread);
        return true;
}

void ready_wake_for_surplus(struct sched_thread *t, struct hbg_ring *r) {
        look_for_surplus(t, r, false);
}

void ready_policy_wake_check(struct sched_thread *t, struct hbg_ring *r) {
        struct ring_thread *rt = &r->per_thread[t->index];
        wakeup_fence(); /* the pass's pushes before the idle counts */
        rt->queued = !wake_for_surplus(t, r, true);
}

/* Route every task of a list of links (a wake or batch list), at most D:
 * a list never holds more, the bound only makes it certain. */
static void route_list(struct sched_thread *t, struct hbg_ring *r, uint32_t link) {
        for (uint64_t n = 0; link != WAKE_LINK_EMPTY && n < r->g.task_window; n++) {
                struct task_slot *w = &r->slots[link - 1];
                link = w->next_link; /* before ready_route() reuses it */
                /* Each task on the list waited for the task that just
                 * completed (its latest unmet fanin, released before this
                 * call): with no other fanin it is ready, and the look at
                 * the flags would only find that one set (a chain's every
                 * task). */
                if (w->n_fanins == 1)
                        make_ready(t, r, w, false);
                else
                        ready_route(t, r, w, false);
        }
}

/* Returns look_for_surplus()'s answer; false when nothing waited on id. */
static inline bool dependants(struct sched_thread *t, struct hbg_ring *r, uint64_t id, bool policy_thread) {
        struct queues_wake_lists l = queues_wake_close(r, id);

        if (l.link == WAKE_LINK_EMPTY && l.batch == WAKE_LINK_EMPTY)
                return false;
        route_list(t, r, l.batch);
        route_list(t, r, l.link);
        return look_for_surplus(t, r, policy_thread);
}

void ready_dependants(struct sched_thread *t, struct hbg_ring *r, uint64_t id) {
        dependants(t, r, id, false);
}

bool ready_dependants_by_policy_thread(struct sched_thread *t, struct hbg_ring *r, uint64_t id) {
        return dependants(t, r, id, true);
}

