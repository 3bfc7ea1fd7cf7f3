/* SPDX-License-Identifier: MIT */
/*
 * Differential test of the engine: random task graphs run by the engine are
 * compared bit-for-bit with a sequential reference executor.
 *
 * The generator (seeded, deterministic) builds graphs over a pool of shared
 * f32 tensors in the ring's heap: kernel tasks of every shape (AIC, AIV,
 * MIX with mixed lanes, 1..16 blocks) whose arguments are element slices of
 * the pool, dummies, host-inline tasks, external tasks (the client adds 1.0f
 * to a slice the task owns) and predicated tasks (their predicate is a flags
 * tensor written by fill tasks). Dependencies are derived from the tensor
 * regions at a 16-element chunk granularity (RAW, WAR, WAW), fan-in is kept
 * at 8 or less by inserting join dummies, and a few random extra fanins are
 * added. Each task is executed by the reference as it is generated, in id
 * order, with parts = 1 (the kernels are split-invariant), on a private copy
 * of the heap; the engine runs the same tasks concurrently. After every batch
 * of graphs the two heaps must be identical and every graph must succeed.
 *
 * Runs: many small graphs per engine configuration (1, 2, 4, 8 threads; a
 * flag window F much smaller than the task window D, which forces the
 * failsafe heap, and F = D, which never needs it) and one graph of 100,000
 * tasks streamed through D = 4096.
 *
 * HBG_TEST_SCALE=N divides the amount of work (default 1; 4 under ASan and -O3 -DNDEBUG, 8 under TSan: HBG_TEST_BUILD_SCALE);
 * HBG_TEST_SEED=S changes the seeds (they are printed with every failure).
 */
#include <check.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "daemon/engine/engine.h"
#include "daemon/engine/engine_stats.h"
#include "daemon/engine/kernels.h"
#include "tests/engine/harness.h"
#include "tests/test_util.h"
#include "common/clock.h"
#include "tests/check_main.h"


#define NONE UINT64_MAX
#define CHUNK_BYTES 64u     /* 16 f32 elements per tracked chunk */
#define MAX_DEPS 8u         /* the generator's own fan-in limit */
#define READERS_MAX 8u      /* readers kept per chunk before joining them */
#define DEPS_CAP 4096u
#define N_POOL 8u
#define N_FLAGS 32u
#define GATE_FOLLOWERS 600u
#define WHAT_EXTERNAL 100u
#define WAIT_MS 300000

/* ------------------------------------------------------------ PRNG */

/* struct rng and rng_*(): tests/test_util.h */

/* ------------------------------------------------------------ configuration */

struct run_cfg {
        const char *name;
        unsigned threads, clusters;
        uint32_t d, f;
        unsigned classify_batch;
        uint64_t spin_before_park_ns;
        uint32_t mailbox;
        uint64_t first_id;
        unsigned graphs;     /* small graphs at scale 1 */
        uint32_t big_graph;  /* tasks of one streamed graph at scale 1 (0: none) */
};

#define SPIN_DEFAULT 50000u
#define NEAR_WRAP ((UINT64_C(1) << 32) - 1500u)

static const struct run_cfg runs[] = {
        { "t1-tinyF", 1, 4, 4096, 256, 64, SPIN_DEFAULT, 1024, 0, 300, 0 },
        { "t2-tinyF", 2, 4, 4096, 256, 1, SPIN_DEFAULT, 16, NEAR_WRAP, 300, 0 },
        { "t4-tinyF", 4, 4, 4096, 256, 64, 0, 1024, 12345, 300, 0 },
        { "t8-tinyF", 8, 4, 4096, 256, 7, SPIN_DEFAULT, 16, 0, 300, 0 },
        { "t1-largeF", 1, 4, 16384, 16384, 64, 0, 1024, NEAR_WRAP, 300, 0 },
        { "t2-largeF", 2, 4, 16384, 16384, 64, SPIN_DEFAULT, 1024, 0, 300, 0 },
        { "t4-largeF", 4, 4, 16384, 16384, 3, SPIN_DEFAULT, 16, 777, 300, 0 },
        { "t8-largeF", 8, 4, 16384, 16384, 64, SPIN_DEFAULT, 1024, 0, 300, 0 },
        { "t8-c2-tinyF", 8, 2, 4096, 256, 64, 0, 1024, NEAR_WRAP, 300, 0 },
        { "stream-100k", 4, 4, 4096, 256, 64, SPIN_DEFAULT, 64, 0, 20, 100000 },
};
#define N_RUNS (sizeof(runs) / sizeof(runs[0]))

static unsigned test_scale(void) {
        return test_scale_or(HBG_TEST_BUILD_SCALE);
}

static uint64_t test_seed(unsigned run) {
        const char *s = getenv("HBG_TEST_SEED");
        uint64_t base = s ? strtoull(s, NULL, 0) : UINT64_C(0x5eed0f4b6d1ff);
        return base ^ ((uint64_t)(run + 1) * UINT64_C(0x9e3779b97f4a7c15));
}

/* ------------------------------------------------------------ the world */

struct tensor {
        uint64_t off;   /* heap bytes */
        uint32_t n;     /* elements */
};

struct chunk {
        uint64_t writer;
        uint32_t n_readers;
        uint64_t readers[READERS_MAX];
};

struct ext_entry {
        uint64_t id;
        uint64_t off;
        uint32_t n;
        uint32_t calls;
};

struct access {
        uint64_t off, bytes;
        bool write;
};

/* One generated task before it gets its id. */
struct gen {
        struct harness_task t;
        struct access acc[HBG_MAX_TENSOR_ARGS + 2];
        unsigned n_acc;
        bool external;
        uint64_t ext_off;
        uint32_t ext_n;
        bool flag_fill;
        uint32_t flag_lo, flag_hi;
        uint64_t pred_writer;
};

