/* SPDX-License-Identifier: MIT */
/*
 * The task timeline's requests (docs/PROTOCOL.md, "Tracing";
 * docs/OPERATIONS.md, "Tracing"): TRACE_START turns the engine's
 * recording on for a duration, filtered to what the asker may trace;
 * TRACE_FETCH says "running" until then (TRACE_STOP ends it early), and
 * afterwards hands the
 * threads' records out, as many per reply as fit a message, until done.
 * All on the io thread; the engine's recorders never wait for it.
 *
 * Who may trace what follows the admin requests (conn.c admin_target):
 * root and admin_groups every session, anyone else their own sessions
 * only (docs/SECURITY.md, "Who sees what"). The threads' parks and
 * wake-ups belong to no session and come with every trace.
 */
#include "daemon/tracing.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <syslog.h>

#include "common/clock.h"
#include "daemon/daemon_private.h"
#include "daemon/access.h"
#include "daemon/conn_reply.h"
#include "daemon/tick.h"
#include "daemon/engine/engine_trace.h"
#include "daemon/log.h"
#include "proto/wire.h"
#include "daemon/engine/engine_stats.h"

#define TRACE_MAX_DURATION_MS 600000u
/* A finished trace nobody fetches is dropped after this. */
#define TRACE_KEEP_MS 30000
/* Records read from the engine at once while filling a reply. */
#define TRACE_READ_CHUNK 256u

/* Graphs not retired when a trace stops, at most (per session, in all):
 * the rest are left out (a graph ring holds at most 65536). */
#define TRACE_OPEN_PER_SESSION 256u
#define TRACE_OPEN_MAX 4096u

/* The traced sessions' graphs still in flight at now_ns, as graph records
 * ending then, into d->trace.open (none if out of memory: the trace is
 * still good, it only lacks them). Their start: when a retirement pass
 * noticed them, else when the io thread first saw the record, else now. */
static void snapshot_open_graphs(struct hbgd *d, int64_t now_ns) {
        struct hbgd_trace *tr = &d->trace;
        struct hbg_trace_event *open = calloc(TRACE_OPEN_MAX, sizeof(*open));
        struct hbg_live_graph *g = calloc(TRACE_OPEN_PER_SESSION, sizeof(*g));
        size_t n = 0;
        for (struct conn *x = d->conns; open && g && x && n < TRACE_OPEN_MAX; x = x->next) {
                if (!x->session || (tr->session && x->id != tr->session) ||
                    (tr->uid >= 0 && (int64_t)x->cred.uid != tr->uid))
                        continue;
                uint64_t live;
                size_t max = TRACE_OPEN_MAX - n < TRACE_OPEN_PER_SESSION ? TRACE_OPEN_MAX - n : TRACE_OPEN_PER_SESSION;
                size_t k = ring_live_graphs(x->session->ring, g, max, &live);
                for (size_t i = 0; i < k; i++) {
                        int64_t start = g[i].noticed_ns;
                        if (!start && g[i].age_ms)
                                start = now_ns - (int64_t)g[i].age_ms * 1000000;
                        open[n++] = (struct hbg_trace_event){
                                .session = x->id, .id = g[i].number, .start_ns = start && start < now_ns ? start : now_ns,
                                .end_ns = now_ns, .u.graph = { .first_id = g[i].first_id, .last_id = g[i].last_id },
                                .kind = HBG_TRACE_GRAPH,
                        };
                }
        }
        free(g);
        tr->open = open;
        tr->n_open = open ? n : 0;
}

/* Stop recording; with `open`, note the graphs still in flight first (a
 * graph retiring meanwhile may be in both: hbgctl keeps the retirement). */
static void trace_stop(struct hbgd *d, bool open) {
        if (!d->trace.running)
                return;
        int64_t now = clock_now_ns();
        if (open)
                snapshot_open_graphs(d, now);
        engine_trace_stop(d->engine);
        d->trace.running = false;
        d->trace.stop_ns = now;
}

static void trace_release(struct hbgd *d) {
        trace_stop(d, false);
        free(d->trace.open);
        d->trace = (struct hbgd_trace){ 0 };
}

void tracing_conn_closed(struct hbgd *d, uint64_t id) {
        if (d->trace.owner == id)
                trace_release(d);
}

