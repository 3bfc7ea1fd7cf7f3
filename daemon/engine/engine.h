/* SPDX-License-Identifier: MIT */
/*
 * The scheduler engine: uniform scheduler threads that classify, dispatch,
 * execute and complete the tasks of any number of rings (one ring per
 * client session), and signal finished graphs. The protocol is
 * docs/RUNTIME_LOGIC.md §9-§14. This header and five beside it are the
 * engine's whole surface: engine_recorded.h (recording and validating
 * graphs), engine_stats.h (counters, metrics, live graphs),
 * engine_trace.h (the timeline), engine_spares.h (spare ring arrays) and
 * engine_kernels.h (loading kernel modules, the kernels' signatures).
 *
 * The engine owns no shared memory: a ring is bound to regions the caller
 * mapped (memfds in hbgd, plain memory in tests) and to an eventfd.
 */
#pragma once

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "daemon/engine/histogram.h"
#include "daemon/engine/ktime.h"
#include "shm/geometry.h"

#define HBG_ENGINE_MAX_THREADS 64u
#define HBG_ENGINE_MAX_CLUSTERS 1024u
#define HBG_ENGINE_MAX_RINGS 1024u
#define HBG_ENGINE_MAX_RECORDED 65536u
#define HBG_ENGINE_MAX_CLASSIFY_BATCH 4096u
#define HBG_ENGINE_MAX_KERNEL_BUDGET_MS UINT64_C(3600000) /* an hour */
/* A fair share's weight (hbg_ring_params.weight) when none is given, and
 * the largest one. */
#define HBG_FAIR_SHARE_WEIGHT_DEFAULT 1u
#define HBG_FAIR_SHARE_WEIGHT_MAX 100u

/* How the completion step is done (RUNTIME_LOGIC.md §11): a mode is the
 * number of a policy in the table (daemon/engine/completion.c), which
 * alone lists them; 0, the table's first (eager-batched), is the default. */
#define HBG_COMPLETION_DEFAULT 0u
/* How many modes there are: numbers 0 .. count - 1. */
unsigned completion_mode_count(void);
/* "eager-batched", "eager", "lazy", "resolver", ...; NULL for anything else. */
const char *completion_mode_name(unsigned mode);
/* 0 and *ret, or -EINVAL for an unknown name. */
int completion_mode_parse(const char *name, unsigned *ret);
/* Every name in table order, ", " between: "eager-batched, eager, ..." (static). */
const char *completion_mode_list(void);
/* The fewest threads the mode runs with (2 for one with a thread of its
 * own: the resolver's), 1 for an unknown mode. */
unsigned completion_mode_min_threads(unsigned mode);

/*
 * What a log line is about, as structured fields beside its text (hbgd
 * sends them to the journal: docs/OPERATIONS.md, "Logs"). Zeroed: none.
 * The engine fills graph, task, kernel and err on the lines about a ring
 * and adds the ring's hbg_ring_params.log_fields (the owner's session,
 * pid, uid).
 */
struct hbg_log_limit;
struct hbg_log_fields {
        uint64_t session;             /* HBG_SESSION; 0: none */
        int pid;                      /* HBG_PID; 0: none */
        bool has_uid;
        uint32_t uid;                 /* HBG_UID */
        bool has_graph;
        uint64_t graph;               /* HBG_GRAPH: the ring's graph record number */
        bool has_task;
        uint64_t task;                /* HBG_TASK: a task id */
        const char *kernel;           /* HBG_KERNEL: a kernel name; NULL: none */
        int err;                      /* ERRNO (a negative errno here); 0: none */
        /* The owner's rate-limit state for lines about this source (the
         * daemon's per-session limit, daemon/log.h); opaque to the engine,
         * passed on with the fields. NULL: none. */
        struct hbg_log_limit *limit;
};

/* f is never NULL (zeroed when the line is about nothing in particular). */
typedef void (*hbg_log_fn)(void *userdata, int priority, const struct hbg_log_fields *f, const char *fmt,
                           va_list ap);

