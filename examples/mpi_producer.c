/* SPDX-License-Identifier: MIT */
/*
 * Scaling out with MPI: every rank is a producer of its node's own hbgd.
 *
 * hbgd shares memory with its producers, so it serves one machine; MPI
 * spreads the work over machines. Here the problem is y = alpha·x + y over
 * a global vector of N floats, then the sum of y. Rank r takes a
 * contiguous share of the indices, builds one graph over it (per chunk of
 * 4096 elements an axpy_f32 and a reduce_sum_f32, run by its hbgd's
 * scheduler threads), checks every element and chunk sum it got back, and
 * the partial sums are reduced with MPI_Reduce. Rank 0 compares the total
 * with the closed form. Every value is an integer below 2^24, so the
 * float kernels are exact and the check is equality, not a tolerance.
 *
 *   mpirun -npernode 1 --hostfile hosts hbg-example-mpi-producer
 *   mpirun -np 3 hbg-example-mpi-producer --socket /tmp/hbg-%h.sock
 *
 * Options (the same on every rank):
 *   --n N           global elements (default 1048576, at most 2^32)
 *   --alpha A       integer factor 1..16 (default 3)
 *   --socket PATH   this node's hbgd; %h is replaced by the node's name
 *                   (MPI_Get_processor_name), %% by %. Without it:
 *                   $HBG_SOCKET, else /run/hbgd/hbgd.sock.
 *   --fail-rank R   rank R adds a task that fails with -EIO: shows how one
 *                   rank's failure reaches every rank and the exit status.
 *
 * Failures: a rank never leaves the collectives early. Whatever went wrong
 * on it (no hbgd, a refused session, a failed graph, a wrong result) is
 * printed by that rank, then every rank learns the number of failed ranks
 * (MPI_Allreduce) and exits 1 if it is not zero; mpirun then exits non-zero
 * too. docs/SCALING.md says more (and when to call MPI_Abort instead).
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <mpi.h>

#include <hbg/hbg.h>

#define PERIOD 64        /* x[i] = i mod PERIOD */
#define CHUNK 4096       /* elements per axpy and per partial sum */
#define MAX_N (UINT64_C(1) << 32)
#define MAX_ALPHA 16     /* a chunk sum stays below 2^24: exact in float */
#define WAIT_MS 60000

struct options {
        uint64_t n;
        unsigned alpha;
        const char *socket;   /* template, NULL: the library's default */
        int fail_rank;        /* -1: none */
};

/* What one rank did: 0 or a negative errno, and why. */
struct share {
        int rank;
        uint64_t lo, hi;      /* global indices [lo, hi) */
        double sum;           /* sum of y over the share */
        char path[256];       /* the socket it used ("" = the default) */
        char why[512];
};

static int parse_u64(const char *s, uint64_t max, uint64_t *ret) {
        char *end;
        errno = 0;
        unsigned long long v = strtoull(s, &end, 10);
        if (errno || end == s || *end || s[0] == '-' || v > max)
                return -EINVAL;
        *ret = v;
        return 0;
}

static int parse_options(int argc, char **argv, struct options *o, const char **ret_bad) {
        *o = (struct options){ .n = UINT64_C(1) << 20, .alpha = 3, .fail_rank = -1 };
        for (int i = 1; i < argc; i++) {
                const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
                uint64_t x;

                *ret_bad = a;
                if (!strcmp(a, "-h") || !strcmp(a, "--help"))
                        return 1;
                if (!v)
                        return -EINVAL;
                if (!strcmp(a, "--n")) {
                        if (parse_u64(v, MAX_N, &o->n) < 0 || o->n == 0)
                                return -EINVAL;
                } else if (!strcmp(a, "--alpha")) {
                        if (parse_u64(v, MAX_ALPHA, &x) < 0 || x == 0)
                                return -EINVAL;
                        o->alpha = (unsigned)x;
                } else if (!strcmp(a, "--socket")) {
                        o->socket = v;
                } else if (!strcmp(a, "--fail-rank")) {
                        if (parse_u64(v, INT32_MAX, &x) < 0)
                                return -EINVAL;
                        o->fail_rank = (int)x;
                } else {
                        return -EINVAL;
                }
                i++;
        }
        return 0;
}

/* The socket template with %h (this node's name) and %% expanded. */
static int socket_path(const char *tmpl, char *buf, size_t size) {
        char host[MPI_MAX_PROCESSOR_NAME];
        int hostlen = 0;
        size_t n = 0;

        MPI_Get_processor_name(host, &hostlen);
        for (const char *p = tmpl; *p; p++) {
                const char *add = p;
                size_t len = 1;
                if (p[0] == '%' && p[1] == 'h') {
                        add = host, len = (size_t)hostlen, p++;
                } else if (p[0] == '%' && p[1] == '%') {
                        p++;
                }
                if (n + len >= size)
                        return -ENAMETOOLONG;
                memcpy(buf + n, add, len);
                n += len;
        }
        buf[n] = '\0';
        return 0;
}

