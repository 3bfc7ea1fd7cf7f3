/* SPDX-License-Identifier: MIT */
/*
 * The dedicated resolver (RUNTIME_LOGIC.md §11.3; the seed's earlier
 * design, #1544): with N threads, N-1 schedulers own the cores and one
 * resolver owns none. A scheduler that finishes a task pushes its id on
 * its own single-producer queue to the resolver; the resolver alone
 * publishes stamps, drains wake lists, walks the watermark and retires
 * graphs. One writer of all completion state: no frontier race, at the
 * price of a cross-thread hand-off per task.
 */
#include <errno.h>
#include <limits.h>
#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "daemon/engine/completion.h"
#include "daemon/engine/engine_private.h"
#include "daemon/engine/spsc.h"

/* Ids taken from one scheduler's queue per resolver visit: bounded, so the
 * resolver serves every ring and queue in turn. */
#define RESOLVE_BATCH 1024

static bool is_resolver(const struct sched_thread *t) {
        return t->index == t->engine->resolver_index;
}

/* Scheduler side: hand the id over. The queue holds D ids and at most D
 * ids of the ring are in flight, so it is never full; if it were, the ring
 * stops rather than lose the task. */
static void resolver_complete(struct sched_thread *t, struct hbg_ring *r, uint64_t id);

static void publish_one(struct sched_thread *t, struct hbg_ring *r, uint64_t id) {
        /* release: the single writer needs no frontier pair (§11.3). */
        int rc = completer_publish_or_defer_ordered(ring_completer(t, r), id, memory_order_release);

        if (rc == 1)
                ring_task_released(t, r, id);
        else if (rc < 0)
                ring_fail(r, rc, id, "failsafe heap full");
}

static void resolver_complete(struct sched_thread *t, struct hbg_ring *r, uint64_t id) {
        if (is_resolver(t)) {
                publish_one(t, r, id);
                return;
        }
        if (!spsc_push(&r->per_thread[t->index].handoff, id)) {
                ring_fail(r, -EOVERFLOW, id, "resolver queue full (engine bug)");
                return;
        }
        engine_wake_resolver(t->engine);
}

/*
 * The walk, by the only thread that moves the watermark: over the stamps
 * it published itself, then one release store. Readers acquire it and see
 * the tasks' effects (schedulers released them into the queue, the
 * resolver acquired them there).
 */
static bool walk(struct sched_thread *t, struct hbg_ring *r) {
        struct hbg_completer *c = ring_completer(t, r);
        const struct hbg_flag_window *w = c->window;
        uint64_t cur = atomic_load_explicit(w->watermark, memory_order_relaxed), next = cur;
        uint64_t limit = cur + w->task_window;

        while (next < limit &&
               atomic_load_explicit(flag_slot(w, next), memory_order_relaxed) == flag_stamp_of(w, next))
                next++;
        if (next == cur)
                return false;
        atomic_store_explicit(w->watermark, next, memory_order_release);
        c->cached_watermark = next;
        stat_inc(&c->stats.advances, 1);
        stat_inc(&c->stats.ids_advanced, next - cur);
        return true;
}

static bool resolver_resolve(struct sched_thread *t, struct hbg_ring *r) {
        struct hbg_completer *c = ring_completer(t, r);
        struct hbg_engine *e = t->engine;
        bool did = false;
        uint64_t id;

        for (unsigned i = 0; i < e->nthreads; i++) {
                if (i == e->resolver_index)
                        continue;
                struct spsc *q = &r->per_thread[i].handoff;
                for (unsigned n = 0; n < RESOLVE_BATCH && spsc_pop(q, &id); n++) {
                        publish_one(t, r, id);
                        did = true;
                }
        }
        /* Walk, then retry deferred ids (smallest first, §6.1) whose slots
         * the walk freed, and walk again while that helps. */
        for (;;) {
                bool moved = walk(t, r);
                bool retried = false;
                while (failsafe_heap_peek(&c->heap, &id)) {
                        stat_inc(&c->stats.retries, 1);
                        if (!completer_try_publish(c, id, memory_order_release))
                                break;
                        failsafe_heap_pop(&c->heap, &id);
                        stat_inc(&c->stats.retry_published, 1);
                        ring_task_released(t, r, id);
                        retried = true;
                }
                if (moved) {
                        ring_retire_graphs(r);
                        /* The window moved: ids the schedulers could not
                         * claim may be claimable now, and they may sleep
                         * (they finish no task of their own to notice). */
                        if (ring_has_external_work(r))
                                engine_wake_one(e);
                }
                did |= moved || retried;
                if (!retried)
                        break;
        }
        return did;
}

static bool resolver_has_work(struct hbg_ring *r) {
        struct hbg_engine *e = r->engine;
        for (unsigned i = 0; i < e->nthreads; i++)
                if (i != e->resolver_index && spsc_nonempty_seq_cst(&r->per_thread[i].handoff))
                        return true;
        return failsafe_heap_len(&r->per_thread[e->resolver_index].completer.heap) > 0;
}

/* Schedulers do nothing per visit: the resolver does it all. */
static bool resolver_tick(struct sched_thread *t, struct hbg_ring *r) {
        (void)t;
        (void)r;
        return false;
}

static int resolver_ring_init(struct hbg_ring *r) {
        for (unsigned i = 0; i < r->engine->nthreads; i++)
                if (i != r->engine->resolver_index && spsc_init(&r->per_thread[i].handoff, r->g.task_window) < 0)
                        return -ENOMEM;
        return 0;
}

static void resolver_ring_free(struct hbg_ring *r) {
        for (unsigned i = 0; i < r->engine->nthreads; i++)
                spsc_destroy(&r->per_thread[i].handoff);
}

static uint64_t resolver_ring_memory(uint64_t task_window, unsigned nthreads) {
        return (uint64_t)(nthreads - 1) * task_window * sizeof(uint64_t);
}

const struct completion_policy completion_resolver = {
        .mode = HBG_COMPLETION_RESOLVER,
        .name = "resolver",
        .dedicated_resolver = true,
        .complete = resolver_complete,
        .tick = resolver_tick,
        .resolve = resolver_resolve,
        .resolver_has_work = resolver_has_work,
        .ring_init = resolver_ring_init,
        .ring_free = resolver_ring_free,
        .ring_memory = resolver_ring_memory,
};
