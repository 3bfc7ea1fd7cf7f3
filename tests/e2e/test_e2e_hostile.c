/* SPDX-License-Identifier: MIT */
/*
 * hbgd against one hostile local user, at its sockets: each test makes one
 * attack on a real hbgd (tests/e2e/daemon_util.c) the way the attacker
 * would, then checks that hbgd survived and still serves others (a status
 * request on a fresh connection is answered, an honest client's graphs
 * complete with the right results), that its fd count returns to the
 * baseline where that makes sense, and that it exits 0 on SIGTERM. Here:
 * a half-closed connection, the completion pipe and the doorbell abused,
 * a descriptor sent on the doorbell, the accept queue, connection caps, a
 * handshake never finished, pipelined requests, recording requests made
 * up. The attacks on the scheduler are test_e2e_hostile_engine.c, on the
 * limits and the slow-work thread test_e2e_hostile_limits.c, on fair
 * share test_e2e_hostile_fair.c (shared helpers: hostile_util.h).
 *
 * Each attack here goes through the io loop and runs once per backend
 * (_i = MODE_URING, MODE_EPOLL); the io_uring run is skipped (said so on
 * stderr) where io_uring is unavailable. HBG_TEST_SCALE=N divides the
 * honest clients' work and the rings of the doorbell attack.
 * Tests of per-uid limits act as uid 65534 (nobody) from a forked child
 * and need root: without root they are left out and the binary exits 77
 * when everything else passed. HBG_TEST_VERBOSE=1 shows hbgd's log.
 */
#include <check.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <linux/futex.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/userfaultfd.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/clock.h"
#include "hbg/hbg.h"
#include "proto/wire.h"
#include "shm/layout.h"
#include "daemon/engine/wakeup.h"
#include "tests/e2e/e2e_kid.h"
#include "tests/e2e/e2e_util.h"
#include "tests/e2e/hostile_util.h"
#include "tests/test_util.h"
#include "tests/check_main.h"

static unsigned scale(void) {
        return test_scale_or(1);
}

/* hbgd for tests opening hundreds of connections: per-uid limits do not
 * apply to root; anyone else needs more than the default 64. */
static struct hbgd_proc *start_hbgd_many(int mode) {
        if (geteuid() == 0)
                return start_hbgd(mode, NULL);
        return start_hbgd_conf(mode, "[limits]\nmax_connections_per_uid = 1024\n");
}

/* ------------------------------------------------------------ 1. shut_rd */

/* Hello + SessionRequest, then wait to be killed mid-handshake. */
static int half_handshake_fn(int sock, void *arg) {
        int fd = cx_connect(arg, false);
        if (fd < 0) {
                kid_say(sock, "FAIL connect: %s", strerror(-fd));
                return 1;
        }
        cx_send(fd, HBG__ENVELOPE__MSG_HELLO, 0, 0);
        cx_send(fd, HBG__ENVELOPE__MSG_SESSION_REQUEST, 0, 0);
        kid_say(sock, "SENT");
        kid_cmd(sock);
        return 0;
}

START_TEST(shut_rd_then_requests) {
        int mode = _i;
        if (skip_mode(mode, "shut_rd_then_requests"))
                return;
        struct hbgd_proc *d = start_hbgd(mode, NULL);
        int base = fd_baseline(d);

        /* The reply to the session request cannot be sent (we shut our
         * receiving side): hbgd drops the connection, and must not touch
         * it again for the status requests queued behind. */
        int fd = raw_connect(d->socket_path);
        raw_hello(fd);
        ck_assert_int_eq(shutdown(fd, SHUT_RD), 0);
        int sent = 0, err = cx_send(fd, HBG__ENVELOPE__MSG_SESSION_REQUEST, 0, 0);
        for (int i = 0; err == 0 && i < 5; i++, sent++)
                err = cx_send(fd, HBG__ENVELOPE__MSG_STATUS_REQUEST, 0, 0);
        fprintf(stderr, "shut_rd (%s): session request and %d status requests sent%s%s\n", mode_name(mode), sent,
                err ? ", then " : "", err ? strerror(-err) : "");
        long long ms = fresh_status(d, IO_MS, "after SHUT_RD + requests");
        assert_alive(d);
        close(fd);
        assert_fd_baseline(d, base, "shut_rd: after the connection closed");
        assert_serving(d);
        fprintf(stderr, "shut_rd (%s): hbgd answered a fresh client in %lld ms\n", mode_name(mode), ms);

        /* Clients killed mid-handshake, then SIGTERM at once. */
        unsigned kills = 50 / scale() < 10 ? 10 : 50 / scale();
        struct kid *kids = calloc(kills, sizeof(*kids));
        ck_assert_ptr_nonnull(kids);
        char buf[256];
        for (unsigned i = 0; i < kills; i++) {
                kid_start(&kids[i], SAME_UID, half_handshake_fn, d->socket_path);
                kid_expect(d, &kids[i], "SENT", IO_MS, buf, sizeof(buf), "a client killed mid-handshake");
                kill(kids[i].pid, SIGKILL);
        }
        for (unsigned i = 0; i < kills; i++)
                kid_kill(&kids[i]);
        free(kids);
        stop_within_grace(d, "shut_rd: SIGTERM after clients were killed mid-handshake");
}
END_TEST

/* ------------------------------------------------------------ 2, 3. channel abuse */

