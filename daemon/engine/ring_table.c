/* SPDX-License-Identifier: MIT */
/*
 * Ring membership (RUNTIME_LOGIC.md §9.3): the table of rings, the hazard
 * pointers threads hold while they visit one, adding, removing without
 * waiting, and collecting removed rings once nobody holds them.
 */
#include "daemon/engine/ring_table.h"

#include <errno.h>
#include <sched.h>
#include <stdlib.h>

#include "daemon/engine/completion.h"
#include "daemon/engine/engine_state.h"
#include "daemon/engine/fair_share_slots.h"
#include "daemon/engine/retire.h"
#include "daemon/engine/ring.h"
#include "daemon/engine/fair_share.h"
#include "daemon/engine/wakeup.h"
#include "daemon/engine/work.h"
#include "daemon/engine/engine_stats.h"

/* Hazard-pointer acquire (§9.3): publish, then re-check the slot. Both
 * seq_cst: against the remover's "clear slot; read hazards". A ring not
 * served yet is passed over: its client may still be able to punch holes
 * in its region, and a fault on a page being punched waits for the whole
 * punch. Acquire is enough for `served`: the thread read the wake word
 * (seq_cst) before its pass, and engine_ring_serve() stores `served`
 * before it bumps that word, so a thread that missed `served` finds the
 * word moved and looks again (§9.4). */
struct hbg_ring *ring_table_enter(struct sched_thread *t, unsigned idx) {
        struct hbg_ring *r = atomic_load_explicit(&t->engine->rings[idx], memory_order_acquire);
        if (!r)
                return NULL;
        atomic_store(&t->hazard, r);
        if (atomic_load(&t->engine->rings[idx]) != r ||
            !atomic_load_explicit(&r->served, memory_order_acquire)) {
                atomic_store_explicit(&t->hazard, NULL, memory_order_release);
                return NULL;
        }
        return r;
}

void ring_table_leave(struct sched_thread *t) {
        atomic_store_explicit(&t->hazard, NULL, memory_order_release);
}

/* The second hazard slot, for a short look at another ring while the
 * thread visits one (fair share's turns). Same protocol as ring_table_enter(). */
struct hbg_ring *ring_table_peek_enter(struct sched_thread *t, unsigned idx) {
        struct hbg_ring *r = atomic_load_explicit(&t->engine->rings[idx], memory_order_acquire);
        if (!r)
                return NULL;
        atomic_store(&t->peek_hazard, r);
        if (atomic_load(&t->engine->rings[idx]) != r ||
            !atomic_load_explicit(&r->served, memory_order_acquire)) {
                atomic_store_explicit(&t->peek_hazard, NULL, memory_order_release);
                return NULL;
        }
        return r;
}

void ring_table_peek_leave(struct sched_thread *t) {
        atomic_store_explicit(&t->peek_hazard, NULL, memory_order_release);
}

int engine_ring_add(struct hbg_engine *e, const struct hbg_ring_params *p,
                    struct hbg_ring **ret) {
        struct hbg_ring *r;
        if (p->weight > HBG_FAIR_SHARE_WEIGHT_MAX)
                return -EINVAL;
        int err = ring_new(e, p, &r);
        if (err < 0)
                return err;

        pthread_mutex_lock(&e->rings_lock);
        unsigned idx;
        for (idx = 0; idx < e->cfg.max_rings; idx++)
                if (!atomic_load(&e->rings[idx]))
                        break;
        if (idx == e->cfg.max_rings) {
                pthread_mutex_unlock(&e->rings_lock);
                /* Never published: nobody else knows it; not released. */
                ring_free(r);
                return -ENOSPC;
        }
        /* Before the ring is published: threads read r->share freely. */
        err = fair_share_join(e, r, p->share_id, p->weight ? p->weight : HBG_FAIR_SHARE_WEIGHT_DEFAULT);
        if (err < 0) {
                pthread_mutex_unlock(&e->rings_lock);
                ring_free(r);
                return err;
        }
        r->index = idx;
        r->serial = ++e->rings_added;
        atomic_store(&e->rings[idx], r);
        atomic_fetch_add(&e->ring_count, 1);
        if (atomic_load(&e->rings_high) <= idx)
                atomic_store(&e->rings_high, idx + 1);
        pthread_mutex_unlock(&e->rings_lock);
        /* No kick: the ring has no work before its first doorbell. */
        *ret = r;
        return 0;
}

/*
 * Served, then the doorbell's kick if the client published already
 * (§9.3). Nothing published yet (a session just set up, the usual case):
 * no kick, and need_wakeup stays set from the ring's start, so the
 * client's first publish wakes a thread. The look (work_external(),
 * seq_cst loads of the cursors) comes after the flag's seq_cst store: a
 * publish it misses comes after it, and that client then reads
 * need_wakeup set and wakes a thread, which finds the ring served, or
 * reads it clear, which only a thread that saw the ring served did, and
 * that thread visits it or re-checks it before it parks (§9.3, §9.4). A
 * kick all the same when a wake page was made since the last serve: the
 * threads parked before it do not wait on it, and the one woken parks
 * again on it (speed only: a client's wake that finds nobody rings).
 */
