/* SPDX-License-Identifier: MIT */
/*
 * The producer side of a session (RUNTIME_LOGIC.md §2, §8, §10.5, §12.1):
 * the one code that writes task records, graph records, mailbox entries
 * and the cursors into a submission region. libhbgclient, the tests'
 * in-process harness and the benchmarks all produce through it, so they
 * test and measure what users run.
 *
 * It never waits and does no I/O: when the task window, the graph ring or
 * the mailbox is full it says so and the caller waits its own way; after a
 * publish it says whether the doorbell must be rung (need_wakeup), and the
 * caller rings it. One producer per session, used by one thread at a time,
 * except for the external-task side (producer_next_external(),
 * producer_mailbox_room(), producer_complete_external()), which any number
 * of threads may call at once (RUNTIME_LOGIC §10.7).
 */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "shm/geometry.h"
#include "shm/layout.h"

/* A task as the producer writes it, minus its id and fanins. */
struct hbg_task_record {
        uint16_t kernel[HBG_LANES];       /* per lane, HBG_KERNEL_NONE unused */
        uint8_t lane_mask;
        uint8_t flags;                    /* HBG_TASK_* */
        uint16_t block_num;               /* 0 is written as 1 */
        uint8_t n_tensors, n_scalars;
        struct hbg_tensor_arg tensors[HBG_MAX_TENSOR_ARGS];
        uint64_t scalars[HBG_MAX_SCALAR_ARGS];
        uint64_t predicate_offset;
};

struct hbg_producer {
        struct hbg_geometry g;
        struct hbg_sub_header *sh;
        const struct hbg_cpl_header *ch;
        struct hbg_task_desc *descs;
        struct hbg_task_fanins *fanins;
        struct hbg_task_args *args;
        struct hbg_graph_record *records;
        struct hbg_mailbox_entry *mailbox;
        const struct hbg_graph_entry *graph_table;
        const _Atomic uint64_t *ext_ready;
        uint64_t first_id;
        uint64_t next_id;                 /* next task id to write */
        uint64_t published;               /* `submitted` as last stored */
        uint64_t graph_first;             /* first id of the graph being built */
        uint64_t graphs;                  /* graph records written */
        /* The external-task side, shared by the threads that take and
         * post (§10.7): 64-bit counters that never wrap, so a CAS on them
         * cannot suffer ABA. */
        _Atomic uint64_t mailbox_next;    /* mailbox entries reserved */
        _Atomic uint64_t ext_head;        /* external-ready entries taken */
        uint64_t window_limit;            /* WM + D as last read: ids below it fit */
};

/* Bind to a mapped submission region (written as the client may) and a
 * completion region (only read). The regions' headers must match g. */
void producer_init(struct hbg_producer *p, const struct hbg_geometry *g, void *sub,
                       const void *cpl, uint64_t first_id);

/* The completed watermark (acquire). */
static inline uint64_t producer_watermark(const struct hbg_producer *p) {
        return atomic_load_explicit(&p->ch->completed_watermark, memory_order_acquire);
}

/* How many tasks may be written now: id < WM + D (the window invariant).
 * The watermark only grows, so a limit read earlier is still safe; it is
 * read again only once the ids reach it (not once per task). */
static inline uint64_t producer_room(struct hbg_producer *p) {
        if (p->next_id >= p->window_limit)
                p->window_limit = producer_watermark(p) + p->g.task_window;
        return p->window_limit > p->next_id ? p->window_limit - p->next_id : 0;
}

/* Before sleeping until the watermark reaches `want`: tell hbgd (seq_cst
 * store of window_waiting), then read the watermark again (seq_cst):
 * either this read sees it at `want` or hbgd sees the request and writes
 * the completion pipe once it is (RUNTIME_LOGIC §2.1). Returns the
 * watermark read. */
uint64_t producer_arm_watermark_wait(struct hbg_producer *p, uint64_t want);
/* The same for window space (the watermark that makes room for next_id).
 * Returns the room now. */
uint64_t producer_arm_window_wait(struct hbg_producer *p);
/* Withdraw a request of producer_arm_watermark_wait() whose wait ended
 * otherwise: hbgd would write the pipe for it once, for nothing. */
