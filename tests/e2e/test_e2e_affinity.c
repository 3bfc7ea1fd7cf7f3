/* SPDX-License-Identifier: MIT */
/*
 * hbgd end to end, the scheduler threads' CPU moves (RUNTIME_LOGIC §9.4):
 * a real hbgd on a private socket, its threads and this producer pinned
 * to CPUs by hand. A test of its own so that tests/scripts/run-tests.sh
 * can run it alone (HBG_TEST_ALONE): a busy test beside it shares the
 * CPU it pins everything to, and a round of 20,000 graphs took about
 * 50 s there instead of under one.
 */
#include <check.h>
#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "hbg/hbg.h"
#include "proto/wire.h"
#include "shm/layout.h"
#include "tests/e2e/e2e_util.h"
#include "tests/test_util.h"
#include "tests/check_main.h"

/* fn(tid, arg) for every thread of process pid (a thread that just ended
 * may be left out): 0, or the last -errno fn or /proc gave. */
static int each_thread(pid_t pid, int (*fn)(pid_t tid, void *arg), void *arg) {
        char path[64];
        snprintf(path, sizeof(path), "/proc/%d/task", (int)pid);
        DIR *dir = opendir(path);
        if (!dir)
                return -errno;
        int err = 0, e;
        struct dirent *de;
        while ((de = readdir(dir)) != NULL)
                if (de->d_name[0] != '.' && (e = fn((pid_t)atoi(de->d_name), arg)) < 0)
                        err = e;
        closedir(dir);
        return err;
}

static int pin_one(pid_t tid, void *set) {
        return sched_setaffinity(tid, sizeof(cpu_set_t), set) < 0 ? -errno : 0;
}

/* Every thread of process pid to CPUs `set`: 0, or -errno. */
static int pin_threads(pid_t pid, const cpu_set_t *set) {
        return each_thread(pid, pin_one, (void *)(uintptr_t)set);
}

struct allowed_check {
        const cpu_set_t *set;
        char *why;
        size_t size;
};

static int allowed_one(pid_t tid, void *arg) {
        struct allowed_check *a = arg;
        cpu_set_t now;
        if (sched_getaffinity(tid, sizeof(now), &now) < 0)
                return 0; /* a thread that just ended */
        if (CPU_EQUAL(&now, a->set))
                return 0;
        snprintf(a->why, a->size, "thread %d may run on %d CPUs, not the %d it was given", (int)tid,
                 CPU_COUNT(&now), CPU_COUNT(a->set));
        return -EINVAL;
}

/* Every thread of pid may run on exactly `set`. */
static bool threads_allowed(pid_t pid, const cpu_set_t *set, char *why, size_t size) {
        struct allowed_check a = { set, why, size };
        int err = each_thread(pid, allowed_one, &a);
        if (err < 0 && err != -EINVAL)
                snprintf(why, size, "/proc/%d/task: %s", (int)pid, strerror(-err));
        return err == 0;
}

/* Every thread of pid may run on exactly `set`, once any move in flight
 * ended (a thread between a move's two calls holds one CPU less): true,
 * or false with why after 10 looks 2 ms apart. */
static bool threads_settle_on(pid_t pid, const cpu_set_t *set, char *why, size_t size) {
        for (unsigned i = 0; i < 10; i++) {
                if (threads_allowed(pid, set, why, size))
                        return true;
                usleep(2000);
        }
        return false;
}

/* The threads' cpu_moves, summed, through a fresh connection (an idle one
 * is closed after the handshake timeout, which a slow, sanitized loop
 * passes). */
static uint64_t cpu_moves(struct hbgd_proc *d) {
        int fd = raw_connect(d->socket_path);
        raw_hello(fd);
        send_status_request(fd, HBG__STATUS_KIND__STATUS_THREADS, NULL, 0);
        Hbg__Envelope *env = expect_env(fd, HBG__ENVELOPE__MSG_STATUS_REPLY, NULL, 0);
        const Hbg__StatusReply *s = env->status_reply;
        uint64_t moves = 0;
        for (size_t i = 0; i < s->n_threads; i++)
                moves += s->threads[i]->cpu_moves;
        wire_free(env);
        close(fd);
        return moves;
}

/* n 1-task graphs back to back; the graphs after which the session's
 * answer_moving (ch, when not NULL) was seen set. */
static unsigned busy_graphs(struct hbgd_proc *d, hbg_client *c, unsigned n, const char *what,
                            const struct hbg_cpl_header *ch) {
        unsigned moving = 0;
        for (unsigned i = 0; i < n; i++) {
                hbg_task t = HBG_TASK_INIT("noop");
                uint64_t g;
                int err = hbg_graph_add(c, &t, NULL);
                err = err ? err : hbg_graph_submit(c, &g);
                err = err ? err : hbg_graph_wait(c, g, 10000);
                D_ASSERT(d, err == 0, "%s graph %u: %s", what, i, hbg_strerror(err));
                if (ch && atomic_load_explicit(&ch->answer_moving, memory_order_relaxed))
                        moving++;
        }
        return moving;
}

