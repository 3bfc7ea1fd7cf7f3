/* SPDX-License-Identifier: MIT */
/*
 * Recorded graphs and validate-only requests, as hbgd's io side and its
 * slow-work thread use them (RUNTIME_LOGIC.md §14; the engine's side is
 * daemon/engine/recorded.c and validate.c).
 */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "daemon/engine/engine.h"

struct hbg_recorded_task;

/*
 * Record a graph for replay (RUNTIME_LOGIC.md §14): validate each of the n
 * tasks once (each copied first; the caller's memory must not change while
 * this runs: hbgd maps a memfd sealed against writes) and keep them until
 * the ring is freed. The ring's launch records then name
 * it by the returned number (0, 1, ... in recording order). Returns it,
 * or -ENOSPC (max_recorded_graphs recorded), -ENOMEM, -EINVAL for n == 0,
 * or the error of task *ret_task, which is invalid (*ret_error says why).
 * One thread per ring (the one that adds and removes rings).
 */
int ring_record(struct hbg_ring *r, const struct hbg_recorded_task *tasks, uint32_t n,
                uint32_t *ret_task, const char **ret_error);
/*
 * ring_record() in two steps, so that the slow one runs off the thread
 * that adds and removes rings: ring_record_validate() (any thread, while
 * the ring lives: it reads only the ring's fixed geometry and the engine's
 * fixed config) validates into *ret a graph nobody sees yet, with the
 * errors of ring_record() but -ENOSPC; ring_record_add() (the
 * ring's one thread) keeps it and returns its number, or -ENOSPC (g is
 * freed either way). ring_record_full(): whether max_recorded_graphs
 * are recorded (ask before validating).
 */
struct recorded_graph;
int ring_record_validate(struct hbg_ring *r, const struct hbg_recorded_task *tasks, uint32_t n,
                         struct recorded_graph **ret, uint32_t *ret_task, const char **ret_error);
int ring_record_add(struct hbg_ring *r, struct recorded_graph *g);
bool ring_record_full(const struct hbg_ring *r);
void recorded_graph_free(struct recorded_graph *g);
/*
 * Validate-only (a dry run, docs/PROTOCOL.md): each of the n tasks, the
 * tasks from number first on of a larger graph, checked as
 * ring_record_validate() would (task i has id first + i + 1, its fanins
 * in [0, first + i + 1)) against a heap of heap_size bytes and the
 * engine's limits, with no ring and nothing kept. report() is called for
 * every invalid task, in order, with its error and a message with the
 * numbers that failed (kernel_explain()). Any thread (reads only the
 * engine's fixed config); the caller's memory must not change meanwhile.
 * Returns the number of invalid tasks, or -ENOMEM.
 */
#define HBG_VALIDATE_MESSAGE_MAX 256
typedef void (*hbg_validate_report_fn)(void *userdata, uint32_t task, int code, const char *message);
int engine_validate(const struct hbg_engine *e, uint64_t heap_size, uint64_t first,
                    const struct hbg_recorded_task *tasks, uint32_t n, hbg_validate_report_fn report, void *userdata);
/* The most bytes ring_record() keeps for n tasks, and the bytes a
 * validated graph g keeps (at most that): what a recording is charged
 * before its validation, and after. */
uint64_t engine_recorded_memory(uint32_t n);
uint64_t recorded_graph_memory(const struct recorded_graph *g);
