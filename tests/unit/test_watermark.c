/* SPDX-License-Identifier: MIT */
/*
 * The eager completion watermark and the slot gate, single-threaded, driven
 * by tables of completion orders and checked after every step against an
 * independent reference model.
 *
 * Model: an id handed to complete() is either published (its stamp stored:
 * completer_publish_or_defer() returned 1, or completer_retry_deferred() returned it) or
 * pending in the failsafe heap. The slot gate lets x publish iff
 * x < WM + F. The reference watermark is the first id of the run that is not
 * published, found by a plain scan; completer_flag_is_set(x) must equal
 * "x is published".
 */
#include <check.h>
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "shm/completion.h"
#include "shm/geometry.h"
#include "shm/layout.h"
#include "common/clock.h"
#include "tests/check_main.h"

/* ck_assert_* records a mark point on every success: too slow for the
 * per-step sweeps below. */
#define REQUIRE(cond, fmt, ...)                                              \
        do {                                                                 \
                if (!(cond))                                                 \
                        ck_abort_msg("[%s] " fmt, r->label, __VA_ARGS__);    \
        } while (0)

#define LLU(x) ((unsigned long long)(x))

struct ring {
        struct hbg_geometry g;
        void *cpl;
        struct hbg_flag_window w;
        struct hbg_completer c;      /* the one completing thread */
        struct hbg_completer reader; /* queries only; its cache lags */
        uint64_t f, d;
        uint64_t first;              /* first id of the ring and of the run */
        uint64_t n;                  /* ids of the run: [first, first + n) */
        bool *done;                  /* handed to ring_complete() */
        bool *published;             /* stamp stored */
        bool *pending;               /* in the failsafe heap */
        uint64_t n_pending;
        uint64_t n_deferred;         /* publish_or_defer() returned 0 */
        uint64_t ref_wm;
        bool sweep;                  /* check every id after every step */
        char label[96];              /* names the run in failure messages */
};

/* A ring whose first id is ring_first and which has completed every id
 * below first, the first id of the run: the watermark is first, and each
 * slot holds the stamp of its latest id below first, as I-window leaves
 * it (§3.2). A fresh region's zeros are those stamps only while first is
 * in lap 0. */
static void ring_init_at(struct ring *r, uint64_t f, uint64_t d, uint64_t ring_first, uint64_t first,
                         uint64_t n) {
        struct hbg_geometry_request req;
        const char *err = NULL;

        memset(r, 0, sizeof(*r));
        geometry_request_default(&req);
        req.flag_window = f;
        req.task_window = d;
        ck_assert_msg(geometry_init(&r->g, &req, &err) == 0, "geometry: %s", err);
        r->cpl = aligned_alloc(64, r->g.cpl_region_size);
        ck_assert_ptr_nonnull(r->cpl);
        memset(r->cpl, 0, r->g.cpl_region_size);
        layout_cpl_region_init(r->cpl, &r->g, ring_first);
        flag_window_init(&r->w, &r->g, r->cpl, ring_first);
        ck_assert_uint_ge(first, ring_first);
        for (uint64_t x = first - ring_first > f ? first - f : ring_first; x < first; x++)
                atomic_store(flag_slot(&r->w, x), flag_stamp_of(&r->w, x));
        atomic_store(r->w.watermark, first);

        ck_assert_uint_eq(failsafe_capacity(&r->g), d);
        ck_assert_int_eq(completer_init(&r->c, &r->w, failsafe_capacity(&r->g)), 0);
        ck_assert_int_eq(completer_init(&r->reader, &r->w, 0), 0);

        r->f = f;
        r->d = d;
        r->first = first;
        r->n = n;
        r->ref_wm = first;
        r->sweep = true;
        snprintf(r->label, sizeof(r->label), "F=%llu D=%llu first=%llu", LLU(f), LLU(d),
                 LLU(first));
        r->done = calloc(n, sizeof(bool));
        r->published = calloc(n, sizeof(bool));
        r->pending = calloc(n, sizeof(bool));
        ck_assert(r->done && r->published && r->pending);
        ck_assert_uint_eq(watermark_read(&r->w), first);
}

static void ring_init(struct ring *r, uint64_t f, uint64_t d, uint64_t first, uint64_t n) {
        ring_init_at(r, f, d, first, first, n);
}

static void ring_destroy(struct ring *r) {
        completer_destroy(&r->c);
        completer_destroy(&r->reader);
        free(r->done);
        free(r->published);
        free(r->pending);
        free(r->cpl);
}

