/* SPDX-License-Identifier: MIT */
/*
 * The comparison's service rows (bench/compare.h), on the hbgd of
 * cmp_hbg(): 1- and 16-task graphs' latency, busy and parked, the parked
 * one beside an eventfd round trip; connects at once; fairness beside
 * another uid's backlog; hbgd's idle CPU; and the eventfd ping-pong the
 * latencies are read against.
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
#include "bench/hbgd_proc.h"
#include "bench/probes.h"

/* Sessions open and idle beside the latency producer in its last cases. */
#define LATENCY_IDLE_SESSIONS 32
/* The longest wait for hbgd to settle (bench_proc_settle()). */
#define SETTLE_MAX_MS 10000

/* Run COUNT "lat" graphs of the case in kid; their times into ns[*n...]. */
static int lat_block(struct bench_child *kid, unsigned tasks, unsigned count, unsigned idle_us, double *ns,
                     unsigned *n) {
        char cmd[64], line[128];
        unsigned got = 0;
        snprintf(cmd, sizeof(cmd), "lat %u %u %u", tasks, count, idle_us);
        int err = bench_child_send(kid, cmd);
        while (err == 0 && (err = cmp_expect(kid, "", line, sizeof(line), CMP_LINE_MS)) == 0 && strcmp(line, "end") != 0)
                if (got < count && cmp_field(line, "lat") >= 0) {
                        ns[(*n)++] = (double)cmp_field(line, "lat");
                        got++;
                }
        return err < 0 ? err : got ? 0 : -EPROTO;
}

/* The parked 1-task case in blocks alternated with blocks of the eventfd
 * round trip after the same idle time (which goes first alternates too,
 * ABBA): a spell of this host that slows one slows the other, and their
 * ratio is of the same moments. The run's own eventfd rows
 * (cmp_pingpong()) come minutes earlier. Each block begins with one graph
 * or round not counted: it follows the other kind's block (and, for the
 * eventfd, a fork), not the idle time alone. ev holds count + BESIDE_BLOCKS.
 * An eventfd that fails is said and ends the eventfd's blocks (*n_ev 0,
 * *ev_failed), not the graphs'. */
#define BESIDE_BLOCKS 4
static int lat_beside_eventfd(struct bench_child *kid, unsigned count, unsigned idle_us, double *ns, unsigned *n,
                              double *ev, unsigned *n_ev, bool *ev_failed) {
        int err = 0;
        *ev_failed = false;
        for (unsigned b = 0; b < BESIDE_BLOCKS && err == 0; b++) {
                /* The last block takes what the division leaves. */
                unsigned block = count / BESIDE_BLOCKS + (b + 1 == BESIDE_BLOCKS ? count % BESIDE_BLOCKS : 0);
                for (unsigned k = 0; k < 2 && err == 0 && block > 0; k++) {
                        if ((b + k) % 2 == 0) {
                                double first;
                                unsigned n_first = 0;
                                err = lat_block(kid, 1, 1, idle_us, &first, &n_first);
                                if (err == 0)
                                        err = lat_block(kid, 1, block, idle_us, ns, n);
                        } else if (!*ev_failed) {
                                int e = probe_eventfd_pingpong(block + 1, idle_us, ev + *n_ev);
                                if (e < 0) {
                                        fprintf(stderr, "hbg-bench: eventfd ping-pong beside the parked graphs "
                                                "failed (%s): its rows are left out\n", strerror(-e));
                                        *ev_failed = true;
                                        *n_ev = 0;
                                        continue;
                                }
                                memmove(ev + *n_ev, ev + *n_ev + 1, block * sizeof(*ev));
                                *n_ev += block;
                        }
                }
        }
        return err;
}

/* The latency of 1- and 16-task graphs from one producer, submit to wait
 * returned (the producer's "lat"): back to back (hbgd busy with them) and
 * after 3 ms idle (its threads parked). */
