/* SPDX-License-Identifier: MIT */
/* A connection's replies and a request handler's verdict (daemon/conn_reply.c). */
#pragma once

#include <stddef.h>

#include "proto/wire.h"

struct conn;

/* A handler's verdict when it cannot go on: close with this reason. */
struct verdict {
        int err;                       /* 0: carry on */
        const char *why;
};

static inline struct verdict verdict_ok(void) {
        return (struct verdict){ 0, NULL };
}

static inline struct verdict verdict_close(int err, const char *why) {
        return (struct verdict){ err, why };
}

/* Send one reply (at most max_msg bytes); a failure means the connection
 * must go. */
struct verdict conn_reply_within(struct conn *c, Hbg__Envelope *env, const int *fds, unsigned nfds, size_t max_msg);
/* The same within [limits] max_message_size. */
struct verdict conn_reply(struct conn *c, Hbg__Envelope *env, const int *fds, unsigned nfds);
/* An Error record: code and msg. A message too large is not a reason to
 * close; a client that does not read is. */
struct verdict conn_reply_error(struct conn *c, int code, const char *msg);
/* An admin request (or a trace) refused: told, and logged when it was not
 * allowed (-EPERM; rate limited per connection). Not a session refusal:
 * not counted. */
struct verdict conn_reply_refused(struct conn *c, int err, const char *msg);
