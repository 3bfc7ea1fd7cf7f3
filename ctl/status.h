/* SPDX-License-Identifier: MIT */
/* The status verbs and `wait` (ctl/status.c). */
#pragma once

#include "ctl/ctl.h"

int cmd_status(const struct ctl_opts *o, Hbg__StatusKind kind);
/* Wait until hbgd answers a status request (o->timeout_s for the socket
 * to take connections): 0, EXIT_NOT_RUNNING after the timeout, or the
 * status request's failure. */
int cmd_wait(const struct ctl_opts *o);
