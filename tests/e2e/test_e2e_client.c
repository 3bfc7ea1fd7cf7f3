/* SPDX-License-Identifier: MIT */
/*
 * libhbgclient's argument rules against a real hbgd, as a producer meets
 * them:
 *   in_place    numpy's out= style runs: add_f32(x, x, x), mul_f32(x, y, x),
 *               axpy_f32(x, x), copy_f32(x, x), in blocks too, with the
 *               results checked element by element;
 *   refused     a partial overlap of an output with an input, and inputs
 *               shorter or longer than the output, are refused by
 *               hbg_graph_add() with -EINVAL and a message naming both
 *               arguments (hbgd refuses them too: test_kernel_validation and
 *               test_engine_validation);
 *   other_release
 *               an hbgd whose completion region says another shared-memory
 *               layout (a stand-in passing on a real hbgd's session with a
 *               copy of that region): hbg_connect() fails with -EPROTO and
 *               a message giving both sides' versions;
 *   event_loop_fd
 *               hbg_client_fd()'s descriptor is made at its first call: a
 *               client that never asks holds no epoll or eventfd; two
 *               threads asking at once get one descriptor; it starts
 *               quiet before any task; a loop on it (poll, hbg_client_process()) runs
 *               a chain of host functions to the end; the disconnect
 *               closes it;
 *   event_loop_fd_after_full_mailbox
 *               hbg_client_process() stopped by a full mailbox before the
 *               descriptor existed (hbgd stopped meanwhile): the descriptor
 *               made afterwards starts readable, and the loop runs the host
 *               functions left.
 */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <dirent.h>
#include <unistd.h>

#include "hbg/hbg.h"
#include "tests/e2e/daemon_util.h"
#include "tests/e2e/e2e_util.h"
#include "tests/check_main.h"

#define N 1000u

static hbg_task binary(const char *kernel, hbg_tensor a, hbg_tensor b, hbg_tensor out, uint16_t blocks) {
        hbg_task t = HBG_TASK_INIT(kernel);
        t.blocks = blocks;
        t.n_args = 3;
        t.args[0].tensor = a;
        t.args[0].dir = HBG_IN;
        t.args[1].tensor = b;
        t.args[1].dir = HBG_IN;
        t.args[2].tensor = out;
        t.args[2].dir = HBG_OUT;
        return t;
}

static void run(struct hbgd_proc *d, hbg_client *c, const hbg_task *t, const char *what) {
        uint64_t g;
        int err = hbg_graph_add(c, t, NULL);
        D_ASSERT(d, err == 0, "%s: hbg_graph_add: %s [%s]", what, hbg_strerror(err), hbg_last_error(c));
        err = hbg_graph_submit(c, &g);
        D_ASSERT(d, err == 0, "%s: submit: %s", what, hbg_strerror(err));
        err = hbg_graph_wait(c, g, 60000);
        D_ASSERT(d, err == 0, "%s: the graph failed: %s [%s]", what, hbg_strerror(err), hbg_last_error(c));
}

