/* SPDX-License-Identifier: MIT */
/*
 * Fuzz target: the control protocol's decoder and dispatcher
 * (proto/wire.c, daemon/conn.c and the handlers behind it: sessions,
 * status, recordings), in a real hbgd set up in this process (its engine
 * threads, its io loop, its accounting). Each input is one connection: a
 * SOCK_SEQPACKET socketpair whose hbgd end is handed to conn_accept() like
 * an accepted one, then a sequence of records sent on the client end:
 *
 *   ctl, len (2 bytes, little endian), then len bytes: one record, sent
 *   as is (seeds hold real Envelopes; the fuzzer mutates their bytes),
 *   with file descriptors attached by ctl & 7:
 *     0 none       1 a sealed memfd holding the next chunk (len, bytes)
 *     2 the same memfd unsealed        3 an eventfd
 *     4 a pipe's read end              5 /dev/null
 *     6 a socket                       7 two sealed memfds
 *   ctl & 8: run hbgd's loop and read its replies before the next record.
 *   ctl & 16: the record is a datagram on the session's doorbell instead
 *   (the doorbell of the last session reply read, waited for up to
 *   DOORBELL_WAIT_MS: hbgd builds a session off its io thread; none: the
 *   record is dropped), with the same fds attached, which hbgd must never
 *   take in.
 *
 * After the last record the client reads what is there, closes, and hbgd
 * runs until the connection is gone and everything it charged (the
 * connection, a session and its memory) is refunded: a connection or a
 * charge left behind is a leak, reported by abort() here and by LSan.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <syslog.h>
#include <unistd.h>

#include "daemon/daemon.h"
#include "daemon/daemon_private.h"
#include "daemon/conn.h"
#include "daemon/conn_close.h"
#include "daemon/log.h"
#include "proto/kernel_table.h"
#include "proto/wire.h"
#include "shm/layout.h"
#include "common/clock.h"
#include "tests/fuzz/fuzz.h"

#define SETTLE_MS 10000
#define DOORBELL_WAIT_MS 2000
#define MAX_RECORDS 64u

static struct hbgd *daemon_here;

static struct hbgd *the_daemon(void) {
        if (daemon_here)
                return daemon_here;
        static char dir[] = "/tmp/hbg-fuzz-protocol.XXXXXX";
        if (!mkdtemp(dir))
                abort();
        /* As hbgd's main does (the engine writes completion pipes whose
         * other end a client may have closed). */
        signal(SIGPIPE, SIG_IGN);
        struct hbgd_config cfg;
        hbgd_config_default(&cfg);
        snprintf(cfg.socket_path, sizeof(cfg.socket_path), "%s/hbgd.sock", dir);
        cfg.engine.threads = 2;
        cfg.engine.clusters = 2;
        /* Small sessions: each input may open one. */
        cfg.max_task_window = 1u << 12;
        cfg.max_heap_size = 1u << 20;
        hbgd_set_log_level(getenv("HBG_FUZZ_VERBOSE") ? LOG_DEBUG : LOG_CRIT);
        sigset_t mask;
        sigemptyset(&mask);
        sigaddset(&mask, SIGTERM);
        sigaddset(&mask, SIGINT);
        sigaddset(&mask, SIGHUP);
        pthread_sigmask(SIG_BLOCK, &mask, NULL);
        if (hbgd_new(&daemon_here, &cfg) < 0)
                abort();
        /* Nobody connects through it: only its directory needs to go. */
        unlink(cfg.socket_path);
        rmdir(dir);
        return daemon_here;
}

/* Is a session being built (its reply not sent yet)? */
static bool session_building(const struct hbgd *d) {
        for (const struct conn *c = d->conns; c; c = c->next)
                if (c->creating)
                        return true;
        return false;
}

static void turn(struct hbgd *d) {
        io_loop_run_once(d->loop, 0);
        conn_free_dead(d);
}

/* The replies waiting on sock, their fds closed but a session reply's
 * doorbell (its third of four or five), kept in *doorbell. */
static void drain_replies(int sock, int *doorbell) {
        char buf[1 << 16];
        for (unsigned i = 0; i < 1024; i++) {
                char cmsg[CMSG_SPACE(sizeof(int) * HBG_WIRE_MAX_FDS)];
                struct iovec iov = { buf, sizeof(buf) };
                struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = cmsg,
                                     .msg_controllen = sizeof(cmsg) };
                if (recvmsg(sock, &mh, MSG_DONTWAIT | MSG_CMSG_CLOEXEC) <= 0)
                        return;
                for (struct cmsghdr *c = CMSG_FIRSTHDR(&mh); c; c = CMSG_NXTHDR(&mh, c))
                        if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS) {
                                int *fds = (int *)(void *)CMSG_DATA(c);
                                size_t n = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
                                for (size_t k = 0; k < n; k++) {
                                        if (k == 2 && n >= 4) {
                                                if (*doorbell >= 0)
                                                        close(*doorbell);
                                                *doorbell = fds[k];
                                                continue;
                                        }
                                        close(fds[k]);
                                }
                        }
        }
}

