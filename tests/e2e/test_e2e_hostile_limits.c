/* SPDX-License-Identifier: MIT */
/*
 * hbgd's limits and its slow-work thread against one hostile local user
 * (as test_e2e_hostile.c, which says what each test checks after its
 * attack): a storm of recordings, session set-ups behind a long one,
 * holes punched in a region while hbgd reads it, a seal held back, and
 * the memory and session budgets (shared helpers: hostile_util.h).
 *
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

/* ------------------------------------------------------------ the slow-work thread */

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
 * Sessions are built on the slow-work thread, not the io thread (`st`, a
 * connection without a session, makes every connect here other than
 * lone: session_setup_inline_when_lone below): with a
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
        Hbg__Envelope *env = NULL;
        uint64_t inline_n = status_reply(st, HBG__STATUS_KIND__STATUS_DAEMON, &env)->daemon->sessions_set_up_inline;
        wire_free(env);
        D_ASSERT(d, inline_n == 0, "%" PRIu64 " sessions built on the io thread: none should have been (another "
                 "connection without a session each time)", inline_n);
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
 * A lone connect is set up on the io thread (no hand-off to the slow-work
 * thread and back: docs/PERFORMANCE.md), and only a lone one whose set-up
 * would wait for nothing and finds a set of regions made ahead: a connect
 * made while the slow-work thread runs a job is set up there after it,
 * and one made while another connection has no session is set up there
 * too, so that connects at once do not wait for each other on the io
 * thread. No spare ring, and one set of regions made ahead: its fill, the
 * only background job, is over once fd_baseline() has seen the slow-work
 * thread idle. Status is asked for on the first session's connection, so
 * that no connection without a session but the one tested exists.
 */
static void inline_counts(int fd, uint64_t *ret_opened, uint64_t *ret_inline) {
        Hbg__Envelope *env = NULL;
        const Hbg__DaemonStatus *ds = status_reply(fd, HBG__STATUS_KIND__STATUS_DAEMON, &env)->daemon;
        *ret_opened = ds->sessions_opened;
        *ret_inline = ds->sessions_set_up_inline;
        wire_free(env);
}

/* Until the slow-work thread has made its set of regions again (after the
 * connects' hold) and is idle: a set ready for the next connect, which
 * waits for nothing there. */
static void wait_spare_regions(struct hbgd_proc *d, int fd) {
        for (long long deadline = daemon_now_ms() + WAIT_MS;;) {
                Hbg__Envelope *env = NULL;
                const Hbg__DaemonStatus *ds = status_reply(fd, HBG__STATUS_KIND__STATUS_DAEMON, &env)->daemon;
                bool ready = ds->spare_regions > 0 && ds->slow_jobs == 0;
                wire_free(env);
                if (ready)
                        return;
                D_ASSERT(d, daemon_now_ms() < deadline, "no set of regions made ahead in %d ms", WAIT_MS);
                usleep(2000);
        }
}

/* A connection with a session, asked for by hand. */
static int raw_session_conn(struct hbgd_proc *d) {
        int fd = raw_connect(d->socket_path);
        raw_hello(fd);
        session_request(fd);
        expect_session(fd);
        return fd;
}

