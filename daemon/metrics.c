/* SPDX-License-Identifier: MIT */
/* hbgd's metrics (daemon/metrics.h): the Metrics message of a status reply. */
#include "daemon/metrics.h"

#include <errno.h>
#include <stdlib.h>

#include "daemon/daemon_private.h"
#include "daemon/log.h"

/* The three per-errno tables of a Metrics message. */
enum { TABLE_GRAPHS, TABLE_TASKS, TABLE_REFUSED, N_TABLES };

struct metrics_reply {
        Hbg__Metrics m;
        struct hbg_engine_metrics em;
        Hbg__Histogram graph_latency;
        Hbg__MetricErrno codes[N_TABLES][HBG_ERRNO_SLOTS];
        Hbg__MetricErrno *code_ptrs[N_TABLES][HBG_ERRNO_SLOTS];
        /* One per scheduler thread. */
        Hbg__MetricThread *threads;
        Hbg__MetricThread **thread_ptrs;
        Hbg__Histogram *thread_hists;
        struct hbg_hist_snapshot *thread_times;
};

void metrics_fill_daemon(const struct hbgd *d, Hbg__DaemonStatus *ds) {
        ds->connections = d->n_conns;
        ds->connections_accepted = d->counters.connections_accepted;
        ds->sessions_opened = d->counters.sessions_opened;
        ds->log_lines_dropped = hbgd_log_dropped();
}

/* A histogram message pointing into snap (which must outlive it). */
static void histogram(Hbg__Histogram *h, struct hbg_hist_snapshot *snap) {
        hbg__histogram__init(h);
        h->n_bounds_ns = HBG_HIST_BOUNDS;
        h->bounds_ns = (uint64_t *)hbg_hist_bounds_ns; /* only read by the packer */
        h->n_buckets = HBG_HIST_BUCKETS;
        h->buckets = snap->buckets;
        h->sum_ns = snap->sum_ns;
}

/* The non-zero entries of a per-errno table, entry e as code -e. */
static void errno_table(struct metrics_reply *r, unsigned table, const uint64_t *counts, size_t *ret_n,
                        Hbg__MetricErrno ***ret) {
        size_t n = 0;
        for (unsigned e = 0; e < HBG_ERRNO_SLOTS; e++) {
                if (!counts[e])
                        continue;
                Hbg__MetricErrno *m = &r->codes[table][n];
                hbg__metric_errno__init(m);
                m->code = -(int32_t)e;
                m->count = counts[e];
                r->code_ptrs[table][n++] = m;
        }
        *ret_n = n;
        *ret = r->code_ptrs[table];
}

int metrics_reply_new(const struct hbgd *d, Hbg__StatusReply *reply, struct metrics_reply **ret) {
        unsigned nthreads = hbg_engine_threads(d->engine);
        struct metrics_reply *r = calloc(1, sizeof(*r));
        if (!r)
                return -ENOMEM;
        r->threads = calloc(nthreads, sizeof(*r->threads));
        r->thread_ptrs = calloc(nthreads, sizeof(*r->thread_ptrs));
        r->thread_hists = calloc(nthreads, sizeof(*r->thread_hists));
        r->thread_times = calloc(nthreads, sizeof(*r->thread_times));
        if (!r->threads || !r->thread_ptrs || !r->thread_hists || !r->thread_times) {
                metrics_reply_free(r);
                return -ENOMEM;
        }

        Hbg__Metrics *m = &r->m;
        hbg__metrics__init(m);
        hbg_engine_metrics(d->engine, &r->em);
        m->graphs_submitted = r->em.graphs_submitted;
        m->graphs_retired = r->em.graphs_retired;
        errno_table(r, TABLE_GRAPHS, r->em.graphs_failed, &m->n_graphs_failed, &m->graphs_failed);
        errno_table(r, TABLE_TASKS, r->em.tasks_failed, &m->n_tasks_failed, &m->tasks_failed);
        errno_table(r, TABLE_REFUSED, d->counters.sessions_refused, &m->n_sessions_refused,
                    &m->sessions_refused);
        histogram(&r->graph_latency, &r->em.graph_latency);
        m->graph_latency = &r->graph_latency;
        for (unsigned i = 0; i < nthreads; i++) {
                hbg_engine_thread_task_time(d->engine, i, &r->thread_times[i]);
                histogram(&r->thread_hists[i], &r->thread_times[i]);
                hbg__metric_thread__init(&r->threads[i]);
                r->threads[i].index = i;
                r->threads[i].task_run = &r->thread_hists[i];
                r->thread_ptrs[i] = &r->threads[i];
        }
        m->n_threads = nthreads;
        m->threads = r->thread_ptrs;
        m->task_sample_every = HBG_TASK_TIME_SAMPLE;
        reply->metrics = m;
        *ret = r;
        return 0;
}

struct metrics_reply *metrics_reply_free(struct metrics_reply *r) {
        if (!r)
                return NULL;
        free(r->threads);
        free(r->thread_ptrs);
        free(r->thread_hists);
        free(r->thread_times);
        free(r);
        return NULL;
}
