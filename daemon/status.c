/* SPDX-License-Identifier: MIT */
/* Status replies: daemon, threads, sessions, graphs, kernels, metrics
 * (docs/PROTOCOL.md). Read-only views of the engine and the sessions.
 * Which sessions a reply lists is the asker's visibility ([access]
 * visibility, access_sees()); the daemon-wide totals count every session
 * whoever asks (docs/SECURITY.md, "Who sees what").
 *
 * Every reply has the daemon section; `kinds[]` says which other
 * sections a kind adds. A section is one function that fills its part of
 * the reply in memory it allocates through status_alloc(), freed with the
 * build after the send. A new kind: one line in kinds[] (and a section
 * function if it shows something new). */
#include <errno.h>
#include <stdlib.h>
#include <unistd.h>

#include "daemon/daemon_private.h"
#include "daemon/access.h"
#include "daemon/status.h"
#include "daemon/metrics.h"
#include "daemon/kernel_rows.h"
#include "daemon/engine/engine_spares.h"
#include "daemon/engine/engine_kernels.h"
#include "proto/wire.h"
#include "shm/layout.h"
#include "common/clock.h"
#include "daemon/engine/engine_stats.h"

/* STATUS_GRAPHS lists at most this many live graphs per session and per
 * reply, and only what fits max_message_size (docs/PROTOCOL.md). */
#define LIVE_PER_SESSION 64u
#define LIVE_PER_REPLY 4096u

/* Each session's counters, read once per reply so that the daemon's
 * totals and the rows of one reply agree. */
struct session_snap {
        struct conn *conn;
        struct ring_stats st;
        bool visible;                   /* the asker sees it (access_sees()) */
};

/* One status reply being built. */
struct status_build {
        struct hbgd *d;
        const struct conn *asker;
        enum access_role role;
        struct session_snap *snaps;     /* every conn with a session */
        unsigned n_snaps, n_visible;
        Hbg__DaemonStatus ds;
        Hbg__StatusReply reply;
        Hbg__Envelope env;              /* wraps reply */
        /* What the sections allocated, freed by status_build_free(). */
        void *owned[8];
        unsigned n_owned;
        struct metrics_reply *metrics;
};

/* p, now the build's to free; false (p freed) when it holds as many as it
 * can, which the sections' count keeps from happening: no assert() in
 * hbgd (docs/SECURITY.md). */
static bool status_own(struct status_build *b, void *p) {
        if (b->n_owned >= sizeof(b->owned) / sizeof(b->owned[0])) {
                free(p);
                return false;
        }
        b->owned[b->n_owned++] = p;
        return true;
}

/* n zeroed elements of size (at least one), owned by the build; NULL:
 * out of memory. */
static void *status_alloc(struct status_build *b, size_t n, size_t size) {
        void *p = calloc(n ? n : 1, size);
        return p && status_own(b, p) ? p : NULL;
}

static void status_build_free(struct status_build *b) {
        for (unsigned i = 0; i < b->n_owned; i++)
                free(b->owned[i]);
        free(b->snaps);
        metrics_reply_free(b->metrics);
}

/* The asker's role and every session's counters. 0 or -ENOMEM. */
static int status_build_init(struct status_build *b, struct conn *c) {
        struct hbgd *d = c->d;
        *b = (struct status_build){ .d = d, .asker = c, .role = access_role(&d->cfg, c->sock, &c->cred) };
        hbg__daemon_status__init(&b->ds);
        hbg__status_reply__init(&b->reply);
        hbg__envelope__init(&b->env);
        b->env.msg_case = HBG__ENVELOPE__MSG_STATUS_REPLY;
        b->env.status_reply = &b->reply;
        b->snaps = calloc(d->n_conns + 1, sizeof(*b->snaps));
        if (!b->snaps)
                return -ENOMEM;
        for (struct conn *x = d->conns; x; x = x->next) {
                if (!x->session)
                        continue;
                struct session_snap *s = &b->snaps[b->n_snaps++];
                s->conn = x;
                ring_stats(x->session->ring, &s->st);
                s->visible = access_sees(&d->cfg, b->role, c->cred.uid, x->cred.uid);
                b->n_visible += s->visible;
        }
        return 0;
}

/* ------------------------------------------------------------ sections */

