/* SPDX-License-Identifier: MIT */
/*
 * Client connections: the control protocol (docs/PROTOCOL.md) on one
 * SOCK_SEQPACKET socket each, with the limits that keep one client from
 * hurting others (docs/SECURITY.md):
 *   - a connection is charged to its uid (max_connections[_per_uid]); a
 *     peer refused at accept ([access], those limits, hbgd stopping) is
 *     told why and let go by refusal.c;
 *   - until it has a session it must complete a request at least every
 *     handshake_timeout_ms, or it is closed;
 *   - at most requests_per_turn records are read per turn, then the other
 *     sources get theirs, and the loop comes back without a new event;
 *   - a reply that does not fit the socket (the client stopped reading)
 *     closes the connection: hbgd never waits for a client.
 * Handlers never close the connection themselves: they return an error and
 * the dispatcher closes it once, after which nothing touches it; the
 * memory is freed after the io round (no use after free however a handler
 * fails).
 */
#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <syslog.h>
#include <unistd.h>

#include "common/text.h"
#include "daemon/daemon_private.h"
#include "daemon/access.h"
#include "daemon/conn.h"
#include "daemon/conn_close.h"
#include "daemon/conn_reply.h"
#include "daemon/refusal.h"
#include "daemon/status.h"
#include "daemon/tick.h"
#include "daemon/tool_requests.h"
#include "daemon/kernel_rows.h"
#include "daemon/log.h"
#include "daemon/record.h"
#include "daemon/validate_request.h"
#include "proto/wire.h"
#include "shm/layout.h"
#include "common/clock.h"

/* ------------------------------------------------------------ handlers */

static struct verdict handle_hello(struct conn *c, const Hbg__Envelope *env, const int *fds) {
        (void)fds;
        const Hbg__Hello *h = env->hello;
        if (c->hello) {
                conn_reply_error(c, -EPROTO, "hello sent twice");
                return verdict_close(-EPROTO, "hello sent twice");
        }
        if (h->version_major != HBG_PROTO_MAJOR) {
                char msg[128];
                snprintf(msg, sizeof(msg), "protocol version %u not supported (hbgd speaks %u.%u)",
                         h->version_major, HBG_PROTO_MAJOR, HBG_PROTO_MINOR);
                conn_reply_error(c, -EPROTONOSUPPORT, msg);
                return verdict_close(-EPROTONOSUPPORT, "protocol version mismatch");
        }
        /* The name is the client's data: kept as valid UTF-8 (a proto3
         * string), cut on a character boundary; whoever shows it escapes
         * its controls (common/text.h). */
        text_copy_str(c->name, sizeof(c->name), h->name ? h->name : "", TEXT_UTF8);
        c->hello = true;
        c->client_minor = h->version_minor;
        Hbg__Hello reply;
        Hbg__Envelope out;
        wire_hello(&out, &reply, "hbgd " HBG_VERSION);
        return conn_reply(c, &out, NULL, 0);
}

static uint64_t pick(uint64_t asked, uint64_t dflt) {
        return asked ? asked : dflt;
}

/* A request refused for a limit: tell the client, log it (rate limited per
 * connection: a client may keep asking). The connection stays. */
static struct verdict refuse(struct conn *c, int err, const char *msg) {
        metrics_count_refusal(&c->d->counters, err);
        struct hbg_log_fields f = hbgd_log_limit_fields(c->log_limit);
        f.err = err;
        hbgd_log_fields(LOG_NOTICE, &f, "session %" PRIu64 " (pid %d uid %u): refused: %s", c->id, (int)c->cred.pid,
                        (unsigned)c->cred.uid, msg);
        return conn_reply_error(c, err, msg);
}

/* May c open a session now (one per connection, not a monitor, hbgd
 * not stopping)? false: *v is the refusal's verdict. */
