/* SPDX-License-Identifier: MIT */
/*
 * A ring's recorded graphs (RUNTIME_LOGIC.md §14): validated once when
 * recorded, immutable until the ring is freed.
 */
#include "daemon/engine/recorded.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "daemon/engine/engine_state.h"
#include "daemon/engine/ring.h"
#include "daemon/engine/validate.h"
#include "daemon/engine/engine_recorded.h"

uint64_t engine_recorded_memory(uint32_t n) {
        return sizeof(struct recorded_graph) +
               (uint64_t)n * (sizeof(struct recorded_task) + RECORDED_WORDS_MAX * sizeof(uint64_t));
}

uint64_t recorded_graph_memory(const struct recorded_graph *g) {
        return sizeof(*g) + (uint64_t)g->n * sizeof(struct recorded_task) + g->n_words * sizeof(uint64_t);
}

void recorded_graph_free(struct recorded_graph *g) {
        if (g) {
                free(g->tasks);
                free(g->words);
        }
        free(g);
}

bool ring_record_full(const struct hbg_ring *r) {
        return atomic_load_explicit(&r->recorded.n, memory_order_relaxed) >= r->engine->cfg.max_recorded_graphs;
}

/* Task i of g from its validated slot s: what a launch copies back
 * (launch.c), its variable parts appended to g->words (room for
 * RECORDED_WORDS_MAX a task was made). */
static void pack_task(struct recorded_graph *g, uint32_t i, const struct task_slot *s) {
        size_t tensor_words = s->args.n_tensors * RECORDED_TENSOR_WORDS;
        struct recorded_task *t = &g->tasks[i];
        *t = (struct recorded_task){
                .words = g->n_words,
                .predicate_offset = s->predicate_offset,
                .block_num = s->block_num,
                .report_kernel = s->report_kernel,
                .ktime_kernel = s->ktime_kernel,
                .kind = s->kind,
                .shape = s->shape,
                .lane_mask = s->lane_mask,
                .lanes = s->lanes,
                .flags = s->flags,
                .n_fanins = s->n_fanins,
                .n_tensors = s->args.n_tensors,
                .n_scalars = s->args.n_scalars,
        };
        memcpy(t->kernel, s->kernel, sizeof(t->kernel));
        uint64_t *w = g->words + g->n_words;
        memcpy(w, s->fanins, s->n_fanins * sizeof(w[0]));
        w += s->n_fanins;
        memcpy(w, s->args.tensors, tensor_words * sizeof(w[0]));
        w += tensor_words;
        memcpy(w, s->args.scalars, s->args.n_scalars * sizeof(w[0]));
        g->n_words += s->n_fanins + tensor_words + s->args.n_scalars;
}

int ring_record_validate(struct hbg_ring *r, const struct hbg_recorded_task *tasks, uint32_t n,
                         struct recorded_graph **ret, uint32_t *ret_task, const char **ret_error) {
        *ret = NULL;
        *ret_task = 0;
        *ret_error = NULL;
        if (n == 0) {
                *ret_error = "a recorded graph needs at least one task";
                return -EINVAL;
        }
        struct recorded_graph *g = calloc(1, sizeof(*g));
        /* Validated into one slot, then packed (struct recorded_task):
         * room for the most every task can keep, which is what the
         * recording was charged (engine_recorded_memory()); pages
         * never written cost nothing, and the rest is given back below. */
        struct task_slot *s = aligned_alloc(64, sizeof(*s));
        if (!g || !s || !(g->tasks = malloc((size_t)n * sizeof(*g->tasks))) ||
            !(g->words = malloc((size_t)n * RECORDED_WORDS_MAX * sizeof(*g->words)))) {
                free(s);
                recorded_graph_free(g);
                return -ENOMEM;
        }
        g->n = n;
        int err = 0;
        struct validate_memo memo = { .kept = false };
        for (uint32_t i = 0; i < n && err == 0; i++) {
                /* Task i has id i + 1; its fanins lie in [0, i + 1): the
                 * gate or earlier tasks. Copied first: validation reads a
                 * count, then copies what it covers (the caller's memory
                 * is sealed, but the rule is the same everywhere). */
                struct hbg_recorded_task copy = tasks[i];
                memset(s, 0, sizeof(*s));
                err = validate_task(r, s, &copy.desc, copy.payload.fanins, &copy.payload.args, (uint64_t)i + 1, 0,
                                    &memo, ret_error);
                if (err < 0)
                        *ret_task = i;
                else
                        pack_task(g, i, s);
        }
        free(s);
        if (err < 0) {
                recorded_graph_free(g);
                return err;
        }
        /* Kept as long as the session: only the words it filled. */
        if (g->n_words == 0) {
                free(g->words);
                g->words = NULL;
        } else {
                uint64_t *w = realloc(g->words, g->n_words * sizeof(*w));
                if (w)
                        g->words = w;
        }
        *ret = g;
        return 0;
}

int ring_record_add(struct hbg_ring *r, struct recorded_graph *g) {
        unsigned max = r->engine->cfg.max_recorded_graphs;
        uint32_t k = atomic_load_explicit(&r->recorded.n, memory_order_relaxed);
        if (k >= max) {
                recorded_graph_free(g);
                return -ENOSPC;
        }
        if (!r->recorded.graphs && !(r->recorded.graphs = calloc(max, sizeof(*r->recorded.graphs)))) {
                recorded_graph_free(g);
                return -ENOMEM;
        }
        r->recorded.graphs[k] = g;
        /* The entry is complete before its number is (§14). */
        atomic_store_explicit(&r->recorded.n, k + 1, memory_order_release);
        return (int)k;
}

int ring_record(struct hbg_ring *r, const struct hbg_recorded_task *tasks, uint32_t n,
                uint32_t *ret_task, const char **ret_error) {
        *ret_task = 0;
        *ret_error = NULL;
        if (n != 0 && ring_record_full(r)) {
                *ret_error = "max_recorded_graphs reached";
                return -ENOSPC;
        }
        struct recorded_graph *g;
        int err = ring_record_validate(r, tasks, n, &g, ret_task, ret_error);
        if (err < 0)
                return err;
        err = ring_record_add(r, g);
        if (err == -ENOSPC)
                *ret_error = "max_recorded_graphs reached";
        return err;
}

void recorded_free_ring(struct hbg_ring *r) {
        if (!r->recorded.graphs)
                return;
        uint32_t k = atomic_load_explicit(&r->recorded.n, memory_order_relaxed);
        for (uint32_t i = 0; i < k; i++)
                recorded_graph_free(r->recorded.graphs[i]);
        free(r->recorded.graphs);
        r->recorded.graphs = NULL;
}
