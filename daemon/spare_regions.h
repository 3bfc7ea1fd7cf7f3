/* SPDX-License-Identifier: MIT */
/*
 * [session] spare_regions (docs/OPERATIONS.md): hbgd keeps that many sets
 * of a session's regions and channels of the default geometry made ahead
 * (session_regions.h), so that a session's build takes one instead of
 * creating two memfds, mapping them, faulting in their headers and
 * making two channels: about 70 us of the slow-work thread, which the
 * connects of a burst wait for one after another (docs/PERFORMANCE.md,
 * "Connects at once, without each other's set-up").
 * A background job on the slow-work thread makes them, one set a run,
 * held back while connects go on like the other background work; a set
 * is never handed out before a build takes it, so each is fresh, and a
 * build takes one only for exactly the sets' geometry. A set costs two
 * header pages, two mappings' address space and six fds, charged to
 * nobody. With any sets, the job also keeps a wake page made ahead for
 * the next uid new to hbgd (engine_wake_page_ahead()). Calls are the io
 * thread's but spare_regions_take() (the build's: on the slow-work thread,
 * or on the io thread with the slow-work thread held off) and
 * spare_regions_ready() (any thread's, before spare_regions_stop()).
 */
#pragma once

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "daemon/session_regions.h"
#include "daemon/slow_work.h"
#include "shm/geometry.h"

/* The most [session] spare_regions may say. */
#define SPARE_REGIONS_MAX 64u

struct hbgd;

struct spare_regions {
        pthread_mutex_t lock;           /* the sets: taken by builds, made and dropped by
                                           the job, freed at the stop */
        bool lock_ready;
        struct hbg_geometry g;          /* the sets' geometry */
        struct session_regions set[SPARE_REGIONS_MAX];
        unsigned n;
        uint64_t made;                  /* sets made so far: their memfds' names */
        uint64_t taken;                 /* sets builds took so far (hbgctl status) */
        /* The job: the io thread's but for its run. */
        struct slow_job job;
        bool queued;                    /* submitted, not done yet */
        bool again;                     /* asked for meanwhile: submit again when done */
        struct hbg_geometry want_g;     /* the default geometry at the ask */
        unsigned want;                  /* [session] spare_regions at the ask */
        int result;                     /* the run's: 1 more to make, 0 done, -errno */
        int logged;                     /* the last error logged (once until a fill is complete) */
        bool failed;                    /* the last run failed: retried when a session is freed */
};

/* Before any other call: 0 or -errno. */
int spare_regions_init(struct spare_regions *s);

/* Towards [session] spare_regions of the default geometry now in force
 * (after the start, a session's build submitted, a reload): the job is
 * queued unless it is already. */
void spare_regions_want(struct hbgd *d);

/* After sessions were freed (their fds and memory given back): the fill
 * again if its last run failed (out of fds or memory) or may yet (one is
 * queued or running), not only at the next session's set-up. */
void spare_regions_retry(struct hbgd *d);

/* A set of geometry g into *ret, if one is ready: true. The build's. */
bool spare_regions_take(struct spare_regions *s, const struct hbg_geometry *g, struct session_regions *ret);

/* Is a set of geometry g ready now (a build would take it)? A set goes
 * when a build takes it, when the fill drops it (after a reload) or at
 * spare_regions_stop(): asked on the io thread while neither a build nor
 * the fill runs, the answer holds until one does. */
bool spare_regions_have(struct spare_regions *s, const struct hbg_geometry *g);

/* The sets ready now; *ret_taken: how many builds took one since the
 * start. */
unsigned spare_regions_ready(struct spare_regions *s, uint64_t *ret_taken);

/* The job taken back (a running run finishes first), every set freed.
 * After it nothing but spare_regions_take() (which finds none). */
void spare_regions_stop(struct hbgd *d);
