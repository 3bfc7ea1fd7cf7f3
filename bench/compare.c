/* SPDX-License-Identifier: MIT */
/*
 * `hbg-bench [options]`: the comparison. Every shape (bench/dag.h), built
 * by 1..8 producer processes through libhbgclient against an hbgd of its
 * own per completion mode and thread count, then by each peer in its own
 * process; latencies, idle CPU, hbgctl's compile time and instruction
 * counts beside. Output: bench/report.h; what it means: docs/PERFORMANCE.md.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/utsname.h>
#include <unistd.h>

#include "bench/bench.h"
#include "bench/bench_util.h"
#include "bench/compare.h"
#include "bench/dag.h"
#include "bench/hbgd_proc.h"
#include "bench/targets.h"
#include "daemon/engine/engine.h"
#include "shm/geometry.h"

const char *cmp_shape(const struct cmp *c, unsigned k) {
        return dag_shape_name(c->shapes[k]);
}

const char *cmp_hbgd_config(const struct cmp *c, char *buf, unsigned len) {
        /* Replay rows record whole shapes: up to 2^17 tasks each. The
         * latency's idle sessions open beside the others as any user's. */
        int n = snprintf(buf, len, "[limits]\nmax_recorded_tasks = 16777216\nmax_sessions_per_uid = 64\n");
        /* The task window as hbgd's default, or as large as the flag
         * window asked for (F <= D). */
        if (c->flag_window && n > 0 && (unsigned)n < len) {
                struct hbg_geometry_request dflt;
                geometry_request_default(&dflt);
                uint64_t d = c->flag_window > dflt.task_window ? c->flag_window : dflt.task_window;
                n += snprintf(buf + n, len - (unsigned)n, "[session]\ntask_window = %" PRIu64 "\nflag_window = %u\n",
                              d, c->flag_window);
        }
        if (c->module[0] && n > 0 && (unsigned)n < len)
                snprintf(buf + n, len - (unsigned)n, "[kernels]\nmodules = %s\n", c->module);
        return buf;
}

const char *cmp_elapsed(struct cmp *c) {
        int64_t s = (bench_now_ns() - c->start_ns) / 1000000000;
        snprintf(c->elapsed, sizeof(c->elapsed), "%d:%02d since start", (int)(s / 60), (int)(s % 60));
        return c->elapsed;
}

uint64_t cmp_size(const struct cmp *c, unsigned k) {
        uint64_t s = c->sizes[c->shapes[k]];
        return s ? s : dag_default_size(cmp_shape(c, k), c->quick);
}

void cmp_spread_metrics(struct cmp *c, const char *shape, const char *system, const char *mode,
                        unsigned threads, unsigned clients, double *ns, unsigned n, uint64_t tasks) {
        double v[64], min, median, max = 0;
        memcpy(v, ns, n * sizeof(double));
        bench_min_median(v, n, &min, &median);
        for (unsigned i = 0; i < n; i++)
                max = v[i] > max ? v[i] : max;
        report_metric(&c->report, "ns_per_task_min", shape, system, mode, threads, clients, min / (double)tasks, "ns");
        report_metric(&c->report, "ns_per_task_max", shape, system, mode, threads, clients, max / (double)tasks, "ns");
        report_metric(&c->report, "spread", shape, system, mode, threads, clients,
                      median > 0 ? 100.0 * (max - min) / median : 0, "percent_of_median");
        report_metric(&c->report, "repetitions", shape, system, mode, threads, clients, n, "count");
}

