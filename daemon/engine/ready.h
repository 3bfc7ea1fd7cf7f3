/* SPDX-License-Identifier: MIT */
/* ready.c: making a task ready (RUNTIME_LOGIC.md §10.2-§10.4): routing it
 * onto a wake list or into a queue, its continuation or its thread's
 * deque; a completed task's dependants routed again. */
#pragma once

#include <stdbool.h>
#include <stdint.h>

struct hbg_ring;
struct sched_thread;
struct task_slot;

/* Route a classified task: ready, or onto the wake list of its latest
 * unmet fanin. inline_ok: kernel-less tasks may be retired right here. */
void ready_route(struct sched_thread *t, struct hbg_ring *r, struct task_slot *s, bool inline_ok);
/* A surplus of queued ready tasks wakes a parked peer only if they are
 * at least this much work by the thread's estimate (each one's kernel's
 * recent runs on this thread): about what a peer's wake-up and start
 * cost on a 2-CPU VM. Less, and the thread runs them itself; it looks
 * again once it has run that long in the ring with the surplus still
 * held (§9.4). */
#define READY_SURPLUS_WAKE_NS 5000
/* Wake a parked peer if more ready work is queued than this thread takes,
 * and the surplus is worth a peer's wake-up. */
void ready_wake_for_surplus(struct sched_thread *t, struct hbg_ring *r);
/* The thread goes to sleep: the surplus it held back in r, run by now,
 * is forgotten (the next one is counted from nothing). */
void ready_surplus_forget(struct sched_thread *t, struct hbg_ring *r);
/* A completion policy's own thread, at the end of a pass over r in which
 * ready_dependants_by_policy_thread() returned true (the policy keeps
 * that note in its own state): the wake check again, after a fence (its
 * wakes must not be lost, §9.4). */
void ready_policy_wake_check(struct sched_thread *t, struct hbg_ring *r);
/* End of a visit: a continuation still held, and the tasks left in the
 * thread's deque, go to the ready queues. */
void ready_continuation_flush(struct sched_thread *t, struct hbg_ring *r);
/* After id's stamp is visible (the completion policy calls this): close
 * its wake list and route the tasks on it and on its batch list; then the
 * wake check of ready_wake_for_surplus(). */
void ready_dependants(struct sched_thread *t, struct hbg_ring *r, uint64_t id);
/* The same, called on a completion policy's own thread, which runs no
 * task itself (§11.3): every task it queued is a surplus. Returns whether
 * it looked for one (tasks were queued since the last look that settled
 * it): then ready_policy_wake_check() is due at the end of the thread's
 * pass over r. */
bool ready_dependants_by_policy_thread(struct sched_thread *t, struct hbg_ring *r, uint64_t id);
