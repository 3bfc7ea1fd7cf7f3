/* SPDX-License-Identifier: MIT */
/*
 * The session's primitives, which everything else in the library builds
 * on: whether a client is usable, the heap bounds, publishing and the
 * doorbell, the completion channel, and the control socket's health.
 */
#include <errno.h>
#include <linux/futex.h>
#include <sched.h>
#include <poll.h>
#include <sys/syscall.h>
#include <sys/socket.h>
#include <unistd.h>

#include "libclient/client_private.h"
#include "libclient/errors.h"
#include "libclient/hangup.h"
#include "libclient/session.h"
#include "proto/wire.h"
#include "common/clock.h"

int hbgc_recv_env(int sock, int timeout_ms, Hbg__Envelope **env, int *fds, unsigned max_fds,
                  unsigned *nfds) {
        int64_t deadline = clock_now_ns() + (int64_t)timeout_ms * 1000000;
        for (;;) {
                int err = wire_recv(sock, HBG_WIRE_MAX_MSG_DEFAULT, env, fds, max_fds, nfds);
                if (err != -EAGAIN)
                        return err;
                int64_t left = (deadline - clock_now_ns()) / 1000000;
                if (left <= 0)
                        return -ETIMEDOUT;
                struct pollfd p = { .fd = sock, .events = POLLIN };
                if (poll(&p, 1, (int)left) < 0 && errno != EINTR)
                        return -errno;
        }
}

/* An Error envelope from hbgd: its code (negative, else -EPROTO) and text.
 * The message begins "hbgd refused": the Python binding tells hbgd's
 * refusals of a connect from local failures by it (python/src/client.c
 * connect_error(); test_api's connect tests check both). */
int hbgc_daemon_error(hbg_client *c, const Hbg__Error *e, const char *when) {
        int code = e->code < 0 && e->code >= -4095 ? e->code : -EPROTO;
        return hbgc_fail(c, code, "hbgd refused the %s: %s", when,
                         e->message && e->message[0] ? e->message : hbg_strerror(code));
}

/* ---------------------------------------------------------------- checks */

int hbgc_unusable(hbg_client *c, const char *fn) {
        if (!c)
                return -EINVAL;
        if (hbgc_in_host(c))
                return hbgc_fail(c, -EDEADLK, "%s: called from a host function of this client", fn);
        if (c->dead)
                return hbgc_fail(c, -ECONNRESET, "%s: hbgd went away", fn);
        return 0;
}

int hbgc_check_alive_slow(hbg_client *c, const char *fn) {
        if (c->dead)
                return hbgc_fail(c, -ECONNRESET, "%s: hbgd went away", fn);
        if (hbgc_hangup_quiet(c))
                return 0;
        if (hbgc_check_socket(c) < 0)
                return hbgc_fail(c, -ECONNRESET, "%s: hbgd went away", fn);
        if (c->hangup.later)
                hbgc_hangup_start(c); /* the first ask: from now on a look is a load */
        else
                hbgc_hangup_rearm(c);
        return 0;
}

bool hbgc_in_heap(const hbg_client *c, uint64_t offset, uint64_t bytes) {
        uint64_t end;
        return bytes > 0 && !__builtin_add_overflow(offset, bytes, &end) && end <= c->g.heap_size;
}

/* ---------------------------------------------------------------- publish */

static int doorbell_send(hbg_client *c, bool check);

void hbgc_doorbell_send(hbg_client *c) {
        (void)doorbell_send(c, false);
}

void hbgc_doorbell(hbg_client *c) {
        /* seq_cst: the load after our seq_cst stores of the cursors,
         * against the engine's "store need_wakeup; re-read" (§9.4). */
        (void)hbgc_ring(c, atomic_load_explicit(&c->ch->need_wakeup, memory_order_seq_cst) != 0);
}

void hbgc_drain_completion(hbg_client *c) {
        char buf[64];
        for (unsigned i = 0; i < 64 && read(c->completion_fd, buf, sizeof(buf)) > 0; i++)
                ;
}

/* EAGAIN: rings are queued already, hbgd wakes anyway; MSG_NOSIGNAL:
 * hbgd gone is an error, not a SIGPIPE. With check, a closed peer
 * (ECONNREFUSED for a datagram pair) is confirmed on the control socket,
 * which also reads hbgd's last words. */
static int doorbell_send(hbg_client *c, bool check) {
        char one = 1;
        if (send(c->doorbell_fd, &one, 1, MSG_DONTWAIT | MSG_NOSIGNAL) < 0 && errno != EAGAIN &&
            errno != EINTR && check && hbgc_check_socket(c) < 0)
                return -ECONNRESET;
        return 0;
}

/*
 * hbgd sleeps (NEED_WAKEUP was set after our seq_cst publish): wake a
 * parked scheduler thread directly, FUTEX_WAKE on the wake page's word
 * (a shared futex: it works on our read-only mapping; we write nothing),
 * so that it starts at once. On our uid's own page, a wake that woke
 * somebody woke one of hbgd's threads (only a client of our uid could
 * wait on that word instead), which visits every ring after it woke and
 * sees our publish: that is enough. Otherwise (it woke nobody: a thread
 * between its re-check and its wait is not asleep yet; or the page is
 * shared with other uids, whose clients may wait on the word and take
 * the wake) ring the doorbell too: its kick reaches hbgd's private word,
 * which no client can touch (RUNTIME_LOGIC.md §9.4). A trusted wake is
 * confirmed before this client sleeps (hbgc_ring_confirm), so that even
 * a client of our uid that takes our wakes delays our graphs, no more;
 * a client whose event loop sleeps on hbg_client_fd() trusts no wake.
 */
