/* SPDX-License-Identifier: MIT */
#include "shm/completion.h"

#include <errno.h>
#include <sched.h>
#include <time.h>

#include "shm/layout.h"
#include "common/clock.h"

void flag_window_init(struct hbg_flag_window *w, const struct hbg_geometry *g,
                          void *cpl_base, uint64_t first_id) {
        struct hbg_cpl_header *hdr = cpl_base;
        uint32_t hi_bits = g->flag_window_log2 - HBG_FLAG_WINDOW_MIN_LOG2;

        *w = (struct hbg_flag_window){
                .flags = (hbg_stamp_t *)((char *)cpl_base + g->cpl_flags_offset),
                .watermark = &hdr->completed_watermark,
                .flag_window = g->flag_window,
                .flag_mask = g->flag_window - 1,
                .task_window = g->task_window,
                .hi_bits = hi_bits,
                .hi_mask = (UINT64_C(1) << hi_bits) - 1,
                .first_id = first_id,
                .flag_window_log2 = g->flag_window_log2,
        };
}

uint32_t failsafe_capacity(const struct hbg_geometry *g) {
        /* D <= 2^24 by geometry validation, so this fits. */
        return (uint32_t)g->task_window;
}

int completer_init(struct hbg_completer *c, const struct hbg_flag_window *w,
                       uint32_t heap_capacity) {
        *c = (struct hbg_completer){
                .cached_watermark = watermark_read(w),
                .window = w,
        };
        return failsafe_heap_init(&c->heap, heap_capacity);
}

void completer_destroy(struct hbg_completer *c) {
        if (!c)
                return;
        failsafe_heap_destroy(&c->heap);
}

int completer_set_flag(struct hbg_completer *c, uint64_t id, int64_t timeout_ns) {
        int64_t start = clock_now_ns(), deadline;
        /* Saturate: a huge timeout must mean "for ever", not overflow. */
        if (timeout_ns < 0 || __builtin_add_overflow(start, timeout_ns, &deadline))
                deadline = INT64_MAX;

        for (uint64_t spins = 0;; spins++) {
                if (completer_try_set_flag(c, id))
                        return 0;
                if (spins < 1024) {
                        cpu_relax();
                        continue;
                }
                if ((spins & 63) == 0 && clock_now_ns() >= deadline)
                        return -ETIMEDOUT;
                sched_yield();
        }
}

static inline uint32_t stamp_load(const struct hbg_flag_window *w, uint64_t id,
                                  memory_order order) {
        return atomic_load_explicit(flag_slot(w, id), order);
}

bool watermark_update(struct hbg_completer *c, uint64_t id) {
        const struct hbg_flag_window *w = c->window;

        /* Second half of the completer's Dekker pair (§4.3): this seq_cst
         * load is ordered after our own seq_cst stamp store. If it still
         * reads a watermark below id, the walker that later moves the
         * watermark to id is guaranteed to read our stamp. */
        uint64_t cur = atomic_load_explicit(w->watermark, HBG_FRONTIER_LOAD);
        if (cur != id) {
                /* Not the frontier: whoever completes it walks past us
                 * (cur < id), or someone already has (cur > id). */
                if (cur > c->cached_watermark)
                        c->cached_watermark = cur;
                return false;
        }

        stat_inc(&c->stats.walks, 1);
        bool advanced = false;
        uint64_t next = id + 1;
        for (;;) {
                /* At most D ids are in flight past the frontier (§2, window
                 * invariant), so the scan is bounded by geometry. Acquire:
                 * whoever later reads the watermark past these ids must see
                 * their tasks' effects (release by their completers, then
                 * our release CAS). */
                uint64_t limit = cur + w->task_window;
                while (next < limit &&
                       stamp_load(w, next, memory_order_acquire) == flag_stamp_of(w, next))
                        next++;

                if (!atomic_compare_exchange_strong_explicit(w->watermark, &cur, next,
                                                             HBG_FRONTIER_RMW,
                                                             memory_order_acquire)) {
                        /* Another walker moved the frontier (it can only
                         * move up): it owns the walk now. */
                        stat_inc(&c->stats.cas_failures, 1);
                        if (cur > c->cached_watermark)
                                c->cached_watermark = cur;
                        return advanced;
                }
                advanced = true;
                stat_inc(&c->stats.advances, 1);
                stat_inc(&c->stats.ids_advanced, next - cur);
                c->cached_watermark = next;

                /* The walker's Dekker pair (§4.3): the seq_cst CAS above,
                 * then this seq_cst re-read of the new frontier's stamp.
                 * Either we see the stamp that the frontier's completer
                 * stored while we scanned (and keep walking), or its
                 * completer's watermark load sees our CAS and it walks.
                 * With weaker orders both can miss and the watermark
                 * freezes for ever (RUNTIME_LOGIC §4.3). */
                if (stamp_load(w, next, HBG_FRONTIER_LOAD) != flag_stamp_of(w, next))
                        return true;
                cur = next;
                next = cur + 1;
        }
}

bool watermark_walk_after_batch(struct hbg_completer *c) {
        const struct hbg_flag_window *w = c->window;

        /* The batch's half of the frontier pair: every stamp this thread
         * stored before the fence is seen by a walker's seq_cst stamp load
         * that follows the fence in the single total order; a walker whose
         * load came first made its seq_cst CAS before the fence too, and
         * the load below sees that CAS (or a later one). Either the walker
         * walks past our stamps or we find the watermark at one of them. */
        atomic_thread_fence(memory_order_seq_cst);
        uint64_t cur = atomic_load_explicit(w->watermark, memory_order_seq_cst);
        if (cur > c->cached_watermark)
                c->cached_watermark = cur;
        if (stamp_load(w, cur, memory_order_acquire) != flag_stamp_of(w, cur))
                return false; /* its completer has not published: it walks */
        return watermark_update(c, cur);
}

int completer_publish_or_defer(struct hbg_completer *c, uint64_t id) {
        return completer_publish_or_defer_ordered(c, id, HBG_FRONTIER_STORE);
}

int completer_defer(struct hbg_completer *c, uint64_t id) {
        int r = failsafe_heap_push(&c->heap, id);
        if (r < 0) {
                stat_inc(&c->stats.heap_full, 1);
                return r;
        }
        stat_inc(&c->stats.deferred, 1);
        uint32_t len = failsafe_heap_len(&c->heap);
        if (len > stat_get(&c->stats.heap_max))
                atomic_store_explicit(&c->stats.heap_max, len, memory_order_relaxed);
        return 0;
}

int completer_retry_deferred_slow(struct hbg_completer *c, uint64_t *ret_id) {
        uint64_t id;

        /* Only the minimum is tried: the slot gate id < WM + F is monotone
         * in id, so if the smallest cannot publish, no larger one can. */
        if (!failsafe_heap_peek(&c->heap, &id))
                return 0;
        stat_inc(&c->stats.retries, 1);
        if (!completer_try_set_flag(c, id))
                return 0;
        failsafe_heap_pop(&c->heap, &id);
        stat_inc(&c->stats.retry_published, 1);
        *ret_id = id;
        return 1;
}
