/* SPDX-License-Identifier: MIT */
/* Per-kernel task times (daemon/engine/ktime.h). */
#include "daemon/engine/ktime.h"

#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#if KTIME_CYCLES
#include <cpuid.h>
#endif

/* CLOCK_MONOTONIC_RAW and the counter read back to back, the pair taken
 * whose reads were closest (a preemption between them spoils one). */
static void pair(int64_t *ret_ns, uint64_t *ret_ticks) {
        uint64_t best = UINT64_MAX;
        for (int i = 0; i < 5; i++) {
                struct timespec ts;
                uint64_t a = ktime_now();
                clock_gettime(CLOCK_MONOTONIC_RAW, &ts);
                uint64_t b = ktime_now();
                if (b - a < best) {
                        best = b - a;
                        *ret_ns = (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
                        *ret_ticks = a + (b - a) / 2;
                }
        }
}

static struct ktime_clock calibrated;

#if KTIME_CYCLES
/* Is the TSC one rate on every core whatever their frequency? Linux uses
 * it as its clock only when it also found the cores in step; CPUID says
 * whether it is invariant. Either will do. */
static bool tsc_trusted(void) {
        char name[32] = "";
        FILE *f = fopen("/sys/devices/system/clocksource/clocksource0/current_clocksource", "re");
        if (f) {
                if (!fgets(name, sizeof(name), f))
                        name[0] = 0;
                fclose(f);
        }
        if (strcmp(name, "tsc\n") == 0)
                return true;
        unsigned a, b, c, d;
        return __get_cpuid(0x80000007, &a, &b, &c, &d) && (d & (1u << 8));
}
#endif

static void calibrate(void) {
        struct ktime_clock *c = &calibrated;
        double k = 1.0;
#if KTIME_CYCLES
        /* Two pairs 5 ms apart: the reads of a pair lie within a few
         * hundred ns of each other, so the rate is good to about 1e-4.
         * Linux keeps the TSC in step on every core (it is its clock
         * source where it is usable; hbgd targets such machines). */
        int64_t ns0 = 0, ns1 = 0;
        uint64_t t0 = 0, t1 = 0;
        pair(&ns0, &t0);
        nanosleep(&(struct timespec){ .tv_nsec = 5000000 }, NULL);
        pair(&ns1, &t1);
        if (t1 > t0 && ns1 > ns0)
                k = (double)(ns1 - ns0) / (double)(t1 - t0);
        else
                c->doubt = "the cycle counter's rate could not be measured (times are in cycles)";
        if (!c->doubt && !tsc_trusted())
                c->doubt = "the cycle counter is neither Linux's clock nor invariant (times may be off)";
#else
        (void)pair;
#endif
        c->ns_per_tick = k;
        for (unsigned i = 0; i < HBG_HIST_BOUNDS; i++)
                c->bounds[i] = (uint64_t)((double)hist_bounds_ns[i] / k);
        c->bounds[HBG_HIST_BOUNDS] = UINT64_MAX;
        for (unsigned b = 0, e = 0; e < 64; e++) {
                while (c->bounds[b] < UINT64_C(1) << e)
                        b++;
                c->first[e] = (uint8_t)b;
        }
}

void ktime_calibrate(struct ktime_clock *c) {
        static pthread_once_t once = PTHREAD_ONCE_INIT;
        pthread_once(&once, calibrate);
        *c = calibrated;
}

void ktime_read_hist(const struct ktime_clock *c, const struct ktime_hist *h, struct hbg_hist_snapshot *acc) {
        for (unsigned i = 0; i < HBG_HIST_BUCKETS; i++)
                acc->buckets[i] += atomic_load_explicit(&h->buckets[i], memory_order_relaxed);
        acc->sum_ns += (uint64_t)((double)atomic_load_explicit(&h->sum_ticks, memory_order_relaxed) * c->ns_per_tick);
}

void ktime_read(const struct ktime_clock *c, const struct ktime_kernel *k, struct ktime_snapshot *acc) {
        ktime_read_hist(c, &k->run, &acc->run);
        ktime_read_hist(c, &k->wait, &acc->wait);
        acc->failures += atomic_load_explicit(&k->failures, memory_order_relaxed);
        acc->tasks = 0;
        for (unsigned i = 0; i < HBG_HIST_BUCKETS; i++)
                acc->tasks += acc->run.buckets[i];
}
