/* SPDX-License-Identifier: MIT */
/*
 * The comparison's hbg part (bench/compare.h): producers through
 * libhbgclient against an hbgd of the benchmark's own, one per completion
 * mode and thread count.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench/bench_util.h"
#include "bench/child.h"
#include "bench/compare.h"
#include "bench/dag.h"
#include "bench/hbgd_proc.h"
#include "bench/probes.h"
#include "daemon/engine/engine.h"

void cmp_run_free(struct cmp_run *r) {
        free(r->graph_ns);
        r->graph_ns = NULL;
}

static void stop_all(struct bench_child *kids, unsigned n) {
        for (unsigned i = 0; i < n; i++)
                if (kids[i].pid > 0)
                        bench_child_finish(&kids[i], 5000);
}

int64_t cmp_field(const char *line, const char *key) {
        size_t n = strlen(key);
        for (const char *p = line; (p = strstr(p, key)); p += n)
                if ((p == line || p[-1] == ' ') && p[n] == ' ')
                        return strtoll(p + n + 1, NULL, 10);
        return -1;
}

/* Prints what kid said instead (its "error ..." line). */
int cmp_expect(struct bench_child *kid, const char *want, char *line, size_t len, int timeout_ms) {
        int r = bench_child_line(kid, line, len, timeout_ms);
        if (r == 1 && strncmp(line, want, strlen(want)) == 0)
                return 0;
        fprintf(stderr, "hbg-bench: %s: expected '%s', got %s%s\n", kid->name, want,
                r == 1 ? line : r == 0 ? "end of output" : strerror(-r), r == 1 ? "" : "");
        return -EPROTO;
}

int cmp_producer_start(struct cmp *c, const char *socket, const char *shape, uint64_t size, unsigned i,
                       const char *const *wrap, struct bench_child *kid) {
        char size_s[24], seed_s[24], floats_s[24], every_s[16], spin_s[24], host_s[16], task_s[24], name[64];
        const char *argv[52];
        unsigned n = 0;
        snprintf(size_s, sizeof(size_s), "%" PRIu64, size);
        snprintf(floats_s, sizeof(floats_s), "%" PRIu64, c->floats);
        snprintf(every_s, sizeof(every_s), "%u", c->host_every);
        snprintf(spin_s, sizeof(spin_s), "%" PRIu64, c->spin_iters);
        snprintf(host_s, sizeof(host_s), "%u", c->host_threads);
        snprintf(task_s, sizeof(task_s), "%" PRIu64, c->task_ns);
        for (unsigned w = 0; wrap && wrap[w] && n < 24; w++)
                argv[n++] = wrap[w];
        snprintf(seed_s, sizeof(seed_s), "%" PRIu64, c->seed + i);
        argv[n++] = c->self;
        argv[n++] = "producer";
        argv[n++] = "--socket";
        argv[n++] = socket;
        argv[n++] = "--shape";
        argv[n++] = shape;
        argv[n++] = "--size";
        argv[n++] = size_s;
        argv[n++] = "--seed";
        argv[n++] = seed_s;
        if (c->quick)
                argv[n++] = "--quick";
        if (c->kernel) {
                argv[n++] = "--kernel";
                argv[n++] = c->kernel;
                argv[n++] = "--floats";
                argv[n++] = floats_s;
        }
        if (c->host_every) {
                argv[n++] = "--host-every";
                argv[n++] = every_s;
                argv[n++] = "--spin";
                argv[n++] = spin_s;
                argv[n++] = "--host-threads";
                argv[n++] = host_s;
        }
        if (c->task_ns) {
                argv[n++] = "--task-ns";
                argv[n++] = task_s;
        }
        argv[n] = NULL;
        snprintf(name, sizeof(name), "producer %u (%s)", i, shape);
        return bench_child_start(kid, name, argv);
}