int hbgc_ring(hbg_client *c, bool ring) {
        if (!ring)
                return 0;
        long woke = c->wake_page ? syscall(SYS_futex, &c->wake_page->word, FUTEX_WAKE, c->wake_n, NULL, NULL, 0) : 0;
        if (woke > 0 && atomic_load_explicit(&c->wake_trust, memory_order_relaxed)) {
                /* Release: the thread that confirms (acquire) reads
                 * need_wakeup after our publish and our read of it. */
                atomic_store_explicit(&c->wake_unconfirmed_ns, clock_now_ns(), memory_order_release);
                /* hbg_client_fd() on another thread turned trust off
                 * (seq_cst), then confirmed: either it sees our mark or
                 * we see trust off, and confirm ourselves. */
                atomic_thread_fence(memory_order_seq_cst);
                if (!atomic_load_explicit(&c->wake_trust, memory_order_relaxed))
                        hbgc_ring_confirm(c, 0);
        } else if (doorbell_send(c, true) < 0) {
                return -ECONNRESET;
        }
        /* A thread our wake woke may have been put on this CPU: let it
         * run now rather than after our wait's pure spin (free when it
         * went to another one). */
        if (woke > 0)
                sched_yield();
        return 0;
}

int hbgc_publish(hbg_client *c) {
        return hbgc_ring(c, producer_publish(&c->prod));
}

/* An awake hbgd thread clears need_wakeup (seq_cst) before it looks at
 * the ring's work. Still set when this client is about to sleep: the wake
 * we trusted reached no hbgd thread (a waiter of our uid's took it), or
 * one that has not looked at our ring since; the doorbell makes sure.
 * Set again by threads
 * that parked once more after our work: one doorbell too many, which
 * costs hbgd a look. Any thread of the client may confirm another's
 * wake (the exchange hands it to one). The byte is sent without the
 * socket check hbgc_ring makes: a worker never reads the socket, and a
 * hbgd gone is found by the caller's own checks. */
void hbgc_ring_confirm(hbg_client *c, int64_t min_age_ns) {
        int64_t at = atomic_load_explicit(&c->wake_unconfirmed_ns, memory_order_relaxed);
        if (at == 0 || (min_age_ns > 0 && clock_now_ns() - at < min_age_ns))
                return;
        /* About to sleep right after the wake (a worker that posted a
         * result): give the woken thread the few us it takes to clear
         * the flag, rather than ring for nothing. Bounded. */
        for (unsigned i = 0; i < 64 && min_age_ns == 0 && clock_now_ns() - at < HBGC_CONFIRM_GRACE_NS &&
                             atomic_load_explicit(&c->ch->need_wakeup, memory_order_relaxed);
             i++)
                sched_yield();
        if (!atomic_compare_exchange_strong_explicit(&c->wake_unconfirmed_ns, &at, 0, memory_order_acq_rel,
                                                     memory_order_relaxed))
                return; /* another thread took it, or a newer wake came: its own turn */
        if (atomic_load_explicit(&c->ch->need_wakeup, memory_order_seq_cst))
                (void)doorbell_send(c, false);
}

/* ---------------------------------------------------------------- socket */

/* hbgd's end of the completion pipe closes when hbgd's process exits (or
 * frees the session): POLLHUP on ours. The control socket alone is not
 * enough: hbgd's io_uring holds a reference to its end, which the kernel
 * drops in the background some time after the process died. */
#define HBGC_MESSAGES_PER_CHECK 64

int hbgc_check_socket(hbg_client *c) {
        if (c->dead)
                return -ECONNRESET;
        for (unsigned i = 0; i < HBGC_MESSAGES_PER_CHECK; i++) {
                struct pollfd p[2] = {
                        { .fd = c->sock, .events = POLLIN | POLLRDHUP },
                        { .fd = c->completion_fd, .events = 0 }, /* POLLHUP only */
                };
                int n = poll(p, 2, 0);
                if (n <= 0)
                        return 0;
                bool gone = (p[0].revents & (POLLHUP | POLLRDHUP | POLLERR | POLLNVAL)) ||
                            (p[1].revents & (POLLHUP | POLLERR | POLLNVAL));
                if (p[0].revents & POLLIN) {
                        /* Read what hbgd said before it went away. */
                        Hbg__Envelope *env = NULL;
                        int fds[HBG_WIRE_MAX_FDS];
                        unsigned nfds = 0;
                        int err = wire_recv(c->sock, HBG_WIRE_MAX_MSG_DEFAULT, &env, fds, 0, &nfds);
                        if (err == 0) {
                                if (env->msg_case == HBG__ENVELOPE__MSG_ERROR)
                                        hbgc_daemon_error(c, env->error, "session");
                                wire_free(env);
                                continue;
                        }
                        /* -EAGAIN, or a record we cannot use (dropped) */
                        if (err != -ECONNRESET && !gone)
                                return 0;
                } else if (!gone) {
                        return 0;
                }
                c->dead = true;
                return -ECONNRESET;
        }
        return 0; /* more to read: the next look goes on */
}