void cmp_latency(struct cmp *c, struct bench_hbgd *h, const char *mode, unsigned threads) {
        /* The last two with LATENCY_IDLE_SESSIONS other sessions open and
         * idle (a service's producers between requests), opened here. */
        static const struct {
                unsigned tasks, idle_us;
                const char *name;
                unsigned idle_sessions;
        } cases[] = { { 1, 0, "busy", 0 },
                      { 16, 0, "busy", 0 },
                      { 1, 3000, "parked", 0 },
                      { 16, 3000, "parked", 0 },
                      { 1, 0, "busy", LATENCY_IDLE_SESSIONS },
                      { 1, 3000, "parked", LATENCY_IDLE_SESSIONS } };
        struct probe_sessions *idle = NULL;
        const char *argv[] = { c->self, "producer", "--socket", h->socket, "--shape", "independent",
                               "--size", "1", NULL };
        struct bench_child kid;
        char line[128];
        unsigned busy = c->quick ? 1000 : 5000, parked = c->quick ? 200 : 1000;
        double *ns = calloc(busy > parked ? busy : parked, sizeof(double));
        double *ev = calloc(parked + BESIDE_BLOCKS, sizeof(double));
        if (!ns || !ev || bench_child_start(&kid, "latency producer", argv) < 0) {
                free(ns);
                free(ev);
                c->failures++;
                return;
        }
        /* After 3 ms idle means an idle hbgd: not one still at the work
         * the rows before left it (their sessions' arrays given back,
         * spare rings made again for the next burst). */
        bench_proc_settle(h->pid, SETTLE_MAX_MS);
        int err = cmp_expect(&kid, "connect_ns ", line, sizeof(line), CMP_LINE_MS);
        /* Warm-up: the first graphs map the rings' pages. */
        if (err == 0 && (err = bench_child_send(&kid, "lat 16 200 0")) == 0)
                while ((err = cmp_expect(&kid, "", line, sizeof(line), CMP_LINE_MS)) == 0 && strcmp(line, "end") != 0)
                        ;
        for (unsigned i = 0; i < sizeof(cases) / sizeof(cases[0]) && err == 0; i++) {
                unsigned count = cases[i].idle_us ? parked : busy, n = 0, n_ev = 0;
                if (cases[i].idle_sessions && !idle) {
                        if ((err = probe_sessions_open(h->socket, cases[i].idle_sessions, &idle)) < 0)
                                break;
                        bench_proc_settle(h->pid, SETTLE_MAX_MS); /* the spare rings they took, made again */
                }
                bool beside = cases[i].tasks == 1 && cases[i].idle_us && !cases[i].idle_sessions, ev_failed = false;
                if (beside) {
                        err = lat_beside_eventfd(&kid, count, cases[i].idle_us, ns, &n, ev, &n_ev, &ev_failed);
                        if (ev_failed)
                                c->failures++;
                } else {
                        err = lat_block(&kid, cases[i].tasks, count, cases[i].idle_us, ns, &n);
                }
                if (err < 0)
                        break;
                double p50 = probe_quantile(ns, n, 0.50) / 1e3, p99 = probe_quantile(ns, n, 0.99) / 1e3;
                char metric[80], label[80], name[48];
                if (cases[i].idle_sessions)
                        snprintf(name, sizeof(name), "%s_%u_idle_sessions", cases[i].name, cases[i].idle_sessions);
                else
                        snprintf(name, sizeof(name), "%s", cases[i].name);
                snprintf(metric, sizeof(metric), "latency_%u_task_%s_p50", cases[i].tasks, name);
                report_metric(&c->report, metric, "", "hbg", mode, threads, 1, p50, "us");
                snprintf(metric, sizeof(metric), "latency_%u_task_%s_p99", cases[i].tasks, name);
                report_metric(&c->report, metric, "", "hbg", mode, threads, 1, p99, "us");
                if (threads == c->report.plot_threads && !cases[i].idle_sessions) {
                        snprintf(label, sizeof(label), "%s %u-task %s", mode, cases[i].tasks, cases[i].name);
                        report_latency(&c->report, label, p50, p99);
                }
                printf("  latency %2u-task graphs, %-6s p50 %8.1f us  p99 %8.1f us  (%u graphs", cases[i].tasks,
                       cases[i].name, p50, p99, n);
                if (cases[i].idle_sessions)
                        printf(", %u other sessions open and idle", cases[i].idle_sessions);
                printf(")\n");
                if (beside && n_ev) {
                        double e50 = probe_quantile(ev, n_ev, 0.50) / 1e3, e99 = probe_quantile(ev, n_ev, 0.99) / 1e3;
                        report_metric(&c->report, "eventfd_pingpong_parked_beside_p50", "", "eventfd", mode, threads,
                                      1, e50, "us");
                        report_metric(&c->report, "eventfd_pingpong_parked_beside_p99", "", "eventfd", mode, threads,
                                      1, e99, "us");
                        /* No ratio to a round trip not measured (bench/targets.c
                         * would judge a 0 as met). */
                        if (e50 > 0)
                                report_metric(&c->report, "latency_1_task_parked_over_eventfd_p50", "", "hbg", mode,
                                              threads, 1, p50 / e50, "ratio");
                        if (e99 > 0)
                                report_metric(&c->report, "latency_1_task_parked_over_eventfd_p99", "", "hbg", mode,
                                              threads, 1, p99 / e99, "ratio");
                        printf("  eventfd round trip beside it    p50 %8.1f us  p99 %8.1f us  (%u, in %u blocks "
                               "alternated with the graphs', the first of each not counted): parked %.2fx and %.2fx\n",
                               e50, e99, n_ev, BESIDE_BLOCKS, e50 > 0 ? p50 / e50 : 0, e99 > 0 ? p99 / e99 : 0);
                }
        }
        if (idle) {
                probe_sessions_close(idle);
                bench_proc_settle(h->pid, SETTLE_MAX_MS);
        }
        if (err == 0)
                bench_child_send(&kid, "quit");
        if (bench_child_finish(&kid, 10000) != 0 || err < 0) {
                fprintf(stderr, "hbg-bench: latency (hbg %s, %u threads) failed\n", mode, threads);
                c->failures++;
        }
        free(ns);
        free(ev);
}

