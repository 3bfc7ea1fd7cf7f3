/* SPDX-License-Identifier: MIT */
/*
 * Dispatch and execution (RUNTIME_LOGIC.md §10.4): a scheduler thread fills
 * the cores of the clusters it owns from the ring's ready queues, MIX tasks
 * first (they need a whole cluster), then AIC and AIV blocks, and runs the
 * kernels itself. Its own continuation and deque come first, and when it
 * has nothing else it steals from a peer's deque. SPMD tasks are claimed a
 * range of blocks at a time; the queue entry goes back before the blocks
 * run, so peers take the rest. Ready kernel-less tasks (the retire queue)
 * have nothing to run: taking one completes it.
 */
#include "daemon/engine/dispatch.h"

#include <errno.h>

#include "daemon/engine/complete.h"
#include "daemon/engine/completion.h"
#include "daemon/engine/engine_state.h"
#include "daemon/engine/fair_share.h"
#include "daemon/engine/fair_share_slots.h"
#include "daemon/engine/queues.h"
#include "daemon/engine/retire.h"
#include "daemon/engine/ring.h"
#include "daemon/engine/wakeup.h"
#include "daemon/engine/engine_stats.h"

/* A run's result as the task's status: a module's kernel that ignored a
 * stop (returned 0 after hbg_kernel_check() failed) gets the stop's
 * code, never a success with half its outputs; a return that is no
 * negative errno is -EIO (docs/KERNELS.md). Built-ins never need this. */
static int run_result(int rc, const struct kernel_run_ctx *ctx) {
        if (rc > 0 || rc < -4095)
                return -EIO;
        if (rc == 0 && ctx->stopped == KERNEL_STOP_BUDGET)
                return -ETIME;
        if (rc == 0 && ctx->stopped == KERNEL_STOP_CANCEL)
                return -ECANCELED;
        return rc;
}

/* Run part `part` of `parts` of task id (slot s) with kernel k; its
 * failure, if it is the run's first, into *err, *err_kernel, *err_why. */
static inline void run_part(struct hbg_ring *r, uint64_t id, struct task_slot *s, const struct kernel_info *k,
                            struct kernel_run_ctx *ctx, uint32_t part, uint32_t parts, int *err, uint16_t *err_kernel,
                            const char **err_why) {
        int rc = k->run(&ctx->k, r->heap, &s->args, part, parts);
        if (__builtin_expect(rc != 0 || ctx->stopped != KERNEL_STOP_NONE, 0))
                rc = run_result(rc, ctx);
        if (rc < 0 && *err == 0) {
                *err = rc;
                *err_kernel = k->sig->id;
                if (ctx->stopped == KERNEL_STOP_BUDGET)
                        *err_why = r->engine->budget_why[k->index];
                else if (ctx->stopped == KERNEL_STOP_CANCEL)
                        *err_why = cancel_find(r, id);
        }
}

/* The times of task s, whose last block this thread ran, and its
 * failure, into the thread's table for the kernel of its first active
 * lane (ktime.h): the same thread counts a task and its failure, so
 * failures never outnumber tasks. */
static void kernel_times(struct sched_thread *t, const struct task_slot *s, int status, uint64_t end) {
        uint64_t start = s->start_tick;
        struct ktime_kernel *k = &t->ktime[s->ktime_kernel];
        ktime_observe(&t->ktime_clock, &k->run, ktime_since(start, end));
        ktime_observe(&t->ktime_clock, &k->wait, ktime_since(s->ready_tick, start));
        if (__builtin_expect(status < 0, 0))
                ktime_add(&k->failures, 1);
}

/* A surplus this thread held back as too little work (ready.c's
 * wake_for_surplus()), after a run of `ran` ticks in r. None left beyond
 * the task it takes next: released (its count starts again). Once the
 * runs since the first hold make READY_SURPLUS_WAKE_NS, its estimate was
 * low (the tasks took longer than their kernels' recent runs): tasks
 * still queued beyond that one wake a peer. A wake the cap or the idle
 * counts skip is not retried here; the surplus is then the next look's. */
