/* SPDX-License-Identifier: MIT */
/*
 * flag_index(): the map from a task id to its completion-flag slot, and
 * the initial stamps (zero: lap -1).
 *
 * Every flag window F = 2^8 .. 2^20 is covered (a Check loop test, the loop
 * index is log2(F)). Expectations are computed here from first principles
 * (bitmaps, explicit id arithmetic), never by calling the function twice the
 * same way.
 */
#include <check.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "shm/completion.h"
#include "shm/geometry.h"
#include "shm/layout.h"
#include "tests/check_main.h"
#include "tests/test_util.h"

#define LOG2_F_MIN 8
#define LOG2_F_MAX 20
#define STAMPS_PER_LINE 16u
#define SHUFFLE_IDS (1u << HBG_FLAG_SHUFFLE_BITS)

/* Check's ck_assert_* records a mark point (a write to the runner) on every
 * success: far too slow for the million-step loops below. */
struct ring {
        struct hbg_geometry g;
        void *cpl;
        struct hbg_flag_window w;
};

static void ring_init(struct ring *r, uint64_t flag_window, uint64_t first_id) {
        struct hbg_geometry_request req;
        const char *err = NULL;

        geometry_request_default(&req);
        req.flag_window = flag_window;
        /* task_window >= F; also keep it >= the default so the default
         * geometry's other fields stay valid. */
        req.task_window = flag_window > req.task_window ? flag_window : req.task_window;
        ck_assert_msg(geometry_init(&r->g, &req, &err) == 0, "geometry F=%llu: %s",
                      (unsigned long long)flag_window, err ? err : "?");
        ck_assert_uint_eq(r->g.flag_window, flag_window);
        ck_assert_uint_eq(r->g.cpl_region_size % 64, 0);

        r->cpl = aligned_alloc(64, r->g.cpl_region_size);
        ck_assert_ptr_nonnull(r->cpl);
        memset(r->cpl, 0, r->g.cpl_region_size);
        layout_cpl_region_init(r->cpl, &r->g, first_id);
        flag_window_init(&r->w, &r->g, r->cpl, first_id);
        ck_assert_ptr_eq((void *)r->w.flags, (char *)r->cpl + r->g.cpl_flags_offset);
        ck_assert_uint_eq((uintptr_t)r->w.flags % 64, 0);
}

static void ring_destroy(struct ring *r) {
        free(r->cpl);
        r->cpl = NULL;
}

static uint64_t window_of(int log2_f) {
        return UINT64_C(1) << log2_f;
}

/* ------------------------------------------------------------ bijection */

static void check_bijection(const struct ring *r, uint8_t *bitmap, uint64_t base) {
        uint64_t f = r->w.flag_window;
        const char *flags_lo = (const char *)r->cpl + r->g.cpl_flags_offset;
        const char *flags_hi = (const char *)r->cpl + r->g.cpl_region_size;

        memset(bitmap, 0, f / 8);
        for (uint64_t k = 0; k < f; k++) {
                uint64_t id = base + k;
                uint64_t idx = flag_index(&r->w, id);
                HOT_ASSERT_MSG(idx < f, "F=%llu id=%llu: index %llu out of range", (unsigned long long)f,
                               (unsigned long long)id, (unsigned long long)idx);
                HOT_ASSERT_MSG(!(bitmap[idx / 8] & (1u << (idx % 8))),
                               "F=%llu id=%llu: index %llu hit twice (base %llu)", (unsigned long long)f,
                               (unsigned long long)id, (unsigned long long)idx, (unsigned long long)base);
                bitmap[idx / 8] |= (uint8_t)(1u << (idx % 8));

                /* The slot pointer is that index, inside the mapped region. */
                const char *slot = (const char *)flag_slot(&r->w, id);
                HOT_ASSERT_MSG(slot == flags_lo + idx * sizeof(hbg_stamp_t),
                               "F=%llu id=%llu: slot pointer does not match the index",
                               (unsigned long long)f, (unsigned long long)id);
                HOT_ASSERT_MSG(slot >= flags_lo && slot + sizeof(hbg_stamp_t) <= flags_hi,
                               "F=%llu id=%llu: slot outside the completion region",
                               (unsigned long long)f, (unsigned long long)id);
        }
        /* F distinct values below F, all hit: count them independently. */
        uint64_t hits = 0;
        for (uint64_t i = 0; i < f / 8; i++)
                hits += (uint64_t)__builtin_popcount(bitmap[i]);
        HOT_ASSERT_MSG(hits == f, "F=%llu base=%llu: %llu of %llu slots hit", (unsigned long long)f,
                       (unsigned long long)base, (unsigned long long)hits, (unsigned long long)f);
}

