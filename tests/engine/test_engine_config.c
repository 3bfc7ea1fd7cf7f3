/* SPDX-License-Identifier: MIT */
/*
 * The engine's configuration and rings end to end: limits a
 * configuration may not pass, every completion mode in the docs and the
 * default named there, small and uneven settings; rings added beyond the
 * maximum and removed with a graph in flight (helpers: behaviour_util.h).
 */
#include <check.h>
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <poll.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "daemon/engine/engine.h"
#include "daemon/engine/engine_stats.h"
#include "daemon/engine/ktime.h"
#include "daemon/engine/kernels.h"
#include "tests/engine/behaviour_util.h"
#include "tests/engine/harness.h"
#include "tests/test_util.h"
#include "common/clock.h"
#include "tests/check_main.h"

/* ------------------------------------------------------------ config */

START_TEST(config_limits) {
        const struct {
                const char *field;
                unsigned threads, clusters, batch, rings;
                uint64_t spin;
        } bad[] = {
                { "threads", 0, 8, 64, 256, 0 },     { "threads", 65, 8, 64, 256, 0 },
                { "clusters", 4, 0, 64, 256, 0 },    { "clusters", 4, 1025, 64, 256, 0 },
                { "classify_batch", 4, 8, 0, 256, 0 }, { "classify_batch", 4, 8, 4097, 256, 0 },
                { "max_rings", 4, 8, 64, 0, 0 },     { "max_rings", 4, 8, 64, 1025, 0 },
                { "spin_before_park_ns", 4, 8, 64, 256, UINT64_C(1000000001) },
        };
        for (unsigned i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
                struct hbg_engine_config cfg;
                engine_config_default(&cfg);
                cfg.threads = bad[i].threads;
                cfg.clusters = bad[i].clusters;
                cfg.classify_batch = bad[i].batch;
                cfg.max_rings = bad[i].rings;
                if (bad[i].spin)
                        cfg.spin_before_park_ns = bad[i].spin;
                cfg.log = quiet_log;
                const char *why = NULL;
                ck_assert_int_eq(engine_config_validate(&cfg, &why), -ERANGE);
                ck_assert_ptr_nonnull(why);
                ck_assert_msg(strncmp(why, bad[i].field, strlen(bad[i].field)) == 0,
                              "case %u: message \"%s\" does not name %s", i, why, bad[i].field);
                struct hbg_engine *e = NULL;
                ck_assert_int_eq(engine_new(&e, &cfg), -ERANGE);
                ck_assert_ptr_null(e);
        }
        struct hbg_engine_config cfg;
        engine_config_default(&cfg);
        ck_assert_int_eq(engine_config_validate(&cfg, NULL), 0);
        /* Every policy of the table is valid; anything else is not. */
        for (unsigned m = 0; m < completion_mode_count(); m++) {
                cfg.completion_mode = m;
                ck_assert_int_eq(engine_config_validate(&cfg, NULL), 0);
        }
        cfg.completion_mode = completion_mode_count();
        ck_assert_int_eq(engine_config_validate(&cfg, NULL), -EINVAL);
        cfg.completion_mode = 99;
        ck_assert_int_eq(engine_config_validate(&cfg, NULL), -EINVAL);
        /* The resolver needs a thread besides the schedulers. */
        ck_assert_int_eq(completion_mode_parse("resolver", &cfg.completion_mode), 0);
        ck_assert_uint_eq(completion_mode_min_threads(cfg.completion_mode), 2);
        cfg.threads = 1;
        const char *why = NULL;
        ck_assert_int_eq(engine_config_validate(&cfg, &why), -EINVAL);
        ck_assert_ptr_nonnull(strstr(why, "resolver"));
        cfg.threads = 2;
        ck_assert_int_eq(engine_config_validate(&cfg, NULL), 0);
}
END_TEST

/* Every place a doc lists the completion modes names every mode of the
 * engine's table: from `begin` to `end` (exclusive) in the file. */
static const struct {
        const char *file, *begin, *end;
} mode_lists[] = {
        { "README.md", "eager completion watermark", "\n\n" },
        { "docs/GLOSSARY.md", "| **completion mode** |", "\n" },
        { "docs/OPERATIONS.md", "| scheduler | `completion_mode` |", "\n" },
        { "docs/RUNTIME_LOGIC.md", "The seed's three designs", "\n\n" },
        { "docs/man/hbgd.8", ".BI \\-\\-completion= MODE", "\n.TP" },
        { "docs/man/hbgd.conf.5", ".BR completion_mode ", "\n.SH" },
        { "systemd/hbgd.conf.example", "; How completions move", ";completion_mode" },
        { "tests/fuzz/corpus/config/example.conf", "; How completions move", ";completion_mode" },
};

