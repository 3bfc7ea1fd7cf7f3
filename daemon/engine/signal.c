/* SPDX-License-Identifier: MIT */
/*
 * Telling the client (RUNTIME_LOGIC.md §2.1, §12.1): the completion pipe's
 * byte, written when graphs retired, an external task became ready or a
 * producer waiting for window space may go on; and that waiter's test.
 */
#include "daemon/engine/signal.h"

#include <stdatomic.h>
#include <unistd.h>

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
        uint64_t wm = atomic_load_explicit(&r->cpl->completed_watermark, memory_order_seq_cst);
        uint64_t want = atomic_load_explicit(&r->sub->window_waiting, memory_order_seq_cst);
        if (want == 0 || wm < want)
                return false;
        /* Once per request: a producer that asks again re-arms it. */
        return atomic_compare_exchange_strong_explicit(&r->sub->window_waiting, &want, 0,
                                                       memory_order_seq_cst, memory_order_relaxed);
}
