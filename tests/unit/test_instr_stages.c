/* SPDX-License-Identifier: MIT */
/*
 * hbg-bench's instructions by stage (bench/callgrind_files.c,
 * bench/instr_stages.c): a profile written here in callgrind's format,
 * with and without name compression, inlined files and calls, read back
 * file by file; the stage tables against the tree's own files.
 */
#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench/callgrind_files.h"
#include "bench/instr_stages.h"
#include "tests/check_main.h"

/* A new file in $TMPDIR (else /tmp) with text, its name into path (256
 * bytes); the caller unlinks it. */
static void write_profile(char *path, const char *text) {
        const char *dir = getenv("TMPDIR");
        snprintf(path, 256, "%s/hbg-test-cg-XXXXXX", dir && *dir ? dir : "/tmp");
        int fd = mkstemp(path);
        ck_assert_int_ge(fd, 0);
        FILE *f = fdopen(fd, "w");
        ck_assert_ptr_nonnull(f);
        fputs(text, f);
        ck_assert_int_eq(fclose(f), 0);
}

static uint64_t file_ir(const struct cg_files *p, const char *name) {
        for (size_t i = 0; i < p->n; i++)
                if (p->v[i].name && strcmp(p->v[i].name, name) == 0)
                        return p->v[i].ir;
        ck_abort_msg("no file %s in the profile", name);
        return 0;
}

/* Costs: validate.c 100 + 50, ring.h inlined into it 7 + 3 (its own), a
 * call's inclusive 999 (not its own), kernels.c 20 + 2, strcmp 5, the
 * bench's producer.c 11 without compression: 198 in all. */
static const char profile[] = "version: 1\n"
                              "creator: callgrind-3.19.0\n"
                              "positions: line\n"
                              "events: Ir\n"
                              "\n"
                              "ob=(1) /x/hbgd\n"
                              "fl=(1) /x/daemon/engine/validate.c\n"
                              "fn=(1) validate_task\n"
                              "10 100\n"
                              "+2 50\n"
                              "fi=(2) ./daemon/engine/ring.h\n"
                              "* 7\n"
                              "fe=(1)\n"
                              "-1 3\n"
                              "cfl=(3) /x/daemon/engine/kernels.c\n"
                              "cfn=(2) kernel_lookup\n"
                              "calls=1 50\n"
                              "12 999\n"
                              "\n"
                              "fl=(3)\n"
                              "fn=(2)\n"
                              "50 20\n"
                              "fl=(4) ./string/strcmp.S\n"
                              "fn=(3) strcmp\n"
                              "1 5\n"
                              "fl=/x/bench/producer.c\n"
                              "fn=add_task\n"
                              "5 11\n"
                              "fl=(3)\n"
                              "fn=(2)\n"
                              "51 2\n"
                              "\n"
                              "summary: 198\n"
                              "totals: 198\n";

START_TEST(test_files_add_up) {
        char path[256];
        write_profile(path, profile);
        struct cg_files p;
        int err = cg_files_read(path, &p);
        unlink(path);
        ck_assert_int_eq(err, 0);
        ck_assert_uint_eq(p.total, 198);
        ck_assert_uint_eq(file_ir(&p, "/x/daemon/engine/validate.c"), 160);
        ck_assert_uint_eq(file_ir(&p, "/x/daemon/engine/kernels.c"), 22);
        ck_assert_uint_eq(file_ir(&p, "./string/strcmp.S"), 5);
        ck_assert_uint_eq(file_ir(&p, "/x/bench/producer.c"), 11);
        ck_assert_uint_eq(file_ir(&p, "./daemon/engine/ring.h"), 0);
        uint64_t sum = 0;
        for (size_t i = 0; i < p.n; i++)
                sum += p.v[i].ir;
        ck_assert_uint_eq(sum, p.total);

        /* By stage, a run of 11 tasks against a base that is the same
         * profile: nothing per task; the run alone: its cost over 10. */
        double v[INSTR_STAGES_MAX];
        struct cg_files none = { 0 };
        instr_stages_per_task(&instr_stages_hbgd, &p, &p, 11, v);
        for (unsigned i = 0; i < instr_stages_hbgd.n; i++)
                ck_assert(v[i] == 0);
        instr_stages_per_task(&instr_stages_hbgd, &p, &none, 11, v);
        unsigned val = instr_stage_of(&instr_stages_hbgd, "/x/daemon/engine/validate.c");
        ck_assert_str_eq(instr_stages_hbgd.v[val].name, "validate");
        ck_assert(v[val] == 18.2);
        ck_assert(v[instr_stages_hbgd.n - 1] == 1.6); /* strcmp and the bench's file */
        cg_files_free(&p);
}
END_TEST

