/* SPDX-License-Identifier: MIT */
/* stall.c: the stall detector (RUNTIME_LOGIC.md §12.3). */
#pragma once

#include <stdbool.h>

struct hbg_ring;
struct sched_thread;

bool stall_unfinished(struct hbg_ring *r);
void stall_check(struct sched_thread *t, struct hbg_ring *r);
