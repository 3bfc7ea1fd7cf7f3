/* SPDX-License-Identifier: MIT */
/* hbgd.conf: an INI file (parsed with inih). docs/OPERATIONS.md lists the keys. */
#pragma once

#include <stddef.h>

#include "daemon/daemon.h"

/* Apply the file at `path` on top of *cfg. Returns 0, or -EINVAL with
 * "FILE:LINE: message" in err (the first problem), or -errno when the file
 * cannot be read. Nothing is applied when it fails. */
int hbgd_config_load(struct hbgd_config *cfg, const char *path, char *err, size_t errlen);
