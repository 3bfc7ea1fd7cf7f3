/* SPDX-License-Identifier: MIT */
/* libclient/wait.c for the other files of libhbgclient: the wait loop (spin, yield, poll) that runs host tasks. */
#pragma once

#include "libclient/client_private.h"

/* Waiting: a loop of "check the condition; hbgc_wait_step()". Each step
 * publishes pending tasks and runs ready host tasks, then spins (first
 * ~20 us, or up to 100 us after a short wait, or up to 1 ms while hbgd
 * says its answering thread is moving), then poll()s the completion pipe
 * and the socket: for 100 ms at most where hbgd writes the pipe when the
 * condition comes true (graph waits; window waits, which ask for it,
 * §2.1), for 1 ms where its byte may come later than that (tensor waits:
 * the byte comes once the watermark passes the writer, §2.1, and a
 * writer may complete before). */
struct hbgc_wait {
        hbg_client *c;
        int64_t start_ns;
        int64_t deadline_ns;       /* < 0: none */
        unsigned iter;
        bool eventful;             /* the condition comes with the pipe's byte, not later */
        bool spun;                 /* past the spinning */
        bool pure;                 /* spins without yielding first (wait.c) */
        bool pipe_armed;           /* HBG_PIPE_WAITING set for the next poll */
        bool always_looked;        /* looked again after seeing HBG_PIPE_ALWAYS */
        int64_t spin_ns;           /* the spin before any sleep (wait.c) */
        int64_t moving_seen_ns;    /* last saw answer_moving set (0: never) */
};
void hbgc_wait_begin(hbg_client *c, struct hbgc_wait *w, int timeout_ms, bool eventful);
/* A wait's end, on every path out of its scope (HBGC_WAIT): a request
 * for the pipe's byte the last step left set is withdrawn, or hbgd would
 * write the pipe for every graph until the next wait polls. */
void hbgc_wait_end(struct hbgc_wait *w);
#define HBGC_WAIT(w) struct hbgc_wait w __attribute__((cleanup(hbgc_wait_end))) = { 0 }
/* Past the spinning: the next step may sleep, so a caller whose wake-up
 * must be asked for (window space) asks now. */
bool hbgc_wait_spun(const struct hbgc_wait *w);
/* 0: check again; -ETIMEDOUT; -ECONNRESET. */
int hbgc_wait_step(hbg_client *c, struct hbgc_wait *w);
