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

uint64_t hbg_engine_recorded_memory(uint32_t n) {
        return sizeof(struct recorded_graph) + (uint64_t)n * sizeof(struct task_slot);
}

void hbg_recorded_graph_free(struct recorded_graph *g) {
        if (g)
                free(g->tasks);
        free(g);
}

bool hbg_ring_record_full(const struct hbg_ring *r) {
        return atomic_load_explicit(&r->n_recorded, memory_order_relaxed) >= r->engine->cfg.max_recorded_graphs;
}

int hbg_ring_record_validate(struct hbg_ring *r, const struct hbg_recorded_task *tasks, uint32_t n,
                             struct recorded_graph **ret, uint32_t *ret_task, const char **ret_error) {
        *ret = NULL;
        *ret_task = 0;
        *ret_error = NULL;
        if (n == 0) {
                *ret_error = "a recorded graph needs at least one task";
                return -EINVAL;
        }
        struct recorded_graph *g = calloc(1, sizeof(*g));
        if (!g || !(g->tasks = aligned_alloc(64, (size_t)n * sizeof(*g->tasks)))) {
                hbg_recorded_graph_free(g);
                return -ENOMEM;
        }
        g->n = n;
        for (uint32_t i = 0; i < n; i++) {
                /* Task i has id i + 1; its fanins lie in [0, i + 1): the
                 * gate or earlier tasks. Copied first: validation reads a
                 * count, then copies what it covers (the caller's memory
                 * is sealed, but the rule is the same everywhere). */
                struct hbg_recorded_task copy = tasks[i];
                struct task_slot *s = &g->tasks[i];
                memset(s, 0, sizeof(*s));
                int err = validate_task(r, s, &copy.desc, &copy.payload, (uint64_t)i + 1, 0, ret_error);
                if (err < 0) {
                        *ret_task = i;
                        hbg_recorded_graph_free(g);
                        return err;
                }
        }
        *ret = g;
        return 0;
}

int hbg_ring_record_add(struct hbg_ring *r, struct recorded_graph *g) {
        unsigned max = r->engine->cfg.max_recorded_graphs;
        uint32_t k = atomic_load_explicit(&r->n_recorded, memory_order_relaxed);
        if (k >= max) {
                hbg_recorded_graph_free(g);
                return -ENOSPC;
        }
        if (!r->recorded && !(r->recorded = calloc(max, sizeof(*r->recorded)))) {
                hbg_recorded_graph_free(g);
                return -ENOMEM;
        }
        r->recorded[k] = g;
        /* The entry is complete before its number is (§14). */
        atomic_store_explicit(&r->n_recorded, k + 1, memory_order_release);
        return (int)k;
}

int hbg_ring_record(struct hbg_ring *r, const struct hbg_recorded_task *tasks, uint32_t n,
                    uint32_t *ret_task, const char **ret_error) {
        *ret_task = 0;
        *ret_error = NULL;
        if (n != 0 && hbg_ring_record_full(r)) {
                *ret_error = "max_recorded_graphs reached";
                return -ENOSPC;
        }
        struct recorded_graph *g;
        int err = hbg_ring_record_validate(r, tasks, n, &g, ret_task, ret_error);
        if (err < 0)
                return err;
        err = hbg_ring_record_add(r, g);
        if (err == -ENOSPC)
                *ret_error = "max_recorded_graphs reached";
        return err;
}

void recorded_free_ring(struct hbg_ring *r) {
        if (!r->recorded)
                return;
        uint32_t k = atomic_load_explicit(&r->n_recorded, memory_order_relaxed);
        for (uint32_t i = 0; i < k; i++)
                hbg_recorded_graph_free(r->recorded[i]);
        free(r->recorded);
        r->recorded = NULL;
}