START_TEST(in_place) {
        struct hbgd_proc *d = start_hbgd(MODE_URING, NULL);
        hbg_client *c = NULL;
        int err = hbg_connect(&c, d->socket_path);
        D_ASSERT(d, err == 0, "hbg_connect: %s [%s]", hbg_strerror(err), hbg_last_error(NULL));
        hbg_tensor x, y;
        ck_assert_int_eq(hbg_tensor_alloc(c, N * sizeof(float), &x), 0);
        ck_assert_int_eq(hbg_tensor_alloc(c, N * sizeof(float), &y), 0);
        float *px = hbg_tensor_data(c, x), *py = hbg_tensor_data(c, y);
        float want[N];
        for (unsigned i = 0; i < N; i++) {
                px[i] = want[i] = (float)i * 0.5f - 7.0f;
                py[i] = (float)(i % 13) - 3.0f;
        }
        /* x += x, in 4 blocks. */
        hbg_task t = binary("add_f32", x, x, x, 4);
        run(d, c, &t, "add_f32(x, x, x)");
        for (unsigned i = 0; i < N; i++)
                want[i] = want[i] + want[i];
        /* x *= y. */
        t = binary("mul_f32", x, y, x, 3);
        run(d, c, &t, "mul_f32(x, y, x)");
        for (unsigned i = 0; i < N; i++)
                want[i] = want[i] * py[i];
        /* y = x + y, the output the second input. */
        t = binary("add_f32", x, y, y, 1);
        run(d, c, &t, "add_f32(x, y, y)");
        float wy[N];
        for (unsigned i = 0; i < N; i++)
                wy[i] = want[i] + ((float)(i % 13) - 3.0f);
        /* x = 2.5 x + x. */
        t = (hbg_task)HBG_TASK_INIT("axpy_f32");
        t.blocks = 2;
        t.n_args = 2;
        t.args[0].tensor = x;
        t.args[0].dir = HBG_IN;
        t.args[1].tensor = x;
        t.args[1].dir = HBG_INOUT;
        t.n_scalars = 1;
        t.scalars[0] = hbg_f32(2.5f);
        run(d, c, &t, "axpy_f32(x, x)");
        for (unsigned i = 0; i < N; i++)
                want[i] = 2.5f * want[i] + want[i];
        /* copy x to x: nothing changes. */
        t = (hbg_task)HBG_TASK_INIT("copy_f32");
        t.n_args = 2;
        t.args[0].tensor = x;
        t.args[0].dir = HBG_IN;
        t.args[1].tensor = x;
        t.args[1].dir = HBG_OUT;
        run(d, c, &t, "copy_f32(x, x)");
        for (unsigned i = 0; i < N; i++) {
                D_ASSERT(d, memcmp(&px[i], &want[i], sizeof(float)) == 0, "x[%u] = %.9g, expected %.9g", i,
                         (double)px[i], (double)want[i]);
                D_ASSERT(d, memcmp(&py[i], &wy[i], sizeof(float)) == 0, "y[%u] = %.9g, expected %.9g", i,
                         (double)py[i], (double)wy[i]);
        }
        hbg_disconnect(c);
        stop_hbgd(d);
}
END_TEST

static void expect_refused(struct hbgd_proc *d, hbg_client *c, const hbg_task *t, const char *a,
                           const char *b, const char *what) {
        int err = hbg_graph_add(c, t, NULL);
        const char *msg = hbg_last_error(c);
        D_ASSERT(d, err == -EINVAL, "%s: hbg_graph_add returned %d (%s), expected -EINVAL", what, err,
                 hbg_strerror(err));
        D_ASSERT(d, strstr(msg, a) && strstr(msg, b), "%s: the message does not name %s and %s: %s", what, a,
                 b, msg);
        fprintf(stderr, "%s: %s\n", what, msg);
}

START_TEST(refused) {
        struct hbgd_proc *d = start_hbgd(MODE_URING, NULL);
        hbg_client *c = NULL;
        int err = hbg_connect(&c, d->socket_path);
        D_ASSERT(d, err == 0, "hbg_connect: %s [%s]", hbg_strerror(err), hbg_last_error(NULL));
        hbg_tensor x, y, big, part;
        ck_assert_int_eq(hbg_tensor_alloc(c, N * sizeof(float), &x), 0);
        ck_assert_int_eq(hbg_tensor_alloc(c, N * sizeof(float), &y), 0);
        ck_assert_int_eq(hbg_tensor_alloc(c, 2 * N * sizeof(float), &big), 0);
        /* The output shifted by one element over input a: partial. */
        ck_assert_int_eq(hbg_tensor_slice_f32(big, 1, N + 1, &part), 0);
        hbg_tensor a0;
        ck_assert_int_eq(hbg_tensor_slice_f32(big, 0, N, &a0), 0);
        hbg_task t = binary("add_f32", a0, y, part, 1);
        expect_refused(d, c, &t, "argument 2 (out)", "argument 0 (a)", "add_f32 out overlapping a partly");
        /* Lengths: a shorter, a longer than the output. */
        hbg_tensor shorter;
        ck_assert_int_eq(hbg_tensor_slice_f32(x, 0, N - 1, &shorter), 0);
        t = binary("mul_f32", shorter, y, big, 1);
        expect_refused(d, c, &t, "argument 0 (a)", "argument 2 (out)", "mul_f32 a shorter than out");
        t = binary("mul_f32", big, y, x, 1);
        expect_refused(d, c, &t, "argument 0 (a)", "argument 2 (out)", "mul_f32 a longer than out");
        /* Nothing was added: the session goes on. */
        t = binary("add_f32", x, y, y, 1);
        run(d, c, &t, "a good task after the refusals");
        hbg_disconnect(c);
        stop_hbgd(d);
}
END_TEST