struct hbg_engine_config {
        unsigned threads;             /* scheduler threads, 1..64 (default 4) */
        unsigned clusters;            /* AIC+2xAIV clusters, 1..1024 (default 8) */
        uint64_t spin_before_park_ns; /* idle spinning before parking (default 50 us) */
        /* At most this many threads spin idle at once; the others park at
         * once (RUNTIME_LOGIC §9.4). 0: the CPUs hbgd may run on - 1, at least 1, so
         * that spinning never takes the core a producer runs on. */
        unsigned max_spinning_threads;
        /* A thread that finds more work than it takes wakes a parked peer
         * only while fewer than this many threads are awake (§9.4); a
         * doorbell still wakes one. 0: the CPUs hbgd may run on (its
         * affinity at start), at least 1: on two CPUs, a third and fourth
         * awake thread only preempt the ones holding the work. */
        unsigned max_awake_threads;
        /* 1: a spinning thread whose yields keep running another task on
         * its CPU moves itself to another allowed CPU (sched.c; default);
         * 0: never touches its affinity. */
        unsigned move_off_shared_cpu;
        uint64_t stall_timeout_ms;    /* no-progress limit per ring, 0 = off (default 10 s);
                                         a ring may have its own (hbg_ring_params) */
        unsigned classify_batch;      /* ids claimed at once, 1..4096 (default 64) */
        unsigned max_rings;           /* 1..1024 (default 256) */
        /* Fair share (RUNTIME_LOGIC.md §9.5): while another share has
         * kernel work, one share's kernels occupy at most this many threads.
         * 0: threads - 1 (at least 1). */
        unsigned max_threads_per_share;
        /* A task whose kernel work (kernels.h, cost units) exceeds this fails
         * validation with -E2BIG. 0: no limit. Default 2^31 (about a second
         * of gemm_f32 on a 2020s core). */
        uint64_t max_task_cost;
        /* The time one scheduler thread may spend in one task's kernels in
         * one go (the blocks it took at once; kernels.h, the run contract):
         * past it the task fails with -ETIME, "NAME: kernel exceeded its
         * time budget of N ms". 1..HBG_ENGINE_MAX_KERNEL_BUDGET_MS (default
         * 10 s); there is no "off". */
        uint64_t kernel_time_budget_ms;
        /* Graphs each ring may record for replay (RUNTIME_LOGIC.md §14),
         * 0..HBG_ENGINE_MAX_RECORDED; 0: none (default 64). */
        unsigned max_recorded_graphs;
        unsigned completion_mode;      /* completion_mode_*(); min_threads applies */
        /* Records of each scheduler thread's trace buffer (tracing, below),
         * HBG_TRACE_THREAD_EVENTS_MIN..._MAX (default HBG_TRACE_THREAD_EVENTS). */
        unsigned trace_thread_events;
        hbg_log_fn log;               /* NULL: stderr with <N> prefixes */
        void *log_userdata;
        /* Called once for each ring the engine stops on its own (a protocol
         * error, the stall limit: its ring_stats().broken turns true; not
         * a ring its owner removes), once its graphs are failed, from a
         * scheduler thread as a rule: it must not block. An owner that
         * closes such a session learns of it here rather than by polling
         * ring_stats(). NULL: none. */
        void (*ring_stopped)(void *userdata);
        void *ring_stopped_userdata;
};

void engine_config_default(struct hbg_engine_config *ret);
/* 0 or -EINVAL/-ERANGE with a static message naming the field. */
int engine_config_validate(const struct hbg_engine_config *cfg, const char **ret_error);

struct hbg_engine;
struct hbg_ring;
struct hbg_recorded_task;

struct hbg_ring_params {
        struct hbg_geometry geometry;  /* validated by geometry_init() */
        void *sub_region;              /* initialised by layout_sub_region_init() */
        int sub_fd;                    /* the memfd mapped at sub_region, or -1. The
                                          calls made off the scheduler threads (live
                                          graphs and the graph cursor, cancel, the
                                          pre-fault's idle check, a removal's last
                                          steps) read the region through it, not
                                          through the mapping (client_read.h). Kept
                                          open by the caller until `released`. */
        void *cpl_region;              /* initialised by layout_cpl_region_init() */
        uint64_t first_id;             /* as given to layout_cpl_region_init() */
        int completion_fd;             /* written one byte at a time when graphs finish
                                          or external tasks become ready; -1: none.
                                          Must be the non-blocking write end of a pipe
                                          (or a socket) that only the engine's owner
                                          holds: the client holds the read end, so
                                          nothing it does can make a write block
                                          (docs/SECURITY.md). SIGPIPE must be ignored. */
        const char *name;              /* for logs; copied */
        struct hbg_log_fields log_fields; /* added to every line about the ring; copied */
        /* Fair share (RUNTIME_LOGIC.md §9.5): rings of one share id (hbgd:
         * the client's uid) take kernel turns together, each turn as many
         * kernels as the share's weight (1..100, 0 is 1; the newest ring's
         * weight is the share's). */
        uint32_t share_id;
        unsigned weight;
        /* The ring's stall limit (RUNTIME_LOGIC.md §12.3): 0 is the
         * engine's stall_timeout_ms. */
        uint64_t stall_timeout_ms;
        /* Called once when no scheduler thread touches the ring any more,
         * from engine_collect() or engine_free(): the caller may then
         * unmap the regions. May be NULL. */
        void (*released)(void *userdata);
        void *released_userdata;
        /* Added but not served: no scheduler thread visits the ring (nor
         * reads its regions) until engine_ring_serve(). hbgd serves a
         * session once its submission region is sealed against punching
         * (F_SEAL_FUTURE_WRITE, RUNTIME_LOGIC.md §9.3). */
        bool serve_later;
};

