/* SPDX-License-Identifier: MIT */
/*
 * hbgd's log (docs/OPERATIONS.md, "Logs"). Lines go to the journal with
 * structured fields (its native protocol) when stderr is the journal's
 * stream or [log] journal_socket names a socket, else to stderr: plain
 * "hbgd: ..." lines on a terminal, "<N>hbgd: ..." priority prefixes on a
 * pipe or file. Lines about one session are rate limited per session and
 * per uid, so a misbehaving client cannot flood the log. Any thread may
 * log: a line is queued, and one writer thread (hbgd_log_start()) does the
 * writing, so a log that is not read never stops a scheduler or the io
 * thread (a full queue drops lines and counts them).
 */
#pragma once

#include <stdbool.h>

#include <stdarg.h>
#include <stdint.h>
#include <sys/types.h>

#include "daemon/engine/engine.h"

void hbgd_log(int priority, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* A line about the session of `l` (its journal fields HBG_SESSION, HBG_PID,
 * HBG_UID), under its rate limits. */
void hbgd_log_session(int priority, struct hbg_log_limit *l, const char *fmt, ...)
        __attribute__((format(printf, 3, 4)));
/* A line with structured fields (struct hbg_log_fields: session, pid, uid,
 * graph, task, kernel, errno), rate limited if it names a limit. */
void hbgd_log_fields(int priority, const struct hbg_log_fields *f, const char *fmt, ...)
        __attribute__((format(printf, 3, 4)));
/* The engine's log callback (struct hbg_engine_config.log). */
void hbgd_log_engine(void *userdata, int priority, const struct hbg_log_fields *f, const char *fmt,
                     va_list ap) __attribute__((format(printf, 4, 0)));
/* Drop lines less important than `priority` (LOG_ERR .. LOG_DEBUG). */
void hbgd_set_log_level(int priority);
/* Would a line of `priority` be logged ([log] level)? For lines whose
 * making costs something (LOG_DEBUG's detail). */
bool hbgd_log_enabled(int priority);
/* Send every line to the journal's native protocol on the AF_UNIX datagram
 * socket at `path` ([log] journal_socket); "" restores the default (the
 * journal when stderr is its stream, else stderr). A line that cannot be
 * sent there goes to stderr. */
void hbgd_log_set_journal_socket(const char *path);
/* Lines about one session: `burst` per `interval_ms` at most, and lines
 * about all sessions of one uid (root's excepted) `burst_per_uid`; the
 * rest counted in one "messages suppressed" line ([log]
 * ratelimit_interval_ms, ratelimit_burst, ratelimit_burst_per_uid);
 * interval 0 logs them all. */
void hbgd_log_set_ratelimit(unsigned interval_ms, unsigned burst, unsigned burst_per_uid);

/*
 * The rate-limit state of one session's lines (one connection's, from its
 * accept to the end of its session): its own window, and a reference to
 * its uid's, which every session of that uid shares. Named by
 * hbg_log_fields.limit in every line about the session, so no other
 * session can reset it. Reference counted: the connection and its
 * session's ring each hold one, because ring lines may come after the
 * connection closed. The last unref reports what the windows left out.
 * new: 0, or -ENOMEM. Calls from the io thread (any thread is safe).
 */
int hbgd_log_limit_new(struct hbg_log_limit **ret, uint64_t session, int pid, uid_t uid);
struct hbg_log_limit *hbgd_log_limit_ref(struct hbg_log_limit *l);
/* NULL is fine; returns NULL. */
struct hbg_log_limit *hbgd_log_limit_unref(struct hbg_log_limit *l);
/* The fields of a line about l's session (session, pid, uid, limit). */
struct hbg_log_fields hbgd_log_limit_fields(struct hbg_log_limit *l);

/*
 * The writer: hbgd_log_start() starts the thread that writes queued lines
 * (stderr and the journal); until then, and after hbgd_log_stop() joined
 * it, a line is written by the thread that logs it. stop waits up to
 * timeout_ms for the queue to drain (lines logged before a clean exit are
 * written), then returns 0, or -ETIMEDOUT leaving the writer blocked where
 * it is (lines are then queued or dropped, never written by the caller).
 * start: 0 or -errno.
 */
int hbgd_log_start(void);
int hbgd_log_stop(int timeout_ms);
/* Wait up to timeout_ms until every line queued so far is written (before
 * telling systemd the service is ready, so that startup lines come
 * first). 0, or -ETIMEDOUT. */
int hbgd_log_sync(int timeout_ms);
/* Lines dropped since start because the queue was full (hbgctl status). */
uint64_t hbgd_log_dropped(void);
/* One rate-limit window of [log] ratelimit_*: ratelimit_burst lines per
 * ratelimit_interval_ms, the rest counted. Zeroed: a window from time 0. */
struct hbgd_ratelimit {
        int64_t window_start_ms;
        unsigned count, suppressed;
};
/* May one more line of rl go out at now_ms? false: it is counted as
 * suppressed. *ret_ended: how many the window that ended here suppressed
 * (0 if none ended), for the caller to report. */
bool hbgd_ratelimit_allow(struct hbgd_ratelimit *rl, int64_t now_ms, unsigned *ret_ended);
/* Report the lines a finished rate-limit window suppressed (call now and
 * then, e.g. from a timer). */
void hbgd_log_flush_suppressed(void);
