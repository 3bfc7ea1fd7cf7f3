/* SPDX-License-Identifier: MIT */
/*
 * Building graphs: tasks into descriptor slots (RUNTIME_LOGIC.md §8, §10),
 * graph records (§12.1), and reading graph statuses back.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "libclient/client_private.h"

/* ---------------------------------------------------------------- kernels */

/* The built-in kernels of hbgd (daemon/kernels.h): the ids are stable and
 * part of the protocol. The signatures let us refuse a malformed task here,
 * with a message, instead of having the daemon fail it. A kernel_id this
 * table does not know (a newer hbgd) is passed through unchecked. */
enum { IN = HBG_DIR_IN, OUT = HBG_DIR_OUT, INOUT = HBG_DIR_INOUT };

struct kernel_sig {
        const char *name;
        uint16_t id;
        uint8_t n_tensors;
        uint8_t dirs[3];
        uint8_t n_scalars;
        const char *usage;
};

static const struct kernel_sig kernels[] = {
        { "noop", 1, 0, { 0 }, 0, "noop()" },
        { "spin_ns", 2, 0, { 0 }, 1, "spin_ns(u64 ns)" },
        { "fill_f32", 3, 1, { OUT }, 1, "fill_f32(out, f32 v)" },
        { "copy_f32", 4, 2, { IN, OUT }, 0, "copy_f32(in, out)" },
        { "add_f32", 5, 3, { IN, IN, OUT }, 0, "add_f32(in a, in b, out)" },
        { "mul_f32", 6, 3, { IN, IN, OUT }, 0, "mul_f32(in a, in b, out)" },
        { "axpy_f32", 7, 2, { IN, INOUT }, 1, "axpy_f32(in x, inout y, f32 alpha)" },
        { "scale_f32", 8, 1, { INOUT }, 1, "scale_f32(inout x, f32 alpha)" },
        { "reduce_sum_f32", 9, 2, { IN, OUT }, 0, "reduce_sum_f32(in x, out s)" },
        { "gemm_f32", 10, 3, { IN, IN, INOUT }, 3, "gemm_f32(in A, in B, inout C, u64 m, u64 n, u64 k)" },
        { "softmax_rows_f32", 11, 1, { INOUT }, 2, "softmax_rows_f32(inout X, u64 rows, u64 cols)" },
        { "fail", 12, 0, { 0 }, 1, "fail(i64 code)" },
};
#define N_KERNELS (sizeof(kernels) / sizeof(kernels[0]))

static const struct kernel_sig *kernel_by_name(const char *name) {
        for (size_t i = 0; i < N_KERNELS; i++)
                if (strcmp(kernels[i].name, name) == 0)
                        return &kernels[i];
        return NULL;
}

static const struct kernel_sig *kernel_by_id(uint16_t id) {
        for (size_t i = 0; i < N_KERNELS; i++)
                if (kernels[i].id == id)
                        return &kernels[i];
        return NULL;
}

/* ---------------------------------------------------------------- tasks */

/* A task as it goes into its descriptor slot, minus id and fanins. */
struct task_tmpl {
        uint16_t kernel[HBG_LANES];
        uint8_t lane_mask;
        uint8_t flags;
        uint16_t block_num;
        uint8_t n_tensors, n_scalars;
        struct hbg_tensor_arg tensors[HBG_MAX_TENSOR_ARGS];
        uint64_t scalars[HBG_MAX_SCALAR_ARGS];
        uint64_t predicate_offset;
};

/* Wait until the next id fits the window: id < WM + D (§2). */
static int wait_window(hbg_client *c) {
        if (c->next_id < hbgc_watermark(c) + c->g.task_window)
                return 0;
        struct hbgc_wait w;
        hbgc_wait_begin(&w, -1, false);
        while (c->next_id >= hbgc_watermark(c) + c->g.task_window) {
                int err = hbgc_wait_step(c, &w);
                if (err < 0) {
                        if (c->next_id < hbgc_watermark(c) + c->g.task_window)
                                break;
                        return hbgc_fail(c, err, "hbg_graph_add: hbgd went away while the task window was full");
                }
        }
        return 0;
}

