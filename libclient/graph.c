/* SPDX-License-Identifier: MIT */
/*
 * Building graphs: tasks into descriptor slots (RUNTIME_LOGIC.md §8, §10),
 * graph records (§12.1), and reading graph statuses back.
 */
#include <errno.h>
#include <inttypes.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "libclient/client_private.h"
#include "libclient/deps.h"
#include "libclient/errors.h"
#include "libclient/fanin_join.h"
#include "libclient/graph.h"
#include "libclient/graph_status.h"
#include "libclient/hangup.h"
#include "libclient/host.h"
#include "libclient/kernels.h"
#include "libclient/recording.h"
#include "libclient/session.h"
#include "libclient/wait.h"
#include "libclient/workers.h"
#include "common/clock.h"
#include "common/kernel_sig.h"

/* ---------------------------------------------------------------- tasks */

/* Wait until the next id fits the window: id < WM + D (§2). */
int hbgc_wait_window(hbg_client *c) {
        if (producer_room(&c->prod) > 0)
                return 0;
        /* Spin briefly, then sleep on the completion pipe: hbgd signals it
         * once the watermark makes room (§2.1). */
        HBGC_WAIT(w);
        hbgc_wait_begin(c, &w, -1, true);
        while (producer_room(&c->prod) == 0) {
                if (hbgc_wait_spun(&w) && producer_arm_window_wait(&c->prod) > 0)
                        break;
                int err = hbgc_wait_step(c, &w);
                if (err < 0) {
                        if (producer_room(&c->prod) > 0)
                                break;
                        return hbgc_fail(c, err, "hbg_graph_add: hbgd went away while the task window was full");
                }
        }
        return 0;
}

int hbgc_write_task(hbg_client *c, const struct hbg_task_record *t, const uint64_t *fanins,
                    size_t n_fanins, uint64_t *ret_id) {
        if (c->rec)
                return hbgc_rec_append(c, t, fanins, n_fanins, ret_id);
        /* The window nearly always has room: the wait's call only when not. */
        int err = producer_room(&c->prod) > 0 ? 0 : hbgc_wait_window(c);
        if (err < 0)
                return err;
        *ret_id = producer_write(&c->prod, t, fanins, (unsigned)n_fanins);
        return 0;
}

int hbgc_maybe_publish(hbg_client *c) {
        if (c->prod.next_id - c->prod.published >= HBGC_PUBLISH_BATCH)
                return hbgc_publish(c);
        return 0;
}

/* One joining dummy (no lanes, nothing runs) over fanins[0..n), for
 * hbgc_fanin_join(); published when enough are written. */
static int write_join_dummy(hbg_client *c, const uint64_t *fanins, size_t n, uint64_t *ret_id) {
        static const struct hbg_task_record dummy = { .block_num = 1 };
        int err = hbgc_write_task(c, &dummy, fanins, n, ret_id);
        if (err < 0)
                return err;
        if (hbgc_maybe_publish(c) < 0)
                return hbgc_fail(c, -ECONNRESET, "hbg_graph_add: hbgd went away");
        return 0;
}

int hbgc_join_fanins(hbg_client *c, uint64_t *deps, size_t *n) {
        /* Nearly every task has at most 16: no call then (a task's add is
         * a few hundred instructions, and the join's set-up was 24). */
        if (*n <= HBG_MAX_FANINS)
                return 0;
        return hbgc_fanin_join(c, deps, n, write_join_dummy);
}

static int cmp_u64(const void *a, const void *b) {
        uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
        return x < y ? -1 : x > y;
}

size_t hbgc_sort_unique(uint64_t *v, size_t n) {
        if (n < 2)
                return n;
        /* Callers mostly give dependencies in order: no sort then. */
        size_t ordered = 1;
        while (ordered < n && v[ordered - 1] < v[ordered])
                ordered++;
        if (ordered == n)
                return n;
        qsort(v, n, sizeof(*v), cmp_u64);
        size_t out = 1;
        for (size_t i = 1; i < n; i++)
                if (v[i] != v[out - 1])
                        v[out++] = v[i];
        return out;
}

