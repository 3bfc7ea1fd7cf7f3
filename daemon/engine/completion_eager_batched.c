/* SPDX-License-Identifier: MIT */
/*
 * The batched eager watermark (RUNTIME_LOGIC.md §11.4), a policy beside
 * eager (completion_eager.c), whose retry of deferred ids it shares
 * (completion_eager.h).
 */
#include <errno.h>
#include <stdalign.h>
#include <stdlib.h>
#include <string.h>

#include "daemon/engine/completion.h"
#include "daemon/engine/completion_eager.h"
#include "daemon/engine/engine_state.h"
#include "daemon/engine/ready.h"
#include "daemon/engine/retire.h"
#include "daemon/engine/ring.h"
#include "daemon/engine/signal.h"

/*
 * eager-batched (§11.4). Per task: the stamp with a release store (no
 * locked instruction), the wake list drained at once (a successor waits
 * for no batch), the slot released. Per visit of the ring: one fence and
 * one walk from wherever the watermark is. The watermark lags the
 * thread's completions by at most one visit, which ends on every path.
 */

/* A ring's state: per thread, whether stamps were published this visit
 * (a walk is due). Each its own line: written per task by its thread. */
struct batched_thread {
        alignas(64) bool walk_due;
};

static struct batched_thread *batched_of(struct sched_thread *t, struct hbg_ring *r) {
        return &((struct batched_thread *)r->policy_state)[t->index];
}

static void batched_finish(struct sched_thread *t, struct hbg_ring *r, uint64_t id) {
        ready_dependants(t, r, id);
        /* The slot may be reused only for id + D, which the window keeps
         * out until the watermark passes id: releasing it before the walk
         * changes nothing. */
        ring_slot_release(r, id);
        batched_of(t, r)->walk_due = true;
}

static void batched_complete(struct sched_thread *t, struct hbg_ring *r, uint64_t id) {
        /* Release: the task's effects reach whoever sees the stamp; the
         * once-per-visit fence is the frontier pair's other half. */
        int rc = completer_publish_or_defer_ordered(ring_completer(t, r), id, memory_order_release);

        if (rc == 1)
                batched_finish(t, r, id);
        else if (rc < 0)
                /* Unreachable with capacity D (§6.2), as for eager. */
                retire_fail(r, rc, id, "failsafe heap full");
}

static bool batched_tick(struct sched_thread *t, struct hbg_ring *r) {
        return completion_eager_publish_deferred(t, r, batched_finish);
}

static bool batched_walk(struct sched_thread *t, struct hbg_ring *r) {
        struct batched_thread *rt = batched_of(t, r);
        if (!rt->walk_due)
                return false;
        rt->walk_due = false;
        bool advanced = watermark_walk_after_batch(ring_completer(t, r));
        if (advanced && retire_due(r))
                retire_graphs(r);
        /* After the walk's fence: a tensor wait for one of this visit's
         * tasks, which the watermark may not have passed (§2.1). */
        if (signal_task_waiter_due(r))
                signal_pipe(r);
        return advanced;
}

static int batched_ring_init(struct hbg_ring *r) {
        size_t bytes = r->engine->nthreads * sizeof(struct batched_thread);
        struct batched_thread *b = aligned_alloc(64, bytes);
        if (!b)
                return -ENOMEM;
        memset(b, 0, bytes);
        r->policy_state = b;
        return 0;
}

static void batched_ring_free(struct hbg_ring *r) {
        free(r->policy_state);
        r->policy_state = NULL;
}

static uint64_t batched_ring_memory(uint64_t task_window, unsigned nthreads) {
        (void)task_window;
        return nthreads * sizeof(struct batched_thread);
}

const struct completion_policy completion_eager_batched = {
        .name = "eager-batched",
        .ring_init = batched_ring_init,
        .ring_free = batched_ring_free,
        .ring_memory = batched_ring_memory,
        .complete = batched_complete,
        .tick = batched_tick,
        .end_visit = batched_walk,
        /* Every visit ends with the walk; this is for a thread that
         * completed something outside one (none does today). */
        .before_park = batched_walk,
};
