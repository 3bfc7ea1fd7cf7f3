/* SPDX-License-Identifier: MIT */
/*
 * The main of every peer program (bench/peers/peer.h):
 *   hbg-bench-PEER --shape NAME [--size N] [--quick] [--threads T]
 *                  [--repeat R] [--warmup W] [--seed S] [--check] [--rerun]
 *                  [--spin ITERS --spin-every K]
 * prints, per measured repetition, one line "rep I ns TOTAL tasks N" (build
 * plus run of the whole graph, wall clock; with --rerun the graph is built
 * in the first run, a warm-up, and only run again after), then "rss_kib K" (the
 * process's peak resident memory) and "ok". Exit 0, 1 on a
 * failure (a check violation included), 2 on bad usage.
 */
#include <errno.h>
#include <malloc.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include "bench/peers/peer.h"
#include "bench/bench_util.h"

void peer_body(struct peer_ctx *ctx, uint32_t task) {
        const struct dag *d = ctx->d;
        if (ctx->check) {
                for (uint32_t e = d->fanin_start[task]; e < d->fanin_start[task + 1]; e++)
                        if (!atomic_load_explicit((_Atomic uint32_t *)&ctx->done[d->fanins[e]],
                                                  memory_order_acquire))
                                __atomic_fetch_add(&ctx->violations, 1, __ATOMIC_RELAXED);
        }
        if (d->body == DAG_GEMM) {
                size_t tt = (size_t)d->tile * d->tile;
                const struct dag_gemm_task *g = &d->gemm[task];
                bench_gemm_tile(ctx->tiles + g->a * tt, ctx->tiles + g->b * tt, ctx->tiles + g->c * tt,
                                d->tile);
        }
        if (ctx->spin_every && task % ctx->spin_every == ctx->spin_every - 1)
                bench_spin(ctx->spin_iters);
        if (ctx->check)
                atomic_store_explicit((_Atomic uint32_t *)&ctx->done[task], 1, memory_order_release);
}

static int usage(void) {
        fprintf(stderr, "usage: hbg-bench-%s --shape NAME [--size N] [--quick] [--threads T] [--repeat R]\n"
                        "       [--warmup W] [--seed S] [--check] [--rerun] [--spin ITERS --spin-every K]\n",
                peer_name);
        return 2;
}

int main(int argc, char **argv) {
        const char *shape = NULL;
        unsigned long long size = 0, threads = 4, repeat = 5, warmup = 1, seed = 1, spin = 0, spin_every = 0;
        bool quick = false, check = false, rerun = false;
        for (int i = 1; i < argc; i++) {
                const char *a = argv[i];
                const char *v = i + 1 < argc ? argv[i + 1] : NULL;
                unsigned long long *num = NULL;
                if (strcmp(a, "--shape") == 0 && v)
                        shape = v, i++;
                else if (strcmp(a, "--quick") == 0)
                        quick = true;
                else if (strcmp(a, "--check") == 0)
                        check = true;
                else if (strcmp(a, "--rerun") == 0)
                        rerun = true;
                else if (strcmp(a, "--size") == 0)
                        num = &size;
                else if (strcmp(a, "--threads") == 0)
                        num = &threads;
                else if (strcmp(a, "--repeat") == 0)
                        num = &repeat;
                else if (strcmp(a, "--warmup") == 0)
                        num = &warmup;
                else if (strcmp(a, "--seed") == 0)
                        num = &seed;
                else if (strcmp(a, "--spin") == 0)
                        num = &spin;
                else if (strcmp(a, "--spin-every") == 0)
                        num = &spin_every;
                else
                        return usage();
                if (num) {
                        char *end;
                        if (!v)
                                return usage();
                        errno = 0;
                        *num = strtoull(v, &end, 10);
                        if (errno || *end || end == v)
                                return usage();
                        i++;
                }
        }
        if (!shape || threads < 1 || threads > 256 || repeat < 1 || spin_every > UINT32_MAX)
                return usage();
        struct dag d;
        int err = dag_make(&d, shape, size, quick, seed);
        if (err < 0) {
                fprintf(stderr, "hbg-bench-%s: shape %s: %s\n", peer_name, shape, strerror(-err));
                return err == -EINVAL ? 2 : 1;
        }
        struct peer_ctx ctx = { .d = &d, .threads = (unsigned)threads, .check = check,
                                .spin_every = (uint32_t)spin_every, .spin_iters = spin };
        if (d.body == DAG_GEMM) {
                size_t n = (size_t)d.n_tiles * d.tile * d.tile;
                ctx.tiles = malloc(n * sizeof(float));
                if (!ctx.tiles)
                        return 1;
                for (size_t i = 0; i < n; i++)
                        ctx.tiles[i] = (float)(i % 7) * 0.125f;
        }
        if (check) {
                ctx.done = calloc(d.n, sizeof(*ctx.done));
                if (!ctx.done)
                        return 1;
        }
        /*
         * Keep freed memory in the process. By default glibc gives large
         * blocks back to the kernel when they are freed (mmap'd blocks,
         * and the heap's top above the trim threshold), so every run
         * faults its graph's memory in again: the warm-up would not warm
         * anything, and the measurement would be the machine's page-fault
         * cost (on a VM, several microseconds a page: it multiplied
         * StarPU's time per task by ten, its jobs being freed and
         * re-allocated every run) rather than the runtime's. A producer
         * building graph after graph has a warm heap; so do the peers.
         * Before peer_init, so that the runtime's threads' arenas follow.
         */
        mallopt(M_MMAP_MAX, 0);
        mallopt(M_TRIM_THRESHOLD, -1);
        if (peer_init((unsigned)threads) < 0) {
                fprintf(stderr, "hbg-bench-%s: cannot start the runtime\n", peer_name);
                return 1;
        }
        int rc = 0;
        for (unsigned long long r = 0; r < warmup + repeat && rc == 0; r++) {
                if (check)
                        memset(ctx.done, 0, d.n * sizeof(*ctx.done));
                int64_t t0 = bench_now_ns();
                err = rerun ? peer_rerun(&ctx) : peer_run(&ctx);
                int64_t ns = bench_now_ns() - t0;
                if (err < 0) {
                        fprintf(stderr, "hbg-bench-%s: %s: run failed: %s\n", peer_name, shape, strerror(-err));
                        rc = 1;
                        break;
                }
                if (check) {
                        unsigned long v = __atomic_load_n(&ctx.violations, __ATOMIC_RELAXED);
                        for (uint32_t t = 0; t < d.n; t++)
                                v += ctx.done[t] ? 0 : 1;
                        if (v) {
                                fprintf(stderr, "hbg-bench-%s: %s: %lu tasks ran early or not at all\n",
                                        peer_name, shape, v);
                                rc = 1;
                                break;
                        }
                }
                if (r >= warmup)
                        printf("rep %llu ns %lld tasks %u\n", r - warmup, (long long)ns, d.n);
        }
        peer_fini();
        if (rc == 0) {
                struct rusage ru;
                printf("rss_kib %ld\n", getrusage(RUSAGE_SELF, &ru) == 0 ? ru.ru_maxrss : 0L);
                printf("ok\n");
        }
        free(ctx.tiles);
        free(ctx.done);
        dag_free(&d);
        return rc;
}
