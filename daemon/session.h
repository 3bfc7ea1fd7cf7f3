/* SPDX-License-Identifier: MIT */
/*
 * A client session's resources in hbgd (DESIGN.md §3, docs/PROTOCOL.md):
 * the two sealed memfd regions, the doorbell socket, the completion pipe,
 * and the engine ring bound to them, with their memory charged to the
 * client's uid.
 *
 * The client gets its own ends of the doorbell and the completion channel:
 * the doorbell is a socketpair (hbgd reads its end with MSG_DONTWAIT, to
 * EAGAIN, with no room for descriptors: any a datagram carries are closed
 * by the kernel as it is read, none reaches hbgd's fd table), the
 * completion signal a pipe whose write end only hbgd holds (non-blocking).
 * No file description is shared with the client, so nothing it does to its
 * descriptors (clearing O_NONBLOCK, reading first, filling them) can make
 * an hbgd thread block (docs/SECURITY.md).
 *
 * Opening takes three steps, so that no connect waits for another on the
 * io thread: session_new() (io thread) takes the charge, the build job
 * (session_build_job(), on the slow-work thread, or on the io thread for
 * a lone connect: conn.c, slow_work_run_here()) creates the regions
 * and channels (or takes a set made ahead, spare_regions.h) and the ring, session_start() (io thread) watches the doorbell.
 * The ring is served from the first doorbell on, once the submission
 * region is sealed against writable mappings and hole punching (by the
 * client, which has mapped it then, or by hbgd on a thread of its own;
 * session.c, session_serve()). Then the pre-fault jobs (slow-work thread,
 * a piece each) fault in what the first graph touches
 * (ring_prefault()), while the client builds it: the charge covers
 * every page of it (docs/OPERATIONS.md).
 *
 * Closing is asynchronous: session_close() detaches the ring from the
 * engine and returns at once; the memory is freed, and the charge
 * refunded, when the engine releases the ring (engine_collect(), after
 * a kernel still running on it returned). io thread only, but the jobs'
 * run.
 */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "daemon/accounting.h"
#include "daemon/config.h"
#include "daemon/engine/engine.h"
#include "daemon/io_loop.h"
#include "daemon/session_geometry.h"
#include "daemon/session_regions.h"
#include "daemon/slow_work.h"
#include "daemon/spare_regions.h"
#include "shm/geometry.h"

/* Where a session's ring is on its way to being served (session.c). */
enum session_serving {
        SESSION_UNSERVED = 0,          /* no doorbell yet: no hbgd thread reads the regions
                                          but through the memfd (client_read.h) */
        SESSION_SEALING,               /* hbgd seals the submission region (`seal`) */
        SESSION_SERVED,                /* sealed: the scheduler threads visit the ring */
        SESSION_UNSERVABLE,            /* the client made the seal impossible */
};

struct region_seal;

struct session {
        uint64_t id;
        uid_t uid;
        pid_t pid;
        struct hbg_geometry g;
        uint64_t first_id;
        uint64_t memory;               /* bytes charged to uid */
        uint64_t recorded_tasks;       /* in all its recorded graphs (§14) */
        struct accounting *acct;
        struct hbg_engine *engine;
        struct io_loop *loop;
        /* The memfds, sent to the client (then cpl_fd closed, sub_fd
         * kept for the ring until session_free()), hbgd's mappings, the
         * channels (the client's ends closed once sent). */
        struct session_regions regions;
        struct spare_regions *spare_regions; /* sets made ahead, for the build (or NULL) */
        int wake_page;                 /* engine_wake_page_acquire()'s handle */
        int wake_fd;                   /* its fd (the engine's: never closed here) */
        struct hbg_ring *ring;
        /* Spare rings' bursts (spare_rings.h): the burst it was set up in,
         * and when (0: not set up). */
        uint64_t spare_burst;
        int64_t set_up_ms;
        struct io_source *doorbell_src;
        uint64_t doorbell_fds_dropped; /* datagrams that carried fds (closed by the kernel) */
        struct hbg_log_limit *log_limit; /* the ring's lines' (daemon/log.h); a reference */
        unsigned weight;               /* fair share (§9.5), for the build */
        uint64_t stall_timeout_ms;     /* §12.3, for the build */
        struct slow_work *slow;
        struct slow_job build;         /* session_build_job() */
        int build_err;                 /* its outcome, read in session_start() */
        const char *build_why;
        enum session_serving serving;
        struct region_seal *seal;      /* SESSION_SEALING: hbgd's seal, under way */
        bool seal_retry;               /* starting it failed: session_tick() tries again */
        struct slow_job prefault;      /* a piece of ring_prefault() per run */
        struct hbg_ring *prefault_ring; /* what its pieces work on: the ring, set once
                                           before the first and never changed after */
        struct hbg_ring *held_ring;    /* closed while a piece ran or hbgd sealed: the
                                          ring, held (ring_hold()) until that is done */
        void (*collect)(void *arg);    /* what collects it then (session_on_release()) */
        void *collect_arg;
        uint64_t prefault_cursor;
        int prefault_more;             /* its last result: 1 more to do, 0 done, < 0 stopped */
        uint64_t prefault_pieces;      /* runs so far */
        _Atomic bool prefault_stop;    /* set by session_close(): a running piece stops
                                          before its next page of the regions, or
                                          its next chunk of the ring's arrays */
};