void tracing_tick(struct hbgd *d, int64_t now_ms) {
        if (!d->trace.owner)
                return;
        if (d->trace.running && now_ms >= d->trace.deadline_ms)
                trace_stop(d, true);
        else if (!d->trace.running && now_ms >= d->trace.deadline_ms + TRACE_KEEP_MS)
                trace_release(d);
}

/* The filter of a trace c asks for, or an error with msg[]: a session it
 * may not act on is -EPERM, one it may not even see -ENOENT, as for the
 * admin requests. */
static int trace_filter(struct conn *c, uint64_t session_id, struct hbg_trace_filter *f, char *msg, size_t size) {
        struct hbgd *d = c->d;
        enum access_role role = access_role(&d->cfg, c->sock, &c->cred);
        *f = (struct hbg_trace_filter){ .session = session_id, .uid = role == ACCESS_ADMIN ? -1 : (int64_t)c->cred.uid };
        if (!session_id)
                return 0;
        struct conn *t = NULL;
        for (struct conn *x = d->conns; x && !t; x = x->next)
                if (x->id == session_id && x->session)
                        t = x;
        if (t && (role == ACCESS_ADMIN || t->cred.uid == c->cred.uid))
                return 0;
        if (!t && (role != ACCESS_USER || d->cfg.visibility_all)) {
                snprintf(msg, size, "trace: no session %" PRIu64, session_id);
                return -ENOENT;
        }
        snprintf(msg, size, "trace: uid %u may not trace session %" PRIu64 ": only its own uid and [access] "
                 "admin_groups (and root) may", (unsigned)c->cred.uid, session_id);
        return -EPERM;
}

static int trace_start(struct conn *c, const Hbg__TraceRequest *rq) {
        struct hbgd *d = c->d;
        char msg[256];
        if (rq->duration_ms == 0 || rq->duration_ms > TRACE_MAX_DURATION_MS) {
                snprintf(msg, sizeof(msg), "trace: the duration must be 1 to %u ms", TRACE_MAX_DURATION_MS);
                return conn_reply_error(c, -EINVAL, msg).err;
        }
        bool admin = access_role(&d->cfg, c->sock, &c->cred) == ACCESS_ADMIN;
        if (d->trace.owner && d->trace.owner != c->id && (!admin || d->trace.admin)) {
                snprintf(msg, sizeof(msg), "trace: another trace is being taken (one at a time); try again later");
                return conn_reply_error(c, -EBUSY, msg).err;
        }
        struct hbg_trace_filter f;
        int err = trace_filter(c, rq->session_id, &f, msg, sizeof(msg));
        if (err < 0) {
                return conn_reply_refused(c, err, msg).err;
        }
        if (d->trace.owner && d->trace.owner != c->id) /* an admin takes over a user's trace */
                hbgd_log_session(LOG_NOTICE, c->log_limit,
                                 "connection %" PRIu64 " (pid %d uid %u): trace of connection %" PRIu64
                                 " ended to start its own (an admin's)",
                                 c->id, (int)c->cred.pid, (unsigned)c->cred.uid, d->trace.owner);
        trace_release(d); /* this connection's previous one, or the taken-over one */
        err = engine_trace_start(d->engine, &f);
        if (err < 0)
                return conn_reply_error(c, err, "trace: out of memory for the trace buffers").err;
        d->trace = (struct hbgd_trace){ .owner = c->id, .admin = admin, .running = true,
                                        .deadline_ms = clock_now_ms() + rq->duration_ms, .session = f.session,
                                        .uid = f.uid };
        hbgd_tick_set(d, true); /* its end is the tick's to see */
        char what[64];
        if (f.session)
                snprintf(what, sizeof(what), "session %" PRIu64, f.session);
        else if (f.uid < 0)
                snprintf(what, sizeof(what), "every session");
        else
                snprintf(what, sizeof(what), "the sessions of uid %" PRId64, f.uid);
        hbgd_log_session(LOG_INFO, c->log_limit, "connection %" PRIu64 " (pid %d uid %u): trace of %s for %u ms started",
                         c->id, (int)c->cred.pid, (unsigned)c->cred.uid, what, rq->duration_ms);
        Hbg__TraceReply r = HBG__TRACE_REPLY__INIT;
        r.running = true;
        r.remaining_ms = rq->duration_ms;
        r.buffer_events = engine_trace_buffer_events(d->engine);
        Hbg__Envelope out = HBG__ENVELOPE__INIT;
        out.msg_case = HBG__ENVELOPE__MSG_TRACE_REPLY;
        out.trace_reply = &r;
        return wire_send(c->sock, &out, NULL, 0, HBG_WIRE_MAX_MSG_DEFAULT);
}