static void held_surplus_ran(struct sched_thread *t, struct hbg_ring *r, struct ring_thread *rt, uint64_t ran) {
        bool takes_one = !rt->has_continuation;
        bool surplus = queues_ready_hint(t, r) > (takes_one ? 1u : 0u);
        if (surplus && !queues_surplus_ran(rt, ran, r->engine->surplus_wake_ticks))
                return;
        queues_surplus_release(rt);
        if (surplus)
                wakeup_executor(r->engine);
}

/*
 * Before a task that looks long (its kernel's recent runs on this thread
 * took READY_SURPLUS_WAKE_NS or more; a kernel's first run counts as long;
 * RUNTIME_LOGIC §9.4): nothing waits for it that need not.
 * - What the visit put off (the policy's end_visit: the batched walk), so
 *   that graphs and waits its predecessors completed do not wait (§11.4).
 * - Whatever is queued beyond it, however little work it is: a peer is
 *   woken for it if one is idle (a surplus held back as too little work is
 *   released, as once the runs make that much, held_surplus_ran()).
 * - What clients publish while it runs. need_wakeup is clear once an
 *   awake thread found work in the ring (the last to park sets it), so
 *   a client does not ring, counting on that thread to look, which one
 *   inside a long kernel does not. The thread counts itself in in_long
 *   (seq_cst): a peer that parks
 *   while it runs then takes the threads in long tasks for parked ones
 *   and sets the flag as the last to park does (sched.c park()); and if
 *   the others are parked already, it sets this ring's flag itself
 *   (seq_cst). Either way only when a ring could wake a thread that may
 *   run (wakeup_could_help(): not while max_awake_threads are awake). Its
 *   seq_cst RMW and load of `idle` against the parking peer's RMW of
 *   `idle` and its load of in_long: one of them sees the other. A flag set
 *   only makes clients ring; a miss only delays, as before.
 */
static void before_long(struct sched_thread *t, struct hbg_ring *r) {
        struct hbg_engine *e = r->engine;
        if (e->completion->end_visit)
                e->completion->end_visit(t, r);
        queues_surplus_release(&r->per_thread[t->index]);
        if (queues_ready_hint(t, r) > 0)
                wakeup_executor(e);
        atomic_fetch_add(&e->in_long, 1);
        unsigned idle = atomic_load(&e->idle);
        if (idle + 1 >= e->nschedulers && wakeup_could_help(e, idle) &&
            !atomic_load_explicit(&r->cpl->need_wakeup, memory_order_relaxed))
                atomic_store(&r->cpl->need_wakeup, 1);
}

/* After the long task: out of in_long, and this ring's flag cleared as an
 * awake thread clears it (seq_cst, §9.4): a client that publishes after
 * this finds it clear and counts on this thread, which looks at the ring
 * again in its visit or before it parks. */
static void after_long(struct hbg_ring *r) {
        atomic_fetch_sub(&r->engine->in_long, 1);
        if (atomic_load_explicit(&r->cpl->need_wakeup, memory_order_relaxed))
                atomic_store(&r->cpl->need_wakeup, 0);
}

/* What a run of a task's blocks came to: its first failure, if any, with
 * the kernel and reason a failure names (not s->report_kernel: a peer
 * running other blocks of the task may be writing it). */
struct run_outcome {
        int err;
        uint16_t err_kernel;
        const char *err_why;
        bool unrun;             /* no block started: its time is not a kernel's */
};

