/* SPDX-License-Identifier: MIT */
/*
 * The eager watermark (RUNTIME_LOGIC.md §4-§6, §11.1; the seed's #1618):
 * publish the stamp (seq_cst) or defer it to the failsafe heap; drain the
 * wake list; the completer at the frontier walks the watermark over the
 * whole completed prefix; retire graphs when it moved.
 */
#include <errno.h>

#include "daemon/engine/completion.h"
#include "daemon/engine/engine_private.h"

static void finish_published(struct sched_thread *t, struct hbg_ring *r, uint64_t id) {
        struct hbg_completer *c = ring_completer(t, r);

        /* Order matters: the watermark moves only after the stamp (§4.1),
         * exactly once per id. */
        ring_drain_wake_list(t, r, id);
        bool advanced = hbg_update_completed_watermark(c, id);
        ring_slot_release(r, id);
        if (advanced && ring_retire_due(r))
                ring_retire_graphs(r);
}

static void eager_complete(struct sched_thread *t, struct hbg_ring *r, uint64_t id) {
        int rc = hbg_publish_or_defer(ring_completer(t, r), id);

        if (rc == 1)
                finish_published(t, r, id);
        else if (rc < 0)
                /* Unreachable with capacity D (§6.2); if it ever happens
                 * the ring stops rather than losing the task. */
                ring_fail(r, rc, id, "failsafe heap full");
}

static bool eager_tick(struct sched_thread *t, struct hbg_ring *r) {
        struct hbg_completer *c = ring_completer(t, r);
        uint64_t id;
        bool did = false;

        while (hbg_retry_deferred(c, &id) == 1) {
                finish_published(t, r, id);
                did = true;
        }
        return did;
}

const struct completion_policy completion_eager = {
        .mode = HBG_COMPLETION_EAGER,
        .name = "eager",
        .complete = eager_complete,
        .tick = eager_tick,
};
