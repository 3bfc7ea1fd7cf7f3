/* SPDX-License-Identifier: MIT */
/* Fair share between uids (RUNTIME_LOGIC.md §9.5): the scheduler threads'
 * turns (the share slots they read are fair_share_slots.c's). */

#include "daemon/engine/fair_share.h"
#include "daemon/engine/engine_state.h"
#include "daemon/engine/fair_share_slots.h"
#include "daemon/engine/ring.h"
#include "daemon/engine/ring_table.h"
#include "daemon/engine/work.h"

/* The threads running a kernel of share slot s now: their running_share
 * words (dispatch.c, run_task()), relaxed loads. */
static unsigned share_running(const struct hbg_engine *e, unsigned s) {
        unsigned n = 0;
        for (unsigned i = 0; i < e->nthreads; i++)
                n += atomic_load_explicit(&e->threads[i].running_share, memory_order_relaxed) == s + 1;
        return n;
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
        bool x_capped = share_running(e, x) >= cap;
        if (!x_capped && x == t->serving && t->credit > 0)
                return true;
        uint64_t waiting[FAIR_SHARE_WORDS] = { 0 };
        unsigned high = atomic_load_explicit(&e->rings_high, memory_order_acquire);
        for (unsigned i = 0; i < high; i++) {
                struct hbg_ring *q = ring_table_peek_enter(t, i);
                if (!q)
                        continue;
                unsigned s = q->share;
                if (s != x && !fair_share_bit(waiting, s) && share_running(e, s) < cap && work_kernel(q))
                        waiting[s / 64] |= UINT64_C(1) << (s % 64);
                ring_table_peek_leave(t);
        }
        return fair_share_turn_allows(t->serving, t->credit, x, x_capped, waiting, e->cfg.max_rings);
}

/* t starts a kernel of r (fair_share_may_start() said yes): its turn for
 * r's share goes on, or a new one begins with the share's weight. */
void fair_share_begin(struct sched_thread *t, struct hbg_ring *r) {
        struct fair_share_slot *f = &t->engine->shares[r->share];
        fair_share_turn_take(&t->serving, &t->credit, r->share, atomic_load_explicit(&f->weight, memory_order_relaxed));
}

/* A visit of r started nothing. If r has kernel work all the same and it
 * is r's share's turn (kernel-less tasks, say, that classification keeps
 * finding), that was the share's turn: it passes on, so that no share
 * holds the turn without running kernels. */
void fair_share_visit_idle(struct sched_thread *t, struct hbg_ring *r) {
        if (work_kernel(r) && fair_share_may_start(t, r)) {
                t->serving = r->share;
                t->credit = 0;
        }
}