static bool names_word(const char *b, const char *e, const char *word) {
        size_t n = strlen(word);
        for (const char *p = b; p + n <= e; p++) {
                if (memcmp(p, word, n) != 0)
                        continue;
                bool left = p == b || !(p[-1] == '-' || (p[-1] >= 'a' && p[-1] <= 'z'));
                bool right = p + n == e || !(p[n] == '-' || (p[n] >= 'a' && p[n] <= 'z'));
                if (left && right)
                        return true;
        }
        return false;
}

START_TEST(docs_list_every_completion_mode) {
        static char doc[1 << 18];
        for (size_t i = 0; i < sizeof(mode_lists) / sizeof(mode_lists[0]); i++) {
                char path[512];
                snprintf(path, sizeof(path), "%s/%s", HBG_SRCDIR, mode_lists[i].file);
                FILE *f = fopen(path, "r");
                ck_assert_msg(f, "cannot open %s", path);
                size_t n = fread(doc, 1, sizeof(doc) - 1, f);
                fclose(f);
                doc[n] = 0;
                const char *b = strstr(doc, mode_lists[i].begin);
                ck_assert_msg(b, "%s: no '%s'", mode_lists[i].file, mode_lists[i].begin);
                const char *e = strstr(b + strlen(mode_lists[i].begin), mode_lists[i].end);
                ck_assert_msg(e, "%s: no '%s' after '%s'", mode_lists[i].file, mode_lists[i].end,
                              mode_lists[i].begin);
                for (unsigned m = 0; m < completion_mode_count(); m++)
                        ck_assert_msg(names_word(b, e, completion_mode_name(m)),
                                      "%s: the completion modes at '%s' leave out %s", mode_lists[i].file,
                                      mode_lists[i].begin, completion_mode_name(m));
        }
}
END_TEST

/* Every place a doc names the default completion mode names the table's
 * default (HBG_COMPLETION_DEFAULT): `before`, the mode's name, `after`
 * occur together in the file. */
static const struct {
        const char *file, *before, *after;
} default_mentions[] = {
        { "README.md", "(`", "`, the default" },
        { "docs/GLOSSARY.md", "`", "` (default)" },
        { "docs/OPERATIONS.md", "| scheduler | `completion_mode` | ", " |" },
        { "docs/RUNTIME_LOGIC.md", "The default is the table's first entry, `", "`" },
        { "docs/man/hbgd.8", ".B ", "\n(default" },
        { "docs/man/hbgd.conf.5", ".BR completion_mode \" (name, default ", ";" },
        { "systemd/hbgd.conf.example", "\n;completion_mode = ", "\n" },
        { "tests/fuzz/corpus/config/example.conf", "\n;completion_mode = ", "\n" },
};

START_TEST(docs_name_the_default_completion_mode) {
        static char doc[1 << 18];
        const char *mode = completion_mode_name(HBG_COMPLETION_DEFAULT);
        ck_assert_ptr_nonnull(mode);
        for (size_t i = 0; i < sizeof(default_mentions) / sizeof(default_mentions[0]); i++) {
                char path[512], want[256];
                snprintf(path, sizeof(path), "%s/%s", HBG_SRCDIR, default_mentions[i].file);
                FILE *f = fopen(path, "r");
                ck_assert_msg(f, "cannot open %s", path);
                size_t n = fread(doc, 1, sizeof(doc) - 1, f);
                fclose(f);
                doc[n] = 0;
                snprintf(want, sizeof(want), "%s%s%s", default_mentions[i].before, mode, default_mentions[i].after);
                ck_assert_msg(strstr(doc, want), "%s does not name the default completion mode %s: no '%s'",
                              default_mentions[i].file, mode, want);
        }
}
END_TEST