START_TEST(test_bijection) {
        struct ring r;
        uint64_t f = window_of(_i);
        const uint64_t bases[] = {
                0,
                (UINT64_C(1) << 32) - 100,
                (UINT64_C(1) << 31) + 7,
                12345,                          /* not aligned to anything */
                UINT64_MAX - f / 2 + 1,         /* wraps around 2^64 */
        };
        uint8_t *bitmap = malloc(f / 8);

        ck_assert_ptr_nonnull(bitmap);
        ring_init(&r, f, 0);
        for (size_t b = 0; b < sizeof(bases) / sizeof(bases[0]); b++)
                check_bijection(&r, bitmap, bases[b]);
        free(bitmap);
        ring_destroy(&r);
}
END_TEST

/* ------------------------------------------------- consecutive ids spread */

static void check_distinct_lines(const struct ring *r, uint32_t *seen, uint32_t *gen,
                                 uint64_t start) {
        uint64_t f = r->w.flag_window;

        (*gen)++;
        for (uint64_t k = 0; k < SHUFFLE_IDS; k++) {
                uint64_t id = start + k;
                uint64_t line = flag_index(&r->w, id) / STAMPS_PER_LINE;
                /* The same thing measured on addresses: 64-byte lines. */
                uint64_t addr_line = ((uintptr_t)flag_slot(&r->w, id) -
                                      (uintptr_t)r->w.flags) / HBG_CACHE_LINE;
                HOT_ASSERT_MSG(line == addr_line, "F=%llu id=%llu: line %llu vs address line %llu",
                               (unsigned long long)f, (unsigned long long)id, (unsigned long long)line,
                               (unsigned long long)addr_line);
                HOT_ASSERT_MSG(line < f / STAMPS_PER_LINE, "F=%llu id=%llu: line %llu out of range",
                               (unsigned long long)f, (unsigned long long)id, (unsigned long long)line);
                HOT_ASSERT_MSG(seen[line] != *gen,
                               "F=%llu: ids %llu..%llu share cache line %llu (id %llu)",
                               (unsigned long long)f, (unsigned long long)start,
                               (unsigned long long)(start + SHUFFLE_IDS - 1), (unsigned long long)line,
                               (unsigned long long)id);
                seen[line] = *gen;
        }
}

START_TEST(test_consecutive_distinct_lines) {
        struct ring r;
        uint64_t f = window_of(_i);
        uint32_t *seen = calloc(f / STAMPS_PER_LINE, sizeof(*seen));
        uint32_t gen = 0;
        const uint64_t centres[] = { UINT64_C(1) << 31, UINT64_C(1) << 32, UINT64_C(3) << 32 };

        ck_assert_uint_eq(SHUFFLE_IDS, 16);
        ck_assert_ptr_nonnull(seen);
        ring_init(&r, f, 0);
        for (uint64_t s = 0; s < 4096; s++)
                check_distinct_lines(&r, seen, &gen, s);
        for (size_t c = 0; c < sizeof(centres) / sizeof(centres[0]); c++)
                for (uint64_t s = centres[c] - 300; s < centres[c] + 300; s++)
                        check_distinct_lines(&r, seen, &gen, s);
        /* The end of the window wraps into its start. */
        for (uint64_t s = f - 40; s < f + 40; s++)
                check_distinct_lines(&r, seen, &gen, s);
        free(seen);
        ring_destroy(&r);
}
END_TEST

/* ----------------------------------------------------------------- period */

