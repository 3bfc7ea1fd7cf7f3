/* SPDX-License-Identifier: MIT */
/*
 * The log's rate limits (daemon/log_limit.h): lines about one session (a
 * line naming a struct hbg_log_limit) are held to log_burst per
 * log_interval_ms per session, and the lines of all sessions of one uid
 * (root excepted) to log_burst_uid per log_interval_ms; the windows live in
 * the session's limit object and in an entry per uid found by exact match,
 * so no other session can reset them. What a window left out is reported
 * in one "N messages suppressed" line when the next window starts (or the
 * session ends). Under the log's lock (log_sink.h).
 */
#include "daemon/log_limit.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <syslog.h>

#include "daemon/log_sink.h"
#include "common/clock.h"

static unsigned log_interval_ms = 10000, log_burst = 10, log_burst_uid = 50; /* [log] ratelimit_* */

/* The lines of one uid's sessions: found by exact uid; kept while a
 * session of the uid exists and until its window is over, so that closing
 * and reopening sessions does not start a new window. */
struct log_uid {
        struct log_uid *next;    /* log_uids */
        uid_t uid;
        unsigned refs;           /* limits pointing here */
        struct hbgd_ratelimit rl;
};

struct hbg_log_limit {
        struct hbg_log_limit *prev, *next; /* log_limits */
        unsigned refs;
        uint64_t session;
        int pid;
        uid_t uid;
        struct log_uid *user;    /* NULL for root: per-uid limits spare it */
        struct hbgd_ratelimit rl;
};

/* Under the log's lock. */
static struct hbg_log_limit *log_limits;
static struct log_uid *log_uids;

/* Start rl's next window if its current one is over: what the one that
 * ended left out (0 if none ended or it left nothing out). */
static unsigned window_roll(struct hbgd_ratelimit *rl, int64_t now) {
        if (now - rl->window_start_ms < log_interval_ms)
                return 0;
        unsigned ended = rl->suppressed;
        *rl = (struct hbgd_ratelimit){ .window_start_ms = now };
        return ended;
}

static void report_session(const struct hbg_log_limit *l, unsigned n) {
        char msg[128];
        struct hbg_log_fields f = { .session = l->session, .pid = l->pid, .has_uid = true, .uid = (uint32_t)l->uid };
        snprintf(msg, sizeof(msg), "session %" PRIu64 ": %u messages suppressed", l->session, n);
        log_sink_emit_locked(LOG_NOTICE, &f, msg);
}

static void report_uid(const struct log_uid *u, unsigned n) {
        char msg[128];
        struct hbg_log_fields f = { .has_uid = true, .uid = (uint32_t)u->uid };
        snprintf(msg, sizeof(msg), "uid %u: %u messages suppressed (the limit of all its sessions)",
                 (unsigned)u->uid, n);
        log_sink_emit_locked(LOG_NOTICE, &f, msg);
}

/* hbgd_ratelimit_allow() under the log's lock. */
static bool ratelimit_allow(struct hbgd_ratelimit *rl, int64_t now, unsigned *ret_ended) {
        *ret_ended = 0;
        if (log_interval_ms == 0)
                return true;
        *ret_ended = window_roll(rl, now);
        if (rl->count >= log_burst) {
                rl->suppressed++;
                return false;
        }
        rl->count++;
        return true;
}

bool hbgd_ratelimit_allow(struct hbgd_ratelimit *rl, int64_t now_ms, unsigned *ret_ended) {
        log_sink_lock();
        bool ok = ratelimit_allow(rl, now_ms, ret_ended);
        log_sink_unlock();
        return ok;
}

/* May a line about l's session go out now? Both windows must have room:
 * the session's own and its uid's; a line left out is counted in the
 * window that was full. Under the log's lock. */
bool log_limit_allow_locked(struct hbg_log_limit *l, int64_t now) {
        if (log_interval_ms == 0)
                return true;
        struct log_uid *u = l->user;
        unsigned ended = window_roll(&l->rl, now);
        if (ended)
                report_session(l, ended);
        if (u && (ended = window_roll(&u->rl, now)))
                report_uid(u, ended);
        if (l->rl.count >= log_burst) {
                l->rl.suppressed++;
                return false;
        }
        if (u && u->rl.count >= log_burst_uid) {
                u->rl.suppressed++;
                return false;
        }
        l->rl.count++;
        if (u)
                u->rl.count++;
        return true;
}

