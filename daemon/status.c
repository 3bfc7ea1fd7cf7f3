/* SPDX-License-Identifier: MIT */
/* Status replies: daemon, threads, sessions, graphs, kernels, metrics
 * (docs/PROTOCOL.md). Read-only views of the engine and the sessions.
 * Which sessions a reply lists is the asker's visibility ([access]
 * visibility, access_sees()); the daemon-wide totals count every session
 * whoever asks (docs/SECURITY.md, "Who sees what"). */
#include <errno.h>
#include <stdlib.h>
#include <unistd.h>

#include "daemon/daemon_private.h"
#include "daemon/metrics.h"
#include "common/kernel_sig.h"
#include "proto/wire.h"
#include "shm/layout.h"
#include "common/clock.h"

/* STATUS_GRAPHS lists at most this many live graphs per session and per
 * reply, and only what fits max_message_size (docs/PROTOCOL.md). */
#define LIVE_PER_SESSION 64u
#define LIVE_PER_REPLY 4096u

/* The live graphs of the sessions gs[0..ns) (conns in the same order),
 * oldest first, while the reply stays within `budget` more bytes; the
 * rest is counted in live_omitted. lg holds LIVE_PER_REPLY entries. */
static void list_live_graphs(struct hbgd *d, const struct conn *c, enum access_role role, Hbg__GraphStatus *gs,
                             unsigned ns, Hbg__LiveGraph *lg, Hbg__LiveGraph **lgp, size_t budget) {
        struct hbg_live_graph g[LIVE_PER_SESSION];
        size_t used = 0;
        unsigned i = 0;
        for (struct conn *x = d->conns; x && i < ns; x = x->next) {
                if (!x->session || !access_sees(&d->cfg, role, c->cred.uid, x->cred.uid))
                        continue;
                Hbg__GraphStatus *st = &gs[i++];
                uint64_t live;
                size_t n = hbg_ring_live_graphs(x->session->ring, g, LIVE_PER_SESSION, &live);
                st->live = &lgp[used];
                for (size_t k = 0; k < n && used < LIVE_PER_REPLY; k++) {
                        Hbg__LiveGraph *e = &lg[used];
                        hbg__live_graph__init(e);
                        e->graph = g[k].number;
                        e->graph_id = g[k].graph_id;
                        e->state = (char *)hbg_live_state_name(g[k].state);
                        e->tasks_done = g[k].tasks_done;
                        e->tasks = g[k].last_id - g[k].first_id + 1;
                        e->age_ms = g[k].age_ms;
                        e->first_id = g[k].first_id;
                        e->last_id = g[k].last_id;
                        /* the entry, its tag and length, and a byte more for
                         * the session's own length prefix growing */
                        size_t sz = hbg__live_graph__get_packed_size(e) + 4;
                        if (sz > budget)
                                break;
                        budget -= sz;
                        lgp[used++] = e;
                        st->n_live++;
                }
                st->live_omitted = live - st->n_live;
        }
}

