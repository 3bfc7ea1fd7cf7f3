/* SPDX-License-Identifier: MIT */
/*
 * A peer: another task runtime measured on the same graphs as hbg (bench/
 * dag.h), building and running each graph in its own process, as a producer
 * would. Each peer is its own program (hbg-bench-tbb, -openmp, -starpu,
 * -floor, -taskflow), so that runtimes never share a process (their worker threads
 * and spinning would disturb each other) and so that hbg-bench itself does
 * not depend on them; all share peer_main.c, which parses the options,
 * builds the graph and prints one line per repetition for hbg-bench to read.
 */
#pragma once

#include <stdbool.h>

#include "bench/dag.h"

#ifdef __cplusplus
extern "C" {
#endif

struct peer_ctx {
        const struct dag *d;
        unsigned threads;       /* worker threads (the floor uses one) */
        float *tiles;           /* DAG_GEMM: d->n_tiles tiles of tile^2 floats */
        bool check;             /* record and verify the order (slower) */
        uint32_t *done;         /* check: per task, 1 once its body ran */
        /* check: tasks that ran before a fanin. Plain, updated with
         * __atomic builtins (peer_main.c), so that this header is also
         * C++ (tbb.cpp), where _Atomic does not exist. */
        unsigned long violations;
        /* --spin-every K (0: off): task t with t % K == K - 1 also runs
         * bench_spin(spin_iters), the host section's function (bench/
         * compare_host.c), the same code hbg's host functions run. */
        uint32_t spin_every;
        uint64_t spin_iters;
};

/* The task body every system runs: nothing, the gemm tile, or the spin
 * (--spin-every). With
 * ctx->check, also verifies that every fanin ran first and marks the task
 * done. Defined in peer_main.c (one body for all peers). */
void peer_body(struct peer_ctx *ctx, uint32_t task);

/* Each peer program defines these two. */
extern const char *const peer_name;      /* "tbb", "openmp", "starpu", "floor", "taskflow" */
/* Build the graph (every task and edge) and run it to completion, once.
 * Called once per repetition, the first ones as warm-up. 0 or -errno. */
int peer_run(struct peer_ctx *ctx);
/* Run the graph again: built on the first call, only run on the next ones
 * (--rerun; what a program that keeps its graph object pays). -ENOTSUP
 * where the runtime has no graph object to run again. */
int peer_rerun(struct peer_ctx *ctx);
/* Once before the first and after the last run (a runtime's start-up and
 * shut-down are not measured). May be empty. */
int peer_init(unsigned threads);
void peer_fini(void);

#ifdef __cplusplus
}
#endif
