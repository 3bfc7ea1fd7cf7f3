/* SPDX-License-Identifier: MIT */
/*
 * Host (external) tasks: hbgd appends the id of each ready external task to
 * the completion region's external-ready ring; a thread of ours takes it,
 * runs its host function and posts {task_id, status} into the async
 * completion mailbox (RUNTIME_LOGIC.md §10.5). Taking, running and posting
 * are safe from several threads at once (§10.7): the library's workers
 * (workers.c) and the caller's thread in hbg_client_process().
 */
#include <errno.h>
#include <sched.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

#include "libclient/client_private.h"
#include "libclient/errors.h"
#include "libclient/graph_status.h"
#include "libclient/host.h"
#include "libclient/session.h"
#include "libclient/workers.h"
#include "common/clock.h"

int hbgc_host_reserve(hbg_client *c) {
        if (!c->host) {
                c->host = calloc(c->g.task_window, sizeof(*c->host));
                if (!c->host)
                        return -ENOMEM;
        }
        return 0;
}

void hbgc_host_register(hbg_client *c, uint64_t id, hbg_host_fn fn, void *userdata) {
        /* The slot's previous user, id - D or older, is complete (id is
         * written only once id < WM + D): it either ran, is running or
         * never will (skipped, predicate false), or the stall limit failed
         * it, and then a taker may still be about to claim it. A seqlock
         * (§10.7.3): the tag leaves READY(id - D) first (relaxed, then a
         * release fence), the fields follow, the tag READY(id) last
         * (release). A taker reads the fields between its acquire load
         * of the tag and its claiming CAS, behind an acquire fence: if it
         * read a field written here, the fences order the tag's 0 before
         * its CAS, which fails, so it never runs id's function as
         * id - D's. */
        struct host_slot *s = &c->host[id & (c->g.task_window - 1)];
        atomic_store_explicit(&s->tag, 0, memory_order_relaxed);
        atomic_thread_fence(memory_order_release);
        atomic_store_explicit(&s->fn, fn, memory_order_relaxed);
        atomic_store_explicit(&s->userdata, userdata, memory_order_relaxed);
        atomic_store_explicit(&s->tag, HOST_TAG_READY(id), memory_order_release);
}

void hbgc_host_free(hbg_client *c) {
        free(c->host);
        c->host = NULL;
}

bool hbgc_task_done_shared(const hbg_client *c, uint64_t id) {
        /* completer_flag_is_set() without its cache (the caller's thread
         * owns c->completer): the watermark, then the task's own stamp. */
        const struct hbg_flag_window *w = &c->window;
        if (id < atomic_load_explicit(w->watermark, memory_order_acquire))
                return true;
        return atomic_load_explicit(flag_slot(w, id), memory_order_acquire) == flag_stamp_of(w, id);
}

/* Wait a little for room in the mailbox (hbgd consumes it continuously
 * while it is awake). false if there is still none. A hint when workers
 * post too. */
static bool mailbox_room(hbg_client *c) {
        if (producer_mailbox_room(&c->prod))
                return true;
        hbgc_doorbell(c);
        int64_t until = clock_now_ns() + 200000;
        while (!producer_mailbox_room(&c->prod)) {
                if (clock_now_ns() >= until)
                        return false;
                sched_yield();
        }
        return true;
}

/* The doorbell from any thread: a worker does not look at the socket (the
 * watcher does, and only the caller's threads mark the client dead). */
static void ring_from(hbg_client *c, bool ring) {
        if (hbgc_self.worker_of != c) {
                (void)hbgc_ring(c, ring);
                return;
        }
        if (ring) {
                char one = 1;
                ssize_t n = send(c->doorbell_fd, &one, 1, MSG_DONTWAIT | MSG_NOSIGNAL);
                (void)n;
        }
}

/* Post id's status. The mailbox may be full for a moment when several
 * threads post (or while hbgd sleeps): ring and wait, bounded by hbgd's
 * consuming; give up once the session ended or failed (hbgd consumes no
 * more: its graphs fail anyway). */
static void post(hbg_client *c, uint64_t id, int status) {
        unsigned rounds = 0;
        for (;;) {
                bool ring;
                if (producer_complete_external(&c->prod, id, status, &ring) == 0) {
                        ring_from(c, ring);
                        return;
                }
                ring_from(c, atomic_load_explicit(&c->ch->need_wakeup, memory_order_seq_cst) != 0);
                /* The pool's flags for everyone (the watcher sets gone
                 * when hbgd goes, even while it was awake and rings
                 * nothing); c->dead is the caller's threads' own, and the
                 * caller looks at the socket now and then itself (with no
                 * workers, nobody else does). */
                bool caller = hbgc_self.worker_of != c;
                if (caller && ++rounds % 64 == 0)
                        (void)hbgc_check_socket(c);
                bool ended = hbgc_workers_ended(c) || (caller && c->dead);
                if (ended ||
                    atomic_load_explicit(&c->ch->error_code, memory_order_relaxed) != 0)
                        return;
                sched_yield();
        }
}