/* Open fds of this process, as a bitmap of the first 1024. */
static void fd_snapshot(uint8_t map[128]) {
        memset(map, 0, 128);
        DIR *dir = opendir("/proc/self/fd");
        if (!dir)
                return;
        struct dirent *e;
        while ((e = readdir(dir))) {
                int fd = atoi(e->d_name);
                if (e->d_name[0] != '.' && fd >= 0 && fd < 1024 && fd != dirfd(dir))
                        map[fd / 8] |= (uint8_t)(1u << (fd % 8));
        }
        closedir(dir);
}

static bool is_fifo(int fd) {
        struct stat st;
        return fstat(fd, &st) == 0 && S_ISFIFO(st.st_mode);
}

static bool is_dgram_socket(int fd) {
        int type = 0;
        socklen_t len = sizeof(type);
        return getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &len) == 0 && type == SOCK_DGRAM;
}

/* hbg_connect, then the one new fd that `is` picks out (hbgd's channel). */
static int connect_and_find(int sock, const char *path, hbg_client **c, bool (*is)(int), const char *what) {
        uint8_t before[128], after[128];
        fd_snapshot(before);
        int err = hbg_connect(c, path);
        if (err < 0) {
                kid_say(sock, "FAIL hbg_connect: %s [%s]", hbg_strerror(err), hbg_last_error(NULL));
                return -1;
        }
        fd_snapshot(after);
        int found = -1, n = 0;
        for (int fd = 0; fd < 1024; fd++)
                if ((after[fd / 8] & ~before[fd / 8]) & (1u << (fd % 8)) && is(fd)) {
                        found = fd;
                        n++;
                }
        if (n != 1) {
                kid_say(sock, "FAIL %d new fds look like the %s after hbg_connect, expected 1", n, what);
                return -1;
        }
        return found;
}

struct attack {
        const char *path;
        bool verify;            /* wait for 'C', then check the graphs retired */
        unsigned rings;         /* doorbell sends before "READY" */
};

/* The completion channel: blocking, shrunk to a page, filled by a writer
 * of our own, then graphs submitted and the pipe never read. */
static int completion_attack_fn(int sock, void *arg) {
        const struct attack *a = arg;
        hbg_client *c = NULL;
        int fd = connect_and_find(sock, a->path, &c, is_fifo, "completion pipe");
        if (fd < 0)
                return 1;
        if (fcntl(fd, F_SETFL, 0) < 0 || fcntl(fd, F_SETPIPE_SZ, 4096) < 0) {
                kid_say(sock, "FAIL fcntl on the completion pipe: %s", strerror(errno));
                return 1;
        }
        char path[64];
        snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
        int w = open(path, O_WRONLY | O_NONBLOCK | O_CLOEXEC);
        if (w < 0) {
                kid_say(sock, "FAIL open %s for writing: %s", path, strerror(errno));
                return 1;
        }
        char junk[512] = { 0 };
        size_t filled = 0;
        ssize_t n;
        while ((n = write(w, junk, sizeof(junk))) > 0 || (n < 0 && errno == EINTR))
                filled += n > 0 ? (size_t)n : 0;
        while ((n = write(w, junk, 1)) > 0)
                filled++;
        if (errno != EAGAIN) {
                kid_say(sock, "FAIL filling the pipe: %s", strerror(errno));
                return 1;
        }
        enum { GRAPHS = 200 };
        uint64_t graphs[GRAPHS];
        for (unsigned i = 0; i < GRAPHS; i++) {
                hbg_task t = HBG_TASK_INIT("noop");
                int err = hbg_graph_add(c, &t, NULL);
                if (err == 0)
                        err = hbg_graph_submit(c, &graphs[i]);
                if (err < 0) {
                        kid_say(sock, "FAIL graph %u: %s [%s]", i, hbg_strerror(err), hbg_last_error(c));
                        return 1;
                }
        }
        kid_say(sock, "READY %zu", filled);
        if (!a->verify || kid_cmd(sock) != 'C') {
                kid_cmd(sock);
                return 0;
        }
        /* hbg_graph_status reads the graph table, never the pipe. */
        long long deadline = daemon_now_ms() + IO_MS;
        unsigned done = 0;
        while (done < GRAPHS && daemon_now_ms() < deadline) {
                int st = hbg_graph_status(c, graphs[done], NULL);
                if (st == 1) {
                        sleep_us(5000);
                        continue;
                }
                if (st != 0) {
                        kid_say(sock, "FAIL graph %u: %s [%s]", done, hbg_strerror(st), hbg_last_error(c));
                        return 1;
                }
                done++;
        }
        kid_say(sock, "RETIRED %u", done);
        kid_cmd(sock);
        return 0;
}

static void *blocking_recv(void *arg) {
        char b;
        ssize_t n = recv(*(int *)arg, &b, 1, 0); /* hbgd never sends: blocks for good */
        (void)n;
        return NULL;
}

/* The doorbell: blocking, a thread blocked reading it, and a->rings sends
 * with no work behind them (waiting out a full queue, for at most
 * WAIT_MS), then more until told to stop. */