int cmp_run_producers(struct cmp *c, const char *socket, const char *shape, uint64_t size, unsigned clients,
                      unsigned warmup, unsigned repeat, const char *const *wrap, const char *command,
                      struct cmp_run *ret) {
        struct bench_child kids[64];
        char line[512];
        int err = 0;

        memset(ret, 0, sizeof(*ret));
        if (clients > 64 || repeat > 64)
                return -EINVAL;
        ret->graph_ns = calloc((size_t)repeat * clients, sizeof(*ret->graph_ns));
        if (!ret->graph_ns)
                return -ENOMEM;
        for (unsigned i = 0; i < clients; i++)
                if ((err = cmp_producer_start(c, socket, shape, size, i, wrap, &kids[i])) < 0) {
                        stop_all(kids, i);
                        return err;
                }
        /* Connected, one by one: the connection is reported apart. */
        for (unsigned i = 0; i < clients && err == 0; i++)
                if ((err = cmp_expect(&kids[i], "connect_ns ", line, sizeof(line), CMP_LINE_MS)) == 0)
                        ret->connect_ns[i] = (double)cmp_field(line, "connect_ns");
        for (unsigned r = 0; r < warmup + repeat && err == 0; r++) {
                for (unsigned i = 0; i < clients && err == 0; i++)
                        err = bench_child_send(&kids[i], command);
                int64_t first = INT64_MAX, last = 0;
                uint64_t tasks = 0;
                for (unsigned i = 0; i < clients && err == 0; i++) {
                        if ((err = cmp_expect(&kids[i], "rep ", line, sizeof(line), CMP_LINE_MS)) < 0)
                                break;
                        int64_t s = cmp_field(line, "start_ns"), e = cmp_field(line, "end_ns");
                        first = s < first ? s : first;
                        last = e > last ? e : last;
                        tasks += (uint64_t)cmp_field(line, "tasks");
                        if (r >= warmup)
                                ret->graph_ns[(r - warmup) * clients + i] = (double)(e - s);
                }
                if (err == 0 && r == 0)
                        ret->first_wall_ns = (double)(last - first);
                if (err == 0 && r >= warmup) {
                        ret->wall_ns[r - warmup] = (double)(last - first);
                        ret->tasks = tasks;
                        ret->reps = r - warmup + 1;
                }
        }
        for (unsigned i = 0; i < clients; i++) {
                if (err == 0 && bench_child_send(&kids[i], "quit") == 0 &&
                    cmp_expect(&kids[i], "rss_kib ", line, sizeof(line), CMP_LINE_MS) == 0)
                        ret->rss_kib += (uint64_t)cmp_field(line, "rss_kib");
                int st = bench_child_finish(&kids[i], err ? 2000 : CMP_LINE_MS);
                if (err == 0 && st != 0) {
                        fprintf(stderr, "hbg-bench: %s exited with %d\n", kids[i].name, st);
                        err = -EIO;
                }
        }
        return err;
}

/* hbgd's per-thread counters, summed (hbgctl --json threads). */
static const char *const counter_names[] = { "published", "failsafe_pushes", "watermark_advances",
                                             "watermark_cas_failures", "parks", "wakeups" };
#define N_COUNTERS (sizeof(counter_names) / sizeof(counter_names[0]))

/* Runs `hbgctl --socket S --json VERB` and hands each line of its object
 * to take(); 0 once hbgctl exited 0. */
static int hbgctl_json_lines(struct cmp *c, const char *socket, const char *verb,
                             void (*take)(const char *line, void *arg), void *arg) {
        char hbgctl[300], line[512];
        snprintf(hbgctl, sizeof(hbgctl), "%s/hbgctl", c->dir);
        const char *argv[] = { hbgctl, "--socket", socket, "--json", verb, NULL };
        struct bench_child kid;
        int err = bench_child_start(&kid, "hbgctl", argv);
        if (err < 0)
                return err;
        while (bench_child_line(&kid, line, sizeof(line), 10000) == 1)
                take(line, arg);
        return bench_child_finish(&kid, 10000) == 0 ? 0 : -EIO;
}

/* One line of `threads`: its counters add to the sums. */
static void take_counters(const char *line, void *arg) {
        uint64_t *sum = arg;
        for (unsigned i = 0; i < N_COUNTERS; i++) {
                char key[64];
                const char *p;
                snprintf(key, sizeof(key), "\"%s\":", counter_names[i]);
                if ((p = strstr(line, key)))
                        sum[i] += strtoull(p + strlen(key), NULL, 10);
        }
}

/* One line of `status`: the daemon's "sessions" count (a number; the
 * "sessions" list that follows it is an array, not a count). */
static void take_sessions(const char *line, void *arg) {
        long *sessions = arg;
        const char *p = strstr(line, "\"sessions\":");
        if (!p)
                return;
        p += strlen("\"sessions\":");
        while (*p == ' ')
                p++;
        if (*p >= '0' && *p <= '9')
                *sessions = strtol(p, NULL, 10);
}

static int read_counters_once(struct cmp *c, const char *socket, uint64_t *ret, long *sessions) {
        memset(ret, 0, N_COUNTERS * sizeof(*ret));
        *sessions = -1;
        int err = hbgctl_json_lines(c, socket, "threads", take_counters, ret);
        if (err == 0)
                err = hbgctl_json_lines(c, socket, "status", take_sessions, sessions);
        return err;
}

