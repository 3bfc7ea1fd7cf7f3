/* SPDX-License-Identifier: MIT */
/*
 * The floor (bench/peers/peer.h): no runtime at all, one thread. What any
 * system must at least do per task, done as cheaply as C allows: turn the
 * fanin lists into successor lists, count each task's remaining fanins,
 * and run a ready stack. A runtime's ns per task minus the floor's is what
 * its scheduling, queues and threads cost. --threads is ignored.
 */
#include <errno.h>
#include <stdlib.h>

#include "bench/peers/peer.h"

const char *const peer_name = "floor";

int peer_init(unsigned threads) {
        (void)threads;
        return 0;
}

void peer_fini(void) {
}

/* The per-run state, built inside the timed run like every peer's graph. */
struct floor_graph {
        uint32_t *succ_start;   /* n + 1 offsets into succ */
        uint32_t *succ;         /* successor task indices, one per edge */
        uint32_t *remaining;    /* fanins not yet run, per task */
        uint32_t *stack;        /* ready tasks; each is pushed once, so n suffice */
};

static void floor_graph_free(struct floor_graph *g) {
        free(g->succ_start);
        free(g->succ);
        free(g->remaining);
        free(g->stack);
}

/* Successor CSR from the fanin CSR: count out-degrees, prefix-sum them
 * into offsets, then place each edge. succ_start[t] is used as a fill
 * cursor and ends as the start of t + 1's list, hence the final shift. */
static int floor_graph_build(struct floor_graph *g, const struct dag *d) {
        uint32_t n = d->n;
        uint64_t edges = dag_edges(d);
        g->succ_start = calloc((size_t)n + 1, sizeof(*g->succ_start));
        g->succ = malloc((edges ? edges : 1) * sizeof(*g->succ));
        g->remaining = malloc(((size_t)n ? n : 1) * sizeof(*g->remaining));
        g->stack = malloc(((size_t)n ? n : 1) * sizeof(*g->stack));
        if (!g->succ_start || !g->succ || !g->remaining || !g->stack)
                return -ENOMEM;
        for (uint64_t e = 0; e < edges; e++)
                g->succ_start[d->fanins[e] + 1]++;
        for (uint32_t t = 0; t < n; t++)
                g->succ_start[t + 1] += g->succ_start[t];
        for (uint32_t t = 0; t < n; t++) {
                g->remaining[t] = d->fanin_start[t + 1] - d->fanin_start[t];
                for (uint32_t e = d->fanin_start[t]; e < d->fanin_start[t + 1]; e++)
                        g->succ[g->succ_start[d->fanins[e]]++] = t;
        }
        for (uint32_t t = n; t > 0; t--)
                g->succ_start[t] = g->succ_start[t - 1];
        g->succ_start[0] = 0;
        return 0;
}

/* No graph object to keep: every run builds its tasks anew. */
int peer_rerun(struct peer_ctx *ctx) {
        (void)ctx;
        return -ENOTSUP;
}

int peer_run(struct peer_ctx *ctx) {
        const struct dag *d = ctx->d;
        struct floor_graph g = { 0 };
        int err = floor_graph_build(&g, d);
        if (err < 0) {
                floor_graph_free(&g);
                return err;
        }
        /* Roots pushed last to first, so that they pop in index order. */
        uint32_t top = 0;
        for (uint32_t t = d->n; t > 0; t--)
                if (g.remaining[t - 1] == 0)
                        g.stack[top++] = t - 1;
        while (top) {
                uint32_t t = g.stack[--top];
                peer_body(ctx, t);
                for (uint32_t e = g.succ_start[t]; e < g.succ_start[t + 1]; e++)
                        if (--g.remaining[g.succ[e]] == 0)
                                g.stack[top++] = g.succ[e];
        }
        floor_graph_free(&g);
        return 0;
}
