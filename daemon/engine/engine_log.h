/* SPDX-License-Identifier: MIT */
/* engine_log.c: the engine's log lines, through the owner's callback. */
#pragma once

#include "daemon/engine/engine.h"

struct hbg_engine;
struct hbg_ring;

/* engine_log.c: f may be NULL (no fields). engine_log_ring adds the ring's
 * log_fields to f's. */
void engine_log(struct hbg_engine *e, int priority, const struct hbg_log_fields *f, const char *fmt, ...)
        __attribute__((format(printf, 4, 5)));
void engine_log_ring(struct hbg_ring *r, int priority, const struct hbg_log_fields *f, const char *fmt, ...)
        __attribute__((format(printf, 4, 5)));
