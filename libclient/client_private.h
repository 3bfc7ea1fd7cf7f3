/* SPDX-License-Identifier: MIT */
/*
 * libhbgclient internals: the client's state (struct hbg_client and what
 * it holds). Each file's calls for the others are declared in its own
 * header, libclient/FILE.h, which includes this one. The files, each
 * calling only those below it (one rank a line in tests/scripts/layers.txt,
 * which check-layers.sh enforces):
 *   connect.c       hbg_connect/hbg_disconnect: handshake, regions, channels
 *   replay.c        recording graphs in hbgd, launching them (§14)
 *   graph.c         building tasks and graphs, submitting, waiting for them
 *   fanin_join.c    more than 16 fanins joined by dummy tasks
 *   recording.c     the graph being recorded: its tasks, dependencies, host functions
 *   wait.c          the wait loop (spin, yield, poll) that runs host tasks
 *   workers.c       host worker threads, their sleep and the hang-up watcher
 *   host.c          host (external) tasks and the completion mailbox
 *   graph_status.c  reading retired graphs back, graph statuses and errors
 *   deps.c          the session's dependency tracking, bound to the client
 *   tensor.c        the session heap's allocator, tensor helpers
 *   session.c       usable?, heap bounds, publish, doorbell, socket health
 *   hangup.c        knowing that hbgd went away without a system call
 *   kernels.c       hbgd's kernel table: names, signatures (hbg_client_kernel_*)
 *   errors.c        messages
 * and, compiled in from below, common/dep_tracker.c (dependencies derived
 * from tensor regions, no client; hbgctl run --dot uses it too) and
 * shm/producer.c, the code that writes into the submission region.
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
 * index (graph_status.c). At most HBGC_MAX_MESSAGES; past them each
 * failure keeps its own (spilled). */
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

/* The task ids of a graph this client cancelled (hbg_graph_cancel()). */
struct id_range {
        uint64_t first, last;
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
        bool later;                /* set up at the first ask of the socket (hbgc_hangup_start()) */
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
        /* hbg_client_fd()'s descriptor and what it watches besides the
         * pipe, made at its first call (a program without an event loop
         * never pays for them): -1 until then. Stored under notify_lock,
         * rearm_fd (seq_cst, against the task cursor: notify_make())
         * before notify_fd (release); loaded acquire, or seq_cst where
         * work is left for a later call. */
        _Atomic int rearm_fd;      /* eventfd: "call hbg_client_process() again" */
        _Atomic int notify_fd;     /* epoll of the pipe and rearm_fd */
        pthread_mutex_t notify_lock;
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
        bool harvest_stuck;        /* the last read-back stopped short (no memory) */
        struct graph_failure *failures;
        size_t n_failures, cap_failures;
        struct message_entry *messages;
        size_t n_messages, cap_messages;
        struct message_entry *spilled;     /* past HBGC_MAX_MESSAGES, one per failure */
        size_t n_spilled, cap_spilled;
        struct host_failure *host_failed; /* in id order */
        size_t n_host_failed, cap_host_failed;
        /* Graphs cancelled and not read back, in cancel order: their host
         * functions not yet started run no more (host.c). The count is
         * also read without the lock, as a hint (relaxed: a worker that
         * misses a cancel runs the function, as before it). */
        struct id_range *cancelled;
        size_t cap_cancelled;
        _Atomic size_t n_cancelled;
        struct hangup_watch hangup;

        /* Host tasks. */
        struct host_slot *host;    /* D slots, allocated on first use (at
                                      connect when there are workers) */
        struct host_pool pool;
        /* host_failed[] and n_host_failed: workers add, the caller's
         * thread reads back (graph_status.c); cancelled[]: the caller's
         * thread adds and drops, workers read. */
        pthread_mutex_t host_lock;

        /* The session's dependency records, and the set tasks are added
         * to now: &deps, or a recording's own (recording.c). */
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
        char hbgd_name[48];        /* its hello's name, "hbgd VERSION" (printable bytes only) */
        bool task_wake;            /* hbgd answers task_waiting under every policy (1.7) */
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