/* Write the next task into its slot (not published yet). */
static int write_task(hbg_client *c, const struct task_tmpl *t, const uint64_t *fanins, size_t n_fanins,
                      uint64_t *ret_id) {
        int err = wait_window(c);
        if (err < 0)
                return err;
        uint64_t id = c->next_id;
        uint64_t slot = id & (c->g.task_window - 1);
        struct hbg_task_desc *d = &c->descs[slot];
        struct hbg_task_payload *p = &c->payloads[slot];

        memset(d, 0, sizeof(*d)); /* reserved fields zero */
        d->id = id;
        memcpy(d->kernel, t->kernel, sizeof(d->kernel));
        d->lane_mask = t->lane_mask;
        d->flags = t->flags;
        d->block_num = t->block_num;
        d->n_fanins = (uint8_t)n_fanins;
        d->n_tensors = t->n_tensors;
        d->n_scalars = t->n_scalars;
        d->predicate_offset = t->predicate_offset;
        memset(p, 0, sizeof(*p));
        if (n_fanins)
                memcpy(p->fanins, fanins, n_fanins * sizeof(p->fanins[0]));
        memcpy(p->tensors, t->tensors, t->n_tensors * sizeof(p->tensors[0]));
        memcpy(p->scalars, t->scalars, t->n_scalars * sizeof(p->scalars[0]));
        c->next_id++;
        *ret_id = id;
        return 0;
}

static void maybe_publish(hbg_client *c) {
        if (c->next_id - c->published >= HBGC_PUBLISH_BATCH)
                hbgc_publish(c);
}

/* More than 16 fanins: dummies (no lanes, nothing runs) that each join up
 * to 16 of them, in as many levels as needed. deps[] is rewritten in
 * place; *n ends <= 16. */
static int join_fanins(hbg_client *c, uint64_t *deps, size_t *n) {
        static const struct task_tmpl dummy = { .block_num = 1 };
        while (*n > HBG_MAX_FANINS) {
                size_t out = 0;
                for (size_t i = 0; i < *n; i += HBG_MAX_FANINS) {
                        size_t k = *n - i < HBG_MAX_FANINS ? *n - i : HBG_MAX_FANINS;
                        if (k == 1) {
                                deps[out++] = deps[i];
                                continue;
                        }
                        uint64_t id;
                        int err = write_task(c, &dummy, &deps[i], k, &id);
                        if (err < 0)
                                return err;
                        deps[out++] = id; /* out <= i: deps[i..] already read */
                        maybe_publish(c);
                }
                *n = out;
        }
        return 0;
}

static int cmp_u64(const void *a, const void *b) {
        uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
        return x < y ? -1 : x > y;
}

static size_t sort_unique(uint64_t *v, size_t n) {
        if (n < 2)
                return n;
        qsort(v, n, sizeof(*v), cmp_u64);
        size_t out = 1;
        for (size_t i = 1; i < n; i++)
                if (v[i] != v[out - 1])
                        v[out++] = v[i];
        return out;
}

static bool overlap(const hbg_tensor *a, const hbg_tensor *b) {
        return a->offset < b->offset + b->bytes && b->offset < a->offset + a->bytes;
}

#define ADD_FAIL(code, ...) hbgc_fail(c, code, "hbg_graph_add: " __VA_ARGS__)

