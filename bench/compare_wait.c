/* SPDX-License-Identifier: MIT */
/*
 * The comparison's tensor-wait cases (bench/compare.h): one producer waits
 * with hbg_tensor_wait_ready() for a tensor whose writer runs after a
 * task of 2 ms, then of 10 ms, graph after graph, the rest of the graph
 * (a task twice as long) after the writer. Metrics, for N of 2
 * and 10: how late the wait returns after that time
 * (tensor_wait_Nms_late_p50/_p99, µs: the writer's own run, its
 * completion, hbgd's pipe byte and the wake-up), and the waiting
 * thread's CPU time in the wait (tensor_wait_Nms_cpu_p50, µs: its spin,
 * then what its sleeps cost). A third case puts the writer, a fill of 1
 * MiB (some 100 us), beside a 2 ms task added before it, with no rest
 * (tensor_wait_beside_2ms_*): the writer runs at once while that task
 * holds the watermark back, and the wait's lateness counts from the first
 * add (the writer's own run included).
 */
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench/child.h"
#include "bench/compare.h"
#include "bench/hbgd_proc.h"
#include "bench/probes.h"

#define LINE_MS 60000

static void tensor_wait_case(struct cmp *c, struct bench_hbgd *h, const char *mode, unsigned threads,
                             unsigned task_ms, bool beside) {
        const unsigned count = c->quick ? 40 : 200;
        const char *argv[] = { c->self, "producer", "--socket", h->socket, "--shape", "independent",
                               "--size", "1", NULL };
        struct bench_child kid;
        char line[128];
        double *late = calloc(count, sizeof(double)), *cpu = calloc(count, sizeof(double));
        if (!late || !cpu || bench_child_start(&kid, "tensor-wait producer", argv) < 0) {
                free(late);
                free(cpu);
                c->failures++;
                return;
        }
        unsigned n = 0;
        int err = cmp_expect(&kid, "connect_ns ", line, sizeof(line), LINE_MS);
        char cmd[64];
        const int64_t task_ns = (int64_t)task_ms * 1000000;
        snprintf(cmd, sizeof(cmd), "%s %" PRId64 " %u", beside ? "twait_beside" : "twait", task_ns, count);
        if (err == 0)
                err = bench_child_send(&kid, cmd);
        while (err == 0 && (err = cmp_expect(&kid, "", line, sizeof(line), LINE_MS)) == 0 && strcmp(line, "end") != 0) {
                int64_t wall, thread_cpu;
                if (n < count && sscanf(line, "tw %" SCNd64 " %" SCNd64, &wall, &thread_cpu) == 2) {
                        late[n] = (double)(wall - (beside ? 0 : task_ns)) / 1e3;
                        cpu[n++] = (double)thread_cpu / 1e3;
                } else {
                        fprintf(stderr, "hbg-bench: tensor-wait producer: %s\n", line);
                }
        }
        if (err == 0 && n > 0) {
                double p50 = probe_quantile(late, n, 0.50), p99 = probe_quantile(late, n, 0.99);
                double cpu50 = probe_quantile(cpu, n, 0.50);
                const struct {
                        const char *what;
                        double value;
                } m[] = { { "late_p50", p50 }, { "late_p99", p99 }, { "cpu_p50", cpu50 } };
                for (unsigned i = 0; i < sizeof(m) / sizeof(m[0]); i++) {
                        char metric[64];
                        snprintf(metric, sizeof(metric), "tensor_wait_%s%ums_%s", beside ? "beside_" : "", task_ms,
                                 m[i].what);
                        report_metric(&c->report, metric, "", "hbg", mode, threads, 1, m[i].value, "us");
                }
                printf("  tensor wait, writer %s a %2u ms task: late p50 %8.1f us  p99 %8.1f us, "
                       "the waiter's CPU p50 %8.1f us  (%u graphs)\n",
                       beside ? "beside" : "after ", task_ms, p50, p99, cpu50, n);
                bench_child_send(&kid, "quit");
        }
        if (bench_child_finish(&kid, 10000) != 0 || err < 0 || n == 0) {
                fprintf(stderr, "hbg-bench: tensor wait, %s %u ms (hbg %s, %u threads) failed\n",
                        beside ? "beside" : "after", task_ms, mode, threads);
                c->failures++;
        }
        free(late);
        free(cpu);
}

void cmp_tensor_wait(struct cmp *c, struct bench_hbgd *h, const char *mode, unsigned threads) {
        tensor_wait_case(c, h, mode, threads, 2, false);
        tensor_wait_case(c, h, mode, threads, 10, false);
        tensor_wait_case(c, h, mode, threads, 2, true);
}
