/* SPDX-License-Identifier: MIT */
/*
 * Many rings on one engine at once: 8 harness threads each drive their own
 * ring (task window D = 512) with a stream of graphs of 2000..5000 tasks,
 * i.e. much larger than the window, while a ninth thread drives a ring whose
 * graphs contain tasks that fail on purpose. One engine, 4 scheduler threads.
 *
 * Good rings: 16 chains, each a 64-element slice of a per-ring tensor,
 * updated by a random mix of kernels (axpy with a tensor of ones or with
 * another chain, scale, fill, add-then-copy through a scratch slice,
 * external tasks adding 1.0, reduce_sum into result slots) with exact
 * small-integer arithmetic, so the test knows every value in closed form.
 * Dependencies are derived per chain (RAW, WAR, WAW) plus random extra
 * fanins, also across graphs. Each graph ends by copying every chain into a
 * snapshot area (two areas, alternating, so graph g+1 runs while graph g is
 * checked); the thread checks the snapshot and the reduce results.
 *
 * Failing ring: graphs with kernel `fail` tasks (random codes, random
 * shapes) and tasks that fail validation, each followed by dependants in the
 * same graph; other graphs are clean. Each failing graph must report the
 * code and id of its lowest failing task, each clean graph 0, and no other
 * ring may notice anything.
 *
 * HBG_TEST_SCALE=N divides the number of graphs (default 1; 4 under ASan and -O3 -DNDEBUG, 8 under TSan).
 */
#include <check.h>
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "daemon/engine/engine.h"
#include "daemon/engine/engine_stats.h"
#include "daemon/engine/fair_share.h"
#include "daemon/engine/kernels.h"
#include "tests/engine/harness.h"
#include "tests/test_util.h"
#include "tests/check_main.h"


#define N_GOOD 8u
#define N_RINGS (N_GOOD + 1u)
#define GRAPHS 40u           /* per ring at scale 1 */
#define D 512u
#define CHAINS 16u
#define LEN 64u              /* elements per chain */
#define RED_SLOTS 1024u
#define READERS_MAX 8u
#define VMAX 1048576.0       /* |chain value| bound: every value is an exact f32 integer */
#define WAIT_MS 300000
#define NONE UINT64_MAX

/* ------------------------------------------------------------ PRNG */

/* struct rng and rng_*(): tests/test_util.h */

static unsigned test_scale(void) {
        return test_scale_or(HBG_TEST_BUILD_SCALE);
}

/* ------------------------------------------------------------ per ring */

/* Dependency state of one region (RAW, WAR, WAW). */
struct region {
        uint64_t writer;
        uint32_t n_readers;
        uint64_t readers[READERS_MAX];
};

struct ext_entry {
        uint64_t id;
        uint32_t chain;
        uint32_t calls;
};

struct ring_ctx {
        /* in */
        struct hbg_engine *e;
        unsigned index;
        bool failing;
        unsigned graphs;
        uint32_t f;
        uint64_t first_id;
        uint64_t seed;

        /* the ring */
        struct harness_ring h;
        struct rng rng;
        uint64_t ones, y, tmp, snap[2], red[2];
        struct region ry[CHAINS], rtmp[CHAINS];
        double v[CHAINS];                 /* the closed form of every chain */
        double snap_expect[2][CHAINS];
        uint32_t n_red[2];
        uint32_t red_slot[2][RED_SLOTS];
        double red_expect[2][RED_SLOTS];
        struct ext_entry ext[D];
        uint64_t graph_first[2], graph_last[2];

        /* failing ring: expectations per graph parity */
        int32_t fail_code[2];
        uint64_t fail_task[2];

        /* out */
        char err[512];
        uint64_t tasks, graphs_done, graphs_failed_expected, fail_tasks, externals, ext_calls;
        struct ring_stats stats;
};

