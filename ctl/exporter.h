/* SPDX-License-Identifier: MIT */
/* `hbgctl metrics --listen`: hbgd's metrics served over HTTP (ctl/exporter.c). */
#pragma once

#include <stdbool.h>

/* Serve GET /metrics on listen ("ADDR:PORT", "[ADDR6]:PORT") until SIGTERM
 * or SIGINT, each scrape asking hbgd at socket path afresh; the rows per
 * uid (hbg_user_*) only if per_uid. Returns the
 * exit status: 0 after a signal, EXIT_USAGE for a bad address, EXIT_FAIL
 * when it cannot listen. */
int exporter_run(const char *path, const char *listen, bool per_uid);
