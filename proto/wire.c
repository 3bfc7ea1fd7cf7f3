/* SPDX-License-Identifier: MIT */
#include "proto/wire.h"

#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

int wire_send(int sock, const Hbg__Envelope *env, const int *fds, unsigned nfds, size_t max_msg) {
        size_t len = hbg__envelope__get_packed_size(env);
        if (len > max_msg || nfds > HBG_WIRE_MAX_FDS)
                return -EMSGSIZE;
        uint8_t *buf = malloc(len ? len : 1);
        if (!buf)
                return -ENOMEM;
        hbg__envelope__pack(env, buf);

        struct iovec iov = { .iov_base = buf, .iov_len = len };
        union {
                char buf[CMSG_SPACE(sizeof(int) * HBG_WIRE_MAX_FDS)];
                struct cmsghdr align;
        } control;
        struct msghdr msg = { .msg_iov = &iov, .msg_iovlen = 1 };
        if (nfds > 0) {
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
                n = sendmsg(sock, &msg, MSG_NOSIGNAL);
        while (n < 0 && errno == EINTR);
        int err = n < 0 ? -errno : 0;
        free(buf);
        if (err == 0 && (size_t)n != len)
                err = -EIO; /* a SEQPACKET record is sent whole or not at all */
        return err;
}

static void close_fds(int *fds, unsigned n) {
        for (unsigned i = 0; i < n; i++)
                if (fds[i] >= 0)
                        close(fds[i]);
}

/* Room for more fds than we accept, so that "too many" is seen as such
 * (and closed) rather than as MSG_CTRUNC. */
#define RECV_FDS (HBG_WIRE_MAX_FDS + 4)

/*
 * One recvmsg() of a record into buf (cap bytes), non-blocking, fds with
 * MSG_CMSG_CLOEXEC, every fd collected into got[] (beyond RECV_FDS closed
 * at once) so that each caller's error path can close them. Returns the
 * bytes read (the record's length is not told: MSG_TRUNC in *ret_flags),
 * or -EAGAIN, -ECONNRESET (for EPIPE too), -errno; *ret_bad_control: a
 * control message other than SCM_RIGHTS came.
 */
static ssize_t recv_record(int sock, void *buf, size_t cap, int got[static RECV_FDS], unsigned *ret_ngot,
                           bool *ret_bad_control, int *ret_flags) {
        union {
                char buf[CMSG_SPACE(sizeof(int) * RECV_FDS)];
                struct cmsghdr align;
        } control;
        struct iovec iov = { .iov_base = buf, .iov_len = cap };
        struct msghdr msg = {
                .msg_iov = &iov,
                .msg_iovlen = 1,
                .msg_control = control.buf,
                .msg_controllen = sizeof(control.buf),
        };
        ssize_t n;
        do
                n = recvmsg(sock, &msg, MSG_CMSG_CLOEXEC | MSG_DONTWAIT);
        while (n < 0 && errno == EINTR);
        if (n < 0) {
                int err = -errno;
                return err == -EWOULDBLOCK ? -EAGAIN : err == -EPIPE ? -ECONNRESET : err;
        }
        unsigned ngot = 0;
        bool bad_control = false;
        for (struct cmsghdr *c = CMSG_FIRSTHDR(&msg); c; c = CMSG_NXTHDR(&msg, c)) {
                if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) {
                        bad_control = true;
                        continue;
                }
                size_t k = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
                for (size_t i = 0; i < k; i++) {
                        int fd;
                        memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof(int));
                        if (ngot < RECV_FDS)
                                got[ngot++] = fd;
                        else
                                close(fd);
                }
        }
        *ret_ngot = ngot;
        *ret_bad_control = bad_control;
        *ret_flags = msg.msg_flags;
        return n;
}