static int doorbell_attack_fn(int sock, void *arg) {
        const struct attack *a = arg;
        hbg_client *c = NULL;
        static int fd;
        fd = connect_and_find(sock, a->path, &c, is_dgram_socket, "doorbell socket");
        if (fd < 0)
                return 1;
        if (fcntl(fd, F_SETFL, 0) < 0) {
                kid_say(sock, "FAIL fcntl on the doorbell: %s", strerror(errno));
                return 1;
        }
        pthread_t th;
        if (pthread_create(&th, NULL, blocking_recv, &fd) != 0) {
                kid_say(sock, "FAIL pthread_create");
                return 1;
        }
        unsigned sent = 0, full = 0;
        long long deadline = daemon_now_ms() + WAIT_MS;
        while (sent < a->rings && daemon_now_ms() < deadline) {
                if (send(fd, "x", 1, MSG_DONTWAIT | MSG_NOSIGNAL) == 1) {
                        sent++;
                } else if (errno == EAGAIN) {
                        full++;
                        sleep_us(50);
                } else {
                        kid_say(sock, "FAIL send on the doorbell: %s", strerror(errno));
                        return 1;
                }
        }
        kid_say(sock, "READY %u (queue full %u times)", sent, full);
        /* And on, until the parent has seen enough. */
        while (!kid_cmd_pending(sock))
                if (send(fd, "x", 1, MSG_DONTWAIT | MSG_NOSIGNAL) != 1)
                        sleep_us(100);
        kid_cmd(sock);
        _exit(0); /* the reading thread never returns */
}

/* 10^6 doorbell rings at HBG_TEST_SCALE=1. */
static unsigned doorbell_rings(void) {
        return 1000000 / hostile_scale();
}

static void channel_abuse(int mode, kid_fn attack_fn, const char *name) {
        struct hbgd_proc *d = start_hbgd(mode, NULL);
        int base = fd_baseline(d);
        char buf[256], who[96];
        snprintf(who, sizeof(who), "%s (%s): the attacker", name, mode_name(mode));

        struct attack a = { .path = d->socket_path, .verify = true, .rings = doorbell_rings() };
        struct kid k;
        long long t0 = daemon_now_ms();
        wait_slow_work_idle(d); /* the spare ring made: in the baseline */
        long rss0 = daemon_status_kib(d->pid, "VmRSS");
        kid_start(&k, SAME_UID, attack_fn, &a);
        const char *what = kid_expect(d, &k, "READY", WAIT_MS + IO_MS, buf, sizeof(buf), who);
        fprintf(stderr, "%s (%s): attacker ready after %lld ms (%s: %s)\n", name, mode_name(mode),
                daemon_now_ms() - t0, attack_fn == completion_attack_fn ? "bytes in its pipe" : "doorbell sends",
                what);
        if (attack_fn == doorbell_attack_fn)
                D_ASSERT(d, strtoul(what, NULL, 10) == a.rings, "%s: only %s of %u doorbell rings went through",
                         name, what, a.rings);

        honest_graphs(d, 50 / scale() + 1, name);
        long long ms = fresh_status(d, LIVE_MS, name);
        if (attack_fn == completion_attack_fn) {
                kid_tell(&k, 'C');
                what = kid_expect(d, &k, "RETIRED", WAIT_MS, buf, sizeof(buf), who);
                D_ASSERT(d, strcmp(what, "200") == 0, "%s: only %s of the attacker's 200 graphs retired", name,
                         what);
        }
        long rss = daemon_status_kib(d->pid, "VmRSS");
        fprintf(stderr, "%s (%s): honest client ok, status in %lld ms; hbgd RSS %ld -> %ld KiB\n", name,
                mode_name(mode), ms, rss0, rss);
        kid_kill(&k);
        assert_fd_baseline(d, base, name);
        /* Plain builds only: the sanitizers' own allocations swamp it (they
         * check leaks at hbgd's exit instead). A session of the default
         * geometry is a few MiB of touched pages. */
        if (HBG_TEST_BUILD_SCALE == 1)
                D_ASSERT(d, rss0 > 0 && rss > 0 && rss <= rss0 + 32 * 1024,
                         "%s: hbgd's RSS grew from %ld to %ld KiB during the attack", name, rss0, rss);

        /* A second attacker stays connected through SIGTERM. */
        a.verify = false;
        kid_start(&k, SAME_UID, attack_fn, &a);
        kid_expect(d, &k, "READY", IO_MS, buf, sizeof(buf), who);
        assert_serving(d);
        stop_within_grace(d, name);
        kid_kill(&k);
}

START_TEST(completion_channel_abuse) {
        if (!skip_mode(_i, "completion_channel_abuse"))
                channel_abuse(_i, completion_attack_fn, "completion_channel_abuse");
}
END_TEST

START_TEST(doorbell_abuse) {
        if (!skip_mode(_i, "doorbell_abuse"))
                channel_abuse(_i, doorbell_attack_fn, "doorbell_abuse");
}
END_TEST

/*
 * A dead client's session is freed (issue of the doorbell queue): hello,
 * a session, a recording of 65,536 tasks (hbgd validates it meanwhile),
 * then 200 one-byte doorbell datagrams and one more carrying the client's
 * own control socket (SCM_RIGHTS), then _exit. Read only 16 datagrams per
 * event, the doorbell kept the control socket in flight for good, so it
 * never hung up: the session, its fds, memory and quota slot stayed. As
 * uid 65534 with max_sessions_per_uid = 1: a second session of that uid
 * is granted only if the first was freed.
 */
#define DOORBELL_RECORDED_TASKS 65536