struct world {
        const struct run_cfg *cfg;
        const char *run_name;
        char run_name_buf[48];
        uint64_t seed;
        struct rng rng;
        struct hbg_engine *e;
        struct harness_ring h;

        struct tensor pool[N_POOL];
        struct tensor flags;
        uint64_t pool_bytes;
        uint8_t *ref;             /* the reference heap, [0, pool_bytes) */
        uint64_t *ref_writer;     /* per element: last task that wrote it (reference) */
        uint16_t *ref_what;       /* ... its kernel id, or WHAT_EXTERNAL */

        uint32_t n_chunks;
        struct chunk *chunks;
        uint64_t flag_writer[N_FLAGS];
        uint64_t batch_first;     /* tracked dependencies start here */

        struct ext_entry *ext;    /* task_window entries, by id & (D - 1) */
        char ext_error[256];
        uint64_t ext_calls;

        uint64_t gate_id;
        uint64_t gate_target;     /* ring completions the gate waits for */
        bool gate_timed_out;

        uint64_t *deps;           /* scratch, DEPS_CAP */

        /* counters */
        uint64_t tasks, graphs, joins, kernels, mixed, dummies, inlines, externals,
                predicated, pred_false;
};

static void die_oom(void *p) {
        if (!p) {
                fprintf(stderr, "out of memory\n");
                abort();
        }
}

static const char *what_name(uint16_t what) {
        if (what == WHAT_EXTERNAL)
                return "external +1";
        const struct kernel_info *k = kernel_lookup(what);
        return k ? k->sig->name : "?";
}

/* ------------------------------------------------------------ dependencies */

static void dep_add(struct world *w, unsigned *n, uint64_t id) {
        if (id == NONE || id < w->batch_first)
                return;
        for (unsigned i = 0; i < *n; i++)
                if (w->deps[i] == id)
                        return;
        HOT_ASSERT_MSG(*n < DEPS_CAP, "generator: dependency scratch overflow");
        w->deps[(*n)++] = id;
}

static uint64_t emit_join(struct world *w, const uint64_t *fanins, unsigned n) {
        struct harness_task t = { .block_num = 1, .n_fanins = (uint8_t)n };
        memcpy(t.fanins, fanins, n * sizeof(fanins[0]));
        w->joins++;
        w->tasks++;
        return harness_add_task(&w->h, &t);
}

/* Join dependency sets larger than MAX_DEPS through dummies of up to 8. */
static unsigned reduce_deps(struct world *w, unsigned n) {
        while (n > MAX_DEPS) {
                unsigned out = 0;
                for (unsigned i = 0; i < n; i += MAX_DEPS) {
                        unsigned g = n - i < MAX_DEPS ? n - i : MAX_DEPS;
                        if (g == 1)
                                w->deps[out++] = w->deps[i];
                        else
                                w->deps[out++] = emit_join(w, &w->deps[i], g);
                }
                n = out;
        }
        return n;
}

static void chunk_range(const struct access *a, uint32_t *c0, uint32_t *c1) {
        *c0 = (uint32_t)(a->off / CHUNK_BYTES);
        *c1 = (uint32_t)((a->off + a->bytes - 1) / CHUNK_BYTES);
}

static unsigned collect_deps(struct world *w, const struct gen *g) {
        unsigned n = 0;
        for (unsigned i = 0; i < g->n_acc; i++) {
                uint32_t c0, c1;
                chunk_range(&g->acc[i], &c0, &c1);
                for (uint32_t c = c0; c <= c1; c++) {
                        struct chunk *ch = &w->chunks[c];
                        dep_add(w, &n, ch->writer);
                        if (g->acc[i].write)
                                for (uint32_t k = 0; k < ch->n_readers; k++)
                                        dep_add(w, &n, ch->readers[k]);
                }
        }
        dep_add(w, &n, g->pred_writer);
        return n;
}

static void track(struct world *w, const struct gen *g, uint64_t id) {
        /* Reads first, then writes (a chunk read and written by the same
         * task through different elements ends with the task as writer). */
        for (unsigned i = 0; i < g->n_acc; i++) {
                if (g->acc[i].write)
                        continue;
                uint32_t c0, c1;
                chunk_range(&g->acc[i], &c0, &c1);
                for (uint32_t c = c0; c <= c1; c++) {
                        struct chunk *ch = &w->chunks[c];
                        if (ch->n_readers && ch->readers[ch->n_readers - 1] == id)
                                continue;
                        if (ch->n_readers == READERS_MAX) {
                                ch->readers[0] = emit_join(w, ch->readers, READERS_MAX);
                                ch->n_readers = 1;
                        }
                        ch->readers[ch->n_readers++] = id;
                }
        }
        for (unsigned i = 0; i < g->n_acc; i++) {
                if (!g->acc[i].write)
                        continue;
                uint32_t c0, c1;
                chunk_range(&g->acc[i], &c0, &c1);
                for (uint32_t c = c0; c <= c1; c++) {
                        w->chunks[c].writer = id;
                        w->chunks[c].n_readers = 0;
                }
        }
        if (g->flag_fill)
                for (uint32_t e = g->flag_lo; e < g->flag_hi; e++)
                        w->flag_writer[e] = id;
}

static void tracker_reset(struct world *w) {
        for (uint32_t c = 0; c < w->n_chunks; c++) {
                w->chunks[c].writer = NONE;
                w->chunks[c].n_readers = 0;
        }
        for (uint32_t e = 0; e < N_FLAGS; e++)
                w->flag_writer[e] = NONE;
        w->batch_first = w->h.prod.next_id;
}

/* ------------------------------------------------------------ slices */

static bool overlaps(uint64_t a, uint64_t an, uint64_t b, uint64_t bn) {
        return a < b + bn && b < a + an;
}

