/* SPDX-License-Identifier: MIT */
/* Fair share's balance rule (RUNTIME_LOGIC.md §9.5), a pure function. */
#pragma once

#include <stdbool.h>
#include <stdint.h>

/* A ring's weight when none is given, and the largest one. */
#define HBG_FAIR_SHARE_WEIGHT_DEFAULT 1u
#define HBG_FAIR_SHARE_WEIGHT_MAX 100u

/*
 * Would moving one thread from ring A (`mine` threads, the mover counted;
 * weight wa) to ring B (`theirs` threads; weight wb) leave the two better
 * balanced by weight? Yes when B, with the mover, still has fewer threads
 * per unit of weight than A has now: (theirs + 1) / wb < mine / wa. With
 * equal weights: theirs + 1 < mine. The strict inequality means the move
 * back is never better balanced, so threads do not swap for ever.
 */
static inline bool fair_share_move_helps(unsigned mine, unsigned wa, unsigned theirs, unsigned wb) {
        return ((uint64_t)theirs + 1) * wa < (uint64_t)mine * wb;
}
