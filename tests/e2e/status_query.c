/* SPDX-License-Identifier: MIT */
/* hbgd's liveness and its state from status replies, for the end-to-end
 * tests: tests/e2e/status_query.h. */
#include "tests/e2e/status_query.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "proto/wire.h"
#include "tests/e2e/e2e_util.h"

void wait_slow_work_idle(struct hbgd_proc *d) {
        int fd = raw_connect(d->socket_path);
        D_ASSERT(d, fd >= 0, "cannot connect to hbgd");
        raw_hello(fd);
        unsigned idle = 0;
        for (int i = 0; i < 3000 && idle < 2; i++) {
                send_status_request(fd, HBG__STATUS_KIND__STATUS_DAEMON, NULL, 0);
                Hbg__Envelope *e = expect_env(fd, HBG__ENVELOPE__MSG_STATUS_REPLY, NULL, 0);
                idle = e->status_reply->daemon && e->status_reply->daemon->slow_jobs == 0 ? idle + 1 : 0;
                wire_free(e);
                if (idle < 2)
                        sleep_us(10000);
        }
        close(fd);
        D_ASSERT(d, idle >= 2, "hbgd's slow-work thread still busy after 30 s");
}

/* A fresh connection gets hbgd's Hello and a status reply within bound_ms.
 * Returns the milliseconds it took. With *ret_shed, a connection hbgd
 * closes unanswered (shed while it is out of descriptors) is retried, and
 * counted there. */
long long fresh_status_shed(struct hbgd_proc *d, int bound_ms, const char *what, unsigned *ret_shed) {
        long long t0 = daemon_now_ms(), deadline = t0 + bound_ms;
        char why[256] = "";
        int r;
        for (;;) {
                why[0] = 0;
                int fd = cx_connect_until(d->socket_path, deadline);
                D_ASSERT(d, fd >= 0, "%s: cannot connect to hbgd within %d ms: %s", what, bound_ms, strerror(-fd));
                r = cx_send(fd, HBG__ENVELOPE__MSG_HELLO, 0, 0);
                if (r == 0)
                        r = cx_expect(fd, HBG__ENVELOPE__MSG_HELLO, (int)(deadline - daemon_now_ms()), why,
                                      sizeof(why));
                bool shed = r != 0 && (strcmp(why, "no reply: EOF") == 0 || r == -EPIPE || r == -ECONNRESET);
                if (r == 0 && (r = cx_send(fd, HBG__ENVELOPE__MSG_STATUS_REQUEST, 0, 0)) == 0)
                        r = cx_expect(fd, HBG__ENVELOPE__MSG_STATUS_REPLY, (int)(deadline - daemon_now_ms()), why,
                                      sizeof(why));
                close(fd);
                if (!(shed && ret_shed && daemon_now_ms() < deadline))
                        break;
                ++*ret_shed;
                sleep_us(1000);
        }
        long long took = daemon_now_ms() - t0;
        D_ASSERT(d, r == 0, "%s: a fresh client got no hello and status reply within %d ms: %s", what, bound_ms,
                 why[0] ? why : strerror(-r));
        return took;
}

long long fresh_status(struct hbgd_proc *d, int bound_ms, const char *what) {
        return fresh_status_shed(d, bound_ms, what, NULL);
}

/* One status request on fd (hello done): the reply (free it). */
Hbg__Envelope *status_of(struct hbgd_proc *d, int fd, Hbg__StatusKind kind) {
        Hbg__Envelope env = HBG__ENVELOPE__INIT;
        Hbg__StatusRequest rq = HBG__STATUS_REQUEST__INIT;
        rq.kind = kind;
        env.msg_case = HBG__ENVELOPE__MSG_STATUS_REQUEST;
        env.status_request = &rq;
        int err = wire_send(fd, &env, NULL, 0, HBG_WIRE_MAX_MSG_DEFAULT);
        D_ASSERT(d, err == 0, "status request: %s", strerror(-err));
        Hbg__Envelope *r = NULL;
        err = cx_recv(fd, IO_MS, &r);
        D_ASSERT(d, err == 0, "no status reply: %s", strerror(-err));
        D_ASSERT(d, r->msg_case == HBG__ENVELOPE__MSG_STATUS_REPLY, "status request answered with message %d",
                 (int)r->msg_case);
        return r;
}

