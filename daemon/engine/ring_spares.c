/* SPDX-License-Identifier: MIT */
/* Spare ring arrays, faulted in ahead of sessions (ring_spares.h). */
#include "daemon/engine/ring_spares.h"

#include <errno.h>
#include <string.h>

void ring_spares_init(struct ring_spares *sp) {
        *sp = (struct ring_spares){ 0 };
        pthread_mutex_init(&sp->lock, NULL);
}

void ring_spares_destroy(struct ring_spares *sp) {
        for (unsigned i = 0; i < sp->n_ready; i++)
                lazy_arena_unmap(&sp->ready[i]);
        sp->n_ready = 0;
        for (unsigned i = 0; i < sp->n_given; i++)
                lazy_arena_unmap(&sp->given[i].arena);
        sp->n_given = 0;
        lazy_arena_unmap(&sp->filling);
        pthread_mutex_destroy(&sp->lock);
}

/* Whether the filler holds an arena, counted against `want` from before
 * it takes one until it is ready (sp->lock). */
static void filling_busy_set(struct ring_spares *sp, bool busy) {
        pthread_mutex_lock(&sp->lock);
        sp->filling_busy = busy;
        pthread_mutex_unlock(&sp->lock);
}

/* The filler's arena: none, or one to zero (memset: a warm one given
 * back) or to fault in; `reused`: a freed ring's. */
static void filling_set(struct ring_spares *sp, struct lazy_arena a, bool zero, bool reused) {
        filling_busy_set(sp, a.base != NULL);
        sp->filling = a;
        sp->filling_zero = zero;
        sp->filling_reused = reused;
        sp->filled = 0;
}

void ring_spares_give_back(struct ring_spares *sp, struct lazy_arena *a, bool warm) {
        if (!a->base)
                return;
        /* Its arrays are taken again from the start. */
        struct ring_spare_given g = { .arena = { .base = a->base, .size = a->size }, .warm = warm };
        struct lazy_arena unmap = *a;
        *a = (struct lazy_arena){ 0 };
        pthread_mutex_lock(&sp->lock);
        /* Of the spares' size, and with the spares ready, being made and
         * waiting no more than wanted: never more memory than the spares
         * the last fill was allowed. */
        if (g.arena.size == sp->bytes) {
                if (sp->n_ready + sp->filling_busy + sp->n_given < sp->want) {
                        sp->given[sp->n_given++] = g;
                        unmap = (struct lazy_arena){ 0 };
                } else if (warm) {
                        /* A warm one's pages are all resident: worth
                         * more than a cold one's, which may have few
                         * (the ring mapped its own; a pre-fault or
                         * graphs may have touched some). */
                        for (unsigned i = 0; i < sp->n_given; i++)
                                if (!sp->given[i].warm) {
                                        unmap = sp->given[i].arena;
                                        sp->given[i] = g;
                                        break;
                                }
                }
        }
        pthread_mutex_unlock(&sp->lock);
        lazy_arena_unmap(&unmap);
}

/* Unmap every arena given back. */
static void drop_given(struct ring_spares *sp) {
        struct ring_spare_given drop[RING_SPARES_MAX];
        pthread_mutex_lock(&sp->lock);
        unsigned n = sp->n_given;
        memcpy(drop, sp->given, n * sizeof(drop[0]));
        sp->n_given = 0;
        pthread_mutex_unlock(&sp->lock);
        for (unsigned i = 0; i < n; i++)
                lazy_arena_unmap(&drop[i].arena);
}

/* One given-back arena of `bytes` into *ret (and whether it is warm), a
 * warm one first; false if none. Those of another size are unmapped. */
static bool take_given(struct ring_spares *sp, size_t bytes, struct lazy_arena *ret, bool *ret_warm) {
        struct lazy_arena unmap[RING_SPARES_MAX];
        unsigned n_unmap = 0, n = 0, pick = RING_SPARES_MAX;
        pthread_mutex_lock(&sp->lock);
        for (unsigned i = 0; i < sp->n_given; i++)
                if (sp->given[i].arena.size == bytes &&
                    (pick == RING_SPARES_MAX || (sp->given[i].warm && !sp->given[pick].warm)))
                        pick = i;
        for (unsigned i = 0; i < sp->n_given; i++) {
                if (i == pick) {
                        *ret = sp->given[i].arena;
                        *ret_warm = sp->given[i].warm;
                } else if (sp->given[i].arena.size != bytes) {
                        unmap[n_unmap++] = sp->given[i].arena;
                } else {
                        sp->given[n++] = sp->given[i];
                }
        }
        sp->n_given = n;
        pthread_mutex_unlock(&sp->lock);
        for (unsigned i = 0; i < n_unmap; i++)
                lazy_arena_unmap(&unmap[i]);
        return pick != RING_SPARES_MAX;
}

bool ring_spares_take(struct ring_spares *sp, size_t bytes, struct lazy_arena *ret) {
        bool found = false;
        pthread_mutex_lock(&sp->lock);
        for (unsigned i = 0; i < sp->n_ready; i++) {
                if (sp->ready[i].size == bytes) {
                        *ret = sp->ready[i];
                        sp->ready[i] = sp->ready[--sp->n_ready];
                        sp->taken++;
                        found = true;
                        break;
                }
        }
        pthread_mutex_unlock(&sp->lock);
        return found;
}