/* A slice of [minlen, maxlen] elements of a random pool tensor that does not
 * overlap [avoid, avoid + avoid_bytes) nor [avoid2, ...). */
static bool pick_slice(struct world *w, uint32_t minlen, uint32_t maxlen, uint64_t avoid,
                       uint64_t avoid_bytes, uint64_t avoid2, uint64_t avoid2_bytes,
                       uint64_t *ret_off, uint32_t *ret_n) {
        for (int tries = 0; tries < 16; tries++) {
                const struct tensor *t = &w->pool[rng_below(&w->rng, N_POOL)];
                uint32_t hi = maxlen < t->n ? maxlen : t->n;
                if (hi < minlen)
                        continue;
                /* Favour short slices, sometimes long ones. */
                uint32_t len = rng_chance(&w->rng, 70) ? rng_range(&w->rng, minlen, minlen + (hi - minlen) / 4)
                                                       : rng_range(&w->rng, minlen, hi);
                uint32_t lo = rng_below(&w->rng, t->n - len + 1);
                uint64_t off = t->off + (uint64_t)lo * 4, bytes = (uint64_t)len * 4;
                if (avoid_bytes && overlaps(off, bytes, avoid, avoid_bytes))
                        continue;
                if (avoid2_bytes && overlaps(off, bytes, avoid2, avoid2_bytes))
                        continue;
                *ret_off = off;
                *ret_n = len;
                return true;
        }
        return false;
}

static void add_tensor(struct gen *g, uint64_t off, uint32_t n, enum hbg_direction dir) {
        g->t.tensors[g->t.n_tensors++] = harness_tensor(off, (uint64_t)n * 4, dir);
        if (dir != HBG_DIR_OUT)
                g->acc[g->n_acc++] = (struct access){ .off = off, .bytes = (uint64_t)n * 4 };
        if (dir != HBG_DIR_IN)
                g->acc[g->n_acc++] = (struct access){ .off = off, .bytes = (uint64_t)n * 4, .write = true };
}

/* Arguments for kernel `k`; false if no placement was found. */
static bool gen_args(struct world *w, struct gen *g, uint16_t k) {
        struct rng *r = &w->rng;
        uint64_t o1, o2, o3;
        uint32_t n1, n2, n3;

        switch (k) {
        case HBG_KERNEL_NOOP:
                return true;
        case HBG_KERNEL_SPIN_NS:
                g->t.n_scalars = 1;
                g->t.scalars[0] = rng_range(r, 0, 2000);
                return true;
        case HBG_KERNEL_FILL_F32:
                if (!pick_slice(w, 1, 256, 0, 0, 0, 0, &o1, &n1))
                        return false;
                add_tensor(g, o1, n1, HBG_DIR_OUT);
                g->t.n_scalars = 1;
                g->t.scalars[0] = harness_f32_scalar(rng_f32(r, -2.0f, 2.0f));
                return true;
        /* Elementwise kernels: every tensor as long as the output; now and
         * then in place (the output is the very range of an input). */
        case HBG_KERNEL_COPY_F32:
                if (!pick_slice(w, 1, 128, 0, 0, 0, 0, &o2, &n2))
                        return false;
                if (rng_chance(r, 15)) {
                        o1 = o2;
                        n1 = n2;
                } else if (!pick_slice(w, n2, n2, o2, (uint64_t)n2 * 4, 0, 0, &o1, &n1)) {
                        return false;
                }
                add_tensor(g, o1, n1, HBG_DIR_IN);
                add_tensor(g, o2, n2, HBG_DIR_OUT);
                return true;
        case HBG_KERNEL_ADD_F32:
        case HBG_KERNEL_MUL_F32:
                if (!pick_slice(w, 1, 128, 0, 0, 0, 0, &o3, &n3))
                        return false;
                if (rng_chance(r, 15)) {
                        o1 = o3; /* out = a */
                        n1 = n3;
                } else if (!pick_slice(w, n3, n3, o3, (uint64_t)n3 * 4, 0, 0, &o1, &n1)) {
                        return false;
                }
                if (rng_chance(r, 20)) {
                        o2 = o1; /* inputs may alias each other */
                        n2 = n1;
                } else if (rng_chance(r, 15)) {
                        o2 = o3; /* out = b */
                        n2 = n3;
                } else if (!pick_slice(w, n3, n3, o3, (uint64_t)n3 * 4, 0, 0, &o2, &n2)) {
                        return false;
                }
                add_tensor(g, o1, n1, HBG_DIR_IN);
                add_tensor(g, o2, n2, HBG_DIR_IN);
                add_tensor(g, o3, n3, HBG_DIR_OUT);
                return true;
        case HBG_KERNEL_AXPY_F32:
                if (!pick_slice(w, 1, 128, 0, 0, 0, 0, &o2, &n2))
                        return false;
                if (rng_chance(r, 15)) {
                        o1 = o2; /* y = x */
                        n1 = n2;
                } else if (!pick_slice(w, n2, n2, o2, (uint64_t)n2 * 4, 0, 0, &o1, &n1)) {
                        return false;
                }
                add_tensor(g, o1, n1, HBG_DIR_IN);
                add_tensor(g, o2, n2, HBG_DIR_INOUT);
                g->t.n_scalars = 1;
                g->t.scalars[0] = harness_f32_scalar(rng_f32(r, -1.0f, 1.0f));
                return true;
        case HBG_KERNEL_SCALE_F32:
                if (!pick_slice(w, 1, 256, 0, 0, 0, 0, &o1, &n1))
                        return false;
                add_tensor(g, o1, n1, HBG_DIR_INOUT);
                g->t.n_scalars = 1;
                g->t.scalars[0] = harness_f32_scalar(rng_f32(r, -1.25f, 1.25f));
                return true;
        case HBG_KERNEL_REDUCE_SUM_F32:
                if (!pick_slice(w, 1, 1, 0, 0, 0, 0, &o2, &n2) ||
                    !pick_slice(w, 1, 512, o2, 4, 0, 0, &o1, &n1))
                        return false;
                add_tensor(g, o1, n1, HBG_DIR_IN);
                add_tensor(g, o2, n2, HBG_DIR_OUT);
                return true;
        case HBG_KERNEL_GEMM_F32: {
                uint32_t m = rng_range(r, 1, 8), n = rng_range(r, 1, 8), kk = rng_range(r, 1, 8);
                if (!pick_slice(w, m * n, m * n, 0, 0, 0, 0, &o3, &n3) ||
                    !pick_slice(w, m * kk, m * kk + rng_below(r, 3), o3, (uint64_t)n3 * 4, 0, 0, &o1, &n1) ||
                    !pick_slice(w, kk * n, kk * n + rng_below(r, 3), o3, (uint64_t)n3 * 4, 0, 0, &o2, &n2))
                        return false;
                add_tensor(g, o1, n1, HBG_DIR_IN);
                add_tensor(g, o2, n2, HBG_DIR_IN);
                add_tensor(g, o3, n3, HBG_DIR_INOUT);
                g->t.n_scalars = 3;
                g->t.scalars[0] = m;
                g->t.scalars[1] = n;
                g->t.scalars[2] = kk;
                return true;
        }
        case HBG_KERNEL_SOFTMAX_ROWS_F32: {
                uint32_t rows = rng_range(r, 1, 6), cols = rng_range(r, 1, 24);
                if (!pick_slice(w, rows * cols, rows * cols + rng_below(r, 4), 0, 0, 0, 0, &o1, &n1))
                        return false;
                add_tensor(g, o1, n1, HBG_DIR_INOUT);
                g->t.n_scalars = 2;
                g->t.scalars[0] = rows;
                g->t.scalars[1] = cols;
                return true;
        }
        }
        return false;
}

