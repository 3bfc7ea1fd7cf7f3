/* SPDX-License-Identifier: MIT */
/*
 * The soak (make soak): a real hbgd (tests/e2e/daemon_util.c) and 8 producer
 * processes running mixed graphs for SOAK_SECONDS (default 600):
 *   kernels     fill, add, scale, reduce: the sum checked;
 *   host        a host function writes a tensor, kernels scale and sum it;
 *               every 7th one fails on purpose (-ECANCELED), and its graph
 *               must fail with exactly that;
 *   predicate   a fill that runs only when a predicate tensor is non-zero
 *               (every other round): the sum checked either way;
 *   streaming   a chain of 3 task windows' worth of adds in one graph
 *               (hbg_graph_add waits for window room): every element
 *               checked;
 * four graphs in flight per round, and a reconnect every 50 rounds (the
 * session's whole life, again and again).
 *
 * Every graph submitted is accounted for: it completed with the right
 * values, or failed with the one expected error; anything else (a wrong
 * value, another error, a wait that timed out) is counted as wrong, and
 * submitted - right - expected failures - wrong must be 0 (none lost).
 *
 * hbgd's fd count and memory are sampled every second into
 * OUT/soak.csv, and OUT/soak.png plots them (gnuplot). Flat means: over
 * the last window (a fifth of the run, at most 60 s), the maxima stay
 * within a margin of the maxima over the first window after the warm-up
 * (the same length, after the first fifth or 60 s): fds + 2 per producer
 * (a reconnect in progress holds up to 6 of hbgd's fds instead of 3), RSS
 * + max(16 MiB, 10%) (malloc keeps freed memory and grows in huge-page
 * steps; the sessions' shared pages come and go with reconnects). A
 * leak per graph or per session over thousands of them exceeds both.
 *
 * Usage: soak [--out DIR] (SOAK_SECONDS, SOAK_PRODUCERS from the
 * environment). Exit 0 when everything was accounted for and flat.
 */
#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "hbg/hbg.h"
#include "tests/e2e/daemon_util.h"

#define MAX_PRODUCERS 64
#define WINDOW 1024             /* the producers' task window */
#define STREAM_TASKS (3 * WINDOW)
#define N 256                   /* elements of the small tensors */
#define RECONNECT_ROUNDS 50
#define WAIT_MS 60000           /* a graph not done in a minute is lost */
#define EXPECTED_FAILURE (-ECANCELED)

struct tally {
        _Atomic uint64_t submitted, right, failed_expected, wrong;
        char first_wrong[256];
};

/* ------------------------------------------------------------ a producer */

struct producer {
        struct tally *t;
        hbg_client *c;
        hbg_tensor a, b, s, res, h, pred, x, one, chain;
        unsigned k;
};

struct host_arg {
        float *h;
        unsigned base;
        bool fail;
};

static int host_write(void *arg) {
        struct host_arg *ha = arg;
        if (ha->fail)
                return EXPECTED_FAILURE;
        for (unsigned i = 0; i < N; i++)
                ha->h[i] = (float)(ha->base + i);
        return 0;
}