/* A direction as an error message says it: "an input (HBG_IN)". */
static const char *dir_words(enum hbg_dir d) {
        switch (d) {
        case HBG_IN: return "an input (HBG_IN)";
        case HBG_OUT: return "an output (HBG_OUT)";
        case HBG_INOUT: return "read and written (HBG_INOUT)";
        default: return "no direction";
        }
}

static bool overlap(const hbg_tensor *a, const hbg_tensor *b) {
        return a->offset < b->offset + b->bytes && b->offset < a->offset + a->bytes;
}

#define ADD_FAIL(code, ...) hbgc_fail(c, code, "hbg_graph_add: " __VA_ARGS__)

/* The task's own fields: size, kinds, counts (before anything is read
 * through them). */
static int check_fields(hbg_client *c, const hbg_task *t) {
        bool host_fn = t->host_fn != NULL, inline_ = t->host_inline != 0;
        bool has_kernel = t->kernel != NULL || t->kernel_id != 0;
        if ((t->size && t->size < sizeof(*t)) || t->reserved)
                return ADD_FAIL(-EINVAL, "task size %u (this library's is %zu; HBG_TASK_INIT sets it) "
                                "or reserved field not zero", t->size, sizeof(*t));
        if (t->size > sizeof(*t))
                for (size_t i = sizeof(*t); i < t->size; i++)
                        if (((const unsigned char *)t)[i])
                                return ADD_FAIL(-E2BIG, "the task has fields newer than this libhbgclient %s "
                                                "(byte %zu is set)", HBG_VERSION, i);
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
        return 0;
}

/* The kernel: its signature from the table hbgd sent (kernels.c; by id
 * one load), checked against the task's argument counts and directions.
 * *ret_sig NULL: no kernel, or a kernel_id the table does not know, which
 * is passed through with the generic checks only (hbgd refuses it). */
static int resolve_kernel(hbg_client *c, const hbg_task *t, uint16_t *ret_kid, const struct hbg_kernel_sig **ret_sig) {
        uint16_t kid = 0;
        const struct hbg_kernel_sig *sig = NULL;
        char usage[160];
        if (t->kernel) {
                /* Producers mostly add runs of one kernel: try the last. */
                sig = c->last_kernel;
                if (!sig || strcmp(sig->name, t->kernel) != 0) {
                        sig = hbgc_kernel_by_name(c, t->kernel, "hbg_graph_add");
                        if (!sig)
                                return -ENOENT;
                        c->last_kernel = sig;
                }
                kid = sig->id;
        } else if (t->kernel_id) {
                kid = t->kernel_id;
                sig = kernel_table_by_id(&c->kernels, kid);
        }
        /* The wrong argument named, then the signature to fix it by (the
         * signature's text only for a refusal: this is every task's path). */
        if (sig) {
                bool counts = t->n_args == sig->n_tensors && t->n_scalars == sig->n_scalars;
                unsigned bad = sig->n_tensors;
                for (unsigned i = 0; counts && i < sig->n_tensors && bad == sig->n_tensors; i++)
                        if (t->args[i].dir != (enum hbg_dir)sig->tensors[i].dir)
                                bad = i;
                if (!counts || bad < sig->n_tensors) {
                        kernel_sig_usage(sig, usage, sizeof(usage));
                        if (!counts)
                                return ADD_FAIL(-EINVAL,
                                                "kernel %s takes %u tensor and %u scalar arguments, not %u and %u: %s",
                                                sig->name, sig->n_tensors, sig->n_scalars, t->n_args, t->n_scalars,
                                                usage);
                        return ADD_FAIL(-EINVAL, "kernel %s: argument %u (%s) must be %s, not %s: %s", sig->name, bad,
                                        sig->tensors[bad].name, dir_words((enum hbg_dir)sig->tensors[bad].dir),
                                        dir_words(t->args[bad].dir), usage);
                }
        }
        *ret_kid = kid;
        *ret_sig = sig;
        return 0;
}