static int sealed_memfd(const uint8_t *p, size_t n, bool seal) {
        int fd = fuzz_memfd("tasks", p, n);
        if (fd >= 0 && seal)
                fcntl(fd, F_ADD_SEALS, F_SEAL_WRITE | F_SEAL_SHRINK | F_SEAL_GROW);
        return fd;
}

/* The fds a record carries (ctl & 7), from the chunk after it where a
 * memfd needs contents; returns how many, and advances *pos. */
static unsigned make_fds(unsigned kind, const uint8_t *data, size_t size, size_t *pos, int *fds) {
        const uint8_t *chunk = NULL;
        size_t len = 0;
        if (kind == 1 || kind == 2 || kind == 7) {
                if (*pos + 2 <= size) {
                        len = (size_t)data[*pos] | (size_t)data[*pos + 1] << 8;
                        *pos += 2;
                        if (len > size - *pos)
                                len = size - *pos;
                        chunk = data + *pos;
                        *pos += len;
                }
        }
        int sv[2];
        switch (kind) {
        case 1:
        case 2:
                fds[0] = sealed_memfd(chunk, len, kind == 1);
                return fds[0] >= 0;
        case 3:
                fds[0] = eventfd(0, EFD_CLOEXEC);
                return fds[0] >= 0;
        case 4:
                if (pipe2(sv, O_CLOEXEC) < 0)
                        return 0;
                close(sv[1]);
                fds[0] = sv[0];
                return 1;
        case 5:
                fds[0] = open("/dev/null", O_RDWR | O_CLOEXEC);
                return fds[0] >= 0;
        case 6:
                if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0)
                        return 0;
                close(sv[1]);
                fds[0] = sv[0];
                return 1;
        case 7:
                fds[0] = sealed_memfd(chunk, len, true);
                fds[1] = sealed_memfd(chunk, len, true);
                return 2;
        default:
                return 0;
        }
}

static void send_record(int sock, const uint8_t *p, size_t n, const int *fds, unsigned nfds) {
        char cmsg[CMSG_SPACE(sizeof(int) * 2)] = { 0 };
        struct iovec iov = { (void *)p, n };
        struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1 };
        if (nfds) {
                mh.msg_control = cmsg;
                mh.msg_controllen = CMSG_SPACE(sizeof(int) * nfds);
                struct cmsghdr *c = CMSG_FIRSTHDR(&mh);
                c->cmsg_level = SOL_SOCKET;
                c->cmsg_type = SCM_RIGHTS;
                c->cmsg_len = CMSG_LEN(sizeof(int) * nfds);
                memcpy(CMSG_DATA(c), fds, sizeof(int) * nfds);
        }
        /* Non-blocking: a full socket (hbgd behind) drops the record, which
         * is what a client that floods gets anyway. */
        (void)sendmsg(sock, &mh, MSG_DONTWAIT | MSG_NOSIGNAL);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        struct hbgd *d = the_daemon();
        unsigned conns_before = d->n_conns;
        uint64_t memory_before = d->acct.memory;
        int sv[2];
        if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0, sv) < 0)
                abort();
        conn_accept(d, sv[1]);

        size_t pos = 0;
        int doorbell = -1;
        for (unsigned r = 0; r < MAX_RECORDS && pos + 3 <= size; r++) {
                unsigned ctl = data[pos];
                size_t len = (size_t)data[pos + 1] | (size_t)data[pos + 2] << 8;
                pos += 3;
                if (len > size - pos)
                        len = size - pos;
                const uint8_t *rec = data + pos;
                pos += len;
                int fds[2] = { -1, -1 };
                unsigned nfds = make_fds(ctl & 7, data, size, &pos, fds);
                if (ctl & 16)
                        for (int64_t until = clock_now_ms() + DOORBELL_WAIT_MS; doorbell < 0 && clock_now_ms() < until;) {
                                bool building = session_building(d);
                                io_loop_run_once(d->loop, building ? 5 : 0);
                                conn_free_dead(d);
                                drain_replies(sv[0], &doorbell);
                                /* Not building before nor after this turn
                                 * (which may have read the request): none
                                 * to wait for. */
                                if (!building && !session_building(d))
                                        break;
                        }
                if (!(ctl & 16))
                        send_record(sv[0], rec, len, fds, nfds);
                else if (doorbell >= 0)
                        send_record(doorbell, rec, len, fds, nfds);
                for (unsigned k = 0; k < nfds; k++)
                        close(fds[k]);
                if (ctl & 8) {
                        turn(d);
                        drain_replies(sv[0], &doorbell);
                }
        }
        turn(d);
        drain_replies(sv[0], &doorbell);
        if (doorbell >= 0)
                close(doorbell);
        close(sv[0]);

        /* hbgd sees the close, ends the session; the engine lets go of the
         * ring; the 100 ms tick frees it and refunds its memory. */
        int64_t deadline = clock_now_ms() + SETTLE_MS;
        while (d->n_conns != conns_before || d->acct.memory != memory_before) {
                if (clock_now_ms() > deadline) {
                        fprintf(stderr, "after %d ms: %u connections (%u before), %llu bytes charged "
                                "(%llu before)\n", SETTLE_MS, d->n_conns, conns_before,
                                (unsigned long long)d->acct.memory, (unsigned long long)memory_before);
                        abort();
                }
                io_loop_run_once(d->loop, 5);
                conn_free_dead(d);
        }
        return 0;
}