/* One graph of every shape on the engine; checks outputs. */
static void run_shapes(struct hbg_engine *e) {
        struct harness_ring h;
        ring_open(&h, e, 256, 256, 3);
        uint64_t n = 999;
        uint64_t a = harness_alloc(&h, n * 4), b = harness_alloc(&h, n * 4), c = harness_alloc(&h, n * 4);
        uint64_t s = harness_alloc(&h, 4);
        struct harness_task fa = fill_task(a, n, 1.25f, 7, 6);  /* MIX */
        uint64_t t_a = harness_add_task(&h, &fa);
        struct harness_task fb = fill_task(b, n, 2.0f, 1, 5);   /* AIC */
        uint64_t t_b = harness_add_task(&h, &fb);
        struct harness_task ad = { .kernel = { 0, HBG_KERNEL_ADD_F32 }, .lane_mask = 2, .block_num = 9,
                                   .n_tensors = 3 };            /* AIV */
        ad.tensors[0] = harness_tensor(a, n * 4, HBG_DIR_IN);
        ad.tensors[1] = harness_tensor(b, n * 4, HBG_DIR_IN);
        ad.tensors[2] = harness_tensor(c, n * 4, HBG_DIR_OUT);
        add_dep(&ad, t_a);
        add_dep(&ad, t_b);
        uint64_t t_c = harness_add_task(&h, &ad);
        struct harness_task red = { .kernel = { HBG_KERNEL_REDUCE_SUM_F32, 0, HBG_KERNEL_REDUCE_SUM_F32 },
                                    .lane_mask = 5, .block_num = 3, .n_tensors = 2 };
        red.tensors[0] = harness_tensor(c, n * 4, HBG_DIR_IN);
        red.tensors[1] = harness_tensor(s, 4, HBG_DIR_OUT);
        add_dep(&red, t_c);
        harness_add_task(&h, &red);
        wait_graph_ok(&h, harness_end_graph(&h, 1));
        ck_assert(all_eq(&h, c, n, 3.25f));
        ck_assert_float_eq(harness_f32(&h, s)[0], 3.25f * (float)n);
        harness_ring_destroy(&h);
}

START_TEST(config_small_and_uneven) {
        /* 1 thread owns the only cluster. */
        struct hbg_engine *e = engine_new_with(1, 1, 10000);
        struct hbg_thread_stats t;
        ck_assert_uint_eq(engine_threads(e), 1);
        engine_thread_stats(e, 0, &t);
        ck_assert_uint_eq(t.clusters, 1);
        run_shapes(e);
        engine_free(e);

        /* 8 threads, 2 clusters: two threads own one each, six own none. */
        e = engine_new_with(8, 2, 10000);
        ck_assert_uint_eq(engine_threads(e), 8);
        unsigned sum = 0, owners = 0;
        for (unsigned i = 0; i < 8; i++) {
                engine_thread_stats(e, i, &t);
                ck_assert_uint_le(t.clusters, 1);
                sum += t.clusters;
                owners += t.clusters != 0;
        }
        ck_assert_uint_eq(sum, 2);
        ck_assert_uint_eq(owners, 2);
        run_shapes(e);
        struct hbg_thread_stats s;
        stats_sum(e, &s);
        ck_assert_uint_gt(s.dispatched, 0);
        for (unsigned i = 0; i < 8; i++) {
                engine_thread_stats(e, i, &t);
                if (t.clusters == 0)
                        ck_assert_msg(t.dispatched == 0, "thread %u owns no cluster but dispatched %llu",
                                      i, (unsigned long long)t.dispatched);
        }
        engine_free(e);

        /* The upper bounds are accepted. */
        e = engine_new_with(64, 1024, 10000);
        sum = 0;
        for (unsigned i = 0; i < 64; i++) {
                engine_thread_stats(e, i, &t);
                ck_assert_uint_eq(t.clusters, 16);
                sum += t.clusters;
        }
        ck_assert_uint_eq(sum, 1024);
        run_shapes(e);
        engine_free(e);
}
END_TEST

/* ------------------------------------------------------------ rings */

START_TEST(ring_add_beyond_max) {
        struct hbg_engine_config cfg;
        struct hbg_engine *e = NULL;
        engine_config_default(&cfg);
        cfg.threads = 2;
        cfg.clusters = 2;
        cfg.max_rings = 2;
        cfg.log = quiet_log;
        ck_assert_int_eq(engine_new(&e, &cfg), 0);
        struct harness_ring r1, r2, r3;
        ring_open(&r1, e, 256, 256, 0);
        ring_open(&r2, e, 256, 256, 0);
        struct hbg_geometry_request req;
        geometry_request_default(&req);
        req.task_window = 256;
        req.flag_window = 256;
        req.heap_size = 1u << 16;
        ck_assert_int_eq(harness_ring_init(&r3, e, &req, 0), -ENOSPC);
        ck_assert_ptr_null(r3.ring);
        harness_ring_destroy(&r3);
        /* A freed slot is reusable. */
        harness_ring_destroy(&r1);
        ck_assert_int_eq(harness_ring_init(&r3, e, &req, 0), 0);
        struct harness_ring *rs[2] = { &r2, &r3 };
        for (int i = 0; i < 2; i++) {
                uint64_t o = harness_alloc(rs[i], 64);
                struct harness_task t = fill_task(o, 16, 7.0f, 1, 1);
                harness_add_task(rs[i], &t);
                wait_graph_ok(rs[i], harness_end_graph(rs[i], 0));
                ck_assert(all_eq(rs[i], o, 16, 7.0f));
        }
        harness_ring_destroy(&r2);
        harness_ring_destroy(&r3);
        engine_free(e);
}
END_TEST