/* Tensor arguments into the template and the accesses, then the kernel's
 * rules between them. */
static int prepare_tensors(hbg_client *c, const hbg_task *t, const struct hbg_kernel_sig *sig,
                           struct hbg_task_record *tm, struct access *acc, size_t *na) {
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
                /* Without a signature: no output may overlap anything. */
                if (dir != HBG_IN && !sig)
                        for (unsigned j = 0; j < t->n_args; j++)
                                if (j != i && overlap(x, &t->args[j].tensor))
                                        return ADD_FAIL(-EINVAL, "tensor argument %u is an output and overlaps argument %u", i, j);
                tm->tensors[i] = (struct hbg_tensor_arg){
                        .offset = x->offset, .length = x->bytes, .direction = (uint32_t)dir };
                /* INOUT is a write: a writer depends on everything a reader does. */
                acc[(*na)++] = (struct access){ .lo = x->offset, .hi = x->offset + x->bytes, .write = dir != HBG_IN,
                                                .reads_first = dir == HBG_INOUT };
        }
        /* The kernel's rules between its tensors: in place (an output the
         * very range of an input) where the kernel allows it, never a
         * partial overlap; lengths as its table entry says. */
        if (sig && sig->n_tensors) {
                struct hbg_kernel_tensor kt[HBG_MAX_TENSOR_ARGS];
                for (unsigned i = 0; i < sig->n_tensors; i++)
                        kt[i] = (struct hbg_kernel_tensor){ t->args[i].tensor.offset, t->args[i].tensor.bytes };
                unsigned i, j;
                switch (kernel_sig_check_tensors(sig, kt, &i, &j)) {
                case HBG_TENSORS_OVERLAP:
                        return ADD_FAIL(-EINVAL, "kernel %s: tensor argument %u (%s) overlaps argument %u (%s)%s",
                                        sig->name, i, sig->tensors[i].name, j, sig->tensors[j].name,
                                        sig->in_place ? ": an output may share only the very same range "
                                                        "(offset and size) with an input"
                                                      : ": outputs of this kernel may not overlap other tensors");
                case HBG_TENSORS_LENGTH:
                        return ADD_FAIL(-EINVAL, "kernel %s: tensor argument %u (%s) is %" PRIu64
                                        " bytes, argument %u (%s) %" PRIu64 " bytes: %s",
                                        sig->name, i, sig->tensors[i].name, kt[i].length, j,
                                        sig->tensors[j].name, kt[j].length, sig->length_rule);
                case HBG_TENSORS_OK:
                        break;
                }
        }
        tm->n_tensors = t->n_args;
        return 0;
}

/* What the task reads besides its tensors: its predicate, and a host
 * function's declared reads and writes. */
static int prepare_host_access(hbg_client *c, const hbg_task *t, struct hbg_task_record *tm, struct access *acc,
                               size_t *na) {
        /* The predicate: one f32, read when the task becomes ready. */
        if (t->has_predicate) {
                const hbg_tensor *x = &t->predicate;
                if (x->bytes < 4 || !hbgc_in_heap(c, x->offset, 4) || x->offset % 4)
                        return ADD_FAIL(-EINVAL, "the predicate must be a 4-byte aligned f32 inside the session heap");
                tm->flags |= HBG_TASK_HAS_PREDICATE;
                tm->predicate_offset = x->offset;
                acc[(*na)++] = (struct access){ .lo = x->offset, .hi = x->offset + 4, .write = false };
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
                acc[(*na)++] = (struct access){ .lo = x->offset, .hi = x->offset + x->bytes, .write = w };
        }
        return 0;
}