/* sum of alpha * (i mod PERIOD) + 1 over i in [0, n): exact in double
 * (at most 2^32 * (16 * 63 + 1) < 2^53). */
static double closed_form(uint64_t n, unsigned alpha) {
        uint64_t q = n / PERIOD, r = n % PERIOD;
        uint64_t sum_x = q * (PERIOD * (PERIOD - 1) / 2) + r * (r - 1) / 2;
        return (double)n + (double)alpha * (double)sum_x;
}

static int fail(struct share *s, int err, const char *what, hbg_client *c) {
        const char *detail = c ? hbg_last_error(c) : hbg_last_error(NULL);
        snprintf(s->why, sizeof(s->why), "%s: %s%s%s%s", what, hbg_strerror(err), *detail ? " (" : "",
                 detail, *detail ? ")" : "");
        return err;
}

/* Build, run and check this rank's share on its hbgd. */
static int run_share(const struct options *o, struct share *s) {
        uint64_t n = s->hi - s->lo, chunks = (n + CHUNK - 1) / CHUNK;
        hbg_connect_options co = HBG_CONNECT_OPTIONS_INIT;
        char name[64];
        hbg_client *c = NULL;
        int err;

        if (n == 0)     /* more ranks than elements */
                return 0;
        if (o->socket && (err = socket_path(o->socket, s->path, sizeof(s->path))) < 0)
                return fail(s, err, "--socket", NULL);
        if (!o->socket) {  /* for the report only: the library picks the same */
                const char *env = getenv("HBG_SOCKET");
                snprintf(s->path, sizeof(s->path), "%s", env && env[0] ? env : "/run/hbgd/hbgd.sock");
        }
        snprintf(name, sizeof(name), "mpi_producer rank %d", s->rank);
        co.socket_path = o->socket ? s->path : NULL;
        co.name = name;
        /* x, y and the chunk sums (64-byte aligned each), in whole MiB
         * with at least 1 MiB to spare. */
        co.heap_bytes = ((2 * n + chunks) * sizeof(float) + 3 * 64 + (UINT64_C(2) << 20)) & ~(uint64_t)0xfffff;
        if ((err = hbg_connect_opts(&c, &co)) < 0)
                return fail(s, err, "hbg_connect", NULL);

        hbg_tensor x, y, sums;
        if ((err = hbg_tensor_alloc(c, n * sizeof(float), &x)) < 0 ||
            (err = hbg_tensor_alloc(c, n * sizeof(float), &y)) < 0 ||
            (err = hbg_tensor_alloc(c, chunks * sizeof(float), &sums)) < 0) {
                err = fail(s, err, "hbg_tensor_alloc", c);
                goto out;
        }
        float *px = hbg_tensor_data(c, x), *py = hbg_tensor_data(c, y), *ps = hbg_tensor_data(c, sums);
        for (uint64_t i = 0; i < n; i++) {
                px[i] = (float)((s->lo + i) % PERIOD);
                py[i] = 1.0f;
        }

        /* Per chunk: y_c = alpha * x_c + y_c, then sums[k] = sum of y_c. The
         * library orders each reduction after its axpy (it reads y_c). */
        for (uint64_t k = 0; k < chunks; k++) {
                uint64_t first = k * CHUNK, last = first + CHUNK < n ? first + CHUNK : n;
                hbg_task t = HBG_TASK_INIT("axpy_f32");
                t.blocks = 2;
                t.n_args = 2;
                hbg_tensor_slice_f32(x, first, last, &t.args[0].tensor), t.args[0].dir = HBG_IN;
                hbg_tensor_slice_f32(y, first, last, &t.args[1].tensor), t.args[1].dir = HBG_INOUT;
                t.n_scalars = 1;
                t.scalars[0] = hbg_f32((float)o->alpha);
                if ((err = hbg_graph_add(c, &t, NULL)) < 0) {
                        err = fail(s, err, "add axpy_f32", c);
                        goto out;
                }
                hbg_task r = HBG_TASK_INIT("reduce_sum_f32");
                r.n_args = 2;
                r.args[0].tensor = t.args[1].tensor, r.args[0].dir = HBG_IN;
                hbg_tensor_slice_f32(sums, k, k + 1, &r.args[1].tensor), r.args[1].dir = HBG_OUT;
                if ((err = hbg_graph_add(c, &r, NULL)) < 0) {
                        err = fail(s, err, "add reduce_sum_f32", c);
                        goto out;
                }
        }
        uint64_t fail_task = UINT64_MAX;
        if (s->rank == o->fail_rank) {
                /* Built-in kernel "fail": returns its argument, like a
                 * kernel that hit an I/O error. */
                hbg_task t = HBG_TASK_INIT("fail");
                t.n_scalars = 1;
                t.scalars[0] = (uint64_t)(int64_t)-EIO;
                if ((err = hbg_graph_add(c, &t, &fail_task)) < 0) {
                        err = fail(s, err, "add fail", c);
                        goto out;
                }
        }
        uint64_t g;
        if ((err = hbg_graph_submit(c, &g)) < 0) {
                err = fail(s, err, "hbg_graph_submit", c);
                goto out;
        }
        if ((err = hbg_graph_wait(c, g, WAIT_MS)) < 0) {
                /* Failed in hbgd: which task, the code's words and hbgd's
                 * message (which names the kernel when the kernel failed). */
                hbg_graph_error_info info = HBG_GRAPH_ERROR_INFO_INIT;
                if (err != -ETIMEDOUT && err != -ECONNRESET && hbg_graph_error(c, g, &info) == 0 && info.code < 0)
                        snprintf(s->why, sizeof(s->why), "graph %" PRIu64 " failed at task %" PRIu64 "%s: %s: %s",
                                 g, info.task, info.task == fail_task ? " (the task --fail-rank added)" : "",
                                 hbg_strerror(info.code), info.message);
                else
                        fail(s, err, "hbg_graph_wait", c);
                goto out;
        }

        /* Check what came back: every element and every chunk sum. */
        for (uint64_t k = 0; k < chunks; k++) {
                uint64_t first = k * CHUNK, last = first + CHUNK < n ? first + CHUNK : n;
                double chunk = 0;
                for (uint64_t i = first; i < last; i++) {
                        float want = (float)(o->alpha * ((s->lo + i) % PERIOD) + 1);
                        if (py[i] != want) {
                                snprintf(s->why, sizeof(s->why), "y[%" PRIu64 "] = %.1f, expected %.1f", s->lo + i,
                                         (double)py[i], (double)want);
                                err = -EDOM;
                                goto out;
                        }
                        chunk += want;
                }
                if ((double)ps[k] != chunk) {
                        snprintf(s->why, sizeof(s->why), "sum of chunk %" PRIu64 " = %.1f, expected %.1f", k,
                                 (double)ps[k], chunk);
                        err = -EDOM;
                        goto out;
                }
                s->sum += ps[k];
        }
        err = 0;
out:
        hbg_disconnect(c);
        return err;
}

