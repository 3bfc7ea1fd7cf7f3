/* SPDX-License-Identifier: MIT */
/*
 * A task's status becoming final (RUNTIME_LOGIC.md §11): its failure
 * recorded (failures.c), its counters, then the task handed to the
 * completion policy through engine->completion->complete, which publishes
 * its stamp, has its dependants made ready and moves the watermark
 * (completion.h).
 */
#include "daemon/engine/complete.h"

#include <errno.h>

#include "daemon/engine/completion.h"
#include "daemon/engine/engine_state.h"
#include "daemon/engine/failures.h"
#include "daemon/engine/ring.h"
#include "daemon/engine/engine_stats.h"

void complete_task(struct sched_thread *t, struct hbg_ring *r, uint64_t id, int status, const char *why) {
        struct task_slot *s = ring_slot(r, id);
        struct ring_thread *rt = &r->per_thread[t->index];

        if (status < 0) {
                atomic_store_explicit(&s->status, status, memory_order_relaxed);
                failures_tag(&r->fail.tags, id); /* before the stamp */
                failures_record(r, id, status, s->report_kernel, why);
                stat_add(&rt->failed, 1);
                if (status != -ECANCELED) { /* skipped ones count as retired */
                        stat_add(&t->stats.failed, 1);
                        stat_add(&t->tasks_failed[errno_slot(status)], 1);
                }
        }
        atomic_store_explicit(&s->state, SLOT_COMPLETING, memory_order_relaxed);
        stat_add(&rt->completed, 1);
        r->engine->completion->complete(t, r, id);
}
