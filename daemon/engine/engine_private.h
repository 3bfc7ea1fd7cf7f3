/* SPDX-License-Identifier: MIT */
/* Engine internals shared by the engine's modules; not a public surface. */
#pragma once

#include <pthread.h>
#include <sched.h>
#include <time.h>
#include <stdalign.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "daemon/engine/completion.h"
#include "daemon/engine/deque.h"
#include "daemon/engine/engine.h"
#include "daemon/engine/kernels.h"
#include "daemon/engine/mpmc.h"
#include "daemon/engine/spsc.h"
#include "shm/completion.h"
#include "shm/layout.h"
#include "shm/util.h"

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
        uint8_t lanes;                    /* popcount(lane_mask) */
        uint8_t flags;
        uint8_t n_fanins;
        uint16_t block_num;
        uint64_t predicate_offset;
        /* Validation's verdict, from classify_begin() to classify_run(). */
        int32_t classify_err;
        /* The kernel a failure of this task names (§12.2): set by
         * validation (the lane it refused, else the first active lane's,
         * HBG_KERNEL_NONE without one), replaced by the kernel whose error
         * became the task's status (dispatch, by the thread whose CAS on
         * `status` won, before its acq_rel add to done_blocks: the last
         * finisher reads it after its own). Read by ring_task_done(). */
        uint16_t report_kernel;
        /* With report_kernel, by the same writer: the kernel's own reason
         * when it was stopped (its time budget, §10.6); NULL: strerror of
         * the status. */
        const char *report_why;
        const char *classify_why;
        const struct kernel_info *kernel[HBG_LANES];
        uint64_t fanins[HBG_MAX_FANINS];
        struct kernel_args args;
};

/* Everything a task's life touches per step (wake list, ownership, block
 * count, status, state, links, id, kind, shape, counts) shares the slot's
 * first cache line; the kernels, fanins and arguments follow. */
_Static_assert(offsetof(struct task_slot, block_num) + sizeof(uint16_t) <= 64,
               "a task slot's hot fields must fit in its first cache line");

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

/* A cancelled graph (§12.6): record `number`, ids first..last, the
 * message its cancelled tasks and its entry carry. Free once the graph's
 * entry is published (ring_cancels_prune), so the message outlives every
 * failure record that points to it. */
#define RING_CANCELS 8u
#define CANCEL_COUNT 0xffu                /* cancel_word: entries in use */
#define CANCEL_GENERATION 0x100u          /* cancel_word: one change */
struct ring_cancel {
        bool used;
        uint64_t number, first, last;
        char why[HBG_GRAPH_MESSAGE_MAX];
};

/* A recorded graph (§14), validated once: task i's fanins are relative,
 * 0 for the launch's gate (the id before the launch's first task) and
 * j + 1 for task j; a launch adds the gate's id. */
struct recorded_graph {
        uint32_t n;
        struct task_slot *tasks;
};

/* Failure record (§12.2): the kernel is the one named when the task
 * failed (its slot may be reused before its graph retires). why: static;
 * NULL when the kernel returned the error (the graph's message is then
 * "kernel NAME returned -EIO"). */
struct failure {
        uint64_t id;
        int32_t code;
        uint16_t kernel;
        const char *why;
};

/* A launch a thread claimed (§14): it classifies ids next .. end - 1 of
 * it, classify_batch per visit of the ring. */
struct launch_expansion {
        uint64_t next, end;
        uint64_t start;                   /* the launch record's id */
        uint64_t gate;
        uint64_t first;                   /* recorded task of id start */
        const struct recorded_graph *g;   /* NULL when the record failed */
        int err;
        const char *why;
};

/* One scheduler thread's private state for one ring. */
struct ring_thread {
        struct hbg_completer completer;
        struct launch_expansion launch;
        /* Continuation (§10.4): a kernel task this thread made ready and
         * runs next itself instead of queueing it. Thread-private; set
         * only during the thread's visit of the ring, and queued by the
         * visit's end if it is still here (ring_continuation_flush). */
        uint64_t continuation;
        bool has_continuation;
        /* Further kernel tasks it made ready during the visit: taken by
         * it newest first, stolen by idle peers oldest first; emptied
         * into the ready queues by the visit's end, as the continuation. */
        struct ws_deque deque;
        alignas(64) _Atomic uint64_t completed;
        _Atomic uint64_t failed;
};

