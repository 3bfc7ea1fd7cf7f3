/* SPDX-License-Identifier: MIT */
/*
 * Suite "engine": what the scheduler engine (daemon/engine/engine.h) costs
 * per task, end to end, with tasks that do nothing: kernel HBG_KERNEL_NOOP
 * on the AIV0 lane, block_num 1. What is left is classification (copy,
 * validate, route), the wake lists, the ready queue, dispatch, completion
 * (stamp, watermark), graph retirement, parking and waking, and the
 * client's side of the protocol.
 *
 * One run: a fresh engine (T threads, 2T clusters) and one ring (default
 * geometry, D = F = 4096 since it became the default, 16384 before:
 * docs/PERFORMANCE.md's figures say which; heap 1 MiB) bound to it; the bench
 * thread plays the client through tests/engine/harness.c (shm/producer.c),
 * writing N tasks in graphs of GRAPH_TASKS, publishing every PUBLISH_EVERY
 * tasks, then waiting for the last graph. The time is taken from the first
 * submit to the last graph retired. Shapes:
 *
 *   - "chain":       task i depends on task i - 1: no parallelism at all,
 *                    every task goes through a wake list;
 *   - "independent": no fanins: tasks are ready at classification;
 *   - "fanin4":      task i depends on 4 distinct random tasks among the
 *                    256 before it (fewer for the first 4 tasks).
 *
 * Every run is checked: the last graph must succeed and the ring must
 * report N tasks completed, none failed, every graph retired and the
 * watermark at N, and the threads N tasks executed. A run that fails the
 * check (or whose ring the engine stops) contributes no numbers: it is
 * reported on stderr and counted, the case runs again until it has R good
 * runs or R failed ones (then it prints no numbers at all), and the suite
 * exits 1 at the end. A run that stops making progress ends the suite at
 * once (the engine's threads may be stuck).
 */
#include <inttypes.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench/bench.h"
#include "bench/bench_util.h"
#include "daemon/engine/engine.h"
#include "daemon/engine/engine_stats.h"
#include "daemon/engine/kernels.h"
#include "shm/completion.h"
#include "shm/geometry.h"
#include "shm/layout.h"
#include "tests/engine/harness.h"

#define SUITE "engine"

#define GRAPH_TASKS 1000u
#define PUBLISH_EVERY 64u
#define FANIN4_FANINS 4u
#define FANIN4_SPAN 256u
/* fanin4 draws its offsets from a table of this many tasks, used round
 * robin, built once per process whatever N is: the random draws then cost
 * the same with --tasks 0, and drop out of instruction counts that
 * subtract that run. Far longer than any predictor history. */
#define FANIN4_PERIOD 4096u
#define FANIN4_SEED UINT64_C(0x6862672d656e6769) /* "hbg-engi": runs are reproducible */

#define HEAP_SIZE (UINT64_C(1) << 20)

/* No watermark progress for this long means the engine lost a task: fail
 * instead of waiting for ever. The engine's own stall detector (10 s by
 * default) should have failed the ring well before. Generous, because
 * valgrind is slow. */
#define STALL_LIMIT_S 30u

#define DEFAULT_TASKS UINT64_C(200000)
#define DEFAULT_REPEAT 5u
#define MAX_TASKS (UINT64_C(1) << 40)
#define MAX_REPEAT 1000u
#define MAX_LIST 16u

enum shape { SHAPE_CHAIN, SHAPE_INDEPENDENT, SHAPE_FANIN4, N_SHAPES };
static const char *const shape_names[N_SHAPES] = { "chain", "independent", "fanin4" };

struct options {
        unsigned threads[MAX_LIST];
        unsigned n_threads;
        enum shape shapes[MAX_LIST];
        unsigned n_shapes;
        uint64_t tasks;
        unsigned repeat;
        bool no_spin;
        const char *csv;
};

/* ------------------------------------------------------------ fanin4 */