static bool session_allowed(struct conn *c, struct verdict *v) {
        struct hbgd *d = c->d;
        char msg[256];
        /* Such a client's own check of the regions fails too, but older
         * ones say neither side's version; this message it shows. */
        if (c->client_minor < HBG_PROTO_MINOR_OLDEST_SESSION) {
                snprintf(msg, sizeof(msg), "a client of protocol %u.%u cannot use this hbgd's shared memory "
                         "(hbgd %s speaks protocol %u.%u, shared-memory layout %u): hbgd and libhbgclient "
                         "must come from the same release", HBG_PROTO_MAJOR, c->client_minor, HBG_VERSION,
                         HBG_PROTO_MAJOR, HBG_PROTO_MINOR, HBG_LAYOUT_VERSION);
                *v = refuse(c, -EPROTONOSUPPORT, msg);
                return false;
        }
        if (c->session) {
                *v = conn_reply_error(c, -EBUSY, "this connection already has a session");
                return false;
        }
        /* A monitor (the metrics exporter) asks, it does not run: unless
         * it is an admin too (docs/SECURITY.md, "Who sees what"). */
        if (access_role(&d->cfg, c->sock, &c->cred) == ACCESS_MONITOR) {
                snprintf(msg, sizeof(msg), "uid %u is in [access] monitor_groups: it may query status and "
                         "metrics, not open sessions", (unsigned)c->cred.uid);
                *v = refuse(c, -EACCES, msg);
                return false;
        }
        if (d->stopping) {
                metrics_count_refusal(&d->counters, -ESHUTDOWN);
                hbgd_log_session(LOG_DEBUG, c->log_limit, "session %" PRIu64 " (pid %d uid %u): refused: hbgd is "
                                 "shutting down", c->id, (int)c->cred.pid, (unsigned)c->cred.uid);
                *v = conn_reply_error(c, -ESHUTDOWN, "hbgd is shutting down");
                return false;
        }
        return true;
}

/* The session reply: the geometry, the four descriptors and hbgd's kernel
 * table. */
static struct verdict send_session_reply(struct conn *c, struct session *s, const struct hbg_geometry *g,
                                         uint64_t stall_ms) {
        Hbg__SessionReply r = HBG__SESSION_REPLY__INIT;
        r.session_id = c->id;
        r.task_window = g->task_window;
        r.flag_window = g->flag_window;
        r.heap_size = g->heap_size;
        r.mailbox_entries = g->mailbox_entries;
        r.graph_table_entries = g->graph_table_entries;
        r.sub_region_size = g->sub_region_size;
        r.cpl_region_size = g->cpl_region_size;
        r.first_id = s->first_id;
        /* With the wake page (protocol 1.5), which every client given a
         * session knows (HBG_PROTO_MINOR_OLDEST_SESSION). */
        unsigned nfds = HBG_WIRE_MAX_FDS;
        r.fds = nfds;
        r.stall_timeout_ms = stall_ms;
        /* hbgd's kernel table (protocol 1.3): the client validates and
         * names kernels with it. Packed once, at start; not sent to a
         * client that has it (its request gave the table's digest). */
        kernel_rows_attach(&c->d->kernel_reply, c->kernels_digest, &r);
        Hbg__Envelope out = HBG__ENVELOPE__INIT;
        out.msg_case = HBG__ENVELOPE__MSG_SESSION_REPLY;
        out.session_reply = &r;
        int fds[5];
        session_client_fds(s, fds);
        /* Sent within what every client reads, whatever max_message_size
         * says: the table is hbgd's own, not the client's, and hbgd checked
         * at start that it fits (docs/PROTOCOL.md, "The kernel table"). */
        return conn_reply_within(c, &out, fds, nfds, HBG_WIRE_SESSION_REPLY_MAX);
}

/* The session opened: its geometry and charge (and, at debug, the uid's
 * totals against the limits). */
