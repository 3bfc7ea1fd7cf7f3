/* SPDX-License-Identifier: MIT */
/* The comparison's output: table, CSVs, plots (bench/report.h). */
#include "bench/report.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "daemon/engine/engine.h"

/* The systems of overhead.png, left to right: hbg under each completion
 * policy (the engine's table), then the peers. */
static const struct {
        const char *system, *title;
} plot_peers[] = {
        { "tbb", "oneTBB" }, { "openmp", "OpenMP" }, { "starpu", "StarPU" }, { "taskflow", "Taskflow" },
        { "floor", "floor" },
};
#define N_PLOT_PEERS (sizeof(plot_peers) / sizeof(plot_peers[0]))
#define N_PLOT_SYSTEMS (completion_mode_count() + N_PLOT_PEERS)

/* Column i of overhead.dat: its system and mode ("" for a peer). */
static void plot_system(unsigned i, const char **system, const char **mode) {
        unsigned n_modes = completion_mode_count();
        *system = i < n_modes ? "hbg" : plot_peers[i - n_modes].system;
        *mode = i < n_modes ? completion_mode_name(i) : "";
}

static void plot_title(FILE *f, unsigned i) {
        unsigned n_modes = completion_mode_count();
        if (i < n_modes)
                fprintf(f, " hbg-%s", completion_mode_name(i));
        else
                fprintf(f, " %s", plot_peers[i - n_modes].title);
}

static int mkdir_p(const char *dir) {
        char path[256];
        snprintf(path, sizeof(path), "%s", dir);
        for (char *p = path + 1; *p; p++)
                if (*p == '/') {
                        *p = 0;
                        if (mkdir(path, 0755) < 0 && errno != EEXIST)
                                return -errno;
                        *p = '/';
                }
        return mkdir(path, 0755) < 0 && errno != EEXIST ? -errno : 0;
}

static FILE *open_in(struct report *r, const char *name, const char *header) {
        char path[320];
        snprintf(path, sizeof(path), "%s/%s", r->dir, name);
        FILE *f = fopen(path, "w");
        if (!f)
                fprintf(stderr, "hbg-bench: %s: %s\n", path, strerror(errno));
        else if (header)
                fprintf(f, "%s\n", header);
        return f;
}

int report_open(struct report *r, const char *dir, unsigned plot_threads) {
        memset(r, 0, sizeof(*r));
        snprintf(r->dir, sizeof(r->dir), "%s", dir);
        r->plot_threads = plot_threads;
        int err = mkdir_p(dir);
        if (err < 0) {
                fprintf(stderr, "hbg-bench: cannot create %s: %s\n", dir, strerror(-err));
                return err;
        }
        r->results = open_in(r, "results.csv", REPORT_RESULTS_HEADER);
        r->metrics = open_in(r, "metrics.csv", REPORT_METRICS_HEADER);
        if (!r->results || !r->metrics) {
                if (r->results)
                        fclose(r->results);
                if (r->metrics)
                        fclose(r->metrics);
                return -EIO;
        }
        return 0;
}

void report_table_header(struct report *r) {
        (void)r;
        printf("%-17s %-15s %-13s %3s %3s %8s %11s %10s %9s %9s %9s\n", "shape", "system", "mode",
               "thr", "cli", "tasks", "tasks/s", "ns/task", "p50_us", "p99_us", "rss_kib");
}

/* A CSV field: empty for NaN (a figure that does not apply). */
static void csv_num(FILE *f, double v) {
        if (!isnan(v))
                fprintf(f, "%.1f", v);
}

/* The names report_row() copied for a kept row. */
static void row_free_names(struct report_row *w) {
        free((char *)w->shape);
        free((char *)w->system);
        free((char *)w->mode);
}

static void value_free_names(struct report_value *v) {
        free(v->metric);
        free(v->shape);
        free(v->system);
        free(v->mode);
}

