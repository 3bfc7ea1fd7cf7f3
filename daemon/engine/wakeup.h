/* SPDX-License-Identifier: MIT */
/* wakeup.c: waking and parking threads (RUNTIME_LOGIC.md §9.4): the wake
 * pages' futex words, the private word, the doorbell's kick. */
#pragma once

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <time.h>

struct hbg_engine;
struct hbg_ring;
struct sched_thread;

/* Spurious wakes (a wake by a client that found no work) a thread takes
 * per window before it parks out of the clients' reach (on the private
 * word alone) for the rest of the window. */
#define WAKEUP_SPURIOUS_MAX 64
#define WAKEUP_SPURIOUS_WINDOW_MS 1000

/* A ring just served whose client published already, or after a new
 * wake page (engine_ring_serve()): the doorbell's kick, whatever its
 * need_wakeup says. */
void wakeup_ring_served(struct hbg_ring *r);
/* Whether a wake was made (not: nobody idle, or max_awake_threads). */
bool wakeup_one(struct hbg_engine *e);
/* With `idle` scheduler threads parked (as the caller read it), could a
 * client's ring wake one that may then run (some parked, fewer than
 * max_awake_threads awake)? The test for asking clients to ring while
 * the threads awake are inside long tasks (§9.4). */
bool wakeup_could_help(const struct hbg_engine *e, unsigned idle);
bool wakeup_executor(struct hbg_engine *e);
/* A seq_cst fence before wakeup_one()/wakeup_executor() or a look at the
 * idle count that must not miss a parking thread (wakeup.c). */
void wakeup_fence(void);
/* Wake everyone: the completion policy's thread too (stopping). */
void wakeup_all(struct hbg_engine *e);
/* Sleep on a private futex word while it holds val (timeout NULL: no limit). */
void wakeup_futex_wait(_Atomic uint32_t *word, uint32_t val, const struct timespec *timeout);
/* Wake at most n sleepers of a private futex word. */
void wakeup_futex_wake(_Atomic uint32_t *word, int n);
/* Thread t parks while e->wake_seq holds val, and, with page, until a
 * client wakes a wake page's word (futex_waitv): counted, and shown
 * parked. 1: a client's wake of a page's word woke it; 0: anything
 * else did (hbgd's wake, a timeout, the word moved, a signal). timeout:
 * relative, NULL for none. */
int wakeup_thread_park(struct sched_thread *t, bool page, uint32_t val, const struct timespec *timeout);
/* Thread t sleeps on a private word of its own while it holds val
 * (timeout NULL: no limit): counted, and shown parked. */
void wakeup_thread_sleep(struct sched_thread *t, _Atomic uint32_t *word, uint32_t val,
                         const struct timespec *timeout);
/* Thread t's wake found no work (at now_ms): counted and bounded. */
void wakeup_spurious(struct sched_thread *t, int64_t now_ms);
