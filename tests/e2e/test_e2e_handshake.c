/* SPDX-License-Identifier: MIT */
/*
 * hbgd's door end to end, by raw protocol records: hellos and records it
 * must refuse (a wrong major version, oversized, garbage, not a hello
 * first, truncated, fds where none belong, empty), and sessions taken by
 * hand: an older client's fds, the kernel table by digest, the regions
 * sealed, a seal made impossible. Every test runs once per io backend:
 * _i = MODE_URING (the default) and MODE_EPOLL (HBGD_IO=epoll).
 *
 * Run one group with CK_RUN_CASE=abuse|session; HBG_TEST_SEED fixes the
 * garbage's random bytes; HBG_TEST_VERBOSE=1 shows hbgd's log as it runs.
 */
#include <check.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <linux/futex.h>
#include <linux/io_uring.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "hbg/hbg.h"
#include "common/kernel_sig.h"
#include "proto/kernel_table.h"
#include "proto/wire.h"
#include "shm/layout.h"
#include "tests/e2e/e2e_util.h"
#include "tests/test_util.h"
#include "tests/check_main.h"

/* ------------------------------------------------------------ abuse */

START_TEST(abuse_wrong_major) {
        struct hbgd_proc *d = start_hbgd(_i, NULL);
        int base = fd_baseline(d);
        int fd = raw_connect(d->socket_path);
        send_hello(fd, 99, NULL, 0);
        expect_refusal(d, fd, -EPROTONOSUPPORT, CLOSE_ERROR_REQUIRED, "Hello version_major 99");
        close(fd);
        /* Major 0 too: only an exact match is accepted. */
        fd = raw_connect(d->socket_path);
        send_hello(fd, 0, NULL, 0);
        expect_refusal(d, fd, -EPROTONOSUPPORT, CLOSE_ERROR_REQUIRED, "Hello version_major 0");
        close(fd);
        abuse_epilogue(d, base, "wrong major version");
}
END_TEST

START_TEST(abuse_oversized) {
        struct hbgd_proc *d = start_hbgd(_i, NULL);
        int base = fd_baseline(d);
        int fd = raw_connect(d->socket_path);
        /* A 1 MiB record needs a send buffer that large (SEQPACKET records
         * are atomic); fall back to 256 KiB, still 4x max_message. */
        size_t len = 1u << 20;
        int sz = 4 << 20;
        if (setsockopt(fd, SOL_SOCKET, SO_SNDBUFFORCE, &sz, sizeof(sz)) < 0)
                setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &sz, sizeof(sz));
        uint8_t *buf = malloc(len);
        ck_assert_ptr_nonnull(buf);
        memset(buf, 0x0a, len); /* field 1 (hello), length-delimited... */
        int err = raw_send(fd, buf, len, NULL, 0);
        if (err == -EMSGSIZE || err == -ENOBUFS) {
                len = 256u << 10;
                fprintf(stderr, "abuse_oversized: 1 MiB record refused by the kernel; sending %zu bytes\n", len);
                err = raw_send(fd, buf, len, NULL, 0);
        }
        free(buf);
        ck_assert_msg(err == 0, "sendmsg %zu bytes: %s", len, strerror(-err));
        expect_refusal(d, fd, -EMSGSIZE, CLOSE_EOF_ONLY_OK, "oversized record");
        close(fd);
        /* Just over the limit, as the first record after a valid hello. */
        fd = raw_connect(d->socket_path);
        send_hello(fd, HBG_PROTO_MAJOR, NULL, 0);
        rx_free(&(struct rx){ .env = expect_env(fd, HBG__ENVELOPE__MSG_HELLO, NULL, 0) });
        buf = calloc(1, HBG_WIRE_MAX_MSG_DEFAULT + 1);
        ck_assert_ptr_nonnull(buf);
        ck_assert_int_eq(raw_send(fd, buf, HBG_WIRE_MAX_MSG_DEFAULT + 1, NULL, 0), 0);
        free(buf);
        expect_refusal(d, fd, -EMSGSIZE, CLOSE_EOF_ONLY_OK, "record of max_message + 1 bytes");
        close(fd);
        abuse_epilogue(d, base, "oversized record");
}
END_TEST

