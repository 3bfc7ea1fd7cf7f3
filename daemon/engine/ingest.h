/* SPDX-License-Identifier: MIT */
/* ingest.c: claiming descriptors and handing them to classification,
 * the first stage of a task's walk (what may be claimed: work.c). */
#pragma once

#include <stdbool.h>

struct hbg_ring;
struct sched_thread;

bool ingest_ring(struct sched_thread *t, struct hbg_ring *r);