static int doorbell_in_flight_fn(int sock, void *arg) {
        int fds[SESSION_FDS];
        int fd = kid_session(sock, arg, fds);
        int mfd = recording_of(DOORBELL_RECORDED_TASKS);
        if (fd < 0 || mfd < 0) {
                kid_say(sock, "FAIL session or recording memfd");
                return 1;
        }
        send_record_request(fd, DOORBELL_RECORDED_TASKS, &mfd, 1);
        for (unsigned i = 0; i < 200; i++)
                send(fds[2], "x", 1, MSG_DONTWAIT | MSG_NOSIGNAL);
        int err = raw_send(fds[2], "y", 1, &fd, 1);
        kid_say(sock, "SENT %d", err);
        kid_cmd(sock);
        _exit(0);
}

START_TEST(doorbell_fd_in_flight) {
        int mode = _i;
        if (skip_mode(mode, "doorbell_fd_in_flight"))
                return;
        ck_assert_msg(geteuid() == 0, "doorbell_fd_in_flight needs root");
        struct hbgd_proc *d = start_hbgd_conf(mode, "[limits]\nmax_sessions_per_uid = 1\n");
        open_to_all(d);
        int base = fd_baseline(d);
        char buf[256];
        for (unsigned round = 0; round < 3; round++) {
                struct kid k;
                kid_start(&k, NOBODY, doorbell_in_flight_fn, d->socket_path);
                const char *sent = kid_expect(d, &k, "SENT", WAIT_MS + IO_MS, buf, sizeof(buf),
                                              "doorbell_fd_in_flight: the client");
                D_ASSERT(d, strcmp(sent, "0") == 0, "the doorbell datagram with an fd was not sent: %s", sent);
                kid_tell(&k, 'Q');
                kid_reap(&k, IO_MS);
                kid_kill(&k);
                /* Freed: its fds gone, and its uid's only slot free again
                 * (the next round's session is granted). */
                assert_fd_baseline(d, base, "doorbell_fd_in_flight: after the client died");
        }
        D_ASSERT(d, log_has(d, "a doorbell datagram carried file descriptors"),
                 "the fd sent on the doorbell was not logged");
        fprintf(stderr, "doorbell_fd_in_flight (%s): 3 dead clients with a socket in their doorbell, "
                "each session freed\n", mode_name(mode));
        abuse_epilogue(d, base, "doorbell_fd_in_flight");
}
END_TEST

/*
 * A connection whose recording is being validated, with its next request
 * already queued behind it (unread until the validation's reply): on
 * epoll, level-triggered, the io thread was called for it at every round
 * and spun a whole core meanwhile. Rounds of a 65,536-task recording and
 * a status request sent at once: the io thread's CPU time over them stays
 * well below the time they took (it used all of it before).
 */
enum { PARKED_TASKS = 65536, PARKED_ROUNDS = 6 };

START_TEST(parked_connection_quiet) {
        int mode = _i;
        if (skip_mode(mode, "parked_connection_quiet"))
                return;
        struct hbgd_proc *d = start_hbgd_conf(mode, "[limits]\nmax_recorded_tasks = 524288\n");
        int fd = cx_connect(d->socket_path, false);
        char why[256];
        D_ASSERT(d, fd >= 0 && cx_send(fd, HBG__ENVELOPE__MSG_HELLO, 0, 0) == 0 &&
                            cx_expect(fd, HBG__ENVELOPE__MSG_HELLO, IO_MS, why, sizeof(why)) == 0 &&
                            cx_send(fd, HBG__ENVELOPE__MSG_SESSION_REQUEST, 0, 0) == 0,
                 "hello and session request");
        struct rx r;
        rx(fd, IO_MS, &r);
        D_ASSERT(d, r.kind == RX_RECORD && r.env && r.env->msg_case == HBG__ENVELOPE__MSG_SESSION_REPLY,
                 "no session reply");
        rx_free(&r);
        int mfd = recording_of(PARKED_TASKS);
        ck_assert_int_ge(mfd, 0);
        long long cpu0 = daemon_threads_cpu_ns(d->pid, "hbgd"), t0 = daemon_now_ms();
        ck_assert_int_ge(cpu0, 0);
        for (unsigned i = 0; i < PARKED_ROUNDS; i++) {
                send_record_request(fd, PARKED_TASKS, &mfd, 1);
                D_ASSERT(d, cx_send(fd, HBG__ENVELOPE__MSG_STATUS_REQUEST, 0, 0) == 0, "status request");
                D_ASSERT(d, cx_expect(fd, HBG__ENVELOPE__MSG_RECORD_REPLY, WAIT_MS, why, sizeof(why)) == 0,
                         "recording %u: %s", i, why);
                D_ASSERT(d, cx_expect(fd, HBG__ENVELOPE__MSG_STATUS_REPLY, IO_MS, why, sizeof(why)) == 0,
                         "status after recording %u: %s", i, why);
        }
        long long io_ms = (daemon_threads_cpu_ns(d->pid, "hbgd") - cpu0) / 1000000, wall_ms = daemon_now_ms() - t0;
        fprintf(stderr, "parked_connection_quiet (%s): %u validations with a request queued behind: the io "
                "thread ran %lld ms of %lld\n", mode_name(mode), PARKED_ROUNDS, io_ms, wall_ms);
        D_ASSERT(d, io_ms * 2 < wall_ms, "%s: the io thread ran %lld ms of the %lld ms a connection waited for "
                 "its validations", mode_name(mode), io_ms, wall_ms);
        close(mfd);
        close(fd);
        stop_hbgd(d);
}
END_TEST

/* ------------------------------------------------------------ 4. accept backlog */