void bench_compare_usage(FILE *out) {
        fputs("comparison (the default): hbg through libhbgclient beside oneTBB, OpenMP, StarPU and a\n"
              "one-thread floor, every shape under every completion mode (docs/PERFORMANCE.md)\n"
              "  hbg-bench [--quick] [--shapes LIST] [--sizes N|SHAPE=N,...] [--threads LIST]\n"
              "            [--clients LIST] [--repeat R] [--warmup W] [--modes LIST] [--peers LIST|none]\n"
              "            [--out DIR] [--seed S] [--flag-window N] [--no-instructions] [--no-latency]\n"
              "            [--no-reuse] [--kernels [--module PATH]] [--host] [--python [--python-size N]]\n"
              "            [--trace[=SHAPE] [--trace-size N] [--trace-task-us US]]\n"
              "  --quick            smaller graphs and fewer samples: under 5 minutes on 2 cores\n"
              "  --shapes LIST      of chain,independent,tree,wavefront,layered,gemm,attention (all),\n"
              "                     or none (no shape rows, hbg's or the peers': with --kernels or\n"
              "                     --host and --peers none, only those rows)\n"
              "  --sizes ...        tasks per graph, for every shape (N) or some (SHAPE=N)\n"
              "  --threads LIST     hbgd and peer worker threads (4)\n"
              "  --clients LIST     concurrent producer processes (1,2,4,8)\n"
              "  --repeat R         measured repetitions, the median reported (5)\n"
              "  --warmup W         repetitions run first and not measured (1)\n",
              out);
        fprintf(out, "  --modes LIST       completion modes, of %s (all)\n", completion_mode_list());
        fputs("  --peers LIST       tbb,openmp,starpu,floor,taskflow (all built), or none\n"
              "  --out DIR          results.csv, metrics.csv, plots, profiles (build/bench)\n"
              "  --flag-window N    hbgd's sessions get N completion flags (default: hbgd's, as many\n"
              "                     as task slots); fewer make slots wait for their reuse (§3)\n"
              "  --no-instructions  skip the callgrind runs\n"
              "  --no-latency       skip the latency rows: 1- and 16-task graphs, tensor waits,\n"
              "                     connects at once, fairness\n"
              "  --no-reuse         skip the pass with 256 flags per session (flag slots reused)\n"
              "  --kernels          also the chain and independent graphs with a tensor per task run\n"
              "                     by built-in kernels (copy_f32, scale_f32) and by the example\n"
              "                     module's relu_f32, on one hbgd that loaded it: ns per task,\n"
              "                     hbgd's instructions per task, module / built-in (shapes NAME-64B,\n"
              "                     NAME-64KiB; systems hbg-KERNEL)\n"
              "  --module PATH      the example module (else $HBG_BENCH_MODULE, else\n"
              "                     ../lib/hbg/kernels/hbg-nn.so from hbg-bench's directory)\n"
              "  --host             also host functions (hbg_task.host_fn) on libhbgclient's worker threads\n"
              "                     (host_threads 0,1,2,4) beside oneTBB, OpenMP, Taskflow running the same\n"
              "                     C function (those of --peers that are built): speed-up of 64 ~1 ms\n"
              "                     functions, ns per empty function (chain, independent), the layered\n"
              "                     graph with every fourth task a host function; goals met or not\n"
              "                     (shapes host-*; systems hbg-host and the peers)\n"
              "  --python           also the shapes (not gemm) from Python through the hbg package\n"
              "                     (build/python, Debian's /usr/bin/python3 or $HBG_BENCH_PYTHON):\n"
              "                     built and run by 1, 2, 4 processes, replayed, beside Dask's threaded\n"
              "                     scheduler, concurrent.futures and a plain loop, with empty tasks\n"
              "                     and with add_f32 on 64 KiB arrays; the same replays from C; goals\n"
              "                     met or not (shapes py-*; skipped, saying why, without numpy)\n"
              "  --python-size N    tasks of the Python graphs (10000; --quick 2000; 64 KiB: a tenth)\n"
              "  --trace[=SHAPE]    also, after every other row, one graph of SHAPE (wavefront) on an\n"
              "                     hbgd of its own (default completion policy, 4 threads)\n"
              "                     recorded by `hbgctl trace` (found beside hbg-bench): DIR/trace.json\n"
              "                     (Perfetto, chrome://tracing) and DIR/trace.svg, and per scheduler\n"
              "                     thread its tasks, busy share, median wait from ready to start, parks\n"
              "  --trace-size N     tasks of the traced graph (1600: a 40 x 40 wavefront)\n"
              "  --trace-task-us US each traced task busy-waits US us in hbgd (spin_ns; 20): long enough\n"
              "                     to see the shape's parallelism; 0: noop tasks, as in the rows\n"
              "  hbg-bench --compare OLD.csv NEW.csv   per-row ratios of two results.csv\n",
              out);
}

