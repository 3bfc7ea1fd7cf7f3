/* SPDX-License-Identifier: MIT */
/*
 * Waiting: a loop of "check the condition; hbgc_wait_step()". Each step
 * publishes pending tasks and runs ready host tasks, spins first (a few
 * microseconds purely, unless that stopped paying, then yielding the CPU
 * each step), then polls the completion pipe and the socket.
 */
#include <errno.h>
#include <limits.h>
#include <poll.h>
#include <sched.h>

#include "libclient/client_private.h"
#include "libclient/graph_status.h"
#include "libclient/host.h"
#include "libclient/session.h"
#include "libclient/wait.h"
#include "common/clock.h"

/* ---------------------------------------------------------------- waiting */

/* A spin that held the CPU kept the hbgd thread that had to answer off
 * it whenever the scheduler put that thread on this CPU (a parked thread
 * woken, or a spinning one sharing it): for all of SPIN_NS it made a
 * parked 1-task graph's round trip wait for the poll's sleep (about 100
 * us on a 2-CPU machine). After SPIN_PURE_NS, long enough for a busy
 * graph's answer from another CPU, each step yields instead: free with
 * nothing else runnable here (about 0.2 us). The pure spin stays: a yield
 * may give a whole time slice to another thread of the caller's on this
 * CPU. But where it did not catch the answer (on 2 CPUs the answering
 * thread shares the client's for most of some runs, and a busy 1-task
 * graph then took 5.4 us instead of about 2: the pure spin's 3 us, then
 * the thread's turn), the next SPIN_PURE_SKIP waits yield from their
 * first step, then one tries the pure spin again (docs/PERFORMANCE.md). */
#define SPIN_PURE_NS 3000      /* pure spinning first */
#define SPIN_PURE_SKIP 64      /* waits that skip it after it failed */
#define SPIN_NS 20000          /* then spinning that yields */
/* The spin that yields, longer, for a wait whose previous one took less
 * (the producer of a busy ring, or of small graphs now and then). When
 * one of hbgd's threads and this producer share a CPU, the thread moves
 * to another (RUNTIME_LOGIC §9.4); the producer waits the move out (tens
 * of us when the other CPU was idle and must wake). A wait that fell
 * asleep meanwhile was woken by the moved thread's answer, and the
 * kernel put it on that thread's CPU: sharing again (a busy 1-task graph
 * 2.8 us instead of 1.1) until a later move stuck, milliseconds on, as
 * recurring moves are spaced further. A wait that took longer makes the
 * next one spin SPIN_NS only: a producer of long graphs gives up at most
 * one long spin in a row (docs/PERFORMANCE.md). */
#define SPIN_LONG_NS 100000
/* hbgd sets answer_moving while the thread that answered this ring last
 * moves to another CPU (RUNTIME_LOGIC §9.4): tens to hundreds of us
 * when that CPU was idle. A wait that sleeps meanwhile is woken by the
 * moved thread, and the kernel puts it on that thread's new CPU: the move
 * undone. So a wait spins on while it sees the flag and SPIN_LONG_NS
 * after, up to SPIN_MOVING_NS from its start (a flag left set by a ring
 * torn down mid-move costs a wait no more). */
#define SPIN_MOVING_NS 1000000
/* The longest sleep of a wait whose pipe byte may come after its
 * condition came true (a tensor's writer completed while an earlier task
 * holds the watermark back, from an hbgd older than 1.7 under the lazy or
 * resolver policy, §2.1), and of one whose step left work it could not
 * finish (below). One whose byte comes with it sleeps until the byte,
 * hbgd's hang-up on the socket or its own deadline: no timer (the ask
 * and hbgd's look are a store->load pair, §2.1; a trusted wake was
 * confirmed before the sleep). */
#define POLL_CAP_MS_WATERMARK 1

void hbgc_wait_begin(hbg_client *c, struct hbgc_wait *w, int timeout_ms, bool eventful) {
        w->c = c;
        w->start_ns = clock_now_ns();
        w->deadline_ns = timeout_ms < 0 ? -1 : w->start_ns + (int64_t)timeout_ms * 1000000;
        w->iter = 0;
        w->spun = false;
        w->pure = c->pure_spin_skip == 0;
        if (!w->pure)
                c->pure_spin_skip--;
        w->pipe_armed = false;
        w->always_looked = false;
        w->eventful = eventful;
        w->spin_ns = c->spin_long ? SPIN_LONG_NS : SPIN_NS;
        w->moving_seen_ns = 0;
}

void hbgc_wait_end(struct hbgc_wait *w) {
        if (!w->c)
                return;
        if (w->pipe_armed)
                atomic_fetch_and_explicit(&w->c->sh->pipe_wanted, ~HBG_PIPE_WAITING, memory_order_relaxed);
        w->pipe_armed = false;
        /* Only a wait that waited says how long answers take (not a
         * submit's look for window space, nor a condition met at once). */
        if (w->iter)
                w->c->spin_long = clock_now_ns() - w->start_ns < SPIN_LONG_NS;
}