/* The counters once the row's sessions are gone and hbgd folded their
 * rings' counters into its threads' (it collects removed rings every
 * 100 ms): no session, and the same figures twice 150 ms apart. */
static int read_counters(struct cmp *c, const char *socket, uint64_t *ret) {
        uint64_t prev[N_COUNTERS];
        long sessions;
        int err = read_counters_once(c, socket, prev, &sessions);
        for (int i = 0; err == 0 && i < 20; i++) {
                usleep(150 * 1000);
                if ((err = read_counters_once(c, socket, ret, &sessions)) < 0)
                        break;
                if (sessions == 0 && memcmp(prev, ret, sizeof(prev)) == 0)
                        return 0;
                memcpy(prev, ret, sizeof(prev));
        }
        return err < 0 ? err : -EAGAIN;
}

/* hbgd's peak RSS from now on: writing 5 to clear_refs resets VmHWM. */
static void reset_peak_rss(pid_t pid) {
        char path[64];
        snprintf(path, sizeof(path), "/proc/%d/clear_refs", (int)pid);
        FILE *f = fopen(path, "w");
        if (f) {
                fputs("5", f);
                fclose(f);
        }
}

/* One row: `clients` producers building and running shape k; with replay,
 * one producer launching the shape recorded in its first (warm-up) run,
 * beside the peers' reruns of a graph they built once. */
static void hbg_row(struct cmp *c, struct bench_hbgd *h, const char *mode, unsigned threads, unsigned k,
                    unsigned clients, bool replay) {
        const char *shape = cmp_shape(c, k);
        const char *system = replay ? "hbg-replay" : "hbg";
        struct cmp_run run;
        uint64_t before[N_COUNTERS], after[N_COUNTERS];
        bool counters = read_counters(c, h->socket, before) == 0;
        reset_peak_rss(h->pid);
        /* A replay's first repetition records the graph: a warm-up. */
        unsigned warmup = replay && c->warmup == 0 ? 1 : c->warmup;
        int err = cmp_run_producers(c, h->socket, shape, cmp_size(c, k), clients, warmup, c->repeat, NULL,
                                    replay ? "replay" : "run", &run);
        if (err < 0 || run.reps == 0) {
                fprintf(stderr, "hbg-bench: %s, %s %s, %u threads, %u clients: failed (%s)\n", shape, system,
                        mode, threads, clients, strerror(-err));
                c->failures++;
                cmp_run_free(&run);
                return;
        }
        double min, median;
        double wall[64];
        memcpy(wall, run.wall_ns, run.reps * sizeof(double));
        bench_min_median(wall, run.reps, &min, &median);
        struct report_row row = {
                .shape = shape, .system = system, .mode = mode, .threads = threads, .clients = clients,
                .tasks = run.tasks, .ns_per_task = median / (double)run.tasks,
                .tasks_per_s = (double)run.tasks / (median / 1e9),
                .rss_kib = bench_proc_peak_rss_kib(h->pid) + run.rss_kib,
        };
        if (clients > 1) {
                unsigned n = run.reps * clients;
                row.has_latency = true;
                row.p50_us = probe_quantile(run.graph_ns, n, 0.50) / 1e3;
                row.p99_us = probe_quantile(run.graph_ns, n, 0.99) / 1e3;
        }
        if (c->reuse_pass) {
                /* Not a results.csv row (its columns have no place for the
                 * flag window): the figures go to the metrics, suffixed. */
                char metric[64];
                printf("%-11s %-10s %-13s %3u %3u %8" PRIu64 " %11.0f %10.1f   (flag_window %u)\n", shape, "hbg",
                       mode, threads, clients, row.tasks, row.tasks_per_s, row.ns_per_task, c->flag_window);
                snprintf(metric, sizeof(metric), "ns_per_task_flag_window_%u", c->flag_window);
                report_metric(&c->report, metric, shape, "hbg", mode, threads, clients, row.ns_per_task, "ns");
        } else {
                report_row(&c->report, &row);
                cmp_spread_metrics(c, shape, system, mode, threads, clients, run.wall_ns, run.reps, run.tasks);
        }
        if (replay) {
                cmp_run_free(&run);
                return;
        }
        if (c->reuse_pass) {
                /* after[]: declared above */
                if (counters && read_counters(c, h->socket, after) == 0) {
                        char metric[64];
                        uint64_t all = run.tasks * (c->warmup + run.reps);
                        snprintf(metric, sizeof(metric), "failsafe_pushes_per_task_flag_window_%u", c->flag_window);
                        report_metric(&c->report, metric, shape, "hbg", mode, threads, clients,
                                      (double)(after[1] - before[1]) / (double)all, "count");
                }
                cmp_run_free(&run);
                return;
        }
        /* A session's first graph runs on a window nobody touched yet. */
        if (c->warmup > 0 && run.first_wall_ns > 0)
                report_metric(&c->report, "first_graph_over_median", shape, "hbg", mode, threads, clients,
                              run.first_wall_ns / median, "ratio");
        double conn[64];
        memcpy(conn, run.connect_ns, clients * sizeof(double));
        bench_min_median(conn, clients, &min, &median);
        report_metric(&c->report, "connect_us_median", shape, "hbg", mode, threads, clients, median / 1e3, "us");
        report_metric(&c->report, "rss_hbgd_kib", shape, "hbg", mode, threads, clients,
                      (double)bench_proc_peak_rss_kib(h->pid), "KiB");
        report_metric(&c->report, "rss_producers_kib", shape, "hbg", mode, threads, clients,
                      (double)run.rss_kib, "KiB");
        /* What the completion policy did, per task of the row (warm-up
         * included): how often a stamp waited in the failsafe heap for its
         * flag slot's previous occupant (§3), how often the watermark moved. */
        if (counters && read_counters(c, h->socket, after) == 0) {
                uint64_t all = run.tasks * (c->warmup + run.reps);
                for (unsigned i = 1; i < N_COUNTERS; i++) {
                        char metric[64];
                        snprintf(metric, sizeof(metric), "%s_per_task", counter_names[i]);
                        report_metric(&c->report, metric, shape, "hbg", mode, threads, clients,
                                      (double)(after[i] - before[i]) / (double)all, "count");
                }
        }
        cmp_run_free(&run);
}


