/* SPDX-License-Identifier: MIT */
/* ring.c: a ring (one session's shared memory as the engine sees it), its
 * per-thread state, its memory and life cycle. */
#pragma once

#include <pthread.h>
#include <stdalign.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "daemon/engine/cancel.h"
#include "daemon/engine/deque.h"
#include "daemon/engine/engine.h"
#include "daemon/engine/engine_stats.h"
#include "daemon/engine/failures.h"
#include "daemon/engine/histogram.h"
#include "daemon/engine/launch.h"
#include "daemon/engine/lazy_alloc.h"
#include "daemon/engine/live_graphs.h"
#include "daemon/engine/mailbox.h"
#include "daemon/engine/mpmc.h"
#include "daemon/engine/recorded.h"
#include "daemon/engine/retire.h"
#include "daemon/engine/sched.h"
#include "daemon/engine/signal.h"
#include "daemon/engine/slot.h"
#include "daemon/engine/stall.h"
#include "shm/completion.h"
#include "shm/layout.h"

struct hbg_engine;

/* One scheduler thread's private state for one ring. */
struct ring_thread {
        struct hbg_completer completer;
        struct launch_expansion launch;
        /* Continuation (§10.4): a kernel task this thread made ready and
         * runs next itself instead of queueing it. Thread-private; set
         * only during the thread's visit of the ring, and queued by the
         * visit's end if it is still here (ready_continuation_flush). */
        uint64_t continuation;
        bool has_continuation;
        /* The surplus (queued .. held_ran): dispatch.c changes it only
         * through queues.h's queues_surplus_*(); ready.c, which owns it,
         * also sets and reads queued and queued_work directly.
         * A task went to a queue or the deque (not the continuation)
         * since the thread's last surplus check that settled it: only
         * then is there a surplus to wake a peer for
         * (ready_wake_for_surplus()). */
        bool queued;
        /* The estimated work of the tasks it queued since the surplus
         * was last released (queues.h, queues_surplus_release()), in
         * ticks: each task's kernel's run_avg (sched.h). */
        uint64_t queued_work;
        /* A surplus a check held back as too little work for a peer's
         * wake-up, and the ticks this thread has run in r since the
         * first such check, the run that made it included (dispatch.c,
         * held_surplus_ran()). */
        bool surplus_held;
        uint64_t held_ran;
        /* Further kernel tasks it made ready during the visit: taken by
         * it newest first, stolen by idle peers oldest first; emptied
         * into the ready queues by the visit's end, as the continuation. */
        struct ws_deque deque;
        alignas(64) _Atomic uint64_t completed;
        _Atomic uint64_t failed;
        /* Blocks this thread ran here: counted per ring rather than per
         * thread (one store either way, on a line the thread writes at
         * completion), the thread's total adds its rings up (ring_counters). */
        _Atomic uint64_t dispatched;
        /* To a power of two: per_thread[t->index], on every step of a
         * task, is then one shift (the size changed with the completion
         * policies' fields leaving; 960 bytes cost instructions). */
        alignas(64) char pad[64];
};
_Static_assert((sizeof(struct ring_thread) & (sizeof(struct ring_thread) - 1)) == 0,
               "struct ring_thread: keep its size a power of two (pad)");

/* A ring. The hot fields are its own; each module's state is a member of
 * the type its header defines (retire.h, mailbox.h, failures.h,
 * signal.h, recorded.h, cancel.h, live_graphs.h, stall.h), placed here
 * for the cache lines. */
struct hbg_ring {
        struct hbg_engine *engine;
        char name[64];
        struct hbg_log_fields log_fields; /* hbg_ring_params.log_fields */
        unsigned index;                   /* slot in engine->rings */
        uint64_t serial;                  /* 1, 2, ... in the order added: never reused */
        void (*released)(void *userdata); /* hbg_ring_params.released */
        void *released_userdata;
        struct hbg_ring *next_removed;    /* engine->removed list (rings_lock) */
        unsigned holds;                   /* ring_hold()s not let go (rings_lock) */
        unsigned share;                   /* its slot in engine->shares (§9.5); fixed */
        int removal_reason;
        /* Scheduler threads visit it (ring_table_enter()): set at its add,
         * or by engine_ring_serve() for one added with serve_later
         * (§9.3); never cleared. */
        _Atomic bool served;

