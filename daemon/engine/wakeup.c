/* SPDX-License-Identifier: MIT */
/*
 * Waking parked scheduler threads (RUNTIME_LOGIC.md §9.4): the futex
 * words and the doorbell's kick; the completion policy's own thread, if it
 * has one, through the policy's wake_all.
 */
#include "daemon/engine/wakeup.h"

#include <limits.h>
#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "daemon/engine/completion.h"
#include "daemon/engine/engine_state.h"
#include "daemon/engine/ring.h"

static long futex(_Atomic uint32_t *word, int op, uint32_t val, const struct timespec *timeout) {
        return syscall(SYS_futex, word, op, val, timeout, NULL, 0);
}

/* Bump the word (seq_cst) before looking for sleepers: a thread going to
 * park counts itself idle and re-reads the rings first, so either it sees
 * the work or we see it idle (§9.4). Wakes at most n. */
static void kick(struct hbg_engine *e, int n) {
        atomic_fetch_add(&e->wake_seq, 1);
        if (atomic_load(&e->idle) > 0)
                futex(&e->wake_seq, FUTEX_WAKE_PRIVATE, (uint32_t)n, NULL);
}

void wakeup_kick(struct hbg_engine *e) {
        kick(e, INT_MAX);
}

/* The doorbell: one thread is enough (it wakes a peer if it finds more
 * work than it takes, §9.4); waking all of them on a 2-CPU machine only
 * makes them fight the producer for the CPUs. All of them when some own
 * no cluster (wakeup_executor's reason). */
void hbg_ring_kick(struct hbg_ring *r) {
        if (atomic_load_explicit(&r->cpl->need_wakeup, memory_order_relaxed))
                atomic_store_explicit(&r->cpl->need_wakeup, 0, memory_order_relaxed);
        kick(r->engine, r->engine->all_execute ? 1 : INT_MAX);
}

/* Surplus work any thread can do appeared: wake one parked peer (§9.4). */
void wakeup_one(struct hbg_engine *e) {
        if (atomic_load_explicit(&e->idle, memory_order_relaxed) == 0)
                return;
        atomic_fetch_add(&e->wake_seq, 1);
        futex(&e->wake_seq, FUTEX_WAKE_PRIVATE, 1, NULL);
}

/* Ready tasks appeared that need a core: make sure a parked thread that
 * owns clusters wakes. When some threads own none, a single futex wake may
 * land on one of those, which cannot run the task: wake them all then
 * (such configurations are the unusual ones). */
void wakeup_executor(struct hbg_engine *e) {
        if (atomic_load_explicit(&e->idle_executors, memory_order_relaxed) == 0)
                return;
        atomic_fetch_add(&e->wake_seq, 1);
        futex(&e->wake_seq, FUTEX_WAKE_PRIVATE, e->all_execute ? 1 : INT_MAX, NULL);
}

void wakeup_futex_wait(_Atomic uint32_t *word, uint32_t val, const struct timespec *timeout) {
        futex(word, FUTEX_WAIT_PRIVATE, val, timeout);
}

void wakeup_futex_wake(_Atomic uint32_t *word, int n) {
        futex(word, FUTEX_WAKE_PRIVATE, (uint32_t)n, NULL);
}

void wakeup_thread_sleep(struct sched_thread *t, _Atomic uint32_t *word, uint32_t val,
                         const struct timespec *timeout) {
        struct trace_state *ts = &t->engine->trace;
        uint32_t trace = trace_epoch(ts);
        stat_add(&t->stats.parks, 1);
        if (trace)
                trace_instant(ts, trace, HBG_TRACE_PARK);
        atomic_store_explicit(&t->parked, true, memory_order_relaxed);
        wakeup_futex_wait(word, val, timeout);
        atomic_store_explicit(&t->parked, false, memory_order_relaxed);
        stat_add(&t->stats.wakeups, 1);
        if ((trace = trace_epoch(ts)) != 0)
                trace_instant(ts, trace, HBG_TRACE_WAKE);
}

/* Stopping: the schedulers, and the completion policy's own thread
 * wherever it sleeps. */
void wakeup_all(struct hbg_engine *e) {
        wakeup_kick(e);
        if (e->completion->wake_all)
                e->completion->wake_all(e);
}
