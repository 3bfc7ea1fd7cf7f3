/* SPDX-License-Identifier: MIT */
/*
 * Failures (RUNTIME_LOGIC.md §12.2): the ring's list of failed and skipped
 * tasks, written as a task's status becomes final (complete.c) and read,
 * graph by graph, by the retirer (retire.c), which takes a graph's status
 * from it.
 */
#include "daemon/engine/failures.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#include "common/kernel_sig.h"
#include "daemon/engine/cancel.h"
#include "daemon/engine/ring.h"
#include "shm/completion.h"
#include "shm/geometry.h"

/* Failure f left out of the full list (under cold_lock): what a graph
 * that may hold it needs, its lowest one whole and the highest id. */
static void note_dropped_locked(struct hbg_ring *r, struct failure f) {
        if (!r->fail.dropped) {
                r->fail.dropped = true;
                r->fail.dropped_low = f;
                r->fail.dropped_hi = f.id;
                return;
        }
        if (f.id < r->fail.dropped_low.id)
                r->fail.dropped_low = f;
        if (f.id > r->fail.dropped_hi)
                r->fail.dropped_hi = f.id;
}

void failures_record(struct hbg_ring *r, uint64_t id, int code, uint16_t kernel, const char *why) {
        struct failure f = { .id = id, .code = code, .kernel = kernel, .why = why };
        pthread_mutex_lock(&r->cold_lock);
        int32_t expected = 0;
        if (atomic_compare_exchange_strong(&r->cpl->error_code, &expected, code))
                atomic_store_explicit(&r->cpl->error_task, id, memory_order_release);
        failures_raise_high(&r->cpl->failed_high, id + 1);
        if (r->fail.n < r->fail.max) {
                r->fail.list[r->fail.n++] = f;
                r->fail.hi_known = false;
        } else {
                /* Full: more than D failed or skipped tasks wait for
                 * their graphs' decision (a graph larger than D with that
                 * many, or ids a client left unwritten). Keep the lowest
                 * ids, they decide; the one left out is noted
                 * (note_dropped_locked()). Ids
                 * mostly come in increasing order, so the highest kept one
                 * is remembered: O(1) per failure then, not O(D) (a launch
                 * failing D tasks would cost D^2). */
                if (!r->fail.hi_known) {
                        r->fail.hi = 0;
                        for (uint32_t i = 1; i < r->fail.n; i++)
                                if (r->fail.list[i].id > r->fail.list[r->fail.hi].id)
                                        r->fail.hi = i;
                        r->fail.hi_known = true;
                }
                if (r->fail.list[r->fail.hi].id > id) {
                        note_dropped_locked(r, r->fail.list[r->fail.hi]);
                        r->fail.list[r->fail.hi] = f;
                        r->fail.hi_known = false;
                } else {
                        note_dropped_locked(r, f);
                }
        }
        pthread_mutex_unlock(&r->cold_lock);
}

void failures_record_detail(struct hbg_ring *r, uint64_t id, const char *text) {
        if (id == UINT64_MAX)
                return; /* id + 1 is the entry's key */
        pthread_mutex_lock(&r->cold_lock);
        if (!r->fail.details)
                r->fail.details = calloc(FAILURE_DETAILS, sizeof(*r->fail.details));
        /* A free entry, else the highest id's if it is above this one:
         * graphs are decided in order, so the lowest ids are the ones
         * asked for first. Out of memory: the reason alone. */
        struct failure_detail *at = NULL;
        for (unsigned i = 0; r->fail.details && i < FAILURE_DETAILS; i++) {
                struct failure_detail *e = &r->fail.details[i];
                if (e->id_plus_1 == 0) {
                        at = e;
                        r->fail.n_details++;
                        break;
                }
                if (e->id_plus_1 > id + 1 && (!at || e->id_plus_1 > at->id_plus_1))
                        at = e;
        }
        if (at) {
                at->id_plus_1 = id + 1;
                snprintf(at->text, sizeof(at->text), "%s", text);
        }
        pthread_mutex_unlock(&r->cold_lock);
}

/* The graph [first, last] is decided: its details are dropped, and the
 * one of its failure f (a real one), if kept, copied for the retirer. */
static void take_detail_locked(struct hbg_ring *r, uint64_t first, uint64_t last, struct failure *f, bool real) {
        for (unsigned i = 0; r->fail.n_details > 0 && i < FAILURE_DETAILS; i++) {
                struct failure_detail *e = &r->fail.details[i];
                if (e->id_plus_1 == 0 || e->id_plus_1 - 1 < first || e->id_plus_1 - 1 > last)
                        continue;
                if (real && e->id_plus_1 - 1 == f->id) {
                        snprintf(r->fail.detail_out, sizeof(r->fail.detail_out), "%s", e->text);
                        f->why = r->fail.detail_out;
                }
                e->id_plus_1 = 0;
                r->fail.n_details--;
        }
}

