/* SPDX-License-Identifier: MIT */
/*
 * The comparison's Python rows (bench/compare.h, --python): the shapes
 * built, run and replayed from Python through the hbg package, beside
 * Dask's threaded scheduler, concurrent.futures and a plain loop, with
 * empty tasks and with add_f32 on 64 KiB arrays; 1, 2 and 4 Python
 * processes on one hbgd. The measuring is bench/python/bench_py.py's
 * (run here with Debian's python3 and the build tree's package); this
 * file starts hbgd for it, turns its lines into rows and metrics, and
 * replays the same empty-task graphs from C (a producer of the
 * comparison, same shape, same size, same hbgd) for the Python replay's
 * goal: within 1.2x of C's.
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
#include "daemon/engine/engine.h"

#define DRIVER_MS (30 * 60 * 1000)      /* the driver silent this long is wedged */
#define PY_MAX_SHAPES 8

/* The shapes the driver measured with empty tasks (their Python replay,
 * ns per task), for the C replays after it. */
struct py_replays {
        char shape[PY_MAX_SHAPES][32];  /* the shape's name in bench/dag.h */
        double ns[PY_MAX_SHAPES];
        uint64_t tasks[PY_MAX_SHAPES];
        unsigned n;
};

/* Split line into at most max words (in place); the count. */
static unsigned words(char *line, char **w, unsigned max) {
        unsigned n = 0;
        for (char *save = NULL, *p = strtok_r(line, " ", &save); p && n < max; p = strtok_r(NULL, " ", &save))
                w[n++] = p;
        return n;
}

static bool is_hbg(const char *system) {
        return strncmp(system, "hbg", 3) == 0;
}

/* One line of the driver (bench/python/bench_py.py's docstring). 0, 1
 * for "skip", -EPROTO for "error" or a line not understood. */
static int take_line(struct cmp *c, const char *mode, unsigned threads, char *line, struct py_replays *rp) {
        char copy[512], *w[12];
        snprintf(copy, sizeof(copy), "%s", line);
        unsigned n = words(copy, w, 12);
        if (n >= 1 && (strcmp(w[0], "note") == 0 || strcmp(w[0], "skip") == 0)) {
                printf("  %s%s\n", strcmp(w[0], "skip") == 0 ? "python rows skipped: " : "", line + strlen(w[0]) + 1);
                return strcmp(w[0], "skip") == 0;
        }
        if (n == 10 && strcmp(w[0], "row") == 0) {
                struct report_row row = {
                        .shape = w[1], .system = w[2], .mode = is_hbg(w[2]) ? mode : "", .threads = threads,
                        .clients = (unsigned)strtoul(w[3], NULL, 10), .tasks = strtoull(w[4], NULL, 10),
                        .ns_per_task = strtod(w[5], NULL), .tasks_per_s = strtod(w[6], NULL),
                        .has_latency = strcmp(w[7], "-") != 0, .p50_us = strtod(w[7], NULL),
                        .p99_us = strtod(w[8], NULL), .rss_kib = strtoull(w[9], NULL, 10),
                };
                report_row(&c->report, &row);
                size_t len = strlen(w[1]);
                /* py-SHAPE (empty tasks): its C replay follows. */
                if (strcmp(w[2], "hbg-py-replay") == 0 && strncmp(w[1], "py-", 3) == 0 &&
                    !strstr(w[1], "-64KiB") && len - 3 < sizeof(rp->shape[0]) && rp->n < PY_MAX_SHAPES) {
                        snprintf(rp->shape[rp->n], sizeof(rp->shape[0]), "%s", w[1] + 3);
                        rp->ns[rp->n] = row.ns_per_task;
                        rp->tasks[rp->n++] = row.tasks;
                }
                return 0;
        }
        if (n == 7 && strcmp(w[0], "metric") == 0) {
                report_metric(&c->report, w[1], w[2], w[3], is_hbg(w[3]) ? mode : "", threads,
                              (unsigned)strtoul(w[4], NULL, 10), strtod(w[5], NULL), w[6]);
                return 0;
        }
        fprintf(stderr, "hbg-bench: python: %s\n", line);
        return -EPROTO;
}