/* Drops the ready spares that are not of `bytes` (any size if 0) or
 * beyond `want`; how many stay. With `bytes`, the size and number the
 * arenas given back are kept for from now on. */
static unsigned keep_only(struct ring_spares *sp, size_t bytes, unsigned want) {
        struct lazy_arena drop[RING_SPARES_MAX];
        unsigned n_drop = 0, n = 0;
        pthread_mutex_lock(&sp->lock);
        for (unsigned i = 0; i < sp->n_ready; i++) {
                if ((bytes == 0 || sp->ready[i].size == bytes) && n < want)
                        sp->ready[n++] = sp->ready[i];
                else
                        drop[n_drop++] = sp->ready[i];
        }
        sp->n_ready = n;
        if (bytes)
                sp->bytes = bytes;
        if (bytes || want < sp->want)
                sp->want = want;
        pthread_mutex_unlock(&sp->lock);
        for (unsigned i = 0; i < n_drop; i++)
                lazy_arena_unmap(&drop[i]);
        return n;
}

int ring_spares_fill(struct ring_spares *sp, size_t bytes, size_t huge_bytes, unsigned want, uint64_t max_bytes) {
        if (want > RING_SPARES_MAX)
                want = RING_SPARES_MAX;
        unsigned ready = keep_only(sp, bytes, want);
        if (sp->filling.base && (sp->filling.size != bytes || ready >= want)) {
                lazy_arena_unmap(&sp->filling);
                filling_set(sp, (struct lazy_arena){ 0 }, false, false);
        }
        if (ready >= want) {
                drop_given(sp); /* none is wanted */
                return 0;
        }
        if (!sp->filling.base) {
                /* Counted from here: a ring freed meanwhile sees it. */
                filling_busy_set(sp, true);
                /* A freed ring's arena of the size first, a warm one
                 * first: its pages are resident, zeroing them is cheap. A
                 * cold one's pages are dropped (zero on the next touch:
                 * MADV_DONTNEED of a private anonymous mapping) and faulted
                 * in again like a fresh arena's, which spares a mapping
                 * and writes no page twice. Those of another size are of
                 * no use. */
                struct lazy_arena a = { 0 };
                bool warm = false;
                bool given = take_given(sp, bytes, &a, &warm);
                if (given && !warm && madvise(a.base, a.size, MADV_DONTNEED) < 0) {
                        lazy_arena_unmap(&a);
                        given = false;
                }
                if (!given) {
                        if (lazy_arena_map(&a, bytes) < 0) {
                                filling_busy_set(sp, false);
                                return -ENOMEM;
                        }
                        lazy_hint_huge(a.base, huge_bytes);
                }
                filling_set(sp, a, given && warm, given);
        }
        uint64_t len = bytes - sp->filled < max_bytes ? bytes - sp->filled : max_bytes;
        if (sp->filling_zero) {
                /* Nothing of the ring's session may reach the next one:
                 * ready only once every byte is zero again. */
                memset(sp->filling.base + sp->filled, 0, len);
        } else {
                int err = lazy_populate(sp->filling.base + sp->filled, len);
                if (err < 0) {
                        lazy_arena_unmap(&sp->filling);
                        filling_set(sp, (struct lazy_arena){ 0 }, false, false);
                        return err;
                }
        }
        sp->filled += len;
        if (sp->filled < bytes)
                return 1;
        pthread_mutex_lock(&sp->lock);
        sp->ready[sp->n_ready++] = sp->filling; /* ready < want <= RING_SPARES_MAX */
        ready = sp->n_ready;
        if (sp->filling_reused)
                sp->reused++;
        sp->filling_busy = false;
        bool waiting = sp->n_given > 0;
        pthread_mutex_unlock(&sp->lock);
        sp->filling = (struct lazy_arena){ 0 };
        sp->filled = 0;
        sp->filling_zero = sp->filling_reused = false;
        /* Given back meanwhile: a look at them next call, reused or
         * unmapped. */
        return ready < want || waiting ? 1 : 0;
}

void ring_spares_trim(struct ring_spares *sp, unsigned keep) {
        drop_given(sp);
        keep_only(sp, 0, keep);
}

unsigned ring_spares_ready(struct ring_spares *sp, uint64_t *ret_bytes, uint64_t *ret_taken) {
        uint64_t bytes = 0;
        pthread_mutex_lock(&sp->lock);
        unsigned n = sp->n_ready;
        for (unsigned i = 0; i < n; i++)
                bytes += sp->ready[i].size;
        if (ret_taken)
                *ret_taken = sp->taken;
        pthread_mutex_unlock(&sp->lock);
        *ret_bytes = bytes;
        return n;
}

uint64_t ring_spares_waiting(struct ring_spares *sp) {
        uint64_t bytes = 0;
        pthread_mutex_lock(&sp->lock);
        for (unsigned i = 0; i < sp->n_given; i++)
                bytes += sp->given[i].arena.size;
        pthread_mutex_unlock(&sp->lock);
        return bytes;
}