/*
 * An idle scheduler thread whose spin shares its CPU with the producer it
 * answers moves itself to another CPU (RUNTIME_LOGIC §9.4), and leaves its
 * allowed CPUs as they were; with [scheduler] move_off_shared_cpu = 0 it
 * never does. Made to happen: hbgd's threads and this producer pinned to
 * CPU 0 (no move can succeed there, and failed ones are not counted),
 * then hbgd's threads given CPUs 0 and 1 (they stay on 0 until something
 * moves them), and 1-task graphs back to back. The balancer may move a
 * thread first (the threads spread before any shares the producer's
 * CPU), and a round sees few moves: 0-5 in most, none in about one round
 * of four, in streaks, on a loaded 2-CPU machine. A move must be seen in
 * one of ten rounds (a round takes well under a second). A thread that
 * moves marks the session it answered (answer_moving in its completion
 * region, read here through this process's own mapping) for the move's
 * length only: clear once the threads settled, and never set with moves
 * off. _i: the io backend, then (N_MODES) moves turned off.
 */
START_TEST(spin_moves_keep_affinity) {
        bool off = _i >= N_MODES;
        int mode = off ? MODE_URING : _i;
        if (sysconf(_SC_NPROCESSORS_ONLN) < 2) {
                fprintf(stderr, "spin_moves_keep_affinity: one CPU, skipped\n");
                return;
        }
        cpu_set_t mine, cpu0, both;
        ck_assert_int_eq(sched_getaffinity(0, sizeof(mine), &mine), 0);
        if (!CPU_ISSET(0, &mine) || !CPU_ISSET(1, &mine)) {
                fprintf(stderr, "spin_moves_keep_affinity: CPUs 0 and 1 not both allowed, skipped\n");
                return;
        }
        CPU_ZERO(&cpu0);
        CPU_SET(0, &cpu0);
        both = cpu0;
        CPU_SET(1, &both);
        struct hbgd_proc *d = off ? start_hbgd_conf(mode, "[scheduler]\nmove_off_shared_cpu = 0\n")
                                  : start_hbgd(mode, NULL);
        hbg_client *c = NULL;
        int err = hbg_connect(&c, d->socket_path);
        D_ASSERT(d, err == 0, "hbg_connect: %s [%s]", hbg_strerror(err), hbg_last_error(NULL));
        uint64_t session = 0, size = 0;
        const struct hbg_cpl_header *ch = find_session_mapping("cpl", &session, &size);
        D_ASSERT(d, ch && size >= sizeof(*ch), "the session's completion region is not in /proc/self/maps");
        uint64_t moves = 0;
        char why[160];
        for (unsigned round = 0; round < (off ? 1u : 10u) && moves == 0; round++) {
                D_ASSERT(d, pin_threads(d->pid, &cpu0) == 0, "pinning hbgd to CPU 0");
                ck_assert_int_eq(sched_setaffinity(0, sizeof(cpu0), &cpu0), 0);
                busy_graphs(d, c, 200, "warm-up", NULL); /* every thread runs on CPU 0 once */
                uint64_t before = cpu_moves(d);
                D_ASSERT(d, pin_threads(d->pid, &both) == 0, "giving hbgd CPUs 0 and 1");
                unsigned marked = busy_graphs(d, c, 20000, "busy", ch);
                ck_assert_int_eq(sched_setaffinity(0, sizeof(mine), &mine), 0);
                D_ASSERT(d, threads_settle_on(d->pid, &both, why, sizeof(why)), "after the moves: %s", why);
                moves = cpu_moves(d) - before;
                fprintf(stderr, "spin_moves_keep_affinity (%s%s): round %u: %" PRIu64 " moves off the producer's "
                        "CPU, answer_moving seen after %u graphs\n", mode_name(mode),
                        off ? ", move_off_shared_cpu = 0" : "", round, moves, marked);
                D_ASSERT(d, atomic_load_explicit(&ch->answer_moving, memory_order_relaxed) == 0,
                         "answer_moving still set after the threads settled (round %u, %" PRIu64 " moves)", round,
                         moves);
                if (off)
                        D_ASSERT(d, marked == 0, "move_off_shared_cpu = 0, yet answer_moving was set");
        }
        if (off)
                D_ASSERT(d, moves == 0, "move_off_shared_cpu = 0, yet %" PRIu64 " moves", moves);
        else
                D_ASSERT(d, moves > 0, "no scheduler thread moved off the CPU it shared with a spinning producer");
        hbg_disconnect(c);
        stop_hbgd(d);
}
END_TEST

static Suite *suite(void) {
        Suite *s = suite_create("e2e_affinity");
        TCase *tc = tcase_create("spin");
        tcase_set_timeout(tc, 600);
        tcase_add_loop_test(tc, spin_moves_keep_affinity, MODE_URING, N_MODES + 1); /* and moves off */
        suite_add_tcase(s, tc);
        return s;
}

const struct check_main check_main = {
        .suite = suite,
        .ignore_sigpipe = true,
        .setup = daemon_util_setup,
        .teardown = daemon_util_cleanup,
};