/* Run blocks first .. first + n - 1 of task id (slot s). */
static inline __attribute__((always_inline)) void run_taken(struct hbg_ring *r, uint64_t id, struct task_slot *s,
                                                            uint32_t first, uint32_t n, struct run_outcome *o) {
        /* Subtask (block b, j-th active lane) is part b * lanes + j of
         * block_num * lanes: the kernels split their work by part. A
         * kernel that does not split has one block of one lane in the
         * slot (validate.c): part 0 of 1, below. */
        uint32_t parts = (uint32_t)s->block_num * s->lanes;
        /* A task of several blocks that another run failed already (its
         * kernel's error, its time budget): the blocks taken now are not
         * run, and count as done (§10.6). The status is its first error,
         * CAS'd in by run_done() before that run's acq_rel count; relaxed:
         * a 0 read late runs the blocks, as before the failure. */
        if (s->block_num > 1 && atomic_load_explicit(&s->status, memory_order_relaxed) != 0) {
                o->unrun = true;
                return;
        }
        /* One context for all the blocks taken: the time budget bounds how
         * long this thread stays in the task (§10.6). Its stop word is the
         * ring's cancel word (§12.6): a relaxed load, nonzero count only
         * while a cancel of this ring is pending; then the table is looked
         * at under the cold lock. A cancel that comes later changes the
         * word, which the kernel's next check sees; the filter then says
         * whether it is about this task. */
        struct kernel_run_ctx ctx;
        struct cancel_watch watch = { r, id };
        uint32_t cancel_word = atomic_load_explicit(&r->cancel.word, memory_order_relaxed);
        kernel_run_ctx_init(&ctx, r->engine->kernel_budget_ns, &r->cancel.word);
        kernel_run_ctx_filter(&ctx, cancel_word, cancel_applies, &watch);
        if (cancel_word & CANCEL_COUNT) {
                o->err_why = cancel_find(r, id);
                if (o->err_why) {
                        /* Not started: its blocks count as done, unrun. */
                        o->err = -ECANCELED;
                        o->err_kernel = s->report_kernel;
                        o->unrun = true;
                        ctx.stopped = KERNEL_STOP_CANCEL;
                }
        }
        if (__builtin_expect(n == 1 && s->lanes == 1, 1)) {
                /* One block of one lane, most tasks: the loop below, unrolled. */
                if (ctx.stopped == KERNEL_STOP_NONE) {
                        if (atomic_load_explicit(&r->removing, memory_order_relaxed))
                                o->err = -ESHUTDOWN;
                        else
                                run_part(r, id, s, s->kernel[__builtin_ctz(s->lane_mask & HBG_LANE_MASK_ALL)],
                                         &ctx, first, parts, &o->err, &o->err_kernel, &o->err_why);
                }
                return;
        }
        for (uint32_t b = first; b < first + n && ctx.stopped == KERNEL_STOP_NONE; b++) {
                /* A ring being removed starts no new block; the blocks
                 * not run still count as done so the task completes. */
                if (atomic_load_explicit(&r->removing, memory_order_relaxed)) {
                        if (o->err == 0)
                                o->err = -ESHUTDOWN;
                        break;
                }
                uint32_t j = 0;
                /* The active lanes, lowest first (the mask was
                 * validated: no bit beyond HBG_LANES). */
                for (unsigned lanes = s->lane_mask & HBG_LANE_MASK_ALL; lanes; lanes &= lanes - 1) {
                        run_part(r, id, s, s->kernel[__builtin_ctz(lanes)], &ctx, b * s->lanes + j, parts, &o->err,
                                 &o->err_kernel, &o->err_why);
                        if (ctx.stopped != KERNEL_STOP_NONE)
                                break;
                        j++;
                }
        }
}

/* After a run of n blocks of task id begun at `started`: its time, its
 * trace, its failure, and the task's completion if this run finished it. */
