/* SPDX-License-Identifier: MIT */
/* The producer side of a session (shm/producer.h). */
#include "shm/producer.h"

#include <errno.h>
#include <string.h>

void producer_init(struct hbg_producer *p, const struct hbg_geometry *g, void *sub,
                       const void *cpl, uint64_t first_id) {
        *p = (struct hbg_producer){
                .g = *g,
                .sh = sub,
                .ch = cpl,
                .descs = (struct hbg_task_desc *)((char *)sub + g->sub_descs_offset),
                .fanins = (struct hbg_task_fanins *)((char *)sub + g->sub_fanins_offset),
                .args = (struct hbg_task_args *)((char *)sub + g->sub_args_offset),
                .records = (struct hbg_graph_record *)((char *)sub + g->sub_graphs_offset),
                .mailbox = (struct hbg_mailbox_entry *)((char *)sub + g->sub_mailbox_offset),
                .graph_table = (const struct hbg_graph_entry *)((const char *)cpl + g->cpl_graphs_offset),
                .ext_ready = (const _Atomic uint64_t *)((const char *)cpl + g->cpl_ext_ready_offset),
                .first_id = first_id,
                .next_id = first_id,
                .published = first_id,
                .graph_first = first_id,
        };
        /* A fresh session: nothing posted, nothing taken. */
        atomic_init(&p->mailbox_next, 0);
        atomic_init(&p->ext_head, 0);
}

uint64_t producer_arm_watermark_wait(struct hbg_producer *p, uint64_t want) {
        atomic_store_explicit(&p->sh->window_waiting, want, memory_order_seq_cst);
        return atomic_load_explicit(&p->ch->completed_watermark, memory_order_seq_cst);
}

uint64_t producer_arm_window_wait(struct hbg_producer *p) {
        /* Room for next_id needs WM + D > next_id. */
        p->window_limit = producer_arm_watermark_wait(p, p->next_id - p->g.task_window + 1) + p->g.task_window;
        return producer_room(p);
}

void producer_disarm_watermark_wait(struct hbg_producer *p) {
        /* Relaxed: hbgd's CAS either takes the old request (one byte,
         * drained by a later wait) or finds zero. */
        atomic_store_explicit(&p->sh->window_waiting, 0, memory_order_relaxed);
}

void producer_arm_task_wait(struct hbg_producer *p, uint64_t id) {
        atomic_store_explicit(&p->sh->task_waiting, id + 1, memory_order_seq_cst);
}

void producer_disarm_task_wait(struct hbg_producer *p) {
        /* Relaxed, as producer_disarm_watermark_wait(). */
        atomic_store_explicit(&p->sh->task_waiting, 0, memory_order_relaxed);
}

/* producer_task_encode(), inlined into producer_write(): every add of a
 * task takes it. */
static inline __attribute__((always_inline)) void encode(struct hbg_task_desc *desc, uint64_t *fanins_out,
                                                         struct hbg_task_args *args, uint64_t id,
                                                         const struct hbg_task_record *t, const uint64_t *fanins,
                                                         unsigned n_fanins) {
        /* The descriptor is one cache line, written whole (reserved fields
         * zero), with up to 3 fanins inline; of the fanins and arguments
         * only what the counts cover is written: hbgd copies no more than
         * that (RUNTIME_LOGIC §8, §10.1). Field by field in place, each
         * byte once: hbgd reads the line only after the publish. */
        desc->id = id;
        desc->reserved2 = 0;
        desc->kernel[0] = t->kernel[0];
        desc->kernel[1] = t->kernel[1];
        desc->kernel[2] = t->kernel[2];
        desc->lane_mask = t->lane_mask;
        desc->flags = t->flags;
        desc->block_num = t->block_num ? t->block_num : 1;
        /* The counts go in as given (hbgd validates them); the arrays are
         * copied only up to their size. */
        desc->n_fanins = (uint8_t)n_fanins;
        desc->n_tensors = t->n_tensors;
        desc->n_scalars = t->n_scalars;
        memset(desc->reserved0, 0, sizeof(desc->reserved0));
        desc->predicate_offset = t->predicate_offset;
        unsigned nt = t->n_tensors < HBG_MAX_TENSOR_ARGS ? t->n_tensors : HBG_MAX_TENSOR_ARGS;
        unsigned ns = t->n_scalars < HBG_MAX_SCALAR_ARGS ? t->n_scalars : HBG_MAX_SCALAR_ARGS;
        _Static_assert(HBG_INLINE_FANINS == 3, "the inline fanins below are three");
        if (n_fanins <= HBG_INLINE_FANINS) {
                desc->fanins_inline[0] = n_fanins > 0 ? fanins[0] : 0;
                desc->fanins_inline[1] = n_fanins > 1 ? fanins[1] : 0;
                desc->fanins_inline[2] = n_fanins > 2 ? fanins[2] : 0;
        } else {
                unsigned nf = n_fanins < HBG_MAX_FANINS ? n_fanins : HBG_MAX_FANINS;
                memset(desc->fanins_inline, 0, sizeof(desc->fanins_inline));
                for (unsigned i = 0; i < nf; i++)
                        fanins_out[i] = fanins[i];
        }
        for (unsigned i = 0; i < nt; i++)
                args->tensors[i] = t->tensors[i];
        for (unsigned i = 0; i < ns; i++)
                args->scalars[i] = t->scalars[i];
}

void producer_task_encode(struct hbg_task_desc *desc, uint64_t *fanins_out, struct hbg_task_args *args,
                          uint64_t id, const struct hbg_task_record *t, const uint64_t *fanins, unsigned n_fanins) {
        encode(desc, fanins_out, args, id, t, fanins, n_fanins);
}