enum dropped_status { DROPPED_NONE, DROPPED_EXACT, DROPPED_TAGGED, DROPPED_MAYBE };

/* Graph [first, last] against the failures the list left out. The
 * lowest one, if it is the graph's (EXACT: it may be a skip while a real
 * failure of the graph was left out above it). Else, if some id left
 * out is at or above first: the failure tags, which answer exactly for
 * every id >= WM + D - T (§12.2), looked at over the graph's ids up to
 * the highest left out: a tagged id is a failure of the graph, its code
 * and reason lost (TAGGED); none, and the graph lies wholly within that
 * reach, before and after the scan: no failure (NONE); else it may hold
 * one (MAYBE), reported at its first task, since a graph must never
 * report success for a failure hbgd did not keep. What the graph covers
 * is then forgotten. Only while the list has overflowed: a scan of at
 * most T ids. */
static enum dropped_status dropped_status_locked(struct hbg_ring *r, uint64_t first, uint64_t last,
                                                 struct failure *ret) {
        if (!r->fail.dropped || r->fail.dropped_hi < first || r->fail.dropped_low.id > last)
                return DROPPED_NONE;
        enum dropped_status st = DROPPED_NONE;
        if (r->fail.dropped_low.id >= first) {
                *ret = r->fail.dropped_low;
                st = DROPPED_EXACT;
        } else {
                uint64_t wm = watermark_read(&r->window), reach = geometry_failure_reach(&r->g);
                uint64_t exact_from = wm > reach ? wm - reach : 0;
                uint64_t lo = first > exact_from ? first : exact_from;
                uint64_t hi = last < r->fail.dropped_hi ? last : r->fail.dropped_hi;
                for (uint64_t id = lo; id <= hi && st == DROPPED_NONE; id++)
                        if (failures_tagged(&r->fail.tags, id)) {
                                *ret = (struct failure){ .id = id, .code = -EPROTO, .kernel = HBG_KERNEL_NONE,
                                                         .why = FAILURE_NOT_KEPT };
                                st = DROPPED_TAGGED;
                        }
                /* The watermark may have moved on during the scan, and
                 * a tag near the reach's end been taken by a later id
                 * failing: only what is still within reach counts. */
                wm = watermark_read(&r->window);
                if (st == DROPPED_NONE && (lo > first || (wm > reach && wm - reach > first))) {
                        *ret = (struct failure){ .id = first, .code = -EPROTO, .kernel = HBG_KERNEL_NONE,
                                                 .why = "more failed tasks awaited their graphs than hbgd keeps: "
                                                        "one may be this graph's" };
                        st = DROPPED_MAYBE;
                }
        }
        if (r->fail.dropped_hi <= last)
                r->fail.dropped = false;
        else
                r->fail.dropped_low.id = last; /* below the next graph: which ids failed there is unknown */
        return st;
}

/* Does f decide a graph's status before *cur (code 0: none yet; real:
 * cur is a failure, not a skip)? The lowest real failure, else the
 * lowest skip. */
static bool failure_precedes(const struct failure *f, const struct failure *cur, bool real) {
        bool f_real = f->code != -ECANCELED;
        return cur->code == 0 || (f_real && !real) || (f_real == real && f->id < cur->id);
}

/* The status of graph `number` [first, last]: its lowest real failure,
 * else its cancel (§12.6), else its lowest skipped task (-ECANCELED), in
 * *ret; a failure the full list left out counts as the graph's when it
 * may be. Entries of the graph are dropped. */
int failures_graph_status(struct hbg_ring *r, uint64_t number, uint64_t first, uint64_t last, struct failure *ret) {
        bool real = false;

        *ret = (struct failure){ .code = 0 };
        pthread_mutex_lock(&r->cold_lock);
        uint32_t keep = 0;
        for (uint32_t i = 0; i < r->fail.n; i++) {
                struct failure f = r->fail.list[i];
                if (f.id < first || f.id > last) {
                        r->fail.list[keep++] = f;
                        continue;
                }
                if (failure_precedes(&f, ret, real)) {
                        real = f.code != -ECANCELED;
                        *ret = f;
                }
        }
        r->fail.n = keep;
        r->fail.hi_known = false;
        struct failure d = { .code = 0 };
        enum dropped_status dst = dropped_status_locked(r, first, last, &d);
        if (dst == DROPPED_EXACT && failure_precedes(&d, ret, real)) {
                real = d.code != -ECANCELED;
                *ret = d;
        } else if (dst != DROPPED_NONE && dst != DROPPED_EXACT && ret->code == 0) {
                /* Failed or skipped, which is not known: a kept failure
                 * of the graph, or its cancel, says more. */
                *ret = d;
        }
        take_detail_locked(r, first, last, ret, real);
        cancel_status_locked(r, number, first, ret, real);
        pthread_mutex_unlock(&r->cold_lock);
        return ret->code;
}
