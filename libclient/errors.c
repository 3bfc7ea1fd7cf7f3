/* SPDX-License-Identifier: MIT */
/* Messages: hbg_strerror(), hbg_version(), hbg_last_error(). */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "libclient/client_private.h"

/* hbg_connect() has no client to keep its message in before it succeeds:
 * a failing connect leaves it here, per thread (hbg_last_error(NULL)). */
static _Thread_local char connect_error[HBGC_ERROR_MAX];

HBG_EXPORT const char *hbg_version(void) {
        return HBG_VERSION;
}

HBG_EXPORT int hbg_version_check(unsigned major, unsigned minor) {
        return major == HBG_VERSION_MAJOR && minor <= HBG_VERSION_MINOR ? 0 : -ENOTSUP;
}

/* Our wording for the errors this library and hbgd return; strerror()'s
 * for everything else. */
static const char *our_message(int err) {
        switch (err) {
        case 0: return "success";
        case -EINVAL: return "invalid argument";
        case -ENOMEM: return "out of memory (the session heap is full, or malloc failed)";
        case -ENOENT: return "not found (no such kernel, or no hbgd socket at that path)";
        case -ETIMEDOUT: return "timed out";
        case -ETIME: return "a task exceeded the stall limit or a kernel time budget";
        case -ECONNRESET: return "hbgd went away (connection reset)";
        case -ECONNREFUSED: return "hbgd is not running (connection refused)";
        case -EPROTO: return "protocol error between libhbgclient and hbgd";
        case -EPROTONOSUPPORT: return "hbgd does not speak this protocol version";
        case -ECANCELED: return "skipped: a task it depends on failed";
        case -ESHUTDOWN: return "hbgd is shutting down";
        case -EUSERS: return "too many hbgd sessions or connections";
        case -EDQUOT: return "hbgd's memory budget (for this user, or in all) is used up";
        case -EACCES: return "this user may not use hbgd";
        case -E2BIG: return "above hbgd's configured limits (session size, or a task's work)";
        case -ERANGE: return "value out of range";
        case -EOVERFLOW: return "size or offset overflows";
        case -EDEADLK: return "called from a host function of the same client";
        case -EBUSY: return "busy";
        case -ENAMETOOLONG: return "socket path too long";
        default: return NULL;
        }
}

/* Any thread, any time: the static messages are constant; the fallback
 * uses a per-thread buffer (valid until this thread's next call). */
HBG_EXPORT const char *hbg_strerror(int err) {
        static _Thread_local char buf[128];
        const char *m = our_message(err);
        if (m)
                return m;
        int e = err < 0 ? -err : err;
        /* GNU strerror_r: returns a string, maybe not buf. */
        const char *s = strerror_r(e, buf, sizeof(buf));
        return s ? s : "unknown error";
}

HBG_EXPORT const char *hbg_last_error(const hbg_client *c) {
        return c ? c->last_error : connect_error;
}

void hbgc_set_error(hbg_client *c, const char *msg) {
        char *dst = c ? c->last_error : connect_error;
        snprintf(dst, HBGC_ERROR_MAX, "%s", msg ? msg : "");
}

int hbgc_fail(hbg_client *c, int err, const char *fmt, ...) {
        char *dst = c ? c->last_error : connect_error;
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(dst, HBGC_ERROR_MAX, fmt, ap);
        va_end(ap);
        return err;
}