static uint64_t splitmix64(uint64_t *state) {
        uint64_t z = (*state += UINT64_C(0x9e3779b97f4a7c15));
        z = (z ^ (z >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
        z = (z ^ (z >> 27)) * UINT64_C(0x94d049bb133111eb);
        return z ^ (z >> 31);
}

START_TEST(test_period) {
        struct ring r;
        uint64_t f = window_of(_i);
        uint64_t rng = 0x5eed0000u + (uint64_t)_i;

        ring_init(&r, f, 0);
        /* Two full laps from 0, and around 2^31 and 2^32. */
        for (uint64_t id = 0; id < 2 * f; id++)
                HOT_ASSERT_MSG(flag_index(&r.w, id) == flag_index(&r.w, id + f),
                               "F=%llu id=%llu: period broken", (unsigned long long)f,
                               (unsigned long long)id);
        for (uint64_t id = (UINT64_C(1) << 31) - f; id < (UINT64_C(1) << 31) + f; id++)
                HOT_ASSERT_MSG(flag_index(&r.w, id) == flag_index(&r.w, id + f),
                               "F=%llu id=%llu: period broken", (unsigned long long)f,
                               (unsigned long long)id);
        for (uint64_t id = (UINT64_C(1) << 32) - f; id < (UINT64_C(1) << 32) + f; id++)
                HOT_ASSERT_MSG(flag_index(&r.w, id) == flag_index(&r.w, id + f),
                               "F=%llu id=%llu: period broken", (unsigned long long)f,
                               (unsigned long long)id);
        /* Random ids, several laps apart: index depends on id mod F only. */
        for (int n = 0; n < 20000; n++) {
                uint64_t id = splitmix64(&rng);
                uint64_t laps = splitmix64(&rng) % 1000;
                HOT_ASSERT_MSG(flag_index(&r.w, id) == flag_index(&r.w, id + laps * f),
                               "F=%llu id=%llu laps=%llu: period broken", (unsigned long long)f,
                               (unsigned long long)id, (unsigned long long)laps);
                HOT_ASSERT_MSG(flag_index(&r.w, id) == flag_index(&r.w, id & (f - 1)),
                               "F=%llu id=%llu: index is not a function of id mod F",
                               (unsigned long long)f, (unsigned long long)id);
        }
        ring_destroy(&r);
}
END_TEST

START_TEST(test_period_f256_pure_function) {
        struct ring r;
        uint64_t table[256];
        uint64_t rng = 256;

        ring_init(&r, 256, 0);
        for (uint64_t v = 0; v < 256; v++)
                table[v] = flag_index(&r.w, v);
        /* Every high part, including ones that only differ above bit 32. */
        for (int n = 0; n < 4096; n++) {
                uint64_t high = splitmix64(&rng) & ~UINT64_C(255);
                if (n < 64)
                        high = (uint64_t)n << 8;
                else if (n < 120)
                        high = UINT64_C(1) << (n - 56); /* bits 8 .. 63 */
                for (uint64_t v = 0; v < 256; v++)
                        HOT_ASSERT_MSG(flag_index(&r.w, high | v) == table[v],
                                       "F=256 id=%llu: index %llu, id & 255 gives %llu",
                                       (unsigned long long)(high | v),
                                       (unsigned long long)flag_index(&r.w, high | v),
                                       (unsigned long long)table[v]);
        }
        ring_destroy(&r);
}
END_TEST

/* ------------------------------------------------------- set spreading */

/* completion.h: for F >= 2^12 the 16 lines used by one aligned block of 256
 * ids fall in 16 different (line mod 16) classes, i.e. different L1 sets. */
static void check_block_sets(const struct ring *r, uint32_t *uses, uint64_t block_start) {
        uint64_t f = r->w.flag_window;
        uint64_t lines[256];
        uint64_t n_lines = 0;
        unsigned mod_seen = 0;

        for (uint64_t k = 0; k < 256; k++) {
                uint64_t line = flag_index(&r->w, block_start + k) / STAMPS_PER_LINE;
                if (uses[line]++ == 0)
                        lines[n_lines++] = line;
        }
        HOT_ASSERT_MSG(n_lines == 16, "F=%llu block %llu: uses %llu lines, expected 16",
                       (unsigned long long)f, (unsigned long long)block_start,
                       (unsigned long long)n_lines);
        for (uint64_t i = 0; i < n_lines; i++) {
                HOT_ASSERT_MSG(uses[lines[i]] == 16, "F=%llu block %llu: line %llu holds %u of its ids",
                               (unsigned long long)f, (unsigned long long)block_start,
                               (unsigned long long)lines[i], uses[lines[i]]);
                unsigned m = (unsigned)(lines[i] % 16);
                HOT_ASSERT_MSG(!(mod_seen & (1u << m)),
                               "F=%llu block %llu: two of its lines are congruent to %u mod 16",
                               (unsigned long long)f, (unsigned long long)block_start, m);
                mod_seen |= 1u << m;
                uses[lines[i]] = 0;
        }
}

START_TEST(test_block_set_spreading) {
        struct ring r;
        uint64_t f = window_of(_i);
        uint32_t *uses = calloc(f / STAMPS_PER_LINE, sizeof(*uses));

        ck_assert_ptr_nonnull(uses);
        ring_init(&r, f, 0);
        /* Every block of the window, then a lap around 2^32. */
        for (uint64_t b = 0; b < f; b += 256)
                check_block_sets(&r, uses, b);
        for (uint64_t b = (UINT64_C(1) << 32) - f; b < (UINT64_C(1) << 32) + f; b += 256 * 7)
                check_block_sets(&r, uses, b);
        free(uses);
        ring_destroy(&r);
}
END_TEST

/* ------------------------------------------------------- initial stamps */

START_TEST(test_initial_stamps) {
        uint64_t f = window_of(_i);
        const uint64_t firsts[] = {
                0,
                5,
                (UINT64_C(1) << 32) - 10,
                (UINT64_C(1) << 31) - 3,
        };

        for (size_t t = 0; t < sizeof(firsts) / sizeof(firsts[0]); t++) {
                uint64_t first = firsts[t];
                struct ring r;
                struct hbg_completer c;
                const struct hbg_cpl_header *h;

                ring_init(&r, f, first);
                h = r.cpl;
                ck_assert_uint_eq(h->first_id, first);
                ck_assert_uint_eq(watermark_read(&r.w), first);
                ck_assert_int_eq(completer_init(&c, &r.w, 0), 0);
                ck_assert_uint_eq(c.cached_watermark, first);

                for (uint64_t id = first; id < first + f; id++) {
                        uint32_t want = 0; /* lap -1: the previous occupant (§3.3) */
                        uint32_t got = atomic_load(flag_slot(&r.w, id));
                        HOT_ASSERT_MSG(got == want, "F=%llu first=%llu id=%llu: stamp %u, expected %u",
                                       (unsigned long long)f, (unsigned long long)first,
                                       (unsigned long long)id, got, want);
                        HOT_ASSERT_MSG(got != flag_stamp_of(&r.w, id),
                                       "F=%llu first=%llu id=%llu: initial stamp looks complete",
                                       (unsigned long long)f, (unsigned long long)first,
                                       (unsigned long long)id);
                        HOT_ASSERT_MSG(!completer_flag_is_set(&c, id),
                                       "F=%llu first=%llu id=%llu: reported complete at start",
                                       (unsigned long long)f, (unsigned long long)first,
                                       (unsigned long long)id);
                }
                if (first > 0) {
                        ck_assert_msg(completer_flag_is_set(&c, first - 1),
                                      "F=%llu first=%llu: first-1 not reported complete",
                                      (unsigned long long)f, (unsigned long long)first);
                        /* From a completer whose cache is behind: first - 1
                         * shares its slot with first + F - 1, whose initial
                         * stamp is exactly that of first - 1. */
                        c.cached_watermark = 0;
                        ck_assert(completer_flag_is_set(&c, first - 1));
                        ck_assert_uint_eq(c.cached_watermark, 0);
                }
                if (first > f) {
                        /* An older id's slot holds a later stamp: only a
                         * re-read of the watermark can answer. */
                        c.cached_watermark = 0;
                        ck_assert(completer_flag_is_set(&c, first - f - 1));
                        ck_assert_uint_eq(c.cached_watermark, first);
                }
                ck_assert_uint_eq(watermark_read(&r.w), first);
                completer_destroy(&c);
                ring_destroy(&r);
        }
}
END_TEST

static Suite *flag_index_suite(void) {
        Suite *s = suite_create("flag_index");
        TCase *tc;

        tc = tcase_create("bijection");
        tcase_set_timeout(tc, 60);
        tcase_add_loop_test(tc, test_bijection, LOG2_F_MIN, LOG2_F_MAX + 1);
        suite_add_tcase(s, tc);

        tc = tcase_create("cache_lines");
        tcase_set_timeout(tc, 60);
        tcase_add_loop_test(tc, test_consecutive_distinct_lines, LOG2_F_MIN, LOG2_F_MAX + 1);
        tcase_add_loop_test(tc, test_block_set_spreading, 12, LOG2_F_MAX + 1);
        suite_add_tcase(s, tc);

        tc = tcase_create("period");
        tcase_set_timeout(tc, 60);
        tcase_add_loop_test(tc, test_period, LOG2_F_MIN, LOG2_F_MAX + 1);
        tcase_add_test(tc, test_period_f256_pure_function);
        suite_add_tcase(s, tc);

        tc = tcase_create("initial_stamps");
        tcase_set_timeout(tc, 60);
        tcase_add_loop_test(tc, test_initial_stamps, LOG2_F_MIN, LOG2_F_MAX + 1);
        suite_add_tcase(s, tc);

        return s;
}

const struct check_main check_main = { .suite = flag_index_suite };
