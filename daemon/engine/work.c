/* SPDX-License-Identifier: MIT */
/*
 * What a ring holds to do (RUNTIME_LOGIC.md §10.1, §14): the ids that may
 * be claimed now (the window, the previous lap's slots, launch records
 * claimed whole), and the hints of work the loops, the fair share and the
 * stall detector look at. Reads only; ingest.c claims.
 */
#include "daemon/engine/work.h"

#include <string.h>

#include "daemon/engine/engine_state.h"
#include "daemon/engine/queues.h"
#include "daemon/engine/ring.h"

uint64_t work_claimable(struct hbg_ring *r, uint64_t claim, uint64_t max, bool all) {
        uint64_t submitted = atomic_load_explicit(&r->sub->submitted, memory_order_seq_cst);
        uint64_t wm = watermark_read(&r->window);
        uint64_t limit = wm + r->g.task_window;

        /* Stored only when it moved: idle rings are looked at every turn. */
        if (atomic_load_explicit(&r->submitted_seen, memory_order_relaxed) != submitted)
                atomic_store_explicit(&r->submitted_seen, submitted, memory_order_relaxed);
        if (submitted < limit)
                limit = submitted;
        if (limit <= claim || (all && limit - claim < max))
                return 0;
        uint64_t n = limit - claim < max ? limit - claim : max;
        /* The first lap's slots have had no occupant: free, and not read.
         * A cold ring's slot pages were read here first, ahead of the
         * claim, which mapped the zero page; the classify's write then
         * faulted again: two faults a page (docs/PERFORMANCE.md). A later
         * lap waits for the previous occupant's release (acquire). */
        uint64_t lap = claim - r->first_id, D = r->g.task_window; /* claim >= first_id */
        for (uint64_t i = lap < D ? (D - lap < n ? D - lap : n) : 0; i < n; i++)
                if (atomic_load_explicit(&ring_slot(r, claim + i)->state, memory_order_acquire) !=
                    SLOT_FREE)
                        return i;
        return n;
}

/* Is the descriptor of id a launch record (§14)? A look at client memory
 * only to cut batches: the claimer copies and validates it again. Ids a
 * launch covers keep stale descriptors, whose id is never theirs. */
static bool peek_launch(struct hbg_ring *r, uint64_t id, uint64_t *ret_count) {
        const struct hbg_task_desc *d = &r->descs[id & r->task_mask];
        uint64_t seen_id, count;
        uint8_t flags;
        memcpy(&seen_id, &d->id, sizeof(seen_id));
        memcpy(&flags, &d->flags, sizeof(flags));
        memcpy(&count, &d->launch.count, sizeof(count));
        *ret_count = count;
        return seen_id == id && flags == HBG_DESC_LAUNCH;
}

bool work_launch_unsubmitted(struct hbg_ring *r, uint64_t claim, uint64_t submitted) {
        uint64_t count;
        return atomic_load_explicit(&r->recorded.n, memory_order_relaxed) > 0 && peek_launch(r, claim, &count) &&
               claim < submitted && count > submitted - claim;
}

/* The ids from `claim` to take as one batch, n of them claimable: a launch
 * record is claimed with all its ids at once, by one thread (*launch), and
 * a batch of plain tasks stops before the next launch record. 0: wait. */
static uint64_t batch_size(struct hbg_ring *r, uint64_t claim, uint64_t n, bool *launch) {
        uint64_t count;
        *launch = peek_launch(r, claim, &count);
        if (*launch) {
                /* A count no launch can have: claim the record alone, and
                 * launch_classify() fails it. */
                if (count == 0 || count > r->g.task_window)
                        return 1;
                return work_claimable(r, claim, count, true) == count ? count : 0;
        }
        for (uint64_t i = 1; i < n; i++)
                if (peek_launch(r, claim + i, &count))
                        return i;
        return n;
}

