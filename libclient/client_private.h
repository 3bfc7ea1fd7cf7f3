/* SPDX-License-Identifier: MIT */
/*
 * libhbgclient internals. The files, each calling only those below it:
 *   connect.c       hbg_connect/hbg_disconnect: handshake, regions, channels
 *   replay.c        recording graphs in hbgd, launching them (§14)
 *   graph.c         building tasks and graphs, submitting, waiting for them
 *   recording.c     the graph being recorded: its tasks, dependencies, host functions
 *   wait.c          the wait loop (spin, yield, poll) that runs host tasks
 *   host.c          host (external) tasks and the completion mailbox
 *   workers.c       host worker threads, their sleep and the hang-up watcher
 *   graph_status.c  reading retired graphs back, graph statuses and errors
 *   deps.c          the session's dependency tracking, bound to the client
 *   tensor.c        the session heap's allocator, tensor helpers
 *   session.c       usable?, heap bounds, publish, doorbell, socket health
 *   hangup.c        knowing that hbgd went away without a system call
 *   kernels.c       hbgd's kernel table: names, signatures (hbg_client_kernel_*)
 *   errors.c        messages
 *   dep_tracker.c   dependencies derived from tensor regions (no client;
 *                   hbgctl run --dot uses it too)
 * and shm/producer.c, the code that writes into the submission region.
 * Nothing here is exported (-fvisibility=hidden; libhbgclient.map).
 * The protocol is docs/RUNTIME_LOGIC.md §2, §8-§12; the byte layout is
 * shm/layout.h. The library never prints.
 */
#pragma once

#include <pthread.h>
#include <stdalign.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "hbg/hbg.h"
#include "common/dep_tracker.h"
#include "shm/completion.h"
#include "shm/geometry.h"
#include "shm/layout.h"
#include "shm/producer.h"
#include "proto/kernel_table.h"

struct hbg_kernel_sig;

#define HBGC_ERROR_MAX 512
#define HBGC_PUBLISH_BATCH 64        /* publish `submitted` at least this often */
#define HBGC_HANDSHAKE_TIMEOUT_MS 10000

/* A host function waiting for its task to become ready; slot id & (D-1).
 * Written by the thread that adds tasks, taken by whichever thread runs
 * it (a worker, or the caller's in hbg_client_process()): every field is
 * atomic, and `tag` says whose it is and whether it was taken
 * (RUNTIME_LOGIC §10.7). */
#define HOST_TAG_READY(id) (2 * (id) + 2) /* registered, not taken */
#define HOST_TAG_TAKEN(id) (2 * (id) + 1) /* a thread runs (or ran) it */
struct host_slot {
        _Atomic uint64_t tag;      /* 0: never used */
        _Atomic(hbg_host_fn) fn;
        _Atomic(void *) userdata;
};

/* A host function of a recorded graph: for its task with recording id
 * `id` (a launch's id: gate + id). */
struct recorded_host {
        uint64_t id;
        hbg_host_fn fn;
        void *userdata;
};

#define HBGC_MAX_RECORDED_TASKS (1u << 24)

/* A graph being recorded (recording.c). */
struct recording {
        struct dep_tracker deps;   /* ids are recording ids */
        struct hbg_recorded_task *tasks;
        size_t n, cap;
        struct recorded_host *host;
        size_t n_host, cap_host;
        struct access *footprint;  /* every access of every task */
        size_t n_fp, cap_fp;
        bool broken;               /* a task went in without its records */
};

/* A freed tensor's bytes (tensor.c): reused once every task added before
 * the free completed (the completion watermark reached `after`). */
struct freed_range {
        uint64_t offset, size, after;
};

/* A recorded graph as launches need it (replay.c). */
struct recorded {
        uint32_t graph;            /* hbgd's number */
        uint32_t n;                /* tasks */
        struct access *footprint;  /* merged: what the gate waits for */
        size_t n_fp;
        struct dep_rec *last;      /* the recording's records at its end, by id */
        size_t n_last;
        struct recorded_host *host; /* by id */
        size_t n_host;
};

