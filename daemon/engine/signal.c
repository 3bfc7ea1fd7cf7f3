/* SPDX-License-Identifier: MIT */
/*
 * Telling the client (RUNTIME_LOGIC.md §2.1, §10.7, §12.1): the completion
 * pipe's byte, written when graphs retired, an external task became ready
 * or a producer waiting for window space may go on; that waiter's test;
 * and the futex words the client's threads sleep on.
 */
#include "daemon/engine/signal.h"

#include <stdatomic.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/futex.h"
#include "daemon/engine/client_read.h"
#include "daemon/engine/engine_state.h"
#include "daemon/engine/ring.h"
#include "daemon/engine/wakeup.h"

/* One byte into the completion pipe. The write end is ours alone and
 * non-blocking, so nothing the client does with its read end can make this
 * block (docs/SECURITY.md); a full pipe (EAGAIN) already tells the client
 * "something happened", and a closed one (EPIPE) means it is gone. Never
 * retried. */
void signal_pipe(struct hbg_ring *r) {
        if (r->completion_fd < 0)
                return;
        char one = 1;
        ssize_t n = write(r->completion_fd, &one, 1);
        (void)n;
}

/*
 * Does a producer sleep for window space that the watermark now gives
 * (RUNTIME_LOGIC §2.1)? The producer stores window_waiting, then loads the
 * watermark; we load the watermark, then window_waiting; all seq_cst, so
 * one of us sees the other's write whatever order moved the watermark
 * (the watermark loads are coherence-ordered with its update). The value
 * is client-written: it only decides whether its own pipe is written.
 */
bool signal_window_waiter_due(struct hbg_ring *r) {
        /* Being removed (the io thread may be here): the byte, unasked. */
        if (!client_reachable(r))
                return true;
        uint64_t wm = atomic_load_explicit(&r->cpl->completed_watermark, memory_order_seq_cst);
        uint64_t want = atomic_load_explicit(&r->sub->window_waiting, memory_order_seq_cst);
        if (want == 0 || wm < want)
                return false;
        /* Once per request: a producer that asks again re-arms it. */
        return atomic_compare_exchange_strong_explicit(&r->sub->window_waiting, &want, 0,
                                                       memory_order_seq_cst, memory_order_relaxed);
}

/*
 * Does a client sleep for one task whose stamp is out (task_waiting,
 * RUNTIME_LOGIC §2.1)? The caller published its stamps, then made a
 * seq_cst fence or seq_cst stores; the client stores its request
 * (seq_cst), then looks at the task (flag_done_seq_cst()). Either its
 * look sees the stamp or this load sees the request. The value is
 * client-written: any id reads a stamp of this ring's window (masked),
 * and writes this client's own pipe once per request; a client that asks
 * again and again gets a byte per call here at most (once a visit), as
 * with window_waiting.
 */
bool signal_task_waiter_due(struct hbg_ring *r) {
        if (!client_reachable(r))
                return false; /* its last steps tell the client */
        uint64_t want = atomic_load_explicit(&r->sub->task_waiting, memory_order_seq_cst);
        if (want == 0 || !flag_done_seq_cst(&r->window, want - 1))
                return false;
        /* Once per request, as for window_waiting. */
        return atomic_compare_exchange_strong_explicit(&r->sub->task_waiting, &want, 0, memory_order_seq_cst,
                                                       memory_order_relaxed);
}

/* The same for a policy whose stamps went out with release stores (lazy,
 * resolver): a seq_cst fence puts them before the load of the request,
 * then the pipe if it is due. */
void signal_task_waiter_fenced(struct hbg_ring *r) {
        atomic_thread_fence(memory_order_seq_cst);
        if (signal_task_waiter_due(r))
                signal_pipe(r);
}

/*
 * The wake words (RUNTIME_LOGIC §10.7), called after the publication they
 * announce (the release store of ext_ready_tail, of the graph entries and
 * graphs_retired). Bump the word, then look whether anybody sleeps on it:
 * both seq_cst, against the sleeper's "load word; count itself in
 * (seq_cst); look at the condition; FUTEX_WAIT(word)". Either its look sees
 * our publication, or our load sees its count and we wake it; a bump
 * between its word load and its FUTEX_WAIT makes the wait return at once.
 * The counts are client-written: a garbage value costs this client one
 * wake system call per publication on its own word, or loses its own
 * wake-ups, nothing else; nobody sleeping (the busy path) costs no system
 * call. A ring being removed wakes without looking (client_read.h).
 */
static void wake_sleeper(_Atomic uint32_t *word, _Atomic uint32_t *sleepers, int n) {
        if (atomic_load_explicit(sleepers, memory_order_seq_cst) != 0)
                futex_wake_shared(word, n);
}

/* Bump the word; true if the client is still reachable (else every
 * sleeper was woken without a look at the count). */
static bool bump(const struct hbg_ring *r, _Atomic uint32_t *word, int n) {
        atomic_fetch_add_explicit(word, 1, memory_order_seq_cst);
        if (client_reachable(r))
                return true;
        futex_wake_shared(word, n);
        return false;
}

static void wake_word(const struct hbg_ring *r, _Atomic uint32_t *word, _Atomic uint32_t *sleepers, int n) {
        if (bump(r, word, n))
                wake_sleeper(word, sleepers, n);
}