/* hbg_connect() to path in a child: its result and message on fd. */
static void connect_in_child(const char *path, int fd) {
        hbg_client *c = NULL;
        int err = hbg_connect(&c, path);
        char out[1024];
        int n = snprintf(out, sizeof(out), "%d %s", err, err < 0 ? hbg_last_error(NULL) : "");
        if (write(fd, out, (size_t)n) != n)
                _exit(1);
        _exit(0);
}

START_TEST(other_release) {
        struct hbgd_proc *d = start_hbgd(MODE_URING, NULL);
        /* The real session, got on a raw connection. */
        int real = raw_connect(d->socket_path);
        raw_hello(real);
        Hbg__SessionRequest sr = HBG__SESSION_REQUEST__INIT;
        Hbg__Envelope req = HBG__ENVELOPE__INIT;
        req.msg_case = HBG__ENVELOPE__MSG_SESSION_REQUEST;
        req.session_request = &sr;
        send_env(real, &req, NULL, 0);
        int fds[SESSION_FDS];
        Hbg__Envelope *reply = expect_env(real, HBG__ENVELOPE__MSG_SESSION_REPLY, fds, SESSION_FDS);
        /* Its completion region, copied into a memfd of ours that says the
         * next layout version. */
        size_t size = reply->session_reply->cpl_region_size;
        char *copy = calloc(1, size);
        ck_assert_ptr_nonnull(copy);
        ck_assert_int_eq(pread(fds[1], copy, size, 0), (ssize_t)size);
        ((struct hbg_cpl_header *)(void *)copy)->layout_version = HBG_LAYOUT_VERSION + 1;
        int other = memfd_create("hbg-cpl-other", MFD_CLOEXEC | MFD_ALLOW_SEALING);
        ck_assert_int_ge(other, 0);
        ck_assert_int_eq(write(other, copy, size), (ssize_t)size);
        free(copy);
        close(fds[1]);
        fds[1] = other;

        /* The stand-in's socket, and the client. */
        struct sockaddr_un a = { .sun_family = AF_UNIX };
        int len = snprintf(a.sun_path, sizeof(a.sun_path), "%.100s.other", d->socket_path);
        ck_assert(len > 0 && (size_t)len < sizeof(a.sun_path));
        int lfd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
        ck_assert_int_ge(lfd, 0);
        ck_assert_int_eq(bind(lfd, (struct sockaddr *)&a, sizeof(a)), 0);
        ck_assert_int_eq(listen(lfd, 1), 0);
        int res[2];
        ck_assert_int_eq(pipe2(res, O_CLOEXEC), 0);
        pid_t kid = fork();
        ck_assert_int_ge(kid, 0);
        if (kid == 0) {
                close(res[0]);
                connect_in_child(a.sun_path, res[1]);
        }
        close(res[1]);
        int cfd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
        ck_assert_int_ge(cfd, 0);
        wire_free(expect_env(cfd, HBG__ENVELOPE__MSG_HELLO, NULL, 0));
        wire_free(expect_env(cfd, HBG__ENVELOPE__MSG_SESSION_REQUEST, NULL, 0));
        Hbg__Hello hello;
        Hbg__Envelope out;
        wire_hello(&out, &hello, "hbgd 9.0.0");
        send_env(cfd, &out, NULL, 0);
        send_env(cfd, reply, fds, SESSION_FDS);

        char said[1024] = "";
        ssize_t n = read(res[0], said, sizeof(said) - 1);
        ck_assert_int_gt(n, 0);
        said[n] = 0;
        int st;
        ck_assert_int_eq(waitpid(kid, &st, 0), kid);
        char want_ours[64], want_theirs[64];
        snprintf(want_ours, sizeof(want_ours), "shared-memory layout %u)", HBG_LAYOUT_VERSION);
        snprintf(want_theirs, sizeof(want_theirs), "shared-memory layout %u;", HBG_LAYOUT_VERSION + 1);
        ck_assert_msg(atoi(said) == -EPROTO && strstr(said, "must come from the same release") &&
                              strstr(said, "hbgd says 'hbgd 9.0.0'") && strstr(said, want_ours) &&
                              strstr(said, want_theirs) && strstr(said, "libhbgclient " HBG_VERSION),
                      "hbg_connect to an hbgd of another layout: %s", said);
        wire_free(reply);
        for (unsigned i = 0; i < SESSION_FDS; i++)
                close(fds[i]);
        close(cfd);
        close(lfd);
        close(res[0]);
        unlink(a.sun_path);
        close(real);
        stop_hbgd(d);
}
END_TEST

