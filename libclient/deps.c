/* SPDX-License-Identifier: MIT */
/*
 * The session's dependency tracking (dep_tracker.c) bound to its client,
 * past the inline calls of deps.h: ids below the completion
 * watermark are complete.
 */
#include <stdlib.h>

#include "libclient/client_private.h"
#include "libclient/deps.h"
#include "libclient/session.h"

static bool not_done(void *arg, uint64_t id) {
        return !hbgc_task_done(arg, id);
}

bool hbgc_deps_pending_writer(hbg_client *c, uint64_t lo, uint64_t hi, uint64_t *ret_id) {
        return dep_tracker_find_writer(&c->deps, lo, hi, not_done, c, ret_id);
}

void hbgc_deps_free(hbg_client *c) {
        dep_tracker_free(&c->deps);
        free(c->freed);
        c->freed = NULL;
        c->n_freed = c->cap_freed = 0;
        free(c->scratch.v);
        c->scratch = (struct dep_ids){ 0 };
}
