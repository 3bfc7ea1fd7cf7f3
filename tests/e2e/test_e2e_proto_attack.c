/* SPDX-License-Identifier: MIT */
/*
 * hbgd against a hostile client of its control socket (docs/PROTOCOL.md):
 * file descriptors of the wrong kind on every message, garbage and
 * out-of-order records, slow senders, descriptor floods, a client that
 * never reads, and every limit at N (granted) and N+1 (refused with its
 * documented error). Each test runs a real hbgd with an honest client
 * running 1-task graphs alongside the whole attack (each graph checked,
 * none slower than HONEST_MS), and ends with hbgd's fds back to their
 * baseline, its RSS within RSS_SLACK_KIB of where it was (plain builds;
 * the sanitizer builds check leaks at hbgd's exit instead), a fresh
 * client served and hbgd exiting 0 on SIGTERM.
 *
 * The other direction, a hostile hbgd's kernel table, is test_kernel_table.
 *
 * The attacks on the doorbell and the completion channel themselves are
 * in test_e2e_hostile (doorbell_abuse, completion_channel_abuse).
 *
 * HBG_TEST_SCALE=N divides the number of attack rounds (default 10; 1 is
 * the full scale); HBG_TEST_VERBOSE=1 shows hbgd's log.
 */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "hbg/hbg.h"
#include "proto/wire.h"
#include "shm/layout.h"
#include "tests/e2e/e2e_kid.h"
#include "tests/e2e/e2e_util.h"
#include "tests/test_util.h"
#include "tests/check_main.h"

#define HONEST_MS 5000           /* an honest 1-task graph, on a loaded 2-core machine */
#define RSS_SLACK_KIB (16 * 1024)

/* Small sessions (the honest client's too), and room for one user's many
 * connections (per-uid limits do not apply to root anyway). */
#define BASE_CONF "[session]\ntask_window = 1024\nflag_window = 1024\nheap_size = 1M\n" \
                  "[limits]\nmax_connections_per_uid = 1024\n"

/* Attack rounds: `full` at HBG_TEST_SCALE=1, at least one. */
static unsigned rounds(unsigned full) {
        unsigned n = full / hostile_scale();
        return n ? n : 1;
}

/* ------------------------------------------------------------ the guard around each attack */

static bool sanitized(void) {
        return HBG_TEST_BUILD_SCALE > 1;
}

struct guard {
        struct hbgd_proc *d;
        const char *name;
        int base;               /* hbgd's fds, idle */
        int base_honest;        /* ... with the honest client's session */
        long rss;               /* KiB, once the honest client runs */
        struct kid honest;
};

static void guard_begin(struct guard *g, struct hbgd_proc *d, const char *name) {
        g->d = d;
        g->name = name;
        g->base = fd_baseline(d);
        honest_start(d, &g->honest);
        kid_tell(&g->honest, 'G');
        g->base_honest = fd_baseline(d);
        sleep_us(200000);
        wait_slow_work_idle(d); /* the spare ring the honest session took made again */
        g->rss = daemon_status_kib(d->pid, "VmRSS");
}

/* hbgd holds what it held before the attack (the honest session's fds). */
static void guard_fds(struct guard *g, const char *what) {
        char msg[512];
        snprintf(msg, sizeof(msg), "%s: %s", g->name, what);
        assert_fd_baseline(g->d, g->base_honest, msg);
}

static void guard_end(struct guard *g) {
        struct hbgd_proc *d = g->d;
        guard_fds(g, "after the attack");
        long rss = daemon_status_kib(d->pid, "VmRSS");
        long long worst = 0;
        unsigned graphs = honest_stop(d, &g->honest, &worst);
        fprintf(stderr, "%s: honest client: %u graphs, worst %lld ms; hbgd RSS %ld -> %ld KiB\n", g->name, graphs,
                worst, g->rss, rss);
        D_ASSERT(d, worst <= HONEST_MS, "%s: an honest 1-task graph took %lld ms during the attack", g->name, worst);
        if (!sanitized())
                D_ASSERT(d, g->rss > 0 && rss > 0 && rss <= g->rss + RSS_SLACK_KIB,
                         "%s: hbgd's RSS grew from %ld to %ld KiB during the attack", g->name, g->rss, rss);
        fresh_status(d, LIVE_MS, g->name);
        abuse_epilogue(d, g->base, g->name);
}


/* ------------------------------------------------------------ raw requests */

static void send_session_request(int sock, uint64_t task_window, uint64_t heap, uint64_t graph_table,
                                 const int *fds, unsigned nfds) {
        Hbg__SessionRequest sr = HBG__SESSION_REQUEST__INIT;
        Hbg__Envelope env = HBG__ENVELOPE__INIT;
        sr.task_window = task_window;
        sr.heap_size = heap;
        sr.graph_table_entries = graph_table;
        env.msg_case = HBG__ENVELOPE__MSG_SESSION_REQUEST;
        env.session_request = &sr;
        send_env(sock, &env, fds, nfds);
}

/* A session granted on sock (hello done): its reply (wire_free() it) and
 * its fds (SESSION_FDS). */
static Hbg__Envelope *raw_session(int sock, uint64_t task_window, uint64_t heap, uint64_t graph_table,
                                  int fds[SESSION_FDS]) {
        send_session_request(sock, task_window, heap, graph_table, NULL, 0);
        return expect_env(sock, HBG__ENVELOPE__MSG_SESSION_REPLY, fds, SESSION_FDS);
}

static void close_all(int *fds, unsigned n) {
        for (unsigned i = 0; i < n; i++)
                close(fds[i]);
}

/* A memfd of len bytes of independent noop tasks (ids 1, 2, ..., the last
 * one cut), sealed as hbgd wants if asked. */
static int recording_memfd(size_t len, bool sealed) {
        struct hbg_recorded_task t = noop_recorded();
        int fd = memfd_create("attack-recording", MFD_CLOEXEC | MFD_ALLOW_SEALING);
        ck_assert_int_ge(fd, 0);
        for (size_t off = 0; off < len; t.desc.id++) {
                size_t n = len - off < sizeof(t) ? len - off : sizeof(t);
                ck_assert_int_eq(write(fd, &t, n), (ssize_t)n);
                off += n;
        }
        if (sealed)
                ck_assert_int_eq(fcntl(fd, F_ADD_SEALS, F_SEAL_WRITE | F_SEAL_GROW | F_SEAL_SHRINK), 0);
        return fd;
}

/* One record with `nfds` copies of fd (SCM_RIGHTS allows repeats): more
 * than raw_send() takes. 0 or -errno. */
static int send_with_copies(int sock, const Hbg__Envelope *env, int fd, unsigned nfds) {
        size_t len;
        uint8_t *buf = pack_env(env, &len);
        size_t space = CMSG_SPACE(sizeof(int) * nfds);
        char *control = calloc(1, space);
        ck_assert_ptr_nonnull(control);
        struct iovec iov = { .iov_base = buf, .iov_len = len };
        struct msghdr msg = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = control, .msg_controllen = space };
        struct cmsghdr *c = CMSG_FIRSTHDR(&msg);
        c->cmsg_level = SOL_SOCKET;
        c->cmsg_type = SCM_RIGHTS;
        c->cmsg_len = CMSG_LEN(sizeof(int) * nfds);
        for (unsigned i = 0; i < nfds; i++)
                memcpy(CMSG_DATA(c) + i * sizeof(int), &fd, sizeof(int));
        ssize_t n = sendmsg(sock, &msg, MSG_NOSIGNAL);
        int err = n < 0 ? -errno : 0;
        free(control);
        free(buf);
        return err;
}

