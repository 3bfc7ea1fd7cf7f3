/* SPDX-License-Identifier: MIT */
/*
 * Suite "completion": what the completion protocol (shm/completion.h) costs
 * per task, measured as every completer runs it:
 *
 *     r = completer_publish_or_defer(c, id);
 *     if (r == 1)
 *             watermark_update(c, id);
 *     while (completer_retry_deferred(c, &d) == 1)
 *             watermark_update(c, d);
 *
 * There are no task bodies and no dependencies, so the figure is the
 * protocol alone: stamp store, frontier load, watermark walks and CAS, the
 * failsafe heap. One case per thread count x completion order:
 *
 *   - ids reach the threads in batches of CLAIM_BATCH positions through one
 *     shared claim counter, so one atomic RMW is amortised over 64
 *     completions instead of showing up in every one;
 *   - "inorder": position p completes id p, so a batch is ascending;
 *     "shuffled": position p completes a fixed random permutation of its
 *     block of SHUFFLE_BLOCK ids, so order is random but every id is within
 *     SHUFFLE_BLOCK of its in-order position;
 *   - the window invariant of the runtime (ids in flight lie in
 *     [WM, WM + D)) is enforced: a thread that gets that far ahead waits,
 *     and the waits are counted.
 *
 * The final watermark must equal N and every id must have been published
 * exactly once; otherwise the suite prints no numbers and exits 1.
 */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <sched.h>
#include <stdalign.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench/bench.h"
#include "bench/bench_util.h"
#include "shm/completion.h"
#include "shm/failsafe_heap.h"
#include "shm/geometry.h"
#include "shm/layout.h"
#include "common/clock.h"

#define SUITE "completion"

#define CLAIM_BATCH 64u
#define SHUFFLE_BLOCK 1024u
/* Distinct block permutations, used round-robin: enough that the pattern is
 * not one short loop the branch predictors could learn, few enough (16 KiB)
 * to stay in L1/L2 so that reading them costs next to nothing, as reading
 * nothing does for "inorder". */
#define SHUFFLE_PERMS 8u
#define SHUFFLE_SEED UINT64_C(0x6862672d62656e63) /* "hbg-benc": runs are reproducible */

/* Spinning is right while the thread we wait for runs on another core; once
 * it has clearly been preempted (4 threads on 2 cores, or valgrind running
 * one thread at a time), yielding is what lets it run. */
#define SPINS_BEFORE_YIELD 1024u

/* No watermark progress for this long means a completion was lost (the
 * HBG_UNSAFE_UNORDERED_FRONTIER build gets there in seconds): fail instead
 * of spinning for ever. Generous, because valgrind is slow. */
#define STALL_LIMIT_S 10u

#define DEFAULT_COMPLETIONS UINT64_C(4000000)
#define DEFAULT_REPEAT 5u
/* Keeps pos + CLAIM_BATCH * threads far from overflowing. */
#define MAX_COMPLETIONS (UINT64_C(1) << 48)
#define MAX_REPEAT 1000u
#define MAX_THREADS 1024u
#define MAX_LIST 16u

/* A batch lies inside one shuffle block, so the ids a thread still holds in
 * its batch are less than SHUFFLE_BLOCK apart. Since that is far below F
 * (and D), none of them can be the frontier while the thread is stuck on
 * another id of the same batch: this is what makes the waits below free of
 * deadlock (checked against the geometry at run time too). */
_Static_assert(SHUFFLE_BLOCK % CLAIM_BATCH == 0, "a batch must not straddle two shuffle blocks");
_Static_assert(SHUFFLE_BLOCK <= 65536, "block offsets are stored as uint16_t");

enum order { ORDER_INORDER, ORDER_SHUFFLED, N_ORDERS };
static const char *const order_names[N_ORDERS] = { "inorder", "shuffled" };