static inline __attribute__((always_inline)) void run_done(struct sched_thread *t, struct hbg_ring *r,
                                                           struct ring_thread *rt, uint64_t id,
                                                           struct task_slot *s, uint32_t first, uint32_t n,
                                                           uint64_t started, const struct run_outcome *o) {
        /* Before the completion below: whoever sees the task complete
         * sees its blocks counted (ring.h). */
        stat_add(&rt->dispatched, n);
        /* This run's time: the estimate of a queued task's work
         * (ready.h), and the task's end if this run finishes it. */
        uint64_t ended = ktime_now(), ran = ktime_since(started, ended);
        uint64_t *avg = &t->run_avg[s->ktime_kernel];
        if (!o->unrun)
                *avg = ran < *avg ? ran : *avg + ((ran - *avg) >> 3);
        /* Tracing (trace.h): one relaxed load and a branch while off.
         * Before the count below: then the slot may go to id + D. */
        uint32_t trace = trace_epoch(&r->engine->trace);
        if (__builtin_expect(trace != 0, 0))
                trace_task(&r->engine->trace, trace, r, s, id, first, n, o->err, started, ended);
        if (o->err < 0) {
                /* The first error becomes the task's status, and its
                 * kernel the one a failure names (§12.2): written only by
                 * the winner, before the acq_rel add below. */
                int32_t zero = 0;
                if (atomic_compare_exchange_strong(&s->status, &zero, o->err) && o->err_kernel != HBG_KERNEL_NONE) {
                        s->report_kernel = o->err_kernel;
                        s->report_why = o->err_why;
                }
        }
        /* acq_rel: the last finisher sees every block's effects and status.
         * block_num is read before: once the count is in, a peer may finish
         * the task and the slot may be re-classified for id + D. */
        uint32_t total = s->block_num;
        if (atomic_fetch_add_explicit(&s->done_blocks, n, memory_order_acq_rel) + n == total) {
                int st = atomic_load_explicit(&s->status, memory_order_relaxed);
                /* Counts the task too (engine_thread_stats()'s
                 * executed_tasks). */
                kernel_times(t, s, st, ended);
                /* The dependants its completion hands on take this run's
                 * end as their ready stamp (sched.h); the outer value
                 * comes back after, should a completion ever run inside
                 * another's. */
                uint64_t outer = t->ready_tick;
                t->ready_tick = ended;
                /* The kernel's own error (§12.2): strerror, or the
                 * reason the winner above left. */
                complete_task(t, r, id, st, st < 0 ? s->report_why : NULL);
                t->ready_tick = outer;
        }
        /* The run whose completion made a held surplus counts too: a
         * task of 5 us or more that queues a few others wakes a peer for
         * them at once (their kernels may be as long). The slot may be
         * id + D's by now: ran is this run's own. */
        if (__builtin_expect(queues_surplus_held(rt), 0))
                held_surplus_ran(t, r, rt, ran);
}

/* Run up to `max_blocks` blocks of task `id`; returns the blocks taken. The
 * caller holds the task's only queue entry, so it alone may claim. rt:
 * r->per_thread[t->index], as the visit found it. */
static unsigned run_blocks(struct sched_thread *t, struct hbg_ring *r, struct ring_thread *rt, uint64_t id,
                           unsigned max_blocks) {
        /* A task start is progress for the watchdog (OPERATIONS.md): a
         * visit may run 64 long kernels back to back, and only one kernel
         * past the watchdog's interval should stop the pings. */
        sched_heartbeat(t);
        struct task_slot *s = ring_slot(r, id);
        uint32_t first = s->next_block;
        uint32_t n = s->block_num - first;

        if (n > max_blocks)
                n = max_blocks;
        s->next_block = first + n;
        if (first + n < s->block_num) {
                /* Hand the rest on before running ours. Cannot fail: one
                 * entry per task, capacity D (§10.4). */
                if (!mpmc_push(&r->ready[s->shape], id)) {
                        retire_fail(r, -EOVERFLOW, id, "ready queue full (engine bug)");
                        return 0;
                }
                wakeup_executor(r->engine);
        }
        /* Nothing waits for a long task that need not (before_long()). */
        bool long_task = t->run_avg[s->ktime_kernel] >= r->engine->long_run_ticks;
        if (__builtin_expect(long_task, 0))
                before_long(t, r);
        /* This run's start (ktime.h), after handing the rest on (a wake
         * may be a system call): the task's if it is its first. Stored
         * before this run's acq_rel add to done_blocks, after which the
         * last finisher reads it. */
        uint64_t started = ktime_now();
        if (first == 0)
                s->start_tick = started;
        struct run_outcome o = { 0, HBG_KERNEL_NONE, NULL, false };
        run_taken(r, id, s, first, n, &o);
        run_done(t, r, rt, id, s, first, n, started, &o);
        if (__builtin_expect(long_task, 0))
                after_long(r);
        return n;
}