struct hbg_ring {
        struct hbg_engine *engine;
        char name[64];
        struct hbg_log_fields log_fields; /* hbg_ring_params.log_fields */
        unsigned index;                   /* slot in engine->rings */
        void (*released)(void *userdata); /* hbg_ring_params.released */
        void *released_userdata;
        struct hbg_ring *next_removed;    /* engine->removed list (rings_lock) */
        unsigned share;                   /* its slot in engine->shares (§9.5); fixed */
        int removal_reason;

        /* Private geometry: never re-read from shared memory. */
        struct hbg_geometry g;
        uint64_t first_id;
        uint64_t task_mask;
        uint8_t *heap;
        struct hbg_sub_header *sub;
        struct hbg_task_desc *descs;
        struct hbg_task_payload *payloads;
        struct hbg_graph_record *graph_records;
        struct hbg_mailbox_entry *mailbox;
        struct hbg_cpl_header *cpl;
        struct hbg_graph_entry *graph_table;
        _Atomic uint64_t *ext_ready;
        struct hbg_flag_window window;
        int completion_fd;

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
         * thread calling hbg_ring_note_graphs()/hbg_ring_live_graphs()
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
        /* Metrics (hbg_engine_metrics), written under the retire lock:
         * graph records noticed so far (the next record number to notice),
         * when each one in the graph ring was noticed (CLOCK_MONOTONIC ns,
         * entry n & (graph_table_entries - 1)), the time from there to
         * retirement of every retired graph, and failed graphs by errno. */
        _Atomic uint64_t graphs_noticed;
        int64_t *graph_noticed_ns;
        struct hbg_histogram graph_latency;
        _Atomic uint64_t graphs_failed_by_errno[HBG_ERRNO_SLOTS];

        /* Mailbox consumer (try-lock, one thread at a time). */
        alignas(64) _Atomic uint32_t mailbox_lock;
        _Atomic uint64_t mailbox_head;

        /* Cold paths. */
        pthread_mutex_t cold_lock;        /* failures, ext-ready producer, stop reason */
        struct failure *failures;
        /* Failed or skipped ids: entry id & (2D-1) holds id + 1 (§12.2). */
        _Atomic uint64_t *fail_tags;
        uint64_t fail_mask;
        uint32_t n_failures;
        uint32_t max_failures;
        uint32_t failures_hi;             /* the highest id's entry, when known */
        bool failures_hi_known;
        uint64_t ext_ready_count;

        /* Recorded graphs (§14): entries below n_recorded are complete
         * and immutable until ring_free(). One thread records (the
         * engine's owner); it fills an entry, then stores n_recorded
         * (release); classifiers load n_recorded (acquire) first. */
        struct recorded_graph **recorded; /* engine cfg.max_recorded_graphs */
        _Atomic uint32_t n_recorded;

        _Atomic bool broken;              /* protocol error: stop serving */
        /* Why the ring broke, under cold_lock: the first ring_fail()'s
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
        uint64_t graphs_decided;          /* cold_lock: graphs whose status is decided */
        /* An owner's reason for stopping the ring (hbg_ring_set_stop_reason),
         * which stop_why may point to: set once, under cold_lock. */
        char stop_msg[HBG_GRAPH_MESSAGE_MAX];
        alignas(64) _Atomic uint64_t submitted_seen;
        /* Stall detection (§12.3), by whichever thread checks, with this
         * ring's limit (the session's, else cfg.stall_timeout_ms; 0 off). */
        uint64_t stall_timeout_ms;
        _Atomic uint32_t stall_lock;
        uint64_t stall_wm;
        int64_t stall_since_ms;
};