struct options {
        unsigned threads[MAX_LIST];
        unsigned n_threads;
        enum order orders[MAX_LIST];
        unsigned n_orders;
        uint64_t completions;
        unsigned repeat;
        const char *csv;
};

/* ------------------------------------------------------------ sequence */

/* Maps a claimed position to the id completed there. */
struct sequence {
        enum order order;
        uint64_t full_end;                          /* positions below: whole blocks */
        uint16_t perm[SHUFFLE_PERMS][SHUFFLE_BLOCK]; /* block k uses perm[k % PERMS] */
        uint16_t tail[SHUFFLE_BLOCK];               /* the last, partial block of N */
};

static inline uint64_t sequence_id(const struct sequence *s, uint64_t pos) {
        if (s->order == ORDER_INORDER)
                return pos;
        uint64_t base = pos & ~(uint64_t)(SHUFFLE_BLOCK - 1);
        uint64_t off = pos & (SHUFFLE_BLOCK - 1);
        if (base < s->full_end)
                return base + s->perm[(pos / SHUFFLE_BLOCK) % SHUFFLE_PERMS][off];
        return base + s->tail[off];
}

/* Fisher-Yates; the modulo bias of a 64-bit draw over <= 1024 is nil here. */
static void shuffle(uint16_t *a, uint32_t n, uint64_t *rng) {
        for (uint32_t i = 0; i < n; i++)
                a[i] = (uint16_t)i;
        for (uint32_t i = n; i > 1; i--) {
                uint32_t j = (uint32_t)(bench_splitmix64(rng) % i);
                uint16_t t = a[i - 1];
                a[i - 1] = a[j];
                a[j] = t;
        }
}

static void sequence_init(struct sequence *s, enum order order, uint64_t n) {
        uint64_t rng = SHUFFLE_SEED;

        s->order = order;
        s->full_end = n & ~(uint64_t)(SHUFFLE_BLOCK - 1);
        for (uint32_t k = 0; k < SHUFFLE_PERMS; k++)
                shuffle(s->perm[k], SHUFFLE_BLOCK, &rng);
        /* A partial last block gets its own permutation so that shuffled
         * runs never complete an id >= N. */
        shuffle(s->tail, (uint32_t)(n - s->full_end), &rng);
}

/* ------------------------------------------------------------ one run */

struct run {
        /* Owns its line: every thread RMWs it once per batch, and it must
         * not drag the read-mostly fields below along. */
        alignas(HBG_CACHE_LINE) _Atomic uint64_t next_pos;
        alignas(HBG_CACHE_LINE) const struct sequence *seq;
        uint64_t n;
        struct hbg_flag_window window;
        pthread_barrier_t start;
};

struct worker {
        /* First, and cache-line aligned by its own alignas: workers in one
         * array then never share a line, so completers do not false-share. */
        struct hbg_completer c;
        struct run *run;
        uint64_t window_waits;
        pthread_t tid;
};

static void backoff(unsigned spins) {
        if (spins < SPINS_BEFORE_YIELD)
                cpu_relax();
        else
                sched_yield();
}

/* The per-completion retry loop: publish every deferred id whose slot has
 * become free, smallest first, and walk the watermark for each. */
static inline void retry_deferred(struct hbg_completer *c) {
        uint64_t d;

        while (completer_retry_deferred(c, &d) == 1)
                watermark_update(c, d);
}

/*
 * id >= cached watermark + D. Out of line: in the common case the cached
 * copy is merely stale. Otherwise hold id back until the watermark moves,
 * publishing our own deferred ids meanwhile, since the frontier may be one
 * of them and then nobody else will move it.
 */
static __attribute__((noinline, cold)) void wait_for_window(struct worker *wk, uint64_t id) {
        const struct hbg_flag_window *w = wk->c.window;

        if (id < watermark_read(w) + w->task_window)
                return;
        wk->window_waits++;
        for (unsigned spins = 0;; spins++) {
                retry_deferred(&wk->c);
                if (id < watermark_read(w) + w->task_window)
                        return;
                backoff(spins);
        }
}

