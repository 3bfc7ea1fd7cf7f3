/* SPDX-License-Identifier: MIT */
/* Messages: hbg_strerror(), hbg_version(), hbg_last_error(). */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "common/errtext.h"
#include "libclient/client_private.h"
#include "libclient/errors.h"

/* hbg_connect() has no client to keep its message in before it succeeds:
 * a failing connect leaves it here, per thread (hbg_last_error(NULL)). */
static _Thread_local char connect_error[HBGC_ERROR_MAX];

HBG_EXPORT const char *hbg_version(void) {
        return HBG_VERSION;
}

HBG_EXPORT int hbg_version_check(unsigned major, unsigned minor) {
        return major == HBG_VERSION_MAJOR && minor <= HBG_VERSION_MINOR ? 0 : -ENOTSUP;
}

/* Any thread, any time: the words are constant (common/errtext.c, which
 * hbgd's log shares); the fallback uses a per-thread buffer (valid until
 * this thread's next call). */
HBG_EXPORT const char *hbg_strerror(int err) {
        static _Thread_local char buf[128];
        return errtext(err, buf, sizeof(buf));
}

_Thread_local struct hbgc_thread hbgc_self __attribute__((tls_model("initial-exec")));

/* Where c's message goes on this thread: a worker thread keeps its own
 * (the caller's threads use c->last_error meanwhile). */
static char *error_buffer(const hbg_client *c) {
        if (!c)
                return connect_error;
        if (hbgc_self.worker_of == c)
                return hbgc_self.error;
        return (char *)c->last_error;
}

HBG_EXPORT const char *hbg_last_error(const hbg_client *c) {
        return error_buffer(c);
}

void hbgc_set_error(hbg_client *c, const char *msg) {
        char *dst = error_buffer(c);
        snprintf(dst, HBGC_ERROR_MAX, "%s", msg ? msg : "");
}

int hbgc_fail(hbg_client *c, int err, const char *fmt, ...) {
        char *dst = error_buffer(c);
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(dst, HBGC_ERROR_MAX, fmt, ap);
        va_end(ap);
        return err;
}