int wire_recv(int sock, size_t max_msg, Hbg__Envelope **ret_env, int *fds, unsigned max_fds,
              unsigned *ret_nfds) {
        /* One byte more than allowed: a record that fills it is too long
         * even if the kernel did not flag MSG_TRUNC. */
        uint8_t *buf = malloc(max_msg + 1);
        if (!buf)
                return -ENOMEM;
        int got[RECV_FDS];
        unsigned ngot = 0;
        bool bad_control = false;
        int flags = 0;
        ssize_t n = recv_record(sock, buf, max_msg + 1, got, &ngot, &bad_control, &flags);
        if (n < 0) {
                free(buf);
                return (int)n;
        }
        int err = 0;
        if (n == 0 && ngot == 0)
                err = -ECONNRESET;
        else if (flags & MSG_CTRUNC)
                err = -EPROTO; /* fds were dropped by the kernel: never trust the rest */
        else if ((flags & MSG_TRUNC) || (size_t)n > max_msg)
                err = -EMSGSIZE;
        else if (bad_control || ngot > max_fds)
                err = -EPROTO;
        if (err < 0) {
                close_fds(got, ngot);
                free(buf);
                return err;
        }
        Hbg__Envelope *env = hbg__envelope__unpack(NULL, (size_t)n, buf);
        free(buf);
        if (!env || env->msg_case == HBG__ENVELOPE__MSG__NOT_SET) {
                if (env)
                        hbg__envelope__free_unpacked(env, NULL);
                close_fds(got, ngot);
                return -EPROTO;
        }
        memcpy(fds, got, ngot * sizeof(int));
        *ret_nfds = ngot;
        *ret_env = env;
        return 0;
}

int wire_discard(int sock) {
        /* A longer record is dropped whole (SOCK_SEQPACKET); fds beyond
         * the control buffer are closed by the kernel (MSG_CTRUNC). */
        char buf[256];
        int got[RECV_FDS];
        unsigned ngot = 0;
        bool bad_control = false;
        int flags = 0;
        ssize_t n = recv_record(sock, buf, sizeof(buf), got, &ngot, &bad_control, &flags);
        if (n < 0)
                return (int)n;
        close_fds(got, ngot);
        /* An empty record reads like the end. */
        return n == 0 && ngot == 0 && !(flags & MSG_TRUNC) ? 0 : 1;
}

void wire_free(Hbg__Envelope *env) {
        if (env)
                hbg__envelope__free_unpacked(env, NULL);
}

void wire_hello(Hbg__Envelope *env, Hbg__Hello *hello, const char *name) {
        *hello = (Hbg__Hello)HBG__HELLO__INIT;
        hello->version_major = HBG_PROTO_MAJOR;
        hello->version_minor = HBG_PROTO_MINOR;
        hello->name = (char *)name;
        *env = (Hbg__Envelope)HBG__ENVELOPE__INIT;
        env->msg_case = HBG__ENVELOPE__MSG_HELLO;
        env->hello = hello;
}

int wire_send_error(int sock, int code, const char *message) {
        Hbg__Error e = HBG__ERROR__INIT;
        Hbg__Envelope env = HBG__ENVELOPE__INIT;
        e.code = code;
        e.message = (char *)message;
        env.msg_case = HBG__ENVELOPE__MSG_ERROR;
        env.error = &e;
        return wire_send(sock, &env, NULL, 0, HBG_WIRE_MAX_MSG_DEFAULT);
}

int wire_recv_queued_error(int sock, Hbg__Envelope **ret_env) {
        /* Bounded: a reset is reported once; an end of stream every time. */
        for (unsigned i = 0; i < 4; i++) {
                Hbg__Envelope *env = NULL;
                int fds[HBG_WIRE_MAX_FDS];
                unsigned nfds = 0;
                int err = wire_recv(sock, HBG_WIRE_MAX_MSG_DEFAULT, &env, fds, 0, &nfds);
                if (err == 0 && env->msg_case == HBG__ENVELOPE__MSG_ERROR) {
                        *ret_env = env;
                        return 0;
                }
                if (err == 0)
                        wire_free(env);
                else if (err != -ECONNRESET && err != -EPROTO && err != -EMSGSIZE)
                        break; /* -EAGAIN: the peer is there and sent nothing more */
        }
        return -ENOMSG;
}
