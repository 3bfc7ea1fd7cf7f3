/* SPDX-License-Identifier: MIT */
/*
 * hbg-bench: the benchmarks of the hbg runtime.
 *
 *   hbg-bench [options]            the comparison with the peers (default)
 *   hbg-bench --compare OLD NEW    per-row ratios of two results.csv
 *   hbg-bench SUITE [options]      one micro-benchmark suite
 *   hbg-bench SUITE --help         that suite's options
 *   hbg-bench --help               every suite and its options
 *
 * New suites add one row to `suites` below and their declarations to
 * bench/bench.h; nothing else here changes.
 */
#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "bench/bench.h"

struct bench_suite {
        const char *name;
        const char *summary;
        int (*main)(int argc, char **argv);
        void (*usage)(FILE *out);
};

static const struct bench_suite suites[] = {
        { "compare", "hbg end to end beside oneTBB, OpenMP, StarPU, a floor (the default)",
          bench_compare_main, bench_compare_usage },
        { "completion", "completion protocol: publish, defer, watermark walk (shm/completion.h)",
          bench_completion_main, bench_completion_usage },
        { "engine", "scheduler engine: per-task cost of noop task graphs (daemon/engine/engine.h)",
          bench_engine_main, bench_engine_usage },
        { "producer", "one producer process of the comparison (run by hbg-bench itself)",
          bench_producer_main, bench_producer_usage },
};

#define N_SUITES (sizeof(suites) / sizeof(suites[0]))

static void usage(FILE *out, bool with_options) {
        fputs("usage: hbg-bench [options]              the comparison (suite compare)\n"
              "       hbg-bench --compare OLD.csv NEW.csv\n"
              "       hbg-bench SUITE [options]\n"
              "       hbg-bench SUITE --help\n"
              "       hbg-bench --help\n"
              "\n"
              "suites:\n",
              out);
        for (size_t i = 0; i < N_SUITES; i++)
                fprintf(out, "  %-12s %s\n", suites[i].name, suites[i].summary);
        if (!with_options)
                return;
        for (size_t i = 0; i < N_SUITES; i++) {
                fputc('\n', out);
                suites[i].usage(out);
        }
        fputc('\n', out);
        bench_regress_usage(out);
}

int main(int argc, char **argv) {
        /* A child that died makes a write to it fail (-EPIPE), not end the
         * bench before it stops the hbgd it started. */
        signal(SIGPIPE, SIG_IGN);
        if (argc >= 2 && (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0 ||
                          strcmp(argv[1], "help") == 0)) {
                usage(stdout, true);
                return BENCH_EXIT_OK;
        }
        if (argc >= 2 && strcmp(argv[1], "--compare") == 0)
                return bench_regress_main(argc - 1, argv + 1);
        /* No suite named: the comparison, with these options. */
        if (argc < 2 || strncmp(argv[1], "--", 2) == 0)
                return bench_compare_main(argc, argv);
        for (size_t i = 0; i < N_SUITES; i++)
                if (strcmp(argv[1], suites[i].name) == 0)
                        return suites[i].main(argc - 1, argv + 1);

        fprintf(stderr, "hbg-bench: unknown suite '%s'\n\n", argv[1]);
        usage(stderr, false);
        return BENCH_EXIT_USAGE;
}
