/* SPDX-License-Identifier: MIT */
/* stall.c: the stall detector (RUNTIME_LOGIC.md §12.3). */
#pragma once

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

struct hbg_ring;
struct sched_thread;

/* Stall detection (§12.3), by whichever thread checks, with this
 * ring's limit (the session's, else cfg.stall_timeout_ms; 0 off):
 * a ring's (hbg_ring.stall). */
struct ring_stall {
        uint64_t timeout_ms;
        _Atomic uint32_t lock;
        uint64_t wm, retired;             /* watermark, graphs_retired at the clock's start */
        int64_t since_ms;
        bool watching;                    /* the last check saw work pending */
};

bool stall_unfinished(struct hbg_ring *r);
void stall_check(struct sched_thread *t, struct hbg_ring *r);