START_TEST(abuse_garbage) {
        struct hbgd_proc *d = start_hbgd(_i, NULL);
        int base = fd_baseline(d);
        uint64_t rng = seed_value() ^ 0x9e3779b97f4a7c15u;
        /* Several random records, each on a fresh connection; each one
         * checked here not to unpack as an Envelope. */
        for (unsigned round = 0; round < 8; round++) {
                uint8_t buf[512];
                size_t len;
                for (;;) {
                        len = 1 + xorshift(&rng) % sizeof(buf);
                        for (size_t i = 0; i < len; i++)
                                buf[i] = (uint8_t)xorshift(&rng);
                        Hbg__Envelope *e = hbg__envelope__unpack(NULL, len, buf);
                        if (!e)
                                break;
                        hbg__envelope__free_unpacked(e, NULL);
                }
                int fd = raw_connect(d->socket_path);
                ck_assert_int_eq(raw_send(fd, buf, len, NULL, 0), 0);
                char what[96];
                snprintf(what, sizeof(what), "%zu random bytes (HBG_TEST_SEED=%" PRIu64 ", round %u)", len,
                         seed_value(), round);
                expect_refusal(d, fd, -EPROTO, CLOSE_ERROR_REQUIRED, what);
                close(fd);
        }
        /* Garbage after a valid hello, too. */
        int fd = raw_connect(d->socket_path);
        send_hello(fd, HBG_PROTO_MAJOR, NULL, 0);
        rx_free(&(struct rx){ .env = expect_env(fd, HBG__ENVELOPE__MSG_HELLO, NULL, 0) });
        static const uint8_t junk[] = { 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01 };
        ck_assert_ptr_null(hbg__envelope__unpack(NULL, sizeof(junk), junk));
        ck_assert_int_eq(raw_send(fd, junk, sizeof(junk), NULL, 0), 0);
        expect_refusal(d, fd, -EPROTO, CLOSE_ERROR_REQUIRED, "garbage after hello");
        close(fd);
        abuse_epilogue(d, base, "garbage bytes");
}
END_TEST

START_TEST(abuse_not_hello_first) {
        struct hbgd_proc *d = start_hbgd(_i, NULL);
        int base = fd_baseline(d);
        int fd = raw_connect(d->socket_path);
        send_status_request(fd, HBG__STATUS_KIND__STATUS_DAEMON, NULL, 0);
        expect_refusal(d, fd, -EPROTO, CLOSE_ERROR_REQUIRED, "StatusRequest before Hello");
        close(fd);

        fd = raw_connect(d->socket_path);
        Hbg__SessionRequest sr = HBG__SESSION_REQUEST__INIT;
        Hbg__Envelope env = HBG__ENVELOPE__INIT;
        env.msg_case = HBG__ENVELOPE__MSG_SESSION_REQUEST;
        env.session_request = &sr;
        send_env(fd, &env, NULL, 0);
        expect_refusal(d, fd, -EPROTO, CLOSE_ERROR_REQUIRED, "SessionRequest before Hello");
        close(fd);

        /* Messages only hbgd sends, and a second Hello. */
        fd = raw_connect(d->socket_path);
        Hbg__Error e = HBG__ERROR__INIT;
        e.code = -EIO;
        e.message = (char *)"from a client";
        env.msg_case = HBG__ENVELOPE__MSG_ERROR;
        env.error = &e;
        send_env(fd, &env, NULL, 0);
        expect_refusal(d, fd, -EPROTO, CLOSE_ERROR_REQUIRED, "Error as the first message");
        close(fd);

        fd = raw_connect(d->socket_path);
        send_hello(fd, HBG_PROTO_MAJOR, NULL, 0);
        rx_free(&(struct rx){ .env = expect_env(fd, HBG__ENVELOPE__MSG_HELLO, NULL, 0) });
        Hbg__SessionReply srep = HBG__SESSION_REPLY__INIT;
        env.msg_case = HBG__ENVELOPE__MSG_SESSION_REPLY;
        env.session_reply = &srep;
        send_env(fd, &env, NULL, 0);
        expect_refusal(d, fd, -EPROTO, CLOSE_ERROR_REQUIRED, "SessionReply from a client");
        close(fd);

        fd = raw_connect(d->socket_path);
        send_hello(fd, HBG_PROTO_MAJOR, NULL, 0);
        rx_free(&(struct rx){ .env = expect_env(fd, HBG__ENVELOPE__MSG_HELLO, NULL, 0) });
        send_hello(fd, HBG_PROTO_MAJOR, NULL, 0);
        expect_refusal(d, fd, -EPROTO, CLOSE_ERROR_REQUIRED, "second Hello");
        close(fd);

        /* An Envelope with no message set (an empty oneof): one zero byte
         * would be an empty record, so an unknown field instead. */
        fd = raw_connect(d->socket_path);
        static const uint8_t unknown_field[] = { 0x78, 0x01 }; /* field 15, varint 1 */
        Hbg__Envelope *probe = hbg__envelope__unpack(NULL, sizeof(unknown_field), unknown_field);
        ck_assert_ptr_nonnull(probe);
        ck_assert_int_eq(probe->msg_case, HBG__ENVELOPE__MSG__NOT_SET);
        hbg__envelope__free_unpacked(probe, NULL);
        ck_assert_int_eq(raw_send(fd, unknown_field, sizeof(unknown_field), NULL, 0), 0);
        expect_refusal(d, fd, -EPROTO, CLOSE_ERROR_REQUIRED, "Envelope without a message");
        close(fd);
        abuse_epilogue(d, base, "non-hello first message");
}
END_TEST

