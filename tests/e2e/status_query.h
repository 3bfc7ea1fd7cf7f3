/* SPDX-License-Identifier: MIT */
/*
 * hbgd's liveness (a fresh client answered within a bound) and its state
 * from status replies (spare regions, memory charged, the scheduler
 * threads' counters, sessions), for the end-to-end tests. Each failure is
 * a Check assertion: call these from a test's own thread.
 * tests/e2e/e2e_util.h includes it.
 */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "hbg.pb-c.h"
#include "tests/e2e/daemon_util.h"

/* Until hbgd's slow-work thread has nothing to do, twice 10 ms apart:
 * sessions' pre-faults and the spare rings ([session] spare_rings) made,
 * so that its memory is what it keeps (an RSS baseline). */
void wait_slow_work_idle(struct hbgd_proc *d);

/* A fresh connection gets hbgd's Hello and a status reply within bound_ms
 * (asserted); returns the milliseconds it took. */
long long fresh_status(struct hbgd_proc *d, int bound_ms, const char *what);
/* The same, retrying a connection hbgd closes unanswered (shed while it
 * is out of descriptors); *ret_shed counts those. */
long long fresh_status_shed(struct hbgd_proc *d, int bound_ms, const char *what, unsigned *ret_shed);
/* One status request of `kind` on fd (hello done): the reply, asserted
 * (wire_free() it). */
Hbg__Envelope *status_of(struct hbgd_proc *d, int fd, Hbg__StatusKind kind);
/* STATUS_DAEMON on a connection of its own, closed before it returns
 * (hbgd closes one that stays idle without a session past its handshake
 * timeout); the caller frees it with wire_free(). */
Hbg__Envelope *daemon_status_fresh(struct hbgd_proc *d);
/* hbgd's sets of regions made ahead now ([session] spare_regions), and in
 * *ret_taken how many sessions took one (daemon_status_fresh()). */
unsigned spare_regions_now(struct hbgd_proc *d, uint64_t *ret_taken);
/* Bytes charged to every session now (status METRICS on fd, hello done). */
uint64_t memory_charged_now(struct hbgd_proc *d, int fd);
/* Sums of the scheduler threads' counters (STATUS_THREADS on fd). */
void thread_counts(struct hbgd_proc *d, int fd, uint64_t *classified, uint64_t *dispatched);
/* The scheduler threads' wake-ups and spurious wake-ups summed, and
 * whether every thread is parked now (each one's parks = its wake-ups +
 * 1) (STATUS_THREADS on fd). */
void thread_wakes(struct hbgd_proc *d, int fd, uint64_t *wakeups, uint64_t *spurious, bool *all_parked);
/* Poll until the scheduler threads classified at least n tasks. */
void wait_classified(struct hbgd_proc *d, int fd, uint64_t n, const char *what);
/* The kernels of pid's session are running: none of its tasks completed
 * (a task failing validation completes at once) or failed. */
void assert_running(struct hbgd_proc *d, int fd, pid_t pid, const char *what);
/* Is there a session of pid (STATUS_SESSIONS on fd)? */
bool session_listed(struct hbgd_proc *d, int fd, pid_t pid);