/* ------------------------------------------------------------ seeds */

struct seed {
        uint8_t buf[8192];
        size_t n;
};

static void put_env(struct seed *s, unsigned ctl, const Hbg__Envelope *env) {
        size_t len = protobuf_c_message_get_packed_size(&env->base);
        if (s->n + 3 + len > sizeof(s->buf))
                abort();
        s->buf[s->n++] = (uint8_t)ctl;
        s->buf[s->n++] = (uint8_t)len;
        s->buf[s->n++] = (uint8_t)(len >> 8);
        protobuf_c_message_pack(&env->base, s->buf + s->n);
        s->n += len;
}

static void put_raw(struct seed *s, unsigned ctl, const void *p, size_t len) {
        if (s->n + 3 + len > sizeof(s->buf))
                abort();
        s->buf[s->n++] = (uint8_t)ctl;
        s->buf[s->n++] = (uint8_t)len;
        s->buf[s->n++] = (uint8_t)(len >> 8);
        if (len)
                memcpy(s->buf + s->n, p, len);
        s->n += len;
}

static void hello(struct seed *s, unsigned major) {
        Hbg__Hello h = HBG__HELLO__INIT;
        h.version_major = major;
        h.version_minor = HBG_PROTO_MINOR;
        h.name = (char *)"fuzz";
        Hbg__Envelope e = HBG__ENVELOPE__INIT;
        e.msg_case = HBG__ENVELOPE__MSG_HELLO;
        e.hello = &h;
        put_env(s, 8, &e);
}

/* A session request with a stall limit and the digest of the kernel
 * table the client has (hbgd's reply then carries none,
 * kernels_by_digest); 0 for either: none. */
static void session_full(struct seed *s, uint64_t window, uint64_t heap, uint64_t stall_ms, uint64_t digest) {
        Hbg__SessionRequest r = HBG__SESSION_REQUEST__INIT;
        r.task_window = window;
        r.heap_size = heap;
        r.stall_timeout_ms = stall_ms;
        r.kernels_digest = digest;
        Hbg__Envelope e = HBG__ENVELOPE__INIT;
        e.msg_case = HBG__ENVELOPE__MSG_SESSION_REQUEST;
        e.session_request = &r;
        put_env(s, 8, &e);
}

static void session(struct seed *s, uint64_t window, uint64_t heap) {
        session_full(s, window, heap, 0, 0);
}

/* A status request; fd_kind (ctl & 7) attaches an fd it must not carry. */
static void status(struct seed *s, Hbg__StatusKind kind, unsigned fd_kind) {
        Hbg__StatusRequest r = HBG__STATUS_REQUEST__INIT;
        r.kind = kind;
        Hbg__Envelope e = HBG__ENVELOPE__INIT;
        e.msg_case = HBG__ENVELOPE__MSG_STATUS_REQUEST;
        e.status_request = &r;
        put_env(s, 8 | fd_kind, &e);
}

/* A recording of n dummy tasks, each depending on the one before. */
static void record(struct seed *s, unsigned ctl, uint64_t tasks, unsigned n) {
        Hbg__RecordRequest r = HBG__RECORD_REQUEST__INIT;
        r.tasks = tasks;
        Hbg__Envelope e = HBG__ENVELOPE__INIT;
        e.msg_case = HBG__ENVELOPE__MSG_RECORD_REQUEST;
        e.record_request = &r;
        put_env(s, ctl, &e);
        size_t bytes = n * sizeof(struct hbg_recorded_task);
        if (s->n + 2 + bytes > sizeof(s->buf))
                abort();
        s->buf[s->n++] = (uint8_t)bytes;
        s->buf[s->n++] = (uint8_t)(bytes >> 8);
        for (unsigned i = 0; i < n; i++) {
                struct hbg_recorded_task t = { 0 };
                t.desc.id = i + 1;
                t.desc.block_num = 1;
                t.desc.n_fanins = 1;
                t.desc.fanins_inline[0] = i; /* 0: the launch's gate */
                memcpy(s->buf + s->n, &t, sizeof(t));
                s->n += sizeof(t);
        }
}

