/* SPDX-License-Identifier: MIT */
/* hbgd's metrics (daemon/metrics.h): the Metrics message of a status reply. */
#include "daemon/metrics.h"

#include <errno.h>
#include <stdatomic.h>
#include <stdlib.h>

#include "common/clock.h"
#include "common/procstat.h"
#include "daemon/daemon_private.h"
#include "daemon/access.h"
#include "daemon/engine/engine_kernels.h"
#include "daemon/log.h"
#include "shm/layout.h"
#include "daemon/engine/engine_stats.h"

/* The three per-errno tables of a Metrics message. */
enum { TABLE_GRAPHS, TABLE_TASKS, TABLE_REFUSED, N_TABLES };

struct metrics_reply {
        Hbg__Metrics m;
        struct engine_metrics em;
        Hbg__Histogram graph_latency;
        Hbg__MetricErrno codes[N_TABLES][HBG_ERRNO_SLOTS];
        Hbg__MetricErrno *code_ptrs[N_TABLES][HBG_ERRNO_SLOTS];
        /* One per scheduler thread. */
        Hbg__MetricThread *threads;
        Hbg__MetricThread **thread_ptrs;
        Hbg__Histogram *thread_hists;
        struct hbg_hist_snapshot *thread_times;
        /* One per user the asker sees. */
        Hbg__MetricUser *users;
        Hbg__MetricUser **user_ptrs;
        /* One per kernel that ran a task (engine_kernel_sig() order). */
        Hbg__MetricKernel *kernels;
        Hbg__MetricKernel **kernel_ptrs;
        Hbg__Histogram *kernel_hists;      /* run, wait of each */
        struct ktime_snapshot *kernel_times;
};

/* Two counters read separately (a figure for people, not a decision):
 * retired is read first and noticed never falls behind it, but the
 * difference is clamped at 0 all the same. */
uint64_t metrics_graphs_in_flight(const struct ring_stats *st) {
        return st->graphs_noticed > st->graphs_retired ? st->graphs_noticed - st->graphs_retired : 0;
}

void metrics_fill_daemon(const struct hbgd *d, Hbg__DaemonStatus *ds) {
        ds->connections = d->n_conns;
        ds->connections_accepted = d->counters.connections_accepted;
        ds->sessions_opened = d->counters.sessions_opened;
        ds->sessions_set_up_inline = d->counters.sessions_set_up_inline;
        ds->log_lines_dropped = hbgd_log_dropped();
}

