/* SPDX-License-Identifier: MIT */
/*
 * hbgctl's output. Every verb builds one JSON object; --json prints it,
 * otherwise its text is printed from the same object, so a column's
 * header and a label are the JSON key they show (docs/man/hbgctl.1).
 * Errors go to stderr and, with --json, become {"error": {...}}.
 *
 * Strings from hbgd may be a client's (a session's name) or quote one:
 * text shows them with controls and stray bytes escaped, JSON as valid
 * UTF-8 with DEL and C1 controls escaped too (common/text.h).
 */
#include <errno.h>
#include <inttypes.h>
#include <pwd.h>
#include <stdio.h>
#include <string.h>

#include "ctl/output.h"

#include "common/text.h"
#include "ctl/error.h"

bool opt_json;
const char *opt_output;

static bool json_printed;

bool ctl_json_printed(void) {
        return json_printed;
}

/* json-c escapes C0 controls, quotes and backslashes in strings and
 * writes every other byte as it is: the rest is done here. */
void write_json(FILE *f, json_object *o, int flags) {
        const char *s = json_object_to_json_string_ext(o, flags);
        text_write(f, s, strlen(s), TEXT_JSON);
        fputc('\n', f);
}

void print_json(json_object *o) {
        json_printed = true;
        write_json(stdout, o, JSON_C_TO_STRING_PRETTY | JSON_C_TO_STRING_SPACED | JSON_C_TO_STRING_NOSLASHESCAPE);
}

void print_json_line(json_object *o) {
        json_printed = true;
        write_json(stdout, o, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE);
}

/* ------------------------------------------------------------ protobuf to JSON */

static json_object *pb_value(const ProtobufCFieldDescriptor *f, const void *p) {
        switch (f->type) {
        case PROTOBUF_C_TYPE_INT32:
        case PROTOBUF_C_TYPE_SINT32:
        case PROTOBUF_C_TYPE_SFIXED32:
                return json_object_new_int(*(const int32_t *)p);
        case PROTOBUF_C_TYPE_UINT32:
        case PROTOBUF_C_TYPE_FIXED32:
                return json_object_new_int64(*(const uint32_t *)p);
        case PROTOBUF_C_TYPE_INT64:
        case PROTOBUF_C_TYPE_SINT64:
        case PROTOBUF_C_TYPE_SFIXED64:
                return json_object_new_int64(*(const int64_t *)p);
        case PROTOBUF_C_TYPE_UINT64:
        case PROTOBUF_C_TYPE_FIXED64:
                return json_object_new_uint64(*(const uint64_t *)p);
        case PROTOBUF_C_TYPE_BOOL:
                return json_object_new_boolean(*(const protobuf_c_boolean *)p);
        case PROTOBUF_C_TYPE_FLOAT:
                return json_object_new_double(*(const float *)p);
        case PROTOBUF_C_TYPE_DOUBLE:
                return json_object_new_double(*(const double *)p);
        case PROTOBUF_C_TYPE_ENUM: {
                const ProtobufCEnumValue *v = protobuf_c_enum_descriptor_get_value(
                        f->descriptor, *(const int *)p);
                return v ? json_object_new_string(v->name) : json_object_new_int(*(const int *)p);
        }
        case PROTOBUF_C_TYPE_STRING: {
                const char *s = *(char *const *)p;
                return json_object_new_string(s ? s : "");
        }
        case PROTOBUF_C_TYPE_MESSAGE: {
                const ProtobufCMessage *sub = *(ProtobufCMessage *const *)p;
                return sub ? pb_to_json(sub) : NULL;
        }
        default:
                return NULL;
        }
}

static size_t pb_size(const ProtobufCFieldDescriptor *f) {
        switch (f->type) {
        case PROTOBUF_C_TYPE_INT64:
        case PROTOBUF_C_TYPE_SINT64:
        case PROTOBUF_C_TYPE_SFIXED64:
        case PROTOBUF_C_TYPE_UINT64:
        case PROTOBUF_C_TYPE_FIXED64:
        case PROTOBUF_C_TYPE_DOUBLE:
                return 8;
        case PROTOBUF_C_TYPE_BOOL:
                return sizeof(protobuf_c_boolean);
        case PROTOBUF_C_TYPE_ENUM:
                return sizeof(int);
        case PROTOBUF_C_TYPE_STRING:
        case PROTOBUF_C_TYPE_MESSAGE:
        case PROTOBUF_C_TYPE_BYTES:
                return sizeof(void *);
        default:
                return 4;
        }
}

