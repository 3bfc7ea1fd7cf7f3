/* SPDX-License-Identifier: MIT */
/*
 * Spare ring arrays (docs/RUNTIME_LOGIC.md §10.1): whole lazy arenas of a
 * ring's private arrays (lazy_alloc.h), mapped and faulted in ahead of the
 * sessions that will use them, so that a session's first graph does not
 * take the first touch of every page of its slots and queues. hbgd fills
 * them on its slow-work thread while nothing else waits
 * (engine_spare_fill()); ring_new() takes one of the right size
 * instead of mapping cold pages. Fresh anonymous pages are zero, the
 * arrays' initial state: a spare is never a ring's memory used before.
 */
#pragma once

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "daemon/engine/engine_spares.h"
#include "daemon/engine/lazy_alloc.h"

#define RING_SPARES_MAX HBG_ENGINE_MAX_SPARE_RINGS

struct ring_spares {
        pthread_mutex_t lock;                   /* ready[], n_ready */
        struct lazy_arena ready[RING_SPARES_MAX];
        unsigned n_ready;
        uint64_t taken;                         /* by rings, since start */
        /* The filler's, one caller at a time (engine_spare_fill()). */
        struct lazy_arena filling;
        uint64_t filled;                        /* bytes of filling faulted in */
};

void ring_spares_init(struct ring_spares *sp);
/* Unmaps every spare. */
void ring_spares_destroy(struct ring_spares *sp);

/* A ready spare of `bytes` into *ret (taken from the store), or false. */
bool ring_spares_take(struct ring_spares *sp, size_t bytes, struct lazy_arena *ret);

/*
 * One step towards `want` ready spares of `bytes` (the first `huge_bytes`
 * of each with the huge-page hint): spares of another size, or beyond
 * want, are dropped; at most max_bytes are faulted in. 1: call again; 0:
 * `want` are ready; -ENOMEM, or -EINVAL where the kernel cannot pre-fault
 * (before Linux 5.14): nothing is being filled then.
 */
int ring_spares_fill(struct ring_spares *sp, size_t bytes, size_t huge_bytes, unsigned want, uint64_t max_bytes);

/* Keep at most `keep` ready spares (the others unmapped). */
void ring_spares_trim(struct ring_spares *sp, unsigned keep);

/* Spares ready now, their bytes, and how many rings took one (status). */
unsigned ring_spares_ready(struct ring_spares *sp, uint64_t *ret_bytes, uint64_t *ret_taken);
