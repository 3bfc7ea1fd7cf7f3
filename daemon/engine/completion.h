/* SPDX-License-Identifier: MIT */
/*
 * The completion step (RUNTIME_LOGIC.md §11): what happens once a task's
 * status is final. One seam, one table of policies, chosen at engine start
 * (completion_mode):
 *
 *   eager     the frontier completer walks the watermark (§4, #1618);
 *   lazy      bounded advances per completion, a full walk by every thread
 *             every loop iteration (§11.2, #1619);
 *   resolver  scheduler threads hand finished ids to one core-less
 *             resolver thread that alone publishes, wakes and walks
 *             (§11.3, #1544);
 *   eager-batched
 *             eager's wake-ups, but stamps stored with release and the
 *             watermark walked once per visit of a ring, after one fence
 *             (§11.4): a variant, since it changes eager's defining rule
 *             (the frontier completer walks at once).
 *
 * Only a policy writes completion state (stamps, the watermark, deferred
 * ids); everyone else reads the one published watermark and the stamps.
 */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "daemon/engine/engine.h"

struct sched_thread;
struct hbg_ring;

struct completion_policy {
        enum hbg_completion_mode mode;
        const char *name;
        /* The last thread resolves: it owns no core and runs resolve(). */
        bool dedicated_resolver;
        /* A task's status is final (set in its slot): publish its stamp,
         * wake its dependants, move the watermark. Any thread. */
        void (*complete)(struct sched_thread *t, struct hbg_ring *r, uint64_t id);
        /* Once per visit of a ring by a scheduler thread: deferred work.
         * Returns whether it did any. */
        bool (*tick)(struct sched_thread *t, struct hbg_ring *r);
        /* A parking thread's last look, after it counted itself idle
         * (§9.4). Returns true when it found work. May be NULL. */
        bool (*before_park)(struct sched_thread *t, struct hbg_ring *r);
        /* The end of a scheduler thread's visit of a ring: what the policy
         * put off during the visit. Returns whether it did any. May be
         * NULL. */
        bool (*end_visit)(struct sched_thread *t, struct hbg_ring *r);
        /* The resolver thread's visit of a ring (dedicated_resolver only). */
        bool (*resolve)(struct sched_thread *t, struct hbg_ring *r);
        /* Work queued for the resolver in r, seen by a parking resolver
         * (seq_cst, §11.3). */
        bool (*resolver_has_work)(struct hbg_ring *r);
        /* Per-ring state (NULL: none). ring_init returns 0 or -ENOMEM;
         * ring_free accepts a ring ring_init never saw. */
        int (*ring_init)(struct hbg_ring *r);
        void (*ring_free)(struct hbg_ring *r);
        /* Bytes of that state per ring of window D with n threads. */
        uint64_t (*ring_memory)(uint64_t task_window, unsigned nthreads);
};

/* NULL for a mode that does not exist. */
const struct completion_policy *completion_policy(enum hbg_completion_mode mode);

extern const struct completion_policy completion_eager;
extern const struct completion_policy completion_lazy;
extern const struct completion_policy completion_resolver;
extern const struct completion_policy completion_eager_batched;