/* A retired graph that failed (retired graphs not listed here succeeded). */
struct graph_failure {
        uint64_t graph;
        uint64_t task;
        int32_t status;
        int32_t kernel;            /* kernel id, -1 none */
        uint32_t message;          /* index in the client's messages */
};

/* A finished graph as the library reports it (graph_status.c). */
#define HBGC_MESSAGE_MAX 128
struct graph_outcome {
        int status;                /* 1 running, 0 ok, < 0 failed */
        uint64_t task;             /* first failing task */
        int kernel;                /* its kernel id, -1 none */
        char message[HBGC_MESSAGE_MAX];
};

/* Distinct failure messages, kept once each: failures name them by
 * index (graph_status.c). At most HBGC_MAX_MESSAGES. */
#define HBGC_MAX_MESSAGES 1024u
struct message_entry {
        uint32_t hash;
        char text[HBGC_MESSAGE_MAX];
};

/* A host function that failed, until its graph is read back: its error
 * explains the graph's (hbgd only knows "host task reported failure"). */
struct host_failure {
        uint64_t id;
        int32_t status;
};

/* Host worker threads (workers.c): host_threads > 0 at connect. */
struct host_pool {
        unsigned n;                /* workers; 0: none (hbg_connect_options.host_threads) */
        unsigned started;
        pthread_t *threads;
        pthread_t watcher;
        bool watcher_started;
        int stop_fd;               /* eventfd: hbg_disconnect() tells the watcher */
        _Atomic bool stopping;     /* hbg_disconnect() began */
        _Atomic bool gone;         /* the watcher saw hbgd hang up */
        /* Threads counted in a sleepers word right now: the kick after
         * stopping/gone repeats its wake until it is zero (§10.7). Private,
         * so that the shared words' values never matter to us. */
        _Atomic uint32_t sleeping;
        /* Host functions returned (release, each one): the caller's
         * thread loads it (acquire) when it learns that graphs or tasks
         * finished, so that their effects happen before in this process's
         * own terms, not only through hbgd's memory (hbgc_host_effects()). */
        _Atomic uint64_t returned;
};

/* The watch on the control socket and the completion pipe (hangup.c):
 * one-shot io_uring polls whose completions the kernel posts into memory
 * we map, so that "has hbgd hung up?" costs a load, not a system call. */
struct hangup_watch {
        int ring_fd;               /* -1: no io_uring here (every look polls) */
        void *sq_ring, *cq_ring;   /* cq_ring == sq_ring with IORING_FEAT_SINGLE_MMAP */
        size_t sq_ring_bytes, cq_ring_bytes;
        void *sqes;
        size_t sqes_bytes;
        void *cqes;
        _Atomic uint32_t *sq_tail, *cq_head, *cq_tail;
        uint32_t *sq_array;
        uint32_t sq_mask, cq_mask;
        unsigned armed;            /* polls in flight: bit 0 socket, bit 1 pipe */
};

struct hbg_client {
        /* First: struct hbg_completer is cache-line aligned. A private,
         * read-only view of the completion flags (no stamps are ever
         * published from here: only completer_flag_is_set()). */
        struct hbg_completer completer;
        struct hbg_flag_window window;

        int sock;                  /* control connection (SEQPACKET) */
        pid_t sock_owner;          /* the process that connected it (client_free()) */
        int doorbell_fd;           /* our end of a socketpair: we send, hbgd reads */
        /* hbgd's wake page (protocol 1.5; NULL: an older hbgd, or its page
         * was unusable): read-only; a FUTEX_WAKE of wake_n on its word
         * comes before the doorbell (hbgc_ring). */
        const struct hbg_wake_page *wake_page;
        int wake_n;
        /* The page is our uid's own and no event loop polls us: a wake
         * that woke somebody is enough (hbgc_ring). */
        _Atomic bool wake_trust;
        /* When such a wake was made, not confirmed yet; 0: none
         * (hbgc_ring_confirm). */
        _Atomic int64_t wake_unconfirmed_ns;
        int completion_fd;         /* read end of a pipe hbgd writes */
        int rearm_fd;              /* eventfd: "call hbg_client_process() again" */
        int notify_fd;             /* epoll of the two above: hbg_client_fd() */
        bool dead;                 /* hbgd hung up (the caller's threads only) */
        unsigned pure_spin_skip;   /* waits left that yield from their first step (wait.c) */
        bool spin_long;            /* the last wait was short: the next spins longer (wait.c) */

