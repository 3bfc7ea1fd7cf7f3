/* SPDX-License-Identifier: MIT */
/* complete.c: a task's status becoming final (RUNTIME_LOGIC.md §11, §12.2),
 * the stage after dispatch: the one entry point every finished task goes
 * through, which hands it to the completion policy. */
#pragma once

#include <stdint.h>

struct hbg_ring;
struct sched_thread;

/* Task id's status is final. A failure (status < 0) is recorded with the
 * slot's report_kernel and why: a static reason, or NULL when the task's
 * kernel returned the error (§12.2). */
void complete_task(struct sched_thread *t, struct hbg_ring *r, uint64_t id, int status, const char *why);
