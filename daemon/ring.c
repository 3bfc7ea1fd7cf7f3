/* SPDX-License-Identifier: MIT */
/*
 * One ring's side of the engine: classification (copy once, validate,
 * route), wake lists, external tasks, the async mailbox, graph retirement,
 * failures and the stall detector. RUNTIME_LOGIC.md §10-§12.
 */
#include <errno.h>
#include <inttypes.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <syslog.h>
#include <unistd.h>

#include "daemon/engine_private.h"
#include "daemon/lazy_alloc.h"

/* ------------------------------------------------------------ helpers */

static inline void relax(unsigned *spins) {
        if (++*spins < 64) {
#if defined(__x86_64__) || defined(__i386__)
                __builtin_ia32_pause();
#endif
        } else {
                sched_yield();
        }
}

static struct hbg_completer *completer_of(struct sched_thread *t, struct hbg_ring *r) {
        return &r->per_thread[t->index].completer;
}

/* One byte into the completion pipe. The write end is ours alone and
 * non-blocking, so nothing the client does with its read end can make this
 * block (docs/SECURITY.md); a full pipe (EAGAIN) already tells the client
 * "something happened", and a closed one (EPIPE) means it is gone. Never
 * retried. */
static void ring_signal(struct hbg_ring *r) {
        if (r->completion_fd < 0)
                return;
        char one = 1;
        ssize_t n = write(r->completion_fd, &one, 1);
        (void)n;
}

/* ------------------------------------------------------------ failures */

static void record_failure(struct hbg_ring *r, uint64_t id, int code, const char *why) {
        pthread_mutex_lock(&r->cold_lock);
        int32_t expected = 0;
        if (atomic_compare_exchange_strong(&r->cpl->error_code, &expected, code))
                atomic_store_explicit(&r->cpl->error_task, id, memory_order_release);
        if (r->n_failures < r->max_failures) {
                r->failures[r->n_failures++] = (struct failure){ .id = id, .code = code, .why = why };
        } else {
                /* Full (only if the client never sends graph records for
                 * failing tasks): keep the lowest ids, they decide. */
                uint32_t hi = 0;
                for (uint32_t i = 1; i < r->n_failures; i++)
                        if (r->failures[i].id > r->failures[hi].id)
                                hi = i;
                if (r->failures[hi].id > id)
                        r->failures[hi] = (struct failure){ .id = id, .code = code, .why = why };
        }
        pthread_mutex_unlock(&r->cold_lock);
}

/* The status of a graph [first, last]: its lowest real failure, else its
 * lowest skipped task (-ECANCELED). Entries of the graph are dropped. */
static int graph_status(struct hbg_ring *r, uint64_t first, uint64_t last, uint64_t *ret_task,
                        const char **ret_why) {
        int code = 0;
        uint64_t task = 0;
        bool real = false;

        pthread_mutex_lock(&r->cold_lock);
        uint32_t keep = 0;
        for (uint32_t i = 0; i < r->n_failures; i++) {
                struct failure f = r->failures[i];
                if (f.id < first || f.id > last) {
                        r->failures[keep++] = f;
                        continue;
                }
                bool is_real = f.code != -ECANCELED;
                if (code == 0 || (is_real && !real) || (is_real == real && f.id < task)) {
                        code = f.code;
                        task = f.id;
                        real = is_real;
                        *ret_why = f.why;
                }
        }
        r->n_failures = keep;
        pthread_mutex_unlock(&r->cold_lock);
        *ret_task = task;
        return code;
}

/* ------------------------------------------------------------ graphs */

static bool graph_lock(struct hbg_ring *r) {
        uint32_t expected = 0;
        return atomic_compare_exchange_strong(&r->retire_lock, &expected, 1);
}

static void graph_unlock(struct hbg_ring *r) {
        atomic_store(&r->retire_lock, 0);
}

static void publish_graph(struct hbg_ring *r, int code, uint64_t task, const char *why) {
        struct hbg_graph_entry *e = &r->graph_table[r->graph_next & (r->g.graph_table_entries - 1)];

        /* Rate-limited per session by hbgd's log; ": graph N" becomes the
         * journal field HBG_GRAPH. */
        if (code)
                engine_log(r->engine, LOG_NOTICE,
                           "ring %s: graph %" PRIu64 " (client id %" PRIu64 ") failed: %s at task %" PRIu64
                           " (%s)", r->name, r->graph_next, r->graph_cur.graph_id, strerror(-code), task,
                           why ? why : "stopped");

        e->graph_id = r->graph_cur.graph_id;
        e->status = code;
        e->reserved0 = 0;
        e->first_error_task = code ? task : 0;
        atomic_store_explicit(&e->seq, r->graph_next + 1, memory_order_release);
        if (code)
                atomic_fetch_add_explicit(&r->graphs_failed, 1, memory_order_relaxed);
        r->graph_expected_first = r->graph_cur.last_id + 1;
        r->graph_next++;
        r->graph_have = false;
}

/* Copy the next graph record once and validate the copy. false: none
 * available, or the ring broke. Under the retire lock. */
