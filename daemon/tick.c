/* SPDX-License-Identifier: MIT */
/*
 * The housekeeping tick's period: every 100 ms while anything timed or
 * moving needs looking after (daemon.c's on_timer() decides what), every
 * second otherwise, open but idle sessions included, so that an idle hbgd
 * hardly wakes (the watchdog's period is far longer). Code that starts
 * such a state between ticks sets the quick period itself. And the
 * quicker looks for rings of closed sessions a scheduler thread still
 * held (hbgd_collect_soon()).
 */
#include <sys/timerfd.h>

#include "daemon/config.h"
#include "daemon/daemon_private.h"
#include "daemon/tick.h"
#include "daemon/spare_rings.h"
#include "common/clock.h"

#define TICK_BUSY_MS 100

void hbgd_tick_set(struct hbgd *d, bool busy) {
        int ms = busy ? TICK_BUSY_MS : (int)hbgd_config_idle_tick_ms();
        if (d->tick_ms == ms || d->timer_fd < 0)
                return;
        d->tick_ms = ms;
        struct timespec period = { .tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000 };
        struct itimerspec its = { .it_interval = period, .it_value = period };
        timerfd_settime(d->timer_fd, 0, &its, NULL);
}

unsigned hbgd_collect(struct hbgd *d) {
        uint64_t charged = d->acct.memory;
        unsigned held = engine_collect(d->engine);
        if (d->acct.memory < charged) {
                spare_rings_want(d);    /* memory given back: room for a spare */
                spare_regions_retry(d); /* and fds: a failed fill may pass now */
        }
        return held;
}

void hbgd_collect_soon(struct hbgd *d) {
        d->collect_wait_ms = 1;
        d->collect_at_ms = clock_now_ms() + 1;
}

#define COLLECT_WAIT_MAX_MS 64

/* hbgd_collect_soon()'s look, when due; the loop's timeout until the
 * next one (the tick takes over past COLLECT_WAIT_MAX_MS). */
int hbgd_collect_due(struct hbgd *d) {
        if (!d->collect_wait_ms)
                return 1000;
        int64_t now = clock_now_ms();
        if (now >= d->collect_at_ms) {
                unsigned held = hbgd_collect(d);
                if (held == 0 || d->collect_wait_ms >= COLLECT_WAIT_MAX_MS) {
                        d->collect_wait_ms = 0;
                        if (held)
                                hbgd_tick_set(d, true); /* the tick takes over, quick */
                        return 1000;
                }
                d->collect_wait_ms *= 2;
                d->collect_at_ms = now + d->collect_wait_ms;
        }
        return (int)(d->collect_at_ms - now);
}