int status_reply(struct conn *c, const Hbg__StatusRequest *rq) {
        struct hbgd *d = c->d;
        unsigned nthreads = hbg_engine_threads(d->engine);
        Hbg__StatusReply reply = HBG__STATUS_REPLY__INIT;
        Hbg__DaemonStatus ds = HBG__DAEMON_STATUS__INIT;
        Hbg__ThreadStatus *ts = calloc(nthreads, sizeof(*ts));
        Hbg__ThreadStatus **tsp = calloc(nthreads, sizeof(*tsp));
        Hbg__SessionStatus *ss = calloc(d->n_conns + 1, sizeof(*ss));
        Hbg__SessionStatus **ssp = calloc(d->n_conns + 1, sizeof(*ssp));
        Hbg__GraphStatus *gs = calloc(d->n_conns + 1, sizeof(*gs));
        Hbg__GraphStatus **gsp = calloc(d->n_conns + 1, sizeof(*gsp));
        size_t nk = kernel_sig_count();
        Hbg__KernelInfo *ks = calloc(nk, sizeof(*ks));
        Hbg__KernelInfo **ksp = calloc(nk, sizeof(*ksp));
        Hbg__KernelArg *ka = calloc(nk * (HBG_MAX_TENSOR_ARGS + HBG_MAX_SCALAR_ARGS), sizeof(*ka));
        Hbg__KernelArg **kap = calloc(nk * (HBG_MAX_TENSOR_ARGS + HBG_MAX_SCALAR_ARGS), sizeof(*kap));
        struct metrics_reply *metrics = NULL;
        bool graphs = rq->kind == HBG__STATUS_KIND__STATUS_GRAPHS;
        Hbg__LiveGraph *lg = graphs ? calloc(LIVE_PER_REPLY, sizeof(*lg)) : NULL;
        Hbg__LiveGraph **lgp = graphs ? calloc(LIVE_PER_REPLY, sizeof(*lgp)) : NULL;
        int err = 0;
        if (!ts || !tsp || !ss || !ssp || !gs || !gsp || !ks || !ksp || !ka || !kap || (graphs && (!lg || !lgp)) ||
            (rq->kind == HBG__STATUS_KIND__STATUS_METRICS && metrics_reply_new(d, &reply, &metrics) < 0)) {
                err = wire_send_error(c->sock, -ENOMEM, "out of memory");
                goto out;
        }

        uint64_t completed = d->done_tasks, retired = d->done_graphs, gfailed = d->done_graphs_failed;
        unsigned ns = 0;
        enum access_role role = access_role(&d->cfg, c->sock, &c->cred);
        for (struct conn *x = d->conns; x; x = x->next) {
                if (!x->session)
                        continue;
                struct hbg_ring_stats st;
                hbg_ring_stats(x->session->ring, &st);
                completed += st.completed;
                retired += st.graphs_retired;
                gfailed += st.graphs_failed;
                if (!access_sees(&d->cfg, role, c->cred.uid, x->cred.uid))
                        continue;
                hbg__session_status__init(&ss[ns]);
                ss[ns].session_id = x->id;
                ss[ns].pid = (uint32_t)x->cred.pid;
                ss[ns].uid = x->cred.uid;
                ss[ns].name = x->name;
                ss[ns].submitted = st.submitted;
                ss[ns].watermark = st.watermark;
                ss[ns].completed = st.completed;
                ss[ns].failed = st.failed;
                ss[ns].graphs_retired = st.graphs_retired;
                ss[ns].graphs_failed = st.graphs_failed;
                ss[ns].error = st.error;
                ssp[ns] = &ss[ns];
                hbg__graph_status__init(&gs[ns]);
                struct hbg_sub_header *sh = x->session->sub;
                gs[ns].session_id = x->id;
                gs[ns].graphs_submitted = atomic_load_explicit(&sh->graphs_submitted, memory_order_relaxed);
                gs[ns].graphs_retired = st.graphs_retired;
                gs[ns].graphs_failed = st.graphs_failed;
                gs[ns].watermark = st.watermark;
                gsp[ns] = &gs[ns];
                ns++;
        }
        ds.version = (char *)HBG_VERSION;
        ds.pid = (uint32_t)getpid();
        ds.uptime_ms = (uint64_t)(clock_now_ms() - d->started_ms);
        ds.threads = nthreads;
        ds.clusters = d->cfg.engine.clusters;
        ds.sessions = d->n_sessions;
        ds.tasks_completed = completed;
        ds.graphs_retired = retired;
        ds.graphs_failed = gfailed;
        ds.io_backend = (char *)io_loop_backend(d->loop);
        ds.slow_jobs = slow_work_pending(d->slow);
        ds.completion_mode = (char *)hbg_completion_mode_name(d->cfg.engine.completion_mode);
        metrics_fill_daemon(d, &ds);
        reply.daemon = &ds;

        if (rq->kind == HBG__STATUS_KIND__STATUS_THREADS || rq->kind == HBG__STATUS_KIND__STATUS_DAEMON ||
            rq->kind == HBG__STATUS_KIND__STATUS_METRICS) {
                for (unsigned i = 0; i < nthreads; i++) {
                        struct hbg_thread_stats t;
                        hbg_engine_thread_stats(d->engine, i, &t);
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
                        ts[i].batch_linked = t.batch_linked;
                        ts[i].continued = t.continued;
                        ts[i].stolen = t.stolen;
                        tsp[i] = &ts[i];
                }
                reply.n_threads = nthreads;
                reply.threads = tsp;
        }
        if (rq->kind == HBG__STATUS_KIND__STATUS_SESSIONS || rq->kind == HBG__STATUS_KIND__STATUS_DAEMON) {
                reply.n_sessions = ns;
                reply.sessions = ssp;
        }
        if (rq->kind == HBG__STATUS_KIND__STATUS_GRAPHS) {
                reply.n_graphs = ns;
                reply.graphs = gsp;
        }
        if (rq->kind == HBG__STATUS_KIND__STATUS_KERNELS) {
                size_t na = 0;
                for (size_t i = 0; i < nk; i++) {
                        const struct hbg_kernel_sig *k = kernel_sig_at(i);
                        hbg__kernel_info__init(&ks[i]);
                        ks[i].id = k->id;
                        ks[i].name = (char *)k->name;
                        ks[i].splittable = k->splittable;
                        ks[i].args = &kap[na];
                        for (unsigned j = 0; j < k->n_tensors; j++, na++) {
                                hbg__kernel_arg__init(&ka[na]);
                                ka[na].name = (char *)k->tensors[j].name;
                                ka[na].kind = (char *)kernel_sig_dir_name(k->tensors[j].dir);
                                kap[na] = &ka[na];
                                ks[i].n_args++;
                        }
                        for (unsigned j = 0; j < k->n_scalars; j++, na++) {
                                hbg__kernel_arg__init(&ka[na]);
                                ka[na].name = (char *)k->scalars[j].name;
                                ka[na].kind = (char *)kernel_sig_scalar_kind_name(k->scalars[j].kind);
                                kap[na] = &ka[na];
                                ks[i].n_args++;
                        }
                        ksp[i] = &ks[i];
                }
                reply.n_kernels = nk;
                reply.kernels = ksp;
        }

        Hbg__Envelope env = HBG__ENVELOPE__INIT;
        env.msg_case = HBG__ENVELOPE__MSG_STATUS_REPLY;
        env.status_reply = &reply;
        if (graphs) {
                /* What is left of max_message_size once every session's
                 * counters and its largest live_omitted (11 bytes) are in. */
                size_t base = hbg__envelope__get_packed_size(&env) + 11 * (size_t)ns;
                size_t max = (size_t)d->cfg.max_message;
                list_live_graphs(d, c, role, gs, ns, lg, lgp, max > base ? max - base : 0);
        }
        err = wire_send(c->sock, &env, NULL, 0, d->cfg.max_message);
        if (err == -EMSGSIZE)
                err = wire_send_error(c->sock, -EMSGSIZE, "status reply larger than max_message_size");
out:
        free(ts), free(tsp), free(ss), free(ssp), free(gs), free(gsp);
        free(ks), free(ksp), free(ka), free(kap);
        metrics_reply_free(metrics);
        free(lg), free(lgp);
        return err;
}

