/* SPDX-License-Identifier: MIT */
/* libclient/fanin_join.c: more than 16 fanins joined by dummy tasks. */
#pragma once

#include <stddef.h>
#include <stdint.h>

#include "hbg/hbg.h"

/* Writes a dummy task (nothing runs) whose fanins are fanins[0..n), 2 <=
 * n <= 16, ascending: its id in *ret_id. 0, or a negative errno with
 * the client's message set. */
typedef int (*hbgc_dummy_writer)(hbg_client *c, const uint64_t *fanins, size_t n, uint64_t *ret_id);

/* deps[0..*n), ascending and distinct, as at most 16 fanins: with more,
 * dummies written by `write` join them, ceil((*n - 16) / 15) of them
 * (hbg_graph_room(3)); deps[] is rewritten in place, and *n is then 16
 * (at most 16 left as they were).
 * 0, or write's error (the dummies written before it stay). */
int hbgc_fanin_join(hbg_client *c, uint64_t *deps, size_t *n, hbgc_dummy_writer write);