/* ------------------------------------------------------------ a. fds of the wrong kind */

enum fd_kind {
        FD_DIR, FD_SOCKET, FD_PIPE, FD_UNSEALED_MEMFD, FD_WRONG_SIZE_MEMFD, FD_DEV_NULL, FD_EVENTFD, FD_O_PATH,
        FD_HBGD_CONNECTION, N_FD_KINDS
};

static const char *const fd_kind_names[N_FD_KINDS] = {
        "a directory", "a socket", "a pipe", "an unsealed memfd", "a sealed memfd of the wrong size",
        "/dev/null", "an eventfd", "an O_PATH fd", "a connection to hbgd itself",
};

static int make_fd(struct hbgd_proc *d, enum fd_kind kind) {
        int fd = -1, pair[2];
        switch (kind) {
        case FD_DIR:
                fd = open("/", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
                break;
        case FD_SOCKET:
                ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, pair), 0);
                close(pair[1]);
                fd = pair[0];
                break;
        case FD_PIPE:
                ck_assert_int_eq(pipe2(pair, O_CLOEXEC), 0);
                close(pair[1]);
                fd = pair[0];
                break;
        case FD_UNSEALED_MEMFD:
                fd = recording_memfd(sizeof(struct hbg_recorded_task), false);
                break;
        case FD_WRONG_SIZE_MEMFD:
                fd = recording_memfd(sizeof(struct hbg_recorded_task) + 1, true);
                break;
        case FD_DEV_NULL:
                fd = open("/dev/null", O_RDWR | O_CLOEXEC);
                break;
        case FD_EVENTFD:
                fd = eventfd(0, EFD_CLOEXEC);
                break;
        case FD_O_PATH:
                fd = open("/", O_PATH | O_CLOEXEC);
                break;
        case FD_HBGD_CONNECTION:
                fd = raw_connect(d->socket_path);
                break;
        case N_FD_KINDS:
                break;
        }
        ck_assert_msg(fd >= 0, "cannot make %s: %s", fd_kind_names[kind], strerror(errno));
        return fd;
}

/* A fresh connection, hello done unless `first`, then `send`; hbgd must
 * answer Error{-EPROTO} and close. */
static void wrong_fd_closes(struct hbgd_proc *d, enum fd_kind kind, Hbg__Envelope__MsgCase what) {
        int sock = raw_connect(d->socket_path);
        int fd = make_fd(d, kind);
        char desc[160];
        if (what == HBG__ENVELOPE__MSG_HELLO) {
                send_hello(sock, HBG_PROTO_MAJOR, &fd, 1);
                snprintf(desc, sizeof(desc), "Hello with %s", fd_kind_names[kind]);
        } else {
                raw_hello(sock);
                if (what == HBG__ENVELOPE__MSG_STATUS_REQUEST)
                        send_status_request(sock, HBG__STATUS_KIND__STATUS_DAEMON, &fd, 1);
                else
                        send_session_request(sock, 0, 0, 0, &fd, 1);
                snprintf(desc, sizeof(desc), "%s with %s",
                         what == HBG__ENVELOPE__MSG_STATUS_REQUEST ? "StatusRequest" : "SessionRequest",
                         fd_kind_names[kind]);
        }
        close(fd);
        expect_refusal(d, sock, -EPROTO, CLOSE_ERROR_REQUIRED, desc);
        close(sock);
}

/*
 * The one message that takes an fd (RecordRequest) gets each wrong kind:
 * refused with its error, the connection and session stay, and a good
 * recording then succeeds. With the right fd plus a wrong one (2 fds), it
 * is a protocol error: Error and close, the session closed with a logged
 * reason. The messages that take none (Hello, StatusRequest,
 * SessionRequest) with each kind: Error{-EPROTO} and close. Between
 * kinds, hbgd's fds are back at their baseline.
 */
START_TEST(wrong_kind_fds) {
        int mode = _i;
        if (skip_mode(mode, "wrong_kind_fds"))
                return;
        struct guard g;
        guard_begin(&g, start_hbgd_conf(mode, BASE_CONF), "wrong_kind_fds");
        struct hbgd_proc *d = g.d;
        unsigned n_rounds = rounds(10);
        for (unsigned round = 0; round < n_rounds; round++) {
                for (int kind = 0; kind < N_FD_KINDS; kind++) {
                        wrong_fd_closes(d, kind, HBG__ENVELOPE__MSG_HELLO);
                        wrong_fd_closes(d, kind, HBG__ENVELOPE__MSG_STATUS_REQUEST);
                        wrong_fd_closes(d, kind, HBG__ENVELOPE__MSG_SESSION_REQUEST);

                        char desc[160];
                        int sock = raw_connect(d->socket_path);
                        raw_hello(sock);
                        int fd = make_fd(d, kind);
                        send_record_request(sock, 1, &fd, 1);
                        snprintf(desc, sizeof(desc), "RecordRequest with %s, no session", fd_kind_names[kind]);
                        expect_error_stays(d, sock, -EINVAL, "no session", desc);
                        int sfds[SESSION_FDS];
                        wire_free(raw_session(sock, 0, 0, 0, sfds));
                        close_all(sfds, SESSION_FDS);
                        send_record_request(sock, 1, &fd, 1);
                        snprintf(desc, sizeof(desc), "RecordRequest with %s", fd_kind_names[kind]);
                        if (kind == FD_WRONG_SIZE_MEMFD)
                                expect_error_stays(d, sock, -EINVAL, "bytes", desc);
                        else
                                expect_error_stays(d, sock, -EBADF, "sealed", desc);
                        int good = recording_memfd(sizeof(struct hbg_recorded_task), true);
                        send_record_request(sock, 1, &good, 1);
                        wire_free(expect_env(sock, HBG__ENVELOPE__MSG_RECORD_REPLY, NULL, 0));
                        int two[2] = { good, fd };
                        send_record_request(sock, 1, two, 2);
                        snprintf(desc, sizeof(desc), "RecordRequest with a good memfd and %s", fd_kind_names[kind]);
                        expect_refusal(d, sock, -EPROTO, CLOSE_ERROR_REQUIRED, desc);
                        close(good);
                        close(fd);
                        close(sock);
                        snprintf(desc, sizeof(desc), "after every message with %s", fd_kind_names[kind]);
                        guard_fds(&g, desc);
                }
        }
        D_ASSERT(d, log_has(d, "closed: malformed record or unexpected fds"),
                 "no session closed for an extra fd was logged with its reason");
        fprintf(stderr, "wrong_kind_fds (%s): %u rounds of %d fd kinds on every message: refused, no fd kept\n",
                mode_name(mode), n_rounds, N_FD_KINDS);
        guard_end(&g);
}
END_TEST

/*
 * Fds per message at N and N+1: RecordRequest takes 1 (granted) and 2 is
 * refused; then 4 (what hbgd's sender may send), 8 (its receive buffer's
 * room), 9 (past it: the kernel truncates, MSG_CTRUNC) and 253 (SCM_MAX_FD)
 * copies on a record that takes none and on one that takes one. Every one
 * is Error{-EPROTO} and a close, and every fd the kernel installed in
 * hbgd is closed.
 */
