/* SPDX-License-Identifier: MIT */
/*
 * Identity-stamped completion flags and the eager completion watermark.
 *
 * The protocol, its invariants and why each memory order suffices are stated
 * once, in docs/RUNTIME_LOGIC.md; the § numbers below point there.
 *
 * Roles:
 *   struct hbg_flag_window  one ring's flags + watermark, with the geometry the
 *                           caller trusts (never re-read from shared memory);
 *   struct hbg_completer    one thread's private view of one ring: its cached
 *                           watermark, its failsafe heap and its counters.
 *                           Never shared between threads.
 */
#pragma once

#include <stdalign.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "shm/failsafe_heap.h"
#include "shm/geometry.h"
#include "shm/layout.h"

/*
 * The frontier store->load pair (§4.3). Correct builds make the four
 * accesses of the Dekker pattern seq_cst. HBG_UNSAFE_UNORDERED_FRONTIER
 * weakens them to release/acquire: that build exists only so the stress test
 * can show it catches the resulting watermark freeze. Never ship it.
 */
#if defined(HBG_UNSAFE_UNORDERED_FRONTIER) && HBG_UNSAFE_UNORDERED_FRONTIER
#  define HBG_FRONTIER_STORE memory_order_release
#  define HBG_FRONTIER_LOAD memory_order_acquire
#  define HBG_FRONTIER_RMW memory_order_acq_rel
#else
#  define HBG_FRONTIER_STORE memory_order_seq_cst
#  define HBG_FRONTIER_LOAD memory_order_seq_cst
#  define HBG_FRONTIER_RMW memory_order_seq_cst
#endif

struct hbg_flag_window {
        hbg_stamp_t *flags;               /* F stamps, in the completion region */
        _Atomic uint64_t *watermark;      /* completion region header */
        uint64_t flag_window;             /* F */
        uint64_t flag_mask;               /* F - 1 */
        uint64_t task_window;             /* D: bound on ids in flight */
        uint32_t hi_bits;                 /* log2(F) - S - 4, >= 0 by geometry */
        uint64_t hi_mask;                 /* (1 << hi_bits) - 1 */
        uint64_t first_id;                /* the ring's first id: laps count from it */
        uint32_t flag_window_log2;        /* log2(F) */
};

/* Bind a window to a mapped, initialised completion region of the ring
 * whose first id is first_id. */
void flag_window_init(struct hbg_flag_window *w, const struct hbg_geometry *g,
                          void *cpl_base, uint64_t first_id);

/* Counters of one completer. Single writer (the owning thread, relaxed
 * load+store, no lock prefix); any thread may read them (relaxed). */
struct hbg_completer_stats {
        _Atomic uint64_t published;        /* stamps stored */
        _Atomic uint64_t deferred;         /* failsafe heap pushes */
        _Atomic uint64_t heap_full;        /* pushes refused: heap at capacity */
        _Atomic uint64_t retries;          /* heap-minimum publish attempts */
        _Atomic uint64_t retry_published;  /* ... that succeeded */
        _Atomic uint64_t walks;            /* frontier walks started */
        _Atomic uint64_t advances;         /* successful watermark CAS */
        _Atomic uint64_t ids_advanced;     /* sum of watermark steps */
        _Atomic uint64_t cas_failures;     /* lost the frontier to another walker */
        _Atomic uint64_t heap_max;         /* deepest the heap has been */
};

struct hbg_completer {
        /* Private copy of the watermark, always <= the real one (§5). */
        alignas(HBG_CACHE_LINE) uint64_t cached_watermark;
        const struct hbg_flag_window *window;
        struct hbg_failsafe_heap heap;
        struct hbg_completer_stats stats;
};

/* Heap capacity that makes -ENOSPC unreachable while the window invariant
 * holds: every id a completer holds unpublished lies in [WM, WM + D), so D
 * (§6.2). */
uint32_t failsafe_capacity(const struct hbg_geometry *g);

/* Returns 0 or -ENOMEM. */
int completer_init(struct hbg_completer *c, const struct hbg_flag_window *w,
                       uint32_t heap_capacity);
void completer_destroy(struct hbg_completer *c);

static inline void stat_inc(_Atomic uint64_t *counter, uint64_t n) {
        atomic_store_explicit(counter, atomic_load_explicit(counter, memory_order_relaxed) + n,
                              memory_order_relaxed);
}

static inline uint64_t stat_get(const _Atomic uint64_t *counter) {
        return atomic_load_explicit(counter, memory_order_relaxed);
}

