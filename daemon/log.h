/* SPDX-License-Identifier: MIT */
/*
 * hbgd's log (docs/OPERATIONS.md, "Logs"). Lines go to the journal with
 * structured fields (its native protocol) when stderr is the journal's
 * stream or [log] journal_socket names a socket, else to stderr: plain
 * "hbgd: ..." lines on a terminal, "<N>hbgd: ..." priority prefixes on a
 * pipe or file. Lines about one session are rate limited, so a
 * misbehaving client cannot flood the log. Any thread may log.
 */
#pragma once

#include <stdbool.h>

#include <stdarg.h>
#include <stdint.h>
#include <sys/types.h>

#include "daemon/engine/engine.h"

void hbgd_log(int priority, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* A line about session `session` of process pid / user uid: journal fields
 * HBG_SESSION, HBG_PID, HBG_UID, and the per-session rate limit. */
void hbgd_log_session(int priority, uint64_t session, int pid, uid_t uid, const char *fmt, ...)
        __attribute__((format(printf, 5, 6)));
/* A line with structured fields (struct hbg_log_fields: session, pid, uid,
 * graph, task, kernel, errno), rate limited per session if it names one. */
void hbgd_log_fields(int priority, const struct hbg_log_fields *f, const char *fmt, ...)
        __attribute__((format(printf, 3, 4)));
/* The engine's log callback (struct hbg_engine_config.log). */
void hbgd_log_engine(void *userdata, int priority, const struct hbg_log_fields *f, const char *fmt,
                     va_list ap) __attribute__((format(printf, 4, 0)));
/* Drop lines less important than `priority` (LOG_ERR .. LOG_DEBUG). */
void hbgd_set_log_level(int priority);
/* Send every line to the journal's native protocol on the AF_UNIX datagram
 * socket at `path` ([log] journal_socket); "" restores the default (the
 * journal when stderr is its stream, else stderr). A line that cannot be
 * sent there goes to stderr. */
void hbgd_log_set_journal_socket(const char *path);
/* Lines about one session: `burst` per `interval_ms` at most, the rest
 * counted in one "messages suppressed" line ([log] ratelimit_interval_ms,
 * ratelimit_burst); interval 0 logs them all. */
void hbgd_log_set_ratelimit(unsigned interval_ms, unsigned burst);
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
