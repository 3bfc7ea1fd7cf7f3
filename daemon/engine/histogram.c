/* SPDX-License-Identifier: MIT */
/* Latency histograms (daemon/engine/histogram.h). */
#include "daemon/engine/histogram.h"

const uint64_t hist_bounds_ns[HBG_HIST_BOUNDS] = {
        100,        250,        500,                                  /* ns */
        1000,       2500,       5000,                                 /* us */
        10000,      25000,      50000,
        100000,     250000,     500000,
        1000000,    2500000,    5000000,                              /* ms */
        10000000,   25000000,   50000000,
        100000000,  250000000,  500000000,
        1000000000, 2500000000, 5000000000, 10000000000,              /* s */
};

void histogram_fold(struct hbg_histogram *into, const struct hbg_histogram *h) {
        for (unsigned i = 0; i < HBG_HIST_BUCKETS; i++)
                hist_add(&into->buckets[i], atomic_load_explicit(&h->buckets[i], memory_order_relaxed));
        hist_add(&into->sum_ns, atomic_load_explicit(&h->sum_ns, memory_order_relaxed));
}

void histogram_read(const struct hbg_histogram *h, struct hbg_hist_snapshot *acc) {
        for (unsigned i = 0; i < HBG_HIST_BUCKETS; i++)
                acc->buckets[i] += atomic_load_explicit(&h->buckets[i], memory_order_relaxed);
        acc->sum_ns += atomic_load_explicit(&h->sum_ns, memory_order_relaxed);
}
