/* SPDX-License-Identifier: MIT */
/*
 * The completion step (RUNTIME_LOGIC.md §11): what happens once a task's
 * status is final. One seam, one table of policies, chosen at engine start
 * (completion_mode; the default is the table's first, eager-batched):
 *
 *   eager     the frontier completer walks the watermark (§4, #1618; the
 *             seed's design);
 *   lazy      bounded advances per completion, a full walk by every thread
 *             every loop iteration (§11.2, #1619);
 *   resolver  scheduler threads hand finished ids to one core-less
 *             resolver thread that alone publishes, wakes and walks
 *             (§11.3, #1544);
 *   eager-batched
 *             eager's wake-ups, but stamps stored with release and the
 *             watermark walked once per visit of a ring, after one fence
 *             (§11.4): a policy of its own (completion_eager_batched.c),
 *             since it changes eager's defining rule (the frontier
 *             completer walks at once); it shares eager's retry of
 *             deferred ids (completion_eager.h). The default: it did
 *             best across the benchmark (docs/PERFORMANCE.md).
 *
 * A policy is one file (completion_NAME.c, defining its struct
 * completion_policy) plus one line of the table in completion.c; its
 * state lives in its file, allocated through the hooks below. Every list
 * of mode names (config, messages, --help, shell completion, bench,
 * tests) comes from that table.
 *
 * Only a policy writes completion state (stamps, the watermark, deferred
 * ids); everyone else reads the one published watermark and the stamps.
 *
 * The policy is where a task's walk turns back: complete.c hands it a
 * finished task through `complete` (a pointer, no call up), and the
 * policy, above every stage, has the task's dependants made ready
 * (ready.c, completion_task_released() below), the graphs retired
 * (retire.c) and the client told (signal.c).
 */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "daemon/engine/engine.h"
#include "daemon/engine/ready.h"
#include "daemon/engine/ring.h"

struct sched_thread;
struct hbg_ring;
struct lazy_span;
struct hbg_engine;

struct completion_policy {
        const char *name;
        /* The policy's own thread (NULL: none). The engine's last thread
         * then owns no core and runs thread_main(struct sched_thread *)
         * instead of the scheduler loop; thread_why refuses a
         * configuration with a single thread. wake_all wakes that thread
         * wherever it sleeps (the engine stops); may be NULL. */
        void *(*thread_main)(void *arg);
        const char *thread_why;
        void (*wake_all)(struct hbg_engine *e);
        /* A task's status is final (set in its slot): publish its stamp,
         * wake its dependants, move the watermark. Any thread. */
        void (*complete)(struct sched_thread *t, struct hbg_ring *r, uint64_t id);
        /* Once per visit of a ring by a scheduler thread: deferred work.
         * Returns whether it did any. */
        bool (*tick)(struct sched_thread *t, struct hbg_ring *r);
        /* A parking thread's last look, after it counted itself idle
         * (§9.4). Returns true when it found work. May be NULL. */
        bool (*before_park)(struct sched_thread *t, struct hbg_ring *r);
        /* The end of a scheduler thread's visit of a ring, and before a
         * long task within it (dispatch.c: a graph done before it must
         * not wait for it): what the policy put off during the visit.
         * Returns whether it did any. May be NULL. */
        bool (*end_visit)(struct sched_thread *t, struct hbg_ring *r);
        /* Per-engine state, the policy's own (engine_policy_state()),
         * NULL: none. engine_init returns 0 or -ENOMEM before any thread
         * starts; engine_free runs after every thread stopped and accepts
         * an engine engine_init never saw. */
        int (*engine_init)(struct hbg_engine *e);
        void (*engine_free)(struct hbg_engine *e);
        /* Per-ring state, the same (ring_policy_state()). */
        int (*ring_init)(struct hbg_ring *r);
        void (*ring_free)(struct hbg_ring *r);
        /* Bytes of that state per ring of window D with n threads, every
         * page of its lazy arrays counted. */
        uint64_t (*ring_memory)(uint64_t task_window, unsigned nthreads);
        /* Its i-th lazy array (ring_prefault()); false past the last. */
        bool (*ring_lazy_array)(const struct hbg_ring *r, unsigned i, struct lazy_span *ret);
};

/* NULL for a mode that does not exist. */
const struct completion_policy *completion_policy(unsigned mode);
/* "completion_mode: unknown mode (one of eager, lazy, ...)", static. */
const char *completion_unknown_why(void);

/* For a policy, once id's stamp is visible: its dependants made ready
 * (ready.c), then its slot released. */
static inline void completion_task_released(struct sched_thread *t, struct hbg_ring *r, uint64_t id) {
        /* The list closes only after the stamp is visible: a waiter that
         * finds it closed finds the producer complete (§10.2, §6.1). */
        ready_dependants(t, r, id);
        ring_slot_release(r, id);
}
