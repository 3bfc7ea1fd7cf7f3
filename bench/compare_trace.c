/* SPDX-License-Identifier: MIT */
/*
 * `hbg-bench --trace[=SHAPE]` (bench/compare.h): one graph of a shape
 * (wavefront by default: 40 x 40 tasks, each busy-waiting 20 us in hbgd,
 * or noop ones with --trace-task-us 0) on an hbgd of its own, with
 * the default completion policy and 4 scheduler threads, recorded by
 * `hbgctl trace` (ctl/trace.c): trace.json (Perfetto) and trace.svg in
 * the output directory. It runs after every other row, so it changes
 * none of their timings.
 *
 * The order: hbgd starts; the producer connects and runs the graph once
 * (a warm-up, not traced); hbgctl starts the trace, which hbgd's log says
 * ("trace of ... started"); the producer runs the graph again; SIGINT
 * ends hbgctl's recording, which it then writes (docs/OPERATIONS.md,
 * "Tracing"). Then a summary read back from the JSON: per scheduler
 * thread its task slices, the share of the graph's time it spent in them,
 * the median wait from ready to start and its parks; and how long 0, 1,
 * 2 ... tasks ran at once (docs/PERFORMANCE.md, "A trace of wavefront").
 */
#include <errno.h>
#include <inttypes.h>
#include <json-c/json.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench/bench_util.h"
#include "bench/child.h"
#include "bench/compare.h"
#include "bench/dag.h"
#include "bench/hbgd_proc.h"
#include "daemon/engine/engine.h"

#define TRACE_THREADS 4u
#define STEP_MS (10 * 60 * 1000)        /* a producer or hbgctl silent this long is wedged */
#define TRACE_ON_MS 10000               /* hbgctl's trace must start within this */
#define TRACE_MAX_S "600"               /* hbgctl's longest; SIGINT ends it once the graph ran */

/* ------------------------------------------------------------ the summary */

struct trace_thread {
        uint64_t tasks, parks, wakes;
        double busy_us;                 /* task slices within the graph's span */
        double *waits;                  /* wait_us of its slices that have one */
        size_t n_waits;
};

struct trace_summary {
        double duration_us, begin_us, end_us;   /* the trace; the graph's span */
        uint64_t dropped, slices;
        unsigned threads;
        struct trace_thread t[HBG_ENGINE_MAX_THREADS];
        double *edges;                  /* +start / -end of every slice, µs, as pairs (time, +1/-1) */
        size_t n_edges;
};

static double num(json_object *o, const char *key) {
        json_object *v;
        return json_object_object_get_ex(o, key, &v) && v ? json_object_get_double(v) : -1;
}

static const char *str(json_object *o, const char *key) {
        json_object *v;
        return json_object_object_get_ex(o, key, &v) && v ? json_object_get_string(v) : "";
}

static int cmp_double(const void *a, const void *b) {
        double x = *(const double *)a, y = *(const double *)b;
        return x < y ? -1 : x > y;
}

/* Pairs (time, delta) by time, ends before starts at the same time. */
static int cmp_edge(const void *a, const void *b) {
        const double *x = a, *y = b;
        return x[0] != y[0] ? cmp_double(x, y) : cmp_double(x + 1, y + 1);
}