static uint32_t slot_value(const struct ring *r, uint64_t id) {
        return atomic_load(flag_slot(&r->w, id));
}

/* Reference watermark: first id of the run not published (plain loop). */
static void ref_advance(struct ring *r) {
        while (r->ref_wm < r->first + r->n && r->published[r->ref_wm - r->first])
                r->ref_wm++;
}

static uint64_t ref_min_pending(const struct ring *r) {
        for (uint64_t x = r->ref_wm; x < r->first + r->n; x++)
                if (r->pending[x - r->first])
                        return x;
        return UINT64_MAX;
}

static void check_state(struct ring *r, uint64_t step_id) {
        uint64_t wm = watermark_read(&r->w);

        REQUIRE(wm == r->ref_wm, "after id %llu: watermark %llu, reference %llu", LLU(step_id),
                LLU(wm), LLU(r->ref_wm));
        REQUIRE(r->c.cached_watermark <= wm, "after id %llu: cached watermark %llu > real %llu",
                LLU(step_id), LLU(r->c.cached_watermark), LLU(wm));
        REQUIRE(failsafe_heap_len(&r->c.heap) == r->n_pending,
                "after id %llu: heap holds %u ids, model %llu", LLU(step_id),
                failsafe_heap_len(&r->c.heap), LLU(r->n_pending));
        REQUIRE(stat_get(&r->c.stats.deferred) == r->n_deferred,
                "after id %llu: %llu deferrals counted, model %llu", LLU(step_id),
                LLU(stat_get(&r->c.stats.deferred)), LLU(r->n_deferred));
        /* Everything still pending is blocked by the gate: the retry loop
         * stopped only because the smallest could not publish. */
        uint64_t min_p = ref_min_pending(r);
        REQUIRE(min_p == UINT64_MAX || min_p >= r->ref_wm + r->f,
                "after id %llu: id %llu still deferred although WM = %llu lets it publish",
                LLU(step_id), LLU(min_p), LLU(r->ref_wm));

        if (!r->sweep)
                return;
        if (r->first > 0)
                REQUIRE(completer_flag_is_set(&r->reader, r->first - 1),
                        "after id %llu: first - 1 not complete", LLU(step_id));
        for (uint64_t k = 0; k < r->n; k++) {
                uint64_t id = r->first + k;
                bool got = completer_flag_is_set(&r->reader, id);
                REQUIRE(got == r->published[k],
                        "after id %llu (WM %llu): is_completion_flag_set(%llu) = %d, "
                        "published = %d",
                        LLU(step_id), LLU(wm), LLU(id), got, r->published[k]);
        }
}

/* Publication of `id` was reported: record it and call the watermark
 * update, which must move the watermark iff id was the frontier. */
static void mark_published_and_update(struct ring *r, uint64_t id) {
        uint64_t old_wm = r->ref_wm;
        bool moved;

        REQUIRE(!r->published[id - r->first], "id %llu published twice", LLU(id));
        r->published[id - r->first] = true;
        ref_advance(r);
        moved = watermark_update(&r->c, id);
        REQUIRE(moved == (id == old_wm), "update(%llu) with WM %llu returned %d", LLU(id),
                LLU(old_wm), moved);
}

/* complete(id) as a completing thread does it, checked against the model. */
static void ring_complete(struct ring *r, uint64_t id) {
        uint64_t k = id - r->first;
        uint64_t d_id;
        int rc;

        REQUIRE(id >= r->first && k < r->n, "test bug: id %llu outside the run", LLU(id));
        REQUIRE(!r->done[k], "test bug: id %llu completed twice", LLU(id));
        /* The window rule every caller obeys: only ids < WM + D are in
         * flight. The orders below respect it; this guards the test. */
        REQUIRE(id < r->ref_wm + r->d, "test bug: id %llu beyond WM %llu + D", LLU(id),
                LLU(r->ref_wm));
        r->done[k] = true;

        int expect = id < r->ref_wm + r->f ? 1 : 0;
        rc = completer_publish_or_defer(&r->c, id);
        REQUIRE(rc == expect, "publish_or_defer(%llu) with WM %llu, F %llu: %d, expected %d",
                LLU(id), LLU(r->ref_wm), LLU(r->f), rc, expect);
        if (rc == 1) {
                REQUIRE(slot_value(r, id) == flag_stamp_of(&r->w, id), "id %llu published, slot holds %u",
                        LLU(id), slot_value(r, id));
                mark_published_and_update(r, id);
        } else {
                r->pending[k] = true;
                r->n_pending++;
                r->n_deferred++;
        }

        while (completer_retry_deferred(&r->c, &d_id) == 1) {
                uint64_t want = ref_min_pending(r);
                REQUIRE(d_id == want, "retry_deferred returned %llu, smallest pending is %llu",
                        LLU(d_id), LLU(want));
                REQUIRE(d_id < r->ref_wm + r->f, "retry published %llu with WM %llu",
                        LLU(d_id), LLU(r->ref_wm));
                REQUIRE(slot_value(r, d_id) == flag_stamp_of(&r->w, d_id), "retried id %llu: slot holds %u",
                        LLU(d_id), slot_value(r, d_id));
                r->pending[d_id - r->first] = false;
                r->n_pending--;
                mark_published_and_update(r, d_id);
        }
        check_state(r, id);
}

