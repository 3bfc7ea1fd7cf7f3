/* SPDX-License-Identifier: MIT */
/*
 * Host functions in parallel: the producer's own C code, scheduled by
 * hbgd, run on the library's worker threads (hbg_connect_options.host_threads,
 * API 1.5).
 *
 * A small pipeline over BLOCKS blocks of a vector: for each block, hbgd
 * fills it (kernel fill_f32), a host function of ours transforms it in
 * place (x -> sqrt(x) + block, in C, in this process), and hbgd sums it
 * (kernel reduce_sum_f32). The blocks are independent, so the host
 * functions of different blocks run at once on the workers, while each
 * block's three steps keep their order (dependencies derived from the
 * tensors each task declares). The main thread only builds the graph and
 * sleeps in hbg_graph_wait(). The sums are checked against the CPU.
 *
 *   hbg-example-host-parallel [WORKERS]     (default 4; $HBG_SOCKET)
 */
#include <errno.h>
#include <math.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <hbg/hbg.h>

#define BLOCKS 32
#define N 4096 /* floats per block */

struct block {
        hbg_client *c;
        hbg_tensor x;
        int index;
};

static atomic_int running, most_at_once;

/* Runs on a worker thread: hbg_tensor_data() is one of the calls a host
 * function may make there (hbg.h). Blocks of different tasks are
 * disjoint, so no lock is needed. */
static int transform(void *userdata) {
        struct block *b = userdata;
        int now = atomic_fetch_add(&running, 1) + 1;
        int most = atomic_load(&most_at_once);
        while (now > most && !atomic_compare_exchange_weak(&most_at_once, &most, now))
                ;
        float *x = hbg_tensor_data(b->c, b->x);
        if (!x) {
                atomic_fetch_sub(&running, 1);
                return -EFAULT;
        }
        for (int i = 0; i < N; i++)
                x[i] = sqrtf(x[i]) + (float)b->index;
        /* Some I/O-like latency: what a thread pool hides. */
        struct timespec ts = { .tv_nsec = 2000000 };
        nanosleep(&ts, NULL);
        atomic_fetch_sub(&running, 1);
        return 0;
}

static int fail(hbg_client *c, const char *what, int err) {
        fprintf(stderr, "host_parallel: %s: %s (%s)\n", what, hbg_strerror(err), hbg_last_error(c));
        return 1;
}

static void usage(FILE *f, const char *prog) {
        fprintf(f,
                "Usage: %s [WORKERS]\n"
                "       %s --help\n"
                "Blocks of a vector filled and summed by hbgd, each transformed between by a\n"
                "host function of this program on WORKERS library threads (default 4; 0: none),\n"
                "checked against the CPU. The socket: $HBG_SOCKET, else /run/hbgd/hbgd.sock.\n",
                prog, prog);
}

/* A count of workers: digits only (strtoull() would take "--help" as 0). */
static bool parse_workers(const char *s, uint64_t *ret) {
        char *end;
        if (*s < '0' || *s > '9')
                return false;
        errno = 0;
        *ret = strtoull(s, &end, 10);
        return !*end && errno == 0;
}

int main(int argc, char **argv) {
        uint64_t workers = 4;
        if (argc > 1) {
                bool help = strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0;
                int bad = help ? 0 : !parse_workers(argv[1], &workers) ? 1 : argc > 2 ? 2 : 0;
                if (help || bad) {
                        if (bad)
                                fprintf(stderr, "%s: unexpected argument '%s'\n", argv[0], argv[bad]);
                        usage(help ? stdout : stderr, argv[0]);
                        return help ? 0 : 2;
                }
        }
        if (HBG_VERSION_CHECK() < 0) {
                fprintf(stderr, "host_parallel: libhbgclient %s is older than this program's %d.%d\n", hbg_version(),
                        HBG_VERSION_MAJOR, HBG_VERSION_MINOR);
                return 1;
        }
        hbg_connect_options o = HBG_CONNECT_OPTIONS_INIT;
        o.host_threads = workers;
        hbg_client *c;
        int err = hbg_connect_opts(&c, &o);
        if (err < 0)
                return fail(NULL, "connect", err);

        static struct block blocks[BLOCKS];
        hbg_tensor sums[BLOCKS];
        for (int b = 0; b < BLOCKS; b++) {
                blocks[b] = (struct block){ .c = c, .index = b };
                if ((err = hbg_tensor_alloc(c, N * sizeof(float), &blocks[b].x)) < 0 ||
                    (err = hbg_tensor_alloc(c, sizeof(float), &sums[b])) < 0)
                        return fail(c, "hbg_tensor_alloc", err);

                hbg_task fill = HBG_TASK_INIT("fill_f32");
                fill.n_args = 1;
                fill.args[0].tensor = blocks[b].x;
                fill.args[0].dir = HBG_OUT;
                fill.n_scalars = 1;
                fill.scalars[0] = hbg_f32((float)(b + 1) * (float)(b + 1));

                hbg_task host = HBG_TASK_INIT(NULL);
                host.host_fn = transform;
                host.host_userdata = &blocks[b];
                host.host_reads = &blocks[b].x;   /* after the fill ... */
                host.n_host_reads = 1;
                host.host_writes = &blocks[b].x;  /* ... and before the sum */
                host.n_host_writes = 1;

                hbg_task sum = HBG_TASK_INIT("reduce_sum_f32");
                sum.n_args = 2;
                sum.args[0].tensor = blocks[b].x;
                sum.args[0].dir = HBG_IN;
                sum.args[1].tensor = sums[b];
                sum.args[1].dir = HBG_OUT;

                if ((err = hbg_graph_add(c, &fill, NULL)) < 0 || (err = hbg_graph_add(c, &host, NULL)) < 0 ||
                    (err = hbg_graph_add(c, &sum, NULL)) < 0)
                        return fail(c, "hbg_graph_add", err);
        }
        uint64_t g;
        if ((err = hbg_graph_submit(c, &g)) < 0)
                return fail(c, "hbg_graph_submit", err);
        /* The workers run the host functions; this thread sleeps. */
        if ((err = hbg_graph_wait(c, g, 60000)) < 0)
                return fail(c, "hbg_graph_wait", err);

        int right = 0;
        for (int b = 0; b < BLOCKS; b++) {
                /* sqrt((b+1)^2) + b = 2b + 1, N times. */
                float want = (float)N * (float)(2 * b + 1);
                float got = *(const float *)hbg_tensor_data(c, sums[b]);
                if (got == want)
                        right++;
                else
                        fprintf(stderr, "host_parallel: block %d: sum %g, expected %g\n", b, (double)got,
                                (double)want);
        }
        printf("host_parallel: %d blocks right; %d host worker threads, at most %d host functions at once\n",
               right, hbg_client_host_threads(c), atomic_load(&most_at_once));
        hbg_disconnect(c);
        return right == BLOCKS ? 0 : 1;
}
