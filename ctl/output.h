/* SPDX-License-Identifier: MIT */
/* hbgctl's output: tables and JSON (one set of names for both), and the
 * status views (what each kind of status reply shows). */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include <json-c/json.h>

#include "proto/wire.h"

/* --json: print JSON instead of tables. */
extern bool opt_json;
/* --output FILE (NULL: stdout), metrics' and trace's. */
extern const char *opt_output;

/* Whether print_json() printed anything yet. */
bool ctl_json_printed(void);
/* A protobuf message as JSON, field by field (names from the schema). */
json_object *pb_to_json(const ProtobufCMessage *m);
/* Pretty (one object, the status verbs) or one line (top's snapshots). */
void print_json(json_object *o);
void print_json_line(json_object *o);
/* o serialised with json-c's flags, then a newline, to f: valid UTF-8,
 * DEL and C1 controls escaped (common/text.h). */
void write_json(FILE *f, json_object *o, int flags);
/* A status reply as the JSON object of the verb (kind), and its text: the
 * text shows the JSON's names (docs/man/hbgctl.1). */
json_object *status_json(Hbg__StatusKind kind, const Hbg__StatusReply *r);
void status_print_text(Hbg__StatusKind kind, json_object *o);
/* Tables of JSON rows: each column is a key of the rows, its name the
 * header. */
struct column {
        const char *name;       /* JSON key and header */
        int width;              /* at least; negative: left-aligned */
        /* The text of the value, where the generic one does not do (NULL:
         * numbers as they are, doubles with one decimal, booleans yes/no). */
        void (*text)(json_object *v, char *buf, size_t sz);
};
void print_table(FILE *f, const char *indent, const struct column *cols, size_t ncols, json_object *rows);
/* A session's `serving` column: where it is on its way to being served;
 * "-" from an hbgd older than protocol 1.6, which does not say. */
void session_serving_text(json_object *v, char *buf, size_t sz);
/* "name value" lines for the keys of o given (width: of the names). */
void print_labels(FILE *f, json_object *o, const char *const *keys, size_t nkeys);

/* The q-quantile (0 < q < 1) of a histogram's observations, in ns, the
 * way Prometheus' histogram_quantile() estimates it: linear within the
 * bucket the rank falls in (the first from 0), the last bound for the
 * bucket above every bound. buckets[nbounds + 1], not cumulative. -1 for
 * an empty histogram. */
double hist_quantile_ns(const uint64_t *buckets, const uint64_t *bounds_ns, size_t nbounds, double q);
/* A Histogram as JSON: count, sum_ns, p50_ns, p99_ns (null when empty),
 * bounds_ns and buckets (not cumulative); NULL h: an empty one. */
json_object *histogram_json(const Hbg__Histogram *h);
/* The MetricKernel of kernel `id` in r's metrics, NULL if none. */
const Hbg__MetricKernel *metric_kernel_find(const Hbg__Metrics *m, uint32_t id);
