/* SPDX-License-Identifier: MIT */
/*
 * The comparison's output (bench/compare.c): the table on stdout,
 * results.csv (one row per shape x system x mode x threads x clients),
 * metrics.csv (every other figure, long format) and the two plots.
 */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#define REPORT_RESULTS_HEADER \
        "shape,system,mode,threads,clients,tasks,tasks_per_s,ns_per_task,p50_us,p99_us,rss_kib"
#define REPORT_METRICS_HEADER "metric,shape,system,mode,threads,clients,value,unit"

struct report_row {
        const char *shape;
        const char *system;             /* hbg, tbb, openmp, starpu, floor */
        const char *mode;               /* completion policy; "" for peers */
        unsigned threads, clients;
        uint64_t tasks;                 /* per repetition, all clients */
        double ns_per_task;             /* median over the repetitions */
        double tasks_per_s;
        bool has_latency;               /* the row has several graphs */
        double p50_us, p99_us;
        uint64_t rss_kib;
};

/* One bar pair of latency.png: p50 and p99 of a latency figure. */
struct report_latency {
        char label[48];
        double p50_us, p99_us;
};

/* A metrics.csv row, kept for the targets (bench/targets.c). */
struct report_value {
        char *metric, *shape, *system, *mode;
        unsigned threads, clients;
        double value;
};

struct report {
        char dir[256];
        FILE *results, *metrics;
        struct report_row *rows;        /* kept for the plots and the targets */
        unsigned n_rows, cap_rows;
        struct report_value *values;    /* every report_metric(), kept likewise */
        unsigned n_values, cap_values;
        unsigned plot_threads;          /* the thread count the plots show */
        struct report_latency latency[64];
        unsigned n_latency;
        bool overhead_png, latency_png; /* drawn by report_close() */
};

/* Create dir and open (truncate) both CSVs in it. 0 or -errno. */
int report_open(struct report *r, const char *dir, unsigned plot_threads);
/* Print the table's header (once, before the first row). */
void report_table_header(struct report *r);
/* One row: a table line and a results.csv row; the row is kept for the
 * plots, its strings copied (they may be the caller's stack). */
void report_row(struct report *r, const struct report_row *row);
/* One metrics.csv row (mode "" and threads/clients 0 print as empty). */
void report_metric(struct report *r, const char *metric, const char *shape, const char *system,
                   const char *mode, unsigned threads, unsigned clients, double value,
                   const char *unit);
/* The kept row of shape, system, mode, threads and clients (threads or
 * clients 0: any), the last one given; NULL if none. Until
 * report_close(). */
const struct report_row *report_find_row(const struct report *r, const char *shape, const char *system,
                                         const char *mode, unsigned threads, unsigned clients);
/* The last value report_metric() gave metric for shape, system and mode
 * (NULL: any), threads and clients (0: any), into *ret; false if none.
 * Until report_close(). */
bool report_find_value(const struct report *r, const char *metric, const char *shape, const char *system,
                       const char *mode, unsigned threads, unsigned clients, double *ret);
/* A latency figure for latency.png (its metrics are written apart). */
void report_latency(struct report *r, const char *label, double p50_us, double p99_us);
/* Close the CSVs and draw the plots with gnuplot (skipped, with a message,
 * if gnuplot is missing; a plot with nothing to show is not drawn):
 * r->overhead_png and r->latency_png say which were. 0, or -EIO if a file
 * could not be written or gnuplot failed. */
int report_close(struct report *r);
