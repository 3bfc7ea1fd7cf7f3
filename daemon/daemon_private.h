/* SPDX-License-Identifier: MIT */
/*
 * The io side's shared state: struct hbgd and the connections. Used by the
 * io side's modules only (daemon.c wires them; listener.c accepts; conn.c
 * speaks the protocol, with conn_reply.c's replies, conn_close.c's
 * closing and tool_requests.c's answers to hbgctl's requests; access.c
 * says who may connect; refusal.c tells the
 * others why not; status.c answers status requests, metrics.c builds
 * their metrics).
 */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <sys/socket.h>

#include "daemon/accounting.h"
#include "daemon/config.h"
#include "daemon/engine/engine.h"
#include "daemon/io_loop.h"
#include "daemon/kernel_rows.h"
#include "daemon/log.h"
#include "daemon/metrics.h"
#include "daemon/record.h"
#include "daemon/session.h"
#include "daemon/slow_work.h"
#include "daemon/spare_regions.h"
#include "daemon/spare_rings.h"
#include "daemon/tracing.h"

struct conn {
        struct hbgd *d;
        struct conn *next;             /* d->conns */
        struct conn *next_dead;        /* d->dead_conns, once closed */
        int sock;
        struct io_source *src;
        struct ucred cred;
        uint64_t id;
        bool hello;
        uint32_t client_minor;         /* the client's protocol minor (its hello) */
        uint64_t kernels_digest;       /* its session request's: the kernel table it has */
        bool closed;                   /* freed after the current io round */
        int64_t deadline_ms;           /* closed if no complete request by then; 0: none */
        struct session *session;
        struct record_job *recording;  /* being validated (slow work): reading waits */
        struct validate_job *validating; /* a validate-only request, likewise */
        struct session *creating;      /* its session, being built (slow work), likewise */
        bool creating_inline;          /* while creating: built on the io thread (a lone connect's) */
        char name[64];
        struct hbg_log_limit *log_limit; /* its lines' rate limits; the session holds it too */
};

/* A refused connection, kept until the client has read why (refusal.c). */
struct refusal {
        struct hbgd *d;
        struct refusal *next;          /* d->refusals */
        int sock;
        struct io_source *src;
        int64_t deadline_ms;           /* closed by then in any case */
        unsigned records;              /* read and dropped so far */
};

struct hbgd {
        struct hbgd_config cfg;
        struct hbg_engine *engine;
        struct io_loop *loop;
        struct slow_work *slow;       /* slow jobs off the io thread (recordings) */
        struct spare_rings spares;    /* rings' arrays faulted in ahead (spare_rings.h) */
        struct spare_regions regions; /* sessions' regions and channels made ahead (spare_regions.h) */
        struct kernel_rows_packed kernel_reply; /* the session replies' kernel table (kernel_rows.h) */
        struct accounting acct;
        int listen_fd;
        bool listen_owned;            /* we bound it: unlink at exit */
        struct io_source *listen_src;
        int reserve_fd;               /* closed to shed a connection when out of fds */
        int64_t last_shed_log_ms;
        int signal_fd;
        struct io_source *signal_src;
        int timer_fd;
        int tick_ms;                  /* the timer's period now */
        /* hbgd's own eventfd, written by the engine's ring_stopped hook
         * (RUNTIME_LOGIC §12.2). */
        int stopped_fd;
        struct io_source *stopped_src;
        /* Rings of closed sessions still held: the next look (daemon.c's
         * hbgd_collect_soon()); 0: none pending. */
        int collect_wait_ms;
        int64_t collect_at_ms;
        struct io_source *timer_src;
        struct conn *conns;
        struct conn *dead_conns;      /* closed, freed after the io round */
        struct refusal *refusals;     /* refused, waiting for the client to close */
        unsigned n_refusals;
        struct hbgd_ratelimit refusal_log; /* refusal.c's lines ([log] ratelimit_*) */
        unsigned n_conns;
        unsigned n_sessions;          /* connections with a live session */
        uint64_t next_id;
        uint64_t done_tasks, done_graphs, done_graphs_failed; /* of closed sessions */
        struct hbgd_counters counters; /* metrics.h */
        int64_t started_ms;
        bool stopping;
        int64_t stop_deadline_ms;
        bool done;
        /* systemd: watchdog (0 = off) and STATUS= refresh. */
        uint64_t watchdog_usec;
        int64_t last_watchdog_ms;
        uint64_t hb_last[HBG_ENGINE_MAX_THREADS];
        bool watchdog_withheld;       /* logged once per stuck episode */
        int64_t last_status_ms;
        uint64_t last_status_completed;
        struct hbgd_trace trace;      /* the task timeline being taken (tracing.c) */
};