static uint16_t pick_kernel(struct rng *r) {
        static const uint16_t table[] = {
                HBG_KERNEL_NOOP, HBG_KERNEL_SPIN_NS, HBG_KERNEL_FILL_F32, HBG_KERNEL_FILL_F32,
                HBG_KERNEL_COPY_F32, HBG_KERNEL_COPY_F32, HBG_KERNEL_ADD_F32, HBG_KERNEL_ADD_F32,
                HBG_KERNEL_MUL_F32, HBG_KERNEL_MUL_F32, HBG_KERNEL_AXPY_F32, HBG_KERNEL_AXPY_F32,
                HBG_KERNEL_SCALE_F32, HBG_KERNEL_SCALE_F32, HBG_KERNEL_REDUCE_SUM_F32,
                HBG_KERNEL_GEMM_F32, HBG_KERNEL_GEMM_F32, HBG_KERNEL_SOFTMAX_ROWS_F32,
        };
        return table[rng_below(r, sizeof(table) / sizeof(table[0]))];
}

/* Lanes: AIC, one AIV, or a MIX of two or three lanes. */
static uint8_t pick_mask(struct rng *r) {
        static const uint8_t mix[] = { 3, 5, 6, 7 };
        uint32_t x = rng_below(r, 100);
        if (x < 30)
                return 1;
        if (x < 60)
                return rng_chance(r, 50) ? 2 : 4;
        return mix[rng_below(r, 4)];
}

static void set_lanes(struct world *w, struct gen *g, uint16_t k) {
        g->t.lane_mask = pick_mask(&w->rng);
        g->t.block_num = (uint16_t)rng_range(&w->rng, 1, 16);
        for (unsigned lane = 0; lane < HBG_LANES; lane++) {
                if (!(g->t.lane_mask & (1u << lane)))
                        continue;
                uint16_t kl = k;
                /* add and mul share a signature: mix them across lanes. */
                if ((k == HBG_KERNEL_ADD_F32 || k == HBG_KERNEL_MUL_F32) && rng_chance(&w->rng, 50))
                        kl = rng_chance(&w->rng, 50) ? HBG_KERNEL_ADD_F32 : HBG_KERNEL_MUL_F32;
                g->t.kernel[lane] = kl;
        }
}

/* ------------------------------------------------------------ reference */

static bool ref_predicate(struct world *w, const struct harness_task *t) {
        if (!(t->flags & HBG_TASK_HAS_PREDICATE))
                return true;
        float v;
        memcpy(&v, w->ref + t->predicate_offset, sizeof(v));
        return v != 0.0f;
}

static void ref_mark(struct world *w, uint64_t off, uint64_t bytes, uint64_t id, uint16_t what) {
        for (uint64_t e = off / 4; e < (off + bytes) / 4; e++) {
                w->ref_writer[e] = id;
                w->ref_what[e] = what;
        }
}

