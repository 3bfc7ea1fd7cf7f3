/* SPDX-License-Identifier: MIT */
/*
 * Ingest (RUNTIME_LOGIC.md §10.1): claim a batch of submitted ids, copy
 * each descriptor out of client memory once, validate the copy, route the
 * task; and the "is there work" looks at a ring.
 */
#include <errno.h>
#include <string.h>

#include "daemon/engine/engine_private.h"

int ingest_validate(struct hbg_ring *r, struct task_slot *s, const struct hbg_task_desc *d,
                    const struct hbg_task_payload *shared, uint64_t id, uint64_t fanin_lo, const char **why) {
        if (d->id != id) {
                *why = "descriptor id does not match its slot's id";
                return -EPROTO;
        }
        if (d->reserved2 || d->reserved0[0] || d->reserved0[1] || d->reserved0[2]) {
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
        /* Fanins: inline in the (copied) descriptor, the unused inline slots
         * zero, or all in the payload with the inline ones zero (§8). */
        unsigned inline_used = d->n_fanins <= HBG_INLINE_FANINS ? d->n_fanins : 0;
        for (unsigned i = inline_used; i < HBG_INLINE_FANINS; i++)
                if (d->fanins_inline[i]) {
                        *why = "inline fanin slot beyond the task's fanins not zero";
                        return -EPROTO;
                }
        /* Copy only the payload parts the (validated) counts cover, once;
         * everything below reads the copies. */
        if (d->n_fanins <= HBG_INLINE_FANINS)
                memcpy(s->fanins, d->fanins_inline, d->n_fanins * sizeof(s->fanins[0]));
        else
                memcpy(s->fanins, shared->fanins, d->n_fanins * sizeof(s->fanins[0]));
        memcpy(s->args.tensors, shared->tensors, d->n_tensors * sizeof(s->args.tensors[0]));
        memcpy(s->args.scalars, shared->scalars, d->n_scalars * sizeof(s->args.scalars[0]));
        for (unsigned i = 0; i < d->n_fanins; i++) {
                uint64_t f = s->fanins[i];
                if (f >= id || f < fanin_lo) {
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
                /* Each lane runs its kernel for its share of the parts:
                 * block_num of block_num * lanes (§9.1). */
                uint64_t c = kernel_cost(s->kernel[lane], &s->args, parts) / s->lanes;
                cost = __builtin_add_overflow(cost, c, &cost) ? UINT64_MAX : cost;
                if (limit && cost > limit) {
                        *why = kernel_cost_message(s->kernel[lane]);
                        return -E2BIG;
                }
        }
        s->long_task = cost >= FAIR_SHARE_MIN_COST;
        return 0;
}

struct task_slot *ingest_slot_begin(struct hbg_ring *r, uint64_t id) {
        struct task_slot *s = ring_slot(r, id);
        /* Re-initialise; readers of `status` by owner check (§12.2). */
        atomic_store_explicit(&s->owner_tag, SLOT_OWNER_NONE, memory_order_relaxed);
        atomic_store_explicit(&s->status, 0, memory_order_release);
        atomic_store_explicit(&s->done_blocks, 0, memory_order_relaxed);
        s->next_block = 0;
        s->id = id;
        s->n_fanins = 0;
        s->long_task = false;
        return s;
}

void ingest_slot_end(struct sched_thread *t, struct hbg_ring *r, struct task_slot *s, int err,
                     const char *why) {
        uint64_t id = s->id;
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
        ring_route(t, r, s, true);
}

static void classify_one(struct sched_thread *t, struct hbg_ring *r, uint64_t id) {
        struct task_slot *s = ingest_slot_begin(r, id);
        struct hbg_task_desc d;
        const char *why = NULL;

        /* Copy once from hostile memory; only the copies are used. */
        memcpy(&d, &r->descs[id & r->task_mask], sizeof(d));
        int err = ingest_validate(r, s, &d, &r->payloads[id & r->task_mask], id, r->first_id, &why);
        ingest_slot_end(t, r, s, err, why);
}

/* How many ids from `claim` may be classified now: submitted, inside the
 * window, and their slots released by the previous lap (§10.1). all: max
 * of them or none (a launch), decided before looking at any slot. */
static uint64_t claimable(struct hbg_ring *r, uint64_t claim, uint64_t max, bool all) {
        uint64_t submitted = atomic_load_explicit(&r->sub->submitted, memory_order_seq_cst);
        uint64_t wm = hbg_watermark_read(&r->window);
        uint64_t limit = wm + r->g.task_window;

        atomic_store_explicit(&r->submitted_seen, submitted, memory_order_relaxed);
        if (submitted < limit)
                limit = submitted;
        if (limit <= claim || (all && limit - claim < max))
                return 0;
        uint64_t n = limit - claim < max ? limit - claim : max;
        for (uint64_t i = 0; i < n; i++)
                if (atomic_load_explicit(&ring_slot(r, claim + i)->state, memory_order_acquire) !=
                    SLOT_FREE)
                        return i;
        return n;
}

/* Is the descriptor of id a launch record (§14)? A look at client memory
 * only to cut batches: the claimer copies and validates it again. Ids a
 * launch covers keep stale descriptors, whose id is never theirs. */
static bool peek_launch(struct hbg_ring *r, uint64_t id, uint64_t *ret_count) {
        const struct hbg_task_desc *d = &r->descs[id & r->task_mask];
        uint64_t seen_id, count;
        uint8_t flags;
        memcpy(&seen_id, &d->id, sizeof(seen_id));
        memcpy(&flags, &d->flags, sizeof(flags));
        memcpy(&count, &d->launch.count, sizeof(count));
        *ret_count = count;
        return seen_id == id && flags == HBG_DESC_LAUNCH;
}

bool ring_launch_unsubmitted(struct hbg_ring *r, uint64_t claim, uint64_t submitted) {
        uint64_t count;
        return atomic_load_explicit(&r->n_recorded, memory_order_relaxed) > 0 && peek_launch(r, claim, &count) &&
               claim < submitted && count > submitted - claim;
}

/* The ids from `claim` to take as one batch, n of them claimable: a launch
 * record is claimed with all its ids at once, by one thread (*launch), and
 * a batch of plain tasks stops before the next launch record. 0: wait. */
static uint64_t batch_size(struct hbg_ring *r, uint64_t claim, uint64_t n, bool *launch) {
        uint64_t count;
        *launch = peek_launch(r, claim, &count);
        if (*launch) {
                /* A count no launch can have: claim the record alone, and
                 * classify_launch() fails it. */
                if (count == 0 || count > r->g.task_window)
                        return 1;
                return claimable(r, claim, count, true) == count ? count : 0;
        }
        for (uint64_t i = 1; i < n; i++)
                if (peek_launch(r, claim + i, &count))
                        return i;
        return n;
}

/* The ids to claim at `claim` now (at most max; a launch whole), 0 if none.
 * Only a ring with a recorded graph looks for launch records (in others a
 * stray one fails validation as an unknown flag). The client launches only
 * after hbgd's reply to the recording, which followed n_recorded's store;
 * `submitted`, loaded seq_cst in claimable(), was stored after that reply,
 * so this load sees it (§14). */
static uint64_t claim_size(struct hbg_ring *r, uint64_t claim, uint64_t max, bool *launch) {
        *launch = false;
        uint64_t n = claimable(r, claim, max, false);
        if (n == 0 || atomic_load_explicit(&r->n_recorded, memory_order_relaxed) == 0)
                return n;
        return batch_size(r, claim, n, launch);
}

bool ring_classify(struct sched_thread *t, struct hbg_ring *r) {
        if (atomic_load_explicit(&r->broken, memory_order_relaxed) ||
            atomic_load_explicit(&r->removing, memory_order_relaxed))
                return false;
        if (ring_launch_pending(t, r))
                return ring_launch_continue(t, r);
        uint64_t claim = atomic_load_explicit(&r->claim, memory_order_acquire);
        bool launch;
        uint64_t n = claim_size(r, claim, r->engine->cfg.classify_batch, &launch);
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
        if (claimable(r, claim + n, 1, false))
                engine_wake_one(r->engine);
        if (launch)
                classify_launch(t, r, claim, n);
        else
                for (uint64_t id = claim; id < claim + n; id++)
                        classify_one(t, r, id);
        ring_wake_for_surplus(t, r);
        return true;
}

bool ring_has_external_work(struct hbg_ring *r) {
        if (atomic_load(&r->broken) || atomic_load(&r->removing))
                return false;
        uint64_t claim = atomic_load_explicit(&r->claim, memory_order_acquire);
        bool launch;
        /* As ring_classify() would claim: a launch record whose ids are not
         * all claimable yet is no work (hbgd parks; the client's publish
         * of the rest rings the doorbell, §9.4). */
        if (claim_size(r, claim, 1, &launch))
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
