/* SPDX-License-Identifier: MIT */
/*
 * The comparison's host rows (bench/compare.h, --host): the producer's own
 * C functions (hbg_task.host_fn) run by libhbgclient's worker threads
 * (hbg_connect_options.host_threads, API 1.5) beside the in-process
 * runtimes running the very same function, bench_spin() (bench/
 * bench_util.c, one object linked into hbg-bench and every peer).
 *
 * The body is a fixed number of rounds calibrated here, once, to the time
 * a case asks for, not a timed spin: two of them sharing a core take
 * twice as long, so no system can show a speed-up above the cores.
 *
 * Cases (`cases` below), each a shape of bench/dag.h in which every
 * every-th task is the host function (the others hbgd noop kernels in
 * hbg, nothing in the peers), run on each worker count of its list
 * (hbg: host_threads, 0 the host functions running inside
 * hbg_graph_wait(); the peers: their threads, 0 skipped):
 *   speed-up  64 independent ~1 ms functions: time and speed-up over one
 *             worker of the same system; goal >= 0.9 min(N, cores);
 *   overhead  an empty function on every task of the chain and the
 *             independent shapes: ns per task against the in-process
 *             runtimes' on the same shape and worker count (hbg's 0
 *             against their 1); goals <= 5 us and <= 2x the fastest of
 *             them;
 *   mixed     the layered shape, every fourth task a ~10 us function, the
 *             others hbgd's noop kernels: hbg against the same graph in
 *             the peers (oneTBB: flow-graph nodes).
 * One hbgd (the default completion policy, the run's plot thread count)
 * serves every hbg row. Rows: results.csv, shape host-CASE, system
 * hbg-host (mode: hbgd's policy) or the peer, threads the worker count;
 * the speed-ups, ratios and goals (1 met, 0 not) to the metrics.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench/bench_util.h"
#include "bench/compare.h"
#include "bench/hbgd_proc.h"
#include "daemon/engine/engine.h"

enum host_kind { HOST_SPEEDUP, HOST_OVERHEAD, HOST_MIXED };

#define MAX_WORKERS 4

static const struct host_case {
        const char *label, *shape;
        uint64_t size, quick_size;      /* tasks (0: the shape's default) */
        unsigned every;                 /* every every-th task a host function */
        uint64_t body_ns;               /* its spin, calibrated; 0: empty */
        enum host_kind kind;
        unsigned workers[MAX_WORKERS], n_workers;
} cases[] = {
        { "host-spin1ms", "independent", 64, 64, 1, 1000000, HOST_SPEEDUP, { 1, 2, 4 }, 3 },
        { "host-empty-chain", "chain", 10000, 2000, 1, 0, HOST_OVERHEAD, { 0, 1, 2, 4 }, 4 },
        { "host-empty-indep", "independent", 10000, 2000, 1, 0, HOST_OVERHEAD, { 0, 1, 2, 4 }, 4 },
        { "host-mixed", "layered", 20000, 4000, 4, 10000, HOST_MIXED, { 0, 1, 2, 4 }, 4 },
};
#define N_CASES (sizeof(cases) / sizeof(cases[0]))

/* The in-process runtimes measured beside hbg (when built and in --peers). */
static const char *const host_peers[] = { "tbb", "openmp", "taskflow" };
#define N_HOST_PEERS (sizeof(host_peers) / sizeof(host_peers[0]))
/* Column 0: hbg; 1 + p: host_peers[p]. */
#define N_SYSTEMS (1 + N_HOST_PEERS)

/* Median ns of one whole graph per case x system x worker index; 0: not run. */
struct host_results {
        double ns[N_CASES][N_SYSTEMS][MAX_WORKERS];
        uint64_t tasks[N_CASES];
        uint64_t iters[N_CASES];        /* the body's rounds of bench_spin() */
        bool peer_on[N_HOST_PEERS];
};

static uint64_t case_size(const struct cmp *c, unsigned i) {
        return c->quick ? cases[i].quick_size : cases[i].size;
}

static void row(struct cmp *c, unsigned i, const char *system, const char *mode, unsigned workers, double *ns,
                unsigned n, uint64_t tasks, uint64_t rss, double *median_ret) {
        double sorted[64], min, median;
        memcpy(sorted, ns, n * sizeof(double));
        bench_min_median(sorted, n, &min, &median);
        struct report_row r = {
                .shape = cases[i].label, .system = system, .mode = mode, .threads = workers, .clients = 1,
                .tasks = tasks, .ns_per_task = median / (double)tasks, .tasks_per_s = (double)tasks / (median / 1e9),
                .rss_kib = rss,
        };
        report_row(&c->report, &r);
        cmp_spread_metrics(c, cases[i].label, system, mode, workers, 1, ns, n, tasks);
        *median_ret = median;
}