static double median(double *v, size_t n) {
        if (!n)
                return -1;
        qsort(v, n, sizeof(*v), cmp_double);
        return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

static void summary_free(struct trace_summary *s) {
        for (unsigned i = 0; i < HBG_ENGINE_MAX_THREADS; i++)
                free(s->t[i].waits);
        free(s->edges);
}

/* Read path (hbgctl's JSON) into s: 0, or -errno after printing why. */
static int summary_read(const char *path, struct trace_summary *s) {
        memset(s, 0, sizeof(*s));
        json_object *root = json_object_from_file(path);
        json_object *events, *other;
        if (!root || !json_object_object_get_ex(root, "traceEvents", &events) ||
            !json_object_is_type(events, json_type_array) || !json_object_object_get_ex(root, "otherData", &other)) {
                fprintf(stderr, "hbg-bench: --trace: %s is not hbgctl's trace JSON (%s)\n", path,
                        json_util_get_last_err() ? json_util_get_last_err() : "no traceEvents or otherData");
                json_object_put(root);
                return -EPROTO;
        }
        s->duration_us = num(other, "duration_us");
        s->dropped = (uint64_t)num(other, "dropped");
        double threads = num(other, "threads");
        s->threads = threads > 0 && threads <= HBG_ENGINE_MAX_THREADS ? (unsigned)threads : 0;
        size_t n = json_object_array_length(events);
        s->edges = calloc(4 * n + 1, sizeof(*s->edges));
        for (unsigned i = 0; i < s->threads; i++)
                s->t[i].waits = calloc(n + 1, sizeof(double));
        int err = s->edges ? 0 : -ENOMEM;
        for (unsigned i = 0; i < s->threads && err == 0; i++)
                err = s->t[i].waits ? 0 : -ENOMEM;
        /* The graph's span: the first "b" of category graph or task slice
         * (hbgd runs a graph's tasks while the producer still writes it,
         * before it notices the graph whole) to the last "e" or slice end. */
        s->begin_us = -1;
        for (size_t i = 0; i < n && err == 0; i++) {
                json_object *e = json_object_array_get_idx(events, i);
                const char *ph = str(e, "ph"), *cat = str(e, "cat");
                bool graph = strcmp(cat, "graph") == 0, task = strcmp(cat, "task") == 0;
                double ts = num(e, "ts");
                if (((graph && strcmp(ph, "b") == 0) || (task && strcmp(ph, "X") == 0)) &&
                    (s->begin_us < 0 || ts < s->begin_us))
                        s->begin_us = ts;
                double end = graph && strcmp(ph, "e") == 0 ? ts : task && strcmp(ph, "X") == 0 ? ts + num(e, "dur") : -1;
                if (end > s->end_us)
                        s->end_us = end;
        }
        if (s->begin_us < 0 || s->end_us <= s->begin_us) /* nothing ran within the trace */
                s->begin_us = 0, s->end_us = s->duration_us;
        for (size_t i = 0; i < n && err == 0; i++) {
                json_object *e = json_object_array_get_idx(events, i), *args, *w;
                double tid = num(e, "tid");
                if (tid < 0 || tid >= s->threads)
                        continue;
                struct trace_thread *t = &s->t[(unsigned)tid];
                const char *ph = str(e, "ph");
                if (strcmp(ph, "i") == 0) {
                        t->parks += strcmp(str(e, "name"), "park") == 0;
                        t->wakes += strcmp(str(e, "name"), "wake") == 0;
                        continue;
                }
                if (strcmp(ph, "X") != 0 || strcmp(str(e, "cat"), "task") != 0)
                        continue;
                double start = num(e, "ts"), end = start + num(e, "dur");
                start = start < s->begin_us ? s->begin_us : start;
                end = end > s->end_us ? s->end_us : end;
                t->tasks++;
                s->slices++;
                if (end > start) {
                        t->busy_us += end - start;
                        double *p = &s->edges[2 * s->n_edges];
                        p[0] = start, p[1] = 1, p[2] = end, p[3] = -1;
                        s->n_edges += 2;
                }
                if (json_object_object_get_ex(e, "args", &args) && json_object_object_get_ex(args, "wait_us", &w) && w)
                        t->waits[t->n_waits++] = json_object_get_double(w);
        }
        json_object_put(root);
        if (err < 0)
                fprintf(stderr, "hbg-bench: --trace: out of memory reading %s\n", path);
        return err;
}

static void summary_print(struct trace_summary *s) {
        double span = s->end_us - s->begin_us;
        printf("graph: %.0f us from its first task to its retirement (trace %.0f us, %" PRIu64
               " events dropped), %" PRIu64 " task slices\n",
               span, s->duration_us, s->dropped, s->slices);
        printf("%-12s %7s %9s %6s %15s %6s %6s\n", "thread", "tasks", "busy_us", "busy%", "median_wait_us", "parks",
               "wakes");
        double busy = 0, *all = calloc(s->slices + 1, sizeof(*all));
        size_t n_all = 0;
        uint64_t parks = 0, wakes = 0;
        for (unsigned i = 0; i < s->threads; i++) {
                struct trace_thread *t = &s->t[i];
                if (all) {
                        memcpy(all + n_all, t->waits, t->n_waits * sizeof(*all));
                        n_all += t->n_waits;
                }
                char wait[32] = "-";
                if (t->n_waits)
                        snprintf(wait, sizeof(wait), "%.1f", median(t->waits, t->n_waits));
                printf("scheduler %-2u %7" PRIu64 " %9.0f %5.0f%% %15s %6" PRIu64 " %6" PRIu64 "\n", i, t->tasks,
                       t->busy_us, span > 0 ? 100 * t->busy_us / span : 0, wait, t->parks, t->wakes);
                busy += t->busy_us;
                parks += t->parks;
                wakes += t->wakes;
        }
        char wait[32] = "-";
        if (all && n_all)
                snprintf(wait, sizeof(wait), "%.1f", median(all, n_all));
        printf("%-12s %7" PRIu64 " %9.0f %5.0f%% %15s %6" PRIu64 " %6" PRIu64 "\n", "all", s->slices, busy,
               span > 0 && s->threads ? 100 * busy / span / s->threads : 0, wait, parks, wakes);
        free(all);
        /* How many slices ran at once, swept over the graph's span. */
        double at[HBG_ENGINE_MAX_THREADS + 1] = { 0 }, prev = s->begin_us;
        int running = 0;
        qsort(s->edges, s->n_edges, 2 * sizeof(double), cmp_edge);
        for (size_t i = 0; i < s->n_edges; i++) {
                const double *p = &s->edges[2 * i];
                if (running >= 0 && running <= (int)HBG_ENGINE_MAX_THREADS)
                        at[running] += p[0] - prev;
                prev = p[0];
                running += (int)p[1];
        }
        at[0] += s->end_us - prev;
        printf("share of the graph's time with N tasks running:");
        for (unsigned k = 0; k <= s->threads; k++)
                printf(" %u: %.0f%%", k, span > 0 ? 100 * at[k] / span : 0);
        printf("\n");
}

/* ------------------------------------------------------------ the run */

/* Waits until hbgd's log says a trace started (0), hbgctl exited first
 * (-ECHILD) or TRACE_ON_MS passed (-ETIMEDOUT). */
static int wait_trace_on(const struct bench_hbgd *h, struct bench_child *ctl) {
        int64_t deadline = bench_now_ns() + (int64_t)TRACE_ON_MS * 1000000;
        char line[512];
        while (bench_now_ns() < deadline) {
                FILE *f = fopen(h->log, "r");
                bool on = false;
                while (f && !on && fgets(line, sizeof(line), f))
                        on = strstr(line, "): trace of ") && strstr(line, " started");
                if (f)
                        fclose(f);
                if (on)
                        return 0;
                /* Its stdout stays empty (-o FILE): its end is hbgctl's exit. */
                struct pollfd p = { .fd = ctl->from_fd, .events = POLLIN };
                if (poll(&p, 1, 1) > 0 && read(ctl->from_fd, line, sizeof(line)) == 0)
                        return -ECHILD;
        }
        return -ETIMEDOUT;
}

/* The traced run on h: 0, or -errno after printing why. */
static int traced_run(struct cmp *c, struct bench_hbgd *h, const char *hbgctl, const char *shape, uint64_t size,
                      const char *json, const char *svg, uint64_t *tasks) {
        struct bench_child prod, ctl;
        char line[512];
        int err = cmp_producer_start(c, h->socket, shape, size, 0, NULL, &prod);
        if (err < 0) {
                fprintf(stderr, "hbg-bench: --trace: cannot start a producer: %s\n", strerror(-err));
                return err;
        }
        if ((err = cmp_expect(&prod, "connect_ns ", line, sizeof(line), STEP_MS)) == 0 &&
            (err = bench_child_send(&prod, "run")) == 0)
                err = cmp_expect(&prod, "rep ", line, sizeof(line), STEP_MS);
        const char *argv[] = { hbgctl, "--socket", h->socket, "trace", "--duration", TRACE_MAX_S,
                               "-o", json, "--svg", svg, NULL };
        bool ctl_started = false;
        if (err == 0) {
                unlink(json);
                unlink(svg);
                err = bench_child_start(&ctl, "hbgctl trace", argv);
                ctl_started = err == 0;
                if (err < 0)
                        fprintf(stderr, "hbg-bench: --trace: cannot run %s: %s\n", hbgctl, strerror(-err));
        }
        if (err == 0 && (err = wait_trace_on(h, &ctl)) < 0)
                fprintf(stderr, "hbg-bench: --trace: `hbgctl trace` %s\n",
                        err == -ECHILD ? "exited before its trace started (its message above)"
                                       : "started no trace within 10 s (hbgd's log said none)");
        if (err == 0 && (err = bench_child_send(&prod, "run")) == 0 &&
            (err = cmp_expect(&prod, "rep ", line, sizeof(line), STEP_MS)) == 0)
                *tasks = (uint64_t)cmp_field(line, "tasks");
        if (ctl_started) {
                /* SIGINT: hbgctl stops the recording and writes both files. */
                if (ctl.pid > 0)
                        kill(ctl.pid, SIGINT);
                /* After a failure, a short wait: hbgctl may be stuck on
                 * an hbgd that does not answer. */
                int st = bench_child_finish(&ctl, err ? 5000 : STEP_MS);
                if (st != 0 && err == 0) {
                        fprintf(stderr, "hbg-bench: --trace: `hbgctl trace` exited with %d (its message above)\n", st);
                        err = -EIO;
                }
        }
        if (bench_child_send(&prod, "quit") == 0)
                cmp_expect(&prod, "rss_kib ", line, sizeof(line), STEP_MS);
        int st = bench_child_finish(&prod, err ? 2000 : STEP_MS);
        if (st != 0 && err == 0) {
                fprintf(stderr, "hbg-bench: --trace: %s exited with %d\n", prod.name, st);
                err = -EIO;
        }
        return err;
}

void cmp_trace(struct cmp *c) {
        const char *shape = dag_shape_name(c->trace_shape);
        const char *mode = completion_mode_name(HBG_COMPLETION_DEFAULT);
        uint64_t size = c->trace_size ? c->trace_size : CMP_TRACE_SIZE;
        char hbgd[300], hbgctl[300], json[512], svg[512], conf[CMP_CONFIG_LEN];
        char body[48] = "noop";
        if (c->trace_task_us)
                snprintf(body, sizeof(body), "spin_ns %" PRIu64 " us", c->trace_task_us);
        printf("\n-- trace: one %s graph (about %" PRIu64 " %s tasks), completion %s, %u threads [%s]\n", shape,
               size, body, mode, TRACE_THREADS, cmp_elapsed(c));
        snprintf(hbgd, sizeof(hbgd), "%s/hbgd", c->dir);
        snprintf(hbgctl, sizeof(hbgctl), "%s/hbgctl", c->dir);
        snprintf(json, sizeof(json), "%s/trace.json", c->out);
        snprintf(svg, sizeof(svg), "%s/trace.svg", c->out);
        if (access(hbgctl, X_OK) < 0) {
                fprintf(stderr, "hbg-bench: --trace: no hbgctl beside hbg-bench (%s: %s): build it (make)\n", hbgctl,
                        strerror(errno));
                c->failures++;
                return;
        }
        struct bench_hbgd h;
        if (bench_hbgd_start_config(&h, hbgd, mode, TRACE_THREADS, cmp_hbgd_config(c, conf, sizeof(conf)), NULL,
                                    30000) < 0) {
                c->failures++;
                return;
        }
        /* The shape's tasks: noop or spin_ns kernels, no host functions. */
        const char *kernel = c->kernel;
        unsigned host_every = c->host_every;
        c->kernel = NULL;
        c->host_every = 0;
        c->task_ns = c->trace_task_us * 1000;
        uint64_t tasks = 0;
        int err = traced_run(c, &h, hbgctl, shape, size, json, svg, &tasks);
        c->kernel = kernel;
        c->host_every = host_every;
        c->task_ns = 0;
        int st = bench_hbgd_stop(&h, 10000);
        if (st != 0 && err == 0) {
                fprintf(stderr, "hbg-bench: --trace: hbgd did not exit cleanly (%d)\n", st);
                err = -EIO;
        }
        struct trace_summary s = { 0 };
        if (err == 0 && (err = summary_read(json, &s)) == 0) {
                printf("%s: %" PRIu64 " tasks run\n", shape, tasks);
                summary_print(&s);
                if (s.slices < tasks)
                        printf("note: the trace holds %" PRIu64 " task slices of %" PRIu64 " tasks run: %s\n",
                               s.slices, tasks, s.dropped ? "events were dropped" : "part of the graph ran untraced");
        }
        summary_free(&s);
        if (err < 0) {
                c->failures++;
                return;
        }
        printf("trace: %s (open it in https://ui.perfetto.dev or chrome://tracing), picture: %s\n", json, svg);
}