static bool fetch_graph(struct hbg_ring *r, uint64_t submitted) {
        if (r->graph_have)
                return true;
        if (submitted <= r->graph_next)
                return false;
        if (submitted - r->graph_next > r->g.graph_table_entries) {
                ring_fail(r, -EPROTO, 0, "graphs_submitted is more than the graph ring ahead");
                return false;
        }
        struct hbg_graph_record rec;
        memcpy(&rec, &r->graph_records[r->graph_next & (r->g.graph_table_entries - 1)], sizeof(rec));
        if (rec.reserved != 0 || rec.first_id != r->graph_expected_first || rec.last_id < rec.first_id) {
                ring_fail(r, -EPROTO, rec.first_id,
                          "graph record is not the contiguous continuation of the previous one");
                return false;
        }
        r->graph_cur = rec;
        r->graph_have = true;
        return true;
}

/* Fail every graph record the client has submitted and that is not retired
 * (the ring stopped). Under the retire lock. A stopped ring's records are
 * taken as they are: contiguity no longer matters. */
static bool fail_graphs_locked(struct hbg_ring *r, int code) {
        bool any = false;
        for (uint64_t n = 0; n < r->g.graph_table_entries; n++) {
                if (!r->graph_have) {
                        uint64_t submitted = atomic_load_explicit(&r->sub->graphs_submitted,
                                                                  memory_order_acquire);
                        if (submitted <= r->graph_next ||
                            submitted - r->graph_next > r->g.graph_table_entries)
                                break;
                        memcpy(&r->graph_cur,
                               &r->graph_records[r->graph_next & (r->g.graph_table_entries - 1)],
                               sizeof(r->graph_cur));
                        r->graph_have = true;
                }
                publish_graph(r, code, r->graph_cur.first_id, "session stopped");
                any = true;
        }
        return any;
}

static int stop_code(struct hbg_ring *r) {
        int code = atomic_load(&r->cpl->error_code);
        return code ? code : -ESHUTDOWN;
}

static bool retire_graphs_locked(struct hbg_ring *r) {
        uint64_t wm = hbg_watermark_read(&r->window);
        /* Records up to here have been looked at: ring_graphs_arrived()
         * compares against this, not against what is fetched. */
        uint64_t submitted = atomic_load_explicit(&r->sub->graphs_submitted, memory_order_acquire);
        atomic_store_explicit(&r->graphs_seen, submitted, memory_order_relaxed);
        bool any = false;

        for (uint64_t n = 0; n < r->g.graph_table_entries; n++) {
                if (atomic_load(&r->broken) || !fetch_graph(r, submitted))
                        break;
                if (wm <= r->graph_cur.last_id)
                        break;
                uint64_t task = 0;
                const char *why = NULL;
                int code = graph_status(r, r->graph_cur.first_id, r->graph_cur.last_id, &task, &why);
                publish_graph(r, code, task, why);
                any = true;
        }
        if (atomic_load(&r->broken))
                any |= fail_graphs_locked(r, stop_code(r));
        if (any)
                atomic_store_explicit(&r->cpl->graphs_retired, r->graph_next, memory_order_release);
        return any;
}

/*
 * Retire every graph the watermark has passed (or fail them all once the
 * ring is broken). Combining: whoever holds the lock re-runs while somebody
 * asked meanwhile, so a request is never lost and nobody waits. The flag
 * and the lock are seq_cst: "store request; try lock" against "unlock;
 * load request" is a store->load pair on both sides (§12.1).
 */
void ring_retire_graphs(struct hbg_ring *r) {
        atomic_store(&r->retire_pending, 1);
        while (atomic_load(&r->retire_pending) && graph_lock(r)) {
                atomic_store(&r->retire_pending, 0);
                bool any = retire_graphs_locked(r);
                graph_unlock(r);
                if (any)
                        ring_signal(r);
        }
}

/* Latch the error, mark the ring broken; true if this call broke it. */
static bool ring_break(struct hbg_ring *r, int code, uint64_t task) {
        int32_t zero = 0;
        if (atomic_compare_exchange_strong(&r->cpl->error_code, &zero, code))
                atomic_store_explicit(&r->cpl->error_task, task, memory_order_release);
        bool expected = false;
        return atomic_compare_exchange_strong(&r->broken, &expected, true);
}

void ring_fail(struct hbg_ring *r, int code, uint64_t task, const char *why) {
        if (!ring_break(r, code, task))
                return;
        engine_log(r->engine, LOG_WARNING, "ring %s: stopped: %s (task %" PRIu64 ": %s)", r->name,
                   why, task, strerror(-code));
        /* From inside the retire lock this only leaves a request, which the
         * holder serves when it unlocks. */
        ring_retire_graphs(r);
}

void ring_fail_quietly(struct hbg_ring *r, int code) {
        if (ring_break(r, code, 0))
                ring_retire_graphs(r);
}

/* Called once no scheduler thread can touch the ring any more. */
void ring_stop(struct hbg_ring *r, int code) {
        int32_t zero = 0;
        if (atomic_compare_exchange_strong(&r->cpl->error_code, &zero, code))
                atomic_store_explicit(&r->cpl->error_task, 0, memory_order_release);
        atomic_store(&r->broken, true);
        unsigned spins = 0;
        while (!graph_lock(r))
                relax(&spins);
        bool any = fail_graphs_locked(r, code);
        if (any)
                atomic_store_explicit(&r->cpl->graphs_retired, r->graph_next, memory_order_release);
        graph_unlock(r);
        if (any)
                ring_signal(r);
}

