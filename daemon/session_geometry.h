/* SPDX-License-Identifier: MIT */
/* The geometry of a session a client asks for, under hbgd's config: the
 * one rule for sessions, validate-only requests and what hbgd makes
 * ahead (spare rings and regions). */
#pragma once

#include <stddef.h>

#include "daemon/config.h"
#include "shm/geometry.h"

/* The geometry a client asking for `asked` gets under cfg (0 fields:
 * cfg's session defaults; a flag window not asked for follows an asked
 * task window), within [limits] max_task_window and max_heap_size: 0 and
 * *ret, or -E2BIG (a limit) or the geometry's error, with msg[] for the
 * client. The one rule for sessions, validate-only requests and what
 * hbgd makes ahead. */
int session_geometry(const struct hbgd_config *cfg, const struct hbg_geometry_request *asked,
                     struct hbg_geometry *ret, char *msg, size_t msg_len);
