/* SPDX-License-Identifier: MIT */
/*
 * hbgd against one hostile local user: each test makes one attack on a real
 * hbgd (tests/e2e/daemon_util.c) the way the attacker would, then checks that
 * hbgd survived and still serves others (a status request on a fresh
 * connection is answered, an honest client's graphs complete with the
 * right results), that its fd count returns to the baseline where that
 * makes sense, and that it exits 0 on SIGTERM.
 *
 * Tests whose attack goes through the io loop run once per backend
 * (_i = MODE_URING, MODE_EPOLL); the io_uring run is skipped (said so on
 * stderr) where io_uring is unavailable. Tests of per-uid limits act as
 * uid 65534 (nobody) from a forked child and need root: without root they
 * are left out and the binary exits 77 when everything else passed.
 *
 * Run one group with CK_RUN_CASE=io|engine|limits; HBG_TEST_SCALE=N
 * divides the honest clients' work; HBG_TEST_VERBOSE=1 shows hbgd's log.
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

/* In a child: a connection with a session (its fds in fds[]); the
 * socket, or -1 after telling the parent why. */
static int kid_session(int sock, const char *path, int fds[SESSION_FDS]) {
        int fd = cx_connect(path, false);
        if (fd < 0) {
                kid_say(sock, "FAIL connect: %s", strerror(-fd));
                return -1;
        }
        char why[256];
        if (cx_send(fd, HBG__ENVELOPE__MSG_HELLO, 0, 0) < 0 ||
            cx_expect(fd, HBG__ENVELOPE__MSG_HELLO, IO_MS, why, sizeof(why)) < 0 ||
            cx_send(fd, HBG__ENVELOPE__MSG_SESSION_REQUEST, 0, 0) < 0) {
                kid_say(sock, "FAIL hello/session request");
                return -1;
        }
        struct rx r;
        rx(fd, IO_MS, &r);
        if (r.kind != RX_RECORD || !r.env || r.env->msg_case != HBG__ENVELOPE__MSG_SESSION_REPLY ||
            r.nfds != SESSION_FDS) {
                kid_say(sock, "FAIL no session reply");
                return -1;
        }
        memcpy(fds, r.fds, SESSION_FDS * sizeof(int));
        return fd;
}

/* A sealed memfd of n no-op recorded tasks, or -1. */
static int recording_of(size_t n) {
        size_t bytes = n * sizeof(struct hbg_recorded_task);
        struct hbg_recorded_task one = noop_recorded();
        int mfd = memfd_create("hostile-recording", MFD_CLOEXEC | MFD_ALLOW_SEALING);
        struct hbg_recorded_task *tasks = mfd >= 0 && ftruncate(mfd, (off_t)bytes) == 0
                                                  ? mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, mfd, 0)
                                                  : MAP_FAILED;
        if (tasks == MAP_FAILED)
                return -1;
        for (size_t i = 0; i < n; i++) {
                tasks[i] = one;
                tasks[i].desc.id = i + 1; /* task i of a recording has id i + 1 */
        }
        munmap(tasks, bytes);
        return fcntl(mfd, F_ADD_SEALS, F_SEAL_WRITE | F_SEAL_GROW | F_SEAL_SHRINK) == 0 ? mfd : -1;
}

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

/*
 * A recording storm: uid 65534 records 65,536-task graphs back to back on
 * two connections (the validation of each takes the slow-work thread a
 * while). Meanwhile status requests are answered, other users connect and
 * run graphs: status replies that show recordings still waiting for their
 * validation prove that the io thread answered while they were pending
 * (before, it validated them itself and answered nothing meanwhile).
 */
enum { STORM_TASKS = 65536, STORM_RECORDINGS = 4 };

static int storm_kid_fn(int sock, void *arg) {
        int fds[SESSION_FDS];
        int fd = kid_session(sock, arg, fds);
        int mfd = recording_of(STORM_TASKS);
        if (fd < 0 || mfd < 0) {
                kid_say(sock, "FAIL session or recording memfd");
                return 1;
        }
        kid_say(sock, "READY");
        kid_cmd(sock);
        unsigned ok = 0;
        char why[256];
        for (unsigned i = 0; i < STORM_RECORDINGS; i++) {
                send_record_request(fd, STORM_TASKS, &mfd, 1);
                if (cx_expect(fd, HBG__ENVELOPE__MSG_RECORD_REPLY, 60000, why, sizeof(why)) < 0) {
                        kid_say(sock, "FAIL recording %u: %s", i, why);
                        return 1;
                }
                ok++;
        }
        kid_say(sock, "DONE %u", ok);
        kid_cmd(sock);
        _exit(0);
}

/* The daemon status' slow_jobs, or -1. */
static long status_slow_jobs(int fd) {
        Hbg__Envelope *env = NULL;
        if (cx_send(fd, HBG__ENVELOPE__MSG_STATUS_REQUEST, 0, 0) < 0 || cx_recv(fd, IO_MS, &env) < 0)
                return -1;
        long n = env->msg_case == HBG__ENVELOPE__MSG_STATUS_REPLY && env->status_reply->daemon
                         ? (long)env->status_reply->daemon->slow_jobs
                         : -1;
        wire_free(env);
        return n;
}

START_TEST(recording_storm) {
        ck_assert_msg(geteuid() == 0, "recording_storm needs root");
        struct hbgd_proc *d = start_hbgd_conf(MODE_URING, "[limits]\nmax_recorded_tasks = 262144\n");
        open_to_all(d);
        int base = fd_baseline(d);
        char buf[256];
        struct kid k[2];
        for (unsigned i = 0; i < 2; i++) {
                kid_start(&k[i], NOBODY, storm_kid_fn, d->socket_path);
                kid_expect(d, &k[i], "READY", WAIT_MS + IO_MS, buf, sizeof(buf), "recording_storm: uid 65534");
        }
        int st = raw_connect(d->socket_path);
        raw_hello(st);
        for (unsigned i = 0; i < 2; i++)
                kid_tell(&k[i], 'G');
        /* While the recordings are validated: status answers that see
         * them pending, an honest client of another uid served. */
        unsigned samples = 0, seen_pending = 0;
        long most = 0;
        for (long long deadline = daemon_now_ms() + 60000; daemon_now_ms() < deadline && samples < 100000 && seen_pending < 20;) {
                long n = status_slow_jobs(st);
                D_ASSERT(d, n >= 0, "recording_storm: a status request was not answered");
                samples++;
                seen_pending += n > 0;
                most = n > most ? n : most;
                if (kid_line(&k[0], 0, buf, sizeof(buf)) == 0) {
                        D_ASSERT(d, strncmp(buf, "DONE", 4) == 0, "recording_storm: uid 65534 said: %s", buf);
                        break;
                }
        }
        honest_graphs(d, 5, "recording_storm");
        kid_expect(d, &k[1], "DONE", 60000, buf, sizeof(buf), "recording_storm: uid 65534");
        D_ASSERT(d, seen_pending > 0, "recording_storm: none of %u status replies came while a recording was being "
                 "validated", samples);
        for (unsigned i = 0; i < 2; i++) {
                kid_tell(&k[i], 'Q');
                kid_end(d, &k[i], IO_MS, "recording_storm: uid 65534");
        }
        close(st);
        fprintf(stderr, "recording_storm: %u status replies during %u recordings of %u tasks, %u of them with "
                "recordings pending (at most %ld)\n", samples, 2 * STORM_RECORDINGS, STORM_TASKS, seen_pending, most);
        abuse_epilogue(d, base, "recording_storm");
}
END_TEST

/*
 * Sessions are built on the slow-work thread, not the io thread: with a
 * long recording being validated there, a session request waits behind it
 * (a job waits for the one that runs) while the io thread answers a status
 * request meanwhile. Observable as an order, not a time: the recording's
 * reply comes before the session's. Before, the io thread built the
 * session itself, and its reply came at once, long before the recording's.
 * The recording must be running, not only queued: a set-up is taken
 * before a queued request (slow_work.h). So the session request waits for
 * the slow-work thread's time to grow by what only the recording can take
 * here (the sessions are small, and no spare ring is filled).
 */
enum { SETUP_RECORDED_TASKS = 262144 };

static void session_request(int fd) {
        Hbg__SessionRequest sr = HBG__SESSION_REQUEST__INIT;
        Hbg__Envelope env = HBG__ENVELOPE__INIT;
        env.msg_case = HBG__ENVELOPE__MSG_SESSION_REQUEST;
        env.session_request = &sr;
        send_env(fd, &env, NULL, 0);
}

static void expect_session(int fd) {
        int fds[SESSION_FDS];
        wire_free(expect_env(fd, HBG__ENVELOPE__MSG_SESSION_REPLY, fds, SESSION_FDS));
        for (unsigned i = 0; i < SESSION_FDS; i++)
                close(fds[i]);
}

START_TEST(session_setup_off_io_thread) {
        struct hbgd_proc *d = start_hbgd_conf(MODE_URING, "[limits]\nmax_recorded_tasks = 262144\n"
                                                          "[session]\ntask_window = 256\nflag_window = 256\n"
                                                          "heap_size = 64K\n"
                                                          "spare_rings = 0\n");
        int base = fd_baseline(d);
        int rec = raw_connect(d->socket_path), st = raw_connect(d->socket_path);
        raw_hello(rec);
        raw_hello(st);
        session_request(rec);
        expect_session(rec);
        int mfd = recording_of(SETUP_RECORDED_TASKS);
        ck_assert_int_ge(mfd, 0);
        long long cpu0 = daemon_threads_cpu_ns(d->pid, "hbgd-slow");
        ck_assert_int_ge(cpu0, 0);
        long long sent_ms = daemon_now_ms();
        send_record_request(rec, SETUP_RECORDED_TASKS, &mfd, 1);
        close(mfd);
        /* The recording runs: 2 ms of the slow-work thread's time since
         * it was sent, which a small session's pre-fault is far from. */
        long long ran_ns = 0;
        for (long long deadline = daemon_now_ms() + WAIT_MS; ran_ns < 2000000 && daemon_now_ms() < deadline;)
                ran_ns = daemon_threads_cpu_ns(d->pid, "hbgd-slow") - cpu0;
        D_ASSERT(d, ran_ns >= 2000000, "the slow-work thread ran %lld us in %d ms after the recording was sent",
                 ran_ns / 1000, WAIT_MS);
        D_ASSERT(d, status_slow_jobs(st) >= 1, "the recording was validated before a session could be asked for");

        int fd = raw_connect(d->socket_path);
        raw_hello(fd);
        session_request(fd);
        long during = status_slow_jobs(st);
        D_ASSERT(d, during >= 1, "a status request was not answered while a session was being built (%ld)", during);
        expect_session(fd);
        /* Sent before the session's reply, so here already. */
        struct pollfd pfd = { .fd = rec, .events = POLLIN };
        D_ASSERT(d, poll(&pfd, 1, 0) == 1,
                 "the session's reply came while the recording before it was still being validated: the session "
                 "was not built on the slow-work thread");
        wire_free(expect_env(rec, HBG__ENVELOPE__MSG_RECORD_REPLY, NULL, 0));
        fprintf(stderr, "session_setup_off_io_thread: status answered with %ld slow jobs while a session waited "
                "behind a recording of %u tasks (running for %lld us when it was asked for, answered %lld ms after "
                "it was sent); its reply came after the recording's\n", during, SETUP_RECORDED_TASKS, ran_ns / 1000,
                daemon_now_ms() - sent_ms);
        close(fd);
        close(rec);
        close(st);
        abuse_epilogue(d, base, "session_setup_off_io_thread");
}
END_TEST

/*
 * The io thread reads a session's submission region through its memfd,
 * never through hbgd's mapping (RUNTIME_LOGIC.md §8): a fault on a page
 * the client is punching out of its region waits for the whole punch. Seen
 * in hbgd's page tables: the client punches its header page, which drops
 * hbgd's mapping of it; then, while the scheduler threads sleep, it asks
 * for the live graphs and the sessions and cancels a graph (the io thread
 * reads the graph cursor there for each) and waits past a housekeeping
 * tick (which reads it too). The page must still
 * be absent from hbgd's mapping (/proc/PID/pagemap): reads through the
 * mapping would have faulted it back.
 */
