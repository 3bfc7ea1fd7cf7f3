/* SPDX-License-Identifier: MIT */
/* libclient/graph.c for the other files of libhbgclient: building tasks and graphs. */
#pragma once

#include "libclient/client_private.h"

/* Wait until the next id fits the task window (running host tasks). */
int hbgc_wait_window(hbg_client *c);
/* Write a task with these fanins: into the window (waiting for room), or
 * into the recording while one is open. *ret_id: its id. */
int hbgc_write_task(hbg_client *c, const struct hbg_task_record *t, const uint64_t *fanins,
                    size_t n_fanins, uint64_t *ret_id);
/* More than 16 fanins: joined by dummy tasks until 16 are left, the
 * fewest dummies possible (fanin_join.c). */
int hbgc_join_fanins(hbg_client *c, uint64_t *deps, size_t *n);
/* Sort and deduplicate ids (no sort when they come in order). */
size_t hbgc_sort_unique(uint64_t *v, size_t n);
/* Publish once enough tasks were written since the last publish. 0, or
 * -ECONNRESET when its doorbell found hbgd gone. */
int hbgc_maybe_publish(hbg_client *c);
