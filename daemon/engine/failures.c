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

#include "daemon/engine/cancel.h"
#include "daemon/engine/ring.h"

void failures_record(struct hbg_ring *r, uint64_t id, int code, uint16_t kernel, const char *why) {
        pthread_mutex_lock(&r->cold_lock);
        int32_t expected = 0;
        if (atomic_compare_exchange_strong(&r->cpl->error_code, &expected, code))
                atomic_store_explicit(&r->cpl->error_task, id, memory_order_release);
        if (r->n_failures < r->max_failures) {
                r->failures[r->n_failures++] =
                        (struct failure){ .id = id, .code = code, .kernel = kernel, .why = why };
                r->failures_hi_known = false;
        } else {
                /* Full (only if the client never sends graph records for
                 * failing tasks): keep the lowest ids, they decide. Ids
                 * mostly come in increasing order, so the highest kept one
                 * is remembered: O(1) per failure then, not O(D) (a launch
                 * failing D tasks would cost D^2). */
                if (!r->failures_hi_known) {
                        r->failures_hi = 0;
                        for (uint32_t i = 1; i < r->n_failures; i++)
                                if (r->failures[i].id > r->failures[r->failures_hi].id)
                                        r->failures_hi = i;
                        r->failures_hi_known = true;
                }
                if (r->failures[r->failures_hi].id > id) {
                        r->failures[r->failures_hi] =
                                (struct failure){ .id = id, .code = code, .kernel = kernel, .why = why };
                        r->failures_hi_known = false;
                }
        }
        pthread_mutex_unlock(&r->cold_lock);
}

void failures_record_detail(struct hbg_ring *r, uint64_t id, const char *text) {
        if (id == UINT64_MAX)
                return; /* id + 1 is the entry's key */
        pthread_mutex_lock(&r->cold_lock);
        if (!r->failure_details)
                r->failure_details = calloc(FAILURE_DETAILS, sizeof(*r->failure_details));
        /* A free entry, else the highest id's if it is above this one:
         * graphs are decided in order, so the lowest ids are the ones
         * asked for first. Out of memory: the reason alone. */
        struct failure_detail *at = NULL;
        for (unsigned i = 0; r->failure_details && i < FAILURE_DETAILS; i++) {
                struct failure_detail *e = &r->failure_details[i];
                if (e->id_plus_1 == 0) {
                        at = e;
                        r->n_failure_details++;
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
        for (unsigned i = 0; r->n_failure_details > 0 && i < FAILURE_DETAILS; i++) {
                struct failure_detail *e = &r->failure_details[i];
                if (e->id_plus_1 == 0 || e->id_plus_1 - 1 < first || e->id_plus_1 - 1 > last)
                        continue;
                if (real && e->id_plus_1 - 1 == f->id) {
                        snprintf(r->failure_detail_out, sizeof(r->failure_detail_out), "%s", e->text);
                        f->why = r->failure_detail_out;
                }
                e->id_plus_1 = 0;
                r->n_failure_details--;
        }
}

/* The status of graph `number` [first, last]: its lowest real failure,
 * else its cancel (§12.6), else its lowest skipped task (-ECANCELED), in
 * *ret. Entries of the graph are dropped. */
int failures_graph_status(struct hbg_ring *r, uint64_t number, uint64_t first, uint64_t last, struct failure *ret) {
        bool real = false;

        *ret = (struct failure){ .code = 0 };
        pthread_mutex_lock(&r->cold_lock);
        uint32_t keep = 0;
        for (uint32_t i = 0; i < r->n_failures; i++) {
                struct failure f = r->failures[i];
                if (f.id < first || f.id > last) {
                        r->failures[keep++] = f;
                        continue;
                }
                bool is_real = f.code != -ECANCELED;
                if (ret->code == 0 || (is_real && !real) || (is_real == real && f.id < ret->id)) {
                        *ret = f;
                        real = is_real;
                }
        }
        r->n_failures = keep;
        r->failures_hi_known = false;
        take_detail_locked(r, first, last, ret, real);
        cancel_status_locked(r, number, first, ret, real);
        pthread_mutex_unlock(&r->cold_lock);
        return ret->code;
}
