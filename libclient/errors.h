/* SPDX-License-Identifier: MIT */
/* libclient/errors.c for the other files of libhbgclient: messages, and what the library knows of the calling thread. */
#pragma once

#include "libclient/client_private.h"

/* What the library knows of the calling thread (initial-exec TLS: one
 * load, also when the library is dlopen()ed, at a few bytes' cost). */
struct hbgc_thread {
        const hbg_client *in_host;   /* running a host function of this client */
        const hbg_client *worker_of; /* a worker thread of this client */
        char *error;                 /* a worker's last error (HBGC_ERROR_MAX bytes) */
};
extern _Thread_local struct hbgc_thread hbgc_self __attribute__((tls_model("initial-exec")));

/* Record a message for hbg_last_error(c) (c may be NULL: the calling
 * thread's connect message) and return err. */
int hbgc_fail(hbg_client *c, int err, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
void hbgc_set_error(hbg_client *c, const char *msg);
