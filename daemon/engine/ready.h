/* SPDX-License-Identifier: MIT */
/* ready.c: wake lists, making tasks ready, continuations and deques
 * (RUNTIME_LOGIC.md §10), the retire queue. */
#pragma once

#include <stdbool.h>
#include <stdint.h>

struct hbg_ring;
struct sched_thread;
struct task_slot;

/* Route a classified task: ready, or onto the wake list of its latest
 * unmet fanin. inline_ok: kernel-less tasks may be retired right here. */
void ready_route(struct sched_thread *t, struct hbg_ring *r, struct task_slot *s, bool inline_ok);
/* Wake a parked peer if more ready work is queued than this thread takes. */
void ready_wake_for_surplus(struct sched_thread *t, struct hbg_ring *r);
/* Some thread's deque of r holds tasks (a hint, relaxed loads): work a
 * thread could steal (§10.4). */
bool ready_deques_nonempty(struct hbg_ring *r);
/* This thread's continuation in r, taken (§10.4); false if none. */
bool ready_continuation_take(struct sched_thread *t, struct hbg_ring *r, uint64_t *ret_id);
/* End of a visit: a continuation still held, and the tasks left in the
 * thread's deque, go to the ready queues. */
void ready_continuation_flush(struct sched_thread *t, struct hbg_ring *r);
void ready_drain_wake_list(struct sched_thread *t, struct hbg_ring *r, uint64_t id);
/* After id's stamp is visible: drain its wake list, release its slot. */
void ready_task_released(struct sched_thread *t, struct hbg_ring *r, uint64_t id);
bool ready_retire(struct sched_thread *t, struct hbg_ring *r, unsigned max);
