/* SPDX-License-Identifier: MIT */
/*
 * `hbg-bench producer`: one producer process of the comparison (bench/
 * compare.c starts 1 to 8 of them). It builds the benchmark's graphs
 * (bench/dag.h) through libhbgclient's public API only, as any producer
 * would, and is driven by lines on stdin so that several producers start
 * each repetition together:
 *
 *   (on start)          prints "connect_ns NS" (hbg_connect, apart from runs)
 *   run                 builds and runs the graph once; prints
 *                       "rep start_ns S end_ns E tasks N", S before the
 *                       first hbg_graph_add, E when hbg_graph_wait returned
 *                       (CLOCK_MONOTONIC, comparable across processes)
 *   replay              like run, but the first replay records the graph
 *                       (hbg_graph_record_begin/end, not timed apart) and
 *                       every replay launches it (hbg_graph_launch)
 *   lat T COUNT IDLE_US COUNT graphs of T independent noop tasks, one at a
 *                       time, sleeping IDLE_US between them; prints each
 *                       graph's latency (hbg_graph_submit called to
 *                       hbg_graph_wait returned; the adds before it not
 *                       counted) as "lat NS", then "end"
 *   hog NS COUNT        one graph of COUNT independent spin_ns tasks of NS
 *                       ns each: prints "hog submitted" once submitted,
 *                       "hog done" when it finished (the fairness case)
 *   twait NS COUNT      COUNT graphs, one at a time, of a spin_ns task of
 *                       NS ns, a fill_f32 of a 256-float tensor after it
 *                       and the rest of the graph, a 2 NS ns task after
 *                       that; then hbg_tensor_wait_ready() on the
 *                       tensor; prints "tw WALL_NS CPU_NS" (from the first
 *                       add to the wait's return, and this thread's CPU
 *                       time in the wait), then "end"
 *   twait_beside NS COUNT  the same with the fill_f32 beside the first
 *                       task, not after it, of a 1 MiB tensor, and no
 *                       rest: the writer runs at once (some 100 us,
 *                       longer than the wait's spin) while that task
 *                       holds the watermark back (and one CPU of two is
 *                       left to the waiter)
 *   quit                prints "rss_kib K" (this process's peak) and exits
 *
 * With --kernel NAME --floats F every task of the shape runs kernel NAME
 * (a built-in or a module's, resolved once through the client's table,
 * hbg_client_kernel_id()) in place on a tensor of F floats of its own,
 * allocated at start: every tensor argument is that tensor, every f32
 * scalar 1.0. The kernel must be element-wise and run in place (one
 * tensor, or in_place); the shape's edges stay the only ones.
 *
 * With --host-every K --spin ITERS, task i of the shape with i % K == K - 1
 * is a host function instead (hbg_task.host_fn) that runs
 * bench_spin(ITERS) in this process (ITERS 0: an empty function), its
 * edges the shape's; the others stay noop kernels in hbgd. --host-threads
 * N connects with hbg_connect_options.host_threads = N (0: the host
 * functions run inside hbg_graph_wait(), as before API 1.5). The host
 * section of the comparison (bench/compare_host.c).
 *
 * With --task-ns NS every task of the shape runs the built-in spin_ns,
 * busy-waiting NS ns in hbgd, instead of noop: a body long enough to see
 * in a trace (hbg-bench --trace-task-us, bench/compare_trace.c).
 *
 * Any failure prints "error WHY" and exits 1.
 */
#include <errno.h>
#include <inttypes.h>
#include <malloc.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench/bench.h"
#include "bench/bench_util.h"
#include "bench/child.h"
#include "bench/dag.h"
#include <hbg/hbg.h>

#define WAIT_MS (10 * 60 * 1000)        /* a run this long is wedged: an error */

