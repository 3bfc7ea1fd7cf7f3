/* SPDX-License-Identifier: MIT */
/*
 * Cancelled graphs (RUNTIME_LOGIC.md §12.6). Whoever cancels (hbgd's io
 * thread, for `hbgctl cancel` and hbg_graph_cancel()) only writes an entry
 * into the ring's small cancel table; the scheduler threads act on it
 * through the failure path every failed task takes:
 *   - a task about to run whose id a cancel covers fails with -ECANCELED
 *     and the cancel's message, its blocks counted as done (dispatch.c);
 *   - a running kernel of the ring sees its stop word (cancel.word) change
 *     at its next check and asks cancel_applies() whether the change
 *     is about its task; if so it stops with -ECANCELED (§10.6);
 *   - the graph is decided under the cold lock like any other
 *     (failures_graph_status): without a real failure, its status is
 *     the cancel.
 * The hot path pays one relaxed load of cancel.word per task (beside
 * `removing` and `broken`, on a read-mostly line); only while a cancel of
 * this very ring is pending does a task take the cold lock to look.
 */
#include "daemon/engine/cancel.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "daemon/engine/client_read.h"
#include "daemon/engine/failures.h"
#include "daemon/engine/ring.h"
#include "daemon/engine/engine_stats.h"

/* Under cold_lock: the table changed (count n entries in use). Relaxed:
 * readers that act on the word take cold_lock, whose acquire orders the
 * table after this store (§12.6). */
static void cancel_word_set(struct hbg_ring *r, unsigned n) {
        uint32_t w = atomic_load_explicit(&r->cancel.word, memory_order_relaxed);
        uint32_t gen = (w & ~CANCEL_COUNT) + CANCEL_GENERATION;
        atomic_store_explicit(&r->cancel.word, gen | n, memory_order_relaxed);
}

static unsigned cancels_in_use(const struct hbg_ring *r) {
        unsigned n = 0;
        for (unsigned i = 0; i < RING_CANCELS; i++)
                n += r->cancel.table[i].used;
        return n;
}

int ring_cancel_graph(struct hbg_ring *r, uint64_t number, const char *why) {
        uint64_t G = r->g.graph_table_entries;
        if (atomic_load(&r->broken) || atomic_load(&r->removing))
                return -ESHUTDOWN;
        /* The client's cursor and record: hostile. A lying record only
         * cancels other tasks of the client's own ring (and the retirer
         * refuses it anyway); the range is bounded by nothing else. */
        uint64_t submitted = client_read_u64(r, &r->sub->graphs_submitted);
        uint64_t retired = atomic_load_explicit(&r->cpl->graphs_retired, memory_order_acquire);
        if (number < retired || number >= submitted || number - retired >= G)
                return -ENOENT;
        struct hbg_graph_record rec;
        client_read(r, &r->graph_records[number & (G - 1)], &rec, sizeof(rec));
        if (rec.reserved != 0 || rec.last_id < rec.first_id)
                return -ENOENT;
        int err = 0;
        pthread_mutex_lock(&r->cold_lock);
        /* Decided already (the retirer took its status, or is past it): the
         * record may even be reused by now. */
        if (number < r->cancel.graphs_decided) {
                err = -ENOENT;
                goto out;
        }
        struct ring_cancel *free_entry = NULL;
        for (unsigned i = 0; i < RING_CANCELS; i++) {
                struct ring_cancel *c = &r->cancel.table[i];
                if (c->used && c->number == number) {
                        err = -EALREADY;
                        goto out;
                }
                if (!c->used && !free_entry)
                        free_entry = c;
        }
        if (!free_entry) {
                err = -EBUSY;
                goto out;
        }
        *free_entry = (struct ring_cancel){ .used = true, .number = number, .first = rec.first_id,
                                            .last = rec.last_id };
        snprintf(free_entry->why, sizeof(free_entry->why), "%s", why);
        cancel_word_set(r, cancels_in_use(r));
out:
        pthread_mutex_unlock(&r->cold_lock);
        return err;
}

const char *cancel_find(struct hbg_ring *r, uint64_t id) {
        const char *why = NULL;
        pthread_mutex_lock(&r->cold_lock);
        for (unsigned i = 0; i < RING_CANCELS && !why; i++) {
                const struct ring_cancel *c = &r->cancel.table[i];
                if (c->used && id >= c->first && id <= c->last)
                        why = c->why;
        }
        pthread_mutex_unlock(&r->cold_lock);
        /* The entry stays until its graph's entry is published, which
         * waits for this task: the pointer outlives every use. */
        return why;
}

bool cancel_applies(void *arg) {
        const struct cancel_watch *w = arg;
        return cancel_find(w->r, w->id) != NULL;
}

void cancel_status_locked(struct hbg_ring *r, uint64_t number, uint64_t first, struct failure *f,
                          bool real) {
        r->cancel.graphs_decided = number + 1;
        if (real || (atomic_load_explicit(&r->cancel.word, memory_order_relaxed) & CANCEL_COUNT) == 0)
                return;
        for (unsigned i = 0; i < RING_CANCELS; i++) {
                const struct ring_cancel *c = &r->cancel.table[i];
                if (!c->used || c->number != number)
                        continue;
                /* Its lowest failed or skipped task if any (tasks that ran
                 * before the cancel count as done), else its first. */
                *f = (struct failure){ .id = f->code ? f->id : first, .code = -ECANCELED,
                                       .kernel = f->code ? f->kernel : HBG_KERNEL_NONE, .why = c->why };
                return;
        }
}

void cancel_prune(struct hbg_ring *r, uint64_t published) {
        if ((atomic_load_explicit(&r->cancel.word, memory_order_relaxed) & CANCEL_COUNT) == 0)
                return;
        pthread_mutex_lock(&r->cold_lock);
        bool changed = false;
        for (unsigned i = 0; i < RING_CANCELS; i++) {
                struct ring_cancel *c = &r->cancel.table[i];
                if (c->used && c->number < published) {
                        c->used = false;
                        changed = true;
                }
        }
        if (changed)
                cancel_word_set(r, cancels_in_use(r));
        pthread_mutex_unlock(&r->cold_lock);
}

void ring_set_stop_reason(struct hbg_ring *r, int code, const char *why) {
        pthread_mutex_lock(&r->cold_lock);
        if (!r->stop_why) {
                snprintf(r->stop_msg, sizeof(r->stop_msg), "%s", why);
                r->stop_why = r->stop_msg;
                /* No task holds it: every graph says "session stopped: why". */
                r->stop_task = UINT64_MAX;
                r->stop_code = code;
        }
        pthread_mutex_unlock(&r->cold_lock);
}
