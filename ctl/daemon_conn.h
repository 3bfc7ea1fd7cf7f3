/* SPDX-License-Identifier: MIT */
/* Connecting to hbgd and one request/reply; what a failure's exit status
 * is (docs/man/hbgctl.1, EXIT STATUS). Failures are printed here (through
 * ctl_error(), with the fix of a refusal) and returned as negative errno
 * with the stage they happened at; the verbs turn them into exit statuses
 * with ctl_exit_status(). */
#pragma once

#include "proto/wire.h"

/* Where a request failed: with the errno, what decides its exit status. */
enum ctl_stage {
        CTL_AT_CONNECT,         /* connect(2): the socket's permission, nobody listening */
        CTL_AT_EXCHANGE,        /* sending, receiving: hbgd went away, a late or bad reply */
        CTL_AT_HBGD,            /* hbgd answered with an Error */
        CTL_AT_LIBRARY,         /* libhbgclient's hbg_connect() (run) */
};

struct ctl_failure {
        enum ctl_stage at;
        int err;                /* negative errno */
        char message[320];      /* at CTL_AT_HBGD: hbgd's own words, else "" */
};

/* How long a reply may take unless the request says otherwise. */
#define CTL_REPLY_TIMEOUT_MS 10000

/* The exit status of a failure: a refusal of hbgd's by its code (4 for
 * [access] and admin refusals, 3 when stopping), the socket's permission
 * 4, nobody listening or hbgd gone 3, a socket path too long 2, else 1. */
int ctl_exit_status(const struct ctl_failure *f);

/* A connected control socket, or the negative errno of the connection
 * (at CTL_AT_CONNECT), its message printed: for a permission error the
 * socket's and its directory's owner and mode, and the fix. */
int ctl_connect(const char *path);
/* Send one envelope (with send_fd, unless it is -1), receive one within
 * timeout_ms into *ret (wire_free() it): 0, or a negative errno after a
 * printed error (hbgd's refusal with its fix) with *ret_fail set. */
int ctl_roundtrip(int fd, Hbg__Envelope *env, int send_fd, int timeout_ms, Hbg__Envelope **ret,
                  struct ctl_failure *ret_fail);
/* Every conversation with hbgd starts here: connect and say hello. The
 * connected socket, hbgd's protocol minor in *ret_minor (may be NULL);
 * or a negative errno after a printed message, *ret_fail set. */
int ctl_open(const char *path, uint32_t *ret_minor, struct ctl_failure *ret_fail);
/* The one request path of every verb: ctl_open(), request rq, its
 * reply into *ret if it is of case `want`. 0, or a negative errno after a
 * printed message (hbgd's Error with its fix), *ret_fail set. */
int ctl_request(const char *path, Hbg__Envelope *rq, Hbg__Envelope__MsgCase want, Hbg__Envelope **ret,
                struct ctl_failure *ret_fail);
/* ctl_request() of one StatusRequest of `kind`: its StatusReply. */
int ctl_status(const char *path, Hbg__StatusKind kind, Hbg__Envelope **ret, struct ctl_failure *ret_fail);
/* hbg_connect() failed with err (its message printed): print the fix if
 * it is a refusal by hbgd. */
void ctl_explain_refusal(int err, const char *msg);
