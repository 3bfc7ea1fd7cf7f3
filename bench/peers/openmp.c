/* SPDX-License-Identifier: MIT */
/*
 * OpenMP tasks with dependences (gcc's libgomp), bench/peers/peer.h: one
 * thread of a parallel region creates every task in index order, each
 * with depend(out:) on its own dependence object and depend(in:) on those
 * of its fanins; the other threads (and the creator once done) run them.
 *
 * A task's fanin count varies (0..d->max_fanin), so the in-dependences
 * are an OpenMP 5.0 depend iterator over the task's fanin list (gcc 12
 * honours it: with the in-dependences removed, --check reports tasks run
 * before their fanins on every shape with edges). Depend clauses order sibling tasks by address: a task
 * with in: x waits for the latest earlier sibling with out: x. Each
 * task's own byte of `dep` is written (out) only by that task, and every
 * fanin index is smaller than its task's, so the fanin's task is always
 * the earlier sibling and in: dep[f] means exactly "after task f".
 */
#include <errno.h>
#include <omp.h>
#include <stdlib.h>

#include "bench/peers/peer.h"

const char *const peer_name = "openmp";

static unsigned omp_threads;

int peer_init(unsigned threads) {
        omp_threads = threads;
        /* Start libgomp's thread pool now: a parallel region's threads
         * stay parked between regions, so the first measured run does
         * not pay for creating them (the warm-up would anyway). */
#pragma omp parallel num_threads(threads)
        {
        }
        return 0;
}

void peer_fini(void) {
}

/* No graph object to keep: every run builds its tasks anew. */
int peer_rerun(struct peer_ctx *ctx) {
        (void)ctx;
        return -ENOTSUP;
}

int peer_run(struct peer_ctx *ctx) {
        const struct dag *d = ctx->d;
        const uint32_t *fanin_start = d->fanin_start;
        const uint32_t *fanins = d->fanins;
        uint32_t n = d->n;
        /* The dependence objects: only their addresses matter. */
        char *dep = malloc(n ? n : 1);
        if (!dep)
                return -ENOMEM;

#pragma omp parallel num_threads(omp_threads)
#pragma omp single
        for (uint32_t t = 0; t < n; t++) {
                const uint32_t *f = fanins + fanin_start[t];
                uint32_t k = fanin_start[t + 1] - fanin_start[t];
                /* Used only as the iterator's bound, which gcc 12's
                 * set-but-not-used warning does not count as a use. */
                (void)k;
#pragma omp task firstprivate(t) depend(iterator(uint32_t j = 0:k), in: dep[f[j]]) depend(out: dep[t])
                peer_body(ctx, t);
        }

        free(dep);
        return 0;
}
