/* SPDX-License-Identifier: MIT */
/*
 * The comparison's performance targets (docs/PERFORMANCE.md, "The
 * targets, judged by each run"): after the rows, each target judged from
 * this run's own figures, under the default completion policy and the
 * plotted thread count: met, not met, or not measured (what it needs was
 * not run: a peer not built, --no-latency, one client count ...).
 */
#pragma once

struct cmp;

/* Print the targets and write metric target_met (shape: the target's
 * name; 1 met, 0 not; none when not measured). Before report_close(). */
void cmp_targets(struct cmp *c);
