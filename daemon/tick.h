/* SPDX-License-Identifier: MIT */
/* hbgd's housekeeping timer, and collecting closed sessions' rings
 * (daemon/tick.c). */
#pragma once

#include <stdbool.h>

struct hbgd;

/* The timer's period, quick while busy (daemon.c's on_timer() says what
 * is), slow while idle, open sessions or not. */
void hbgd_tick_set(struct hbgd *d, bool busy);

/* engine_collect(), and a spare ring asked for when it gave session
 * memory back (spare_rings.h); the rings still held. */
unsigned hbgd_collect(struct hbgd *d);

/* A closed session's ring was still held by a scheduler thread: collect
 * again after 1 ms, then 2, 4 ... 64 ms while it stays held, not only at
 * the next tick, so that a client that closes and connects again at once
 * finds its session's count and memory given back. */
void hbgd_collect_soon(struct hbgd *d);
/* That look, when due (the io loop's turn); the loop's timeout in ms until
 * the next one (1000 when none is pending: the tick takes over). */
int hbgd_collect_due(struct hbgd *d);