START_TEST(abuse_truncated) {
        struct hbgd_proc *d = start_hbgd(_i, NULL);
        int base = fd_baseline(d);
        Hbg__Hello h = HBG__HELLO__INIT;
        Hbg__Envelope env = HBG__ENVELOPE__INIT;
        h.version_major = HBG_PROTO_MAJOR;
        h.version_minor = HBG_PROTO_MINOR;
        h.name = (char *)"a client whose hello is cut in half on the way";
        env.msg_case = HBG__ENVELOPE__MSG_HELLO;
        env.hello = &h;
        size_t len;
        uint8_t *buf = pack_env(&env, &len);
        /* Every cut that does not unpack here must be refused there. */
        unsigned tried = 0;
        for (size_t cut = len / 2; cut >= 1 && tried < 3; cut = cut * 2 / 3) {
                Hbg__Envelope *e = hbg__envelope__unpack(NULL, cut, buf);
                if (e) {
                        hbg__envelope__free_unpacked(e, NULL);
                        continue;
                }
                int fd = raw_connect(d->socket_path);
                ck_assert_int_eq(raw_send(fd, buf, cut, NULL, 0), 0);
                char what[64];
                snprintf(what, sizeof(what), "Hello of %zu bytes cut to %zu", len, cut);
                expect_refusal(d, fd, -EPROTO, CLOSE_ERROR_REQUIRED, what);
                close(fd);
                tried++;
        }
        free(buf);
        ck_assert_uint_gt(tried, 0);
        abuse_epilogue(d, base, "truncated protobuf");
}
END_TEST

static void send_hello_with_fds(struct hbgd_proc *d, unsigned nfds, bool memfds, const char *what) {
        int fds[RAW_MAX_FDS];
        for (unsigned i = 0; i < nfds; i++) {
                fds[i] = memfds ? memfd_create("e2e-stray", MFD_CLOEXEC) : eventfd(0, EFD_CLOEXEC);
                ck_assert_int_ge(fds[i], 0);
        }
        int fd = raw_connect(d->socket_path);
        send_hello(fd, HBG_PROTO_MAJOR, fds, nfds);
        for (unsigned i = 0; i < nfds; i++)
                close(fds[i]);
        expect_refusal(d, fd, -EPROTO, CLOSE_ERROR_REQUIRED, what);
        close(fd);
}

START_TEST(abuse_fds) {
        struct hbgd_proc *d = start_hbgd(_i, NULL);
        int base = fd_baseline(d);
        send_hello_with_fds(d, 6, false, "Hello with 6 eventfds");
        int n = daemon_wait_fd_count(d->pid, base, FD_SETTLE_MS);
        D_ASSERT(d, n == base, "6 eventfds: hbgd holds %d fds, %d before", n, base);
        send_hello_with_fds(d, 1, true, "Hello with 1 memfd");
        /* More than wire_recv's control buffer holds: MSG_CTRUNC; the
         * kernel still installs the fds that fit, which must be closed. */
        send_hello_with_fds(d, 20, false, "Hello with 20 eventfds");
        n = daemon_wait_fd_count(d->pid, base, FD_SETTLE_MS);
        D_ASSERT(d, n == base, "20 eventfds: hbgd holds %d fds, %d before", n, base);

        /* An fd on a later message of a connection past its hello. */
        int efd = eventfd(0, EFD_CLOEXEC);
        ck_assert_int_ge(efd, 0);
        int fd = raw_connect(d->socket_path);
        send_hello(fd, HBG_PROTO_MAJOR, NULL, 0);
        rx_free(&(struct rx){ .env = expect_env(fd, HBG__ENVELOPE__MSG_HELLO, NULL, 0) });
        send_status_request(fd, HBG__STATUS_KIND__STATUS_DAEMON, &efd, 1);
        close(efd);
        expect_refusal(d, fd, -EPROTO, CLOSE_ERROR_REQUIRED, "StatusRequest with 1 eventfd");
        close(fd);
        abuse_epilogue(d, base, "fds from a client");
}
END_TEST