/* ------------------------------------------------------------ validation */

static int validate(struct hbg_ring *r, struct task_slot *s, const struct hbg_task_desc *d,
                    const struct hbg_task_payload *shared, uint64_t id, const char **why) {
        if (d->id != id) {
                *why = "descriptor id does not match its slot's id";
                return -EPROTO;
        }
        if (d->reserved2 || d->reserved0[0] || d->reserved0[1] || d->reserved0[2] || d->reserved1[0] ||
            d->reserved1[1] || d->reserved1[2]) {
                *why = "descriptor reserved field not zero";
                return -EPROTO;
        }
        if (d->flags & ~HBG_TASK_FLAGS_ALL) {
                *why = "unknown task flag";
                return -EINVAL;
        }
        if (d->lane_mask & ~HBG_LANE_MASK_ALL) {
                *why = "lane mask has bits beyond the three lanes";
                return -EINVAL;
        }
        if (d->block_num < 1 || d->block_num > HBG_MAX_BLOCKS) {
                *why = "block_num out of range (1..4096)";
                return -ERANGE;
        }
        if (d->n_fanins > HBG_MAX_FANINS || d->n_tensors > HBG_MAX_TENSOR_ARGS ||
            d->n_scalars > HBG_MAX_SCALAR_ARGS) {
                *why = "too many fanins, tensors or scalars";
                return -E2BIG;
        }
        /* Copy only the payload parts the (validated) counts cover, once;
         * everything below reads the copies. */
        memcpy(s->fanins, shared->fanins, d->n_fanins * sizeof(s->fanins[0]));
        memcpy(s->args.tensors, shared->tensors, d->n_tensors * sizeof(s->args.tensors[0]));
        memcpy(s->args.scalars, shared->scalars, d->n_scalars * sizeof(s->args.scalars[0]));
        for (unsigned i = 0; i < d->n_fanins; i++) {
                uint64_t f = s->fanins[i];
                if (f >= id || f < r->first_id) {
                        *why = "fanin is not an earlier task of this ring";
                        return -EINVAL;
                }
        }
        s->n_fanins = d->n_fanins;

        bool inline_ = d->flags & HBG_TASK_HOST_INLINE, external = d->flags & HBG_TASK_EXTERNAL;
        if (inline_ && external) {
                *why = "a task cannot be both host-inline and external";
                return -EINVAL;
        }
        if (d->flags & HBG_TASK_HAS_PREDICATE) {
                uint64_t end;
                if (d->predicate_offset % 4 != 0 ||
                    __builtin_add_overflow(d->predicate_offset, 4, &end) || end > r->g.heap_size) {
                        *why = "predicate element outside the heap or misaligned";
                        return -ERANGE;
                }
        }
        s->predicate_offset = d->predicate_offset;
        s->flags = d->flags;
        s->lane_mask = d->lane_mask;
        s->lanes = (uint8_t)((d->lane_mask & 1u) + ((d->lane_mask >> 1) & 1u) + ((d->lane_mask >> 2) & 1u));
        s->block_num = d->block_num;

        if (d->lane_mask == 0 || inline_ || external) {
                if (d->lane_mask != 0 || d->kernel[0] || d->kernel[1] || d->kernel[2]) {
                        *why = "dummy, host-inline and external tasks have no lanes or kernels";
                        return -EINVAL;
                }
                if (d->n_tensors || d->n_scalars) {
                        *why = "dummy, host-inline and external tasks take no arguments";
                        return -EINVAL;
                }
                s->kind = inline_ ? KIND_INLINE : external ? KIND_EXTERNAL : KIND_DUMMY;
                s->shape = SHAPE_DUMMY;
                return 0;
        }

        s->kind = KIND_KERNEL;
        s->shape = s->lanes > 1 ? SHAPE_MIX : (d->lane_mask & 1u) ? SHAPE_AIC : SHAPE_AIV;
        s->args.n_tensors = d->n_tensors;
        s->args.n_scalars = d->n_scalars;
        for (unsigned lane = 0; lane < HBG_LANES; lane++) {
                s->kernel[lane] = NULL;
                if (!(d->lane_mask & (1u << lane))) {
                        if (d->kernel[lane] != HBG_KERNEL_NONE) {
                                *why = "kernel given for an inactive lane";
                                return -EINVAL;
                        }
                        continue;
                }
                const struct kernel_info *k = kernel_lookup(d->kernel[lane]);
                if (!k) {
                        *why = "unknown kernel";
                        return -ENOENT;
                }
                int err = kernel_validate(k, &s->args, r->g.heap_size, why);
                if (err < 0)
                        return err;
                s->kernel[lane] = k;
        }
        /* The work this task makes a thread do, bounded per task so that no
         * session can hold a thread for long (§9.5, docs/SECURITY.md). */
        uint32_t parts = (uint32_t)s->block_num * s->lanes;
        uint64_t cost = 0, limit = r->engine->cfg.max_task_cost;
        for (unsigned lane = 0; lane < HBG_LANES; lane++) {
                if (!s->kernel[lane])
                        continue;
                uint64_t c = kernel_cost(s->kernel[lane], &s->args, parts);
                cost = __builtin_add_overflow(cost, c, &cost) ? UINT64_MAX : cost;
                if (limit && cost > limit) {
                        *why = kernel_cost_message(s->kernel[lane]);
                        return -E2BIG;
                }
        }
        s->long_task = cost >= FAIR_SHARE_MIN_COST;
        return 0;
}

