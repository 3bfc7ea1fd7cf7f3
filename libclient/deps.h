/* SPDX-License-Identifier: MIT */
/* libclient/deps.c for the other files of libhbgclient: the session's dependency tracking, bound to the client. */
#pragma once

#include "libclient/client_private.h"
#include "libclient/session.h"

/* The session's (or the recording's) dependency tracker bound to the
 * client; inline, since graph.c calls them for every task. */

/* Make sure c->scratch holds n ids. 0 or -ENOMEM. */
static inline int hbgc_scratch_reserve(hbg_client *c, size_t n) {
        return dep_ids_reserve(&c->scratch, n);
}
/* What the session's tracker may forget (dep_tracker.h): complete tasks'
 * records; but once a task of the graph being built failed or was
 * skipped, not that graph's writes (back to geometry_failure_reach() ids,
 * as far as hbgd answers a failure), so that a task reading what a failed
 * task of its own graph should have written is skipped however long ago
 * that task completed. A later graph starts afresh: a writer complete
 * when its reader is added is no dependency (hbg_graph_add(3)), so a
 * retry of a failed graph runs. A failed task raises failed_high and
 * sets error_code before its stamp's release store, and so before the
 * watermark's move past it: after the acquire load of the watermark, the
 * relaxed loads see both (RUNTIME_LOGIC §12.2). failed_high 0 beside a
 * set error_code: an hbgd that does not say which, so keep. A ring with
 * no failure pays one load of a line hbgd writes only on failure. */
static inline struct dep_cut hbgc_dep_cut(const hbg_client *c) {
        uint64_t wm = hbgc_watermark(c);
        if (atomic_load_explicit(&c->ch->error_code, memory_order_relaxed) == 0)
                return (struct dep_cut){ wm, wm };
        uint64_t high = atomic_load_explicit(&c->ch->failed_high, memory_order_relaxed);
        if (high != 0 && high <= c->prod.graph_first) /* every failure before this graph */
                return (struct dep_cut){ wm, wm };
        uint64_t reach = geometry_failure_reach(&c->g), next = c->prod.next_id;
        uint64_t from = next > reach ? next - reach : 0;
        return (struct dep_cut){ wm, c->prod.graph_first > from ? c->prod.graph_first : from };
}

/* Dependencies of a task with these accesses on earlier tasks: appended to
 * c->scratch from index *n on. 0 or -ENOMEM. No accesses, nothing to look
 * up (most tasks of some graphs): no call at all. */
static inline int hbgc_deps_collect(hbg_client *c, const struct access *a, size_t na, size_t *n) {
        if (na == 0)
                return 0;
        c->scratch.n = *n;
        int err = dep_tracker_collect(c->dt, a, na, c->dt->keep_all ? DEP_CUT_NONE : hbgc_dep_cut(c), &c->scratch);
        *n = c->scratch.n;
        return err;
}
/* Record the accesses of task id in tracker dt (a recording's, or the
 * session's for a launched graph). 0 or -ENOMEM (then the records are
 * incomplete: the caller reports the error, and the dependencies of later
 * tasks on this one may be missed). */
static inline int hbgc_deps_commit_to(hbg_client *c, struct dep_tracker *dt, const struct access *a, size_t na,
                                      uint64_t id) {
        if (na == 0) /* nothing recorded, no sweep due */
                return 0;
        int err = dep_tracker_commit(dt, a, na, id);
        if (dep_tracker_sweep_due(dt))
                dep_tracker_sweep(dt, hbgc_dep_cut(c));
        return err;
}
/* The same in the tracker tasks are added to now. */
static inline int hbgc_deps_commit(hbg_client *c, const struct access *a, size_t na, uint64_t id) {
        return hbgc_deps_commit_to(c, c->dt, a, na, id);
}
/* A writer of [lo, hi) that is not complete yet: true and its id. */
bool hbgc_deps_pending_writer(hbg_client *c, uint64_t lo, uint64_t hi, uint64_t *ret_id);
void hbgc_deps_free(hbg_client *c);
