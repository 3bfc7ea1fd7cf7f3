/* SPDX-License-Identifier: MIT */
/* recorded.c: recorded graphs (RUNTIME_LOGIC.md §14), validated once,
 * launched many times. */
#pragma once

#include <stdint.h>

struct hbg_ring;
struct task_slot;

/* A recorded graph (§14), validated once: task i's fanins are relative,
 * 0 for the launch's gate (the id before the launch's first task) and
 * j + 1 for task j; a launch adds the gate's id. */
struct recorded_graph {
        uint32_t n;
        struct task_slot *tasks;
};

void recorded_free_ring(struct hbg_ring *r);
