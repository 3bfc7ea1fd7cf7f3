/* SPDX-License-Identifier: MIT */
/* dispatch.c: running kernels on the thread's cores. */
#pragma once

#include <stdbool.h>

struct hbg_ring;
struct sched_thread;

bool dispatch_ring(struct sched_thread *t, struct hbg_ring *r);