json_object *pb_to_json(const ProtobufCMessage *m) {
        json_object *o = json_object_new_object();
        const ProtobufCMessageDescriptor *d = m->descriptor;
        for (unsigned i = 0; i < d->n_fields; i++) {
                const ProtobufCFieldDescriptor *f = &d->fields[i];
                const char *base = (const char *)m;
                if (f->label == PROTOBUF_C_LABEL_REPEATED) {
                        size_t n = *(const size_t *)(base + f->quantifier_offset);
                        const char *arr = *(char *const *)(base + f->offset);
                        json_object *a = json_object_new_array();
                        for (size_t j = 0; j < n; j++) {
                                json_object *v = pb_value(f, arr + j * pb_size(f));
                                if (v)
                                        json_object_array_add(a, v);
                        }
                        json_object_object_add(o, f->name, a);
                } else {
                        json_object *v = pb_value(f, base + f->offset);
                        if (v)
                                json_object_object_add(o, f->name, v);
                }
        }
        return o;
}

/* ------------------------------------------------------------ text from JSON */

static void value_text(json_object *v, char *buf, size_t sz) {
        switch (json_object_get_type(v)) {
        case json_type_null:
                snprintf(buf, sz, "-");
                break;
        case json_type_boolean:
                snprintf(buf, sz, "%s", json_object_get_boolean(v) ? "yes" : "no");
                break;
        case json_type_double:
                snprintf(buf, sz, "%.1f", json_object_get_double(v));
                break;
        default:
                snprintf(buf, sz, "%s", json_object_get_string(v));
                break;
        }
}

static int col_width(const struct column *c) {
        int w = c->width < 0 ? -c->width : c->width;
        int n = (int)strlen(c->name);
        return w > n ? w : n;
}

/* Row row's cell of column c as shown (escaped), into text. */
static void cell_text(const struct column *c, json_object *row, char *text, size_t len) {
        json_object *v = NULL;
        char buf[512];
        if (row)
                json_object_object_get_ex(row, c->name, &v);
        if (!row)
                snprintf(buf, sizeof(buf), "%s", c->name);
        else if (c->text)
                c->text(v, buf, sizeof(buf));
        else
                value_text(v, buf, sizeof(buf));
        ctl_shown(buf, text, len);
}

static void print_cell(FILE *f, const struct column *c, int w, const char *text, bool last) {
        if (last && c->width <= 0)
                fprintf(f, "%s", text);
        else if (c->width < 0)
                fprintf(f, "%-*s", w, text);
        else
                fprintf(f, "%*s", w, text);
        fputs(last ? "\n" : " ", f);
}

/* Each column as wide as its widest cell, at least its width: a long
 * value (a module's path) widens its column instead of shifting the
 * rest of its row. */
void print_table(FILE *f, const char *indent, const struct column *cols, size_t ncols, json_object *rows) {
        enum { MAX_COLS = 32 };
        int widths[MAX_COLS];
        char text[4 * 512];
        size_t n = json_object_array_length(rows);
        if (ncols > MAX_COLS)
                ncols = MAX_COLS;
        for (size_t c = 0; c < ncols; c++) {
                widths[c] = col_width(&cols[c]);
                for (size_t i = 0; i < n && c + 1 < ncols; i++) {
                        cell_text(&cols[c], json_object_array_get_idx(rows, i), text, sizeof(text));
                        int w = (int)strlen(text);
                        widths[c] = w > widths[c] ? w : widths[c];
                }
        }
        for (size_t i = 0; i <= n; i++) {
                json_object *row = i ? json_object_array_get_idx(rows, i - 1) : NULL;
                fputs(indent, f);
                for (size_t c = 0; c < ncols; c++) {
                        cell_text(&cols[c], row, text, sizeof(text));
                        print_cell(f, &cols[c], widths[c], text, c + 1 == ncols);
                }
        }
}

