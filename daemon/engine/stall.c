/* SPDX-License-Identifier: MIT */
/*
 * The stall detector (RUNTIME_LOGIC.md §12.3) and "is this ring unfinished".
 */
#include "daemon/engine/stall.h"

#include <errno.h>
#include <inttypes.h>
#include <syslog.h>

#include "daemon/engine/engine_log.h"
#include "daemon/engine/complete.h"
#include "daemon/engine/retire.h"
#include "daemon/engine/ring.h"
#include "daemon/engine/work.h"
#include "common/clock.h"

/* Work the stall detector must watch: tasks or graph records pending. */
bool stall_unfinished(struct hbg_ring *r) {
        if (atomic_load(&r->broken))
                return false;
        uint64_t wm = watermark_read(&r->window);
        return wm < atomic_load_explicit(&r->submitted_seen, memory_order_relaxed) ||
               atomic_load_explicit(&r->sub->graphs_submitted, memory_order_relaxed) !=
                       atomic_load_explicit(&r->cpl->graphs_retired, memory_order_relaxed) ||
               mpmc_maybe_nonempty(&r->retire);
}

/* What the frontier task "is", in the stall report. */
static const char *state_name(uint32_t st) {
        switch (st) {
        case SLOT_FREE: return "free";
        case SLOT_WAITING: return "waiting for a dependency";
        case SLOT_QUEUED: return "queued or running";
        /* The client runs the host function and posts its result to
         * the mailbox: the user knows the former, not the latter. */
        case SLOT_EXTERNAL: return "a host task waiting for its host function's result";
        case SLOT_COMPLETING: return "completing";
        }
        return "?";
}

/* The stall detector fails with -ETIME ("timer expired"): a caller tells
 * it from its own wait's -ETIMEDOUT. */
void stall_check(struct sched_thread *t, struct hbg_ring *r) {
        uint64_t timeout = r->stall.timeout_ms;
        uint32_t expected = 0;

        if (timeout == 0 || atomic_load(&r->broken) ||
            !atomic_compare_exchange_strong(&r->stall.lock, &expected, 1))
                return;
        int64_t now = clock_now_ms();
        uint64_t wm = watermark_read(&r->window);
        uint64_t submitted = atomic_load_explicit(&r->sub->submitted, memory_order_acquire);
        uint64_t gsub = atomic_load_explicit(&r->sub->graphs_submitted, memory_order_acquire);
        uint64_t retired = atomic_load(&r->cpl->graphs_retired);
        bool pending = wm < submitted || gsub != retired;

        /* The clock runs from the first check that saw this work pending
         * and restarts at any progress: the watermark, or a graph retired
         * (which moves no watermark). Not from a check before an idle
         * spell: no thread checks a ring while they all sleep, and the
         * watermark a request starts from is the one the last check noted. */
        if (wm != r->stall.wm || retired != r->stall.retired || !pending || !r->stall.watching) {
                r->stall.wm = wm;
                r->stall.retired = retired;
                r->stall.since_ms = now;
                r->stall.watching = pending;
        } else if ((uint64_t)(now - r->stall.since_ms) > timeout) {
                uint64_t claim = atomic_load(&r->claim);
                struct task_slot *s = ring_slot(r, wm);
                uint32_t st = atomic_load(&s->state);
                bool owned = slot_owned_by(s, wm, memory_order_seq_cst);
                engine_log_ring(r, LOG_WARNING, &(struct hbg_log_fields){ .has_task = true, .task = wm },
                                "%s: no progress for %" PRIu64 " ms: watermark %" PRIu64
                                ", submitted %" PRIu64 ", classified %" PRIu64 ", graphs %" PRIu64
                                " submitted / %" PRIu64 " retired; frontier task is %s",
                                r->name, timeout, wm, submitted, claim, gsub,
                                atomic_load(&r->cpl->graphs_retired),
                                wm >= submitted ? "not submitted" : !owned ? "not classified" : state_name(st));
                uint32_t ext = SLOT_EXTERNAL;
                if (wm >= submitted) {
                        /* Nothing can ever move the watermark: stop. */
                        retire_fail(r, -ETIME, wm, "stall limit: the graph waits for a task that was never submitted");
                } else if (!owned && claim == wm && work_launch_unsubmitted(r, claim, submitted)) {
                        /* The same: its launch record waits for them (§14). */
                        retire_fail(r, -ETIME, wm,
                                    "stall limit: a launch record covers tasks that were never submitted");
                } else if (owned && atomic_compare_exchange_strong(&s->state, &ext, SLOT_COMPLETING)) {
                        atomic_fetch_add_explicit(&r->ext.stalled, 1, memory_order_relaxed);
                        complete_task(t, r, wm, -ETIME,
                                       "host task not completed within the session's stall limit");
                }
                /* Otherwise the frontier is queued, running (a long kernel
                 * is legitimate, §12.3) or completing: only logged. */
                r->stall.since_ms = now;
        }
        atomic_store(&r->stall.lock, 0);
}
