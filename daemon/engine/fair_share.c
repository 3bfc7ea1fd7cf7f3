/* SPDX-License-Identifier: MIT */
/* Fair share between uids (RUNTIME_LOGIC.md §9.5): share slots, and the
 * scheduler threads' turns. */

#include <errno.h>

#include "daemon/engine/engine_private.h"
#include "daemon/engine/fair_share.h"

/*
 * Share slots. A ring joins the slot of its share id (hbgd: the client's
 * uid) when added and leaves it when freed, both under rings_lock; a slot
 * is free again once its last ring is freed. A thread holding a ring (its
 * hazard) may therefore use the ring's slot's atomics: the slot outlives
 * every ring in it. `weight` (relaxed) is the weight given with the
 * newest ring of the share; `running` (relaxed, a hint) counts threads
 * running the share's kernels while shares compete.
 */
int fair_share_join(struct hbg_engine *e, struct hbg_ring *r, uint32_t id, unsigned weight) {
        unsigned free_slot = e->cfg.max_rings;
        for (unsigned s = 0; s < e->cfg.max_rings; s++) {
                struct fair_share_slot *f = &e->shares[s];
                if (f->rings > 0 && f->id == id) {
                        free_slot = s;
                        break;
                }
                if (f->rings == 0 && free_slot == e->cfg.max_rings)
                        free_slot = s;
        }
        /* A ring needs a ring slot, so a share slot is always free. */
        if (free_slot == e->cfg.max_rings)
                return -ENOSPC;
        struct fair_share_slot *f = &e->shares[free_slot];
        if (f->rings++ == 0) {
                f->id = id;
                atomic_fetch_add_explicit(&e->shares_in_use, 1, memory_order_relaxed);
        }
        atomic_store_explicit(&f->weight, weight, memory_order_relaxed);
        r->share = free_slot;
        return 0;
}

void fair_share_leave(struct hbg_engine *e, struct hbg_ring *r) {
        struct fair_share_slot *f = &e->shares[r->share];
        if (--f->rings == 0)
                atomic_fetch_sub_explicit(&e->shares_in_use, 1, memory_order_relaxed);
}

/*
 * May thread t start a kernel of r now (§9.5)? Called only while shares
 * compete (shares_in_use > 1). While t's turn for r's share has credit
 * left, yes at once; otherwise one look at every ring (through the second
 * hazard slot) finds the shares with kernel work that are not at their
 * thread cap, and fair_share_turn_allows() decides. Every value read is a
 * hint (relaxed or acquire loads of other threads' cursors): a stale one
 * moves a turn by one kernel at most, which the bound counts (the kernel
 * a thread had already picked).
 */
bool fair_share_may_start(struct sched_thread *t, struct hbg_ring *r) {
        struct hbg_engine *e = t->engine;
        unsigned x = r->share, cap = e->cfg.max_threads_per_share;
        bool x_capped = atomic_load_explicit(&e->shares[x].running, memory_order_relaxed) >= cap;
        if (!x_capped && x == t->serving && t->credit > 0)
                return true;
        uint64_t waiting[FAIR_SHARE_WORDS] = { 0 };
        unsigned high = atomic_load_explicit(&e->rings_high, memory_order_acquire);
        for (unsigned i = 0; i < high; i++) {
                struct hbg_ring *q = ring_peek_enter(t, i);
                if (!q)
                        continue;
                unsigned s = q->share;
                if (s != x && !fair_share_bit(waiting, s) &&
                    atomic_load_explicit(&e->shares[s].running, memory_order_relaxed) < cap &&
                    ring_has_kernel_work(q))
                        waiting[s / 64] |= UINT64_C(1) << (s % 64);
                ring_peek_leave(t);
        }
        return fair_share_turn_allows(t->serving, t->credit, x, x_capped, waiting, e->cfg.max_rings);
}

/* t starts a kernel of r (fair_share_may_start() said yes): its turn for
 * r's share goes on, or a new one begins with the share's weight. */
void fair_share_begin(struct sched_thread *t, struct hbg_ring *r) {
        struct fair_share_slot *f = &t->engine->shares[r->share];
        fair_share_turn_take(&t->serving, &t->credit, r->share, atomic_load_explicit(&f->weight, memory_order_relaxed));
        atomic_fetch_add_explicit(&f->running, 1, memory_order_relaxed);
}

void fair_share_end(struct sched_thread *t, struct hbg_ring *r) {
        atomic_fetch_sub_explicit(&t->engine->shares[r->share].running, 1, memory_order_relaxed);
}

/* A visit of r started nothing. If r has kernel work all the same and it
 * is r's share's turn (kernel-less tasks, say, that classification keeps
 * finding), that was the share's turn: it passes on, so that no share
 * holds the turn without running kernels. */
void fair_share_visit_idle(struct sched_thread *t, struct hbg_ring *r) {
        if (ring_has_kernel_work(r) && fair_share_may_start(t, r)) {
                t->serving = r->share;
                t->credit = 0;
        }
}