struct sched_thread {
        struct hbg_engine *engine;
        unsigned index;
        pthread_t thread;
        unsigned clusters;                /* owned clusters (may be 0) */
        unsigned first_cluster;
        /* Hazard pointers (§9.3): the ring this thread is visiting, and a
         * second one for a brief look at another ring (fair share). */
        alignas(64) _Atomic(struct hbg_ring *) hazard;
        _Atomic(struct hbg_ring *) peek_hazard;
        alignas(64) struct {
                _Atomic uint64_t classified, batch_linked, dispatched, executed_tasks, continued, stolen, retired_inline,
                        failed;
                _Atomic uint64_t parks, wakeups;
        } stats;
        /* Metrics, written by this thread only: kernel run times (one run
         * in HBG_TASK_TIME_SAMPLE, counted by task_time_tick) and failed
         * tasks by errno (hbg_engine_metrics). */
        alignas(64) struct hbg_histogram task_time;
        unsigned task_time_tick;
        _Atomic uint64_t tasks_failed[HBG_ERRNO_SLOTS];
        /* Liveness for the systemd watchdog: bumped every loop iteration;
         * parked is set while waiting on the futex. */
        alignas(64) _Atomic uint64_t heartbeat;
        _Atomic bool parked;
        bool spinning;                    /* holds one of e->spinners */
        /* Completer counters of removed rings, folded in. */
        struct hbg_completer_stats retired_completer;
        unsigned ring_cursor;
        /* Fair share (§9.5), this thread's turn: the share slot it served
         * last and the kernels of that turn it may still start. */
        unsigned serving;
        unsigned credit;
        unsigned loops;                   /* scheduler loop turns: clock reads */
        int64_t now_ms;                   /* the clock as last read */
        int64_t last_stall_check_ms;
};

/* A fair share (§9.5): the rings of one share id (hbgd: one uid). See
 * fair_share.c for who writes what. */
struct fair_share_slot {
        alignas(64) _Atomic unsigned running;
        _Atomic unsigned weight;
        uint32_t id;                      /* rings_lock */
        unsigned rings;                   /* rings_lock: its rings, until freed */
};

struct hbg_engine {
        struct hbg_engine_config cfg;
        const struct completion_policy *completion;
        void *policy_state;               /* the completion policy's (engine_init) */
        struct sched_thread *threads;
        unsigned nthreads;
        /* Threads that schedule: those below; the one above, if any, is
         * the completion policy's own (thread_main), and owns no core. */
        unsigned nschedulers;
        unsigned threads_started;         /* joined by hbg_engine_free() */

        _Atomic(struct hbg_ring *) *rings;
        _Atomic unsigned rings_high;      /* rings[] entries in use are below */
        _Atomic unsigned ring_count;      /* rings[] entries in use */
        /* Share slots, max_rings of them, and how many hold rings (a hint,
         * relaxed: above 1, kernel starts take turns, §9.5). */
        struct fair_share_slot *shares;
        _Atomic unsigned shares_in_use;
        pthread_mutex_t rings_lock;       /* add/remove/collect only */
        bool rings_lock_ready;
        struct hbg_ring *removed;         /* removed, not freed yet (rings_lock) */
        /* The graph metrics of freed rings, folded in (rings_lock). */
        uint64_t freed_graphs_noticed;
        struct hbg_histogram freed_graph_latency;
        uint64_t freed_graphs_failed[HBG_ERRNO_SLOTS];

        alignas(64) _Atomic uint32_t wake_seq;   /* futex word */
        _Atomic unsigned idle;
        _Atomic unsigned spinners;        /* threads spinning idle now (§9.4) */
        unsigned max_spinners;            /* cfg.max_spinning_threads, resolved */
        _Atomic unsigned idle_executors;  /* idle threads that own clusters */
        bool all_execute;                 /* every thread owns a cluster */
        _Atomic bool stop;
        /* Per kernel (kernel_at() order): the message of a task whose
         * kernel ran past cfg.kernel_time_budget_ms, "NAME: kernel exceeded
         * its time budget of N ms" (§10.6). Built once and kept as long as
         * the engine, so a failure points to it like to a static reason. */
        char (*budget_why)[HBG_GRAPH_MESSAGE_MAX];
        /* Test only (HBGD_TEST_STALL_THREAD=N:MS): thread N stops its
         * heartbeat MS ms after start. -1: off. */
        int test_stall_thread;
        int64_t test_stall_at_ms;
};