/* Every reply's: the daemon, its totals over every session. */
static int section_daemon(struct status_build *b) {
        struct hbgd *d = b->d;
        Hbg__DaemonStatus *ds = &b->ds;
        uint64_t completed = d->done_tasks, retired = d->done_graphs, gfailed = d->done_graphs_failed;
        for (unsigned i = 0; i < b->n_snaps; i++) {
                completed += b->snaps[i].st.completed;
                retired += b->snaps[i].st.graphs_retired;
                gfailed += b->snaps[i].st.graphs_failed;
        }
        ds->version = (char *)HBG_VERSION;
        ds->pid = (uint32_t)getpid();
        ds->uptime_ms = (uint64_t)(clock_now_ms() - d->started_ms);
        ds->threads = engine_threads(d->engine);
        ds->clusters = d->cfg.engine.clusters;
        ds->sessions = d->n_sessions;
        ds->tasks_completed = completed;
        ds->graphs_retired = retired;
        ds->graphs_failed = gfailed;
        ds->io_backend = (char *)io_loop_backend(d->loop);
        ds->slow_jobs = slow_work_pending(d->slow);
        ds->spare_rings = engine_spares(d->engine, &ds->spare_ring_bytes, &ds->spare_rings_taken);
        ds->spare_regions = spare_regions_ready(&d->regions, &ds->spare_regions_taken);
        ds->sessions_closing = engine_rings_removed(d->engine);
        ds->completion_mode = (char *)completion_mode_name(d->cfg.engine.completion_mode);
        metrics_fill_daemon(d, ds);
        b->reply.daemon = ds;
        return 0;
}

static int section_threads(struct status_build *b) {
        unsigned n = engine_threads(b->d->engine);
        Hbg__ThreadStatus *ts = status_alloc(b, n, sizeof(*ts));
        Hbg__ThreadStatus **tsp = status_alloc(b, n, sizeof(*tsp));
        if (!ts || !tsp)
                return -ENOMEM;
        for (unsigned i = 0; i < n; i++) {
                struct hbg_thread_stats t;
                engine_thread_stats(b->d->engine, i, &t);
                hbg__thread_status__init(&ts[i]);
                ts[i].index = i;
                ts[i].clusters = t.clusters;
                ts[i].classified = t.classified;
                ts[i].dispatched = t.dispatched;
                ts[i].executed_tasks = t.executed_tasks;
                ts[i].retired_inline = t.retired_inline;
                ts[i].failed = t.failed;
                ts[i].published = t.published;
                ts[i].failsafe_pushes = t.failsafe_pushes;
                ts[i].failsafe_retries = t.failsafe_retries;
                ts[i].watermark_advances = t.watermark_advances;
                ts[i].watermark_cas_failures = t.watermark_cas_failures;
                ts[i].parks = t.parks;
                ts[i].wakeups = t.wakeups;
                ts[i].spurious_wakeups = t.spurious_wakeups;
                ts[i].cpu_moves = t.cpu_moves;
                ts[i].batch_linked = t.batch_linked;
                ts[i].continued = t.continued;
                ts[i].stolen = t.stolen;
                tsp[i] = &ts[i];
        }
        b->reply.n_threads = n;
        b->reply.threads = tsp;
        return 0;
}

/* The sessions the asker sees, one row each. */
static int section_sessions(struct status_build *b) {
        Hbg__SessionStatus *ss = status_alloc(b, b->n_visible + 1, sizeof(*ss));
        Hbg__SessionStatus **ssp = status_alloc(b, b->n_visible + 1, sizeof(*ssp));
        if (!ss || !ssp)
                return -ENOMEM;
        unsigned ns = 0;
        for (unsigned i = 0; i < b->n_snaps; i++) {
                const struct session_snap *s = &b->snaps[i];
                if (!s->visible)
                        continue;
                struct conn *x = s->conn;
                struct ring_counters rc;
                ring_counters(x->session->ring, &rc);
                hbg__session_status__init(&ss[ns]);
                ss[ns].session_id = x->id;
                ss[ns].pid = (uint32_t)x->cred.pid;
                ss[ns].uid = x->cred.uid;
                ss[ns].name = x->name;
                ss[ns].submitted = s->st.submitted;
                ss[ns].classified = s->st.classified;
                ss[ns].dispatched = rc.dispatched;
                ss[ns].watermark = s->st.watermark;
                ss[ns].completed = s->st.completed;
                ss[ns].failed = s->st.failed;
                ss[ns].graphs_retired = s->st.graphs_retired;
                ss[ns].graphs_failed = s->st.graphs_failed;
                ss[ns].failsafe_pushes = rc.failsafe_pushes;
                ss[ns].failsafe_retries = rc.failsafe_retries;
                ss[ns].watermark_advances = rc.watermark_advances;
                ss[ns].watermark_cas_failures = rc.watermark_cas_failures;
                ss[ns].error = s->st.error;
                ss[ns].serving = (char *)session_serving_name(x->session);
                ssp[ns] = &ss[ns];
                ns++;
        }
        b->reply.n_sessions = ns;
        b->reply.sessions = ssp;
        return 0;
}

