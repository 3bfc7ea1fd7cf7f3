/* SPDX-License-Identifier: MIT */
/*
 * hbgd's slow-work thread (daemon/slow_work.c):
 * - a job's done that takes back another job finished in the same batch
 *   (a connection closed from its recording's done cancels its session's
 *   pre-fault piece, then frees the session that holds it) must find that
 *   job not yet delivered: its done never runs, the count of jobs in
 *   flight is right, and nothing touches it after the cancel
 *   (AddressSanitizer would say so: the job is freed in the first done);
 * - jobs are taken by class;
 * - a job taken back without waiting still gets its done if it was
 *   running, and never runs if it was queued;
 * - a background job (a session's pre-fault) waits while a hold lasts,
 *   which connects renew (session_prefault_hold()), so that it does not
 *   take a core from the clients connecting; a request's job is never
 *   held; a held job is taken back at once (a session closed meanwhile);
 *   and the hold ends by itself;
 * - a set-up runs on the io thread itself (slow_work_run_here()) only
 *   while the worker runs nothing and no job a client waits for is
 *   queued; its done comes from the loop, not at once; the worker starts
 *   nothing while it runs, and takes up a held job whose hold ended
 *   meanwhile once it returns; other classes never run there; a job run
 *   there is taken back like a finished one (its client left).
 * Counts and orders only, never how long anything took.
 */
#include <check.h>
#include <pthread.h>
#include <semaphore.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "daemon/io_loop.h"
#include "daemon/slow_work.h"
#include "tests/check_main.h"

static struct slow_work *work;
static struct slow_job *other;
static unsigned first_done, other_done;
static bool other_ran;

static void run_first(struct slow_job *j) {
        (void)j;
        usleep(2000);
}

static sem_t other_running;

static void run_other(struct slow_job *j) {
        (void)j;
        sem_post(&other_running);
}

static void done_other(struct slow_job *j) {
        (void)j;
        other_done++;
}

static void done_first(struct slow_job *j) {
        (void)j;
        first_done++;
        other_ran = slow_work_cancel(work, other);
        free(other); /* as session_released frees the session holding it */
        other = NULL;
}

START_TEST(cancel_from_done_of_same_batch) {
        struct io_loop *l;
        const char *note;
        ck_assert_int_eq(io_loop_new(&l, _i == 1, &note), 0);
        ck_assert_int_eq(slow_work_new(&work, l), 0);
        struct slow_job *first = calloc(1, sizeof(*first));
        other = calloc(1, sizeof(*other));
        ck_assert(first && other);
        *first = (struct slow_job){ .run = run_first, .done = done_first, .uid = 1 };
        *other = (struct slow_job){ .run = run_other, .done = done_other, .uid = 1, .class = SLOW_BACKGROUND };
        ck_assert_int_eq(sem_init(&other_running, 0, 0), 0);
        slow_work_submit(work, first);
        slow_work_submit(work, other);
        ck_assert_uint_eq(slow_work_pending(work), 2);
        /* The io thread busy elsewhere meanwhile: both finish (the second
         * after the first: one worker), then their dones run in one turn
         * of the loop. The pause only gives the worker time to file the
         * second as finished; were it still running, the cancel would
         * wait for it, which is right too. */
        ck_assert_int_eq(sem_wait(&other_running), 0);
        usleep(20000);
        for (int i = 0; i < 20 && first_done == 0; i++)
                io_loop_run_once(l, 100);
        ck_assert_uint_eq(first_done, 1);
        ck_assert_msg(other_ran, "the second job had not run: the batch did not happen");
        ck_assert_uint_eq(other_done, 0);
        ck_assert_uint_eq(slow_work_pending(work), 0);
        io_loop_run_once(l, 10);
        ck_assert_uint_eq(other_done, 0);
        work = slow_work_free(work);
        free(first);
        io_loop_free(l);
}
END_TEST

/* Jobs are taken by class: a session's set-up before requests, requests
 * before background work, whatever order they were queued in. */
static char order[32];
static unsigned n_order;
static char names[] = "arbs";

static sem_t slow_started, slow_release;

