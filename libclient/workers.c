/* SPDX-License-Identifier: MIT */
/*
 * Host worker threads (hbg_connect_options.host_threads, RUNTIME_LOGIC.md
 * §10.7): a fixed pool that takes ready host tasks from the session's
 * external-ready ring, runs them concurrently and posts their results, and
 * sleeps on the completion region's ext_wake futex word when there is
 * nothing to take (no timeout: an idle producer costs no CPU). One watcher
 * thread blocks in poll() until hbgd hangs up or hbg_disconnect() asks it
 * to end; either ends the pool: every sleeper is woken and returns.
 */
#include <errno.h>
#include <limits.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "libclient/client_private.h"
#include "libclient/errors.h"
#include "libclient/host.h"
#include "libclient/session.h"
#include "libclient/workers.h"
#include "common/clock.h"
#include "common/futex.h"

/* ---------------------------------------------------------------- sleeping */

/*
 * The client half of §10.7's store→load pair: load the word's value, count
 * ourselves in (seq_cst), look at the condition, FUTEX_WAIT while the word
 * still holds the value. hbgd bumps the word after it publishes, then loads
 * the count (seq_cst): either our look sees the publication, or its load
 * sees our count and it wakes us; a bump after our value load makes the
 * wait return at once (EAGAIN). The private `sleeping` count is the same
 * pair against the end of the pool (hbgc_workers_end()).
 */
int hbgc_sleep_on(hbg_client *c, const _Atomic uint32_t *word, _Atomic uint32_t *sleepers,
                  bool (*done)(hbg_client *c, void *arg), void *arg, const struct timespec *timeout) {
        /* Acquire: a value hbgd bumped after a publication brings the
         * publication with it (the bump is a seq_cst RMW, a release). */
        uint32_t seq = atomic_load_explicit(word, memory_order_acquire);
        hbgc_ring_confirm(c, 0);
        atomic_fetch_add_explicit(&c->pool.sleeping, 1, memory_order_seq_cst);
        atomic_fetch_add_explicit(sleepers, 1, memory_order_seq_cst);
        int err = 0;
        if (!hbgc_workers_ended(c) && !done(c, arg))
                err = futex_wait_shared(word, seq, timeout);
        atomic_fetch_sub_explicit(sleepers, 1, memory_order_seq_cst);
        atomic_fetch_sub_explicit(&c->pool.sleeping, 1, memory_order_seq_cst);
        return err == -ETIMEDOUT ? err : 0;
}

/*
 * The pool ended (stopping or gone set, seq_cst, by the caller): wake
 * every sleeper on both words. The word is hbgd's and read-only to us, so
 * a sleeper between its look at the flags and its FUTEX_WAIT cannot be
 * stopped by a change of the word: wake again until nobody is counted
 * (each such sleeper is a few instructions from its wait, and one counted
 * after our zero saw the flags). The only repeated wake, and only once the
 * session is over.
 */
static void wake_all_until_none(hbg_client *c) {
        for (;;) {
                futex_wake_shared(&c->ch->ext_wake, INT_MAX);
                futex_wake_shared(&c->ch->graph_wake, INT_MAX);
                if (atomic_load_explicit(&c->pool.sleeping, memory_order_seq_cst) == 0)
                        return;
                struct timespec ts = { .tv_nsec = 100000 };
                nanosleep(&ts, NULL);
        }
}

/* ---------------------------------------------------------------- workers */

static bool ext_ready(hbg_client *c, void *arg) {
        (void)arg;
        return producer_external_pending(&c->prod);
}