/* Offsets back from the task's own id, 1..FANIN4_SPAN, distinct per task. */
struct fanin_table {
        uint16_t head[FANIN4_SPAN][FANIN4_FANINS];   /* task i < SPAN: offsets <= i */
        uint16_t cycle[FANIN4_PERIOD][FANIN4_FANINS]; /* task i >= SPAN: cycle[i % PERIOD] */
};

/* k distinct offsets in 1..span (k <= span); the modulo bias of a 64-bit
 * draw over <= 256 is nil here. */
static void draw_offsets(uint16_t *out, unsigned k, unsigned span, uint64_t *rng) {
        for (unsigned j = 0; j < k;) {
                uint16_t v = (uint16_t)(1 + bench_splitmix64(rng) % span);
                bool dup = false;
                for (unsigned i = 0; i < j; i++)
                        dup |= out[i] == v;
                if (!dup)
                        out[j++] = v;
        }
}

static void fanin_table_init(struct fanin_table *ft) {
        uint64_t rng = FANIN4_SEED;

        memset(ft, 0, sizeof(*ft));
        for (unsigned i = 1; i < FANIN4_SPAN; i++)
                draw_offsets(ft->head[i], i < FANIN4_FANINS ? i : FANIN4_FANINS, i, &rng);
        for (unsigned i = 0; i < FANIN4_PERIOD; i++)
                draw_offsets(ft->cycle[i], FANIN4_FANINS, FANIN4_SPAN, &rng);
}

/* ------------------------------------------------------------ one run */

/* What one run measured: time, the threads' counters summed, the client's
 * doorbells. */
struct sample {
        double ns_per_task;
        uint64_t parks, wakeups, failsafe_pushes, advances, cas_failures, doorbells;
};

static uint64_t ring_watermark(const struct harness_ring *h) {
        return atomic_load_explicit(&h->ch->completed_watermark, memory_order_acquire);
}

static int32_t ring_error(const struct harness_ring *h) {
        return atomic_load_explicit(&h->ch->error_code, memory_order_acquire);
}

/* Tracks watermark progress while the client waits: false once it has not
 * moved for STALL_LIMIT_S. */
struct progress {
        uint64_t wm;
        int64_t since_ns;
};

static void progress_init(struct progress *p, const struct harness_ring *h) {
        p->wm = ring_watermark(h);
        p->since_ns = bench_now_ns();
}

static bool progress_ok(struct progress *p, const struct harness_ring *h) {
        uint64_t wm = ring_watermark(h);
        int64_t now = bench_now_ns();

        if (wm != p->wm) {
                p->wm = wm;
                p->since_ns = now;
                return true;
        }
        return now - p->since_ns < (int64_t)STALL_LIMIT_S * 1000000000;
}

/* The engine stopped making progress: its threads may be stuck, so no
 * clean-up is attempted. */
static __attribute__((noreturn)) void die_stuck(const struct harness_ring *h, const char *case_name,
                                                const char *where) {
        struct ring_stats rs;

        ring_stats(h->ring, &rs);
        fprintf(stderr, "hbg-bench " SUITE ": %s: %s: ring error %" PRId32 " (%s), watermark %"
                PRIu64 ", submitted %" PRIu64 ", classified %" PRIu64 ", completed %" PRIu64
                ", graphs retired %" PRIu64 " of %" PRIu64 "\n",
                case_name, where, ring_error(h), ring_error(h) ? strerror(-ring_error(h)) : "none",
                rs.watermark, h->prod.published, rs.classified, rs.completed, rs.graphs_retired,
                h->prod.graphs);
        exit(BENCH_EXIT_FAIL);
}

/*
 * harness_add_task() waits for the window (id < WM + D) for ever; do that
 * wait here instead, the same way (publish, yield), so that a stopped ring
 * or a lost task ends the run instead of hanging it. false: the engine
 * stopped the ring. Out of line: the client gets here only when it is D
 * tasks ahead.
 */