START_TEST(too_many_fds) {
        int mode = _i;
        if (skip_mode(mode, "too_many_fds"))
                return;
        struct guard g;
        guard_begin(&g, start_hbgd_conf(mode, BASE_CONF), "too_many_fds");
        struct hbgd_proc *d = g.d;
        static const unsigned counts[] = { 2, 4, 8, 9, 253 };
        int efd = eventfd(0, EFD_CLOEXEC);
        ck_assert_int_ge(efd, 0);
        char desc[128];
        for (unsigned round = 0; round < rounds(10); round++) {
                for (size_t i = 0; i < sizeof(counts) / sizeof(counts[0]); i++) {
                        /* A hello takes none: even 1 is too many. */
                        Hbg__Hello h = HBG__HELLO__INIT;
                        Hbg__Envelope env = HBG__ENVELOPE__INIT;
                        h.version_major = HBG_PROTO_MAJOR;
                        h.version_minor = HBG_PROTO_MINOR;
                        env.msg_case = HBG__ENVELOPE__MSG_HELLO;
                        env.hello = &h;
                        int sock = raw_connect(d->socket_path);
                        ck_assert_int_eq(send_with_copies(sock, &env, efd, counts[i] - 1), 0);
                        snprintf(desc, sizeof(desc), "Hello with %u eventfds", counts[i] - 1);
                        expect_refusal(d, sock, -EPROTO, CLOSE_ERROR_REQUIRED, desc);
                        close(sock);

                        /* A recording takes one: N = 1 works, more do not. */
                        sock = raw_connect(d->socket_path);
                        raw_hello(sock);
                        int sfds[SESSION_FDS];
                        wire_free(raw_session(sock, 0, 0, 0, sfds));
                        close_all(sfds, SESSION_FDS);
                        int good = recording_memfd(sizeof(struct hbg_recorded_task), true);
                        send_record_request(sock, 1, &good, 1);
                        wire_free(expect_env(sock, HBG__ENVELOPE__MSG_RECORD_REPLY, NULL, 0));
                        Hbg__RecordRequest rq = HBG__RECORD_REQUEST__INIT;
                        rq.tasks = 1;
                        env.msg_case = HBG__ENVELOPE__MSG_RECORD_REQUEST;
                        env.record_request = &rq;
                        ck_assert_int_eq(send_with_copies(sock, &env, good, counts[i]), 0);
                        close(good);
                        snprintf(desc, sizeof(desc), "RecordRequest with %u copies of its memfd", counts[i]);
                        expect_refusal(d, sock, -EPROTO, CLOSE_ERROR_REQUIRED, desc);
                        close(sock);
                        snprintf(desc, sizeof(desc), "after records with %u fds", counts[i]);
                        guard_fds(&g, desc);
                }
        }
        close(efd);
        fprintf(stderr, "too_many_fds (%s): 1 fd granted, 2..253 refused, none kept\n", mode_name(mode));
        guard_end(&g);
}
END_TEST

/* ------------------------------------------------------------ b. garbage, size, order */

/* A Hello record of exactly len bytes (its name fills it). */
static uint8_t *hello_of_size(size_t len) {
        char *name = malloc(len + 1);
        ck_assert_ptr_nonnull(name);
        Hbg__Hello h = HBG__HELLO__INIT;
        Hbg__Envelope env = HBG__ENVELOPE__INIT;
        h.version_major = HBG_PROTO_MAJOR;
        h.version_minor = HBG_PROTO_MINOR;
        h.name = name;
        env.msg_case = HBG__ENVELOPE__MSG_HELLO;
        env.hello = &h;
        /* The packed size grows with the name, by 2 where a length varint
         * gets a byte longer: one of the two nearest names hits len. */
        for (size_t n = len; n > 0; n--) {
                memset(name, 'n', n);
                name[n] = 0;
                size_t got = hbg__envelope__get_packed_size(&env);
                if (got == len) {
                        uint8_t *buf = malloc(len);
                        ck_assert_ptr_nonnull(buf);
                        hbg__envelope__pack(&env, buf);
                        free(name);
                        return buf;
                }
                if (got < len)
                        break;
        }
        ck_abort_msg("no Hello packs to exactly %zu bytes", len);
        return NULL;
}

/* max_message_size at N (a record of exactly N bytes is read) and N + 1
 * (Error{-EMSGSIZE} and close), first record and on a session. */
static void message_size_at_limit(struct hbgd_proc *d, size_t n) {
        char desc[128];
        int sock = raw_connect(d->socket_path);
        uint8_t *buf = hello_of_size(n);
        ck_assert_int_eq(raw_send(sock, buf, n, NULL, 0), 0);
        free(buf);
        wire_free(expect_env(sock, HBG__ENVELOPE__MSG_HELLO, NULL, 0));
        send_status_request(sock, HBG__STATUS_KIND__STATUS_DAEMON, NULL, 0);
        wire_free(expect_env(sock, HBG__ENVELOPE__MSG_STATUS_REPLY, NULL, 0));
        close(sock);

        sock = raw_connect(d->socket_path);
        buf = hello_of_size(n + 1);
        ck_assert_int_eq(raw_send(sock, buf, n + 1, NULL, 0), 0);
        snprintf(desc, sizeof(desc), "a Hello of %zu bytes (max_message_size + 1)", n + 1);
        expect_refusal(d, sock, -EMSGSIZE, CLOSE_ERROR_REQUIRED, desc);
        close(sock);

        /* On a connection with a session: closed, and the reason logged. */
        sock = raw_connect(d->socket_path);
        raw_hello(sock);
        int sfds[SESSION_FDS];
        wire_free(raw_session(sock, 0, 0, 0, sfds));
        close_all(sfds, SESSION_FDS);
        ck_assert_int_eq(raw_send(sock, buf, n + 1, NULL, 0), 0);
        free(buf);
        snprintf(desc, sizeof(desc), "a record of %zu bytes on a session", n + 1);
        expect_refusal(d, sock, -EMSGSIZE, CLOSE_ERROR_REQUIRED, desc);
        close(sock);
        D_ASSERT(d, log_has(d, "closed: record larger than max_message_size"),
                 "the session closed for an oversized record was not logged with its reason");
}

START_TEST(message_size_limit) {
        int mode = _i;
        if (skip_mode(mode, "message_size_limit"))
                return;
        struct guard g;
        guard_begin(&g, start_hbgd_conf(mode, BASE_CONF "max_message_size = 1024\n"), "message_size_limit");
        message_size_at_limit(g.d, 1024);
        guard_end(&g);
        /* The default, 64 KiB. */
        guard_begin(&g, start_hbgd_conf(mode, BASE_CONF), "message_size_limit (default)");
        message_size_at_limit(g.d, HBG_WIRE_MAX_MSG_DEFAULT);
        fprintf(stderr, "message_size_limit (%s): 1024 and 65536 bytes read, one more refused\n", mode_name(mode));
        guard_end(&g);
}
END_TEST

/* A random record that does not unpack as an Envelope, 1..max bytes. */
static size_t garbage(uint64_t *rng, uint8_t *buf, size_t max) {
        for (;;) {
                size_t len = 1 + xorshift(rng) % max;
                for (size_t i = 0; i < len; i++)
                        buf[i] = (uint8_t)xorshift(rng);
                Hbg__Envelope *e = hbg__envelope__unpack(NULL, len, buf);
                if (!e)
                        return len;
                hbg__envelope__free_unpacked(e, NULL);
        }
}

