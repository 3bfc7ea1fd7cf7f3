/* SPDX-License-Identifier: MIT */
/*
 * hbgd's io loop (daemon/io_loop.c) when io_uring has no free SQE: every
 * poll arm and every poll removal that finds the submission queue full
 * waits for a later round and goes out then, none is dropped. A dropped
 * arm is a connection hbgd never serves again; a dropped removal keeps a
 * closed socket open in the kernel (the poll holds the file), so its
 * client never sees the hang-up.
 *
 * The kernel's refusal is injected at link time (-Wl,--wrap=io_uring_submit):
 * while `refuse` is set, submissions fail as a busy kernel's do and the
 * queue stays full. Both backends run the same cases; epoll has no SQE to
 * run out of, so there they check only the behaviour.
 *
 * And a source deleted while it waits on the again list is not freed
 * before the list lets go of it (AddressSanitizer would see the next
 * round read it).
 */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <liburing.h>
#include <signal.h>
#include <stdbool.h>
#include <string.h>
#include <unistd.h>

#include "daemon/io_loop.h"
#include "tests/check_main.h"

/* ------------------------------------------------------------ injection */

static bool refuse;

int __real_io_uring_submit(struct io_uring *ring);
int __wrap_io_uring_submit(struct io_uring *ring);

int __wrap_io_uring_submit(struct io_uring *ring) {
        return refuse ? -EBUSY : __real_io_uring_submit(ring);
}

/* ------------------------------------------------------------ cases */

/* More sources than the loop's submission queue holds (256). */
enum { N = 300, ROUNDS = 200 };

struct pipe_src {
        int rd, wr;
        struct io_source *src;
        unsigned calls;
};

static void on_readable(struct io_source *src, uint32_t events, void *userdata) {
        struct pipe_src *p = userdata;
        char buf[16];
        (void)src;
        (void)events;
        while (read(p->rd, buf, sizeof(buf)) > 0)
                ;
        p->calls++;
}

static struct io_loop *new_loop(int mode) {
        struct io_loop *l;
        const char *note;
        ck_assert_int_eq(io_loop_new(&l, mode == 1, &note), 0);
        if (mode == 0 && strcmp(io_loop_backend(l), "io_uring") != 0) {
                io_loop_free(l);
                return NULL; /* no io_uring here: the epoll run covers it */
        }
        return l;
}

static void open_pipes(struct pipe_src *p) {
        for (unsigned i = 0; i < N; i++) {
                int fds[2];
                ck_assert_int_eq(pipe2(fds, O_NONBLOCK | O_CLOEXEC), 0);
                p[i] = (struct pipe_src){ .rd = fds[0], .wr = fds[1] };
        }
}

/* Sources added while the kernel takes no SQE are armed once it does. */
START_TEST(arms_wait_for_sqes) {
        struct io_loop *l = new_loop(_i);
        if (!l)
                return;
        static struct pipe_src p[N];
        open_pipes(p);
        refuse = true;
        for (unsigned i = 0; i < N; i++)
                ck_assert_int_eq(io_loop_add(l, p[i].rd, on_readable, &p[i], &p[i].src), 0);
        refuse = false;
        if (_i == 0)
                ck_assert_msg(io_loop_ops_deferred(l) > 0, "no operation had to wait: the case tests nothing");
        for (unsigned i = 0; i < N; i++)
                ck_assert_int_eq(write(p[i].wr, "x", 1), 1);
        unsigned called = 0;
        for (unsigned r = 0; r < ROUNDS && called < N; r++) {
                ck_assert_int_ge(io_loop_run_once(l, 10), 0);
                called = 0;
                for (unsigned i = 0; i < N; i++)
                        called += p[i].calls > 0;
        }
        ck_assert_msg(called == N, "%u of %u sources were served (the others' arms were lost)", called, N);
        for (unsigned i = 0; i < N; i++) {
                io_source_del(l, p[i].src);
                close(p[i].rd);
                close(p[i].wr);
        }
        io_loop_run_once(l, 0);
        io_loop_free(l);
}
END_TEST

/* Sources deleted while the kernel takes no SQE have their polls removed
 * once it does: the file is released, a writer sees EPIPE. */
START_TEST(removals_wait_for_sqes) {
        struct io_loop *l = new_loop(_i);
        if (!l)
                return;
        static struct pipe_src p[N];
        open_pipes(p);
        for (unsigned i = 0; i < N; i++)
                ck_assert_int_eq(io_loop_add(l, p[i].rd, on_readable, &p[i], &p[i].src), 0);
        ck_assert_int_ge(io_loop_run_once(l, 0), 0);
        refuse = true;
        for (unsigned i = 0; i < N; i++) {
                io_source_del(l, p[i].src);
                close(p[i].rd);
        }
        refuse = false;
        if (_i == 0)
                ck_assert_msg(io_loop_ops_deferred(l) > 0, "no operation had to wait: the case tests nothing");
        unsigned released = 0;
        for (unsigned r = 0; r < ROUNDS && released < N; r++) {
                ck_assert_int_ge(io_loop_run_once(l, 10), 0);
                released = 0;
                for (unsigned i = 0; i < N; i++)
                        released += write(p[i].wr, "x", 1) < 0 && errno == EPIPE;
        }
        ck_assert_msg(released == N, "%u of %u pipes released (the others' poll removals were lost)", released, N);
        for (unsigned i = 0; i < N; i++)
                close(p[i].wr);
        io_loop_free(l);
}
END_TEST

/* A callback called again (io_source_again()) that asks for another call
 * and then deletes its source, as a connection closed by a later step of
 * the same turn: the source is on the next round's again list, and
 * must live until that round has passed it over. */
static unsigned again_calls;

static void again_then_delete(struct io_source *src, uint32_t events, void *userdata) {
        struct io_loop *l = userdata;
        (void)events;
        again_calls++;
        io_source_again(l, src);
        io_source_del(l, src);
}

START_TEST(deleted_while_due_again) {
        struct io_loop *l = new_loop(_i);
        if (!l)
                return;
        again_calls = 0;
        int fds[2];
        ck_assert_int_eq(pipe2(fds, O_NONBLOCK | O_CLOEXEC), 0);
        struct io_source *src;
        ck_assert_int_eq(io_loop_add(l, fds[0], again_then_delete, l, &src), 0);
        io_source_again(l, src);
        ck_assert_int_ge(io_loop_run_once(l, 0), 0);
        ck_assert_uint_eq(again_calls, 1);
        for (int i = 0; i < 3; i++)
                ck_assert_int_ge(io_loop_run_once(l, 10), 0);
        ck_assert_uint_eq(again_calls, 1);
        io_loop_free(l);
        close(fds[0]);
        close(fds[1]);
}
END_TEST

static Suite *suite(void) {
        Suite *s = suite_create("io_loop");
        TCase *t = tcase_create("sqe");
        tcase_set_timeout(t, 60);
        /* _i: 0 io_uring, 1 epoll */
        tcase_add_loop_test(t, arms_wait_for_sqes, 0, 2);
        tcase_add_loop_test(t, removals_wait_for_sqes, 0, 2);
        tcase_add_loop_test(t, deleted_while_due_again, 0, 2);
        suite_add_tcase(s, t);
        return s;
}

const struct check_main check_main = { .suite = suite, .ignore_sigpipe = true };