static void log_session_opened(struct conn *c, const struct hbg_geometry *g, uint64_t memory, uint64_t stall_ms) {
        struct hbgd *d = c->d;
        const struct hbgd_config *cfg = &d->cfg;
        hbgd_log_session(LOG_INFO, c->log_limit,
                         "session %" PRIu64 " (pid %d uid %u, %s): D=%" PRIu64 " F=%" PRIu64
                         " heap=%" PRIu64 ", %" PRIu64 " MiB charged, weight %u (the uid's, shared by its sessions),"
                         " stall limit %" PRIu64 " ms",
                         c->id, (int)c->cred.pid, (unsigned)c->cred.uid, c->name, g->task_window,
                         g->flag_window, g->heap_size, (memory + (1u << 20) - 1) >> 20,
                         hbgd_config_session_weight(cfg, c->cred.uid), stall_ms);
        if (hbgd_log_enabled(LOG_DEBUG)) {
                const struct uid_usage *u = acct_user(&d->acct, c->cred.uid);
                hbgd_log_session(LOG_DEBUG, c->log_limit,
                                 "session %" PRIu64 ": geometry task_window %" PRIu64 ", flag_window %" PRIu64
                                 ", heap %" PRIu64 " bytes, mailbox %" PRIu64 " entries, graph table %" PRIu64
                                 " entries; submission region %" PRIu64 " bytes, completion region %" PRIu64
                                 " bytes; %" PRIu64 " bytes charged; uid %u holds %" PRIu64 " bytes in %u session%s"
                                 " (max_memory_per_uid %" PRIu64 "), all sessions %" PRIu64 " bytes (max_memory %"
                                 PRIu64 ")",
                                 c->id, g->task_window, g->flag_window, g->heap_size, g->mailbox_entries,
                                 g->graph_table_entries, g->sub_region_size, g->cpl_region_size, memory,
                                 (unsigned)c->cred.uid, u ? u->memory : 0, u ? u->sessions : 0,
                                 u && u->sessions == 1 ? "" : "s",
                                 acct_max_memory_per_uid(&cfg->limits), d->acct.memory,
                                 acct_max_memory(&cfg->limits));
        }
}

/* A session was built (io thread): start it and reply, or refuse; then
 * the connection's next requests. */
static void session_built(struct slow_job *work) {
        struct conn *c = work->userdata;
        struct hbgd *d = c->d;
        struct session *s = c->creating;
        const char *why = NULL;
        char msg[256];
        struct verdict v;
        c->creating = NULL;
        /* SIGTERM came while it was being built: no new session. */
        int err = d->stopping ? -ESHUTDOWN : session_start(s, &why);
        if (d->stopping)
                why = "hbgd is shutting down";
        if (err < 0) {
                conn_close_session(d, s, -ECONNRESET);
                snprintf(msg, sizeof(msg), "%s: %s", why, strerror(-err));
                v = refuse(c, err, msg);
        } else {
                c->session = s;
                c->deadline_ms = 0; /* a session may be idle as long as it likes */
                d->n_sessions++;
                d->counters.sessions_opened++;
                d->counters.sessions_set_up_inline += c->creating_inline;
                v = send_session_reply(c, s, &s->g, s->stall_timeout_ms);
                if (v.err == 0) {
                        /* The client has its own copies now (the mappings
                         * and our ends of the channels stay). */
                        session_client_fds_sent(s);
                        log_session_opened(c, &s->g, s->memory, s->stall_timeout_ms);
                        spare_rings_session_set_up(d, s); /* it may have taken one */
                }
        }
        if (v.err) {
                conn_close(c, v.why);
                return;
        }
        if (!c->session)
                c->deadline_ms = clock_now_ms() + d->cfg.handshake_timeout_ms;
        io_source_again(d->loop, c->src);
}

/* A closed session's ring let go after its close (session_on_release()). */
static void collect_released(void *d) {
        (void)hbgd_collect(d);
}

static struct verdict handle_session(struct conn *c, const Hbg__Envelope *env, const int *in_fds) {
        (void)in_fds;
        const Hbg__SessionRequest *rq = env->session_request;
        struct hbgd *d = c->d;
        const struct hbgd_config *cfg = &d->cfg;
        const struct hbg_geometry_request asked = {
                .task_window = rq->task_window,
                .flag_window = rq->flag_window,
                .heap_size = rq->heap_size,
                .mailbox_entries = rq->mailbox_entries,
                .graph_table_entries = rq->graph_table_entries,
        };
        struct hbg_geometry g;
        char msg[256];
        struct verdict v;