        struct hbg_geometry g;
        uint64_t session_id;
        uint64_t first_id;
        void *sub;                 /* read-write mapping */
        const void *cpl;           /* read-only mapping */
        struct hbg_sub_header *sh;
        const struct hbg_cpl_header *ch;
        uint8_t *heap;

        /* Producer side: the one code that writes into the submission
         * region (shm/producer.h): next_id, graphs, the mailbox ... */
        struct hbg_producer prod;

        /* Graph statuses: records < harvested have been read back. */
        uint64_t harvested;
        struct graph_failure *failures;
        size_t n_failures, cap_failures;
        struct message_entry *messages;
        size_t n_messages, cap_messages;
        struct host_failure *host_failed; /* in id order */
        size_t n_host_failed, cap_host_failed;
        struct hangup_watch hangup;

        /* Host tasks. */
        struct host_slot *host;    /* D slots, allocated on first use (at
                                      connect when there are workers) */
        struct host_pool pool;
        /* host_failed[] and n_host_failed: workers add, the caller's
         * thread reads back (graph_status.c). */
        pthread_mutex_t host_lock;

        /* The session's dependency records, and the set tasks are added
         * to now: &deps, or a recording's own (record.c). */
        struct dep_tracker deps;
        struct dep_tracker *dt;
        struct recording *rec;     /* recording (hbg_graph_record_begin) */
        struct recorded **recorded; /* recorded graphs, by number */
        size_t n_recorded, cap_recorded;
        /* Freed tensors not reusable yet, by offset, overlapping no
         * allocation of deps (tensor.c). */
        struct freed_range *freed;
        size_t n_freed, cap_freed;
        /* The kernels of the hbgd we are connected to (its session reply;
         * the built-ins of this build from an hbgd older than protocol 1.3):
         * tasks are checked and names resolved with it. Read-only after
         * connect, freed by hbg_disconnect(). */
        struct kernel_table kernels;
        uint32_t hbgd_minor;       /* hbgd's protocol minor version (its hello) */
        const struct hbg_kernel_sig *last_kernel; /* of the last task added by name */
        struct dep_ids scratch;    /* dependency ids of the task being added
                                      (.n: the callers count them) */

        char last_error[HBGC_ERROR_MAX];

        /* Host functions of this client running now, on any thread: the
         * entry points' free look before the per-thread one
         * (hbgc_in_host()). Relaxed: a thread's own increment is visible
         * to itself, and another thread's only sends it to that look. Its
         * own line: workers write it per host task. */
        alignas(HBG_CACHE_LINE) _Atomic uint32_t hosts_running;
};

/* ---------------------------------------------------------------- kernels.c */

/* The kernel table of session reply r into c->kernels (the built-ins when
 * hbgd is older than protocol 1.3): 0, or -EPROTO with the message (a
 * table that breaks proto/kernel_table.h's rules, or none from an hbgd
 * that should send one). */
struct Hbg__SessionReply;
int hbgc_kernels_take(hbg_client *c, const struct Hbg__SessionReply *r);
/* Kernel `name` of c's table, or NULL with c's last error saying why
 * (prefixed with fn). */
const struct hbg_kernel_sig *hbgc_kernel_by_name(hbg_client *c, const char *name, const char *fn);

/* ---------------------------------------------------------------- errors.c */