/*
 * The stamp of id (§3.2): its lap of the flag window, counted from the
 * ring's first id, plus one. Ids sharing a slot (id, id + F, ...) have
 * laps one apart, and zero is the stamp of lap -1, the "previous occupant"
 * of every slot's first id: a zeroed flag array is the initial state
 * (§3.3), and only an id's own publish makes its slot equal its stamp.
 */
static inline uint32_t flag_stamp_of(const struct hbg_flag_window *w, uint64_t id) {
        return (uint32_t)((id - w->first_id) >> w->flag_window_log2) + 1u;
}

/*
 * flag_index (§3.1): r = id mod F, split as [hi | in-line position | lo]
 * with lo the S low bits. The flag's line number is lo on top, hi below
 * XOR-ed with lo, so 2^S consecutive ids use 2^S different lines, and (for
 * F >= 2^12) the 16 lines of an aligned block of 256 ids fall in 16
 * different L1 sets; the position within the line is the next 4 bits of r.
 * A bijection on [0, F).
 */
static inline uint64_t flag_index(const struct hbg_flag_window *w, uint64_t id) {
        uint64_t r = id & w->flag_mask;
        uint64_t lo = r & ((UINT64_C(1) << HBG_FLAG_SHUFFLE_BITS) - 1);
        uint64_t pos = (r >> HBG_FLAG_SHUFFLE_BITS) & ((UINT64_C(1) << HBG_STAMPS_PER_LINE_LOG2) - 1);
        uint64_t hi = r >> (HBG_FLAG_SHUFFLE_BITS + HBG_STAMPS_PER_LINE_LOG2);
        uint64_t line = (lo << w->hi_bits) | ((hi ^ lo) & w->hi_mask);
        return (line << HBG_STAMPS_PER_LINE_LOG2) | pos;
}

static inline hbg_stamp_t *flag_slot(const struct hbg_flag_window *w, uint64_t id) {
        return &w->flags[flag_index(w, id)];
}

/*
 * Is task `id` known complete (§5)? Cheapest first: below the cached
 * watermark; its own stamp in the slot (acquire: the task's effects are
 * visible once this returns true); a fresh watermark, which also refreshes
 * the cache. Precondition: id < (watermark + D), i.e. id has been claimed or
 * is about to be.
 */
static inline bool completer_flag_is_set(struct hbg_completer *c, uint64_t id) {
        if (id < c->cached_watermark)
                return true;
        const struct hbg_flag_window *w = c->window;
        if (atomic_load_explicit(flag_slot(w, id), memory_order_acquire) == flag_stamp_of(w, id))
                return true;
        c->cached_watermark = atomic_load_explicit(w->watermark, memory_order_acquire);
        return id < c->cached_watermark;
}

/* Is id complete, read seq_cst (the watermark, then its stamp): the
 * second half of a waiter's "store its request (seq_cst); look", against
 * hbgd's "publish the stamp; seq_cst fence or store; load the request"
 * (RUNTIME_LOGIC §2.1). Either this look sees the stamp, or hbgd sees
 * the request. An id at WM + F or beyond cannot have published yet
 * (§3.4): its stamp, a lap count cut to 32 bits, is not looked at. */
static inline bool flag_done_seq_cst(const struct hbg_flag_window *w, uint64_t id) {
        uint64_t wm = atomic_load_explicit(w->watermark, memory_order_seq_cst);
        if (id < wm)
                return true;
        if (id - wm >= w->flag_window)
                return false;
        return atomic_load_explicit(flag_slot(w, id), memory_order_seq_cst) == flag_stamp_of(w, id);
}

/* The slot of `id` may take its stamp once its previous occupant id - F is
 * below the watermark, i.e. id < WM + F (§3.4). */
static inline bool completer_slot_free(const struct hbg_completer *c, uint64_t id) {
        return id - c->cached_watermark < c->window->flag_window;
}

/*
 * Publish the stamp of `id` if its slot is free; false (nothing written) if
 * the previous occupant is not certified yet. Never waits. An id already
 * below the watermark publishes nothing and returns true. The store's
 * order is the completion policy's: seq_cst for the eager watermark (the
 * first half of its frontier pair, §4.3), release for the others (§11); a
 * release at least, so the task's effects happen-before any acquire reader
 * that sees the stamp.
 */
static inline bool completer_try_publish(struct hbg_completer *c, uint64_t id, memory_order store_order) {
        if (id < c->cached_watermark)
                return true;
        if (!completer_slot_free(c, id)) {
                c->cached_watermark = atomic_load_explicit(c->window->watermark, memory_order_acquire);
                if (id < c->cached_watermark)
                        return true;
                if (!completer_slot_free(c, id))
                        return false;
        }
        /* Counted first: once the stamp is out, another thread may walk
         * the watermark past id and its graph retire, and whoever then
         * reads the counters (acquire, through the graph's entry) must
         * find it counted. */
        stat_inc(&c->stats.published, 1);
        atomic_store_explicit(flag_slot(c->window, id), flag_stamp_of(c->window, id), store_order);
        return true;
}

