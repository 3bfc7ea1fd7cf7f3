/* SPDX-License-Identifier: MIT */
/*
 * hbgd with test hooks: linked into tests/hbgd-hooks with hbgd's own
 * objects (main included) and -Wl,--wrap=hbgd_new,--wrap=io_probe_multishot,
 * --wrap=session_regions_make,--wrap=wakeup_thread_park,
 * --wrap=hbgd_config_idle_tick_ms, so that hbgd's code stays as shipped:
 * it reads no test variable and has no test field or branch. A wrap
 * replaces calls from other objects only: each function wrapped here is
 * called across objects (a thread's park from sched.c, the tick's period
 * from tick.c). The hooks come from the environment of this test build
 * only:
 *
 *   HBGD_TEST_STALL_THREAD=N[:MS]   scheduler thread N wedges at its
 *                                   first park MS ms after start or later
 *                                   (it parks no longer than until then):
 *                                   no heartbeat, not parked, until the
 *                                   engine stops. The watchdog's test,
 *                                   test_e2e_systemd
 *   HBGD_TEST_IO_PROBE=no-multishot the io_uring probe says multishot poll
 *                                   is missing: the epoll fallback's test,
 *                                   test_e2e_daemon
 *   HBGD_TEST_IDLE_TICK_MS=MS       the housekeeping tick's slow period
 *                                   (1000 as shipped): a stopped ring must
 *                                   be closed without it, test_e2e_daemon
 *   HBGD_TEST_SPARE_FAIL=LABEL:MS   the set of regions made ahead as
 *                                   LABEL (ahead-N) fails once, out of
 *                                   fds, its run ending MS ms after it
 *                                   says so on stderr: a session closes
 *                                   while that run is under way,
 *                                   test_e2e_spares
 */
#include <errno.h>
#include <limits.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/clock.h"
#include "daemon/config.h"
#include "daemon/daemon.h"
#include "daemon/engine/engine_state.h"
#include "daemon/engine/sched.h"
#include "daemon/engine/wakeup.h"
#include "daemon/io_probe.h"
#include "daemon/session_regions.h"

int __real_hbgd_new(struct hbgd **ret, const struct hbgd_config *cfg);
int __wrap_hbgd_new(struct hbgd **ret, const struct hbgd_config *cfg);
const char *__real_io_probe_multishot(struct io_uring *ring);
const char *__wrap_io_probe_multishot(struct io_uring *ring);
int __real_session_regions_make(struct session_regions *r, const struct hbg_geometry *g, const char *label,
                                uint64_t first_id, const char **why);
int __wrap_session_regions_make(struct session_regions *r, const struct hbg_geometry *g, const char *label,
                                uint64_t first_id, const char **why);
int __real_wakeup_thread_park(struct sched_thread *t, bool page, uint32_t val, const struct timespec *timeout);
int __wrap_wakeup_thread_park(struct sched_thread *t, bool page, uint32_t val, const struct timespec *timeout);
unsigned __real_hbgd_config_idle_tick_ms(void);
unsigned __wrap_hbgd_config_idle_tick_ms(void);

/* Read from the environment by hbgd_new(), before the engine's threads
 * start (pthread_create orders these writes before their reads). */
static bool stall;
static unsigned stall_thread;
static int64_t stall_at_ms;
static unsigned idle_tick_ms; /* 0: as shipped */

int __wrap_hbgd_new(struct hbgd **ret, const struct hbgd_config *cfg) {
        const char *env = getenv("HBGD_TEST_STALL_THREAD");
        if (env && *env) {
                /* "N" or "N:MS" (stall thread N after MS ms). */
                char *end;
                unsigned long n = strtoul(env, &end, 10);
                unsigned long ms = *end == ':' ? strtoul(end + 1, NULL, 10) : 0;
                stall = true;
                stall_thread = n > UINT_MAX ? UINT_MAX : (unsigned)n; /* past the threads: none */
                stall_at_ms = clock_now_ms() + (int64_t)ms;
        }
        env = getenv("HBGD_TEST_IDLE_TICK_MS");
        if (env && *env) {
                unsigned long ms = strtoul(env, NULL, 10);
                idle_tick_ms = ms > INT_MAX ? INT_MAX : (unsigned)ms;
        }
        return __real_hbgd_new(ret, cfg);
}

/* The wedged thread: until the stall is due it parks no longer than
 * until then (as any thread, shown parked); at its first park after, it
 * sleeps here instead, outside the park proper: its heartbeat stops and
 * it is not shown parked, a stuck thread to the watchdog. It stays
 * counted idle (park() counted it): a wake meant for it is lost, and work
 * left to its clusters waits, as for a thread stuck for real. The
 * engine's stop ends it (engine_free() joins it). */
int __wrap_wakeup_thread_park(struct sched_thread *t, bool page, uint32_t val, const struct timespec *timeout) {
        if (!stall || t->index != stall_thread)
                return __real_wakeup_thread_park(t, page, val, timeout);
        int64_t left = stall_at_ms - clock_now_ms();
        if (left > 0) {
                struct timespec until = { .tv_sec = (time_t)(left / 1000), .tv_nsec = (long)(left % 1000) * 1000000 };
                if (!timeout || timeout->tv_sec > until.tv_sec ||
                    (timeout->tv_sec == until.tv_sec && timeout->tv_nsec > until.tv_nsec))
                        timeout = &until;
                return __real_wakeup_thread_park(t, page, val, timeout);
        }
        fprintf(stderr, "hbgd-hooks: scheduler thread %u wedged on purpose (HBGD_TEST_STALL_THREAD)\n", t->index);
        struct timespec tick = { .tv_nsec = 10 * 1000000 };
        while (!atomic_load_explicit(&t->engine->stop, memory_order_relaxed))
                nanosleep(&tick, NULL);
        return 0;
}

unsigned __wrap_hbgd_config_idle_tick_ms(void) {
        return idle_tick_ms ? idle_tick_ms : __real_hbgd_config_idle_tick_ms();
}

const char *__wrap_io_probe_multishot(struct io_uring *ring) {
        const char *force = getenv("HBGD_TEST_IO_PROBE");
        if (force && strcmp(force, "no-multishot") == 0)
                return "io_uring lacks multishot poll (HBGD_TEST_IO_PROBE); using epoll";
        return __real_io_probe_multishot(ring);
}

int __wrap_session_regions_make(struct session_regions *r, const struct hbg_geometry *g, const char *label,
                                uint64_t first_id, const char **why) {
        static atomic_bool failed_once;
        const char *fail = getenv("HBGD_TEST_SPARE_FAIL");
        const char *colon = fail ? strchr(fail, ':') : NULL;
        if (colon && strlen(label) == (size_t)(colon - fail) && strncmp(label, fail, strlen(label)) == 0 &&
            !atomic_exchange(&failed_once, true)) {
                unsigned long ms = strtoul(colon + 1, NULL, 10);
                fprintf(stderr, "hbgd-hooks: set %s made ahead fails (out of fds); its run ends in %lu ms\n", label, ms);
                struct timespec ts = { .tv_sec = (time_t)(ms / 1000), .tv_nsec = (long)(ms % 1000) * 1000000 };
                nanosleep(&ts, NULL);
                *why = "out of fds (HBGD_TEST_SPARE_FAIL)";
                return -EMFILE;
        }
        return __real_session_regions_make(r, g, label, first_id, why);
}
