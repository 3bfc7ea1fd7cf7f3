/* SPDX-License-Identifier: MIT */
/*
 * Waking parked scheduler threads (RUNTIME_LOGIC.md §9.4): the private
 * word they sleep on, which only hbgd bumps and wakes, the wake pages
 * whose words clients may wake them through as well (wake_pages.c), the
 * doorbell's kick; the
 * completion policy's own thread, if it has one, through the policy's
 * wake_all.
 */
#include "daemon/engine/wakeup.h"

#include <errno.h>
#include <limits.h>
#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "common/clock.h"

#include "daemon/engine/completion.h"
#include "daemon/engine/engine_state.h"
#include "daemon/engine/ring.h"

static long futex(_Atomic uint32_t *word, int op, uint32_t val, const struct timespec *timeout) {
        return syscall(SYS_futex, word, op, val, timeout, NULL, 0);
}

/* Wake up to n sleepers of the private word (the caller bumped it). */
static void wake_sleepers(struct hbg_engine *e, int n) {
        futex(&e->wake_seq, FUTEX_WAKE_PRIVATE, (uint32_t)n, NULL);
}

/* Bump the word (seq_cst) before looking for sleepers: a thread going to
 * park reads the word, counts itself idle and re-reads the rings, so
 * either it sees the work, or we see it idle and its wait finds the word
 * moved or is woken (§9.4). Wakes at most n. */
static void kick(struct hbg_engine *e, int n) {
        atomic_fetch_add(&e->wake_seq, 1);
        if (atomic_load(&e->idle) > 0)
                wake_sleepers(e, n);
}

/* The doorbell: one thread is enough (it wakes a peer if it finds more
 * work than it takes, §9.4); waking all of them on a 2-CPU machine only
 * makes them fight the producer for the CPUs. All of them when some own
 * no cluster (wakeup_executor's reason). None when need_wakeup is clear
 * already: a client rings only after it read it set (after its publish,
 * seq_cst), so a clear one means an awake thread cleared it since, and a
 * thread clears a ring's flag (seq_cst) only before it looks at that ring
 * again: it sees the publish (the client's direct wake has usually woken
 * it; §9.4, model/wake.pml). */
void ring_kick(struct hbg_ring *r) {
        if (atomic_exchange(&r->cpl->need_wakeup, 0))
                kick(r->engine, r->engine->all_execute ? 1 : INT_MAX);
}

/* A ring just served whose client published already, or after a new
 * wake page (engine_ring_serve()): the doorbell's kick, whatever
 * need_wakeup says. Doorbells its client rang before were not kicked (the
 * threads passed the ring over), and need_wakeup is still set from the
 * ring's start: clearing it here is the kick's own rule
 * (ring_kick()). One thread, as for a doorbell: it wakes a peer if it
 * finds more work than it takes. */
void wakeup_ring_served(struct hbg_ring *r) {
        atomic_store(&r->cpl->need_wakeup, 0);
        kick(r->engine, r->engine->all_execute ? 1 : INT_MAX);
}

/* Enough threads awake already (max_awake_threads, §9.4): a peer woken
 * now would only take a CPU from one holding the work. `idle` as the
 * caller read it. Skipping is safe whenever at least one scheduler thread
 * is awake: it has not counted itself idle yet, so its park's re-check
 * comes after the caller's publish and sees the work (the store->load
 * pair of park(); max_awake is at least 1, and idle < nschedulers here). */
static bool awake_enough(const struct hbg_engine *e, unsigned idle) {
        /* Not while users compete: fair share keeps a thread from the
         * share at its max_threads_per_session for the others (§9.5), and
         * that thread must not stay parked while the share's kernels hold
         * the awake ones. */
        return idle < e->nschedulers && e->nschedulers - idle >= e->max_awake &&
               atomic_load_explicit(&e->shares_in_use, memory_order_relaxed) <= 1;
}

bool wakeup_could_help(const struct hbg_engine *e, unsigned idle) {
        return idle > 0 && !awake_enough(e, idle);
}

/* Surplus work any thread can do appeared: wake one parked peer (§9.4).
 * The idle count is relaxed, a hint, for a caller that stays awake and
 * sees its own work before it parks; a caller whose wake must not be
 * lost fences first (wakeup_fence()). */
bool wakeup_one(struct hbg_engine *e) {
        unsigned idle = atomic_load_explicit(&e->idle, memory_order_relaxed);
        if (idle == 0 || awake_enough(e, idle))
                return false;
        atomic_fetch_add(&e->wake_seq, 1);
        wake_sleepers(e, 1);
        return true;
}

/* Ready tasks appeared that need a core: make sure a parked thread that
 * owns clusters wakes. When some threads own none, a single futex wake may
 * land on one of those, which cannot run the task: wake them all then
 * (such configurations are the unusual ones), whatever max_awake_threads
 * says (an awake thread may own no cluster). */
bool wakeup_executor(struct hbg_engine *e) {
        if (atomic_load_explicit(&e->idle_executors, memory_order_relaxed) == 0)
                return false;
        if (e->all_execute && awake_enough(e, atomic_load_explicit(&e->idle, memory_order_relaxed)))
                return false;
        atomic_fetch_add(&e->wake_seq, 1);
        wake_sleepers(e, e->all_execute ? 1 : INT_MAX);
        return true;
}

