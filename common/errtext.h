/* SPDX-License-Identifier: MIT */
/*
 * The words for an error code, one table for both sides: hbg_strerror()
 * returns them to a producer and hbgd's log lines use them, so that a
 * graph's failure reads the same in the journal and in the program
 * ("a task exceeded the stall limit ...", not "Timer expired" on one side
 * only). Codes without hbg's own wording fall back to strerror_r().
 */
#pragma once

#include <stddef.h>

/* hbg's wording for err (a negative errno, or 0), or NULL if it has none. */
const char *errtext_hbg(int err);

/* hbg's wording, else strerror's (written to buf when needed, any thread). */
const char *errtext(int err, char *buf, size_t len);

/* The same for hbgd's own log and replies, where a few of the client's
 * words would point at the wrong side: a session's -ECONNRESET is its
 * close ("hbgd went away" is what its client sees). */
const char *errtext_daemon(int err, char *buf, size_t len);
