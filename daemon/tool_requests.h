/* SPDX-License-Identifier: MIT */
/* hbgctl's requests that need no session of their own: cancel and kill
 * (admin requests), a dry run's validation, the task timeline
 * (daemon/tool_requests.c). conn.c's table dispatches to them. */
#pragma once

#include "daemon/conn_reply.h"

struct conn;

struct verdict tool_cancel(struct conn *c, const Hbg__Envelope *env, const int *fds);
struct verdict tool_kill(struct conn *c, const Hbg__Envelope *env, const int *fds);
struct verdict tool_validate(struct conn *c, const Hbg__Envelope *env, const int *fds);
struct verdict tool_trace(struct conn *c, const Hbg__Envelope *env, const int *fds);
