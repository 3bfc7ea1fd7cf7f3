/* SPDX-License-Identifier: MIT */
/*
 * Launch records (RUNTIME_LOGIC.md §14): the record checked once, then the
 * recorded graph's tasks classified from their validated form, a batch per
 * visit of the ring, without reading the client's memory per task.
 */
#include "daemon/engine/launch.h"

#include <errno.h>
#include <string.h>

#include "daemon/engine/classify.h"
#include "daemon/engine/engine_state.h"
#include "daemon/engine/ready.h"
#include "daemon/engine/recorded.h"
#include "daemon/engine/ring.h"

/* The launch record, copied once: 0 and the recorded graph, or an error. */
static int launch_check(struct hbg_ring *r, const struct hbg_task_desc *d, uint64_t id, uint64_t n,
                        const struct recorded_graph **ret, const char **why) {
        static const struct hbg_task_desc zero;
        struct hbg_task_desc rest = *d;
        rest.id = 0;
        rest.flags = 0;
        rest.launch.graph = rest.launch.first = rest.launch.count = 0;
        if (d->id != id || d->flags != HBG_DESC_LAUNCH) {
                *why = "launch record changed while it was read";
                return -EPROTO;
        }
        if (memcmp(&rest, &zero, sizeof(zero)) != 0) {
                *why = "launch record: fields other than graph, first and count not zero";
                return -EPROTO;
        }
        /* Acquire: the recorded graph's entry was written before. */
        uint32_t recorded = atomic_load_explicit(&r->recorded.n, memory_order_acquire);
        if (d->launch.graph >= recorded) {
                *why = "launch record names a graph this session did not record";
                return -EINVAL;
        }
        const struct recorded_graph *g = r->recorded.graphs[d->launch.graph];
        uint64_t end;
        if (d->launch.count != n || __builtin_add_overflow(d->launch.first, n, &end) || end > g->n) {
                *why = "launch record's tasks are not inside the recorded graph";
                return -EINVAL;
        }
        /* The gate, id - 1 - first, must be an id of this ring. */
        if (id - r->first_id < d->launch.first + 1) {
                *why = "launch record's gate would precede the ring's first id";
                return -EINVAL;
        }
        *ret = g;
        return 0;
}

/* Recorded task src of g, validated when recorded, into slot s with its
 * fanins made absolute: only the parts its counts cover, as validation
 * copies them (§10.1). */
static void copy_recorded(struct task_slot *s, const struct recorded_graph *g, const struct recorded_task *src,
                          uint64_t gate) {
        s->kind = src->kind;
        s->shape = src->shape;
        s->lane_mask = src->lane_mask;
        s->lanes = src->lanes;
        s->flags = src->flags;
        s->block_num = src->block_num;
        s->predicate_offset = src->predicate_offset;
        memcpy(s->kernel, src->kernel, sizeof(s->kernel));
        s->report_kernel = src->report_kernel;
        s->ktime_kernel = src->ktime_kernel;
        s->n_fanins = src->n_fanins;
        s->args.n_tensors = src->n_tensors;
        s->args.n_scalars = src->n_scalars;
        /* A graph whose tasks have no words has no word array at all. */
        if (!(src->n_fanins | src->n_tensors | src->n_scalars))
                return;
        const uint64_t *w = g->words + src->words;
        for (unsigned i = 0; i < src->n_fanins; i++)
                s->fanins[i] = gate + w[i];
        w += src->n_fanins;
        /* Empty lists, as validation skips them (many tasks have none). */
        if (src->n_tensors) {
                memcpy(s->args.tensors, w, src->n_tensors * sizeof(s->args.tensors[0]));
                w += src->n_tensors * RECORDED_TENSOR_WORDS;
        }
        if (src->n_scalars)
                memcpy(s->args.scalars, w, src->n_scalars * sizeof(s->args.scalars[0]));
}

bool launch_pending(const struct sched_thread *t, const struct hbg_ring *r) {
        const struct launch_expansion *x = &r->per_thread[t->index].launch;
        return x->next < x->end;
}

/* The next classify_batch ids of this thread's launch: a launch of up to D
 * tasks (or a bad record failing them all) holds the thread no longer per
 * visit than a batch of plain tasks does, and other rings get their turn
 * in between (§9.5, §14). */
bool launch_continue(struct sched_thread *t, struct hbg_ring *r) {
        struct launch_expansion *x = &r->per_thread[t->index].launch;
        if (x->next >= x->end)
                return false;
        uint64_t stop = x->end - x->next > r->engine->cfg.classify_batch ? x->next + r->engine->cfg.classify_batch
                                                                          : x->end;
        struct classify_run_set set = { .n_linked = 0 };
        for (uint64_t id = x->next; id < stop; id++) {
                struct task_slot *s = classify_begin(r, id);
                if (x->err == 0)
                        copy_recorded(s, x->g, &x->g->tasks[x->first + (id - x->start)], x->gate);
                s->classify_err = x->err;
                s->classify_why = x->why;
                classify_link(r, s, x->next, &set);
        }
        classify_run(t, r, x->next, stop - x->next, &set);
        x->next = stop;
        ready_wake_for_surplus(t, r);
        return true;
}

void launch_classify(struct sched_thread *t, struct hbg_ring *r, uint64_t id, uint64_t n) {
        struct hbg_task_desc d;
        const struct recorded_graph *g = NULL;
        const char *why = NULL;

        /* Copy once from hostile memory; only the copy is used. */
        memcpy(&d, &r->descs[id & r->task_mask], sizeof(d));
        int err = launch_check(r, &d, id, n, &g, &why);
        /* Relative fanin f of task first + j is id - 1 - first + f: below
         * its own id, id + j, since f <= first + j (checked at recording). */
        r->per_thread[t->index].launch = (struct launch_expansion){
                .next = id, .end = id + n, .start = id, .gate = id - 1 - d.launch.first,
                .first = d.launch.first, .g = g, .err = err, .why = why,
        };
        launch_continue(t, r);
}