/* Explicit dependencies: earlier tasks of this session, or of the
 * recording (its task numbers, from 0). */
static int check_deps(hbg_client *c, const hbg_task *t) {
        uint64_t lo = c->rec ? 0 : c->first_id, next = c->rec ? c->rec->n : c->prod.next_id;
        for (unsigned i = 0; i < t->n_deps; i++)
                if (t->deps[i] < lo || t->deps[i] >= next)
                        return ADD_FAIL(-EINVAL, "deps[%u] = %" PRIu64 " is not an earlier task (next %s %" PRIu64 ")",
                                        i, t->deps[i], c->rec ? "recorded task" : "id", next);
        return 0;
}

/* Check the task and turn it into a template plus its heap accesses. */
static int prepare(hbg_client *c, const hbg_task *t, struct hbg_task_record *tm, struct access *acc, size_t *ret_na) {
        /* The arrays are written up to their counts only. */
        memset(tm, 0, offsetof(struct hbg_task_record, tensors));
        tm->predicate_offset = 0;
        uint16_t kid = 0;
        const struct hbg_kernel_sig *sig = NULL;
        int err = check_fields(c, t);
        if (err == 0)
                err = resolve_kernel(c, t, &kid, &sig);
        if (err < 0)
                return err;

        /* Lanes: 0 = one AIV core; one bit = that core; two or more bits:
         * the same kernel on every active lane (MIX). */
        if (kid) {
                unsigned m = t->lanes ? t->lanes : HBG_LANES_AIV;
                tm->lane_mask = (uint8_t)m;
                /* Without branches: this runs for every task. */
                _Static_assert(HBG_LANES == 3, "the lanes below are three");
                tm->kernel[0] = m & 1u ? kid : 0;
                tm->kernel[1] = m & 2u ? kid : 0;
                tm->kernel[2] = m & 4u ? kid : 0;
        }
        tm->flags = (uint8_t)((t->host_inline ? HBG_TASK_HOST_INLINE : 0) | (t->host_fn ? HBG_TASK_EXTERNAL : 0));
        tm->block_num = t->blocks ? t->blocks : 1;

        size_t na = 0;
        if ((err = prepare_tensors(c, t, sig, tm, acc, &na)) < 0)
                return err;
        tm->n_scalars = t->n_scalars;
        memcpy(tm->scalars, t->scalars, t->n_scalars * sizeof(tm->scalars[0]));
        if ((err = prepare_host_access(c, t, tm, acc, &na)) < 0 || (err = check_deps(c, t)) < 0)
                return err;
        *ret_na = na;
        return 0;
}

