/* SPDX-License-Identifier: MIT */
/*
 * [session] spare_rings (docs/RUNTIME_LOGIC.md §10.1): hbgd keeps that many
 * rings' private arrays of the default session geometry mapped and faulted
 * in (engine_spare_fill()), so that the next sessions' first graphs
 * touch warm pages instead of taking a fault per page. The work is one
 * background job on the slow-work thread, a piece at a time, held back
 * while connects go on like a session's own pre-fault (session.c). The
 * spares are hbgd's own memory, charged to nobody; there are fewer when
 * [limits] max_memory less the sessions' charges would not hold them. All
 * calls are the io thread's.
 *
 * After a burst (sessions of the spares' size set up each within
 * SPARE_BURST_GAP_MS of the one before), hbgd keeps as many spares as the
 * burst had sessions that stayed at least SPARE_BURST_STAYED_MS (counted
 * at their close; no more than were open at once), up to [session]
 * spare_rings_burst, for spare_rings_burst_s after the last of them
 * closed: producers that start together again (a job's workers) find
 * their arrays warm. Then (at the next tick) the count goes back to
 * spare_rings and the memory with it. Sessions that come and go at once
 * (a connect loop) count nothing, and two of them in a burst with none
 * that stayed end the hold: spares faulted in for such sessions serve
 * nobody, and filling them takes a CPU from the connects. With
 * spare_rings = 0 there are none, bursts or not. A burst's sessions that
 * close after a later burst began count for nothing.
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
        int result;                     /* engine_spare_fill()'s, set by the job */
        /* Bursts (spare_rings_session_set_up()) of sessions of the
         * spares' size: the last set-up; the current burst (1, 2, ...),
         * its sessions open now and at most at once, those closed after
         * they stayed and before; the count held, the burst it is of,
         * and until when (clock_now_ms()). */
        int64_t last_setup_ms;
        uint64_t burst;
        unsigned burst_open, burst_open_max;
        unsigned burst_stayed, burst_quit;
        unsigned held;
        uint64_t held_burst;
        int64_t held_until_ms;
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
 * burst (the spares filled after the job, not while it runs); two that
 * did not, with none that did, end the hold. The caller asks for the
 * fill (spare_rings_want()) after the session's close. */
void spare_rings_session_closing(struct hbgd *d, struct session *s);

/* The tick: a burst's hold over, the spares go back to spare_rings. */
void spare_rings_tick(struct hbgd *d, int64_t now_ms);

/* A session was charged: drop the spares that no longer fit in [limits]
 * max_memory beside the sessions' charges. */
void spare_rings_make_room(struct hbgd *d);

/* Take the job back (before the slow-work thread is freed). */
void spare_rings_stop(struct hbgd *d);
