/* SPDX-License-Identifier: MIT */
/*
 * A first libhbgclient program: C = A·B in 32×32 tiles, a softmax over the
 * rows of every C tile, then the sum of all of C - run by hbgd, checked
 * against the same computation on the CPU.
 *
 *   hbgd --socket /tmp/hbg/hbgd.sock &
 *   HBG_SOCKET=/tmp/hbg/hbgd.sock hbg-example-gemm-softmax
 *
 * The tensors live in the session heap, memory shared with hbgd: we fill
 * them in place and read the results in place, nothing is copied. Tasks
 * name the tensors they read and write; the library derives the order
 * between tasks from that, so we never list a dependency by hand.
 */
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <hbg/hbg.h>

#define M 128            /* C is M×N, A is M×K, B is K×N */
#define N 128
#define K 128
#define T 32             /* tile size */
#define TILE (T * T)     /* floats per tile */

/* Tile (r, c) of a matrix with `cols` tile columns: each tile is stored
 * contiguously (row-major inside), because gemm_f32 takes contiguous
 * row-major tensors. */
static hbg_tensor tile(hbg_tensor m, int r, int c, int cols) {
        hbg_tensor t;
        uint64_t first = (uint64_t)(r * cols + c) * TILE;
        hbg_tensor_slice_f32(m, first, first + TILE, &t);
        return t;
}

/* Deterministic pseudo-random numbers in [-0.5, 0.5). */
static float rand_unit(unsigned *seed) {
        *seed = *seed * 1103515245u + 12345u;
        return (float)((*seed >> 8) & 0xffff) / 65536.0f - 0.5f;
}

static double now_ms(void) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static int check(int err, const char *what, hbg_client *c) {
        if (err < 0) {
                fprintf(stderr, "%s: %s (%s)\n", what, hbg_strerror(err), hbg_last_error(c));
                exit(1);
        }
        return err;
}

/* The CPU reference, in the same order as the kernels (so the results
 * agree to rounding): C_tile += A_tile·B_tile, softmax per tile row. */
static void reference(const float *A, const float *B, float *C, float *sum) {
        for (int i = 0; i < M / T; i++)
                for (int j = 0; j < N / T; j++) {
                        float *c = C + (i * (N / T) + j) * TILE;
                        for (int p = 0; p < K / T; p++) {
                                const float *a = A + (i * (K / T) + p) * TILE, *b = B + (p * (N / T) + j) * TILE;
                                for (int r = 0; r < T; r++)
                                        for (int q = 0; q < T; q++)
                                                for (int x = 0; x < T; x++)
                                                        c[r * T + x] += a[r * T + q] * b[q * T + x];
                        }
                        for (int r = 0; r < T; r++) {
                                float *row = c + r * T, max = row[0];
                                double s = 0;
                                for (int x = 1; x < T; x++)
                                        max = row[x] > max ? row[x] : max;
                                for (int x = 0; x < T; x++)
                                        s += row[x] = expf(row[x] - max);
                                for (int x = 0; x < T; x++)
                                        row[x] = (float)(row[x] / s);
                        }
                }
        double s = 0;
        for (int i = 0; i < M * N; i++)
                s += C[i];
        *sum = (float)s;
}

static void usage(FILE *f, const char *prog) {
        fprintf(f,
                "Usage: %s [--help]\n"
                "C = A*B in 32x32 tiles, a row softmax per tile and the sum of C, run by hbgd\n"
                "and checked against the CPU. The socket: $HBG_SOCKET, else /run/hbgd/hbgd.sock.\n",
                prog);
}