static __attribute__((noinline)) bool wait_for_window(struct harness_ring *h, const char *case_name) {
        struct progress p;

        progress_init(&p, h);
        for (unsigned spins = 0; h->prod.next_id >= ring_watermark(h) + h->g.task_window; spins++) {
                harness_publish(h);
                if (ring_error(h))
                        return false;
                if (spins % 1024 == 1023 && !progress_ok(&p, h))
                        die_stuck(h, case_name, "no progress while the client waited for the window");
                sched_yield();
        }
        return true;
}

static void wait_last_graph(struct harness_ring *h, uint64_t k, const char *case_name,
                            struct hbg_graph_entry *ge) {
        struct progress p;

        progress_init(&p, h);
        /* Wakes on the eventfd as soon as a graph retires; the 1 s timeout
         * only paces the progress check. */
        while (harness_wait_graph(h, k, 1000, ge) < 0)
                if (!progress_ok(&p, h))
                        die_stuck(h, case_name, "no progress while waiting for the last graph");
}

/* Write, publish and close the graphs of n tasks; returns the last graph's
 * record number, UINT64_MAX if n == 0 or if the engine stopped the ring
 * before all were written. */
static uint64_t submit(struct harness_ring *h, enum shape shape, uint64_t n,
                       const struct fanin_table *ft, const char *case_name) {
        struct harness_task t = {
                .kernel = { [HBG_LANE_AIV0] = HBG_KERNEL_NOOP },
                .lane_mask = 1u << HBG_LANE_AIV0,
                .block_num = 1,
        };
        uint64_t last_k = UINT64_MAX;

        for (uint64_t i = 0; i < n; i++) {
                uint64_t id = h->prod.next_id;

                if (id >= ring_watermark(h) + h->g.task_window && !wait_for_window(h, case_name))
                        return UINT64_MAX;
                switch (shape) {
                case SHAPE_CHAIN:
                        t.n_fanins = i > 0;
                        t.fanins[0] = id - 1;
                        break;
                case SHAPE_INDEPENDENT:
                        break;
                case SHAPE_FANIN4: {
                        const uint16_t *off = i < FANIN4_SPAN ? ft->head[i]
                                                              : ft->cycle[i % FANIN4_PERIOD];
                        unsigned k = i < FANIN4_FANINS ? (unsigned)i : FANIN4_FANINS;
                        t.n_fanins = (uint8_t)k;
                        for (unsigned j = 0; j < k; j++)
                                t.fanins[j] = id - off[j];
                        break;
                }
                case N_SHAPES:
                        break;
                }
                harness_add_task(h, &t);
                if ((i + 1) % PUBLISH_EVERY == 0)
                        harness_publish(h);
                if ((i + 1) % GRAPH_TASKS == 0 || i + 1 == n)
                        last_k = harness_end_graph(h, h->prod.graphs);
        }
        return last_k;
}

/* Returns 0, or -1 after printing why (setup failed or the result is
 * wrong). */