/* Report, and forget, the uids with no session left whose window is over.
 * Under the log's lock. */
static void uids_expire(int64_t now) {
        for (struct log_uid **p = &log_uids, *u; (u = *p);) {
                if (u->refs || now - u->rl.window_start_ms < log_interval_ms) {
                        p = &u->next;
                        continue;
                }
                if (u->rl.suppressed)
                        report_uid(u, u->rl.suppressed);
                *p = u->next;
                free(u);
        }
}

int hbgd_log_limit_new(struct hbg_log_limit **ret, uint64_t session, int pid, uid_t uid) {
        struct hbg_log_limit *l = calloc(1, sizeof(*l));
        if (!l)
                return -ENOMEM;
        *l = (struct hbg_log_limit){ .refs = 1, .session = session, .pid = pid, .uid = uid };
        log_sink_lock();
        if (uid != 0) {
                struct log_uid *u = log_uids;
                while (u && u->uid != uid)
                        u = u->next;
                if (!u) {
                        u = calloc(1, sizeof(*u));
                        if (!u) {
                                log_sink_unlock();
                                free(l);
                                return -ENOMEM;
                        }
                        u->uid = uid;
                        u->next = log_uids;
                        log_uids = u;
                }
                u->refs++;
                l->user = u;
        }
        l->next = log_limits;
        if (log_limits)
                log_limits->prev = l;
        log_limits = l;
        log_sink_unlock();
        *ret = l;
        return 0;
}

struct hbg_log_limit *hbgd_log_limit_ref(struct hbg_log_limit *l) {
        log_sink_lock();
        l->refs++;
        log_sink_unlock();
        return l;
}

struct hbg_log_limit *hbgd_log_limit_unref(struct hbg_log_limit *l) {
        if (!l)
                return NULL;
        log_sink_lock();
        if (--l->refs > 0) {
                log_sink_unlock();
                return NULL;
        }
        if (l->rl.suppressed)
                report_session(l, l->rl.suppressed);
        if (l->prev)
                l->prev->next = l->next;
        else
                log_limits = l->next;
        if (l->next)
                l->next->prev = l->prev;
        if (l->user) {
                l->user->refs--;
                uids_expire(clock_now_ms());
        }
        log_sink_unlock();
        free(l);
        return NULL;
}

struct hbg_log_fields hbgd_log_limit_fields(struct hbg_log_limit *l) {
        return (struct hbg_log_fields){ .session = l->session, .pid = l->pid, .has_uid = true,
                                        .uid = (uint32_t)l->uid, .limit = l };
}

/* Report what a window that ended suppressed, also for sessions and uids
 * that went quiet (from the io thread's timer). */
void hbgd_log_flush_suppressed(void) {
        int64_t now = clock_now_ms();
        log_sink_lock();
        for (struct hbg_log_limit *l = log_limits; l; l = l->next) {
                if (!l->rl.suppressed || now - l->rl.window_start_ms < log_interval_ms)
                        continue;
                report_session(l, l->rl.suppressed);
                l->rl = (struct hbgd_ratelimit){ .window_start_ms = now };
        }
        for (struct log_uid *u = log_uids; u; u = u->next) {
                if (!u->refs || !u->rl.suppressed || now - u->rl.window_start_ms < log_interval_ms)
                        continue;
                report_uid(u, u->rl.suppressed);
                u->rl = (struct hbgd_ratelimit){ .window_start_ms = now };
        }
        uids_expire(now);
        log_sink_unlock();
}

void hbgd_log_set_ratelimit(unsigned interval_ms, unsigned burst, unsigned burst_per_uid) {
        log_sink_lock();
        log_interval_ms = interval_ms;
        log_burst = burst ? burst : 1;
        log_burst_uid = burst_per_uid ? burst_per_uid : 1;
        log_sink_unlock();
}