void report_row(struct report *r, const struct report_row *row) {
        double p50 = row->has_latency ? row->p50_us : NAN, p99 = row->has_latency ? row->p99_us : NAN;
        char s50[16] = "-", s99[16] = "-";
        if (row->has_latency) {
                snprintf(s50, sizeof(s50), "%.1f", p50);
                snprintf(s99, sizeof(s99), "%.1f", p99);
        }
        printf("%-17s %-15s %-13s %3u %3u %8" PRIu64 " %11.0f %10.1f %9s %9s %9" PRIu64 "\n", row->shape,
               row->system, row->mode[0] ? row->mode : "-", row->threads, row->clients, row->tasks,
               row->tasks_per_s, row->ns_per_task, s50, s99, row->rss_kib);
        fflush(stdout);
        fprintf(r->results, "%s,%s,%s,%u,%u,%" PRIu64 ",%.0f,%.1f,", row->shape, row->system, row->mode,
                row->threads, row->clients, row->tasks, row->tasks_per_s, row->ns_per_task);
        csv_num(r->results, p50);
        fputc(',', r->results);
        csv_num(r->results, p99);
        fprintf(r->results, ",%" PRIu64 "\n", row->rss_kib);
        fflush(r->results);
        if (r->n_rows == r->cap_rows) {
                unsigned cap = r->cap_rows ? 2 * r->cap_rows : 64;
                struct report_row *v = realloc(r->rows, cap * sizeof(*v));
                if (!v)
                        return; /* the plot misses a bar; the CSV has it */
                r->rows = v;
                r->cap_rows = cap;
        }
        /* The plots read the rows at report_close(), after the callers'
         * buffers are gone (a peer's "tbb-rerun" is built on its stack):
         * the row keeps copies of its names. */
        struct report_row kept = *row;
        kept.shape = strdup(row->shape);
        kept.system = strdup(row->system);
        kept.mode = strdup(row->mode);
        if (!kept.shape || !kept.system || !kept.mode) {
                row_free_names(&kept);
                return; /* as above */
        }
        r->rows[r->n_rows++] = kept;
}

void report_metric(struct report *r, const char *metric, const char *shape, const char *system,
                   const char *mode, unsigned threads, unsigned clients, double value,
                   const char *unit) {
        fprintf(r->metrics, "%s,%s,%s,%s,", metric, shape ? shape : "", system ? system : "",
                mode ? mode : "");
        if (threads)
                fprintf(r->metrics, "%u", threads);
        fputc(',', r->metrics);
        if (clients)
                fprintf(r->metrics, "%u", clients);
        fprintf(r->metrics, ",%.6g,%s\n", value, unit);
        fflush(r->metrics);
        if (r->n_values == r->cap_values) {
                unsigned cap = r->cap_values ? 2 * r->cap_values : 256;
                struct report_value *v = realloc(r->values, cap * sizeof(*v));
                if (!v)
                        return; /* the targets miss it (said so: not measured); the CSV has it */
                r->values = v;
                r->cap_values = cap;
        }
        struct report_value kept = { strdup(metric), strdup(shape ? shape : ""), strdup(system ? system : ""),
                                     strdup(mode ? mode : ""), threads, clients, value };
        if (!kept.metric || !kept.shape || !kept.system || !kept.mode) {
                value_free_names(&kept);
                return; /* as above */
        }
        r->values[r->n_values++] = kept;
}

const struct report_row *report_find_row(const struct report *r, const char *shape, const char *system,
                                         const char *mode, unsigned threads, unsigned clients) {
        for (unsigned k = r->n_rows; k-- > 0;) {
                const struct report_row *w = &r->rows[k];
                if (strcmp(w->shape, shape) == 0 && strcmp(w->system, system) == 0 && strcmp(w->mode, mode) == 0 &&
                    (!threads || w->threads == threads) && (!clients || w->clients == clients))
                        return w;
        }
        return NULL;
}

bool report_find_value(const struct report *r, const char *metric, const char *shape, const char *system,
                       const char *mode, unsigned threads, unsigned clients, double *ret) {
        for (unsigned k = r->n_values; k-- > 0;) {
                const struct report_value *v = &r->values[k];
                if (strcmp(v->metric, metric) == 0 && strcmp(v->shape, shape) == 0 &&
                    strcmp(v->system, system) == 0 && (!mode || strcmp(v->mode, mode) == 0) &&
                    (!threads || v->threads == threads) && (!clients || v->clients == clients)) {
                        *ret = v->value;
                        return true;
                }
        }
        return false;
}