/* hbg_connect()'s time while 8 producers connect at once (session set-up
 * on hbgd's side included), over several bursts: producers that stay
 * connected until all eight have (the target's case), and producers that
 * disconnect at once (their teardowns among the others' connects); and a
 * lone producer's, connecting and disconnecting once per round, as many
 * connects as a burst row's. And hbgd's CPU time per connect and its
 * disconnect, every thread's, until hbgd is at rest again after the last
 * round (its background work for them, the spares made again, included);
 * and the median CPU time a producer spends in hbg_connect(). */
void cmp_connect_burst(struct cmp *c, struct bench_hbgd *h, const char *mode, unsigned threads) {
        enum { BURST = 8, ROUNDS_MAX = 60 };
        const unsigned rounds = c->quick ? 25 : ROUNDS_MAX;
        static const struct {
                unsigned producers, rounds_times; /* rounds: rounds × rounds_times */
                bool hold;
                const char *p50, *p99, *cpu, *producer_cpu, *what;
        } kinds[] = {
                { BURST, 1, true, "connect_burst_8_p50", "connect_burst_8_p99", "connect_burst_8_hbgd_cpu",
                  "connect_burst_8_producer_cpu", "8 producers at once, staying connected" },
                { BURST, 1, false, "connect_churn_8_p50", "connect_churn_8_p99", "connect_churn_8_hbgd_cpu",
                  "connect_churn_8_producer_cpu", "8 producers at once, each disconnecting at once" },
                { 1, BURST, false, "connect_lone_p50", "connect_lone_p99", "connect_lone_hbgd_cpu",
                  "connect_lone_producer_cpu", "one producer alone, disconnecting at once" },
        };
        double ns[BURST * ROUNDS_MAX], cpu_ns[BURST * ROUNDS_MAX];
        for (size_t k = 0; k < sizeof(kinds) / sizeof(kinds[0]); k++) {
                unsigned producers = kinds[k].producers, kind_rounds = rounds * kinds[k].rounds_times;
                bench_proc_settle(h->pid, SETTLE_MAX_MS);
                int64_t cpu0 = bench_proc_cpu_ns(h->pid);
                if (probe_connect_burst(h->socket, producers, kind_rounds, kinds[k].hold, ns, cpu_ns) < 0) {
                        fprintf(stderr, "hbg-bench: connect burst (hbg %s, %u threads) failed\n", mode, threads);
                        c->failures++;
                        return;
                }
                bench_proc_settle(h->pid, SETTLE_MAX_MS);
                int64_t cpu1 = bench_proc_cpu_ns(h->pid);
                unsigned n = producers * kind_rounds;
                double p50 = probe_quantile(ns, n, 0.50) / 1e3, p99 = probe_quantile(ns, n, 0.99) / 1e3;
                double cpu_us = cpu0 >= 0 && cpu1 >= cpu0 ? (double)(cpu1 - cpu0) / n / 1e3 : 0;
                double producer_cpu_us = probe_quantile(cpu_ns, n, 0.50) / 1e3;
                report_metric(&c->report, kinds[k].p50, "", "hbg", mode, threads, producers, p50, "us");
                report_metric(&c->report, kinds[k].p99, "", "hbg", mode, threads, producers, p99, "us");
                if (cpu_us > 0)
                        report_metric(&c->report, kinds[k].cpu, "", "hbg", mode, threads, producers, cpu_us, "us");
                report_metric(&c->report, kinds[k].producer_cpu, "", "hbg", mode, threads, producers, producer_cpu_us,
                              "us");
                printf("  hbg_connect, %s: p50 %8.1f us  p99 %8.1f us  (%u connects%s); "
                       "hbgd's CPU %.0f us a connect and its disconnect, the producer's %.0f us in hbg_connect()\n",
                       kinds[k].what, p50, p99, n, kinds[k].hold ? "; target p99 <= 1000 us" : "", cpu_us,
                       producer_cpu_us);
        }
}

