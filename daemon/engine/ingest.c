/* SPDX-License-Identifier: MIT */
/*
 * Ingest (RUNTIME_LOGIC.md §10.1, §14): claim a batch of submitted ids, or
 * a launch record with all its ids (launch.c); copy each descriptor out of
 * client memory once, validate the copy (validate.c) and hand the task on
 * (classify.c); and the "is there work" looks at a ring.
 */
#include "daemon/engine/ingest.h"

#include <errno.h>
#include <string.h>

#include "daemon/engine/classify.h"
#include "daemon/engine/engine_state.h"
#include "daemon/engine/ready.h"
#include "daemon/engine/ring.h"
#include "daemon/engine/validate.h"
#include "daemon/engine/wakeup.h"

/* Descriptors copied out of client memory per memcpy: a run of them at a
 * time, in a buffer small enough (7 KiB) to stay in L1 while validated. */
#define COPY_RUN 16u

/* Copy descriptors of ids first .. first + n - 1 (n <= COPY_RUN): one or,
 * where the ring wraps, two memcpy calls. */
static void copy_descs(struct hbg_ring *r, uint64_t first, uint64_t n, struct hbg_task_desc *out) {
        uint64_t at = first & r->task_mask;
        uint64_t head = r->g.task_window - at < n ? r->g.task_window - at : n;
        memcpy(out, &r->descs[at], head * sizeof(*out));
        memcpy(out + head, &r->descs[0], (n - head) * sizeof(*out));
}

/* A claimed run of plain tasks (§10.1): copied once from hostile memory a
 * run at a time, each copy validated into its slot (only the copies are
 * used), then wired and handed on together (classify_run). */
static void classify_plain(struct sched_thread *t, struct hbg_ring *r, uint64_t first, uint64_t n) {
        struct hbg_task_desc copy[COPY_RUN];
        struct classify_run_set set = { .n_linked = 0 };

        for (uint64_t base = 0; base < n; base += COPY_RUN) {
                uint64_t m = n - base < COPY_RUN ? n - base : COPY_RUN;
                copy_descs(r, first + base, m, copy);
                for (uint64_t i = 0; i < m; i++) {
                        uint64_t id = first + base + i;
                        struct task_slot *s = classify_begin(r, id);
                        const char *why = NULL;
                        s->classify_err = validate_task(r, s, &copy[i], &r->payloads[id & r->task_mask], id,
                                                        r->first_id, &why);
                        s->classify_why = why;
                        classify_link(r, s, first, &set);
                }
        }
        classify_run(t, r, first, n, &set);
}

/* How many ids from `claim` may be classified now: submitted, inside the
 * window, and their slots released by the previous lap (§10.1). all: max
 * of them or none (a launch), decided before looking at any slot. */
static uint64_t claimable(struct hbg_ring *r, uint64_t claim, uint64_t max, bool all) {
        uint64_t submitted = atomic_load_explicit(&r->sub->submitted, memory_order_seq_cst);
        uint64_t wm = watermark_read(&r->window);
        uint64_t limit = wm + r->g.task_window;

        atomic_store_explicit(&r->submitted_seen, submitted, memory_order_relaxed);
        if (submitted < limit)
                limit = submitted;
        if (limit <= claim || (all && limit - claim < max))
                return 0;
        uint64_t n = limit - claim < max ? limit - claim : max;
        for (uint64_t i = 0; i < n; i++)
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

bool ingest_launch_unsubmitted(struct hbg_ring *r, uint64_t claim, uint64_t submitted) {
        uint64_t count;
        return atomic_load_explicit(&r->n_recorded, memory_order_relaxed) > 0 && peek_launch(r, claim, &count) &&
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
                return claimable(r, claim, count, true) == count ? count : 0;
        }
        for (uint64_t i = 1; i < n; i++)
                if (peek_launch(r, claim + i, &count))
                        return i;
        return n;
}

/* The ids to claim at `claim` now (at most max; a launch whole), 0 if none.
 * Only a ring with a recorded graph looks for launch records (in others a
 * stray one fails validation as an unknown flag). The client launches only
 * after hbgd's reply to the recording, which followed n_recorded's store;
 * `submitted`, loaded seq_cst in claimable(), was stored after that reply,
 * so this load sees it (§14). */
