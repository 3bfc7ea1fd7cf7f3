/* SPDX-License-Identifier: MIT */
/* Raw protocol records for the end-to-end tests: tests/e2e/raw_proto.h. */
#include "tests/e2e/raw_proto.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "proto/wire.h"
#include "tests/e2e/e2e_util.h"

int raw_connect(const char *path) {
        struct sockaddr_un sa = { .sun_family = AF_UNIX };
        ck_assert_uint_lt(strlen(path), sizeof(sa.sun_path));
        memcpy(sa.sun_path, path, strlen(path) + 1);
        int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
        ck_assert_int_ge(fd, 0);
        ck_assert_msg(connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0, "connect %s: %s", path,
                      strerror(errno));
        return fd;
}

/* One record of len bytes with nfds fds (SCM_RIGHTS). 0 or -errno. */
int raw_send(int fd, const void *buf, size_t len, const int *fds, unsigned nfds) {
        union {
                char buf[CMSG_SPACE(sizeof(int) * RAW_MAX_FDS)];
                struct cmsghdr align;
        } control;
        struct iovec iov = { .iov_base = (void *)(uintptr_t)buf, .iov_len = len };
        struct msghdr msg = { .msg_iov = &iov, .msg_iovlen = 1 };
        ck_assert_uint_le(nfds, RAW_MAX_FDS);
        if (nfds) {
                memset(&control, 0, sizeof(control));
                msg.msg_control = control.buf;
                msg.msg_controllen = CMSG_SPACE(sizeof(int) * nfds);
                struct cmsghdr *c = CMSG_FIRSTHDR(&msg);
                c->cmsg_level = SOL_SOCKET;
                c->cmsg_type = SCM_RIGHTS;
                c->cmsg_len = CMSG_LEN(sizeof(int) * nfds);
                memcpy(CMSG_DATA(c), fds, sizeof(int) * nfds);
        }
        ssize_t n;
        do
                n = sendmsg(fd, &msg, MSG_NOSIGNAL);
        while (n < 0 && errno == EINTR);
        if (n < 0)
                return -errno;
        return (size_t)n == len ? 0 : -EIO;
}

/* Pack env (into a malloc'd buffer the caller frees). */
uint8_t *pack_env(const Hbg__Envelope *env, size_t *len) {
        *len = hbg__envelope__get_packed_size(env);
        uint8_t *buf = malloc(*len ? *len : 1);
        ck_assert_ptr_nonnull(buf);
        hbg__envelope__pack(env, buf);
        return buf;
}

void send_env(int fd, const Hbg__Envelope *env, const int *fds, unsigned nfds) {
        size_t len;
        uint8_t *buf = pack_env(env, &len);
        int err = raw_send(fd, buf, len, fds, nfds);
        free(buf);
        ck_assert_msg(err == 0, "sendmsg: %s", strerror(-err));
}

void send_hello(int fd, uint32_t major, const int *fds, unsigned nfds) {
        send_hello_minor(fd, major, HBG_PROTO_MINOR, fds, nfds);
}

void send_hello_minor(int fd, uint32_t major, uint32_t minor, const int *fds, unsigned nfds) {
        Hbg__Hello h = HBG__HELLO__INIT;
        Hbg__Envelope env = HBG__ENVELOPE__INIT;
        h.version_major = major;
        h.version_minor = minor;
        h.name = (char *)"e2e-raw";
        env.msg_case = HBG__ENVELOPE__MSG_HELLO;
        env.hello = &h;
        send_env(fd, &env, fds, nfds);
}

void send_status_request(int fd, Hbg__StatusKind kind, const int *fds, unsigned nfds) {
        Hbg__StatusRequest rq = HBG__STATUS_REQUEST__INIT;
        Hbg__Envelope env = HBG__ENVELOPE__INIT;
        rq.kind = kind;
        env.msg_case = HBG__ENVELOPE__MSG_STATUS_REQUEST;
        env.status_request = &rq;
        send_env(fd, &env, fds, nfds);
}

void send_record_request(int fd, uint64_t tasks, const int *fds, unsigned nfds) {
        Hbg__RecordRequest rq = HBG__RECORD_REQUEST__INIT;
        Hbg__Envelope env = HBG__ENVELOPE__INIT;
        rq.tasks = tasks;
        env.msg_case = HBG__ENVELOPE__MSG_RECORD_REQUEST;
        env.record_request = &rq;
        send_env(fd, &env, fds, nfds);
}