static void run_slow(struct slow_job *j) {
        (void)j;
        sem_post(&slow_started);
        sem_wait(&slow_release);
}

static void run_quick(struct slow_job *j) {
        (void)j;
}

static void done_note(struct slow_job *j) {
        if (n_order < sizeof(order) - 1)
                order[n_order++] = *(const char *)j->userdata;
}

/* Job a (run_slow) submitted and running: the worker is busy until
 * unblock(), whatever is queued meanwhile. */
static void block_worker(struct slow_job *a) {
        n_order = 0;
        ck_assert_int_eq(sem_init(&slow_started, 0, 0), 0);
        ck_assert_int_eq(sem_init(&slow_release, 0, 0), 0);
        slow_work_submit(work, a);
        ck_assert_int_eq(sem_wait(&slow_started), 0);
}

/* Release the worker, and the order in which n dones ran. */
static const char *unblock_and_collect(struct io_loop *l, unsigned n) {
        sem_post(&slow_release);
        for (int i = 0; i < 200 && n_order < n; i++)
                io_loop_run_once(l, 50);
        order[n_order] = 0;
        return order;
}

START_TEST(classes_in_order) {
        struct io_loop *l;
        const char *note;
        ck_assert_int_eq(io_loop_new(&l, _i == 1, &note), 0);
        ck_assert_int_eq(slow_work_new(&work, l), 0);
        struct slow_job a = { .run = run_slow, .done = done_note, .uid = 5, .userdata = &names[0] };
        struct slow_job r = { .run = run_quick, .done = done_note, .uid = 1, .userdata = &names[1] };
        struct slow_job b = { .run = run_quick, .done = done_note, .uid = 1, .userdata = &names[2],
                              .class = SLOW_BACKGROUND };
        struct slow_job s = { .run = run_quick, .done = done_note, .uid = 9, .userdata = &names[3],
                              .class = SLOW_SETUP };
        block_worker(&a);
        slow_work_submit(work, &b);
        slow_work_submit(work, &r);
        slow_work_submit(work, &s);
        ck_assert_str_eq(unblock_and_collect(l, 4), "asrb");
        work = slow_work_free(work);
        io_loop_free(l);
}
END_TEST

/* A job taken back without waiting (a session closing while its
 * pre-fault piece may wait for a client's punch): a running one is left
 * to run, and its done still comes, once; a queued one never runs and
 * its done never comes. */
START_TEST(detach_without_waiting) {
        struct io_loop *l;
        const char *note;
        ck_assert_int_eq(io_loop_new(&l, _i == 1, &note), 0);
        ck_assert_int_eq(slow_work_new(&work, l), 0);
        struct slow_job a = { .run = run_slow, .done = done_note, .uid = 5, .userdata = &names[0] };
        struct slow_job b = { .run = run_quick, .done = done_note, .uid = 1, .userdata = &names[2],
                              .class = SLOW_BACKGROUND };
        block_worker(&a);
        slow_work_submit(work, &b);
        ck_assert_msg(!slow_work_detach(work, &a), "a running job was taken back");
        ck_assert_msg(slow_work_detach(work, &b), "a queued job was not taken back");
        ck_assert_uint_eq(slow_work_pending(work), 1);
        ck_assert_str_eq(unblock_and_collect(l, 1), "a");
        for (int i = 0; i < 5; i++)
                io_loop_run_once(l, 10);
        ck_assert_uint_eq(n_order, 1);
        ck_assert_uint_eq(slow_work_pending(work), 0);
        work = slow_work_free(work);
        io_loop_free(l);
}
END_TEST

/* Set-ups come first, but after 8 in a row a waiting request has its
 * turn: a user connecting in a loop does not starve others' recordings. */