/* Check the task and turn it into a template plus its heap accesses. */
static int prepare(hbg_client *c, const hbg_task *t, struct task_tmpl *tm, struct access *acc, size_t *ret_na) {
        bool host_fn = t->host_fn != NULL, inline_ = t->host_inline != 0;
        bool has_kernel = t->kernel != NULL || t->kernel_id != 0;
        size_t na = 0;

        memset(tm, 0, sizeof(*tm));
        if (host_fn && inline_)
                return ADD_FAIL(-EINVAL, "a task cannot be both host_inline and host_fn");
        if ((host_fn || inline_) && has_kernel)
                return ADD_FAIL(-EINVAL, "a host task (host_inline or host_fn) runs no kernel");
        if (!has_kernel && (t->n_args || t->n_scalars))
                return ADD_FAIL(-EINVAL, "tasks without a kernel take no tensor or scalar arguments "
                                         "(host functions declare host_reads/host_writes)");
        if (!host_fn && (t->n_host_reads || t->n_host_writes))
                return ADD_FAIL(-EINVAL, "host_reads/host_writes are only for host_fn tasks");
        if (!has_kernel && t->lanes)
                return ADD_FAIL(-EINVAL, "lanes given for a task without a kernel");
        if (t->lanes & ~HBG_LANE_MASK_ALL)
                return ADD_FAIL(-EINVAL, "lanes 0x%x: only bits 0-2 (AIC, AIV0, AIV1) exist", t->lanes);
        if (t->blocks > HBG_MAX_BLOCKS)
                return ADD_FAIL(-EINVAL, "blocks %u: must be 1..%u (0 means 1)", t->blocks, HBG_MAX_BLOCKS);
        if (t->n_args > HBG_MAX_TASK_TENSORS || t->n_scalars > HBG_MAX_TASK_SCALARS ||
            t->n_deps > HBG_MAX_TASK_DEPS)
                return ADD_FAIL(-EINVAL, "at most %u tensors, %u scalars and %u explicit deps",
                                HBG_MAX_TASK_TENSORS, HBG_MAX_TASK_SCALARS, HBG_MAX_TASK_DEPS);

        /* The kernel. */
        uint16_t kid = 0;
        const struct kernel_sig *sig = NULL;
        if (t->kernel) {
                sig = kernel_by_name(t->kernel);
                if (!sig)
                        return ADD_FAIL(-ENOENT, "unknown kernel '%.64s'", t->kernel);
                kid = sig->id;
        } else if (t->kernel_id) {
                kid = t->kernel_id;
                sig = kernel_by_id(kid);
        }
        if (sig) {
                bool ok = t->n_args == sig->n_tensors && t->n_scalars == sig->n_scalars;
                for (unsigned i = 0; ok && i < sig->n_tensors; i++)
                        ok = t->args[i].dir == (enum hbg_dir)sig->dirs[i];
                if (!ok)
                        return ADD_FAIL(-EINVAL, "kernel %s takes %s", sig->name, sig->usage);
        }

        /* Lanes: 0 = one AIV core; one bit = that core; two or more bits:
         * the same kernel on every active lane (MIX). */
        if (kid) {
                tm->lane_mask = t->lanes ? t->lanes : HBG_LANES_AIV;
                for (unsigned l = 0; l < HBG_LANES; l++)
                        if (tm->lane_mask & (1u << l))
                                tm->kernel[l] = kid;
        }
        tm->flags = (uint8_t)((inline_ ? HBG_TASK_HOST_INLINE : 0) | (host_fn ? HBG_TASK_EXTERNAL : 0));
        tm->block_num = t->blocks ? t->blocks : 1;

        /* Tensor arguments. */
        for (unsigned i = 0; i < t->n_args; i++) {
                const hbg_tensor *x = &t->args[i].tensor;
                enum hbg_dir dir = t->args[i].dir;
                if (dir != HBG_IN && dir != HBG_OUT && dir != HBG_INOUT)
                        return ADD_FAIL(-EINVAL, "tensor argument %u: direction must be HBG_IN, HBG_OUT or HBG_INOUT", i);
                if (!hbgc_in_heap(c, x->offset, x->bytes))
                        return ADD_FAIL(-EINVAL, "tensor argument %u (offset %" PRIu64 ", %" PRIu64
                                        " bytes) is empty or not inside the session heap", i, x->offset, x->bytes);
                if (x->offset % 4 || x->bytes % 4)
                        return ADD_FAIL(-EINVAL, "tensor argument %u: offset and size must be multiples of 4", i);
                if (dir != HBG_IN)
                        for (unsigned j = 0; j < t->n_args; j++)
                                if (j != i && overlap(x, &t->args[j].tensor))
                                        return ADD_FAIL(-EINVAL, "tensor argument %u is an output and overlaps argument %u", i, j);
                tm->tensors[i] = (struct hbg_tensor_arg){
                        .offset = x->offset, .length = x->bytes, .direction = (uint32_t)dir };
                /* INOUT is a write: a writer depends on everything a reader does. */
                acc[na++] = (struct access){ .lo = x->offset, .hi = x->offset + x->bytes, .write = dir != HBG_IN };
        }
        tm->n_tensors = t->n_args;
        tm->n_scalars = t->n_scalars;
        memcpy(tm->scalars, t->scalars, t->n_scalars * sizeof(tm->scalars[0]));

        /* The predicate: one f32, read when the task becomes ready. */
        if (t->has_predicate) {
                const hbg_tensor *x = &t->predicate;
                if (x->bytes < 4 || !hbgc_in_heap(c, x->offset, 4) || x->offset % 4)
                        return ADD_FAIL(-EINVAL, "the predicate must be a 4-byte aligned f32 inside the session heap");
                tm->flags |= HBG_TASK_HAS_PREDICATE;
                tm->predicate_offset = x->offset;
                acc[na++] = (struct access){ .lo = x->offset, .hi = x->offset + 4, .write = false };
        }

        /* What a host function touches. */
        if ((t->n_host_reads && !t->host_reads) || (t->n_host_writes && !t->host_writes))
                return ADD_FAIL(-EINVAL, "n_host_reads/n_host_writes given without their arrays");
        for (unsigned i = 0; i < t->n_host_reads + t->n_host_writes; i++) {
                bool w = i >= t->n_host_reads;
                const hbg_tensor *x = w ? &t->host_writes[i - t->n_host_reads] : &t->host_reads[i];
                if (!hbgc_in_heap(c, x->offset, x->bytes))
                        return ADD_FAIL(-EINVAL, "host_%s[%u] is empty or not inside the session heap",
                                        w ? "writes" : "reads", w ? i - t->n_host_reads : i);
                acc[na++] = (struct access){ .lo = x->offset, .hi = x->offset + x->bytes, .write = w };
        }

        /* Explicit dependencies: earlier tasks of this session. */
        for (unsigned i = 0; i < t->n_deps; i++)
                if (t->deps[i] < c->first_id || t->deps[i] >= c->next_id)
                        return ADD_FAIL(-EINVAL, "deps[%u] = %" PRIu64 " is not an earlier task (next id %" PRIu64 ")",
                                        i, t->deps[i], c->next_id);
        *ret_na = na;
        return 0;
}