/* Look for a ready host task for up to WORKER_SPIN_NS before sleeping:
 * in a chain, the next task is made ready a few microseconds after this
 * one's answer, and a wake-up of a sleeping worker costs more than that.
 * Bounded, and only after work: an idle producer still costs no CPU.
 * Purely for WORKER_SPIN_PURE_NS, then yielding at each look, as the
 * waits of wait.c: on 2 CPUs a worker that held its CPU for the whole
 * look kept the threads that make the next task ready (hbgd's, the
 * producer's, a peer running a task) off it, and more workers made a
 * chain slower (docs/PERFORMANCE.md, "The workers' look for work
 * yields").
 *
 * A looking worker is counted in ext_looking, so that hbgd does not wake
 * a sleeping peer for a task this worker is about to take (a peer woken
 * for nothing cost hbgd a system call and the peer a wake-up per task of
 * a chain). It says until when it looks (ext_look_until_ns, before the
 * count): past that hbgd ignores the count and wakes a sleeper for the
 * tasks whose wake it skipped and nobody answered, so a looker that a
 * yield or a preemption left behind another thread on its CPU delays
 * them by about a look. Our half of the pair (§10.7 step 5):
 * decrement (seq_cst), then load ext_wake (seq_cst), before any look that
 * decides what to do next. hbgd bumps the word, then loads the count:
 * either it saw our decrement and decided by ext_sleepers, or our load
 * sees its bump, and the publication with it (the caller's take and peer
 * wake, or hbgc_sleep_on()'s re-check, find the task). */
#define WORKER_SPIN_NS HBG_EXT_LOOK_NS
#define WORKER_SPIN_PURE_NS 3000

static bool spin_for_work(hbg_client *c) {
        int64_t start = clock_now_ns(), now = start;
        bool found = false;
        atomic_store_explicit(&c->sh->ext_look_until_ns, (uint64_t)start + WORKER_SPIN_NS, memory_order_relaxed);
        atomic_fetch_add_explicit(&c->sh->ext_looking, 1, memory_order_seq_cst);
        do {
                if (now - start < WORKER_SPIN_PURE_NS)
                        for (unsigned i = 0; i < 64; i++)
                                cpu_relax();
                else
                        sched_yield();
                if (producer_external_pending(&c->prod) || hbgc_workers_ended(c)) {
                        found = true;
                        break;
                }
                now = clock_now_ns();
        } while (now - start < (int64_t)WORKER_SPIN_NS);
        atomic_fetch_sub_explicit(&c->sh->ext_looking, 1, memory_order_seq_cst);
        (void)atomic_load_explicit(&c->ch->ext_wake, memory_order_seq_cst);
        return found;
}

static void *worker_main(void *arg) {
        hbg_client *c = arg;
        char error[HBGC_ERROR_MAX] = "";
        bool worked = false;
        hbgc_self = (struct hbgc_thread){ .worker_of = c, .error = error };
        while (!hbgc_workers_ended(c)) {
                uint64_t id;
                if (!producer_next_external(&c->prod, &id)) {
                        if (!(worked && spin_for_work(c)))
                                hbgc_sleep_on(c, &c->ch->ext_wake, &c->sh->ext_sleepers, ext_ready, NULL, NULL);
                        worked = false;
                        continue;
                }
                worked = true;
                /* hbgd wakes one sleeper per publication, none while a
                 * worker looks: more waiting than we take, and a peer
                 * sleeps, wake one (§10.7 step 5). seq_cst: after our
                 * look's decrement and word load, a sleeper counted
                 * before hbgd's bump is seen here. */
                if (producer_external_pending(&c->prod) &&
                    atomic_load_explicit(&c->sh->ext_sleepers, memory_order_seq_cst) != 0)
                        futex_wake_shared(&c->ch->ext_wake, 1);
                hbgc_host_run(c, id);
        }
        hbgc_self = (struct hbgc_thread){ 0 };
        return NULL;
}

/* ---------------------------------------------------------------- watcher */

/* hbgd never writes to the control socket unasked during a session, so
 * only its hang-up is asked for (POLLRDHUP; POLLHUP and POLLERR come
 * anyway), and the completion pipe's hang-up (events 0): hbgd's process
 * exited, while its io_uring may hold the socket a while longer
 * (session.c, hbgc_check_socket()). */