/*
 * The heap refused id (-ENOSPC; stats.heap_full counts it): keep it and
 * offer it again after publishing what the heap can. The runtime must not
 * wait here because it may hold work the frontier depends on (§6.2); this
 * benchmark has no dependencies, and the ids left in our batch are too
 * close to id to be the frontier (see the _Static_assert above), so the
 * only thing we could be holding back is the heap, which the loop drains.
 */
static __attribute__((noinline, cold)) int offer_again(struct worker *wk, uint64_t id) {
        int r;

        for (unsigned spins = 0; (r = completer_publish_or_defer(&wk->c, id)) < 0; spins++) {
                retry_deferred(&wk->c);
                backoff(spins);
        }
        return r;
}

static inline void complete_one(struct worker *wk, uint64_t id) {
        struct hbg_completer *c = &wk->c;

        /* Window invariant: ids in flight lie in [WM, WM + D). The cached
         * watermark is never above the real one, so passing this check
         * against it is enough. */
        if (id >= c->cached_watermark + c->window->task_window)
                wait_for_window(wk, id);

        int r = completer_publish_or_defer(c, id);
        if (r < 0)
                r = offer_again(wk, id);
        if (r == 1)
                watermark_update(c, id);
        retry_deferred(c);
}

static void *worker_main(void *arg) {
        struct worker *wk = arg;
        struct run *run = wk->run;
        const struct sequence *seq = run->seq;
        const uint64_t n = run->n;

        pthread_barrier_wait(&run->start);
        for (;;) {
                /* Relaxed: the counter only hands out positions, no data
                 * travels with it. */
                uint64_t pos = atomic_fetch_add_explicit(&run->next_pos, CLAIM_BATCH,
                                                         memory_order_relaxed);
                if (pos >= n)
                        break;
                uint64_t end = n - pos < CLAIM_BATCH ? n : pos + CLAIM_BATCH;
                for (; pos < end; pos++)
                        complete_one(wk, sequence_id(seq, pos));
        }
        /* Ids still deferred are ours alone to publish: the run ends when
         * the watermark has passed them, not when we run out of claims. */
        for (unsigned spins = 0;; spins++) {
                retry_deferred(&wk->c);
                if (failsafe_heap_len(&wk->c.heap) == 0)
                        break;
                backoff(spins);
        }
        return NULL;
}

/*
 * Join every worker. If the watermark stops moving, the workers spin on it
 * for ever and can be neither joined nor cancelled cleanly: say so and exit.
 * The timed join sleeps in the kernel like pthread_join and returns as soon
 * as the thread ends, so the measured time is unaffected.
 */
static void join_workers(struct worker *workers, unsigned threads, const struct hbg_flag_window *w,
                         uint64_t n, const char *case_name) {
        uint64_t last_wm = watermark_read(w);
        unsigned still_s = 0;

        for (unsigned i = 0; i < threads; i++) {
                for (;;) {
                        struct timespec deadline;

                        clock_gettime(CLOCK_REALTIME, &deadline); /* the clock timedjoin uses */
                        deadline.tv_sec += 1;
                        int e = pthread_timedjoin_np(workers[i].tid, NULL, &deadline);
                        if (e == 0)
                                break;
                        if (e != ETIMEDOUT) {
                                fprintf(stderr, "hbg-bench " SUITE ": pthread_join: %s\n",
                                        strerror(e));
                                exit(BENCH_EXIT_FAIL);
                        }
                        uint64_t wm = watermark_read(w);
                        if (wm != last_wm) {
                                last_wm = wm;
                                still_s = 0;
                        } else if (++still_s >= STALL_LIMIT_S) {
                                fprintf(stderr, "hbg-bench " SUITE ": %s: watermark stuck"
                                        " at %" PRIu64 " of %" PRIu64 " for %u s:"
                                        " a completion was lost\n",
                                        case_name, wm, n, STALL_LIMIT_S);
                                exit(BENCH_EXIT_FAIL);
                        }
                }
        }
}