int main(int argc, char **argv) {
        int rank, size;
        struct options o;
        const char *bad = "";

        MPI_Init(&argc, &argv);
        MPI_Comm_rank(MPI_COMM_WORLD, &rank);
        MPI_Comm_size(MPI_COMM_WORLD, &size);

        /* Every rank parses the same arguments: all stop, rank 0 says why. */
        int p = parse_options(argc, argv, &o, &bad);
        if (p != 0) {
                if (rank == 0)
                        fprintf(p > 0 ? stdout : stderr,
                                "%s%s%susage: mpirun [...] %s [--n N] [--alpha 1..16] [--socket PATH(%%h: node)] "
                                "[--fail-rank R]\n",
                                p < 0 ? "bad option or value: " : "", p < 0 ? bad : "", p < 0 ? "\n" : "", argv[0]);
                MPI_Finalize();
                return p > 0 ? 0 : 2;
        }

        /* This rank's share: N / size elements, the first N % size ranks one more. */
        struct share s = { .rank = rank };
        uint64_t q = o.n / (uint64_t)size, r = o.n % (uint64_t)size, ur = (uint64_t)rank;
        s.lo = ur * q + (ur < r ? ur : r);
        s.hi = s.lo + q + (ur < r);
        int err = run_share(&o, &s);

        char host[MPI_MAX_PROCESSOR_NAME];
        int hostlen;
        MPI_Get_processor_name(host, &hostlen);
        if (err < 0)
                fprintf(stderr, "rank %d on %s: %s\n", rank, host, s.why);
        else
                printf("rank %d/%d on %s: [%" PRIu64 ", %" PRIu64 ") via %s: partial sum %.0f ok\n", rank, size,
                       host, s.lo, s.hi, s.path[0] ? s.path : "no hbgd (empty share)", s.sum);
        fflush(NULL);

        /* Every rank learns how many failed; the sums go to rank 0. */
        int failed = err < 0, n_failed = 0;
        double total = 0;
        MPI_Allreduce(&failed, &n_failed, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
        MPI_Reduce(&s.sum, &total, 1, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD);

        int rc = n_failed ? 1 : 0;
        if (rank == 0) {
                double want = closed_form(o.n, o.alpha);
                if (n_failed) {
                        fprintf(stderr, "mpi_producer: %d of %d ranks failed\n", n_failed, size);
                } else if (total != want) {
                        fprintf(stderr, "mpi_producer: sum %.0f, expected %.0f: MISMATCH\n", total, want);
                        rc = 1;
                } else {
                        printf("mpi_producer: %d ranks, %" PRIu64 " elements, alpha %u: sum %.0f (expected %.0f) ok\n",
                               size, o.n, o.alpha, total, want);
                }
        }
        fflush(NULL);
        MPI_Bcast(&rc, 1, MPI_INT, 0, MPI_COMM_WORLD);   /* a mismatch fails every rank */
        MPI_Finalize();
        return rc;
}
