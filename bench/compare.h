/* SPDX-License-Identifier: MIT */
/*
 * The comparison (bench/compare.c): what one run needs to know, shared by
 * the parts that measure hbg (bench/compare_hbg.c), the peers (bench/
 * compare_peers.c) and the instruction counts (bench/compare_instr.c).
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "bench/report.h"

#define CMP_MAX_LIST 16
#define CMP_MAX_SHAPES 16
#define CMP_LINE_MS (10 * 60 * 1000) /* a producer silent this long is wedged */

struct cmp {
        /* options */
        bool quick, instructions, latency;
        unsigned shapes[CMP_MAX_SHAPES], n_shapes;      /* indices, dag_shape_name() */
        uint64_t sizes[CMP_MAX_SHAPES];                 /* per shape index; 0: default */
        unsigned threads[CMP_MAX_LIST], n_threads;
        unsigned clients[CMP_MAX_LIST], n_clients;
        unsigned modes[CMP_MAX_LIST], n_modes;          /* completion_mode_name()'s numbers */
        unsigned peers[CMP_MAX_LIST], n_peers;          /* indices into cmp_peer_names */
        unsigned repeat, warmup;
        unsigned flag_window;           /* hbgd's session flag_window; 0: its default */
        bool reuse_pass;                /* cmp_hbg_reuse running: rows to the metrics */
        bool no_reuse;                  /* --no-reuse */
        bool kernels;                   /* --kernels: the module-kernel rows */
        const char *module_opt;         /* --module PATH (else HBG_BENCH_MODULE, else next to us) */
        char module[300];               /* the module's private copy hbgd loads; "": none */
        bool host;                      /* --host: the host-function rows */
        bool python;                    /* --python: the Python rows (bench/compare_python.c) */
        uint64_t python_size;           /* --python-size: their graphs' tasks; 0: the default */
        bool trace;                     /* --trace[=SHAPE]: a timeline of one shape (bench/compare_trace.c) */
        unsigned trace_shape;           /* its index, dag_shape_name() */
        uint64_t trace_size;            /* --trace-size: its tasks; 0: CMP_TRACE_SIZE */
        uint64_t trace_task_us;         /* --trace-task-us: its tasks spin_ns this long; 0: noop */
        uint64_t task_ns;               /* producers' tasks spin_ns this long (--trace-task-us); 0: noop */
        /* Set by the host section for one row: every host_every-th task a
         * host function (producers) or a spin (peers) of spin_iters
         * rounds of bench_spin(); hbg's producers connect with
         * host_threads workers. host_every 0: off. */
        unsigned host_every, host_threads;
        uint64_t spin_iters;
        const char *kernel;             /* producers' tasks run it (--kernel); NULL: noop */
        uint64_t floats;                /* ... on a tensor of this many floats each */
        uint64_t seed;
        const char *out;
        /* where the programs are */
        char dir[256];                  /* of hbg-bench: hbgd, hbgctl, the peers */
        char self[300];                 /* hbg-bench itself (producers) */
        struct report report;
        int failures;                   /* rows that failed (the run goes on) */
        int64_t start_ns;               /* of the run, for the progress stamps */
        char elapsed[32];
};

extern const char *const cmp_peer_names[];
#define CMP_N_PEERS 5

const char *cmp_shape(const struct cmp *c, unsigned k);
/* "m:ss since start", for section headers. */
const char *cmp_elapsed(struct cmp *c);
/* The size of shape k in this run (0: the shape's default). */
uint64_t cmp_size(const struct cmp *c, unsigned k);
/* Print the median, min and spread of ns[0..n) into the metrics. */
void cmp_spread_metrics(struct cmp *c, const char *shape, const char *system, const char *mode,
                        unsigned threads, unsigned clients, double *ns, unsigned n, uint64_t tasks);

/* bench/compare_hbg.c: every shape x clients row, the latencies, the idle
 * CPU and hbgctl's compile time, for one completion mode and thread
 * count, on an hbgd of its own. */
void cmp_hbg(struct cmp *c, unsigned mode, unsigned threads);
/* The same rows (one producer) on an hbgd whose sessions have only
 * flag_window completion flags: to the metrics, "..._flag_window_N". */
void cmp_hbg_reuse(struct cmp *c, unsigned mode, unsigned threads, unsigned flag_window);
/* bench/compare_wait.c: hbg_tensor_wait_ready()'s lateness and cost, on
 * the hbgd of cmp_hbg(). */
struct bench_hbgd;
void cmp_tensor_wait(struct cmp *c, struct bench_hbgd *h, const char *mode, unsigned threads);
/* bench/compare_peers.c: every shape for one peer and thread count (the
 * floor runs one thread whatever the count). */
void cmp_peer(struct cmp *c, unsigned peer, unsigned threads);
/* Peer `name` on shape k (size 0: the run's size for it): fills ns[0..*n)
 * with the measured repetitions' times, *tasks and its peak RSS. Under
 * wrap: one repetition, no warm-up. rerun: the graph built once and run
 * again (--rerun). 0, or -errno after printing why. */