/* The live graphs of session x into st, oldest first, while the reply
 * stays within *budget more bytes (lowered by what was added); the rest
 * counted in live_omitted. lg, lgp: the reply's entries from *used on. */
static void list_live_graphs(const struct conn *x, Hbg__GraphStatus *st, Hbg__LiveGraph *lg, Hbg__LiveGraph **lgp,
                             size_t *used, size_t *budget) {
        struct hbg_live_graph g[LIVE_PER_SESSION];
        uint64_t live;
        size_t n = ring_live_graphs(x->session->ring, g, LIVE_PER_SESSION, &live);
        st->live = &lgp[*used];
        for (size_t k = 0; k < n && *used < LIVE_PER_REPLY; k++) {
                Hbg__LiveGraph *e = &lg[*used];
                hbg__live_graph__init(e);
                e->graph = g[k].number;
                e->graph_id = g[k].graph_id;
                e->state = (char *)live_state_name(g[k].state);
                e->tasks_done = g[k].tasks_done;
                e->tasks = g[k].last_id - g[k].first_id + 1;
                e->age_ms = g[k].age_ms;
                e->first_id = g[k].first_id;
                e->last_id = g[k].last_id;
                /* the entry, its tag and length, and a byte more for the
                 * session's own length prefix growing */
                size_t sz = hbg__live_graph__get_packed_size(e) + 4;
                if (sz > *budget)
                        break;
                *budget -= sz;
                lgp[(*used)++] = e;
                st->n_live++;
        }
        st->live_omitted = live - st->n_live;
}

/* Each visible session's graph counters, then its live graphs in what is
 * left of max_message_size: the last section of its kind, as it measures
 * the reply built so far. */
static int section_graphs(struct status_build *b) {
        Hbg__GraphStatus *gs = status_alloc(b, b->n_visible + 1, sizeof(*gs));
        Hbg__GraphStatus **gsp = status_alloc(b, b->n_visible + 1, sizeof(*gsp));
        Hbg__LiveGraph *lg = status_alloc(b, LIVE_PER_REPLY, sizeof(*lg));
        Hbg__LiveGraph **lgp = status_alloc(b, LIVE_PER_REPLY, sizeof(*lgp));
        if (!gs || !gsp || !lg || !lgp)
                return -ENOMEM;
        unsigned ns = 0;
        for (unsigned i = 0; i < b->n_snaps; i++) {
                const struct session_snap *s = &b->snaps[i];
                if (!s->visible)
                        continue;
                hbg__graph_status__init(&gs[ns]);
                gs[ns].session_id = s->conn->id;
                gs[ns].graphs_submitted = ring_graphs_submitted(s->conn->session->ring);
                gs[ns].graphs_retired = s->st.graphs_retired;
                gs[ns].graphs_failed = s->st.graphs_failed;
                gs[ns].watermark = s->st.watermark;
                gsp[ns] = &gs[ns];
                ns++;
        }
        b->reply.n_graphs = ns;
        b->reply.graphs = gsp;
        /* What is left of max_message_size once every session's counters
         * and its largest live_omitted (11 bytes) are in. */
        size_t base = hbg__envelope__get_packed_size(&b->env) + 11 * (size_t)ns;
        size_t max = (size_t)b->d->cfg.max_message;
        size_t budget = max > base ? max - base : 0, used = 0;
        for (unsigned i = 0, k = 0; i < b->n_snaps; i++)
                if (b->snaps[i].visible)
                        list_live_graphs(b->snaps[i].conn, &gs[k++], lg, lgp, &used, &budget);
        return 0;
}

