/* SPDX-License-Identifier: MIT */
/* retire.c: graph retirement (RUNTIME_LOGIC.md §12.1), and failing a
 * ring's graphs when it stops (§12.2). */
#pragma once

#include <stdbool.h>
#include <stdint.h>

struct hbg_ring;

/* After this thread moved the watermark, must it look at the
 * graphs (a graph or a producer waiting for window space it reached)? */
bool retire_due(struct hbg_ring *r);
/* Retire the graphs the watermark passed; tell the client. Any thread. */
void retire_graphs(struct hbg_ring *r);
/* Stop the ring on an error (the first reason wins, logged): it serves
 * nothing more and every graph it holds is retired as failed. */
void retire_fail(struct hbg_ring *r, int code, uint64_t task, const char *why);
/* retire_fail() without the warning (a session that ended normally): mark
 * the ring broken and fail its pending graphs. Any thread. */
void retire_fail_quietly(struct hbg_ring *r, int code);
/* The last retirement, once no scheduler thread can touch the ring any
 * more: every graph left fails with code. */
void retire_stopped(struct hbg_ring *r, int code);
