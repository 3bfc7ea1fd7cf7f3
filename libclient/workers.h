/* SPDX-License-Identifier: MIT */
/* libclient/workers.c for the other files of libhbgclient: host worker threads, their sleep and the hang-up watcher. */
#pragma once

#include "libclient/client_private.h"

/* Start n workers and the hang-up watcher (at connect, regions mapped),
 * all signals blocked in them. 0 or a negative errno (message set; what
 * was started is stopped by hbgc_workers_stop()). */
int hbgc_workers_start(hbg_client *c, unsigned n);
/* Stop and join the workers and the watcher (hbg_disconnect()): running
 * host functions finish first. Accepts a half-started pool. */
void hbgc_workers_stop(hbg_client *c);
/* The caller's thread learnt that tasks finished: every host function
 * that returned before (on a worker) happens before what it does next.
 * The chain through hbgd (the mailbox's release, hbgd's acquire, its
 * release of the flags and graph entries, our acquire) orders them too,
 * but across processes, where ThreadSanitizer cannot follow it. */
static inline void hbgc_host_effects(hbg_client *c) {
        if (c->pool.n)
                (void)atomic_load_explicit(&c->pool.returned, memory_order_acquire);
}
/* Has the watcher seen hbgd go, or did hbg_disconnect() begin? */
static inline bool hbgc_workers_ended(hbg_client *c) {
        return atomic_load_explicit(&c->pool.gone, memory_order_seq_cst) ||
               atomic_load_explicit(&c->pool.stopping, memory_order_seq_cst);
}
/* Sleep on futex word `word` (the completion region's ext_wake or
 * graph_wake), counted in `sleepers` (the submission region's word), unless
 * done(c, arg) or the pool ended: the client half of §10.7's pair.
 * timeout relative, NULL none. 0, or -ETIMEDOUT; may return early. */
int hbgc_sleep_on(hbg_client *c, const _Atomic uint32_t *word, _Atomic uint32_t *sleepers,
                  bool (*done)(hbg_client *c, void *arg), void *arg, const struct timespec *timeout);
