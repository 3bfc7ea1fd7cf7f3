/* SPDX-License-Identifier: MIT */
/*
 * `hbgctl metrics`: hbgd's counters, gauges and latency histograms as
 * text for Prometheus (docs/OPERATIONS.md, "Metrics"), in either of its
 * two text formats (formats[] below):
 *   openmetrics  OpenMetrics 1.0.0 (https://github.com/OpenObservability/
 *                OpenMetrics): "# UNIT" lines, a counter's family named
 *                without the _total its samples carry, "# EOF" last. What
 *                Prometheus keeps the types of when it scrapes it itself.
 *   prometheus   Prometheus' text format 0.0.4, which node exporter's
 *                textfile collector reads: no UNIT, no EOF, and a counter's
 *                family named as its sample is (hbg_x_total), or that
 *                format's parsers take the samples for another, untyped,
 *                family and promtool finds no help for them.
 * hbgd sends structured values (a STATUS_METRICS reply); every metric's
 * name, type, unit and help is one entry of families[], and only this
 * file writes the text, in both formats from that one table. The
 * exporter (ctl/exporter.c) serves the same text over HTTP, with its own
 * process_* families added.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <libgen.h>
#include <limits.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ctl/ctl.h"
#include "ctl/daemon_conn.h"
#include "ctl/error.h"
#include "ctl/metrics.h"
#include "ctl/output.h"

/* ------------------------------------------------------------ formats */

static const struct metrics_format formats[] = {
        { "openmetrics", "application/openmetrics-text; version=1.0.0; charset=utf-8", true, false, true, true },
        { "prometheus", "text/plain; version=0.0.4; charset=utf-8", false, true, false, false },
};
#define N_FORMATS (sizeof(formats) / sizeof(formats[0]))

const struct metrics_format *metrics_format_find(const char *name) {
        for (size_t i = 0; i < N_FORMATS; i++)
                if (strcmp(formats[i].name, name) == 0)
                        return &formats[i];
        return NULL;
}

void metrics_format_names(FILE *out, const char *sep) {
        for (size_t i = 0; i < N_FORMATS; i++)
                fprintf(out, "%s%s", i ? sep : "", formats[i].name);
}

const struct metrics_format *metrics_format_default(void) {
        return &formats[0];
}

/* ------------------------------------------------------------ families */

/* Where a family's values come from. */
enum source {
        SRC_DAEMON,            /* a field of DaemonStatus */
        SRC_METRICS,           /* a field of Metrics */
        SRC_THREADS,           /* a field of each ThreadStatus: label thread */
        SRC_USERS,             /* a field of each MetricUser of Metrics: label uid */
        SRC_ERRNO,             /* a MetricErrno list of Metrics: label errno */
        SRC_HISTOGRAM,         /* a Histogram of Metrics */
        SRC_THREAD_HISTOGRAM,  /* each MetricThread's task_run: label thread */
        SRC_KERNELS,           /* a field of each MetricKernel of Metrics: label kernel */
        SRC_KERNEL_HISTOGRAM,  /* a Histogram of each MetricKernel: label kernel */
        SRC_BUILD_INFO,        /* an info: DaemonStatus' version, io backend, completion mode */
        SRC_SELF,              /* a field of the exporter's own struct procstat (exporter only) */
};

/* What else a family is (family.flags). */
enum {
        /* Rows per uid: the exporter serves them only with --per-uid. */
        FAM_PER_UID = 1 << 0,
        /* From Metrics fields 9-18, which an older hbgd does not send:
         * left out rather than shown as zeros when they are absent. */
        FAM_NEWER = 1 << 1,
};

struct family {
        const char *name;      /* a counter's samples add _total, an info's _info */
        const char *type;      /* counter, gauge, histogram or info */
        const char *unit;      /* "" or the last part of the name */
        const char *help;      /* SRC_THREAD_HISTOGRAM: a sampling rate may follow */
        enum source src;
        size_t offset;         /* of the field; SRC_ERRNO: of its n_ count */
        size_t width;          /* of an integer field, bytes; SRC_ERRNO: offset of the list */
        unsigned divisor;      /* integer fields: shown divided by this (ms -> s), a power of 10 */
        unsigned flags;        /* FAM_* */
};