START_TEST(setups_yield_to_a_request) {
        struct io_loop *l;
        const char *note;
        ck_assert_int_eq(io_loop_new(&l, false, &note), 0);
        ck_assert_int_eq(slow_work_new(&work, l), 0);
        static char names_s[] = "aSr";
        struct slow_job a = { .run = run_slow, .done = done_note, .uid = 5, .userdata = &names_s[0] };
        struct slow_job r = { .run = run_quick, .done = done_note, .uid = 2, .userdata = &names_s[2] };
        struct slow_job set[10];
        block_worker(&a);
        slow_work_submit(work, &r);
        for (unsigned i = 0; i < 10; i++) {
                set[i] = (struct slow_job){ .run = run_quick, .done = done_note, .uid = 9,
                                            .userdata = &names_s[1], .class = SLOW_SETUP };
                slow_work_submit(work, &set[i]);
        }
        ck_assert_str_eq(unblock_and_collect(l, 12), "aSSSSSSSSrSS");
        work = slow_work_free(work);
        io_loop_free(l);
}
END_TEST

struct counted {
        struct slow_job job;
        unsigned runs, dones;
};

static void counted_run(struct slow_job *job) {
        ((struct counted *)job->userdata)->runs++;
}

static void counted_done(struct slow_job *job) {
        ((struct counted *)job->userdata)->dones++;
}

static void counted_init(struct counted *c, bool background) {
        *c = (struct counted){ 0 };
        c->job.run = counted_run;
        c->job.done = counted_done;
        c->job.uid = 1000;
        c->job.class = background ? SLOW_BACKGROUND : SLOW_REQUEST;
        c->job.userdata = c;
}

/* A session's set-up, counted, whose run is `run`. */
static void setup_init(struct counted *c, void (*run)(struct slow_job *job)) {
        counted_init(c, false);
        c->job.class = SLOW_SETUP;
        c->job.run = run;
}

/* Run the io loop until c's done ran (at most about 10 s). */
static void wait_done(struct io_loop *l, const struct counted *c) {
        for (unsigned i = 0; i < 1000 && c->dones == 0; i++)
                ck_assert_int_ge(io_loop_run_once(l, 10), 0);
        ck_assert_msg(c->dones == 1, "the job's done did not run");
}

static void setup(struct io_loop **l, struct slow_work **w) {
        const char *note;
        ck_assert_int_eq(io_loop_new(l, false, &note), 0);
        ck_assert_int_eq(slow_work_new(w, *l), 0);
}

/* While a hold lasts, a background job does not start, even with the
 * worker idle after a request's job; the request's job is not held; the
 * held job is taken back without running. Without the hold, the worker
 * takes the background job as soon as the request's job returns, before
 * its done reaches the io thread. */
START_TEST(background_held) {
        struct io_loop *l;
        struct slow_work *w;
        struct counted bg, req;
        setup(&l, &w);
        counted_init(&bg, true);
        counted_init(&req, false);
        slow_work_hold_background(w, (int64_t)60 * 1000000000);
        slow_work_submit(w, &bg.job);
        slow_work_submit(w, &req.job);
        wait_done(l, &req);
        ck_assert_uint_eq(req.runs, 1);
        ck_assert_uint_eq(slow_work_pending(w), 1);
        ck_assert_msg(!slow_work_cancel(w, &bg.job), "the background job ran during the hold");
        ck_assert_uint_eq(bg.runs, 0);
        ck_assert_uint_eq(bg.dones, 0);
        ck_assert_uint_eq(slow_work_pending(w), 0);
        /* The worker waits for the hold's end: stop wakes it. */
        slow_work_free(w);
        io_loop_free(l);
}
END_TEST

/* A hold ends by itself: a background job queued under it runs once it
 * is over, with nothing else to wake the worker; a shorter hold asked
 * for meanwhile does not cut a longer one short (the job still waits). */