/*
 * Next record, EOF or timeout. A peer closing with our data unread makes
 * the kernel report ECONNRESET once before the records still queued:
 * noted and read past, so an Error sent before the close is not lost.
 */
void rx(int fd, int timeout_ms, struct rx *r) {
        static uint8_t buf[256 * 1024];
        long long deadline = daemon_now_ms() + timeout_ms;
        memset(r, 0, sizeof(*r));
        for (;;) {
                union {
                        char buf[CMSG_SPACE(sizeof(int) * RAW_MAX_FDS)];
                        struct cmsghdr align;
                } control;
                struct iovec iov = { .iov_base = buf, .iov_len = sizeof(buf) };
                struct msghdr msg = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = control.buf,
                                      .msg_controllen = sizeof(control.buf) };
                ssize_t n = recvmsg(fd, &msg, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
                if (n < 0 && errno == ECONNRESET) {
                        r->reset = true;
                        continue;
                }
                if (n < 0 && (errno == EAGAIN || errno == EINTR)) {
                        long long left = deadline - daemon_now_ms();
                        if (left <= 0) {
                                r->kind = RX_TIMEOUT;
                                return;
                        }
                        struct pollfd p = { .fd = fd, .events = POLLIN };
                        poll(&p, 1, (int)left);
                        continue;
                }
                ck_assert_msg(n >= 0, "recvmsg: %s", strerror(errno));
                for (struct cmsghdr *c = CMSG_FIRSTHDR(&msg); c; c = CMSG_NXTHDR(&msg, c)) {
                        if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
                                continue;
                        size_t k = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
                        for (size_t i = 0; i < k && r->nfds < RAW_MAX_FDS; i++)
                                memcpy(&r->fds[r->nfds++], CMSG_DATA(c) + i * sizeof(int), sizeof(int));
                }
                if (n == 0 && r->nfds == 0) {
                        r->kind = RX_EOF;
                        return;
                }
                ck_assert_msg(!(msg.msg_flags & (MSG_TRUNC | MSG_CTRUNC)), "record from hbgd truncated");
                r->kind = RX_RECORD;
                r->len = (size_t)n;
                r->env = wire_unpack(buf, (size_t)n);
                return;
        }
}

void rx_free(struct rx *r) {
        if (r->env)
                wire_free(r->env);
        r->env = NULL;
}

/* The next record must be an envelope of this case (not an Error). */
Hbg__Envelope *expect_env(int fd, Hbg__Envelope__MsgCase want, int *fds, unsigned want_fds) {
        struct rx r;
        rx(fd, IO_MS, &r);
        ck_assert_msg(r.kind == RX_RECORD, "no reply from hbgd (%s)", r.kind == RX_EOF ? "EOF" : "timeout");
        ck_assert_msg(r.env, "hbgd's reply (%zu bytes) does not unpack", r.len);
        if (r.env->msg_case == HBG__ENVELOPE__MSG_ERROR)
                ck_abort_msg("hbgd answered Error %d: %s", r.env->error->code,
                             r.env->error->message ? r.env->error->message : "");
        ck_assert_int_eq(r.env->msg_case, want);
        ck_assert_uint_eq(r.nfds, want_fds);
        if (fds)
                memcpy(fds, r.fds, want_fds * sizeof(int));
        return r.env;
}

Hbg__Envelope *session_by_hand(int sock, int fds[SESSION_FDS]) {
        ck_assert_int_eq(cx_send(sock, HBG__ENVELOPE__MSG_SESSION_REQUEST, 0, 0), 0);
        return expect_env(sock, HBG__ENVELOPE__MSG_SESSION_REPLY, fds, SESSION_FDS);
}

Hbg__StatusReply *status_reply(int fd, Hbg__StatusKind kind, Hbg__Envelope **env) {
        send_status_request(fd, kind, NULL, 0);
        *env = expect_env(fd, HBG__ENVELOPE__MSG_STATUS_REPLY, NULL, 0);
        ck_assert_ptr_nonnull((*env)->status_reply->daemon);
        return (*env)->status_reply;
}

/* hbgd must answer Error{code} (or, with CLOSE_EOF_ONLY_OK, nothing) and
 * close the connection. */