#define DAEMON(f) SRC_DAEMON, offsetof(Hbg__DaemonStatus, f), sizeof(((Hbg__DaemonStatus *)0)->f)
#define METRICS(f) SRC_METRICS, offsetof(Hbg__Metrics, f), sizeof(((Hbg__Metrics *)0)->f)
#define THREADS(f) SRC_THREADS, offsetof(Hbg__ThreadStatus, f), sizeof(((Hbg__ThreadStatus *)0)->f)
#define USERS(f) SRC_USERS, offsetof(Hbg__MetricUser, f), sizeof(((Hbg__MetricUser *)0)->f)
#define ERRNO_LIST(f) SRC_ERRNO, offsetof(Hbg__Metrics, n_##f), offsetof(Hbg__Metrics, f)
#define HISTOGRAM(f) SRC_HISTOGRAM, offsetof(Hbg__Metrics, f), 0
#define KERNELS(f) SRC_KERNELS, offsetof(Hbg__MetricKernel, f), sizeof(((Hbg__MetricKernel *)0)->f)
#define KERNEL_HISTOGRAM(f) SRC_KERNEL_HISTOGRAM, offsetof(Hbg__MetricKernel, f), 0
#define SELF(f) SRC_SELF, offsetof(struct procstat, f), sizeof(((struct procstat *)0)->f)