HBG_EXPORT int hbg_graph_add(hbg_client *c, const hbg_task *t, uint64_t *ret_id) {
        /* Tensors, predicate, host reads and writes. */
        struct access acc[HBG_MAX_TASK_TENSORS + 1 + 2 * UINT8_MAX];
        struct task_tmpl tm;
        size_t na = 0, n = 0;
        int err = hbgc_usable(c, "hbg_graph_add");
        if (err < 0)
                return err;
        if (!t)
                return ADD_FAIL(-EINVAL, "task is NULL");
        if ((err = prepare(c, t, &tm, acc, &na)) < 0)
                return err;
        if (t->host_fn && hbgc_host_reserve(c) < 0)
                return ADD_FAIL(-ENOMEM, "out of memory");

        /* Explicit and derived dependencies, deduplicated. */
        if (hbgc_scratch_reserve(c, t->n_deps) < 0)
                return ADD_FAIL(-ENOMEM, "out of memory");
        for (n = 0; n < t->n_deps; n++)
                c->scratch[n] = t->deps[n];
        if (hbgc_deps_collect(c, acc, na, &n) < 0)
                return ADD_FAIL(-ENOMEM, "out of memory");
        n = sort_unique(c->scratch, n);
        if ((err = join_fanins(c, c->scratch, &n)) < 0)
                return err;

        uint64_t id;
        if ((err = write_task(c, &tm, c->scratch, n, &id)) < 0)
                return err;
        if (t->host_fn)
                hbgc_host_register(c, id, t->host_fn, t->host_userdata);
        /* Registered before the task can be published. */
        maybe_publish(c);
        if (ret_id)
                *ret_id = id;
        if (hbgc_deps_commit(c, acc, na, id) < 0)
                return ADD_FAIL(-ENOMEM, "task %" PRIu64 " was added, but out of memory recording its tensors: "
                                "later tasks may miss dependencies on it", id);
        return 0;
}

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
        if (r > c->graphs)
                r = c->graphs; /* never more than we submitted */
        while (c->harvested < r) {
                uint64_t k = c->harvested;
                const struct hbg_graph_entry *e = &c->graph_table[k & (c->g.graph_table_entries - 1)];
                if (atomic_load_explicit(&e->seq, memory_order_acquire) != k + 1)
                        break;
                int32_t st = sane_status(e->status);
                if (st != 0 && failures_push(c, (struct graph_failure){
                                       .graph = k, .task = e->first_error_task, .status = st }) < 0)
                        break; /* try again later */
                c->harvested = k + 1;
        }
}

