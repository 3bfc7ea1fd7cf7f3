/* SPDX-License-Identifier: MIT */
/* fair_share_slots.c: the share slots (RUNTIME_LOGIC.md §9.5) rings join
 * and leave. */
#pragma once

#include <stdalign.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

struct hbg_engine;
struct hbg_ring;

/* A fair share (§9.5): the rings of one share id (hbgd: one uid). See
 * fair_share.c for who writes what. */
struct fair_share_slot {
        alignas(64) _Atomic unsigned weight;
        uint32_t id;                      /* rings_lock */
        unsigned rings;                   /* rings_lock: its rings, until freed */
};

/* Join and leave, under rings_lock. */
int fair_share_join(struct hbg_engine *e, struct hbg_ring *r, uint32_t id, unsigned weight);
void fair_share_leave(struct hbg_engine *e, struct hbg_ring *r);