/* The C replay of shape rp->shape[i] at the Python section's size: a
 * producer launching the graph it recorded, as the hbg-replay rows do. */
static void c_replay(struct cmp *c, const char *socket, const char *mode, unsigned threads, uint64_t size,
                     const struct py_replays *rp, unsigned i) {
        char shape[40];
        struct cmp_run run;
        unsigned warmup = c->warmup ? c->warmup : 1;
        /* As many repetitions as the driver's replays: 4 x --repeat. */
        unsigned repeat = 4 * c->repeat < 64 ? 4 * c->repeat : 64;
        snprintf(shape, sizeof(shape), "py-%s", rp->shape[i]);
        int err = cmp_run_producers(c, socket, rp->shape[i], size, 1, warmup, repeat, NULL, "replay", &run);
        if (err < 0 || run.reps == 0) {
                fprintf(stderr, "hbg-bench: %s, hbg-c-replay: failed (%s)\n", shape, strerror(-err));
                c->failures++;
                cmp_run_free(&run);
                return;
        }
        double wall[64], min, median;
        memcpy(wall, run.wall_ns, run.reps * sizeof(double));
        bench_min_median(wall, run.reps, &min, &median);
        struct report_row row = {
                .shape = shape, .system = "hbg-c-replay", .mode = mode, .threads = threads, .clients = 1,
                .tasks = run.tasks, .ns_per_task = median / (double)run.tasks,
                .tasks_per_s = (double)run.tasks / (median / 1e9), .rss_kib = run.rss_kib,
        };
        report_row(&c->report, &row);
        cmp_spread_metrics(c, shape, "hbg-c-replay", mode, threads, 1, run.wall_ns, run.reps, run.tasks);
        if (run.tasks != rp->tasks[i]) {
                /* Never: both build bench/dag.c's graph of this size. */
                fprintf(stderr, "hbg-bench: %s: C replayed %" PRIu64 " tasks, Python %" PRIu64 "\n", shape,
                        run.tasks, rp->tasks[i]);
                c->failures++;
        } else {
                double ratio = rp->ns[i] / row.ns_per_task;
                bool met = ratio <= 1.2;
                report_metric(&c->report, "py_replay_over_c", shape, "hbg-py-replay", mode, threads, 1, ratio,
                              "ratio");
                report_metric(&c->report, "py_replay_over_c_met", shape, "hbg-py-replay", mode, threads, 1, met,
                              "bool");
                printf("  %-22s %-13s replay from Python %.0f ns / from C %.0f ns per task = %.2fx (goal <= 1.2x): %s\n",
                       shape, "hbg-py-replay", rp->ns[i], row.ns_per_task, ratio, met ? "met" : "MISSED");
        }
        cmp_run_free(&run);
}

/* PYTHONPATH with dir first. */
static int python_path(const char *dir) {
        const char *old = getenv("PYTHONPATH");
        char buf[1024];
        int n = snprintf(buf, sizeof(buf), "%s%s%s", dir, old && *old ? ":" : "", old && *old ? old : "");
        if (n < 0 || (size_t)n >= sizeof(buf))
                return -ENAMETOOLONG;
        return setenv("PYTHONPATH", buf, 1) < 0 ? -errno : 0;
}