START_TEST(abuse_empty_record) {
        struct hbgd_proc *d = start_hbgd(_i, NULL);
        int base = fd_baseline(d);
        /* A zero-length SEQPACKET record reads like EOF: hbgd may take it
         * for a hang-up (no Error) or refuse it; either way it closes. */
        int fd = raw_connect(d->socket_path);
        ck_assert_int_eq(raw_send(fd, "", 0, NULL, 0), 0);
        expect_refusal(d, fd, -EPROTO, CLOSE_EOF_ONLY_OK, "empty first record");
        close(fd);
        fd = raw_connect(d->socket_path);
        send_hello(fd, HBG_PROTO_MAJOR, NULL, 0);
        rx_free(&(struct rx){ .env = expect_env(fd, HBG__ENVELOPE__MSG_HELLO, NULL, 0) });
        ck_assert_int_eq(raw_send(fd, "", 0, NULL, 0), 0);
        expect_refusal(d, fd, -EPROTO, CLOSE_EOF_ONLY_OK, "empty record after hello");
        close(fd);
        abuse_epilogue(d, base, "empty record");
}
END_TEST

/* ------------------------------------------------------------ session by hand */

static bool is_kind(int fd, mode_t kind) {
        struct stat st;
        return fstat(fd, &st) == 0 && (st.st_mode & S_IFMT) == kind;
}

/* Our end of a channel must be a file description of our own: hbgd's end
 * is a different one, so nothing we do to ours reaches hbgd's. */
static bool read_only_end(int fd) {
        int fl = fcntl(fd, F_GETFL);
        return fl >= 0 && (fl & O_ACCMODE) == O_RDONLY;
}

/* A client older than protocol 1.6 maps regions of another layout: its
 * session request is refused with both sides' versions (which it shows),
 * not answered with regions it would refuse with a message that names
 * neither; the connection stays. A 1.6 client gets its session. */
START_TEST(session_refused_to_older_client) {
        struct hbgd_proc *d = start_hbgd(_i, NULL);
        int base = fd_baseline(d);
        for (unsigned minor = HBG_PROTO_MINOR_OLDEST_SESSION - 1; minor <= HBG_PROTO_MINOR_OLDEST_SESSION; minor++) {
                int sock = raw_connect(d->socket_path);
                send_hello_minor(sock, HBG_PROTO_MAJOR, minor, NULL, 0);
                wire_free(expect_env(sock, HBG__ENVELOPE__MSG_HELLO, NULL, 0));
                ck_assert_int_eq(cx_send(sock, HBG__ENVELOPE__MSG_SESSION_REQUEST, 0, 0), 0);
                if (minor < HBG_PROTO_MINOR_OLDEST_SESSION) {
                        char both[160];
                        snprintf(both, sizeof(both), "a client of protocol %u.%u cannot use this hbgd's shared memory "
                                 "(hbgd %s speaks protocol %u.%u, shared-memory layout %u)", HBG_PROTO_MAJOR, minor,
                                 HBG_VERSION, HBG_PROTO_MAJOR, HBG_PROTO_MINOR, HBG_LAYOUT_VERSION);
                        expect_error_stays(d, sock, -EPROTONOSUPPORT, both, "session of a protocol 1.5 client");
                        /* The connection stays: a status request is answered. */
                        Hbg__Envelope *st;
                        status_reply(sock, HBG__STATUS_KIND__STATUS_DAEMON, &st);
                        wire_free(st);
                } else {
                        int fds[5];
                        Hbg__Envelope *e = expect_env(sock, HBG__ENVELOPE__MSG_SESSION_REPLY, fds, 5);
                        ck_assert_uint_eq(e->session_reply->fds, 5);
                        wire_free(e);
                        for (unsigned i = 0; i < 5; i++)
                                close(fds[i]);
                }
                close(sock);
        }
        abuse_epilogue(d, base, "sessions of older clients");
}
END_TEST

static const char *nonnull(const char *s) {
        return s ? s : "";
}

/* An imported row against the built-in one: every field a client uses. */
static void assert_same_sig(struct hbgd_proc *d, const struct hbg_kernel_sig *a, const struct hbg_kernel_sig *b) {
        bool same = a->id == b->id && strcmp(a->name, b->name) == 0 &&
                    strcmp(nonnull(a->summary), nonnull(b->summary)) == 0 &&
                    strcmp(nonnull(a->length_rule), nonnull(b->length_rule)) == 0 &&
                    strcmp(nonnull(a->module), nonnull(b->module)) == 0 && a->length == b->length &&
                    a->splittable == b->splittable && a->in_place == b->in_place && a->n_tensors == b->n_tensors &&
                    a->n_scalars == b->n_scalars;
        for (unsigned i = 0; same && i < a->n_tensors; i++)
                same = strcmp(a->tensors[i].name, b->tensors[i].name) == 0 && a->tensors[i].dir == b->tensors[i].dir;
        for (unsigned i = 0; same && i < a->n_scalars; i++)
                same = strcmp(a->scalars[i].name, b->scalars[i].name) == 0 &&
                       a->scalars[i].kind == b->scalars[i].kind;
        D_ASSERT(d, same, "hbgd's row for %s is not this build's built-in one", b->name);
}

