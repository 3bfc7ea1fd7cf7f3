/* SPDX-License-Identifier: MIT */
/*
 * sd_notify-style messages to $NOTIFY_SOCKET (READY=1, STATUS=, WATCHDOG=1,
 * ...), sent on hbgd's own non-blocking datagram socket: a receiver that
 * stops reading makes messages drop, never the io thread block.
 */
#pragma once

void hbgd_notify(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
