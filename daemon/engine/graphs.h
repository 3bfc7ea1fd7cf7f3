/* SPDX-License-Identifier: MIT */
/* graphs.c: failures, graph retirement (§12.1), stopping a ring, the
 * completion pipe's signal. */
#pragma once

#include <stdbool.h>
#include <stdint.h>

struct hbg_ring;

/* Failure record (§12.2): the kernel is the one named when the task
 * failed (its slot may be reused before its graph retires). why: static;
 * NULL when the kernel returned the error (the graph's message is then
 * "kernel NAME returned -EIO"). */
struct failure {
        uint64_t id;
        int32_t code;
        uint16_t kernel;
        const char *why;
};

/* After this thread moved the watermark, must it look at the
 * graphs (a graph or a producer waiting for window space it reached)? */
bool graphs_retire_due(struct hbg_ring *r);

void graphs_record_failure(struct hbg_ring *r, uint64_t id, int code, uint16_t kernel, const char *why);
void graphs_retire(struct hbg_ring *r);
void graphs_fail(struct hbg_ring *r, int code, uint64_t task, const char *why);
/* graphs_fail() without the warning (a session that ended normally): mark
 * the ring broken and fail its pending graphs. Any thread. */
void graphs_fail_quietly(struct hbg_ring *r, int code);
/* Called once no scheduler thread can touch the ring any more. */
void graphs_stop(struct hbg_ring *r, int code);
/* One byte into the completion pipe (never blocks, never retried). */
void graphs_signal(struct hbg_ring *r);
