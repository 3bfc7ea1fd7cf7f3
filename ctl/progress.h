/* SPDX-License-Identifier: MIT */
/* run --progress: the progress line (hbgd asked for the session's
 * completed tasks). */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct progress;
/* NULL when progress is not shown (not asked for). On a terminal
 * (stderr) the line is redrawn; elsewhere one final line is printed. */
struct progress *progress_new(const char *socket, size_t n_tasks);
/* Tasks 0..added-1 were added with ids ids[]; `submitted`: the graph was
 * submitted. Redraws at most every 200 ms unless `force`. */
void progress_update(struct progress *pg, const uint64_t *ids, size_t added, bool submitted, bool force);
/* The final line (done: the graph finished), then free. NULL is fine. */
void progress_end(struct progress *pg, const uint64_t *ids, size_t added, bool done);