/* A histogram message pointing into snap (which must outlive it). */
static void histogram(Hbg__Histogram *h, struct hbg_hist_snapshot *snap) {
        hbg__histogram__init(h);
        h->n_bounds_ns = HBG_HIST_BOUNDS;
        h->bounds_ns = (uint64_t *)hist_bounds_ns; /* only read by the packer */
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

/* hbgd's process figures, read at most once a second: a client asking
 * for metrics in a loop makes the io thread list /proc/self/fd once a
 * second, not at every request. The io thread alone calls this. */
#define PROCSTAT_MAX_AGE_MS 1000
static void procstat_cached(struct procstat *ret) {
        static struct procstat cache;
        static int64_t read_at;
        static bool have;
        int64_t now = clock_now_ms();
        if (!have || now - read_at >= PROCSTAT_MAX_AGE_MS || now < read_at) {
                procstat_self(&cache); /* without /proc: what could be read, the rest 0 */
                read_at = now;
                have = true;
        }
        *ret = cache;
}

/* hbgd's process, its graphs in flight and the memory charged: per user
 * only those the asker sees (access_sees(), as the session lists). */
static void fill_resources(const struct hbgd *d, uid_t asker, enum access_role role, struct metrics_reply *r) {
        Hbg__Metrics *m = &r->m;
        struct procstat ps;
        procstat_cached(&ps);
        m->process_resident_bytes = ps.resident_bytes;
        m->process_open_fds = ps.open_fds;
        m->process_max_fds = ps.max_fds;
        m->process_cpu_us = ps.cpu_us;
        m->process_start_time_ms = ps.start_time_ms;
        for (const struct conn *c = d->conns; c; c = c->next) {
                if (!c->session)
                        continue;
                struct ring_stats st;
                ring_stats(c->session->ring, &st);
                m->graphs_in_flight = metrics_add_sat(m->graphs_in_flight, metrics_graphs_in_flight(&st));
        }
        m->memory_charged = d->acct.memory;
        m->memory_limit = acct_max_memory(&d->cfg.limits);
        m->memory_limit_per_uid = acct_max_memory_per_uid(&d->cfg.limits);
        size_t n = 0;
        for (size_t i = 0; i < d->acct.n_users; i++) {
                const struct uid_usage *u = &d->acct.users[i];
                if ((!u->memory && !u->sessions) || !access_sees(&d->cfg, role, asker, u->uid))
                        continue;
                Hbg__MetricUser *mu = &r->users[n];
                hbg__metric_user__init(mu);
                mu->uid = u->uid;
                mu->memory = u->memory;
                mu->sessions = u->sessions;
                r->user_ptrs[n++] = mu;
        }
        m->n_users = n;
        m->users = r->user_ptrs;
}

/* m->kernels: the kernels that ran a task. 0 or -ENOMEM. */
static int fill_kernels(const struct hbgd *d, struct metrics_reply *r) {
        size_t nk = kernel_count();
        r->kernels = calloc(nk + 1, sizeof(*r->kernels));
        r->kernel_ptrs = calloc(nk + 1, sizeof(*r->kernel_ptrs));
        r->kernel_hists = calloc(2 * nk + 1, sizeof(*r->kernel_hists));
        r->kernel_times = calloc(nk + 1, sizeof(*r->kernel_times));
        if (!r->kernels || !r->kernel_ptrs || !r->kernel_hists || !r->kernel_times)
                return -ENOMEM;
        size_t n = 0;
        for (size_t i = 0; i < nk; i++) {
                struct ktime_snapshot *kt = &r->kernel_times[n];
                engine_kernel_times(d->engine, i, kt);
                if (!kt->tasks)
                        continue;
                const struct hbg_kernel_sig *sig = engine_kernel_sig(i);
                Hbg__MetricKernel *mk = &r->kernels[n];
                hbg__metric_kernel__init(mk);
                mk->id = sig->id;
                mk->name = (char *)sig->name; /* lives as long as hbgd */
                mk->tasks = kt->tasks;
                mk->failures = kt->failures;
                histogram(&r->kernel_hists[2 * n], &kt->run);
                histogram(&r->kernel_hists[2 * n + 1], &kt->wait);
                mk->run = &r->kernel_hists[2 * n];
                mk->wait = &r->kernel_hists[2 * n + 1];
                r->kernel_ptrs[n++] = mk;
        }
        r->m.n_kernels = n;
        r->m.kernels = r->kernel_ptrs;
        return 0;
}

int metrics_kernels_reply_new(const struct hbgd *d, Hbg__StatusReply *reply, struct metrics_reply **ret) {
        struct metrics_reply *r = calloc(1, sizeof(*r));
        if (!r)
                return -ENOMEM;
        hbg__metrics__init(&r->m);
        if (fill_kernels(d, r) < 0) {
                metrics_reply_free(r);
                return -ENOMEM;
        }
        reply->metrics = &r->m;
        *ret = r;
        return 0;
}

int metrics_reply_new(const struct hbgd *d, uid_t asker, enum access_role role, Hbg__StatusReply *reply,
                      struct metrics_reply **ret) {
        unsigned nthreads = engine_threads(d->engine);
        struct metrics_reply *r = calloc(1, sizeof(*r));
        if (!r)
                return -ENOMEM;
        hbg__metrics__init(&r->m);
        r->threads = calloc(nthreads, sizeof(*r->threads));
        r->thread_ptrs = calloc(nthreads, sizeof(*r->thread_ptrs));
        r->thread_hists = calloc(nthreads, sizeof(*r->thread_hists));
        r->thread_times = calloc(nthreads, sizeof(*r->thread_times));
        r->users = calloc(d->acct.n_users + 1, sizeof(*r->users));
        r->user_ptrs = calloc(d->acct.n_users + 1, sizeof(*r->user_ptrs));
        if (!r->threads || !r->thread_ptrs || !r->thread_hists || !r->thread_times || !r->users || !r->user_ptrs ||
            fill_kernels(d, r) < 0) {
                metrics_reply_free(r);
                return -ENOMEM;
        }

        Hbg__Metrics *m = &r->m;
        engine_metrics(d->engine, &r->em);
        m->graphs_submitted = r->em.graphs_submitted;
        m->graphs_retired = r->em.graphs_retired;
        errno_table(r, TABLE_GRAPHS, r->em.graphs_failed, &m->n_graphs_failed, &m->graphs_failed);
        errno_table(r, TABLE_TASKS, r->em.tasks_failed, &m->n_tasks_failed, &m->tasks_failed);
        errno_table(r, TABLE_REFUSED, d->counters.sessions_refused, &m->n_sessions_refused,
                    &m->sessions_refused);
        histogram(&r->graph_latency, &r->em.graph_latency);
        m->graph_latency = &r->graph_latency;
        for (unsigned i = 0; i < nthreads; i++) {
                engine_thread_task_time(d->engine, i, &r->thread_times[i]);
                histogram(&r->thread_hists[i], &r->thread_times[i]);
                hbg__metric_thread__init(&r->threads[i]);
                r->threads[i].index = i;
                r->threads[i].task_run = &r->thread_hists[i];
                r->thread_ptrs[i] = &r->threads[i];
        }
        m->n_threads = nthreads;
        m->threads = r->thread_ptrs;
        m->task_sample_every = 1; /* every task is timed (daemon/engine/ktime.h) */
        fill_resources(d, asker, role, r);
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
        free(r->users);
        free(r->user_ptrs);
        free(r->kernels);
        free(r->kernel_ptrs);
        free(r->kernel_hists);
        free(r->kernel_times);
        free(r);
        return NULL;
}