        /* Private geometry: never re-read from shared memory. */
        struct hbg_geometry g;
        uint64_t first_id;
        uint64_t task_mask;
        uint8_t *heap;
        struct hbg_sub_header *sub;
        struct hbg_task_desc *descs;
        struct hbg_task_fanins *fanins;
        struct hbg_task_args *args;
        struct hbg_graph_record *graph_records;
        struct hbg_mailbox_entry *mailbox;
        struct hbg_cpl_header *cpl;
        struct hbg_graph_entry *graph_table;
        _Atomic uint64_t *ext_ready;
        struct hbg_flag_window window;
        int completion_fd;
        int sub_fd;                       /* hbg_ring_params.sub_fd */

        /* The lazy arrays below, one mapping (lazy_alloc.h); warm: a
         * spare, faulted in already (ring_spares.h). */
        struct lazy_arena arrays;
        bool arrays_warm;
        struct task_slot *slots;
        struct ring_thread *per_thread;   /* one per scheduler thread */
        void *policy_state;               /* the completion policy's (ring_init) */
        struct mpmc ready[SHAPE_EXEC_COUNT];
        struct mpmc retire;               /* ready kernel-less tasks */

        /* Classification cursor: ids below it are claimed. */
        alignas(64) _Atomic uint64_t claim;

        /* Graph retirement (retire.h), starting a cache line. */
        alignas(64) struct ring_retire retirer;

        /* Mailbox consumer (mailbox.h), starting a cache line. */
        alignas(64) struct ring_mailbox_reader mailbox_read;

        /* Cold paths. */
        pthread_mutex_t cold_lock;        /* failures, ext-ready producer, stop reason */
        struct ring_failures fail;        /* failure list, tags (failures.h) */
        /* External tasks published (ready.c, publish_external()): the
         * ext-ready producer's count, under cold_lock. */
        uint64_t ext_ready_count;
        struct ring_ext ext;              /* skipped wakes, stalled (signal.h) */
        struct ring_recorded recorded;    /* recorded graphs (recorded.h) */

        _Atomic bool broken;              /* protocol error: stop serving */
        /* Why the ring broke, under cold_lock: the first retire_fail()'s
         * reason (static), task and code; stop_why NULL: stopped without
         * one (by its owner). The graphs it fails say so (§12.2). */
        const char *stop_why;
        uint64_t stop_task;
        int32_t stop_code;
        _Atomic bool removing;            /* being removed: start nothing new */
        /* Cancels (cancel.h): cancel.word first, read before every task
         * runs, beside removing and broken. */
        struct ring_cancels cancel;
        /* An owner's reason for stopping the ring (ring_set_stop_reason),
         * which stop_why may point to: set once, under cold_lock. */
        char stop_msg[HBG_GRAPH_MESSAGE_MAX];
        struct ring_live_graphs live;     /* when graphs were seen (live_graphs.h) */
        alignas(64) _Atomic uint64_t submitted_seen;
        struct ring_stall stall;          /* stall detection (stall.h) */
        /* retire_fail() stopped the ring; the owner's ring_stopped hook is
         * still to be called (retire_graphs()). */
        _Atomic bool stop_untold;
};

int ring_new(struct hbg_engine *e, const struct hbg_ring_params *p, struct hbg_ring **ret);
void ring_free(struct hbg_ring *r);
/* Private bytes of a ring of geometry g with every page touched. */
uint64_t ring_memory(unsigned nthreads, const struct hbg_geometry *g);
/* Thread `thread`'s ring_counters kept in r, added to *sum (the ring may
 * be in use: relaxed loads). */
void ring_counters_add_thread(const struct hbg_ring *r, unsigned thread, struct ring_counters *sum);

static inline struct task_slot *ring_slot(struct hbg_ring *r, uint64_t id) {
        return &r->slots[id & r->task_mask];
}

/* The lap of id counted from the ring's first id, so that every slot's
 * first occupant has lap 0 and a zeroed wake-list word is "open for the
 * first occupant" (§10.2). Ids sharing a slot differ by a multiple of D,
 * hence their laps by exactly that many. */
static inline uint32_t ring_lap(const struct hbg_ring *r, uint64_t id) {
        return (uint32_t)((id - r->first_id) >> r->g.task_window_log2);
}

/* Thread t's completer of ring r: its cached watermark, failsafe heap and
 * counters (never shared). */
static inline struct hbg_completer *ring_completer(struct sched_thread *t, struct hbg_ring *r) {
        return &r->per_thread[t->index].completer;
}

/* The slot's occupant is done with it (its last access, release). */
static inline void ring_slot_release(struct hbg_ring *r, uint64_t id) {
        atomic_store_explicit(&ring_slot(r, id)->state, SLOT_FREE, memory_order_release);
}