void report_latency(struct report *r, const char *label, double p50_us, double p99_us) {
        if (r->n_latency == sizeof(r->latency) / sizeof(r->latency[0]))
                return;
        struct report_latency *l = &r->latency[r->n_latency++];
        snprintf(l->label, sizeof(l->label), "%s", label);
        l->p50_us = p50_us;
        l->p99_us = p99_us;
}

/* ---------------------------------------------------------------- plots */

static const struct report_row *find_row(const struct report *r, const char *shape, unsigned i) {
        const struct report_row *found = NULL;
        const char *system, *mode;
        plot_system(i, &system, &mode);
        for (unsigned k = 0; k < r->n_rows; k++) {
                const struct report_row *w = &r->rows[k];
                /* The floor is one thread, whatever the others run. */
                bool threads_ok = w->threads == r->plot_threads || strcmp(w->system, "floor") == 0;
                if (w->clients == 1 && threads_ok && strcmp(w->shape, shape) == 0 &&
                    strcmp(w->system, system) == 0 && strcmp(w->mode, mode) == 0)
                        found = w;
        }
        return found;
}

/* Which columns of overhead.dat have a figure (the plot draws those). */
static bool column_used(const struct report *r, unsigned i) {
        for (unsigned k = 0; k < r->n_rows; k++)
                if (find_row(r, r->rows[k].shape, i))
                        return true;
        return false;
}

static int write_overhead_data(struct report *r) {
        FILE *f = open_in(r, "overhead.dat", NULL);
        if (!f)
                return -EIO;
        fprintf(f, "shape");
        for (unsigned i = 0; i < N_PLOT_SYSTEMS; i++)
                plot_title(f, i);
        fputc('\n', f);
        /* Shapes in the order they were run, those with a bar (not the
         * kernel rows' shapes: their systems are not the plot's). */
        for (unsigned k = 0; k < r->n_rows; k++) {
                bool seen = false, bar = false;
                for (unsigned j = 0; j < k && !seen; j++)
                        seen = strcmp(r->rows[j].shape, r->rows[k].shape) == 0;
                for (unsigned i = 0; i < N_PLOT_SYSTEMS && !bar; i++)
                        bar = find_row(r, r->rows[k].shape, i) != NULL;
                if (seen || !bar)
                        continue;
                fprintf(f, "%s", r->rows[k].shape);
                for (unsigned i = 0; i < N_PLOT_SYSTEMS; i++) {
                        const struct report_row *w = find_row(r, r->rows[k].shape, i);
                        if (w)
                                fprintf(f, " %.1f", w->ns_per_task);
                        else
                                fprintf(f, " ?");
                }
                fputc('\n', f);
        }
        return fclose(f) == 0 ? 0 : -EIO;
}

static int write_latency_data(struct report *r) {
        FILE *f = open_in(r, "latency.dat", NULL);
        if (!f)
                return -EIO;
        fprintf(f, "case p50 p99\n");
        for (unsigned i = 0; i < r->n_latency; i++)
                fprintf(f, "\"%s\" %.2f %.2f\n", r->latency[i].label, r->latency[i].p50_us,
                        r->latency[i].p99_us);
        return fclose(f) == 0 ? 0 : -EIO;
}

static const char overhead_gp[] =
        "set terminal pngcairo size 1400,700 noenhanced\n"
        "set output dir.'/overhead.png'\n"
        "set title sprintf('ns per task, build + run, one producer, %s threads (log scale; lower is better)', threads)\n"
        "set datafile missing '?'\n"
        "set style data histogram\n"
        "set style histogram clustered gap 1\n"
        "set style fill solid 0.8 border -1\n"
        "set logscale y\n"
        "set ylabel 'ns per task'\n"
        "set grid ytics\n"
        "set key outside right top\n";

