/* SPDX-License-Identifier: MIT */
/* hbgd's housekeeping timer (daemon/tick.c). */
#pragma once

#include <stdbool.h>

struct hbgd;

/* The timer's period, quick while busy (daemon.c's on_timer() says what
 * is), slow while idle, open sessions or not. */
void hbgd_tick_set(struct hbgd *d, bool busy);