/*
 * The modules, each calling only those listed after it (a module reached
 * through a function pointer it was handed is not "called"):
 *   engine.c      public life cycle and counters
 *   sched.c       the threads' loops, parking
 *   ring_table.c  ring membership, hazard pointers, removal, collection
 *   dispatch.c    running kernels on the thread's cores
 *   fair_share.c  whose turn a thread's next kernel is (it peeks at rings
 *                 through ring_table.c, listed above: an exception)
 *   fair_share_slots.c  the share slots rings join and leave
 *   completion*.c the completion policies (table in completion.c)
 *   ingest.c      claiming, copying and validating, routing
 *   mailbox.c     the client's reports for external tasks
 *   stall.c       the stall detector
 *   ready.c       wake lists, making tasks ready, the retire queue
 *   ring.c        a ring's memory, a task's status becoming final
 *   graphs.c      failures, graph retirement, stopping a ring
 *   cancel.c      cancelled graphs: the table, the checks, the status
 *   wakeup.c      waking parked threads
 *   engine_log.c  logging
 *   histogram.c   latency histograms (metrics)
 */

/* cancel.c (§12.6). ring_cancelled: the message of a cancel covering id,
 * or NULL (takes cold_lock: call only when cancel_word counts entries).
 * ring_cancel_applies: kernel_run_ctx_filter()'s filter, arg a struct
 * cancel_watch. ring_cancel_status_locked: graph `number` [first, last]
 * is being decided (cold_lock held): if it was cancelled and *f holds no
 * real failure, *f becomes the cancel. ring_cancels_prune: free the
 * entries of published graphs (retire lock held). */
struct cancel_watch {
        struct hbg_ring *r;
        uint64_t id;
};
const char *ring_cancelled(struct hbg_ring *r, uint64_t id);
bool ring_cancel_applies(void *arg);
void ring_cancel_status_locked(struct hbg_ring *r, uint64_t number, uint64_t first, struct failure *f,
                               bool real);
void ring_cancels_prune(struct hbg_ring *r, uint64_t published);

/* sched.c: the body of a scheduler thread. */
void *sched_thread_main(void *arg);

/* ring_table.c */
/* Visit ring idx (hazard pointer, §9.3); NULL if the slot is empty. */
struct hbg_ring *ring_enter(struct sched_thread *t, unsigned idx);
void ring_leave(struct sched_thread *t);
/* The same with the second hazard slot, for a look at another ring. */
struct hbg_ring *ring_peek_enter(struct sched_thread *t, unsigned idx);
void ring_peek_leave(struct sched_thread *t);
void fold_completer_stats(struct hbg_completer_stats *into, const struct hbg_completer_stats *s);

/* dispatch.c */
bool dispatch_ring(struct sched_thread *t, struct hbg_ring *r);

/* fair_share_slots.c (§9.5): join and leave, under rings_lock.
 * fair_share.c: the others, only while shares compete, by a thread that
 * owns clusters, visiting r. */
int fair_share_join(struct hbg_engine *e, struct hbg_ring *r, uint32_t id, unsigned weight);
void fair_share_leave(struct hbg_engine *e, struct hbg_ring *r);
/* May t start a kernel of r now? */
bool fair_share_may_start(struct sched_thread *t, struct hbg_ring *r);
/* Around each run of a task's blocks that fair_share_may_start() allowed. */
void fair_share_begin(struct sched_thread *t, struct hbg_ring *r);
void fair_share_end(struct sched_thread *t, struct hbg_ring *r);
/* A visit of r started no kernel. */
void fair_share_visit_idle(struct sched_thread *t, struct hbg_ring *r);

/* ingest.c */
bool ring_classify(struct sched_thread *t, struct hbg_ring *r);
/* Is the descriptor at the claim cursor a launch record covering ids
 * beyond `submitted` (a hint, for the stall detector)? */
