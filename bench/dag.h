/* SPDX-License-Identifier: MIT */
/*
 * The benchmark's task graphs, described once and built by every system
 * (hbg through libhbgclient, oneTBB, OpenMP, StarPU, the one-thread floor)
 * from the same description: tasks in a topological order, each with the
 * indices of the tasks it waits for, and a body (nothing, or one gemm_f32
 * tile: every system calls the same C function, bench_gemm_tile()).
 *
 * Shapes (docs/PERFORMANCE.md):
 *   chain        task i waits for i - 1
 *   independent  no edges
 *   tree         a binary reduction: leaves first, each inner node waits
 *                for its two children (2^k - 1 tasks)
 *   wavefront    a square grid, (i, j) waits for (i-1, j) and (i, j-1)
 *   layered      random layers, about 3.8 fanins per task from the two
 *                layers before
 *   gemm         tiled C += A B: task (i, j, k) is one gemm_f32 tile, the
 *                tasks of C[i][j] chained over k
 *   attention    paged-attention-like: per batch, many independent score
 *                tasks (roots) and one serial chain of updates, update j
 *                waiting for score j and update j - 1
 */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

enum dag_body {
        DAG_NOOP = 0,
        DAG_GEMM = 1,
};

struct dag_gemm_task {
        uint32_t a, b, c;               /* tiles read (A, B) and updated (C) */
};

struct dag {
        const char *shape;
        uint32_t n;                     /* tasks, indices 0..n-1 in topological order */
        uint32_t *fanin_start;          /* n + 1 offsets into fanins */
        uint32_t *fanins;               /* task indices, each < its task's index */
        uint32_t max_fanin;             /* largest fanin count (<= 16) */
        enum dag_body body;
        /* DAG_GEMM: n_tiles tiles of tile x tile floats (A, B and C tiles
         * all in one array of tiles); task i updates tile gemm[i].c. */
        uint32_t tile;
        uint32_t n_tiles;
        struct dag_gemm_task *gemm;
};

/* The shapes, in table order: dag_shape_name(i) for i < dag_shape_count(). */
unsigned dag_shape_count(void);
const char *dag_shape_name(unsigned i);

/*
 * Build shape `shape` with about `size` tasks (the exact count for chain and
 * independent; rounded to the shape's structure for the others; 0: the
 * shape's default size, `quick`: a smaller default). Reproducible from seed.
 * 0, or -EINVAL for an unknown shape, -ENOMEM.
 */
int dag_make(struct dag *d, const char *shape, uint64_t size, bool quick, uint64_t seed);
void dag_free(struct dag *d);

/* The default size of a shape (0 if unknown). */
uint64_t dag_default_size(const char *shape, bool quick);

/* Number of edges. */
static inline uint64_t dag_edges(const struct dag *d) {
        return d->fanin_start[d->n];
}

/* One gemm_f32 tile: C[t x t] += A[t x t] B[t x t], row-major, the same
 * code hbgd's gemm_f32 kernel runs (daemon/engine/kernels.c). */
void bench_gemm_tile(const float *a, const float *b, float *c, uint32_t t);

#ifdef __cplusplus
}
#endif