START_TEST(accept_backlog_burst) {
        int mode = _i;
        if (skip_mode(mode, "accept_backlog_burst"))
                return;
        struct hbgd_proc *d = start_hbgd_many(mode);
        int base = fd_baseline(d);
        /* 400 connections as fast as we can, closed at once; the second
         * time while hbgd does not run (one wakeup for the whole queue). */
        for (int frozen = 0; frozen < 2; frozen++) {
                int fds[400];
                unsigned refused;
                if (frozen)
                        freeze(d);
                int n = open_many(d->socket_path, fds, 400, &refused);
                for (int i = 0; i < n; i++)
                        close(fds[i]);
                if (frozen)
                        thaw(d);
                long long ms = fresh_status(d, LIVE_MS, frozen ? "accept_backlog_burst: after 400 connections "
                                            "queued and closed while hbgd was stopped"
                                                                : "accept_backlog_burst: after 400 connections "
                                                                  "closed at once");
                fprintf(stderr, "accept_backlog_burst (%s%s): %d connected, %u refused; a new client answered in "
                        "%lld ms\n", mode_name(mode), frozen ? ", hbgd stopped meanwhile" : "", n, refused, ms);
        }
        abuse_epilogue(d, base, "accept_backlog_burst");
}
END_TEST

START_TEST(accept_backlog_out_of_fds) {
        int mode = _i;
        if (skip_mode(mode, "accept_backlog_out_of_fds"))
                return;
        struct hbgd_proc *d = start_hbgd_many(mode);
        int base = fd_baseline(d);
        struct rlimit rl = { 64, 64 };
        ck_assert_msg(prlimit(d->pid, RLIMIT_NOFILE, &rl, NULL) == 0, "prlimit: %s", strerror(errno));
        int fds[100];
        unsigned refused;
        int n = open_many(d->socket_path, fds, 100, &refused);
        /* Held, then all closed; hbgd may have shed some of them. */
        for (int i = 0; i < n; i++)
                close(fds[i]);
        unsigned shed = 0;
        long long ms = fresh_status_shed(d, LIVE_MS, "accept_backlog_out_of_fds: after 100 connections at 64 fds",
                                         &shed);
        fprintf(stderr, "accept_backlog_out_of_fds (%s): %d connected, %u refused; a new client answered in %lld ms "
                "(%u attempts shed before)\n", mode_name(mode), n, refused, ms, shed);
        abuse_epilogue(d, base, "accept_backlog_out_of_fds");
}
END_TEST

/* As uid 65534: five connections answered, the sixth refused; they stay
 * open until the parent says so. */
static int five_connections_fn(int sock, void *arg) {
        const char *path = arg;
        int fds[5];
        char why[256];
        for (unsigned i = 0; i < 5; i++) {
                fds[i] = cx_connect(path, false);
                if (fds[i] < 0 || cx_send(fds[i], HBG__ENVELOPE__MSG_HELLO, 0, 0) < 0 ||
                    cx_expect(fds[i], HBG__ENVELOPE__MSG_HELLO, IO_MS, why, sizeof(why)) < 0) {
                        kid_say(sock, "FAIL connection %u of uid 65534: %s", i + 1,
                            fds[i] < 0 ? strerror(-fds[i]) : why);
                        return 1;
                }
        }
        int fd = cx_connect(path, false);
        if (fd < 0) {
                kid_say(sock, "FAIL connect #6: %s", strerror(-fd));
                return 1;
        }
        if (cx_expect_refusal(fd, -EUSERS, "max_connections_per_uid", IO_MS, why, sizeof(why)) < 0) {
                kid_say(sock, "FAIL sixth connection of uid 65534: %s", why);
                return 1;
        }
        kid_say(sock, "REFUSED %s", why);
        kid_cmd(sock);
        return 0;
}

START_TEST(connection_caps) {
        int mode = _i;
        if (skip_mode(mode, "connection_caps"))
                return;
        ck_assert_msg(geteuid() == 0, "connection_caps needs root");
        struct hbgd_proc *d = start_hbgd_conf(mode, "[limits]\nmax_connections_per_uid = 5\nmax_connections = 16\n");
        open_to_all(d);
        int base = fd_baseline(d);
        struct kid k;
        char buf[512];
        kid_start(&k, NOBODY, five_connections_fn, d->socket_path);
        const char *msg = kid_expect(d, &k, "REFUSED", IO_MS, buf, sizeof(buf), "uid 65534");
        fprintf(stderr, "connection_caps (%s): uid 65534's sixth connection: %s\n", mode_name(mode), msg);

        /* Root is not limited per uid: ten more, then the total of 16 (with
         * uid 65534's five) is reached at the eleventh... */
        int fds[11];
        char why[256];
        for (unsigned i = 0; i < 11; i++) {
                fds[i] = cx_connect(d->socket_path, false);
                D_ASSERT(d, fds[i] >= 0, "root connection %u: %s", i + 1, strerror(-fds[i]));
                int r = cx_send(fds[i], HBG__ENVELOPE__MSG_HELLO, 0, 0);
                D_ASSERT(d, r == 0 && cx_expect(fds[i], HBG__ENVELOPE__MSG_HELLO, IO_MS, why, sizeof(why)) == 0,
                         "root connection %u (of %u in all) was not answered: %s", i + 1, i + 6, why);
        }
        /* ...and the 17th is refused, root or not. */
        int fd = cx_connect(d->socket_path, false);
        D_ASSERT(d, fd >= 0, "connect #17: %s", strerror(-fd));
        int r = cx_expect_refusal(fd, -EUSERS, "(max_connections = 16)", IO_MS, why, sizeof(why));
        D_ASSERT(d, r == 0, "connection 17 with max_connections = 16: %s", why);
        close(fd);
        fprintf(stderr, "connection_caps (%s): connection 17 of 16: %s\n", mode_name(mode), why);
        for (unsigned i = 0; i < 11; i++)
                close(fds[i]);
        kid_tell(&k, 'Q');
        kid_end(d, &k, IO_MS, "uid 65534");
        abuse_epilogue(d, base, "connection_caps");
}
END_TEST

