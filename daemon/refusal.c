/* SPDX-License-Identifier: MIT */
/*
 * Refused connections (docs/PROTOCOL.md, "Refused connections"). A peer
 * hbgd will not serve (not allowed, over a connection limit, hbgd
 * stopping) gets an Error record with the reason at once and the end of
 * hbgd's side (shutdown SHUT_WR); then hbgd keeps the connection for a
 * moment, reading and dropping what the client sent, until the client
 * closes it. Why not close at once: the client has usually sent its hello
 * (libhbgclient its session request too) before hbgd accepted it, and on
 * Linux a unix socket closed with records unread makes the peer's next
 * send or receive fail with ECONNRESET, and a send after the close with
 * EPIPE, before it has read the Error (the record stays queued behind the
 * error). Waiting for the client's close, every client reads the reason
 * first, whichever order things happen in.
 *
 * Bounded, so that refusals cost hbgd little whoever asks for them
 * (docs/SECURITY.md):
 *   - REFUSALS_HELD connections are kept at once, all users together;
 *     past that a refused connection is drained of what is already queued
 *     and closed at once (libhbgclient and hbgctl still find the Error
 *     behind the reset);
 *   - each is kept REFUSAL_LINGER_MS at most, or handshake_timeout_ms if
 *     that is shorter;
 *   - REFUSAL_MAX_RECORDS records are read from one, any fds they carry
 *     closed unread; a client that sends more is closed.
 * A held refusal counts against none of [limits]: it is no connection of
 * its user's (max_connections_per_uid refusals would otherwise refuse
 * themselves). Refusals are logged [log] ratelimit_burst per
 * ratelimit_interval_ms at most, the rest counted in the next line: a
 * refused user cannot flood the journal.
 */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <syslog.h>
#include <unistd.h>

#include "daemon/daemon_private.h"
#include "daemon/refusal.h"
#include "daemon/tick.h"
#include "daemon/log.h"
#include "daemon/metrics.h"
#include "proto/wire.h"
#include "common/clock.h"

#define REFUSALS_HELD 16
#define REFUSAL_LINGER_MS 2000
#define REFUSAL_MAX_RECORDS 16

static void log_refusal(struct hbgd *d, const struct ucred *cr, int code, const char *why) {
        unsigned unlogged;
        if (!hbgd_ratelimit_allow(&d->refusal_log, clock_now_ms(), &unlogged))
                return;
        char more[64] = "";
        if (unlogged)
                snprintf(more, sizeof(more), " (%u earlier refusals not logged)", unlogged);
        hbgd_log_fields(LOG_NOTICE,
                        &(struct hbg_log_fields){ .pid = (int)cr->pid, .has_uid = true,
                                                  .uid = (uint32_t)cr->uid, .err = code },
                        "refused pid %d uid %u: %s%s", (int)cr->pid, (unsigned)cr->uid, why, more);
        if (code == -EACCES && hbgd_log_enabled(LOG_DEBUG)) {
                /* The rule it failed, in numbers (no name lookups here:
                 * docs/SECURITY.md). */
                char users[200] = "", groups[200] = "";
                size_t at = 0;
                for (unsigned i = 0; i < d->cfg.n_allowed_uids && at < sizeof(users); i++) {
                        int k = snprintf(users + at, sizeof(users) - at, "%s%u", i ? " " : "",
                                         (unsigned)d->cfg.allowed_uids[i]);
                        at += k > 0 ? (size_t)k : 0;
                }
                at = 0;
                for (unsigned i = 0; i < d->cfg.n_allowed_gids && at < sizeof(groups); i++) {
                        int k = snprintf(groups + at, sizeof(groups) - at, "%s%u", i ? " " : "",
                                         (unsigned)d->cfg.allowed_gids[i]);
                        at += k > 0 ? (size_t)k : 0;
                }
                hbgd_log_fields(LOG_DEBUG,
                                &(struct hbg_log_fields){ .pid = (int)cr->pid, .has_uid = true,
                                                          .uid = (uint32_t)cr->uid, .err = code },
                                "refused pid %d uid %u by the rule [access] allowed_users = %s; allowed_groups = %s "
                                "(uids and gids; root is always allowed)",
                                (int)cr->pid, (unsigned)cr->uid, users[0] ? users : "(none)",
                                groups[0] ? groups : "(none)");
        }
}

/* Drop what the client has sent, up to its allowance. true: the client
 * closed, or sent too much, or the socket failed: close it now. */
static bool drain(struct refusal *r) {
        while (r->records < REFUSAL_MAX_RECORDS) {
                int got = wire_discard(r->sock);
                if (got == -EAGAIN)
                        return false;
                if (got <= 0)
                        return true;
                r->records++;
        }
        return true;
}

static void refusal_close(struct refusal *r) {
        struct hbgd *d = r->d;
        for (struct refusal **p = &d->refusals; *p; p = &(*p)->next)
                if (*p == r) {
                        *p = r->next;
                        break;
                }
        d->n_refusals--;
        /* The loop skips a deleted source for the rest of the round and
         * never calls it again: r can go at once. */
        io_source_del(d->loop, r->src);
        close(r->sock);
        free(r);
}

static void on_readable(struct io_source *src, uint32_t events, void *userdata) {
        struct refusal *r = userdata;
        (void)src;
        if (drain(r) || (events & (POLLHUP | POLLERR)))
                refusal_close(r);
}

/* Not held: what is queued is read, so the close resets nothing that is
 * already there; records still in flight may be. */
static void close_now(int fd) {
        struct refusal r = { .sock = fd };
        drain(&r);
        close(fd);
}

void refusal_start(struct hbgd *d, int fd, const struct ucred *cr, int code, const char *why) {
        metrics_count_refusal(&d->counters, code);
        log_refusal(d, cr, code, why);
        /* The socket's buffer is empty: a small record always fits. */
        wire_send_error(fd, code, why);
        shutdown(fd, SHUT_WR);
        struct refusal *r = NULL;
        if (d->n_refusals >= REFUSALS_HELD || !(r = calloc(1, sizeof(*r)))) {
                close_now(fd);
                return;
        }
        unsigned linger = d->cfg.handshake_timeout_ms < REFUSAL_LINGER_MS ? d->cfg.handshake_timeout_ms
                                                                          : REFUSAL_LINGER_MS;
        r->d = d;
        r->sock = fd;
        r->deadline_ms = clock_now_ms() + linger;
        if (io_loop_add(d->loop, fd, on_readable, r, &r->src) < 0) {
                free(r);
                close_now(fd);
                return;
        }
        r->next = d->refusals;
        d->refusals = r;
        d->n_refusals++;
        hbgd_tick_set(d, true);
}

void refusal_expire(struct hbgd *d, int64_t now_ms) {
        for (struct refusal *r = d->refusals, *next; r; r = next) {
                next = r->next;
                if (now_ms >= r->deadline_ms) {
                        drain(r);
                        refusal_close(r);
                }
        }
}

void refusal_close_all(struct hbgd *d) {
        while (d->refusals)
                refusal_close(d->refusals);
}
