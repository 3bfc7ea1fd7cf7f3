/* SPDX-License-Identifier: MIT */
/* libclient/session.c for the other files of libhbgclient: usable?, heap bounds, publish, doorbell, socket health. */
#pragma once

#include "libclient/client_private.h"
#include "libclient/errors.h"

/* Is the calling thread inside a host function of c? One load of c when
 * none runs (the per-task entry points ask). */
static inline bool hbgc_in_host(const hbg_client *c) {
        return atomic_load_explicit(&c->hosts_running, memory_order_relaxed) != 0 && hbgc_self.in_host == c;
}

static inline uint64_t hbgc_watermark(const hbg_client *c) {
        return atomic_load_explicit(&c->ch->completed_watermark, memory_order_acquire);
}

static inline bool hbgc_task_done(hbg_client *c, uint64_t id) {
        return completer_flag_is_set(&c->completer, id);
}

/* Publish written tasks and ring the doorbell if hbgd sleeps. 0, or
 * -ECONNRESET when the doorbell found hbgd gone (c->dead set). */
int hbgc_publish(hbg_client *c);
/* Ring the doorbell when `ring` (the producer said hbgd sleeps). 0, or
 * -ECONNRESET when hbgd's end is closed (checked on the socket: c->dead). */
int hbgc_ring(hbg_client *c, bool ring);
/* Ring the doorbell if need_wakeup is set (seq_cst load). */
void hbgc_doorbell(hbg_client *c);
/* Send the doorbell's byte, whatever need_wakeup says, and no wake
 * through the wake page (the session's first ring: hbgd serves the
 * session from it on, protocol 1.6). A full or closed doorbell is left to
 * the next publish and the socket's checks. */
void hbgc_doorbell_send(hbg_client *c);
/* Before sleeping (min_age_ns 0), or in a check that does not sleep (a
 * wake at least min_age_ns old): ring the doorbell if a direct wake that
 * skipped it left need_wakeup set (no hbgd thread woke). */
void hbgc_ring_confirm(hbg_client *c, int64_t min_age_ns);
/* Within a non-blocking check, how old a trusted wake must be before it
 * is confirmed: a woken thread clears need_wakeup within a few us. */
#define HBGC_CONFIRM_AGE_NS 50000
/* Before a sleep, how long a trusted wake may take to be seen at most. */
#define HBGC_CONFIRM_GRACE_NS 20000
/* Read what hbgd wrote into the completion pipe (never blocks). */
void hbgc_drain_completion(hbg_client *c);
/* Receive one envelope from the control socket, waiting up to
 * timeout_ms: 0, -ETIMEDOUT or wire_recv()'s errors. */
struct Hbg__Envelope;
int hbgc_recv_env(int sock, int timeout_ms, struct Hbg__Envelope **env, int *fds, unsigned max_fds,
                  unsigned *nfds);
/* Non-blocking look at the socket and the completion pipe: 0, or
 * -ECONNRESET when hbgd hung up either (sets c->dead). An Error message
 * from hbgd becomes last_error. */
int hbgc_check_socket(hbg_client *c);
/* An Error envelope from hbgd: its code (negative, else -EPROTO), with
 * "hbgd refused the WHEN: message" as the last error. */
struct Hbg__Error;
int hbgc_daemon_error(hbg_client *c, const struct Hbg__Error *e, const char *when);
/* hbgc_usable() refusing: the first check that fails, its negative errno
 * and message (0 if none does). */
int hbgc_unusable(hbg_client *c, const char *fn);
/* The checks every entry point makes: c not NULL, not inside a host
 * function (this thread's, hbgc_self), connection not known dead. 0 or a
 * negative errno (message set). Inline: every hbg_graph_add() makes them,
 * and they pass; a refusal's message is out of line. */
static inline int hbgc_usable(hbg_client *c, const char *fn) {
        if (__builtin_expect(c && !hbgc_in_host(c) && !c->dead, 1))
                return 0;
        return hbgc_unusable(c, fn);
}
/* hbgc_check_alive() past its free look (libclient/hangup.h). */
int hbgc_check_alive_slow(hbg_client *c, const char *fn);
/* Is [offset, offset + bytes) a non-empty range inside the heap? */
bool hbgc_in_heap(const hbg_client *c, uint64_t offset, uint64_t bytes);
