/* SPDX-License-Identifier: MIT */
/*
 * A claimed id's slot (RUNTIME_LOGIC.md §10.1): re-initialised for its
 * task, then, once the validated copy is in, handed on: failed, retired
 * inline or routed. Shared by plain tasks (ingest.c) and launched ones
 * (launch.c).
 */
#include "daemon/engine/engine_private.h"

struct task_slot *classify_begin(struct hbg_ring *r, uint64_t id) {
        struct task_slot *s = ring_slot(r, id);
        /* Re-initialise; readers of `status` by owner check (§12.2). */
        atomic_store_explicit(&s->owner_tag, SLOT_OWNER_NONE, memory_order_relaxed);
        atomic_store_explicit(&s->status, 0, memory_order_release);
        atomic_store_explicit(&s->done_blocks, 0, memory_order_relaxed);
        s->next_block = 0;
        s->id = id;
        s->n_fanins = 0;
        s->long_task = false;
        return s;
}

void classify_end(struct sched_thread *t, struct hbg_ring *r, struct task_slot *s, int err,
                     const char *why) {
        uint64_t id = s->id;
        atomic_store_explicit(&s->owner_tag, id + 1, memory_order_release);
        atomic_store_explicit(&s->state, SLOT_WAITING, memory_order_relaxed);
        if (s->long_task && !atomic_load_explicit(&r->has_long_tasks, memory_order_relaxed))
                atomic_store_explicit(&r->has_long_tasks, true, memory_order_relaxed);
        stat_add(&t->stats.classified, 1);
        if (err < 0) {
                s->n_fanins = 0;
                ring_task_done(t, r, id, err, why);
                return;
        }
        if (s->kind == KIND_INLINE && s->n_fanins == 0) {
                /* Host-inline: complete right here, nothing dispatched. */
                stat_add(&t->stats.retired_inline, 1);
                ring_task_done(t, r, id, 0, NULL);
                return;
        }
        ring_route(t, r, s, true);
}