static uint64_t claim_size(struct hbg_ring *r, uint64_t claim, uint64_t max, bool *launch) {
        *launch = false;
        uint64_t n = claimable(r, claim, max, false);
        if (n == 0 || atomic_load_explicit(&r->n_recorded, memory_order_relaxed) == 0)
                return n;
        return batch_size(r, claim, n, launch);
}

bool ingest_ring(struct sched_thread *t, struct hbg_ring *r) {
        if (atomic_load_explicit(&r->broken, memory_order_relaxed) ||
            atomic_load_explicit(&r->removing, memory_order_relaxed))
                return false;
        if (launch_pending(t, r))
                return launch_continue(t, r);
        uint64_t claim = atomic_load_explicit(&r->claim, memory_order_acquire);
        bool launch;
        uint64_t n = claim_size(r, claim, r->engine->cfg.classify_batch, &launch);
        if (n == 0)
                return false;
        if (!atomic_compare_exchange_strong_explicit(&r->claim, &claim, claim + n,
                                                     memory_order_acq_rel, memory_order_acquire))
                return true; /* another thread took it: there is work */

        /* Publish the classification cursor (monotone max). */
        uint64_t seen = atomic_load_explicit(&r->cpl->classified, memory_order_relaxed);
        while (seen < claim + n &&
               !atomic_compare_exchange_weak_explicit(&r->cpl->classified, &seen, claim + n,
                                                      memory_order_release, memory_order_relaxed))
                ;
        /* More waiting behind this batch: let a parked peer take it. */
        if (claimable(r, claim + n, 1, false))
                wakeup_one(r->engine);
        /* A launch wakes peers after each of its batches itself. */
        if (launch) {
                launch_classify(t, r, claim, n);
                return true;
        }
        classify_plain(t, r, claim, n);
        ready_wake_for_surplus(t, r);
        return true;
}

bool ingest_has_external_work(struct hbg_ring *r) {
        if (atomic_load(&r->broken) || atomic_load(&r->removing))
                return false;
        uint64_t claim = atomic_load_explicit(&r->claim, memory_order_acquire);
        bool launch;
        /* As ingest_ring() would claim: a launch record whose ids are not
         * all claimable yet is no work (hbgd parks; the client's publish
         * of the rest rings the doorbell, §9.4). */
        if (claim_size(r, claim, 1, &launch))
                return true;
        if (atomic_load_explicit(&r->sub->graphs_submitted, memory_order_seq_cst) >
            atomic_load_explicit(&r->graphs_seen, memory_order_relaxed))
                return true;
        uint64_t head = atomic_load_explicit(&r->mailbox_head, memory_order_relaxed);
        struct hbg_mailbox_entry *e = &r->mailbox[head & (r->g.mailbox_entries - 1)];
        return atomic_load_explicit(&e->seq, memory_order_seq_cst) == head + 1;
}

bool ingest_has_work(struct hbg_ring *r) {
        if (ingest_has_external_work(r) || mpmc_maybe_nonempty(&r->retire))
                return true;
        for (unsigned s = 0; s < SHAPE_EXEC_COUNT; s++)
                if (mpmc_maybe_nonempty(&r->ready[s]))
                        return true;
        return false;
}

bool ingest_has_kernel_work(struct hbg_ring *r) {
        if (atomic_load_explicit(&r->broken, memory_order_relaxed) ||
            atomic_load_explicit(&r->removing, memory_order_relaxed))
                return false;
        for (unsigned s = 0; s < SHAPE_EXEC_COUNT; s++)
                if (mpmc_maybe_nonempty(&r->ready[s]))
                        return true;
        if (ready_deques_nonempty(r))
                return true;
        bool launch;
        return claim_size(r, atomic_load_explicit(&r->claim, memory_order_acquire), 1, &launch) > 0;
}

/* New graph records the retirer has not looked at yet. */
bool ingest_graphs_arrived(struct hbg_ring *r) {
        return atomic_load_explicit(&r->sub->graphs_submitted, memory_order_acquire) >
               atomic_load_explicit(&r->graphs_seen, memory_order_relaxed);
}
