/* SPDX-License-Identifier: MIT */
/* launch.c: expanding the launch of a recorded graph (RUNTIME_LOGIC.md
 * §14) into tasks, a batch per visit. */
#pragma once

#include <stdbool.h>
#include <stdint.h>

struct hbg_ring;
struct sched_thread;
struct recorded_graph;

/* A launch a thread claimed (§14): it classifies ids next .. end - 1 of
 * it, classify_batch per visit of the ring. */
struct launch_expansion {
        uint64_t next, end;
        uint64_t start;                   /* the launch record's id */
        uint64_t gate;
        uint64_t first;                   /* recorded task of id start */
        const struct recorded_graph *g;   /* NULL when the record failed */
        int err;
        const char *why;
};

/* Ids id .. id + n - 1, claimed together: the launch record at id and the
 * tasks of the recorded graph it names (§14). Checks the record and
 * classifies the first classify_batch of them; the rest on later visits
 * (launch_continue). */
void launch_classify(struct sched_thread *t, struct hbg_ring *r, uint64_t id, uint64_t n);
/* This thread has a launch of r to go on with: the next ids of it. */
bool launch_pending(const struct sched_thread *t, const struct hbg_ring *r);
bool launch_continue(struct sched_thread *t, struct hbg_ring *r);
