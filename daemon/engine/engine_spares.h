/* SPDX-License-Identifier: MIT */
/*
 * The engine's spare ring arrays, as hbgd's io side fills, counts and
 * trims them; the store is daemon/engine/ring_spares.h. These calls are
 * defined in ring.c, not in the store: filling needs the size of a ring's
 * arrays, which ring.c alone knows, and ring.c takes its arrays from the
 * store, so the store asking ring.c would be a call up (a circle).
 */
#pragma once

#include <stdint.h>

struct hbg_engine;
struct hbg_geometry;

/*
 * Spare ring arrays (docs/RUNTIME_LOGIC.md §10.1): one step towards `want`
 * (at most HBG_ENGINE_MAX_SPARE_RINGS) arenas of a ring of geometry g
 * mapped and faulted in ahead of sessions, at most max_bytes faulted in;
 * engine_ring_add() of a ring of that size then takes one instead of
 * cold pages. Spares of another size are dropped. The arenas of freed
 * rings are zeroed into spares before any is mapped, or unmapped if of
 * no use (ring_spares.h). 1: call again; 0: done;
 * -ENOMEM, or -EINVAL where the kernel cannot pre-fault. One caller at a
 * time (hbgd's slow-work thread).
 */
#define HBG_ENGINE_MAX_SPARE_RINGS 8u
int engine_spare_fill(struct hbg_engine *e, const struct hbg_geometry *g, unsigned want, uint64_t max_bytes);
/* Spares ready now, their bytes, and how many rings took one since start
 * (ret_taken may be NULL). */
unsigned engine_spares(struct hbg_engine *e, uint64_t *ret_bytes, uint64_t *ret_taken);
/* Keep at most `keep` ready spares, and unmap freed rings' arenas not yet
 * reused (any caller: the store is locked). */
void engine_spares_trim(struct hbg_engine *e, unsigned keep);
/* The bytes of freed rings' arenas waiting for the next fill (at most
 * the spares it may make beside those ready). */
uint64_t engine_spares_waiting(struct hbg_engine *e);