static const struct family families[] = {
        { "hbg_build", "info", "", "hbgd's version, io backend and completion mode.", SRC_BUILD_INFO, 0, 0, 1 },
        { "hbg_uptime_seconds", "gauge", "seconds", "Time since hbgd started.", DAEMON(uptime_ms), 1000 },
        { "hbg_process_start_time_seconds", "gauge", "seconds", "hbgd's start time since the Unix epoch.",
          METRICS(process_start_time_ms), 1000, FAM_NEWER },
        { "hbg_process_cpu_seconds", "counter", "seconds", "CPU time hbgd used, user and system.",
          METRICS(process_cpu_us), 1000000, FAM_NEWER },
        { "hbg_process_resident_memory_bytes", "gauge", "bytes", "hbgd's resident memory.",
          METRICS(process_resident_bytes), 1, FAM_NEWER },
        { "hbg_process_open_fds", "gauge", "", "File descriptors hbgd has open.", METRICS(process_open_fds), 1,
          FAM_NEWER },
        { "hbg_process_max_fds", "gauge", "", "hbgd's limit of open file descriptors (0: none).",
          METRICS(process_max_fds), 1, FAM_NEWER },
        { "hbg_scheduler_threads", "gauge", "", "Scheduler threads.", DAEMON(threads), 1 },
        { "hbg_connections", "gauge", "", "Control connections open now.", DAEMON(connections), 1 },
        { "hbg_connections_accepted", "counter", "", "Control connections accepted, refused ones included.",
          DAEMON(connections_accepted), 1 },
        { "hbg_sessions", "gauge", "", "Client sessions open now.", DAEMON(sessions), 1 },
        { "hbg_sessions_opened", "counter", "", "Client sessions opened.", DAEMON(sessions_opened), 1 },
        { "hbg_sessions_set_up_inline", "counter", "",
          "Of the sessions opened, those built on hbgd's io thread, not its slow-work thread: a lone "
          "connect's, with the slow-work thread idle and a set of regions made ahead (default geometry) ready.",
          DAEMON(sessions_set_up_inline), 1 },
        { "hbg_sessions_closing", "gauge", "",
          "Sessions closed and not freed yet, still charged and counted against max_sessions: a kernel of "
          "theirs still runs, a pre-fault piece ends, or hbgd's seal of their region waits for their client.",
          DAEMON(sessions_closing), 1 },
        { "hbg_spare_rings", "gauge", "", "Rings' arrays faulted in ahead of sessions ([session] spare_rings).",
          DAEMON(spare_rings), 1 },
        { "hbg_spare_ring_bytes", "gauge", "bytes", "The memory of the spare rings, charged to no user.",
          DAEMON(spare_ring_bytes), 1 },
        { "hbg_spare_rings_taken", "counter", "", "Sessions that took a spare ring.", DAEMON(spare_rings_taken),
          1 },
        { "hbg_spare_regions", "gauge", "",
          "Sets of a session's regions and channels made ahead ([session] spare_regions).", DAEMON(spare_regions),
          1 },
        { "hbg_spare_regions_taken", "counter", "", "Sessions that took a set of regions made ahead.",
          DAEMON(spare_regions_taken), 1 },
        { "hbg_log_lines_dropped", "counter", "", "Log lines dropped: hbgd's log writer fell behind its reader.",
          DAEMON(log_lines_dropped), 1 },
        { "hbg_sessions_refused", "counter", "",
          "Connections and session requests refused (user not allowed, a limit, shutting down, bad geometry), "
          "by errno.",
          ERRNO_LIST(sessions_refused), 1 },
        { "hbg_memory_charged_bytes", "gauge", "bytes",
          "Memory charged to all sessions (their regions and hbgd's arrays), against hbg_memory_limit_bytes.",
          METRICS(memory_charged), 1, FAM_NEWER },
        { "hbg_memory_limit_bytes", "gauge", "bytes", "The memory all sessions may be charged ([limits] max_memory).",
          METRICS(memory_limit), 1, FAM_NEWER },
        { "hbg_user_memory_charged_bytes", "gauge", "bytes",
          "Memory charged to one user's sessions, against hbg_user_memory_limit_bytes (root is spared it).",
          USERS(memory), 1, FAM_NEWER | FAM_PER_UID },
        { "hbg_user_memory_limit_bytes", "gauge", "bytes",
          "The memory one user's sessions may be charged ([limits] max_memory_per_uid).",
          METRICS(memory_limit_per_uid), 1, FAM_NEWER }, /* the configured limit: no uid in it */
        { "hbg_user_sessions", "gauge", "", "Sessions of one user open now.", USERS(sessions), 1,
          FAM_NEWER | FAM_PER_UID },
        { "hbg_graphs_in_flight", "gauge", "", "Graphs submitted and not retired yet, all sessions.",
          METRICS(graphs_in_flight), 1, FAM_NEWER },
        { "hbg_graphs_submitted", "counter", "", "Graphs submitted (graph records hbgd read).",
          METRICS(graphs_submitted), 1 },
        { "hbg_graphs_retired", "counter", "", "Graphs finished, with success or failure.",
          METRICS(graphs_retired), 1 },
        { "hbg_graphs_failed", "counter", "",
          "Graphs failed, by errno of their first failing task (ECONNRESET, ESHUTDOWN: their session ended).",
          ERRNO_LIST(graphs_failed), 1 },
        { "hbg_graph_latency_seconds", "histogram", "seconds",
          "Graph latency: from hbgd reading a graph's record to the graph's retirement.",
          HISTOGRAM(graph_latency), 1 },
        { "hbg_tasks_classified", "counter", "", "Tasks copied and validated, per scheduler thread.",
          THREADS(classified), 1 },
        { "hbg_tasks_executed", "counter", "", "Kernel tasks run to the end (failed ones included), per scheduler thread.",
          THREADS(executed_tasks), 1 },
        { "hbg_tasks_retired_inline", "counter", "",
          "Tasks completed without running a kernel (dummy, host-inline, false predicate), per scheduler thread.",
          THREADS(retired_inline), 1 },
        { "hbg_tasks_stolen", "counter", "", "Tasks taken from a peer thread's deque, per scheduler thread.",
          THREADS(stolen), 1 },
        { "hbg_tasks_failed", "counter", "",
          "Tasks failed (validation, kernel, client report, stall), by errno; dependants skipped are not counted.",
          ERRNO_LIST(tasks_failed), 1 },
        { "hbg_task_blocks_dispatched", "counter", "", "Task blocks started on a core, per scheduler thread.",
          THREADS(dispatched), 1 },
        { "hbg_task_run_seconds", "histogram", "seconds",
          "Kernel task run time, first block's start to last block's end, of the tasks whose last block a thread "
          "ran, per scheduler thread",
          SRC_THREAD_HISTOGRAM, 0, 0, 1 },
        { "hbg_kernel_tasks", "counter", "",
          "Tasks run to their end per kernel (of their first lane), failed ones included.", KERNELS(tasks), 1 },
        { "hbg_kernel_failures", "counter", "",
          "Tasks per kernel that failed (the kernel's error, its time budget, a cancel, the ring's end).",
          KERNELS(failures), 1 },
        { "hbg_kernel_run_seconds", "histogram", "seconds",
          "Task run time per kernel, first block's start to last block's end; every task timed.",
          KERNEL_HISTOGRAM(run), 1 },
        { "hbg_kernel_wait_seconds", "histogram", "seconds",
          "Task wait per kernel, from made ready (inputs complete) to first block's start; every task timed.",
          KERNEL_HISTOGRAM(wait), 1 },
        { "hbg_watermark_advances", "counter", "", "Completed-watermark advances, per scheduler thread.",
          THREADS(watermark_advances), 1 },
        { "hbg_watermark_cas_failures", "counter", "",
          "Completed-watermark advances lost to another thread's, per scheduler thread.",
          THREADS(watermark_cas_failures), 1 },
        { "hbg_failsafe_pushes", "counter", "",
          "Completions deferred to the failsafe heap (a flag slot still in use), per scheduler thread.",
          THREADS(failsafe_pushes), 1 },
        { "hbg_failsafe_retries", "counter", "",
          "Attempts to publish the lowest completion of the failsafe heap, per scheduler thread.",
          THREADS(failsafe_retries), 1 },
        { "hbg_thread_parks", "counter", "", "Times a scheduler thread went to sleep for want of work.",
          THREADS(parks), 1 },
        { "hbg_thread_wakeups", "counter", "", "Times a sleeping scheduler thread woke up.", THREADS(wakeups), 1 },
        { "hbg_thread_spurious_wakeups", "counter", "",
          "Times a client woke a sleeping scheduler thread that then found no work.", THREADS(spurious_wakeups), 1 },
        { "hbg_thread_cpu_moves", "counter", "",
          "Times an idle scheduler thread moved off a CPU whose other task kept taking its yields.",
          THREADS(cpu_moves), 1 },
        /* The exporter's own process, as every Prometheus client library names it. */
        { "process_start_time_seconds", "gauge", "seconds", "Start time of the process since the Unix epoch.",
          SELF(start_time_ms), 1000 },
        { "process_cpu_seconds", "counter", "seconds", "Total user and system CPU time spent.", SELF(cpu_us),
          1000000 },
        { "process_resident_memory_bytes", "gauge", "bytes", "Resident memory size.", SELF(resident_bytes), 1 },
        { "process_virtual_memory_bytes", "gauge", "bytes", "Virtual memory size.", SELF(virtual_bytes), 1 },
        { "process_open_fds", "gauge", "", "Number of open file descriptors.", SELF(open_fds), 1 },
        { "process_max_fds", "gauge", "", "Maximum number of open file descriptors (0: no limit).", SELF(max_fds),
          1 },
};
#define N_FAMILIES (sizeof(families) / sizeof(families[0]))