/* What one run measured: time, and the completers' counters summed. */
struct sample {
        double ns_per_completion;
        uint64_t walks, advances, ids_advanced, cas_failures, deferred;
        uint64_t heap_full, heap_max, window_waits, published;
};

/* Returns 0, or -1 after printing why (setup failed or the result is wrong). */
static int run_once(const struct hbg_geometry *g, void *region, const struct sequence *seq,
                    uint64_t n, unsigned threads, const char *case_name, struct sample *ret) {
        struct run run;
        struct worker *workers;
        const char *err;
        int rc = 0;

        /* A fresh, zeroed region every run: the watermark restarts at 0 and
         * every flag holds its pre-first-lap stamp. */
        memset(region, 0, g->cpl_region_size);
        layout_cpl_region_init(region, g, 0);
        if (layout_cpl_region_check(region, g->cpl_region_size, &err) < 0) {
                fprintf(stderr, "hbg-bench " SUITE ": %s\n", err);
                return -1;
        }
        atomic_init(&run.next_pos, 0);
        run.seq = seq;
        run.n = n;
        flag_window_init(&run.window, g, region, 0);

        workers = aligned_alloc(HBG_CACHE_LINE, threads * sizeof(*workers));
        if (!workers) {
                fprintf(stderr, "hbg-bench " SUITE ": out of memory\n");
                return -1;
        }
        for (unsigned i = 0; i < threads; i++) {
                if (completer_init(&workers[i].c, &run.window, failsafe_capacity(g)) < 0) {
                        fprintf(stderr, "hbg-bench " SUITE ": out of memory for failsafe heaps\n");
                        for (unsigned j = 0; j < i; j++)
                                completer_destroy(&workers[j].c);
                        free(workers);
                        return -1;
                }
                workers[i].run = &run;
                workers[i].window_waits = 0;
        }

        pthread_barrier_init(&run.start, NULL, threads + 1);
        for (unsigned i = 0; i < threads; i++) {
                int e = pthread_create(&workers[i].tid, NULL, worker_main, &workers[i]);
                if (e) {
                        /* The threads already started wait on a barrier
                         * that can no longer open: nothing to unwind. */
                        fprintf(stderr, "hbg-bench " SUITE ": pthread_create: %s\n", strerror(e));
                        exit(BENCH_EXIT_FAIL);
                }
        }
        pthread_barrier_wait(&run.start);
        int64_t t0 = bench_now_ns();
        join_workers(workers, threads, &run.window, n, case_name);
        int64_t t1 = bench_now_ns();
        pthread_barrier_destroy(&run.start);

        *ret = (struct sample){
                .ns_per_completion = n ? (double)(t1 - t0) / (double)n : 0.0,
        };
        for (unsigned i = 0; i < threads; i++) {
                const struct hbg_completer_stats *s = &workers[i].c.stats;
                ret->walks += stat_get(&s->walks);
                ret->advances += stat_get(&s->advances);
                ret->ids_advanced += stat_get(&s->ids_advanced);
                ret->cas_failures += stat_get(&s->cas_failures);
                ret->deferred += stat_get(&s->deferred);
                ret->heap_full += stat_get(&s->heap_full);
                ret->published += stat_get(&s->published);
                if (stat_get(&s->heap_max) > ret->heap_max)
                        ret->heap_max = stat_get(&s->heap_max);
                ret->window_waits += workers[i].window_waits;
                completer_destroy(&workers[i].c);
        }
        free(workers);

        /* A benchmark that computed a wrong result must not print numbers. */
        uint64_t wm = watermark_read(&run.window);
        if (wm != n) {
                fprintf(stderr, "hbg-bench " SUITE ": %s: final watermark %" PRIu64
                        ", expected %" PRIu64 "\n", case_name, wm, n);
                rc = -1;
        }
        if (ret->published != n || ret->ids_advanced != n) {
                fprintf(stderr, "hbg-bench " SUITE ": %s: %" PRIu64 " stamps published and %"
                        PRIu64 " ids advanced over, expected %" PRIu64 " each\n",
                        case_name, ret->published, ret->ids_advanced, n);
                rc = -1;
        }
        return rc;
}