/* The eager watermark's publish (seq_cst store). Callers then drain the
 * task's wake list and call watermark_update(c, id) exactly
 * once (§4.1). */
static inline bool completer_try_set_flag(struct hbg_completer *c, uint64_t id) {
        return completer_try_publish(c, id, HBG_FRONTIER_STORE);
}

/* Defer id to the completer's failsafe heap (§6): 0, or -ENOSPC (heap
 * full: the caller keeps the id). */
int completer_defer(struct hbg_completer *c, uint64_t id);

/*
 * Blocking variant for callers with no loop to retry from: waits (spin, then
 * yield) until the slot is free, then publishes. timeout_ns < 0 waits for
 * ever. Returns 0 or -ETIMEDOUT. Only safe if the caller does not itself
 * hold work that the previous occupant is waiting for (§6.3).
 */
int completer_set_flag(struct hbg_completer *c, uint64_t id, int64_t timeout_ns);

/*
 * The eager watermark (§4): a no-op unless id is the current frontier; the
 * frontier completer CAS-advances the watermark over the whole contiguous
 * completed prefix. Call exactly once per id, after its stamp is published.
 * Returns true if this call moved the watermark (the caller may then have
 * finished graphs to retire).
 */
bool watermark_update(struct hbg_completer *c, uint64_t id);

/*
 * The batched frontier (§11.4): for a completer that published a batch of
 * stamps with release stores and put off their watermark updates. One
 * seq_cst fence stands for the batch's stamps in the frontier pair (§4.3),
 * then, if the watermark's id is complete, the walk as
 * watermark_update() does it. Call once per batch, after its
 * last stamp. Returns true if this call moved the watermark.
 */
bool watermark_walk_after_batch(struct hbg_completer *c);

/*
 * Completion with the failsafe (§6): publish the stamp, or defer the id to
 * this thread's heap. Returns
 *   1        published: drain the wake list, then update the watermark;
 *   0        deferred: do nothing more now, completer_retry_deferred() returns it;
 *  -ENOSPC   the heap is full: the id stays with the caller, who must offer
 *            it again later (never spin on it: §6.2).
 * The stamp store is seq_cst, the eager watermark's (§4.3).
 */
int completer_publish_or_defer(struct hbg_completer *c, uint64_t id);
/* The same with the stamp stored with `store_order` (release at least): the
 * policies that do not pair the store with their own watermark load (§11).
 * Inline, so that the order is a constant where the store is compiled: in
 * a function of its own GCC stores a variable order as seq_cst (an xchg
 * on x86-64, which waits for the store buffer to drain) whatever it says. */
static inline int completer_publish_or_defer_ordered(struct hbg_completer *c, uint64_t id,
                                                     memory_order store_order) {
        if (completer_try_publish(c, id, store_order))
                return 1;
        int r = completer_defer(c, id);
        return r < 0 ? r : 0;
}

/*
 * Try to publish the smallest deferred id. Returns 1 and the id (popped)
 * when published: the caller drains its wake list and updates the
 * watermark, as after completer_publish_or_defer() == 1. Returns 0 when the heap
 * is empty or its minimum is still blocked (larger ids then are too).
 */
int completer_retry_deferred_slow(struct hbg_completer *c, uint64_t *ret_id);
static inline int completer_retry_deferred(struct hbg_completer *c, uint64_t *ret_id) {
        /* The heap is empty almost always: keep that check inline. */
        if (failsafe_heap_len(&c->heap) == 0)
                return 0;
        return completer_retry_deferred_slow(c, ret_id);
}

static inline uint64_t watermark_read(const struct hbg_flag_window *w) {
        return atomic_load_explicit(w->watermark, memory_order_acquire);
}

/* The protocol's design names (RUNTIME_LOGIC §1), kept usable as aliases. */
static inline bool try_set_completion_flag(struct hbg_completer *c, uint64_t id) {
        return completer_try_set_flag(c, id);
}
static inline int set_completion_flag(struct hbg_completer *c, uint64_t id, int64_t timeout_ns) {
        return completer_set_flag(c, id, timeout_ns);
}
static inline bool is_completion_flag_set(struct hbg_completer *c, uint64_t id) {
        return completer_flag_is_set(c, id);
}
static inline bool update_completed_watermark(struct hbg_completer *c, uint64_t id) {
        return watermark_update(c, id);
}