int hbgc_host_run(hbg_client *c, uint64_t id) {
        /* hbgd's stall detector completes an external task that takes
         * longer than the session's stall limit (-ETIME). A completion
         * posted after that would be a protocol error that stops the whole
         * session: for a task no longer waiting, run nothing and post
         * nothing. (A narrow race with the detector remains: only hbgd can
         * close it.) */
        if (hbgc_task_done_shared(c, id))
                return 0;
        int status;
        bool ours = false;
        struct host_slot *s = c->host ? &c->host[id & (c->g.task_window - 1)] : NULL;
        uint64_t tag = s ? atomic_load_explicit(&s->tag, memory_order_acquire) : 0;
        hbg_host_fn fn = NULL;
        void *ud = NULL;
        if (tag == HOST_TAG_READY(id)) {
                /* The seqlock's reader (hbgc_host_register()): the fields,
                 * then the fence, then the claim. */
                fn = atomic_load_explicit(&s->fn, memory_order_relaxed);
                ud = atomic_load_explicit(&s->userdata, memory_order_relaxed);
                atomic_thread_fence(memory_order_acquire);
        }
        if (tag == HOST_TAG_READY(id) &&
            atomic_compare_exchange_strong_explicit(&s->tag, &tag, HOST_TAG_TAKEN(id), memory_order_acq_rel,
                                                    memory_order_acquire)) {
                const hbg_client *outer = hbgc_self.in_host;
                hbgc_self.in_host = c;
                atomic_fetch_add_explicit(&c->hosts_running, 1, memory_order_relaxed);
                /* What the functions this one depends on did, when they
                 * ran on other workers: ordered through hbgd, and here
                 * within this process too (hbgc_host_effects()). */
                hbgc_host_effects(c);
                /* Its graph cancelled by this client since it was made
                 * ready: not started, as hbgd starts none of its tasks.
                 * Answered 0: the graph's outcome is the cancel's, as
                 * hbgd decided it (as if the function had run). */
                status = hbgc_host_cancelled(c, id) ? 0 : fn(ud);
                atomic_fetch_sub_explicit(&c->hosts_running, 1, memory_order_relaxed);
                hbgc_self.in_host = outer;
                /* Release, an RMW: joins every returned function's
                 * effects for hbgc_host_effects(). */
                atomic_fetch_add_explicit(&c->pool.returned, 1, memory_order_release);
                if (status > 0 || status < -4095)
                        status = -EINVAL;
                ours = true;
        } else if (tag == HOST_TAG_TAKEN(id) || hbgc_task_done_shared(c, id)) {
                /* Another thread took the same id (an entry read after
                 * hbgd reused its slot, §10.7): it runs and posts. Or the
                 * stall limit failed id and the slot went on to id + D
                 * (or is being written for it): nothing to run or post. */
                return 0;
        } else {
                status = -EINVAL; /* not a host task of ours */
        }
        if (hbgc_task_done_shared(c, id))
                return ours; /* timed out while it ran */
        /* Its graph's error will say what the function returned. */
        if (ours && status < 0)
                (void)hbgc_host_failed(c, id, status);
        post(c, id, status);
        return ours;
}

int hbgc_process(hbg_client *c) {
        int ran = 0;
        /* At most D entries per call: hbgd never has more ready. */
        for (uint64_t taken = 0; taken < c->g.task_window && producer_external_pending(&c->prod); taken++) {
                if (!mailbox_room(c)) {
                        /* Come back later: make hbg_client_fd() readable
                         * again so an event loop calls hbg_client_process().
                         * Not made yet: no loop to tell; the one made
                         * later starts readable, as these tasks were
                         * published (seq_cst) before this load, by this
                         * thread or through hbgd (notify_make()). */
                        uint64_t one = 1;
                        int rearm = atomic_load_explicit(&c->rearm_fd, memory_order_seq_cst);
                        if (rearm >= 0) {
                                ssize_t n = write(rearm, &one, sizeof(one));
                                (void)n;
                        }
                        break;
                }
                uint64_t id;
                if (!producer_next_external(&c->prod, &id))
                        break;
                ran += hbgc_host_run(c, id);
        }
        hbgc_harvest(c);
        return ran;
}

HBG_EXPORT int hbg_client_process(hbg_client *c) {
        int err = hbgc_usable(c, "hbg_client_process");
        if (err < 0 && err != -ECONNRESET)
                return err;
        /* Clear the channels first: a signal arriving from here on stays. */
        uint64_t v;
        int rearm = atomic_load_explicit(&c->rearm_fd, memory_order_acquire);
        if (rearm >= 0) {
                ssize_t n = read(rearm, &v, sizeof(v));
                (void)n;
        }
        hbgc_drain_completion(c);
        if (hbgc_check_socket(c) < 0) {
                /* Still note the graphs hbgd finished before it went. */
                hbgc_harvest(c);
                return hbgc_fail(c, -ECONNRESET, "hbg_client_process: hbgd went away");
        }
        /* A caller that polls us instead of sleeping on hbg_client_fd(). */
        hbgc_ring_confirm(c, HBGC_CONFIRM_AGE_NS);
        return hbgc_process(c);
}