/* One task of hbg_graph_add() or hbg_graph_add_n(); c is usable. */
static int add_one(hbg_client *c, const hbg_task *t, uint64_t *ret_id) {
        /* Tensors, predicate, host reads and writes. */
        struct access acc[HBG_MAX_TASK_TENSORS + 1 + 2 * UINT8_MAX];
        struct hbg_task_record tm;
        size_t na = 0, n = 0;
        int err;
        if (!t)
                return ADD_FAIL(-EINVAL, "task is NULL");
        if ((err = prepare(c, t, &tm, acc, &na)) < 0)
                return err;
        if (t->host_fn && hbgc_host_reserve(c) < 0)
                return ADD_FAIL(-ENOMEM, "out of memory");

        /* Explicit and derived dependencies, deduplicated. Recording ids
         * are task numbers + 1. */
        uint64_t rec_base = c->rec ? 1 : 0;
        if (hbgc_scratch_reserve(c, t->n_deps + 1u) < 0)
                return ADD_FAIL(-ENOMEM, "out of memory");
        for (n = 0; n < t->n_deps; n++)
                c->scratch.v[n] = t->deps[n] + rec_base;
        if (hbgc_deps_collect(c, acc, na, &n) < 0)
                return ADD_FAIL(-ENOMEM, "out of memory");
        n = hbgc_sort_unique(c->scratch.v, n);
        /* A recorded task without dependencies waits for the gate (id 0),
         * which waits for what came before the launch (§14). */
        if (c->rec && n == 0)
                c->scratch.v[n++] = 0;
        if ((err = hbgc_join_fanins(c, c->scratch.v, &n)) < 0)
                return err;

        uint64_t id;
        if ((err = hbgc_write_task(c, &tm, c->scratch.v, n, &id)) < 0)
                return err;
        if (c->rec) {
                if ((t->host_fn && hbgc_rec_host(c, id, t->host_fn, t->host_userdata) < 0) ||
                    hbgc_rec_accesses(c, acc, na) < 0) {
                        /* Recorded without what launches need to order it. */
                        c->rec->broken = true;
                        return ADD_FAIL(-ENOMEM, "out of memory: the recording cannot be used");
                }
        } else if (t->host_fn) {
                hbgc_host_register(c, id, t->host_fn, t->host_userdata);
        }
        /* Registered before the task can be published. */
        int published = c->rec ? 0 : hbgc_maybe_publish(c);
        if (ret_id)
                *ret_id = id - rec_base;
        if (hbgc_deps_commit(c, acc, na, id) < 0) {
                if (c->rec)
                        c->rec->broken = true;
                return ADD_FAIL(-ENOMEM, "task %" PRIu64 " was added, but out of memory recording its tensors: "
                                "later tasks may miss dependencies on it", id);
        }
        if (published < 0)
                return ADD_FAIL(-ECONNRESET, "task %" PRIu64 " was written, but hbgd went away", id);
        return 0;
}

HBG_EXPORT int hbg_graph_add(hbg_client *c, const hbg_task *t, uint64_t *ret_id) {
        int err = hbgc_usable(c, "hbg_graph_add");
        if (err == 0)
                err = hbgc_check_alive_cheap(c, "hbg_graph_add");
        return err < 0 ? err : add_one(c, t, ret_id);
}

HBG_EXPORT int hbg_graph_add_n(hbg_client *c, const hbg_task *tasks, size_t n, uint64_t *ret_ids) {
        int err = hbgc_usable(c, "hbg_graph_add_n");
        if (err == 0)
                err = hbgc_check_alive_cheap(c, "hbg_graph_add_n");
        if (err < 0)
                return err;
        if (n && !tasks)
                return hbgc_fail(c, -EINVAL, "hbg_graph_add_n: tasks is NULL");
        /* The caller's stride: its header's sizeof(hbg_task). */
        size_t stride = n && tasks[0].size > sizeof(*tasks) ? tasks[0].size : sizeof(*tasks);
        for (size_t i = 0; i < n; i++) {
                uint64_t id;
                const hbg_task *t = (const hbg_task *)((const char *)tasks + i * stride);
                if (i && t->size != tasks[0].size && t->size > sizeof(*tasks))
                        return hbgc_fail(c, -EINVAL, "hbg_graph_add_n: task %zu has size %u, task 0 %u", i,
                                         t->size, tasks[0].size);
                if ((err = add_one(c, t, &id)) < 0) {
                        /* Keep add_one's message; say which task it was. */
                        char why[HBGC_ERROR_MAX];
                        snprintf(why, sizeof(why), "%s", c->last_error);
                        return hbgc_fail(c, err, "hbg_graph_add_n: task %zu of %zu (the %zu before it were added): %s",
                                         i, n, i, why);
                }
                if (ret_ids)
                        ret_ids[i] = id;
        }
        return 0;
}

HBG_EXPORT int64_t hbg_graph_room(hbg_client *c) {
        int err = hbgc_usable(c, "hbg_graph_room");
        if (err < 0)
                return err;
        /* The watermark now, not the limit cached at the last full window:
         * room made since counts. */
        c->prod.window_limit = producer_watermark(&c->prod) + c->prod.g.task_window;
        uint64_t room = producer_room(&c->prod);
        return room > INT64_MAX ? INT64_MAX : (int64_t)room;
}

