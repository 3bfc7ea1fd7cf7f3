/* SPDX-License-Identifier: MIT */
/*
 * The eager watermark (RUNTIME_LOGIC.md §4-§6, §11.1; the seed's #1618):
 * publish the stamp (seq_cst) or defer it to the failsafe heap; drain the
 * wake list; the completer at the frontier walks the watermark over the
 * whole completed prefix; retire graphs when it moved. Its batched
 * sibling (§11.4) is completion_eager_batched.c.
 */
#include <errno.h>

#include "daemon/engine/completion.h"
#include "daemon/engine/completion_eager.h"
#include "daemon/engine/engine_state.h"
#include "daemon/engine/ready.h"
#include "daemon/engine/retire.h"
#include "daemon/engine/ring.h"
#include "daemon/engine/signal.h"

static void finish_published(struct sched_thread *t, struct hbg_ring *r, uint64_t id) {
        struct hbg_completer *c = ring_completer(t, r);

        /* Order matters: the watermark moves only after the stamp (§4.1),
         * exactly once per id. */
        ready_dependants(t, r, id);
        bool advanced = watermark_update(c, id);
        ring_slot_release(r, id);
        if (advanced && retire_due(r))
                retire_graphs(r);
}

static void eager_complete(struct sched_thread *t, struct hbg_ring *r, uint64_t id) {
        int rc = completer_publish_or_defer(ring_completer(t, r), id);

        if (rc == 1)
                finish_published(t, r, id);
        else if (rc < 0)
                /* Unreachable with capacity D (§6.2); if it ever happens
                 * the ring stops rather than losing the task. */
                retire_fail(r, rc, id, "failsafe heap full");
}

static bool eager_tick(struct sched_thread *t, struct hbg_ring *r) {
        return completion_eager_publish_deferred(t, r, finish_published);
}

/* A tensor wait for one of this visit's tasks, which the watermark may
 * not have passed (§2.1): after their stamps' seq_cst stores, once a
 * visit rather than once a task (the request shares a line with the
 * client's cursor, which it writes at every publish). Nothing to do. */
static bool eager_end_visit(struct sched_thread *t, struct hbg_ring *r) {
        (void)t;
        if (signal_task_waiter_due(r))
                signal_pipe(r);
        return false;
}

const struct completion_policy completion_eager = {
        .name = "eager",
        .complete = eager_complete,
        .tick = eager_tick,
        .end_visit = eager_end_visit,
};