static void ref_kernel(struct world *w, const struct harness_task *t, uint64_t id) {
        struct hbg_kernel_args a = { .n_tensors = t->n_tensors, .n_scalars = t->n_scalars };
        const struct kernel_info *ks[HBG_LANES];
        unsigned lanes = 0;
        bool same = true;

        memcpy(a.tensors, t->tensors, sizeof(a.tensors));
        memcpy(a.scalars, t->scalars, sizeof(a.scalars));
        for (unsigned lane = 0; lane < HBG_LANES; lane++) {
                if (!(t->lane_mask & (1u << lane)))
                        continue;
                const char *why = NULL;
                ks[lanes] = kernel_lookup(t->kernel[lane]);
                HOT_ASSERT_MSG(ks[lanes] != NULL, "generator: unknown kernel %u", t->kernel[lane]);
                int err = kernel_validate(ks[lanes], &a, w->h.g.heap_size, &why);
                HOT_ASSERT_MSG(err == 0, "generator produced invalid arguments: %s", why ? why : "?");
                if (ks[lanes] != ks[0])
                        same = false;
                lanes++;
        }
        if (!ref_predicate(w, t)) {
                w->pred_false++;
                return;
        }
        if (ks[0]->sig->id == HBG_KERNEL_SPIN_NS || ks[0]->sig->id == HBG_KERNEL_NOOP)
                return; /* nothing observable */
        struct kernel_run_ctx ctx;
        kernel_run_ctx_init(&ctx, kernel_budget_ns(0), NULL);
        if (same) {
                int rc = ks[0]->run(&ctx.k, w->ref, &a, 0, 1);
                HOT_ASSERT_MSG(rc == 0, "reference run of a task's kernel: %d", rc);
        } else {
                /* Lanes differ: the engine's split is the semantics. Part
                 * b * lanes + j runs the j-th active lane's kernel. */
                uint32_t parts = (uint32_t)t->block_num * lanes;
                for (uint32_t p = 0; p < parts; p++) {
                        int rc = ks[p % lanes]->run(&ctx.k, w->ref, &a, p, parts);
                        HOT_ASSERT_MSG(rc == 0, "reference run of part %u of %u: %d", p, parts, rc);
                }
                w->mixed++;
        }
        for (unsigned i = 0; i < t->n_tensors; i++)
                if (t->tensors[i].direction != HBG_DIR_IN)
                        ref_mark(w, t->tensors[i].offset,
                                 ks[0]->sig->id == HBG_KERNEL_REDUCE_SUM_F32 ? 4 : t->tensors[i].length, id,
                                 t->kernel[__builtin_ctz(t->lane_mask)]);
}

static void ref_external(struct world *w, const struct gen *g, uint64_t id) {
        if (!ref_predicate(w, &g->t)) {
                w->pred_false++;
                return;
        }
        float *p = (float *)(void *)(w->ref + g->ext_off);
        for (uint32_t i = 0; i < g->ext_n; i++)
                p[i] += 1.0f;
        ref_mark(w, g->ext_off, (uint64_t)g->ext_n * 4, id, WHAT_EXTERNAL);
}

/* ------------------------------------------------------------ external */

static uint64_t ring_completed(struct world *w) {
        struct ring_stats rs;
        ring_stats(w->h.ring, &rs);
        return rs.completed;
}

static int on_external(void *userdata, uint64_t id) {
        struct world *w = userdata;
        struct ext_entry *x = &w->ext[id & (w->h.g.task_window - 1)];

        if (x->id != id) {
                if (!w->ext_error[0])
                        snprintf(w->ext_error, sizeof(w->ext_error),
                                 "external callback for task %" PRIu64 " which is not an external task", id);
                return -EIO;
        }
        if (x->calls++) {
                if (!w->ext_error[0])
                        snprintf(w->ext_error, sizeof(w->ext_error),
                                 "external task %" PRIu64 " handed to the client twice", id);
                return -EIO;
        }
        w->ext_calls++;
        if (id == w->gate_id) {
                /* Hold the frontier until the independent followers are
                 * complete: those past WM + F must have been deferred. */
                int64_t deadline = clock_now_ms() + 60000;
                while (ring_completed(w) < w->gate_target) {
                        if (clock_now_ms() > deadline) {
                                w->gate_timed_out = true;
                                break;
                        }
                        usleep(200);
                }
        }
        float *p = harness_f32(&w->h, x->off);
        for (uint32_t i = 0; i < x->n; i++)
                p[i] += 1.0f;
        return 0;
}

/* ------------------------------------------------------------ generation */

/* Derive the fanins, write the task, run it in the reference, track it.
 * With probability extra_percent, 1..max_extra random extra fanins are
 * added (harmless), sometimes far back. */
static uint64_t submit(struct world *w, struct gen *g, unsigned extra_percent, unsigned max_extra) {
        unsigned n = collect_deps(w, g);
        uint64_t next = w->h.prod.next_id;
        if (next > w->batch_first && rng_chance(&w->rng, extra_percent)) {
                uint64_t span = next - w->batch_first;
                uint64_t back = 2 * (uint64_t)w->h.g.task_window;
                if (span > back)
                        span = back;
                unsigned extra = rng_range(&w->rng, 1, max_extra);
                for (unsigned i = 0; i < extra; i++)
                        dep_add(w, &n, next - 1 - rng_u64(&w->rng) % span);
        }
        n = reduce_deps(w, n);
        g->t.n_fanins = (uint8_t)n;
        memcpy(g->t.fanins, w->deps, n * sizeof(w->deps[0]));
        uint64_t id = harness_add_task(&w->h, &g->t);
        w->tasks++;
        if (g->external) {
                struct ext_entry *x = &w->ext[id & (w->h.g.task_window - 1)];
                *x = (struct ext_entry){ .id = id, .off = g->ext_off, .n = g->ext_n };
                ref_external(w, g, id);
        } else if (g->t.lane_mask) {
                ref_kernel(w, &g->t, id);
        }
        track(w, g, id);
        return id;
}

static void maybe_predicate(struct world *w, struct gen *g, unsigned percent) {
        if (!rng_chance(&w->rng, percent))
                return;
        uint32_t e = rng_below(&w->rng, N_FLAGS);
        g->t.flags |= HBG_TASK_HAS_PREDICATE;
        g->t.predicate_offset = w->flags.off + (uint64_t)e * 4;
        g->acc[g->n_acc++] = (struct access){ .off = g->t.predicate_offset, .bytes = 4 };
        g->pred_writer = w->flag_writer[e];
        w->predicated++;
}