START_TEST(hold_ends) {
        struct io_loop *l;
        struct slow_work *w;
        struct counted bg, req;
        setup(&l, &w);
        counted_init(&bg, true);
        counted_init(&req, false);
        slow_work_hold_background(w, (int64_t)60 * 1000000000);
        slow_work_hold_background(w, 1000000);
        slow_work_submit(w, &bg.job);
        /* Time for the 1 ms to pass: the job must still wait. */
        for (unsigned i = 0; i < 10; i++)
                ck_assert_int_ge(io_loop_run_once(l, 10), 0);
        slow_work_submit(w, &req.job);
        wait_done(l, &req);
        ck_assert_msg(!slow_work_cancel(w, &bg.job) && bg.runs == 0, "a shorter hold ended a longer one");
        slow_work_free(w);
        ck_assert_int_eq(slow_work_new(&w, l), 0);
        counted_init(&bg, true);
        slow_work_hold_background(w, 1000000); /* 1 ms, far shorter than wait_done's patience */
        slow_work_submit(w, &bg.job);
        wait_done(l, &bg);
        ck_assert_uint_eq(bg.runs, 1);
        ck_assert_uint_eq(slow_work_pending(w), 0);
        slow_work_free(w);
        io_loop_free(l);
}
END_TEST

/* A set-up run here, on this thread: it may not run while the worker
 * runs a job; a request never runs here; held background work does not
 * keep it off. */
static struct slow_work *here_work;
static struct counted *here_queued; /* submitted from within the run here */
static pthread_t here_thread;
static bool here_on_this_thread, here_queued_ran_meanwhile;

static void run_here_fn(struct slow_job *job) {
        ((struct counted *)job->userdata)->runs++;
        here_on_this_thread = pthread_equal(pthread_self(), here_thread);
        if (here_queued) {
                /* The worker is free to take it but must not start it
                 * before this run ends. */
                slow_work_submit(here_work, &here_queued->job);
                usleep(20000);
                here_queued_ran_meanwhile = here_queued->runs != 0;
        }
}

/* The caller's `cheap`, saying no: asked with the worker held off (a
 * request submitted meanwhile does not start). */
static bool not_cheap(void *arg) {
        struct counted *queued = arg;
        slow_work_submit(here_work, &queued->job);
        usleep(20000);
        here_queued_ran_meanwhile = queued->runs != 0;
        return false;
}

START_TEST(run_here_when_idle) {
        struct io_loop *l;
        const char *note;
        struct counted setup_job, req, bg, queued;
        ck_assert_int_eq(io_loop_new(&l, _i == 1, &note), 0);
        ck_assert_int_eq(slow_work_new(&here_work, l), 0);
        work = here_work;
        here_thread = pthread_self();
        here_queued = NULL;

        /* Idle: it runs at once, here; its done waits for the loop. */
        setup_init(&setup_job, run_here_fn);
        ck_assert(slow_work_run_here(here_work, &setup_job.job, NULL, NULL));
        ck_assert_uint_eq(setup_job.runs, 1);
        ck_assert_msg(here_on_this_thread, "the job ran on another thread");
        ck_assert_uint_eq(setup_job.dones, 0);
        ck_assert_uint_eq(slow_work_pending(here_work), 1);
        wait_done(l, &setup_job);
        ck_assert_uint_eq(slow_work_pending(here_work), 0);

        /* A request never runs here. */
        counted_init(&req, false);
        ck_assert(!slow_work_run_here(here_work, &req.job, NULL, NULL));
        ck_assert_uint_eq(req.runs, 0);

        /* Not while the worker runs a job. */
        struct slow_job a = { .run = run_slow, .done = done_note, .uid = 5, .userdata = &names[0] };
        block_worker(&a);
        setup_init(&setup_job, run_here_fn);
        ck_assert_msg(!slow_work_run_here(here_work, &setup_job.job, NULL, NULL),
                      "a set-up ran here beside the worker's job");
        ck_assert_uint_eq(setup_job.runs, 0);
        ck_assert_str_eq(unblock_and_collect(l, 1), "a");

        /* Held background work queued: it runs here all the same, and
         * the worker starts nothing meanwhile, not even a request
         * submitted during the run. */
        counted_init(&bg, true);
        slow_work_hold_background(here_work, (int64_t)60 * 1000000000);
        slow_work_submit(here_work, &bg.job);
        counted_init(&queued, false);
        here_queued = &queued;
        ck_assert(slow_work_run_here(here_work, &setup_job.job, NULL, NULL));
        ck_assert_uint_eq(setup_job.runs, 1);
        ck_assert_msg(!here_queued_ran_meanwhile, "the worker started a job while one ran on the io thread");
        wait_done(l, &setup_job);
        wait_done(l, &queued);
        ck_assert_uint_eq(queued.runs, 1);
        ck_assert_msg(!slow_work_cancel(here_work, &bg.job) && bg.runs == 0, "the held job ran");
        ck_assert_uint_eq(slow_work_pending(here_work), 0);

        /* Taken back before its done (the client left): it ran, and its
         * done never comes. */
        here_queued = NULL;
        setup_init(&setup_job, run_here_fn);
        ck_assert(slow_work_run_here(here_work, &setup_job.job, NULL, NULL));
        ck_assert_msg(slow_work_cancel(here_work, &setup_job.job), "a job run here was not reported as run");
        ck_assert_uint_eq(slow_work_pending(here_work), 0);
        for (int i = 0; i < 5; i++)
                ck_assert_int_ge(io_loop_run_once(l, 10), 0);
        ck_assert_uint_eq(setup_job.dones, 0);

        /* Not when `cheap` says no: the job is left as it was, to be
         * submitted (it then runs on the worker). */
        counted_init(&queued, false);
        setup_init(&setup_job, run_here_fn);
        here_queued_ran_meanwhile = false;
        ck_assert(!slow_work_run_here(here_work, &setup_job.job, not_cheap, &queued));
        ck_assert_msg(!here_queued_ran_meanwhile, "the worker started a job while `cheap` was asked");
        ck_assert_uint_eq(setup_job.runs, 0);
        wait_done(l, &queued);
        slow_work_submit(here_work, &setup_job.job);
        wait_done(l, &setup_job);
        ck_assert_msg(setup_job.runs == 1 && !here_on_this_thread, "the job given back did not run on the worker");
        ck_assert_uint_eq(slow_work_pending(here_work), 0);
        here_work = work = slow_work_free(here_work);
        io_loop_free(l);
}
END_TEST

