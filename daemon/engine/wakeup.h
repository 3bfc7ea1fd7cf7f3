/* SPDX-License-Identifier: MIT */
/* wakeup.c: waking and parking threads (RUNTIME_LOGIC.md §9.4): the
 * futex words and the doorbell's kick. */
#pragma once

#include <stdatomic.h>
#include <stdint.h>
#include <time.h>

struct hbg_engine;
struct sched_thread;

/* Wake every parked scheduler thread; cheap when nobody is parked. */
void wakeup_kick(struct hbg_engine *e);
void wakeup_one(struct hbg_engine *e);
void wakeup_executor(struct hbg_engine *e);
/* Wake everyone: the completion policy's thread too (stopping). */
void wakeup_all(struct hbg_engine *e);
/* Sleep on a futex word while it holds val (timeout NULL: no limit). */
void wakeup_futex_wait(_Atomic uint32_t *word, uint32_t val, const struct timespec *timeout);
/* Wake at most n sleepers of a futex word. */
void wakeup_futex_wake(_Atomic uint32_t *word, int n);
/* Thread t parks on word while it holds val: counted, and shown parked. */
void wakeup_thread_sleep(struct sched_thread *t, _Atomic uint32_t *word, uint32_t val,
                         const struct timespec *timeout);