static bool parse_sizes(struct cmp *c, const char *value) {
        for (const char *p = value; *p;) {
                size_t len = strcspn(p, ",");
                char item[64];
                snprintf(item, sizeof(item), "%.*s", (int)(len < 63 ? len : 63), p);
                char *eq = strchr(item, '=');
                const char *num = eq ? eq + 1 : item;
                uint64_t v;
                if (!bench_option_u64("compare", "--sizes", num, 1, 1u << 24, &v))
                        return false;
                bool found = !eq;
                for (unsigned s = 0; s < dag_shape_count(); s++)
                        if (!eq || (strlen(dag_shape_name(s)) == (size_t)(eq - item) &&
                                    strncmp(item, dag_shape_name(s), (size_t)(eq - item)) == 0)) {
                                c->sizes[s] = v;
                                found = true;
                        }
                if (!found) {
                        fprintf(stderr, "hbg-bench: --sizes: unknown shape in '%s'\n", item);
                        return false;
                }
                p += len + (p[len] == ',');
        }
        return true;
}

static int parse(struct cmp *c, int argc, char **argv) {
        static const char *const names[] = { "--shapes", "--sizes", "--threads", "--clients", "--repeat",
                                             "--warmup", "--modes", "--peers", "--out", "--seed",
                                             "--flag-window", "--module", "--python-size", "--trace-size",
                                             "--trace-task-us", NULL };
        const char *shape_names[CMP_MAX_SHAPES], *mode_names[CMP_MAX_LIST];
        unsigned n_modes = completion_mode_count();
        unsigned n_shapes = dag_shape_count();
        for (unsigned s = 0; s < n_shapes; s++)
                shape_names[s] = dag_shape_name(s);
        for (unsigned m = 0; m < n_modes && m < CMP_MAX_LIST; m++)
                mode_names[m] = completion_mode_name(m);

        for (int i = 1; i < argc; i++) {
                const char *name, *value;
                uint64_t v;
                if (strcmp(argv[i], "--quick") == 0)
                        c->quick = true;
                else if (strcmp(argv[i], "--no-instructions") == 0)
                        c->instructions = false;
                else if (strcmp(argv[i], "--no-latency") == 0)
                        c->latency = false;
                else if (strcmp(argv[i], "--no-reuse") == 0)
                        c->no_reuse = true;
                else if (strcmp(argv[i], "--kernels") == 0)
                        c->kernels = true;
                else if (strcmp(argv[i], "--host") == 0)
                        c->host = true;
                else if (strcmp(argv[i], "--python") == 0)
                        c->python = true;
                else if (strcmp(argv[i], "--trace") == 0 || strncmp(argv[i], "--trace=", 8) == 0) {
                        /* An optional value: only as --trace=SHAPE. */
                        unsigned one = 0;
                        c->trace = true;
                        if (argv[i][7] == '=' && !bench_option_name_list("compare", "--trace", argv[i] + 8,
                                                                          shape_names, n_shapes, &c->trace_shape,
                                                                          &one, 1))
                                return BENCH_EXIT_USAGE;
                }
                else if (bench_option("compare", argc, argv, &i, names, &name, &value) < 0)
                        return BENCH_EXIT_USAGE;
                else if (strcmp(name, "--shapes") == 0) {
                        if (strcmp(value, "none") == 0)
                                c->n_shapes = 0;
                        else if (!bench_option_name_list("compare", name, value, shape_names, n_shapes, c->shapes,
                                                    &c->n_shapes, CMP_MAX_SHAPES))
                                return BENCH_EXIT_USAGE;
                } else if (strcmp(name, "--sizes") == 0) {
                        if (!parse_sizes(c, value))
                                return BENCH_EXIT_USAGE;
                } else if (strcmp(name, "--threads") == 0) {
                        if (!bench_option_uint_list("compare", name, value, 64, c->threads, &c->n_threads,
                                                    CMP_MAX_LIST))
                                return BENCH_EXIT_USAGE;
                } else if (strcmp(name, "--clients") == 0) {
                        if (!bench_option_uint_list("compare", name, value, 64, c->clients, &c->n_clients,
                                                    CMP_MAX_LIST))
                                return BENCH_EXIT_USAGE;
                } else if (strcmp(name, "--modes") == 0) {
                        if (!bench_option_name_list("compare", name, value, mode_names, n_modes,
                                                    c->modes, &c->n_modes, CMP_MAX_LIST))
                                return BENCH_EXIT_USAGE;
                } else if (strcmp(name, "--peers") == 0) {
                        if (strcmp(value, "none") == 0)
                                c->n_peers = 0;
                        else if (!bench_option_name_list("compare", name, value, cmp_peer_names, CMP_N_PEERS,
                                                         c->peers, &c->n_peers, CMP_MAX_LIST))
                                return BENCH_EXIT_USAGE;
                } else if (strcmp(name, "--repeat") == 0) {
                        if (!bench_option_u64("compare", name, value, 1, 64, &v))
                                return BENCH_EXIT_USAGE;
                        c->repeat = (unsigned)v;
                } else if (strcmp(name, "--warmup") == 0) {
                        if (!bench_option_u64("compare", name, value, 0, 64, &v))
                                return BENCH_EXIT_USAGE;
                        c->warmup = (unsigned)v;
                } else if (strcmp(name, "--flag-window") == 0) {
                        if (!bench_option_u64("compare", name, value, 256, 1u << 20, &v) || (v & (v - 1))) {
                                fprintf(stderr, "hbg-bench: --flag-window: a power of two from 256 to 2^20\n");
                                return BENCH_EXIT_USAGE;
                        }
                        c->flag_window = (unsigned)v;
                } else if (strcmp(name, "--seed") == 0) {
                        if (!bench_option_u64("compare", name, value, 0, UINT64_MAX, &c->seed))
                                return BENCH_EXIT_USAGE;
                } else if (strcmp(name, "--python-size") == 0) {
                        if (!bench_option_u64("compare", name, value, 1, 1u << 20, &c->python_size))
                                return BENCH_EXIT_USAGE;
                } else if (strcmp(name, "--trace-size") == 0) {
                        if (!bench_option_u64("compare", name, value, 1, 1u << 20, &c->trace_size))
                                return BENCH_EXIT_USAGE;
                } else if (strcmp(name, "--trace-task-us") == 0) {
                        if (!bench_option_u64("compare", name, value, 0, 1000000, &c->trace_task_us))
                                return BENCH_EXIT_USAGE;
                } else if (strcmp(name, "--module") == 0) {
                        c->module_opt = value;
                } else if (*value == '\0') {
                        fprintf(stderr, "hbg-bench: --out: empty directory name\n");
                        return BENCH_EXIT_USAGE;
                } else
                        c->out = value;
        }
        return BENCH_EXIT_OK;
}

