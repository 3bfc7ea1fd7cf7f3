/* SPDX-License-Identifier: MIT */
/* fair_share.c: whose turn a thread's next kernel is (RUNTIME_LOGIC.md
 * §9.5), and the turn rule itself, a pure function (inline, below). */
#pragma once

#include <stdbool.h>
#include <stdint.h>

/* Share slots (engine->shares[]) as bits: one per slot, at most
 * HBG_ENGINE_MAX_RINGS (1024) slots. */
#define FAIR_SHARE_WORDS 16u

/* Share slot s's place in a thread's turn order, counted from the slot
 * after `serving` (the share it served last): 0 .. n - 1, `serving`
 * itself last. */
static inline unsigned fair_share_distance(unsigned serving, unsigned s, unsigned n) {
        return (s + n - serving - 1) % n;
}

static inline bool fair_share_bit(const uint64_t *bits, unsigned s) {
        return (bits[s / 64] >> (s % 64)) & 1u;
}

/* A thread starts a kernel of share x, which fair_share_turn_allows()
 * allowed: x's turn goes on, or a new one of `weight` kernels begins. */
static inline void fair_share_turn_take(unsigned *serving, unsigned *credit, unsigned x, unsigned weight) {
        if (x == *serving && *credit > 0) {
                --*credit;
        } else {
                *serving = x;
                *credit = weight > 0 ? weight - 1 : 0;
        }
}

/*
 * May a thread that last served share slot `serving`, with `credit`
 * kernels of that turn left, start a kernel of share x now? `waiting`
 * marks the shares (x excepted or not) that have kernel work and may run
 * more (not at max_threads_per_session); `x_capped`: x itself is at that
 * cap. n share slots.
 *
 * The turn of `serving` goes on while credit is left and it waits.
 * Otherwise the turn passes to the next share in slot order, after
 * `serving`, that is waiting: x may start only if no waiting share comes
 * before it. A capped x yields to any
 * waiting share. So between two turns of a waiting share u, a thread
 * serves every other share at most once, each for at most its weight:
 * the bound of docs/SECURITY.md.
 */
static inline bool fair_share_turn_allows(unsigned serving, unsigned credit, unsigned x, bool x_capped,
                                          const uint64_t *waiting, unsigned n) {
        if (x_capped) {
                for (unsigned s = 0; s < n; s++)
                        if (s != x && fair_share_bit(waiting, s))
                                return false;
                return true;
        }
        if (credit > 0 && (x == serving || fair_share_bit(waiting, serving)))
                return x == serving;
        unsigned dx = fair_share_distance(serving, x, n);
        for (unsigned s = 0; s < n; s++)
                if (s != x && fair_share_bit(waiting, s) && fair_share_distance(serving, s, n) < dx)
                        return false;
        return true;
}

struct sched_thread;
struct hbg_ring;

/* fair_share.c, only while shares compete, by a thread that owns
 * clusters, visiting r. */
/* May t start a kernel of r now? */
bool fair_share_may_start(struct sched_thread *t, struct hbg_ring *r);
/* Before each run of a task's blocks that fair_share_may_start() allowed:
 * the turn's count. */
void fair_share_begin(struct sched_thread *t, struct hbg_ring *r);
/* A visit of r started no kernel. */
void fair_share_visit_idle(struct sched_thread *t, struct hbg_ring *r);
