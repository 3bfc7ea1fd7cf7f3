/* SPDX-License-Identifier: MIT */
/*
 * hbgd's log (daemon/log.h): its levels and entry points. A line passes
 * the level, then the rate limits (log_limit.c), then goes to the sink
 * (log_sink.c: the journal or stderr, through one writer thread), all
 * under one lock that no write is made under.
 */
#include "daemon/log.h"

#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <syslog.h>

#include "daemon/log_limit.h"
#include "daemon/log_sink.h"
#include "common/clock.h"

static _Atomic int log_level = LOG_INFO;

void hbgd_set_log_level(int priority) {
        atomic_store(&log_level, priority);
}

bool hbgd_log_enabled(int priority) {
        return priority <= atomic_load_explicit(&log_level, memory_order_relaxed);
}

static void log_v(int priority, const struct hbg_log_fields *f, const char *fmt, va_list ap)
        __attribute__((format(printf, 3, 0)));
static void log_v(int priority, const struct hbg_log_fields *f, const char *fmt, va_list ap) {
        static const struct hbg_log_fields none;
        if (priority > atomic_load_explicit(&log_level, memory_order_relaxed))
                return;
        if (!f)
                f = &none;
        char buf[LOG_LINE_MAX];
        vsnprintf(buf, sizeof(buf), fmt, ap);
        log_sink_lock();
        if (!f->limit || log_limit_allow_locked(f->limit, clock_now_ms()))
                log_sink_emit_locked(priority, f, buf);
        log_sink_unlock();
}

void hbgd_log(int priority, const char *fmt, ...) {
        va_list ap;
        va_start(ap, fmt);
        log_v(priority, NULL, fmt, ap);
        va_end(ap);
}

void hbgd_log_session(int priority, struct hbg_log_limit *l, const char *fmt, ...) {
        struct hbg_log_fields f = hbgd_log_limit_fields(l);
        va_list ap;
        va_start(ap, fmt);
        log_v(priority, &f, fmt, ap);
        va_end(ap);
}

void hbgd_log_fields(int priority, const struct hbg_log_fields *f, const char *fmt, ...) {
        va_list ap;
        va_start(ap, fmt);
        log_v(priority, f, fmt, ap);
        va_end(ap);
}

void hbgd_log_engine(void *userdata, int priority, const struct hbg_log_fields *f, const char *fmt, va_list ap) {
        (void)userdata;
        log_v(priority, f, fmt, ap);
}
