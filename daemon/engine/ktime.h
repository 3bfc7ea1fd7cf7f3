/* SPDX-License-Identifier: MIT */
/*
 * Per-kernel task times (docs/OPERATIONS.md, "Metrics"): for every kernel
 * of the table, the tasks run, how many failed, and histograms of their
 * run time and of their wait between ready and start. Every task is
 * timed, none sampled.
 *
 * The clock is the CPU's cycle counter (rdtsc on x86-64: one instruction, no
 * vDSO call), in "ticks". A task has three stamps: when it is made ready
 * (ready.c, in its slot), when its first block starts and when its last block
 * ends (dispatch.c). A task that the completion of a task's last run hands on
 * at once, on that run's thread, takes that run's end as its ready stamp: the
 * input that held it back was complete from then on, and the counter is read
 * twice a task on a chain rather than three times (a read costs some 25
 * cycles; docs/PERFORMANCE.md). Its wait is start - ready, its run end -
 * start (for a task split over several threads: from its first block's start
 * to the end of the run of blocks that finished it, read right after that
 * run, before the count that says so: another thread's run may end a little
 * later). Both are counted by the thread that ran its last block, in that
 * thread's own table: one writer per table, no shared cache line written per
 * task. Readers add the threads' tables up (ktime_read()).
 *
 * Ticks become nanoseconds only when read: the histograms' bucket bounds
 * are converted to ticks once, at engine start, after a calibration of
 * the counter against CLOCK_MONOTONIC (ktime_calibrate()), so that a task
 * pays no multiply or division. Where there is no usable cycle counter
 * (not x86-64) the ticks are CLOCK_MONOTONIC's nanoseconds.
 */
#pragma once

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "daemon/engine/histogram.h"
#include "common/clock.h"

#if defined(__SANITIZE_THREAD__)
#define KTIME_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define KTIME_TSAN 1
#endif
#endif
#ifndef KTIME_TSAN
#define KTIME_TSAN 0
#endif

#if defined(__x86_64__)
#include <x86intrin.h>
#define KTIME_CYCLES 1
#else
#define KTIME_CYCLES 0
#endif

/* Now, in ticks. rdtsc is not ordered against the loads and stores
 * around it; a task's times are a few instructions off at most. */
static inline uint64_t ktime_now(void) {
#if KTIME_CYCLES
        return __rdtsc();
#else
        return (uint64_t)clock_now_ns();
#endif
}

/* *p = ktime_now(); on x86-64 the counter's halves stored as they come
 * (little-endian), without joining them first. */
static inline void ktime_stamp(uint64_t *p) {
#if KTIME_CYCLES
        uint32_t lo, hi;
        __asm__ __volatile__("rdtsc" : "=a"(lo), "=d"(hi));
        memcpy((char *)p, &lo, sizeof(lo));
        memcpy((char *)p + sizeof(lo), &hi, sizeof(hi));
#else
        *p = ktime_now();
#endif
}

/* Ticks from `from` to `to`, 0 if `to` is earlier: two stamps from
 * different cores, or rdtsc run a little out of order around its
 * neighbours, may say so; a wrapped difference would count as the
 * longest time and make the histogram's sum go down, which a scraper
 * takes for a reset. */
static inline uint64_t ktime_since(uint64_t from, uint64_t to) {
        return (int64_t)(to - from) > 0 ? to - from : 0;
}

/* The tick rate and the bucket bounds in ticks, fixed at engine start. */
struct ktime_clock {
        double ns_per_tick;
        /* NULL, or why the times may be off (logged once at start): the
         * counter is not one Linux keeps in step across cores at a fixed
         * rate, or its rate could not be measured. */
        const char *doubt;
        /* bounds[i] = hist_bounds_ns[i] in ticks (rounded down, so a
         * duration of at most bounds[i] ticks is at most bound i in ns);
         * bounds[HBG_HIST_BOUNDS] = UINT64_MAX. */
        uint64_t bounds[HBG_HIST_BOUNDS + 1];
        /* The bucket of the smallest duration of each binary order of
         * magnitude: first[k] is the first bound >= 2^k ticks. Bounds grow
         * by at least 2 from one to the next, so a duration in [2^k,
         * 2^(k+1)) is in bucket first[k] or the one after. */
        uint8_t first[64];
};

/* One histogram in ticks (histogram.h's rules: one writer, relaxed). */
struct ktime_hist {
        _Atomic uint64_t buckets[HBG_HIST_BUCKETS];
        _Atomic uint64_t sum_ticks;
};

/* One kernel's times on one thread. A task counts once, under the kernel
 * of its first active lane (the one a failure names unless another
 * lane's failed); tasks run = the run histogram's count. */
struct ktime_kernel {
        struct ktime_hist run;
        struct ktime_hist wait;
        _Atomic uint64_t failures;
};

/* Fill c: the tick rate is measured once per process, the first time
 * (5 ms, sleeping), and kept. */
void ktime_calibrate(struct ktime_clock *c);

/* Bucket of a duration d in ticks: its highest set bit, a table look-up
 * and one comparison. */
static inline uint64_t ktime_bucket(const struct ktime_clock *c, uint64_t d) {
        uint64_t k;
#if KTIME_CYCLES
        __asm__("bsrq %1, %0" : "=r"(k) : "r"(d | 1));
#else
        k = (uint64_t)(__builtin_clzll(d | 1) ^ 63);
#endif
        uint64_t b = c->first[k];
        return b + (d > c->bounds[b]);
}

/* *v += n by v's one writer (histogram.h's rule). On x86-64 one add to
 * memory: not a locked read-modify-write (no other writer to exclude),
 * and an aligned 8-byte store, which a reader's relaxed load sees whole,
 * old or new. Elsewhere, and where the thread sanitizer must see the
 * access, the relaxed load and store. */
static inline void ktime_add(_Atomic uint64_t *v, uint64_t n) {
#if KTIME_CYCLES && !KTIME_TSAN
        __asm__ __volatile__("addq %1, %0" : "+m"(*(uint64_t *)v) : "er"(n));
#else
        hist_add(v, n);
#endif
}

static inline void ktime_observe(const struct ktime_clock *c, struct ktime_hist *h, uint64_t d) {
        ktime_add(&h->buckets[ktime_bucket(c, d)], 1);
        ktime_add(&h->sum_ticks, d);
}

/* One kernel's figures added up over threads, in nanoseconds. */
struct ktime_snapshot {
        uint64_t tasks;                 /* the histograms' count */
        uint64_t failures;
        struct hbg_hist_snapshot run;
        struct hbg_hist_snapshot wait;
};

/* *acc += k, converted to nanoseconds with c. */
void ktime_read(const struct ktime_clock *c, const struct ktime_kernel *k, struct ktime_snapshot *acc);
/* acc += h (a run or wait histogram), in nanoseconds. */
void ktime_read_hist(const struct ktime_clock *c, const struct ktime_hist *h, struct hbg_hist_snapshot *acc);