/* ------------------------------------------------------------ values */

static uint64_t field_u(const void *msg, const struct family *f) {
        const char *p = (const char *)msg + f->offset;
        if (f->width == sizeof(uint32_t)) {
                uint32_t v;
                memcpy(&v, p, sizeof(v));
                return v;
        }
        uint64_t v;
        memcpy(&v, p, sizeof(v));
        return v;
}

/* v / divisor exactly, with as many decimals as the divisor has zeros
 * (a float: OpenMetrics wants its decimal point). */
static void print_value(FILE *out, uint64_t v, unsigned divisor) {
        if (divisor <= 1) {
                fprintf(out, "%" PRIu64 "\n", v);
                return;
        }
        int digits = 0;
        for (unsigned d = divisor; d > 1; d /= 10)
                digits++;
        fprintf(out, "%" PRIu64 ".%0*" PRIu64 "\n", v / divisor, digits, v % divisor);
}

/* A label value, escaped as both formats want (\\, \", \n). */
static void print_label_value(FILE *out, const char *s) {
        fputc('"', out);
        for (; s && *s; s++) {
                if (*s == '\\' || *s == '"')
                        fprintf(out, "\\%c", *s);
                else if (*s == '\n')
                        fputs("\\n", out);
                else
                        fputc(*s, out);
        }
        fputc('"', out);
}

