/* SPDX-License-Identifier: MIT */
/*
 * hbgd's log: the journal with structured fields when stderr is the
 * journal's stream, else stderr lines with <N> priority prefixes. Lines
 * about one session are rate limited, so a misbehaving client cannot flood
 * the log. Any thread may log.
 */
#pragma once

#include <stdarg.h>
#include <stdint.h>
#include <sys/types.h>

void hbgd_log(int priority, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* A line about session `session` of process pid / user uid: journal fields
 * HBG_SESSION, HBG_PID, HBG_UID, and the per-session rate limit. */
void hbgd_log_session(int priority, uint64_t session, int pid, uid_t uid, const char *fmt, ...)
        __attribute__((format(printf, 5, 6)));
/* The engine's log callback (struct hbg_engine_config.log). */
void hbgd_log_engine(void *userdata, int priority, const char *fmt, va_list ap)
        __attribute__((format(printf, 3, 0)));
/* Drop lines less important than `priority` (LOG_ERR .. LOG_DEBUG). */
void hbgd_set_log_level(int priority);
/* Report the lines a finished rate-limit window suppressed (call now and
 * then, e.g. from a timer). */
void hbgd_log_flush_suppressed(void);
