/* SPDX-License-Identifier: MIT */
/* Spare ring arrays, faulted in ahead of sessions (ring_spares.h). */
#include "daemon/engine/ring_spares.h"

#include <errno.h>

void ring_spares_init(struct ring_spares *sp) {
        *sp = (struct ring_spares){ 0 };
        pthread_mutex_init(&sp->lock, NULL);
}

void ring_spares_destroy(struct ring_spares *sp) {
        for (unsigned i = 0; i < sp->n_ready; i++)
                lazy_arena_unmap(&sp->ready[i]);
        sp->n_ready = 0;
        lazy_arena_unmap(&sp->filling);
        pthread_mutex_destroy(&sp->lock);
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
 * beyond `want`; how many stay. */
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
                sp->filled = 0;
        }
        if (ready >= want)
                return 0;
        if (!sp->filling.base) {
                if (lazy_arena_map(&sp->filling, bytes) < 0)
                        return -ENOMEM;
                lazy_hint_huge(sp->filling.base, huge_bytes);
                sp->filled = 0;
        }
        uint64_t len = bytes - sp->filled < max_bytes ? bytes - sp->filled : max_bytes;
        int err = lazy_populate(sp->filling.base + sp->filled, len);
        if (err < 0) {
                lazy_arena_unmap(&sp->filling);
                sp->filled = 0;
                return err;
        }
        sp->filled += len;
        if (sp->filled < bytes)
                return 1;
        pthread_mutex_lock(&sp->lock);
        sp->ready[sp->n_ready++] = sp->filling; /* ready < want <= RING_SPARES_MAX */
        ready = sp->n_ready;
        pthread_mutex_unlock(&sp->lock);
        sp->filling = (struct lazy_arena){ 0 };
        sp->filled = 0;
        return ready < want ? 1 : 0;
}

void ring_spares_trim(struct ring_spares *sp, unsigned keep) {
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