/*
 * Random records (some past max_message_size), every cut of a valid
 * SessionRequest that does not unpack, and garbage on a connection that
 * holds a session: Error{-EPROTO} or Error{-EMSGSIZE} and a close each,
 * the session's close logged with its reason.
 */
START_TEST(garbage_records) {
        int mode = _i;
        if (skip_mode(mode, "garbage_records"))
                return;
        struct guard g;
        guard_begin(&g, start_hbgd_conf(mode, BASE_CONF "max_message_size = 1024\n"), "garbage_records");
        struct hbgd_proc *d = g.d;
        uint64_t rng = seed_value() ^ 0x5bd1e995u;
        uint8_t buf[2048];
        char desc[160];
        unsigned n = rounds(2000);
        for (unsigned i = 0; i < n; i++) {
                size_t len = garbage(&rng, buf, sizeof(buf));
                int sock = raw_connect(d->socket_path);
                if (i % 2)
                        raw_hello(sock);
                ck_assert_int_eq(raw_send(sock, buf, len, NULL, 0), 0);
                snprintf(desc, sizeof(desc), "%zu random bytes%s (HBG_TEST_SEED=%" PRIu64 ", record %u)", len,
                         i % 2 ? " after a hello" : "", seed_value(), i);
                expect_refusal(d, sock, len > 1024 ? -EMSGSIZE : -EPROTO, CLOSE_ERROR_REQUIRED, desc);
                close(sock);
        }

        /* Truncated envelopes: every cut of a session request. */
        Hbg__SessionRequest sr = HBG__SESSION_REQUEST__INIT;
        Hbg__Envelope env = HBG__ENVELOPE__INIT;
        sr.task_window = 1024;
        sr.flag_window = 1024;
        sr.heap_size = 1 << 20;
        sr.mailbox_entries = 1024;
        sr.graph_table_entries = 256;
        env.msg_case = HBG__ENVELOPE__MSG_SESSION_REQUEST;
        env.session_request = &sr;
        size_t full;
        uint8_t *packed = pack_env(&env, &full);
        unsigned cuts = 0;
        for (size_t cut = 1; cut < full; cut++) {
                Hbg__Envelope *e = hbg__envelope__unpack(NULL, cut, packed);
                if (e) {
                        hbg__envelope__free_unpacked(e, NULL);
                        continue;
                }
                int sock = raw_connect(d->socket_path);
                raw_hello(sock);
                ck_assert_int_eq(raw_send(sock, packed, cut, NULL, 0), 0);
                snprintf(desc, sizeof(desc), "a SessionRequest of %zu bytes cut to %zu", full, cut);
                expect_refusal(d, sock, -EPROTO, CLOSE_ERROR_REQUIRED, desc);
                close(sock);
                cuts++;
        }
        free(packed);
        D_ASSERT(d, cuts > 0, "no cut of a session request failed to unpack");

        /* Garbage from a client with a session. */
        int sock = raw_connect(d->socket_path);
        raw_hello(sock);
        int sfds[SESSION_FDS];
        wire_free(raw_session(sock, 0, 0, 0, sfds));
        close_all(sfds, SESSION_FDS);
        size_t len = garbage(&rng, buf, 512);
        ck_assert_int_eq(raw_send(sock, buf, len, NULL, 0), 0);
        expect_refusal(d, sock, -EPROTO, CLOSE_ERROR_REQUIRED, "garbage on a session");
        close(sock);
        D_ASSERT(d, log_has(d, "closed: malformed record or unexpected fds"),
                 "the session closed for garbage was not logged with its reason");
        fprintf(stderr, "garbage_records (%s): %u random records and %u truncated ones refused\n", mode_name(mode),
                n, cuts);
        guard_end(&g);
}
END_TEST

/* A message of `what` with its fields at their zero values. */
static void send_bare(int sock, Hbg__Envelope__MsgCase what) {
        Hbg__Envelope env = HBG__ENVELOPE__INIT;
        Hbg__Error e = HBG__ERROR__INIT;
        Hbg__SessionReply srep = HBG__SESSION_REPLY__INIT;
        Hbg__StatusReply strep = HBG__STATUS_REPLY__INIT;
        Hbg__RecordReply rrep = HBG__RECORD_REPLY__INIT;
        env.msg_case = what;
        switch (what) {
        case HBG__ENVELOPE__MSG_ERROR:
                e.message = (char *)"from a client";
                env.error = &e;
                break;
        case HBG__ENVELOPE__MSG_SESSION_REPLY:
                env.session_reply = &srep;
                break;
        case HBG__ENVELOPE__MSG_STATUS_REPLY:
                env.status_reply = &strep;
                break;
        case HBG__ENVELOPE__MSG_RECORD_REPLY:
                env.record_reply = &rrep;
                break;
        default:
                ck_abort_msg("send_bare: message %d", (int)what);
        }
        send_env(sock, &env, NULL, 0);
}

/*
 * Messages out of order: before the hello, twice, the replies only hbgd
 * sends, a second session, a recording before a session, a hello on a
 * session, an unknown status kind. Each gets the documented answer, and
 * the close of a session for it is logged.
 */
START_TEST(out_of_order) {
        int mode = _i;
        if (skip_mode(mode, "out_of_order"))
                return;
        struct guard g;
        guard_begin(&g, start_hbgd_conf(mode, BASE_CONF), "out_of_order");
        struct hbgd_proc *d = g.d;
        static const Hbg__Envelope__MsgCase server_only[] = {
                HBG__ENVELOPE__MSG_ERROR, HBG__ENVELOPE__MSG_SESSION_REPLY, HBG__ENVELOPE__MSG_STATUS_REPLY,
                HBG__ENVELOPE__MSG_RECORD_REPLY,
        };
        char desc[128];
        for (unsigned round = 0; round < rounds(10); round++) {
                /* Before the hello: every request, and every reply. */
                int sock = raw_connect(d->socket_path);
                send_session_request(sock, 0, 0, 0, NULL, 0);
                expect_refusal(d, sock, -EPROTO, CLOSE_ERROR_REQUIRED, "SessionRequest before Hello");
                close(sock);
                sock = raw_connect(d->socket_path);
                int good = recording_memfd(sizeof(struct hbg_recorded_task), true);
                send_record_request(sock, 1, &good, 1);
                close(good);
                expect_refusal(d, sock, -EPROTO, CLOSE_ERROR_REQUIRED, "RecordRequest before Hello");
                close(sock);
                for (size_t i = 0; i < sizeof(server_only) / sizeof(server_only[0]); i++) {
                        for (int hello = 0; hello < 2; hello++) {
                                sock = raw_connect(d->socket_path);
                                if (hello)
                                        raw_hello(sock);
                                send_bare(sock, server_only[i]);
                                snprintf(desc, sizeof(desc), "message %d from a client%s", (int)server_only[i],
                                         hello ? " after its hello" : "");
                                expect_refusal(d, sock, -EPROTO, CLOSE_ERROR_REQUIRED, desc);
                                close(sock);
                        }
                }

                /* A session, then everything that must not follow. */
                sock = raw_connect(d->socket_path);
                raw_hello(sock);
                good = recording_memfd(sizeof(struct hbg_recorded_task), true);
                send_record_request(sock, 1, &good, 1);
                expect_error_stays(d, sock, -EINVAL, "no session", "RecordRequest before a session");
                int sfds[SESSION_FDS];
                wire_free(raw_session(sock, 0, 0, 0, sfds));
                close_all(sfds, SESSION_FDS);
                send_session_request(sock, 0, 0, 0, NULL, 0);
                expect_error_stays(d, sock, -EBUSY, "already has a session", "a second SessionRequest");
                send_record_request(sock, 1, &good, 1);
                wire_free(expect_env(sock, HBG__ENVELOPE__MSG_RECORD_REPLY, NULL, 0));
                close(good);
                /* An unknown status kind: hbgd answers what it always fills. */
                send_status_request(sock, (Hbg__StatusKind)77, NULL, 0);
                Hbg__Envelope *e = expect_env(sock, HBG__ENVELOPE__MSG_STATUS_REPLY, NULL, 0);
                D_ASSERT(d, e->status_reply->daemon, "a status reply of unknown kind 77 without DaemonStatus");
                wire_free(e);
                send_hello(sock, HBG_PROTO_MAJOR, NULL, 0);
                expect_refusal(d, sock, -EPROTO, CLOSE_ERROR_REQUIRED, "a Hello on a session");
                close(sock);
                guard_fds(&g, "after messages out of order");
        }
        D_ASSERT(d, log_has(d, "closed: hello sent twice"), "the session closed for a second hello was not logged");
        fprintf(stderr, "out_of_order (%s): every message out of order refused as documented\n", mode_name(mode));
        guard_end(&g);
}
END_TEST