        if (!session_allowed(c, &v))
                return v;
        c->kernels_digest = rq->kernels_digest;
        hbgd_log_session(LOG_DEBUG, c->log_limit,
                         "session %" PRIu64 " (pid %d uid %u): asks task_window %" PRIu64 ", flag_window %" PRIu64
                         ", heap_size %" PRIu64 ", mailbox_entries %" PRIu64 ", graph_table_entries %" PRIu64
                         ", stall_timeout_ms %" PRIu64 " (0: hbgd's default)",
                         c->id, (int)c->cred.pid, (unsigned)c->cred.uid, rq->task_window, rq->flag_window,
                         rq->heap_size, rq->mailbox_entries, rq->graph_table_entries, rq->stall_timeout_ms);
        int err = session_geometry(cfg, &asked, &g, msg, sizeof(msg));
        if (err == -E2BIG)
                return refuse(c, err, msg);
        if (err < 0) {
                metrics_count_refusal(&d->counters, err);
                hbgd_log_session(LOG_DEBUG, c->log_limit, "session %" PRIu64 " (pid %d uid %u): refused: %s",
                                 c->id, (int)c->cred.pid, (unsigned)c->cred.uid, msg);
                return conn_reply_error(c, err, msg);
        }
        if (rq->stall_timeout_ms > cfg->max_stall_timeout_ms) {
                snprintf(msg, sizeof(msg), "stall_timeout_ms %" PRIu64 " is above [limits] max_stall_timeout_ms = %" PRIu64,
                         rq->stall_timeout_ms, cfg->max_stall_timeout_ms);
                return refuse(c, -E2BIG, msg);
        }
        /* The session's stall limit (RUNTIME_LOGIC §12.3); 0: the engine's. */
        uint64_t stall_ms = pick(rq->stall_timeout_ms, cfg->engine.stall_timeout_ms);

        /* Charged before anything is allocated; the session refunds it. */
        uint64_t memory = session_memory(d->engine, &g);
        err = acct_add_session(&d->acct, &cfg->limits, c->cred.uid, memory, msg, sizeof(msg));
        if (err < 0)
                return refuse(c, err, msg);
        /* Charged: the spares that no longer fit beside it go (a refused
         * request drops none). */
        spare_rings_make_room(d);
        struct session *s;
        err = session_new(&s, d->engine, d->loop, d->slow, &d->acct, &g, memory, c->id, c->cred.uid, c->cred.pid,
                          c->log_limit, hbgd_config_session_weight(cfg, c->cred.uid), stall_ms);
        if (err < 0) {
                snprintf(msg, sizeof(msg), "out of memory: %s", strerror(-err));
                return refuse(c, err, msg);
        }
        /* Built on the slow-work thread: the io thread answers others
         * meanwhile, and connects at once do not wait for each other here;
         * the connection reads nothing more until the reply
         * (session_built()). A lone connect (no other connection without a
         * session) whose build would wait for nothing on the slow-work
         * thread and finds a set of regions made ahead is built here
         * instead: the hand-off's two wake-ups cost it more than the build
         * (docs/PERFORMANCE.md), and the io thread meanwhile waits for
         * one build of the cheap kind at most (a client connecting in a
         * loop less than 5 ms apart soon uses the sets up: its connects
         * hold their fill back; docs/SECURITY.md). */
        session_on_release(s, collect_released, d);
        struct slow_job *work = session_build_job(s, &d->regions);
        work->done = session_built;
        work->userdata = c;
        c->creating = s;
        session_prefault_hold(d->slow);
        c->creating_inline = d->n_conns == d->n_sessions + 1 &&
                             slow_work_run_here(d->slow, work, session_build_cheap, s);
        if (!c->creating_inline)
                slow_work_submit(d->slow, work);
        /* The build may take a set of regions made ahead: the fill, a
         * background job, runs after it, whatever comes of the session
         * (a close while it is built cancels its done, not this). */
        spare_regions_want(d);
        return verdict_ok();
}

static struct verdict handle_status(struct conn *c, const Hbg__Envelope *env, const int *fds) {
        (void)fds;
        int err = status_reply(c, env->status_request);
        if (err == 0)
                return verdict_ok();
        return verdict_close(err, err == -EAGAIN ? "the client does not read its replies" : "disconnected");
}

/* The recording's validation finished (io thread): answer, then read
 * the connection's next requests again. */
static void record_done(struct slow_job *work) {
        struct conn *c = work->userdata;
        struct record_job *j = c->recording;
        char msg[256];
        uint32_t graph;
        c->recording = NULL;
        int err = record_finish(j, &graph, msg, sizeof(msg));
        struct verdict v;
        if (err < 0) {
                char full[300];
                snprintf(full, sizeof(full), "record: %s", msg);
                v = conn_reply_error(c, err, full);
        } else {
                Hbg__RecordReply r = HBG__RECORD_REPLY__INIT;
                r.graph = graph;
                Hbg__Envelope out = HBG__ENVELOPE__INIT;
                out.msg_case = HBG__ENVELOPE__MSG_RECORD_REPLY;
                out.record_reply = &r;
                v = conn_reply(c, &out, NULL, 0);
        }
        if (v.err) {
                conn_close(c, v.why);
                return;
        }
        io_source_again(c->d->loop, c->src);
}

