/* SPDX-License-Identifier: MIT */
/* Sessions' regions and channels made ahead (spare_regions.h). */
#include "daemon/spare_regions.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <syslog.h>

#include "daemon/daemon_private.h"
#include "daemon/log.h"
#include "daemon/session_geometry.h"

int spare_regions_init(struct spare_regions *s) {
        memset(s, 0, sizeof(*s));
        if (pthread_mutex_init(&s->lock, NULL) != 0)
                return -ENOMEM;
        s->lock_ready = true;
        return 0;
}

static bool same_geometry(const struct hbg_geometry *a, const struct hbg_geometry *b) {
        /* Whole words, no padding (shm/geometry.h); both from geometry_init(). */
        return memcmp(a, b, sizeof(*a)) == 0;
}

/* Drops sets beyond keep, or all of a geometry other than g. Locked. */
static void drop_locked(struct spare_regions *s, const struct hbg_geometry *g, unsigned keep) {
        if (g && !same_geometry(&s->g, g))
                keep = 0;
        while (s->n > keep) {
                s->n--;
                session_regions_free(&s->set[s->n], &s->g);
        }
}

bool spare_regions_take(struct spare_regions *s, const struct hbg_geometry *g, struct session_regions *ret) {
        if (!s || !s->lock_ready)
                return false;
        bool took = false;
        pthread_mutex_lock(&s->lock);
        if (s->n > 0 && same_geometry(&s->g, g)) {
                *ret = s->set[--s->n];
                session_regions_clear(&s->set[s->n]);
                s->taken++;
                took = true;
        }
        pthread_mutex_unlock(&s->lock);
        return took;
}

bool spare_regions_have(struct spare_regions *s, const struct hbg_geometry *g) {
        if (!s->lock_ready)
                return false;
        pthread_mutex_lock(&s->lock);
        bool have = s->n > 0 && same_geometry(&s->g, g);
        pthread_mutex_unlock(&s->lock);
        return have;
}

unsigned spare_regions_ready(struct spare_regions *s, uint64_t *ret_taken) {
        unsigned n = 0;
        uint64_t taken = 0;
        if (s->lock_ready) {
                pthread_mutex_lock(&s->lock);
                n = s->n;
                taken = s->taken;
                pthread_mutex_unlock(&s->lock);
        }
        *ret_taken = taken;
        return n;
}

/* One set a run: a build waiting behind it waits one set's time. */
static void fill_run(struct slow_job *job) {
        struct spare_regions *s = (struct spare_regions *)((char *)job - offsetof(struct spare_regions, job));
        struct hbgd *d = job->userdata;
        /* With the sets, a wake page for the next uid new here (a uid's
         * first session makes one otherwise: about 70 us; failing, it
         * still does). */
        if (s->want > 0)
                (void)engine_wake_page_ahead(d->engine);
        else
                engine_wake_page_drop_ahead(d->engine); /* none kept after a reload to 0 */
        pthread_mutex_lock(&s->lock);
        drop_locked(s, &s->want_g, s->want);
        s->g = s->want_g;
        bool more = s->n < s->want;
        uint64_t serial = s->made;
        pthread_mutex_unlock(&s->lock);
        s->result = 0;
        if (!more)
                return;
        /* Made unlocked: only this job adds sets, and builds take none of
         * it until it is in set[]. */
        char label[32];
        snprintf(label, sizeof(label), "ahead-%" PRIu64, serial);
        struct session_regions r;
        const char *why = NULL;
        int err = session_regions_make(&r, &s->want_g, label, 0, &why);
        if (err < 0) {
                s->result = err;
                return;
        }
        pthread_mutex_lock(&s->lock);
        s->set[s->n++] = r;
        s->made++;
        s->result = s->n < s->want;
        pthread_mutex_unlock(&s->lock);
}

static void fill_done(struct slow_job *job) {
        struct hbgd *d = job->userdata;
        struct spare_regions *s = &d->regions;
        s->queued = false;
        s->failed = s->result < 0;
        if (s->result < 0) {
                /* Out of fds or memory: sessions make theirs at their
                 * build; tried again at the next session's set-up, or when
                 * a session is freed (spare_regions_retry()), or now if one
                 * was meanwhile (again). Logged once until a fill is
                 * complete. */
                if (s->logged != s->result)
                        hbgd_log(LOG_NOTICE, "spare regions: cannot make a session's regions ahead: %s; "
                                 "sessions make their own (tried again when a session is set up or freed)",
                                 strerror(-s->result));
                s->logged = s->result;
                if (s->again)
                        spare_regions_want(d); /* clears again: no loop */
                return;
        }
        if (s->result == 0)
                s->logged = 0;
        if (s->result > 0 || s->again)
                spare_regions_want(d);
}

void spare_regions_want(struct hbgd *d) {
        struct spare_regions *s = &d->regions;
        if (s->queued) {
                s->again = true;
                return;
        }
        s->again = false;
        if (d->stopping || !d->slow || !s->lock_ready)
                return;
        char msg[256];
        const struct hbg_geometry_request defaults = { 0 };
        if (session_geometry(&d->cfg, &defaults, &s->want_g, msg, sizeof(msg)) < 0)
                return; /* the config's defaults were checked at load: cannot happen */
        s->want = d->cfg.spare_regions;
        s->job = (struct slow_job){
                .run = fill_run,
                .done = fill_done,
                .uid = 0,
                .class = SLOW_BACKGROUND,
                .userdata = d,
        };
        s->queued = true;
        slow_work_submit(d->slow, &s->job);
}

void spare_regions_retry(struct hbgd *d) {
        /* A run still queued or under way may fail for the fds just given
         * back (made while the session held them, its end seen after this
         * close): asked again, it is run once more after that one. */
        if (d->regions.failed || d->regions.queued)
                spare_regions_want(d);
}

void spare_regions_stop(struct hbgd *d) {
        struct spare_regions *s = &d->regions;
        if (s->queued && d->slow)
                slow_work_cancel(d->slow, &s->job);
        s->queued = false;
        if (!s->lock_ready)
                return;
        pthread_mutex_lock(&s->lock);
        drop_locked(s, NULL, 0);
        pthread_mutex_unlock(&s->lock);
        pthread_mutex_destroy(&s->lock);
        s->lock_ready = false;
}