START_TEST(session_setup_inline_when_lone) {
        struct hbgd_proc *d = start_hbgd_conf(MODE_URING, "[limits]\nmax_recorded_tasks = 262144\n"
                                                          "[session]\ntask_window = 256\nflag_window = 256\n"
                                                          "heap_size = 64K\nspare_rings = 0\nspare_regions = 1\n");
        int base = fd_baseline(d);
        uint64_t opened, set_up_inline;
        int lone = raw_session_conn(d);
        inline_counts(lone, &opened, &set_up_inline);
        D_ASSERT(d, opened == 1 && set_up_inline == 1,
                 "a lone connect's session: %" PRIu64 " opened, %" PRIu64 " built on the io thread (want 1, 1)",
                 opened, set_up_inline);

        /* The slow-work thread busy with a recording of the first
         * session's (as above): a lone connect's set-up waits for it.
         * (Connected before: its session request is all that remains
         * once the recording runs.) */
        wait_spare_regions(d, lone);
        int busy = raw_connect(d->socket_path);
        raw_hello(busy);
        int mfd = recording_of(SETUP_RECORDED_TASKS);
        ck_assert_int_ge(mfd, 0);
        long long cpu0 = daemon_threads_cpu_ns(d->pid, "hbgd-slow"), ran_ns = 0;
        send_record_request(lone, SETUP_RECORDED_TASKS, &mfd, 1);
        close(mfd);
        for (long long deadline = daemon_now_ms() + WAIT_MS; ran_ns < 2000000 && daemon_now_ms() < deadline;)
                ran_ns = daemon_threads_cpu_ns(d->pid, "hbgd-slow") - cpu0;
        D_ASSERT(d, ran_ns >= 2000000, "the slow-work thread ran %lld us in %d ms after the recording was sent",
                 ran_ns / 1000, WAIT_MS);
        session_request(busy);
        expect_session(busy);
        struct pollfd pfd = { .fd = lone, .events = POLLIN };
        D_ASSERT(d, poll(&pfd, 1, 0) == 1, "a lone connect's session came before the recording running when it "
                 "was asked for: it was built beside it on the io thread");
        wire_free(expect_env(lone, HBG__ENVELOPE__MSG_RECORD_REPLY, NULL, 0));
        inline_counts(lone, &opened, &set_up_inline);
        D_ASSERT(d, opened == 2 && set_up_inline == 1,
                 "a lone connect while the slow-work thread was busy: %" PRIu64 " opened, %" PRIu64
                 " built on the io thread (want 2, 1)", opened, set_up_inline);

        /* A connection without a session waits beside the next one. */
        wait_spare_regions(d, lone);
        int st = raw_connect(d->socket_path);
        raw_hello(st);
        int second = raw_session_conn(d);
        inline_counts(lone, &opened, &set_up_inline);
        D_ASSERT(d, opened == 3 && set_up_inline == 1,
                 "a connect beside a connection without a session: %" PRIu64 " opened, %" PRIu64
                 " built on the io thread (want 3, 1)", opened, set_up_inline);

        /* Clients that leave as soon as they asked, their set-ups on the
         * slow-work thread (beside st) and on the io thread (alone, a set
         * made ahead ready): each set-up ends before hbgd reads the
         * hang-up (the connection reads nothing while its session is
         * built), its reply finds the client gone, and nothing of theirs
         * stays. */
        for (unsigned i = 0; i < 16; i++) {
                if (i == 8)
                        close(st);
                if (i >= 8)
                        wait_spare_regions(d, lone);
                int fd = raw_connect(d->socket_path);
                raw_hello(fd);
                session_request(fd);
                close(fd);
        }
        wait_spare_regions(d, lone);
        inline_counts(lone, &opened, &set_up_inline);
        D_ASSERT(d, set_up_inline == 1 + 8,
                 "clients leaving at once: %" PRIu64 " sessions built on the io thread in all (want 9: the 8 alone)",
                 set_up_inline);
        close(busy);
        close(second);
        close(lone);
        abuse_epilogue(d, base, "session_setup_inline_when_lone");

        /* Lone, the slow-work thread idle, but no set of regions made
         * ahead (none configured): built on the slow-work thread, where
         * its memfds and channels are made. */
        d = start_hbgd_conf(MODE_URING, "[session]\ntask_window = 256\nflag_window = 256\n"
                                        "heap_size = 64K\nspare_rings = 0\nspare_regions = 0\n");
        base = fd_baseline(d);
        lone = raw_session_conn(d);
        inline_counts(lone, &opened, &set_up_inline);
        D_ASSERT(d, opened == 1 && set_up_inline == 0,
                 "a lone connect with no set of regions made ahead: %" PRIu64 " opened, %" PRIu64
                 " built on the io thread (want 1, 0)", opened, set_up_inline);
        close(lone);
        abuse_epilogue(d, base, "session_setup_inline_when_lone, no spare regions");
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

static Suite *suite(void) {
        Suite *s = suite_create("e2e_hostile_limits");
        TCase *tc = hostile_case(s, "limits");
        hostile_add(tc, memory_budget_per_uid, true, 0);
        hostile_add(tc, memory_budget_total, false, 0);
        hostile_add(tc, sessions_per_uid, true, 0);
        hostile_add(tc, recording_storm, true, 0);
        hostile_add(tc, session_setup_off_io_thread, false, 0);
        hostile_add(tc, session_setup_inline_when_lone, false, 0);
        hostile_add(tc, punched_region_io_reads, false, 0);
        hostile_add(tc, punching_client_others_connect, false, 0);
        hostile_add(tc, seal_waits_alone, false, 0);
        return s;
}

HOSTILE_CHECK_MAIN(suite);