/*
 * Fair share between users (RUNTIME_LOGIC §9.5): one session submits a
 * backlog of long spin_ns kernels, 4 per thread, then another user's
 * session runs 1-task graphs one at a time (10 ms apart) while the
 * backlog lasts. Its latency should stay within one kernel's duration: it
 * waits for a running kernel to end, never behind the backlog. Shares are
 * per uid: as root the backlog runs as uid 65534 (nobody); otherwise, or
 * if that child cannot start, both run as this uid, one share whose
 * sessions take its turns in ring order (reported so: the bound is not
 * the design's there).
 */
#define FAIRNESS_OTHER_UID ((uid_t)65534)
void cmp_fairness(struct cmp *c, struct bench_hbgd *h, const char *mode, unsigned threads) {
        const uint64_t kernel_ns = c->quick ? 20000000 : 50000000;
        const unsigned graphs = c->quick ? 10 : 20;
        /* Enough backlog for the measurement: (kernel + 10 ms) per graph. */
        unsigned hog_tasks = (unsigned)((graphs * (kernel_ns + 10000000) / kernel_ns + 1) * threads * 2);
        const char *argv[] = { c->self, "producer", "--socket", h->socket, "--shape", "independent",
                               "--size", "1", NULL };
        struct bench_child hog, kid;
        char line[128], cmd[64];
        double *ns = calloc(graphs, sizeof(double));
        unsigned n = 0;
        int err = -ENOMEM;
        bool other = geteuid() == 0 && bench_hbgd_open_to_all(h) == 0;
        if (!ns || bench_child_start_as(&hog, "fairness backlog", argv, other ? FAIRNESS_OTHER_UID : (uid_t)-1) < 0) {
                free(ns);
                c->failures++;
                return;
        }
        if (other && cmp_expect(&hog, "connect_ns ", line, sizeof(line), CMP_LINE_MS) != 0) {
                /* uid 65534 cannot run us (a 0700 directory on the way): as ourselves. */
                fprintf(stderr, "hbg-bench: fairness: the backlog cannot run as uid %u; both as this uid\n",
                        (unsigned)FAIRNESS_OTHER_UID);
                bench_child_finish(&hog, 1000);
                other = false;
                if (bench_child_start(&hog, "fairness backlog", argv) < 0) {
                        free(ns);
                        c->failures++;
                        return;
                }
        }
        if (bench_child_start(&kid, "fairness producer", argv) < 0) {
                bench_child_finish(&hog, 1000);
                free(ns);
                c->failures++;
                return;
        }
        err = other ? 0 : cmp_expect(&hog, "connect_ns ", line, sizeof(line), CMP_LINE_MS);
        if (err == 0)
                err = cmp_expect(&kid, "connect_ns ", line, sizeof(line), CMP_LINE_MS);
        snprintf(cmd, sizeof(cmd), "hog %" PRIu64 " %u", kernel_ns, hog_tasks);
        if (err == 0 && (err = bench_child_send(&hog, cmd)) == 0)
                err = cmp_expect(&hog, "hog submitted", line, sizeof(line), CMP_LINE_MS);
        snprintf(cmd, sizeof(cmd), "lat 1 %u 10000", graphs);
        if (err == 0 && (err = bench_child_send(&kid, cmd)) == 0)
                while ((err = cmp_expect(&kid, "", line, sizeof(line), CMP_LINE_MS)) == 0 && strcmp(line, "end") != 0)
                        if (n < graphs && cmp_field(line, "lat") >= 0)
                                ns[n++] = (double)cmp_field(line, "lat");
        /* The backlog is twice what the measurement needs: it is still
         * running now. Wait for it. */
        if (err == 0)
                err = cmp_expect(&hog, "hog done", line, sizeof(line), 10 * CMP_LINE_MS);
        if (err == 0 && n > 0) {
                double p50 = probe_quantile(ns, n, 0.50) / 1e6, p99 = probe_quantile(ns, n, 0.99) / 1e6;
                double kernel_ms = (double)kernel_ns / 1e6;
                report_metric(&c->report, "fairness_1_task_p50", "", "hbg", mode, threads, 2, p50, "ms");
                report_metric(&c->report, "fairness_1_task_p99", "", "hbg", mode, threads, 2, p99, "ms");
                report_metric(&c->report, "fairness_kernel", "", "hbg", mode, threads, 2, kernel_ms, "ms");
                report_metric(&c->report, "fairness_other_uid", "", "hbg", mode, threads, 2, other ? 1 : 0, "bool");
                printf("  fairness: 1-task graphs beside a backlog of %u x %.0f ms kernels %s: p50 %.1f ms, "
                       "p99 %.1f ms (one kernel %.0f ms; target p99 <= %.0f ms%s)\n",
                       hog_tasks, kernel_ms, other ? "of uid 65534" : "of the same uid", p50, p99, kernel_ms,
                       kernel_ms + 5, other ? "" : "; one share: not the design's bound");
        }
        if (err == 0) {
                bench_child_send(&kid, "quit");
                bench_child_send(&hog, "quit");
        }
        int st1 = bench_child_finish(&kid, 10000), st2 = bench_child_finish(&hog, 60000);
        if (geteuid() == 0)
                bench_hbgd_close_to_others(h); /* the directory closed: the socket with it */
        if (st1 != 0 || st2 != 0 || err < 0 || n == 0) {
                fprintf(stderr, "hbg-bench: fairness (hbg %s, %u threads) failed\n", mode, threads);
                c->failures++;
        }
        free(ns);
}