/* A skipped wake, for the tasks published up to `upto`: due at `due`,
 * unless one is pending already (it looks at these too: the flag). The
 * flag first, then the look at the pending one (seq_cst both, as the
 * look again's clear and its exchange of the flag): a look again that
 * cleared it either sees our flag, or we see it cleared and set our own.
 * Two records at once may pair one's upto with the other's due: both
 * recent, and the flag covers the rest. */
static void skip_record(struct hbg_ring *r, uint64_t due, uint64_t upto) {
        atomic_store_explicit(&r->ext.skipped_since, true, memory_order_seq_cst);
        uint64_t none = 0;
        if (atomic_load_explicit(&r->ext.skip_due_ns, memory_order_seq_cst) == 0) {
                atomic_store_explicit(&r->ext.skip_upto, upto, memory_order_relaxed);
                /* Release: a look again that takes this due reads this upto. */
                atomic_compare_exchange_strong_explicit(&r->ext.skip_due_ns, &none, due, memory_order_seq_cst,
                                                        memory_order_relaxed);
        }
}

/*
 * The same for ext_wake, but no wake while one of the client's workers
 * looks for work (§10.7 step 5): it takes what we published. It
 * decrements ext_looking when it stops looking, then loads the word
 * (seq_cst), so either our load sees the decrement or its load sees our
 * bump and, with it, the publication. Waking a sleeper as well only made
 * it find nothing. Not past the look's end (ext_look_until_ns, clamped to
 * a look from now); and a skipped wake is looked at again then
 * (signal_ext_skip_check()): a looker kept off its CPU delays the tasks
 * by about a look.
 */
void signal_ext_wake(struct hbg_ring *r, uint64_t published) {
        _Atomic uint32_t *word = &r->cpl->ext_wake;
        if (!bump(r, word, 1))
                return;
        if (atomic_load_explicit(&r->sub->ext_looking, memory_order_seq_cst) != 0) {
                uint64_t now = (uint64_t)clock_now_ns();
                uint64_t until = atomic_load_explicit(&r->sub->ext_look_until_ns, memory_order_relaxed);
                if (until > now + HBG_EXT_LOOK_NS)
                        until = now + HBG_EXT_LOOK_NS;
                if (now < until) {
                        skip_record(r, until, published);
                        /* Somebody must look again: a scheduler thread
                         * awake now, or the last to go idle, whose look at
                         * the rings comes after its idle count and a fence
                         * (park()), against our record, this fence and our
                         * load of the count. Every one idle already (we
                         * are the resolver, or the last one parks): wake
                         * as if nobody looked. */
                        wakeup_fence();
                        if (atomic_load_explicit(&r->engine->idle, memory_order_relaxed) < r->engine->nschedulers)
                                return;
                }
        }
        /* One: a worker that takes a task and sees more wakes a peer. */
        wake_sleeper(word, &r->sub->ext_sleepers, 1);
}

/* The tasks answered: a mailbox entry each, or failed by the stall
 * detector (a late entry for one of those, which the library avoids,
 * counts twice: the look again may then wake nobody, a delay only). */
static uint64_t ext_answered(const struct hbg_ring *r) {
        return atomic_load_explicit(&r->mailbox_read.head, memory_order_relaxed) +
               atomic_load_explicit(&r->ext.stalled, memory_order_relaxed);
}

/* The look again at the skip this thread took, due now: true if it armed
 * another (for wakes skipped since). */
static bool look_again(struct hbg_ring *r, uint64_t now) {
        if (!client_reachable(r))
                return false;
        /* As many tasks answered as were published by the skip: workers
         * take in order, so those were taken. Else one may wait for a
         * looker off its CPU (or run long on a worker: then the sleeper
         * woken finds nothing). The flag of skips since stays: those get
         * a look again later, which may find them answered. */
        uint64_t upto = atomic_load_explicit(&r->ext.skip_upto, memory_order_relaxed);
        if (ext_answered(r) < upto) {
                wake_sleeper(&r->cpl->ext_wake, &r->sub->ext_sleepers, 1);
                return false;
        }
        /* Answered; wakes skipped since, for later tasks: their turn, a
         * look from now. */
        uint64_t published = atomic_load_explicit(&r->cpl->ext_ready_tail, memory_order_relaxed);
        if (atomic_exchange_explicit(&r->ext.skipped_since, false, memory_order_seq_cst) && published > upto) {
                skip_record(r, now + HBG_EXT_LOOK_NS, published);
                return true;
        }
        return false;
}

bool signal_ext_skip_check(struct hbg_ring *r) {
        uint64_t due = atomic_load_explicit(&r->ext.skip_due_ns, memory_order_relaxed);
        if (due == 0)
                return false;
        uint64_t now = (uint64_t)clock_now_ns();
        if (now < due)
                return true;
        /* One thread takes it; another's take leaves it pending for us. */
        if (!atomic_compare_exchange_strong_explicit(&r->ext.skip_due_ns, &due, 0, memory_order_seq_cst,
                                                     memory_order_relaxed))
                return true;
        return look_again(r, now);
}

void signal_graph_wake(struct hbg_ring *r) {
        /* One: only the caller's thread waits for graphs (hbg.h: a
         * client is used from one thread at a time), and waking every
         * thread a client parked there would cost hbgd what the client
         * chooses. */
        wake_word(r, &r->cpl->graph_wake, &r->sub->graph_sleepers, 1);
}

bool signal_pipe_wanted(struct hbg_ring *r) {
        return !client_reachable(r) || atomic_load_explicit(&r->sub->pipe_wanted, memory_order_seq_cst) != 0;
}
