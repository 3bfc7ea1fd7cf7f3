/* SPDX-License-Identifier: MIT */
/*
 * hbgd's slow-work queue (daemon/slow_work.c): a job's done that takes
 * back another job finished in the same batch (a connection closed from
 * its recording's done cancels its session's pre-fault piece, then frees
 * the session that holds it) must find that job not yet delivered: its
 * done never runs, the count of jobs in flight is right, and nothing
 * touches it after the cancel (AddressSanitizer would say so: the job is
 * freed in the first done). And the order in which jobs are taken.
 */
#include <check.h>
#include <stdbool.h>
#include <stdlib.h>
#include <unistd.h>

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

static void run_other(struct slow_job *j) {
        (void)j;
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
        slow_work_submit(work, first);
        slow_work_submit(work, other);
        ck_assert_uint_eq(slow_work_pending(work), 2);
        /* The io thread busy elsewhere meanwhile: both finish, then their
         * dones run in one turn of the loop. */
        usleep(200000);
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
static char order[8];
static unsigned n_order;
static char names[] = "arbs";

static void run_slow(struct slow_job *j) {
        (void)j;
        usleep(20000);
}

static void run_quick(struct slow_job *j) {
        (void)j;
}

static void done_note(struct slow_job *j) {
        if (n_order < sizeof(order) - 1)
                order[n_order++] = *(const char *)j->userdata;
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
        n_order = 0;
        slow_work_submit(work, &a); /* runs at once, for 20 ms */
        usleep(5000);
        slow_work_submit(work, &b);
        slow_work_submit(work, &r);
        slow_work_submit(work, &s);
        for (int i = 0; i < 100 && n_order < 4; i++)
                io_loop_run_once(l, 50);
        order[n_order] = 0;
        ck_assert_str_eq(order, "asrb");
        work = slow_work_free(work);
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
        suite_add_tcase(s, t);
        return s;
}

const struct check_main check_main = { .suite = suite };