void print_labels(FILE *f, json_object *o, const char *const *keys, size_t nkeys) {
        int w = 0;
        for (size_t i = 0; i < nkeys; i++)
                w = (int)strlen(keys[i]) > w ? (int)strlen(keys[i]) : w;
        for (size_t i = 0; i < nkeys; i++) {
                json_object *v = NULL;
                char buf[512];
                if (!json_object_object_get_ex(o, keys[i], &v))
                        continue;
                value_text(v, buf, sizeof(buf));
                char shown[4 * sizeof(buf)];
                fprintf(f, "%-*s %s\n", w, keys[i], ctl_shown(buf, shown, sizeof(shown)));
        }
}

/* ------------------------------------------------------------ the status views */

/* o with key `from` renamed `to`, in its place (a new object). */
static json_object *renamed(json_object *o, const char *from, const char *to) {
        json_object *n = json_object_new_object();
        json_object_object_foreach(o, k, v) {
                json_object_object_add(n, strcmp(k, from) == 0 ? to : k, json_object_get(v));
        }
        json_object_put(o);
        return n;
}

/* Rows of messages as JSON, the field `from` named `to` (NULL: none). */
static json_object *rows_json(void **msgs, size_t n, const char *from, const char *to) {
        json_object *a = json_object_new_array();
        for (size_t i = 0; i < n; i++) {
                json_object *o = pb_to_json(msgs[i]);
                json_object_array_add(a, from ? renamed(o, from, to) : o);
        }
        return a;
}

static json_object *daemon_json(const Hbg__StatusReply *r) {
        return r->daemon ? pb_to_json(&r->daemon->base) : json_object_new_object();
}

/* The user name of uid, as ps shows it: the uid in decimal when it has
 * no name here. */
static json_object *user_json(uint32_t uid) {
        struct passwd pw, *found = NULL;
        char buf[4096], num[16];
        if (getpwuid_r((uid_t)uid, &pw, buf, sizeof(buf), &found) != 0 || !found) {
                snprintf(num, sizeof(num), "%" PRIu32, uid);
                return json_object_new_string(num);
        }
        return json_object_new_string(found->pw_name);
}

/* Each session, and its uid's user name beside the number ("user"). */
static json_object *sessions_json(const Hbg__StatusReply *r) {
        json_object *a = rows_json((void **)r->sessions, r->n_sessions, "session_id", "session");
        for (size_t i = 0; i < r->n_sessions; i++)
                json_object_object_add(json_object_array_get_idx(a, i), "user", user_json(r->sessions[i]->uid));
        return a;
}

static json_object *graphs_json(const Hbg__StatusReply *r) {
        return rows_json((void **)r->graphs, r->n_graphs, "session_id", "session");
}

static json_object *threads_json(const Hbg__StatusReply *r) {
        return rows_json((void **)r->threads, r->n_threads, "index", "thread");
}

double hist_quantile_ns(const uint64_t *buckets, const uint64_t *bounds_ns, size_t nbounds, double q) {
        uint64_t count = 0, below = 0;
        for (size_t i = 0; i <= nbounds; i++)
                count += buckets[i];
        if (!count)
                return -1;
        double rank = q * (double)count;
        for (size_t i = 0; i <= nbounds; i++) {
                if (!buckets[i] || (double)(below + buckets[i]) < rank) {
                        below += buckets[i];
                        continue;
                }
                if (i == nbounds)
                        return nbounds ? (double)bounds_ns[nbounds - 1] : 0;
                double lo = i ? (double)bounds_ns[i - 1] : 0, hi = (double)bounds_ns[i];
                return lo + (hi - lo) * (rank - (double)below) / (double)buckets[i];
        }
        return nbounds ? (double)bounds_ns[nbounds - 1] : 0;
}

static json_object *quantile_json(const Hbg__Histogram *h, double q) {
        double v = h ? hist_quantile_ns(h->buckets, h->bounds_ns, h->n_bounds_ns, q) : -1;
        return v < 0 ? NULL : json_object_new_uint64((uint64_t)(v + 0.5));
}

