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
#include "daemon/engine/mpmc.h"
#include "daemon/engine/sched.h"
#include "daemon/engine/slot.h"
#include "shm/completion.h"
#include "shm/layout.h"

struct hbg_engine;
struct failure;
struct recorded_graph;
struct graph_seen;

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

        /* Graph retirement, combining lock (§12.1). */
        alignas(64) _Atomic uint32_t retire_pending;
        _Atomic uint32_t retire_lock;
        uint64_t graph_next;              /* next record number to retire */
        uint64_t graph_expected_first;
        bool graph_have;                  /* graph_cur holds a validated copy */
        struct hbg_graph_record graph_cur;
        _Atomic uint64_t graphs_seen;     /* graphs_submitted as last read by the retirer */
        /* When hbgd first saw graph record k: slot k & (G-1). Only the
         * thread calling ring_note_graphs()/ring_live_graphs()
         * (hbgd's io thread) touches these (live_graphs.c, §12.5). */
        struct graph_seen *graph_seen;
        uint64_t graphs_noted;            /* records below: stamped or retired */
        /* The watermark at which the next graph the retirer knows of
         * retires (its last id + 1); 0: none known, every move must ask.
         * Written under the retire lock (relaxed), read by completers
         * (relaxed): a hint whose every stored value is at most the true
         * one while its graph is unretired (§12.1). */
        _Atomic uint64_t retire_at;
        _Atomic uint64_t graphs_failed;
        /* Metrics (engine_metrics), written under the retire lock:
         * graph records noticed so far (the next record number to notice),
         * when each one in the graph ring was noticed (CLOCK_MONOTONIC ns,
         * entry n & (graph_table_entries - 1)), the time from there to
         * retirement of every retired graph, and failed graphs by errno.
         * The times are also read by hbgd's io thread (ring_live_graphs):
         * each is stored with release before graphs_noticed passes it
         * (release), and an entry is stored again for record k + G only
         * after graphs_retired passed k (an earlier retirement pass); the
         * reader loads both with acquire. One exception: failing a broken
         * ring's graphs (retire.c, fail_graphs_locked) notices and retires
         * in one pass, so a client that keeps raising graphs_submitted
         * meanwhile can make the reader see record k + G's time for k: a
         * wrong start of its own in-flight graph in its own trace, nothing
         * else. */
        _Atomic uint64_t graphs_noticed;
        _Atomic int64_t *graph_noticed_ns;
        struct hbg_histogram graph_latency;
        _Atomic uint64_t graphs_failed_by_errno[HBG_ERRNO_SLOTS];

        /* Mailbox consumer (try-lock, one thread at a time). */
        alignas(64) _Atomic uint32_t mailbox_lock;
        _Atomic uint64_t mailbox_head;

        /* Cold paths. */
        pthread_mutex_t cold_lock;        /* failures, ext-ready producer, stop reason */
        struct failure *failures;
        struct failure_tags fail_tags;    /* failed or skipped ids (failures.h) */
        uint32_t n_failures;
        uint32_t max_failures;
        uint32_t failures_hi;             /* the highest id's entry, when known */
        bool failures_hi_known;
        /* Failures the full list did not keep (failures.c): the lowest
         * one whole, and the highest id; none while !failures_dropped. */
        bool failures_dropped;
        struct failure dropped_low;
        uint64_t dropped_hi;
        uint64_t ext_ready_count;
        /* Wakes of the client's sleeping workers skipped because one
         * looked for work (signal_ext_wake()), looked at again when the
         * look is over (signal_ext_skip_check()): due then (0: none), for
         * the tasks published up to ext_skip_upto; whether one was skipped
         * since. They bound how long a task may wait for a looker kept off
         * its CPU; no wake-up rests on them. */
        _Atomic uint64_t ext_skip_due_ns;
        _Atomic uint64_t ext_skip_upto;
        _Atomic bool ext_skipped_since;
        /* External tasks the stall detector completed (the library posts
         * no mailbox entry for them, but for a narrow race): with
         * mailbox_head, the tasks answered (signal.c). */
        _Atomic uint64_t ext_stalled;

        /* Recorded graphs (§14): entries below n_recorded are complete
         * and immutable until ring_free(). One thread records (the
         * engine's owner); it fills an entry, then stores n_recorded
         * (release); classifiers load n_recorded (acquire) first. */
        struct recorded_graph **recorded; /* engine cfg.max_recorded_graphs */
        _Atomic uint32_t n_recorded;

        _Atomic bool broken;              /* protocol error: stop serving */
        /* Why the ring broke, under cold_lock: the first retire_fail()'s
         * reason (static), task and code; stop_why NULL: stopped without
         * one (by its owner). The graphs it fails say so (§12.2). */
        const char *stop_why;
        uint64_t stop_task;
        int32_t stop_code;
        _Atomic bool removing;            /* being removed: start nothing new */
        /* Cancels (§12.6): the table under cold_lock; cancel_word is
         * CANCEL_COUNT (entries in use) in its low bits and a generation
         * above, bumped on every change of the table. Stored under
         * cold_lock (relaxed: a reader that acts on it takes the lock),
         * read relaxed before every task runs and by running kernels as
         * their stop word. Read-mostly, beside removing and broken. */
        _Atomic uint32_t cancel_word;
        struct ring_cancel cancels[RING_CANCELS];
        /* Refusals' numbers (failures.h), under cold_lock, and the copy
         * of the one a graph's status takes (its retirer's, under the
         * retire lock). */
        struct failure_detail *failure_details; /* NULL until a refusal's */
        uint32_t n_failure_details;             /* entries in use */
        char failure_detail_out[FAILURE_DETAIL_MAX];
        uint64_t graphs_decided;          /* cold_lock: graphs whose status is decided */
        /* An owner's reason for stopping the ring (ring_set_stop_reason),
         * which stop_why may point to: set once, under cold_lock. */
        char stop_msg[HBG_GRAPH_MESSAGE_MAX];
        alignas(64) _Atomic uint64_t submitted_seen;
        /* Stall detection (§12.3), by whichever thread checks, with this
         * ring's limit (the session's, else cfg.stall_timeout_ms; 0 off). */
        uint64_t stall_timeout_ms;
        _Atomic uint32_t stall_lock;
        uint64_t stall_wm, stall_retired; /* watermark, graphs_retired at the clock's start */
        int64_t stall_since_ms;
        bool stall_watching;              /* the last check saw work pending */
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
