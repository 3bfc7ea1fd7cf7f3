/* SPDX-License-Identifier: MIT */
/* A connection's replies (daemon/conn_reply.h). */
#include "daemon/conn_reply.h"

#include <errno.h>
#include <inttypes.h>
#include <syslog.h>

#include "daemon/daemon_private.h"
#include "daemon/log.h"

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

struct verdict conn_reply_refused(struct conn *c, int err, const char *msg) {
        if (err == -EPERM) {
                struct hbg_log_fields f = hbgd_log_limit_fields(c->log_limit);
                f.err = err;
                hbgd_log_fields(LOG_NOTICE, &f, "connection %" PRIu64 " (pid %d uid %u): refused: %s", c->id,
                                (int)c->cred.pid, (unsigned)c->cred.uid, msg);
        }
        return conn_reply_error(c, err, msg);
}
