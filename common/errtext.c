/* SPDX-License-Identifier: MIT */
/* The words for an error code (common/errtext.h). */
#include <errno.h>
#include <string.h>

#include "common/errtext.h"

static const struct {
        int err;
        const char *text;
} words[] = {
        { 0, "success" },
        { -EINVAL, "invalid argument" },
        { -ENOMEM, "out of memory (the session heap is full, or malloc failed)" },
        { -ENOENT, "not found (no such kernel, or no hbgd socket at that path)" },
        { -ETIMEDOUT, "timed out" },
        { -ETIME, "a task exceeded the stall limit or a kernel time budget" },
        { -ECONNRESET, "the session ended: hbgd went away, or closed it (hbgctl kill)" },
        { -ECONNREFUSED, "hbgd is not running (connection refused)" },
        { -EPROTO, "protocol error between libhbgclient and hbgd" },
        { -EPROTONOSUPPORT, "hbgd does not speak this protocol version" },
        { -ECANCELED, "cancelled (hbg_graph_cancel, hbgctl cancel), or skipped: a task it depends on failed" },
        { -ESHUTDOWN, "hbgd is shutting down" },
        { -EUSERS, "too many hbgd sessions or connections" },
        { -EDQUOT, "hbgd's memory budget (for this user, or in all) is used up" },
        { -EACCES, "this user may not use hbgd" },
        { -E2BIG, "above hbgd's configured limits (session size, or a task's work)" },
        { -ERANGE, "value out of range" },
        { -EOVERFLOW, "size or offset overflows" },
        { -EDEADLK, "called from a host function of the same client" },
        { -EBUSY, "busy" },
        { -ENAMETOOLONG, "socket path too long" },
};

const char *errtext_hbg(int err) {
        for (size_t i = 0; i < sizeof(words) / sizeof(words[0]); i++)
                if (words[i].err == err)
                        return words[i].text;
        return NULL;
}

const char *errtext_daemon(int err, char *buf, size_t len) {
        if (err == -ECONNRESET)
                return "the session closed (its client went away, or hbgctl kill)";
        return errtext(err, buf, len);
}

const char *errtext(int err, char *buf, size_t len) {
        const char *m = errtext_hbg(err);
        if (m)
                return m;
        /* GNU strerror_r: returns a string, maybe not buf. */
        m = strerror_r(err < 0 ? -err : err, buf, len);
        return m ? m : "unknown error";
}