HBG_EXPORT int hbg_kernel_id(const char *name) {
        const struct hbg_kernel_sig *sig = kernel_sig_by_name(name);
        return sig ? sig->id : -ENOENT;
}

HBG_EXPORT int hbg_graph_submit(hbg_client *c, uint64_t *ret_graph) {
        int err = hbgc_usable(c, "hbg_graph_submit");
        if (err < 0)
                return err;
        if (!ret_graph)
                return hbgc_fail(c, -EINVAL, "hbg_graph_submit: ret_graph is NULL");
        if (c->rec)
                return hbgc_fail(c, -EBUSY, "hbg_graph_submit: a graph is being recorded "
                                 "(hbg_graph_record_end() ends it)");
        if (producer_pending_graph(&c->prod) == 0)
                return hbgc_fail(c, -EINVAL, "hbg_graph_submit: the graph is empty (no task added since the last submit)");
        /* No publish of its own here: producer_end_graph() publishes the
         * tasks with the record and rings once (a wait publishes first). */

        /* Record k only while k < graphs_retired + G (§12.1), and once the
         * entry k - G it will overwrite has been read back. */
        uint64_t k = c->prod.graphs, G = c->g.graph_table_entries;
        HBGC_WAIT(w);
        hbgc_wait_begin(c, &w, -1, true);
        for (;;) {
                hbgc_harvest(c);
                if (producer_graph_room(&c->prod) && c->harvested + G > k)
                        break;
                err = hbgc_wait_step(c, &w);
                if (err < 0)
                        return hbgc_fail(c, err, "hbg_graph_submit: hbgd went away while %" PRIu64
                                         " graphs were in flight", G);
        }
        bool ring;
        int64_t rec = producer_end_graph(&c->prod, k, &ring);
        if (rec < 0) /* cannot happen: room was checked above */
                return hbgc_fail(c, -EPROTO, "hbg_graph_submit: no room for the graph record");
        /* Calls must fail once hbgd is gone, not only the next wait: the
         * hang-up watch says (a load; a poll without io_uring, or once
         * something happened). A doorbell sent proves nothing: hbgd's
         * io_uring keeps its end open a while after hbgd died. The record
         * is written either way: nobody reads it then. */
        if (hbgc_ring(c, ring) < 0 || hbgc_check_alive(c, "hbg_graph_submit") < 0)
                return hbgc_fail(c, -ECONNRESET, "hbg_graph_submit: hbgd went away (graph %" PRId64
                                 " was not taken)", rec);
        *ret_graph = (uint64_t)rec;
        return 0;
}

/* Graph *arg finished (its entry or graphs_retired says so)? */
static bool graph_finished(hbg_client *c, void *arg) {
        struct graph_outcome o;
        return hbgc_graph_state(c, *(const uint64_t *)arg, &o) != 1;
}

/*
 * hbg_graph_wait() of a client with workers: they run the host tasks, this
 * thread publishes and sleeps on graph_wake until the graph retires
 * (RUNTIME_LOGIC §10.7), hbgd goes (the watcher wakes it) or the timeout
 * (the futex's) passes. No polling: a long wait costs no CPU.
 */