void expect_error_stays(struct hbgd_proc *d, int fd, int code, const char *needle, const char *what) {
        struct rx r;
        rx(fd, 20000, &r);
        D_ASSERT(d, r.kind == RX_RECORD && r.env && r.env->msg_case == HBG__ENVELOPE__MSG_ERROR,
                 "%s: no Error from hbgd (%s)", what,
                 r.kind == RX_EOF ? "EOF" : r.kind == RX_TIMEOUT ? "timeout" : "another record");
        const char *msg = r.env->error->message ? r.env->error->message : "";
        D_ASSERT(d, r.env->error->code == code && strstr(msg, needle), "%s: Error %d \"%s\", want %d naming \"%s\"",
                 what, r.env->error->code, msg, code, needle);
        rx_free(&r);
}

void expect_refusal(struct hbgd_proc *d, int fd, int code, int required, const char *what) {
        struct rx r;
        bool got_error = false;
        rx(fd, IO_MS, &r);
        if (r.kind == RX_RECORD) {
                D_ASSERT(d, r.env, "%s: hbgd's reply does not unpack", what);
                D_ASSERT(d, r.env->msg_case == HBG__ENVELOPE__MSG_ERROR, "%s: hbgd answered message %d, not Error",
                         what, (int)r.env->msg_case);
                int got = r.env->error->code;
                char text[200];
                snprintf(text, sizeof(text), "%s", r.env->error->message ? r.env->error->message : "");
                rx_free(&r);
                D_ASSERT(d, got == code, "%s: Error code %d (%s: \"%s\"), expected %d (%s)", what, got,
                         strerror(-got), text, code, strerror(-code));
                D_ASSERT(d, text[0], "%s: Error %d without a message", what, got);
                D_ASSERT(d, r.nfds == 0, "%s: hbgd sent fds with its Error", what);
                got_error = true;
                rx(fd, IO_MS, &r);
        }
        D_ASSERT(d, r.kind == RX_EOF, "%s: hbgd did not close the connection (%s)", what,
                 r.kind == RX_TIMEOUT ? "still open" : "another record came");
        D_ASSERT(d, got_error || !required, "%s: hbgd closed without an Error{%d} reply", what, code);
        if (!got_error)
                fprintf(stderr, "%s: hbgd closed the connection without an Error\n", what);
}

void raw_hello(int fd) {
        send_hello(fd, HBG_PROTO_MAJOR, NULL, 0);
        Hbg__Envelope *e = expect_env(fd, HBG__ENVELOPE__MSG_HELLO, NULL, 0);
        ck_assert_uint_eq(e->hello->version_major, HBG_PROTO_MAJOR);
        ck_assert_ptr_nonnull(e->hello->name);
        ck_assert_msg(strncmp(e->hello->name, "hbgd ", 5) == 0, "hbgd's hello name is \"%s\"", e->hello->name);
        wire_free(e);
}

int cx_connect(const char *path, bool nonblock) {
        struct sockaddr_un sa = { .sun_family = AF_UNIX };
        if (strlen(path) >= sizeof(sa.sun_path))
                return -ENAMETOOLONG;
        memcpy(sa.sun_path, path, strlen(path) + 1);
        int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | (nonblock ? SOCK_NONBLOCK : 0), 0);
        if (fd < 0)
                return -errno;
        if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
                int err = -errno;
                close(fd);
                return err;
        }
        return fd;
}

/* Non-blocking connects, retried while the backlog is full. */
int cx_connect_until(const char *path, long long deadline_ms) {
        for (;;) {
                int fd = cx_connect(path, true);
                if (fd != -EAGAIN || daemon_now_ms() >= deadline_ms)
                        return fd;
                sleep_us(1000);
        }
}

int cx_send(int fd, Hbg__Envelope__MsgCase what, uint64_t task_window, uint64_t heap_size) {
        Hbg__Envelope env = HBG__ENVELOPE__INIT;
        Hbg__Hello h = HBG__HELLO__INIT;
        Hbg__SessionRequest sr = HBG__SESSION_REQUEST__INIT;
        Hbg__StatusRequest st = HBG__STATUS_REQUEST__INIT;
        env.msg_case = what;
        if (what == HBG__ENVELOPE__MSG_HELLO) {
                h.version_major = HBG_PROTO_MAJOR;
                h.version_minor = HBG_PROTO_MINOR;
                h.name = (char *)"e2e-hostile";
                env.hello = &h;
        } else if (what == HBG__ENVELOPE__MSG_SESSION_REQUEST) {
                sr.task_window = task_window;
                sr.heap_size = heap_size;
                env.session_request = &sr;
        } else {
                st.kind = HBG__STATUS_KIND__STATUS_DAEMON;
                env.status_request = &st;
        }
        return wire_send(fd, &env, NULL, 0, HBG_WIRE_MAX_MSG_DEFAULT);
}