static int run_once(const struct options *o, unsigned threads, enum shape shape,
                    const struct fanin_table *ft, const char *case_name, struct sample *ret) {
        struct hbg_engine_config cfg;
        struct hbg_engine *e = NULL;
        struct hbg_geometry_request req;
        struct harness_ring h;
        const uint64_t n = o->tasks;
        int rc = 0;

        engine_config_default(&cfg);
        cfg.threads = threads;
        cfg.clusters = 2 * threads;
        if (o->no_spin)
                cfg.spin_before_park_ns = 0;
        int err = engine_new(&e, &cfg);
        if (err < 0) {
                fprintf(stderr, "hbg-bench " SUITE ": %s: engine_new: %s\n", case_name,
                        strerror(-err));
                return -1;
        }
        geometry_request_default(&req);
        req.heap_size = HEAP_SIZE;
        err = harness_ring_init(&h, e, &req, 0);
        if (err < 0) {
                fprintf(stderr, "hbg-bench " SUITE ": %s: ring: %s\n", case_name, strerror(-err));
                harness_ring_destroy(&h);
                engine_free(e);
                return -1;
        }

        struct hbg_graph_entry ge = { .status = 0 };
        int64_t t0 = bench_now_ns();
        uint64_t last_k = submit(&h, shape, n, ft, case_name);
        if (last_k != UINT64_MAX)
                wait_last_graph(&h, last_k, case_name, &ge);
        int64_t t1 = bench_now_ns();
        bool all_written = n == 0 || last_k != UINT64_MAX;

        /* Counters before the ring goes (the completer counters of a live
         * ring are summed from the ring). */
        *ret = (struct sample){
                .ns_per_task = n ? (double)(t1 - t0) / (double)n : 0.0,
                .doorbells = h.doorbells,
        };
        uint64_t executed = 0;
        for (unsigned i = 0; i < engine_threads(e); i++) {
                struct hbg_thread_stats s;

                engine_thread_stats(e, i, &s);
                ret->parks += s.parks;
                ret->wakeups += s.wakeups;
                ret->failsafe_pushes += s.failsafe_pushes;
                ret->advances += s.watermark_advances;
                ret->cas_failures += s.watermark_cas_failures;
                executed += s.executed_tasks;
        }
        struct ring_stats rs;
        ring_stats(h.ring, &rs);
        uint64_t graphs = h.prod.graphs;

        /* A run that computed a wrong result gives no numbers. */
        if (!all_written) {
                fprintf(stderr, "hbg-bench " SUITE ": %s: the engine stopped the ring after %"
                        PRIu64 " of %" PRIu64 " tasks were written: %s (task %" PRIu64 ")\n",
                        case_name, h.prod.next_id - h.first_id, n, strerror(-rs.error),
                        (uint64_t)atomic_load(&h.ch->error_task));
                rc = -1;
        } else if (ge.status != 0) {
                fprintf(stderr, "hbg-bench " SUITE ": %s: last graph failed: %s (task %" PRIu64
                        ")\n", case_name, strerror(-ge.status), ge.first_error_task);
                rc = -1;
        } else if (rs.watermark != n || rs.completed != n || rs.failed != 0 || executed != n ||
            rs.graphs_retired != graphs || rs.graphs_failed != 0 || rs.error != 0) {
                fprintf(stderr, "hbg-bench " SUITE ": %s: expected %" PRIu64 " tasks completed"
                        " and executed and %" PRIu64 " graphs retired, none failed; got"
                        " watermark %" PRIu64 ", completed %" PRIu64 ", failed %" PRIu64
                        ", executed %" PRIu64 ", graphs retired %" PRIu64 ", failed %" PRIu64
                        ", ring error %" PRId32 "\n",
                        case_name, n, graphs, rs.watermark, rs.completed, rs.failed, executed,
                        rs.graphs_retired, rs.graphs_failed, rs.error);
                rc = -1;
        }
        harness_ring_destroy(&h);
        engine_free(e);
        return rc;
}

/* ------------------------------------------------------------ one case */

struct case_result {
        char name[32];
        unsigned threads;
        enum shape shape;
        unsigned good_runs, failed_runs;
        double ns_median, ns_min;
        /* Mean per good run. */
        uint64_t parks, wakeups, failsafe_pushes, advances, cas_failures, doorbells;
};

/* Runs until R good runs or R failed ones. Returns 0 if the case has R
 * good runs (res->failed_runs may still be non-zero), -1 otherwise. */