/* Every kernel hbgd runs, with its signature and module
 * (daemon/kernel_rows.h: the session reply's table too). */
static int section_kernels(struct status_build *b) {
        void *rows = kernel_rows_new(&b->reply.kernels, &b->reply.n_kernels);
        if (!rows || !status_own(b, rows)) {
                b->reply.kernels = NULL;
                b->reply.n_kernels = 0;
                return -ENOMEM;
        }
        return 0;
}

/* Each kernel's tasks and times (daemon/metrics.c), beside the table. */
static int section_kernel_metrics(struct status_build *b) {
        return metrics_kernels_reply_new(b->d, &b->reply, &b->metrics);
}

/* Counters and histograms (daemon/metrics.c). */
static int section_metrics(struct status_build *b) {
        return metrics_reply_new(b->d, b->asker->cred.uid, b->role, &b->reply, &b->metrics);
}

/* ------------------------------------------------------------ kinds */

typedef int (*status_section_fn)(struct status_build *b);

/* The sections each kind adds to the daemon's, in order; a kind not
 * listed gets the daemon section only. A reply is sent within
 * max_message_size, or within reply_min if that is more: the kernel
 * table is hbgd's own data, checked at start to fit a session reply
 * (HBG_WIRE_SESSION_REPLY_MAX), and hbgctl must see it whatever
 * max_message_size says (it reads up to 16 MiB). */
/* Metrics.kernels at its largest: every kernel hbgd can hold ran a task,
 * each a MetricKernel of under 1 KiB (two histograms, a name of at most
 * HBG_KERNEL_NAME_MAX): hbgd's own data, whatever max_message_size says. */
#define KERNEL_TIMES_MAX (((size_t)HBG_KERNEL_MODULE_FIRST + KERNEL_MODULE_MAX) * 1024u)

static const struct status_kind {
        Hbg__StatusKind kind;
        status_section_fn sections[2];
        size_t reply_min;
} kinds[] = {
        { HBG__STATUS_KIND__STATUS_DAEMON, { section_threads, section_sessions } },
        { HBG__STATUS_KIND__STATUS_THREADS, { section_threads } },
        { HBG__STATUS_KIND__STATUS_SESSIONS, { section_sessions } },
        { HBG__STATUS_KIND__STATUS_GRAPHS, { section_graphs } },
        /* The table and the daemon section (a few hundred bytes), and the
         * kernels' times. */
        { HBG__STATUS_KIND__STATUS_KERNELS, { section_kernels, section_kernel_metrics },
          2 * HBG_WIRE_SESSION_REPLY_MAX + KERNEL_TIMES_MAX },
        { HBG__STATUS_KIND__STATUS_METRICS, { section_threads, section_metrics },
          HBG_WIRE_MAX_MSG_DEFAULT + KERNEL_TIMES_MAX },
};

static const struct status_kind *find_kind(Hbg__StatusKind kind) {
        for (size_t i = 0; i < sizeof(kinds) / sizeof(kinds[0]); i++)
                if (kinds[i].kind == kind)
                        return &kinds[i];
        return NULL;
}

/* The reply's sections: 0 or -ENOMEM. */
static int status_build_sections(struct status_build *b, const struct status_kind *k) {
        int err = section_daemon(b);
        for (size_t i = 0; k && err == 0 && i < sizeof(k->sections) / sizeof(k->sections[0]); i++)
                if (k->sections[i])
                        err = k->sections[i](b);
        return err;
}

int status_reply(struct conn *c, const Hbg__StatusRequest *rq) {
        struct status_build b;
        const struct status_kind *k = find_kind(rq->kind);
        size_t limit = c->d->cfg.max_message;
        if (k && k->reply_min > limit)
                limit = k->reply_min;
        int err = status_build_init(&b, c);
        if (err == 0)
                err = status_build_sections(&b, k);
        if (err < 0) {
                err = wire_send_error(c->sock, -ENOMEM, "out of memory");
        } else {
                err = wire_send(c->sock, &b.env, NULL, 0, limit);
                if (err == -EMSGSIZE)
                        err = wire_send_error(c->sock, -EMSGSIZE, "status reply larger than max_message_size");
        }
        status_build_free(&b);
        return err;
}