void producer_disarm_watermark_wait(struct hbg_producer *p);
/* Before sleeping until task `id` is complete: tell hbgd (seq_cst store
 * of task_waiting); the caller then looks at the task with
 * flag_done_seq_cst(): either it sees the task complete or hbgd sees the
 * request and writes the completion pipe once the task's stamp is out
 * (RUNTIME_LOGIC §2.1). Withdrawn by producer_disarm_task_wait(). */
void producer_arm_task_wait(struct hbg_producer *p, uint64_t id);
void producer_disarm_task_wait(struct hbg_producer *p);

/* Write the next task with its fanins (each an earlier id); not published
 * yet. The caller made sure of room. Counts are written as given (hbgd
 * refuses those above the limits), arrays copied up to their size. Returns
 * its id. */
uint64_t producer_write(struct hbg_producer *p, const struct hbg_task_record *t,
                            const uint64_t *fanins, unsigned n_fanins);

/* Write a launch record (RUNTIME_LOGIC §14): the next `count` ids are
 * tasks first .. first + count - 1 of recorded graph `graph`; only the
 * first id's descriptor is written. The caller made sure of room for all
 * of them (count <= producer_room()). Returns the first id. */
uint64_t producer_write_launch(struct hbg_producer *p, uint64_t graph, uint64_t first, uint64_t count);

/* Encode a task with its id and fanins into a descriptor, the fanins
 * beyond the inline ones (HBG_MAX_FANINS of room) and the arguments (the
 * window's slot, or a recorded task), as producer_write() does. */
void producer_task_encode(struct hbg_task_desc *desc, uint64_t *fanins_out, struct hbg_task_args *args,
                          uint64_t id, const struct hbg_task_record *t, const uint64_t *fanins, unsigned n_fanins);

/* Publish the tasks written so far (seq_cst, RUNTIME_LOGIC §9.4). True when
 * hbgd's threads sleep and the doorbell must be rung. */
bool producer_publish(struct hbg_producer *p);

/* Tasks written since the last graph record. */
static inline uint64_t producer_pending_graph(const struct hbg_producer *p) {
        return p->next_id - p->graph_first;
}

/* May graph record number `graphs` be written (k < graphs_retired + G)? */
static inline bool producer_graph_room(const struct hbg_producer *p) {
        return p->graphs < atomic_load_explicit(&p->ch->graphs_retired, memory_order_acquire) +
                                   p->g.graph_table_entries;
}

/*
 * Publish the tasks and close them into graph record number p->graphs with
 * the caller's graph_id. Returns the record number, or -EINVAL when no task
 * was written since the last record, -EAGAIN when the graph ring is full.
 * *ret_ring: the doorbell must be rung.
 */
int64_t producer_end_graph(struct hbg_producer *p, uint64_t graph_id, bool *ret_ring);

/* Graph record k's final state: 1 still running; 0 with *ret its entry
 * (status 0 or a negative errno, first failing task, its kernel and hbgd's
 * message, copied once as hbgd wrote them: the caller validates). */
static inline int producer_graph_entry(const struct hbg_producer *p, uint64_t k, struct hbg_graph_entry *ret) {
        return layout_graph_entry_read(&p->graph_table[k & (p->g.graph_table_entries - 1)], k, ret);
}

/* Take the next external task hbgd made ready: true and its id, taken by
 * this caller alone (a CAS on ext_head; several threads may take at
 * once). Entries beyond D ahead of ours are not trusted (at most D tasks
 * are in flight). */
bool producer_next_external(struct hbg_producer *p, uint64_t *ret_id);
/* Are there entries nobody took yet (a hint: another thread may take
 * them first)? */
static inline bool producer_external_pending(const struct hbg_producer *p) {
        return atomic_load_explicit(&p->ch->ext_ready_tail, memory_order_acquire) !=
               atomic_load_explicit(&p->ext_head, memory_order_relaxed);
}

/* May a mailbox entry be reserved now (next < mailbox_consumed + M)? A
 * hint when several threads post. */
static inline bool producer_mailbox_room(const struct hbg_producer *p) {
        return atomic_load_explicit(&p->mailbox_next, memory_order_relaxed) <
               atomic_load_explicit(&p->ch->mailbox_consumed, memory_order_acquire) + p->g.mailbox_entries;
}

/* Post external task id's status (0 or a negative errno) in the mailbox:
 * 0, or -EAGAIN while it is full. Several threads may post at once (each
 * reserves its entry with a CAS). *ret_ring: the doorbell must be rung. */
int producer_complete_external(struct hbg_producer *p, uint64_t id, int32_t status, bool *ret_ring);
