/* SPDX-License-Identifier: MIT */
/* A connection's replies (daemon/conn_reply.h). */
#include "daemon/conn_reply.h"

#include <errno.h>

#include "daemon/daemon_private.h"

/* Send one reply; a failure means the connection must go. */
struct verdict conn_reply_within(struct conn *c, Hbg__Envelope *env, const int *fds, unsigned nfds, size_t max_msg) {
        int err = wire_send(c->sock, env, fds, nfds, max_msg);
        if (err == 0)
                return verdict_ok();
        if (err == -EAGAIN)
                return verdict_close(err, "the client does not read its replies");
        if (err == -EMSGSIZE)
                return verdict_close(err, "reply larger than max_message_size");
        return verdict_close(err, "disconnected");
}

struct verdict conn_reply(struct conn *c, Hbg__Envelope *env, const int *fds, unsigned nfds) {
        return conn_reply_within(c, env, fds, nfds, c->d->cfg.max_message);
}

struct verdict conn_reply_error(struct conn *c, int code, const char *msg) {
        int err = wire_send_error(c->sock, code, msg);
        if (err == 0 || err == -EMSGSIZE)
                return verdict_ok();
        return verdict_close(err, err == -EAGAIN ? "the client does not read its replies" : "disconnected");
}