/* ------------------------------------------------------------ one case */

struct case_result {
        char name[32];
        unsigned threads;
        enum order order;
        double ns_median, ns_min;
        /* Mean per run over the repeats (single-threaded runs are
         * deterministic; threaded ones vary with scheduling). */
        uint64_t walks, advances, ids_advanced, cas_failures, deferred, window_waits;
        /* Worst run: a mean would round a rare non-zero away. */
        uint64_t heap_max, heap_full;
};

static int run_case(const struct options *o, const struct hbg_geometry *g, void *region,
                    struct sequence *seq, unsigned threads, enum order order,
                    struct case_result *res) {
        struct sample sum = { 0 }, s;
        double *ns = calloc(o->repeat, sizeof(*ns));

        if (!ns) {
                fprintf(stderr, "hbg-bench " SUITE ": out of memory\n");
                return -1;
        }
        *res = (struct case_result){ .threads = threads, .order = order };
        snprintf(res->name, sizeof(res->name), "t%u_%s", threads, order_names[order]);
        sequence_init(seq, order, o->completions);

        for (unsigned r = 0; r < o->repeat; r++) {
                if (run_once(g, region, seq, o->completions, threads, res->name, &s) < 0) {
                        free(ns);
                        return -1;
                }
                ns[r] = s.ns_per_completion;
                sum.walks += s.walks;
                sum.advances += s.advances;
                sum.ids_advanced += s.ids_advanced;
                sum.cas_failures += s.cas_failures;
                sum.deferred += s.deferred;
                sum.window_waits += s.window_waits;
                if (s.heap_max > res->heap_max)
                        res->heap_max = s.heap_max;
                if (s.heap_full > res->heap_full)
                        res->heap_full = s.heap_full;
        }

        bench_min_median(ns, o->repeat, &res->ns_min, &res->ns_median);
        res->walks = bench_mean_u64(sum.walks, o->repeat);
        res->advances = bench_mean_u64(sum.advances, o->repeat);
        res->ids_advanced = bench_mean_u64(sum.ids_advanced, o->repeat);
        res->cas_failures = bench_mean_u64(sum.cas_failures, o->repeat);
        res->deferred = bench_mean_u64(sum.deferred, o->repeat);
        res->window_waits = bench_mean_u64(sum.window_waits, o->repeat);
        free(ns);
        return 0;
}

/* ------------------------------------------------------------ output */

