/* SPDX-License-Identifier: MIT */
/* Rings' arrays faulted in ahead of sessions (spare_rings.h). */
#include "daemon/spare_rings.h"

#include <errno.h>
#include <stddef.h>
#include <string.h>
#include <syslog.h>

#include "daemon/daemon_private.h"
#include "daemon/log.h"
#include "daemon/session.h"

static void spare_run(struct slow_job *job) {
        struct spare_rings *s = (struct spare_rings *)((char *)job - offsetof(struct spare_rings, job));
        struct hbgd *d = job->userdata;
        s->result = hbg_engine_spare_fill(d->engine, &s->g, s->want, SESSION_PREFAULT_PIECE);
}

static void spare_done(struct slow_job *job) {
        struct hbgd *d = job->userdata;
        struct spare_rings *s = &d->spares;
        s->queued = false;
        if (s->result >= 0)
                s->logged = 0;
        if (s->result < 0) {
                /* -EINVAL: no MADV_POPULATE_WRITE (before Linux 5.14), for
                 * good; -ENOMEM: tried again at the next session. Logged
                 * once until a fill succeeds. */
                s->gave_up = s->result == -EINVAL;
                if (s->logged != s->result)
                        hbgd_log(LOG_NOTICE, "spare rings: cannot fault a ring's arrays in ahead: %s; sessions' "
                                 "arrays come on first touch%s", strerror(-s->result),
                                 s->gave_up ? "" : " (tried again at the next session)");
                s->logged = s->result;
        }
        /* More to fill, or asked for again meanwhile (a reload, memory
         * given back): a fresh look at the config and the room. */
        if (s->result > 0 || s->again)
                spare_rings_want(d);
}

void spare_rings_want(struct hbgd *d) {
        struct spare_rings *s = &d->spares;
        if (s->queued) {
                s->again = true;
                return;
        }
        s->again = false;
        if (s->gave_up || d->stopping)
                return;
        char msg[256];
        const struct hbg_geometry_request defaults = { 0 };
        if (session_geometry(&d->cfg, &defaults, &s->g, msg, sizeof(msg)) < 0)
                return; /* the config's defaults were checked at load: cannot happen */
        /* Within [limits] max_memory beside the sessions' charges: spares
         * never take memory a session could be refused for. */
        uint64_t each = hbg_engine_ring_memory(d->engine, &s->g), max = acct_max_memory(&d->cfg.limits);
        uint64_t room = max > d->acct.memory ? max - d->acct.memory : 0;
        s->want = d->cfg.spare_rings;
        if (each && room / each < s->want)
                s->want = (unsigned)(room / each);
        s->job = (struct slow_job){
                .run = spare_run,
                .done = spare_done,
                .uid = 0,
                .class = SLOW_BACKGROUND,
                .userdata = d,
        };
        s->queued = true;
        slow_work_submit(d->slow, &s->job);
}

void spare_rings_make_room(struct hbgd *d) {
        uint64_t bytes, max = acct_max_memory(&d->cfg.limits);
        unsigned n = hbg_engine_spares(d->engine, &bytes, NULL);
        if (n == 0 || d->acct.memory + bytes <= max)
                return;
        uint64_t each = bytes / n, room = max > d->acct.memory ? max - d->acct.memory : 0;
        hbg_engine_spares_trim(d->engine, (unsigned)(room / each));
}

void spare_rings_stop(struct hbgd *d) {
        if (d->spares.queued && d->slow)
                slow_work_cancel(d->slow, &d->spares.job);
        d->spares.queued = false;
}