START_TEST(test_refused) {
        static const char *const bad[] = {
                "events: Dr Ir\nfl=(1) a.c\nfn=(1) f\n1 2 3\n", /* Ir not first */
                "fl=(1) a.c\nfn=(1) f\n1 2\n",                   /* no events line */
                "events: Ir\nfl=(x) a.c\n1 2\n",                 /* a broken file id */
        };
        for (unsigned i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
                char path[256];
                write_profile(path, bad[i]);
                struct cg_files p;
                int err = cg_files_read(path, &p);
                unlink(path);
                ck_assert_msg(err == -EPROTO, "profile %u: %d", i, err);
        }
        struct cg_files p;
        ck_assert_int_eq(cg_files_read("/nonexistent/callgrind.out", &p), -ENOENT);
}
END_TEST

static unsigned stage_named(const struct instr_stages *s, const char *name) {
        for (unsigned i = 0; i < s->n; i++)
                if (strcmp(s->v[i].name, name) == 0)
                        return i;
        ck_abort_msg("no stage %s", name);
        return 0;
}

START_TEST(test_stage_names) {
        const struct instr_stages *h = &instr_stages_hbgd, *p = &instr_stages_producer;
        ck_assert_uint_eq(instr_stage_of(h, "/work/x/daemon/engine/dispatch.c"), stage_named(h, "run"));
        ck_assert_uint_eq(instr_stage_of(h, "daemon/engine/ready.c"), stage_named(h, "ready"));
        ck_assert_uint_eq(instr_stage_of(h, "/work/x/shm/completion.c"), stage_named(h, "complete"));
        /* A longer name that ends the same is another file. */
        ck_assert_uint_eq(instr_stage_of(h, "/work/x/daemon/myengine/ready.c"), h->n - 1);
        ck_assert_uint_eq(instr_stage_of(h, "./string/strcmp.S"), h->n - 1);
        ck_assert_uint_eq(instr_stage_of(p, "/work/x/bench/producer.c"), stage_named(p, "bench"));
        ck_assert_uint_eq(instr_stage_of(p, "bench/dag.c"), stage_named(p, "bench"));
        ck_assert_uint_eq(instr_stage_of(p, "/work/x/mybench/dag.c"), p->n - 1);
        ck_assert_uint_eq(instr_stage_of(p, "/work/x/libclient/graph.c"), stage_named(p, "add"));
        ck_assert_str_eq(h->v[h->n - 1].name, "other");
        ck_assert_str_eq(p->v[p->n - 1].name, "other");
}
END_TEST

/* Every file a stage names is in the tree (hbgd's under daemon/): a file
 * renamed would otherwise move its cost to "other" unseen. */
START_TEST(test_stage_files_exist) {
        const struct instr_stages *sets[] = { &instr_stages_hbgd, &instr_stages_producer };
        for (unsigned k = 0; k < 2; k++)
                for (unsigned i = 0; i + 1 < sets[k]->n; i++)
                        for (const char *const *f = sets[k]->v[i].files; *f; f++) {
                                char a[512], b[512];
                                snprintf(a, sizeof(a), "%s/%s", HBG_SRCDIR, *f);
                                snprintf(b, sizeof(b), "%s/daemon/%s", HBG_SRCDIR, *f);
                                ck_assert_msg(access(a, F_OK) == 0 || access(b, F_OK) == 0,
                                              "stage %s of %s names %s, not in the tree", sets[k]->v[i].name,
                                              sets[k]->process, *f);
                        }
}
END_TEST

static Suite *stages_suite(void) {
        Suite *s = suite_create("instr_stages");
        TCase *tc = tcase_create("profile");
        tcase_add_test(tc, test_files_add_up);
        tcase_add_test(tc, test_refused);
        suite_add_tcase(s, tc);
        tc = tcase_create("stages");
        tcase_add_test(tc, test_stage_names);
        tcase_add_test(tc, test_stage_files_exist);
        suite_add_tcase(s, tc);
        return s;
}

const struct check_main check_main = { .suite = stages_suite };
