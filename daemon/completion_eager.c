/* SPDX-License-Identifier: MIT */
/*
 * The completion step, eager watermark mode (RUNTIME_LOGIC.md §11): publish
 * the stamp (or defer it to the failsafe heap), drain the wake list, advance
 * the watermark if at the frontier, release the slot, retire graphs.
 */
#include <errno.h>

#include "daemon/engine_private.h"

static void finish_published(struct sched_thread *t, struct hbg_ring *r, uint64_t id) {
        struct hbg_completer *c = &r->per_thread[t->index].completer;

        /* Order matters: the list closes only after the stamp is visible
         * (a waiter re-checking finds the producer set), and the watermark
         * moves only after the stamp (§4.1). */
        ring_drain_wake_list(t, r, id);
        bool advanced = hbg_update_completed_watermark(c, id);
        ring_slot_release(r, id);
        if (advanced)
                ring_retire_graphs(r);
}

static void eager_complete(struct sched_thread *t, struct hbg_ring *r, uint64_t id) {
        struct hbg_completer *c = &r->per_thread[t->index].completer;
        int rc = hbg_publish_or_defer(c, id);

        if (rc == 1)
                finish_published(t, r, id);
        else if (rc < 0)
                /* Unreachable with capacity D - F (§6.2); if it ever
                 * happens the ring stops rather than losing the task. */
                ring_fail(r, rc, id, "failsafe heap full");
}

static bool eager_tick(struct sched_thread *t, struct hbg_ring *r) {
        struct hbg_completer *c = &r->per_thread[t->index].completer;
        uint64_t id;
        bool did = false;

        while (hbg_retry_deferred(c, &id) == 1) {
                finish_published(t, r, id);
                did = true;
        }
        return did;
}

const struct completion_ops completion_eager_ops = {
        .complete = eager_complete,
        .tick = eager_tick,
};