/* ------------------------------------------------------------ c. slow senders */

enum slow_kind { SLOW_SILENT, SLOW_HELLO_THEN_SILENT, SLOW_BYTE, SLOW_LATE_HELLO, N_SLOW };

/*
 * Slowloris on a SEQPACKET socket: a record arrives whole or not at all,
 * so "one byte at a time" is a 1-byte record, which is garbage (Error
 * {-EPROTO} at once). The slow ways to hold a connection are silence and
 * requests just within handshake_timeout_ms: connections silent from the
 * start, silent after their hello, and sending their hello late (at 40 %
 * of the timeout, a margin a loaded machine keeps) then nothing are each closed with Error{-ETIMEDOUT},
 * while the honest client is served.
 */
START_TEST(slowloris) {
        int mode = _i;
        if (skip_mode(mode, "slowloris"))
                return;
        enum { TIMEOUT_MS = 1000 };
        struct guard g;
        guard_begin(&g, start_hbgd_conf(mode, BASE_CONF "handshake_timeout_ms = 1000\n"), "slowloris");
        struct hbgd_proc *d = g.d;
        unsigned n = rounds(1000) < 40 ? 40 : rounds(1000);
        int *fds = calloc(n, sizeof(int));
        ck_assert_ptr_nonnull(fds);
        unsigned refused;
        int opened = open_many(d->socket_path, fds, n, &refused);
        D_ASSERT(d, opened == (int)n, "only %d of %u slow connections connected", opened, n);
        long long t0 = daemon_now_ms();
        for (unsigned i = 0; i < n; i++) {
                int flags = fcntl(fds[i], F_GETFL);
                fcntl(fds[i], F_SETFL, flags & ~O_NONBLOCK);
                if (i % N_SLOW == SLOW_HELLO_THEN_SILENT)
                        ck_assert_int_eq(cx_send(fds[i], HBG__ENVELOPE__MSG_HELLO, 0, 0), 0);
                else if (i % N_SLOW == SLOW_BYTE)
                        ck_assert_int_eq(raw_send(fds[i], "\x0a", 1, NULL, 0), 0);
        }
        /* The late hellos, after 40 % of the timeout. */
        long long until = t0 + TIMEOUT_MS * 4 / 10;
        if (daemon_now_ms() < until)
                sleep_us((long)(until - daemon_now_ms()) * 1000L);
        long long t_late = daemon_now_ms();
        for (unsigned i = SLOW_LATE_HELLO; i < n; i += N_SLOW)
                ck_assert_int_eq(cx_send(fds[i], HBG__ENVELOPE__MSG_HELLO, 0, 0), 0);
        char why[256];
        unsigned closed[N_SLOW] = { 0 };
        long long late_closed_after = 0, late_first_close = -1;
        for (unsigned i = 0; i < n; i++) {
                int kind = (int)(i % N_SLOW);
                int r = 0;
                long long left = t0 + 3 * TIMEOUT_MS + 5000 - daemon_now_ms();
                int wait = left > 0 ? (int)left : 1;
                if (kind == SLOW_HELLO_THEN_SILENT || kind == SLOW_LATE_HELLO)
                        r = cx_expect(fds[i], HBG__ENVELOPE__MSG_HELLO, wait, why, sizeof(why));
                if (r == 0 && kind == SLOW_BYTE)
                        r = cx_expect_refusal(fds[i], -EPROTO, "", wait, why, sizeof(why));
                else if (r == 0)
                        r = cx_expect_refusal(fds[i], -ETIMEDOUT, "handshake_timeout_ms", wait, why, sizeof(why));
                D_ASSERT(d, r == 0, "slow connection %u (kind %d): %s", i, kind, why);
                long long after = daemon_now_ms() - t_late;
                if (kind == SLOW_LATE_HELLO && after > late_closed_after)
                        late_closed_after = after;
                if (kind == SLOW_LATE_HELLO && (late_first_close < 0 || after < late_first_close))
                        late_first_close = after;
                closed[kind]++;
        }
        long long took = daemon_now_ms() - t0;
        /* Counted from the connect, the late ones would have gone 60 % of
         * the timeout after their hello: the deadline restarts with it. */
        D_ASSERT(d, late_first_close >= TIMEOUT_MS * 3 / 4,
                 "a connection whose hello came late was closed %lld ms after it (handshake_timeout_ms = %d)",
                 late_first_close, TIMEOUT_MS);
        close_all(fds, n);
        free(fds);
        fprintf(stderr, "slowloris (%s): %u connections (%u silent, %u silent after hello, %u 1-byte records, %u "
                "late hellos, closed %lld to %lld ms after them) all closed within %lld ms\n",
                mode_name(mode), n, closed[SLOW_SILENT], closed[SLOW_HELLO_THEN_SILENT], closed[SLOW_BYTE],
                closed[SLOW_LATE_HELLO], late_first_close, late_closed_after, took);
        guard_end(&g);
}
END_TEST

/* ------------------------------------------------------------ d. floods past RLIMIT_NOFILE */

/*
 * hbgd's RLIMIT_NOFILE lowered to a few more than it holds with the honest
 * session; then connections past it, held, with bursts of connects closed
 * at once, and a session asked for meanwhile. The connections hbgd took
 * hold its descriptors until handshake_timeout_ms (1 s here) drops them;
 * meanwhile it sheds what it cannot take. A fresh client is then served,
 * the session is granted or refused with a clear Error, the honest
 * session's graphs run on throughout, and every descriptor comes back.
 */
