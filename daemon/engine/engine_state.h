/* SPDX-License-Identifier: MIT */
/* The engine's own state (struct hbg_engine), shared by its modules;
 * not a public surface (that is engine.h). The modules and their call
 * order: tests/scripts/layers.txt (checked by tests/scripts/check-layers.sh) and
 * docs/ARCHITECTURE.md, "Engine". */
#pragma once

#include <pthread.h>
#include <sched.h>
#include <stdalign.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "daemon/engine/engine.h"
#include "daemon/engine/engine_stats.h"
#include "daemon/engine/histogram.h"
#include "daemon/engine/ring_spares.h"
#include "daemon/engine/trace.h"
#include "daemon/engine/wake_pages.h"
#include "daemon/engine/ktime.h"
#include "shm/layout.h"
#include "common/clock.h"

struct completion_policy;
struct sched_thread;
struct hbg_ring;
struct fair_share_slot;

struct hbg_engine {
        struct hbg_engine_config cfg;
        const struct completion_policy *completion;
        void *policy_state;               /* the completion policy's (engine_init) */
        struct sched_thread *threads;
        unsigned nthreads;
        /* Threads that schedule: those below; the one above, if any, is
         * the completion policy's own (thread_main), and owns no core. */
        unsigned nschedulers;
        unsigned threads_started;         /* joined by engine_free() */

        _Atomic(struct hbg_ring *) *rings;
        _Atomic unsigned rings_high;      /* rings[] entries in use are below */
        _Atomic unsigned ring_count;      /* rings[] entries in use */
        /* Share slots, max_rings of them, and how many hold rings (a hint,
         * relaxed: above 1, kernel starts take turns, §9.5). */
        struct fair_share_slot *shares;
        _Atomic unsigned shares_in_use;
        pthread_mutex_t rings_lock;       /* add/remove/collect only */
        bool rings_lock_ready;
        struct hbg_ring *removed;         /* removed, not freed yet (rings_lock) */
        uint64_t rings_added;             /* rings ever added: their serials (rings_lock) */
        /* The graph metrics of freed rings, folded in (rings_lock). */
        uint64_t freed_graphs_noticed;
        struct hbg_histogram freed_graph_latency;
        uint64_t freed_graphs_failed[HBG_ERRNO_SLOTS];

        /* Parking (§9.4): parked threads sleep on wake_seq, private (hbgd's
         * own wakes bump and wake it; no client can reach it), and, where
         * the kernel has futex_waitv (page_waits) and the thread is within
         * its spurious-wake budget, on the words of the wake pages in use
         * too (wake_pages.c: one per uid, sealed memfds mapped writable
         * here alone; clients map them read-only and FUTEX_WAKE the word;
         * hbgd never writes it). */
        alignas(64) _Atomic uint32_t wake_seq;
        struct wake_pages wake_pages;
        _Atomic bool page_waits;          /* futex_waitv works (relaxed: a hint, fixed or turned off once) */
        _Atomic unsigned idle;
        /* A thread that set need_wakeup in every ring went to sleep
         * (park()): the first thread to wake after it takes this and
         * clears every flag; any thread clears those of the rings it
         * finds work in (§9.4). */
        _Atomic bool wakeup_asked;
        _Atomic unsigned spinners;        /* threads spinning idle now (§9.4) */
        unsigned max_spinners;            /* cfg.max_spinning_threads, resolved */
        unsigned max_awake;               /* cfg.max_awake_threads, resolved (§9.4) */
        uint64_t surplus_wake_ticks;      /* READY_SURPLUS_WAKE_NS in ticks (ktime.h) */
        uint64_t long_run_ticks;          /* the same, also when the rate is in doubt: a long
                                           * task, which no batched walk waits for (dispatch.c) */
        _Atomic unsigned idle_executors;  /* idle threads that own clusters */
        _Atomic unsigned in_long;         /* scheduler threads inside a long task: they look at
                                           * no ring until it ends (dispatch.c before_long()) */
        bool all_execute;                 /* every thread owns a cluster */
        _Atomic bool stop;
        /* Per kernel (kernel_at() order): the message of a task whose
         * kernel ran past cfg.kernel_time_budget_ms, "NAME: kernel exceeded
         * its time budget of N ms" (§10.6). Built once and kept as long as
         * the engine, so a failure points to it like to a static reason. */
        char (*budget_why)[HBG_GRAPH_MESSAGE_MAX];
        uint64_t kernel_budget_ns; /* cfg.kernel_time_budget_ms, once (kernel_budget_ns()) */
        /* The cycle counter's rate and the histogram bounds in its ticks
         * (ktime.h), fixed before the threads start. */
        struct ktime_clock ktime_clock;
        /* Ring arrays faulted in ahead of sessions (ring_spares.h). */
        struct ring_spares spares;
        /* The task timeline (trace.h): its epoch word is read on every
         * task's path, and sits on a line of its own. */
        struct trace_state trace;
};

/* A spin-then-yield step for waits that need nothing from anyone. */
static inline void engine_relax(unsigned *spins) {
        if (++*spins < 64)
                cpu_relax();
        else
                sched_yield();
}
