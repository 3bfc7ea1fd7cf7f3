/* SPDX-License-Identifier: MIT */
/*
 * hbgctl's requests that need no session of their own (daemon/tool_requests.h):
 * cancel and kill, allowed per request to root, admin_groups and the
 * session's own uid (docs/SECURITY.md); a dry run's validation on the
 * slow-work thread; the task timeline (tracing.c).
 */
#include "daemon/tool_requests.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <syslog.h>

#include "daemon/daemon_private.h"
#include "daemon/access.h"
#include "daemon/conn_close.h"
#include "daemon/log.h"
#include "daemon/tracing.h"
#include "daemon/validate_request.h"
#include "shm/layout.h"
#include "common/clock.h"
#include "daemon/engine/engine_stats.h"

static struct conn *find_session(struct hbgd *d, uint64_t id) {
        for (struct conn *x = d->conns; x; x = x->next)
                if (x->id == id && x->session)
                        return x;
        return NULL;
}

/* The session an admin request names (0: the asker's own), if the asker
 * may act on it: root, admin_groups, or its own uid (docs/SECURITY.md).
 * NULL with msg[] and *ret_err otherwise. */
static struct conn *admin_target(struct conn *c, uint64_t session_id, const char *verb, int *ret_err, char *msg,
                                 size_t size) {
        struct hbgd *d = c->d;
        struct conn *t = session_id ? find_session(d, session_id) : c->session ? c : NULL;
        enum access_role role = access_role(&d->cfg, c->sock, &c->cred);
        if (t && (role == ACCESS_ADMIN || t->cred.uid == c->cred.uid))
                return t;
        /* Whether a session the asker may not see exists is not said. */
        if (!t && (session_id == 0 || role != ACCESS_USER || d->cfg.visibility_all)) {
                *ret_err = -ENOENT;
                if (session_id)
                        snprintf(msg, size, "%s: no session %" PRIu64, verb, session_id);
                else
                        snprintf(msg, size, "%s: this connection has no session", verb);
                return NULL;
        }
        *ret_err = -EPERM;
        snprintf(msg, size, "%s: uid %u may not act on session %" PRIu64 ": only its own uid and [access] "
                 "admin_groups (and root) may", verb, (unsigned)c->cred.uid, session_id);
        return NULL;
}

static struct verdict send_admin_reply(struct conn *c, const char *text) {
        Hbg__AdminReply r = HBG__ADMIN_REPLY__INIT;
        r.message = (char *)text;
        Hbg__Envelope out = HBG__ENVELOPE__INIT;
        out.msg_case = HBG__ENVELOPE__MSG_ADMIN_REPLY;
        out.admin_reply = &r;
        return conn_reply(c, &out, NULL, 0);
}

/* hbgctl cancel SESSION GRAPH, hbg_graph_cancel(): the engine fails the
 * graph's unfinished tasks (RUNTIME_LOGIC §12.6). */
struct verdict tool_cancel(struct conn *c, const Hbg__Envelope *env, const int *fds) {
        (void)fds;
        const Hbg__CancelRequest *rq = env->cancel_request;
        char msg[256];
        int err;
        struct conn *t = admin_target(c, rq->session_id, "cancel", &err, msg, sizeof(msg));
        if (!t)
                return conn_reply_refused(c, err, msg);
        char why[HBG_GRAPH_MESSAGE_MAX];
        snprintf(why, sizeof(why), "cancelled by uid %u", (unsigned)c->cred.uid);
        err = ring_cancel_graph(t->session->ring, rq->graph, why);
        if (err < 0) {
                snprintf(msg, sizeof(msg), "cancel: graph %" PRIu64 " of session %" PRIu64 ": %s", rq->graph, t->id,
                         err == -ENOENT      ? "not live (finished, or not submitted)"
                         : err == -EALREADY  ? "cancelled already"
                         : err == -EBUSY     ? "8 cancels of this session are pending; try again"
                                             : "the session is stopping");
                return conn_reply_error(c, err, msg);
        }
        hbgd_log_session(LOG_NOTICE, t->log_limit,
                         "session %" PRIu64 " (pid %d uid %u): graph %" PRIu64 " cancelled by uid %u (pid %d)", t->id,
                         (int)t->cred.pid, (unsigned)t->cred.uid, rq->graph, (unsigned)c->cred.uid, (int)c->cred.pid);
        snprintf(msg, sizeof(msg), "graph %" PRIu64 " of session %" PRIu64 " cancelled", rq->graph, t->id);
        return send_admin_reply(c, msg);
}

