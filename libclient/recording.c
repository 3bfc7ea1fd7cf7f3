/* SPDX-License-Identifier: MIT */
/*
 * A graph being recorded (RUNTIME_LOGIC.md §14): between
 * hbg_graph_record_begin() and hbg_graph_record_end(), added tasks go
 * here instead of into the task window, with ids of their own (task i is
 * i + 1; 0 is the gate every launch puts first), and their dependencies
 * are derived inside the recording only. replay.c hands the result to
 * hbgd and launches it.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "libclient/client_private.h"
#include "libclient/errors.h"
#include "libclient/recording.h"
#include "common/grow.h"

int hbgc_rec_begin(hbg_client *c) {
        struct recording *r = calloc(1, sizeof(*r));
        if (!r)
                return -ENOMEM;
        /* The session's allocations, without their records: accesses
         * then find their lists as fast as in the session's tracker. */
        r->deps.keep_all = true;
        r->deps.sweep_at = SIZE_MAX;
        if (c->deps.n_allocs) {
                r->deps.allocs = calloc(c->deps.n_allocs, sizeof(*r->deps.allocs));
                if (!r->deps.allocs) {
                        free(r);
                        return -ENOMEM;
                }
                for (size_t i = 0; i < c->deps.n_allocs; i++)
                        r->deps.allocs[i] = (struct heap_alloc){ .offset = c->deps.allocs[i].offset,
                                                                 .size = c->deps.allocs[i].size };
                r->deps.n_allocs = r->deps.cap_allocs = c->deps.n_allocs;
        }
        c->rec = r;
        c->dt = &r->deps;
        return 0;
}

int hbgc_rec_append(hbg_client *c, const struct hbg_task_record *t, const uint64_t *fanins, size_t n_fanins,
                    uint64_t *ret_id) {
        struct recording *r = c->rec;
        if (r->n >= HBGC_MAX_RECORDED_TASKS)
                return hbgc_fail(c, -E2BIG, "hbg_graph_add: a recorded graph has at most %u tasks",
                                 HBGC_MAX_RECORDED_TASKS);
        if (GROW(r->tasks, r->cap, r->n + 1, 64) < 0)
                return hbgc_fail(c, -ENOMEM, "hbg_graph_add: out of memory");
        uint64_t id = r->n + 1;
        struct hbg_recorded_task *rt = &r->tasks[r->n];
        memset(rt, 0, sizeof(*rt));
        producer_task_encode(&rt->desc, rt->payload.fanins, &rt->payload.args, id, t, fanins, (unsigned)n_fanins);
        r->n++;
        *ret_id = id;
        return 0;
}

int hbgc_rec_host(hbg_client *c, uint64_t id, hbg_host_fn fn, void *userdata) {
        struct recording *r = c->rec;
        if (GROW(r->host, r->cap_host, r->n_host + 1, 64) < 0)
                return -ENOMEM;
        r->host[r->n_host++] = (struct recorded_host){ .id = id, .fn = fn, .userdata = userdata };
        return 0;
}

int hbgc_rec_accesses(hbg_client *c, const struct access *a, size_t na) {
        struct recording *r = c->rec;
        if (na == 0)
                return 0; /* a task without tensors: a may be NULL */
        if (GROW(r->footprint, r->cap_fp, r->n_fp + na, 64) < 0)
                return -ENOMEM;
        memcpy(&r->footprint[r->n_fp], a, na * sizeof(*a));
        r->n_fp += na;
        return 0;
}

void hbgc_rec_free(struct recording *r) {
        if (!r)
                return;
        dep_tracker_free(&r->deps);
        free(r->tasks);
        free(r->host);
        free(r->footprint);
        free(r);
}

void hbgc_rec_end(hbg_client *c) {
        hbgc_rec_free(c->rec);
        c->rec = NULL;
        c->dt = &c->deps;
}