/* Record ev as p; its fanins (if any) are copied into fanins[], which
 * p points to. */
static void event_to_proto(const struct hbg_trace_event *ev, unsigned thread, int64_t t0, bool in_flight,
                           uint64_t fanins[HBG_TRACE_RECORD_FANINS], Hbg__TraceEvent *p) {
        hbg__trace_event__init(p);
        p->kind = (Hbg__TraceKind)ev->kind;
        p->thread = thread;
        p->session_id = ev->session;
        p->id = ev->id;
        p->kernel = ev->kernel;
        p->result = ev->result;
        if (ev->kind == HBG_TRACE_FANINS) {
                /* No times: the arrows bind to the tasks' own records. */
                p->n_fanins = ev->n_fanins <= HBG_TRACE_RECORD_FANINS ? ev->n_fanins : HBG_TRACE_RECORD_FANINS;
                memcpy(fanins, ev->fanins, p->n_fanins * sizeof(fanins[0]));
                p->fanins = fanins;
                return;
        }
        p->start_ns = ev->start_ns - t0;
        p->end_ns = ev->end_ns - t0;
        if (ev->kind == HBG_TRACE_GRAPH) {
                p->first_id = ev->u.graph.first_id;
                p->last_id = ev->u.graph.last_id;
                p->in_flight = in_flight;
        } else if (ev->kind == HBG_TRACE_TASK || ev->kind == HBG_TRACE_HOST) {
                p->block = ev->u.task.block;
                p->blocks = ev->u.task.blocks;
                p->wait_ns = ev->u.task.ready_ns ? ev->start_ns - ev->u.task.ready_ns : -1;
        }
}

/* Records of the last trace from the cursor (thread, index) into ret, up
 * to max: each thread's, then (thread == nt) the graphs open at its end.
 * Returns how many (0: none left). */
static size_t trace_read(struct hbgd *d, unsigned nt, struct hbg_trace_event *ret, size_t max) {
        struct hbgd_trace *tr = &d->trace;
        if (tr->thread < nt) {
                uint64_t total, dropped;
                return engine_trace_read(d->engine, tr->thread, tr->index, ret, max, &total, &dropped);
        }
        size_t k = 0;
        for (uint64_t i = tr->index; i < tr->n_open && k < max; i++)
                ret[k++] = tr->open[i];
        return k;
}

/* One fetch reply after the trace: every thread's counts, then records
 * from the cursor while they fit what a client reads of one message. */
