/* SPDX-License-Identifier: MIT */
/*
 * hbg-bench: what the dispatcher (hbg_bench.c) and the suites share.
 *
 * A suite is an entry point that receives its own argv (argv[0] is the suite
 * name) and returns the process exit status, plus a usage printer so that
 * `hbg-bench --help` can list every suite's options in one place.
 */
#pragma once

#include <stdio.h>

/* Exit statuses, common to every suite so scripts can tell a usage mistake
 * from a run that failed or computed a wrong result. */
enum {
        BENCH_EXIT_OK = 0,
        BENCH_EXIT_FAIL = 1,   /* setup failed, or a run's result was wrong */
        BENCH_EXIT_USAGE = 2,  /* unknown suite or option, bad value */
};

/* "completion": the shared-memory completion protocol (shm/completion.h). */
int bench_completion_main(int argc, char **argv);
void bench_completion_usage(FILE *out);

/* "engine": the scheduler engine end to end with noop tasks (daemon/engine/engine.h). */
int bench_engine_main(int argc, char **argv);
void bench_engine_usage(FILE *out);

/* The comparison (bench/compare.c): what `hbg-bench [options]` runs. */
int bench_compare_main(int argc, char **argv);
void bench_compare_usage(FILE *out);

/* `hbg-bench --compare OLD NEW` (bench/regress.c). */
int bench_regress_main(int argc, char **argv);
void bench_regress_usage(FILE *out);

/* "producer": one producer process of the comparison (bench/producer.c). */
int bench_producer_main(int argc, char **argv);
void bench_producer_usage(FILE *out);