static void wrong(struct producer *p, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void wrong(struct producer *p, const char *fmt, ...) {
        if (atomic_fetch_add(&p->t->wrong, 1) == 0) {
                va_list ap;
                va_start(ap, fmt);
                vsnprintf(p->t->first_wrong, sizeof(p->t->first_wrong), fmt, ap);
                va_end(ap);
        }
}

static int connect_producer(struct producer *p, const char *path) {
        hbg_connect_options o = HBG_CONNECT_OPTIONS_INIT;
        o.socket_path = path;
        o.name = "soak";
        o.heap_bytes = 4u << 20;
        o.task_window = o.flag_window = WINDOW;
        int err = hbg_connect_opts(&p->c, &o);
        if (err < 0) {
                wrong(p, "hbg_connect: %s [%s]", hbg_strerror(err), hbg_last_error(NULL));
                return err;
        }
        hbg_tensor *all[] = { &p->a, &p->b, &p->s, &p->res, &p->h, &p->pred, &p->x, &p->one, &p->chain };
        for (size_t i = 0; i < sizeof(all) / sizeof(all[0]); i++)
                if ((err = hbg_tensor_alloc(p->c, N * sizeof(float), all[i])) < 0) {
                        wrong(p, "hbg_tensor_alloc: %s", hbg_strerror(err));
                        return err;
                }
        return 0;
}

static hbg_task kernel(const char *name, unsigned n_args, const hbg_tensor *t, const enum hbg_dir *dir) {
        hbg_task task = HBG_TASK_INIT(name);
        task.n_args = (uint8_t)n_args;
        for (unsigned i = 0; i < n_args; i++) {
                task.args[i].tensor = t[i];
                task.args[i].dir = dir[i];
        }
        return task;
}

static hbg_task fill(hbg_tensor t, float v) {
        hbg_task task = kernel("fill_f32", 1, &t, (enum hbg_dir[]){ HBG_OUT });
        task.n_scalars = 1;
        task.scalars[0] = hbg_f32(v);
        return task;
}

static hbg_task sum_into(hbg_tensor in, hbg_tensor res, unsigned slot) {
        hbg_tensor out;
        hbg_tensor_slice_f32(res, slot, slot + 1, &out);
        return kernel("reduce_sum_f32", 2, (hbg_tensor[]){ in, out }, (enum hbg_dir[]){ HBG_IN, HBG_OUT });
}

/* Add the tasks, submit: the graph's number, or -1 (counted wrong). */
static int64_t submit(struct producer *p, const hbg_task *tasks, size_t n, const char *kind) {
        int err = hbg_graph_add_n(p->c, tasks, n, NULL);
        uint64_t g;
        if (err == 0)
                err = hbg_graph_submit(p->c, &g);
        if (err < 0) {
                wrong(p, "%s: add/submit: %s [%s]", kind, hbg_strerror(err), hbg_last_error(p->c));
                return -1;
        }
        atomic_fetch_add(&p->t->submitted, 1);
        return (int64_t)g;
}

/* Wait for graph g: its status matches `expect` (0 or the expected
 * error) and, when it succeeded, check() holds. */
static void settle(struct producer *p, int64_t g, int expect, bool (*check)(struct producer *, unsigned),
                   unsigned round, const char *kind) {
        if (g < 0)
                return;
        int err = hbg_graph_wait(p->c, (uint64_t)g, WAIT_MS);
        if (err != expect) {
                wrong(p, "%s graph %" PRId64 " (round %u): %s, expected %s [%s]", kind, g, round, hbg_strerror(err),
                      expect ? hbg_strerror(expect) : "success", hbg_last_error(p->c));
                return;
        }
        if (err == 0 && !check(p, round)) {
                wrong(p, "%s graph %" PRId64 " (round %u): wrong values", kind, g, round);
                return;
        }
        atomic_fetch_add(err ? &p->t->failed_expected : &p->t->right, 1);
}

static float *data(struct producer *p, hbg_tensor t) {
        return hbg_tensor_data(p->c, t);
}

static bool check_kernels(struct producer *p, unsigned round) {
        return data(p, p->res)[0] == 2.0f * (float)(p->k + round % 5) * N;
}

static bool check_host(struct producer *p, unsigned round) {
        unsigned base = round % 100;
        return data(p, p->res)[1] == 3.0f * (float)(N * base + N * (N - 1) / 2);
}

static bool check_predicate(struct producer *p, unsigned round) {
        return data(p, p->res)[2] == (round % 2 ? 7.0f * N : 0.0f);
}

static bool check_stream(struct producer *p, unsigned round) {
        (void)round;
        const float *v = data(p, p->chain);
        for (unsigned i = 0; i < N; i++)
                if (v[i] != (float)(STREAM_TASKS - 2))
                        return false;
        return true;
}

static void one_round(struct producer *p, unsigned round) {
        /* Sentinels: a graph that "succeeds" without writing is caught. */
        for (unsigned i = 0; i < 3; i++)
                data(p, p->res)[i] = -1.0f;
        data(p, p->chain)[0] = -1.0f;

        hbg_task kt[5] = {
                fill(p->a, (float)p->k),
                fill(p->b, (float)(round % 5)),
                kernel("add_f32", 3, (hbg_tensor[]){ p->a, p->b, p->s },
                       (enum hbg_dir[]){ HBG_IN, HBG_IN, HBG_OUT }),
                kernel("scale_f32", 1, &p->s, (enum hbg_dir[]){ HBG_INOUT }),
                sum_into(p->s, p->res, 0),
        };
        kt[3].n_scalars = 1;
        kt[3].scalars[0] = hbg_f32(2.0f);
        kt[2].blocks = 2;
        int64_t gk = submit(p, kt, 5, "kernels");

        static struct host_arg ha;
        ha = (struct host_arg){ data(p, p->h), round % 100, round % 7 == 3 };
        hbg_task ht[3] = { HBG_TASK_INIT(NULL), kernel("scale_f32", 1, &p->h, (enum hbg_dir[]){ HBG_INOUT }),
                           sum_into(p->h, p->res, 1) };
        ht[0].host_fn = host_write;
        ht[0].host_userdata = &ha;
        ht[0].host_writes = &p->h;
        ht[0].n_host_writes = 1;
        ht[1].n_scalars = 1;
        ht[1].scalars[0] = hbg_f32(3.0f);
        int64_t gh = submit(p, ht, 3, "host");

        data(p, p->pred)[0] = round % 2 ? 1.0f : 0.0f;
        hbg_task pt[3] = { fill(p->x, 0.0f), fill(p->x, 7.0f), sum_into(p->x, p->res, 2) };
        pt[1].has_predicate = 1;
        hbg_tensor_slice_f32(p->pred, 0, 1, &pt[1].predicate);
        int64_t gp = submit(p, pt, 3, "predicate");

        /* chain = 0, then STREAM_TASKS - 2 times chain += one. */
        int64_t gs = -1;
        hbg_task st = fill(p->one, 1.0f);
        int err = hbg_graph_add(p->c, &st, NULL);
        st = fill(p->chain, 0.0f);
        if (err == 0)
                err = hbg_graph_add(p->c, &st, NULL);
        st = kernel("add_f32", 3, (hbg_tensor[]){ p->chain, p->one, p->chain },
                    (enum hbg_dir[]){ HBG_IN, HBG_IN, HBG_OUT });
        for (unsigned i = 2; err == 0 && i < STREAM_TASKS; i++)
                err = hbg_graph_add(p->c, &st, NULL);
        uint64_t g;
        if (err == 0 && (err = hbg_graph_submit(p->c, &g)) == 0) {
                atomic_fetch_add(&p->t->submitted, 1);
                gs = (int64_t)g;
        }
        if (err < 0)
                wrong(p, "streaming: add/submit: %s [%s]", hbg_strerror(err), hbg_last_error(p->c));

        settle(p, gk, 0, check_kernels, round, "kernels");
        settle(p, gh, ha.fail ? EXPECTED_FAILURE : 0, check_host, round, "host");
        settle(p, gp, 0, check_predicate, round, "predicate");
        settle(p, gs, 0, check_stream, round, "streaming");
}

static int producer_main(struct tally *t, unsigned k, const char *path, long long end_ms) {
        struct producer p = { .t = t, .k = k };
        for (unsigned round = 0; daemon_now_ms() < end_ms; round++) {
                if (round % RECONNECT_ROUNDS == 0) {
                        hbg_disconnect(p.c);
                        p.c = NULL;
                        if (connect_producer(&p, path) < 0)
                                return 1;
                }
                one_round(&p, round);
                if (atomic_load(&t->wrong))
                        return 1;
        }
        hbg_disconnect(p.c);
        return 0;
}

/* ------------------------------------------------------------ samples */

struct sample {
        double t;
        int fds;
        long rss, anon;
        uint64_t submitted, done, failed_expected, wrong;
};

struct window {
        int fds;
        long rss;
};

/* Maxima over samples with t in [from, to). */
static struct window window_max(const struct sample *s, size_t n, double from, double to) {
        struct window w = { -1, -1 };
        for (size_t i = 0; i < n; i++)
                if (s[i].t >= from && s[i].t < to) {
                        w.fds = s[i].fds > w.fds ? s[i].fds : w.fds;
                        w.rss = s[i].rss > w.rss ? s[i].rss : w.rss;
                }
        return w;
}

static int plot(const char *out) {
        char script[4096];
        snprintf(script, sizeof(script),
                 "set terminal pngcairo size 1200,800 noenhanced\n"
                 "set output '%s/soak.png'\n"
                 "set datafile separator ','\n"
                 "set key top left\n"
                 "set multiplot layout 2,1 title 'hbgd soak'\n"
                 "set xlabel 'time (s)'\n"
                 "set ylabel 'fds'\n"
                 "set y2label 'MiB'\n"
                 "set ytics nomirror\n"
                 "set y2tics\n"
                 "set yrange [0:*]\n"
                 "set y2range [0:*]\n"
                 "plot '%s/soak.csv' using 1:2 with lines title 'fds', "
                 "'' using 1:($3/1024) axes x1y2 with lines title 'RSS (MiB)', "
                 "'' using 1:($4/1024) axes x1y2 with lines title 'RssAnon (MiB)'\n"
                 "unset y2label\n"
                 "unset y2tics\n"
                 "set ylabel 'graphs'\n"
                 "plot '%s/soak.csv' using 1:5 with lines title 'submitted', "
                 "'' using 1:6 with lines title 'accounted for', "
                 "'' using 1:7 with lines title 'failed as expected', "
                 "'' using 1:8 with lines title 'wrong'\n"
                 "unset multiplot\n",
                 out, out, out);
        FILE *g = popen("gnuplot", "w");
        if (!g)
                return -errno;
        fputs(script, g);
        int st = pclose(g);
        return st == 0 ? 0 : -EIO;
}

/* ------------------------------------------------------------ main */

static long env_long(const char *name, long dflt, long lo, long hi) {
        const char *s = getenv(name);
        char *end;
        long v = s && *s ? strtol(s, &end, 10) : dflt;
        if (s && *s && (*end || v < lo || v > hi)) {
                fprintf(stderr, "soak: %s=%s: expected %ld..%ld\n", name, s, lo, hi);
                exit(2);
        }
        return v;
}

int main(int argc, char **argv) {
        const char *out = "build/soak";
        for (int i = 1; i < argc; i++) {
                if (strcmp(argv[i], "--out") == 0 && i + 1 < argc) {
                        out = argv[++i];
                } else {
                        fprintf(stderr, "usage: %s [--out DIR]  (SOAK_SECONDS, SOAK_PRODUCERS)\n", argv[0]);
                        return 2;
                }
        }
        long seconds = env_long("SOAK_SECONDS", 600, 10, 7 * 86400);
        unsigned producers = (unsigned)env_long("SOAK_PRODUCERS", 8, 1, MAX_PRODUCERS);
        signal(SIGPIPE, SIG_IGN);
        if (mkdir(out, 0755) < 0 && errno != EEXIST) {
                fprintf(stderr, "soak: mkdir %s: %s\n", out, strerror(errno));
                return 1;
        }
        char csv_path[512];
        snprintf(csv_path, sizeof(csv_path), "%s/soak.csv", out);
        FILE *csv = fopen(csv_path, "w");
        if (!csv) {
                fprintf(stderr, "soak: %s: %s\n", csv_path, strerror(errno));
                return 1;
        }
        if (daemon_util_init() < 0)
                return 1;
        struct hbgd_proc *d = NULL;
        int err = daemon_start(&d, NULL, NULL);
        if (err < 0) {
                fprintf(stderr, "soak: hbgd did not start: %s\n", strerror(-err));
                return 1;
        }
        struct tally *tallies = mmap(NULL, sizeof(struct tally) * producers, PROT_READ | PROT_WRITE,
                                     MAP_SHARED | MAP_ANONYMOUS, -1, 0);
        if (tallies == MAP_FAILED) {
                fprintf(stderr, "soak: mmap: %s\n", strerror(errno));
                return 1;
        }
        fprintf(stderr, "soak: hbgd pid %d, %u producers for %ld s; %s\n", (int)d->pid, producers, seconds,
                csv_path);

        long long start = daemon_now_ms(), end = start + seconds * 1000;
        pid_t pids[MAX_PRODUCERS];
        for (unsigned i = 0; i < producers; i++) {
                pids[i] = fork();
                if (pids[i] < 0) {
                        fprintf(stderr, "soak: fork: %s\n", strerror(errno));
                        return 1;
                }
                if (pids[i] == 0) {
                        prctl(PR_SET_PDEATHSIG, SIGKILL);
                        _exit(producer_main(&tallies[i], i + 1, d->socket_path, end));
                }
        }

        size_t cap = (size_t)seconds + 256, n = 0;
        struct sample *s = calloc(cap, sizeof(*s));
        fprintf(csv, "time_s,fds,rss_kib,anon_kib,graphs_submitted,graphs_done,graphs_failed_expected,"
                "graphs_wrong\n");
        unsigned running = producers;
        int statuses[MAX_PRODUCERS] = { 0 };
        bool failed = false;
        for (long long next = start + 1000; running > 0 && n < cap; next += 1000) {
                long long left = next - daemon_now_ms();
                if (left > 0)
                        usleep((useconds_t)left * 1000);
                for (unsigned i = 0; i < producers; i++) {
                        int st;
                        if (pids[i] > 0 && waitpid(pids[i], &st, WNOHANG) == pids[i]) {
                                statuses[i] = st;
                                pids[i] = 0;
                                running--;
                        }
                }
                if (daemon_wait_exit(d, 0) == 0) {
                        fprintf(stderr, "soak: hbgd died (wait status 0x%x)\n", (unsigned)d->wstatus);
                        daemon_dump_log(d);
                        return 1;
                }
                struct sample *x = &s[n++];
                x->t = (double)(daemon_now_ms() - start) / 1000.0;
                x->fds = daemon_fd_count(d->pid);
                x->rss = daemon_status_kib(d->pid, "VmRSS");
                x->anon = daemon_status_kib(d->pid, "RssAnon");
                for (unsigned i = 0; i < producers; i++) {
                        x->submitted += atomic_load(&tallies[i].submitted);
                        x->done += atomic_load(&tallies[i].right) + atomic_load(&tallies[i].failed_expected);
                        x->failed_expected += atomic_load(&tallies[i].failed_expected);
                        x->wrong += atomic_load(&tallies[i].wrong);
                }
                fprintf(csv, "%.1f,%d,%ld,%ld,%" PRIu64 ",%" PRIu64 ",%" PRIu64 ",%" PRIu64 "\n", x->t, x->fds,
                        x->rss, x->anon, x->submitted, x->done, x->failed_expected, x->wrong);
                fflush(csv);
                if (n % 30 == 0)
                        fprintf(stderr, "soak: %4.0f s: %" PRIu64 " graphs done, hbgd %d fds, %ld KiB\n", x->t,
                                x->done, x->fds, x->rss);
                if (x->t > (double)seconds + 120) {
                        fprintf(stderr, "soak: producers still running 120 s after the end\n");
                        failed = true;
                        break;
                }
        }
        fclose(csv);
        for (unsigned i = 0; i < producers; i++)
                if (pids[i] > 0) {
                        kill(pids[i], SIGKILL);
                        waitpid(pids[i], &statuses[i], 0);
                        statuses[i] = -1;
                }

        /* Every graph accounted for. */
        uint64_t submitted = 0, right = 0, expected = 0, bad = 0;
        for (unsigned i = 0; i < producers; i++) {
                struct tally *t = &tallies[i];
                uint64_t lost = t->submitted - t->right - t->failed_expected - t->wrong;
                submitted += t->submitted;
                right += t->right;
                expected += t->failed_expected;
                bad += t->wrong;
                if (t->wrong || lost || !(WIFEXITED(statuses[i]) && WEXITSTATUS(statuses[i]) == 0)) {
                        fprintf(stderr, "soak: producer %u: %" PRIu64 " submitted, %" PRIu64 " wrong, %" PRIu64
                                " lost, exit status 0x%x%s%s\n", i + 1, t->submitted, t->wrong, lost,
                                (unsigned)statuses[i], t->first_wrong[0] ? ": " : "", t->first_wrong);
                        failed = true;
                }
        }
        fprintf(stderr, "soak: %" PRIu64 " graphs submitted: %" PRIu64 " right, %" PRIu64 " failed as expected, %"
                PRIu64 " wrong, %" PRIu64 " lost\n", submitted, right, expected, bad,
                submitted - right - expected - bad);

        /* Flat: the last window against the first one after the warm-up. */
        double span = (double)seconds / 5 < 60 ? (double)seconds / 5 : 60;
        struct window ref = window_max(s, n, span, 2 * span);
        struct window last = window_max(s, n, (double)seconds - span, (double)seconds + 1);
        long rss_margin = ref.rss / 10 > 16384 ? ref.rss / 10 : 16384;
        int fd_margin = 2 * (int)producers;
        fprintf(stderr, "soak: hbgd, max over [%.0f, %.0f) s / the last %.0f s: %d / %d fds (margin %d), %ld / %ld "
                "KiB RSS (margin %ld)\n", span, 2 * span, span, ref.fds, last.fds, fd_margin, ref.rss, last.rss,
                rss_margin);
        if (ref.fds < 0 || last.fds < 0) {
                fprintf(stderr, "soak: too few samples to judge flatness\n");
                failed = true;
        } else {
                if (last.fds > ref.fds + fd_margin) {
                        fprintf(stderr, "soak: hbgd's fds are not flat\n");
                        failed = true;
                }
                if (last.rss > ref.rss + rss_margin) {
                        fprintf(stderr, "soak: hbgd's RSS is not flat\n");
                        failed = true;
                }
        }

        int st = daemon_stop(d, 30000);
        if (!(WIFEXITED(st) && WEXITSTATUS(st) == 0)) {
                fprintf(stderr, "soak: hbgd did not exit 0 on SIGTERM (wait status 0x%x)\n", (unsigned)st);
                daemon_dump_log(d);
                failed = true;
        }
        daemon_destroy(d);
        daemon_util_cleanup();
        err = plot(out);
        if (err < 0)
                fprintf(stderr, "soak: no plot: gnuplot failed (make soak installs gnuplot-nox)\n");
        else
                fprintf(stderr, "soak: %s/soak.png\n", out);
        free(s);
        fprintf(stderr, "soak: %s\n", failed ? "FAILED" : "passed");
        return failed ? 1 : 0;
}
