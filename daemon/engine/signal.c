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

#include "common/futex.h"
#include "daemon/engine/client_read.h"
#include "daemon/engine/ring.h"

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
 * The wake words (RUNTIME_LOGIC §10.7), called after the publication they
 * announce (the release store of ext_ready_tail, of the graph entries and
 * graphs_retired). Bump the word, then look whether anybody sleeps on it:
 * both seq_cst, against the sleeper's "load word; count itself in
 * (seq_cst); look at the condition; FUTEX_WAIT(word)". Either its look sees
 * our publication, or our load sees its count and we wake it; a bump
 * between its word load and its FUTEX_WAIT makes the wait return at once.
 * The count is client-written: a garbage value costs this client one wake
 * system call per publication on its own word, nothing else; nobody
 * sleeping (the busy path) costs no system call. A ring being removed
 * wakes without looking (client_read.h).
 */
static void wake_word(const struct hbg_ring *r, _Atomic uint32_t *word, _Atomic uint32_t *sleepers, int n) {
        atomic_fetch_add_explicit(word, 1, memory_order_seq_cst);
        if (!client_reachable(r) || atomic_load_explicit(sleepers, memory_order_seq_cst) != 0)
                futex_wake_shared(word, n);
}

void signal_ext_wake(struct hbg_ring *r) {
        /* One: a worker that takes a task and sees more wakes a peer. */
        wake_word(r, &r->cpl->ext_wake, &r->sub->ext_sleepers, 1);
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
