/* SPDX-License-Identifier: MIT */
/* The engine's log: the owner's callback, or stderr with <N> prefixes. */
#include <stdarg.h>
#include <stdio.h>

#include "daemon/engine/engine_private.h"

static void log_stderr(void *userdata, int priority, const char *fmt, va_list ap)
        __attribute__((format(printf, 3, 0)));
static void log_stderr(void *userdata, int priority, const char *fmt, va_list ap) {
        (void)userdata;
        char buf[1024];
        vsnprintf(buf, sizeof(buf), fmt, ap);
        fprintf(stderr, "<%d>%s\n", priority, buf);
}

void engine_log(struct hbg_engine *e, int priority, const char *fmt, ...) {
        va_list ap;
        va_start(ap, fmt);
        if (e->cfg.log)
                e->cfg.log(e->cfg.log_userdata, priority, fmt, ap);
        else
                log_stderr(NULL, priority, fmt, ap);
        va_end(ap);
}