void cmp_pingpong(struct cmp *c) {
        unsigned busy = c->quick ? 1000 : 5000, parked = c->quick ? 200 : 1000;
        double *ns = calloc(busy, sizeof(double));
        static const char *const names[] = { "busy", "parked" };
        for (unsigned i = 0; ns && i < 2; i++) {
                unsigned n = i ? parked : busy;
                if (probe_eventfd_pingpong(n, i ? 3000 : 0, ns) < 0) {
                        fprintf(stderr, "hbg-bench: eventfd ping-pong failed\n");
                        c->failures++;
                        break;
                }
                double p50 = probe_quantile(ns, n, 0.50) / 1e3, p99 = probe_quantile(ns, n, 0.99) / 1e3;
                char metric[64], label[64];
                snprintf(metric, sizeof(metric), "eventfd_pingpong_%s_p50", names[i]);
                report_metric(&c->report, metric, "", "eventfd", "", 0, 0, p50, "us");
                snprintf(metric, sizeof(metric), "eventfd_pingpong_%s_p99", names[i]);
                report_metric(&c->report, metric, "", "eventfd", "", 0, 0, p99, "us");
                snprintf(label, sizeof(label), "eventfd round trip %s", names[i]);
                report_latency(&c->report, label, p50, p99);
                printf("eventfd ping-pong between two processes, %-6s p50 %8.1f us  p99 %8.1f us\n", names[i],
                       p50, p99);
        }
        free(ns);
}