START_TEST(nofile_flood) {
        int mode = _i;
        if (skip_mode(mode, "nofile_flood"))
                return;
        struct rlimit own;
        ck_assert_int_eq(getrlimit(RLIMIT_NOFILE, &own), 0);
        if (own.rlim_cur < 2048 && own.rlim_max > own.rlim_cur) {
                struct rlimit more = { own.rlim_max < 4096 ? own.rlim_max : 4096, own.rlim_max };
                setrlimit(RLIMIT_NOFILE, &more);
        }
        struct guard g;
        guard_begin(&g, start_hbgd_conf(mode, BASE_CONF "handshake_timeout_ms = 1000\n"), "nofile_flood");
        struct hbgd_proc *d = g.d;
        /* The soft limit only: raising a hard one back needs a capability
         * a container's root may lack. */
        struct rlimit old;
        ck_assert_msg(prlimit(d->pid, RLIMIT_NOFILE, NULL, &old) == 0, "prlimit: %s", strerror(errno));
        struct rlimit low = { (rlim_t)g.base_honest + 16, old.rlim_max };
        ck_assert_msg(prlimit(d->pid, RLIMIT_NOFILE, &low, NULL) == 0, "prlimit: %s", strerror(errno));
        unsigned n = rounds(1000) < 100 ? 100 : rounds(1000);
        int *fds = calloc(n, sizeof(int));
        ck_assert_ptr_nonnull(fds);
        unsigned refused;
        int held = open_many(d->socket_path, fds, n, &refused);
        /* Bursts closed at once, while the flood is held. */
        unsigned bursts = rounds(50) < 3 ? 3 : rounds(50);
        for (unsigned b = 0; b < bursts; b++) {
                int burst[100];
                unsigned r2;
                int m = open_many(d->socket_path, burst, 100, &r2);
                close_all(burst, (unsigned)m);
        }
        /* A session asked for at the limit: granted or a clear Error. */
        unsigned shed = 0;
        fresh_status_shed(d, LIVE_MS * 4, "nofile_flood: at the limit", &shed);
        char why[256] = "";
        int sock = cx_connect_until(d->socket_path, daemon_now_ms() + IO_MS);
        int r = -1;
        if (sock >= 0 && cx_send(sock, HBG__ENVELOPE__MSG_HELLO, 0, 0) == 0 &&
            cx_expect(sock, HBG__ENVELOPE__MSG_HELLO, IO_MS, why, sizeof(why)) == 0 &&
            cx_send(sock, HBG__ENVELOPE__MSG_SESSION_REQUEST, 0, 0) == 0) {
                r = cx_expect(sock, HBG__ENVELOPE__MSG_SESSION_REPLY, IO_MS, why, sizeof(why));
                D_ASSERT(d, r == 0 || strstr(why, "Error"), "a session asked for at the fd limit: %s", why);
        } else {
                snprintf(why, sizeof(why), "the connection was shed before its session request");
        }
        if (sock >= 0)
                close(sock);
        close_all(fds, (unsigned)held);
        free(fds);
        fprintf(stderr, "nofile_flood (%s): %d connections held past RLIMIT_NOFILE %u (%u refused), %u bursts of "
                "100 closed at once, %u status attempts shed; a session there: %s\n",
                mode_name(mode), held, (unsigned)low.rlim_cur, refused, bursts, shed, r == 0 ? "granted" : why);
        guard_fds(&g, "after the flood was closed");
        D_ASSERT(d, prlimit(d->pid, RLIMIT_NOFILE, &old, NULL) == 0, "prlimit back to %llu: %s",
                 (unsigned long long)old.rlim_cur, strerror(errno));
        honest_graphs(d, 5, "nofile_flood: a new session after the flood");
        guard_end(&g);
}
END_TEST

/* ------------------------------------------------------------ e. a client that never reads */

/* Status requests (the largest reply) on sock without ever reading, until
 * hbgd closes it: the requests sent, or 0 if hbgd never did (then *how
 * says where the sending stopped, for the failure's message). */
static unsigned flood_unread(int sock, unsigned max, char *how, size_t how_len) {
        Hbg__StatusRequest rq = HBG__STATUS_REQUEST__INIT;
        Hbg__Envelope env = HBG__ENVELOPE__INIT;
        rq.kind = HBG__STATUS_KIND__STATUS_KERNELS;
        env.msg_case = HBG__ENVELOPE__MSG_STATUS_REQUEST;
        env.status_request = &rq;
        size_t len;
        uint8_t *rec = pack_env(&env, &len);
        long long deadline = daemon_now_ms() + IO_MS;
        unsigned sent = 0;
        int last_errno = 0;
        while (sent < max && daemon_now_ms() < deadline) {
                ssize_t n = send(sock, rec, len, MSG_DONTWAIT | MSG_NOSIGNAL);
                last_errno = n < 0 ? errno : 0;
                if (n == (ssize_t)len) {
                        sent++;
                } else if (n < 0 && (errno == EAGAIN || errno == EINTR)) {
                        struct pollfd p = { .fd = sock, .events = POLLOUT };
                        poll(&p, 1, 10);
                } else {
                        break; /* EPIPE, ECONNRESET: hbgd closed it */
                }
        }
        free(rec);
        /* A send can fail (EPIPE) while the kernel is still releasing
         * hbgd's end, a moment before the hang-up is flagged on ours: wait
         * for it, within what is left of the deadline. */
        long long left = deadline - daemon_now_ms();
        struct pollfd p = { .fd = sock, .events = 0 };
        bool hung_up = poll(&p, 1, left > 0 ? (int)left : 0) == 1 && (p.revents & POLLHUP);
        snprintf(how, how_len, "%u requests sent, the last send: %s, poll revents 0x%x", sent,
                 last_errno ? strerror(last_errno) : "ok", (unsigned)p.revents);
        return hung_up ? sent : 0;
}

/*
 * Status requests in a loop, replies never read, with and without a
 * session: hbgd closes the connection once a reply does not fit (logged
 * for a session), never waits for the client, and goes on serving.
 */
START_TEST(never_reads) {
        int mode = _i;
        if (skip_mode(mode, "never_reads"))
                return;
        struct guard g;
        guard_begin(&g, start_hbgd_conf(mode, BASE_CONF), "never_reads");
        struct hbgd_proc *d = g.d;
        unsigned n = rounds(100) < 4 ? 4 : rounds(100);
        unsigned most = 0;
        for (unsigned i = 0; i < n; i++) {
                int sock = raw_connect(d->socket_path);
                raw_hello(sock);
                if (i % 2) {
                        int sfds[SESSION_FDS];
                        wire_free(raw_session(sock, 0, 0, 0, sfds));
                        close_all(sfds, SESSION_FDS);
                }
                char how[160];
                unsigned sent = flood_unread(sock, 1000000, how, sizeof(how));
                if (sent == 0) {
                        list_fds(d->pid); /* does hbgd still hold the socket? */
                        /* Does it answer others meanwhile? */
                        int other = cx_connect(d->socket_path, false);
                        char why[256] = "";
                        int answered = other >= 0 && cx_send(other, HBG__ENVELOPE__MSG_HELLO, 0, 0) == 0
                                               ? cx_expect(other, HBG__ENVELOPE__MSG_HELLO, IO_MS, why, sizeof(why))
                                               : -1;
                        fprintf(stderr, "never_reads: another connection %s (%s)\n",
                                answered == 0 ? "was answered" : "was not answered", why);
                        if (other >= 0)
                                close(other);
                }
                D_ASSERT(d, sent > 0, "never_reads: hbgd did not close connection %u (%s) within %d ms (%s)", i,
                         i % 2 ? "with a session" : "without a session", IO_MS, how);
                most = sent > most ? sent : most;
                close(sock);
        }
        D_ASSERT(d, log_has(d, "closed: the client does not read its replies"),
                 "the session closed for unread replies was not logged with its reason");
        fprintf(stderr, "never_reads (%s): %u clients closed, after at most %u unread requests\n", mode_name(mode),
                n, most);
        guard_end(&g);
}
END_TEST