/* ------------------------------------------------------------ wake lists */

enum wake_result { WAKE_REGISTERED, WAKE_PRODUCER_DONE };

/*
 * Push consumer slot `s` on the wake list of producer `f` (§10.2). The
 * head carries f's lap, so a list that has passed to a later occupant is
 * never written: the CAS fails and the lap tells us f is done.
 */
static enum wake_result wake_register(struct hbg_ring *r, uint64_t f, struct task_slot *s) {
        struct task_slot *p = ring_slot(r, f);
        uint32_t lap = ring_lap(r, f);
        uint32_t link = (uint32_t)((s->id & r->task_mask) + 1);
        uint64_t h = atomic_load_explicit(&p->wake_head, memory_order_acquire);
        unsigned spins = 0;

        for (;;) {
                uint32_t hl = (uint32_t)(h >> 32);
                if (hl == lap) {
                        s->next_link = (uint32_t)h;
                        /* release: next_link and the consumer's slot
                         * contents reach the drainer (acquire exchange). */
                        if (atomic_compare_exchange_weak_explicit(&p->wake_head, &h,
                                                                  ((uint64_t)lap << 32) | link,
                                                                  memory_order_release,
                                                                  memory_order_acquire))
                                return WAKE_REGISTERED;
                        continue;
                }
                if ((int32_t)(hl - lap) > 0)
                        return WAKE_PRODUCER_DONE;
                /* The previous occupant f - D is complete (we are in flight,
                 * so f - D < WM) but its completer has not drained yet: it
                 * is between its stamp store and its exchange. */
                relax(&spins);
                h = atomic_load_explicit(&p->wake_head, memory_order_acquire);
        }
}

/* Did complete producer f fail (or was it skipped)? The failure table
 * (§12.2) answers for every f >= WM - D. */
static bool fanin_failed(struct hbg_ring *r, uint64_t f) {
        return atomic_load_explicit(&r->fail_tags[f & r->fail_mask], memory_order_acquire) == f + 1;
}

static void make_ready(struct sched_thread *t, struct hbg_ring *r, struct task_slot *s, bool inline_ok);

/* Route `s` to a queue, or onto the wake list of its latest unmet fanin. */
static void evaluate(struct sched_thread *t, struct hbg_ring *r, struct task_slot *s, bool inline_ok) {
        struct hbg_completer *c = completer_of(t, r);

        for (;;) {
                bool any = false;
                uint64_t latest = 0;
                for (unsigned i = 0; i < s->n_fanins; i++) {
                        uint64_t f = s->fanins[i];
                        if ((!any || f > latest) && !hbg_is_completion_flag_set(c, f)) {
                                latest = f;
                                any = true;
                        }
                }
                if (!any) {
                        make_ready(t, r, s, inline_ok);
                        return;
                }
                if (wake_register(r, latest, s) == WAKE_REGISTERED)
                        return;
                /* That producer finished meanwhile: look again. Each round
                 * sees one more fanin complete, so this ends. */
        }
}

/* ------------------------------------------------------------ ready */

static void publish_external(struct hbg_ring *r, struct task_slot *s) {
        atomic_store_explicit(&s->state, SLOT_EXTERNAL, memory_order_release);
        pthread_mutex_lock(&r->cold_lock);
        uint64_t k = r->ext_ready_count++;
        atomic_store_explicit(&r->ext_ready[k & r->task_mask], s->id, memory_order_relaxed);
        atomic_store_explicit(&r->cpl->ext_ready_tail, k + 1, memory_order_release);
        pthread_mutex_unlock(&r->cold_lock);
        ring_signal(r);
}

static bool predicate_false(struct hbg_ring *r, struct task_slot *s) {
        if (!(s->flags & HBG_TASK_HAS_PREDICATE))
                return false;
        /* One 4-byte read of client memory, copied before use. */
        float v;
        memcpy(&v, r->heap + s->predicate_offset, sizeof(v));
        return v == 0.0f;
}

static void retire_later(struct sched_thread *t, struct hbg_ring *r, struct task_slot *s,
                         bool inline_ok) {
        if (inline_ok) {
                int st = atomic_load_explicit(&s->status, memory_order_relaxed);
                stat_add(&t->stats.retired_inline, 1);
                ring_task_done(t, r, s->id, st, st ? "a dependency failed" : NULL);
                return;
        }
        atomic_store_explicit(&s->state, SLOT_QUEUED, memory_order_relaxed);
        if (!mpmc_push(&r->retire, s->id))
                ring_fail(r, -EOVERFLOW, s->id, "retire queue full (engine bug)");
}