bool ring_launch_unsubmitted(struct hbg_ring *r, uint64_t claim, uint64_t submitted);

/* validate.c */
/* Validate a copied descriptor (and the payload parts its counts cover)
 * into s; fanins must lie in [fanin_lo, id). 0 or a negative errno with
 * *why (static). */
int task_validate(struct hbg_ring *r, struct task_slot *s, const struct hbg_task_desc *d,
                  const struct hbg_task_payload *payload, uint64_t id, uint64_t fanin_lo, const char **why);

/* classify.c */
/* A claimed id's slot, re-initialised for it. Its validated copy goes in
 * next, and validation's verdict in classify_err/classify_why. */
struct task_slot *classify_begin(struct hbg_ring *r, uint64_t id);
/* The tasks of a run linked to a fanin in the run (§10.1), by offset. */
struct classify_run_set {
        uint64_t linked[HBG_ENGINE_MAX_CLASSIFY_BATCH / 64];
        uint64_t n_linked;
};
/* Pass one, per task of the run first .. first + n - 1 (n at most
 * HBG_ENGINE_MAX_CLASSIFY_BATCH), after its validation: owned, waiting,
 * and linked to its latest fanin if that is in the run (plain stores). */
void classify_link(struct hbg_ring *r, struct task_slot *s, uint64_t first, struct classify_run_set *set);
/* Pass two, once every task of the run passed classify_link(): the tasks
 * not linked are handed on (failed, retired inline or routed). */
void classify_run(struct sched_thread *t, struct hbg_ring *r, uint64_t first, uint64_t n,
                  const struct classify_run_set *set);

/* launch.c */
/* Ids id .. id + n - 1, claimed together: the launch record at id and the
 * tasks of the recorded graph it names (§14). Checks the record and
 * classifies the first classify_batch of them; the rest on later visits
 * (ring_launch_continue). */
void classify_launch(struct sched_thread *t, struct hbg_ring *r, uint64_t id, uint64_t n);
/* This thread has a launch of r to go on with: the next ids of it. */
bool ring_launch_pending(const struct sched_thread *t, const struct hbg_ring *r);
bool ring_launch_continue(struct sched_thread *t, struct hbg_ring *r);

/* recorded.c */
void ring_recorded_free(struct hbg_ring *r);
/* Work the client made: claimable ids, graph records, mailbox entries. */
bool ring_has_external_work(struct hbg_ring *r);
/* Work a thread could take up in this ring now (a hint). */
bool ring_has_work(struct hbg_ring *r);
/* Kernel tasks ready (queued or in a deque) or ids to classify: what
 * makes a ring's share wait for its turn (a hint, §9.5). */
bool ring_has_kernel_work(struct hbg_ring *r);
bool ring_graphs_arrived(struct hbg_ring *r);

/* mailbox.c */
bool ring_poll_mailbox(struct sched_thread *t, struct hbg_ring *r);

/* stall.c */
bool ring_unfinished(struct hbg_ring *r);
void ring_check_stall(struct sched_thread *t, struct hbg_ring *r);

/* graphs.c: after this thread moved the watermark, must it look at the
 * graphs (a graph or a producer waiting for window space it reached)? */
bool ring_retire_due(struct hbg_ring *r);

/* ready.c */
/* Route a classified task: ready, or onto the wake list of its latest
 * unmet fanin. inline_ok: kernel-less tasks may be retired right here. */
void ring_route(struct sched_thread *t, struct hbg_ring *r, struct task_slot *s, bool inline_ok);
/* Wake a parked peer if more ready work is queued than this thread takes. */
void ring_wake_for_surplus(struct sched_thread *t, struct hbg_ring *r);
/* Some thread's deque of r holds tasks (a hint, relaxed loads): work a
 * thread could steal (§10.4). */
bool ring_deques_nonempty(struct hbg_ring *r);
/* This thread's continuation in r, taken (§10.4); false if none. */
bool ring_continuation_take(struct sched_thread *t, struct hbg_ring *r, uint64_t *ret_id);
/* End of a visit: a continuation still held, and the tasks left in the
 * thread's deque, go to the ready queues. */