/* Before a wake that must not be lost (by a thread that may park or that
 * schedules nothing): orders the caller's publish before its look at the
 * idle counts, against park()'s fence between counting itself idle and
 * its re-check (§9.4). A relaxed RMW or a release store alone does not:
 * x86 orders a locked RMW before later loads, ARM does not, and neither
 * orders a plain store before a later load. */
void wakeup_fence(void) {
        atomic_thread_fence(memory_order_seq_cst);
}

void wakeup_futex_wait(_Atomic uint32_t *word, uint32_t val, const struct timespec *timeout) {
        futex(word, FUTEX_WAIT_PRIVATE, val, timeout);
}

void wakeup_futex_wake(_Atomic uint32_t *word, int n) {
        futex(word, FUTEX_WAKE_PRIVATE, (uint32_t)n, NULL);
}

/* futex_waitv on the private word (while it holds val) and the words of
 * the wake pages in use (while they hold 0, which they always do): the
 * index of the word woken (0 the private one), or -errno. The timeout is
 * absolute there. */
static long wait_pages(struct hbg_engine *e, uint32_t val, const struct timespec *timeout) {
        struct futex_waitv w[WAKE_PAGES_WAITV];
        w[0] = (struct futex_waitv){ .val = val, .uaddr = (uintptr_t)&e->wake_seq,
                                     .flags = FUTEX_32 | FUTEX_PRIVATE_FLAG };
        unsigned n = 1 + wake_pages_waitv(&e->wake_pages, &w[1]);
        struct timespec until, *at = NULL;
        if (timeout) {
                int64_t ns = clock_now_ns() + (int64_t)timeout->tv_sec * 1000000000 + timeout->tv_nsec;
                until = (struct timespec){ .tv_sec = ns / 1000000000, .tv_nsec = ns % 1000000000 };
                at = &until;
        }
        long r = syscall(SYS_futex_waitv, w, n, 0, at, CLOCK_MONOTONIC);
        return r < 0 ? -errno : r;
}

/* Around a sleep: counted, traced, shown parked. */
static void sleep_begin(struct sched_thread *t) {
        struct trace_state *ts = &t->engine->trace;
        uint32_t trace = trace_epoch(ts);
        stat_add(&t->stats.parks, 1);
        if (trace)
                trace_instant(ts, trace, HBG_TRACE_PARK);
        atomic_store_explicit(&t->parked, true, memory_order_relaxed);
}

static void sleep_end(struct sched_thread *t) {
        struct trace_state *ts = &t->engine->trace;
        uint32_t trace;
        atomic_store_explicit(&t->parked, false, memory_order_relaxed);
        stat_add(&t->stats.wakeups, 1);
        if ((trace = trace_epoch(ts)) != 0)
                trace_instant(ts, trace, HBG_TRACE_WAKE);
}

void wakeup_thread_sleep(struct sched_thread *t, _Atomic uint32_t *word, uint32_t val,
                         const struct timespec *timeout) {
        sleep_begin(t);
        futex(word, FUTEX_WAIT_PRIVATE, val, timeout);
        sleep_end(t);
}

int wakeup_thread_park(struct sched_thread *t, bool page, uint32_t val, const struct timespec *timeout) {
        struct hbg_engine *e = t->engine;
        long r = 0;
        bool plain = true;
        sleep_begin(t);
        if (page && atomic_load_explicit(&e->page_waits, memory_order_relaxed)) {
                r = wait_pages(e, val, timeout);
                /* A page unmapped under us (its uid's last session went):
                 * this sleep the plain way. Refused (a seccomp filter,
                 * say): never again, or an idle thread would spin. */
                plain = r < 0 && r != -EAGAIN && r != -ETIMEDOUT && r != -EINTR;
                if (plain && r != -EFAULT)
                        atomic_store_explicit(&e->page_waits, false, memory_order_relaxed);
        }
        if (plain)
                futex(&e->wake_seq, FUTEX_WAIT_PRIVATE, val, timeout);
        sleep_end(t);
        return r >= 1;
}

/* A client's wake that found no work: counted; past WAKEUP_SPURIOUS_MAX of
 * them in one window of WAKEUP_SPURIOUS_WINDOW_MS the thread sleeps on the
 * private word alone for the rest of the window, where only hbgd's own
 * wakes (and the doorbell's) reach it. */
void wakeup_spurious(struct sched_thread *t, int64_t now_ms) {
        stat_add(&t->stats.spurious, 1);
        if (now_ms - t->spurious_window_ms >= WAKEUP_SPURIOUS_WINDOW_MS) {
                t->spurious_window_ms = now_ms;
                t->spurious_in_window = 0;
        }
        if (++t->spurious_in_window > WAKEUP_SPURIOUS_MAX)
                t->calm_until_ms = t->spurious_window_ms + WAKEUP_SPURIOUS_WINDOW_MS;
}

/* Stopping: the schedulers, and the completion policy's own thread
 * wherever it sleeps. */
void wakeup_all(struct hbg_engine *e) {
        kick(e, INT_MAX);
        if (e->completion->wake_all)
                e->completion->wake_all(e);
}