/* The kernel table by its digest (docs/PROTOCOL.md, "The kernel table"):
 * a session request with the digest of this build's built-in table gets
 * no rows, hbgd's table being that one; with any other digest, or none
 * (an older client), every row. The library's own connects send it
 * (test_e2e_api lists the kernels it then knows; test_e2e_modules, a
 * table with a module's kernels, which no digest of a built-in table
 * spares). */
START_TEST(kernel_table_by_digest) {
        struct hbgd_proc *d = start_hbgd(_i, NULL);
        int base = fd_baseline(d);
        uint64_t mine = kernel_table_builtin_digest();
        const uint64_t digests[] = { mine, mine ^ 1, 0 };
        for (size_t i = 0; i < sizeof(digests) / sizeof(digests[0]); i++) {
                int sock = raw_connect(d->socket_path);
                raw_hello(sock);
                Hbg__SessionRequest sr = HBG__SESSION_REQUEST__INIT;
                sr.kernels_digest = digests[i];
                Hbg__Envelope req = HBG__ENVELOPE__INIT;
                req.msg_case = HBG__ENVELOPE__MSG_SESSION_REQUEST;
                req.session_request = &sr;
                send_env(sock, &req, NULL, 0);
                int fds[SESSION_FDS];
                Hbg__Envelope *e = expect_env(sock, HBG__ENVELOPE__MSG_SESSION_REPLY, fds, SESSION_FDS);
                const Hbg__SessionReply *r = e->session_reply;
                if (i == 0)
                        D_ASSERT(d, r->kernels_by_digest && r->n_kernels == 0,
                                 "the built-in table's digest: %zu rows, kernels_by_digest %d", r->n_kernels,
                                 (int)r->kernels_by_digest);
                else
                        D_ASSERT(d, !r->kernels_by_digest && r->n_kernels == kernel_sig_count(),
                                 "digest %#" PRIx64 ": %zu rows (not %zu), kernels_by_digest %d", digests[i],
                                 r->n_kernels, kernel_sig_count(), (int)r->kernels_by_digest);
                if (i > 0) {
                        /* The rows, imported as a client does, are the
                         * built-in table, field by field: what a client
                         * that sent the digest uses instead. */
                        struct kernel_table t;
                        char why[256];
                        D_ASSERT(d, kernel_table_import(&t, r->kernels, r->n_kernels, why, sizeof(why)) == 0, "%s",
                                 why);
                        for (size_t k = 0; k < t.n; k++)
                                assert_same_sig(d, kernel_table_at(&t, k), kernel_sig_at(k));
                        kernel_table_free(&t);
                }
                wire_free(e);
                for (unsigned f = 0; f < SESSION_FDS; f++)
                        close(fds[f]);
                close(sock);
        }
        abuse_epilogue(d, base, "sessions asking for the table by its digest");
}
END_TEST

/* Where session `id` is on its way to being served, as `hbgctl sessions`
 * shows it (a status request on a connection of its own); waits up to
 * WAIT_MS for `want` (NULL: answers at once). The caller frees it. */
static char *session_serving(struct hbgd_proc *d, uint64_t id, const char *want) {
        int sock = raw_connect(d->socket_path);
        raw_hello(sock);
        char *serving = NULL;
        long long until = daemon_now_ms() + WAIT_MS;
        do {
                free(serving);
                serving = NULL;
                if (want)
                        sleep_us(1000);
                Hbg__Envelope *r = status_of(d, sock, HBG__STATUS_KIND__STATUS_SESSIONS);
                for (size_t i = 0; i < r->status_reply->n_sessions; i++)
                        if (r->status_reply->sessions[i]->session_id == id)
                                serving = strdup(r->status_reply->sessions[i]->serving);
                wire_free(r);
                D_ASSERT(d, serving, "session %" PRIu64 " is not in hbgd's status", id);
        } while (want && strcmp(serving, want) != 0 && daemon_now_ms() < until);
        close(sock);
        return serving;
}

static void expect_serving(struct hbgd_proc *d, uint64_t id, const char *want) {
        char *serving = session_serving(d, id, want);
        D_ASSERT(d, strcmp(serving, want) == 0, "session %" PRIu64 " is %s, not %s", id, serving, want);
        free(serving);
}

/* A client that sealed its submission memfd's seals (F_SEAL_SEAL) without
 * F_SEAL_FUTURE_WRITE and rang: hbgd cannot seal it, so it never serves
 * the session, and says why in its log (and its status: unservable); it
 * goes on serving others. */