int engine_new(struct hbg_engine **ret, const struct hbg_engine_config *cfg);
/* Stops the threads (running kernels finish) and frees every ring. */
struct hbg_engine *engine_free(struct hbg_engine *e);

/* Start serving a ring. Returns 0, -ENOSPC (max_rings reached), -EINVAL (a
 * weight above HBG_FAIR_SHARE_WEIGHT_MAX, a sub_fd that is no file of the
 * region's size) or -ENOMEM.
 * The ring's private memory is allocated lazily (zero pages until used),
 * so this is cheap even for large windows. */
int engine_ring_add(struct hbg_engine *e, const struct hbg_ring_params *p,
                    struct hbg_ring **ret);
/* Let the scheduler threads visit a ring added with serve_later, and wake
 * one if its client published already (RUNTIME_LOGIC §9.3). Once, before
 * engine_ring_remove(), from the thread that adds and removes rings,
 * once the region is sealed (it reads the client's cursors). */
void engine_ring_serve(struct hbg_ring *r);
/*
 * Stop serving a ring, without waiting: no new task starts, every unfinished
 * graph is failed with `reason` (a negative errno) in the graph table. A
 * kernel already running finishes on its thread; once no thread touches the
 * ring, engine_collect() frees it and calls params.released. The caller
 * must not use r after this call.
 */
void engine_ring_remove(struct hbg_engine *e, struct hbg_ring *r, int reason);
/*
 * Free the removed rings that no scheduler thread touches any more, calling
 * their `released` callbacks. Never waits. Returns how many removed rings
 * are still held by a thread. Call it from the thread that removes rings.
 */
unsigned engine_collect(struct hbg_engine *e);
/* Rings removed and not freed yet (held by a thread, or by the caller),
 * as the next engine_collect() would find them. Any thread. */
unsigned engine_rings_removed(struct hbg_engine *e);
/* Keep a ring from being freed while a thread of the caller's (not a
 * scheduler thread) still uses it after engine_ring_remove(): the
 * ring is collected only once every hold is let go (removal itself holds
 * it while it fails the ring's graphs). engine_free() ignores holds:
 * the caller's threads that use the ring must be gone by then. */
void ring_hold(struct hbg_engine *e, struct hbg_ring *r);
void ring_unhold(struct hbg_engine *e, struct hbg_ring *r);
/*
 * Fault in the ring's private arrays, then (while the ring is idle) the
 * engine's view of its regions (ring.c), a piece at a time: at most
 * max_bytes from *cursor (0 at first) on, advancing it; *stop, if not
 * NULL, is looked at before each page of the regions, and the regions'
 * pages of one call taking max_wait_ns in all end it. Returns 1 while
 * some remain, 0 once done, or a negative errno (-ECANCELED: *stop set;
 * -EINVAL: before Linux 5.14). Nothing is written: any thread may call
 * it while the ring is served, or after its removal while the caller
 * holds it (ring_hold()).
 */
int ring_prefault(struct hbg_ring *r, uint64_t *cursor, uint64_t max_bytes, const _Atomic bool *stop,
                  uint64_t max_wait_ns);
/* Bytes of engine-private memory a ring of geometry g costs when every page
 * is in use, as after ring_prefault() (the regions are the caller's and
 * not counted). */
uint64_t engine_ring_memory(const struct hbg_engine *e, const struct hbg_geometry *g);

/* The doorbell of one ring: also clears its need_wakeup at once, so the
 * client's next publishes do not ring again while the woken threads wait
 * for a CPU (RUNTIME_LOGIC.md §9.4). Only for a served ring: the threads
 * pass over one that is not served yet, whose need_wakeup must stay set
 * until it is (hbgd serves it at its first doorbell instead). */
void ring_kick(struct hbg_ring *r);
/* The wake page (shm/layout.h struct hbg_wake_page; protocol 1.5) for a
 * session of uid: a handle for the release and, in *ret_fd, the page's
 * read-only fd for the client (the engine keeps it open). The uid's own
 * page while fewer than 32 uids hold one, else one they share. */
int engine_wake_page_acquire(struct hbg_engine *e, uid_t uid, int *ret_fd);
void engine_wake_page_release(struct hbg_engine *e, int handle);
/* Makes a page ahead, fresh, for the next uid new here (its first
 * session's build then takes it instead of making one): 1 made, 0 one
 * was ready, -errno. Any thread; background work. */
int engine_wake_page_ahead(struct hbg_engine *e);
/* The page made ahead, if any, given back (none kept any more). */
void engine_wake_page_drop_ahead(struct hbg_engine *e);

/* Recording and validating graphs: engine_recorded.h. The engine's
 * counters, metrics and live graphs: engine_stats.h. */
