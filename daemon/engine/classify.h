/* SPDX-License-Identifier: MIT */
/* classify.c: a claimed task's slot, linking a run (RUNTIME_LOGIC.md
 * §10.1) and handing its tasks on. */
#pragma once

#include <stdint.h>

#include "daemon/engine/engine.h"

struct hbg_ring;
struct sched_thread;
struct task_slot;

/* A claimed id's slot, re-initialised for it. Its validated copy goes in
 * next, and validation's verdict in classify_err/classify_why. */
struct task_slot *classify_begin(struct hbg_ring *r, uint64_t id);
/* The tasks of a run linked to a fanin in the run (§10.1), by offset. */
struct classify_run_set {
        uint64_t linked[HBG_ENGINE_MAX_CLASSIFY_BATCH / 64];
        uint64_t n_linked;
};
/* Pass one, per task of the run first .. first + n - 1 (n at most
 * HBG_ENGINE_MAX_CLASSIFY_BATCH), after its validation: owned, waiting,
 * and linked to its latest fanin if that is in the run (plain stores). */
void classify_link(struct hbg_ring *r, struct task_slot *s, uint64_t first, struct classify_run_set *set);
/* Pass two, once every task of the run passed classify_link(): the tasks
 * not linked are handed on (failed, retired inline or routed). */
void classify_run(struct sched_thread *t, struct hbg_ring *r, uint64_t first, uint64_t n,
                  const struct classify_run_set *set);
