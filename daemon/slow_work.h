/* SPDX-License-Identifier: MIT */
/*
 * The io side's one way to run slow work (validating a big recording, and
 * whatever else would hold the io thread for long): a job runs on a worker
 * thread of its own, and its `done` runs back on the io thread, so status
 * requests, connects and other clients' requests go on meanwhile. (A short
 * job that would wait for nothing may run on the io thread itself
 * instead: slow_work_run_here().)
 *
 * Jobs are taken round robin by uid (the next uid above the last one
 * served, then the lowest), first in first out within a uid: one user's
 * queue of jobs delays another user's job by at most one job per uid
 * ahead of it, however many it queues. A caller keeps at most one job per
 * connection in flight (conn.c stops reading until `done`), so the queue
 * is bounded by the connection limits. Jobs come in classes, each taken
 * only when no job of a class before it waits: a session's set-up (about
 * 100 us) before requests (recordings, validations; after 8 set-ups in a
 * row a waiting request has its turn), and those before
 * background work (a session's pre-fault, at most one piece per session).
 * A job waits for at most the one that runs, and the jobs of the classes
 * before its own. Background jobs do not start while a hold lasts
 * (slow_work_hold_background()), so that they do not take a core from
 * clients busy connecting.
 *
 * All calls but the job's `run` are the io thread's (and that one's too
 * for a job run by slow_work_run_here()).
 */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "daemon/io_loop.h"

struct slow_work;

/* In the order they are taken (slow_work.c's table). */
enum slow_class {
        SLOW_REQUEST = 0,              /* a request's work (the default: zero) */
        SLOW_SETUP,                    /* a session's set-up: a connect waits for it; first */
        SLOW_BACKGROUND,               /* nobody waits for it; last */
        SLOW_CLASSES,
};

struct slow_job {
        /* On the worker thread (or the io thread, slow_work_run_here()):
         * the work. Touches only what the job owns and what does not
         * change while it runs. */
        void (*run)(struct slow_job *job);
        /* On the io thread, once run returned (not after slow_work_cancel()). */
        void (*done)(struct slow_job *job);
        uid_t uid;                     /* whose work: the fairness key */
        enum slow_class class;         /* see above */
        void *userdata;                /* the submitter's */
        /* The queue's own (slow_work.c). */
        struct slow_job *next;
        int state;
};

int slow_work_new(struct slow_work **ret, struct io_loop *loop);
/* Joins the worker; every job must be done or cancelled. Accepts NULL. */
struct slow_work *slow_work_free(struct slow_work *w);

/* Queue job (run, done and uid set by the caller, the rest zero). */
void slow_work_submit(struct slow_work *w, struct slow_job *job);
/* Run job here, on the io thread, if the worker runs nothing and no job
 * a client waits for (a set-up or a request) is queued, if its class may
 * run here (set-ups only: about 100 us, bounded; slow_work.c's table),
 * and if cheap(arg) (NULL: always) says so, asked once the worker is held
 * off (what the worker's jobs change cannot change under it then): true,
 * and its done comes from the io loop once the caller's callback has
 * returned (later in this round or in the next), as a worker's job's
 * does; it may be taken back meanwhile like any finished job
 * (slow_work_cancel()). The worker starts nothing meanwhile, so the job
 * has the same exclusion as on the worker. False: nothing was done;
 * submit it. This saves a lone connect the two cross-thread wake-ups of
 * the hand-off (docs/PERFORMANCE.md). */
bool slow_work_run_here(struct slow_work *w, struct slow_job *job, bool (*cheap)(void *arg), void *arg);
/* Take a submitted job back (its owner goes away): a queued job is
 * removed without running; a running one is waited for (one job's time at
 * most); `done` is not called either way. Returns whether `run` ran. */
bool slow_work_cancel(struct slow_work *w, struct slow_job *job);
/* Take a submitted job back without waiting for it: true if it will not
 * run (it was queued, or it ran and `done` is not called now); false if
 * it is running: then `done` is called on the io thread once `run`
 * returns, as for any job, and the job's owner must live until then and
 * neither submit nor cancel the job before that `done`. At
 * slow_work_free() such a job finishes its run and gets no `done`. */
bool slow_work_detach(struct slow_work *w, struct slow_job *job);

/* Background jobs start none for ns from now (a longer hold already set
 * stays); one running goes on. A job of the other class ends no hold. */
void slow_work_hold_background(struct slow_work *w, int64_t ns);

/* Jobs waiting and running now (for status). */
unsigned slow_work_pending(const struct slow_work *w);