static void hbg_rows(struct cmp *c, const char *socket, pid_t hbgd, const char *mode, struct host_results *res) {
        for (unsigned i = 0; i < N_CASES; i++)
                for (unsigned w = 0; w < cases[i].n_workers; w++) {
                        struct cmp_run run;
                        c->host_threads = cases[i].workers[w];
                        c->host_every = cases[i].every;
                        c->spin_iters = res->iters[i];
                        int err = cmp_run_producers(c, socket, cases[i].shape, case_size(c, i), 1, c->warmup,
                                                    c->repeat, NULL, "run", &run);
                        if (err < 0 || run.reps != c->repeat || run.tasks == 0) {
                                fprintf(stderr, "hbg-bench: %s, hbg-host, %u workers: failed (%s)\n", cases[i].label,
                                        cases[i].workers[w], strerror(err < 0 ? -err : EPROTO));
                                c->failures++;
                        } else {
                                res->tasks[i] = run.tasks;
                                row(c, i, "hbg-host", mode, cases[i].workers[w], run.wall_ns, run.reps, run.tasks,
                                    bench_proc_peak_rss_kib(hbgd) + run.rss_kib, &res->ns[i][0][w]);
                        }
                        cmp_run_free(&run);
                }
        c->host_every = c->host_threads = 0;
}

static void peer_rows(struct cmp *c, unsigned p, struct host_results *res) {
        for (unsigned i = 0; i < N_CASES; i++)
                for (unsigned w = 0; w < cases[i].n_workers; w++) {
                        double ns[64];
                        unsigned n, workers = cases[i].workers[w];
                        uint64_t tasks = 0, rss = 0;
                        if (workers == 0)
                                continue;
                        c->host_every = cases[i].every;
                        c->spin_iters = res->iters[i];
                        if (cmp_peer_run(c, host_peers[p], workers, cases[i].shape, case_size(c, i), NULL, false, ns,
                                         &n, &tasks, &rss) < 0 ||
                            tasks == 0)
                                c->failures++;
                        else
                                row(c, i, host_peers[p], "", workers, ns, n, tasks, rss, &res->ns[i][1 + p][w]);
                }
        c->host_every = 0;
}

static const char *yes(bool met) {
        return met ? "met" : "NOT met";
}

static unsigned worker_index(unsigned i, unsigned workers) {
        for (unsigned w = 0; w < cases[i].n_workers; w++)
                if (cases[i].workers[w] == workers)
                        return w;
        return MAX_WORKERS;
}

static const char *system_name(unsigned s) {
        return s == 0 ? "hbg-host" : host_peers[s - 1];
}

static void speedups(struct cmp *c, unsigned i, long cores, const struct host_results *res) {
        printf("\n  speed-up, %" PRIu64 " independent ~%" PRIu64 " us functions, over one worker (%ld cores; goal"
               " >= 0.9 min(N, cores))\n  %-10s %3s %10s %9s %7s %s\n", res->tasks[i], cases[i].body_ns / 1000,
               cores, "system", "N", "ms", "speed-up", "goal", "");
        unsigned one = worker_index(i, 1);
        for (unsigned s = 0; s < N_SYSTEMS; s++)
                for (unsigned w = 0; w < cases[i].n_workers; w++) {
                        double ns = res->ns[i][s][w];
                        if (ns <= 0 || one == MAX_WORKERS || res->ns[i][s][one] <= 0)
                                continue;
                        unsigned n = cases[i].workers[w];
                        double speedup = res->ns[i][s][one] / ns;
                        double goal = 0.9 * (double)((long)n < cores ? (long)n : cores);
                        report_metric(&c->report, "host_speedup", cases[i].label, system_name(s), "", n, 1, speedup,
                                      "ratio");
                        report_metric(&c->report, "host_speedup_goal_met", cases[i].label, system_name(s), "", n, 1,
                                      speedup >= goal, "bool");
                        printf("  %-10s %3u %10.2f %9.2f %7.2f %s\n", system_name(s), n, ns / 1e6, speedup, goal,
                               yes(speedup >= goal));
                }
}

/* hbg against each in-process runtime at the same worker count (hbg's
 * 0: their 1), and the fastest of them. With `goals`: the overhead
 * goals, <= 5 us and <= 2x the fastest. */
