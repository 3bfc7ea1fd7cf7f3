/* SPDX-License-Identifier: MIT */
/* Helpers shared by the engine tests: a small seeded PRNG (splitmix64),
 * the HBG_TEST_SCALE divisor and the process's CPU time. */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <time.h>

/* Sanitizer builds run the randomized tests smaller unless told otherwise:
 * they are many times slower, and make check runs the whole suite under
 * each. ASan and the -O3 -DNDEBUG build (RELEASE=1, there for what the
 * optimiser may break) take a quarter; TSan, about ten times slower than
 * plain, an eighth. The plain build runs them whole. */
#if defined(__SANITIZE_THREAD__)
#define HBG_TEST_BUILD_SCALE 8u
#elif defined(__SANITIZE_ADDRESS__) || defined(NDEBUG)
#define HBG_TEST_BUILD_SCALE 4u
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define HBG_TEST_BUILD_SCALE 8u
#elif __has_feature(address_sanitizer)
#define HBG_TEST_BUILD_SCALE 4u
#endif
#endif
#ifndef HBG_TEST_BUILD_SCALE
#define HBG_TEST_BUILD_SCALE 1u
#endif

/* ck_assert_msg for loops (every task, byte or step): Check records the place of
 * every ck_assert that passes (in fork mode, a message written to the
 * test's channel each), which was two thirds of test_engine_differential's
 * time plain and six sevenths under ASan. This one calls into Check only
 * when cond fails. Needs <check.h>. */
#define HOT_ASSERT_MSG(cond, ...)                       \
        do {                                            \
                if (!(cond))                            \
                        ck_abort_msg(__VA_ARGS__);      \
        } while (0)

/* This process's CPU time (all threads), ns: for "idle uses no CPU". */
static inline int64_t test_cpu_ns(void) {
        struct timespec ts;
        clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
        return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* HBG_TEST_SCALE=N divides a test's work by N; `dflt` when unset or bad. */
static inline unsigned test_scale_or(unsigned dflt) {
        const char *s = getenv("HBG_TEST_SCALE");
        long v = s ? strtol(s, NULL, 10) : 0;
        return v >= 1 ? (unsigned)v : dflt;
}

/* The hostile and fault tests' divisor: 10 unless told (make check's small
 * scale); HBG_TEST_SCALE=1 is the full scale `make hostile` runs. */
static inline unsigned hostile_scale(void) {
        return test_scale_or(10);
}

struct rng {
        uint64_t s;
};

static inline uint64_t rng_u64(struct rng *r) {
        uint64_t z = (r->s += UINT64_C(0x9e3779b97f4a7c15));
        z = (z ^ (z >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
        z = (z ^ (z >> 27)) * UINT64_C(0x94d049bb133111eb);
        return z ^ (z >> 31);
}

static inline uint32_t rng_below(struct rng *r, uint32_t n) {
        return (uint32_t)(rng_u64(r) % n);
}

/* Inclusive range. */
static inline uint32_t rng_range(struct rng *r, uint32_t lo, uint32_t hi) {
        return lo + rng_below(r, hi - lo + 1);
}

static inline bool rng_chance(struct rng *r, unsigned percent) {
        return rng_below(r, 100) < percent;
}

static inline float rng_f32(struct rng *r, float lo, float hi) {
        return lo + (hi - lo) * (float)(rng_u64(r) >> 40) / (float)(UINT32_C(1) << 24);
}
