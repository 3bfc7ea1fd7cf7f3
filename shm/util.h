/* SPDX-License-Identifier: MIT */
/*
 * Small helpers every part of hbg uses (daemon, library, tools, tests):
 * the monotonic clock and the spin-wait hint. Header only.
 */
#pragma once

#include <stdint.h>
#include <time.h>

/* CLOCK_MONOTONIC in nanoseconds / milliseconds (never fails for it). */
static inline int64_t clock_now_ns(void) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static inline int64_t clock_now_ms(void) {
        return clock_now_ns() / 1000000;
}

/* Tell the core we are spinning (x86 pause, arm yield). */
static inline void cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
        __builtin_ia32_pause();
#elif defined(__aarch64__)
        __asm__ __volatile__("yield" ::: "memory");
#endif
}