int main(int argc, char **argv) {
        if (argc > 1) {
                bool help = strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0;
                if (!help)
                        fprintf(stderr, "%s: unexpected argument '%s'\n", argv[0], argv[1]);
                usage(help ? stdout : stderr, argv[0]);
                return help ? 0 : 2;
        }
        hbg_client *c;
        double t0 = now_ms();
        check(hbg_connect(&c, NULL), "hbg_connect", NULL); /* $HBG_SOCKET */

        /* 1. Tensors in the session heap, filled in place. */
        hbg_tensor a, b, cm, s;
        check(hbg_tensor_alloc(c, M * K * sizeof(float), &a), "alloc A", c);
        check(hbg_tensor_alloc(c, K * N * sizeof(float), &b), "alloc B", c);
        check(hbg_tensor_alloc(c, M * N * sizeof(float), &cm), "alloc C", c);
        check(hbg_tensor_alloc(c, sizeof(float), &s), "alloc s", c);
        float *pa = hbg_tensor_data(c, a), *pb = hbg_tensor_data(c, b);
        float *pc = hbg_tensor_data(c, cm), *ps = hbg_tensor_data(c, s);
        unsigned seed = 12345;
        for (int i = 0; i < M * K; i++)
                pa[i] = rand_unit(&seed);
        for (int i = 0; i < K * N; i++)
                pb[i] = rand_unit(&seed);
        for (int i = 0; i < M * N; i++)
                pc[i] = 0.0f;
        *ps = 0.0f;

        /* 2. The graph. gemm_f32(A, B, C, m, n, k): C += A·B. The four
         * tasks of one C tile are ordered by the library (each writes C),
         * different C tiles run in parallel. */
        double t1 = now_ms();
        for (int i = 0; i < M / T; i++)
                for (int j = 0; j < N / T; j++)
                        for (int p = 0; p < K / T; p++) {
                                hbg_task t = HBG_TASK_INIT("gemm_f32");
                                t.lanes = HBG_LANES_AIC;   /* the cube core */
                                t.blocks = 4;              /* 4 blocks of 8 rows each */
                                t.n_args = 3;
                                t.args[0].tensor = tile(a, i, p, K / T), t.args[0].dir = HBG_IN;
                                t.args[1].tensor = tile(b, p, j, N / T), t.args[1].dir = HBG_IN;
                                t.args[2].tensor = tile(cm, i, j, N / T), t.args[2].dir = HBG_INOUT;
                                t.n_scalars = 3;
                                t.scalars[0] = T, t.scalars[1] = T, t.scalars[2] = T;
                                check(hbg_graph_add(c, &t, NULL), "add gemm", c);
                        }
        /* softmax_rows_f32(X, rows, cols) on each C tile: runs after the
         * last gemm writing that tile (a vector core: lanes 0 = AIV). */
        for (int i = 0; i < M / T; i++)
                for (int j = 0; j < N / T; j++) {
                        hbg_task t = HBG_TASK_INIT("softmax_rows_f32");
                        t.n_args = 1;
                        t.args[0].tensor = tile(cm, i, j, N / T), t.args[0].dir = HBG_INOUT;
                        t.n_scalars = 2;
                        t.scalars[0] = T, t.scalars[1] = T;
                        check(hbg_graph_add(c, &t, NULL), "add softmax", c);
                }
        /* reduce_sum_f32(x, s): s[0] = sum of all of C, after all 16 softmaxes. */
        hbg_task t = HBG_TASK_INIT("reduce_sum_f32");
        t.n_args = 2;
        t.args[0].tensor = cm, t.args[0].dir = HBG_IN;
        t.args[1].tensor = s, t.args[1].dir = HBG_OUT;
        check(hbg_graph_add(c, &t, NULL), "add reduce", c);
        uint64_t g;
        check(hbg_graph_submit(c, &g), "submit", c);

        /* 3. Run: wait for the whole graph (10 s at most). */
        double t2 = now_ms();
        check(hbg_graph_wait(c, g, 10000), "graph", c);
        double t3 = now_ms();

        /* 4. Check against the CPU (A and B are unchanged: read in place). */
        float *rc = calloc(M * N, sizeof(float)), rs;
        if (!rc) {
                fprintf(stderr, "out of memory\n");
                return 1;
        }
        reference(pa, pb, rc, &rs);
        int bad = 0;
        for (int i = 0; i < M * N; i++)
                if (fabsf(pc[i] - rc[i]) > 1e-4f * fabsf(rc[i]) + 1e-7f && bad++ < 5)
                        fprintf(stderr, "C[%d] = %g, expected %g\n", i, pc[i], rc[i]);
        if (fabsf(*ps - rs) > 1e-4f * fabsf(rs)) {
                fprintf(stderr, "sum = %g, expected %g\n", *ps, rs);
                bad++;
        }
        printf("connect %.2f ms, graph build %.2f ms (%d tasks), run %.2f ms, sum %.4f\n", t1 - t0,
               t2 - t1, (M / T) * (N / T) * (K / T + 1) + 1, t3 - t2, *ps);
        free(rc);
        hbg_disconnect(c);
        if (bad) {
                printf("MISMATCH (%d)\n", bad);
                return 1;
        }
        printf("ok\n");
        return 0;
}