/* hbgctl kill SESSION: the session's client reads Error{-ECONNRESET,
 * reason} and its unfinished graphs fail with that reason. */
struct verdict tool_kill(struct conn *c, const Hbg__Envelope *env, const int *fds) {
        (void)fds;
        const Hbg__KillRequest *rq = env->kill_request;
        char msg[256];
        int err;
        struct conn *t = admin_target(c, rq->session_id, "kill", &err, msg, sizeof(msg));
        if (!t)
                return conn_reply_refused(c, err, msg);
        char why[HBG_GRAPH_MESSAGE_MAX];
        snprintf(why, sizeof(why), "session %" PRIu64 " closed by uid %u (hbgctl kill)", t->id,
                 (unsigned)c->cred.uid);
        ring_set_stop_reason(t->session->ring, -ECONNRESET, why);
        /* Its last words first: the client reads them after the hang-up. */
        conn_reply_error(t, -ECONNRESET, why);
        if (t == c)
                return verdict_close(-ECONNRESET, why);
        conn_close(t, why);
        snprintf(msg, sizeof(msg), "session %" PRIu64 " closed", rq->session_id);
        return send_admin_reply(c, msg);
}

/* A validate-only request was checked (io thread): the reply, then the
 * connection's next requests. */
static void validate_done(struct slow_job *work) {
        struct conn *c = work->userdata;
        struct validate_job *j = c->validating;
        char msg[256];
        Hbg__ValidateReply r;
        c->validating = NULL;
        int err = validate_reply(j, &r, msg, sizeof(msg));
        struct verdict v;
        if (err < 0) {
                char full[300];
                snprintf(full, sizeof(full), "validate: %s", msg);
                v = conn_reply_error(c, err, full);
        } else {
                Hbg__Envelope out = HBG__ENVELOPE__INIT;
                out.msg_case = HBG__ENVELOPE__MSG_VALIDATE_REPLY;
                out.validate_reply = &r;
                v = conn_reply(c, &out, NULL, 0);
        }
        validate_free(j);
        if (v.err) {
                conn_close(c, v.why);
                return;
        }
        if (!c->session)
                c->deadline_ms = clock_now_ms() + c->d->cfg.handshake_timeout_ms;
        io_source_again(c->d->loop, c->src);
}

/* Validate tasks without a session, running or keeping nothing (a dry
 * run): on the slow-work thread, like a recording; the connection reads
 * nothing more until the reply (validate_done). A refusal is an Error;
 * the connection stays. */
struct verdict tool_validate(struct conn *c, const Hbg__Envelope *env, const int *fds) {
        char msg[256];
        const Hbg__ValidateRequest *rq = env->validate_request;
        struct validate_job *j;
        int err = validate_start(&j, c->d->engine, &c->d->cfg, c->cred.uid, fds[0], rq->first_task, rq->tasks,
                                 rq->task_window, rq->heap_size, msg, sizeof(msg));
        if (err < 0) {
                char full[300];
                snprintf(full, sizeof(full), "validate: %s", msg);
                return conn_reply_error(c, err, full);
        }
        struct slow_job *work = validate_job_work(j);
        work->done = validate_done;
        work->userdata = c;
        c->validating = j;
        slow_work_submit(c->d->slow, work);
        return verdict_ok();
}

/* The task timeline (tracing.c): who may trace what is decided per
 * request, like the admin requests'. */
struct verdict tool_trace(struct conn *c, const Hbg__Envelope *env, const int *fds) {
        (void)fds;
        int err = tracing_reply(c, env->trace_request);
        if (err == 0)
                return verdict_ok();
        return verdict_close(err, err == -EAGAIN ? "the client does not read its replies" : "disconnected");
}
