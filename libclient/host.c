/* SPDX-License-Identifier: MIT */
/*
 * Host (external) tasks: hbgd appends the id of each ready external task to
 * the completion region's external-ready ring; we run its host function
 * and post {task_id, status} into the async completion mailbox
 * (RUNTIME_LOGIC.md §10.5).
 */
#include <errno.h>
#include <sched.h>
#include <stdlib.h>
#include <unistd.h>

#include "libclient/client_private.h"
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
         * written only once id < WM + D): it either ran or never will
         * (skipped, predicate false). */
        c->host[id & (c->g.task_window - 1)] =
                (struct host_slot){ .id = id, .fn = fn, .userdata = userdata, .used = true };
}

void hbgc_host_free(hbg_client *c) {
        free(c->host);
        c->host = NULL;
}

/* Wait a little for room in the mailbox (hbgd consumes it continuously
 * while it is awake). false if there is still none. */
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

/* Room was made sure of (mailbox_room()). */
static void post(hbg_client *c, uint64_t id, int status) {
        bool ring;
        if (producer_complete_external(&c->prod, id, status, &ring) == 0)
                (void)hbgc_ring(c, ring);
}

int hbgc_process(hbg_client *c) {
        int ran = 0;
        uint64_t tail = atomic_load_explicit(&c->ch->ext_ready_tail, memory_order_acquire);
        /* At most D entries per call: hbgd never has more ready. */
        for (uint64_t taken = 0; taken < c->g.task_window && c->prod.ext_head != tail; taken++) {
                if (!mailbox_room(c)) {
                        /* Come back later: make hbg_client_fd() readable
                         * again so an event loop calls hbg_client_process(). */
                        uint64_t one = 1;
                        ssize_t n = write(c->rearm_fd, &one, sizeof(one));
                        (void)n;
                        break;
                }
                uint64_t id;
                if (!producer_next_external(&c->prod, &id))
                        break;
                /* hbgd's stall detector completes an external task that
                 * takes longer than the session's stall limit (-ETIME). A
                 * completion posted after that would be a protocol error
                 * that stops the whole session: for a task no longer
                 * waiting, run nothing and post nothing. (A narrow race with
                 * the detector remains: only hbgd can close it.) */
                if (hbgc_task_done(c, id))
                        continue;
                int status;
                bool ours = false;
                struct host_slot *s = c->host ? &c->host[id & (c->g.task_window - 1)] : NULL;
                if (s && s->used && s->id == id) {
                        hbg_host_fn fn = s->fn;
                        void *ud = s->userdata;
                        s->used = false;
                        c->in_host = true;
                        status = fn(ud);
                        c->in_host = false;
                        if (status > 0 || status < -4095)
                                status = -EINVAL;
                        ours = true;
                        ran++;
                } else {
                        status = -EINVAL; /* not a host task of ours */
                }
                if (hbgc_task_done(c, id))
                        continue; /* timed out while it ran */
                /* Its graph's error will say what the function returned. */
                if (ours && status < 0)
                        (void)hbgc_host_failed(c, id, status);
                post(c, id, status);
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
        ssize_t n = read(c->rearm_fd, &v, sizeof(v));
        (void)n;
        hbgc_drain_completion(c);
        if (hbgc_check_socket(c) < 0) {
                /* Still note the graphs hbgd finished before it went. */
                hbgc_harvest(c);
                return hbgc_fail(c, -ECONNRESET, "hbg_client_process: hbgd went away");
        }
        return hbgc_process(c);
}