START_TEST(session_seal_made_impossible) {
        struct hbgd_proc *d = start_hbgd(_i, NULL);
        int base = fd_baseline(d);
        int sock = raw_connect(d->socket_path);
        raw_hello(sock);
        int fds[SESSION_FDS];
        Hbg__Envelope *e = session_by_hand(sock, fds);
        uint64_t session = e->session_reply->session_id;
        wire_free(e);
        ck_assert_int_eq(fcntl(fds[0], F_ADD_SEALS, F_SEAL_SEAL), 0);
        char one = 1;
        ck_assert_int_eq(send(fds[2], &one, 1, MSG_DONTWAIT), 1);
        char needle[128];
        snprintf(needle, sizeof(needle), "session %" PRIu64 ": cannot seal its submission region", session);
        D_ASSERT(d, log_has(d, needle), "hbgd did not say why it does not serve the session");
        ck_assert_msg(!(fcntl(fds[0], F_GET_SEALS) & F_SEAL_FUTURE_WRITE), "sealed after all");
        expect_serving(d, session, "unservable");
        assert_serving(d);
        for (unsigned i = 0; i < SESSION_FDS; i++)
                close(fds[i]);
        close(sock);
        abuse_epilogue(d, base, "session_seal_made_impossible");
}
END_TEST