/* A graph file of shape k (noop tasks, `after` edges), for hbgctl run. */
static int write_graph_file(struct cmp *c, const char *path, const char *shape) {
        struct dag d;
        int err = dag_make(&d, shape, 0, true, c->seed);
        if (err < 0)
                return err;
        FILE *f = fopen(path, "w");
        if (!f) {
                dag_free(&d);
                return -errno;
        }
        fputs("{\"tensors\": {}, \"tasks\": [\n", f);
        for (uint32_t i = 0; i < d.n; i++) {
                fprintf(f, "%s{\"name\": \"t%u\", \"kernel\": \"noop\"", i ? ",\n" : "", i);
                uint32_t lo = d.fanin_start[i], hi = d.fanin_start[i + 1];
                if (hi > lo) {
                        fputs(", \"after\": [", f);
                        for (uint32_t e = lo; e < hi; e++)
                                fprintf(f, "%s\"t%u\"", e > lo ? ", " : "", d.fanins[e]);
                        fputc(']', f);
                }
                fputc('}', f);
        }
        fputs("]}\n", f);
        dag_free(&d);
        return fclose(f) == 0 ? 0 : -EIO;
}

/* hbgctl run of a graph file: the compile time (JSON to tasks) apart from
 * the run (first add to wait returned). */
static void hbgctl_compile(struct cmp *c, struct bench_hbgd *h, const char *mode, unsigned threads) {
        static const char *const shapes[] = { "chain", "layered" };
        for (unsigned s = 0; s < 2; s++) {
                char file[300], hbgctl[300], line[4096];
                snprintf(file, sizeof(file), "%s/graph-%s.json", c->out, shapes[s]);
                snprintf(hbgctl, sizeof(hbgctl), "%s/hbgctl", c->dir);
                if (write_graph_file(c, file, shapes[s]) < 0) {
                        c->failures++;
                        return;
                }
                const char *argv[] = { hbgctl, "--socket", h->socket, "--json", "run", file, NULL };
                struct bench_child kid;
                int64_t compile = -1, elapsed = -1, tasks = -1;
                if (bench_child_start(&kid, "hbgctl run", argv) == 0) {
                        /* One JSON object; read every line. */
                        while (bench_child_line(&kid, line, sizeof(line), CMP_LINE_MS) == 1) {
                                const char *p;
                                if ((p = strstr(line, "\"compile_us\":")))
                                        compile = strtoll(p + 13, NULL, 10);
                                if ((p = strstr(line, "\"elapsed_us\":")))
                                        elapsed = strtoll(p + 13, NULL, 10);
                                if ((p = strstr(line, "\"tasks\":")))
                                        tasks = strtoll(p + 8, NULL, 10);
                        }
                        if (bench_child_finish(&kid, 10000) != 0)
                                compile = -1;
                }
                unlink(file);
                if (compile < 0 || elapsed < 0 || tasks <= 0) {
                        fprintf(stderr, "hbg-bench: hbgctl run %s failed or did not report compile_us\n",
                                shapes[s]);
                        c->failures++;
                        continue;
                }
                report_metric(&c->report, "hbgctl_compile_ns_per_task", shapes[s], "hbg", mode, threads, 1,
                              1e3 * (double)compile / (double)tasks, "ns");
                report_metric(&c->report, "hbgctl_run_ns_per_task", shapes[s], "hbg", mode, threads, 1,
                              1e3 * (double)elapsed / (double)tasks, "ns");
                printf("  hbgctl run %s (%" PRId64 " tasks): compile %.0f ns/task, run %.0f ns/task\n", shapes[s],
                       tasks, 1e3 * (double)compile / (double)tasks, 1e3 * (double)elapsed / (double)tasks);
        }
}