json_object *histogram_json(const Hbg__Histogram *h) {
        /* A malformed one (hbgd sends one more bucket than bounds) as empty. */
        if (h && h->n_buckets != h->n_bounds_ns + 1)
                h = NULL;
        json_object *o = json_object_new_object(), *bounds = json_object_new_array(),
                    *buckets = json_object_new_array();
        uint64_t count = 0;
        for (size_t i = 0; h && i < h->n_buckets; i++) {
                count += h->buckets[i];
                json_object_array_add(buckets, json_object_new_uint64(h->buckets[i]));
                if (i < h->n_bounds_ns)
                        json_object_array_add(bounds, json_object_new_uint64(h->bounds_ns[i]));
        }
        json_object_object_add(o, "count", json_object_new_uint64(count));
        json_object_object_add(o, "sum_ns", json_object_new_uint64(h ? h->sum_ns : 0));
        json_object_object_add(o, "p50_ns", quantile_json(h, 0.5));
        json_object_object_add(o, "p99_ns", quantile_json(h, 0.99));
        json_object_object_add(o, "bounds_ns", bounds);
        json_object_object_add(o, "buckets", buckets);
        return o;
}

const Hbg__MetricKernel *metric_kernel_find(const Hbg__Metrics *m, uint32_t id) {
        for (size_t i = 0; m && i < m->n_kernels; i++)
                if (m->kernels[i]->id == id)
                        return m->kernels[i];
        return NULL;
}

/* Each kernel's module, "built-in" for hbgd's own (and for every kernel
 * of an hbgd older than modules, which sends none), and what it ran
 * since hbgd started: tasks, failures, run and wait histograms (0 and
 * empty for a kernel that ran nothing, and from an hbgd older than
 * per-kernel times). */
static json_object *kernels_json(const Hbg__StatusReply *r) {
        json_object *a = rows_json((void **)r->kernels, r->n_kernels, NULL, NULL);
        for (size_t i = 0; a && i < json_object_array_length(a); i++) {
                json_object *k = json_object_array_get_idx(a, i), *m = NULL;
                if (!json_object_object_get_ex(k, "module", &m) || !json_object_get_string_len(m))
                        json_object_object_add(k, "module", json_object_new_string("built-in"));
                const Hbg__MetricKernel *mk = metric_kernel_find(r->metrics, r->kernels[i]->id);
                json_object_object_add(k, "tasks", json_object_new_uint64(mk ? mk->tasks : 0));
                json_object_object_add(k, "failures", json_object_new_uint64(mk ? mk->failures : 0));
                json_object_object_add(k, "run", histogram_json(mk ? mk->run : NULL));
                json_object_object_add(k, "wait", histogram_json(mk ? mk->wait : NULL));
        }
        return a;
}

static void daemon_text(json_object *o) {
        static const char *const labels[] = { "threads",  "clusters",        "completion_mode",
                                              "io_backend", "sessions",      "tasks_completed",
                                              "graphs_retired", "graphs_failed", "slow_jobs",
                                              "spare_rings", "spare_ring_bytes", "spare_rings_taken",
                                              "spare_regions", "spare_regions_taken", "sessions_closing",
                                              "sessions_set_up_inline",
                                              "log_lines_dropped" };
        json_object *v;
        const char *version = json_object_object_get_ex(o, "version", &v) ? json_object_get_string(v) : "?";
        uint64_t pid = json_object_object_get_ex(o, "pid", &v) ? json_object_get_uint64(v) : 0;
        uint64_t up = json_object_object_get_ex(o, "uptime_ms", &v) ? json_object_get_uint64(v) : 0;
        char shown[256];
        printf("hbgd %s, pid %" PRIu64 ", up %" PRIu64 " s\n", ctl_shown(version, shown, sizeof(shown)), pid,
               up / 1000);
        print_labels(stdout, o, labels, sizeof(labels) / sizeof(labels[0]));
}

/* The session's error latch: its errno's name, "-" for none. */
static void error_text(json_object *v, char *buf, size_t sz) {
        int code = v ? json_object_get_int(v) : 0;
        const char *name = code < 0 ? strerrorname_np(-code) : NULL;
        if (!code)
                snprintf(buf, sz, "-");
        else if (name)
                snprintf(buf, sz, "%s", name);
        else
                snprintf(buf, sz, "%d", code);
}