void ring_continuation_flush(struct sched_thread *t, struct hbg_ring *r);
void ring_drain_wake_list(struct sched_thread *t, struct hbg_ring *r, uint64_t id);
/* After id's stamp is visible: drain its wake list, release its slot. */
void ring_task_released(struct sched_thread *t, struct hbg_ring *r, uint64_t id);
bool ring_retire_ready(struct sched_thread *t, struct hbg_ring *r, unsigned max);

/* ring.c */
/* Task id's status is final. A failure (status < 0) is recorded with the
 * slot's report_kernel and why: a static reason, or NULL when the task's
 * kernel returned the error (§12.2). */
void ring_task_done(struct sched_thread *t, struct hbg_ring *r, uint64_t id, int status,
                    const char *why);
int ring_new(struct hbg_engine *e, const struct hbg_ring_params *p, struct hbg_ring **ret);
void ring_free(struct hbg_ring *r);
/* Private bytes of a ring of geometry g with every page touched. */
uint64_t ring_memory(unsigned nthreads, const struct hbg_geometry *g);

/* live_graphs.c */
struct graph_seen {
        uint64_t number_plus_1;           /* whose stamp: record number + 1 */
        int64_t ms;                       /* CLOCK_MONOTONIC */
};
size_t ring_graph_seen_bytes(const struct hbg_geometry *g);

/* graphs.c */
void ring_record_failure(struct hbg_ring *r, uint64_t id, int code, uint16_t kernel, const char *why);
void ring_retire_graphs(struct hbg_ring *r);
void ring_fail(struct hbg_ring *r, int code, uint64_t task, const char *why);
/* ring_fail() without the warning (a session that ended normally): mark
 * the ring broken and fail its pending graphs. Any thread. */
void ring_fail_quietly(struct hbg_ring *r, int code);
/* Called once no scheduler thread can touch the ring any more. */
void ring_stop(struct hbg_ring *r, int code);
/* One byte into the completion pipe (never blocks, never retried). */
void ring_signal(struct hbg_ring *r);

/* wakeup.c */
void engine_wake_one(struct hbg_engine *e);
void engine_wake_executor(struct hbg_engine *e);
/* Wake everyone: the completion policy's thread too (stopping). */
void engine_wake_all(struct hbg_engine *e);
/* Sleep on a futex word while it holds val (timeout NULL: no limit). */
void engine_futex_wait(_Atomic uint32_t *word, uint32_t val, const struct timespec *timeout);
/* Wake at most n sleepers of a futex word. */
void engine_futex_wake(_Atomic uint32_t *word, int n);
/* Thread t parks on word while it holds val: counted, and shown parked. */
void engine_thread_sleep(struct sched_thread *t, _Atomic uint32_t *word, uint32_t val,
                         const struct timespec *timeout);

/* engine_log.c: f may be NULL (no fields). ring_log adds the ring's
 * log_fields to f's. */
void engine_log(struct hbg_engine *e, int priority, const struct hbg_log_fields *f, const char *fmt, ...)
        __attribute__((format(printf, 4, 5)));
void ring_log(struct hbg_ring *r, int priority, const struct hbg_log_fields *f, const char *fmt, ...)
        __attribute__((format(printf, 4, 5)));

/* A spin-then-yield step for waits that need nothing from anyone. */
static inline void engine_relax(unsigned *spins) {
        if (++*spins < 64)
                hbg_cpu_relax();
        else
                sched_yield();
}

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

static inline void stat_add(_Atomic uint64_t *c, uint64_t n) {
        hbg_stat_inc(c, n);
}

/* Thread t is alive: one loop turn (its only writer, relaxed). */
static inline void engine_thread_heartbeat(struct sched_thread *t) {
        atomic_store_explicit(&t->heartbeat, atomic_load_explicit(&t->heartbeat, memory_order_relaxed) + 1,
                              memory_order_relaxed);
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
