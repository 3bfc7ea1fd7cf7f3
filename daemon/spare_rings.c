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
#include "common/clock.h"

static void spare_run(struct slow_job *job) {
        struct spare_rings *s = (struct spare_rings *)((char *)job - offsetof(struct spare_rings, job));
        struct hbgd *d = job->userdata;
        s->result = engine_spare_fill(d->engine, &s->g, s->want, SESSION_PREFAULT_PIECE);
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

/* Sessions set up this close together make one burst: a job's
 * producers starting together. */
#define SPARE_BURST_GAP_MS 200
/* A session of a burst counts, at its close, if it stayed this long: one
 * that ran graphs, not one of a connect loop. */
#define SPARE_BURST_STAYED_MS 100

/* spare_rings, or the burst held, up to spare_rings_burst; none at all
 * with spare_rings = 0. */
static unsigned spares_target(const struct hbgd *d) {
        const struct spare_rings *s = &d->spares;
        unsigned n = d->cfg.spare_rings, burst = s->held;
        if (burst > d->cfg.spare_rings_burst)
                burst = d->cfg.spare_rings_burst;
        return n && burst > n ? burst : n;
}

/* A session of the spares' size: it could have taken one. */
static bool spare_sized(struct hbgd *d, const struct session *ses) {
        return engine_ring_memory(d->engine, &ses->g) == engine_ring_memory(d->engine, &d->spares.g);
}

void spare_rings_session_set_up(struct hbgd *d, struct session *ses) {
        struct spare_rings *s = &d->spares;
        int64_t now = clock_now_ms();
        if (!s->last_setup_ms || now - s->last_setup_ms > SPARE_BURST_GAP_MS) {
                s->burst++;
                s->burst_open = s->burst_open_max = s->burst_stayed = s->burst_quit = 0;
        }
        s->last_setup_ms = now;
        ses->set_up_ms = now;
        ses->spare_burst = 0;
        if (spare_sized(d, ses)) {
                ses->spare_burst = s->burst;
                if (++s->burst_open > s->burst_open_max)
                        s->burst_open_max = s->burst_open;
        }
        spare_rings_want(d);
}

/* Only the io thread's state: the caller asks for a fill after the
 * session's close (its memory given back). */
void spare_rings_session_closing(struct hbgd *d, struct session *ses) {
        struct spare_rings *s = &d->spares;
        if (!ses->spare_burst || ses->spare_burst != s->burst)
                return; /* not of the spares' size, or a later burst began */
        s->burst_open--;
        int64_t now = clock_now_ms();
        if (now - ses->set_up_ms < SPARE_BURST_STAYED_MS) {
                /* Two of a connect loop's sessions, none that stayed: the
                 * hold ends, spares made for such sessions serve nobody. */
                if (++s->burst_quit >= 2 && s->burst_stayed == 0)
                        s->held = 0;
                return;
        }
        /* Held: this burst's sessions that stayed, no more than were open
         * at once (not one at a time in a chain of set-ups). A later
         * burst replaces an earlier one's count. */
        unsigned stayed = ++s->burst_stayed < s->burst_open_max ? s->burst_stayed : s->burst_open_max;
        if (stayed < 2)
                return;
        s->held = s->held_burst == s->burst && s->held > stayed ? s->held : stayed;
        s->held_burst = s->burst;
        s->held_until_ms = now + (int64_t)d->cfg.spare_rings_burst_s * 1000;
}

void spare_rings_tick(struct hbgd *d, int64_t now_ms) {
        struct spare_rings *s = &d->spares;
        if (!s->held || now_ms < s->held_until_ms)
                return;
        s->held = 0;
        /* The fill trims to the count (ring_spares_fill()). */
        spare_rings_want(d);
}

void spare_rings_want(struct hbgd *d) {
        struct spare_rings *s = &d->spares;
        if (s->queued) {
                s->again = true;
                return;
        }
        s->again = false;
        if (d->stopping)
                return; /* the engine's end unmaps what is left */
        char msg[256];
        const struct hbg_geometry_request defaults = { 0 };
        if (session_geometry(&d->cfg, &defaults, &s->g, msg, sizeof(msg)) < 0)
                return; /* the config's defaults were checked at load: cannot happen */
        /* Within [limits] max_memory beside the sessions' charges: spares
         * never take memory a session could be refused for. */
        uint64_t each = engine_ring_memory(d->engine, &s->g), max = acct_max_memory(&d->cfg.limits);
        uint64_t room = max > d->acct.memory ? max - d->acct.memory : 0;
        /* Where the kernel cannot pre-fault, none: the fill then only
         * unmaps the arenas of closed sessions' rings given back. */
        s->want = s->gave_up ? 0 : spares_target(d);
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
        unsigned n = engine_spares(d->engine, &bytes, NULL);
        /* Closed sessions' arenas waiting to be zeroed into spares count
         * too; a trim unmaps them first. */
        uint64_t waiting = engine_spares_waiting(d->engine);
        if ((n == 0 && waiting == 0) || d->acct.memory + bytes + waiting <= max)
                return;
        uint64_t room = max > d->acct.memory ? max - d->acct.memory : 0;
        engine_spares_trim(d->engine, n ? (unsigned)(room / (bytes / n)) : 0);
}

void spare_rings_stop(struct hbgd *d) {
        if (d->spares.queued && d->slow)
                slow_work_cancel(d->slow, &d->spares.job);
        d->spares.queued = false;
}
