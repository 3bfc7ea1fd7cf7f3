/* SPDX-License-Identifier: MIT */
/* recorded.c: recorded graphs (RUNTIME_LOGIC.md §14), validated once,
 * launched many times. */
#pragma once

#include <stdatomic.h>
#include <stdint.h>

#include "daemon/engine/kernels.h"
#include "shm/layout.h"
#include "daemon/engine/engine_recorded.h"

struct hbg_ring;

/*
 * A recorded task's validated form, packed: the fields of its task_slot
 * that validation set and a launch copies (launch.c), 56 of a slot's 512
 * bytes. Its variable parts lie in the graph's words[], from `words`
 * on: n_fanins relative fanins, then n_tensors tensors of three words
 * each, then n_scalars scalars. A launch reads the tasks in order, so the
 * graph is read as two streams, not a slot's stride.
 */
struct recorded_task {
        uint64_t words;
        const struct kernel_info *kernel[HBG_LANES];
        uint64_t predicate_offset;
        uint16_t block_num;
        uint16_t report_kernel;
        uint16_t ktime_kernel;
        uint8_t kind, shape, lane_mask, lanes, flags;
        uint8_t n_fanins, n_tensors, n_scalars;
};

/* docs/OPERATIONS.md and hbgd.conf(5) give these sizes (what a recorded
 * task keeps is charged to its uid). */
_Static_assert(sizeof(struct recorded_task) == 56, "a recorded task's size changed: say so in the docs");

/* Words a tensor argument takes in words[]. */
#define RECORDED_TENSOR_WORDS (sizeof(struct hbg_kernel_tensor_arg) / sizeof(uint64_t))
_Static_assert(sizeof(struct hbg_kernel_tensor_arg) % sizeof(uint64_t) == 0,
               "a tensor argument is a whole number of words");
/* The most words one task takes: what the charge before validation
 * (engine_recorded_memory()) allows for, and the room validation
 * makes. */
#define RECORDED_WORDS_MAX (HBG_MAX_FANINS + HBG_MAX_TENSOR_ARGS * RECORDED_TENSOR_WORDS + HBG_MAX_SCALAR_ARGS)

/* A recorded graph (§14), validated once: task i's fanins are relative,
 * 0 for the launch's gate (the id before the launch's first task) and
 * j + 1 for task j; a launch adds the gate's id. */
struct recorded_graph {
        uint32_t n;
        struct recorded_task *tasks;
        uint64_t *words;
        uint64_t n_words;
};

/* A ring's recorded graphs (hbg_ring.recorded, §14): entries below n are
 * complete and immutable until ring_free(). One thread records (the
 * engine's owner); it fills an entry, then stores n (release);
 * classifiers load n (acquire) first. */
struct ring_recorded {
        struct recorded_graph **graphs;   /* engine cfg.max_recorded_graphs */
        _Atomic uint32_t n;
};

void recorded_free_ring(struct hbg_ring *r);