Hbg__Envelope *daemon_status_fresh(struct hbgd_proc *d) {
        int sock = raw_connect(d->socket_path);
        raw_hello(sock);
        Hbg__Envelope *e = status_of(d, sock, HBG__STATUS_KIND__STATUS_DAEMON);
        close(sock);
        return e;
}

unsigned spare_regions_now(struct hbgd_proc *d, uint64_t *ret_taken) {
        Hbg__Envelope *e = daemon_status_fresh(d);
        unsigned n = e->status_reply->daemon->spare_regions;
        *ret_taken = e->status_reply->daemon->spare_regions_taken;
        wire_free(e);
        return n;
}

uint64_t memory_charged_now(struct hbgd_proc *d, int fd) {
        Hbg__Envelope *r = status_of(d, fd, HBG__STATUS_KIND__STATUS_METRICS);
        D_ASSERT(d, r->status_reply->metrics, "no metrics in the status reply");
        uint64_t bytes = r->status_reply->metrics->memory_charged;
        wire_free(r);
        return bytes;
}

/* Sums of the scheduler threads' counters. */
void thread_counts(struct hbgd_proc *d, int fd, uint64_t *classified, uint64_t *dispatched) {
        Hbg__Envelope *r = status_of(d, fd, HBG__STATUS_KIND__STATUS_THREADS);
        *classified = *dispatched = 0;
        for (size_t i = 0; i < r->status_reply->n_threads; i++) {
                *classified += r->status_reply->threads[i]->classified;
                *dispatched += r->status_reply->threads[i]->dispatched;
        }
        wire_free(r);
}

void thread_wakes(struct hbgd_proc *d, int fd, uint64_t *wakeups, uint64_t *spurious, bool *all_parked) {
        Hbg__Envelope *r = status_of(d, fd, HBG__STATUS_KIND__STATUS_THREADS);
        *wakeups = *spurious = 0;
        *all_parked = true;
        for (size_t i = 0; i < r->status_reply->n_threads; i++) {
                const Hbg__ThreadStatus *t = r->status_reply->threads[i];
                *wakeups += t->wakeups;
                *spurious += t->spurious_wakeups;
                *all_parked = *all_parked && t->parks == t->wakeups + 1;
        }
        wire_free(r);
}

/* The kernels of pid's session are running: its tasks were classified,
 * none completed (failed validation counts as completed) and none failed. */
void assert_running(struct hbgd_proc *d, int fd, pid_t pid, const char *what) {
        Hbg__Envelope *r = status_of(d, fd, HBG__STATUS_KIND__STATUS_SESSIONS);
        const Hbg__SessionStatus *s = NULL;
        for (size_t i = 0; i < r->status_reply->n_sessions; i++)
                if (r->status_reply->sessions[i]->pid == (uint32_t)pid)
                        s = r->status_reply->sessions[i];
        bool found = s, idle = s && s->completed == 0 && s->failed == 0 && s->error == 0;
        uint64_t completed = s ? s->completed : 0, failed = s ? s->failed : 0;
        int error = s ? s->error : 0;
        wire_free(r);
        D_ASSERT(d, found, "%s: no session of pid %d", what, (int)pid);
        D_ASSERT(d, idle, "%s: the long kernels are not running: %" PRIu64 " tasks completed, %" PRIu64
                 " failed, error %d", what, completed, failed, error);
}

/* Poll until the scheduler threads classified at least n tasks. */
void wait_classified(struct hbgd_proc *d, int fd, uint64_t n, const char *what) {
        long long deadline = daemon_now_ms() + IO_MS;
        uint64_t c = 0, disp;
        while (thread_counts(d, fd, &c, &disp), c < n && daemon_now_ms() < deadline)
                sleep_us(2000);
        D_ASSERT(d, c >= n, "%s: hbgd classified %" PRIu64 " tasks, expected %" PRIu64, what, c, n);
}


bool session_listed(struct hbgd_proc *d, int fd, pid_t pid) {
        Hbg__Envelope *r = status_of(d, fd, HBG__STATUS_KIND__STATUS_SESSIONS);
        bool found = false;
        for (size_t i = 0; i < r->status_reply->n_sessions; i++)
                found = found || r->status_reply->sessions[i]->pid == (uint32_t)pid;
        wire_free(r);
        return found;
}