static int run_case(const struct options *o, unsigned threads, enum shape shape,
                    const struct fanin_table *ft, struct case_result *res) {
        struct sample sum = { 0 }, s;
        double *ns = calloc(o->repeat, sizeof(*ns));

        *res = (struct case_result){ .threads = threads, .shape = shape };
        snprintf(res->name, sizeof(res->name), "t%u_%s", threads, shape_names[shape]);
        if (!ns) {
                fprintf(stderr, "hbg-bench " SUITE ": out of memory\n");
                return -1;
        }

        while (res->good_runs < o->repeat && res->failed_runs < o->repeat) {
                if (run_once(o, threads, shape, ft, res->name, &s) < 0) {
                        res->failed_runs++;
                        fprintf(stderr, "hbg-bench " SUITE ": %s: run failed (%u so far), %s\n",
                                res->name, res->failed_runs,
                                res->failed_runs < o->repeat ? "running it again" : "giving up");
                        continue;
                }
                ns[res->good_runs++] = s.ns_per_task;
                sum.parks += s.parks;
                sum.wakeups += s.wakeups;
                sum.failsafe_pushes += s.failsafe_pushes;
                sum.advances += s.advances;
                sum.cas_failures += s.cas_failures;
                sum.doorbells += s.doorbells;
        }

        if (res->good_runs < o->repeat) {
                free(ns);
                return -1;
        }
        bench_min_median(ns, o->repeat, &res->ns_min, &res->ns_median);
        res->parks = bench_mean_u64(sum.parks, o->repeat);
        res->wakeups = bench_mean_u64(sum.wakeups, o->repeat);
        res->failsafe_pushes = bench_mean_u64(sum.failsafe_pushes, o->repeat);
        res->advances = bench_mean_u64(sum.advances, o->repeat);
        res->cas_failures = bench_mean_u64(sum.cas_failures, o->repeat);
        res->doorbells = bench_mean_u64(sum.doorbells, o->repeat);
        free(ns);
        return 0;
}

/* ------------------------------------------------------------ output */

static void print_table(const struct options *o, uint64_t spin_ns, const struct case_result *res,
                        unsigned n_res) {
        struct hbg_geometry_request req;

        geometry_request_default(&req);
        printf("engine: %" PRIu64 " noop tasks per run (AIV0, 1 block), graphs of %u, published"
               " every %u; %u repeat%s\n"
               "        one engine + one ring per run: clusters = 2 x threads, spin before park"
               " %" PRIu64 " ns; D=%" PRIu64 " F=%" PRIu64 ", heap %" PRIu64 " KiB\n\n",
               o->tasks, GRAPH_TASKS, PUBLISH_EVERY, o->repeat, o->repeat == 1 ? "" : "s",
               spin_ns, req.task_window, req.flag_window, HEAP_SIZE >> 10);
        printf("%-16s %7s %-11s %12s %12s %9s %9s %9s %9s %9s %9s %7s\n", "case", "threads",
               "shape", "ns/task med", "ns/task min", "parks", "wakeups", "doorbells", "failsafe",
               "advances", "cas_fail", "failed");
        for (unsigned i = 0; i < n_res; i++) {
                const struct case_result *r = &res[i];
                if (r->good_runs < o->repeat) {
                        printf("%-16s %7u %-11s %12s %12s %9s %9s %9s %9s %9s %9s %7u\n",
                               r->name, r->threads, shape_names[r->shape], "FAILED", "-", "-",
                               "-", "-", "-", "-", "-", r->failed_runs);
                        continue;
                }
                printf("%-16s %7u %-11s %12.1f %12.1f %9" PRIu64 " %9" PRIu64 " %9" PRIu64
                       " %9" PRIu64 " %9" PRIu64 " %9" PRIu64 " %7u\n",
                       r->name, r->threads, shape_names[r->shape], r->ns_median, r->ns_min,
                       r->parks, r->wakeups, r->doorbells, r->failsafe_pushes, r->advances,
                       r->cas_failures, r->failed_runs);
        }
        printf("\nns/task: CLOCK_MONOTONIC from the first task written to the last graph retired,"
               " / N;\n"
               "         median and min over the repeats. The client (this thread) is one more"
               " runnable thread.\n"
               "counters: mean per run. parks, wakeups: futex waits of the scheduler threads and"
               " their returns;\n"
               "doorbells: client kicks because NEED_WAKEUP was set; failsafe: completions"
               " deferred to the\n"
               "failsafe heap (0 expected with F = D); advances: watermark CAS won; cas_fail:"
               " watermark CAS lost.\n"
               "failed: runs that went wrong (engine stopped the ring, wrong counts; stderr says"
               " why), run again\n"
               "        and left out of the numbers; FAILED: %u of them before %u good ones."
               " Any makes the exit status 1.\n", o->repeat, o->repeat);
}

