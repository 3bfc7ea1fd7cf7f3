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
};

/* Fill towards [session] spare_rings of the default geometry now in force
 * (after a start, a session that may have taken one, a reload): the job is
 * queued unless it is already. */
void spare_rings_want(struct hbgd *d);

/* A session was charged: drop the spares that no longer fit in [limits]
 * max_memory beside the sessions' charges. */
void spare_rings_make_room(struct hbgd *d);

/* Take the job back (before the slow-work thread is freed). */
void spare_rings_stop(struct hbgd *d);
