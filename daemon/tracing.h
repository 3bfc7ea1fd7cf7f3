/* SPDX-License-Identifier: MIT */
/* The task timeline's requests (daemon/tracing.c; docs/PROTOCOL.md,
 * "Tracing"). */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct hbgd;
struct conn;
struct Hbg__TraceRequest;
struct hbg_trace_event;

/* The one trace hbgd holds at a time (the engine records it; this says
 * whose it is and how far its reader got). Zeroed: none. */
struct hbgd_trace {
        uint64_t owner;                /* the connection that started it; 0: none */
        bool admin;                    /* owner is an admin: not taken over by another */
        bool running;                  /* recording */
        int64_t deadline_ms;           /* recording ends then */
        int64_t stop_ns;               /* when it ended (CLOCK_MONOTONIC) */
        uint64_t session;              /* its filter (struct hbg_trace_filter) */
        int64_t uid;
        /* Graphs not retired when it stopped (HBG_TRACE_GRAPH records
         * ending then), sent after the threads' records. */
        struct hbg_trace_event *open;
        size_t n_open;
        unsigned thread;               /* the fetch cursor: thread (n: the open graphs), then record */
        uint64_t index;
};

/* Answer a TraceRequest on c. 0, or a negative errno if the reply could
 * not be sent (the caller closes the connection). */
int tracing_reply(struct conn *c, const struct Hbg__TraceRequest *rq);
/* The connection `id` closes: its trace goes. */
void tracing_conn_closed(struct hbgd *d, uint64_t id);
/* The housekeeping tick: a trace past its duration stops; one nobody
 * fetched within 30 s of its end goes. */
void tracing_tick(struct hbgd *d, int64_t now_ms);
