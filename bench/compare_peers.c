/* SPDX-License-Identifier: MIT */
/*
 * The comparison's peers (bench/compare.h): each peer program (bench/
 * peers/) builds and runs every graph in its own process, one producer,
 * with the same thread count as hbgd.
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

const char *const cmp_peer_names[CMP_N_PEERS] = { "tbb", "openmp", "starpu", "floor", "taskflow" };
/* Peers with a graph object a program keeps and runs again (peer_rerun):
 * their "rerun" rows stand beside hbg's replay. */
static const bool peer_reruns[CMP_N_PEERS] = { true, false, false, false, true };

#define PEER_MS (10 * 60 * 1000)

int cmp_peer_run(struct cmp *c, const char *name, unsigned threads, const char *shape, uint64_t size,
                 const char *const *wrap, bool rerun, double *ns, unsigned *n, uint64_t *tasks,
                 uint64_t *rss_kib) {
        char path[320], thr[16], rep[16], warm[16], size_s[24], seed_s[24], line[256], spin_s[24], every_s[16];
        snprintf(path, sizeof(path), "%s/hbg-bench-%s", c->dir, name);
        snprintf(thr, sizeof(thr), "%u", threads);
        snprintf(rep, sizeof(rep), "%u", wrap ? 1 : c->repeat);
        /* A rerun builds its graph in the first run: always a warm-up. */
        snprintf(warm, sizeof(warm), "%u", wrap ? 0 : rerun && c->warmup == 0 ? 1 : c->warmup);
        snprintf(size_s, sizeof(size_s), "%" PRIu64, size);
        snprintf(seed_s, sizeof(seed_s), "%" PRIu64, c->seed);
        const char *argv[48];
        unsigned a = 0;
        for (unsigned w = 0; wrap && wrap[w] && a < 24; w++)
                argv[a++] = wrap[w];
        const char *tail[] = { path, "--shape", shape, "--size", size_s, "--threads", thr,
                               "--repeat", rep, "--warmup", warm, "--seed", seed_s };
        for (unsigned i = 0; i < sizeof(tail) / sizeof(tail[0]); i++)
                argv[a++] = tail[i];
        if (c->quick)
                argv[a++] = "--quick";
        if (rerun)
                argv[a++] = "--rerun";
        if (c->host_every) {
                snprintf(spin_s, sizeof(spin_s), "%" PRIu64, c->spin_iters);
                snprintf(every_s, sizeof(every_s), "%u", c->host_every);
                argv[a++] = "--spin";
                argv[a++] = spin_s;
                argv[a++] = "--spin-every";
                argv[a++] = every_s;
        }
        argv[a] = NULL;

        struct bench_child kid;
        int err = bench_child_start(&kid, path, argv);
        if (err < 0)
                return err;
        bool ok = false;
        *n = 0;
        *rss_kib = 0;
        while (bench_child_line(&kid, line, sizeof(line), PEER_MS) == 1) {
                unsigned long long r, t, tk;
                unsigned long long kib;
                if (sscanf(line, "rep %llu ns %llu tasks %llu", &r, &t, &tk) == 3 && *n < 64) {
                        ns[(*n)++] = (double)t;
                        *tasks = tk;
                } else if (sscanf(line, "rss_kib %llu", &kib) == 1)
                        *rss_kib = kib;
                else if (strcmp(line, "ok") == 0)
                        ok = true;
        }
        int st = bench_child_finish(&kid, 10000);
        if (st != 0 || !ok || *n == 0) {
                fprintf(stderr, "hbg-bench: %s on %s (%u threads) failed (exit %d)\n", name, shape,
                        threads, st);
                return -EIO;
        }
        return 0;
}

void cmp_peer(struct cmp *c, unsigned peer, unsigned threads) {
        const char *name = cmp_peer_names[peer];
        unsigned peer_threads = strcmp(name, "floor") == 0 ? 1 : threads;
        char path[320];
        snprintf(path, sizeof(path), "%s/hbg-bench-%s", c->dir, name);
        if (access(path, X_OK) != 0) {
                /* Taskflow is not a Debian package: make builds it only
                 * when told where its headers are. */
                bool taskflow = strcmp(name, "taskflow") == 0;
                printf("\n-- %s: %s is not built (make bench-peers%s builds it%s): skipped\n", name, path,
                       taskflow ? " TASKFLOW_INC=DIR" : "", taskflow ? ", DIR holding taskflow/taskflow.hpp" : "");
                return;
        }
        printf("\n-- %s, %u thread%s [%s]\n", name, peer_threads, peer_threads == 1 ? "" : "s", cmp_elapsed(c));
        report_table_header(&c->report);
        for (int rerun = 0; rerun <= (int)peer_reruns[peer]; rerun++) {
                char system[32];
                snprintf(system, sizeof(system), "%s%s", name, rerun ? "-rerun" : "");
                for (unsigned s = 0; s < c->n_shapes; s++) {
                        double ns[64], copy[64], min, median;
                        unsigned n;
                        uint64_t tasks = 0, rss = 0;
                        if (cmp_peer_run(c, name, peer_threads, cmp_shape(c, s), cmp_size(c, s), NULL, rerun, ns,
                                         &n, &tasks, &rss) < 0 ||
                            tasks == 0) {
                                c->failures++;
                                continue;
                        }
                        memcpy(copy, ns, n * sizeof(double));
                        bench_min_median(copy, n, &min, &median);
                        struct report_row row = {
                                .shape = cmp_shape(c, s), .system = system, .mode = "", .threads = peer_threads,
                                .clients = 1, .tasks = tasks, .ns_per_task = median / (double)tasks,
                                .tasks_per_s = (double)tasks / (median / 1e9), .rss_kib = rss,
                        };
                        report_row(&c->report, &row);
                        cmp_spread_metrics(c, row.shape, system, "", peer_threads, 1, ns, n, tasks);
                }
        }
}