struct producer {
        hbg_client *c;
        struct dag d;
        uint64_t *ids;                  /* task ids of the current run */
        hbg_tensor *tiles;              /* DAG_GEMM: one tensor per tile */
        bool recorded;                  /* `replay`: the graph is recorded as `rec` */
        uint32_t rec;
        int kernel_id;                  /* --kernel: its id; 0: noop tasks */
        hbg_kernel_desc kernel;         /* its signature */
        hbg_tensor *tensors;            /* --kernel: one per task */
        uint32_t host_every;            /* --host-every: 0, or every K-th task a host function */
        uint64_t spin_iters;            /* --spin: its body */
        uint64_t task_ns;               /* --task-ns: spin_ns tasks of this many ns; 0: noop */
};

/* The host functions' body: the same bench_spin() the peers run. */
static int host_spin(void *userdata) {
        bench_spin(*(const uint64_t *)userdata);
        return 0;
}

static int fail(struct producer *p, const char *what, int err) {
        printf("error %s: %s (%s)\n", what, hbg_strerror(err), p->c ? hbg_last_error(p->c) : "");
        fflush(stdout);
        return BENCH_EXIT_FAIL;
}

static int add_task(struct producer *p, uint32_t i) {
        const struct dag *d = &p->d;
        hbg_task t;
        if (d->body == DAG_GEMM) {
                const struct dag_gemm_task *g = &d->gemm[i];
                t = HBG_TASK_INIT("gemm_f32");
                t.n_args = 3;
                t.args[0].tensor = p->tiles[g->a], t.args[0].dir = HBG_IN;
                t.args[1].tensor = p->tiles[g->b], t.args[1].dir = HBG_IN;
                t.args[2].tensor = p->tiles[g->c], t.args[2].dir = HBG_INOUT;
                t.n_scalars = 3;
                t.scalars[0] = t.scalars[1] = t.scalars[2] = d->tile;
                /* The k-chain of each C tile is derived from the tensors;
                 * the explicit edges below are the same ones. */
        } else if (p->host_every && i % p->host_every == p->host_every - 1) {
                t = HBG_TASK_INIT(NULL);
                t.host_fn = host_spin;
                t.host_userdata = &p->spin_iters;
        } else if (p->kernel_id > 0) {
                t = HBG_TASK_INIT(NULL);
                t.kernel_id = (uint16_t)p->kernel_id;
                t.n_args = (uint8_t)p->kernel.n_tensors;
                for (unsigned a = 0; a < p->kernel.n_tensors; a++) {
                        t.args[a].tensor = p->tensors[i];
                        t.args[a].dir = p->kernel.tensor_dirs[a];
                }
                t.n_scalars = (uint8_t)p->kernel.n_scalars;
                for (unsigned a = 0; a < p->kernel.n_scalars; a++)
                        t.scalars[a] = hbg_f32(1.0f);
        } else if (p->task_ns) {
                t = HBG_TASK_INIT("spin_ns");
                t.n_scalars = 1;
                t.scalars[0] = p->task_ns;
        } else {
                t = HBG_TASK_INIT("noop");
        }
        uint32_t lo = d->fanin_start[i], hi = d->fanin_start[i + 1];
        t.n_deps = (uint8_t)(hi - lo);
        for (uint32_t e = lo; e < hi; e++)
                t.deps[e - lo] = p->ids[d->fanins[e]];
        return hbg_graph_add(p->c, &t, &p->ids[i]);
}

/* Wait for graph g of a repetition begun at start and report it. */
static int finish_rep(struct producer *p, int64_t start, uint64_t g) {
        int err = hbg_graph_wait(p->c, g, WAIT_MS);
        int64_t end = bench_now_ns();
        if (err < 0)
                return fail(p, "hbg_graph_wait", err);
        printf("rep start_ns %" PRId64 " end_ns %" PRId64 " tasks %u\n", start, end, p->d.n);
        fflush(stdout);
        return 0;
}

static int run_once(struct producer *p) {
        uint64_t g;
        int64_t start = bench_now_ns();
        for (uint32_t i = 0; i < p->d.n; i++) {
                int err = add_task(p, i);
                if (err < 0)
                        return fail(p, "hbg_graph_add", err);
        }
        int err = hbg_graph_submit(p->c, &g);
        if (err < 0)
                return fail(p, "hbg_graph_submit", err);
        return finish_rep(p, start, g);
}

/* The graph recorded on first use, then launched: build+run for a
 * producer that keeps its graph (hbg_graph_launch, §14). */
