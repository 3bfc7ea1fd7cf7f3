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
#include <stdalign.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "daemon/engine/completion.h"
#include "daemon/engine/engine_state.h"
#include "daemon/engine/ready.h"
#include "daemon/engine/retire.h"
#include "daemon/engine/ring.h"
#include "daemon/engine/ring_table.h"
#include "daemon/engine/signal.h"
#include "daemon/engine/wakeup.h"
#include "daemon/engine/work.h"
#include "daemon/engine/spsc.h"

/* Ids taken from one scheduler's queue per resolver visit: bounded, so the
 * resolver serves every ring and queue in turn. */
#define RESOLVE_BATCH 1024

/* The engine's resolver: its own futex word and "I sleep" flag (§11.3). */
struct resolver_engine {
        alignas(64) _Atomic uint32_t seq;
        _Atomic uint32_t sleeping;
};

static struct resolver_engine *engine_state(struct hbg_engine *e) {
        return e->policy_state;
}

/* A ring's state: the resolver's note and its hand-off queues, one per
 * scheduler thread (ids to the resolver), nschedulers of them. */
struct resolver_ring {
        /* The resolver made work ready in this ring during its pass: a
         * fenced wake check at the pass's end (ready_policy_wake_check()).
         * The resolver's alone; on a line of its own, away from the
         * schedulers' queue cursors. */
        alignas(64) bool wake_check_due;
        struct spsc queues[];
};

static struct resolver_ring *ring_state(struct hbg_ring *r) {
        return r->policy_state;
}

static struct spsc *handoff(struct hbg_ring *r, unsigned thread) {
        return &ring_state(r)->queues[thread];
}

/* The resolver is the engine's last thread, the one that schedules nothing. */
static bool is_resolver(const struct sched_thread *t) {
        return t->index >= t->engine->nschedulers;
}

/* The resolver reads its sequence word, then says it sleeps (seq_cst),
 * then looks at its queues (seq_cst); a scheduler publishes a queue tail
 * (seq_cst), then looks at the flag (seq_cst). Either the resolver sees the
 * id or the scheduler sees it sleeping and bumps the word, which makes the
 * resolver's futex wait return (§11.3). */
static void wake_resolver(struct hbg_engine *e) {
        struct resolver_engine *re = engine_state(e);
        if (!atomic_load_explicit(&re->sleeping, memory_order_seq_cst))
                return;
        atomic_fetch_add(&re->seq, 1);
        wakeup_futex_wake(&re->seq, 1);
}

/* The engine stops: wherever the resolver sleeps, it wakes. */
static void resolver_wake_all(struct hbg_engine *e) {
        struct resolver_engine *re = engine_state(e);
        atomic_fetch_add(&re->seq, 1);
        wakeup_futex_wake(&re->seq, INT_MAX);
}

/* Scheduler side: hand the id over. The queue holds D ids and at most D
 * ids of the ring are in flight, so it is never full; if it were, the ring
 * stops rather than lose the task. */
static void resolver_complete(struct sched_thread *t, struct hbg_ring *r, uint64_t id);

/* completion_task_released() on the resolver, which runs no task: a
 * surplus it queued is looked at again, fenced, at its pass's end. */
static void resolver_released(struct sched_thread *t, struct hbg_ring *r, uint64_t id) {
        if (ready_dependants_by_policy_thread(t, r, id))
                ring_state(r)->wake_check_due = true;
        ring_slot_release(r, id);
}

static void publish_one(struct sched_thread *t, struct hbg_ring *r, uint64_t id) {
        /* release: the single writer needs no frontier pair (§11.3). */
        int rc = completer_publish_or_defer_ordered(ring_completer(t, r), id, memory_order_release);

        if (rc == 1)
                resolver_released(t, r, id);
        else if (rc < 0)
                retire_fail(r, rc, id, "failsafe heap full");
}

static void resolver_complete(struct sched_thread *t, struct hbg_ring *r, uint64_t id) {
        if (is_resolver(t)) {
                publish_one(t, r, id);
                return;
        }
        if (!spsc_push(handoff(r, t->index), id)) {
                retire_fail(r, -EOVERFLOW, id, "resolver queue full (engine bug)");
                return;
        }
        wake_resolver(t->engine);
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

        for (unsigned i = 0; i < e->nschedulers; i++) {
                struct spsc *q = handoff(r, i);
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
                        resolver_released(t, r, id);
                        retried = true;
                }
                if (moved) {
                        retire_graphs(r);
                        /* The window moved: ids the schedulers could not
                         * claim may be claimable now, and they may sleep
                         * (they finish no task of their own to notice). */
                        if (work_external(r)) {
                                wakeup_fence(); /* the watermark's store before the idle count */
                                wakeup_one(e);
                        }
                }
                did |= moved || retried;
                if (!retried)
                        break;
        }
        /* A tensor wait for a task published here, which the watermark
         * may not have passed (§2.1): the stamps went out with release
         * stores, the fence puts them before the load of the request. */
        if (did)
                signal_task_waiter_fenced(r);
        return did;
}

/* Work queued for the resolver in r, seen by a parking resolver t
 * (seq_cst, §11.3). */
static bool resolver_has_work(struct sched_thread *t, struct hbg_ring *r) {
        for (unsigned i = 0; i < t->engine->nschedulers; i++)
                if (spsc_nonempty_seq_cst(handoff(r, i)))
                        return true;
        return failsafe_heap_len(&ring_completer(t, r)->heap) > 0;
}

