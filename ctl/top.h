/* SPDX-License-Identifier: MIT */
/* `hbgctl top` (ctl/top.c): rates from successive status replies. */
#pragma once

#include "ctl/ctl.h"

int cmd_top(const struct ctl_opts *o);