/* ------------------------------------------------------------ 5. handshake timeout */

START_TEST(handshake_timeout) {
        int mode = _i;
        if (skip_mode(mode, "handshake_timeout"))
                return;
        struct hbgd_proc *d = start_hbgd_conf(mode, "[limits]\nhandshake_timeout_ms = 300\nmax_connections_per_uid = 1024\n");
        int base = fd_baseline(d);
        char why[256];

        /* Silent from the start, and silent after its hello. */
        long long t0 = daemon_now_ms();
        int silent = cx_connect(d->socket_path, false);
        int after_hello = cx_connect(d->socket_path, false);
        D_ASSERT(d, silent >= 0 && after_hello >= 0, "connect failed");
        int r = cx_send(after_hello, HBG__ENVELOPE__MSG_HELLO, 0, 0);
        D_ASSERT(d, r == 0 && cx_expect(after_hello, HBG__ENVELOPE__MSG_HELLO, IO_MS, why, sizeof(why)) == 0,
                 "hello: %s", why);
        r = cx_expect_refusal(silent, -ETIMEDOUT, "handshake_timeout_ms", 3000, why, sizeof(why));
        long long t_silent = daemon_now_ms() - t0;
        D_ASSERT(d, r == 0, "a connection that sent nothing, after %lld ms: %s", t_silent, why);
        r = cx_expect_refusal(after_hello, -ETIMEDOUT, "handshake_timeout_ms", 3000, why, sizeof(why));
        long long t_hello = daemon_now_ms() - t0;
        D_ASSERT(d, r == 0, "a connection idle after its hello, after %lld ms: %s", t_hello, why);
        close(silent);
        close(after_hello);
        fprintf(stderr, "handshake_timeout (%s): silent connection closed after %lld ms, idle after hello %lld ms\n",
                mode_name(mode), t_silent, t_hello);

        /* A session may idle as long as it likes. */
        hbg_client *c = NULL;
        int err = hbg_connect(&c, d->socket_path);
        D_ASSERT(d, err == 0, "hbg_connect: %s [%s]", hbg_strerror(err), hbg_last_error(NULL));
        sleep_us(1000000);
        struct workload w;
        long ran = wl_init(&w, c, 3) < 0 ? -1 : wl_run(&w, 3, -1);
        char msg[sizeof(w.msg)];
        snprintf(msg, sizeof(msg), "%s", w.msg);
        hbg_disconnect(c);
        D_ASSERT(d, ran == 3, "a session idle for 1 s (handshake_timeout_ms = 300) no longer works: %s", msg);

        /* 200 idle connections: all dropped. */
        enum { IDLE = 200 };
        int fds[IDLE];
        unsigned refused;
        int n = open_many(d->socket_path, fds, IDLE, &refused);
        D_ASSERT(d, n == IDLE, "only %d of %d idle connections connected", n, IDLE);
        t0 = daemon_now_ms();
        unsigned dropped = 0;
        for (int i = 0; i < n; i++) {
                long long left = t0 + 5000 - daemon_now_ms();
                if (cx_expect_refusal(fds[i], -ETIMEDOUT, "handshake_timeout_ms", left > 0 ? (int)left : 0, why,
                                      sizeof(why)) == 0)
                        dropped++;
        }
        long long t_idle = daemon_now_ms() - t0;
        int fds_now = daemon_wait_fd_count(d->pid, base, FD_SETTLE_MS);
        for (int i = 0; i < n; i++)
                close(fds[i]);
        D_ASSERT(d, dropped == IDLE, "only %u of %d idle connections were closed within 5 s (one: %s)", dropped,
                 IDLE, why);
        D_ASSERT(d, fds_now == base, "hbgd holds %d fds after dropping the idle connections, %d before", fds_now,
                 base);
        fprintf(stderr, "handshake_timeout (%s): %d idle connections dropped within %lld ms\n", mode_name(mode),
                IDLE, t_idle);
        fresh_status(d, LIVE_MS, "handshake_timeout");
        abuse_epilogue(d, base, "handshake_timeout");
}
END_TEST

/* ------------------------------------------------------------ 6. pipelining */

#define PIPELINED 100
#define FAIR_REQUESTS 3000
#define FAIR_WINDOW 100          /* requests in flight: hbgd's unread replies fit its socket */

struct pipeliner {
        int fd;
        uint8_t *rec;
        size_t rec_len;
        _Atomic unsigned sent, received;
        _Atomic int err;
};

