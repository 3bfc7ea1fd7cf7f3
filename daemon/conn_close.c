/* SPDX-License-Identifier: MIT */
/* Closing a connection and its session (daemon/conn_close.h). */
#include "daemon/conn_close.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <syslog.h>
#include <unistd.h>

#include "daemon/daemon_private.h"
#include "daemon/log.h"
#include "daemon/record.h"
#include "daemon/tick.h"
#include "daemon/validate_request.h"
#include "daemon/engine/engine_stats.h"

void conn_close_session(struct hbgd *d, struct session *s, int reason) {
        spare_rings_session_closing(d, s);
        if (session_close(s, reason))
                hbgd_collect_soon(d);
        spare_rings_want(d);
        spare_regions_retry(d); /* its fds given back, unless a thread holds its ring (then hbgd_collect()) */
}

void conn_close(struct conn *c, const char *why) {
        struct hbgd *d = c->d;
        if (c->closed)
                return;
        c->closed = true;
        for (struct conn **p = &d->conns; *p; p = &(*p)->next)
                if (*p == c) {
                        *p = c->next;
                        break;
                }
        d->n_conns--;
        if (c->recording) {
                /* Before the session goes: the validation reads its ring. */
                slow_work_cancel(d->slow, record_job_work(c->recording));
                record_abandon(c->recording);
                c->recording = NULL;
        }
        if (c->validating) {
                slow_work_cancel(d->slow, validate_job_work(c->validating));
                validate_free(c->validating);
                c->validating = NULL;
        }
        if (c->creating) {
                /* Its build is taken back (waited for if it runs) and
                 * whatever it made is freed, the charge refunded. */
                conn_close_session(d, c->creating, d->stopping ? -ESHUTDOWN : -ECONNRESET);
                c->creating = NULL;
        }
        if (c->session) {
                struct ring_stats st;
                ring_stats(c->session->ring, &st);
                d->done_tasks += st.completed;
                d->done_graphs += st.graphs_retired;
                d->done_graphs_failed += st.graphs_failed;
                d->n_sessions--;
                conn_close_session(d, c->session, d->stopping ? -ESHUTDOWN : -ECONNRESET);
                c->session = NULL;
                if (why)
                        hbgd_log_session(LOG_INFO, c->log_limit,
                                         "session %" PRIu64 " (pid %d uid %u): closed: %s", c->id,
                                         (int)c->cred.pid, (unsigned)c->cred.uid, why);
        }
        tracing_conn_closed(d, c->id);
        acct_remove_connection(&d->acct, c->cred.uid);
        io_source_del(d->loop, c->src);
        close(c->sock);
        c->sock = -1;
        /* And the socket's fd: a fill asked for at the session's close may
         * already have run short of just this one. */
        spare_regions_retry(d);
        c->next_dead = d->dead_conns;
        d->dead_conns = c;
}

void conn_free_dead(struct hbgd *d) {
        while (d->dead_conns) {
                struct conn *c = d->dead_conns;
                d->dead_conns = c->next_dead;
                hbgd_log_limit_unref(c->log_limit);
                free(c);
        }
}