/* "EIO"; "other" for codes outside the errno range hbgd counts. */
static const char *errno_label(int32_t code, char *buf, size_t size) {
        if (code == 0)
                return "other";
        const char *name = code < 0 ? strerrorname_np(-code) : NULL;
        if (name)
                return name;
        snprintf(buf, size, "E%d", code < 0 ? -code : code);
        return buf;
}

/* A bound in seconds the way OpenMetrics' canonical numbers look: %g,
 * with ".0" when that has neither a point nor an exponent (1.0, 2.5,
 * 0.0001, 1e-07). */
static void le_label(uint64_t ns, char *buf, size_t size) {
        snprintf(buf, size, "%g", (double)ns / 1e9);
        if (!strpbrk(buf, ".e"))
                strncat(buf, ".0", size - strlen(buf) - 1);
}

/* The longest labels print_histogram() takes: a kernel's name is at most
 * HBG_KERNEL_NAME_MAX characters; hbgd's are checked, a reply's are not. */
#define LABELS_MAX 160

/* `key="value",` escaped (print_label_value()'s rules) into buf; -ENOSPC
 * if it does not fit. */
static int label_text(char *buf, size_t size, const char *key, const char *value) {
        char *text = NULL;
        size_t len = 0;
        FILE *f = open_memstream(&text, &len);
        if (!f)
                return -ENOMEM;
        fprintf(f, "%s=", key);
        print_label_value(f, value);
        fputc(',', f);
        int err = fclose(f) ? -ENOMEM : 0;
        if (!err && len >= size)
                err = -ENOSPC;
        if (!err)
                memcpy(buf, text, len + 1);
        free(text);
        return err;
}

/* A histogram's samples; labels: "" or `thread="N",` (at most
 * LABELS_MAX). -EPROTO if the reply's histogram is malformed. */
static int print_histogram(FILE *out, const char *name, const char *labels, const Hbg__Histogram *h) {
        if (!h || h->n_buckets != h->n_bounds_ns + 1)
                return -EPROTO;
        for (size_t i = 1; i < h->n_bounds_ns; i++)
                if (h->bounds_ns[i] <= h->bounds_ns[i - 1])
                        return -EPROTO;
        uint64_t total = 0;
        for (size_t i = 0; i < h->n_buckets; i++) {
                total += h->buckets[i];
                char le[32];
                if (i < h->n_bounds_ns)
                        le_label(h->bounds_ns[i], le, sizeof(le));
                else
                        snprintf(le, sizeof(le), "+Inf");
                fprintf(out, "%s_bucket{%sle=\"%s\"} %" PRIu64 "\n", name, labels, le, total);
        }
        /* Labels without the trailing comma for _count and _sum. */
        char plain[LABELS_MAX];
        snprintf(plain, sizeof(plain), "%.*s", labels[0] ? (int)strlen(labels) - 1 : 0, labels);
        const char *open = plain[0] ? "{" : "", *close = plain[0] ? "}" : "";
        fprintf(out, "%s_count%s%s%s %" PRIu64 "\n", name, open, plain, close, total);
        fprintf(out, "%s_sum%s%s%s %" PRIu64 ".%09" PRIu64 "\n", name, open, plain, close, h->sum_ns / 1000000000,
                h->sum_ns % 1000000000);
        return 0;
}