/* The ids to claim at `claim` now (at most max; a launch whole), 0 if none.
 * Only a ring with a recorded graph looks for launch records (in others a
 * stray one fails validation as an unknown flag). The client launches only
 * after hbgd's reply to the recording, which followed recorded.n's store;
 * `submitted`, loaded seq_cst in work_claimable(), was stored after that reply,
 * so this load sees it (§14). */
uint64_t work_claim_size(struct hbg_ring *r, uint64_t claim, uint64_t max, bool *launch) {
        *launch = false;
        uint64_t n = work_claimable(r, claim, max, false);
        if (n == 0 || atomic_load_explicit(&r->recorded.n, memory_order_relaxed) == 0)
                return n;
        return batch_size(r, claim, n, launch);
}

bool work_external(struct hbg_ring *r) {
        if (atomic_load(&r->broken) || atomic_load(&r->removing))
                return false;
        uint64_t claim = atomic_load_explicit(&r->claim, memory_order_acquire);
        bool launch;
        /* As ingest_ring() would claim: a launch record whose ids are not
         * all claimable yet is no work (hbgd parks; the client's publish
         * of the rest rings the doorbell, §9.4). */
        if (work_claim_size(r, claim, 1, &launch))
                return true;
        if (atomic_load_explicit(&r->sub->graphs_submitted, memory_order_seq_cst) >
            atomic_load_explicit(&r->retirer.graphs_seen, memory_order_relaxed))
                return true;
        uint64_t head = atomic_load_explicit(&r->mailbox_read.head, memory_order_relaxed);
        struct hbg_mailbox_entry *e = &r->mailbox[head & (r->g.mailbox_entries - 1)];
        return atomic_load_explicit(&e->seq, memory_order_seq_cst) == head + 1;
}

/*
 * With the watermark at the claim cursor every id claimed is complete, so
 * nothing of the ring is queued, in a deque or a continuation, in the
 * retire queue, deferred by a completer (a stamp waits only above the
 * watermark), expanding as a launch (claimed whole, complete only once
 * run) or awaited from the mailbox. The rest is what the client may have
 * added since (work_external(): the loads a visit makes, seq_cst on the
 * cursors) and the graph records the retirer holds. Whatever park()'s
 * re-check would find on a ring fails one of these, so no thread spins on
 * a ring this passes over. Stopped or removed rings: false (their visits
 * are as before). On a busy ring the first comparison decides.
 */
bool work_none(struct hbg_ring *r) {
        uint64_t claim = atomic_load_explicit(&r->claim, memory_order_acquire);
        if (watermark_read(&r->window) != claim)
                return false;
        uint64_t seen = atomic_load_explicit(&r->retirer.graphs_seen, memory_order_relaxed);
        if (atomic_load_explicit(&r->cpl->graphs_retired, memory_order_acquire) != seen ||
            atomic_load_explicit(&r->ext.skip_due_ns, memory_order_relaxed) != 0 ||
            atomic_load_explicit(&r->broken, memory_order_relaxed) ||
            atomic_load_explicit(&r->removing, memory_order_relaxed))
                return false;
        return !work_external(r);
}

bool work_kernel(struct hbg_ring *r) {
        if (atomic_load_explicit(&r->broken, memory_order_relaxed) ||
            atomic_load_explicit(&r->removing, memory_order_relaxed))
                return false;
        for (unsigned s = 0; s < SHAPE_EXEC_COUNT; s++)
                if (mpmc_maybe_nonempty(&r->ready[s]))
                        return true;
        if (queues_deques_nonempty(r))
                return true;
        bool launch;
        return work_claim_size(r, atomic_load_explicit(&r->claim, memory_order_acquire), 1, &launch) > 0;
}

/* seq_cst: a thread that just woke and cleared need_wakeup must see a
 * graph record published before the client read the flag (§9.4). */
bool work_graphs_arrived(struct hbg_ring *r) {
        return atomic_load_explicit(&r->sub->graphs_submitted, memory_order_seq_cst) >
               atomic_load_explicit(&r->retirer.graphs_seen, memory_order_relaxed);
}
