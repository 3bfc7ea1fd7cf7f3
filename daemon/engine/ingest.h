/* SPDX-License-Identifier: MIT */
/* ingest.c: claiming descriptors and handing them to classification;
 * the hints of work a ring holds. */
#pragma once

#include <stdbool.h>
#include <stdint.h>

struct hbg_ring;
struct sched_thread;

bool ingest_ring(struct sched_thread *t, struct hbg_ring *r);
/* Is the descriptor at the claim cursor a launch record covering ids
 * beyond `submitted` (a hint, for the stall detector)? */
bool ingest_launch_unsubmitted(struct hbg_ring *r, uint64_t claim, uint64_t submitted);

/* Work the client made: claimable ids, graph records, mailbox entries. */
bool ingest_has_external_work(struct hbg_ring *r);
/* Work a thread could take up in this ring now (a hint). */
bool ingest_has_work(struct hbg_ring *r);
/* Kernel tasks ready (queued or in a deque) or ids to classify: what
 * makes a ring's share wait for its turn (a hint, §9.5). */
bool ingest_has_kernel_work(struct hbg_ring *r);
bool ingest_graphs_arrived(struct hbg_ring *r);