static void *watcher_main(void *arg) {
        hbg_client *c = arg;
        for (;;) {
                struct pollfd p[3] = {
                        { .fd = c->sock, .events = POLLRDHUP },
                        { .fd = c->completion_fd, .events = 0 },
                        { .fd = c->pool.stop_fd, .events = POLLIN },
                };
                int n = poll(p, 3, -1);
                if (n < 0)
                        continue; /* EINTR: signals are blocked here, but stay safe */
                if (p[2].revents)
                        return NULL; /* hbg_disconnect(): it wakes the sleepers */
                if (p[0].revents || p[1].revents)
                        break;
        }
        atomic_store_explicit(&c->pool.gone, true, memory_order_seq_cst);
        wake_all_until_none(c);
        return NULL;
}

/* ---------------------------------------------------------------- the pool */

/* Threads of the library take no asynchronous signal: the program's
 * handlers run on its own threads (hbg_connect(3), Signals). A fault a
 * host function causes on a worker (SIGSEGV, SIGBUS, SIGFPE, SIGILL,
 * SIGTRAP, SIGSYS) is delivered there as anywhere: blocked, it would kill
 * the process without the program's handler. */
static int start_thread(pthread_t *t, void *(*fn)(void *), void *arg) {
        static const int faults[] = { SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGTRAP, SIGSYS };
        sigset_t all, old;
        sigfillset(&all);
        for (size_t i = 0; i < sizeof(faults) / sizeof(faults[0]); i++)
                sigdelset(&all, faults[i]);
        pthread_sigmask(SIG_SETMASK, &all, &old);
        int err = pthread_create(t, NULL, fn, arg);
        pthread_sigmask(SIG_SETMASK, &old, NULL);
        return -err;
}

int hbgc_workers_start(hbg_client *c, unsigned n) {
        struct host_pool *p = &c->pool;
        p->n = n;
        if (n == 0)
                return 0;
        int err = hbgc_host_reserve(c);
        p->threads = calloc(p->n, sizeof(*p->threads));
        p->stop_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
        if (err < 0 || !p->threads)
                return hbgc_fail(NULL, -ENOMEM, "out of memory");
        if (p->stop_fd < 0)
                return hbgc_fail(NULL, -errno, "cannot create the host workers' eventfd: %s", strerror(errno));
        err = start_thread(&p->watcher, watcher_main, c);
        if (err < 0)
                return hbgc_fail(NULL, err, "cannot start the hang-up watcher thread: %s", strerror(-err));
        p->watcher_started = true;
        for (; p->started < p->n; p->started++) {
                err = start_thread(&p->threads[p->started], worker_main, c);
                if (err < 0)
                        return hbgc_fail(NULL, err, "cannot start host worker thread %u of %u: %s", p->started + 1,
                                         p->n, strerror(-err));
        }
        return 0;
}

void hbgc_workers_stop(hbg_client *c) {
        struct host_pool *p = &c->pool;
        if (p->n == 0)
                return;
        if (getpid() != c->sock_owner) {
                /* A forked child's copy: the workers and the watcher are
                 * the parent's threads, not in this process. Waking or
                 * joining them would wait for ever, and a write to the
                 * stop eventfd (the parent's too) would end the parent's
                 * watcher: only this copy goes. */
                free(p->threads);
                p->threads = NULL;
                p->started = 0;
                p->watcher_started = false;
                if (p->stop_fd >= 0)
                        close(p->stop_fd);
                p->stop_fd = -1;
                return;
        }
        atomic_store_explicit(&p->stopping, true, memory_order_seq_cst);
        if (p->watcher_started) {
                uint64_t one = 1;
                ssize_t n = write(p->stop_fd, &one, sizeof(one));
                (void)n;
        }
        wake_all_until_none(c);
        /* Workers running a host function finish it first. */
        for (unsigned i = 0; i < p->started; i++)
                pthread_join(p->threads[i], NULL);
        if (p->watcher_started)
                pthread_join(p->watcher, NULL);
        p->started = 0;
        p->watcher_started = false;
        free(p->threads);
        p->threads = NULL;
        if (p->stop_fd >= 0)
                close(p->stop_fd);
        p->stop_fd = -1;
}

HBG_EXPORT int hbg_client_host_threads(const hbg_client *c) {
        return c ? (int)c->pool.n : -EINVAL;
}
