/* SPDX-License-Identifier: MIT */
/* `hbgctl cancel SESSION GRAPH` and `hbgctl kill SESSION` (ctl/admin.c). */
#pragma once

#include "ctl/ctl.h"

int cmd_cancel(const struct ctl_opts *o, const char *session, const char *graph);
int cmd_kill(const struct ctl_opts *o, const char *session);