static uint64_t hbgd_region_start(struct hbgd_proc *d, int memfd) {
        /* By the memfd's inode: its name says the session only when it
         * was made at the connect, not ahead (spare_regions.h). */
        struct stat st;
        D_ASSERT(d, fstat(memfd, &st) == 0, "fstat of the submission memfd: %s", strerror(errno));
        char path[64], line[512];
        snprintf(path, sizeof(path), "/proc/%d/maps", (int)d->pid);
        FILE *f = fopen(path, "r");
        D_ASSERT(d, f != NULL, "cannot read %s: %s", path, strerror(errno));
        uint64_t start = 0;
        while (!start && fgets(line, sizeof(line), f)) {
                unsigned long long lo, ino;
                if (strstr(line, "/memfd:hbg-sub-") &&
                    sscanf(line, "%llx-%*x %*s %*x %*s %llu", &lo, &ino) == 2 && ino == (unsigned long long)st.st_ino)
                        start = lo;
        }
        fclose(f);
        D_ASSERT(d, start != 0, "hbgd has no mapping of the session's submission region (inode %llu)",
                 (unsigned long long)st.st_ino);
        return start;
}

/* Is hbgd's page at va mapped in its page tables (pagemap bit 63)? */
static bool hbgd_page_present(struct hbgd_proc *d, uint64_t va) {
        char path[64];
        snprintf(path, sizeof(path), "/proc/%d/pagemap", (int)d->pid);
        int fd = open(path, O_RDONLY | O_CLOEXEC);
        D_ASSERT(d, fd >= 0, "cannot open %s: %s", path, strerror(errno));
        uint64_t entry = 0;
        ssize_t n = pread(fd, &entry, sizeof(entry), (off_t)(va / (uint64_t)sysconf(_SC_PAGESIZE) * sizeof(entry)));
        close(fd);
        D_ASSERT(d, n == (ssize_t)sizeof(entry), "cannot read %s: %s", path, strerror(errno));
        return (entry >> 63) & 1;
}

START_TEST(punched_region_io_reads) {
        struct hbgd_proc *d = start_hbgd_conf(MODE_URING, "");
        int base = fd_baseline(d);
        int fd = raw_connect(d->socket_path), st = raw_connect(d->socket_path);
        raw_hello(fd);
        raw_hello(st);
        session_request(fd);
        int fds[SESSION_FDS];
        Hbg__Envelope *e = expect_env(fd, HBG__ENVELOPE__MSG_SESSION_REPLY, fds, SESSION_FDS);
        uint64_t session = e->session_reply->session_id;
        wire_free(e);
        /* Never rung for: not served, no pre-fault (hbgd's mapping of the
         * header page is in place from its initialisation); the scheduler
         * threads parked and never look at it. */
        wait_slow_work_idle(d);
        sleep_us(200000);
        uint64_t va = hbgd_region_start(d, fds[0]);
        D_ASSERT(d, hbgd_page_present(d, va), "hbgd's mapping of the header page is not in its page tables");
        D_ASSERT(d, fallocate(fds[0], FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, 0, 4096) == 0,
                 "punching the header page: %s", strerror(errno));
        D_ASSERT(d, !hbgd_page_present(d, va), "the punch left hbgd's mapping of the header page in place");

        wire_free(status_of(d, st, HBG__STATUS_KIND__STATUS_GRAPHS));
        wire_free(status_of(d, st, HBG__STATUS_KIND__STATUS_SESSIONS));
        /* A cancel of its graph 0 (none: the cursor reads 0), answered. */
        Hbg__CancelRequest cr = HBG__CANCEL_REQUEST__INIT;
        cr.session_id = session;
        cr.graph = 0;
        Hbg__Envelope env = HBG__ENVELOPE__INIT;
        env.msg_case = HBG__ENVELOPE__MSG_CANCEL_REQUEST;
        env.cancel_request = &cr;
        send_env(st, &env, NULL, 0);
        struct rx r;
        rx(st, WAIT_MS, &r);
        D_ASSERT(d, r.kind == RX_RECORD, "no answer to a cancel request");
        rx_free(&r);
        sleep_us(250000); /* past a housekeeping tick (100 ms) */
        wire_free(status_of(d, st, HBG__STATUS_KIND__STATUS_GRAPHS));
        D_ASSERT(d, !hbgd_page_present(d, va),
                 "the io thread read the punched header page through hbgd's mapping (a fault there waits for a "
                 "client's punch)");
        fprintf(stderr, "punched_region_io_reads: the header page stayed out of hbgd's page tables through two "
                "listings, a cancel and a housekeeping tick\n");
        for (unsigned i = 0; i < SESSION_FDS; i++)
                close(fds[i]);
        close(fd);
        close(st);
        abuse_epilogue(d, base, "punched_region_io_reads");
}
END_TEST

/*
 * A client punching holes in its whole submission region without end (a
 * 256 MiB heap written, then MADV_REMOVE'd, over and over) while others
 * connect and list the graphs: every connect and listing succeeds, and
 * hbgd serves on. Only a session that never rang can still be punched:
 * hbgd seals the region against it (F_SEAL_FUTURE_WRITE) before any of its
 * threads but the io thread reads it, and the io thread reads it through
 * its memfd. Before, a listing (and the housekeeping tick) faulted on the
 * punched header page and waited for the punch (tens of ms), with every
 * other client's requests behind it. The times are printed, not asserted
 * (a timing on a shared machine).
 */
struct puncher {
        const char *path;
        unsigned ms;
};

/* A session of the raw protocol asking for heap_size, its submission
 * region mapped writable and never rung for: 0, its control socket and
 * *ret_fds, or -1 with "FAIL" said. */
static int kid_raw_session(int sock, const char *path, uint64_t heap_size, int *ret_ctl, int ret_fds[SESSION_FDS],
                           uint8_t **ret_sub, size_t *ret_len) {
        int fd = raw_connect(path);
        raw_hello(fd);
        if (cx_send(fd, HBG__ENVELOPE__MSG_SESSION_REQUEST, 0, heap_size) < 0) {
                kid_say(sock, "FAIL cannot ask for a session");
                return -1;
        }
        struct rx r;
        rx(fd, WAIT_MS, &r);
        if (r.kind != RX_RECORD || !r.env || r.env->msg_case != HBG__ENVELOPE__MSG_SESSION_REPLY ||
            r.nfds != SESSION_FDS) {
                kid_say(sock, "FAIL no session reply with %u fds", SESSION_FDS);
                return -1;
        }
        size_t len = r.env->session_reply->sub_region_size;
        memcpy(ret_fds, r.fds, sizeof(int) * SESSION_FDS);
        r.nfds = 0;
        rx_free(&r);
        void *sub = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, ret_fds[0], 0);
        if (sub == MAP_FAILED) {
                kid_say(sock, "FAIL cannot map the raw session's submission region: %s", strerror(errno));
                return -1;
        }
        *ret_sub = sub;
        *ret_len = len;
        *ret_ctl = fd;
        return 0;
}

static int puncher_fn(int sock, void *arg) {
        const struct puncher *p = arg;
        /* A library session's region is sealed once mapped: no punching. */
        hbg_connect_options o = HBG_CONNECT_OPTIONS_INIT;
        o.socket_path = p->path;
        hbg_client *c = NULL;
        int err = hbg_connect_opts(&c, &o);
        if (err < 0) {
                kid_say(sock, "FAIL hbg_connect: %s [%s]", hbg_strerror(err), hbg_last_error(NULL));
                return 1;
        }
        char line[512];
        unsigned long lo = 0, hi = 0;
        FILE *f = fopen("/proc/self/maps", "r");
        while (f && !lo && fgets(line, sizeof(line), f))
                if (strstr(line, "hbg-sub-") && strstr(line, " rw") && sscanf(line, "%lx-%lx", &lo, &hi) != 2)
                        lo = 0;
        if (f)
                fclose(f);
        if (!lo) {
                kid_say(sock, "FAIL the submission region is not in /proc/self/maps");
                return 1;
        }
        errno = 0;
        if (madvise((void *)lo, hi - lo, MADV_REMOVE) == 0 || errno != EPERM) {
                kid_say(sock, "FAIL MADV_REMOVE on a library session's region: %s, expected EPERM",
                        errno ? strerror(errno) : "succeeded");
                return 1;
        }
        int ctl, fds[SESSION_FDS];
        uint8_t *region;
        size_t len, page = (size_t)sysconf(_SC_PAGESIZE);
        if (kid_raw_session(sock, p->path, (uint64_t)256 << 20, &ctl, fds, &region, &len) < 0)
                return 1;
        kid_say(sock, "READY");
        if (kid_cmd(sock) != 'G')
                return 1;
        unsigned punches = 0;
        long long t0 = daemon_now_ms(), in_punch_us = 0;
        while (daemon_now_ms() - t0 < p->ms) {
                for (size_t i = 0; i < len; i += page)
                        region[i] = 1;
                long long a = (long long)(clock_now_ns() / 1000);
                if (madvise(region, len, MADV_REMOVE) < 0) {
                        kid_say(sock, "FAIL MADV_REMOVE: %s", strerror(errno));
                        return 1;
                }
                in_punch_us += (long long)(clock_now_ns() / 1000) - a;
                punches++;
        }
        kid_say(sock, "NOTE %u punches of %zu MiB, %.1f ms each; a library session's MADV_REMOVE refused", punches,
                len >> 20, punches ? (double)in_punch_us / punches / 1e3 : 0.0);
        kid_say(sock, "DONE");
        kid_cmd(sock);
        hbg_disconnect(c);
        return 0;
}

static int cmp_ll(const void *a, const void *b) {
        long long x = *(const long long *)a, y = *(const long long *)b;
        return x < y ? -1 : x > y;
}

START_TEST(punching_client_others_connect) {
        struct hbgd_proc *d = start_hbgd_conf(MODE_URING, "");
        int base = fd_baseline(d);
        struct puncher p = { .path = d->socket_path, .ms = 3000 };
        struct kid k;
        char buf[256];
        kid_start(&k, SAME_UID, puncher_fn, &p);
        kid_expect(d, &k, "READY", WAIT_MS, buf, sizeof(buf), "the puncher");
        int st = raw_connect(d->socket_path);
        raw_hello(st);
        kid_tell(&k, 'G');
        enum { MAX_ROUNDS = 4096 };
        static long long conn_us[MAX_ROUNDS], status_us[MAX_ROUNDS];
        unsigned n = 0;
        long long t0 = daemon_now_ms();
        while (daemon_now_ms() - t0 < p.ms && n < MAX_ROUNDS) {
                long long a = (long long)(clock_now_ns() / 1000);
                hbg_client *c = NULL;
                int err = hbg_connect(&c, d->socket_path);
                D_ASSERT(d, err == 0, "connect %u while a client punched its region: %s [%s]", n, hbg_strerror(err),
                         hbg_last_error(NULL));
                long long b = (long long)(clock_now_ns() / 1000);
                conn_us[n] = b - a;
                hbg_disconnect(c);
                /* hbgctl graphs: the io thread lists every session's. */
                b = (long long)(clock_now_ns() / 1000);
                wire_free(status_of(d, st, HBG__STATUS_KIND__STATUS_GRAPHS));
                status_us[n++] = (long long)(clock_now_ns() / 1000) - b;
                sleep_us(2000);
        }
        for (;;) {
                D_ASSERT(d, kid_line(&k, WAIT_MS, buf, sizeof(buf)) == 0, "the puncher said nothing");
                D_ASSERT(d, strncmp(buf, "FAIL", 4) != 0, "the puncher: %s", buf + 4);
                if (strncmp(buf, "DONE", 4) == 0)
                        break;
                fprintf(stderr, "punching_client_others_connect: %s\n", strncmp(buf, "NOTE ", 5) == 0 ? buf + 5 : buf);
        }
        kid_tell(&k, 'Q');
        kid_end(d, &k, WAIT_MS, "the puncher");
        D_ASSERT(d, n > 0, "no connect was made");
        struct {
                const char *what;
                long long *us;
        } rows[] = { { "connects", conn_us }, { "graph listings", status_us } };
        for (unsigned r = 0; r < 2; r++) {
                qsort(rows[r].us, n, sizeof(long long), cmp_ll);
                unsigned over = 0;
                for (unsigned i = 0; i < n; i++)
                        over += rows[r].us[i] > 5000;
                fprintf(stderr, "punching_client_others_connect: %u %s meanwhile: p50 %.2f ms, p99 %.2f ms, max "
                        "%.2f ms, %u over 5 ms\n", n, rows[r].what, rows[r].us[n / 2] / 1e3,
                        rows[r].us[n * 99 / 100] / 1e3, rows[r].us[n - 1] / 1e3, over);
        }
        close(st);
        abuse_epilogue(d, base, "punching_client_others_connect");
}
END_TEST

