/* SPDX-License-Identifier: MIT */
/* The metrics text (ctl/metrics.c), for `hbgctl metrics` and its exporter. */
#pragma once

#include <stdio.h>

#include "common/procstat.h"
#include "proto/wire.h"

/* One of Prometheus' two text formats. */
struct metrics_format {
        const char *name;              /* --format's value */
        const char *media_type;        /* the HTTP Content-Type */
        bool unit_lines;               /* "# UNIT" lines */
        bool counter_family_total;     /* a counter's (info's) family is named hbg_x_total (_info), as its sample */
        bool eof;                      /* "# EOF" last */
        bool info_type;                /* "# TYPE hbg_x info" (else an info is a gauge) */
};

/* The format named `name`, NULL if none is. */
const struct metrics_format *metrics_format_find(const char *name);
/* The formats' names, separated by sep ("openmetrics, prometheus"). */
void metrics_format_names(FILE *out, const char *sep);
/* --format NAME: 0 and *ret the format, or *ret NULL for "help" (the
 * names printed: nothing more to do); -EINVAL (said) when it is none. */
int metrics_check_format(const char *name, const struct metrics_format **ret);
/* The default: OpenMetrics. */
const struct metrics_format *metrics_format_default(void);
/* The exposition of reply r (a STATUS_METRICS StatusReply, as ctl_status()
 * returns it) in format f; with self (the exporter) also that process's
 * process_* families; the per-uid families (hbg_user_*) only if per_uid.
 * Families an older hbgd does not send are left out. 0, or -EPROTO for a
 * malformed reply (the text written so far is then of no use). */
int metrics_write(FILE *out, const Hbg__StatusReply *r, const struct procstat *self, bool per_uid,
                  const struct metrics_format *f);
/* A STATUS_METRICS reply from hbgd at socket path: 0 and *ret (free it
 * with wire_free()), or a negative errno after a printed message with
 * *ret_fail set (ctl_exit_status() says the exit status). */
struct ctl_failure;
int metrics_fetch(const char *path, Hbg__Envelope **ret, struct ctl_failure *ret_fail);

struct ctl_opts;
/* `hbgctl metrics`: the text on stdout or --output. */
int cmd_metrics(const struct ctl_opts *o);
