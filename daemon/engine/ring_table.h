/* SPDX-License-Identifier: MIT */
/* ring_table.c: ring membership, hazard pointers (RUNTIME_LOGIC.md §9.3),
 * removal and collection. */
#pragma once

struct hbg_engine;
struct hbg_ring;
struct sched_thread;

/* Visit ring idx (hazard pointer, §9.3); NULL if the slot is empty. */
struct hbg_ring *ring_table_enter(struct sched_thread *t, unsigned idx);
void ring_table_leave(struct sched_thread *t);
/* The same with the second hazard slot, for a look at another ring. */
struct hbg_ring *ring_table_peek_enter(struct sched_thread *t, unsigned idx);
void ring_table_peek_leave(struct sched_thread *t);
/* engine_free(), its threads gone: every ring_hold() let go. */
void ring_table_drop_holds(struct hbg_engine *e);