static void *pl_writer(void *arg) {
        struct pipeliner *p = arg;
        while (atomic_load(&p->sent) < FAIR_REQUESTS && !atomic_load(&p->err)) {
                if (atomic_load(&p->sent) - atomic_load(&p->received) >= FAIR_WINDOW) {
                        sleep_us(50);
                        continue;
                }
                if (send(p->fd, p->rec, p->rec_len, MSG_NOSIGNAL) != (ssize_t)p->rec_len) {
                        atomic_store(&p->err, -errno);
                        break;
                }
                atomic_fetch_add(&p->sent, 1);
        }
        return NULL;
}

static void *pl_reader(void *arg) {
        struct pipeliner *p = arg;
        while (atomic_load(&p->received) < FAIR_REQUESTS && !atomic_load(&p->err)) {
                Hbg__Envelope *env = NULL;
                int err = cx_recv(p->fd, IO_MS, &env);
                if (err == 0) {
                        bool ok = env->msg_case == HBG__ENVELOPE__MSG_STATUS_REPLY;
                        wire_free(env);
                        err = ok ? 0 : -EPROTO;
                }
                if (err < 0) {
                        atomic_store(&p->err, err);
                        break;
                }
                atomic_fetch_add(&p->received, 1);
        }
        return NULL;
}

START_TEST(pipelining) {
        int mode = _i;
        if (skip_mode(mode, "pipelining"))
                return;
        struct hbgd_proc *d = start_hbgd(mode, NULL);
        int base = fd_baseline(d);

        /* Hello and 100 requests in a row, none read until all are sent,
         * and all queued before hbgd looks (it is stopped meanwhile). */
        int fd = raw_connect(d->socket_path);
        freeze(d);
        send_hello(fd, HBG_PROTO_MAJOR, NULL, 0);
        for (unsigned i = 0; i < PIPELINED; i++)
                send_status_request(fd, HBG__STATUS_KIND__STATUS_GRAPHS, NULL, 0);
        thaw(d);
        char why[256];
        D_ASSERT(d, cx_expect(fd, HBG__ENVELOPE__MSG_HELLO, IO_MS, why, sizeof(why)) == 0, "hello: %s", why);
        unsigned got = 0;
        long long deadline = daemon_now_ms() + 10000;
        while (got < PIPELINED &&
               cx_expect(fd, HBG__ENVELOPE__MSG_STATUS_REPLY, (int)(deadline - daemon_now_ms()), why,
                         sizeof(why)) == 0)
                got++;
        close(fd);
        D_ASSERT(d, got == PIPELINED, "%s: %u of %d pipelined status requests answered within 10 s (then: %s)",
                 mode_name(mode), got, PIPELINED, why);

        /* Fairness: B's one request is answered while A still has many of
         * its 3000 outstanding (requests_per_turn = 16 by default). */
        int b = raw_connect(d->socket_path);
        raw_hello(b);
        struct pipeliner a = { .fd = raw_connect(d->socket_path) };
        raw_hello(a.fd);
        Hbg__StatusRequest rq = HBG__STATUS_REQUEST__INIT;
        Hbg__Envelope env = HBG__ENVELOPE__INIT;
        rq.kind = HBG__STATUS_KIND__STATUS_GRAPHS;
        env.msg_case = HBG__ENVELOPE__MSG_STATUS_REQUEST;
        env.status_request = &rq;
        a.rec = pack_env(&env, &a.rec_len);
        pthread_t tw, tr;
        ck_assert_int_eq(pthread_create(&tr, NULL, pl_reader, &a), 0);
        ck_assert_int_eq(pthread_create(&tw, NULL, pl_writer, &a), 0);
        deadline = daemon_now_ms() + IO_MS;
        while (atomic_load(&a.received) < 100 && !atomic_load(&a.err) && daemon_now_ms() < deadline)
                sleep_us(200);
        unsigned a_at_send = atomic_load(&a.received);
        long long t0 = daemon_now_ms();
        int rb = cx_send(b, HBG__ENVELOPE__MSG_STATUS_REQUEST, 0, 0);
        if (rb == 0)
                rb = cx_expect(b, HBG__ENVELOPE__MSG_STATUS_REPLY, IO_MS, why, sizeof(why));
        unsigned a_at_reply = atomic_load(&a.received);
        long long t_b = daemon_now_ms() - t0;
        pthread_join(tw, NULL);
        pthread_join(tr, NULL);
        free(a.rec);
        close(a.fd);
        close(b);
        int aerr = atomic_load(&a.err);
        D_ASSERT(d, aerr == 0, "client A's pipeline failed after %u replies: %s", atomic_load(&a.received),
                 strerror(-aerr));
        D_ASSERT(d, a_at_send >= 100, "client A got only %u replies before B asked", a_at_send);
        D_ASSERT(d, rb == 0, "client B: %s", rb < 0 && !why[0] ? strerror(-rb) : why);
        fprintf(stderr, "pipelining (%s): B answered in %lld ms; A had %u of %d replies when B asked, %u when "
                "B was answered\n", mode_name(mode), t_b, a_at_send, FAIR_REQUESTS, a_at_reply);
        D_ASSERT(d, a_at_reply < FAIR_REQUESTS,
                 "B was answered only after all of A's %d requests (unfair: requests_per_turn ignored)",
                 FAIR_REQUESTS);
        abuse_epilogue(d, base, "pipelining");
}
END_TEST

/* ------------------------------------------------------------ recording */

