/* SPDX-License-Identifier: MIT */
/* A task slot (RUNTIME_LOGIC.md §10.1): the daemon-private state of one
 * task of a ring, its shape, kind and life states. Written by
 * classify.c and validate.c, read along the completion path. */
#pragma once

#include <stdalign.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "daemon/engine/kernels.h"
#include "shm/layout.h"

/* Shapes (RUNTIME_LOGIC.md §9.1). */
enum task_shape {
        SHAPE_AIC = 0,
        SHAPE_AIV = 1,
        SHAPE_MIX = 2,
        SHAPE_EXEC_COUNT = 3, /* shapes that run on cores */
        SHAPE_DUMMY = 3,
};

enum task_kind {
        KIND_KERNEL = 0,   /* runs on cores */
        KIND_DUMMY = 1,    /* orders only */
        KIND_INLINE = 2,   /* host-inline: completes at classification */
        KIND_EXTERNAL = 3, /* completed through the async mailbox */
};

/* Wake-list head: the producer's lap in the high 32 bits, the link (slot
 * index + 1 of the first waiter, 0 = empty) in the low 32 (§10.2). */
#define WAKE_LINK_EMPTY 0u

/* Daemon-private state of one task slot, index id & (D-1) (§10.1). */
struct task_slot {
        /* Written by several threads: wake list, block claims, status. */
        alignas(64) _Atomic uint64_t wake_head;
        _Atomic uint64_t owner_tag;       /* id + 1 of the task owning the slot, 0 none
                                             (so that zeroed memory means "unowned") */
        _Atomic uint32_t done_blocks;
        _Atomic int32_t status;           /* 0, or the task's first error */
        _Atomic uint32_t state;           /* enum slot_state */
        uint32_t next_link;               /* next waiter in a wake or batch list */
        uint32_t next_block;              /* claim cursor, owned by the queue entry holder */
        /* Dependants classified in the same batch as this task (§10.1):
         * their links, written with plain stores before this task is
         * routed, read by its completer. */
        uint32_t batch_head;

        /* The validated copy, written once at classification. */
        uint64_t id;
        uint8_t kind;
        uint8_t shape;
        uint8_t lane_mask;
        uint8_t lanes;                    /* parts a block runs: popcount(lane_mask), 1 for a
                                             kernel that does not split (§9.1) */
        uint8_t flags;
        uint8_t n_fanins;
        uint16_t block_num;               /* blocks to run and count: the descriptor's, 1 for
                                             a kernel that does not split */
        uint64_t predicate_offset;
        /* Validation's verdict, from classify_begin() to classify_run(). */
        int32_t classify_err;
        /* The kernel a failure of this task names (§12.2): set by
         * validation (the lane it refused, else the first active lane's,
         * HBG_KERNEL_NONE without one), replaced by the kernel whose error
         * became the task's status (dispatch, by the thread whose CAS on
         * `status` won, before its acq_rel add to done_blocks: the last
         * finisher reads it after its own). Read by complete_task(). */
        uint16_t report_kernel;
        /* The kernel_at() index of the first active lane's kernel, under
         * which the task's times count (ktime.h); set by validation of a
         * task that passes (a refused one is never timed). */
        uint16_t ktime_kernel;
        /* With report_kernel, by the same writer: the kernel's own reason
         * when it was stopped (its time budget, §10.6); NULL: strerror of
         * the status. */
        const char *report_why;
        /* Kernel tasks' times (ktime.h), in ticks: made ready (by the
         * thread that routed it, before the queue, deque or continuation
         * hands it on; the end of the completed run whose completion
         * routed it, sched.h) and first block started (by the thread
         * that claimed block 0, before the rest of its blocks are queued and before
         * its acq_rel add to done_blocks). Read by the last finisher,
         * after its own add. The ready stamp takes classify_why's place:
         * a task is made ready only after classify_run() is done with
         * it (keeping the slot 512 bytes: ring_slot() a shift). A host
         * task has no ticks: while a trace is on, the time it was handed
         * to the client (CLOCK_MONOTONIC ns; 0: not stamped) takes that
         * place, written before it is published (release) and read by the
         * mailbox's consumer (trace_host()) after taking its answer. */
        union {
                const char *classify_why;
                uint64_t ready_tick;
                int64_t host_ready_ns;
        };
        uint64_t start_tick;
        const struct kernel_info *kernel[HBG_LANES];
        uint64_t fanins[HBG_MAX_FANINS];
        struct hbg_kernel_args args;
};

/* Everything a task's life touches per step (wake list, ownership, block
 * count, status, state, links, id, kind, shape, counts) shares the slot's
 * first cache line; the kernels, fanins and arguments follow. */
_Static_assert(offsetof(struct task_slot, block_num) + sizeof(uint16_t) <= 64,
               "a task slot's hot fields must fit in its first cache line");
/* ring_slot() multiplies by the size on every step of a task's life: a
 * power of two makes it a shift. */
_Static_assert((sizeof(struct task_slot) & (sizeof(struct task_slot) - 1)) == 0,
               "a task slot's size must be a power of two");

enum slot_state {
        SLOT_FREE = 0,       /* previous occupant finished with the slot */
        SLOT_WAITING = 1,    /* classified, on a wake list or being evaluated */
        SLOT_QUEUED = 2,     /* in a ready or retire queue, or running */
        SLOT_EXTERNAL = 3,   /* handed to the client, waiting for the mailbox */
        SLOT_COMPLETING = 4, /* completed, stamp not yet published/drained */
};

/* owner_tag while a slot is being re-initialised, and before first use. */
#define SLOT_OWNER_NONE UINT64_C(0)

static inline bool slot_owned_by(struct task_slot *s, uint64_t id, memory_order order) {
        return atomic_load_explicit(&s->owner_tag, order) == id + 1;
}
