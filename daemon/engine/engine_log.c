/* SPDX-License-Identifier: MIT */
/* The engine's log: the owner's callback, or stderr with <N> prefixes. */
#include "daemon/engine/engine_log.h"

#include <stdarg.h>
#include <stdio.h>

#include "daemon/engine/engine_state.h"
#include "daemon/engine/ring.h"

static void log_stderr(int priority, const char *fmt, va_list ap) __attribute__((format(printf, 2, 0)));
static void log_stderr(int priority, const char *fmt, va_list ap) {
        char buf[1024];
        vsnprintf(buf, sizeof(buf), fmt, ap);
        fprintf(stderr, "<%d>%s\n", priority, buf);
}

static void log_v(struct hbg_engine *e, int priority, const struct hbg_log_fields *f, const char *fmt,
                  va_list ap) __attribute__((format(printf, 4, 0)));
static void log_v(struct hbg_engine *e, int priority, const struct hbg_log_fields *f, const char *fmt,
                  va_list ap) {
        if (e->cfg.log)
                e->cfg.log(e->cfg.log_userdata, priority, f, fmt, ap);
        else
                log_stderr(priority, fmt, ap);
}

void engine_log(struct hbg_engine *e, int priority, const struct hbg_log_fields *f, const char *fmt, ...) {
        static const struct hbg_log_fields none;
        va_list ap;
        va_start(ap, fmt);
        log_v(e, priority, f ? f : &none, fmt, ap);
        va_end(ap);
}

void engine_log_ring(struct hbg_ring *r, int priority, const struct hbg_log_fields *f, const char *fmt, ...) {
        /* The owner's fields (session, pid, uid), then the line's own. */
        struct hbg_log_fields all = r->log_fields;
        if (f) {
                if (f->has_graph)
                        all.has_graph = true, all.graph = f->graph;
                if (f->has_task)
                        all.has_task = true, all.task = f->task;
                if (f->kernel)
                        all.kernel = f->kernel;
                if (f->err)
                        all.err = f->err;
        }
        va_list ap;
        va_start(ap, fmt);
        log_v(r->engine, priority, &all, fmt, ap);
        va_end(ap);
}