/*
 * hbgd seals the region of a client that rang without sealing it, and
 * F_ADD_SEALS waits for the file's lock, which the client can hold for
 * as long as it likes: here a pwrite(2) into its memfd from a buffer
 * whose page fault a userfaultfd of the client's never answers (a FUSE
 * mapping would do the same without root). While that seal is stuck:
 * other clients connect (their sessions are built on the slow-work
 * thread) and run graphs, the stuck client's session closes, and hbgd
 * answers; once the client lets go, hbgd's descriptors return to their
 * baseline (the seal's thread and the closed session cleaned up), and not
 * before: the closed session is kept, with its descriptors, until then.
 * Where userfaultfd cannot catch a fault in the kernel (not root with
 * vm.unprivileged_userfaultfd 0, or a seccomp filter) the test says so
 * and checks nothing.
 */
struct lock_holder {
        const char *path;
        int mfd, err;
        void *buf;
};

static void *hold_lock_main(void *arg) {
        struct lock_holder *h = arg;
        /* Blocks in the fault on buf, inside the write: the memfd's lock
         * held until the fault is answered. A signal to this thread would
         * end that wait (the write fails, EFAULT): none comes here. */
        sigset_t all;
        sigfillset(&all);
        pthread_sigmask(SIG_BLOCK, &all, NULL);
        ssize_t n = pwrite(h->mfd, h->buf, 4096, 0);
        h->err = n < 0 ? errno : 0;
        return (void *)(intptr_t)n;
}

static int lock_holder_fn(int sock, void *arg) {
        struct lock_holder *h = arg;
        int ctl, fds[SESSION_FDS];
        uint8_t *region;
        size_t len;
        if (kid_raw_session(sock, h->path, 0, &ctl, fds, &region, &len) < 0)
                return 1;
        int uffd = (int)syscall(SYS_userfaultfd, O_CLOEXEC);
        struct uffdio_api api = { .api = UFFD_API };
        if (uffd < 0 || ioctl(uffd, UFFDIO_API, &api) < 0) {
                kid_say(sock, "SKIP userfaultfd: %s", strerror(errno));
                return 0;
        }
        h->buf = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        struct uffdio_register reg = { .range = { (uintptr_t)h->buf, 4096 }, .mode = UFFDIO_REGISTER_MODE_MISSING };
        if (h->buf == MAP_FAILED || ioctl(uffd, UFFDIO_REGISTER, &reg) < 0) {
                kid_say(sock, "SKIP userfaultfd registration: %s", strerror(errno));
                return 0;
        }
        h->mfd = fds[0];
        pthread_t writer;
        if (pthread_create(&writer, NULL, hold_lock_main, h) != 0) {
                kid_say(sock, "FAIL pthread_create");
                return 1;
        }
        struct pollfd pfd = { .fd = uffd, .events = POLLIN };
        void *written = NULL;
        if (poll(&pfd, 1, WAIT_MS) != 1) {
                kid_say(sock, "FAIL the write into the memfd did not fault on the registered buffer");
                return 1;
        }
        sleep_us(20000);
        if (pthread_tryjoin_np(writer, &written) == 0) {
                kid_say(sock, "RETRY the write did not wait for its fault (returned %ld, errno %d)",
                        (long)(intptr_t)written, h->err);
                return 0;
        }
        /* The lock is held: ring, unsealed. hbgd starts its seal. */
        char one = 1;
        if (send(fds[2], &one, 1, MSG_DONTWAIT) != 1) {
                kid_say(sock, "FAIL doorbell: %s", strerror(errno));
                return 1;
        }
        sleep_us(300000);
        if (fcntl(fds[0], F_GET_SEALS) & F_SEAL_FUTURE_WRITE) {
                /* Sealed: only right if the write let go of the lock. */
                if (pthread_tryjoin_np(writer, &written) == 0) {
                        kid_say(sock, "RETRY the write stopped waiting for its fault (returned %ld, errno %d)",
                                (long)(intptr_t)written, h->err);
                        return 0;
                }
                kid_say(sock, "FAIL the region was sealed while a write into it held its lock");
                return 1;
        }
        kid_say(sock, "READY");
        if (kid_cmd(sock) != 'C')
                return 1;
        close(ctl); /* the session closes, its seal still stuck */
        if (kid_cmd(sock) != 'R')
                return 1;
        struct uffdio_zeropage z = { .range = { (uintptr_t)h->buf, 4096 } };
        if (ioctl(uffd, UFFDIO_ZEROPAGE, &z) < 0) {
                kid_say(sock, "FAIL UFFDIO_ZEROPAGE: %s", strerror(errno));
                return 1;
        }
        pthread_join(writer, &written);
        long long until = daemon_now_ms() + WAIT_MS;
        while (!(fcntl(fds[0], F_GET_SEALS) & F_SEAL_FUTURE_WRITE) && daemon_now_ms() < until)
                sleep_us(1000);
        if (!(fcntl(fds[0], F_GET_SEALS) & F_SEAL_FUTURE_WRITE)) {
                kid_say(sock, "FAIL hbgd's seal did not come once the lock was let go");
                return 1;
        }
        kid_say(sock, "DONE the write returned %ld; hbgd's seal came once it did", (long)(intptr_t)written);
        kid_cmd(sock);
        return 0;
}

/* Sessions closed and not freed yet (DaemonStatus.sessions_closing). */
static uint32_t closing_now(struct hbgd_proc *d, int st) {
        Hbg__Envelope *e = status_of(d, st, HBG__STATUS_KIND__STATUS_DAEMON);
        D_ASSERT(d, e->status_reply && e->status_reply->daemon, "no daemon in the status reply");
        uint32_t n = e->status_reply->daemon->sessions_closing;
        wire_free(e);
        return n;
}

/* The open sessions, and how many of them hbgd is sealing. */
static size_t sessions_sealing(struct hbgd_proc *d, int st, size_t *ret_open) {
        Hbg__Envelope *e = status_of(d, st, HBG__STATUS_KIND__STATUS_SESSIONS);
        size_t n = 0;
        *ret_open = e->status_reply->n_sessions;
        for (size_t i = 0; i < e->status_reply->n_sessions; i++)
                n += strcmp(e->status_reply->sessions[i]->serving, "sealing") == 0;
        wire_free(e);
        return n;
}