/* A hold that ends while a job runs here: the worker, which found the
 * io thread's job running when its timed wait ended, waits without a
 * time then; the end of the run must wake it for the held job, with no
 * other submit to do so. The held job is submitted from within the run,
 * so the worker cannot have taken it before. */
static struct slow_work *long_work;
static struct counted *long_held;

static void run_here_long(struct slow_job *job) {
        ((struct counted *)job->userdata)->runs++;
        slow_work_hold_background(long_work, 5000000); /* 5 ms: over during the 30 ms run */
        slow_work_submit(long_work, &long_held->job);
        usleep(30000);
}

START_TEST(run_here_wakes_held_work) {
        struct io_loop *l;
        struct slow_work *w;
        struct counted bg, setup_job;
        setup(&l, &w);
        counted_init(&bg, true);
        setup_init(&setup_job, run_here_long);
        long_work = w;
        long_held = &bg;
        ck_assert(slow_work_run_here(w, &setup_job.job, NULL, NULL));
        wait_done(l, &setup_job);
        wait_done(l, &bg);
        ck_assert_uint_eq(bg.runs, 1);
        ck_assert_uint_eq(slow_work_pending(w), 0);
        slow_work_free(w);
        io_loop_free(l);
}
END_TEST

static Suite *suite(void) {
        Suite *s = suite_create("slow_work");
        TCase *t = tcase_create("done");
        tcase_set_timeout(t, 30);
        /* _i: 0 io_uring, 1 epoll */
        tcase_add_loop_test(t, cancel_from_done_of_same_batch, 0, 2);
        tcase_add_loop_test(t, classes_in_order, 0, 2);
        tcase_add_test(t, setups_yield_to_a_request);
        tcase_add_loop_test(t, detach_without_waiting, 0, 2);
        tcase_add_loop_test(t, run_here_when_idle, 0, 2);
        suite_add_tcase(s, t);
        t = tcase_create("hold");
        tcase_set_timeout(t, 60);
        tcase_add_test(t, background_held);
        tcase_add_test(t, hold_ends);
        tcase_add_test(t, run_here_wakes_held_work);
        suite_add_tcase(s, t);
        return s;
}

const struct check_main check_main = { .suite = suite };