int cmp_peer_run(struct cmp *c, const char *name, unsigned threads, const char *shape, uint64_t size,
                 const char *const *wrap, bool rerun, double *ns, unsigned *n, uint64_t *tasks,
                 uint64_t *rss_kib);
/* bench/compare_kernels.c: the same graphs with a built-in element-wise
 * kernel and with the example module's relu_f32, on one hbgd that loaded
 * the module (--kernels). */
void cmp_kernels(struct cmp *c);
/* bench/compare_host.c: host functions (hbg_task.host_fn) on the
 * client's worker threads beside the peers running the same function
 * (--host): speed-up, per-task overhead, a mixed graph. */
void cmp_host(struct cmp *c);
/* bench/compare_python.c: the shapes from Python through the hbg package
 * (run, replayed; 1, 2, 4 processes) beside Dask's threaded scheduler and
 * concurrent.futures, empty tasks and add_f32 on 64 KiB arrays, and the
 * same replays from C (--python). */
void cmp_python(struct cmp *c);
/* bench/compare_trace.c: one graph of the --trace shape on an hbgd of
 * its own (the default completion policy, 4 threads) while `hbgctl
 * trace` records it: trace.json and trace.svg in the output directory,
 * and a summary per thread read from the JSON (--trace). */
#define CMP_TRACE_SIZE (40 * 40)
#define CMP_TRACE_TASK_US 20u
void cmp_trace(struct cmp *c);
/* bench/compare_instr.c: instructions per task under callgrind. */
void cmp_instructions(struct cmp *c);
bool cmp_have_valgrind(void);
/* hbgd and one producer (this run's kernel, if any) under callgrind: Ir of
 * each for warmup + repeat runs of `command` on `size` tasks of shape;
 * profiles named by tag in the output directory. 0 or -errno. */
struct cmp_instr {
        uint64_t hbgd, producer;        /* Ir of each process; 0: failed */
        uint64_t generation;            /* of the producer's, the bench's own graph generation (dag_make()) */
        uint64_t tasks;
};
int cmp_hbg_instr(struct cmp *c, const char *mode, unsigned threads, const char *shape, uint64_t size,
                  const char *tag, const char *command, unsigned warmup, unsigned repeat, struct cmp_instr *ret);
/* (Ir(run) - Ir(base)) / (tasks - 1): per task with a 1-task run's Ir
 * subtracted; 0 if that is not positive. */
double cmp_per_task(uint64_t run, uint64_t base, uint64_t tasks);
/* bench/compare_service.c, on the hbgd of cmp_hbg(): 1- and 16-task
 * graphs' latency (busy, parked, beside an eventfd); hbg_connect() while
 * 8 producers connect at once; a light uid's graphs beside another's
 * backlog; hbgd's CPU while idle. */
void cmp_latency(struct cmp *c, struct bench_hbgd *h, const char *mode, unsigned threads);
void cmp_connect_burst(struct cmp *c, struct bench_hbgd *h, const char *mode, unsigned threads);
void cmp_fairness(struct cmp *c, struct bench_hbgd *h, const char *mode, unsigned threads);
void cmp_idle_cpu(struct cmp *c, struct bench_hbgd *h, const char *mode, unsigned threads);
/* The eventfd ping-pong rows of the metrics. */
void cmp_pingpong(struct cmp *c);

/* The hbgd.conf of this run's hbgd into buf (CMP_CONFIG_LEN bytes: the
 * module's path included). */
#define CMP_CONFIG_LEN 512
const char *cmp_hbgd_config(const struct cmp *c, char *buf, unsigned len);

/* One row's producers: `clients` processes of `hbg-bench producer` (under
 * `wrap` if not NULL) on socket, building `shape` of `size` tasks (0: its
 * default), all started on each repetition together; `command` is what
 * each repetition asks them: "run" (build and run) or "replay" (launch a
 * graph recorded in the first repetition). */
struct cmp_run {
        unsigned reps;                  /* measured repetitions */
        double wall_ns[64];             /* per repetition: first start to last end */
        double first_wall_ns;           /* the sessions' first graph (a warm-up) */
        double *graph_ns;               /* reps x clients: each graph's build + run */
        double connect_ns[64];            /* per client */
        uint64_t tasks;                 /* per repetition, all clients */
        uint64_t rss_kib;               /* sum of the producers' peaks */
};
/* Start producer number i of such a row (its seed c->seed + i) into kid,
 * without waiting for it: 0 or -errno. */
struct bench_child;
int cmp_producer_start(struct cmp *c, const char *socket, const char *shape, uint64_t size, unsigned i,
                       const char *const *wrap, struct bench_child *kid);
/* The number after `key` in a producer's line ("key V ..."), or -1. */
int64_t cmp_field(const char *line, const char *key);
/* The next line of kid into line, expected to start with `want` (within
 * timeout_ms): 0, or -EPROTO after printing what it said instead. */
int cmp_expect(struct bench_child *kid, const char *want, char *line, size_t len, int timeout_ms);
int cmp_run_producers(struct cmp *c, const char *socket, const char *shape, uint64_t size, unsigned clients,
                      unsigned warmup, unsigned repeat, const char *const *wrap, const char *command,
                      struct cmp_run *ret);
void cmp_run_free(struct cmp_run *r);