void cmp_python(struct cmp *c) {
        const char *python = getenv("HBG_BENCH_PYTHON");
        char pkg[300], driver[340], hbgd[300], conf[CMP_CONFIG_LEN], line[512];
        if (!python || !*python)
                python = "/usr/bin/python3";
        snprintf(pkg, sizeof(pkg), "%s/../python", c->dir);
        snprintf(driver, sizeof(driver), "%s/bench_py.py", pkg);
        printf("\n-- Python: hbg's package beside Dask (threaded) and concurrent.futures [%s]\n", cmp_elapsed(c));
        if (access(python, X_OK) < 0 || access(driver, R_OK) < 0) {
                printf("python rows skipped: no %s (make python puts it there) or no %s\n", driver, python);
                return;
        }
        /* The run's shapes (the Python section has no gemm: its tasks have
         * a body of their own), or every shape with --shapes none. */
        char shapes[256] = "";
        size_t at = 0;
        unsigned n_shapes = c->n_shapes ? c->n_shapes : dag_shape_count();
        for (unsigned k = 0; k < n_shapes; k++) {
                const char *s = c->n_shapes ? cmp_shape(c, k) : dag_shape_name(k);
                int n = snprintf(shapes + at, sizeof(shapes) - at, "%s%s", at ? "," : "", s);
                if (n > 0 && (size_t)n < sizeof(shapes) - at)
                        at += (size_t)n;
        }
        uint64_t size = c->python_size ? c->python_size : c->quick ? 2000 : 10000;
        uint64_t kernel_size = size / 10 > 100 ? size / 10 : 100;
        unsigned threads = c->report.plot_threads;
        const char *mode = completion_mode_name(c->modes[0]);
        char size_s[24], ksize_s[24], threads_s[16], repeat_s[16], warmup_s[16], seed_s[24];
        snprintf(size_s, sizeof(size_s), "%" PRIu64, size);
        snprintf(ksize_s, sizeof(ksize_s), "%" PRIu64, kernel_size);
        snprintf(threads_s, sizeof(threads_s), "%u", threads);
        snprintf(repeat_s, sizeof(repeat_s), "%u", c->repeat);
        snprintf(warmup_s, sizeof(warmup_s), "%u", c->warmup ? c->warmup : 1);
        snprintf(seed_s, sizeof(seed_s), "%" PRIu64, c->seed);
        if (python_path(pkg) < 0) {
                c->failures++;
                return;
        }
        struct bench_hbgd h;
        snprintf(hbgd, sizeof(hbgd), "%s/hbgd", c->dir);
        if (bench_hbgd_start_config(&h, hbgd, mode, threads, cmp_hbgd_config(c, conf, sizeof(conf)), NULL,
                                    30000) < 0) {
                c->failures++;
                return;
        }
        printf("   hbgd: completion %s, %u threads; the peers %u threads; %" PRIu64 " tasks (64 KiB: %" PRIu64
               "), median of %s\n",
               mode, threads, threads, size, kernel_size, repeat_s);
        report_table_header(&c->report);
        const char *argv[] = { python, driver, "--socket", h.socket, "--shapes", shapes, "--size", size_s,
                               "--kernel-size", ksize_s, "--threads", threads_s, "--repeat", repeat_s,
                               "--warmup", warmup_s, "--seed", seed_s, NULL };
        struct bench_child kid;
        struct py_replays rp = { .n = 0 };
        int err = bench_child_start(&kid, "python driver", argv), skipped = 0, st = 0;
        if (err < 0) {
                fprintf(stderr, "hbg-bench: cannot start %s: %s\n", python, strerror(-err));
                c->failures++;
                bench_hbgd_stop(&h, 10000);
                return;
        }
        while (err == 0) {
                int r = bench_child_line(&kid, line, sizeof(line), DRIVER_MS);
                if (r != 1) {
                        err = r < 0 ? r : 0;
                        break;
                }
                int t = take_line(c, mode, threads, line, &rp);
                if (t < 0)
                        err = t;
                skipped |= t == 1;
        }
        st = bench_child_finish(&kid, err ? 2000 : DRIVER_MS);
        if (err < 0 || st != 0) {
                fprintf(stderr, "hbg-bench: the Python driver failed (%s, exit %d)\n",
                        err < 0 ? strerror(-err) : "its error above", st);
                c->failures++;
        }
        for (unsigned i = 0; i < rp.n && !skipped; i++)
                c_replay(c, h.socket, mode, threads, size, &rp, i);
        if (bench_hbgd_stop(&h, 10000) != 0)
                c->failures++;
}