/* Record a graph of this connection's session for replay (§14). Its tasks
 * are validated on the slow-work thread; the connection reads nothing
 * more until the reply (record_done). A refusal is an Error; the
 * connection stays. */
static struct verdict handle_record(struct conn *c, const Hbg__Envelope *env, const int *fds) {
        char msg[256];
        if (!c->session)
                return conn_reply_error(c, -EINVAL, "record: this connection has no session");
        struct record_job *j;
        int err = record_start(&j, c->session, &c->d->cfg, fds[0], env->record_request->tasks, msg, sizeof(msg));
        if (err < 0) {
                char full[300];
                snprintf(full, sizeof(full), "record: %s", msg);
                return conn_reply_error(c, err, full);
        }
        struct slow_job *work = record_job_work(j);
        work->done = record_done;
        work->userdata = c;
        c->recording = j;
        slow_work_submit(c->d->slow, work);
        return verdict_ok();
}

/* The verbs of the protocol: one entry per request a client may send. */
struct request_handler {
        Hbg__Envelope__MsgCase msg;
        bool before_hello;             /* allowed as the first message */
        unsigned fds;                  /* file descriptors it comes with */
        bool ends_turn;                /* costly: the other sources go next */
        struct verdict (*handle)(struct conn *c, const Hbg__Envelope *env, const int *fds);
};

static const struct request_handler handlers[] = {
        { HBG__ENVELOPE__MSG_HELLO, true, 0, false, handle_hello },
        { HBG__ENVELOPE__MSG_SESSION_REQUEST, false, 0, false, handle_session },
        { HBG__ENVELOPE__MSG_STATUS_REQUEST, false, 0, false, handle_status },
        /* Validates up to max_recorded_tasks tasks on the slow-work thread. */
        { HBG__ENVELOPE__MSG_RECORD_REQUEST, false, 1, true, handle_record },
        /* Admin requests: who may is decided per request (SIGHUP applies). */
        { HBG__ENVELOPE__MSG_CANCEL_REQUEST, false, 0, false, tool_cancel },
        { HBG__ENVELOPE__MSG_KILL_REQUEST, false, 0, false, tool_kill },
        /* Validated on the slow-work thread, like a recording. */
        { HBG__ENVELOPE__MSG_VALIDATE_REQUEST, false, 1, true, tool_validate },
        /* A fetch copies up to a message of records: the others go next. */
        { HBG__ENVELOPE__MSG_TRACE_REQUEST, false, 0, true, tool_trace },
};

static bool ends_turn(Hbg__Envelope__MsgCase msg) {
        for (size_t i = 0; i < sizeof(handlers) / sizeof(handlers[0]); i++)
                if (handlers[i].msg == msg)
                        return handlers[i].ends_turn;
        return false;
}

static struct verdict dispatch(struct conn *c, const Hbg__Envelope *env, const int *fds, unsigned nfds) {
        for (size_t i = 0; i < sizeof(handlers) / sizeof(handlers[0]); i++) {
                const struct request_handler *h = &handlers[i];
                if (h->msg != env->msg_case)
                        continue;
                if (!c->hello && !h->before_hello)
                        break;
                if (nfds != h->fds) {
                        conn_reply_error(c, -EPROTO, "wrong number of file descriptors for this request");
                        return verdict_close(-EPROTO, "protocol error");
                }
                return h->handle(c, env, fds);
        }
        const char *why = c->hello ? "unexpected message" : "the first message must be a hello";
        conn_reply_error(c, -EPROTO, why);
        return verdict_close(-EPROTO, "protocol error");
}

/* ------------------------------------------------------------ reading */