/* Append one row per case; the header only when the file is new or empty
 * (bench_csv_open), so several invocations can share one file. */
static int write_csv(const struct options *o, const struct case_result *res, unsigned n_res) {
        FILE *f = bench_csv_open(SUITE, o->csv,
                                 "suite,case,threads,shape,tasks,repeat,ns_per_task_median,"
                                 "ns_per_task_min,parks,wakeups,doorbells,advances,cas_failures,"
                                 "failsafe_pushes,failed_runs\n");

        if (!f)
                return -1;
        for (unsigned i = 0; i < n_res; i++) {
                const struct case_result *r = &res[i];
                if (r->good_runs < o->repeat)
                        continue; /* no numbers */
                fprintf(f, SUITE ",%s,%u,%s,%" PRIu64 ",%u,%.3f,%.3f,%" PRIu64 ",%" PRIu64
                        ",%" PRIu64 ",%" PRIu64 ",%" PRIu64 ",%" PRIu64 ",%u\n",
                        r->name, r->threads, shape_names[r->shape], o->tasks, o->repeat,
                        r->ns_median, r->ns_min, r->parks, r->wakeups, r->doorbells, r->advances,
                        r->cas_failures, r->failsafe_pushes, r->failed_runs);
        }
        return bench_csv_close(SUITE, f, o->csv);
}

/* ------------------------------------------------------------ options */

void bench_engine_usage(FILE *out) {
        fprintf(out,
                "usage: hbg-bench engine [options]\n"
                "\n"
                "ns per task of the scheduler engine, end to end, with noop tasks (kernel noop on\n"
                "the AIV0 lane, 1 block): a fresh engine (clusters = 2 x threads) and one ring\n"
                "(hbgd's default D and F, heap 1 MiB) per run; this thread is the client\n"
                "(tests/engine/harness.c), writing N tasks in graphs of %u, publishing every\n"
                "%u, then waiting for the last graph. One case per thread count x shape.\n"
                "\n"
                "  --threads LIST     scheduler thread counts, comma-separated (default 1,4;\n"
                "                     1..%u)\n"
                "  --shape LIST       chain,independent,fanin4 (default all three)\n"
                "                       chain:       task i depends on task i-1\n"
                "                       independent: no dependencies\n"
                "                       fanin4:      task i depends on %u distinct random tasks\n"
                "                                    among the %u before it\n"
                "  --tasks N          tasks per run (default %" PRIu64 "); 0 does the setup and\n"
                "                     teardown only, to subtract them from instruction counts\n"
                "  --repeat R         runs per case (default %u): median and min are reported\n"
                "  --no-spin          spin_before_park_ns = 0: idle threads park at once (for\n"
                "                     instruction counts, where spinning would be counted)\n"
                "  --csv FILE         append one row per case to FILE (header if FILE is new)\n"
                "  --help             this text\n"
                "\n"
                "A run that goes wrong (the engine stops the ring, or the counts are wrong) is\n"
                "reported on stderr, counted (column failed) and run again; a case with R such\n"
                "runs prints FAILED. A run that stops making progress for %u s ends the suite.\n"
                "CSV columns: suite,case,threads,shape,tasks,repeat,ns_per_task_median,\n"
                "ns_per_task_min,parks,wakeups,doorbells,advances,cas_failures,failsafe_pushes,\n"
                "failed_runs (FAILED cases: no row).\n"
                "\n"
                "Exit status: 0, 1 if any run failed or stalled, 2 on a usage error.\n",
                GRAPH_TASKS, PUBLISH_EVERY, HBG_ENGINE_MAX_THREADS, FANIN4_FANINS, FANIN4_SPAN,
                DEFAULT_TASKS, DEFAULT_REPEAT, STALL_LIMIT_S);
}