/* ------------------------------------------------------------ g. limits at N and N+1 */

/* Another connection asks for a session of (window, heap): granted, or
 * refused with `code` (the connection then stays: asked again, the same). */
static void session_at(struct hbgd_proc *d, uint64_t window, uint64_t heap, int code, const char *needle,
                       const char *what) {
        int sock = raw_connect(d->socket_path);
        raw_hello(sock);
        send_session_request(sock, window, heap, 0, NULL, 0);
        if (code == 0) {
                int sfds[SESSION_FDS];
                Hbg__Envelope *e = expect_env(sock, HBG__ENVELOPE__MSG_SESSION_REPLY, sfds, SESSION_FDS);
                D_ASSERT(d, (!window || e->session_reply->task_window == window) &&
                                    (!heap || e->session_reply->heap_size == heap),
                         "%s: granted window %" PRIu64 " heap %" PRIu64, what, e->session_reply->task_window,
                         e->session_reply->heap_size);
                wire_free(e);
                close_all(sfds, SESSION_FDS);
        } else {
                expect_error_stays(d, sock, code, needle, what);
                send_status_request(sock, HBG__STATUS_KIND__STATUS_DAEMON, NULL, 0);
                wire_free(expect_env(sock, HBG__ENVELOPE__MSG_STATUS_REPLY, NULL, 0));
        }
        close(sock);
}

/*
 * Session limits at N and N+1 (the honest client's session is one of
 * max_sessions): sessions, task window, heap; recordings (graphs and
 * tasks). The per-uid limits and the connection caps are in
 * test_e2e_hostile (connection_caps) and test_e2e_hostile_limits
 * (sessions_per_uid, memory_budget_*).
 */
START_TEST(limits_at_n) {
        struct guard g;
        guard_begin(&g,
                    start_hbgd_conf(MODE_URING, BASE_CONF "max_sessions = 4\nmax_task_window = 2048\n"
                                                          "max_heap_size = 2M\nmax_recorded_graphs = 3\n"
                                                          "max_recorded_tasks = 4\n"),
                    "limits_at_n");
        struct hbgd_proc *d = g.d;

        /* max_sessions = 4: the honest one and 3 more; the 5th waits for one. */
        int socks[4], sfds[SESSION_FDS];
        for (unsigned i = 0; i < 4; i++) {
                socks[i] = raw_connect(d->socket_path);
                raw_hello(socks[i]);
                send_session_request(socks[i], 0, 0, 0, NULL, 0);
        }
        for (unsigned i = 0; i < 3; i++) {
                wire_free(expect_env(socks[i], HBG__ENVELOPE__MSG_SESSION_REPLY, sfds, SESSION_FDS));
                close_all(sfds, SESSION_FDS);
        }
        expect_error_stays(d, socks[3], -EUSERS, "max_sessions = 4", "session 5 with max_sessions = 4");
        close(socks[0]);
        long long deadline = daemon_now_ms() + IO_MS;
        struct rx r;
        do {
                send_session_request(socks[3], 0, 0, 0, NULL, 0);
                rx(socks[3], IO_MS, &r);
                D_ASSERT(d, r.kind == RX_RECORD && r.env, "session 5 asked again: no reply");
                if (r.env->msg_case == HBG__ENVELOPE__MSG_SESSION_REPLY)
                        break;
                D_ASSERT(d, r.env->msg_case == HBG__ENVELOPE__MSG_ERROR && r.env->error->code == -EUSERS,
                         "session 5 asked again: message %d", (int)r.env->msg_case);
                rx_free(&r);
                sleep_us(10000);
        } while (daemon_now_ms() < deadline);
        D_ASSERT(d, r.env && r.env->msg_case == HBG__ENVELOPE__MSG_SESSION_REPLY,
                 "no session fit %d ms after one of 4 was closed", IO_MS);
        close_all(r.fds, r.nfds);
        rx_free(&r);

        /* Recordings on socks[1]: 3 graphs (N) fit, the 4th (N+1) does not;
         * 4 tasks in all (N), one more does not. */
        int one = recording_memfd(sizeof(struct hbg_recorded_task), true);
        for (unsigned i = 0; i < 3; i++) {
                send_record_request(socks[1], 1, &one, 1);
                wire_free(expect_env(socks[1], HBG__ENVELOPE__MSG_RECORD_REPLY, NULL, 0));
        }
        send_record_request(socks[1], 1, &one, 1);
        expect_error_stays(d, socks[1], -ENOSPC, "(3)", "recorded graph 4 with max_recorded_graphs = 3");
        send_record_request(socks[2], 1, &one, 1);
        wire_free(expect_env(socks[2], HBG__ENVELOPE__MSG_RECORD_REPLY, NULL, 0));
        int three = recording_memfd(3 * sizeof(struct hbg_recorded_task), true);
        send_record_request(socks[2], 3, &three, 1);
        wire_free(expect_env(socks[2], HBG__ENVELOPE__MSG_RECORD_REPLY, NULL, 0));
        send_record_request(socks[2], 1, &one, 1);
        expect_error_stays(d, socks[2], -E2BIG, "max_recorded_tasks", "recorded task 5 with max_recorded_tasks = 4");
        /* A validate request (a dry run) is not a recording: 5 tasks
         * (noops with ids 1..5) pass; the same as tasks 70000.. of a
         * larger graph have the wrong ids, and each is refused; 65536 is
         * its own bound, and first_task must be a task's number. */
        int val = raw_connect(d->socket_path);
        raw_hello(val);
        int five = recording_memfd(5 * sizeof(struct hbg_recorded_task), true);
        static const struct {
                uint64_t tasks, first;
                int fd_of_five, code;
                const char *needle;
                unsigned errors;
        } vr_cases[] = {
                { 5, 0, 1, 0, NULL, 0 },
                { 5, 70000, 1, 0, NULL, 5 },
                { 65537, 0, 0, -E2BIG, "1 to 65536 tasks", 0 },
                { 5, UINT64_C(1) << 63, 1, -EINVAL, "first_task", 0 },
        };
        for (size_t i = 0; i < sizeof(vr_cases) / sizeof(vr_cases[0]); i++) {
                Hbg__ValidateRequest vr = HBG__VALIDATE_REQUEST__INIT;
                vr.tasks = vr_cases[i].tasks;
                vr.first_task = vr_cases[i].first;
                Hbg__Envelope env = HBG__ENVELOPE__INIT;
                env.msg_case = HBG__ENVELOPE__MSG_VALIDATE_REQUEST;
                env.validate_request = &vr;
                send_env(val, &env, vr_cases[i].fd_of_five ? &five : &one, 1);
                if (vr_cases[i].code) {
                        expect_error_stays(d, val, vr_cases[i].code, vr_cases[i].needle, "a validate request refused");
                        continue;
                }
                Hbg__Envelope *e = expect_env(val, HBG__ENVELOPE__MSG_VALIDATE_REPLY, NULL, 0);
                const Hbg__ValidateReply *vrep = e->validate_reply;
                D_ASSERT(d, vrep->n_errors == vr_cases[i].errors &&
                                    (!vrep->n_errors || vrep->errors[vrep->n_errors - 1]->task == vrep->n_errors - 1),
                         "validate request %zu: %zu errors, want %u", i, vrep->n_errors, vr_cases[i].errors);
                wire_free(e);
        }
        close(five);
        close(val);
        close(one);
        close(three);
        for (unsigned i = 1; i < 4; i++)
                close(socks[i]);
        guard_fds(&g, "after the sessions closed");

        /* One session at a time (the honest one is the other). */
        session_at(d, 2048, 0, 0, NULL, "task_window = max_task_window");
        session_at(d, 4096, 0, -E2BIG, "task_window", "task_window = 2 max_task_window");
        session_at(d, 0, 2 << 20, 0, NULL, "heap_size = max_heap_size");
        session_at(d, 0, (2 << 20) + 64, -E2BIG, "heap_size", "heap_size = max_heap_size + 64");

        fprintf(stderr, "limits_at_n: max_task_window, max_heap_size, max_sessions, max_recorded_graphs and "
                "max_recorded_tasks granted at N, refused at N+1\n");
        guard_end(&g);
}
END_TEST