static void gen_one(struct world *w) {
        struct rng *r = &w->rng;
        struct gen g;
        memset(&g, 0, sizeof(g));
        g.pred_writer = NONE;
        g.t.block_num = 1;

        uint32_t x = rng_below(r, 100);
        if (x < 4) { /* dummy with random fanins */
                w->dummies++;
                submit(w, &g, 90, 8);
                return;
        }
        if (x < 7) { /* host-inline */
                g.t.flags = HBG_TASK_HOST_INLINE;
                w->inlines++;
                submit(w, &g, 60, 4);
                return;
        }
        if (x < 11) { /* external: +1 on a slice it owns */
                uint32_t n;
                if (!pick_slice(w, 1, 64, 0, 0, 0, 0, &g.ext_off, &n))
                        return;
                g.ext_n = n;
                g.external = true;
                g.t.flags = HBG_TASK_EXTERNAL;
                g.acc[g.n_acc++] = (struct access){ .off = g.ext_off, .bytes = (uint64_t)n * 4 };
                g.acc[g.n_acc++] = (struct access){ .off = g.ext_off, .bytes = (uint64_t)n * 4, .write = true };
                maybe_predicate(w, &g, 25);
                w->externals++;
                submit(w, &g, 10, 2);
                return;
        }
        if (x < 17) { /* a flag: fill with 0 or 1 */
                uint32_t lo = rng_below(r, N_FLAGS), hi = lo + rng_range(r, 1, 4);
                if (hi > N_FLAGS)
                        hi = N_FLAGS;
                g.flag_fill = true;
                g.flag_lo = lo;
                g.flag_hi = hi;
                add_tensor(&g, w->flags.off + (uint64_t)lo * 4, hi - lo, HBG_DIR_OUT);
                g.t.n_scalars = 1;
                g.t.scalars[0] = harness_f32_scalar(rng_chance(r, 50) ? 1.0f : 0.0f);
                set_lanes(w, &g, HBG_KERNEL_FILL_F32);
                maybe_predicate(w, &g, 10);
                w->kernels++;
                submit(w, &g, 10, 2);
                return;
        }
        uint16_t k = pick_kernel(r);
        if (!gen_args(w, &g, k)) {
                memset(&g, 0, sizeof(g));
                g.pred_writer = NONE;
                k = HBG_KERNEL_NOOP;
        }
        set_lanes(w, &g, k);
        maybe_predicate(w, &g, 15);
        w->kernels++;
        submit(w, &g, 10, 2);
}

/* ------------------------------------------------------------ checks */

static const char *locate(const struct world *w, uint64_t elem, uint32_t *ret_index, int *ret_tensor) {
        uint64_t off = elem * 4;
        for (unsigned t = 0; t < N_POOL; t++) {
                if (off >= w->pool[t].off && off < w->pool[t].off + (uint64_t)w->pool[t].n * 4) {
                        *ret_index = (uint32_t)((off - w->pool[t].off) / 4);
                        *ret_tensor = (int)t;
                        return "pool tensor";
                }
        }
        if (off >= w->flags.off && off < w->flags.off + (uint64_t)w->flags.n * 4) {
                *ret_index = (uint32_t)((off - w->flags.off) / 4);
                *ret_tensor = 0;
                return "flags";
        }
        *ret_index = 0;
        *ret_tensor = -1;
        return "padding";
}

static void compare_heaps(struct world *w, uint64_t batch) {
        if (memcmp(w->h.heap, w->ref, w->pool_bytes) == 0)
                return;
        const uint32_t *eng = (const uint32_t *)(const void *)w->h.heap;
        const uint32_t *ref = (const uint32_t *)(const void *)w->ref;
        uint64_t first = NONE, count = 0;
        for (uint64_t i = 0; i < w->pool_bytes / 4; i++) {
                if (eng[i] != ref[i]) {
                        if (first == NONE)
                                first = i;
                        count++;
                }
        }
        float fe, fr;
        memcpy(&fe, &eng[first], 4);
        memcpy(&fr, &ref[first], 4);
        uint32_t index;
        int tensor;
        const char *where = locate(w, first, &index, &tensor);
        char writer[96];
        if (w->ref_writer[first] == NONE)
                snprintf(writer, sizeof(writer), "none (initial value)");
        else
                snprintf(writer, sizeof(writer), "task %" PRIu64 " (%s)", w->ref_writer[first],
                         what_name(w->ref_what[first]));
        ck_abort_msg("run %s seed %#" PRIx64 " batch %" PRIu64
                     ": heap differs from the reference at element %" PRIu64 " (%s %d [%u]): engine %#010x (%.9g), "
                     "reference %#010x (%.9g); last written in the reference by %s; %" PRIu64
                     " elements differ",
                     w->run_name, w->seed, batch, first, where, tensor, index, eng[first], (double)fe, ref[first],
                     (double)fr, writer, count);
}

/* ------------------------------------------------------------ a run */