START_TEST(seal_waits_alone) {
        struct hbgd_proc *d = start_hbgd_conf(MODE_URING, "");
        int base = fd_baseline(d);
        struct lock_holder h = { .path = d->socket_path };
        struct kid k;
        char buf[256];
        /* A write that stopped waiting for its fault (the kernel may end
         * such a wait early) spoils a try: up to three. */
        for (unsigned attempt = 1;; attempt++) {
                kid_start(&k, SAME_UID, lock_holder_fn, &h);
                D_ASSERT(d, kid_line(&k, WAIT_MS, buf, sizeof(buf)) == 0, "the lock holder said nothing");
                if (strncmp(buf, "RETRY", 5) != 0)
                        break;
                fprintf(stderr, "seal_waits_alone: try %u: %s\n", attempt, buf + 6);
                kid_end(d, &k, WAIT_MS, "the lock holder");
                D_ASSERT(d, attempt < 3, "the lock holder's write never held the lock long enough");
        }
        if (strncmp(buf, "SKIP", 4) == 0) {
                fprintf(stderr, "seal_waits_alone: skipped, no %s\n", buf + 5);
                kid_end(d, &k, WAIT_MS, "the lock holder");
                abuse_epilogue(d, base, "seal_waits_alone");
                return;
        }
        D_ASSERT(d, strncmp(buf, "READY", 5) == 0, "the lock holder: %s", buf);
        int st = raw_connect(d->socket_path);
        raw_hello(st);
        uint64_t charged = memory_charged_now(d, st);
        D_ASSERT(d, charged > 0, "the lock holder's session is not charged");
        /* hbgd's seal of it waits for the lock now. Others are served. */
        long long t0 = daemon_now_ms();
        for (unsigned i = 0; i < 4; i++) {
                hbg_client *c = NULL;
                int err = hbg_connect(&c, d->socket_path);
                D_ASSERT(d, err == 0, "connect %u while hbgd's seal of another session waited: %s [%s]", i,
                         hbg_strerror(err), hbg_last_error(NULL));
                struct workload w;
                D_ASSERT(d, wl_init(&w, c, 2) == 0, "workload");
                D_ASSERT(d, wl_run(&w, 3, -1) == 3, "graphs while hbgd's seal of another session waited");
                hbg_disconnect(c);
        }
        long long served_ms = daemon_now_ms() - t0;
        /* hbg_disconnect() does not wait for hbgd to see the hang-up. */
        size_t open = 0, sealing = sessions_sealing(d, st, &open);
        for (long long until = daemon_now_ms() + WAIT_MS; open > 1 && daemon_now_ms() < until;) {
                sleep_us(10000);
                sealing = sessions_sealing(d, st, &open);
        }
        D_ASSERT(d, open == 1 && sealing == 1, "%zu sessions open, %zu of them sealing; expected the lock holder's, "
                 "sealing", open, sealing);
        int sealers = daemon_threads_named(d->pid, "hbgd-seal");
        D_ASSERT(d, sealers == 1, "%d threads of hbgd named hbgd-seal while its seal waits, not 1", sealers);
        kid_tell(&k, 'C');
        fresh_status(d, WAIT_MS, "seal_waits_alone: after the stuck session closed");
        sleep_us(300000); /* past a housekeeping tick, which collects closed sessions' rings */
        uint64_t kept = memory_charged_now(d, st);
        D_ASSERT(d, kept == charged, "the session closed during hbgd's seal was freed before the seal returned "
                 "(%" PRIu64 " bytes charged, %" PRIu64 " before the close)", kept, charged);
        D_ASSERT(d, log_has(d, "closed while hbgd's seal of its submission region waits"),
                 "hbgd did not log the session kept for its seal");
        uint32_t closing = closing_now(d, st);
        D_ASSERT(d, closing == 1, "status shows %u sessions closing, not the one its seal keeps", closing);
        kid_tell(&k, 'R');
        const char *done = kid_expect(d, &k, "DONE", WAIT_MS, buf, sizeof(buf), "the lock holder");
        long long until = daemon_now_ms() + WAIT_MS;
        while (memory_charged_now(d, st) != 0 && daemon_now_ms() < until)
                sleep_us(10000);
        D_ASSERT(d, memory_charged_now(d, st) == 0, "the closed session's charge stayed after hbgd's seal returned");
        while (closing_now(d, st) != 0 && daemon_now_ms() < until)
                sleep_us(10000);
        D_ASSERT(d, closing_now(d, st) == 0, "status still shows a session closing after hbgd's seal returned");
        while (daemon_threads_named(d->pid, "hbgd-seal") != 0 && daemon_now_ms() < until)
                sleep_us(10000);
        D_ASSERT(d, daemon_threads_named(d->pid, "hbgd-seal") == 0, "hbgd's seal thread stayed after it returned");
        close(st);
        fprintf(stderr, "seal_waits_alone: 4 connects and 12 graphs in %lld ms while hbgd's seal waited; %s\n",
                served_ms, done);
        kid_tell(&k, 'Q');
        kid_end(d, &k, WAIT_MS, "the lock holder");
        abuse_epilogue(d, base, "seal_waits_alone");
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

/* ------------------------------------------------------------ 7. dead client, long kernel */

/* One graph of spin_ns tasks (ns each, `blocks` blocks), `graphs` times;
 * says "SUBMITTED" and waits to be killed. */
struct spinner {
        const char *path;
        uint64_t ns;
        unsigned tasks, blocks, graphs;
        uint64_t first_ns; /* > 0: the first graph's first task runs this long */
};

static int spinner_fn(int sock, void *arg) {
        const struct spinner *s = arg;
        hbg_client *c = NULL;
        int err = hbg_connect(&c, s->path);
        if (err < 0) {
                kid_say(sock, "FAIL hbg_connect: %s [%s]", hbg_strerror(err), hbg_last_error(NULL));
                return 1;
        }
        for (unsigned g = 0; g < s->graphs; g++) {
                for (unsigned i = 0; i < s->tasks; i++) {
                        hbg_task t = HBG_TASK_INIT("spin_ns");
                        t.blocks = (uint16_t)s->blocks;
                        t.n_scalars = 1;
                        t.scalars[0] = s->first_ns && g == 0 && i == 0 ? s->first_ns : s->ns;
                        if ((err = hbg_graph_add(c, &t, NULL)) < 0)
                                break;
                }
                uint64_t graph;
                if (err < 0 || (err = hbg_graph_submit(c, &graph)) < 0) {
                        kid_say(sock, "FAIL graph %u: %s [%s]", g, hbg_strerror(err), hbg_last_error(c));
                        return 1;
                }
        }
        kid_say(sock, "SUBMITTED");
        kid_cmd(sock);
        hbg_disconnect(c);
        return 0;
}

START_TEST(dead_client_long_kernel) {
        struct hbgd_proc *d =
                start_hbgd_conf(MODE_URING, "[scheduler]\nthreads = 2\nclusters = 2\n[limits]\nmax_task_cost = 0\n");
        int base = fd_baseline(d);
        int mon = raw_connect(d->socket_path);
        raw_hello(mon);
        struct spinner s = { .path = d->socket_path, .ns = 1000000000, .tasks = 1, .blocks = 4, .graphs = 1 };
        struct kid k;
        char buf[256];
        kid_start(&k, SAME_UID, spinner_fn, &s);
        kid_expect(d, &k, "SUBMITTED", IO_MS, buf, sizeof(buf), "the client of the long kernel");
        wait_classified(d, mon, 1, "dead_client_long_kernel");
        sleep_us(100000);
        assert_running(d, mon, k.pid, "dead_client_long_kernel");

        /* hbgd sees the hang-up (the session leaves its list) and answers
         * a new client within 1 s, while the kernel still runs. */
        pid_t pid = k.pid;
        long long t0 = daemon_now_ms();
        kid_kill(&k);
        while (session_listed(d, mon, pid) && daemon_now_ms() - t0 < 1000)
                sleep_us(2000);
        long long t_gone = daemon_now_ms() - t0;
        D_ASSERT(d, t_gone < 1000, "the killed client's session was still listed %lld ms after the kill", t_gone);
        long long ms = fresh_status(d, 1000, "dead_client_long_kernel: right after the client was killed");
        /* dispatched counts blocks once they returned: still none. */
        uint64_t classified, dispatched;
        thread_counts(d, mon, &classified, &dispatched);
        fprintf(stderr, "dead_client_long_kernel: session closed %lld ms after the kill, a new client answered in "
                "%lld ms, kernel blocks returned: %" PRIu64 "\n", t_gone, ms, dispatched);
        D_ASSERT(d, dispatched == 0, "hbgd answered only after the killed client's kernel returned");
        close(mon);
        assert_fd_baseline(d, base, "dead_client_long_kernel: after the long kernel returned");
        assert_serving(d);
        stop_hbgd(d);
}
END_TEST

/* ------------------------------------------------------------ 8. one session, all threads */

/* Another uid's ready task waits for at most one running kernel of a
 * session that keeps every thread busy (the attacker runs as uid 65534:
 * fair share is per uid, and a user's own sessions share its turns). */

/* The honest client of one_session_all_threads' chain case: on 'G', one
 * graph of CHAIN_FILLS fills of one tensor (each waits for the one
 * before), then "DONE 1 MS" with the graph's time. */
#define CHAIN_FILLS 16u
static int honest_chain_fn(int sock, void *arg) {
        hbg_client *c = NULL;
        hbg_tensor t;
        int err = hbg_connect(&c, arg);
        if (err < 0 || (err = hbg_tensor_alloc(c, 1024 * sizeof(float), &t)) < 0) {
                kid_say(sock, "FAIL hbg_connect/alloc: %s [%s]", hbg_strerror(err), hbg_last_error(c));
                return 1;
        }
        kid_say(sock, "READY");
        if (kid_cmd(sock) != 'G')
                return 0;
        long long t0 = daemon_now_ms();
        uint64_t graph;
        for (unsigned i = 0; i < CHAIN_FILLS && err == 0; i++) {
                hbg_task task = HBG_TASK_INIT("fill_f32");
                task.n_args = 1;
                task.args[0].tensor = t;
                task.args[0].dir = HBG_OUT;
                task.n_scalars = 1;
                task.scalars[0] = hbg_f32((float)i);
                err = hbg_graph_add(c, &task, NULL);
        }
        if (err < 0 || (err = hbg_graph_submit(c, &graph)) < 0 || (err = hbg_graph_wait(c, graph, WAIT_MS)) < 0) {
                kid_say(sock, "FAIL the chain: %s [%s]", hbg_strerror(err), hbg_last_error(c));
                return 1;
        }
        const float *v = hbg_tensor_data(c, t);
        if (v[0] != (float)(CHAIN_FILLS - 1)) {
                kid_say(sock, "FAIL the chain's last fill is not the one left: %g", (double)v[0]);
                return 1;
        }
        kid_cmd(sock); /* 'Q' */
        kid_say(sock, "DONE 1 %lld", daemon_now_ms() - t0);
        hbg_disconnect(c);
        return 0;
}

/* _i == 0: the honest client connects first; _i == 1: it connects while
 * the attacker's kernels already hold every thread (a lone session's
 * visits must notice the newcomer, not finish their batch first); _i ==
 * 2: the same with a chain of CHAIN_FILLS tasks, each ready only when the
 * one before is done, and the attacker's first kernels of 0.2, 1, 1 and
 * 1 s: the three it started while it was alone and still runs count
 * against its cap, so the thread that comes free at 0.2 s runs the whole
 * chain. Before, kernels started alone did not count: that thread ran
 * the chain's first task, then one of the attacker's kernels, and the
 * chain went on only when the others came free, at 1 s. Bound 0.5 s. */
START_TEST(one_session_all_threads) {
        ck_assert_msg(geteuid() == 0, "one_session_all_threads needs root");
        bool late = _i >= 1, chain = _i == 2;
        struct hbgd_proc *d =
                start_hbgd_conf(MODE_URING, "[scheduler]\nthreads = 4\nclusters = 8\nstall_timeout_ms = 2000\n");
        open_to_all(d);
        int base = fd_baseline(d);
        int mon = raw_connect(d->socket_path);
        raw_hello(mon);
        struct kid attacker, honest;
        char buf[256];
        if (!late)
                honest_start(d, &honest);
        /* 3 graphs of 8 independent 1 s kernels (spin_ns caps a block at
         * 1 s): 8 ready at all times, and each thread (2 clusters, 4 vector
         * cores) could run 4 of them back to back in one visit. */
        struct spinner s = { .path = d->socket_path, .ns = 1000000000, .tasks = 8, .blocks = 1, .graphs = 3,
                             .first_ns = chain ? 200000000 : 0 };
        kid_start(&attacker, NOBODY, spinner_fn, &s);
        kid_expect(d, &attacker, "SUBMITTED", IO_MS, buf, sizeof(buf), "the attacker");
        wait_classified(d, mon, 8, "one_session_all_threads");
        sleep_us(chain ? 100000 : 300000); /* the chain's case: before its first kernel ends */
        assert_running(d, mon, attacker.pid, "one_session_all_threads");
        if (chain) {
                kid_start(&honest, SAME_UID, honest_chain_fn, (void *)d->socket_path);
                kid_expect(d, &honest, "READY", IO_MS, buf, sizeof(buf), "the honest client");
        } else if (late) {
                honest_start(d, &honest);
        }
        /* Exactly one graph: 'Q' is there before it ends. */
        kid_tell(&honest, 'G');
        kid_tell(&honest, 'Q');
        long long ms = 0;
        honest_stop(d, &honest, &ms);
        long long bound = chain ? 500 : 3000;
        fprintf(stderr, "one_session_all_threads (honest client connects %s): the honest %u-task graph took "
                "%lld ms (bound %lld)\n", late ? "late" : "first", chain ? CHAIN_FILLS : 1u, ms, bound);
        D_ASSERT(d, ms <= bound,
                 "another uid's %u-task graph took %lld ms with one session's kernels of up to 1 s on every thread "
                 "(it may wait for one running kernel: bound %lld ms with margin)", chain ? CHAIN_FILLS : 1u, ms,
                 bound);
        fresh_status(d, LIVE_MS, "one_session_all_threads");
        kid_kill(&attacker);
        close(mon);
        assert_fd_baseline(d, base, "one_session_all_threads: after the attacker left");
        assert_serving(d);
        stop_hbgd(d);
}
END_TEST

/* ------------------------------------------------------------ wake page */

/*
 * A client spinning FUTEX_WAKE on the wake page's word (docs/SECURITY.md,
 * RUNTIME_LOGIC.md §9.4): it burns its own CPU and wakes hbgd's parked
 * threads for nothing, which hbgd counts (spurious_wakeups) and bounds
 * (WAKEUP_SPURIOUS_MAX per thread and window, then the thread sleeps out
 * of the clients' reach until the window ends, where the doorbell still
 * wakes it). Counts only: the bound on hbgd's wake-ups is computed from
 * the windows the attack lasted, however long that was on a busy
 * machine. An honest client's graphs complete meanwhile.
 */
enum { WAKE_ATTACK_THREADS = 2, WAKE_ATTACK_WAKES = 400000 };

/* A session of the kid's own, and the wake page (its fifth fd) mapped
 * as a client maps it, then the doorbell rung, as a client rings once it
 * has mapped its regions: hbgd serves the session, and the thread its
 * serving kick wakes parks again on the page (a page's making wakes
 * nobody, §9.4). NULL after saying why. */
static const struct hbg_wake_page *kid_wake_page(int sock, void *arg) {
        int fds[SESSION_FDS];
        if (kid_session(sock, arg, fds) < 0)
                return NULL;
        const struct hbg_wake_page *p = mmap(NULL, HBG_WAKE_PAGE_SIZE, PROT_READ, MAP_SHARED, fds[4], 0);
        if (p == MAP_FAILED) {
                kid_say(sock, "FAIL mapping the wake page: %s", strerror(errno));
                return NULL;
        }
        if (send(fds[2], "", 1, MSG_DONTWAIT | MSG_NOSIGNAL) != 1) {
                kid_say(sock, "FAIL ringing the doorbell: %s", strerror(errno));
                return NULL;
        }
        return p;
}

static int wake_attack_fn(int sock, void *arg) {
        const struct hbg_wake_page *p = kid_wake_page(sock, arg);
        if (!p)
                return 1;
        kid_say(sock, "READY");
        kid_cmd(sock);
        unsigned long woke = 0;
        for (unsigned i = 0; i < WAKE_ATTACK_WAKES; i++) {
                long n = syscall(SYS_futex, &p->word, FUTEX_WAKE, INT_MAX, NULL, NULL, 0);
                if (n < 0) {
                        kid_say(sock, "FAIL FUTEX_WAKE: %s", strerror(errno));
                        return 1;
                }
                woke += (unsigned long)n;
        }
        kid_say(sock, "DONE %lu", woke);
        /* And on, while the honest client runs, until told to stop. */
        while (!kid_cmd_pending(sock))
                syscall(SYS_futex, &p->word, FUTEX_WAKE, INT_MAX, NULL, NULL, 0);
        kid_cmd(sock);
        _exit(0);
}

/* The threads' wake-ups and spurious wake-ups, summed. */
static void wake_counts(struct hbgd_proc *d, int fd, uint64_t *wakeups, uint64_t *spurious) {
        bool parked;
        thread_wakes(d, fd, wakeups, spurious, &parked);
}

/* Until a thread has woken since the threads' wake-ups summed to `since`
 * and every thread is parked again (each one's parks = its wake-ups + 1):
 * a thread parks on the wake pages in use then (§9.4). */
static void wait_parked_since(struct hbgd_proc *d, int fd, uint64_t since, const char *what) {
        long long deadline = daemon_now_ms() + IO_MS;
        for (;;) {
                uint64_t wakeups, spurious;
                bool parked;
                thread_wakes(d, fd, &wakeups, &spurious, &parked);
                if (wakeups > since && parked)
                        return;
                D_ASSERT(d, daemon_now_ms() < deadline, "%s: no thread woke and parked again (wake-ups %" PRIu64
                         ", %" PRIu64 " before; all parked: %d)", what, wakeups, since, parked);
                usleep(2000);
        }
}

START_TEST(wake_page_abuse) {
        char conf[128];
        snprintf(conf, sizeof(conf), "[scheduler]\nthreads = %d\n", WAKE_ATTACK_THREADS);
        struct hbgd_proc *d = start_hbgd_conf(MODE_URING, conf);
        int base = fd_baseline(d);
        int mon = raw_connect(d->socket_path);
        raw_hello(mon);
        struct kid k;
        char buf[256];
        uint64_t w0, s0, w1, s1;
        wake_counts(d, mon, &w0, &s0);
        kid_start(&k, SAME_UID, wake_attack_fn, d->socket_path);
        kid_expect(d, &k, "READY", IO_MS, buf, sizeof(buf), "wake_page_abuse: the attacker");
        /* The serving kick's thread parked again, on the page now. */
        wait_parked_since(d, mon, w0, "wake_page_abuse: the attacker's doorbell");
        wake_counts(d, mon, &w0, &s0);
        long long t0 = daemon_now_ms();
        kid_tell(&k, 'G');
        kid_expect(d, &k, "DONE", WAIT_MS, buf, sizeof(buf), "wake_page_abuse: the attacker");
        long long windows = (daemon_now_ms() - t0) / WAKEUP_SPURIOUS_WINDOW_MS + 2;
        wake_counts(d, mon, &w1, &s1);
        unsigned long woke = strtoul(buf + strlen("DONE "), NULL, 10);
        /* Per thread and window: the budget, the wake that ends the
         * window's calm sleep, and a little more for status requests and
         * the stall check. */
        uint64_t bound = (uint64_t)WAKE_ATTACK_THREADS * (WAKEUP_SPURIOUS_MAX + 4) * (uint64_t)windows;
        fprintf(stderr, "wake_page_abuse: %u wakes sent, %lu sleepers woken, hbgd woke %" PRIu64
                " times (%" PRIu64 " spurious) in %lld windows, bound %" PRIu64 "\n",
                (unsigned)WAKE_ATTACK_WAKES, woke, w1 - w0, s1 - s0, windows, bound);
        D_ASSERT(d, s1 > s0, "a client's %u FUTEX_WAKEs on the wake page counted no spurious wake-up",
                 (unsigned)WAKE_ATTACK_WAKES);
        D_ASSERT(d, w1 - w0 <= bound,
                 "a client's FUTEX_WAKEs woke hbgd's threads %" PRIu64 " times in %lld windows (bound %" PRIu64 ")",
                 w1 - w0, windows, bound);
        /* The attacker still spinning: an honest client runs. */
        honest_graphs(d, 64 / hostile_scale() + 1, "wake_page_abuse");
        kid_tell(&k, 'Q');
        kid_end(d, &k, IO_MS, "wake_page_abuse: the attacker");
        close(mon);
        assert_fd_baseline(d, base, "wake_page_abuse: after the attacker left");
        assert_serving(d);
        stop_hbgd(d);
}
END_TEST

/*
 * Waiters of its own on the wake page's word: FUTEX_WAIT sleepers that
 * take other clients' wakes (a FUTEX_WAKE of 1 that reaches one of them
 * says 1: "woke somebody"), a FUTEX_WAIT_REQUEUE_PI sleeper that makes
 * every FUTEX_WAKE of the word fail, and FUTEX_CMP_REQUEUEs that move
 * hbgd's sleepers onto a word of its own. hbgd's own wakes never go
 * through that word. As another uid the attacker has a page of its own
 * and never sees the honest client's wakes; as the same uid it shares
 * the honest client's page and takes its wakes, and the honest client,
 * which skipped the doorbell after a wake that "woke somebody", rings
 * it before it sleeps (need_wakeup still set): its graphs after idle
 * moments all run, either way. Each graph also publishes from inside the
 * wait (a kernel, then a host task the waiting thread runs, whose answer
 * wakes hbgd, then a task after it), under a stall limit of 0 (no timed
 * wake of the parked threads): a trusted wake made there is confirmed
 * too. The attacker counts the wakes its waiters took: none as another
 * uid, some as the same uid. _i: bit 0 the PI sleeper and requeues, bit
 * 1 as uid 65534.
 */
enum { PAGE_WAITERS = 4 };

struct page_waiter {
        const _Atomic uint32_t *word;
        _Atomic uint32_t own;          /* the requeue target / PI word */
        int pi;
};

static _Atomic unsigned long page_waiter_wakes; /* wakes the waiters took */

static void *page_waiter_main(void *arg) {
        struct page_waiter *w = arg;
        for (;;) {
                if (w->pi) {
                        syscall(SYS_futex, w->word, FUTEX_WAIT_REQUEUE_PI, 0, NULL, &w->own, 0);
                } else if (syscall(SYS_futex, w->word, FUTEX_WAIT, 0, NULL, NULL, 0) == 0) {
                        atomic_fetch_add(&page_waiter_wakes, 1);
                }
        }
        return NULL;
}

/* What the attacker does: 0 plain waiters only, 1 also the PI sleeper
 * and the requeues. Set before the kid is forked. */
static int page_attack;

static int page_waiters_fn(int sock, void *arg) {
        const struct hbg_wake_page *p = kid_wake_page(sock, arg);
        if (!p)
                return 1;
        static struct page_waiter w[PAGE_WAITERS + 1];
        for (unsigned i = 0; i < PAGE_WAITERS + (page_attack ? 1u : 0u); i++) {
                w[i] = (struct page_waiter){ .word = &p->word, .pi = i == PAGE_WAITERS };
                pthread_t th;
                if (pthread_create(&th, NULL, page_waiter_main, &w[i]) != 0) {
                        kid_say(sock, "FAIL pthread_create");
                        return 1;
                }
        }
        kid_say(sock, "READY");
        /* Requeue whatever sleeps on the word (hbgd's threads among them)
         * onto a word of our own, until told to stop. */
        while (!kid_cmd_pending(sock)) {
                if (page_attack)
                        syscall(SYS_futex, &p->word, FUTEX_CMP_REQUEUE, 0, INT_MAX, &w[0].own, 0);
                usleep(1000);
        }
        kid_cmd(sock);
        kid_say(sock, "TOOK %lu", atomic_load(&page_waiter_wakes));
        kid_cmd(sock);
        _exit(0);
}

static int page_host_fn(void *arg) {
        (void)arg;
        usleep(2000);
        return 0;
}

START_TEST(wake_page_waiters) {
        page_attack = _i & 1;
        bool other_uid = (_i & 2) != 0;
        if (other_uid && geteuid() != 0) {
                fprintf(stderr, "wake_page_waiters: the attacker as uid 65534 skipped: it needs root\n");
                return;
        }
        struct hbgd_proc *d = start_hbgd_conf(MODE_URING, "[scheduler]\nstall_timeout_ms = 0\n");
        if (other_uid)
                open_to_all(d);
        struct kid k;
        char buf[256];
        kid_start(&k, other_uid ? NOBODY : SAME_UID, page_waiters_fn, d->socket_path);
        kid_expect(d, &k, "READY", IO_MS, buf, sizeof(buf), "wake_page_waiters: the attacker");
        hbg_client *c = NULL;
        int err = hbg_connect(&c, d->socket_path);
        D_ASSERT(d, err == 0, "wake_page_waiters: hbg_connect: %s", hbg_strerror(err));
        /* One-task graphs after idle moments: hbgd's threads park between
         * them, so each one needs a wake-up from the client. */
        unsigned n = 20, ok = 0;
        for (unsigned i = 0; i < n; i++) {
                usleep(20000);
                hbg_task t = HBG_TASK_INIT("noop");
                uint64_t g, id;
                err = hbg_graph_add(c, &t, NULL);
                if (err == 0)
                        err = hbg_graph_submit(c, &g);
                if (err == 0)
                        err = hbg_graph_wait(c, g, WAIT_MS);
                D_ASSERT(d, err == 0, "wake_page_waiters: graph %u after an idle moment: %s", i, hbg_strerror(err));
                /* Publishes from inside the wait: the host task's answer
                 * (the kernel before it let hbgd's threads park). */
                hbg_task spin = HBG_TASK_INIT("spin_ns");
                spin.n_scalars = 1;
                spin.scalars[0] = 2000000;
                err = hbg_graph_add(c, &spin, &id);
                hbg_task host = { .size = sizeof(hbg_task), .host_fn = page_host_fn, .n_deps = 1, .deps = { id } };
                err = err ? err : hbg_graph_add(c, &host, &id);
                hbg_task after = HBG_TASK_INIT("noop");
                after.n_deps = 1;
                after.deps[0] = id;
                err = err ? err : hbg_graph_add(c, &after, NULL);
                err = err ? err : hbg_graph_submit(c, &g);
                err = err ? err : hbg_graph_wait(c, g, WAIT_MS);
                D_ASSERT(d, err == 0, "wake_page_waiters: graph %u with a host task: %s", i, hbg_strerror(err));
                ok++;
        }
        fprintf(stderr, "wake_page_waiters: %u of %u graphs after idle moments ran while %d waiters%s of %s held "
                "its wake page's word\n", ok, n, PAGE_WAITERS,
                page_attack ? ", a FUTEX_WAIT_REQUEUE_PI sleeper and requeues" : "",
                other_uid ? "uid 65534" : "the same uid");
        hbg_disconnect(c);
        kid_tell(&k, 'Q');
        const char *took = kid_expect(d, &k, "TOOK", IO_MS, buf, sizeof(buf), "wake_page_waiters: the attacker");
        unsigned long stolen = strtoul(took, NULL, 10);
        fprintf(stderr, "wake_page_waiters: the attacker's waiters took %lu wakes\n", stolen);
        if (other_uid)
                D_ASSERT(d, stolen == 0, "uid 65534's waiters took %lu wakes through its page", stolen);
        else if (!page_attack)
                D_ASSERT(d, stolen > 0, "the same uid's waiters took no wake: is the page its uid's?");
        kid_tell(&k, 'Q');
        kid_end(d, &k, IO_MS, "wake_page_waiters: the attacker");
        assert_serving(d);
        stop_hbgd(d);
}
END_TEST

/*
 * One wake page per uid (RUNTIME_LOGIC.md §9.4): sessions of one uid share
 * a page marked HBG_WAKE_OWN, each uid has its own, the uids past the
 * first WAKE_PAGES_OWN with a page share one without the mark; a page
 * goes with its uid's last session (hbgd keeps no fd) and a new uid gets
 * a fresh one. Each kid opens a session as uid PAGE_UID0 + its number and
 * says its page's inode and flags.
 */
enum { PAGE_UID0 = 61000, PAGE_OWN = 32, PAGE_KIDS = PAGE_OWN + 2 };

static int page_of_uid_fn(int sock, void *arg) {
        int fds[SESSION_FDS];
        if (kid_session(sock, arg, fds) < 0)
                return 1;
        struct stat st;
        const struct hbg_wake_page *p = mmap(NULL, HBG_WAKE_PAGE_SIZE, PROT_READ, MAP_SHARED, fds[4], 0);
        if (p == MAP_FAILED || fstat(fds[4], &st) < 0) {
                kid_say(sock, "FAIL the wake page: %s", strerror(errno));
                return 1;
        }
        kid_say(sock, "PAGE %lu %u", (unsigned long)st.st_ino, (unsigned)p->flags);
        kid_cmd(sock); /* hold the session until told */
        _exit(0);
}

static void page_of_uid(struct hbgd_proc *d, struct kid *k, uid_t uid, unsigned long *ino, unsigned *flags) {
        char buf[128], what[64];
        snprintf(what, sizeof(what), "wake_page_per_uid: uid %u", (unsigned)uid);
        kid_start(k, uid, page_of_uid_fn, d->socket_path);
        const char *msg = kid_expect(d, k, "PAGE", IO_MS, buf, sizeof(buf), what);
        D_ASSERT(d, sscanf(msg, "%lu %u", ino, flags) == 2, "%s: %s", what, msg);
}

START_TEST(wake_page_per_uid) {
        ck_assert_msg(geteuid() == 0, "wake_page_per_uid needs root");
        struct hbgd_proc *d = start_hbgd_conf(MODE_URING, "[limits]\nmax_sessions = 256\n[session]\n"
                                                          "heap_size = 1048576\ntask_window = 1024\nflag_window = 1024\n");
        open_to_all(d);
        int base = fd_baseline(d);
        struct kid k[PAGE_KIDS + 1];
        unsigned long ino[PAGE_KIDS + 1];
        unsigned flags[PAGE_KIDS + 1];
        for (unsigned i = 0; i < PAGE_KIDS; i++)
                page_of_uid(d, &k[i], PAGE_UID0 + i, &ino[i], &flags[i]);
        /* A second session of the first uid: its page again. */
        page_of_uid(d, &k[PAGE_KIDS], PAGE_UID0, &ino[PAGE_KIDS], &flags[PAGE_KIDS]);
        for (unsigned i = 0; i < PAGE_OWN; i++) {
                D_ASSERT(d, flags[i] & HBG_WAKE_OWN, "uid %u: its page is not marked its own", PAGE_UID0 + i);
                for (unsigned j = 0; j < i; j++)
                        D_ASSERT(d, ino[i] != ino[j], "uids %u and %u share a page", PAGE_UID0 + j, PAGE_UID0 + i);
        }
        D_ASSERT(d, ino[PAGE_KIDS] == ino[0] && (flags[PAGE_KIDS] & HBG_WAKE_OWN),
                 "a second session of uid %u got another page", PAGE_UID0);
        for (unsigned i = PAGE_OWN; i < PAGE_KIDS; i++) {
                D_ASSERT(d, !(flags[i] & HBG_WAKE_OWN), "uid %u, past %u uids: its page is marked its own",
                         PAGE_UID0 + i, (unsigned)PAGE_OWN);
                D_ASSERT(d, ino[i] == ino[PAGE_OWN], "the uids past %u do not share one page", (unsigned)PAGE_OWN);
                for (unsigned j = 0; j < PAGE_OWN; j++)
                        D_ASSERT(d, ino[i] != ino[j], "uid %u got uid %u's own page", PAGE_UID0 + i, PAGE_UID0 + j);
        }
        for (unsigned i = 0; i <= PAGE_KIDS; i++) {
                kid_tell(&k[i], 'Q');
                kid_end(d, &k[i], IO_MS, "wake_page_per_uid");
        }
        /* Every uid gone: hbgd holds no page of theirs. */
        assert_fd_baseline(d, base, "wake_page_per_uid: after every uid left");
        /* A new uid: a page of its own, none seen before. */
        unsigned long fresh;
        unsigned fresh_flags;
        page_of_uid(d, &k[0], PAGE_UID0 + 100, &fresh, &fresh_flags);
        D_ASSERT(d, fresh_flags & HBG_WAKE_OWN, "a new uid after the others left: no page of its own");
        for (unsigned i = 0; i <= PAGE_KIDS; i++)
                D_ASSERT(d, fresh != ino[i], "a new uid got a page uid %u had", PAGE_UID0 + (i % PAGE_KIDS));
        kid_tell(&k[0], 'Q');
        kid_end(d, &k[0], IO_MS, "wake_page_per_uid");
        fprintf(stderr, "wake_page_per_uid: %u uids, %u pages of their own, the rest on one shared page; all "
                "closed with their sessions\n", (unsigned)PAGE_KIDS, (unsigned)PAGE_OWN);
        assert_fd_baseline(d, base, "wake_page_per_uid: at the end");
        assert_serving(d);
        stop_hbgd(d);
}
END_TEST

/* ------------------------------------------------------------ 9. task cost */

/* One graph of one task; hbg_graph_wait's result. */
static int run_one(hbg_client *c, const hbg_task *t) {
        uint64_t graph;
        int err = hbg_graph_add(c, t, NULL);
        if (err == 0)
                err = hbg_graph_submit(c, &graph);
        if (err == 0)
                err = hbg_graph_wait(c, graph, WAIT_MS);
        return err;
}

static hbg_task gemm_task(hbg_tensor a, hbg_tensor b, hbg_tensor cm, uint64_t m, uint64_t n, uint64_t k) {
        hbg_task t = HBG_TASK_INIT("gemm_f32");
        t.n_args = 3;
        t.args[0].tensor = a;
        t.args[0].dir = HBG_IN;
        t.args[1].tensor = b;
        t.args[1].dir = HBG_IN;
        t.args[2].tensor = cm;
        t.args[2].dir = HBG_INOUT;
        t.n_scalars = 3;
        t.scalars[0] = m;
        t.scalars[1] = n;
        t.scalars[2] = k;
        return t;
}

static hbg_tensor alloc_filled(struct hbgd_proc *d, hbg_client *c, size_t n, float v) {
        hbg_tensor t;
        int err = hbg_tensor_alloc(c, n * sizeof(float), &t);
        D_ASSERT(d, err == 0, "hbg_tensor_alloc(%zu floats): %s [%s]", n, hbg_strerror(err), hbg_last_error(c));
        float *p = hbg_tensor_data(c, t);
        for (size_t i = 0; i < n; i++)
                p[i] = v;
        return t;
}

START_TEST(task_cost_limit) {
        struct hbgd_proc *d = start_hbgd_conf(MODE_URING, "[session]\nheap_size = 64M\n");
        hbg_client *c = NULL;
        int err = hbg_connect(&c, d->socket_path);
        D_ASSERT(d, err == 0, "hbg_connect: %s [%s]", hbg_strerror(err), hbg_last_error(NULL));
        enum { BIG = 2048, SMALL = 64 };
        hbg_tensor a = alloc_filled(d, c, BIG * BIG, 0), b = alloc_filled(d, c, BIG * BIG, 0),
                   cm = alloc_filled(d, c, BIG * BIG, 0);
        hbg_task t = gemm_task(a, b, cm, BIG, BIG, BIG);
        err = run_one(c, &t);
        D_ASSERT(d, err == -E2BIG, "gemm_f32 of 2048^3 (8.6e9 > max_task_cost 2^31): %d (%s), expected -E2BIG",
                 err, hbg_strerror(err));
        t = HBG_TASK_INIT("spin_ns");
        t.blocks = 4;
        t.n_scalars = 1;
        t.scalars[0] = 1000000000;
        long long t0 = daemon_now_ms();
        err = run_one(c, &t);
        long long took = daemon_now_ms() - t0;
        D_ASSERT(d, err == -E2BIG, "spin_ns of 4 blocks x 1 s (cost 4e9): %d (%s) after %lld ms, expected -E2BIG",
                 err, hbg_strerror(err), took);
        /* Small work still runs, and right: C += A B = 0.5 + 64 * 2. */
        hbg_tensor sa = alloc_filled(d, c, SMALL * SMALL, 1.0f), sb = alloc_filled(d, c, SMALL * SMALL, 2.0f),
                   sc = alloc_filled(d, c, SMALL * SMALL, 0.5f);
        t = gemm_task(sa, sb, sc, SMALL, SMALL, SMALL);
        err = run_one(c, &t);
        D_ASSERT(d, err == 0, "gemm_f32 of 64^3: %s [%s]", hbg_strerror(err), hbg_last_error(c));
        const float *v = hbg_tensor_data(c, sc);
        for (unsigned i = 0; i < SMALL * SMALL; i++)
                D_ASSERT(d, v[i] == 128.5f, "gemm 64^3: C[%u] = %g, expected 128.5", i, (double)v[i]);
        hbg_disconnect(c);
        fresh_status(d, LIVE_MS, "task_cost_limit");
        stop_hbgd(d);

        d = start_hbgd_conf(MODE_URING, "[limits]\nmax_task_cost = 1000\n");
        err = hbg_connect(&c, d->socket_path);
        D_ASSERT(d, err == 0, "hbg_connect: %s [%s]", hbg_strerror(err), hbg_last_error(NULL));
        hbg_tensor f = alloc_filled(d, c, 4096, 0), g = alloc_filled(d, c, 256, 0);
        t = HBG_TASK_INIT("fill_f32");
        t.n_args = 1;
        t.args[0].tensor = f;
        t.args[0].dir = HBG_OUT;
        t.n_scalars = 1;
        t.scalars[0] = hbg_f32(1.0f);
        err = run_one(c, &t);
        D_ASSERT(d, err == -E2BIG, "fill_f32 of 4096 elements with max_task_cost = 1000: %d (%s), expected -E2BIG",
                 err, hbg_strerror(err));
        t.args[0].tensor = g;
        err = run_one(c, &t);
        D_ASSERT(d, err == 0, "fill_f32 of 256 elements with max_task_cost = 1000: %s", hbg_strerror(err));
        D_ASSERT(d, ((const float *)hbg_tensor_data(c, g))[255] == 1.0f, "fill_f32 of 256 did not write");
        hbg_disconnect(c);
        fresh_status(d, LIVE_MS, "task_cost_limit (max_task_cost = 1000)");
        stop_hbgd(d);
}
END_TEST

/* The same attack with data that makes the work slow: subnormal A (1e-39)
 * multiplies 40-100 times slower on many x86 cores than max_task_cost's
 * count assumes, and hbgd keeps IEEE results. Two sessions each submit a
 * graph of 4 gemm_f32 tasks at 1/64 of max_task_cost (320^3 multiply-adds,
 * accepted by the cost check) beside an honest client; with
 * kernel_time_budget_ms = 1 every one of them stops with -ETIME and the
 * kernel's own message (320^3 takes far longer than 1 ms on any data, so
 * nothing here depends on how slow this CPU is on subnormals). The
 * sessions go on (a gemm too small to look at the clock is right), the
 * honest client's results stay right, hbgd keeps serving. */
START_TEST(task_cost_subnormal) {
        struct hbgd_proc *d = start_hbgd_conf(MODE_URING, "[session]\nheap_size = 16M\n[limits]\n"
                                                          "kernel_time_budget_ms = 1\n");
        int base = fd_baseline(d);
        struct kid honest;
        honest_start(d, &honest);
        kid_tell(&honest, 'G');
        enum { DIM = 320, TASKS = 4, SESSIONS = 2, SMALL = 16 };
        _Static_assert((uint64_t)DIM * DIM * DIM <= (UINT64_C(1) << 31) / 64, "within 1/64 of max_task_cost");
        hbg_client *c[SESSIONS];
        uint64_t graph[SESSIONS];
        for (unsigned s = 0; s < SESSIONS; s++) {
                int err = hbg_connect(&c[s], d->socket_path);
                D_ASSERT(d, err == 0, "hbg_connect: %s [%s]", hbg_strerror(err), hbg_last_error(NULL));
                hbg_tensor a = alloc_filled(d, c[s], DIM * DIM, 1e-39f), b = alloc_filled(d, c[s], DIM * DIM, 1.5f);
                for (unsigned i = 0; i < TASKS; i++) {
                        hbg_task t = gemm_task(a, b, alloc_filled(d, c[s], DIM * DIM, 0), DIM, DIM, DIM);
                        err = hbg_graph_add(c[s], &t, NULL);
                        D_ASSERT(d, err == 0, "hbg_graph_add: %s [%s]", hbg_strerror(err), hbg_last_error(c[s]));
                }
                err = hbg_graph_submit(c[s], &graph[s]);
                D_ASSERT(d, err == 0, "hbg_graph_submit: %s [%s]", hbg_strerror(err), hbg_last_error(c[s]));
        }
        for (unsigned s = 0; s < SESSIONS; s++) {
                int err = hbg_graph_wait(c[s], graph[s], WAIT_MS);
                D_ASSERT(d, err == -ETIME, "session %u: %d gemm_f32 tasks of %u^3 on subnormal data with "
                         "kernel_time_budget_ms = 1: %d (%s) [%s], expected -ETIME", s, TASKS, DIM, err,
                         hbg_strerror(err), hbg_last_error(c[s]));
                hbg_graph_error_info info = HBG_GRAPH_ERROR_INFO_INIT;
                D_ASSERT(d, hbg_graph_error(c[s], graph[s], &info) == 0, "hbg_graph_error");
                D_ASSERT(d, strcmp(info.message, "gemm_f32: kernel exceeded its time budget of 1 ms") == 0 &&
                                    strcmp(info.kernel, "gemm_f32") == 0,
                         "session %u: message '%s', kernel '%s'", s, info.message, info.kernel);
                /* The session goes on: 16^3 never looks at the clock. */
                hbg_tensor sa = alloc_filled(d, c[s], SMALL * SMALL, 1e-39f),
                           sb = alloc_filled(d, c[s], SMALL * SMALL, 2.0f),
                           sc = alloc_filled(d, c[s], SMALL * SMALL, 0.0f);
                hbg_task t = gemm_task(sa, sb, sc, SMALL, SMALL, SMALL);
                err = run_one(c[s], &t);
                D_ASSERT(d, err == 0, "session %u: gemm_f32 of 16^3 after the budget failures: %s [%s]", s,
                         hbg_strerror(err), hbg_last_error(c[s]));
                /* 16 terms of 2e-39, each exact: a subnormal sum, not 0. */
                float want = 0.0f;
                for (unsigned p = 0; p < SMALL; p++)
                        want += 1e-39f * 2.0f;
                const float *v = hbg_tensor_data(c[s], sc);
                for (unsigned i = 0; i < SMALL * SMALL; i++)
                        D_ASSERT(d, memcmp(&v[i], &want, sizeof(float)) == 0, "C[%u] = %a, expected %a", i,
                                 (double)v[i], (double)want);
                hbg_disconnect(c[s]);
        }
        long long worst = 0;
        unsigned graphs = honest_stop(d, &honest, &worst);
        fprintf(stderr, "task_cost_subnormal: %u x %u subnormal gemm_f32 of %u^3 stopped by the 1 ms budget; "
                "honest client: %u graphs, worst %lld ms\n", SESSIONS, TASKS, DIM, graphs, worst);
        fresh_status(d, LIVE_MS, "task_cost_subnormal");
        assert_fd_baseline(d, base, "task_cost_subnormal: after the sessions left");
        assert_serving(d);
        stop_hbgd(d);
}
END_TEST

/* ------------------------------------------------------------ 10. memory and session budgets */

#define MAX_SESSIONS 64

struct budget {
        const char *path;
        int refusal;            /* the errno expected when the budget is used up */
        const char *names;      /* what the refusal message must name */
        bool refund;            /* disconnect one, then one more must fit */
};

/* Sessions until one is refused: "FULL n code message", then (refund)
 * "REFUND ms". */
static int budget_fn(int sock, void *arg) {
        const struct budget *b = arg;
        hbg_client *c[MAX_SESSIONS + 1];
        unsigned n = 0;
        int err = 0;
        while (n <= MAX_SESSIONS && (err = hbg_connect(&c[n], b->path)) == 0)
                n++;
        char msg[300];
        snprintf(msg, sizeof(msg), "%s", hbg_last_error(NULL));
        if (err == 0) {
                kid_say(sock, "FAIL %u sessions were all granted", n);
                return 1;
        }
        kid_say(sock, "FULL %u %d %s", n, err, msg);
        if (n == 0 || err != b->refusal || !strstr(msg, b->names))
                return 1;
        if (b->refund) {
                hbg_disconnect(c[--n]);
                long long t0 = daemon_now_ms();
                while ((err = hbg_connect(&c[n], b->path)) < 0 && daemon_now_ms() - t0 < 2000)
                        sleep_us(10000);
                if (err < 0) {
                        kid_say(sock, "FAIL no session 2 s after one was closed: %s [%s]", hbg_strerror(err),
                            hbg_last_error(NULL));
                        return 1;
                }
                n++;
                kid_say(sock, "REFUND %lld", daemon_now_ms() - t0);
        }
        kid_cmd(sock);
        while (n > 0)
                hbg_disconnect(c[--n]);
        return 0;
}

/* Fill the budget as uid (or this user): the number of sessions that fit. */
static unsigned fill_budget(struct hbgd_proc *d, struct kid *k, uid_t uid, struct budget *b, const char *who) {
        char buf[512];
        kid_start(k, uid, budget_fn, b);
        const char *full = kid_expect(d, k, "FULL", IO_MS, buf, sizeof(buf), who);
        unsigned n = 0;
        int code = 0, off = 0;
        sscanf(full, "%u %d %n", &n, &code, &off);
        fprintf(stderr, "%s: %u sessions, then %s: %s\n", who, n, strerror(-code), full + off);
        D_ASSERT(d, n >= 1, "%s: no session at all (%s)", who, full + off);
        D_ASSERT(d, code == b->refusal, "%s: refused with %d (%s), expected %d (%s)", who, code, strerror(-code),
                 b->refusal, strerror(-b->refusal));
        D_ASSERT(d, strstr(full + off, b->names), "%s: the refusal \"%s\" does not name %s", who, full + off,
                 b->names);
        if (b->refund) {
                const char *ms = kid_expect(d, k, "REFUND", IO_MS, buf, sizeof(buf), who);
                fprintf(stderr, "%s: a session fit again %s ms after one was closed\n", who, ms);
        }
        return n;
}

#define SMALL_SESSIONS "[session]\ntask_window = 1024\nflag_window = 1024\nheap_size = 1M\n"

START_TEST(memory_budget_per_uid) {
        ck_assert_msg(geteuid() == 0, "memory_budget_per_uid needs root");
        struct hbgd_proc *d = start_hbgd_conf(MODE_URING, SMALL_SESSIONS "[limits]\nmax_memory_per_uid = 8M\n");
        open_to_all(d);
        int base = fd_baseline(d);
        struct budget b = { .path = d->socket_path, .refusal = -EDQUOT, .names = "max_memory_per_uid",
                            .refund = true };
        struct kid nobody;
        unsigned n = fill_budget(d, &nobody, NOBODY, &b, "uid 65534, max_memory_per_uid = 8M");
        /* Root is not charged per uid: more sessions than nobody's fit. */
        hbg_client *c[MAX_SESSIONS];
        unsigned m = 0;
        int err = 0;
        while (m < n + 3 && (err = hbg_connect(&c[m], d->socket_path)) == 0)
                m++;
        char msg[300];
        snprintf(msg, sizeof(msg), "%s", hbg_last_error(NULL));
        while (m > 0)
                hbg_disconnect(c[--m]);
        D_ASSERT(d, err == 0, "root was refused a session beyond uid 65534's %u: %s [%s]", n, hbg_strerror(err), msg);
        kid_tell(&nobody, 'Q');
        kid_end(d, &nobody, IO_MS, "uid 65534");
        abuse_epilogue(d, base, "memory_budget_per_uid");
}
END_TEST

START_TEST(memory_budget_total) {
        /* The same 8M as a total: root is held to it like everyone. */
        struct hbgd_proc *d = start_hbgd_conf(MODE_URING, SMALL_SESSIONS "[limits]\nmax_memory = 8M\n");
        int base = fd_baseline(d);
        struct budget b = { .path = d->socket_path, .refusal = -EDQUOT, .names = "[limits] max_memory)",
                            .refund = true };
        struct kid k;
        unsigned n = fill_budget(d, &k, SAME_UID, &b, "max_memory = 8M");
        kid_tell(&k, 'Q');
        kid_end(d, &k, IO_MS, "the client filling max_memory");
        fprintf(stderr, "memory_budget_total: %u sessions fit, session %u was refused\n", n, n + 1);
        abuse_epilogue(d, base, "memory_budget_total");
}
END_TEST

START_TEST(sessions_per_uid) {
        ck_assert_msg(geteuid() == 0, "sessions_per_uid needs root");
        struct hbgd_proc *d = start_hbgd_conf(MODE_URING, SMALL_SESSIONS "[limits]\nmax_sessions_per_uid = 2\n");
        open_to_all(d);
        int base = fd_baseline(d);
        struct budget b = { .path = d->socket_path, .refusal = -EUSERS, .names = "max_sessions_per_uid",
                            .refund = true };
        struct kid k;
        unsigned n = fill_budget(d, &k, NOBODY, &b, "uid 65534, max_sessions_per_uid = 2");
        D_ASSERT(d, n == 2, "uid 65534 got %u sessions with max_sessions_per_uid = 2", n);
        kid_tell(&k, 'Q');
        kid_end(d, &k, IO_MS, "uid 65534");
        abuse_epilogue(d, base, "sessions_per_uid");
}
END_TEST

/* ------------------------------------------------------------ 11. big windows */

START_TEST(big_window_session_cheap) {
        struct hbgd_proc *d = start_hbgd_conf(MODE_URING, "[limits]\nmax_task_window = 1048576\nmax_heap_size = 1G\n"
                                                     "max_memory = 64G\n");
        int base = fd_baseline(d);
        struct kid k;
        honest_start(d, &k);
        kid_tell(&k, 'G');
        long long worst_session = 0;
        for (unsigned i = 0; i < 10; i++) {
                long long t0 = daemon_now_ms();
                int fd = raw_connect(d->socket_path);
                raw_hello(fd);
                Hbg__SessionRequest sr = HBG__SESSION_REQUEST__INIT;
                Hbg__Envelope env = HBG__ENVELOPE__INIT;
                sr.task_window = UINT64_C(1) << 20;
                sr.heap_size = UINT64_C(1) << 30;
                env.msg_case = HBG__ENVELOPE__MSG_SESSION_REQUEST;
                env.session_request = &sr;
                send_env(fd, &env, NULL, 0);
                int fds[SESSION_FDS];
                Hbg__Envelope *e = expect_env(fd, HBG__ENVELOPE__MSG_SESSION_REPLY, fds, SESSION_FDS);
                D_ASSERT(d, e->session_reply->task_window == sr.task_window &&
                                    e->session_reply->heap_size == sr.heap_size,
                         "session %u: granted window %" PRIu64 ", heap %" PRIu64, i, e->session_reply->task_window,
                         e->session_reply->heap_size);
                wire_free(e);
                for (unsigned j = 0; j < SESSION_FDS; j++)
                        close(fds[j]);
                close(fd);
                long long took = daemon_now_ms() - t0;
                worst_session = took > worst_session ? took : worst_session;
        }
        long long worst = 0;
        unsigned graphs = honest_stop(d, &k, &worst);
        fprintf(stderr, "big_window_session_cheap: 10 sessions of 2^20 tasks + 1 GiB heap, each answered within "
                "%lld ms; honest client: %u graphs, worst %lld ms\n", worst_session, graphs, worst);
        D_ASSERT(d, worst < 1000, "an honest 1-task graph took %lld ms while big sessions were created", worst);
        abuse_epilogue(d, base, "big_window_session_cheap");
}
END_TEST

/* ------------------------------------------------------------ suite */

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

/* ------------------------------------------------------------ 11. one uid, many sessions */

/*
 * Fair share is per uid (docs/SECURITY.md, "The guarantee between
 * sessions"): one uid's N sessions of long kernels together get one
 * share, and another uid's ready task waits for at most FAIR_THREADS x
 * (the other uids' weights: 1 here) of their kernels to *start* — counted,
 * not timed: every heavy item is timestamp_ns -> spin_ns, the light graph
 * one timestamp_ns, and the heavy stamps between the return of the light
 * submit and the light stamp are counted (at most the heavy kernels that
 * started in the light task's wait: the clock only orders). _i: 1, 5 or
 * 20 heavy sessions.
 */
#define FAIR_THREADS 4u
#define FAIR_OTHER_WEIGHTS 1u
#define FAIR_LIGHT_UID ((uid_t)65533)
#define FAIR_ITEMS 8u           /* items (stamp -> spin) per heavy graph */
#define FAIR_INFLIGHT 2u        /* heavy graphs in flight per session */
#define FAIR_SPIN_NS 10000000u  /* 10 ms */
#define FAIR_MAX_SESSIONS 20u
#define FAIR_ROUNDS 4u

static const unsigned fair_sessions[] = { 1, 5, FAIR_MAX_SESSIONS };

struct fair_heavy {
        const char *path;
        unsigned sessions;
};

struct heavy_graph {
        hbg_tensor stamp[FAIR_ITEMS];
        uint64_t graph;
};

static int64_t mono_ns(void) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* hbgd writes the stamps while we may read (its kernels, our mapping). */
static int64_t stamp_read(hbg_client *c, hbg_tensor t) {
        return __atomic_load_n((const int64_t *)hbg_tensor_data(c, t), __ATOMIC_RELAXED);
}

static int heavy_submit(hbg_client *c, struct heavy_graph *g) {
        int err = 0;
        for (unsigned i = 0; i < FAIR_ITEMS && err == 0; i++) {
                __atomic_store_n((int64_t *)hbg_tensor_data(c, g->stamp[i]), 0, __ATOMIC_RELAXED);
                hbg_task s = HBG_TASK_INIT("timestamp_ns");
                s.n_args = 1;
                s.args[0].tensor = g->stamp[i];
                s.args[0].dir = HBG_OUT;
                uint64_t id;
                if ((err = hbg_graph_add(c, &s, &id)) < 0)
                        break;
                hbg_task k = HBG_TASK_INIT("spin_ns");
                k.n_scalars = 1;
                k.scalars[0] = FAIR_SPIN_NS;
                k.n_deps = 1;
                k.deps[0] = id;
                err = hbg_graph_add(c, &k, NULL);
        }
        if (err == 0)
                err = hbg_graph_submit(c, &g->graph);
        return err;
}

/* Report the stamps of g written so far, several to a line. */
static void heavy_report(int sock, hbg_client *c, const struct heavy_graph *g) {
        char line[FAIR_ITEMS * 24 + 8];
        int o = snprintf(line, sizeof(line), "S");
        for (unsigned i = 0; i < FAIR_ITEMS; i++) {
                int64_t v = stamp_read(c, g->stamp[i]);
                if (v != 0)
                        o += snprintf(line + o, sizeof(line) - (size_t)o, " %lld", (long long)v);
        }
        if (o > 1)
                kid_say(sock, "%s", line);
}

/* The heavy uid: `sessions` sessions, each keeping FAIR_INFLIGHT graphs of
 * FAIR_ITEMS long items in flight until 'Q'; then every stamp ("S ..."
 * lines) and "END". */
static int fair_heavy_fn(int sock, void *arg) {
        const struct fair_heavy *h = arg;
        hbg_client *c[FAIR_MAX_SESSIONS];
        struct heavy_graph g[FAIR_MAX_SESSIONS][FAIR_INFLIGHT];
        int err = 0;
        for (unsigned s = 0; s < h->sessions; s++) {
                if ((err = hbg_connect(&c[s], h->path)) < 0) {
                        kid_say(sock, "FAIL session %u: %s [%s]", s, hbg_strerror(err), hbg_last_error(NULL));
                        return 1;
                }
                for (unsigned j = 0; j < FAIR_INFLIGHT; j++)
                        for (unsigned i = 0; i < FAIR_ITEMS; i++)
                                if ((err = hbg_tensor_alloc(c[s], sizeof(int64_t), &g[s][j].stamp[i])) < 0) {
                                        kid_say(sock, "FAIL tensor: %s", hbg_strerror(err));
                                        return 1;
                                }
        }
        for (unsigned s = 0; s < h->sessions; s++)
                for (unsigned j = 0; j < FAIR_INFLIGHT; j++)
                        if ((err = heavy_submit(c[s], &g[s][j])) < 0) {
                                kid_say(sock, "FAIL submit: %s [%s]", hbg_strerror(err), hbg_last_error(c[s]));
                                return 1;
                        }
        kid_say(sock, "READY");
        while (!kid_cmd_pending(sock)) {
                for (unsigned s = 0; s < h->sessions; s++)
                        for (unsigned j = 0; j < FAIR_INFLIGHT; j++) {
                                int st = hbg_graph_status(c[s], g[s][j].graph, NULL);
                                if (st == 1)
                                        continue;
                                if (st < 0) {
                                        kid_say(sock, "FAIL heavy graph: %s [%s]", hbg_strerror(st),
                                                hbg_last_error(c[s]));
                                        return 1;
                                }
                                heavy_report(sock, c[s], &g[s][j]);
                                if ((err = heavy_submit(c[s], &g[s][j])) < 0) {
                                        kid_say(sock, "FAIL submit: %s [%s]", hbg_strerror(err),
                                                hbg_last_error(c[s]));
                                        return 1;
                                }
                        }
                usleep(1000);
        }
        /* What started of the graphs still in flight counts too. */
        for (unsigned s = 0; s < h->sessions; s++)
                for (unsigned j = 0; j < FAIR_INFLIGHT; j++)
                        heavy_report(sock, c[s], &g[s][j]);
        kid_say(sock, "END");
        kid_cmd(sock);
        for (unsigned s = 0; s < h->sessions; s++)
                hbg_disconnect(c[s]);
        return 0;
}

/* The light uid: on each 'G', a 1-task graph (timestamp_ns): "ROUND
 * submitted stamp", `submitted` read once hbg_graph_submit() returned
 * (the task was published by then). 'Q' ends. */
static int fair_light_fn(int sock, void *arg) {
        hbg_client *c = NULL;
        int err = hbg_connect(&c, (const char *)arg);
        hbg_tensor t;
        if (err == 0)
                err = hbg_tensor_alloc(c, sizeof(int64_t), &t);
        if (err < 0) {
                kid_say(sock, "FAIL connect: %s [%s]", hbg_strerror(err), hbg_last_error(c));
                return 1;
        }
        kid_say(sock, "READY");
        while (kid_cmd(sock) == 'G') {
                hbg_task s = HBG_TASK_INIT("timestamp_ns");
                s.n_args = 1;
                s.args[0].tensor = t;
                s.args[0].dir = HBG_OUT;
                uint64_t graph;
                err = hbg_graph_add(c, &s, NULL);
                if (err == 0)
                        err = hbg_graph_submit(c, &graph);
                int64_t submitted = mono_ns();
                if (err == 0)
                        err = hbg_graph_wait(c, graph, WAIT_MS);
                if (err < 0) {
                        kid_say(sock, "FAIL light graph: %s [%s]", hbg_strerror(err), hbg_last_error(c));
                        return 1;
                }
                kid_say(sock, "ROUND %lld %lld", (long long)submitted, (long long)stamp_read(c, t));
        }
        hbg_disconnect(c);
        return 0;
}

START_TEST(fair_share_per_uid) {
        ck_assert_msg(geteuid() == 0, "fair_share_per_uid needs root");
        unsigned sessions = fair_sessions[_i];
        char conf[512];
        snprintf(conf, sizeof(conf),
                 SMALL_SESSIONS "[scheduler]\nthreads = %u\nclusters = %u\n[limits]\nmax_sessions_per_uid = %u\n",
                 FAIR_THREADS, FAIR_THREADS, FAIR_MAX_SESSIONS);
        struct hbgd_proc *d = start_hbgd_conf(MODE_URING, conf);
        open_to_all(d);
        int base = fd_baseline(d);
        int mon = raw_connect(d->socket_path);
        raw_hello(mon);
        char buf[1024];
        struct kid heavy, light;
        kid_start(&light, FAIR_LIGHT_UID, fair_light_fn, (void *)d->socket_path);
        kid_expect(d, &light, "READY", IO_MS, buf, sizeof(buf), "the light uid");
        struct fair_heavy h = { .path = d->socket_path, .sessions = sessions };
        kid_start(&heavy, NOBODY, fair_heavy_fn, &h);
        kid_expect(d, &heavy, "READY", IO_MS, buf, sizeof(buf), "the heavy uid");
        /* The heavy kernels hold every thread before the first round. */
        uint64_t classified, dispatched;
        long long deadline = daemon_now_ms() + IO_MS;
        while (thread_counts(d, mon, &classified, &dispatched), dispatched < 2 * FAIR_THREADS &&
               daemon_now_ms() < deadline)
                sleep_us(2000);

        long long rounds[FAIR_ROUNDS][2];
        for (unsigned r = 0; r < FAIR_ROUNDS; r++) {
                kid_tell(&light, 'G');
                const char *v = kid_expect(d, &light, "ROUND", WAIT_MS, buf, sizeof(buf), "the light uid");
                D_ASSERT(d, sscanf(v, "%lld %lld", &rounds[r][0], &rounds[r][1]) == 2, "ROUND %s", v);
        }
        kid_tell(&light, 'Q');
        kid_end(d, &light, IO_MS, "the light uid");

        /* The heavy stamps, and how many fall in each round's wait. */
        kid_tell(&heavy, 'Q');
        unsigned in_round[FAIR_ROUNDS] = { 0 }, total = 0;
        for (;;) {
                int err = kid_line(&heavy, IO_MS, buf, sizeof(buf));
                D_ASSERT(d, err == 0, "the heavy uid's stamps: %s", strerror(-err));
                D_ASSERT(d, strncmp(buf, "FAIL", 4) != 0, "the heavy uid: %.200s", buf);
                if (strcmp(buf, "END") == 0)
                        break;
                D_ASSERT(d, buf[0] == 'S', "the heavy uid: unexpected line '%.200s'", buf);
                char *p = buf + 1, *end;
                for (long long v = strtoll(p, &end, 10); end != p; v = strtoll(p, &end, 10)) {
                        p = end;
                        total++;
                        for (unsigned r = 0; r < FAIR_ROUNDS; r++)
                                in_round[r] += v > rounds[r][0] && v < rounds[r][1];
                }
        }
        kid_tell(&heavy, 'Q');
        kid_end(d, &heavy, IO_MS, "the heavy uid");
        unsigned bound = FAIR_THREADS * FAIR_OTHER_WEIGHTS, worst = 0;
        for (unsigned r = 0; r < FAIR_ROUNDS; r++) {
                fprintf(stderr, "fair_share_per_uid: %u heavy sessions, round %u: the light task started %.1f ms "
                        "after its submit returned; %u heavy kernels started in between (bound %u)\n",
                        sessions, r, (double)(rounds[r][1] - rounds[r][0]) / 1e6, in_round[r], bound);
                worst = in_round[r] > worst ? in_round[r] : worst;
        }
        D_ASSERT(d, total > FAIR_THREADS, "the heavy uid ran only %u kernels", total);
        D_ASSERT(d, worst <= bound,
                 "%u sessions of one uid: %u of their kernels started while another uid's ready task waited "
                 "(docs/SECURITY.md: at most threads x the other uids' weights = %u)", sessions, worst, bound);
        close(mon);
        assert_fd_baseline(d, base, "fair_share_per_uid: after both uids left");
        assert_serving(d);
        stop_hbgd(d);
}
END_TEST

static bool needs_root(const TTest *t) {
        return t == connection_caps || t == memory_budget_per_uid || t == sessions_per_uid ||
               t == doorbell_fd_in_flight || t == recording_storm || t == one_session_all_threads ||
               t == fair_share_per_uid || t == wake_page_per_uid;
}

static Suite *suite(bool root, unsigned *ret_skipped) {
        Suite *s = suite_create("e2e_hostile");
        struct {
                const char *name;
                bool both_modes;
                const TTest *tests[11];
        } cases[] = {
                { "io", true, { shut_rd_then_requests, completion_channel_abuse, doorbell_abuse,
                                accept_backlog_burst, accept_backlog_out_of_fds, connection_caps,
                                handshake_timeout, pipelining, record_request_abuse, doorbell_fd_in_flight,
                                parked_connection_quiet } },
                { "engine", false, { dead_client_long_kernel, one_session_all_threads, task_cost_limit,
                                     task_cost_subnormal, big_window_session_cheap, wake_page_abuse,
                                     wake_page_waiters, wake_page_per_uid } },
                { "limits", false, { memory_budget_per_uid, memory_budget_total, sessions_per_uid,
                                     recording_storm, session_setup_off_io_thread, punched_region_io_reads,
                                     punching_client_others_connect, seal_waits_alone } },
                { "fair_share", false, { fair_share_per_uid } },
        };
        *ret_skipped = 0;
        for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
                TCase *tc = tcase_create(cases[i].name);
                tcase_set_timeout(tc, 300);
                for (size_t j = 0; j < 11 && cases[i].tests[j]; j++) {
                        const TTest *t = cases[i].tests[j];
                        if (needs_root(t) && !root) {
                                fprintf(stderr, "test_e2e_hostile: %s skipped: it acts as uid 65534 and needs "
                                        "root\n", t->name);
                                ++*ret_skipped;
                                continue;
                        }
                        if (cases[i].both_modes)
                                tcase_add_loop_test(tc, t, MODE_URING, N_MODES);
                        else if (t == one_session_all_threads)
                                tcase_add_loop_test(tc, t, 0, 3); /* honest client first, late, a late chain */
                        else if (t == wake_page_waiters)
                                tcase_add_loop_test(tc, t, 0, 4); /* plain waiters; and PI, requeues; other uid */
                        else if (t == fair_share_per_uid)
                                tcase_add_loop_test(tc, t, 0, sizeof(fair_sessions) / sizeof(fair_sessions[0]));
                        else
                                tcase_add_test(tc, t);
                }
                suite_add_tcase(s, tc);
        }
        return s;
}

static unsigned n_skipped;

static Suite *root_suite(void) {
        return suite(geteuid() == 0, &n_skipped);
}

static int skipped(void) {
        if (!n_skipped)
                return 0;
        fprintf(stderr, "test_e2e_hostile: %u tests skipped (not root); the others passed\n", n_skipped);
        return CHECK_SKIP;
}

const struct check_main check_main = {
        .suite = root_suite,
        .ignore_sigpipe = true,
        .setup = daemon_util_setup,
        .teardown = daemon_util_cleanup,
        .skipped = skipped,
};