/* This process's descriptors whose link reads `what`. */
static int fds_of(const char *what) {
        DIR *dir = opendir("/proc/self/fd");
        ck_assert_ptr_nonnull(dir);
        int n = 0;
        for (struct dirent *e; (e = readdir(dir));) {
                char path[PATH_MAX], link[256];
                snprintf(path, sizeof(path), "/proc/self/fd/%s", e->d_name);
                ssize_t len = readlink(path, link, sizeof(link) - 1);
                if (len > 0) {
                        link[len] = 0;
                        n += strcmp(link, what) == 0;
                }
        }
        closedir(dir);
        return n;
}

struct asker {
        hbg_client *c;
        pthread_barrier_t *go;
};

static void *ask_fd(void *arg) {
        struct asker *a = arg;
        pthread_barrier_wait(a->go);
        return (void *)(intptr_t)hbg_client_fd(a->c);
}

static int count_call(void *ud) {
        (*(int *)ud)++;
        return 0;
}

/* An event loop on fd until graph g of `tasks` host functions (each
 * counting a call) ends: it must succeed with every function run once. */
static void run_loop(struct hbgd_proc *d, hbg_client *c, int fd, uint64_t g, const int *calls, int tasks) {
        struct pollfd p = { .fd = fd, .events = POLLIN };
        int st = 1;
        for (int turn = 0; turn < 10 * tasks && st == 1; turn++) {
                D_ASSERT(d, poll(&p, 1, 10000) == 1, "hbg_client_fd() not readable with %d of %d host functions run",
                         *calls, tasks);
                ck_assert_int_ge(hbg_client_process(c), 0);
                st = hbg_graph_status(c, g, NULL);
        }
        ck_assert_int_eq(st, 0);
        ck_assert_int_eq(*calls, tasks);
}

#define EPOLL_LINK "anon_inode:[eventpoll]"
#define EVENTFD_LINK "anon_inode:[eventfd]"
#define LOOP_TASKS 20

START_TEST(event_loop_fd) {
        struct hbgd_proc *d = start_hbgd(MODE_URING, NULL);
        int epolls = fds_of(EPOLL_LINK), eventfds = fds_of(EVENTFD_LINK);
        hbg_client *c = NULL;
        int err = hbg_connect(&c, d->socket_path);
        D_ASSERT(d, err == 0, "hbg_connect: %s [%s]", hbg_strerror(err), hbg_last_error(NULL));
        ck_assert_int_eq(fds_of(EPOLL_LINK), epolls);
        ck_assert_int_eq(fds_of(EVENTFD_LINK), eventfds);

        pthread_t t[2];
        void *fd[2];
        pthread_barrier_t go;
        ck_assert_int_eq(pthread_barrier_init(&go, NULL, 2), 0);
        struct asker a = { c, &go };
        for (int i = 0; i < 2; i++)
                ck_assert_int_eq(pthread_create(&t[i], NULL, ask_fd, &a), 0);
        for (int i = 0; i < 2; i++)
                ck_assert_int_eq(pthread_join(t[i], &fd[i]), 0);
        pthread_barrier_destroy(&go);
        int loop_fd = (int)(intptr_t)fd[0];
        ck_assert_int_ge(loop_fd, 0);
        ck_assert_int_eq((int)(intptr_t)fd[1], loop_fd);
        ck_assert_int_eq(hbg_client_fd(c), loop_fd);
        ck_assert_int_eq(fds_of(EPOLL_LINK), epolls + 1);
        ck_assert_int_eq(fds_of(EVENTFD_LINK), eventfds + 1);
        /* Nothing added yet: nothing to wake for. */
        struct pollfd p = { .fd = loop_fd, .events = POLLIN };
        ck_assert_int_eq(poll(&p, 1, 0), 0);

        /* No workers: host functions run only in hbg_client_process(). */
        int calls = 0;
        uint64_t prev = 0, g;
        for (int i = 0; i < LOOP_TASKS; i++) {
                hbg_task task = HBG_TASK_INIT(NULL);
                task.host_fn = count_call;
                task.host_userdata = &calls;
                if (i) {
                        task.n_deps = 1;
                        task.deps[0] = prev;
                }
                err = hbg_graph_add(c, &task, &prev);
                D_ASSERT(d, err == 0, "hbg_graph_add: %s [%s]", hbg_strerror(err), hbg_last_error(c));
        }
        ck_assert_int_eq(hbg_graph_submit(c, &g), 0);
        run_loop(d, c, loop_fd, g, &calls, LOOP_TASKS);
        hbg_disconnect(c);
        ck_assert_int_eq(fds_of(EPOLL_LINK), epolls);
        ck_assert_int_eq(fds_of(EVENTFD_LINK), eventfds);
        stop_hbgd(d);
}
END_TEST

