/* SPDX-License-Identifier: MIT */
/*
 * Graph statuses: reading retired graphs back from the completion region
 * (RUNTIME_LOGIC.md §12.1), keeping the failures, answering for a graph.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>

#include "libclient/client_private.h"

/* ---------------------------------------------------------------- graphs */

static int failures_push(hbg_client *c, struct graph_failure f) {
        if (c->n_failures == c->cap_failures) {
                size_t cap = c->cap_failures ? 2 * c->cap_failures : 16;
                struct graph_failure *v = realloc(c->failures, cap * sizeof(*v));
                if (!v)
                        return -ENOMEM;
                c->failures = v;
                c->cap_failures = cap;
        }
        c->failures[c->n_failures++] = f;
        return 0;
}

static int32_t sane_status(int32_t st) {
        return st > 0 || st < -4095 ? -EPROTO : st;
}

/* Graph entries are read back as they retire and only failures are kept
 * (graph numbers ascending), so the status of a graph the table has long
 * reused stays known, at a cost proportional to the failed graphs only. */
void hbgc_harvest(hbg_client *c) {
        uint64_t r = atomic_load_explicit(&c->ch->graphs_retired, memory_order_acquire);
        if (r > c->prod.graphs)
                r = c->prod.graphs; /* never more than we submitted */
        while (c->harvested < r) {
                uint64_t k = c->harvested;
                struct hbg_graph_entry e;
                if (hbg_producer_graph_entry(&c->prod, k, &e) != 0)
                        break;
                int32_t st = sane_status(e.status);
                if (st != 0 && failures_push(c, (struct graph_failure){
                                       .graph = k, .task = e.first_error_task, .status = st }) < 0)
                        break; /* try again later */
                c->harvested = k + 1;
        }
}

/* 1 running, 0 ok, < 0 failed (*task: its first failing task). */
int hbgc_graph_state(hbg_client *c, uint64_t k, uint64_t *task) {
        hbgc_harvest(c);
        if (k < c->harvested) {
                size_t a = 0, b = c->n_failures;
                while (a < b) {
                        size_t m = a + (b - a) / 2;
                        if (c->failures[m].graph < k)
                                a = m + 1;
                        else
                                b = m;
                }
                if (a < c->n_failures && c->failures[a].graph == k) {
                        *task = c->failures[a].task;
                        return c->failures[a].status;
                }
                return 0;
        }
        /* Retired but graphs_retired not advanced yet: the entry says so. */
        struct hbg_graph_entry e;
        if (hbg_producer_graph_entry(&c->prod, k, &e) == 0) {
                *task = e.first_error_task;
                return sane_status(e.status);
        }
        return 1;
}

int hbgc_graph_result(hbg_client *c, uint64_t k, int st, uint64_t task, uint64_t *ret_task, const char *fn) {
        if (st < 0) {
                if (ret_task)
                        *ret_task = task;
                hbgc_fail(c, st, "%s: graph %" PRIu64 " failed: %s (first failing task %" PRIu64 ")", fn, k,
                          hbg_strerror(st), task);
        }
        return st;
}

int hbgc_graph_check(hbg_client *c, uint64_t graph, const char *fn) {
        if (!c)
                return -EINVAL;
        if (c->in_host)
                return hbgc_fail(c, -EDEADLK, "%s: called from a host function of this client", fn);
        if (graph >= c->prod.graphs)
                return hbgc_fail(c, -EINVAL, "%s: graph %" PRIu64 " has not been submitted", fn, graph);
        return 0;
}

HBG_EXPORT int hbg_graph_status(hbg_client *c, uint64_t graph, uint64_t *ret_task) {
        int err = hbgc_graph_check(c, graph, "hbg_graph_status");
        if (err < 0)
                return err;
        uint64_t task = 0;
        int st = hbgc_graph_state(c, graph, &task);
        if (st == 1 && hbgc_check_socket(c) < 0) {
                st = hbgc_graph_state(c, graph, &task);
                if (st == 1)
                        return hbgc_fail(c, -ECONNRESET, "hbg_graph_status: hbgd went away before graph %" PRIu64
                                         " finished", graph);
        }
        return hbgc_graph_result(c, graph, st, task, ret_task, "hbg_graph_status");
}