void session_serving_text(json_object *v, char *buf, size_t sz) {
        const char *serving = v ? json_object_get_string(v) : NULL;
        snprintf(buf, sz, "%s", serving && *serving ? serving : "-");
}

static const struct column session_cols[] = {
        { "session", -8, NULL },              { "pid", -8, NULL },
        { "user", -10, NULL },                { "name", -24, NULL },
        { "submitted", 12, NULL },            { "classified", 12, NULL },
        { "dispatched", 12, NULL },           { "watermark", 12, NULL },
        { "completed", 12, NULL },            { "failed", 8, NULL },
        { "graphs_retired", 0, NULL },        { "graphs_failed", 0, NULL },
        { "failsafe_pushes", 0, NULL },       { "failsafe_retries", 0, NULL },
        { "watermark_advances", 0, NULL },    { "watermark_cas_failures", 0, NULL },
        { "error", -8, error_text },          { "serving", -10, session_serving_text },
};

static void sessions_text(json_object *a) {
        print_table(stdout, "", session_cols, sizeof(session_cols) / sizeof(session_cols[0]), a);
}

static const struct column graph_cols[] = {
        { "session", -8, NULL },       { "graphs_submitted", 0, NULL }, { "graphs_retired", 0, NULL },
        { "graphs_failed", 0, NULL },  { "watermark", 12, NULL },
};

static const struct column live_cols[] = {
        { "graph", -8, NULL },      { "graph_id", -8, NULL }, { "state", -8, NULL },
        { "tasks_done", 12, NULL }, { "tasks", 12, NULL },    { "age_ms", 10, NULL },
};

/* Each session's counters, its live graphs below it. */
static void graphs_text(json_object *a) {
        size_t ng = sizeof(graph_cols) / sizeof(graph_cols[0]), nl = sizeof(live_cols) / sizeof(live_cols[0]);
        if (json_object_array_length(a) == 0)
                print_table(stdout, "", graph_cols, ng, a);   /* the header: no sessions */
        for (size_t i = 0; i < json_object_array_length(a); i++) {
                json_object *g = json_object_array_get_idx(a, i), *one = json_object_new_array(), *live, *v;
                json_object_array_add(one, json_object_get(g));
                if (i)
                        printf("\n");
                print_table(stdout, "", graph_cols, ng, one);
                json_object_put(one);
                if (json_object_object_get_ex(g, "live", &live) && json_object_array_length(live))
                        print_table(stdout, "    ", live_cols, nl, live);
                if (json_object_object_get_ex(g, "live_omitted", &v) && json_object_get_uint64(v))
                        printf("    (%" PRIu64 " more live graphs not listed)\n", json_object_get_uint64(v));
        }
}

/* Every counter of ThreadStatus, as --json has them. */
static const struct column thread_cols[] = {
        { "thread", -6, NULL },           { "clusters", 8, NULL },
        { "classified", 10, NULL },       { "batch_linked", 0, NULL },
        { "dispatched", 10, NULL },       { "executed_tasks", 0, NULL },
        { "retired_inline", 0, NULL },    { "failed", 8, NULL },
        { "published", 10, NULL },        { "continued", 9, NULL },
        { "stolen", 8, NULL },            { "failsafe_pushes", 0, NULL },
        { "failsafe_retries", 0, NULL },  { "watermark_advances", 0, NULL },
        { "watermark_cas_failures", 0, NULL }, { "parks", 8, NULL },
        { "wakeups", 8, NULL },           { "spurious_wakeups", 0, NULL },
        { "cpu_moves", 9, NULL },
};

static void threads_text(json_object *a) {
        print_table(stdout, "", thread_cols, sizeof(thread_cols) / sizeof(thread_cols[0]), a);
}