static void make_ready(struct sched_thread *t, struct hbg_ring *r, struct task_slot *s, bool inline_ok) {
        for (unsigned i = 0; i < s->n_fanins; i++) {
                if (fanin_failed(r, s->fanins[i])) {
                        /* A dependency failed: skip, do not run. */
                        atomic_store_explicit(&s->status, -ECANCELED, memory_order_relaxed);
                        retire_later(t, r, s, inline_ok);
                        return;
                }
        }
        switch (s->kind) {
        case KIND_DUMMY:
        case KIND_INLINE:
                retire_later(t, r, s, inline_ok);
                return;
        case KIND_EXTERNAL:
                if (predicate_false(r, s))
                        retire_later(t, r, s, inline_ok);
                else
                        publish_external(r, s);
                return;
        default:
                break;
        }
        if (predicate_false(r, s)) {
                retire_later(t, r, s, inline_ok);
                return;
        }
        atomic_store_explicit(&s->state, SLOT_QUEUED, memory_order_relaxed);
        if (!mpmc_push(&r->ready[s->shape], s->id)) {
                ring_fail(r, -EOVERFLOW, s->id, "ready queue full (engine bug)");
                return;
        }
        /* No wake-up here: the batch's caller wakes a peer once if a
         * surplus is left (ring_wake_for_surplus), not once per task. */
}

/* After making tasks ready: if more are queued than this thread will take
 * next, wake a parked peer (one futex wake per batch at most). A thread
 * that owns no cluster takes no ready task itself: any is a surplus. */
static void ring_wake_for_surplus(struct sched_thread *t, struct hbg_ring *r) {
        uint64_t ready = 0;
        for (unsigned i = 0; i < SHAPE_EXEC_COUNT; i++)
                ready += mpmc_size_hint(&r->ready[i]);
        if (ready > (t->clusters > 0 ? 1u : 0u))
                engine_wake_executor(r->engine);
        else if (mpmc_size_hint(&r->retire) > 1)
                engine_wake_one(r->engine);
}

void ring_drain_wake_list(struct sched_thread *t, struct hbg_ring *r, uint64_t id) {
        struct task_slot *p = ring_slot(r, id);
        uint32_t lap = ring_lap(r, id);
        /* Close id's list and open the next occupant's in one step; acquire
         * pairs with the registrants' release (§10.2). */
        uint64_t h = atomic_exchange_explicit(&p->wake_head, (uint64_t)(lap + 1) << 32,
                                              memory_order_acq_rel);
        uint32_t link = (uint32_t)h;

        if (link == WAKE_LINK_EMPTY)
                return;
        for (uint64_t n = 0; link != WAKE_LINK_EMPTY && n < r->g.task_window; n++) {
                struct task_slot *w = &r->slots[link - 1];
                link = w->next_link; /* before evaluate() reuses it */
                evaluate(t, r, w, false);
        }
        ring_wake_for_surplus(t, r);
}

/* ------------------------------------------------------------ completion */

void ring_task_done(struct sched_thread *t, struct hbg_ring *r, uint64_t id, int status,
                    const char *why) {
        struct task_slot *s = ring_slot(r, id);
        struct ring_thread *rt = &r->per_thread[t->index];

        if (status < 0) {
                atomic_store_explicit(&s->status, status, memory_order_relaxed);
                /* Before the stamp (release there, acquire by whoever sees
                 * the task complete): a dependant checks this entry. */
                atomic_store_explicit(&r->fail_tags[id & r->fail_mask], id + 1, memory_order_relaxed);
                record_failure(r, id, status, why ? why : "task failed");
                stat_add(&rt->failed, 1);
                if (status != -ECANCELED) /* skipped ones count as retired */
                        stat_add(&t->stats.failed, 1);
        }
        atomic_store_explicit(&s->state, SLOT_COMPLETING, memory_order_relaxed);
        stat_add(&rt->completed, 1);
        r->engine->completion->complete(t, r, id);
}

void ring_slot_release(struct hbg_ring *r, uint64_t id) {
        atomic_store_explicit(&ring_slot(r, id)->state, SLOT_FREE, memory_order_release);
}

bool ring_retire_ready(struct sched_thread *t, struct hbg_ring *r, unsigned max) {
        uint64_t id;
        unsigned n = 0;

        if (atomic_load_explicit(&r->broken, memory_order_relaxed))
                return false;
        while (n < max && mpmc_pop(&r->retire, &id)) {
                struct task_slot *s = ring_slot(r, id);
                int st = atomic_load_explicit(&s->status, memory_order_relaxed);
                stat_add(&t->stats.retired_inline, 1);
                ring_task_done(t, r, id, st, st ? "a dependency failed" : NULL);
                n++;
        }
        return n > 0;
}

/* ------------------------------------------------------------ classify */