/* 1 running, 0 ok, < 0 failed (*task: its first failing task). */
static int graph_state(hbg_client *c, uint64_t k, uint64_t *task) {
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
        const struct hbg_graph_entry *e = &c->graph_table[k & (c->g.graph_table_entries - 1)];
        if (atomic_load_explicit(&e->seq, memory_order_acquire) == k + 1) {
                *task = e->first_error_task;
                return sane_status(e->status);
        }
        return 1;
}

static int graph_result(hbg_client *c, uint64_t k, int st, uint64_t task, uint64_t *ret_task, const char *fn) {
        if (st < 0) {
                if (ret_task)
                        *ret_task = task;
                hbgc_fail(c, st, "%s: graph %" PRIu64 " failed: %s (first failing task %" PRIu64 ")", fn, k,
                          hbg_strerror(st), task);
        }
        return st;
}

HBG_EXPORT int hbg_graph_submit(hbg_client *c, uint64_t *ret_graph) {
        int err = hbgc_usable(c, "hbg_graph_submit");
        if (err < 0)
                return err;
        if (!ret_graph)
                return hbgc_fail(c, -EINVAL, "hbg_graph_submit: ret_graph is NULL");
        if (c->next_id == c->graph_first)
                return hbgc_fail(c, -EINVAL, "hbg_graph_submit: the graph is empty (no task added since the last submit)");
        hbgc_publish(c);

        /* Record k only while k < graphs_retired + G (§12.1). */
        uint64_t k = c->graphs, G = c->g.graph_table_entries;
        struct hbgc_wait w;
        hbgc_wait_begin(&w, -1, true);
        for (;;) {
                hbgc_harvest(c);
                /* Entry k - G, which record k will overwrite, read back. */
                if (k < atomic_load_explicit(&c->ch->graphs_retired, memory_order_acquire) + G &&
                    c->harvested + G > k)
                        break;
                err = hbgc_wait_step(c, &w);
                if (err < 0)
                        return hbgc_fail(c, err, "hbg_graph_submit: hbgd went away while %" PRIu64
                                         " graphs were in flight", G);
        }

        struct hbg_graph_record *rec = &c->records[k & (G - 1)];
        rec->graph_id = k;
        rec->first_id = c->graph_first;
        rec->last_id = c->next_id - 1;
        rec->reserved = 0;
        c->graphs = k + 1;
        c->graph_first = c->next_id;
        atomic_store_explicit(&c->sh->graphs_submitted, c->graphs, memory_order_seq_cst);
        hbgc_doorbell(c);
        *ret_graph = k;
        return 0;
}