#define MAILBOX 16
#define FULL_TASKS (4 * MAILBOX)

START_TEST(event_loop_fd_after_full_mailbox) {
        struct hbgd_proc *d = start_hbgd(MODE_URING, NULL);
        hbg_connect_options o = HBG_CONNECT_OPTIONS_INIT;
        o.socket_path = d->socket_path;
        o.mailbox = MAILBOX;
        hbg_client *c = NULL;
        int err = hbg_connect_opts(&c, &o);
        D_ASSERT(d, err == 0, "hbg_connect_opts: %s [%s]", hbg_strerror(err), hbg_last_error(NULL));
        int calls = 0;
        uint64_t g;
        for (int i = 0; i < FULL_TASKS; i++) {
                hbg_task task = HBG_TASK_INIT(NULL);
                task.host_fn = count_call;
                task.host_userdata = &calls;
                err = hbg_graph_add(c, &task, NULL);
                D_ASSERT(d, err == 0, "hbg_graph_add: %s [%s]", hbg_strerror(err), hbg_last_error(c));
        }
        ck_assert_int_eq(hbg_graph_submit(c, &g), 0);
        /* Every task ready (independent host tasks: at once), then hbgd
         * stopped: it consumes no mailbox entry, so the call stops once
         * the mailbox is full, with no descriptor to make readable. */
        usleep(200 * 1000);
        /* Until every thread of hbgd is stopped: SIGSTOP stops them only
         * once the thread it woke has taken it, and a thread running on
         * the other CPU meanwhile could keep the mailbox from filling. */
        freeze(d);
        int ran = hbg_client_process(c);
        D_ASSERT(d, ran > 0 && ran < FULL_TASKS, "hbg_client_process ran %d of %d with hbgd stopped", ran,
                 FULL_TASKS);
        /* Made while hbgd still writes nothing: readable by its start
         * alone. */
        int fd = hbg_client_fd(c);
        ck_assert_int_ge(fd, 0);
        struct pollfd now = { .fd = fd, .events = POLLIN };
        int readable = poll(&now, 1, 0);
        thaw(d);
        ck_assert_msg(readable == 1, "hbg_client_fd() made after the call left work is not readable");
        run_loop(d, c, fd, g, &calls, FULL_TASKS);
        hbg_disconnect(c);
        stop_hbgd(d);
}
END_TEST

static Suite *suite(void) {
        Suite *s = suite_create("e2e_client");
        TCase *tc = tcase_create("arguments");
        tcase_set_timeout(tc, 120);
        tcase_add_test(tc, in_place);
        tcase_add_test(tc, refused);
        tcase_add_test(tc, other_release);
        tcase_add_test(tc, event_loop_fd);
        tcase_add_test(tc, event_loop_fd_after_full_mailbox);
        suite_add_tcase(s, tc);
        return s;
}

const struct check_main check_main = {
        .suite = suite,
        .ignore_sigpipe = true,
        .setup = daemon_util_setup,
        .teardown = daemon_util_cleanup,
};