/* One family in format fmt: metadata, then its samples. -EPROTO for a
 * malformed reply. */
static int print_family(FILE *out, const struct family *f, const Hbg__StatusReply *r, const struct procstat *self,
                        const struct metrics_format *fmt) {
        const Hbg__Metrics *m = r->metrics;
        bool counter = strcmp(f->type, "counter") == 0, info = strcmp(f->type, "info") == 0;
        /* The sample's suffix, and the family's name and type in this
         * format (0.0.4 has no info: a gauge named as its sample). */
        const char *suffix = counter ? "_total" : info ? "_info" : "";
        char family[96];
        snprintf(family, sizeof(family), "%s%s", f->name, fmt->counter_family_total ? suffix : "");
        fprintf(out, "# TYPE %s %s\n", family, info && !fmt->info_type ? "gauge" : f->type);
        if (fmt->unit_lines && f->unit[0])
                fprintf(out, "# UNIT %s %s\n", family, f->unit);
        if (f->src == SRC_THREAD_HISTOGRAM && m->task_sample_every > 1)
                fprintf(out, "# HELP %s %s; sampled: one run in %u is timed.\n", family, f->help,
                        m->task_sample_every);
        else if (f->src == SRC_THREAD_HISTOGRAM)
                fprintf(out, "# HELP %s %s.\n", family, f->help);
        else
                fprintf(out, "# HELP %s %s\n", family, f->help);

        switch (f->src) {
        case SRC_DAEMON:
                fprintf(out, "%s%s ", f->name, suffix);
                print_value(out, field_u(r->daemon, f), f->divisor);
                return 0;
        case SRC_METRICS:
                fprintf(out, "%s%s ", f->name, suffix);
                print_value(out, field_u(m, f), f->divisor);
                return 0;
        case SRC_SELF:
                fprintf(out, "%s%s ", f->name, suffix);
                print_value(out, field_u(self, f), f->divisor);
                return 0;
        case SRC_THREADS:
                for (size_t i = 0; i < r->n_threads; i++) {
                        fprintf(out, "%s%s{thread=\"%u\"} ", f->name, suffix, r->threads[i]->index);
                        print_value(out, field_u(r->threads[i], f), f->divisor);
                }
                return 0;
        case SRC_USERS:
                for (size_t i = 0; i < m->n_users; i++) {
                        fprintf(out, "%s%s{uid=\"%u\"} ", f->name, suffix, m->users[i]->uid);
                        print_value(out, field_u(m->users[i], f), f->divisor);
                }
                return 0;
        case SRC_ERRNO: {
                size_t n;
                Hbg__MetricErrno **list;
                memcpy(&n, (const char *)m + f->offset, sizeof(n));
                memcpy(&list, (const char *)m + f->width, sizeof(list));
                for (size_t i = 0; i < n; i++) {
                        char buf[16];
                        fprintf(out, "%s%s{errno=\"%s\"} %" PRIu64 "\n", f->name, suffix,
                                errno_label(list[i]->code, buf, sizeof(buf)), list[i]->count);
                }
                return 0;
        }
        case SRC_HISTOGRAM: {
                const Hbg__Histogram *h;
                memcpy(&h, (const char *)m + f->offset, sizeof(h));
                return print_histogram(out, f->name, "", h);
        }
        case SRC_THREAD_HISTOGRAM:
                for (size_t i = 0; i < m->n_threads; i++) {
                        char labels[32];
                        snprintf(labels, sizeof(labels), "thread=\"%u\",", m->threads[i]->index);
                        if (print_histogram(out, f->name, labels, m->threads[i]->task_run) < 0)
                                return -EPROTO;
                }
                return 0;
        case SRC_KERNELS:
                for (size_t i = 0; i < m->n_kernels; i++) {
                        fprintf(out, "%s%s{kernel=", f->name, suffix);
                        print_label_value(out, m->kernels[i]->name);
                        fputs("} ", out);
                        print_value(out, field_u(m->kernels[i], f), f->divisor);
                }
                return 0;
        case SRC_KERNEL_HISTOGRAM:
                for (size_t i = 0; i < m->n_kernels; i++) {
                        char labels[LABELS_MAX];
                        const Hbg__Histogram *h;
                        memcpy(&h, (const char *)m->kernels[i] + f->offset, sizeof(h));
                        if (label_text(labels, sizeof(labels), "kernel", m->kernels[i]->name) < 0 ||
                            print_histogram(out, f->name, labels, h) < 0)
                                return -EPROTO;
                }
                return 0;
        case SRC_BUILD_INFO:
                fprintf(out, "%s%s{version=", f->name, suffix);
                print_label_value(out, r->daemon->version);
                fputs(",io_backend=", out);
                print_label_value(out, r->daemon->io_backend);
                fputs(",completion_mode=", out);
                print_label_value(out, r->daemon->completion_mode);
                fputs("} 1\n", out);
                return 0;
        }
        return -EPROTO;
}