static int run_replay(struct producer *p) {
        int64_t start = bench_now_ns();
        int err;
        if (!p->recorded) {
                if ((err = hbg_graph_record_begin(p->c)) < 0)
                        return fail(p, "hbg_graph_record_begin", err);
                for (uint32_t i = 0; i < p->d.n; i++)
                        if ((err = add_task(p, i)) < 0)
                                return fail(p, "hbg_graph_add (recording)", err);
                if ((err = hbg_graph_record_end(p->c, &p->rec)) < 0)
                        return fail(p, "hbg_graph_record_end", err);
                p->recorded = true;
        }
        uint64_t g;
        if ((err = hbg_graph_launch(p->c, p->rec, &g)) < 0)
                return fail(p, "hbg_graph_launch", err);
        return finish_rep(p, start, g);
}

static int run_latency(struct producer *p, unsigned tasks, unsigned count, unsigned idle_us) {
        for (unsigned r = 0; r < count; r++) {
                if (idle_us) {
                        struct timespec ts = { .tv_sec = idle_us / 1000000,
                                               .tv_nsec = (long)(idle_us % 1000000) * 1000 };
                        nanosleep(&ts, NULL);
                }
                uint64_t g;
                for (unsigned i = 0; i < tasks; i++) {
                        hbg_task t = HBG_TASK_INIT("noop");
                        int err = hbg_graph_add(p->c, &t, NULL);
                        if (err < 0)
                                return fail(p, "hbg_graph_add", err);
                }
                /* From the submit: the adds are the build, which the rows
                 * time; this is how soon a submitted graph wakes us. */
                int64_t start = bench_now_ns();
                int err = hbg_graph_submit(p->c, &g);
                if (err == 0)
                        err = hbg_graph_wait(p->c, g, WAIT_MS);
                int64_t ns = bench_now_ns() - start;
                if (err < 0)
                        return fail(p, "latency graph", err);
                printf("lat %" PRId64 "\n", ns);
        }
        printf("end\n");
        fflush(stdout);
        return 0;
}

/* The other session of the fairness case: one graph of COUNT independent
 * spin_ns tasks of NS each, submitted at once (a backlog on every
 * thread); "hog submitted" once it is, "hog done" when it finished. */
static int run_hog(struct producer *p, uint64_t ns, unsigned count) {
        hbg_task t = HBG_TASK_INIT("spin_ns");
        t.n_scalars = 1;
        t.scalars[0] = ns;
        for (unsigned i = 0; i < count; i++) {
                int err = hbg_graph_add(p->c, &t, NULL);
                if (err < 0)
                        return fail(p, "hbg_graph_add (hog)", err);
        }
        uint64_t g;
        int err = hbg_graph_submit(p->c, &g);
        if (err < 0)
                return fail(p, "hbg_graph_submit (hog)", err);
        printf("hog submitted\n");
        fflush(stdout);
        if ((err = hbg_graph_wait(p->c, g, WAIT_MS)) < 0)
                return fail(p, "hbg_graph_wait (hog)", err);
        printf("hog done\n");
        fflush(stdout);
        return 0;
}

/* The tensor-wait case: how late hbg_tensor_wait_ready() returns after
 * its writer, and what the wait costs the waiting thread. */