/* A memfd holding bytes [0, len) of buf; sealed as hbgd wants if asked. */
static int memfd_with(const void *buf, size_t len, bool sealed) {
        int fd = memfd_create("hostile-recording", MFD_CLOEXEC | MFD_ALLOW_SEALING);
        ck_assert_int_ge(fd, 0);
        ck_assert_int_eq(write(fd, buf, len), (ssize_t)len);
        if (sealed)
                ck_assert_int_eq(fcntl(fd, F_ADD_SEALS, F_SEAL_WRITE | F_SEAL_GROW | F_SEAL_SHRINK), 0);
        return fd;
}

/*
 * The record verb, which comes with a file descriptor: an fd that is not a
 * memfd (a pipe: reading it could block), a memfd without the seals (it
 * could change or shrink while read), the wrong size, no tasks, a count
 * that does not fit, garbage tasks, no session. Each is refused with its
 * error and the connection goes on; a good recording then succeeds. The
 * verb without its fd, or any other with one, is a protocol error.
 */
START_TEST(record_request_abuse) {
        struct hbgd_proc *d = start_hbgd(_i, NULL);
        int base = fd_baseline(d);
        struct hbg_recorded_task good = noop_recorded(), junk[4];
        for (size_t i = 0; i < sizeof(junk); i++)
                ((unsigned char *)junk)[i] = (unsigned char)(i * 131 + 7);

        /* No session yet. */
        int sock = raw_connect(d->socket_path);
        raw_hello(sock);
        int fd = memfd_with(&good, sizeof(good), true);
        send_record_request(sock, 1, &fd, 1);
        close(fd);
        expect_error_stays(d, sock, -EINVAL, "no session", "record without a session");

        Hbg__SessionRequest sr = HBG__SESSION_REQUEST__INIT;
        Hbg__Envelope env = HBG__ENVELOPE__INIT;
        env.msg_case = HBG__ENVELOPE__MSG_SESSION_REQUEST;
        env.session_request = &sr;
        send_env(sock, &env, NULL, 0);
        int fds[SESSION_FDS];
        wire_free(expect_env(sock, HBG__ENVELOPE__MSG_SESSION_REPLY, fds, SESSION_FDS));
        for (unsigned i = 0; i < SESSION_FDS; i++)
                close(fds[i]);

        int pipefd[2];
        ck_assert_int_eq(pipe(pipefd), 0);
        send_record_request(sock, 1, &pipefd[0], 1);
        close(pipefd[0]);
        expect_error_stays(d, sock, -EBADF, "sealed", "a pipe");
        close(pipefd[1]);

        fd = memfd_with(&good, sizeof(good), false);
        send_record_request(sock, 1, &fd, 1);
        close(fd);
        expect_error_stays(d, sock, -EBADF, "sealed", "a memfd without seals");

        fd = memfd_with(&good, sizeof(good), true);
        send_record_request(sock, 2, &fd, 1);
        expect_error_stays(d, sock, -EINVAL, "bytes", "the wrong size");
        send_record_request(sock, 0, &fd, 1);
        expect_error_stays(d, sock, -EINVAL, "1 to", "no tasks");
        send_record_request(sock, UINT64_C(1) << 40, &fd, 1);
        expect_error_stays(d, sock, -EINVAL, "1 to", "2^40 tasks");
        close(fd);

        fd = memfd_with(junk, sizeof(junk), true);
        send_record_request(sock, 4, &fd, 1);
        close(fd);
        expect_error_stays(d, sock, -EPROTO, "task 0:", "garbage tasks");

        fd = memfd_with(&good, sizeof(good), true);
        send_record_request(sock, 1, &fd, 1);
        close(fd);
        Hbg__Envelope *reply = expect_env(sock, HBG__ENVELOPE__MSG_RECORD_REPLY, NULL, 0);
        ck_assert_uint_eq(reply->record_reply->graph, 0);
        wire_free(reply);

        /* Without its fd: a protocol error, and the connection goes. */
        send_record_request(sock, 1, NULL, 0);
        expect_refusal(d, sock, -EPROTO, CLOSE_ERROR_REQUIRED, "record without its fd");
        close(sock);

        /* Another verb with an fd. */
        sock = raw_connect(d->socket_path);
        raw_hello(sock);
        fd = memfd_with(&good, sizeof(good), true);
        send_status_request(sock, HBG__STATUS_KIND__STATUS_DAEMON, &fd, 1);
        close(fd);
        expect_refusal(d, sock, -EPROTO, CLOSE_ERROR_REQUIRED, "a status request with an fd");
        close(sock);
        abuse_epilogue(d, base, "record request abuse");
}
END_TEST

static Suite *suite(void) {
        Suite *s = suite_create("e2e_hostile");
        TCase *tc = hostile_case(s, "io");
        hostile_add(tc, shut_rd_then_requests, false, N_MODES);
        hostile_add(tc, completion_channel_abuse, false, N_MODES);
        hostile_add(tc, doorbell_abuse, false, N_MODES);
        hostile_add(tc, accept_backlog_burst, false, N_MODES);
        hostile_add(tc, accept_backlog_out_of_fds, false, N_MODES);
        hostile_add(tc, connection_caps, true, N_MODES);
        hostile_add(tc, handshake_timeout, false, N_MODES);
        hostile_add(tc, pipelining, false, N_MODES);
        hostile_add(tc, record_request_abuse, false, N_MODES);
        hostile_add(tc, doorbell_fd_in_flight, true, N_MODES);
        hostile_add(tc, parked_connection_quiet, false, N_MODES);
        return s;
}

HOSTILE_CHECK_MAIN(suite);