/* "in a, in b, out out": each argument's kind and name. */
static void args_text(json_object *v, char *buf, size_t sz) {
        size_t used = 0;
        buf[0] = 0;
        for (size_t i = 0; v && i < json_object_array_length(v) && used < sz; i++) {
                json_object *arg = json_object_array_get_idx(v, i), *kind = NULL, *name = NULL;
                json_object_object_get_ex(arg, "kind", &kind);
                json_object_object_get_ex(arg, "name", &name);
                int n = snprintf(buf + used, sz - used, "%s%s %s", i ? ", " : "", json_object_get_string(kind),
                                 json_object_get_string(name));
                used += n > 0 ? (size_t)n : 0;
        }
}

/* The length rule in words last: the longest text of a row. */
static const struct column kernel_cols[] = {
        { "id", -4, NULL },
        { "name", -18, NULL },
        { "module", -10, NULL },
        { "splittable", -10, NULL },
        { "in_place", -8, NULL },
        { "tasks", 10, NULL },
        { "failures", 8, NULL },
        { "args", -20, args_text },
        { "length_rule", 0, NULL },
};

static void kernels_text(json_object *a) {
        print_table(stdout, "", kernel_cols, sizeof(kernel_cols) / sizeof(kernel_cols[0]), a);
}

/* A view's part `key` of o (NULL: none). */
static json_object *part(json_object *o, const char *key) {
        json_object *v = NULL;
        json_object_object_get_ex(o, key, &v);
        return v;
}

/* {key: v}: the view of a kind that shows one list. */
static json_object *view_of(const char *key, json_object *v) {
        json_object *o = json_object_new_object();
        json_object_object_add(o, key, v);
        return o;
}

static json_object *status_view_json(const Hbg__StatusReply *r) {
        json_object *o = view_of("daemon", daemon_json(r));
        json_object_object_add(o, "sessions", sessions_json(r));
        return o;
}

/* The daemon, then its sessions unless there are none. */
static void status_view_text(json_object *o) {
        json_object *sessions = part(o, "sessions");
        daemon_text(part(o, "daemon"));
        if (sessions && json_object_array_length(sessions) > 0) {
                printf("\n");
                sessions_text(sessions);
        }
}

static json_object *sessions_view_json(const Hbg__StatusReply *r) {
        return view_of("sessions", sessions_json(r));
}

static void sessions_view_text(json_object *o) {
        sessions_text(part(o, "sessions"));
}

static json_object *graphs_view_json(const Hbg__StatusReply *r) {
        return view_of("graphs", graphs_json(r));
}

static void graphs_view_text(json_object *o) {
        graphs_text(part(o, "graphs"));
}

static json_object *threads_view_json(const Hbg__StatusReply *r) {
        return view_of("threads", threads_json(r));
}

static void threads_view_text(json_object *o) {
        threads_text(part(o, "threads"));
}

static json_object *kernels_view_json(const Hbg__StatusReply *r) {
        return view_of("kernels", kernels_json(r));
}

static void kernels_view_text(json_object *o) {
        kernels_text(part(o, "kernels"));
}

/* What each kind of status request shows: its JSON object, and the text
 * of that object. A kind not listed shows as the daemon's. */
static const struct view {
        Hbg__StatusKind kind;
        json_object *(*json)(const Hbg__StatusReply *r);
        void (*text)(json_object *o);
} views[] = {
        { HBG__STATUS_KIND__STATUS_DAEMON, status_view_json, status_view_text },
        { HBG__STATUS_KIND__STATUS_SESSIONS, sessions_view_json, sessions_view_text },
        { HBG__STATUS_KIND__STATUS_GRAPHS, graphs_view_json, graphs_view_text },
        { HBG__STATUS_KIND__STATUS_THREADS, threads_view_json, threads_view_text },
        { HBG__STATUS_KIND__STATUS_KERNELS, kernels_view_json, kernels_view_text },
};

static const struct view *find_view(Hbg__StatusKind kind) {
        for (size_t i = 0; i < sizeof(views) / sizeof(views[0]); i++)
                if (views[i].kind == kind)
                        return &views[i];
        return &views[0];
}

json_object *status_json(Hbg__StatusKind kind, const Hbg__StatusReply *r) {
        return find_view(kind)->json(r);
}

void status_print_text(Hbg__StatusKind kind, json_object *o) {
        find_view(kind)->text(o);
}