static const char latency_gp[] =
        "set terminal pngcairo size 1400,700 noenhanced\n"
        "set output dir.'/latency.png'\n"
        "set title 'graph latency, submit to the producer woken (us, log scale)'\n"
        "set style data histogram\n"
        "set style histogram clustered gap 1\n"
        "set style fill solid 0.8 border -1\n"
        "set logscale y\n"
        "set ylabel 'us'\n"
        "set grid ytics\n"
        "set xtics rotate by -30\n"
        "set key outside right top\n"
        "plot dir.'/latency.dat' using 2:xtic(1) title 'p50', '' using 3 title 'p99'\n";

/* Run gnuplot on script + plot (the plot command, if built at run time). */
static int gnuplot(struct report *r, const char *name, const char *script, const char *plot) {
        char path[320], dir_arg[300], thr_arg[64];
        snprintf(path, sizeof(path), "%s/%s.gp", r->dir, name);
        FILE *f = fopen(path, "w");
        if (!f || fputs(script, f) < 0 || fprintf(f, "%s\n", plot) < 0 || fclose(f) != 0) {
                fprintf(stderr, "hbg-bench: %s: %s\n", path, strerror(errno));
                return -EIO;
        }
        snprintf(dir_arg, sizeof(dir_arg), "dir='%s'", r->dir);
        snprintf(thr_arg, sizeof(thr_arg), "threads='%u'", r->plot_threads);
        fflush(NULL);
        pid_t pid = fork();
        if (pid < 0)
                return -errno;
        if (pid == 0) {
                execlp("gnuplot", "gnuplot", "-e", dir_arg, "-e", thr_arg, path, (char *)NULL);
                _exit(127);
        }
        int st;
        if (waitpid(pid, &st, 0) < 0 || !WIFEXITED(st) || WEXITSTATUS(st) != 0) {
                fprintf(stderr, "hbg-bench: gnuplot failed on %s\n", path);
                return -EIO;
        }
        return 0;
}

static bool have_gnuplot(void) {
        const char *path = getenv("PATH");
        char buf[512];
        for (const char *p = path ? path : "/usr/bin:/bin"; *p;) {
                size_t n = strcspn(p, ":");
                snprintf(buf, sizeof(buf), "%.*s/gnuplot", (int)n, p);
                if (access(buf, X_OK) == 0)
                        return true;
                p += n + (p[n] == ':');
        }
        return false;
}

int report_close(struct report *r) {
        int err = 0;
        if (fclose(r->results) != 0 || fclose(r->metrics) != 0) {
                fprintf(stderr, "hbg-bench: writing the CSVs in %s failed\n", r->dir);
                err = -EIO;
        }
        if (write_overhead_data(r) < 0 || write_latency_data(r) < 0)
                err = -EIO;
        if (!have_gnuplot())
                fprintf(stderr, "hbg-bench: gnuplot is not installed: no plots (make bench-deps installs it)\n");
        else if (err == 0) {
                char plot[1024] = "";
                size_t at = 0;
                for (unsigned i = 0; i < N_PLOT_SYSTEMS && at < sizeof(plot) - 128; i++)
                        if (column_used(r, i))
                                at += (size_t)snprintf(plot + at, sizeof(plot) - at, "%s%s using %u%s title columnhead(%u)",
                                                       at ? ", " : "plot ", at ? "''" : "dir.'/overhead.dat'", i + 2,
                                                       at ? "" : ":xtic(1)", i + 2);
                if (at && gnuplot(r, "overhead", overhead_gp, plot) < 0)
                        err = -EIO;
                else
                        r->overhead_png = at > 0;
                if (r->n_latency && gnuplot(r, "latency", latency_gp, "") < 0)
                        err = -EIO;
                else
                        r->latency_png = r->n_latency > 0;
        }
        for (unsigned k = 0; k < r->n_rows; k++)
                row_free_names(&r->rows[k]);
        free(r->rows);
        r->rows = NULL;
        r->n_rows = r->cap_rows = 0;
        for (unsigned k = 0; k < r->n_values; k++)
                value_free_names(&r->values[k]);
        free(r->values);
        r->values = NULL;
        r->n_values = r->cap_values = 0;
        return err;
}