static void against_peers(struct cmp *c, unsigned i, const struct host_results *res, bool goals) {
        printf("\n  %s: ns per task, hbg-host and each runtime at N workers (hbg's N = 0 against their 1),"
               " hbg-host / runtime in ()%s\n  %3s %9s", cases[i].label, goals ? "; goals <= 5000 ns, <= 2x the fastest" : "",
               "N", "hbg-host");
        for (unsigned p = 0; p < N_HOST_PEERS; p++)
                if (res->peer_on[p])
                        printf(" %18s", host_peers[p]);
        printf("%s\n", goals ? "   <=5us    <=2x" : "");
        for (unsigned w = 0; w < cases[i].n_workers; w++) {
                unsigned n = cases[i].workers[w], pw = worker_index(i, n ? n : 1);
                double hbg = res->ns[i][0][w] / (double)res->tasks[i], best = 0;
                if (res->ns[i][0][w] <= 0)
                        continue;
                printf("  %3u %9.0f", n, hbg);
                for (unsigned p = 0; p < N_HOST_PEERS; p++) {
                        double ns = pw < MAX_WORKERS ? res->ns[i][1 + p][pw] / (double)res->tasks[i] : 0;
                        char cell[32] = "-";
                        if (!res->peer_on[p])
                                continue;
                        if (ns > 0) {
                                char pair[48];
                                snprintf(pair, sizeof(pair), "hbg-host/%s", host_peers[p]);
                                report_metric(&c->report, "host_over_peer_ns_per_task", cases[i].label, pair, "", n, 1,
                                              hbg / ns, "ratio");
                                snprintf(cell, sizeof(cell), "%.0f (%.1fx)", ns, hbg / ns);
                                best = best == 0 || ns < best ? ns : best;
                        }
                        printf(" %18s", cell);
                }
                if (goals) {
                        report_metric(&c->report, "host_overhead_goal_5us_met", cases[i].label, "hbg-host", "", n, 1,
                                      hbg <= 5000, "bool");
                        if (best > 0)
                                report_metric(&c->report, "host_overhead_goal_2x_met", cases[i].label, "hbg-host", "",
                                              n, 1, hbg <= 2 * best, "bool");
                        printf("   %-8s %s", yes(hbg <= 5000), best > 0 ? yes(hbg <= 2 * best) : "(no runtime)");
                }
                printf("\n");
        }
}

void cmp_host(struct cmp *c) {
        unsigned mode_index = c->modes[0], threads = c->report.plot_threads;
        for (unsigned m = 0; m < c->n_modes; m++)
                if (c->modes[m] == HBG_COMPLETION_DEFAULT)
                        mode_index = HBG_COMPLETION_DEFAULT;
        const char *mode = completion_mode_name(mode_index);
        long cores = sysconf(_SC_NPROCESSORS_ONLN);
        printf("\n-- host functions: libhbgclient's workers beside the in-process runtimes, the same function;"
               " hbgd %s, %u threads; %ld cores [%s]\n", mode, threads, cores, cmp_elapsed(c));
        if (threads < completion_mode_min_threads(mode_index)) {
                printf("host rows skipped: %s needs %u threads or more\n", mode,
                       completion_mode_min_threads(mode_index));
                return;
        }
        static struct host_results res;
        memset(&res, 0, sizeof(res));
        for (unsigned p = 0; p < N_HOST_PEERS; p++) {
                char path[320];
                bool asked = false;
                for (unsigned k = 0; k < c->n_peers; k++)
                        asked |= strcmp(cmp_peer_names[c->peers[k]], host_peers[p]) == 0;
                snprintf(path, sizeof(path), "%s/hbg-bench-%s", c->dir, host_peers[p]);
                if (!asked)
                        printf("%s: not in --peers: skipped\n", host_peers[p]);
                else if (access(path, X_OK) != 0)
                        printf("%s: %s is not built (make bench-peers%s): skipped\n", host_peers[p], path,
                               strcmp(host_peers[p], "taskflow") == 0 ? " with TASKFLOW_INC=DIR" : "");
                else
                        res.peer_on[p] = true;
        }

        /* Every case's body calibrated once, here: the same rounds for all. */
        for (unsigned i = 0; i < N_CASES; i++) {
                res.iters[i] = cases[i].body_ns ? bench_spin_calibrate(cases[i].body_ns) : 0;
                report_metric(&c->report, "host_body_rounds", cases[i].label, "", "", 0, 0, (double)res.iters[i],
                              "count");
        }
        printf("body: bench_spin(), %" PRIu64 " rounds for ~1 ms, %" PRIu64 " for ~10 us\n", res.iters[0],
               res.iters[N_CASES - 1]);
        report_table_header(&c->report);
        struct bench_hbgd h;
        char hbgd[300], conf[CMP_CONFIG_LEN];
        snprintf(hbgd, sizeof(hbgd), "%s/hbgd", c->dir);
        if (bench_hbgd_start_config(&h, hbgd, mode, threads, cmp_hbgd_config(c, conf, sizeof(conf)), NULL, 30000) < 0)
                c->failures++;
        else {
                hbg_rows(c, h.socket, h.pid, mode, &res);
                int st = bench_hbgd_stop(&h, 10000);
                if (st != 0) {
                        fprintf(stderr, "hbg-bench: hbgd (host rows) did not exit cleanly (%d)\n", st);
                        c->failures++;
                }
        }
        /* The peers once hbgd is gone: nothing else on the machine. */
        for (unsigned p = 0; p < N_HOST_PEERS; p++)
                if (res.peer_on[p])
                        peer_rows(c, p, &res);
        for (unsigned i = 0; i < N_CASES; i++) {
                if (cases[i].kind == HOST_SPEEDUP)
                        speedups(c, i, cores, &res);
                else
                        against_peers(c, i, &res, cases[i].kind == HOST_OVERHEAD);
        }
}