int fuzz_write_seeds(const char *dir) {
        struct seed s;
        int err = 0;
#define SEED(name, ...)                                                   \
        do {                                                              \
                s.n = 0;                                                  \
                __VA_ARGS__;                                              \
                if (!err)                                                 \
                        err = fuzz_seed(dir, name, s.buf, s.n);           \
        } while (0)
        SEED("hello", hello(&s, HBG_PROTO_MAJOR));
        SEED("hello_wrong_major", hello(&s, HBG_PROTO_MAJOR + 1));
        SEED("hello_twice", hello(&s, HBG_PROTO_MAJOR); hello(&s, HBG_PROTO_MAJOR));
        SEED("session_before_hello", session(&s, 0, 0));
        SEED("session", hello(&s, HBG_PROTO_MAJOR); session(&s, 64, 65536));
        SEED("session_twice", hello(&s, HBG_PROTO_MAJOR); session(&s, 64, 65536); session(&s, 64, 65536));
        SEED("session_too_big", hello(&s, HBG_PROTO_MAJOR); session(&s, UINT64_C(1) << 40, 3));
        SEED("session_stall", hello(&s, HBG_PROTO_MAJOR); session_full(&s, 64, 65536, 200, 0));
        SEED("session_kernels_by_digest", hello(&s, HBG_PROTO_MAJOR);
             session_full(&s, 64, 65536, 0, kernel_table_builtin_digest()));
        SEED("session_stall_too_big", hello(&s, HBG_PROTO_MAJOR); session_full(&s, 64, 65536, UINT64_MAX, 0));
        SEED("status_all", hello(&s, HBG_PROTO_MAJOR); status(&s, HBG__STATUS_KIND__STATUS_DAEMON, 0);
             status(&s, HBG__STATUS_KIND__STATUS_THREADS, 0); status(&s, HBG__STATUS_KIND__STATUS_SESSIONS, 0);
             status(&s, HBG__STATUS_KIND__STATUS_GRAPHS, 0); status(&s, HBG__STATUS_KIND__STATUS_KERNELS, 0));
        SEED("record", hello(&s, HBG_PROTO_MAJOR); session(&s, 64, 65536); record(&s, 8 | 1, 3, 3));
        SEED("record_unsealed", hello(&s, HBG_PROTO_MAJOR); session(&s, 64, 65536); record(&s, 8 | 2, 3, 3));
        SEED("record_two_fds", hello(&s, HBG_PROTO_MAJOR); session(&s, 64, 65536); record(&s, 8 | 7, 3, 3));
        SEED("record_wrong_count", hello(&s, HBG_PROTO_MAJOR); session(&s, 64, 65536); record(&s, 8 | 1, 4, 3));
        SEED("record_no_session", hello(&s, HBG_PROTO_MAJOR); record(&s, 8 | 1, 1, 1));
        SEED("status_with_eventfd", hello(&s, HBG_PROTO_MAJOR); status(&s, HBG__STATUS_KIND__STATUS_DAEMON, 3));
        SEED("status_with_socket", hello(&s, HBG_PROTO_MAJOR); status(&s, HBG__STATUS_KIND__STATUS_DAEMON, 6));
        /* Doorbells: rung with one byte, with a datagram of 300 and one
         * of none, with an eventfd and with two memfds in flight. */
        static const uint8_t ring[300] = { 1 };
        SEED("doorbell", hello(&s, HBG_PROTO_MAJOR); session(&s, 256, 65536); put_raw(&s, 16 | 8, ring, 1));
        SEED("doorbell_sizes", hello(&s, HBG_PROTO_MAJOR); session(&s, 256, 65536); put_raw(&s, 16, ring, 300);
             put_raw(&s, 16, NULL, 0); put_raw(&s, 16 | 8, ring, 1));
        SEED("doorbell_with_fds", hello(&s, HBG_PROTO_MAJOR); session(&s, 256, 65536);
             put_raw(&s, 16 | 8 | 3, ring, 1); put_raw(&s, 16 | 8 | 7, ring, 1);
             s.buf[s.n++] = 1; s.buf[s.n++] = 0; s.buf[s.n++] = 0xaa);
        static const uint8_t garbage[] = { 0xff, 0xff, 0xff, 0xff, 0x0f, 0x08, 0x01, 0x12 };
        SEED("garbage", put_raw(&s, 8, garbage, sizeof(garbage)));
        SEED("empty_record", hello(&s, HBG_PROTO_MAJOR); put_raw(&s, 8, NULL, 0));
#undef SEED
        return err;
}