static void world_init(struct world *w, const struct run_cfg *cfg, unsigned mode,
                       uint64_t seed) {
        memset(w, 0, sizeof(*w));
        w->cfg = cfg;
        snprintf(w->run_name_buf, sizeof(w->run_name_buf), "%s/%s", cfg->name, completion_mode_name(mode));
        w->run_name = w->run_name_buf;
        w->seed = seed;
        w->rng.s = seed;
        w->gate_id = NONE;

        struct hbg_engine_config ec;
        engine_config_default(&ec);
        ec.completion_mode = mode;
        /* The resolver takes a thread of its own: at least two. */
        ec.threads = cfg->threads < completion_mode_min_threads(mode) ? completion_mode_min_threads(mode)
                                                                         : cfg->threads;
        ec.clusters = cfg->clusters;
        ec.classify_batch = cfg->classify_batch;
        ec.spin_before_park_ns = cfg->spin_before_park_ns;
        ec.stall_timeout_ms = 120000;
        ck_assert_int_eq(engine_new(&w->e, &ec), 0);

        struct hbg_geometry_request req;
        geometry_request_default(&req);
        req.task_window = cfg->d;
        req.flag_window = cfg->f;
        req.heap_size = 1u << 20;
        req.mailbox_entries = cfg->mailbox;
        req.graph_table_entries = 16;
        ck_assert_int_eq(harness_ring_init(&w->h, w->e, &req, cfg->first_id), 0);
        w->h.external = on_external;
        w->h.external_userdata = w;

        for (unsigned t = 0; t < N_POOL; t++) {
                w->pool[t].n = rng_range(&w->rng, 10, 64) * 16;
                w->pool[t].off = harness_alloc(&w->h, (uint64_t)w->pool[t].n * 4);
        }
        w->flags.n = N_FLAGS;
        w->flags.off = harness_alloc(&w->h, N_FLAGS * 4);
        w->pool_bytes = w->h.heap_used;
        ck_assert_uint_eq(w->pool_bytes % CHUNK_BYTES, 0);

        w->ref = aligned_alloc(64, w->pool_bytes);
        w->ref_writer = malloc(w->pool_bytes / 4 * sizeof(*w->ref_writer));
        w->ref_what = calloc(w->pool_bytes / 4, sizeof(*w->ref_what));
        w->n_chunks = (uint32_t)(w->pool_bytes / CHUNK_BYTES);
        w->chunks = calloc(w->n_chunks, sizeof(*w->chunks));
        w->ext = calloc(cfg->d, sizeof(*w->ext));
        w->deps = malloc(DEPS_CAP * sizeof(*w->deps));
        die_oom(w->ref);
        die_oom(w->ref_writer);
        die_oom(w->ref_what);
        die_oom(w->chunks);
        die_oom(w->ext);
        die_oom(w->deps);
        for (uint64_t i = 0; i < w->pool_bytes / 4; i++)
                w->ref_writer[i] = NONE;
        for (uint64_t i = 0; i < cfg->d; i++)
                w->ext[i].id = NONE;

        /* Initial values, written by the client before any submission. */
        float *heap = harness_f32(&w->h, 0);
        for (uint64_t i = 0; i < w->pool_bytes / 4; i++)
                heap[i] = rng_f32(&w->rng, -1.0f, 1.0f);
        for (uint32_t e = 0; e < N_FLAGS; e++)
                heap[w->flags.off / 4 + e] = rng_chance(&w->rng, 50) ? 1.0f : 0.0f;
        memcpy(w->ref, w->h.heap, w->pool_bytes);
        tracker_reset(w);
}

static void world_destroy(struct world *w) {
        harness_ring_destroy(&w->h);
        engine_free(w->e);
        free(w->ref);
        free(w->ref_writer);
        free(w->ref_what);
        free(w->chunks);
        free(w->ext);
        free(w->deps);
}

struct graph_rec {
        uint64_t k, first, last;
};

static void wait_batch(struct world *w, const struct graph_rec *gr, unsigned n, uint64_t batch) {
        for (unsigned i = 0; i < n; i++) {
                struct hbg_graph_entry ge;
                int rc = harness_wait_graph(&w->h, gr[i].k, WAIT_MS, &ge);
                ck_assert_msg(rc == 0, "run %s seed %#" PRIx64 " batch %" PRIu64 ": graph %" PRIu64
                              " [%" PRIu64 ", %" PRIu64 "] did not finish (watermark %" PRIu64 ")",
                              w->run_name, w->seed, batch, gr[i].k, gr[i].first, gr[i].last,
                              (uint64_t)atomic_load(&w->h.ch->completed_watermark));
                ck_assert_msg(ge.status == 0,
                              "run %s seed %#" PRIx64 " batch %" PRIu64 ": graph %" PRIu64 " [%" PRIu64
                              ", %" PRIu64 "] failed: status %d (%s) at task %" PRIu64,
                              w->run_name, w->seed, batch, gr[i].k, gr[i].first, gr[i].last, ge.status,
                              strerror(-ge.status), ge.first_error_task);
        }
        ck_assert_msg(w->ext_error[0] == 0, "run %s seed %#" PRIx64 ": %s", w->run_name, w->seed, w->ext_error);
        compare_heaps(w, batch);
}

static struct graph_rec end_graph(struct world *w, uint64_t first) {
        struct graph_rec gr = { .first = first, .last = w->h.prod.next_id - 1 };
        gr.k = harness_end_graph(&w->h, w->graphs++);
        ck_assert_uint_ne(gr.k, UINT64_MAX);
        return gr;
}

/* A batch of 1..6 graphs of 5..300 tasks, dependencies crossing graphs. */
static void run_small_batch(struct world *w, uint64_t batch, unsigned max_graphs) {
        struct graph_rec gr[6];
        unsigned n = rng_range(&w->rng, 1, max_graphs < 6 ? max_graphs : 6);
        tracker_reset(w);
        for (unsigned i = 0; i < n; i++) {
                uint64_t first = w->h.prod.next_id;
                uint32_t size = rng_chance(&w->rng, 30) ? rng_range(&w->rng, 5, 30) : rng_range(&w->rng, 5, 300);
                while (w->h.prod.next_id - first < size)
                        gen_one(w);
                gr[i] = end_graph(w, first);
        }
        wait_batch(w, gr, n, batch);
}

/* One graph of `size` tasks streamed through the window. */
static void run_big_graph(struct world *w, uint64_t batch, uint32_t size) {
        tracker_reset(w);
        uint64_t first = w->h.prod.next_id;
        while (w->h.prod.next_id - first < size)
                gen_one(w);
        struct graph_rec gr = end_graph(w, first);
        wait_batch(w, &gr, 1, batch);
}

/* An external task at the frontier held by the client until GATE_FOLLOWERS
 * later independent tasks are complete: with F < GATE_FOLLOWERS those past
 * WM + F can only complete through the failsafe heap. */
