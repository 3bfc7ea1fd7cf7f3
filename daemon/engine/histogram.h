/* SPDX-License-Identifier: MIT */
/*
 * Latency histograms for hbgd's metrics (docs/OPERATIONS.md, "Metrics"):
 * fixed bucket bounds in nanoseconds, the same for every histogram, so
 * that histograms add up bucket by bucket and the bounds travel once.
 *
 * A histogram has ONE writer at a time (a scheduler thread's own, or a
 * ring's, written under its retire lock) and any number of readers: the
 * writer adds with a relaxed load and store (no read-modify-write, no
 * shared cache line per observation), readers load relaxed. A reader may
 * see a bucket and the sum of different moments; every value it sees only
 * grows, and the count is the sum of the buckets it read, so what it
 * reports is always a consistent histogram.
 */
#pragma once

#include <stdatomic.h>
#include <stdint.h>

/* Upper bounds: 1, 2.5, 5 per decade from 100 ns to 10 s; one more bucket
 * holds what lies above the last. */
#define HBG_HIST_BOUNDS 25u
#define HBG_HIST_BUCKETS (HBG_HIST_BOUNDS + 1u)

extern const uint64_t hist_bounds_ns[HBG_HIST_BOUNDS];

struct hbg_histogram {
        _Atomic uint64_t buckets[HBG_HIST_BUCKETS];
        _Atomic uint64_t sum_ns;
};

/* A plain copy, as reported. */
struct hbg_hist_snapshot {
        uint64_t buckets[HBG_HIST_BUCKETS];
        uint64_t sum_ns;
};

/* The bucket of a value: the first bound >= ns (values equal to a bound
 * are in its bucket, as OpenMetrics' "le" says), else the last bucket. */
static inline unsigned hist_bucket(uint64_t ns) {
        unsigned lo = 0, hi = HBG_HIST_BOUNDS;
        while (lo < hi) {
                unsigned mid = (lo + hi) / 2;
                if (ns <= hist_bounds_ns[mid])
                        hi = mid;
                else
                        lo = mid + 1;
        }
        return lo;
}

static inline void hist_add(_Atomic uint64_t *v, uint64_t n) {
        /* The one writer's relaxed load and store (see above). */
        atomic_store_explicit(v, atomic_load_explicit(v, memory_order_relaxed) + n, memory_order_relaxed);
}

/* One observation, by the histogram's one writer. */
static inline void hist_observe(struct hbg_histogram *h, uint64_t ns) {
        hist_add(&h->buckets[hist_bucket(ns)], 1);
        hist_add(&h->sum_ns, ns);
}

/* *into += h (into's one writer calls it). */
void histogram_fold(struct hbg_histogram *into, const struct hbg_histogram *h);
/* *acc += h, for a reader adding up several histograms. */
void histogram_read(const struct hbg_histogram *h, struct hbg_hist_snapshot *acc);