static void print_table(const struct options *o, const struct hbg_geometry *g,
                        const struct case_result *res, unsigned n_res) {
        printf("completion: %" PRIu64 " completions per run, %u repeat%s; D=%" PRIu64
               " F=%" PRIu64 ", failsafe heap %u ids per completer;"
               " claim batch %u, shuffle block %u\n\n",
               o->completions, o->repeat, o->repeat == 1 ? "" : "s", g->task_window,
               g->flag_window, failsafe_capacity(g), CLAIM_BATCH, SHUFFLE_BLOCK);
        printf("%-14s %7s %-8s %11s %11s %10s %10s %12s %9s %9s %9s %9s %9s\n", "case",
               "threads", "order", "ns/cpl med", "ns/cpl min", "walks", "advances",
               "ids_advanced", "cas_fail", "deferred", "heap_max", "win_waits", "heap_full");
        for (unsigned i = 0; i < n_res; i++) {
                const struct case_result *r = &res[i];
                printf("%-14s %7u %-8s %11.2f %11.2f %10" PRIu64 " %10" PRIu64 " %12" PRIu64
                       " %9" PRIu64 " %9" PRIu64 " %9" PRIu64 " %9" PRIu64 " %9" PRIu64 "\n",
                       r->name, r->threads, order_names[r->order], r->ns_median, r->ns_min,
                       r->walks, r->advances, r->ids_advanced, r->cas_failures, r->deferred,
                       r->heap_max, r->window_waits, r->heap_full);
        }
        printf("\nns/cpl: CLOCK_MONOTONIC from start-barrier release to the last join, / N;"
               " median and min over the repeats.\n"
               "counters: mean per run, summed over the completers; heap_max and heap_full:"
               " worst run.\n"
               "heap_max: deepest failsafe heap of any completer. win_waits: ids held back"
               " because id >= watermark + D.\n"
               "heap_full: -ENOSPC refusals (the id is kept and offered again); non-zero"
               " contradicts the bound\n"
               "           that failsafe_capacity() = D claims.\n");
}

/* Append one row per case; the header only when the file is new or empty
 * (bench_csv_open), so several invocations can share one file. */
static int write_csv(const struct options *o, const struct case_result *res, unsigned n_res) {
        FILE *f = bench_csv_open(SUITE, o->csv,
                                 "suite,case,threads,order,completions,repeat,"
                                 "ns_per_completion_median,ns_per_completion_min,walks,advances,"
                                 "ids_advanced,cas_failures,deferred\n");

        if (!f)
                return -1;
        for (unsigned i = 0; i < n_res; i++) {
                const struct case_result *r = &res[i];
                fprintf(f, SUITE ",%s,%u,%s,%" PRIu64 ",%u,%.3f,%.3f,%" PRIu64 ",%" PRIu64
                        ",%" PRIu64 ",%" PRIu64 ",%" PRIu64 "\n",
                        r->name, r->threads, order_names[r->order], o->completions, o->repeat,
                        r->ns_median, r->ns_min, r->walks, r->advances, r->ids_advanced,
                        r->cas_failures, r->deferred);
        }
        return bench_csv_close(SUITE, f, o->csv);
}

/* ------------------------------------------------------------ options */

void bench_completion_usage(FILE *out) {
        fprintf(out,
                "usage: hbg-bench completion [options]\n"
                "\n"
                "ns per task completion of the shared-memory completion protocol: publish or\n"
                "defer, watermark walk, retry of deferred ids. No task bodies, no dependencies;\n"
                "one case per thread count x order. Geometry: the defaults (printed above the table).\n"
                "\n"
                "  --threads LIST     thread counts, comma-separated (default 1,4; 1..%u)\n"
                "  --order LIST       inorder,shuffled (default both)\n"
                "                       inorder:  each thread completes its claimed batch of\n"
                "                                 %u ids in ascending order\n"
                "                       shuffled: ids complete in a fixed random permutation\n"
                "                                 of each block of %u ids\n"
                "  --completions N    completions per run (default %" PRIu64 "); 0 does the\n"
                "                     setup only, to subtract it from instruction counts\n"
                "  --repeat R         runs per case (default %u): median and min are reported\n"
                "  --csv FILE         append one row per case to FILE (header if FILE is new)\n"
                "  --help             this text\n"
                "\n"
                "Exit status: 0, 1 if a run failed or its final watermark was wrong (then no\n"
                "numbers are printed), 2 on a usage error.\n",
                MAX_THREADS, CLAIM_BATCH, SHUFFLE_BLOCK, DEFAULT_COMPLETIONS, DEFAULT_REPEAT);
}

/* The options that take a value. */
static const char *const option_names[] = {
        "--threads", "--order", "--completions", "--repeat", "--csv", NULL,
};