static void defaults(struct cmp *c) {
        memset(c, 0, sizeof(*c));
        c->instructions = c->latency = true;
        c->n_shapes = dag_shape_count();
        for (unsigned s = 0; s < c->n_shapes; s++)
                c->shapes[s] = s;
        c->threads[0] = 4;
        c->n_threads = 1;
        static const unsigned clients[] = { 1, 2, 4, 8 };
        c->n_clients = 4;
        memcpy(c->clients, clients, sizeof(clients));
        c->n_modes = completion_mode_count();
        for (unsigned m = 0; m < c->n_modes; m++)
                c->modes[m] = m;
        c->n_peers = CMP_N_PEERS;
        for (unsigned p = 0; p < CMP_N_PEERS; p++)
                c->peers[p] = p;
        c->repeat = 5;
        c->warmup = 1;
        c->seed = 1;
        c->out = "build/bench";
        for (unsigned s = 0; s < dag_shape_count(); s++)
                if (strcmp(dag_shape_name(s), "wavefront") == 0)
                        c->trace_shape = s;
        c->trace_task_us = CMP_TRACE_TASK_US;
}

static void machine(struct cmp *c) {
        char model[256] = "unknown", line[512];
        FILE *f = fopen("/proc/cpuinfo", "r");
        while (f && fgets(line, sizeof(line), f))
                if (strncmp(line, "model name", 10) == 0) {
                        char *p = strchr(line, ':');
                        if (p) {
                                snprintf(model, sizeof(model), "%s", p + 2);
                                model[strcspn(model, "\n")] = 0;
                        }
                        break;
                }
        if (f)
                fclose(f);
        long cpus = sysconf(_SC_NPROCESSORS_ONLN);
        struct utsname u;
        if (uname(&u) < 0)
                snprintf(u.release, sizeof(u.release), "?");
        printf("machine: %s, %ld cpus online, Linux %s; repetitions %u (median), warm-up %u%s\n", model, cpus,
               u.release, c->repeat, c->warmup, c->quick ? "; --quick sizes" : "");
        if (c->flag_window)
                printf("hbgd sessions: flag_window %u\n", c->flag_window);
        report_metric(&c->report, "cpus_online", "", "", "", 0, 0, (double)cpus, "count");
}