/* What one pre-fault job faults in (a session's, spare_rings.c's): 256
 * KiB, 0.1 to 1 ms here (first touches are dear in a VM), so that a
 * request's job (a connect, a recording) waits at most that long behind
 * it; with 1 MiB pieces a burst of 8 connects measured a p99 several
 * times longer (docs/PERFORMANCE.md). */
#define SESSION_PREFAULT_PIECE ((uint64_t)256 << 10)
/* The time a piece's pages of the regions may take in all: 64 of them
 * take up to 1 ms here, as above; longer means memory short (no punch:
 * the region is sealed against them before the pre-fault starts;
 * ring_prefault()). */
#define SESSION_PREFAULT_REGION_NS ((uint64_t)4 * 1000000)


/* The bytes a session of geometry g costs hbgd: the engine's private
 * memory for it and both regions, every page counted. */
uint64_t session_memory(const struct hbg_engine *e, const struct hbg_geometry *g);

/*
 * A session to build: its charge (`memory`, already charged to uid in
 * acct: from here on the session owns it and refunds it when it is freed,
 * also on failure) and what the build needs; nothing created yet. Its
 * ring's lines go under log_limit (the session holds a reference), in
 * uid's fair share of weight `weight` (RUNTIME_LOGIC.md §9.5), with the
 * stall limit stall_timeout_ms (0: the engine's, §12.3). 0 or -ENOMEM.
 */
int session_new(struct session **ret, struct hbg_engine *e, struct io_loop *loop, struct slow_work *slow,
                struct accounting *acct, const struct hbg_geometry *g, uint64_t memory, uint64_t id, uid_t uid,
                pid_t pid, struct hbg_log_limit *log_limit, unsigned weight, uint64_t stall_timeout_ms);
/* The job that builds it (regions, channels, the engine ring): the caller
 * sets done and userdata and submits it to the session's slow_work (or
 * runs it there, slow_work_run_here()); the
 * session's uid is set. Its run touches only the session, the engine and
 * `spares` (a set of the session's geometry taken from it if one is
 * ready; NULL: none). */
struct slow_job *session_build_job(struct session *s, struct spare_regions *spares);
/* Would the build take a set of regions made ahead (the cheap kind, no
 * memfds or channels to make)? For slow_work_run_here()'s `cheap`, asked
 * with the slow-work thread held off (a fill cannot drop the set then). */
bool session_build_cheap(void *session);
/* What collects the ring a close left held, once let go: hbgd's collect,
 * which asks for spares with the memory and fds given back (otherwise
 * engine_collect() alone, and nobody asks until the next connect). */
void session_on_release(struct session *s, void (*collect)(void *arg), void *arg);
/* After the build job's done: its outcome (0, or a negative errno with
 * *why); on success, watch the doorbell (whose first ring serves the
 * session and queues the pre-fault). On
 * failure the caller closes the session (session_close()). */
int session_start(struct session *s, const char **why);
/* A connect is under way (a connection accepted, a session asked for or
 * answered): every session's pre-fault holds back for a few ms more
 * (session.c, PREFAULT_QUIET_NS), leaving the cores to the clients that
 * connect. */
void session_prefault_hold(struct slow_work *slow);
/* The fds to send with the session reply, in protocol order: submission
 * memfd, completion memfd, doorbell socket, completion pipe (read end),
 * the uid's wake page (protocol 1.5; sent to clients that know it). */
void session_client_fds(const struct session *s, int ret_fds[5]);
/* The client has its copies: close ours of its fds. */
void session_client_fds_sent(struct session *s);
/* The housekeeping tick's look (io thread): a seal that could not be
 * started at the doorbell is tried again. Whether it still waits to be
 * (the quick tick, then). */
bool session_tick(struct session *s);
/* Where the session is on its way to being served, as status shows it:
 * "unserved", "sealing", "served" or "unservable" (io thread). */
const char *session_serving_name(const struct session *s);
/* Stop serving: a build or pre-fault job in flight is taken back (a
 * running build is waited for; a running piece of pre-fault is not, nor
 * hbgd's seal of the region: either holds the ring, and so the session
 * and its charge, until it is done), the ring is detached (its pending
 * graphs fail with `reason`); the rest is freed when the engine releases
 * it, at once if it has no ring. Takes a session
 * in any state, built or not. s must not be used after this. Returns
 * whether rings of closed sessions are still held by a scheduler thread
 * (engine_collect()): the caller collects again soon. */
bool session_close(struct session *s, int reason);