/* hbgd's CPU over a second (quick) or three while nothing is submitted,
 * in % of one core; < 0 if it cannot be read. */
static double idle_cpu_pct(const struct cmp *c, const struct bench_hbgd *h) {
        int64_t cpu0 = bench_proc_cpu_ns(h->pid), t0 = bench_now_ns();
        usleep(c->quick ? 1000 * 1000 : 3000 * 1000);
        int64_t cpu1 = bench_proc_cpu_ns(h->pid), t1 = bench_now_ns();
        return cpu0 < 0 || cpu1 < 0 ? -1 : 100.0 * (double)(cpu1 - cpu0) / (double)(t1 - t0);
}

#define IDLE_SESSIONS 8

/* hbgd's CPU while nothing is submitted: after the runs, once its threads
 * had time to park; with no session, then with IDLE_SESSIONS open (a
 * service's producers holding their connections between requests). */
void cmp_idle_cpu(struct cmp *c, struct bench_hbgd *h, const char *mode, unsigned threads) {
        usleep(300 * 1000);
        bench_proc_settle(h->pid, SETTLE_MAX_MS);
        double pct = idle_cpu_pct(c, h);
        if (pct < 0)
                return;
        report_metric(&c->report, "idle_cpu", "", "hbg", mode, threads, 0, pct, "percent_of_one_core");
        printf("  hbgd idle: %.3f%% of one core\n", pct);

        struct probe_sessions *open;
        int err = probe_sessions_open(h->socket, IDLE_SESSIONS, &open);
        if (err < 0) {
                fprintf(stderr, "hbg-bench: %u idle sessions (hbg %s): %s\n", IDLE_SESSIONS, mode, strerror(-err));
                c->failures++;
                return;
        }
        usleep(300 * 1000);
        bench_proc_settle(h->pid, SETTLE_MAX_MS); /* the spare rings they took, made again */
        pct = idle_cpu_pct(c, h);
        probe_sessions_close(open);
        if (pct < 0)
                return;
        report_metric(&c->report, "idle_cpu_sessions", "", "hbg", mode, threads, IDLE_SESSIONS, pct,
                      "percent_of_one_core");
        printf("  hbgd idle, %u sessions open: %.3f%% of one core\n", IDLE_SESSIONS, pct);
}
