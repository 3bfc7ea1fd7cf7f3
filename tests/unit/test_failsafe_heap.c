/* SPDX-License-Identifier: MIT */
/*
 * The failsafe min-heap on its own (against a sorted reference array), and
 * through a completer whose heap is deliberately too small.
 */
#include <check.h>
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "shm/completion.h"
#include "shm/failsafe_heap.h"
#include "shm/geometry.h"
#include "shm/layout.h"
#include "tests/check_main.h"
#include "tests/test_util.h"

#define LLU(x) ((unsigned long long)(x))

static uint64_t splitmix64(uint64_t *state) {
        uint64_t z = (*state += UINT64_C(0x9e3779b97f4a7c15));
        z = (z ^ (z >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
        z = (z ^ (z >> 27)) * UINT64_C(0x94d049bb133111eb);
        return z ^ (z >> 31);
}

static int cmp_u64(const void *a, const void *b) {
        uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
        return (x > y) - (x < y);
}

/* Pop everything; it must come out as `want` (sorted here) and then the
 * heap is empty. */
static void drain_and_compare(struct hbg_failsafe_heap *h, uint64_t *want, uint32_t n) {
        uint64_t id, peeked;

        qsort(want, n, sizeof(*want), cmp_u64);
        HOT_ASSERT_MSG(failsafe_heap_len(h) == n, "heap holds %u, expected %u",
                       failsafe_heap_len(h), n);
        for (uint32_t i = 0; i < n; i++) {
                HOT_ASSERT_MSG(failsafe_heap_peek(h, &peeked), "peek failed at %u of %u", i, n);
                HOT_ASSERT_MSG(failsafe_heap_pop(h, &id), "pop failed at %u of %u", i, n);
                HOT_ASSERT_MSG(id == peeked, "pop %u: %llu, peek said %llu", i, LLU(id), LLU(peeked));
                HOT_ASSERT_MSG(id == want[i], "pop %u: %llu, expected %llu", i, LLU(id), LLU(want[i]));
                HOT_ASSERT_MSG(failsafe_heap_len(h) == n - 1 - i, "len after pop %u: %u", i,
                               failsafe_heap_len(h));
        }
        HOT_ASSERT_MSG(!failsafe_heap_peek(h, &id), "peek on drained heap succeeded");
        HOT_ASSERT_MSG(!failsafe_heap_pop(h, &id), "pop on drained heap succeeded");
}

/* ---------------------------------------------------------- sorted order */

START_TEST(test_random_sorted) {
        /* _i selects the value range: full 64 bits, small (many duplicates),
         * ids near 2^32. */
        const uint32_t sizes[] = { 1, 2, 3, 7, 8, 9, 100, 1000, 4096 };
        uint64_t rng = 0xfeed0000u + (uint64_t)_i;

        for (size_t s = 0; s < sizeof(sizes) / sizeof(sizes[0]); s++) {
                uint32_t n = sizes[s];
                struct hbg_failsafe_heap h;
                uint64_t *want = malloc(n * sizeof(*want));

                ck_assert_ptr_nonnull(want);
                ck_assert_int_eq(failsafe_heap_init(&h, n), 0);
                for (uint32_t i = 0; i < n; i++) {
                        uint64_t v = splitmix64(&rng);
                        if (_i == 1)
                                v %= 16;
                        else if (_i == 2)
                                v = (UINT64_C(1) << 32) - 500 + v % 1000;
                        want[i] = v;
                        HOT_ASSERT_MSG(failsafe_heap_push(&h, v) == 0, "push %u of %u failed", i, n);
                }
                drain_and_compare(&h, want, n);
                free(want);
                failsafe_heap_destroy(&h);
        }
}
END_TEST

START_TEST(test_duplicates_and_extremes) {
        struct hbg_failsafe_heap h;
        uint64_t want[64];
        uint32_t n = 0;

        ck_assert_int_eq(failsafe_heap_init(&h, 64), 0);
        for (int i = 0; i < 10; i++) {
                want[n++] = 42;
                ck_assert_int_eq(failsafe_heap_push(&h, 42), 0);
        }
        const uint64_t extremes[] = { UINT64_MAX, 0, UINT64_MAX, 0, 1, UINT64_MAX - 1, 41, 43 };
        for (size_t i = 0; i < sizeof(extremes) / sizeof(extremes[0]); i++) {
                want[n++] = extremes[i];
                ck_assert_int_eq(failsafe_heap_push(&h, extremes[i]), 0);
        }
        uint64_t min;
        ck_assert(failsafe_heap_peek(&h, &min));
        ck_assert_uint_eq(min, 0);
        drain_and_compare(&h, want, n);

        /* Descending and ascending pushes. */
        n = 0;
        for (uint64_t v = 64; v-- > 32;) {
                want[n++] = v;
                ck_assert_int_eq(failsafe_heap_push(&h, v), 0);
                ck_assert(failsafe_heap_peek(&h, &min));
                ck_assert_uint_eq(min, v);
        }
        for (uint64_t v = 100; v < 132; v++) {
                want[n++] = v;
                ck_assert_int_eq(failsafe_heap_push(&h, v), 0);
                ck_assert(failsafe_heap_peek(&h, &min));
                ck_assert_uint_eq(min, 32);
        }
        drain_and_compare(&h, want, n);
        failsafe_heap_destroy(&h);
}
END_TEST

/* -------------------------------------------------------------- capacity */

START_TEST(test_capacity_zero) {
        struct hbg_failsafe_heap h;
        uint64_t id = 777;

        ck_assert_int_eq(failsafe_heap_init(&h, 0), 0);
        ck_assert_int_eq(failsafe_heap_push(&h, 1), -ENOSPC);
        ck_assert_int_eq(failsafe_heap_push(&h, 0), -ENOSPC);
        ck_assert_uint_eq(failsafe_heap_len(&h), 0);
        ck_assert(!failsafe_heap_peek(&h, &id));
        ck_assert(!failsafe_heap_pop(&h, &id));
        failsafe_heap_destroy(&h);
        failsafe_heap_destroy(NULL);
}
END_TEST

START_TEST(test_capacity_n) {
        /* Loop index: the capacity. */
        uint32_t cap = (uint32_t)_i;
        struct hbg_failsafe_heap h;
        uint64_t rng = 1000u + cap;
        uint64_t *want = malloc((cap + 1) * sizeof(*want));

        ck_assert_ptr_nonnull(want);
        ck_assert_int_eq(failsafe_heap_init(&h, cap), 0);
        for (uint32_t i = 0; i < cap; i++) {
                want[i] = splitmix64(&rng) % 1000;
                ck_assert_int_eq(failsafe_heap_push(&h, want[i]), 0);
        }
        ck_assert_uint_eq(failsafe_heap_len(&h), cap);
        /* Smaller than everything, larger than everything, a duplicate. */
        ck_assert_int_eq(failsafe_heap_push(&h, 0), -ENOSPC);
        ck_assert_int_eq(failsafe_heap_push(&h, UINT64_MAX), -ENOSPC);
        if (cap > 0)
                ck_assert_int_eq(failsafe_heap_push(&h, want[0]), -ENOSPC);
        ck_assert_uint_eq(failsafe_heap_len(&h), cap);
        drain_and_compare(&h, want, cap);

        /* Refill after draining: the full capacity is usable again. */
        for (uint32_t i = 0; i < cap; i++) {
                want[i] = UINT64_MAX - i;
                ck_assert_int_eq(failsafe_heap_push(&h, want[i]), 0);
        }
        ck_assert_int_eq(failsafe_heap_push(&h, 5), -ENOSPC);
        drain_and_compare(&h, want, cap);
        free(want);
        failsafe_heap_destroy(&h);
}
END_TEST

START_TEST(test_empty) {
        struct hbg_failsafe_heap h;
        uint64_t id = 12345;

        ck_assert_int_eq(failsafe_heap_init(&h, 4), 0);
        ck_assert_uint_eq(failsafe_heap_len(&h), 0);
        ck_assert(!failsafe_heap_peek(&h, &id));
        ck_assert(!failsafe_heap_pop(&h, &id));
        ck_assert_int_eq(failsafe_heap_push(&h, 9), 0);
        ck_assert(failsafe_heap_pop(&h, &id));
        ck_assert_uint_eq(id, 9);
        ck_assert(!failsafe_heap_peek(&h, &id));
        ck_assert(!failsafe_heap_pop(&h, &id));
        ck_assert_uint_eq(failsafe_heap_len(&h), 0);
        failsafe_heap_destroy(&h);
        ck_assert_ptr_null(h.ids);
        ck_assert_uint_eq(h.capacity, 0);
}
END_TEST

/* ----------------------------------------------------- interleaved ops */

/* Reference: a sorted array; insertion keeps it sorted. */
static void ref_insert(uint64_t *a, uint32_t *n, uint64_t v) {
        uint32_t i = *n;
        while (i > 0 && a[i - 1] > v) {
                a[i] = a[i - 1];
                i--;
        }
        a[i] = v;
        (*n)++;
}

START_TEST(test_interleaved) {
        const uint32_t cap = 256;
        struct hbg_failsafe_heap h;
        uint64_t ref[256];
        uint32_t n = 0;
        uint64_t rng = 0xabcdefu + (uint64_t)_i;
        uint64_t id;

        ck_assert_int_eq(failsafe_heap_init(&h, cap), 0);
        for (int op = 0; op < 10000; op++) {
                uint64_t r = splitmix64(&rng);
                /* Phases biased to fill up (hitting -ENOSPC) and to drain. */
                bool fill = (op / 1000) % 2 == 0;
                bool push = (r % 100) < (fill ? 70u : 30u);
                if (push) {
                        uint64_t v = (r >> 8) % (_i == 0 ? UINT64_C(1) << 40 : 64);
                        int ret = failsafe_heap_push(&h, v);
                        if (n < cap) {
                                HOT_ASSERT_MSG(ret == 0, "op %d: push failed with %u of %u", op, n, cap);
                                ref_insert(ref, &n, v);
                        } else {
                                HOT_ASSERT_MSG(ret == -ENOSPC, "op %d: push to a full heap: %d", op,
                                               ret);
                        }
                } else {
                        bool ok = failsafe_heap_pop(&h, &id);
                        HOT_ASSERT_MSG(ok == (n > 0), "op %d: pop %d with %u held", op, ok, n);
                        if (ok) {
                                HOT_ASSERT_MSG(id == ref[0], "op %d: pop %llu, expected %llu", op,
                                               LLU(id), LLU(ref[0]));
                                memmove(ref, ref + 1, (n - 1) * sizeof(*ref));
                                n--;
                        }
                }
                HOT_ASSERT_MSG(failsafe_heap_len(&h) == n, "op %d: len %u, expected %u", op,
                               failsafe_heap_len(&h), n);
                uint64_t min;
                bool has = failsafe_heap_peek(&h, &min);
                HOT_ASSERT_MSG(has == (n > 0), "op %d: peek %d with %u held", op, has, n);
                HOT_ASSERT_MSG(!has || min == ref[0], "op %d: peek %llu, expected %llu", op, LLU(min),
                               LLU(ref[0]));
        }
        drain_and_compare(&h, ref, n);
        failsafe_heap_destroy(&h);
}
END_TEST

/* ------------------------------------------------- through a completer */

START_TEST(test_completer_heap_full) {
        const uint64_t starts[] = { 0, (UINT64_C(1) << 32) - 300, (UINT64_C(1) << 31) - 100 };
        uint64_t first = starts[_i];
        struct hbg_geometry_request req;
        struct hbg_geometry g;
        struct hbg_flag_window w;
        struct hbg_completer c;
        void *cpl;
        uint64_t id;

        geometry_request_default(&req);
        req.flag_window = 256;
        req.task_window = 1024;
        ck_assert_int_eq(geometry_init(&g, &req, NULL), 0);
        cpl = aligned_alloc(64, g.cpl_region_size);
        ck_assert_ptr_nonnull(cpl);
        memset(cpl, 0, g.cpl_region_size);
        layout_cpl_region_init(cpl, &g, first);
        flag_window_init(&w, &g, cpl, first);
        ck_assert_int_eq(completer_init(&c, &w, 2), 0);

        uint32_t slot0 = atomic_load(flag_slot(&w, first + 256));
        ck_assert_int_eq(completer_publish_or_defer(&c, first + 256), 0);
        ck_assert_int_eq(completer_publish_or_defer(&c, first + 257), 0);
        ck_assert_int_eq(completer_publish_or_defer(&c, first + 258), -ENOSPC);
        ck_assert_uint_eq(stat_get(&c.stats.heap_full), 1);
        ck_assert_uint_eq(stat_get(&c.stats.deferred), 2);
        ck_assert_uint_eq(stat_get(&c.stats.heap_max), 2);
        ck_assert_uint_eq(stat_get(&c.stats.published), 0);
        ck_assert_uint_eq(failsafe_heap_len(&c.heap), 2);
        /* Nothing written for any of them. */
        ck_assert_uint_eq(atomic_load(flag_slot(&w, first + 256)), slot0);
        ck_assert_uint_eq(atomic_load(flag_slot(&w, first + 258)), flag_stamp_of(&w, first + 2 - 256));
        /* Still blocked: the retry publishes nothing. */
        ck_assert_int_eq(completer_retry_deferred(&c, &id), 0);
        ck_assert_uint_eq(failsafe_heap_len(&c.heap), 2);

        for (uint64_t x = first; x < first + 256; x++) {
                ck_assert_int_eq(completer_publish_or_defer(&c, x), 1);
                ck_assert(watermark_update(&c, x));
                ck_assert_uint_eq(watermark_read(&w), x + 1);
        }
        ck_assert_uint_eq(watermark_read(&w), first + 256);

        ck_assert_int_eq(completer_retry_deferred(&c, &id), 1);
        ck_assert_uint_eq(id, first + 256);
        ck_assert_uint_eq(atomic_load(flag_slot(&w, first + 256)), flag_stamp_of(&w, first + 256));
        ck_assert(watermark_update(&c, id));
        ck_assert_uint_eq(watermark_read(&w), first + 257);

        ck_assert_int_eq(completer_retry_deferred(&c, &id), 1);
        ck_assert_uint_eq(id, first + 257);
        ck_assert(watermark_update(&c, id));
        ck_assert_uint_eq(watermark_read(&w), first + 258);

        ck_assert_int_eq(completer_retry_deferred(&c, &id), 0);
        ck_assert_uint_eq(failsafe_heap_len(&c.heap), 0);

        ck_assert_int_eq(completer_publish_or_defer(&c, first + 258), 1);
        ck_assert(watermark_update(&c, first + 258));
        ck_assert_uint_eq(watermark_read(&w), first + 259);
        ck_assert_uint_eq(stat_get(&c.stats.published), 259);
        ck_assert_uint_eq(stat_get(&c.stats.retry_published), 2);
        ck_assert_uint_eq(stat_get(&c.stats.heap_full), 1);
        ck_assert_uint_eq(stat_get(&c.stats.deferred), 2);

        completer_destroy(&c);
        free(cpl);
}
END_TEST

/* Heap order decides retry order: deferred out of order, published in
 * order once the gate opens. */
START_TEST(test_completer_retry_order) {
        struct hbg_geometry_request req;
        struct hbg_geometry g;
        struct hbg_flag_window w;
        struct hbg_completer c;
        void *cpl;
        uint64_t id;
        const uint64_t f = 256, first = 1000;
        const uint64_t deferred[] = { 700, 300, 512, 301, 256, 767, 299, 300 + 256 };

        geometry_request_default(&req);
        req.flag_window = f;
        req.task_window = 1024;
        ck_assert_int_eq(geometry_init(&g, &req, NULL), 0);
        cpl = aligned_alloc(64, g.cpl_region_size);
        ck_assert_ptr_nonnull(cpl);
        memset(cpl, 0, g.cpl_region_size);
        layout_cpl_region_init(cpl, &g, first);
        flag_window_init(&w, &g, cpl, first);
        ck_assert_int_eq(completer_init(&c, &w, failsafe_capacity(&g)), 0);

        for (size_t i = 0; i < sizeof(deferred) / sizeof(deferred[0]); i++)
                ck_assert_int_eq(completer_publish_or_defer(&c, first + deferred[i]), 0);
        /* Complete [first, first + 256): WM = first + 256. Retries publish
         * in id order, each one only while it is < WM + F; first + 257 is
         * never completed, so the watermark stops at first + 257 and the
         * gate at first + 513. */
        for (uint64_t x = first; x < first + f; x++) {
                ck_assert_int_eq(completer_publish_or_defer(&c, x), 1);
                watermark_update(&c, x);
        }
        const uint64_t expect[] = { 256, 299, 300, 301, 512 };
        for (size_t i = 0; i < sizeof(expect) / sizeof(expect[0]); i++) {
                ck_assert_int_eq(completer_retry_deferred(&c, &id), 1);
                ck_assert_uint_eq(id, first + expect[i]);
                watermark_update(&c, id);
        }
        /* first + 257 is missing: the watermark stops there. */
        ck_assert_uint_eq(watermark_read(&w), first + 257);
        ck_assert_int_eq(completer_retry_deferred(&c, &id), 0);
        ck_assert_uint_eq(failsafe_heap_len(&c.heap), 3);
        uint64_t min;
        ck_assert(failsafe_heap_peek(&c.heap, &min));
        ck_assert_uint_eq(min, first + 556);
        /* Completing first + 257 lets the rest through. */
        ck_assert_int_eq(completer_publish_or_defer(&c, first + 257), 1);
        watermark_update(&c, first + 257);
        ck_assert_uint_eq(watermark_read(&w), first + 258);
        /* Fill in everything else in order; the deferred ids come back in
         * id order as the gate passes them. */
        const uint64_t rest[] = { 556, 700, 767 };
        size_t got = 0;
        for (uint64_t x = first + 258; x < first + 768; x++) {
                bool was_deferred = false;
                for (size_t i = 0; i < sizeof(deferred) / sizeof(deferred[0]); i++)
                        was_deferred |= first + deferred[i] == x;
                if (!was_deferred) {
                        ck_assert_int_eq(completer_publish_or_defer(&c, x), 1);
                        watermark_update(&c, x);
                }
                while (completer_retry_deferred(&c, &id) == 1) {
                        ck_assert_uint_lt(got, 3);
                        ck_assert_uint_eq(id, first + rest[got]);
                        got++;
                        watermark_update(&c, id);
                }
        }
        ck_assert_uint_eq(got, 3);
        ck_assert_int_eq(completer_retry_deferred(&c, &id), 0);
        ck_assert_uint_eq(failsafe_heap_len(&c.heap), 0);
        ck_assert_uint_eq(watermark_read(&w), first + 768);

        completer_destroy(&c);
        free(cpl);
}
END_TEST

static Suite *failsafe_heap_suite(void) {
        Suite *s = suite_create("failsafe_heap");
        TCase *tc;

        tc = tcase_create("order");
        tcase_add_loop_test(tc, test_random_sorted, 0, 3);
        tcase_add_test(tc, test_duplicates_and_extremes);
        suite_add_tcase(s, tc);

        tc = tcase_create("capacity");
        tcase_add_test(tc, test_capacity_zero);
        tcase_add_loop_test(tc, test_capacity_n, 1, 34);
        tcase_add_loop_test(tc, test_capacity_n, 1000, 1001);
        tcase_add_test(tc, test_empty);
        suite_add_tcase(s, tc);

        tc = tcase_create("interleaved");
        tcase_set_timeout(tc, 60);
        tcase_add_loop_test(tc, test_interleaved, 0, 2);
        suite_add_tcase(s, tc);

        tc = tcase_create("completer");
        tcase_add_loop_test(tc, test_completer_heap_full, 0, 3);
        tcase_add_test(tc, test_completer_retry_order);
        suite_add_tcase(s, tc);

        return s;
}

const struct check_main check_main = { .suite = failsafe_heap_suite };
