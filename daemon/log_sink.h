/* SPDX-License-Identifier: MIT */
/*
 * The log's sinks and its writer thread (daemon/log_sink.c): the journal's
 * native protocol or stderr, a bounded queue, one writer. For the log's
 * own modules (log.c, log_limit.c); the rest of hbgd uses log.h, whose
 * hbgd_log_start(), _stop(), _sync(), _dropped() and
 * hbgd_log_set_journal_socket() this file defines.
 */
#pragma once

#include "daemon/log.h"

/* The longest line, its message (longer ones are cut). */
#define LOG_LINE_MAX 1024

/* The log's one lock: the sink, the queue, the rate limits' windows. */
void log_sink_lock(void);
/* Unlock, then wake the writer if a line was queued meanwhile. */
void log_sink_unlock(void);
/* Under the lock: queue the line for the writer, or write it now when
 * there is none. Never waits for a write while a writer runs. */
void log_sink_emit_locked(int priority, const struct hbg_log_fields *f, const char *msg);