/* The submission region of a raw session, and its completion header. */
struct raw_ring {
        int sock, fds[SESSION_FDS];
        uint8_t *sub;
        const struct hbg_cpl_header *cpl;
        size_t sub_size, cpl_size;
        uint64_t first_id;
};

static void raw_ring_open(struct hbgd_proc *d, struct raw_ring *rr, uint64_t graph_table) {
        rr->sock = raw_connect(d->socket_path);
        raw_hello(rr->sock);
        Hbg__Envelope *e = raw_session(rr->sock, 0, 0, graph_table, rr->fds);
        D_ASSERT(d, e->session_reply->graph_table_entries == graph_table, "graph table of %" PRIu64 " entries",
                 e->session_reply->graph_table_entries);
        rr->sub_size = e->session_reply->sub_region_size;
        rr->cpl_size = e->session_reply->cpl_region_size;
        rr->first_id = e->session_reply->first_id;
        wire_free(e);
        rr->sub = mmap(NULL, rr->sub_size, PROT_READ | PROT_WRITE, MAP_SHARED, rr->fds[0], 0);
        void *cpl = mmap(NULL, rr->cpl_size, PROT_READ, MAP_SHARED, rr->fds[1], 0);
        ck_assert(rr->sub != MAP_FAILED && cpl != MAP_FAILED);
        rr->cpl = cpl;
}

/* n graph records of one (never published) task each, all at once. */
static void raw_ring_graphs(struct raw_ring *rr, uint64_t n) {
        struct hbg_sub_header *h = (struct hbg_sub_header *)rr->sub;
        uint64_t entries = UINT64_C(1) << h->graph_ring_log2;
        struct hbg_graph_record *recs = (struct hbg_graph_record *)(rr->sub + h->graphs_offset);
        for (uint64_t k = 0; k < n; k++) {
                struct hbg_graph_record *rec = &recs[k & (entries - 1)];
                memset(rec, 0, sizeof(*rec));
                rec->graph_id = k;
                rec->first_id = rr->first_id + k;
                rec->last_id = rr->first_id + k;
        }
        atomic_store_explicit(&h->graphs_submitted, n, memory_order_release);
        ck_assert_int_eq(send(rr->fds[2], "x", 1, MSG_DONTWAIT | MSG_NOSIGNAL), 1);
}

static void raw_ring_close(struct raw_ring *rr) {
        munmap(rr->sub, rr->sub_size);
        munmap((void *)rr->cpl, rr->cpl_size);
        close_all(rr->fds, SESSION_FDS);
        close(rr->sock);
}

/*
 * Graphs in flight at N and N+1: with a graph table of G entries, G graph
 * records ahead of the retired ones are accepted (the session lives); G+1
 * stops that session with -EPROTO (latched in its completion region, its
 * graphs failed, the reason logged), and nobody else notices.
 */
START_TEST(graphs_in_flight_limit) {
        enum { G = 4 };
        struct guard g;
        guard_begin(&g, start_hbgd_conf(MODE_URING, BASE_CONF), "graphs_in_flight_limit");
        struct hbgd_proc *d = g.d;
        struct raw_ring n, n1;
        raw_ring_open(d, &n, G);
        raw_ring_graphs(&n, G);
        raw_ring_open(d, &n1, G);
        raw_ring_graphs(&n1, G + 1);
        long long deadline = daemon_now_ms() + IO_MS;
        while (atomic_load(&n1.cpl->error_code) == 0 && daemon_now_ms() < deadline)
                sleep_us(2000);
        int32_t code = atomic_load(&n1.cpl->error_code);
        D_ASSERT(d, code == -EPROTO, "G+1 = %d graphs in flight: session error %d, expected -EPROTO", G + 1, code);
        /* Its records are not trusted any more: the session is closed. */
        expect_refusal(d, n1.sock, 0, CLOSE_EOF_ONLY_OK, "the session with G+1 graphs in flight");
        D_ASSERT(d, log_has(d, "graphs_submitted is more than the graph ring ahead") &&
                            log_has(d, "closed: session stopped: protocol error between libhbgclient and hbgd"),
                 "the stopped session's reason was not logged");
        /* The first session, G ahead, is fine (its tasks never come). */
        sleep_us(200000);
        D_ASSERT(d, atomic_load(&n.cpl->error_code) == 0, "G = %d graphs in flight stopped the session: %d", G,
                 atomic_load(&n.cpl->error_code));
        /* The same rule while hbgd holds a graph (its task never comes):
         * one record first, then G + 1 in all. */
        struct raw_ring held;
        raw_ring_open(d, &held, G);
        raw_ring_graphs(&held, 1);
        sleep_us(100000); /* let hbgd fetch record 0 and hold it */
        raw_ring_graphs(&held, G + 1);
        deadline = daemon_now_ms() + IO_MS;
        while (atomic_load(&held.cpl->error_code) == 0 && daemon_now_ms() < deadline)
                sleep_us(2000);
        code = atomic_load(&held.cpl->error_code);
        D_ASSERT(d, code == -EPROTO, "G+1 = %d graphs in flight while one is held: session error %d, expected -EPROTO",
                 G + 1, code);
        raw_ring_close(&held);
        raw_ring_close(&n);
        raw_ring_close(&n1);
        fprintf(stderr, "graphs_in_flight_limit: %d graphs in flight accepted, %d stopped that session "
                "(-EPROTO), also while a graph was held\n", G, G + 1);
        guard_end(&g);
}
END_TEST

/* ------------------------------------------------------------ suite */

static Suite *suite(void) {
        Suite *s = suite_create("e2e_proto_attack");
        TCase *io = tcase_create("io");
        tcase_set_timeout(io, 300);
        const TTest *both[] = { wrong_kind_fds, too_many_fds, message_size_limit, garbage_records, out_of_order,
                                slowloris, nofile_flood, never_reads };
        for (size_t i = 0; i < sizeof(both) / sizeof(both[0]); i++)
                tcase_add_loop_test(io, both[i], MODE_URING, N_MODES);
        suite_add_tcase(s, io);
        TCase *limits = tcase_create("limits");
        tcase_set_timeout(limits, 300);
        tcase_add_test(limits, limits_at_n);
        tcase_add_test(limits, graphs_in_flight_limit);
        suite_add_tcase(s, limits);
        return s;
}

const struct check_main check_main = {
        .suite = suite,
        .ignore_sigpipe = true,
        .setup = daemon_util_setup,
        .teardown = daemon_util_cleanup,
};
