/* SPDX-License-Identifier: MIT */
/*
 * The housekeeping tick's period: every 100 ms while there is anything to
 * look after (connections, rings still to be freed, a shutdown), every
 * second otherwise, so that an idle hbgd hardly wakes (the watchdog's
 * period is far longer). daemon.c runs the tick; conn.c says when a
 * connection arrives.
 */
#include <sys/timerfd.h>

#include "daemon/daemon_private.h"

#define TICK_BUSY_MS 100
#define TICK_IDLE_MS 1000

void hbgd_tick_set(struct hbgd *d, bool busy) {
        int ms = busy ? TICK_BUSY_MS : TICK_IDLE_MS;
        if (d->tick_ms == ms || d->timer_fd < 0)
                return;
        d->tick_ms = ms;
        struct timespec period = { .tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000 };
        struct itimerspec its = { .it_interval = period, .it_value = period };
        timerfd_settime(d->timer_fd, 0, &its, NULL);
}
