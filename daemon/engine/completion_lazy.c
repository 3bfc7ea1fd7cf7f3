/* SPDX-License-Identifier: MIT */
/*
 * The lazy watermark (RUNTIME_LOGIC.md §11.2; the seed's sibling design,
 * #1619): no fences on the completion path. A completer publishes its stamp
 * (release), drains its wake list and makes one bounded attempt to move the
 * watermark up to its own id + 1. Liveness comes from elsewhere: every
 * scheduler thread walks the whole completed prefix once per loop iteration
 * (tick), and a thread about to park walks once more after counting itself
 * idle, so the last thread to go idle sees every stamp. The one fence is
 * at the end of a visit, for a tensor wait's request (§2.1).
 */
#include <errno.h>

#include "daemon/engine/completion.h"
#include "daemon/engine/retire.h"
#include "daemon/engine/ring.h"
#include "daemon/engine/signal.h"

static uint32_t stamp_at(const struct hbg_flag_window *w, uint64_t id) {
        /* acquire: the completed tasks' effects reach whoever reads the
         * watermark after we move it (release CAS). */
        return atomic_load_explicit(flag_slot(w, id), memory_order_acquire);
}

/*
 * One attempt: scan the set stamps from the watermark up to `bound`
 * (exclusive; never more than D ids: none beyond are in flight) and CAS the
 * watermark there once. A lost CAS means another thread moved it. Returns
 * true if this call moved it.
 */
static bool advance_once(struct hbg_completer *c, uint64_t bound) {
        const struct hbg_flag_window *w = c->window;
        uint64_t cur = atomic_load_explicit(w->watermark, memory_order_acquire);
        uint64_t limit = cur + w->task_window < bound ? cur + w->task_window : bound;
        uint64_t next = cur;

        while (next < limit && stamp_at(w, next) == flag_stamp_of(w, next))
                next++;
        if (cur > c->cached_watermark)
                c->cached_watermark = cur;
        if (next == cur)
                return false;
        stat_inc(&c->stats.walks, 1);
        /* Success acq_rel: releases the walked prefix to WM readers. */
        if (!atomic_compare_exchange_strong_explicit(w->watermark, &cur, next, memory_order_acq_rel,
                                                     memory_order_acquire)) {
                stat_inc(&c->stats.cas_failures, 1);
                if (cur > c->cached_watermark)
                        c->cached_watermark = cur;
                return false;
        }
        stat_inc(&c->stats.advances, 1);
        stat_inc(&c->stats.ids_advanced, next - cur);
        c->cached_watermark = next;
        return true;
}

/* The full walk: as far as the stamps go. A lost CAS ends it without a
 * retry: the winner moved the watermark, and its own loop walks again while
 * it keeps moving it, so what this thread saw set is walked past by it or
 * by the winner (the checked model, RUNTIME_LOGIC §15, runs this code's
 * shape). Each attempt starts from a higher watermark, so this ends. */
static bool advance_all(struct hbg_completer *c) {
        bool moved = false;
        while (advance_once(c, UINT64_MAX))
                moved = true;
        return moved;
}

/* Publish, or try to certify the slot's previous occupant by moving the
 * watermark up to it, then publish; false: still blocked (§3.4). */
static bool publish(struct hbg_completer *c, uint64_t id) {
        if (completer_try_publish(c, id, memory_order_release))
                return true;
        /* The gate wants WM > id - F. */
        advance_once(c, id - c->window->flag_window + 1);
        return completer_try_publish(c, id, memory_order_release);
}

static void finish_published(struct sched_thread *t, struct hbg_ring *r, uint64_t id) {
        struct hbg_completer *c = ring_completer(t, r);
        completion_task_released(t, r, id);
        if (advance_once(c, id + 1))
                retire_graphs(r);
}

static void lazy_complete(struct sched_thread *t, struct hbg_ring *r, uint64_t id) {
        struct hbg_completer *c = ring_completer(t, r);
        if (publish(c, id)) {
                finish_published(t, r, id);
                return;
        }
        int rc = completer_defer(c, id);
        if (rc < 0)
                retire_fail(r, rc, id, "failsafe heap full");
}

static bool lazy_tick(struct sched_thread *t, struct hbg_ring *r) {
        struct hbg_completer *c = ring_completer(t, r);
        bool did = false;
        uint64_t id;

        /* Deferred ids, smallest first: the gate is monotone in id (§6.1). */
        while (failsafe_heap_peek(&c->heap, &id)) {
                stat_inc(&c->stats.retries, 1);
                if (!publish(c, id))
                        break;
                failsafe_heap_pop(&c->heap, &id);
                stat_inc(&c->stats.retry_published, 1);
                finish_published(t, r, id);
                did = true;
        }
        /* The walk that keeps the watermark live. */
        if (advance_all(c)) {
                retire_graphs(r);
                did = true;
        }
        return did;
}

/* After the parking thread's idle count went up (an acq_rel RMW on the
 * engine's `idle`, which every parking thread makes): it sees every stamp
 * stored before any earlier parker's increment, so the last to go idle
 * cannot miss a completed prefix (§11.2). */
static bool lazy_before_park(struct sched_thread *t, struct hbg_ring *r) {
        if (advance_all(ring_completer(t, r))) {
                retire_graphs(r);
                return true;
        }
        return false;
}

/* A tensor wait for a task of this visit, which the watermark may not
 * have passed (§2.1): the stamps went out with release stores, so a
 * seq_cst fence puts them before the load of the request, against the
 * client's seq_cst store of it and seq_cst look at the stamp. Once a
 * visit, as under eager. */
static bool lazy_end_visit(struct sched_thread *t, struct hbg_ring *r) {
        (void)t;
        signal_task_waiter_fenced(r);
        return false;
}

const struct completion_policy completion_lazy = {
        .name = "lazy",
        .complete = lazy_complete,
        .tick = lazy_tick,
        .before_park = lazy_before_park,
        .end_visit = lazy_end_visit,
};
