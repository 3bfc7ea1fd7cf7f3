/* SPDX-License-Identifier: MIT */
/* The log's rate limits (daemon/log_limit.c), for log.c; the rest of hbgd
 * uses log.h's hbgd_log_limit_*(), hbgd_ratelimit_allow(),
 * hbgd_log_flush_suppressed() and hbgd_log_set_ratelimit(), defined there. */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "daemon/log.h"

/* May a line about l's session go out now? Both windows must have room:
 * the session's own and its uid's; a line left out is counted in the
 * window that was full. Under the log's lock. */
bool log_limit_allow_locked(struct hbg_log_limit *l, int64_t now);