static void on_readable(struct io_source *src, uint32_t events, void *userdata) {
        struct conn *c = userdata;
        struct hbgd *d = c->d;
        unsigned turn = d->cfg.requests_per_turn;

        /* A recording or a validate-only request is being validated, or a
         * session built: its reply comes first, then the next requests
         * (record_done(), validate_done() and session_built() call us
         * again). */
        if (c->recording || c->validating || c->creating) {
                io_source_hold(d->loop, src);
                return;
        }
        for (unsigned i = 0; i < turn; i++) {
                Hbg__Envelope *env = NULL;
                int fds[HBG_WIRE_MAX_FDS];
                unsigned nfds = 0;
                /* At most one fd (a recording's or a validate request's
                 * memfd): more is an error. */
                int err = wire_recv(c->sock, d->cfg.max_message, &env, fds, 1, &nfds);
                if (err == -EAGAIN)
                        goto drained;
                if (err < 0) {
                        const char *why = err == -ECONNRESET ? "disconnected"
                                          : err == -EMSGSIZE ? "record larger than max_message_size"
                                                             : "malformed record or unexpected fds";
                        if (err != -ECONNRESET)
                                conn_reply_error(c, err, why);
                        conn_close(c, why);
                        return;
                }
                struct verdict v = dispatch(c, env, fds, nfds);
                bool costly = ends_turn(env->msg_case);
                wire_free(env);
                for (unsigned k = 0; k < nfds; k++)
                        close(fds[k]);
                if (v.err) {
                        conn_close(c, v.why);
                        return;
                }
                /* Without a session, a connection must keep asking (not
                 * while hbgd works for it: validate_done() and
                 * session_built() set it). */
                if (!c->session)
                        c->deadline_ms = c->validating || c->creating ? 0
                                                                     : clock_now_ms() + d->cfg.handshake_timeout_ms;
                if (c->recording || c->validating || c->creating)
                        return;
                if (costly)
                        break;
        }
        /* Turn used up: more may be queued. Come back after the others,
         * without waiting for a new event (io_uring's poll would not fire
         * again for data already there). */
        io_source_again(d->loop, src);
        return;
drained:
        if (events & (POLLHUP | POLLERR | POLLRDHUP))
                conn_close(c, "disconnected");
}

/* ------------------------------------------------------------ life cycle */

/* May this peer have a connection? 0 (charged to its uid), or the code
 * and why[] of its refusal. */
static int admit(struct hbgd *d, int fd, const struct ucred *cr, char *why, size_t size) {
        int err = access_check(&d->cfg, fd, cr, why, size);
        if (err < 0)
                return err;
        if (d->stopping) {
                snprintf(why, size, "hbgd is stopping: it takes no new connections");
                return -ESHUTDOWN;
        }
        return acct_add_connection(&d->acct, &d->cfg.limits, cr->uid, why, size);
}

void conn_accept(struct hbgd *d, int fd) {
        hbgd_tick_set(d, true);
        d->counters.connections_accepted++;
        struct ucred cr;
        socklen_t len = sizeof(cr);
        if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &len) < 0) {
                close(fd);
                return;
        }
        char why[256];
        int err = admit(d, fd, &cr, why, sizeof(why));
        if (err < 0) {
                refusal_start(d, fd, &cr, err, why);
                return;
        }
        /* Most connections are connects: the pre-faults wait (session.h). */
        session_prefault_hold(d->slow);
        struct conn *c = calloc(1, sizeof(*c));
        if (!c) {
                acct_remove_connection(&d->acct, cr.uid);
                close(fd);
                return;
        }
        c->d = d;
        c->sock = fd;
        c->cred = cr;
        c->id = ++d->next_id;
        c->deadline_ms = clock_now_ms() + d->cfg.handshake_timeout_ms;
        if (hbgd_log_limit_new(&c->log_limit, c->id, (int)cr.pid, cr.uid) < 0 ||
            io_loop_add(d->loop, fd, on_readable, c, &c->src) < 0) {
                hbgd_log_limit_unref(c->log_limit);
                acct_remove_connection(&d->acct, cr.uid);
                close(fd);
                free(c);
                return;
        }
        c->next = d->conns;
        d->conns = c;
        d->n_conns++;
}

void conn_expire(struct hbgd *d, int64_t now_ms) {
        for (struct conn *c = d->conns, *next; c; c = next) {
                next = c->next;
                if (c->deadline_ms && now_ms >= c->deadline_ms) {
                        hbgd_log_session(LOG_NOTICE, c->log_limit,
                                         "connection %" PRIu64 " (pid %d uid %u): closed: no request "
                                         "within %u ms (handshake_timeout_ms)",
                                         c->id, (int)c->cred.pid, (unsigned)c->cred.uid,
                                         d->cfg.handshake_timeout_ms);
                        conn_reply_error(c, -ETIMEDOUT, "no request within handshake_timeout_ms");
                        conn_close(c, NULL);
                }
        }
}
