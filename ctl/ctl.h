/* SPDX-License-Identifier: MIT */
/*
 * hbgctl's modules, each calling only those below it (one rank a line in
 * tests/scripts/layers.txt, which check-layers.sh enforces), each with
 * its own header (this one holds what the verbs share: struct ctl_opts):
 *   hbgctl.c      options, the verb table, help; a verb's exit status
 *                 goes out as it is
 *   top.c         `top`: rates from successive status replies (top.h)
 *   run.c         `run FILE`: compile a graph file and run it via
 *                 libhbgclient                              (run.h)
 *   run_dry.c     run --dry-run and --dot: without a session (run_dry.h)
 *   run_report.c  run's failures, on stderr and in JSON    (run_report.h)
 *   status.c      the status verbs: one request to hbgd, printed; wait
 *                                                          (status.h)
 *   exporter.c    `metrics --listen`: metrics.c's text over HTTP
 *                                                          (exporter.h)
 *   metrics.c     `metrics`: Prometheus' text formats made from a status
 *                 reply                                    (metrics.h)
 *   admin.c       `cancel` and `kill`: one admin request each (admin.h)
 *   trace.c       `trace`: the task timeline, Chrome JSON  (trace.h)
 *   trace_svg.c   trace --svg: the timeline drawn as SVG   (trace_svg.h)
 *   progress.c    run --progress: the progress line        (progress.h)
 *   dot.c         run --dot: the graph in Graphviz form    (dot.h)
 *   graph_file.c  the graph-file compiler (docs/GRAPH_FILES.md) (graph_file.h)
 *   graph_tensors.c  its tensors: declared, and used through ranges alone
 *                                                          (graph_tensors.h)
 *   graph_read.c  its values: paths, errors, numbers, tensor references
 *                                                          (graph_read.h)
 *   output.c      tables and JSON (one set of names for both), the
 *                 status views                             (output.h)
 *   daemon_conn.c connecting to hbgd and one request/reply; the exit
 *                 status of a failure                      (daemon_conn.h)
 *   error.c       the failure's message, for stderr and --json (error.h)
 * The verbs (cmd_*) return exit statuses (docs/man/hbgctl.1); every
 * module below them returns 0 or a negative errno.
 */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "proto/wire.h"

/* The options of one invocation (hbgctl.c's table says which verb takes
 * which). */
struct ctl_opts {
        const char *socket;     /* resolved: --socket, $HBG_SOCKET or the default */
        bool progress;          /* run --progress */
        bool dry_run;           /* run --dry-run */
        const char *dot;        /* run --dot FILE ("-": stdout) */
        uint64_t heap;          /* run --heap BYTES (0: hbgd's default) */
        uint64_t window;        /* run --window TASKS (0: hbgd's default) */
        bool batch;             /* top -b */
        long iterations;        /* top -n (-1: until stopped) */
        double delay_s;         /* top -d */
        double timeout_s;       /* wait --timeout */
        const char *metrics_format; /* metrics --format (NULL: OpenMetrics) */
        const char *listen;     /* metrics --listen ADDR:PORT: the exporter */
        bool per_uid;           /* metrics --per-uid: the exporter serves hbg_user_* */
        uint32_t trace_duration_ms; /* trace --duration */
        uint64_t trace_session; /* trace --session (0: every session the user may trace) */
        const char *trace_svg;  /* trace --svg FILE */
        const char *const *args; /* the command's arguments (verbs of more than one) */
};
