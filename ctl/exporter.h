/* SPDX-License-Identifier: MIT */
/* `hbgctl metrics --listen`: hbgd's metrics served over HTTP (ctl/exporter.c). */
#pragma once

struct ctl_opts;

/* Serve GET /metrics on o->listen ("ADDR:PORT", "[ADDR6]:PORT") until
 * SIGTERM or SIGINT, each scrape asking hbgd at o->socket afresh; the
 * rows per uid (hbg_user_*) only if o->per_uid. Returns the exit status:
 * 0 after a signal (or --format=help), EXIT_USAGE for a bad address or
 * format, EXIT_FAIL when it cannot listen. */
int cmd_metrics_listen(const struct ctl_opts *o);
