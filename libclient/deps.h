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
/* Dependencies of a task with these accesses on earlier tasks: appended to
 * c->scratch from index *n on. 0 or -ENOMEM. No accesses, nothing to look
 * up (most tasks of some graphs): no call at all. */
static inline int hbgc_deps_collect(hbg_client *c, const struct access *a, size_t na, size_t *n) {
        if (na == 0)
                return 0;
        c->scratch.n = *n;
        int err = dep_tracker_collect(c->dt, a, na, c->dt->keep_all ? 0 : hbgc_watermark(c), &c->scratch);
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
                dep_tracker_sweep(dt, hbgc_watermark(c));
        return err;
}
/* The same in the tracker tasks are added to now. */
static inline int hbgc_deps_commit(hbg_client *c, const struct access *a, size_t na, uint64_t id) {
        return hbgc_deps_commit_to(c, c->dt, a, na, id);
}
/* A writer of [lo, hi) that is not complete yet: true and its id. */
bool hbgc_deps_pending_writer(hbg_client *c, uint64_t lo, uint64_t hi, uint64_t *ret_id);
void hbgc_deps_free(hbg_client *c);