static int run_tensor_wait(struct producer *p, uint64_t ns, unsigned count, bool beside) {
        hbg_tensor x;
        int err = hbg_tensor_alloc(p->c, (beside ? 262144 : 256) * sizeof(float), &x);
        if (err < 0)
                return fail(p, "hbg_tensor_alloc (twait)", err);
        for (unsigned r = 0; r < count; r++) {
                hbg_task spin = HBG_TASK_INIT("spin_ns"), fill = HBG_TASK_INIT("fill_f32");
                hbg_task rest = HBG_TASK_INIT("spin_ns");
                spin.n_scalars = rest.n_scalars = 1;
                spin.scalars[0] = ns;
                rest.scalars[0] = 2 * ns;
                fill.n_args = 1;
                fill.args[0].tensor = x;
                fill.args[0].dir = HBG_OUT;
                fill.n_scalars = 1;
                fill.scalars[0] = hbg_f32((float)r);
                fill.n_deps = beside ? 0 : 1;
                uint64_t g;
                /* From the first add: hbgd may start the first task as
                 * soon as it is published, before the submit. */
                int64_t start = bench_now_ns();
                /* The rest of the graph runs on after the tensor is
                 * written (the wait returns before the graph's end), and
                 * only then: no task of its own delays the writer. */
                rest.n_deps = 1;
                /* Beside: fill.deps[0] is set but not counted, and the
                 * spin holds the graph back anyway (no rest, which would
                 * take the waiter's CPU). */
                if ((err = hbg_graph_add(p->c, &spin, &fill.deps[0])) < 0 ||
                    (err = hbg_graph_add(p->c, &fill, &rest.deps[0])) < 0 ||
                    (!beside && (err = hbg_graph_add(p->c, &rest, NULL)) < 0) ||
                    (err = hbg_graph_submit(p->c, &g)) < 0)
                        return fail(p, "twait graph", err);
                struct timespec c0, c1;
                clock_gettime(CLOCK_THREAD_CPUTIME_ID, &c0);
                err = hbg_tensor_wait_ready(p->c, x, WAIT_MS);
                int64_t wall = bench_now_ns() - start;
                clock_gettime(CLOCK_THREAD_CPUTIME_ID, &c1);
                if (err < 0)
                        return fail(p, "hbg_tensor_wait_ready", err);
                if ((err = hbg_graph_wait(p->c, g, WAIT_MS)) < 0)
                        return fail(p, "hbg_graph_wait (twait)", err);
                int64_t cpu = (int64_t)(c1.tv_sec - c0.tv_sec) * 1000000000 + (c1.tv_nsec - c0.tv_nsec);
                printf("tw %" PRId64 " %" PRId64 "\n", wall, cpu);
                fflush(stdout);
        }
        if ((err = hbg_tensor_free(p->c, x)) < 0)
                return fail(p, "hbg_tensor_free (twait)", err);
        printf("end\n");
        fflush(stdout);
        return 0;
}

static int make_tiles(struct producer *p) {
        const struct dag *d = &p->d;
        size_t floats = (size_t)d->tile * d->tile;
        p->tiles = calloc(d->n_tiles, sizeof(*p->tiles));
        if (!p->tiles)
                return -ENOMEM;
        for (uint32_t i = 0; i < d->n_tiles; i++) {
                int err = hbg_tensor_alloc(p->c, floats * sizeof(float), &p->tiles[i]);
                if (err < 0)
                        return err;
                float *f = hbg_tensor_data(p->c, p->tiles[i]);
                for (size_t k = 0; k < floats; k++)
                        f[k] = (float)((i * floats + k) % 7) * 0.125f;
        }
        return 0;
}

/* --kernel: kernel `name` from the client's table (hbgd's built-ins and
 * modules), checked to be element-wise in place, and one tensor of
 * `floats` floats per task, half of its elements negative. */
static int setup_kernel(struct producer *p, const char *name, uint64_t floats) {
        int id = hbg_client_kernel_id(p->c, name);
        if (id < 0)
                return fail(p, name, id);
        size_t n = hbg_client_kernel_count(p->c), i;
        for (i = 0; i < n; i++) {
                p->kernel = HBG_KERNEL_DESC_INIT;
                if (hbg_client_kernel_info(p->c, i, &p->kernel) == 0 && p->kernel.id == id)
                        break;
        }
        bool scalars_f32 = true;
        for (unsigned a = 0; i < n && a < p->kernel.n_scalars; a++)
                scalars_f32 &= p->kernel.scalar_types[a] == HBG_SCALAR_TYPE_F32;
        if (i == n || p->kernel.n_tensors == 0 || (p->kernel.n_tensors > 1 && !p->kernel.in_place) ||
            !scalars_f32) {
                printf("error kernel %s: not an element-wise kernel that runs in place\n", name);
                fflush(stdout);
                return BENCH_EXIT_USAGE;
        }
        if (p->d.body != DAG_NOOP) {
                printf("error kernel %s: shape %s has a body of its own\n", name, p->d.shape);
                fflush(stdout);
                return BENCH_EXIT_USAGE;
        }
        p->kernel_id = id;
        p->tensors = calloc(p->d.n ? p->d.n : 1, sizeof(*p->tensors));
        if (!p->tensors)
                return fail(p, "tensors", -ENOMEM);
        for (uint32_t t = 0; t < p->d.n; t++) {
                int err = hbg_tensor_alloc(p->c, (size_t)floats * sizeof(float), &p->tensors[t]);
                if (err < 0)
                        return fail(p, "hbg_tensor_alloc", err);
                float *f = hbg_tensor_data(p->c, p->tensors[t]);
                for (uint64_t k = 0; k < floats; k++)
                        f[k] = (float)((int)((t + k) % 5) - 2) * 0.5f;
        }
        return BENCH_EXIT_OK;
}

