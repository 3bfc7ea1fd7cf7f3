/* SPDX-License-Identifier: MIT */
/*
 * Ingest (RUNTIME_LOGIC.md §10.1, §14): claim a batch of submitted ids, or
 * a launch record with all its ids (launch.c); copy each descriptor out of
 * client memory once, validate the copy (validate.c) and hand the task on
 * (classify.c). What may be claimed is work.c's look.
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
#include "daemon/engine/work.h"

/* Descriptors copied out of client memory per memcpy: a run of them at a
 * time, in a buffer small enough (1 KiB) to stay in L1 while validated. */
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
        struct validate_memo memo = { .kept = false }; /* a run of tasks alike checks its kind once */

        struct task_slot *slots[COPY_RUN];
        for (uint64_t base = 0; base < n; base += COPY_RUN) {
                unsigned m = (unsigned)(n - base < COPY_RUN ? n - base : COPY_RUN);
                copy_descs(r, first + base, m, copy);
                for (unsigned i = 0; i < m; i++)
                        slots[i] = classify_begin(r, first + base + i);
                validate_claimed_run(r, slots, copy, first + base, m, &memo);
                for (unsigned i = 0; i < m; i++)
                        classify_link(r, slots[i], first, &set);
        }
        classify_run(t, r, first, n, &set);
}

bool ingest_ring(struct sched_thread *t, struct hbg_ring *r) {
        if (atomic_load_explicit(&r->broken, memory_order_relaxed) ||
            atomic_load_explicit(&r->removing, memory_order_relaxed))
                return false;
        if (launch_pending(t, r))
                return launch_continue(t, r);
        uint64_t claim = atomic_load_explicit(&r->claim, memory_order_acquire);
        bool launch;
        uint64_t n = work_claim_size(r, claim, r->engine->cfg.classify_batch, &launch);
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
        if (work_claimable(r, claim + n, 1, false))
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