static int graph_wait_sleeping(hbg_client *c, uint64_t graph, int timeout_ms) {
        int64_t deadline = timeout_ms < 0 ? -1 : clock_now_ns() + (int64_t)timeout_ms * 1000000;
        int err = hbgc_publish(c);
        struct graph_outcome o;
        for (;;) {
                int st = hbgc_graph_state(c, graph, &o);
                if (st != 1)
                        return hbgc_graph_result(c, graph, &o, "hbg_graph_wait");
                if (err < 0 || c->dead || atomic_load_explicit(&c->pool.gone, memory_order_seq_cst)) {
                        c->dead = true;
                        return hbgc_fail(c, -ECONNRESET, "hbg_graph_wait: hbgd went away before graph %" PRIu64
                                         " finished", graph);
                }
                struct timespec ts, *timeout = NULL;
                if (deadline >= 0) {
                        int64_t left = deadline - clock_now_ns();
                        if (left <= 0)
                                return hbgc_fail(c, -ETIMEDOUT, "hbg_graph_wait: graph %" PRIu64
                                                 " still running after %d ms", graph, timeout_ms);
                        ts = (struct timespec){ .tv_sec = left / 1000000000, .tv_nsec = left % 1000000000 };
                        timeout = &ts;
                }
                hbgc_sleep_on(c, &c->ch->graph_wake, &c->sh->graph_sleepers, graph_finished, &graph, timeout);
        }
}

HBG_EXPORT int hbg_graph_wait(hbg_client *c, uint64_t graph, int timeout_ms) {
        int err = hbgc_graph_check(c, graph, "hbg_graph_wait");
        if (err < 0)
                return err;
        if (c->pool.n)
                return graph_wait_sleeping(c, graph, timeout_ms);
        struct graph_outcome o;
        HBGC_WAIT(w);
        hbgc_wait_begin(c, &w, timeout_ms, true);
        for (;;) {
                int st = hbgc_graph_state(c, graph, &o);
                if (st != 1)
                        return hbgc_graph_result(c, graph, &o, "hbg_graph_wait");
                if (c->dead)
                        err = -ECONNRESET;
                else
                        err = hbgc_wait_step(c, &w);
                if (err < 0) {
                        st = hbgc_graph_state(c, graph, &o); /* it may have made it */
                        if (st != 1)
                                return hbgc_graph_result(c, graph, &o, "hbg_graph_wait");
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
        if (hbgc_in_host(c))
                return hbgc_fail(c, -EDEADLK, "hbg_tensor_wait_ready: called from a host function of this client");
        if (!hbgc_in_heap(c, t.offset, t.bytes))
                return hbgc_fail(c, -EINVAL, "hbg_tensor_wait_ready: the tensor is empty or not inside the session heap");
        HBGC_WAIT(w);
        /* A 1.7 hbgd answers task_waiting under every policy: the wait
         * sleeps until a byte (the poll's cap only a guard). An older one
         * answers it under the eager policies only: a look every 1 ms. */
        hbgc_wait_begin(c, &w, timeout_ms, c->task_wake);
        uint64_t id;
        bool armed = false;
        int err = 0;
        while (hbgc_deps_pending_writer(c, t.offset, t.offset + t.bytes, &id)) {
                /* Past the spin, before each sleep, two requests (§2.1):
                 * hbgd writes the pipe once the writer's own stamp is out
                 * (task_waiting), and once the watermark passes it
                 * (window_waiting). */
                if (hbgc_wait_spun(&w) && !c->dead) {
                        armed = true;
                        producer_arm_task_wait(&c->prod, id);
                        if (producer_arm_watermark_wait(&c->prod, id + 1) > id || flag_done_seq_cst(&c->window, id))
                                continue;
                }
                err = c->dead ? -ECONNRESET : hbgc_wait_step(c, &w);
                if (err < 0) {
                        if (!hbgc_deps_pending_writer(c, t.offset, t.offset + t.bytes, &id))
                                err = 0;
                        break;
                }
        }
        if (armed) {
                producer_disarm_task_wait(&c->prod);
                producer_disarm_watermark_wait(&c->prod);
        }
        if (err < 0)
                return hbgc_fail(c, err, "hbg_tensor_wait_ready: task %" PRIu64 " writing it %s", id,
                                 err == -ETIMEDOUT ? "has not completed in time" : "never completed: hbgd went away");
        hbgc_host_effects(c);
        return 0;
}
