/* SPDX-License-Identifier: MIT */
/* work.c: the looks at a ring that tell what it holds to do, below the
 * stages that act on it: the ids claimable now (RUNTIME_LOGIC.md §10.1,
 * launch records §14), graph records, mailbox entries, ready tasks. */
#pragma once

#include <stdbool.h>
#include <stdint.h>

struct hbg_ring;

/* How many ids from `claim` may be classified now: submitted, inside the
 * window, and their slots released by the previous lap (§10.1). all: max
 * of them or none (a launch), decided before looking at any slot. */
uint64_t work_claimable(struct hbg_ring *r, uint64_t claim, uint64_t max, bool all);
/* The ids to claim at `claim` now (at most max; a launch whole), 0 if
 * none; *launch: they are a launch record's. */
uint64_t work_claim_size(struct hbg_ring *r, uint64_t claim, uint64_t max, bool *launch);
/* Is the descriptor at the claim cursor a launch record covering ids
 * beyond `submitted` (a hint, for the stall detector)? */
bool work_launch_unsubmitted(struct hbg_ring *r, uint64_t claim, uint64_t submitted);

/* Work the client made: claimable ids, graph records, mailbox entries. */
bool work_external(struct hbg_ring *r);
/* Nothing at all for a visit to do: the ring is between its client's
 * requests (every id claimed complete, every graph record seen retired,
 * no work_external(), no skipped wake pending). */
bool work_none(struct hbg_ring *r);
/* Kernel tasks ready (queued or in a deque) or ids to classify: what
 * makes a ring's share wait for its turn (a hint, §9.5). */
bool work_kernel(struct hbg_ring *r);
/* New graph records the retirer has not looked at yet. */
bool work_graphs_arrived(struct hbg_ring *r);