uint64_t producer_write(struct hbg_producer *p, const struct hbg_task_record *t,
                            const uint64_t *fanins, unsigned n_fanins) {
        uint64_t id = p->next_id;
        uint64_t slot = id & (p->g.task_window - 1);
        encode(&p->descs[slot], p->fanins[slot].ids, &p->args[slot], id, t, fanins, n_fanins);
        p->next_id++;
        return id;
}

uint64_t producer_write_launch(struct hbg_producer *p, uint64_t graph, uint64_t first, uint64_t count) {
        uint64_t id = p->next_id;
        p->descs[id & (p->g.task_window - 1)] = (struct hbg_task_desc){
                .id = id,
                .flags = HBG_DESC_LAUNCH,
                .launch = { .graph = graph, .first = first, .count = count },
        };
        p->next_id += count;
        return id;
}

/* seq_cst store, then seq_cst load of need_wakeup: against the engine's
 * "set need_wakeup; re-read the cursors" (RUNTIME_LOGIC §9.4). */
static bool doorbell_needed(const struct hbg_producer *p) {
        return atomic_load_explicit(&p->ch->need_wakeup, memory_order_seq_cst) != 0;
}

bool producer_publish(struct hbg_producer *p) {
        if (p->published == p->next_id)
                return false;
        p->published = p->next_id;
        atomic_store_explicit(&p->sh->submitted, p->published, memory_order_seq_cst);
        return doorbell_needed(p);
}

int64_t producer_end_graph(struct hbg_producer *p, uint64_t graph_id, bool *ret_ring) {
        *ret_ring = false;
        if (p->next_id == p->graph_first)
                return -EINVAL;
        *ret_ring = producer_publish(p);
        if (!producer_graph_room(p))
                return -EAGAIN;
        uint64_t k = p->graphs;
        struct hbg_graph_record *rec = &p->records[k & (p->g.graph_table_entries - 1)];
        rec->graph_id = graph_id;
        rec->first_id = p->graph_first;
        rec->last_id = p->next_id - 1;
        rec->reserved = 0;
        p->graphs = k + 1;
        p->graph_first = p->next_id;
        atomic_store_explicit(&p->sh->graphs_submitted, p->graphs, memory_order_seq_cst);
        *ret_ring = *ret_ring || doorbell_needed(p);
        return (int64_t)k;
}

/*
 * Several consumers, one producer (hbgd), RUNTIME_LOGIC §10.7. Take entry
 * `head` by moving ext_head from head to head + 1 (CAS, acq_rel): only one
 * caller succeeds per entry. The slot was read before the CAS; it still
 * held entry head's id then unless hbgd had already written entry
 * head + D over it, which needs D later external tasks ready, i.e. entry
 * head's task complete without our post (the stall detector): then the id
 * read is a later ready task's, which the host table's claim keeps from
 * running twice (libclient/host.c).
 */
bool producer_next_external(struct hbg_producer *p, uint64_t *ret_id) {
        uint64_t head = atomic_load_explicit(&p->ext_head, memory_order_acquire);
        for (;;) {
                /* Acquire: pairs with hbgd's release of the tail, so the
                 * slots below it are written. */
                uint64_t tail = atomic_load_explicit(&p->ch->ext_ready_tail, memory_order_acquire);
                /* hbgd never has more than D external tasks ready: a
                 * larger gap is not ours to trust. */
                if (tail - head > p->g.task_window)
                        tail = head + p->g.task_window;
                if (head >= tail)
                        return false;
                uint64_t id = atomic_load_explicit(&p->ext_ready[head & (p->g.task_window - 1)],
                                                   memory_order_relaxed);
                /* On failure head is reloaded: another taker moved it. */
                if (atomic_compare_exchange_weak_explicit(&p->ext_head, &head, head + 1, memory_order_acq_rel,
                                                          memory_order_acquire)) {
                        *ret_id = id;
                        return true;
                }
        }
}

/*
 * Several posters (RUNTIME_LOGIC §10.7): reserve entry k with a CAS on the
 * private mailbox_next while k < mailbox_consumed + M (entry k - M, in
 * the same slot, was consumed: acquire pairs with hbgd's release of
 * mailbox_consumed, after its reads of that entry), write it, then publish
 * it with seq = k + 1. hbgd consumes strictly in order by seq, so an entry
 * published before an earlier one waits for it; the earlier one's poster
 * is between its CAS and its seq store, which does not block.
 */
int producer_complete_external(struct hbg_producer *p, uint64_t id, int32_t status, bool *ret_ring) {
        *ret_ring = false;
        uint64_t k = atomic_load_explicit(&p->mailbox_next, memory_order_relaxed);
        do {
                if (k >= atomic_load_explicit(&p->ch->mailbox_consumed, memory_order_acquire) +
                                 p->g.mailbox_entries)
                        return -EAGAIN;
        } while (!atomic_compare_exchange_weak_explicit(&p->mailbox_next, &k, k + 1, memory_order_relaxed,
                                                        memory_order_relaxed));
        struct hbg_mailbox_entry *e = &p->mailbox[k & (p->g.mailbox_entries - 1)];
        e->task_id = id;
        e->status = status;
        e->reserved0 = 0;
        e->reserved1 = 0;
        /* seq_cst (a release too: the fields before it), then need_wakeup:
         * the pair against the engine's "set need_wakeup; look at the
         * mailbox head's seq" (§9.4). Each poster makes its own pair: an
         * entry hbgd's last look missed is published after that look, so
         * its poster sees need_wakeup. */
        atomic_store_explicit(&e->seq, k + 1, memory_order_seq_cst);
        *ret_ring = doorbell_needed(p);
        return 0;
}
