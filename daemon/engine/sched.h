/* SPDX-License-Identifier: MIT */
/* sched.c: a scheduler thread, its state and its loop (RUNTIME_LOGIC.md
 * §9.4). */
#pragma once

#include <pthread.h>
#include <stdalign.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "daemon/engine/engine.h"
#include "daemon/engine/engine_stats.h"
#include "daemon/engine/histogram.h"
#include "daemon/engine/ktime.h"
#include "shm/completion.h"
#include "common/clock.h"

struct hbg_engine;
struct hbg_ring;

struct sched_thread {
        struct hbg_engine *engine;
        unsigned index;
        pthread_t thread;
        unsigned clusters;                /* owned clusters (may be 0) */
        unsigned first_cluster;
        /* Hazard pointers (§9.3): the ring this thread is visiting, and a
         * second one for a brief look at another ring (fair share). */
        alignas(64) _Atomic(struct hbg_ring *) hazard;
        _Atomic(struct hbg_ring *) peek_hazard;
        /* Fair share (§9.5): the share slot + 1 of the kernel this thread
         * runs, 0 none; written around every run, with turns or without,
         * read by fair_share_may_start() to count a share's threads. */
        _Atomic unsigned running_share;
        alignas(64) struct {
                _Atomic uint64_t classified, batch_linked, continued, stolen, retired_inline, failed;
                _Atomic uint64_t parks, wakeups, spurious, moves;
        } stats;
        /* Metrics, written by this thread only: the times of the tasks
         * whose last block it ran, per kernel (kernel_at() order,
         * daemon/engine/ktime.h), and failed tasks by errno
         * (engine_metrics). */
        alignas(64) struct ktime_kernel *ktime;
        struct ktime_clock ktime_clock;   /* the engine's, copied: no pointer to follow per task */
        /* Per kernel (kernel_at() order), this thread's runs of its tasks
         * in ticks, the estimate of a task's work when it queues one
         * (ready.h): down to a shorter run at once, up by 1/8 of a longer
         * one's difference. A cold first run after a park takes several
         * microseconds where the next take 50 ns; an average that kept
         * it made the thread wake peers for 16 no-op tasks in some runs,
         * and a peer that took half of them kept both estimates high. Too
         * low an estimate costs one recheck (dispatch.c). Starts at the
         * engine's long_run_ticks, so that a task of a kernel the thread
         * never ran counts as worth a peer's wake-up (surplus_wake_ticks
         * is that or 0) and as long (dispatch.c), also when the clock's
         * rate is in doubt. */
        uint64_t *run_avg;
        /* While this thread hands on the dependants of a task whose last
         * run it just ended: that run's end tick, which becomes their
         * ready stamp (the moment the input that held them back
         * completed), so that a chain reads the cycle counter twice a
         * task, not three times (ready.c, dispatch.c run_done()). 0 at
         * any other time: a task made ready then reads the counter. */
        uint64_t ready_tick;
        _Atomic uint64_t tasks_failed[HBG_ERRNO_SLOTS];
        /* Liveness for the systemd watchdog: bumped every loop iteration;
         * parked is set while waiting on the futex. */
        alignas(64) _Atomic uint64_t heartbeat;
        _Atomic bool parked;
        bool spinning;                    /* holds one of e->spinners */
        /* This thread's ring_counters of the rings freed, folded in
         * (rings_lock); those of the rings alive are in the rings. */
        struct ring_counters retired;
        unsigned ring_cursor;
        /* The ring this thread last answered and left drained: its slot
         * + 1 (0: none) and its serial (another ring may take the slot):
         * looked at often within a pass (sched.c). */
        unsigned answered_ring;
        uint64_t answered_serial;
        /* Fair share (§9.5), this thread's turn: the share slot it served
         * last and the kernels of that turn it may still start. */
        unsigned serving;
        unsigned credit;
        unsigned loops;                   /* scheduler loop turns: clock reads */
        int64_t now_ms;                   /* the clock as last read */
        int64_t last_stall_check_ms;
        /* Spurious wakes (wakeup_spurious): the last park ended by a wake
         * that no hbgd wake explains (a client's); the current window, its
         * count, and until when this thread parks on the private word. */
        bool woken_directly;
        int64_t spurious_window_ms;
        unsigned spurious_in_window;
        int64_t calm_until_ms;
        /* After a park (sched.c): the need_wakeup flags it left this
         * thread to clear at its first idle turn (flags_clear()); woken
         * and not idle since, so the first answer gives way at once
         * (answer_given()), and the loop turn it did; the pass after the
         * wake, which skips the stall check (made in the next pass). */
        bool flags_to_clear;
        bool just_woke;
        unsigned gave_way_loop;
        bool first_pass;
        /* The idle spin's yields that let another task run on this CPU,
         * in a row, since when; when this thread last moved off its CPU
         * for it, and the gap before the next move; its involuntary
         * context switches at the run's first yield (sched.c,
         * spin_yield). */
        unsigned yields_taken;
        long switches_seen;
        int64_t taken_since_ns;
        int64_t moved_ns;
        int64_t move_gap_ns;
};

/* The body of a scheduler thread. */
void *sched_thread_main(void *arg);

static inline void stat_add(_Atomic uint64_t *c, uint64_t n) {
        stat_inc(c, n);
}

/* Thread t is alive: one loop turn, or one task start (its only writer,
 * relaxed). */
static inline void sched_heartbeat(struct sched_thread *t) {
        atomic_store_explicit(&t->heartbeat, atomic_load_explicit(&t->heartbeat, memory_order_relaxed) + 1,
                              memory_order_relaxed);
}