/* The comparison again with few flags per session (RUNTIME_LOGIC.md §3):
 * every flag slot serves many tasks of a graph, and a completion may have
 * to wait in the failsafe heap for the slot's previous occupant. The
 * question the completion policies were designed around (docs/
 * PERFORMANCE.md). One producer, each mode, each shape. */
void cmp_hbg_reuse(struct cmp *c, unsigned mode_index, unsigned threads, unsigned flag_window) {
        const char *mode = completion_mode_name(mode_index);
        char hbgd[300], conf[CMP_CONFIG_LEN];
        struct bench_hbgd h;
        if (threads < completion_mode_min_threads(mode_index))
                return;
        c->flag_window = flag_window;
        c->reuse_pass = true;
        snprintf(hbgd, sizeof(hbgd), "%s/hbgd", c->dir);
        printf("\n-- hbg, completion %s, %u threads, flag_window %u [%s]\n", mode, threads, flag_window,
               cmp_elapsed(c));
        if (bench_hbgd_start_config(&h, hbgd, mode, threads, cmp_hbgd_config(c, conf, sizeof(conf)), NULL,
                                    30000) < 0)
                c->failures++;
        else {
                for (unsigned s = 0; s < c->n_shapes; s++)
                        hbg_row(c, &h, mode, threads, s, 1, false);
                if (bench_hbgd_stop(&h, 10000) != 0)
                        c->failures++;
        }
        c->flag_window = 0;
        c->reuse_pass = false;
}

void cmp_hbg(struct cmp *c, unsigned mode_index, unsigned threads) {
        const char *mode = completion_mode_name(mode_index);
        char hbgd[300];
        struct bench_hbgd h;
        if (threads < completion_mode_min_threads(mode_index)) {
                printf("(%s needs %u threads or more: skipped at %u)\n", mode, completion_mode_min_threads(mode_index),
                       threads);
                return;
        }
        snprintf(hbgd, sizeof(hbgd), "%s/hbgd", c->dir);
        printf("\n-- hbg, completion %s, %u threads [%s]\n", mode, threads, cmp_elapsed(c));
        char conf[CMP_CONFIG_LEN];
        if (bench_hbgd_start_config(&h, hbgd, mode, threads, cmp_hbgd_config(c, conf, sizeof(conf)), NULL,
                                    30000) < 0) {
                c->failures++;
                return;
        }
        report_table_header(&c->report);
        for (unsigned s = 0; s < c->n_shapes; s++)
                for (unsigned i = 0; i < c->n_clients; i++)
                        hbg_row(c, &h, mode, threads, s, c->clients[i], false);
        for (unsigned s = 0; s < c->n_shapes; s++)
                hbg_row(c, &h, mode, threads, s, 1, true);
        if (c->latency) {
                cmp_latency(c, &h, mode, threads);
                cmp_tensor_wait(c, &h, mode, threads);
                cmp_connect_burst(c, &h, mode, threads);
                cmp_fairness(c, &h, mode, threads);
        }
        hbgctl_compile(c, &h, mode, threads);
        cmp_idle_cpu(c, &h, mode, threads);
        int st = bench_hbgd_stop(&h, 10000);
        if (st != 0) {
                fprintf(stderr, "hbg-bench: hbgd (%s, %u threads) did not exit cleanly (%d)\n", mode, threads, st);
                c->failures++;
        }
}