static int trace_fetch_events(struct conn *c) {
        struct hbgd *d = c->d;
        struct hbgd_trace *tr = &d->trace;
        unsigned nt = engine_threads(d->engine);
        int64_t t0 = engine_trace_started(d->engine);
        size_t limit = c->d->cfg.max_message < HBG_WIRE_MAX_MSG_DEFAULT ? c->d->cfg.max_message
                                                                         : HBG_WIRE_MAX_MSG_DEFAULT;
        Hbg__TraceReply r = HBG__TRACE_REPLY__INIT;
        Hbg__TraceThread th[HBG_ENGINE_MAX_THREADS], *thp[HBG_ENGINE_MAX_THREADS];
        for (unsigned i = 0; i < nt; i++) {
                uint64_t total, dropped;
                struct hbg_trace_event none;
                engine_trace_read(d->engine, i, UINT64_MAX, &none, 0, &total, &dropped);
                hbg__trace_thread__init(&th[i]);
                th[i].index = i;
                th[i].events = total;
                th[i].dropped = dropped;
                thp[i] = &th[i];
        }
        r.threads = thp;
        r.n_threads = nt;
        r.duration_ns = tr->stop_ns > t0 ? (uint64_t)(tr->stop_ns - t0) : 0;
        r.unbuffered = engine_trace_unbuffered(d->engine);
        r.buffer_events = engine_trace_buffer_events(d->engine);
        r.done = true; /* unless a record is left over below */
        Hbg__Envelope out = HBG__ENVELOPE__INIT;
        out.msg_case = HBG__ENVELOPE__MSG_TRACE_REPLY;
        out.trace_reply = &r;
        /* What the reply takes before events, with room for done and
         * the envelope's length growing. */
        size_t used = hbg__envelope__get_packed_size(&out) + 16;

        size_t cap = limit / 8; /* an event takes more than 8 bytes */
        Hbg__TraceEvent *evs = calloc(cap, sizeof(*evs));
        Hbg__TraceEvent **evp = calloc(cap, sizeof(*evp));
        struct hbg_trace_event *raw = calloc(TRACE_READ_CHUNK, sizeof(*raw));
        /* The events' fanin ids: raw is read into again, chunk by chunk. */
        uint64_t(*fanins)[HBG_TRACE_RECORD_FANINS] = calloc(cap, sizeof(*fanins));
        if (!evs || !evp || !raw || !fanins) {
                free(evs);
                free(evp);
                free(raw);
                free(fanins);
                return conn_reply_error(c, -ENOMEM, "trace: out of memory").err;
        }
        size_t n = 0;
        bool full = false;
        while (!full && tr->thread <= nt) {
                size_t got = trace_read(d, nt, raw, TRACE_READ_CHUNK);
                if (got == 0) {
                        tr->thread++;
                        tr->index = 0;
                        continue;
                }
                for (size_t k = 0; k < got; k++) {
                        if (n == cap) { /* before evs[n] is touched */
                                full = true;
                                break;
                        }
                        Hbg__TraceEvent *p = &evs[n];
                        event_to_proto(&raw[k], tr->thread < nt ? tr->thread : 0, t0, tr->thread == nt, fanins[n],
                                       p);
                        size_t sz = hbg__trace_event__get_packed_size(p) + 4; /* tag and length */
                        if (used + sz > limit) {
                                full = true;
                                break;
                        }
                        used += sz;
                        evp[n++] = p;
                        tr->index++;
                }
        }
        r.events = evp;
        r.n_events = n;
        r.done = tr->thread > nt;
        int err = wire_send(c->sock, &out, NULL, 0, limit);
        free(evs);
        free(evp);
        free(raw);
        free(fanins);
        if (r.done)
                trace_release(d);
        return err;
}

/* TRACE_FETCH, and TRACE_STOP (stop first). */
static int trace_fetch(struct conn *c, bool stop) {
        struct hbgd *d = c->d;
        if (d->trace.owner != c->id)
                return conn_reply_error(c, -ENOENT, "trace: this connection has no trace (TRACE_START first)").err;
        if (stop)
                trace_stop(d, true);
        int64_t now = clock_now_ms();
        if (d->trace.running && now < d->trace.deadline_ms) {
                Hbg__TraceReply r = HBG__TRACE_REPLY__INIT;
                r.running = true;
                r.remaining_ms = (uint64_t)(d->trace.deadline_ms - now);
                r.buffer_events = engine_trace_buffer_events(d->engine);
                Hbg__Envelope out = HBG__ENVELOPE__INIT;
                out.msg_case = HBG__ENVELOPE__MSG_TRACE_REPLY;
                out.trace_reply = &r;
                return wire_send(c->sock, &out, NULL, 0, HBG_WIRE_MAX_MSG_DEFAULT);
        }
        trace_stop(d, true);
        return trace_fetch_events(c);
}

int tracing_reply(struct conn *c, const Hbg__TraceRequest *rq) {
        switch (rq->action) {
        case HBG__TRACE_ACTION__TRACE_START:
                return trace_start(c, rq);
        case HBG__TRACE_ACTION__TRACE_FETCH:
        case HBG__TRACE_ACTION__TRACE_STOP:
                return trace_fetch(c, rq->action == HBG__TRACE_ACTION__TRACE_STOP);
        default:
                return conn_reply_error(c, -EINVAL, "trace: unknown action").err;
        }
}
