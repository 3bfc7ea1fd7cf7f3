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

int wire_recv(int sock, size_t max_msg, Hbg__Envelope **ret_env, int *fds, unsigned max_fds,
              unsigned *ret_nfds) {
        /* One byte more than allowed: a record that fills it is too long
         * even if the kernel did not flag MSG_TRUNC. */
        uint8_t *buf = malloc(max_msg + 1);
        if (!buf)
                return -ENOMEM;
        /* Room for more fds than we accept, so that "too many" is seen as
         * such (and closed) rather than as MSG_CTRUNC. */
        union {
                char buf[CMSG_SPACE(sizeof(int) * (HBG_WIRE_MAX_FDS + 4))];
                struct cmsghdr align;
        } control;
        struct iovec iov = { .iov_base = buf, .iov_len = max_msg + 1 };
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
                free(buf);
                return err == -EWOULDBLOCK ? -EAGAIN : err == -EPIPE ? -ECONNRESET : err;
        }

        /* Collect every fd first, so each error path below closes them. */
        int got[HBG_WIRE_MAX_FDS + 4];
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
                        if (ngot < HBG_WIRE_MAX_FDS + 4)
                                got[ngot++] = fd;
                        else
                                close(fd);
                }
        }
        int err = 0;
        if (n == 0 && ngot == 0)
                err = -ECONNRESET;
        else if (msg.msg_flags & MSG_CTRUNC)
                err = -EPROTO; /* fds were dropped by the kernel: never trust the rest */
        else if ((msg.msg_flags & MSG_TRUNC) || (size_t)n > max_msg)
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

void wire_free(Hbg__Envelope *env) {
        if (env)
                hbg__envelope__free_unpacked(env, NULL);
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