static void classify_one(struct sched_thread *t, struct hbg_ring *r, uint64_t id) {
        struct task_slot *s = ring_slot(r, id);
        struct hbg_task_desc d;
        const char *why = NULL;

        /* Re-initialise; readers of `status` by owner check (§12.2). */
        atomic_store_explicit(&s->owner_tag, SLOT_OWNER_NONE, memory_order_relaxed);
        atomic_store_explicit(&s->status, 0, memory_order_release);
        atomic_store_explicit(&s->done_blocks, 0, memory_order_relaxed);
        s->next_block = 0;
        s->id = id;
        s->n_fanins = 0;
        s->long_task = false;

        /* Copy once from hostile memory; only the copies are used. */
        memcpy(&d, &r->descs[id & r->task_mask], sizeof(d));
        int err = validate(r, s, &d, &r->payloads[id & r->task_mask], id, &why);

        atomic_store_explicit(&s->owner_tag, id + 1, memory_order_release);
        atomic_store_explicit(&s->state, SLOT_WAITING, memory_order_relaxed);
        if (s->long_task && !atomic_load_explicit(&r->has_long_tasks, memory_order_relaxed))
                atomic_store_explicit(&r->has_long_tasks, true, memory_order_relaxed);
        stat_add(&t->stats.classified, 1);
        if (err < 0) {
                s->n_fanins = 0;
                ring_task_done(t, r, id, err, why);
                return;
        }
        if (s->kind == KIND_INLINE && s->n_fanins == 0) {
                /* Host-inline: complete right here, nothing dispatched. */
                stat_add(&t->stats.retired_inline, 1);
                ring_task_done(t, r, id, 0, NULL);
                return;
        }
        evaluate(t, r, s, true);
}

/* How many ids from `claim` may be classified now: submitted, inside the
 * window, and their slots released by the previous lap (§10.1). */
static uint64_t claimable(struct hbg_ring *r, uint64_t claim, uint64_t max) {
        uint64_t submitted = atomic_load_explicit(&r->sub->submitted, memory_order_seq_cst);
        uint64_t wm = hbg_watermark_read(&r->window);
        uint64_t limit = wm + r->g.task_window;

        atomic_store_explicit(&r->submitted_seen, submitted, memory_order_relaxed);
        if (submitted < limit)
                limit = submitted;
        if (limit <= claim)
                return 0;
        uint64_t n = limit - claim < max ? limit - claim : max;
        for (uint64_t i = 0; i < n; i++)
                if (atomic_load_explicit(&ring_slot(r, claim + i)->state, memory_order_acquire) !=
                    SLOT_FREE)
                        return i;
        return n;
}

bool ring_classify(struct sched_thread *t, struct hbg_ring *r) {
        if (atomic_load_explicit(&r->broken, memory_order_relaxed) ||
            atomic_load_explicit(&r->removing, memory_order_relaxed))
                return false;
        uint64_t claim = atomic_load_explicit(&r->claim, memory_order_acquire);
        uint64_t n = claimable(r, claim, r->engine->cfg.classify_batch);
        if (n == 0)
                return false;
        if (!atomic_compare_exchange_strong_explicit(&r->claim, &claim, claim + n,
                                                     memory_order_acq_rel, memory_order_acquire))
                return true; /* another thread took it: there is work */

        /* Publish the classification cursor (monotone max). */
        uint64_t seen = atomic_load_explicit(&r->cpl->classified, memory_order_relaxed);
        while (seen < claim + n &&
               !atomic_compare_exchange_weak_explicit(&r->cpl->classified, &seen, claim + n,
                                                      memory_order_release, memory_order_relaxed))
                ;
        /* More waiting behind this batch: let a parked peer take it. */
        if (claimable(r, claim + n, 1))
                engine_wake_one(r->engine);
        for (uint64_t id = claim; id < claim + n; id++)
                classify_one(t, r, id);
        ring_wake_for_surplus(t, r);
        return true;
}

/* ------------------------------------------------------------ mailbox */

bool ring_poll_mailbox(struct sched_thread *t, struct hbg_ring *r) {
        if (atomic_load_explicit(&r->broken, memory_order_relaxed))
                return false;
        uint64_t m = r->g.mailbox_entries;
        uint64_t head = atomic_load_explicit(&r->mailbox_head, memory_order_relaxed);
        struct hbg_mailbox_entry *e0 = &r->mailbox[head & (m - 1)];
        /* Cheap unlocked peek first (a hint); then one consumer at a time. */
        uint32_t expected = 0;
        if (atomic_load_explicit(&e0->seq, memory_order_relaxed) != head + 1 ||
            !atomic_compare_exchange_strong(&r->mailbox_lock, &expected, 1))
                return false;

        unsigned n = 0;
        for (; n < m; n++) {
                uint64_t k = atomic_load_explicit(&r->mailbox_head, memory_order_relaxed);
                struct hbg_mailbox_entry *e = &r->mailbox[k & (m - 1)];
                if (atomic_load_explicit(&e->seq, memory_order_acquire) != k + 1)
                        break;
                uint64_t id = e->task_id;
                int32_t status = e->status;
                atomic_store_explicit(&r->mailbox_head, k + 1, memory_order_relaxed);
                atomic_store_explicit(&r->cpl->mailbox_consumed, k + 1, memory_order_release);

                struct task_slot *s = ring_slot(r, id);
                if (id < r->first_id || id >= atomic_load(&r->claim)) {
                        ring_fail(r, -EPROTO, id, "mailbox completion for a task never submitted");
                        break;
                }
                if (!slot_owned_by(s, id, memory_order_acquire))
                        continue; /* so old its slot is reused: cannot tell, ignore */
                if (s->kind != KIND_EXTERNAL) {
                        ring_fail(r, -EPROTO, id, "mailbox completion for a task that is not external");
                        break;
                }
                uint32_t st = SLOT_EXTERNAL;
                if (!atomic_compare_exchange_strong(&s->state, &st, SLOT_COMPLETING))
                        continue; /* completed by the stall detector meanwhile */
                if (status > 0 || status < -4095)
                        status = -EINVAL;
                ring_task_done(t, r, id, status, status ? "external task reported failure" : NULL);
        }
        atomic_store(&r->mailbox_lock, 0);
        return n > 0;
}