int bench_compare_main(int argc, char **argv) {
        struct cmp c;
        defaults(&c);
        int rc = parse(&c, argc, argv);
        if (rc != BENCH_EXIT_OK)
                return rc;
        c.start_ns = bench_now_ns();
        bench_self_dir(c.dir, sizeof(c.dir));
        ssize_t n = readlink("/proc/self/exe", c.self, sizeof(c.self) - 1);
        if (n <= 0) {
                fprintf(stderr, "hbg-bench: cannot find itself (/proc/self/exe)\n");
                return BENCH_EXIT_FAIL;
        }
        c.self[n] = 0;
        unsigned plot_threads = c.threads[c.n_threads - 1];
        for (unsigned i = 0; i < c.n_threads; i++)
                if (c.threads[i] == 4)
                        plot_threads = 4;
        if (report_open(&c.report, c.out, plot_threads) < 0)
                return BENCH_EXIT_FAIL;
        machine(&c);
        cmp_pingpong(&c);
        for (unsigned t = 0; t < c.n_threads && c.n_shapes; t++)
                for (unsigned m = 0; m < c.n_modes; m++)
                        cmp_hbg(&c, c.modes[m], c.threads[t]);
        /* With few flags per session, if no window was forced: the
         * question the completion policies differ on. */
        unsigned flag_window = c.flag_window;
        if (!flag_window && !c.no_reuse && c.n_shapes)
                for (unsigned m = 0; m < c.n_modes; m++)
                        cmp_hbg_reuse(&c, c.modes[m], plot_threads, 256);
        c.flag_window = flag_window;
        if (c.kernels)
                cmp_kernels(&c);
        if (c.host)
                cmp_host(&c);
        if (c.python)
                cmp_python(&c);
        for (unsigned p = 0; p < c.n_peers && c.n_shapes; p++)
                for (unsigned t = 0; t < c.n_threads; t++) {
                        /* The floor is one thread: once is enough. */
                        if (t > 0 && strcmp(cmp_peer_names[c.peers[p]], "floor") == 0)
                                break;
                        cmp_peer(&c, c.peers[p], c.threads[t]);
                }
        if (c.instructions && c.n_shapes)
                cmp_instructions(&c);
        /* Last: the timeline's hbgd and hbgctl run beside no measured row. */
        if (c.trace)
                cmp_trace(&c);
        if (c.n_shapes)
                cmp_targets(&c);
        if (report_close(&c.report) < 0)
                c.failures++;
        printf("\n[%s] results: %s/results.csv, %s/metrics.csv", cmp_elapsed(&c), c.out, c.out);
        /* Only the plots drawn: without gnuplot report_close() said why. */
        if (c.report.overhead_png && c.report.latency_png)
                printf(", plots %s/overhead.png and %s/latency.png", c.out, c.out);
        else if (c.report.overhead_png || c.report.latency_png)
                printf(", plot %s/%s.png", c.out, c.report.overhead_png ? "overhead" : "latency");
        putchar('\n');
        if (c.failures) {
                fprintf(stderr, "hbg-bench: %d part%s of the run failed (see above)\n", c.failures,
                        c.failures == 1 ? "" : "s");
                return BENCH_EXIT_FAIL;
        }
        return BENCH_EXIT_OK;
}
