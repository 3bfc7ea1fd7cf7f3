/* SPDX-License-Identifier: MIT */
/*
 * Raw protocol records for the end-to-end tests: clients that do what
 * libhbgclient never would, on a SEQPACKET connection to a real hbgd.
 *   - with Check assertions (raw_connect .. expect_refusal,
 *     session_by_hand, status_reply), for a test's own thread;
 *   - results without assertions (cx_*), for forked children
 *     (tests/e2e/e2e_kid.h) and for callers that keep their own deadlines.
 * tests/e2e/e2e_util.h includes it.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "hbg.pb-c.h"
#include "tests/e2e/daemon_util.h"

/* ------------------------------------------------------------ raw protocol */

/* A SEQPACKET connection to path (asserts it connects). */
int raw_connect(const char *path);

#define RAW_MAX_FDS 32
/* A session reply's fds (protocol 1.5): submission and completion
 * regions, doorbell, completion channel, the wake page. */
#define SESSION_FDS 5u

/* One record of len bytes with nfds fds (SCM_RIGHTS). 0 or -errno. */
int raw_send(int fd, const void *buf, size_t len, const int *fds, unsigned nfds);
/* Pack env (into a malloc'd buffer the caller frees). */
uint8_t *pack_env(const Hbg__Envelope *env, size_t *len);
void send_env(int fd, const Hbg__Envelope *env, const int *fds, unsigned nfds);
void send_hello(int fd, uint32_t major, const int *fds, unsigned nfds);
/* The same, saying protocol minor `minor` (a client of another release). */
void send_hello_minor(int fd, uint32_t major, uint32_t minor, const int *fds, unsigned nfds);
void send_status_request(int fd, Hbg__StatusKind kind, const int *fds, unsigned nfds);
/* A RecordRequest of `tasks` tasks, with these fds (the recording's memfd). */
void send_record_request(int fd, uint64_t tasks, const int *fds, unsigned nfds);

enum rx_kind { RX_RECORD, RX_EOF, RX_TIMEOUT };

struct rx {
        enum rx_kind kind;
        Hbg__Envelope *env;     /* RX_RECORD; NULL if it did not unpack */
        size_t len;
        int fds[RAW_MAX_FDS];
        unsigned nfds;
        bool reset;             /* ECONNRESET was reported on the way */
};

/*
 * Next record, EOF or timeout. A peer closing with our data unread makes
 * the kernel report ECONNRESET once before the records still queued:
 * noted and read past, so an Error sent before the close is not lost.
 */
void rx(int fd, int timeout_ms, struct rx *r);
void rx_free(struct rx *r);
/* The next record must be an envelope of this case (not an Error). */
Hbg__Envelope *expect_env(int fd, Hbg__Envelope__MsgCase want, int *fds, unsigned want_fds);
/* A session asked for by hand on sock (hello done): its reply (the
 * caller frees it) and its fds. */
Hbg__Envelope *session_by_hand(int sock, int fds[SESSION_FDS]);
/* One status request of `kind` on fd (hello done): the reply, with the
 * daemon's part asserted; *env is for wire_free(). */
Hbg__StatusReply *status_reply(int fd, Hbg__StatusKind kind, Hbg__Envelope **env);

#define CLOSE_ERROR_REQUIRED 1   /* an Error record must come before EOF */
#define CLOSE_EOF_ONLY_OK 0      /* or hbgd may just close */

/* hbgd must answer Error{code} (or, with CLOSE_EOF_ONLY_OK, nothing) and
 * close the connection. */
void expect_refusal(struct hbgd_proc *d, int fd, int code, int required, const char *what);
/* hbgd must answer Error{code} with needle in its message within 20 s; the
 * connection stays open. */
void expect_error_stays(struct hbgd_proc *d, int fd, int code, const char *needle, const char *what);
/* Hello and hbgd's Hello back. */
void raw_hello(int fd);

/* ------------------------------------------------------------ results, no assertions */

/* For forked children (and the parent where it needs its own deadlines):
 * results, never Check assertions. */

/* A SEQPACKET connection to path: fd or -errno. */
int cx_connect(const char *path, bool nonblock);
/* Non-blocking connects, retried while the backlog is full. */
int cx_connect_until(const char *path, long long deadline_ms);
/* Send a Hello, a SessionRequest (task_window, heap_size; 0: defaults) or
 * a StatusRequest (STATUS_DAEMON). 0 or -errno. */
int cx_send(int fd, Hbg__Envelope__MsgCase what, uint64_t task_window, uint64_t heap_size);
/* The next record within timeout_ms (fds it carries are closed): 0 and
 * *ret (wire_free() it); -ECONNRESET at EOF; -ETIMEDOUT. A reset reported
 * before records still queued is read past (see rx()). */
int cx_recv(int fd, int timeout_ms, Hbg__Envelope **ret);
/* The next record must be `want`: 0, or -1 with why[] filled. */
int cx_expect(int fd, Hbg__Envelope__MsgCase want, int timeout_ms, char *why, size_t size);
/* Error{code} with a message containing `needle` (copied to why[]), then
 * EOF: 0, or -1 with why[] saying what came instead. */
int cx_expect_refusal(int fd, int code, const char *needle, int timeout_ms, char *why, size_t size);

/* n non-blocking connections to path (those refused are counted in
 * *ret_refused) into fds: how many are open. */
int open_many(const char *path, int *fds, unsigned n, unsigned *ret_refused);