/* May this visit start another task of r? Not once the ring is being
 * removed (removal then waits for at most the kernel running now) or is
 * broken (its graphs have failed), not when it is another share's turn
 * (§9.5), and not when a second share appeared since the visit began
 * without turns: the next visit takes them. */
static bool may_start(struct sched_thread *t, struct hbg_ring *r, bool turns) {
        if (atomic_load_explicit(&r->removing, memory_order_relaxed) ||
            atomic_load_explicit(&r->broken, memory_order_relaxed))
                return false;
        if (!turns)
                return atomic_load_explicit(&r->engine->shares_in_use, memory_order_relaxed) < 2;
        return fair_share_may_start(t, r);
}

/* run_blocks() of a task may_start() allowed; with turns, counted as a
 * kernel of the share's turn (§9.5). The thread's running_share says
 * whose kernel it runs with turns or without: a share that starts
 * competing counts the kernels already running, started while one share
 * was alone, against its cap (fair_share_may_start()). Relaxed stores to
 * the thread's own word: a hint, as every count the turns read. */
static unsigned run_task(struct sched_thread *t, struct hbg_ring *r, struct ring_thread *rt, uint64_t id,
                         unsigned max_blocks, bool turns) {
        atomic_store_explicit(&t->running_share, r->share + 1, memory_order_relaxed);
        if (turns)
                fair_share_begin(t, r);
        unsigned n = run_blocks(t, r, rt, id, max_blocks);
        atomic_store_explicit(&t->running_share, 0, memory_order_relaxed);
        return n;
}

/* Tasks run from the thread's own continuation and deque, stolen, and
 * from the queues' fills: no new round of either once this many ran in a
 * visit, so that a long chain or a wide graph still lets the visit ingest
 * and poll in between; private ones left over are queued at its end. */
#define LOCAL_RUNS_PER_VISIT 64u

static bool has_local(struct ring_thread *rt) {
        return rt->has_continuation || ws_size_hint(&rt->deque) > 0;
}

/* Run a task taken from a private source (continuation, deque, theft)
 * with the thread's whole budget for its shape, as a task popped from the
 * queue first would get. */
static void run_local(struct sched_thread *t, struct hbg_ring *r, struct ring_thread *rt, uint64_t id, bool turns,
                      unsigned *runs) {
        uint8_t shape = ring_slot(r, id)->shape;
        run_task(t, r, rt, id, shape == SHAPE_AIV ? 2 * t->clusters : t->clusters, turns);
        ++*runs;
}

/* Run this thread's continuation, then its deque newest first (§10.4):
 * each task may leave more. */
static bool run_continuations(struct sched_thread *t, struct hbg_ring *r, struct ring_thread *rt,
                              bool turns, unsigned *runs) {
        bool did = false;
        uint64_t id;
        while (*runs < LOCAL_RUNS_PER_VISIT && may_start(t, r, turns)) {
                if (queues_continuation_take(t, r, &id))
                        stat_add(&t->stats.continued, 1);
                else if (!ws_take(&rt->deque, &id))
                        break;
                run_local(t, r, rt, id, turns, runs);
                did = true;
        }
        return did;
}

/* Nothing of our own and nothing queued: take the oldest task from a
 * peer's deque (a peer in the middle of its visit of this ring), and what
 * it leaves. */
static bool steal(struct sched_thread *t, struct hbg_ring *r, struct ring_thread *rt, bool turns,
                  unsigned *runs) {
        unsigned n = r->engine->nthreads;
        bool did = false;
        for (unsigned k = 1; k < n && *runs < LOCAL_RUNS_PER_VISIT && may_start(t, r, turns); k++) {
                uint64_t id;
                if (!ws_steal(&r->per_thread[(t->index + k) % n].deque, &id))
                        continue;
                stat_add(&t->stats.stolen, 1);
                run_local(t, r, rt, id, turns, runs);
                run_continuations(t, r, rt, turns, runs);
                did = true;
        }
        return did;
}

