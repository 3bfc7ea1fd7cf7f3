/* SPDX-License-Identifier: MIT */
/* libclient/hangup.c for the other files of libhbgclient: knowing that hbgd went away without a system call. */
#pragma once

#include "libclient/client_private.h"
#include "libclient/session.h"

/* Set up the watch and arm it (at the first call that asked the socket
 * itself, hbgc_check_alive_slow(): a submit, an allocation, a cancel, a
 * recording's end; c->hangup.later; without io_uring, or with
 * HBG_IO_URING=0 in the environment, every look asks the socket). */
void hbgc_hangup_start(hbg_client *c);
void hbgc_hangup_free(hbg_client *c);
/* Both polls in flight (struct hangup_watch.armed). */
#define HBGC_WATCH_BOTH 3u
/* True when nothing happened on the socket or the pipe since the watch
 * was armed: one load, no system call. False: ask them. Inline: every
 * submit asks. */
static inline bool hbgc_hangup_quiet(const hbg_client *c) {
        const struct hangup_watch *h = &c->hangup;
        /* Acquire pairs with the kernel's release of the tail (we read no
         * entry here, only whether there is one). */
        return h->armed == HBGC_WATCH_BOTH &&
               atomic_load_explicit(h->cq_tail, memory_order_acquire) ==
                       atomic_load_explicit(h->cq_head, memory_order_relaxed);
}
/* Has hbgd gone? Free when the hang-up watch says nothing happened;
 * otherwise a look at the socket and the pipe. 0, or -ECONNRESET with the
 * message "FN: hbgd went away". */
static inline int hbgc_check_alive(hbg_client *c, const char *fn) {
        if (!c->dead && hbgc_hangup_quiet(c))
                return 0;
        return hbgc_check_alive_slow(c, fn);
}
/* The same for the per-task calls: only the free look (a session without
 * the io_uring watch is checked by submit and the waits instead). */
static inline int hbgc_check_alive_cheap(hbg_client *c, const char *fn) {
        if (c->hangup.ring_fd < 0 || hbgc_hangup_quiet(c))
                return 0;
        return hbgc_check_alive_slow(c, fn);
}
/* The socket was asked and is alive: take the completion, arm again. */
void hbgc_hangup_rearm(hbg_client *c);