static void fail_ctx(struct ring_ctx *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void fail_ctx(struct ring_ctx *c, const char *fmt, ...) {
        if (c->err[0])
                return;
        va_list ap;
        va_start(ap, fmt);
        int n = snprintf(c->err, sizeof(c->err), "ring %u (seed %#" PRIx64 "): ", c->index, c->seed);
        vsnprintf(c->err + n, sizeof(c->err) - (size_t)n, fmt, ap);
        va_end(ap);
}

static uint64_t chain_off(const struct ring_ctx *c, uint64_t base, uint32_t chain) {
        (void)c;
        return base + (uint64_t)chain * LEN * 4;
}

/* ------------------------------------------------------------ dependencies */

struct deps {
        unsigned n;
        uint64_t id[64];
};

static void dep_add(struct deps *d, uint64_t id) {
        if (id == NONE)
                return;
        for (unsigned i = 0; i < d->n; i++)
                if (d->id[i] == id)
                        return;
        if (d->n < 64)
                d->id[d->n++] = id;
}

static void dep_read(struct deps *d, const struct region *r) {
        dep_add(d, r->writer);
}

static void dep_write(struct deps *d, const struct region *r) {
        dep_add(d, r->writer);
        for (uint32_t i = 0; i < r->n_readers; i++)
                dep_add(d, r->readers[i]);
}

static uint64_t add_task(struct ring_ctx *c, struct harness_task *t) {
        c->tasks++;
        return harness_add_task(&c->h, t);
}

static uint64_t join(struct ring_ctx *c, const uint64_t *ids, unsigned n) {
        struct harness_task t = { .block_num = 1, .n_fanins = (uint8_t)n };
        memcpy(t.fanins, ids, n * sizeof(ids[0]));
        return add_task(c, &t);
}

static void region_read(struct ring_ctx *c, struct region *r, uint64_t id) {
        if (r->n_readers == READERS_MAX) {
                r->readers[0] = join(c, r->readers, READERS_MAX);
                r->n_readers = 1;
        }
        r->readers[r->n_readers++] = id;
}

static void region_write(struct region *r, uint64_t id) {
        r->writer = id;
        r->n_readers = 0;
}

/* Random extra fanins, sometimes more than a window back, never before the
 * ring's first id. */
static void extra_deps(struct ring_ctx *c, struct deps *d, unsigned percent, unsigned max) {
        uint64_t next = c->h.prod.next_id;
        if (next == c->first_id || !rng_chance(&c->rng, percent))
                return;
        uint64_t span = next - c->first_id;
        if (span > 2 * D)
                span = 2 * D;
        unsigned n = rng_range(&c->rng, 1, max);
        for (unsigned i = 0; i < n; i++)
                dep_add(d, next - 1 - rng_u64(&c->rng) % span);
}

/* Fan-in <= 8: join the rest through dummies. */
static void set_fanins(struct ring_ctx *c, struct harness_task *t, struct deps *d) {
        while (d->n > 8) {
                unsigned out = 0;
                for (unsigned i = 0; i < d->n; i += 8) {
                        unsigned g = d->n - i < 8 ? d->n - i : 8;
                        d->id[out++] = g == 1 ? d->id[i] : join(c, &d->id[i], g);
                }
                d->n = out;
        }
        t->n_fanins = (uint8_t)d->n;
        memcpy(t->fanins, d->id, d->n * sizeof(d->id[0]));
}

static void set_shape(struct ring_ctx *c, struct harness_task *t, uint16_t k) {
        static const uint8_t masks[] = { 1, 2, 4, 3, 5, 6, 7 };
        t->lane_mask = masks[rng_below(&c->rng, sizeof(masks))];
        t->block_num = (uint16_t)rng_range(&c->rng, 1, 8);
        for (unsigned lane = 0; lane < HBG_LANES; lane++)
                t->kernel[lane] = (t->lane_mask & (1u << lane)) ? k : HBG_KERNEL_NONE;
}

/* ------------------------------------------------------------ good rings */

static int on_external(void *userdata, uint64_t id) {
        struct ring_ctx *c = userdata;
        struct ext_entry *x = &c->ext[id & (D - 1)];
        if (x->id != id || x->calls++) {
                fail_ctx(c, "external callback for task %" PRIu64 " unexpected (entry %" PRIu64 ", calls %u)",
                         id, x->id, x->calls);
                return -EIO;
        }
        c->ext_calls++;
        float *p = harness_f32(&c->h, chain_off(c, c->y, x->chain));
        for (uint32_t i = 0; i < LEN; i++)
                p[i] += 1.0f;
        return 0;
}

static void y_tensor(struct harness_task *t, const struct ring_ctx *c, uint64_t base, uint32_t chain,
                     enum hbg_direction dir) {
        t->tensors[t->n_tensors++] = harness_tensor(chain_off(c, base, chain), LEN * 4, dir);
}

/* One writer task on chain `ch`: reads the regions in `rd` (besides ch). */
static uint64_t emit_on_chain(struct ring_ctx *c, struct harness_task *t, uint32_t ch, int other) {
        struct deps d = { 0 };
        dep_write(&d, &c->ry[ch]);
        if (other >= 0)
                dep_read(&d, &c->ry[other]);
        extra_deps(c, &d, 10, 2);
        set_fanins(c, t, &d);
        uint64_t id = add_task(c, t);
        if (other >= 0)
                region_read(c, &c->ry[other], id);
        region_write(&c->ry[ch], id);
        return id;
}

static void gen_good_step(struct ring_ctx *c, unsigned parity) {
        struct rng *r = &c->rng;
        uint32_t ch = rng_below(r, CHAINS);
        double *v = &c->v[ch];
        uint32_t x = rng_below(r, 100);
        struct harness_task t = { .block_num = 1 };

        if (x < 28) { /* y += alpha * ones */
                static const float alphas[] = { -2.0f, -1.0f, 1.0f, 2.0f };
                float a = alphas[rng_below(r, 4)];
                if (fabs(*v + a) > VMAX)
                        a = *v > 0 ? -2.0f : 2.0f;
                set_shape(c, &t, HBG_KERNEL_AXPY_F32);
                t.tensors[t.n_tensors++] = harness_tensor(c->ones, LEN * 4, HBG_DIR_IN);
                y_tensor(&t, c, c->y, ch, HBG_DIR_INOUT);
                t.n_scalars = 1;
                t.scalars[0] = harness_f32_scalar(a);
                emit_on_chain(c, &t, ch, -1);
                *v += a;
        } else if (x < 38) { /* y *= alpha */
                float a = rng_chance(r, 50) ? -1.0f : 1.0f;
                if (fabs(*v) * 2 <= VMAX && rng_chance(r, 40))
                        a *= 2.0f;
                else if (fmod(*v, 2.0) == 0.0 && rng_chance(r, 40))
                        a *= 0.5f;
                set_shape(c, &t, HBG_KERNEL_SCALE_F32);
                y_tensor(&t, c, c->y, ch, HBG_DIR_INOUT);
                t.n_scalars = 1;
                t.scalars[0] = harness_f32_scalar(a);
                emit_on_chain(c, &t, ch, -1);
                *v *= a;
        } else if (x < 46) { /* y = k */
                float k = (float)((int)rng_below(r, 17) - 8);
                set_shape(c, &t, HBG_KERNEL_FILL_F32);
                y_tensor(&t, c, c->y, ch, HBG_DIR_OUT);
                t.n_scalars = 1;
                t.scalars[0] = harness_f32_scalar(k);
                emit_on_chain(c, &t, ch, -1);
                *v = k;
        } else if (x < 58) { /* y += alpha * y' */
                uint32_t o = (ch + 1 + rng_below(r, CHAINS - 1)) % CHAINS;
                float a = rng_chance(r, 50) ? -1.0f : 1.0f;
                if (fabs(*v) + fabs(c->v[o]) > VMAX)
                        return;
                set_shape(c, &t, HBG_KERNEL_AXPY_F32);
                y_tensor(&t, c, c->y, o, HBG_DIR_IN);
                y_tensor(&t, c, c->y, ch, HBG_DIR_INOUT);
                t.n_scalars = 1;
                t.scalars[0] = harness_f32_scalar(a);
                emit_on_chain(c, &t, ch, (int)o);
                *v += a * c->v[o];
        } else if (x < 68) { /* tmp = y + ones; y = tmp */
                if (fabs(*v) + 1 > VMAX)
                        return;
                struct deps d = { 0 };
                set_shape(c, &t, HBG_KERNEL_ADD_F32);
                y_tensor(&t, c, c->y, ch, HBG_DIR_IN);
                t.tensors[t.n_tensors++] = harness_tensor(c->ones, LEN * 4, HBG_DIR_IN);
                y_tensor(&t, c, c->tmp, ch, HBG_DIR_OUT);
                dep_read(&d, &c->ry[ch]);
                dep_write(&d, &c->rtmp[ch]);
                set_fanins(c, &t, &d);
                uint64_t add = add_task(c, &t);
                region_read(c, &c->ry[ch], add);
                region_write(&c->rtmp[ch], add);

                struct harness_task cp = { .block_num = 1 };
                set_shape(c, &cp, HBG_KERNEL_COPY_F32);
                y_tensor(&cp, c, c->tmp, ch, HBG_DIR_IN);
                y_tensor(&cp, c, c->y, ch, HBG_DIR_OUT);
                struct deps d2 = { 0 };
                dep_read(&d2, &c->rtmp[ch]);
                dep_write(&d2, &c->ry[ch]);
                set_fanins(c, &cp, &d2);
                uint64_t id = add_task(c, &cp);
                region_read(c, &c->rtmp[ch], id);
                region_write(&c->ry[ch], id);
                *v += 1;
        } else if (x < 76) { /* red[slot] = sum(y) */
                uint32_t slot = c->n_red[parity];
                if (slot == RED_SLOTS)
                        return;
                struct deps d = { 0 };
                set_shape(c, &t, HBG_KERNEL_REDUCE_SUM_F32);
                y_tensor(&t, c, c->y, ch, HBG_DIR_IN);
                t.tensors[t.n_tensors++] = harness_tensor(c->red[parity] + (uint64_t)slot * 4, 4, HBG_DIR_OUT);
                dep_read(&d, &c->ry[ch]);
                extra_deps(c, &d, 10, 2);
                set_fanins(c, &t, &d);
                uint64_t id = add_task(c, &t);
                region_read(c, &c->ry[ch], id);
                /* What the kernel computes: a double sum in index order. */
                double sum = 0.0;
                for (uint32_t i = 0; i < LEN; i++)
                        sum += (double)(float)*v;
                c->red_slot[parity][slot] = slot;
                c->red_expect[parity][slot] = sum;
                c->n_red[parity]++;
        } else if (x < 80) { /* external: y += 1 by the client */
                if (fabs(*v) + 1 > VMAX)
                        return;
                t.flags = HBG_TASK_EXTERNAL;
                uint64_t id = emit_on_chain(c, &t, ch, -1);
                c->ext[id & (D - 1)] = (struct ext_entry){ .id = id, .chain = ch };
                c->externals++;
                *v += 1;
        } else if (x < 90) { /* noop / short spin, random fanins */
                struct deps d = { 0 };
                bool spin = rng_chance(r, 30);
                set_shape(c, &t, spin ? HBG_KERNEL_SPIN_NS : HBG_KERNEL_NOOP);
                if (spin) {
                        t.n_scalars = 1;
                        t.scalars[0] = rng_range(r, 0, 500);
                }
                extra_deps(c, &d, 50, 3);
                set_fanins(c, &t, &d);
                add_task(c, &t);
        } else { /* dummy or host-inline joining random earlier tasks */
                struct deps d = { 0 };
                if (rng_chance(r, 40))
                        t.flags = HBG_TASK_HOST_INLINE;
                extra_deps(c, &d, 90, 8);
                set_fanins(c, &t, &d);
                add_task(c, &t);
        }
}

static void gen_good_graph(struct ring_ctx *c, unsigned g) {
        unsigned p = g & 1;
        uint64_t first = c->h.prod.next_id;
        uint32_t size = rng_range(&c->rng, 2000, 5000);
        c->n_red[p] = 0;
        while (c->h.prod.next_id - first < size - CHAINS)
                gen_good_step(c, p);
        /* Snapshot every chain; the area was last used by graph g - 2,
         * already checked (complete). */
        for (uint32_t ch = 0; ch < CHAINS; ch++) {
                struct harness_task t = { .block_num = 1 };
                struct deps d = { 0 };
                set_shape(c, &t, HBG_KERNEL_COPY_F32);
                y_tensor(&t, c, c->y, ch, HBG_DIR_IN);
                y_tensor(&t, c, c->snap[p], ch, HBG_DIR_OUT);
                dep_read(&d, &c->ry[ch]);
                set_fanins(c, &t, &d);
                uint64_t id = add_task(c, &t);
                region_read(c, &c->ry[ch], id);
                c->snap_expect[p][ch] = c->v[ch];
        }
        c->graph_first[p] = first;
        c->graph_last[p] = c->h.prod.next_id - 1;
        harness_end_graph(&c->h, g);
}

static bool check_good_graph(struct ring_ctx *c, unsigned g) {
        unsigned p = g & 1;
        struct hbg_graph_entry ge;
        if (harness_wait_graph(&c->h, g, WAIT_MS, &ge) < 0) {
                fail_ctx(c, "graph %u [%" PRIu64 ", %" PRIu64 "] did not finish", g, c->graph_first[p],
                         c->graph_last[p]);
                return false;
        }
        if (ge.status != 0 || ge.graph_id != g) {
                fail_ctx(c, "graph %u [%" PRIu64 ", %" PRIu64 "]: status %d (%s) at task %" PRIu64 ", id %" PRIu64,
                         g, c->graph_first[p], c->graph_last[p], ge.status, strerror(-ge.status),
                         ge.first_error_task, ge.graph_id);
                return false;
        }
        const float *snap = harness_f32(&c->h, c->snap[p]);
        for (uint32_t ch = 0; ch < CHAINS; ch++) {
                float want = (float)c->snap_expect[p][ch];
                for (uint32_t i = 0; i < LEN; i++) {
                        if (memcmp(&snap[ch * LEN + i], &want, sizeof(want)) != 0) {
                                fail_ctx(c, "graph %u: chain %u element %u is %.9g, expected %.9g", g, ch, i,
                                         (double)snap[ch * LEN + i], (double)want);
                                return false;
                        }
                }
        }
        const float *red = harness_f32(&c->h, c->red[p]);
        for (uint32_t s = 0; s < c->n_red[p]; s++) {
                float want = (float)c->red_expect[p][s];
                if (memcmp(&red[c->red_slot[p][s]], &want, sizeof(want)) != 0) {
                        fail_ctx(c, "graph %u: reduce result %u is %.9g, expected %.9g", g, s,
                                 (double)red[c->red_slot[p][s]], (double)want);
                        return false;
                }
        }
        c->graphs_done++;
        return true;
}

static void run_good(struct ring_ctx *c) {
        c->ones = harness_alloc(&c->h, LEN * 4);
        c->y = harness_alloc(&c->h, CHAINS * LEN * 4);
        c->tmp = harness_alloc(&c->h, CHAINS * LEN * 4);
        for (unsigned p = 0; p < 2; p++) {
                c->snap[p] = harness_alloc(&c->h, CHAINS * LEN * 4);
                c->red[p] = harness_alloc(&c->h, RED_SLOTS * 4);
        }
        float *ones = harness_f32(&c->h, c->ones);
        for (uint32_t i = 0; i < LEN; i++)
                ones[i] = 1.0f;
        float *y = harness_f32(&c->h, c->y);
        for (uint32_t ch = 0; ch < CHAINS; ch++) {
                c->v[ch] = (double)ch - 5.0;
                for (uint32_t i = 0; i < LEN; i++)
                        y[ch * LEN + i] = (float)c->v[ch];
                region_write(&c->ry[ch], NONE);
                region_write(&c->rtmp[ch], NONE);
        }
        for (unsigned i = 0; i < D; i++)
                c->ext[i].id = NONE;
        c->h.external = on_external;
        c->h.external_userdata = c;

        for (unsigned g = 0; g < c->graphs; g++) {
                gen_good_graph(c, g);
                if (g > 0 && !check_good_graph(c, g - 1))
                        return;
        }
        check_good_graph(c, c->graphs - 1);
}

/* ------------------------------------------------------------ failing ring */

static int32_t fail_code(struct rng *r) {
        for (;;) {
                int32_t code = -(int32_t)rng_range(r, 1, 4095);
                /* -ECANCELED is what skipped tasks report: a graph status
                 * would not tell the two apart. */
                if (code != -ECANCELED)
                        return code;
        }
}

static void gen_failing_graph(struct ring_ctx *c, unsigned g) {
        struct rng *r = &c->rng;
        unsigned p = g & 1;
        uint64_t first = c->h.prod.next_id;
        uint32_t size = rng_range(r, 2000, 5000);
        bool failing = g % 2 == 0;
        uint64_t scratch = c->y; /* per-ring scratch written by fills */
        uint64_t ok[32];         /* recent tasks that neither fail nor are skipped */
        unsigned n_ok = 0;

        c->fail_code[p] = 0;
        c->fail_task[p] = NONE;
        while (c->h.prod.next_id - first < size) {
                struct harness_task t = { .block_num = 1 };
                uint64_t pos = c->h.prod.next_id - first;
                /* Failing tasks only where their dependants stay inside
                 * this graph. */
                if (failing && pos + 40 < size && rng_chance(r, 1)) {
                        int32_t code;
                        if (rng_chance(r, 25)) {
                                /* Fails validation: an unknown kernel. */
                                t.lane_mask = 1;
                                t.kernel[0] = 200;
                                code = -ENOENT;
                        } else {
                                set_shape(c, &t, HBG_KERNEL_FAIL);
                                code = fail_code(r);
                                t.n_scalars = 1;
                                t.scalars[0] = (uint64_t)(int64_t)code;
                        }
                        if (n_ok && rng_chance(r, 50)) {
                                t.n_fanins = 1;
                                t.fanins[0] = ok[rng_below(r, n_ok)];
                        }
                        uint64_t f = add_task(c, &t);
                        c->fail_tasks++;
                        if (c->fail_task[p] == NONE) {
                                c->fail_task[p] = f;
                                c->fail_code[p] = code;
                        }
                        /* Dependants (skipped), some chained. */
                        uint64_t last = f;
                        unsigned deps = rng_range(r, 0, 3);
                        for (unsigned i = 0; i < deps; i++) {
                                struct harness_task dt = { .block_num = 1, .n_fanins = 1 };
                                dt.fanins[0] = rng_chance(r, 50) ? f : last;
                                if (rng_chance(r, 50)) {
                                        set_shape(c, &dt, HBG_KERNEL_NOOP);
                                } else if (rng_chance(r, 50)) {
                                        dt.flags = HBG_TASK_HOST_INLINE;
                                }
                                last = add_task(c, &dt);
                        }
                        continue;
                }
                struct deps d = { 0 };
                if (n_ok && rng_chance(r, 60))
                        dep_add(&d, ok[rng_below(r, n_ok)]);
                if (n_ok && rng_chance(r, 30))
                        dep_add(&d, ok[rng_below(r, n_ok)]);
                uint32_t x = rng_below(r, 100);
                if (x < 50) {
                        set_shape(c, &t, HBG_KERNEL_NOOP);
                } else if (x < 80) {
                        /* Fills of the scratch chains: every writer of a
                         * chain is ordered after the previous one. */
                        uint32_t ch = rng_below(r, CHAINS);
                        set_shape(c, &t, HBG_KERNEL_FILL_F32);
                        y_tensor(&t, c, scratch, ch, HBG_DIR_OUT);
                        t.n_scalars = 1;
                        t.scalars[0] = harness_f32_scalar((float)x);
                        /* WAW (possibly on a task of an earlier graph, which
                         * is clean: fills never depend on failing tasks). */
                        dep_add(&d, c->ry[ch].writer);
                } else if (x < 90) {
                        set_shape(c, &t, HBG_KERNEL_SPIN_NS);
                        t.n_scalars = 1;
                        t.scalars[0] = rng_range(r, 0, 300);
                }
                set_fanins(c, &t, &d);
                uint64_t id = add_task(c, &t);
                if (x >= 50 && x < 80) {
                        uint32_t ch = (uint32_t)((t.tensors[0].offset - scratch) / (LEN * 4));
                        region_write(&c->ry[ch], id);
                }
                ok[n_ok < 32 ? n_ok++ : rng_below(r, 32)] = id;
        }
        if (failing && c->fail_task[p] == NONE) {
                /* Make sure a "failing" graph fails: one more at the end. */
                struct harness_task t = { .block_num = 1, .n_scalars = 1 };
                set_shape(c, &t, HBG_KERNEL_FAIL);
                int32_t code = fail_code(r);
                t.scalars[0] = (uint64_t)(int64_t)code;
                c->fail_task[p] = add_task(c, &t);
                c->fail_code[p] = code;
                c->fail_tasks++;
        }
        if (c->fail_task[p] != NONE)
                c->graphs_failed_expected++;
        c->graph_first[p] = first;
        c->graph_last[p] = c->h.prod.next_id - 1;
        harness_end_graph(&c->h, g);
}

static bool check_failing_graph(struct ring_ctx *c, unsigned g) {
        unsigned p = g & 1;
        struct hbg_graph_entry ge;
        if (harness_wait_graph(&c->h, g, WAIT_MS, &ge) < 0) {
                fail_ctx(c, "graph %u did not finish", g);
                return false;
        }
        int32_t want = c->fail_code[p];
        uint64_t want_task = c->fail_task[p] == NONE ? 0 : c->fail_task[p];
        if (ge.status != want || ge.first_error_task != want_task || ge.graph_id != g) {
                fail_ctx(c, "failing ring graph %u [%" PRIu64 ", %" PRIu64 "]: status %d at task %" PRIu64
                         ", expected %d at task %" PRIu64,
                         g, c->graph_first[p], c->graph_last[p], ge.status, ge.first_error_task, want, want_task);
                return false;
        }
        c->graphs_done++;
        return true;
}

static void run_failing(struct ring_ctx *c) {
        c->y = harness_alloc(&c->h, CHAINS * LEN * 4);
        for (uint32_t ch = 0; ch < CHAINS; ch++)
                region_write(&c->ry[ch], NONE);
        for (unsigned g = 0; g < c->graphs; g++) {
                gen_failing_graph(c, g);
                if (g > 0 && !check_failing_graph(c, g - 1))
                        return;
        }
        check_failing_graph(c, c->graphs - 1);
}

/* ------------------------------------------------------------ threads */

static void *ring_main(void *arg) {
        struct ring_ctx *c = arg;
        struct hbg_geometry_request req;
        geometry_request_default(&req);
        req.task_window = D;
        req.flag_window = c->f;
        req.heap_size = 1u << 20;
        req.mailbox_entries = 16;
        req.graph_table_entries = 4;
        c->rng.s = c->seed;
        int err = harness_ring_init(&c->h, c->e, &req, c->first_id);
        if (err < 0) {
                fail_ctx(c, "harness_ring_init: %s", strerror(-err));
                return NULL;
        }
        if (c->failing)
                run_failing(c);
        else
                run_good(c);
        ring_stats(c->h.ring, &c->stats);
        harness_ring_destroy(&c->h);
        return NULL;
}

START_TEST(rings_concurrent) {
        struct hbg_engine_config cfg;
        struct hbg_engine *e = NULL;
        engine_config_default(&cfg);
        cfg.threads = 4;
        cfg.clusters = 8;
        cfg.stall_timeout_ms = 120000;
        ck_assert_int_eq(engine_new(&e, &cfg), 0);

        unsigned graphs = GRAPHS / test_scale();
        if (graphs < 3)
                graphs = 3;
        struct ring_ctx *ctx = calloc(N_RINGS, sizeof(*ctx));
        pthread_t th[N_RINGS];
        ck_assert_ptr_nonnull(ctx);
        for (unsigned i = 0; i < N_RINGS; i++) {
                struct ring_ctx *c = &ctx[i];
                c->e = e;
                c->index = i;
                c->failing = i == N_RINGS - 1;
                c->graphs = graphs;
                c->f = i % 2 ? D : 256; /* half of the rings need the failsafe heap */
                /* Different first ids, some just below a 2^32 boundary. */
                c->first_id = (uint64_t)i * 1000003u + (i % 3 == 0 ? (UINT64_C(1) << 32) - 3000u : 0);
                c->seed = UINT64_C(0xfeedface) + (uint64_t)i * UINT64_C(0x9e3779b97f4a7c15);
                ck_assert_int_eq(pthread_create(&th[i], NULL, ring_main, c), 0);
        }
        for (unsigned i = 0; i < N_RINGS; i++)
                pthread_join(th[i], NULL);

        uint64_t tasks = 0;
        for (unsigned i = 0; i < N_RINGS; i++) {
                struct ring_ctx *c = &ctx[i];
                ck_assert_msg(c->err[0] == 0, "%s", c->err);
                ck_assert_uint_eq(c->graphs_done, graphs);
                ck_assert_uint_eq(c->stats.completed, c->tasks);
                ck_assert_uint_eq(c->stats.watermark, c->first_id + c->tasks);
                ck_assert_uint_eq(c->stats.graphs_retired, graphs);
                ck_assert(!c->stats.broken);
                if (c->failing) {
                        ck_assert_uint_eq(c->stats.graphs_failed, c->graphs_failed_expected);
                        ck_assert_uint_ge(c->stats.failed, c->fail_tasks);
                        ck_assert_int_ne(c->stats.error, 0);
                        ck_assert_uint_eq(c->graphs_failed_expected, (graphs + 1) / 2);
                } else {
                        ck_assert_uint_eq(c->stats.graphs_failed, 0);
                        ck_assert_uint_eq(c->stats.failed, 0);
                        ck_assert_int_eq(c->stats.error, 0);
                        ck_assert_uint_eq(c->ext_calls, c->externals);
                }
                tasks += c->tasks;
        }
        uint64_t pushes = 0;
        for (unsigned i = 0; i < engine_threads(e); i++) {
                struct hbg_thread_stats st;
                engine_thread_stats(e, i, &st);
                pushes += st.failsafe_pushes;
        }
        printf("rings: %u rings x %u graphs, %" PRIu64 " tasks, failing ring: %" PRIu64 " of %u graphs failed, %"
               PRIu64 " failing tasks; failsafe pushes %" PRIu64 "\n",
               N_RINGS, graphs, tasks, ctx[N_RINGS - 1].graphs_failed_expected, graphs,
               ctx[N_RINGS - 1].fail_tasks, pushes);
        fflush(stdout);
        free(ctx);
        engine_free(e);
}
END_TEST

/* ------------------------------------------------------------ fair share */

/* One scheduler thread's turns (fair_share.h): the share it may start
 * a kernel of next, of those in `waiting`; n slots. Exactly one. */
static unsigned turn_next(unsigned serving, unsigned credit, const uint64_t *waiting, unsigned n) {
        unsigned allowed = n, count = 0;
        for (unsigned x = 0; x < n; x++)
                if (fair_share_bit(waiting, x) && fair_share_turn_allows(serving, credit, x, false, waiting, n)) {
                        allowed = x;
                        count++;
                }
        ck_assert_msg(count == 1, "serving %u credit %u: %u shares may start, expected exactly one", serving,
                      credit, count);
        return allowed;
}

/*
 * The turn rule (RUNTIME_LOGIC.md §9.5, docs/SECURITY.md): with every
 * share waiting, a thread serves them in slot order, each for its weight;
 * a share that starts waiting at any point of the cycle gets its turn
 * after at most the other shares' weights in kernels; a share at its
 * thread cap yields to any waiting share but runs alone.
 */
START_TEST(fair_share_turns) {
        enum { N = 12 };
        const unsigned shares[] = { 1, 4, 6, 9, 11 }, weights[N] = { [1] = 1, [4] = 3, [6] = 2, [9] = 1, [11] = 5 };
        const unsigned n_shares = sizeof(shares) / sizeof(shares[0]);
        unsigned cycle = 0;
        uint64_t waiting[FAIR_SHARE_WORDS] = { 0 };
        for (unsigned i = 0; i < n_shares; i++) {
                waiting[0] |= UINT64_C(1) << shares[i];
                cycle += weights[shares[i]];
        }
        /* Whole cycles: every share its weight, in order, whatever the
         * thread served last. */
        for (unsigned first = 0; first < N; first++) {
                unsigned serving = first, credit = 0, served[N] = { 0 };
                for (unsigned k = 0; k < 10 * cycle; k++) {
                        unsigned x = turn_next(serving, credit, waiting, N);
                        fair_share_turn_take(&serving, &credit, x, weights[x]);
                        served[x]++;
                }
                for (unsigned i = 0; i < n_shares; i++)
                        ck_assert_uint_eq(served[shares[i]], 10 * weights[shares[i]]);
        }
        /* Share u starts waiting after `start` kernels of the others: at
         * most the others' weights in kernels start before u's. */
        for (unsigned ui = 0; ui < n_shares; ui++) {
                unsigned u = shares[ui], others = cycle - weights[u];
                uint64_t without[FAIR_SHARE_WORDS] = { waiting[0] & ~(UINT64_C(1) << u) };
                for (unsigned start = 0; start < 2 * cycle; start++) {
                        unsigned serving = 0, credit = 0, before = 0;
                        for (unsigned k = 0; k < start; k++) {
                                unsigned x = turn_next(serving, credit, without, N);
                                fair_share_turn_take(&serving, &credit, x, weights[x]);
                        }
                        for (;;) {
                                unsigned x = turn_next(serving, credit, waiting, N);
                                fair_share_turn_take(&serving, &credit, x, weights[x]);
                                if (x == u)
                                        break;
                                before++;
                        }
                        ck_assert_msg(before <= others,
                                      "share %u waited for %u kernels of others (their weights: %u)", u, before,
                                      others);
                }
        }
        /* A share at its cap yields to any waiting share, whatever its
         * credit, and runs when nobody else waits. */
        ck_assert(!fair_share_turn_allows(4, 2, 4, true, waiting, N));
        uint64_t alone[FAIR_SHARE_WORDS] = { UINT64_C(1) << 4 };
        ck_assert(fair_share_turn_allows(4, 0, 4, true, alone, N));
        ck_assert(fair_share_turn_allows(9, 0, 4, false, alone, N));
        /* Credit left keeps the turn even with others waiting. */
        ck_assert(fair_share_turn_allows(11, 1, 11, false, waiting, N));
        ck_assert(!fair_share_turn_allows(11, 1, 1, false, waiting, N));
        /* The largest slot count, and the distance wrapping. */
        uint64_t last[FAIR_SHARE_WORDS] = { 0 };
        last[FAIR_SHARE_WORDS - 1] = UINT64_C(1) << 63;
        ck_assert(!fair_share_turn_allows(0, 0, 0, false, last, 64 * FAIR_SHARE_WORDS));
        ck_assert(fair_share_turn_allows(64 * FAIR_SHARE_WORDS - 1, 0, 0, false, last, 64 * FAIR_SHARE_WORDS));
        ck_assert_uint_eq(fair_share_distance(5, 5, 8), 7);
        ck_assert_uint_eq(fair_share_distance(7, 0, 8), 0);
}
END_TEST

/*
 * More rings than threads, in more shares than threads (fair share takes
 * turns before every kernel, §9.5): every graph finishes. A rule that
 * lets every thread give way to a share with fewer threads sends every
 * thread away from every ring for ever (hbgd was seen livelocked so with
 * 8 producers of gemm tiles on 4 threads); turns must always leave one
 * share allowed. Rings i and i + FAIR_SHARES share a share.
 * _i: the completion policy.
 */
#define FAIR_RINGS 6u
#define FAIR_SHARES 4u
#define FAIR_TASKS 12u
#define FAIR_SPIN_NS 200000u

struct fair_ctx {
        struct hbg_engine *e;
        unsigned index;
        int result;             /* of the graph's wait */
};

static void *fair_ring_main(void *arg) {
        struct fair_ctx *c = arg;
        struct harness_ring h;
        struct hbg_geometry_request req;
        geometry_request_default(&req);
        req.task_window = 256;
        req.flag_window = 256;
        req.heap_size = 1u << 20;
        req.graph_table_entries = 64;
        req.mailbox_entries = 64;
        c->result = harness_ring_init_share(&h, c->e, &req, (uint64_t)c->index * 1000u, c->index % FAIR_SHARES,
                                            1 + c->index % 3);
        if (c->result < 0)
                return NULL;
        for (unsigned i = 0; i < FAIR_TASKS; i++) {
                struct harness_task t = { .kernel = { HBG_KERNEL_SPIN_NS }, .lane_mask = 1, .block_num = 1,
                                          .n_scalars = 1, .scalars = { FAIR_SPIN_NS } };
                harness_add_task(&h, &t);
        }
        uint64_t k = harness_end_graph(&h, 0);
        struct hbg_graph_entry ent;
        /* 72 tasks of 0.2 ms on 2 threads take ~10 ms; 30 s means stuck. */
        c->result = harness_wait_graph(&h, k, 30000, &ent);
        if (c->result == 0)
                c->result = ent.status;
        harness_ring_destroy(&h);
        return NULL;
}

START_TEST(rings_outnumber_threads_long_tasks) {
        struct hbg_engine_config cfg;
        struct hbg_engine *e = NULL;
        engine_config_default(&cfg);
        cfg.threads = 2;
        cfg.clusters = 4;
        cfg.completion_mode = _i;
        ck_assert_int_eq(engine_new(&e, &cfg), 0);
        struct fair_ctx ctx[FAIR_RINGS];
        pthread_t th[FAIR_RINGS];
        for (unsigned i = 0; i < FAIR_RINGS; i++) {
                ctx[i] = (struct fair_ctx){ .e = e, .index = i };
                ck_assert_int_eq(pthread_create(&th[i], NULL, fair_ring_main, &ctx[i]), 0);
        }
        for (unsigned i = 0; i < FAIR_RINGS; i++)
                pthread_join(th[i], NULL);
        for (unsigned i = 0; i < FAIR_RINGS; i++)
                ck_assert_msg(ctx[i].result == 0,
                              "%s: ring %u of %u (2 threads, long tasks): graph wait returned %d%s",
                              completion_mode_name(_i), i, FAIR_RINGS,
                              ctx[i].result,
                              ctx[i].result == -ETIMEDOUT ? " (no progress in 30 s: fair share livelock)" : "");
        engine_free(e);
}
END_TEST

/* A ring added with serve_later is not visited (RUNTIME_LOGIC.md §9.3):
 * its graph waits while another ring's runs, until it is served; one never
 * served, removed, has its graph failed and is freed. */
static uint64_t noop_graph(struct harness_ring *h, uint64_t graph_id) {
        struct harness_task t = { .kernel = { HBG_KERNEL_NOOP, HBG_KERNEL_NOOP }, .lane_mask = 3, .block_num = 1 };
        harness_add_task(h, &t);
        return harness_end_graph(h, graph_id);
}

START_TEST(ring_served_later) {
        struct hbg_engine_config cfg;
        struct hbg_engine *e = NULL;
        engine_config_default(&cfg);
        cfg.threads = 2;
        cfg.completion_mode = _i;
        ck_assert_int_eq(engine_new(&e, &cfg), 0);
        struct hbg_geometry_request req;
        geometry_request_default(&req);
        req.task_window = D;
        req.flag_window = D;
        req.heap_size = 1u << 20;
        req.mailbox_entries = 16;
        req.graph_table_entries = 4;
        struct harness_ring later, now, never;
        ck_assert_int_eq(harness_ring_init_unserved(&later, e, &req, 1), 0);
        ck_assert_int_eq(harness_ring_init(&now, e, &req, 1), 0);
        ck_assert_int_eq(harness_ring_init_unserved(&never, e, &req, 1), 0);
        uint64_t k_later = noop_graph(&later, 1), k_now = noop_graph(&now, 2), k_never = noop_graph(&never, 3);
        struct hbg_graph_entry ge;
        ck_assert_int_eq(harness_wait_graph(&now, k_now, 10000, &ge), 0);
        ck_assert_int_eq(ge.status, 0);
        /* The threads ran the other ring's graph and parked: this one's,
         * published as early, was never looked at. */
        ck_assert_msg(harness_wait_graph(&later, k_later, 300, &ge) == -ETIMEDOUT,
                      "%s: a graph of a ring not served yet ran", completion_mode_name(_i));
        struct ring_stats st;
        ring_stats(later.ring, &st);
        ck_assert_uint_eq(st.completed, 0);
        ck_assert_uint_eq(st.classified, 1); /* its claim cursor: nothing claimed */
        harness_ring_serve(&later);
        ck_assert_int_eq(harness_wait_graph(&later, k_later, 10000, &ge), 0);
        ck_assert_int_eq(ge.status, 0);
        ck_assert_uint_eq(ge.graph_id, 1);
        harness_ring_remove(&never, -ECONNRESET);
        ck_assert_int_eq(harness_wait_graph(&never, k_never, 1000, &ge), 0);
        ck_assert_int_eq(ge.status, -ECONNRESET);
        harness_ring_destroy(&later);
        harness_ring_destroy(&now);
        harness_ring_destroy(&never);
        engine_free(e);
}
END_TEST

static Suite *suite(void) {
        Suite *s = suite_create("engine_rings");
        TCase *tc = tcase_create("rings");
        tcase_set_timeout(tc, 900);
        tcase_add_test(tc, rings_concurrent);
        tcase_add_loop_test(tc, rings_outnumber_threads_long_tasks, 0, (int)completion_mode_count());
        tcase_add_test(tc, fair_share_turns);
        tcase_add_loop_test(tc, ring_served_later, 0, (int)completion_mode_count());
        suite_add_tcase(s, tc);
        return s;
}

const struct check_main check_main = { .suite = suite };