/* The options that take a value. */
static const char *const option_names[] = {
        "--threads", "--shape", "--tasks", "--repeat", "--csv", NULL,
};

/* Returns 0 to run, 1 after --help, -1 after printing a usage error. */
static int parse_options(int argc, char **argv, struct options *o) {
        *o = (struct options){
                .threads = { 1, 4 },
                .n_threads = 2,
                .shapes = { SHAPE_CHAIN, SHAPE_INDEPENDENT, SHAPE_FANIN4 },
                .n_shapes = 3,
                .tasks = DEFAULT_TASKS,
                .repeat = DEFAULT_REPEAT,
        };

        for (int i = 1; i < argc; i++) {
                const char *arg = argv[i];
                const char *name, *value;

                if (strcmp(arg, "--help") == 0 || strcmp(arg, "-h") == 0) {
                        bench_engine_usage(stdout);
                        return 1;
                }
                if (strcmp(arg, "--no-spin") == 0) {
                        o->no_spin = true;
                        continue;
                }
                if (bench_option(SUITE, argc, argv, &i, option_names, &name, &value) < 0)
                        return -1;
                if (strcmp(name, "--threads") == 0) {
                        if (!bench_option_uint_list(SUITE, name, value, HBG_ENGINE_MAX_THREADS,
                                                    o->threads, &o->n_threads, MAX_LIST))
                                return -1;
                } else if (strcmp(name, "--shape") == 0) {
                        unsigned k[MAX_LIST];

                        if (!bench_option_name_list(SUITE, name, value, shape_names, N_SHAPES, k,
                                                    &o->n_shapes, MAX_LIST))
                                return -1;
                        for (unsigned j = 0; j < o->n_shapes; j++)
                                o->shapes[j] = (enum shape)k[j];
                } else if (strcmp(name, "--tasks") == 0) {
                        if (!bench_option_u64(SUITE, name, value, 0, MAX_TASKS, &o->tasks))
                                return -1;
                } else if (!bench_option_common(SUITE, name, value, MAX_REPEAT, &o->repeat,
                                                &o->csv)) {
                        return -1;
                }
        }
        return 0;
}

/* ------------------------------------------------------------ main */

int bench_engine_main(int argc, char **argv) {
        struct options o;
        struct hbg_engine_config cfg;
        struct case_result res[MAX_LIST * MAX_LIST];
        unsigned n_res = 0;
        int rc;

        int r = parse_options(argc, argv, &o);
        if (r != 0)
                return r > 0 ? BENCH_EXIT_OK : BENCH_EXIT_USAGE;

        engine_config_default(&cfg);
        uint64_t spin_ns = o.no_spin ? 0 : cfg.spin_before_park_ns;

        /* Built whatever the shapes and N: the same cost in every run,
         * --tasks 0 included. */
        struct fanin_table *ft = malloc(sizeof(*ft));
        if (!ft) {
                fprintf(stderr, "hbg-bench " SUITE ": out of memory\n");
                return BENCH_EXIT_FAIL;
        }
        fanin_table_init(ft);

        bool failed = false;
        for (unsigned t = 0; t < o.n_threads; t++)
                for (unsigned k = 0; k < o.n_shapes; k++) {
                        struct case_result *cr = &res[n_res++];
                        if (run_case(&o, o.threads[t], o.shapes[k], ft, cr) < 0 ||
                            cr->failed_runs > 0)
                                failed = true;
                }

        print_table(&o, spin_ns, res, n_res);
        if (o.csv && write_csv(&o, res, n_res) < 0)
                failed = true;
        rc = failed ? BENCH_EXIT_FAIL : BENCH_EXIT_OK;
        free(ft);
        return rc;
}
