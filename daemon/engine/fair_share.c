/* SPDX-License-Identifier: MIT */
/* Fair share between rings (RUNTIME_LOGIC.md §9.5). */

#include "daemon/engine/engine_private.h"
#include "daemon/engine/fair_share.h"

/*
 * Fair share (§9.5). Thread t is about to start another task of r, which
 * has long tasks, and r.running counts t. It leaves r for another ring with
 * work when the move leaves the two better balanced by their weights
 * (fair_share_move_helps), or r is over its cap (max_threads_per_ring)
 * and that ring is not. A move that only swaps
 * the imbalance (1 thread here, none there) is not made: with more rings
 * than threads it would send every thread away from every ring for ever.
 * Only long tasks pay for this look (a scan of the rings through the
 * second hazard slot); a lone ring never does.
 */
bool engine_should_yield_ring(struct sched_thread *t, struct hbg_ring *r) {
        struct hbg_engine *e = t->engine;
        if (atomic_load_explicit(&e->ring_count, memory_order_relaxed) < 2)
                return false;
        unsigned mine = atomic_load_explicit(&r->running, memory_order_relaxed);
        unsigned cap = e->cfg.max_threads_per_ring;
        bool over_cap = mine > cap;
        unsigned high = atomic_load_explicit(&e->rings_high, memory_order_acquire);
        bool yield = false;
        for (unsigned i = 0; i < high && !yield; i++) {
                struct hbg_ring *x = ring_peek_enter(t, i);
                if (!x)
                        continue;
                if (x != r && !atomic_load_explicit(&x->removing, memory_order_relaxed)) {
                        unsigned theirs = atomic_load_explicit(&x->running, memory_order_relaxed);
                        if (fair_share_move_helps(mine, r->weight, theirs, x->weight) ||
                            (over_cap && theirs < cap))
                                yield = ring_has_work(x);
                }
                ring_peek_leave(t);
        }
        return yield;
}