/* Does this hbgd send Metrics fields 9-18? max_memory as it applies it is
 * never 0 there; an older hbgd sends none of them (all read 0). */
static bool sends_newer(const Hbg__Metrics *m) {
        return m->memory_limit != 0;
}

int metrics_write(FILE *out, const Hbg__StatusReply *r, const struct procstat *self, bool per_uid,
                  const struct metrics_format *fmt) {
        if (!r->daemon || !r->metrics)
                return -EPROTO;
        bool newer = sends_newer(r->metrics);
        for (size_t i = 0; i < N_FAMILIES; i++) {
                const struct family *f = &families[i];
                if ((f->src == SRC_SELF && !self) || ((f->flags & FAM_PER_UID) && !per_uid) ||
                    ((f->flags & FAM_NEWER) && !newer))
                        continue;
                int err = print_family(out, f, r, self, fmt);
                if (err < 0)
                        return err;
        }
        if (fmt->eof)
                fprintf(out, "# EOF\n");
        return 0;
}

int metrics_fetch(const char *path, Hbg__Envelope **ret, struct ctl_failure *ret_fail) {
        Hbg__Envelope *reply = NULL;
        int err = ctl_status(path, HBG__STATUS_KIND__STATUS_METRICS, &reply, ret_fail);
        if (err < 0)
                return err;
        const Hbg__StatusReply *r = reply->status_reply;
        if (!r->daemon || !r->metrics) {
                *ret_fail = (struct ctl_failure){ .at = CTL_AT_EXCHANGE, .err = -EPROTO };
                wire_free(reply);
                return ctl_error(-EPROTO, "hbgd sent no metrics (an hbgd older than this hbgctl?)");
        }
        *ret = reply;
        return 0;
}

/* ------------------------------------------------------------ output */

/* Replace path with data atomically: a temporary file in the same
 * directory (a name a textfile collector skips: it reads *.prom only),
 * mode 0644, then rename(2) over path; a reader sees the old file or the
 * new one, never a part. 0, or a negative errno with a message printed. */