/* Tasks of one shape from the ring's ready queue, up to `cores` blocks
 * (run_blocks() takes at most that many of a task); a continuation a
 * task leaves runs after it. Each task counts in *runs and sets *did.
 * Returns the cores left. */
static unsigned fill_shape(struct sched_thread *t, struct hbg_ring *r, struct ring_thread *rt, bool turns,
                           unsigned *runs, unsigned shape, unsigned cores, bool *did) {
        uint64_t id;
        while (cores > 0 && may_start(t, r, turns) && mpmc_pop(&r->ready[shape], &id)) {
                cores -= run_task(t, r, rt, id, cores, turns);
                ++*runs;
                if (has_local(rt))
                        run_continuations(t, r, rt, turns, runs);
                *did = true;
        }
        return cores;
}

/* One fill of the thread's clusters from the ring's ready queues (§10.4):
 * MIX blocks first, one per whole cluster, then one AIC and two AIV cores
 * per cluster left. True if a task ran. */
static bool fill_clusters(struct sched_thread *t, struct hbg_ring *r, struct ring_thread *rt, bool turns,
                          unsigned *runs) {
        bool did = false;
        unsigned clusters = fill_shape(t, r, rt, turns, runs, SHAPE_MIX, t->clusters, &did);
        fill_shape(t, r, rt, turns, runs, SHAPE_AIC, clusters, &did);
        fill_shape(t, r, rt, turns, runs, SHAPE_AIV, 2 * clusters, &did);
        return did;
}

bool dispatch_ring(struct sched_thread *t, struct hbg_ring *r) {
        if (t->clusters == 0 || atomic_load_explicit(&r->broken, memory_order_relaxed) ||
            atomic_load_explicit(&r->removing, memory_order_relaxed))
                return false;

        /* With several shares (uids), every kernel start takes its turn
         * (§9.5): one visit runs at most what the share's turn allows, then
         * the thread serves the next share waiting. Decided at the start of
         * the visit (a visit without turns ends as soon as a second share
         * exists); one share, however many rings, pays one relaxed load per
         * task. */
        struct ring_thread *rt = &r->per_thread[t->index];
        bool turns = atomic_load_explicit(&r->engine->shares_in_use, memory_order_relaxed) > 1;

        unsigned runs = 0;
        /* A continuation left by ingest or a completion before this call.
         * The private flag is tested here, not in a call: most tasks of
         * wide graphs leave none. */
        bool did = has_local(rt) && run_continuations(t, r, rt, turns, &runs);

        /* Fills of the thread's clusters, each as the seed's visit: MIX
         * blocks first (a block takes a whole cluster), then one AIC and two
         * AIV cores per cluster left. The thread runs a fill's tasks one
         * after another, so a visit takes fills while the last one found
         * work, up to the per-visit bound private work has: a wide graph
         * then pays the visit's ingest, mailbox and retire looks once per
         * fill of up to LOCAL_RUNS_PER_VISIT tasks, not once per task. */
        bool filled;
        do {
                filled = fill_clusters(t, r, rt, turns, &runs);
                did |= filled;
        } while (filled && runs < LOCAL_RUNS_PER_VISIT);
        /* Idle with respect to this ring: help a peer. */
        if (!did)
                did = steal(t, r, rt, turns, &runs);
        if (turns && !did)
                fair_share_visit_idle(t, r);
        return did;
}

bool dispatch_retire_queue(struct sched_thread *t, struct hbg_ring *r, unsigned max) {
        uint64_t id;
        unsigned n = 0;

        if (atomic_load_explicit(&r->broken, memory_order_relaxed))
                return false;
        while (n < max && mpmc_pop(&r->retire, &id)) {
                struct task_slot *s = ring_slot(r, id);
                int st = atomic_load_explicit(&s->status, memory_order_relaxed);
                stat_add(&t->stats.retired_inline, 1);
                complete_task(t, r, id, st, st ? "a dependency failed" : NULL);
                n++;
        }
        return n > 0;
}
