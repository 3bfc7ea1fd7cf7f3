/* SPDX-License-Identifier: MIT */
/* Fair share between uids (RUNTIME_LOGIC.md §9.5): the share slots rings
 * join and leave (ring_table.c, under rings_lock). Apart from the turns
 * (fair_share.c), which look at the rings: the ring table calls this file,
 * the turns call the ring table. */

#include "daemon/engine/fair_share_slots.h"

#include <errno.h>

#include "daemon/engine/engine_state.h"
#include "daemon/engine/ring.h"

/*
 * Share slots. A ring joins the slot of its share id (hbgd: the client's
 * uid) when added and leaves it when freed, both under rings_lock; a slot
 * is free again once its last ring is freed. A thread holding a ring (its
 * hazard) may therefore use the ring's slot's atomics: the slot outlives
 * every ring in it. `weight` (relaxed) is the weight given with the
 * newest ring of the share. Whose kernels the threads run is theirs to
 * say (sched_thread.running_share).
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
