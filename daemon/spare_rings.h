/* SPDX-License-Identifier: MIT */
/*
 * [session] spare_rings (docs/RUNTIME_LOGIC.md §10.1): hbgd keeps that many
 * rings' private arrays of the default session geometry mapped and faulted
 * in (hbg_engine_spare_fill()), so that the next sessions' first graphs
 * touch warm pages instead of taking a fault per page. The work is one
 * background job on the slow-work thread, a piece at a time, held back
 * while connects go on like a session's own pre-fault (session.c). The
 * spares are hbgd's own memory, charged to nobody; there are fewer when
 * [limits] max_memory less the sessions' charges would not hold them. All
 * calls are the io thread's.
 *
 * After a burst (sessions set up each within SPARE_BURST_GAP_MS of the
 * one before), hbgd keeps as many spares as the burst had sessions that
 * stayed at least SPARE_BURST_STAYED_MS (counted at their close), up to
 * [session] spare_rings_burst, for spare_rings_burst_s after the last of
 * them closed: producers that start together again (a
 * job's workers) find their arrays warm. Then the count goes back to
 * spare_rings and the memory with it. Sessions that come and go at once
 * (a connect loop) count nothing, and a burst of them with none that
 * stayed ends the hold: spares faulted in for such sessions serve nobody,
 * and filling them takes a CPU from the connects.
 */
#pragma once

#include <stdbool.h>

#include "daemon/engine/engine.h"
#include "daemon/engine/engine_spares.h"
#include "daemon/slow_work.h"

struct hbgd;

struct spare_rings {
        struct slow_job job;
        bool queued;                    /* job submitted, not done yet */
        bool again;                     /* asked for meanwhile: submit again when done */
        int logged;                     /* the last error logged (once until a fill succeeds) */
        bool gave_up;                   /* the kernel cannot pre-fault: never again */
        struct hbg_geometry g;          /* the job's copies of the config's */
        unsigned want;
        int result;                     /* hbg_engine_spare_fill()'s, set by the job */
        /* Bursts (spare_rings_session_set_up()): the last set-up, the
         * current burst (1, 2, ...) and its sessions that stayed, the
         * largest such count still held, and until when (clock_now_ms()). */
        int64_t last_setup_ms;
        uint64_t burst;
        unsigned burst_stayed;          /* closed after they stayed */
        unsigned burst_left;            /* closed before */
        unsigned burst_peak;
        int64_t burst_until_ms;
};

/* Fill towards [session] spare_rings of the default geometry now in force
 * (after a start, a session that may have taken one, a reload): the job is
 * queued unless it is already. */
void spare_rings_want(struct hbgd *d);

struct session;

/* Session s was set up: it joins the current burst or starts one; then
 * as spare_rings_want(). */
void spare_rings_session_set_up(struct hbgd *d, struct session *s);

/* Session s is closing: if it stayed long enough, it counts towards its
 * burst (the spares filled after the job, not while it runs); if not,
 * against. */
void spare_rings_session_closing(struct hbgd *d, struct session *s);

/* The tick: a burst's hold over, the spares go back to spare_rings. */
void spare_rings_tick(struct hbgd *d, int64_t now_ms);

/* A session was charged: drop the spares that no longer fit in [limits]
 * max_memory beside the sessions' charges. */
void spare_rings_make_room(struct hbgd *d);

/* Take the job back (before the slow-work thread is freed). */
void spare_rings_stop(struct hbgd *d);
