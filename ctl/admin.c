/* SPDX-License-Identifier: MIT */
/*
 * The admin verbs: `cancel SESSION GRAPH` and `kill SESSION`, one request
 * each through ctl_request(). hbgd decides who may (the session's own
 * uid, root, [access] admin_groups); a refusal exits 4 (EXIT_ACCESS).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

#include "ctl/ctl.h"
#include "ctl/admin.h"
#include "ctl/daemon_conn.h"
#include "ctl/error.h"
#include "ctl/output.h"

/* A session or graph number as `hbgctl sessions` / `graphs` print it:
 * 0, or -EINVAL with a message. */
static int parse_number(const char *s, const char *what, uint64_t min, uint64_t *ret) {
        char *end;
        errno = 0;
        unsigned long long v = strtoull(s, &end, 10);
        if (errno || end == s || *end || *s == '-' || v < min)
                return ctl_error(-EINVAL, "%s: '%s' is not a %s number (as `hbgctl %s` shows)", what, s,
                                 what, min ? "sessions" : "graphs");
        *ret = v;
        return 0;
}

static int print_done(Hbg__Envelope *reply) {
        const char *msg = reply->admin_reply->message ? reply->admin_reply->message : "";
        if (opt_json) {
                json_object *j = json_object_new_object();
                json_object_object_add(j, "message", json_object_new_string(msg));
                print_json(j);
                json_object_put(j);
        } else {
                char buf[1024];
                printf("%s\n", ctl_shown(msg, buf, sizeof(buf)));
        }
        wire_free(reply);
        return 0;
}

/* The admin request env: hbgd's answer printed, the exit status. */
static int request(const struct ctl_opts *o, Hbg__Envelope *env) {
        Hbg__Envelope *reply = NULL;
        struct ctl_failure fail;
        if (ctl_request(o->socket, env, HBG__ENVELOPE__MSG_ADMIN_REPLY, &reply, &fail) < 0)
                return ctl_exit_status(&fail);
        return print_done(reply);
}

int cmd_cancel(const struct ctl_opts *o, const char *session, const char *graph) {
        Hbg__CancelRequest rq = HBG__CANCEL_REQUEST__INIT;
        if (parse_number(session, "session", 1, &rq.session_id) || parse_number(graph, "graph", 0, &rq.graph))
                return EXIT_USAGE;
        Hbg__Envelope env = HBG__ENVELOPE__INIT;
        env.msg_case = HBG__ENVELOPE__MSG_CANCEL_REQUEST;
        env.cancel_request = &rq;
        return request(o, &env);
}

int cmd_kill(const struct ctl_opts *o, const char *session) {
        Hbg__KillRequest rq = HBG__KILL_REQUEST__INIT;
        if (parse_number(session, "session", 1, &rq.session_id))
                return EXIT_USAGE;
        Hbg__Envelope env = HBG__ENVELOPE__INIT;
        env.msg_case = HBG__ENVELOPE__MSG_KILL_REQUEST;
        env.kill_request = &rq;
        return request(o, &env);
}
