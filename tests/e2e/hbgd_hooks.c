/* SPDX-License-Identifier: MIT */
/*
 * hbgd with test hooks: linked into tests/hbgd-hooks with hbgd's own
 * objects (main included) and -Wl,--wrap=hbgd_new,--wrap=io_probe_multishot,
 * --wrap=session_regions_make,
 * so that hbgd's code stays as shipped and reads no test variable itself.
 * The hooks come from the environment of this test build only:
 *
 *   HBGD_TEST_STALL_THREAD=N[:MS]   scheduler thread N wedges MS ms after
 *                                   start (the engine's cfg.test_stall):
 *                                   the watchdog's test, test_e2e_systemd
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
 *                                   test_e2e_daemon
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

#include "daemon/config.h"
#include "daemon/daemon.h"
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

int __wrap_hbgd_new(struct hbgd **ret, const struct hbgd_config *cfg) {
        struct hbgd_config c = *cfg;
        const char *stall = getenv("HBGD_TEST_STALL_THREAD");
        if (stall && *stall) {
                /* "N" or "N:MS" (stall thread N after MS ms). */
                char *end;
                unsigned long n = strtoul(stall, &end, 10);
                unsigned long ms = *end == ':' ? strtoul(end + 1, NULL, 10) : 0;
                c.engine.test_stall = true;
                c.engine.test_stall_thread = n > UINT_MAX ? UINT_MAX : (unsigned)n; /* past the threads: none */
                c.engine.test_stall_after_ms = ms;
        }
        const char *idle_tick = getenv("HBGD_TEST_IDLE_TICK_MS");
        if (idle_tick && *idle_tick) {
                unsigned long ms = strtoul(idle_tick, NULL, 10);
                c.test_idle_tick_ms = ms > INT_MAX ? INT_MAX : (unsigned)ms;
        }
        return __real_hbgd_new(ret, &c);
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
