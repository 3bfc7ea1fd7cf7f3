/* SPDX-License-Identifier: MIT */
/*
 * Spare ring arrays (docs/RUNTIME_LOGIC.md §10.1): whole lazy arenas of a
 * ring's private arrays (lazy_alloc.h), mapped and faulted in ahead of the
 * sessions that will use them, so that a session's first graph does not
 * take the first touch of every page of its slots and queues. hbgd fills
 * them on its slow-work thread while nothing else waits
 * (engine_spare_fill()); ring_new() takes one of the right size
 * instead of mapping cold pages. A spare's bytes are all zero, the
 * arrays' initial state: fresh anonymous pages, or a freed ring's arena
 * given back (ring_spares_give_back()) that the filler made zero whole
 * before it is ready, so that nothing of the session it served remains:
 * a warm one (all resident) by memset(), a cold one by dropping its pages
 * (MADV_DONTNEED) and faulting them in again. Reusing a warm one costs a
 * memset() on the slow-work thread where a fresh one costs a mapping and
 * a fault per page there, and its munmap() (a TLB shoot-down across
 * hbgd's threads) at the ring's free on the io thread (docs/PERFORMANCE.md,
 * "A closed ring's arrays, reused").
 */
#pragma once

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "daemon/engine/engine_spares.h"
#include "daemon/engine/lazy_alloc.h"

#define RING_SPARES_MAX HBG_ENGINE_MAX_SPARE_RINGS

/* A freed ring's arena, not yet zeroed. */
struct ring_spare_given {
        struct lazy_arena arena;
        bool warm;                              /* all its pages resident: the ring took a spare */
};

struct ring_spares {
        pthread_mutex_t lock;                   /* all but the filler's own fields */
        struct lazy_arena ready[RING_SPARES_MAX];
        unsigned n_ready;
        /* Freed rings' arenas: the filler's to zero or unmap, never handed
         * to a ring as they are. Kept only of the spares' size, and only
         * while ready + being made + waiting stay within `want`. */
        struct ring_spare_given given[RING_SPARES_MAX];
        unsigned n_given;
        size_t bytes;                           /* the spares' size, at the last fill (0: none yet) */
        unsigned want;                          /* spares wanted then (or fewer, trimmed since) */
        bool filling_busy;                      /* filling holds an arena */
        uint64_t taken;                         /* by rings, since start */
        uint64_t reused;                        /* spares made of a freed ring's arena */
        /* The filler's, one caller at a time (engine_spare_fill()). */
        struct lazy_arena filling;
        uint64_t filled;                        /* bytes of filling faulted in, or zeroed */
        bool filling_zero;                      /* filling is a warm ring's: zeroed, not faulted in */
        bool filling_reused;                    /* filling is a freed ring's (warm or cold) */
};

void ring_spares_init(struct ring_spares *sp);
/* Unmaps every spare. */
void ring_spares_destroy(struct ring_spares *sp);

/* A ready spare of `bytes` into *ret (taken from the store), or false. */
bool ring_spares_take(struct ring_spares *sp, size_t bytes, struct lazy_arena *ret);

/*
 * A freed ring's arena, taken over (*a emptied); `warm`: its pages are
 * resident. Kept for the filler to zero into a spare if it is of the
 * spares' size and the spares ready, being made and waiting are fewer
 * than the last fill wanted (a warm one also takes the place of a cold
 * one waiting, which is unmapped instead); else unmapped now. No thread
 * may touch it any more (ring_free()).
 */
void ring_spares_give_back(struct ring_spares *sp, struct lazy_arena *a, bool warm);

/*
 * One step towards `want` ready spares of `bytes` (the first `huge_bytes`
 * of each with the huge-page hint): spares of another size, or beyond
 * want, are dropped; a given-back arena of `bytes` is zeroed into a spare
 * before a new one is mapped, and the others given back are unmapped; at
 * most max_bytes are faulted in or zeroed. 1: call again (also while
 * given-back arenas wait); 0: `want` are ready and none waits; -ENOMEM, or
 * -EINVAL where the kernel cannot pre-fault (before Linux 5.14): nothing
 * is being filled then.
 */
int ring_spares_fill(struct ring_spares *sp, size_t bytes, size_t huge_bytes, unsigned want, uint64_t max_bytes);

/* Unmap the arenas given back, and keep at most `keep` ready spares (the
 * others unmapped). */
void ring_spares_trim(struct ring_spares *sp, unsigned keep);

/* The bytes of the arenas given back and waiting for the filler. */
uint64_t ring_spares_waiting(struct ring_spares *sp);

/* Spares ready now, their bytes, and how many rings took one (status). */
unsigned ring_spares_ready(struct ring_spares *sp, uint64_t *ret_bytes, uint64_t *ret_taken);