static int graph_check(hbg_client *c, uint64_t graph, const char *fn) {
        if (!c)
                return -EINVAL;
        if (c->in_host)
                return hbgc_fail(c, -EDEADLK, "%s: called from a host function of this client", fn);
        if (graph >= c->graphs)
                return hbgc_fail(c, -EINVAL, "%s: graph %" PRIu64 " has not been submitted", fn, graph);
        return 0;
}

HBG_EXPORT int hbg_graph_status(hbg_client *c, uint64_t graph, uint64_t *ret_task) {
        int err = graph_check(c, graph, "hbg_graph_status");
        if (err < 0)
                return err;
        uint64_t task = 0;
        int st = graph_state(c, graph, &task);
        if (st == 1 && hbgc_check_socket(c) < 0) {
                st = graph_state(c, graph, &task);
                if (st == 1)
                        return hbgc_fail(c, -ECONNRESET, "hbg_graph_status: hbgd went away before graph %" PRIu64
                                         " finished", graph);
        }
        return graph_result(c, graph, st, task, ret_task, "hbg_graph_status");
}

HBG_EXPORT int hbg_graph_wait(hbg_client *c, uint64_t graph, int timeout_ms) {
        int err = graph_check(c, graph, "hbg_graph_wait");
        if (err < 0)
                return err;
        uint64_t task = 0;
        struct hbgc_wait w;
        hbgc_wait_begin(&w, timeout_ms, true);
        for (;;) {
                int st = graph_state(c, graph, &task);
                if (st != 1)
                        return graph_result(c, graph, st, task, NULL, "hbg_graph_wait");
                if (c->dead)
                        err = -ECONNRESET;
                else
                        err = hbgc_wait_step(c, &w);
                if (err < 0) {
                        st = graph_state(c, graph, &task); /* it may have made it */
                        if (st != 1)
                                return graph_result(c, graph, st, task, NULL, "hbg_graph_wait");
                        if (err == -ETIMEDOUT)
                                return hbgc_fail(c, err, "hbg_graph_wait: graph %" PRIu64 " still running after %d ms",
                                                 graph, timeout_ms);
                        return hbgc_fail(c, err, "hbg_graph_wait: hbgd went away before graph %" PRIu64 " finished",
                                         graph);
                }
        }
}

HBG_EXPORT int hbg_tensor_wait_ready(hbg_client *c, hbg_tensor t, int timeout_ms) {
        if (!c)
                return -EINVAL;
        if (c->in_host)
                return hbgc_fail(c, -EDEADLK, "hbg_tensor_wait_ready: called from a host function of this client");
        if (!hbgc_in_heap(c, t.offset, t.bytes))
                return hbgc_fail(c, -EINVAL, "hbg_tensor_wait_ready: the tensor is empty or not inside the session heap");
        struct hbgc_wait w;
        hbgc_wait_begin(&w, timeout_ms, false);
        uint64_t id;
        while (hbgc_deps_pending_writer(c, t.offset, t.offset + t.bytes, &id)) {
                int err = c->dead ? -ECONNRESET : hbgc_wait_step(c, &w);
                if (err < 0) {
                        if (!hbgc_deps_pending_writer(c, t.offset, t.offset + t.bytes, &id))
                                break;
                        return hbgc_fail(c, err, "hbg_tensor_wait_ready: task %" PRIu64 " writing it %s", id,
                                         err == -ETIMEDOUT ? "has not completed in time" : "never completed: hbgd went away");
                }
        }
        return 0;
}