static void ring_finish(struct ring *r) {
        for (uint64_t k = 0; k < r->n; k++)
                REQUIRE(r->done[k] && r->published[k], "id %llu: done %d published %d",
                        LLU(r->first + k), r->done[k], r->published[k]);
        ck_assert_uint_eq(watermark_read(&r->w), r->first + r->n);
        ck_assert_uint_eq(r->c.cached_watermark, r->first + r->n);
        ck_assert_uint_eq(failsafe_heap_len(&r->c.heap), 0);
        ck_assert_uint_eq(stat_get(&r->c.stats.published), r->n);
        ck_assert_uint_eq(stat_get(&r->c.stats.deferred), r->n_deferred);
        ck_assert_uint_eq(stat_get(&r->c.stats.retry_published), r->n_deferred);
        ck_assert_uint_eq(stat_get(&r->c.stats.heap_full), 0);
        ck_assert_uint_eq(stat_get(&r->c.stats.ids_advanced), r->n);
        ck_assert_uint_eq(stat_get(&r->c.stats.cas_failures), 0);
        ck_assert_uint_ge(stat_get(&r->c.stats.advances), 1);
        ck_assert_uint_le(stat_get(&r->c.stats.advances), r->n);
        ck_assert_uint_ge(stat_get(&r->c.stats.heap_max), r->n_deferred ? 1 : 0);
        ck_assert_uint_le(stat_get(&r->c.stats.heap_max), r->d - r->f);
        /* Every id of the run is complete for a fresh reader, and the next
         * lap's first id is not. */
        struct hbg_completer fresh;
        ck_assert_int_eq(completer_init(&fresh, &r->w, 0), 0);
        for (uint64_t k = 0; k < r->n; k++)
                REQUIRE(completer_flag_is_set(&fresh, r->first + k), "id %llu not complete",
                        LLU(r->first + k));
        ck_assert(!completer_flag_is_set(&fresh, r->first + r->n));
        completer_destroy(&fresh);
}

/* ------------------------------------------------------------ orders */