/* ------------------------------------------------------------ idle & stall */

bool ring_has_external_work(struct hbg_ring *r) {
        if (atomic_load(&r->broken) || atomic_load(&r->removing))
                return false;
        uint64_t claim = atomic_load_explicit(&r->claim, memory_order_acquire);
        if (claimable(r, claim, 1))
                return true;
        if (atomic_load_explicit(&r->sub->graphs_submitted, memory_order_seq_cst) >
            atomic_load_explicit(&r->graphs_seen, memory_order_relaxed))
                return true;
        uint64_t head = atomic_load_explicit(&r->mailbox_head, memory_order_relaxed);
        struct hbg_mailbox_entry *e = &r->mailbox[head & (r->g.mailbox_entries - 1)];
        return atomic_load_explicit(&e->seq, memory_order_seq_cst) == head + 1;
}

bool ring_has_work(struct hbg_ring *r) {
        if (ring_has_external_work(r) || mpmc_maybe_nonempty(&r->retire))
                return true;
        for (unsigned s = 0; s < SHAPE_EXEC_COUNT; s++)
                if (mpmc_maybe_nonempty(&r->ready[s]))
                        return true;
        return false;
}

/* New graph records the retirer has not looked at yet. */
bool ring_graphs_arrived(struct hbg_ring *r) {
        return atomic_load_explicit(&r->sub->graphs_submitted, memory_order_acquire) >
               atomic_load_explicit(&r->graphs_seen, memory_order_relaxed);
}

/* Work the stall detector must watch: tasks or graph records pending. */
bool ring_unfinished(struct hbg_ring *r) {
        if (atomic_load(&r->broken))
                return false;
        uint64_t wm = hbg_watermark_read(&r->window);
        return wm < atomic_load_explicit(&r->submitted_seen, memory_order_relaxed) ||
               atomic_load_explicit(&r->sub->graphs_submitted, memory_order_relaxed) !=
                       atomic_load_explicit(&r->cpl->graphs_retired, memory_order_relaxed) ||
               mpmc_maybe_nonempty(&r->retire);
}

static const char *state_name(uint32_t st) {
        switch (st) {
        case SLOT_FREE: return "free";
        case SLOT_WAITING: return "waiting for a dependency";
        case SLOT_QUEUED: return "queued or running";
        case SLOT_EXTERNAL: return "waiting for the client's mailbox completion";
        case SLOT_COMPLETING: return "completing";
        }
        return "?";
}

void ring_check_stall(struct sched_thread *t, struct hbg_ring *r) {
        uint64_t timeout = r->engine->cfg.stall_timeout_ms;
        uint32_t expected = 0;

        if (timeout == 0 || atomic_load(&r->broken) ||
            !atomic_compare_exchange_strong(&r->stall_lock, &expected, 1))
                return;
        int64_t now = engine_now_ms();
        uint64_t wm = hbg_watermark_read(&r->window);
        uint64_t submitted = atomic_load_explicit(&r->sub->submitted, memory_order_acquire);
        uint64_t gsub = atomic_load_explicit(&r->sub->graphs_submitted, memory_order_acquire);
        bool pending = wm < submitted || gsub != atomic_load(&r->cpl->graphs_retired);

        if (wm != r->stall_wm || !pending) {
                r->stall_wm = wm;
                r->stall_since_ms = now;
        } else if ((uint64_t)(now - r->stall_since_ms) > timeout) {
                uint64_t claim = atomic_load(&r->claim);
                struct task_slot *s = ring_slot(r, wm);
                uint32_t st = atomic_load(&s->state);
                bool owned = slot_owned_by(s, wm, memory_order_seq_cst);
                engine_log(r->engine, LOG_WARNING,
                           "ring %s: no progress for %" PRIu64 " ms: watermark %" PRIu64
                           ", submitted %" PRIu64 ", classified %" PRIu64 ", graphs %" PRIu64
                           " submitted / %" PRIu64 " retired; frontier task %s",
                           r->name, timeout, wm, submitted, claim, gsub,
                           atomic_load(&r->cpl->graphs_retired),
                           wm >= submitted ? "not submitted" : !owned ? "not classified" : state_name(st));
                uint32_t ext = SLOT_EXTERNAL;
                if (wm >= submitted) {
                        /* Nothing can ever move the watermark: stop. */
                        ring_fail(r, -ETIMEDOUT, wm, "graph waits for a task that was never submitted");
                } else if (owned && atomic_compare_exchange_strong(&s->state, &ext, SLOT_COMPLETING)) {
                        ring_task_done(t, r, wm, -ETIMEDOUT,
                                       "external task not completed within the stall timeout");
                }
                /* Otherwise the frontier is queued, running (a long kernel
                 * is legitimate: seed P13) or completing: only logged. */
                r->stall_since_ms = now;
        }
        atomic_store(&r->stall_lock, 0);
}

/* ------------------------------------------------------------ life cycle */

