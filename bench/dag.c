/* SPDX-License-Identifier: MIT */
/* The benchmark's task graphs (bench/dag.h). */
#include "bench/dag.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "bench/bench_util.h"
#include "daemon/engine/kernels.h"
#include "daemon/engine/kernels_builtin.h"

/* Edges are appended task by task (indices ascending). */
struct builder {
        struct dag *d;
        uint32_t task;          /* tasks begun */
        uint64_t edges, cap;
};

static int begin(struct builder *b) {
        b->d->fanin_start[b->task++] = (uint32_t)b->edges;
        return 0;
}

static int edge(struct builder *b, uint32_t from) {
        if (b->edges == b->cap) {
                uint64_t cap = b->cap ? 2 * b->cap : 1024;
                uint32_t *v = realloc(b->d->fanins, cap * sizeof(*v));
                if (!v)
                        return -ENOMEM;
                b->d->fanins = v;
                b->cap = cap;
        }
        b->d->fanins[b->edges++] = from;
        return 0;
}

static int alloc_tasks(struct dag *d, uint32_t n) {
        d->n = n;
        d->fanin_start = calloc((size_t)n + 1, sizeof(*d->fanin_start));
        return d->fanin_start ? 0 : -ENOMEM;
}

static int finish(struct builder *b) {
        struct dag *d = b->d;
        d->fanin_start[d->n] = (uint32_t)b->edges;
        d->max_fanin = 0;
        for (uint32_t i = 0; i < d->n; i++) {
                uint32_t k = d->fanin_start[i + 1] - d->fanin_start[i];
                if (k > d->max_fanin)
                        d->max_fanin = k;
        }
        return 0;
}

#define TRY(x)                          \
        do {                            \
                int err_ = (x);         \
                if (err_ < 0)           \
                        return err_;    \
        } while (0)

static int make_chain(struct builder *b, uint64_t size, uint64_t seed) {
        (void)seed;
        TRY(alloc_tasks(b->d, (uint32_t)size));
        for (uint32_t i = 0; i < size; i++) {
                begin(b);
                if (i)
                        TRY(edge(b, i - 1));
        }
        return 0;
}

static int make_independent(struct builder *b, uint64_t size, uint64_t seed) {
        (void)seed;
        TRY(alloc_tasks(b->d, (uint32_t)size));
        for (uint32_t i = 0; i < size; i++)
                begin(b);
        return 0;
}

/* Levels of a complete binary tree, leaves first: level L has 2^L nodes;
 * node j of level L waits for nodes 2j and 2j+1 of level L+1. */
static int make_tree(struct builder *b, uint64_t size, uint64_t seed) {
        (void)seed;
        unsigned levels = 1;
        while ((UINT64_C(2) << levels) - 1 <= size && levels < 24)
                levels++;
        uint32_t n = (1u << levels) - 1;
        TRY(alloc_tasks(b->d, n));
        uint32_t first_of_level[25];
        uint32_t at = 0;
        for (int l = (int)levels - 1; l >= 0; l--) {
                first_of_level[l] = at;
                at += 1u << l;
        }
        for (int l = (int)levels - 1; l >= 0; l--)
                for (uint32_t j = 0; j < (1u << l); j++) {
                        begin(b);
                        if (l + 1 < (int)levels) {
                                TRY(edge(b, first_of_level[l + 1] + 2 * j));
                                TRY(edge(b, first_of_level[l + 1] + 2 * j + 1));
                        }
                }
        return 0;
}

static int make_wavefront(struct builder *b, uint64_t size, uint64_t seed) {
        (void)seed;
        uint32_t side = (uint32_t)sqrt((double)size);
        if (side < 2)
                side = 2;
        TRY(alloc_tasks(b->d, side * side));
        for (uint32_t i = 0; i < side; i++)
                for (uint32_t j = 0; j < side; j++) {
                        begin(b);
                        if (i)
                                TRY(edge(b, (i - 1) * side + j));
                        if (j)
                                TRY(edge(b, i * side + j - 1));
                }
        return 0;
}

/* Layers of 1000 tasks; a task of layer L >= 1 waits for 1..7 distinct
 * tasks (mean about 3.8) of layers L-1 and L-2. */
static int make_layered(struct builder *b, uint64_t size, uint64_t seed) {
        const uint32_t width = 1000;
        uint32_t layers = (uint32_t)((size + width - 1) / width);
        if (layers < 2)
                layers = 2;
        uint32_t n = layers * width;
        TRY(alloc_tasks(b->d, n));
        uint64_t s = seed ^ 0x1a7e7edULL;
        for (uint32_t l = 0; l < layers; l++)
                for (uint32_t j = 0; j < width; j++) {
                        begin(b);
                        if (l == 0)
                                continue;
                        uint32_t k = 1 + (uint32_t)(bench_splitmix64(&s) % 6) +
                                     (bench_splitmix64(&s) % 10 < 3 ? 1 : 0);
                        uint32_t lo = (l >= 2 ? l - 2 : 0) * width, hi = l * width;
                        uint32_t picked[8];
                        for (uint32_t e = 0; e < k; e++) {
                                uint32_t f;
                                bool dup;
                                do {
                                        f = lo + (uint32_t)(bench_splitmix64(&s) % (hi - lo));
                                        dup = false;
                                        for (uint32_t x = 0; x < e; x++)
                                                dup |= picked[x] == f;
                                } while (dup);
                                picked[e] = f;
                        }
                        /* Ascending, as a producer would list them. */
                        for (uint32_t x = 1; x < k; x++)
                                for (uint32_t y = x; y > 0 && picked[y - 1] > picked[y]; y--) {
                                        uint32_t t = picked[y];
                                        picked[y] = picked[y - 1];
                                        picked[y - 1] = t;
                                }
                        for (uint32_t e = 0; e < k; e++)
                                TRY(edge(b, picked[e]));
                }
        return 0;
}