static int write_atomically(const char *path, const char *data, size_t len) {
        char dir_buf[PATH_MAX], base_buf[PATH_MAX], tmp[PATH_MAX + 16];
        if (snprintf(dir_buf, sizeof(dir_buf), "%s", path) >= (int)sizeof(dir_buf) ||
            snprintf(base_buf, sizeof(base_buf), "%s", path) >= (int)sizeof(base_buf)) {
                return ctl_error(-ENAMETOOLONG, "--output: path too long");
        }
        snprintf(tmp, sizeof(tmp), "%s/.%s.XXXXXX", dirname(dir_buf), basename(base_buf));
        int fd = mkostemp(tmp, O_CLOEXEC);
        if (fd < 0) {
                int err = -errno;
                return ctl_error(err, "cannot write %s: %s", path, strerror(-err));
        }
        int err = 0;
        for (size_t done = 0; done < len && !err;) {
                ssize_t n = write(fd, data + done, len - done);
                if (n < 0 && errno != EINTR)
                        err = errno;
                else if (n > 0)
                        done += (size_t)n;
        }
        /* Readable by the exporter (mkostemp made it 0600); on disk before
         * it takes the name. */
        if (!err && (fchmod(fd, 0644) < 0 || fsync(fd) < 0))
                err = errno;
        if (close(fd) < 0 && !err)
                err = errno;
        if (!err && rename(tmp, path) < 0)
                err = errno;
        if (err) {
                unlink(tmp);
                return ctl_error(-err, "cannot write %s: %s", path, strerror(err));
        }
        return 0;
}

int metrics_check_format(const char *name, const struct metrics_format **ret) {
        *ret = NULL;
        if (strcmp(name, "help") == 0) {
                metrics_format_names(stdout, "\n");
                putchar('\n');
                return 0;
        }
        if (!(*ret = metrics_format_find(name))) {
                fprintf(stderr, "hbgctl: --format: '%s' is not a format (", name);
                metrics_format_names(stderr, ", ");
                fprintf(stderr, ")\n");
                return -EINVAL;
        }
        return 0;
}

int cmd_metrics(const struct ctl_opts *o) {
        const struct metrics_format *fmt = metrics_format_default();
        if (o->metrics_format) {
                if (metrics_check_format(o->metrics_format, &fmt) < 0)
                        return EXIT_USAGE;
                if (!fmt) /* help: the names are printed */
                        return 0;
        }
        if (o->per_uid && !o->listen) {
                fprintf(stderr, "hbgctl: --per-uid is the exporter's (--listen); hbgctl metrics shows the rows "
                                "its user may see\n");
                return EXIT_USAGE;
        }
        if (o->listen) /* the exporter's verb (exporter.c), which calls down into this file */
                return EXIT_USAGE;
        Hbg__Envelope *reply = NULL;
        struct ctl_failure fail;
        if (metrics_fetch(o->socket, &reply, &fail) < 0)
                return ctl_exit_status(&fail);
        if (!reply) { /* metrics_fetch() gives one with 0: said for the optimiser */
                ctl_error(-EPROTO, "no reply from hbgd");
                return EXIT_FAIL;
        }
        const Hbg__StatusReply *r = reply->status_reply;
        char *text = NULL;
        size_t len = 0;
        FILE *out = open_memstream(&text, &len);
        if (!out) {
                ctl_error(-ENOMEM, "out of memory");
                wire_free(reply);
                return EXIT_FAIL;
        }
        int bad = 0;
        if (opt_json) {
                json_object *j = pb_to_json(&r->base);
                write_json(out, j, JSON_C_TO_STRING_PRETTY);
                json_object_put(j);
        } else {
                bad = metrics_write(out, r, NULL, true, fmt);
        }
        wire_free(reply);
        if (fclose(out) != 0 || bad) {
                ctl_error(bad ? -EPROTO : -ENOMEM, "%s", bad ? "malformed metrics from hbgd" : "out of memory");
                free(text);
                return EXIT_FAIL;
        }
        int rc = 0;
        if (opt_output)
                rc = write_atomically(opt_output, text, len) < 0 ? EXIT_FAIL : 0;
        else if (fwrite(text, 1, len, stdout) != len || fflush(stdout) != 0)
                rc = EXIT_FAIL;
        free(text);
        return rc;
}
