/* SPDX-License-Identifier: MIT */
/*
 * behaviour_util.c: what the engine behaviour tests share
 * (test_engine_behaviour, test_engine_wakeups, test_engine_config,
 * test_engine_counters): an engine whose log counts stall reports and
 * graph failures, rings of a given window, the threads' counters summed,
 * waits for a graph, and tasks of the built-in kernels.
 */
#pragma once

#include <check.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "daemon/engine/engine.h"
#include "daemon/engine/engine_stats.h"
#include "tests/engine/harness.h"

#define WAIT_MS 20000

/* Lines quiet_log() saw: stall reports, those at a host task, graph
 * failures. */
extern _Atomic unsigned log_lines;
extern _Atomic unsigned host_stall_lines;
extern _Atomic unsigned graph_fail_lines;

/* The engine's log: counts the lines above, prints nothing. */
void quiet_log(void *ud, int priority, const struct hbg_log_fields *f, const char *fmt, va_list ap);
/* HBG_TEST_SCALE, 1 by default. */
unsigned test_scale(void);
void sleep_ms(long ms);

/* An engine of `threads` threads and `clusters` clusters, stall timeout
 * stall_ms, logging to quiet_log(). */
struct hbg_engine *engine_new_with(unsigned threads, unsigned clusters, uint64_t stall_ms);
/* A ring of windows d (tasks) and f (flags), a 1 MiB heap, its first id
 * first_id; in fair share `share` (weight 0: 1, as harness_ring_init()). */
void ring_open_share(struct harness_ring *h, struct hbg_engine *e, uint64_t d, uint64_t f, uint64_t first_id,
                     uint32_t share);
void ring_open(struct harness_ring *h, struct hbg_engine *e, uint64_t d, uint64_t f, uint64_t first_id);
/* Every thread's counters added up. */
void stats_sum(struct hbg_engine *e, struct hbg_thread_stats *s);

/* Graph k retired within WAIT_MS (its entry in *ge); and succeeded. */
void wait_graph(struct harness_ring *h, uint64_t k, struct hbg_graph_entry *ge);
void wait_graph_ok(struct harness_ring *h, uint64_t k);

/* n f32 of the heap at off: set to v; all equal to v (bit for bit). */
void fill_host(struct harness_ring *h, uint64_t off, uint64_t n, float v);
bool all_eq(struct harness_ring *h, uint64_t off, uint64_t n, float v);

/* fill_f32 of n elements at off on the lanes of mask, in `blocks` blocks;
 * spin_ns for ns on lane AIC; a fanin f added to t. */
struct harness_task fill_task(uint64_t off, uint64_t n, float v, uint8_t mask, uint16_t blocks);
struct harness_task spin_task(uint64_t ns, uint16_t blocks);
void add_dep(struct harness_task *t, uint64_t f);
/* Stream `total` noop AIV tasks of `blocks` blocks (spin_ns each, if not
 * 0) in graphs of 500, publishing every 25; returns the publishes. */
uint64_t stream_tasks(struct harness_ring *h, uint64_t total, uint16_t blocks, uint64_t spin_ns);

/* A case of s named `name` (CK_RUN_CASE=name runs it alone), 300 s. */
TCase *behaviour_case(Suite *s, const char *name);