static uint64_t splitmix64(uint64_t *state) {
        uint64_t z = (*state += UINT64_C(0x9e3779b97f4a7c15));
        z = (z ^ (z >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
        z = (z ^ (z >> 27)) * UINT64_C(0x94d049bb133111eb);
        return z ^ (z >> 31);
}

enum order {
        ORDER_IN = 0,
        ORDER_CHUNK_REVERSED,
        ORDER_REVERSED,
        ORDER_EVEN_THEN_ODD,
        ORDER_SHUFFLED_0,
        ORDER_SHUFFLED_1,
        ORDER_SHUFFLED_2,
        ORDER_SHUFFLED_3,
        N_ORDERS,
};

static const char *const order_names[N_ORDERS] = {
        "in order", "reversed per chunk", "fully reversed", "evens then odds",
        "shuffled 0", "shuffled 1", "shuffled 2", "shuffled 3",
};

/* Offsets 0..n-1 in the given order. */
static void make_order(uint64_t *out, uint64_t n, uint64_t f, uint64_t first, enum order o) {
        uint64_t j = 0;

        switch (o) {
        case ORDER_IN:
                for (uint64_t k = 0; k < n; k++)
                        out[j++] = k;
                break;
        case ORDER_CHUNK_REVERSED:
                for (uint64_t c = 0; c < n; c += f)
                        for (uint64_t k = c + f; k-- > c;)
                                out[j++] = k;
                break;
        case ORDER_REVERSED:
                for (uint64_t k = n; k-- > 0;)
                        out[j++] = k;
                break;
        case ORDER_EVEN_THEN_ODD:
                /* By the parity of the id itself. */
                for (uint64_t k = 0; k < n; k++)
                        if ((first + k) % 2 == 0)
                                out[j++] = k;
                for (uint64_t k = 0; k < n; k++)
                        if ((first + k) % 2 == 1)
                                out[j++] = k;
                break;
        default: {
                uint64_t seed = 0x1234abcdu * (uint64_t)(o - ORDER_SHUFFLED_0 + 1) + first;
                for (uint64_t k = 0; k < n; k++)
                        out[k] = k;
                for (uint64_t k = n - 1; k > 0; k--) {
                        uint64_t s = splitmix64(&seed) % (k + 1);
                        uint64_t t = out[k];
                        out[k] = out[s];
                        out[s] = t;
                }
                j = n;
                break;
        }
        }
        ck_assert_uint_eq(j, n);
}

/* The loop index of the table tests encodes (geometry, first id, order). */
struct config {
        uint64_t f, d, first;
        enum order order;
};

static const uint64_t firsts[] = {
        0,
        (UINT64_C(1) << 31) - 300,
        (UINT64_C(1) << 32) - 300,
};
#define N_FIRSTS (sizeof(firsts) / sizeof(firsts[0]))
#define N_GEOMETRIES 2
#define N_CONFIGS ((int)(N_GEOMETRIES * N_FIRSTS * N_ORDERS))

static struct config config_of(int i) {
        struct config cfg;

        cfg.order = (enum order)(i % N_ORDERS);
        i /= N_ORDERS;
        cfg.first = firsts[i % (int)N_FIRSTS];
        i /= (int)N_FIRSTS;
        /* D >= 3F keeps every id of a 3F run inside the task window. */
        if (i == 0) {
                cfg.f = 256;
                cfg.d = 1024;
        } else {
                cfg.f = 1024;
                cfg.d = 4096;
        }
        return cfg;
}

START_TEST(test_order_table) {
        struct config cfg = config_of(_i);
        struct ring r;
        uint64_t n = 3 * cfg.f;
        uint64_t *order = malloc(n * sizeof(*order));

        ck_assert_ptr_nonnull(order);
        make_order(order, n, cfg.f, cfg.first, cfg.order);
        ring_init(&r, cfg.f, cfg.d, cfg.first, n);
        snprintf(r.label, sizeof(r.label), "F=%llu D=%llu first=%llu %s", LLU(cfg.f),
                 LLU(cfg.d), LLU(cfg.first), order_names[cfg.order]);
        for (uint64_t k = 0; k < n; k++)
                ring_complete(&r, cfg.first + order[k]);
        ring_finish(&r);

        switch (cfg.order) {
        case ORDER_IN:
                ck_assert_uint_eq(r.n_deferred, 0);
                ck_assert_uint_eq(stat_get(&r.c.stats.published), n);
                ck_assert_uint_ge(stat_get(&r.c.stats.advances), 1);
                ck_assert_uint_eq(stat_get(&r.c.stats.ids_advanced), n);
                /* Each id is the frontier when it completes. */
                ck_assert_uint_eq(stat_get(&r.c.stats.walks), n);
                break;
        case ORDER_CHUNK_REVERSED:
                ck_assert_uint_eq(stat_get(&r.c.stats.deferred), 0);
                /* One walk per chunk, from its first id over the chunk,
                 * and (single-threaded) one CAS per walk. */
                ck_assert_uint_eq(stat_get(&r.c.stats.walks), n / cfg.f);
                ck_assert_uint_eq(stat_get(&r.c.stats.advances), n / cfg.f);
                break;
        case ORDER_REVERSED:
                /* While WM = first, every id >= first + F is deferred. */
                ck_assert_uint_gt(stat_get(&r.c.stats.deferred), 0);
                ck_assert_uint_eq(stat_get(&r.c.stats.deferred), n - cfg.f);
                ck_assert_uint_eq(stat_get(&r.c.stats.heap_max), n - cfg.f);
                break;
        default:
                break;
        }
        free(order);
        ring_destroy(&r);
}
END_TEST

/* Everything but first + 5, then first + 5: the watermark jumps to the end. */
START_TEST(test_gap_filled_last) {
        struct config cfg = config_of(_i * N_ORDERS);
        struct ring r;
        uint64_t n = 3 * cfg.f;
        uint64_t hole = cfg.first + 5;

        ring_init(&r, cfg.f, cfg.d, cfg.first, n);
        for (uint64_t id = cfg.first; id < cfg.first + n; id++)
                if (id != hole)
                        ring_complete(&r, id);
        ck_assert_uint_eq(watermark_read(&r.w), hole);
        ck_assert_uint_eq(r.ref_wm, hole);
        /* Ids from hole + F on are waiting for the slot of their previous
         * occupant, which the stuck watermark does not certify. */
        ck_assert_uint_eq(failsafe_heap_len(&r.c.heap), cfg.first + n - (hole + cfg.f));
        ck_assert(!completer_flag_is_set(&r.reader, hole));
        ck_assert(completer_flag_is_set(&r.reader, hole + 1));
        ck_assert(completer_flag_is_set(&r.reader, hole + cfg.f - 1));
        ck_assert(!completer_flag_is_set(&r.reader, hole + cfg.f));

        ring_complete(&r, hole);
        ck_assert_uint_eq(watermark_read(&r.w), cfg.first + n);
        ring_finish(&r);
        ring_destroy(&r);
}
END_TEST

/* --------------------------------------------- overwritten stamp fallback */

START_TEST(test_fallback_after_overwrite) {
        const uint64_t starts[] = { 0, (UINT64_C(1) << 32) - 100, (UINT64_C(1) << 31) - 128 };
        uint64_t first = starts[_i];
        uint64_t f = 256;
        struct ring r;
        struct hbg_completer stale, stale2;

        ring_init(&r, f, 1024, first, 2 * f);
        /* Created before any completion: cached watermarks stay at first. */
        ck_assert_int_eq(completer_init(&stale, &r.w, 0), 0);
        ck_assert_int_eq(completer_init(&stale2, &r.w, 0), 0);

        for (uint64_t id = first; id < first + f; id++)
                ring_complete(&r, id);
        ck_assert_uint_eq(watermark_read(&r.w), first + f);
        ring_complete(&r, first + f);
        ck_assert_uint_eq(watermark_read(&r.w), first + f + 1);

        /* Same slot, and it now carries the later id's stamp. */
        ck_assert_ptr_eq(flag_slot(&r.w, first), flag_slot(&r.w, first + f));
        ck_assert_uint_eq(slot_value(&r, first), flag_stamp_of(&r.w, first + f));
        ck_assert_uint_ne(slot_value(&r, first), flag_stamp_of(&r.w, first));

        ck_assert(completer_flag_is_set(&r.c, first));
        ck_assert_uint_eq(stale.cached_watermark, first);
        ck_assert(completer_flag_is_set(&stale, first));
        /* The stamp did not match: the answer came from a re-read. */
        ck_assert_uint_eq(stale.cached_watermark, first + f + 1);

        /* The overwriting id itself is found by its stamp, without a
         * re-read. */
        ck_assert_uint_eq(stale2.cached_watermark, first);
        ck_assert(completer_flag_is_set(&stale2, first + f));
        ck_assert_uint_eq(stale2.cached_watermark, first);
        /* An id not completed: its slot holds first + 1's stamp. */
        ck_assert(!completer_flag_is_set(&stale2, first + f + 1));
        ck_assert_uint_eq(stale2.cached_watermark, first + f + 1);

        completer_destroy(&stale);
        completer_destroy(&stale2);
        ring_destroy(&r);
}
END_TEST

/* ---------------------------------------------------------- slot gate */

START_TEST(test_slot_gate) {
        uint64_t first = firsts[_i];
        uint64_t f = 256;
        struct ring r;
        struct hbg_completer other;
        uint32_t before, before2;

        ring_init(&r, f, 1024, first, 4 * f);
        ck_assert_int_eq(completer_init(&other, &r.w, 0), 0);

        /* first + F would overwrite first's slot before first completed. */
        before = slot_value(&r, first + f);
        ck_assert_uint_eq(before, flag_stamp_of(&r.w, first - f));
        ck_assert(!completer_try_set_flag(&r.c, first + f));
        ck_assert_uint_eq(slot_value(&r, first + f), before);
        ck_assert(!completer_try_set_flag(&r.c, first + 2 * f + 7));
        ck_assert_uint_eq(slot_value(&r, first + 2 * f + 7), flag_stamp_of(&r.w, first + 7 - f));
        ck_assert_uint_eq(stat_get(&r.c.stats.published), 0);

        before2 = slot_value(&r, first + f + 3);
        int64_t t0 = clock_now_ns();
        ck_assert_int_eq(completer_set_flag(&r.c, first + f + 3, 1000000), -ETIMEDOUT);
        ck_assert_int_ge(clock_now_ns() - t0, 1000000);
        ck_assert_uint_eq(slot_value(&r, first + f + 3), before2);
        ck_assert_uint_eq(stat_get(&r.c.stats.published), 0);
        ck_assert_uint_eq(watermark_read(&r.w), first);

        /* The last id the gate lets through. */
        ck_assert(completer_try_set_flag(&r.c, first + f - 1));
        ck_assert_uint_eq(slot_value(&r, first + f - 1), flag_stamp_of(&r.w, first + f - 1));
        ck_assert_uint_eq(stat_get(&r.c.stats.published), 1);
        ck_assert(!watermark_update(&r.c, first + f - 1));
        ck_assert_uint_eq(watermark_read(&r.w), first);

        /* Completing first opens the gate one id further, also for a
         * completer whose cached watermark is stale (it must re-read). */
        ck_assert_int_eq(completer_set_flag(&r.c, first, 1000000), 0);
        ck_assert(watermark_update(&r.c, first));
        ck_assert_uint_eq(watermark_read(&r.w), first + 1);
        ck_assert_uint_eq(other.cached_watermark, first);
        ck_assert(!completer_try_set_flag(&other, first + f + 1));
        ck_assert_uint_eq(other.cached_watermark, first + 1);
        ck_assert_uint_eq(slot_value(&r, first + f + 1), flag_stamp_of(&r.w, first + 1 - f));
        other.cached_watermark = first;
        ck_assert(completer_try_set_flag(&other, first + f));
        ck_assert_uint_eq(other.cached_watermark, first + 1);
        ck_assert_uint_eq(slot_value(&r, first + f), flag_stamp_of(&r.w, first + f));

        /* An id below the watermark: true, and nothing is written. */
        before = slot_value(&r, first);
        ck_assert_uint_eq(before, flag_stamp_of(&r.w, first + f));
        uint64_t pub = stat_get(&r.c.stats.published);
        ck_assert(completer_try_set_flag(&r.c, first));
        ck_assert_uint_eq(slot_value(&r, first), before);
        ck_assert_uint_eq(stat_get(&r.c.stats.published), pub);

        completer_destroy(&other);
        ring_destroy(&r);
}
END_TEST

/* ----------------------------------------------------- non-frontier update */

START_TEST(test_update_not_frontier) {
        uint64_t first = firsts[_i];
        uint64_t f = 256;
        struct ring r;

        ring_init(&r, f, 1024, first, 4 * f);

        /* Published, but first is missing: no move. */
        ck_assert(completer_try_set_flag(&r.c, first + 5));
        ck_assert(!watermark_update(&r.c, first + 5));
        ck_assert_uint_eq(watermark_read(&r.w), first);
        ck_assert_uint_eq(stat_get(&r.c.stats.walks), 0);

        /* first + 1 .. first + 3 published without their update calls. */
        for (uint64_t id = first + 1; id <= first + 3; id++)
                ck_assert(completer_try_set_flag(&r.c, id));
        ck_assert(!watermark_update(&r.c, first + 2));
        ck_assert_uint_eq(watermark_read(&r.w), first);
        /* An unpublished id that is not the frontier either. */
        ck_assert(!watermark_update(&r.c, first + 100));
        ck_assert_uint_eq(watermark_read(&r.w), first);
        ck_assert_uint_eq(stat_get(&r.c.stats.walks), 0);

        /* The frontier walks over the whole published prefix, and stops at
         * the hole at first + 4. */
        ck_assert(completer_try_set_flag(&r.c, first));
        ck_assert(watermark_update(&r.c, first));
        ck_assert_uint_eq(watermark_read(&r.w), first + 4);
        ck_assert_uint_eq(stat_get(&r.c.stats.walks), 1);
        ck_assert_uint_eq(stat_get(&r.c.stats.ids_advanced), 4);

        /* Ids below the watermark now: still no move. */
        ck_assert(!watermark_update(&r.c, first));
        ck_assert(!watermark_update(&r.c, first + 3));
        ck_assert_uint_eq(watermark_read(&r.w), first + 4);
        /* Above it, published: no move either. */
        ck_assert(!watermark_update(&r.c, first + 5));
        ck_assert_uint_eq(watermark_read(&r.w), first + 4);

        /* Publishing the frontier walks over first + 5 as well. */
        ck_assert(completer_try_set_flag(&r.c, first + 4));
        ck_assert(watermark_update(&r.c, first + 4));
        ck_assert_uint_eq(watermark_read(&r.w), first + 6);
        ck_assert_uint_eq(stat_get(&r.c.stats.ids_advanced), 6);
        ck_assert_uint_eq(stat_get(&r.c.stats.cas_failures), 0);

        ring_destroy(&r);
}
END_TEST

/* ------------------------------------------------------------ stamp wrap */

/*
 * Stamps are laps cut to 32 bits (§3.2): lap 2^32 - 2 has stamp
 * 0xffffffff, lap 2^32 - 1 stamp 0 (also the stamp a fresh region holds),
 * lap 2^32 stamp 1. A run of 4F ids from lap 2^32 - 2 on, completed in
 * reversed chunks, crosses that wrap; the watermark and every answer of
 * completer_flag_is_set() are checked after each completion. Chunks of 2F
 * also send the upper half of each through the failsafe heap.
 */
static const struct {
        uint64_t f, d, ring_first, offset, chunk_laps;
} wrap_runs[] = {
        { 256, 1024, 0, 0, 1 },                          /* from the lap's first id */
        { 256, 1024, 12345, 128, 2 },                    /* mid-lap, deferrals */
        { 1024, 4096, (UINT64_C(1) << 32) - 300, 7, 1 }, /* another F and first id */
};

START_TEST(test_stamp_wrap) {
        const uint64_t f = wrap_runs[_i].f, d = wrap_runs[_i].d;
        const uint64_t ring_first = wrap_runs[_i].ring_first;
        const uint64_t lap = (UINT64_C(1) << 32) - 2;
        const uint64_t lap_start = ring_first + lap * f;
        const uint64_t first = lap_start + wrap_runs[_i].offset;
        const uint64_t n = 4 * f, end = first + n;
        struct ring r;
        struct hbg_completer stale;
        uint64_t *order = malloc(n * sizeof(*order));

        ck_assert_ptr_nonnull(order);
        ring_init_at(&r, f, d, ring_first, first, n);
        snprintf(r.label, sizeof(r.label), "F=%llu D=%llu ring first=%llu run %llu..%llu", LLU(f), LLU(d),
                 LLU(ring_first), LLU(first), LLU(end));
        ck_assert_uint_eq(flag_stamp_of(&r.w, lap_start), UINT32_MAX);
        ck_assert_uint_eq(flag_stamp_of(&r.w, lap_start + f), 0);
        ck_assert_uint_eq(flag_stamp_of(&r.w, lap_start + 2 * f), 1);
        ck_assert_uint_eq(flag_stamp_of(&r.w, lap_start - 1), UINT32_MAX - 1);
        /* The slots hold the previous lap's stamps, not the fresh zero
         * that is lap 2^32 - 1's stamp: nothing of the run looks done. */
        ck_assert_uint_eq(slot_value(&r, first), flag_stamp_of(&r.w, first - f));
        ck_assert(completer_flag_is_set(&r.reader, first - 1));
        ck_assert(!completer_flag_is_set(&r.reader, first));
        ck_assert(!completer_flag_is_set(&r.reader, lap_start + f));
        ck_assert_int_eq(completer_init(&stale, &r.w, 0), 0);

        make_order(order, n, wrap_runs[_i].chunk_laps * f, first, ORDER_CHUNK_REVERSED);
        for (uint64_t k = 0; k < n; k++)
                ring_complete(&r, first + order[k]);
        ring_finish(&r);
        if (wrap_runs[_i].chunk_laps > 1)
                ck_assert_uint_gt(r.n_deferred, 0);

        /* The ids of the first 3F have had their slots overwritten by a
         * later lap's stamp: a completer whose cache is stale answers for
         * them from a fresh watermark. The last F are found by stamp. */
        for (uint64_t id = first; id < end; id++) {
                bool overwritten = id < end - f;
                stale.cached_watermark = first;
                ck_assert_msg((slot_value(&r, id) == flag_stamp_of(&r.w, id)) == !overwritten,
                              "id %llu: slot %u, stamp %u", LLU(id), slot_value(&r, id),
                              flag_stamp_of(&r.w, id));
                ck_assert_msg(completer_flag_is_set(&stale, id), "id %llu not complete", LLU(id));
                ck_assert_msg(stale.cached_watermark == (overwritten ? end : first),
                              "id %llu: answered with cache %llu", LLU(id), LLU(stale.cached_watermark));
        }
        stale.cached_watermark = first;
        ck_assert(!completer_flag_is_set(&stale, end));
        ck_assert(!completer_flag_is_set(&stale, end + f - 1));

        completer_destroy(&stale);
        free(order);
        ring_destroy(&r);
}
END_TEST

/* ----------------------------------------------------------- design names */

/* The protocol's design names (RUNTIME_LOGIC §1) are the same calls: 16
 * ids in order, then 16 in reverse through the blocking set. */
START_TEST(test_design_names) {
        uint64_t first = firsts[_i];
        struct ring r;

        ring_init(&r, 256, 1024, first, 32);
        ck_assert_ptr_eq(flag_slot(&r.w, first + 3), &r.w.flags[flag_index(&r.w, first + 3)]);

        /* In order: each id is the frontier and moves the watermark by one. */
        for (uint64_t id = first; id < first + 16; id++) {
                ck_assert(!is_completion_flag_set(&r.reader, id));
                ck_assert(try_set_completion_flag(&r.c, id));
                ck_assert(is_completion_flag_set(&r.reader, id));
                ck_assert(update_completed_watermark(&r.c, id));
                ck_assert_uint_eq(watermark_read(&r.w), id + 1);
        }

        /* Reversed: the watermark waits for first + 16, then walks over
         * all 16. */
        for (uint64_t id = first + 32; id-- > first + 16;) {
                ck_assert(!is_completion_flag_set(&r.reader, id));
                ck_assert_int_eq(set_completion_flag(&r.c, id, 1000000000), 0);
                ck_assert(is_completion_flag_set(&r.reader, id));
                ck_assert(is_completion_flag_set(&r.reader, first + 16) == (id == first + 16));
                ck_assert(update_completed_watermark(&r.c, id) == (id == first + 16));
                ck_assert_uint_eq(watermark_read(&r.w), id == first + 16 ? first + 32 : first + 16);
        }

        for (uint64_t id = first; id < first + 32; id++)
                ck_assert(is_completion_flag_set(&r.reader, id));
        ck_assert(!is_completion_flag_set(&r.reader, first + 32));
        /* Already below the watermark: true, nothing stored. */
        ck_assert(try_set_completion_flag(&r.c, first));
        ck_assert_uint_eq(stat_get(&r.c.stats.published), 32);
        ck_assert_uint_eq(stat_get(&r.c.stats.walks), 17);
        ring_destroy(&r);
}
END_TEST

/* -------------------------------------------------------------- counters */

START_TEST(test_counters_in_order) {
        struct config cfg = config_of(_i * N_ORDERS); /* ORDER_IN */
        struct ring r;
        uint64_t n = 3 * cfg.f;

        ring_init(&r, cfg.f, cfg.d, cfg.first, n);
        r.sweep = false;
        for (uint64_t k = 0; k < n; k++)
                ring_complete(&r, cfg.first + k);
        ck_assert_uint_eq(stat_get(&r.c.stats.published), n);
        ck_assert_uint_ge(stat_get(&r.c.stats.advances), 1);
        ck_assert_uint_eq(stat_get(&r.c.stats.ids_advanced), n);
        ck_assert_uint_eq(stat_get(&r.c.stats.deferred), 0);
        ck_assert_uint_eq(stat_get(&r.c.stats.retries), 0);
        ck_assert_uint_eq(watermark_read(&r.w), cfg.first + n);
        ring_finish(&r);
        ring_destroy(&r);
}
END_TEST

static Suite *watermark_suite(void) {
        Suite *s = suite_create("watermark");
        TCase *tc;

        tc = tcase_create("orders");
        tcase_set_timeout(tc, 120);
        tcase_add_loop_test(tc, test_order_table, 0, N_CONFIGS);
        tcase_add_loop_test(tc, test_gap_filled_last, 0, N_GEOMETRIES * (int)N_FIRSTS);
        suite_add_tcase(s, tc);

        tc = tcase_create("fallback");
        tcase_add_loop_test(tc, test_fallback_after_overwrite, 0, 3);
        suite_add_tcase(s, tc);

        tc = tcase_create("gate");
        tcase_add_loop_test(tc, test_slot_gate, 0, (int)N_FIRSTS);
        tcase_add_loop_test(tc, test_update_not_frontier, 0, (int)N_FIRSTS);
        suite_add_tcase(s, tc);

        tc = tcase_create("wrap");
        tcase_add_loop_test(tc, test_stamp_wrap, 0, (int)(sizeof(wrap_runs) / sizeof(wrap_runs[0])));
        suite_add_tcase(s, tc);

        tc = tcase_create("names");
        tcase_add_loop_test(tc, test_design_names, 0, (int)N_FIRSTS);
        suite_add_tcase(s, tc);

        tc = tcase_create("counters");
        tcase_add_loop_test(tc, test_counters_in_order, 0, N_GEOMETRIES * (int)N_FIRSTS);
        suite_add_tcase(s, tc);

        return s;
}

const struct check_main check_main = { .suite = watermark_suite };