/* What the library knows of the calling thread (initial-exec TLS: one
 * load, also when the library is dlopen()ed, at a few bytes' cost). */
struct hbgc_thread {
        const hbg_client *in_host;   /* running a host function of this client */
        const hbg_client *worker_of; /* a worker thread of this client */
        char *error;                 /* a worker's last error (HBGC_ERROR_MAX bytes) */
};
extern _Thread_local struct hbgc_thread hbgc_self __attribute__((tls_model("initial-exec")));

/* Record a message for hbg_last_error(c) (c may be NULL: the calling
 * thread's connect message) and return err. */
int hbgc_fail(hbg_client *c, int err, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
void hbgc_set_error(hbg_client *c, const char *msg);

/* ---------------------------------------------------------------- session.c */

/* Is the calling thread inside a host function of c? One load of c when
 * none runs (the per-task entry points ask). */
static inline bool hbgc_in_host(const hbg_client *c) {
        return atomic_load_explicit(&c->hosts_running, memory_order_relaxed) != 0 && hbgc_self.in_host == c;
}

static inline uint64_t hbgc_watermark(const hbg_client *c) {
        return atomic_load_explicit(&c->ch->completed_watermark, memory_order_acquire);
}

static inline bool hbgc_task_done(hbg_client *c, uint64_t id) {
        return completer_flag_is_set(&c->completer, id);
}

/* Publish written tasks and ring the doorbell if hbgd sleeps. 0, or
 * -ECONNRESET when the doorbell found hbgd gone (c->dead set). */
int hbgc_publish(hbg_client *c);
/* Ring the doorbell when `ring` (the producer said hbgd sleeps). 0, or
 * -ECONNRESET when hbgd's end is closed (checked on the socket: c->dead). */
int hbgc_ring(hbg_client *c, bool ring);
/* Ring the doorbell if need_wakeup is set (seq_cst load). */
void hbgc_doorbell(hbg_client *c);
/* Send the doorbell's byte, whatever need_wakeup says, and no wake
 * through the wake page (the session's first ring: hbgd serves the
 * session from it on, protocol 1.6). A full or closed doorbell is left to
 * the next publish and the socket's checks. */
void hbgc_doorbell_send(hbg_client *c);
/* Before sleeping (min_age_ns 0), or in a check that does not sleep (a
 * wake at least min_age_ns old): ring the doorbell if a direct wake that
 * skipped it left need_wakeup set (no hbgd thread woke). */
void hbgc_ring_confirm(hbg_client *c, int64_t min_age_ns);
/* Within a non-blocking check, how old a trusted wake must be before it
 * is confirmed: a woken thread clears need_wakeup within a few us. */
#define HBGC_CONFIRM_AGE_NS 50000
/* Before a sleep, how long a trusted wake may take to be seen at most. */
#define HBGC_CONFIRM_GRACE_NS 20000
/* Read what hbgd wrote into the completion pipe (never blocks). */
void hbgc_drain_completion(hbg_client *c);
/* Receive one envelope from the control socket, waiting up to
 * timeout_ms: 0, -ETIMEDOUT or wire_recv()'s errors. */
struct Hbg__Envelope;
int hbgc_recv_env(int sock, int timeout_ms, struct Hbg__Envelope **env, int *fds, unsigned max_fds,
                  unsigned *nfds);
/* Non-blocking look at the socket and the completion pipe: 0, or
 * -ECONNRESET when hbgd hung up either (sets c->dead). An Error message
 * from hbgd becomes last_error. */
int hbgc_check_socket(hbg_client *c);
/* An Error envelope from hbgd: its code (negative, else -EPROTO), with
 * "hbgd refused the WHEN: message" as the last error. */
struct Hbg__Error;
int hbgc_daemon_error(hbg_client *c, const struct Hbg__Error *e, const char *when);
/* The checks every entry point makes: c not NULL, not inside a host
 * function (this thread's, hbgc_self), connection not known dead. 0 or a
 * negative errno (message set). */
int hbgc_usable(hbg_client *c, const char *fn);
/* hbgc_check_alive() past its free look (below, hangup.c section). */
int hbgc_check_alive_slow(hbg_client *c, const char *fn);
/* Is [offset, offset + bytes) a non-empty range inside the heap? */
bool hbgc_in_heap(const hbg_client *c, uint64_t offset, uint64_t bytes);

/* ---------------------------------------------------------------- graph.c */

/* Wait until the next id fits the task window (running host tasks). */
int hbgc_wait_window(hbg_client *c);
/* Write a task with these fanins: into the window (waiting for room), or
 * into the recording while one is open. *ret_id: its id. */
int hbgc_write_task(hbg_client *c, const struct hbg_task_record *t, const uint64_t *fanins,
                    size_t n_fanins, uint64_t *ret_id);
/* More than 16 fanins: join them with dummies until at most 16 are left. */
int hbgc_join_fanins(hbg_client *c, uint64_t *deps, size_t *n);
/* Sort and deduplicate ids (no sort when they come in order). */
size_t hbgc_sort_unique(uint64_t *v, size_t n);
/* Publish once enough tasks were written since the last publish. 0, or
 * -ECONNRESET when its doorbell found hbgd gone. */
int hbgc_maybe_publish(hbg_client *c);

/* ---------------------------------------------------------------- wait.c */

/* Waiting: a loop of "check the condition; hbgc_wait_step()". Each step
 * publishes pending tasks and runs ready host tasks, then spins (first
 * ~20 us, or up to 100 us after a short wait), then either yields
 * (tensor waits: hbgd does not signal watermark moves) or poll()s the
 * completion pipe and the socket (graph waits; window waits, which ask
 * hbgd for the signal, §2.1). */
struct hbgc_wait {
        hbg_client *c;
        int64_t start_ns;
        int64_t deadline_ns;       /* < 0: none */
        unsigned iter;
        bool eventful;             /* the condition comes with an eventfd signal */
        bool spun;                 /* past the spinning */
        bool pure;                 /* spins without yielding first (wait.c) */
        bool pipe_armed;           /* HBG_PIPE_WAITING set for the next poll */
        int64_t spin_ns;           /* the spin before any sleep (wait.c) */
};
void hbgc_wait_begin(hbg_client *c, struct hbgc_wait *w, int timeout_ms, bool eventful);
/* A wait's end, on every path out of its scope (HBGC_WAIT): a request
 * for the pipe's byte the last step left set is withdrawn, or hbgd would
 * write the pipe for every graph until the next wait polls. */
void hbgc_wait_end(struct hbgc_wait *w);
#define HBGC_WAIT(w) struct hbgc_wait w __attribute__((cleanup(hbgc_wait_end))) = { 0 }
/* Past the spinning: the next step may sleep, so a caller whose wake-up
 * must be asked for (window space) asks now. */
bool hbgc_wait_spun(const struct hbgc_wait *w);
/* 0: check again; -ETIMEDOUT; -ECONNRESET. */
int hbgc_wait_step(hbg_client *c, struct hbgc_wait *w);

/* ---------------------------------------------------------------- graph_status.c */

/* Read back graph entries retired since the last call. */
void hbgc_harvest(hbg_client *c);
/* Graph k: its outcome; returns o->status (1 running, 0 ok, < 0 failed). */
int hbgc_graph_state(hbg_client *c, uint64_t k, struct graph_outcome *o);
/* Record a failure as c's last error ("FN: graph K failed at task T
 * (kernel K): message"); returns o->status. */
int hbgc_graph_result(hbg_client *c, uint64_t k, const struct graph_outcome *o, const char *fn);
/* A host function of task id returned status < 0 (posted to hbgd). */
int hbgc_host_failed(hbg_client *c, uint64_t id, int status);
/* 0 if graph was submitted, else -EINVAL with a message. */
int hbgc_graph_check(hbg_client *c, uint64_t graph, const char *fn);

/* ---------------------------------------------------------------- hangup.c */

/* Arm the watch on c->sock (at connect; without io_uring, or with
 * HBG_IO_URING=0 in the environment, every look asks the socket). */
void hbgc_hangup_init(hbg_client *c);
void hbgc_hangup_free(hbg_client *c);
/* Both polls in flight (struct hangup_watch.armed). */
#define HBGC_WATCH_BOTH 3u
/* True when nothing happened on the socket or the pipe since the watch
 * was armed: one load, no system call. False: ask them. Inline: every
 * submit asks. */
static inline bool hbgc_hangup_quiet(const hbg_client *c) {
        const struct hangup_watch *h = &c->hangup;
        /* Acquire pairs with the kernel's release of the tail (we read no
         * entry here, only whether there is one). */
        return h->armed == HBGC_WATCH_BOTH &&
               atomic_load_explicit(h->cq_tail, memory_order_acquire) ==
                       atomic_load_explicit(h->cq_head, memory_order_relaxed);
}
/* Has hbgd gone? Free when the hang-up watch says nothing happened;
 * otherwise a look at the socket and the pipe. 0, or -ECONNRESET with the
 * message "FN: hbgd went away". */
static inline int hbgc_check_alive(hbg_client *c, const char *fn) {
        if (!c->dead && hbgc_hangup_quiet(c))
                return 0;
        return hbgc_check_alive_slow(c, fn);
}
/* The same for the per-task calls: only the free look (a session without
 * the io_uring watch is checked by submit and the waits instead). */
static inline int hbgc_check_alive_cheap(hbg_client *c, const char *fn) {
        if (c->hangup.ring_fd < 0 || hbgc_hangup_quiet(c))
                return 0;
        return hbgc_check_alive_slow(c, fn);
}
/* The socket was asked and is alive: take the completion, arm again. */
void hbgc_hangup_rearm(hbg_client *c);

/* ---------------------------------------------------------------- deps.c */

/* The session's (or the recording's) dependency tracker bound to the
 * client; inline, since graph.c calls them for every task. */

/* Make sure c->scratch holds n ids. 0 or -ENOMEM. */
static inline int hbgc_scratch_reserve(hbg_client *c, size_t n) {
        return dep_ids_reserve(&c->scratch, n);
}
/* Dependencies of a task with these accesses on earlier tasks: appended to
 * c->scratch from index *n on. 0 or -ENOMEM. No accesses, nothing to look
 * up (most tasks of some graphs): no call at all. */
static inline int hbgc_deps_collect(hbg_client *c, const struct access *a, size_t na, size_t *n) {
        if (na == 0)
                return 0;
        c->scratch.n = *n;
        int err = dep_tracker_collect(c->dt, a, na, c->dt->keep_all ? 0 : hbgc_watermark(c), &c->scratch);
        *n = c->scratch.n;
        return err;
}
/* Record the accesses of task id in tracker dt (a recording's, or the
 * session's for a launched graph). 0 or -ENOMEM (then the records are
 * incomplete: the caller reports the error, and the dependencies of later
 * tasks on this one may be missed). */
static inline int hbgc_deps_commit_to(hbg_client *c, struct dep_tracker *dt, const struct access *a, size_t na,
                                      uint64_t id) {
        if (na == 0) /* nothing recorded, no sweep due */
                return 0;
        int err = dep_tracker_commit(dt, a, na, id);
        if (dep_tracker_sweep_due(dt))
                dep_tracker_sweep(dt, hbgc_watermark(c));
        return err;
}
/* The same in the tracker tasks are added to now. */
static inline int hbgc_deps_commit(hbg_client *c, const struct access *a, size_t na, uint64_t id) {
        return hbgc_deps_commit_to(c, c->dt, a, na, id);
}
/* A writer of [lo, hi) that is not complete yet: true and its id. */
bool hbgc_deps_pending_writer(hbg_client *c, uint64_t lo, uint64_t hi, uint64_t *ret_id);
void hbgc_deps_free(hbg_client *c);

/* ---------------------------------------------------------------- replay.c */

/* Free the recorded graphs and any recording (hbg_disconnect). */
void hbgc_recorded_free_all(hbg_client *c);

/* ---------------------------------------------------------------- recording.c */

/* Start recording: tasks added go to c->rec, dependencies to its
 * tracker. 0 or -ENOMEM. */
int hbgc_rec_begin(hbg_client *c);
/* Append a task with its fanins (recording ids); *ret_id its recording
 * id. 0 or a negative errno (message set). */
int hbgc_rec_append(hbg_client *c, const struct hbg_task_record *t, const uint64_t *fanins, size_t n_fanins,
                    uint64_t *ret_id);
/* The host function of recorded task id; the accesses of a task. 0 or
 * -ENOMEM. */
int hbgc_rec_host(hbg_client *c, uint64_t id, hbg_host_fn fn, void *userdata);
int hbgc_rec_accesses(hbg_client *c, const struct access *a, size_t na);
/* Stop recording and drop what was recorded (replay.c took what it
 * keeps). */
void hbgc_rec_end(hbg_client *c);
void hbgc_rec_free(struct recording *r);

/* ---------------------------------------------------------------- host.c */

/* Allocate the host function table (D slots). 0 or -ENOMEM. */
int hbgc_host_reserve(hbg_client *c);
/* Remember the host function of external task id (table reserved). */
void hbgc_host_register(hbg_client *c, uint64_t id, hbg_host_fn fn, void *userdata);
/* Run ready host tasks and post their completions (never blocks for
 * long); returns how many ran. Also harvests retired graphs. */
int hbgc_process(hbg_client *c);
/* Run external task id (taken from the ring by this thread) if it is ours
 * and still waiting, and post its status. 1 if a host function ran. */
int hbgc_host_run(hbg_client *c, uint64_t id);
/* Is task id complete? Without the client's completer cache: any thread. */
bool hbgc_task_done_shared(const hbg_client *c, uint64_t id);
void hbgc_host_free(hbg_client *c);

/* ---------------------------------------------------------------- workers.c */

/* Start n workers and the hang-up watcher (at connect, regions mapped),
 * all signals blocked in them. 0 or a negative errno (message set; what
 * was started is stopped by hbgc_workers_stop()). */
int hbgc_workers_start(hbg_client *c, unsigned n);
/* Stop and join the workers and the watcher (hbg_disconnect()): running
 * host functions finish first. Accepts a half-started pool. */
void hbgc_workers_stop(hbg_client *c);
/* The caller's thread learnt that tasks finished: every host function
 * that returned before (on a worker) happens before what it does next.
 * The chain through hbgd (the mailbox's release, hbgd's acquire, its
 * release of the flags and graph entries, our acquire) orders them too,
 * but across processes, where ThreadSanitizer cannot follow it. */
static inline void hbgc_host_effects(hbg_client *c) {
        if (c->pool.n)
                (void)atomic_load_explicit(&c->pool.returned, memory_order_acquire);
}
/* Has the watcher seen hbgd go, or did hbg_disconnect() begin? */
static inline bool hbgc_workers_ended(hbg_client *c) {
        return atomic_load_explicit(&c->pool.gone, memory_order_seq_cst) ||
               atomic_load_explicit(&c->pool.stopping, memory_order_seq_cst);
}
/* Sleep on futex word `word` (the completion region's ext_wake or
 * graph_wake), counted in `sleepers` (the submission region's word), unless
 * done(c, arg) or the pool ended: the client half of §10.7's pair.
 * timeout relative, NULL none. 0, or -ETIMEDOUT; may return early. */
int hbgc_sleep_on(hbg_client *c, const _Atomic uint32_t *word, _Atomic uint32_t *sleepers,
                  bool (*done)(hbg_client *c, void *arg), void *arg, const struct timespec *timeout);