void engine_ring_serve(struct hbg_ring *r) {
        /* seq_cst, before the look and before the kick bumps the wake
         * word: a thread whose pass missed it sees the word moved and
         * passes again (ring_table_enter()). */
        atomic_store(&r->served, true);
        if (wake_pages_take_unwaited(&r->engine->wake_pages) || work_external(r))
                wakeup_ring_served(r);
}

uint64_t engine_ring_memory(const struct hbg_engine *e, const struct hbg_geometry *g) {
        uint64_t policy = e->completion->ring_memory ? e->completion->ring_memory(g->task_window, e->nthreads) : 0;
        return ring_memory(e->nthreads, g) + policy;
}

/*
 * Removal (§9.3) never waits for a scheduler thread: the ring leaves
 * rings[] (seq_cst, against ring_table_enter()'s re-check), its graphs are
 * failed, and it waits on e->removed until no hazard pointer holds it. A
 * thread inside a long kernel of this ring keeps its hazard until the
 * kernel returns; engine_collect() frees the ring after that.
 */
void engine_ring_remove(struct hbg_engine *e, struct hbg_ring *r, int reason) {
        if (!r)
                return;
        atomic_store(&r->removing, true);
        r->removal_reason = reason < 0 ? reason : -ESHUTDOWN;
        pthread_mutex_lock(&e->rings_lock);
        atomic_store(&e->rings[r->index], NULL);
        atomic_fetch_sub(&e->ring_count, 1);
        r->next_removed = e->removed;
        e->removed = r;
        /* Held while we fail its graphs below: a collect on another
         * thread (the engine's tests remove from several) must not free
         * it under us. */
        r->holds++;
        pthread_mutex_unlock(&e->rings_lock);
        /* Fail what is pending now, so the client (if still there) hears at
         * once; safe while threads still run: the combining retire lock. */
        retire_fail_quietly(r, r->removal_reason);
        ring_unhold(e, r);
}

/* rings_lock held. */
static bool ring_held(struct hbg_engine *e, struct hbg_ring *r) {
        if (r->holds)
                return true;
        for (unsigned i = 0; i < e->nthreads; i++)
                if (atomic_load(&e->threads[i].hazard) == r ||
                    atomic_load(&e->threads[i].peek_hazard) == r)
                        return true;
        return false;
}

/*
 * A removed ring nobody holds, taken off the removed list (rings_lock
 * held): its final graph failures, then its counters folded into the
 * threads' and the engine's, in the same critical section, so that a
 * reader of the counters (who takes the lock) sees every ring once,
 * removed or folded, and no counter ever goes down.
 */
static void ring_retire_locked(struct hbg_engine *e, struct hbg_ring *r) {
        retire_stopped(r, r->removal_reason);
        fair_share_leave(e, r);
        for (unsigned i = 0; i < e->nthreads; i++)
                ring_counters_add_thread(r, i, &e->threads[i].retired);
        e->freed_graphs_noticed += atomic_load_explicit(&r->retirer.graphs_noticed, memory_order_relaxed);
        histogram_fold(&e->freed_graph_latency, &r->retirer.graph_latency);
        for (unsigned i = 0; i < HBG_ERRNO_SLOTS; i++)
                e->freed_graphs_failed[i] +=
                        atomic_load_explicit(&r->retirer.graphs_failed_by_errno[i], memory_order_relaxed);
}

/* Free a retired ring and tell its owner. */
static void ring_reclaim(struct hbg_ring *r) {
        void (*released)(void *) = r->released;
        void *userdata = r->released_userdata;
        ring_free(r);
        if (released)
                released(userdata);
}

void ring_hold(struct hbg_engine *e, struct hbg_ring *r) {
        pthread_mutex_lock(&e->rings_lock);
        r->holds++;
        pthread_mutex_unlock(&e->rings_lock);
}

void ring_unhold(struct hbg_engine *e, struct hbg_ring *r) {
        pthread_mutex_lock(&e->rings_lock);
        r->holds--;
        pthread_mutex_unlock(&e->rings_lock);
}

unsigned engine_rings_removed(struct hbg_engine *e) {
        unsigned n = 0;
        pthread_mutex_lock(&e->rings_lock);
        for (struct hbg_ring *r = e->removed; r; r = r->next_removed)
                n++;
        pthread_mutex_unlock(&e->rings_lock);
        return n;
}

void ring_table_drop_holds(struct hbg_engine *e) {
        pthread_mutex_lock(&e->rings_lock);
        for (struct hbg_ring *r = e->removed; r; r = r->next_removed)
                r->holds = 0;
        pthread_mutex_unlock(&e->rings_lock);
}

unsigned engine_collect(struct hbg_engine *e) {
        struct hbg_ring *free_list = NULL;
        unsigned held = 0;

        pthread_mutex_lock(&e->rings_lock);
        for (struct hbg_ring **p = &e->removed; *p;) {
                struct hbg_ring *r = *p;
                if (ring_held(e, r)) {
                        held++;
                        p = &r->next_removed;
                        continue;
                }
                *p = r->next_removed;
                ring_retire_locked(e, r);
                r->next_removed = free_list;
                free_list = r;
        }
        pthread_mutex_unlock(&e->rings_lock);
        /* Outside the lock: `released` may call back into the engine. */
        while (free_list) {
                struct hbg_ring *r = free_list;
                free_list = r->next_removed;
                ring_reclaim(r);
        }
        return held;
}