void bench_producer_usage(FILE *out) {
        fputs("producer: one producer process, driven by hbg-bench itself\n"
              "  hbg-bench producer --socket PATH --shape NAME [--size N] [--quick] [--seed S]\n"
              "                     [--kernel NAME --floats F] [--host-every K --spin ITERS]\n"
              "                     [--host-threads N] [--task-ns NS]\n"
              "  stdin: run | replay | lat TASKS COUNT IDLE_US | hog NS COUNT | twait NS COUNT |\n"
              "         twait_beside NS COUNT | quit\n"
              "  (bench/producer.c)\n",
              out);
}

int bench_producer_main(int argc, char **argv) {
        static const char *const names[] = { "--socket", "--shape", "--size", "--seed", "--quick", "--kernel",
                                             "--floats", "--host-every", "--spin", "--host-threads", "--task-ns",
                                             NULL };
        const char *socket = NULL, *shape = NULL, *kernel = NULL;
        uint64_t size = 0, seed = 1, floats = 16, host_every = 0, spin = 0, host_threads = 0, task_ns = 0;
        bool quick = false, opts = false;
        for (int i = 1; i < argc; i++) {
                const char *name, *value;
                if (strcmp(argv[i], "--quick") == 0) {
                        quick = true;
                        continue;
                }
                if (bench_option("producer", argc, argv, &i, names, &name, &value) < 0)
                        return BENCH_EXIT_USAGE;
                if (strcmp(name, "--socket") == 0)
                        socket = value;
                else if (strcmp(name, "--shape") == 0)
                        shape = value;
                else if (strcmp(name, "--kernel") == 0)
                        kernel = value;
                else if (strcmp(name, "--floats") == 0) {
                        if (!bench_option_u64("producer", name, value, 1, 1u << 24, &floats))
                                return BENCH_EXIT_USAGE;
                } else if (strcmp(name, "--host-every") == 0) {
                        if (!bench_option_u64("producer", name, value, 1, UINT32_MAX, &host_every))
                                return BENCH_EXIT_USAGE;
                } else if (strcmp(name, "--spin") == 0) {
                        if (!bench_option_u64("producer", name, value, 0, UINT64_MAX, &spin))
                                return BENCH_EXIT_USAGE;
                } else if (strcmp(name, "--host-threads") == 0) {
                        if (!bench_option_u64("producer", name, value, 0, HBG_MAX_HOST_THREADS, &host_threads))
                                return BENCH_EXIT_USAGE;
                        opts = true;
                } else if (strcmp(name, "--task-ns") == 0) {
                        /* spin_ns's own bound: a second (common/kernel_sig.c). */
                        if (!bench_option_u64("producer", name, value, 0, 1000000000, &task_ns))
                                return BENCH_EXIT_USAGE;
                } else if (strcmp(name, "--size") == 0) {
                        if (!bench_option_u64("producer", name, value, 0, UINT32_MAX, &size))
                                return BENCH_EXIT_USAGE;
                } else if (!bench_option_u64("producer", name, value, 0, UINT64_MAX, &seed))
                        return BENCH_EXIT_USAGE;
        }
        if (!socket || !shape) {
                bench_producer_usage(stderr);
                return BENCH_EXIT_USAGE;
        }

        /* A producer building graph after graph keeps a warm heap: glibc
         * must not hand freed blocks back to the kernel between runs (the
         * peers do the same, bench/peers/peer_main.c). */
        mallopt(M_MMAP_MAX, 0);
        mallopt(M_TRIM_THRESHOLD, -1);
        struct producer p = { 0 };
        int err = dag_make(&p.d, shape, size, quick, seed);
        if (err < 0) {
                printf("error shape %s: %s\n", shape, strerror(-err));
                return err == -EINVAL ? BENCH_EXIT_USAGE : BENCH_EXIT_FAIL;
        }
        if (host_every && (p.d.body != DAG_NOOP || kernel)) {
                printf("error --host-every: shape %s has a body of its own, or --kernel is set\n", shape);
                return BENCH_EXIT_USAGE;
        }
        if (task_ns && (p.d.body != DAG_NOOP || kernel)) {
                printf("error --task-ns: shape %s has a body of its own, or --kernel is set\n", shape);
                return BENCH_EXIT_USAGE;
        }
        p.host_every = (uint32_t)host_every;
        p.spin_iters = spin;
        p.task_ns = task_ns;
        p.ids = calloc(p.d.n ? p.d.n : 1, sizeof(*p.ids));
        if (!p.ids) {
                printf("error out of memory\n");
                return BENCH_EXIT_FAIL;
        }
        int64_t t0 = bench_now_ns();
        hbg_connect_options o = HBG_CONNECT_OPTIONS_INIT;
        o.socket_path = socket;
        o.host_threads = host_threads;
        err = opts ? hbg_connect_opts(&p.c, &o) : hbg_connect(&p.c, socket);
        int64_t connect_ns = bench_now_ns() - t0;
        if (err < 0) {
                printf("error hbg_connect: %s (%s)\n", hbg_strerror(err), hbg_last_error(NULL));
                return BENCH_EXIT_FAIL;
        }
        if (p.d.body == DAG_GEMM && (err = make_tiles(&p)) < 0)
                return fail(&p, "tiles", err);
        if (kernel && (err = setup_kernel(&p, kernel, floats)) != BENCH_EXIT_OK)
                return err;
        printf("connect_ns %" PRId64 "\n", connect_ns);
        fflush(stdout);

        int rc = BENCH_EXIT_OK;
        char line[256];
        while (rc == BENCH_EXIT_OK && fgets(line, sizeof(line), stdin)) {
                unsigned tasks, count, idle_us;
                uint64_t ns;
                if (strcmp(line, "run\n") == 0)
                        rc = run_once(&p);
                else if (strcmp(line, "replay\n") == 0)
                        rc = run_replay(&p);
                else if (sscanf(line, "hog %" SCNu64 " %u", &ns, &count) == 2 && count >= 1 && count <= 100000 &&
                         ns <= 1000000000)
                        rc = run_hog(&p, ns, count);
                else if (sscanf(line, "lat %u %u %u", &tasks, &count, &idle_us) == 3 && tasks >= 1 &&
                         tasks <= 4096)
                        rc = run_latency(&p, tasks, count, idle_us);
                else if (sscanf(line, "twait %" SCNu64 " %u", &ns, &count) == 2 && count >= 1 && count <= 100000 &&
                         ns <= 500000000)
                        rc = run_tensor_wait(&p, ns, count, false);
                else if (sscanf(line, "twait_beside %" SCNu64 " %u", &ns, &count) == 2 && count >= 1 &&
                         count <= 100000 && ns <= 500000000)
                        rc = run_tensor_wait(&p, ns, count, true);
                else if (strcmp(line, "quit\n") == 0)
                        break;
                else {
                        printf("error unknown command: %s", line);
                        rc = BENCH_EXIT_USAGE;
                }
        }
        hbg_disconnect(p.c);
        if (rc == BENCH_EXIT_OK)
                printf("rss_kib %ld\n", bench_self_peak_rss_kib());
        fflush(stdout);
        free(p.ids);
        free(p.tiles);
        free(p.tensors);
        dag_free(&p.d);
        return rc;
}