static void run_gate_batch(struct world *w, uint64_t batch) {
        tracker_reset(w);
        uint64_t first = w->h.prod.next_id;
        struct gen g;
        memset(&g, 0, sizeof(g));
        g.pred_writer = NONE;
        g.external = true;
        g.t.flags = HBG_TASK_EXTERNAL;
        g.ext_off = w->pool[0].off;
        g.ext_n = 16;
        g.acc[g.n_acc++] = (struct access){ .off = g.ext_off, .bytes = 64 };
        g.acc[g.n_acc++] = (struct access){ .off = g.ext_off, .bytes = 64, .write = true };
        /* Every earlier task is complete (previous batches were waited for). */
        w->gate_target = first - w->cfg->first_id + GATE_FOLLOWERS;
        w->gate_id = submit(w, &g, 0, 1);
        w->externals++;
        for (unsigned i = 0; i < GATE_FOLLOWERS; i++) {
                struct harness_task t = { .kernel = { HBG_KERNEL_NOOP }, .lane_mask = 1, .block_num = 1 };
                harness_add_task(&w->h, &t);
                w->tasks++;
        }
        struct graph_rec gr = end_graph(w, first);
        wait_batch(w, &gr, 1, batch);
        ck_assert_msg(!w->gate_timed_out, "run %s: the %u tasks after the held external did not complete",
                      w->run_name, GATE_FOLLOWERS);
}

static uint64_t failsafe_pushes(struct world *w, uint64_t *ret_classified) {
        uint64_t pushes = 0, classified = 0;
        for (unsigned i = 0; i < engine_threads(w->e); i++) {
                struct hbg_thread_stats st;
                engine_thread_stats(w->e, i, &st);
                pushes += st.failsafe_pushes;
                classified += st.classified;
        }
        *ret_classified = classified;
        return pushes;
}

/* One body, every completion policy: run i is configuration i % N_RUNS
 * under policy i / N_RUNS. */
START_TEST(differential) {
        const struct run_cfg *cfg = &runs[(unsigned)_i % N_RUNS];
        unsigned mode = ((unsigned)_i / N_RUNS);
        /* HBG_TEST_RUN=name runs only that configuration, HBG_TEST_MODE=name
         * only that policy (debugging). */
        const char *only = getenv("HBG_TEST_RUN"), *only_mode = getenv("HBG_TEST_MODE");
        if ((only && strcmp(only, cfg->name) != 0) ||
            (only_mode && strcmp(only_mode, completion_mode_name(mode)) != 0))
                return;
        unsigned scale = test_scale();
        uint64_t seed = test_seed((unsigned)_i);
        struct world w;
        int64_t t0 = clock_now_ms();

        world_init(&w, cfg, mode, seed);
        uint64_t batch = 0;
        bool tiny_f = cfg->f < cfg->d;
        if (tiny_f)
                run_gate_batch(&w, batch++);

        unsigned graphs = cfg->graphs / scale;
        if (graphs < 10)
                graphs = 10;
        uint64_t target = w.graphs + graphs;
        bool big_done = cfg->big_graph == 0;
        while (w.graphs < target || !big_done) {
                if (!big_done && w.graphs >= target / 2) {
                        uint32_t size = cfg->big_graph / scale;
                        run_big_graph(&w, batch++, size < 5000 ? 5000 : size);
                        big_done = true;
                        continue;
                }
                unsigned left = (unsigned)(target > w.graphs ? target - w.graphs : 1);
                run_small_batch(&w, batch++, left);
        }

        /* Counters: read before the ring goes away. */
        uint64_t classified;
        uint64_t pushes = failsafe_pushes(&w, &classified);
        struct ring_stats rs;
        ring_stats(w.h.ring, &rs);
        uint64_t tasks = w.h.prod.next_id - cfg->first_id;
        ck_assert_uint_eq(tasks, w.tasks);
        ck_assert_uint_eq(rs.completed, tasks);
        ck_assert_uint_eq(rs.failed, 0);
        ck_assert_uint_eq(rs.watermark, w.h.prod.next_id);
        ck_assert_uint_eq(rs.graphs_retired, w.graphs);
        ck_assert_uint_eq(rs.graphs_failed, 0);
        ck_assert_int_eq(rs.error, 0);
        ck_assert(!rs.broken);
        ck_assert_uint_eq(classified, tasks);
        if (tiny_f)
                ck_assert_msg(pushes > 0, "run %s: F = %u < D = %u but the failsafe heap was never used",
                              w.run_name, cfg->f, cfg->d);
        else
                ck_assert_msg(pushes == 0, "run %s: F = D but %" PRIu64 " failsafe pushes", w.run_name, pushes);

        printf("%-21s seed %#" PRIx64 ": %" PRIu64 " graphs, %" PRIu64 " tasks (%" PRIu64 " kernels, %" PRIu64
               " mixed-lane, %" PRIu64 " joins, %" PRIu64 " dummies, %" PRIu64 " inline, %" PRIu64
               " external, %" PRIu64 " predicated / %" PRIu64 " false), failsafe pushes %" PRIu64
               ", %" PRId64 " ms\n",
               w.run_name, seed, w.graphs, tasks, w.kernels, w.mixed, w.joins, w.dummies, w.inlines,
               w.externals, w.predicated, w.pred_false, pushes, clock_now_ms() - t0);
        fflush(stdout);
        world_destroy(&w);
}
END_TEST

static Suite *suite(void) {
        Suite *s = suite_create("engine_differential");
        TCase *tc = tcase_create("differential");
        tcase_set_timeout(tc, 900);
        tcase_add_loop_test(tc, differential, 0, (int)(N_RUNS * completion_mode_count()));
        suite_add_tcase(s, tc);
        return s;
}

const struct check_main check_main = { .suite = suite };