bool hbgc_wait_spun(const struct hbgc_wait *w) {
        return w->spun;
}

int hbgc_wait_step(hbg_client *c, struct hbgc_wait *w) {
        if (hbgc_publish(c) < 0)
                return -ECONNRESET;
        /* With workers, they run the host tasks (at most host_threads at
         * once); the waits only read graphs back. */
        if (c->pool.n)
                hbgc_harvest(c);
        else
                hbgc_process(c);
        w->iter++;
        int64_t now = clock_now_ns();
        if (w->deadline_ns >= 0 && now >= w->deadline_ns) {
                /* A caller polling with short timeouts never sleeps here. */
                hbgc_ring_confirm(c, HBGC_CONFIRM_AGE_NS);
                return hbgc_check_socket(c) < 0 ? -ECONNRESET : -ETIMEDOUT;
        }
        int64_t elapsed = now - w->start_ns;
        /* From SPIN_NS on, in a longer spin too, a wake trusted by this
         * wait's publishes (or another thread's) is confirmed at every
         * step: one that a waiter of our uid took delays us by that much,
         * no more (§9.4); and every step past the spin may sleep. */
        if (elapsed >= SPIN_NS)
                hbgc_ring_confirm(c, 0);
        /* Relaxed: a hint; missed, the wait sleeps as it would have. */
        if (atomic_load_explicit(&c->ch->answer_moving, memory_order_relaxed))
                w->moving_seen_ns = now;
        bool moving = w->moving_seen_ns && now - w->moving_seen_ns < SPIN_LONG_NS && elapsed < SPIN_MOVING_NS;
        if (elapsed < w->spin_ns || moving) {
                if (w->pure && elapsed < SPIN_PURE_NS) {
                        for (unsigned i = 0; i < 64; i++)
                                cpu_relax();
                        return 0;
                }
                if (w->pure) {
                        w->pure = false;
                        c->pure_spin_skip = SPIN_PURE_SKIP;
                }
                sched_yield();
                return 0;
        }
        if (!w->spun) {
                /* One more look before any sleep: the caller arms its
                 * wake-up now (hbgc_wait_spun()). */
                w->spun = true;
                return 0;
        }
        /* hbgd writes the pipe's byte only when asked (§10.7; always
         * once hbg_client_fd() was called): ask, then one more look at
         * the condition before the
         * poll. The fence makes it a store->load pair against hbgd's
         * "publish; bump (seq_cst); load pipe_wanted (seq_cst)": either the
         * look sees the publication or hbgd sees the request. */
        bool ask = !(atomic_load_explicit(&c->sh->pipe_wanted, memory_order_relaxed) & HBG_PIPE_ALWAYS);
        if (ask && !w->pipe_armed) {
                atomic_fetch_or_explicit(&c->sh->pipe_wanted, HBG_PIPE_WAITING, memory_order_seq_cst);
                atomic_thread_fence(memory_order_seq_cst);
                w->pipe_armed = true;
                return 0;
        }
        /* ALWAYS, set by another thread's first hbg_client_fd() since our
         * last look, may have come after a publication hbgd did not write
         * a byte for: one more look behind the fence, as for our ask. */
        if (!ask && !w->pipe_armed && !w->always_looked) {
                atomic_thread_fence(memory_order_seq_cst);
                w->always_looked = true;
                return 0;
        }
        /* Work this step could not finish comes with no byte: host tasks
         * left for a mailbox without room (hbgd frees it silently), or
         * graphs not read back for want of memory. Look again soon. */
        bool retry = (c->pool.n == 0 && producer_external_pending(&c->prod)) || c->harvest_stuck;
        int timeout = w->eventful && !retry ? -1 : POLL_CAP_MS_WATERMARK;
        if (w->deadline_ns >= 0) {
                int64_t left_ms = (w->deadline_ns - now + 999999) / 1000000;
                if (timeout < 0 || left_ms < timeout)
                        timeout = left_ms > INT_MAX ? INT_MAX : (int)left_ms;
        }
        struct pollfd p[2] = {
                { .fd = c->completion_fd, .events = POLLIN },
                { .fd = c->sock, .events = POLLIN | POLLRDHUP },
        };
        int n = poll(p, 2, timeout);
        if (w->pipe_armed) {
                /* Asked again before the next poll, after a look. */
                atomic_fetch_and_explicit(&c->sh->pipe_wanted, ~HBG_PIPE_WAITING, memory_order_relaxed);
                w->pipe_armed = false;
        }
        if (n < 0)
                return 0; /* EINTR: just look again */
        if (p[0].revents & POLLIN)
                hbgc_drain_completion(c);
        if (p[1].revents || (p[0].revents & (POLLHUP | POLLERR)))
                return hbgc_check_socket(c);
        return 0;
}