/* T x T tiles of C, K = T: task (i, j, k) = C[i][j] += A[i][k] B[k][j],
 * waiting for (i, j, k-1). Tiles: A then B then C, T*T each. */
static int make_gemm(struct builder *b, uint64_t size, uint64_t seed) {
        (void)seed;
        uint32_t t = (uint32_t)cbrt((double)size);
        if (t < 2)
                t = 2;
        struct dag *d = b->d;
        TRY(alloc_tasks(d, t * t * t));
        d->body = DAG_GEMM;
        d->tile = 64;
        d->n_tiles = 3 * t * t;
        d->gemm = calloc(d->n, sizeof(*d->gemm));
        if (!d->gemm)
                return -ENOMEM;
        uint32_t task = 0;
        for (uint32_t i = 0; i < t; i++)
                for (uint32_t j = 0; j < t; j++)
                        for (uint32_t k = 0; k < t; k++, task++) {
                                begin(b);
                                if (k)
                                        TRY(edge(b, task - 1));
                                d->gemm[task] = (struct dag_gemm_task){
                                        .a = i * t + k, .b = t * t + k * t + j, .c = 2 * t * t + i * t + j };
                        }
        return 0;
}

/* Batches of 64 blocks: per block, a score task (a root) and an update
 * waiting for it and for the previous update of the batch. */
static int make_attention(struct builder *b, uint64_t size, uint64_t seed) {
        (void)seed;
        const uint32_t blocks = 64;
        uint32_t batches = (uint32_t)(size / (2 * blocks));
        if (batches < 1)
                batches = 1;
        TRY(alloc_tasks(b->d, batches * blocks * 2));
        uint32_t task = 0;
        for (uint32_t q = 0; q < batches; q++) {
                /* The scores first (all ready at once), then the chain. */
                uint32_t scores = task;
                for (uint32_t j = 0; j < blocks; j++, task++)
                        begin(b);
                for (uint32_t j = 0; j < blocks; j++, task++) {
                        begin(b);
                        TRY(edge(b, scores + j));
                        if (j)
                                TRY(edge(b, task - 1));
                }
        }
        return 0;
}

/* The shapes: name, default size, --quick size, builder. */
static const struct shape {
        const char *name;
        uint64_t size, quick;
        int (*make)(struct builder *b, uint64_t size, uint64_t seed);
} shapes[] = {
        { "chain", 100000, 20000, make_chain },
        { "independent", 100000, 20000, make_independent },
        { "tree", (1u << 17) - 1, (1u << 15) - 1, make_tree },
        { "wavefront", 300 * 300, 140 * 140, make_wavefront },
        { "layered", 100000, 20000, make_layered },
        { "gemm", 16 * 16 * 16, 8 * 8 * 8, make_gemm },
        { "attention", 256 * 128, 64 * 128, make_attention },
};
#define N_SHAPES (sizeof(shapes) / sizeof(shapes[0]))

unsigned dag_shape_count(void) {
        return N_SHAPES;
}

const char *dag_shape_name(unsigned i) {
        return i < N_SHAPES ? shapes[i].name : NULL;
}

static const struct shape *find(const char *name) {
        for (size_t i = 0; i < N_SHAPES; i++)
                if (strcmp(shapes[i].name, name) == 0)
                        return &shapes[i];
        return NULL;
}

uint64_t dag_default_size(const char *shape, bool quick) {
        const struct shape *sh = find(shape);
        return sh ? (quick ? sh->quick : sh->size) : 0;
}

int dag_make(struct dag *d, const char *shape, uint64_t size, bool quick, uint64_t seed) {
        memset(d, 0, sizeof(*d));
        const struct shape *sh = find(shape);
        if (!sh)
                return -EINVAL;
        d->shape = sh->name;
        struct builder b = { .d = d };
        int err = sh->make(&b, size ? size : (quick ? sh->quick : sh->size), seed);
        if (err == 0)
                err = finish(&b);
        if (err < 0)
                dag_free(d);
        return err;
}

void dag_free(struct dag *d) {
        free(d->fanin_start);
        free(d->fanins);
        free(d->gemm);
        memset(d, 0, sizeof(*d));
}

/* The kernel's own loop, its checks included, with no time budget: every
 * system pays the same for them. */
void bench_gemm_tile(const float *a, const float *b, float *c, uint32_t t) {
        struct kernel_run_ctx ctx;

        kernel_run_ctx_init(&ctx, 0, NULL);
        (void)kernel_gemm_f32_rows(&ctx.k, a, b, c, t, t, 0, t);
}
