/* SPDX-License-Identifier: MIT */
/* dispatch.c: running ready tasks, the stage after making them ready:
 * kernels on the thread's cores, kernel-less tasks by completing them. */
#pragma once

#include <stdbool.h>

struct hbg_ring;
struct sched_thread;

bool dispatch_ring(struct sched_thread *t, struct hbg_ring *r);
/* Complete up to max ready kernel-less tasks from the retire queue. */
bool dispatch_retire_queue(struct sched_thread *t, struct hbg_ring *r, unsigned max);
