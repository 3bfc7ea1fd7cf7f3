/* SPDX-License-Identifier: MIT */
/*
 * What test_e2e_metrics and test_e2e_exporter share beside hbgctl_util.h
 * (which runs hbgctl): a checker of the OpenMetrics text hbgctl writes
 * (every sample kept for the assertions), and graphs that succeed or fail
 * in a kernel.
 */
#ifndef HBG_TESTS_E2E_METRICS_UTIL_H
#define HBG_TESTS_E2E_METRICS_UTIL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "hbg/hbg.h"
#include "tests/e2e/hbgctl_util.h"

struct hbgd_proc;

/* The whole of fd from its start, NUL-terminated (malloc'd). */
char *slurp_fd(int fd);
bool ends_with(const char *s, const char *suffix);

#define MAX_SAMPLES 4096
#define MAX_FAMILIES 128

struct sample {
        char name[96];
        char labels[160];      /* as written, without the braces */
        double value;
};

struct scrape {
        struct sample s[MAX_SAMPLES];
        size_t n;
        char families[MAX_FAMILIES][96];
        char types[MAX_FAMILIES][16];
        size_t n_families;
        unsigned sample_every; /* from hbg_task_run_seconds' help; 1: every run timed */
};

/* Parse text as OpenMetrics 1.0 into sc, failing the test on anything
 * it does not allow (metrics_util.c says what is checked). */
void parse_openmetrics(const char *text, struct scrape *sc);
/* A sample's value by name and labels as written (-1 when absent). */
double value_of(const struct scrape *sc, const char *name, const char *labels);
/* The sum of every sample of that name. */
double sum_of(const struct scrape *sc, const char *name);
/* The first sample of that name whose labels start with prefix. */
double value_with(const struct scrape *sc, const char *name, const char *prefix);
unsigned samples_of(const struct scrape *sc, const char *name);
/* The TYPE of the family of that name, or "". */
const char *type_of(const struct scrape *sc, const char *name);
/* No counter sample of before is larger in after. */
void assert_not_decreasing(const struct scrape *before, const struct scrape *after, const char *what);
/* `hbgctl metrics` of d, parsed (malloc'd). */
struct scrape *scrape(struct hbgd_proc *d);

hbg_task fill(hbg_tensor x, float v);
hbg_task scale(hbg_tensor x, float v);
/* The built-in `fail` kernel returning code. */
hbg_task fail_task(int64_t code);
/* Submit the graph built so far and wait: its result. */
int finish(struct hbgd_proc *d, hbg_client *c);
/* n graphs of two kernel tasks each (fill, then scale): all succeed. */
void good_graphs(struct hbgd_proc *d, hbg_client *c, hbg_tensor x, unsigned n);

#endif