START_TEST(ring_remove_with_graph_in_flight) {
        struct hbg_engine *e = engine_new_with(2, 2, 10000);
        struct harness_ring ha, hb;
        ring_open(&ha, e, 256, 256, 0);
        ring_open(&hb, e, 256, 256, 0);
        uint64_t ao = harness_alloc(&ha, 64), bo = harness_alloc(&hb, 64);
        fill_host(&ha, ao, 16, -1.0f);

        /* A: a chain of long tasks (~2 s if run to the end). */
        uint64_t prev = 0;
        for (int i = 0; i < 10; i++) {
                struct harness_task t = spin_task(200 * 1000 * 1000, 2);
                if (i)
                        add_dep(&t, prev);
                prev = harness_add_task(&ha, &t);
        }
        struct harness_task tail = fill_task(ao, 16, 1.0f, 1, 1);
        add_dep(&tail, prev);
        harness_add_task(&ha, &tail);
        uint64_t ka = harness_end_graph(&ha, 0xa);
        /* B: in flight too. */
        struct harness_task tb = spin_task(50 * 1000 * 1000, 1);
        uint64_t t_b = harness_add_task(&hb, &tb);
        struct harness_task fb = fill_task(bo, 16, 2.0f, 2, 1);
        add_dep(&fb, t_b);
        harness_add_task(&hb, &fb);
        uint64_t kb = harness_end_graph(&hb, 0xb);

        /* Wait until A's first task was claimed, then remove A. */
        int64_t deadline = clock_now_ms() + WAIT_MS;
        while (atomic_load(&ha.ch->classified) == 0) {
                ck_assert(clock_now_ms() < deadline);
                sleep_ms(1);
        }
        harness_ring_remove(&ha, -ECONNRESET);
        struct hbg_graph_entry ge;
        ck_assert_int_eq(layout_graph_entry_read((struct hbg_graph_entry *)(void *)((char *)ha.cpl +
                                                                                 ha.g.cpl_graphs_offset) + ka,
                                              ka, &ge), 0);
        ck_assert_int_eq(ge.status, -ECONNRESET);
        ck_assert_uint_eq(ge.graph_id, 0xa);
        ck_assert_str_eq(ge.message, "session stopped");
        ck_assert_uint_eq(atomic_load(&ha.ch->graphs_retired), 1);
        ck_assert(all_eq(&ha, ao, 16, -1.0f));
        /* Free A's regions now: a thread still touching them is a
         * use-after-free under ASan. */
        harness_ring_destroy(&ha);

        wait_graph_ok(&hb, kb);
        ck_assert(all_eq(&hb, bo, 16, 2.0f));
        for (int g = 0; g < 3; g++) {
                struct harness_task t = fill_task(bo, 16, 3.0f + (float)g, 4, 2);
                harness_add_task(&hb, &t);
                wait_graph_ok(&hb, harness_end_graph(&hb, (uint64_t)g));
                ck_assert(all_eq(&hb, bo, 16, 3.0f + (float)g));
        }
        harness_ring_destroy(&hb);
        engine_free(e);
}
END_TEST

/* One case per area, so CK_RUN_CASE=<area> runs one area. */
static Suite *suite(void) {
        Suite *s = suite_create("engine_config");
        TCase *tc = behaviour_case(s, "config");
        tcase_add_test(tc, config_limits);
        tcase_add_test(tc, docs_list_every_completion_mode);
        tcase_add_test(tc, docs_name_the_default_completion_mode);
        tcase_add_test(tc, config_small_and_uneven);
        tc = behaviour_case(s, "rings");
        tcase_add_test(tc, ring_add_beyond_max);
        tcase_add_test(tc, ring_remove_with_graph_in_flight);
        return s;
}

const struct check_main check_main = { .suite = suite };
