/* SPDX-License-Identifier: MIT */
/*
 * The comparison's performance targets (docs/PERFORMANCE.md, "The
 * targets, judged by each run"): after the rows, each target judged from
 * this run's own figures, under the default completion policy and the
 * plotted thread count: not met when a figure misses, met when every
 * figure it needs was measured and none misses, else not measured (a
 * peer not built, --no-latency, one client count, a shape left out ...).
 */
#pragma once

struct cmp;

/* Print the targets and write metric target_met (shape: the target's
 * name; 1 met, 0 not; none when not measured). Before report_close(). */
void cmp_targets(struct cmp *c);