/* The resolver's sleep (§11.3): sequence word first, then the flag, then
 * the last look at every ring's queues. */
static void resolver_park(struct sched_thread *t) {
        struct hbg_engine *e = t->engine;
        struct resolver_engine *re = engine_state(e);
        uint32_t seq = atomic_load(&re->seq);
        atomic_store(&re->sleeping, 1);
        bool work = false;
        unsigned high = atomic_load(&e->rings_high);
        for (unsigned i = 0; i < high && !work; i++) {
                struct hbg_ring *r = ring_table_enter(t, i);
                if (!r)
                        continue;
                work = resolver_has_work(t, r);
                ring_table_leave(t);
        }
        if (!work && !atomic_load(&e->stop))
                wakeup_thread_sleep(t, &re->seq, seq, NULL);
        atomic_store(&re->sleeping, 0);
}

/* The resolver thread: owns no core, only resolves: every ring, in turn,
 * until there is nothing left; then spins a little and sleeps until a
 * scheduler hands it an id. */
static void *resolver_main(void *arg) {
        struct sched_thread *t = arg;
        struct hbg_engine *e = t->engine;
        int64_t idle_since = 0;
        unsigned spins = 0;

        trace_thread_bind(&e->trace, t->index); /* its parks and wake-ups */

        while (!atomic_load_explicit(&e->stop, memory_order_relaxed)) {
                bool work = false;
                unsigned high = atomic_load_explicit(&e->rings_high, memory_order_acquire);
                sched_heartbeat(t);
                for (unsigned n = 0; n < high; n++) {
                        struct hbg_ring *r = ring_table_enter(t, n);
                        if (!r)
                                continue;
                        work |= resolver_resolve(t, r);
                        struct resolver_ring *rs = ring_state(r);
                        if (rs->wake_check_due) {
                                rs->wake_check_due = false;
                                ready_policy_wake_check(t, r);
                        }
                        ring_table_leave(t);
                }
                if (work) {
                        idle_since = 0;
                        continue;
                }
                int64_t now = clock_now_ns();
                if (idle_since == 0)
                        idle_since = now;
                if ((uint64_t)(now - idle_since) < e->cfg.spin_before_park_ns) {
                        /* Gives way as the scheduler threads' spin does
                         * (sched.c, §9.4). */
                        if (++spins % 8 == 0)
                                sched_yield();
                        else
                                cpu_relax();
                        continue;
                }
                resolver_park(t);
                idle_since = 0;
        }
        return NULL;
}

/* Schedulers do nothing per visit: the resolver does it all. */
static bool resolver_tick(struct sched_thread *t, struct hbg_ring *r) {
        (void)t;
        (void)r;
        return false;
}

static int resolver_engine_init(struct hbg_engine *e) {
        struct resolver_engine *re = aligned_alloc(64, sizeof(*re));
        if (!re)
                return -ENOMEM;
        atomic_init(&re->seq, 0);
        atomic_init(&re->sleeping, 0);
        e->policy_state = re;
        return 0;
}

static void resolver_engine_free(struct hbg_engine *e) {
        free(e->policy_state);
        e->policy_state = NULL;
}

static int resolver_ring_init(struct hbg_ring *r) {
        unsigned n = r->engine->nschedulers;
        size_t bytes = sizeof(struct resolver_ring) + n * sizeof(struct spsc);
        struct resolver_ring *rs = aligned_alloc(64, bytes);
        if (!rs)
                return -ENOMEM;
        memset(rs, 0, bytes);
        r->policy_state = rs;
        for (unsigned i = 0; i < n; i++)
                if (spsc_init(&rs->queues[i], r->g.task_window) < 0)
                        return -ENOMEM;
        return 0;
}

/* Accepts a ring whose init failed half-way (zeroed queues). */
static void resolver_ring_free(struct hbg_ring *r) {
        struct resolver_ring *rs = r->policy_state;
        if (!rs)
                return;
        for (unsigned i = 0; i < r->engine->nschedulers; i++)
                spsc_destroy(&rs->queues[i]);
        free(rs);
        r->policy_state = NULL;
}

static uint64_t resolver_ring_memory(uint64_t task_window, unsigned nthreads) {
        return (uint64_t)(nthreads - 1) * lazy_bytes(task_window * sizeof(uint64_t));
}

static bool resolver_ring_lazy_array(const struct hbg_ring *r, unsigned i, struct lazy_span *ret) {
        const struct spsc *queues = ((const struct resolver_ring *)r->policy_state)->queues;
        if (i >= r->engine->nschedulers)
                return false;
        *ret = (struct lazy_span){ queues[i].cells, (queues[i].mask + 1) * sizeof(uint64_t) };
        return true;
}

const struct completion_policy completion_resolver = {
        .name = "resolver",
        .thread_main = resolver_main,
        .thread_why = "completion_mode resolver: needs at least 2 threads "
                      "(N-1 schedulers and one resolver)",
        .wake_all = resolver_wake_all,
        .complete = resolver_complete,
        .tick = resolver_tick,
        .engine_init = resolver_engine_init,
        .engine_free = resolver_engine_free,
        .ring_init = resolver_ring_init,
        .ring_free = resolver_ring_free,
        .ring_memory = resolver_ring_memory,
        .ring_lazy_array = resolver_ring_lazy_array,
};
