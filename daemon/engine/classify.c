/* SPDX-License-Identifier: MIT */
/*
 * A claimed id's slot (RUNTIME_LOGIC.md §10.1): re-initialised for its
 * task, then, once the validated copy is in, handed on: failed, retired
 * inline or routed. Shared by plain tasks (ingest.c) and launched ones
 * (launch.c).
 */
#include "daemon/engine/classify.h"

#include "daemon/engine/complete.h"
#include "daemon/engine/failures.h"
#include "daemon/engine/ready.h"
#include "daemon/engine/ring.h"
#include "daemon/engine/validate.h"

struct task_slot *classify_begin(struct hbg_ring *r, uint64_t id) {
        struct task_slot *s = ring_slot(r, id);
        /* Re-initialise; readers of `status` by owner check (§12.2). */
        atomic_store_explicit(&s->owner_tag, SLOT_OWNER_NONE, memory_order_relaxed);
        atomic_store_explicit(&s->status, 0, memory_order_release);
        atomic_store_explicit(&s->done_blocks, 0, memory_order_relaxed);
        s->next_block = 0;
        s->batch_head = WAKE_LINK_EMPTY;
        s->id = id;
        s->n_fanins = 0;
        s->classify_err = 0;
        s->classify_why = NULL;
        s->report_kernel = HBG_KERNEL_NONE;
        s->report_why = NULL;
        return s;
}

/* A refused task: the numbers behind its refusal kept for its graph's
 * message while the slot still holds its arguments, then completed. */
static __attribute__((cold, noinline)) void hand_on_refused(struct sched_thread *t, struct hbg_ring *r,
                                                            struct task_slot *s) {
        char text[FAILURE_DETAIL_MAX];
        if (validate_explain(r, s, s->classify_err, s->classify_why, text, sizeof(text)))
                failures_record_detail(r, s->id, text);
        complete_task(t, r, s->id, s->classify_err, s->classify_why);
}

/* A task of the run that is not linked to another: failed, retired inline
 * or routed. */
static void hand_on(struct sched_thread *t, struct hbg_ring *r, struct task_slot *s) {
        if (s->classify_err < 0) {
                hand_on_refused(t, r, s);
                return;
        }
        if (s->kind == KIND_INLINE && s->n_fanins == 0) {
                /* Host-inline: complete right here, nothing dispatched. */
                stat_add(&t->stats.retired_inline, 1);
                complete_task(t, r, s->id, 0, NULL);
                return;
        }
        ready_route(t, r, s, true);
}

/*
 * Classification of a run is two passes (§10.1). The first, task by task
 * right after the validation of the (up to 16) copies it came in
 * (classify_link): the task becomes owned and
 * waiting, and if it is valid and its latest fanin is in the run it goes
 * on that fanin's batch list, with plain stores: no task of the run has
 * been handed on yet, so none can complete and drain (its completer reads
 * the list after the task reached it by release/acquire). The second
 * (classify_run) hands on the others; a linked task is routed once, by its
 * fanin's completer. The linked set is the caller's bitmap, not a slot
 * field: a linked task may complete and its slot be re-classified while
 * the second pass runs.
 */
void classify_link(struct hbg_ring *r, struct task_slot *s, uint64_t first, struct classify_run_set *set) {
        uint64_t i = s->id - first;
        atomic_store_explicit(&s->owner_tag, s->id + 1, memory_order_release);
        atomic_store_explicit(&s->state, SLOT_WAITING, memory_order_relaxed);
        if (s->classify_err < 0) {
                s->n_fanins = 0;
                return;
        }
        uint64_t latest = 0;
        for (unsigned k = 0; k < s->n_fanins; k++)
                if (s->fanins[k] > latest)
                        latest = s->fanins[k];
        if (s->n_fanins == 0 || latest < first)
                return;
        /* Validation put every fanin below the task's own id: in the run. */
        struct task_slot *p = ring_slot(r, latest);
        s->next_link = p->batch_head;
        p->batch_head = (uint32_t)((s->id & r->task_mask) + 1);
        set->linked[i / 64] |= UINT64_C(1) << (i % 64);
        set->n_linked++;
}

void classify_run(struct sched_thread *t, struct hbg_ring *r, uint64_t first, uint64_t n,
                  const struct classify_run_set *set) {
        stat_add(&t->stats.classified, n);
        stat_add(&t->stats.batch_linked, set->n_linked);
        for (uint64_t i = 0; i < n; i++)
                if (!(set->linked[i / 64] & (UINT64_C(1) << (i % 64))))
                        hand_on(t, r, ring_slot(r, first + i));
}