/* The next record within timeout_ms (fds it carries are closed): 0 and
 * *ret; -ECONNRESET at EOF; -ETIMEDOUT. A reset reported before records
 * still queued is read past (see rx()). */
int cx_recv(int fd, int timeout_ms, Hbg__Envelope **ret) {
        long long deadline = daemon_now_ms() + timeout_ms;
        bool reset = false;
        for (;;) {
                int fds[HBG_WIRE_MAX_FDS];
                unsigned nfds = 0;
                int err = wire_recv(fd, HBG_WIRE_MAX_MSG_DEFAULT, ret, fds, HBG_WIRE_MAX_FDS, &nfds);
                if (err == 0) {
                        for (unsigned i = 0; i < nfds; i++)
                                close(fds[i]);
                        return 0;
                }
                if (err == -ECONNRESET && !reset) {
                        reset = true;
                        continue;
                }
                if (err != -EAGAIN)
                        return err;
                long long left = deadline - daemon_now_ms();
                if (left <= 0)
                        return -ETIMEDOUT;
                struct pollfd p = { .fd = fd, .events = POLLIN };
                poll(&p, 1, (int)left);
        }
}

/* The next record must be `want`; 0, or -1 with why[] filled. */
int cx_expect(int fd, Hbg__Envelope__MsgCase want, int timeout_ms, char *why, size_t size) {
        Hbg__Envelope *env = NULL;
        int err = cx_recv(fd, timeout_ms, &env);
        if (err < 0) {
                snprintf(why, size, "no reply: %s", err == -ECONNRESET ? "EOF" : strerror(-err));
                return -1;
        }
        int r = 0;
        if (env->msg_case == HBG__ENVELOPE__MSG_ERROR) {
                snprintf(why, size, "Error %d (%s): %s", env->error->code, strerror(-env->error->code),
                         env->error->message ? env->error->message : "");
                r = -1;
        } else if (env->msg_case != want) {
                snprintf(why, size, "message %d instead of %d", (int)env->msg_case, (int)want);
                r = -1;
        }
        wire_free(env);
        return r;
}

/* Error{code} with a message containing `needle`, then EOF. 0 or -1. */
int cx_expect_refusal(int fd, int code, const char *needle, int timeout_ms, char *why, size_t size) {
        Hbg__Envelope *env = NULL;
        int err = cx_recv(fd, timeout_ms, &env);
        if (err < 0) {
                snprintf(why, size, "no Error{%d} before %s", code, err == -ECONNRESET ? "EOF" : "the timeout");
                return -1;
        }
        if (env->msg_case != HBG__ENVELOPE__MSG_ERROR) {
                snprintf(why, size, "message %d instead of Error{%d}", (int)env->msg_case, code);
                wire_free(env);
                return -1;
        }
        const char *msg = env->error->message ? env->error->message : "";
        int got = env->error->code, r = 0;
        if (got != code || !strstr(msg, needle)) {
                snprintf(why, size, "Error %d \"%s\", expected %d naming %s", got, msg, code, needle);
                r = -1;
        } else {
                snprintf(why, size, "%s", msg);
        }
        wire_free(env);
        if (r == 0 && (err = cx_recv(fd, timeout_ms, &env)) != -ECONNRESET) {
                if (err == 0)
                        wire_free(env);
                snprintf(why, size, "the connection stayed open after Error{%d}", code);
                r = -1;
        }
        return r;
}

/* n non-blocking connections (those refused are counted): how many are open. */
int open_many(const char *path, int *fds, unsigned n, unsigned *ret_refused) {
        unsigned opened = 0, refused = 0;
        for (unsigned i = 0; i < n; i++) {
                int fd = cx_connect(path, true);
                if (fd >= 0)
                        fds[opened++] = fd;
                else
                        refused++;
        }
        *ret_refused = refused;
        return (int)opened;
}