static size_t slots_bytes(const struct hbg_geometry *g) {
        return g->task_window * sizeof(struct task_slot);
}

static size_t fail_tags_bytes(const struct hbg_geometry *g) {
        return 2 * g->task_window * sizeof(_Atomic uint64_t);
}

static size_t failures_bytes(const struct hbg_geometry *g) {
        return g->task_window * sizeof(struct failure);
}

uint64_t ring_memory(unsigned nthreads, const struct hbg_geometry *g) {
        uint64_t queues = (SHAPE_EXEC_COUNT + 1) * g->task_window * sizeof(struct mpmc_cell);
        uint64_t per_thread = sizeof(struct ring_thread) + (uint64_t)hbg_failsafe_capacity(g) * sizeof(uint64_t);
        return sizeof(struct hbg_ring) + slots_bytes(g) + fail_tags_bytes(g) + failures_bytes(g) +
               queues + nthreads * per_thread;
}

/*
 * Every large array is a lazy zero mapping (daemon/lazy_alloc.h) whose
 * all-zero state is the initial one: slots FREE and unowned, wake lists
 * open for the first lap (ring_lap() counts from first_id), queues empty,
 * no failure tags. So creating a ring costs no more than its small header,
 * whatever its window (docs/SECURITY.md).
 */
int ring_new(struct hbg_engine *e, const struct hbg_ring_params *p, struct hbg_ring **ret) {
        const struct hbg_geometry *g = &p->geometry;
        struct hbg_ring *r = aligned_alloc(64, sizeof(*r));
        int err = -ENOMEM;

        if (!r)
                return -ENOMEM;
        memset(r, 0, sizeof(*r));
        r->engine = e;
        snprintf(r->name, sizeof(r->name), "%s", p->name ? p->name : "ring");
        r->g = *g;
        r->released = p->released;
        r->released_userdata = p->released_userdata;
        r->first_id = p->first_id;
        r->task_mask = g->task_window - 1;
        r->completion_fd = p->completion_fd;
        r->sub = p->sub_region;
        r->heap = (uint8_t *)p->sub_region + g->sub_heap_offset;
        r->descs = (struct hbg_task_desc *)((char *)p->sub_region + g->sub_descs_offset);
        r->payloads = (struct hbg_task_payload *)((char *)p->sub_region + g->sub_payloads_offset);
        r->graph_records = (struct hbg_graph_record *)((char *)p->sub_region + g->sub_graphs_offset);
        r->mailbox = (struct hbg_mailbox_entry *)((char *)p->sub_region + g->sub_mailbox_offset);
        r->cpl = p->cpl_region;
        r->graph_table = (struct hbg_graph_entry *)((char *)p->cpl_region + g->cpl_graphs_offset);
        r->ext_ready = (_Atomic uint64_t *)((char *)p->cpl_region + g->cpl_ext_ready_offset);
        hbg_flag_window_init(&r->window, g, p->cpl_region);
        atomic_store(&r->claim, p->first_id);
        r->graph_expected_first = p->first_id;
        r->stall_wm = p->first_id;
        r->stall_since_ms = engine_now_ms();
        pthread_mutex_init(&r->cold_lock, NULL);

        r->slots = lazy_zalloc(slots_bytes(g));
        r->per_thread = aligned_alloc(64, e->nthreads * sizeof(*r->per_thread));
        /* Zeroed before anything can fail: ring_free() destroys every
         * completer, initialised or not (a zeroed one is empty). */
        if (r->per_thread)
                memset(r->per_thread, 0, e->nthreads * sizeof(*r->per_thread));
        r->max_failures = (uint32_t)g->task_window;
        r->failures = lazy_zalloc(failures_bytes(g));
        r->fail_mask = 2 * g->task_window - 1;
        r->fail_tags = lazy_zalloc(fail_tags_bytes(g));
        if (!r->slots || !r->per_thread || !r->failures || !r->fail_tags)
                goto fail;
        for (unsigned i = 0; i < e->nthreads; i++) {
                err = hbg_completer_init(&r->per_thread[i].completer, &r->window,
                                         hbg_failsafe_capacity(g));
                if (err < 0)
                        goto fail;
        }
        err = -ENOMEM;
        for (unsigned i = 0; i < SHAPE_EXEC_COUNT; i++)
                if (mpmc_init(&r->ready[i], g->task_window) < 0)
                        goto fail;
        if (mpmc_init(&r->retire, g->task_window) < 0)
                goto fail;
        *ret = r;
        return 0;
fail:
        ring_free(r);
        return err;
}

void ring_free(struct hbg_ring *r) {
        if (!r)
                return;
        if (r->per_thread)
                for (unsigned i = 0; i < r->engine->nthreads; i++)
                        hbg_completer_destroy(&r->per_thread[i].completer);
        for (unsigned i = 0; i < SHAPE_EXEC_COUNT; i++)
                mpmc_destroy(&r->ready[i]);
        mpmc_destroy(&r->retire);
        pthread_mutex_destroy(&r->cold_lock);
        lazy_free(r->failures, failures_bytes(&r->g));
        lazy_free((void *)r->fail_tags, fail_tags_bytes(&r->g));
        free(r->per_thread);
        lazy_free(r->slots, slots_bytes(&r->g));
        free(r);
}