START_TEST(session_regions_sealed) {
        struct hbgd_proc *d = start_hbgd(_i, NULL);
        int base = fd_baseline(d);
        int sock = raw_connect(d->socket_path);
        raw_hello(sock);
        int fds[SESSION_FDS];
        Hbg__Envelope *e = session_by_hand(sock, fds);
        const Hbg__SessionReply *r = e->session_reply;
        uint64_t session = r->session_id;
        ck_assert_uint_eq(r->fds, SESSION_FDS);
        ck_assert_uint_gt(r->sub_region_size, 0);
        ck_assert_uint_gt(r->cpl_region_size, 0);
        size_t sub_size = r->sub_region_size, cpl_size = r->cpl_region_size;
        wire_free(e);

        /* What arrived: two memfds of the announced sizes, the doorbell
         * (our end of a socketpair) and the completion channel (the read
         * end of a pipe), all close-on-exec here (MSG_CMSG_CLOEXEC). */
        struct stat st;
        ck_assert_int_eq(fstat(fds[0], &st), 0);
        ck_assert_uint_eq((uint64_t)st.st_size, sub_size);
        ck_assert_int_eq(fstat(fds[1], &st), 0);
        ck_assert_uint_eq((uint64_t)st.st_size, cpl_size);
        ck_assert_msg(is_kind(fds[2], S_IFSOCK), "fd 3 is not a socket");
        ck_assert_msg(is_kind(fds[3], S_IFIFO) && read_only_end(fds[3]),
                      "fd 4 is not the read end of a pipe");
        int seals0 = fcntl(fds[0], F_GET_SEALS), seals1 = fcntl(fds[1], F_GET_SEALS);
        ck_assert_msg(seals0 >= 0 && seals1 >= 0, "F_GET_SEALS: %s (not memfds?)", strerror(errno));
        /* The submission memfd's last seal is the client's to add, once
         * it has mapped the region (protocol 1.6; below). */
        int want0 = F_SEAL_SHRINK | F_SEAL_GROW;
        ck_assert_msg((seals0 & want0) == want0, "submission memfd seals 0x%x lack 0x%x", seals0, want0);
        ck_assert_msg(!(seals0 & (F_SEAL_FUTURE_WRITE | F_SEAL_SEAL)),
                      "submission memfd seals 0x%x: sealed before the client could map it", seals0);
        int want1 = want0 | F_SEAL_FUTURE_WRITE | F_SEAL_SEAL;
        ck_assert_msg((seals1 & want1) == want1, "completion memfd seals 0x%x lack 0x%x", seals1, want1);

        /* The completion region: no writable shared mapping, ever. */
        void *p = mmap(NULL, cpl_size, PROT_READ | PROT_WRITE, MAP_SHARED, fds[1], 0);
        int mmap_errno = errno;
        if (p != MAP_FAILED)
                munmap(p, cpl_size);
        ck_assert_msg(p == MAP_FAILED, "completion memfd mapped PROT_WRITE|MAP_SHARED");
        ck_assert_msg(mmap_errno == EPERM, "mmap writable: %s, expected EPERM", strerror(mmap_errno));
        void *ro = mmap(NULL, cpl_size, PROT_READ, MAP_SHARED, fds[1], 0);
        ck_assert_msg(ro != MAP_FAILED, "completion memfd cannot be mapped read-only: %s", strerror(errno));
        int mp = mprotect(ro, cpl_size, PROT_READ | PROT_WRITE);
        int mp_errno = errno;
        ck_assert_msg(mp < 0, "mprotect of the read-only completion mapping to PROT_WRITE succeeded");
        fprintf(stderr, "session_regions_sealed: mprotect(PROT_WRITE) refused with %s\n", strerror(mp_errno));
        volatile const uint8_t *bytes = ro;
        (void)bytes[0]; /* readable */
        munmap(ro, cpl_size);
        uint8_t zero[8] = { 0 };
        errno = 0;
        ck_assert_msg(write(fds[1], zero, sizeof(zero)) < 0 && errno == EPERM,
                      "write() to the completion memfd: %s, expected EPERM", errno ? strerror(errno) : "succeeded");
        errno = 0;
        ck_assert_msg(pwrite(fds[1], zero, sizeof(zero), 64) < 0 && errno == EPERM,
                      "pwrite() to the completion memfd: %s, expected EPERM", errno ? strerror(errno) : "succeeded");

        /* Sizes are fixed: neither memfd shrinks or grows. */
        for (unsigned i = 0; i < 2; i++) {
                off_t size = (off_t)(i == 0 ? sub_size : cpl_size);
                errno = 0;
                ck_assert_msg(ftruncate(fds[i], size / 2) < 0 && errno == EPERM,
                              "ftruncate(memfd %u, shrink): %s, expected EPERM", i,
                              errno ? strerror(errno) : "succeeded");
                errno = 0;
                ck_assert_msg(ftruncate(fds[i], size + 4096) < 0 && errno == EPERM,
                              "ftruncate(memfd %u, grow): %s, expected EPERM", i,
                              errno ? strerror(errno) : "succeeded");
                errno = 0;
                ck_assert_msg(ftruncate(fds[i], 0) < 0 && errno == EPERM,
                              "ftruncate(memfd %u, 0): %s, expected EPERM", i, errno ? strerror(errno) : "succeeded");
                ck_assert_int_eq(fstat(fds[i], &st), 0);
                ck_assert_uint_eq((uint64_t)st.st_size, (uint64_t)size);
                /* No write seal: F_SEAL_SEAL on the completion memfd,
                 * hbgd's own writable mapping of the submission one. */
                errno = 0;
                ck_assert_msg(fcntl(fds[i], F_ADD_SEALS, F_SEAL_WRITE) < 0 && errno == (i == 0 ? EBUSY : EPERM),
                              "F_ADD_SEALS(F_SEAL_WRITE) on memfd %u: %s, expected %s", i,
                              errno ? strerror(errno) : "succeeded", i == 0 ? "EBUSY" : "EPERM");
        }
        /* The submission region is the client's to write. */
        uint8_t *sub = mmap(NULL, sub_size, PROT_READ | PROT_WRITE, MAP_SHARED, fds[0], 0);
        ck_assert_msg(sub != MAP_FAILED, "submission memfd cannot be mapped writable: %s", strerror(errno));

        /* This client rings without sealing it (as one of protocol 1.5
         * would): hbgd seals it before it serves the session. From then
         * on no hole can be punched in it (a fault of hbgd's on a page
         * being punched would wait for the punch) and no new writable
         * mapping made; the one we have still writes. */
        char *serving = session_serving(d, session, NULL);
        D_ASSERT(d, strcmp(serving, "unserved") == 0, "before its first doorbell session %" PRIu64 " is %s, not "
                 "unserved", session, serving);
        free(serving);
        char one = 1;
        ck_assert_int_eq(send(fds[2], &one, 1, MSG_DONTWAIT), 1);
        long long until = daemon_now_ms() + WAIT_MS;
        while (!(fcntl(fds[0], F_GET_SEALS) & F_SEAL_FUTURE_WRITE) && daemon_now_ms() < until)
                sleep_us(1000);
        seals0 = fcntl(fds[0], F_GET_SEALS);
        ck_assert_msg(seals0 & F_SEAL_FUTURE_WRITE, "hbgd did not seal the submission memfd after the first "
                      "doorbell (seals 0x%x)", seals0);
        expect_serving(d, session, "served");
        errno = 0;
        ck_assert_msg(fallocate(fds[0], FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, 0, 4096) < 0 && errno == EPERM,
                      "punching a hole in the sealed submission memfd: %s, expected EPERM",
                      errno ? strerror(errno) : "succeeded");
        errno = 0;
        ck_assert_msg(madvise(sub, 4096, MADV_REMOVE) < 0 && errno == EPERM,
                      "MADV_REMOVE on the sealed submission region: %s, expected EPERM",
                      errno ? strerror(errno) : "succeeded");
        errno = 0;
        ck_assert_msg(pwrite(fds[0], zero, sizeof(zero), 0) < 0 && errno == EPERM,
                      "pwrite() to the sealed submission memfd: %s, expected EPERM",
                      errno ? strerror(errno) : "succeeded");
        p = mmap(NULL, sub_size, PROT_READ | PROT_WRITE, MAP_SHARED, fds[0], 0);
        mmap_errno = errno;
        if (p != MAP_FAILED)
                munmap(p, sub_size);
        ck_assert_msg(p == MAP_FAILED && mmap_errno == EPERM,
                      "a second writable mapping of the sealed submission memfd: %s, expected EPERM",
                      p == MAP_FAILED ? strerror(mmap_errno) : "succeeded");
        uint8_t *heap_end = sub + sub_size - 1;
        *heap_end = 0x5a;
        ck_assert_uint_eq(*heap_end, 0x5a);
        munmap(sub, sub_size);

        /* The wake page (protocol 1.5): this uid's, shared by its
         * sessions, read-only here. Its word can be read and woken, never written:
         * no writable shared mapping, no write(2), no resizing, no seal
         * added (the fd is read-only, and F_SEAL_SEAL). */
        ck_assert_msg(read_only_end(fds[4]), "the wake page's fd is not read-only");
        int seals4 = fcntl(fds[4], F_GET_SEALS);
        int want4 = F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_FUTURE_WRITE | F_SEAL_SEAL;
        ck_assert_msg(seals4 >= 0 && (seals4 & want4) == want4, "wake page seals 0x%x lack 0x%x", seals4, want4);
        ck_assert_int_eq(fstat(fds[4], &st), 0);
        ck_assert_uint_eq((uint64_t)st.st_size, HBG_WAKE_PAGE_SIZE);
        errno = 0;
        p = mmap(NULL, HBG_WAKE_PAGE_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED, fds[4], 0);
        mmap_errno = errno;
        if (p != MAP_FAILED)
                munmap(p, HBG_WAKE_PAGE_SIZE);
        ck_assert_msg(p == MAP_FAILED && (mmap_errno == EACCES || mmap_errno == EPERM),
                      "wake page mapped PROT_WRITE|MAP_SHARED (%s)", strerror(mmap_errno));
        const struct hbg_wake_page *wp = mmap(NULL, HBG_WAKE_PAGE_SIZE, PROT_READ, MAP_SHARED, fds[4], 0);
        ck_assert_msg(wp != MAP_FAILED, "wake page cannot be mapped read-only: %s", strerror(errno));
        ck_assert_uint_eq(wp->magic, HBG_WAKE_MAGIC);
        ck_assert_uint_ge(wp->wake_n, 1);
        ck_assert_msg(wp->flags & HBG_WAKE_OWN, "the first uid's wake page is not marked its own");
        ck_assert_msg(mprotect((void *)(uintptr_t)wp, HBG_WAKE_PAGE_SIZE, PROT_READ | PROT_WRITE) < 0,
                      "mprotect of the wake page to PROT_WRITE succeeded");
        /* A wake is all a client can do with it (nobody need be asleep). */
        ck_assert_msg(syscall(SYS_futex, &wp->word, FUTEX_WAKE, 1, NULL, NULL, 0) >= 0,
                      "FUTEX_WAKE on the read-only wake page: %s", strerror(errno));
        munmap((void *)(uintptr_t)wp, HBG_WAKE_PAGE_SIZE);
        errno = 0;
        ck_assert_msg(write(fds[4], zero, sizeof(zero)) < 0, "write() to the wake page succeeded");
        ck_assert_msg(ftruncate(fds[4], 0) < 0, "ftruncate() of the wake page succeeded");
        ck_assert_msg(fcntl(fds[4], F_ADD_SEALS, F_SEAL_WRITE) < 0, "F_ADD_SEALS on the wake page succeeded");

        /* hbgd's session holds the socket and its ends of the two
         * channels, and the uid's wake page; all gone once we hang up. */
        for (unsigned i = 0; i < SESSION_FDS; i++)
                close(fds[i]);
        close(sock);
        abuse_epilogue(d, base, "session by hand");
}
END_TEST

/* Every test under both io backends. */
static Suite *suite(void) {
        Suite *s = suite_create("e2e_handshake");
        struct {
                const char *name;
                const TTest *tests[8];
        } cases[] = {
                { "abuse", { abuse_wrong_major, abuse_oversized, abuse_garbage, abuse_not_hello_first,
                             abuse_truncated, abuse_fds, abuse_empty_record } },
                { "session", { session_regions_sealed, session_refused_to_older_client, session_seal_made_impossible,
                               kernel_table_by_digest } },
        };
        for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
                TCase *tc = tcase_create(cases[i].name);
                tcase_set_timeout(tc, 600);
                for (size_t j = 0; j < 8 && cases[i].tests[j]; j++)
                        tcase_add_loop_test(tc, cases[i].tests[j], MODE_URING, N_MODES);
                suite_add_tcase(s, tc);
        }
        return s;
}

const struct check_main check_main = {
        .suite = suite,
        .ignore_sigpipe = true,
        .setup = daemon_util_setup,
        .teardown = daemon_util_cleanup,
};