/* Returns 0 to run, 1 after --help, -1 after printing a usage error. */
static int parse_options(int argc, char **argv, struct options *o) {
        *o = (struct options){
                .threads = { 1, 4 },
                .n_threads = 2,
                .orders = { ORDER_INORDER, ORDER_SHUFFLED },
                .n_orders = 2,
                .completions = DEFAULT_COMPLETIONS,
                .repeat = DEFAULT_REPEAT,
        };

        for (int i = 1; i < argc; i++) {
                const char *arg = argv[i];
                const char *name, *value;

                if (strcmp(arg, "--help") == 0 || strcmp(arg, "-h") == 0) {
                        bench_completion_usage(stdout);
                        return 1;
                }
                if (bench_option(SUITE, argc, argv, &i, option_names, &name, &value) < 0)
                        return -1;
                if (strcmp(name, "--threads") == 0) {
                        if (!bench_option_uint_list(SUITE, name, value, MAX_THREADS, o->threads,
                                                    &o->n_threads, MAX_LIST))
                                return -1;
                } else if (strcmp(name, "--order") == 0) {
                        unsigned k[MAX_LIST];

                        if (!bench_option_name_list(SUITE, name, value, order_names, N_ORDERS, k,
                                                    &o->n_orders, MAX_LIST))
                                return -1;
                        for (unsigned j = 0; j < o->n_orders; j++)
                                o->orders[j] = (enum order)k[j];
                } else if (strcmp(name, "--completions") == 0) {
                        if (!bench_option_u64(SUITE, name, value, 0, MAX_COMPLETIONS,
                                              &o->completions))
                                return -1;
                } else if (!bench_option_common(SUITE, name, value, MAX_REPEAT, &o->repeat,
                                                &o->csv)) {
                        return -1;
                }
        }
        return 0;
}

/* ------------------------------------------------------------ main */

int bench_completion_main(int argc, char **argv) {
        struct options o;
        struct hbg_geometry_request req;
        struct hbg_geometry g;
        const char *err;
        struct case_result res[MAX_LIST * MAX_LIST];
        unsigned n_res = 0;
        int rc = BENCH_EXIT_FAIL;

        int r = parse_options(argc, argv, &o);
        if (r != 0)
                return r > 0 ? BENCH_EXIT_OK : BENCH_EXIT_USAGE;

        geometry_request_default(&req);
        if (geometry_init(&g, &req, &err) < 0) {
                fprintf(stderr, "hbg-bench " SUITE ": default geometry rejected: %s\n", err);
                return BENCH_EXIT_FAIL;
        }
        /* The deadlock-freedom argument of the waits needs the ids of one
         * batch to lie well inside the flag window. */
        if (g.flag_window < 2 * SHUFFLE_BLOCK) {
                fprintf(stderr, "hbg-bench " SUITE ": flag window %" PRIu64 " too small for"
                        " shuffle block %u\n", g.flag_window, SHUFFLE_BLOCK);
                return BENCH_EXIT_FAIL;
        }

        /* aligned_alloc wants a size that is a multiple of the alignment. */
        size_t region_size = (g.cpl_region_size + HBG_CACHE_LINE - 1) &
                             ~(size_t)(HBG_CACHE_LINE - 1);
        void *region = aligned_alloc(HBG_CACHE_LINE, region_size);
        struct sequence *seq = malloc(sizeof(*seq));
        if (!region || !seq) {
                fprintf(stderr, "hbg-bench " SUITE ": out of memory\n");
                goto out;
        }

        for (unsigned t = 0; t < o.n_threads; t++)
                for (unsigned k = 0; k < o.n_orders; k++)
                        if (run_case(&o, &g, region, seq, o.threads[t], o.orders[k],
                                     &res[n_res++]) < 0)
                                goto out;

        print_table(&o, &g, res, n_res);
        if (o.csv && write_csv(&o, res, n_res) < 0)
                goto out;
        rc = BENCH_EXIT_OK;
out:
        free(seq);
        free(region);
        return rc;
}
