/* SPDX-License-Identifier: MIT */
/*
 * The comparison's kernel rows (bench/compare.h, --kernels): does a kernel
 * of a module cost what a built-in one costs per task? hbgd dispatches
 * both through the same definitions (docs/KERNELS.md), so it should.
 *
 * One hbgd loads the example module (examples/kernels_nn.c, copied into a
 * private directory that passes hbgd's ownership checks: the build tree's
 * directories may not). On it, one producer runs the same graphs (the
 * chain and independent shapes, each task on a tensor of its own, in
 * place) once per kernel of `kernels` below: built-ins, then the module's.
 * Rows: results.csv with shape NAME-SIZE (the tensor's size) and system
 * hbg-KERNEL; hbgd's instructions per task under callgrind (1-task run
 * subtracted, as bench/compare_instr.c does) to the metrics, split into
 * the kernel's body (its run function and what it calls) and the rest,
 * the dispatch; and the ratio module / built-in of each,
 * per built-in.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "bench/bench_util.h"
#include "bench/callgrind_files.h"
#include "bench/compare.h"
#include "bench/dag.h"
#include "bench/hbgd_proc.h"
#include "daemon/engine/engine.h"

/* The graphs: a shape of the comparison, a tensor of `floats` floats per
 * task (small: the per-task cost dominates; 64 KiB: the kernel's loop
 * shows), at most max_tasks tasks (0: the shape's size in this run). */
static const struct kernel_case {
        const char *shape, *label;
        uint64_t floats, max_tasks;
} cases[] = {
        { "independent", "independent-64B", 16, 0 },
        { "chain", "chain-64B", 16, 0 },
        { "independent", "independent-64KiB", 16384, 512 },
};
#define N_CASES (sizeof(cases) / sizeof(cases[0]))

/* The kernels each graph runs, in place: the built-ins first. */
/* run_fn: the kernel's run function as callgrind names it (its body; a
 * name not found in the profile leaves the split out, never guessed). */
static const struct bench_kernel {
        const char *name;
        bool module;
        const char *run_fn;
} kernels[] = {
        /* relu_f32's very signature (in, out, in place, equal lengths):
         * the same checks; in place it moves nothing. */
        { "copy_f32", false, "run_copy" },              /* daemon/engine/kernels_builtin.c */
        /* x = 1.0 * x: reads and writes every element, as relu_f32 does. */
        { "scale_f32", false, "run_scale" },            /* daemon/engine/kernels_builtin.c */
        { "relu_f32", true, "relu_run" },               /* examples/kernels_nn.c */
};
#define N_KERNELS (sizeof(kernels) / sizeof(kernels[0]))

#define MODULE_NAME "hbg-nn.so"

/* Where the example module is: --module, HBG_BENCH_MODULE, or the build
 * tree's place next to hbg-bench (build/bin/../lib/hbg/kernels). */
static const char *module_source(const struct cmp *c, char *buf, size_t len) {
        const char *env = getenv("HBG_BENCH_MODULE");
        if (c->module_opt)
                snprintf(buf, len, "%s", c->module_opt);
        else if (env && *env)
                snprintf(buf, len, "%s", env);
        else
                snprintf(buf, len, "%s/../lib/hbg/kernels/" MODULE_NAME, c->dir);
        return buf;
}

/* src copied to DIR/hbg-nn.so, DIR a fresh 0755 directory under /tmp (a
 * sticky directory: hbgd accepts it above the module's), the file 0644:
 * both ours, writable by no one else. 0 or -errno; *dir set once made. */
static int copy_module(const char *src, char *dir, size_t dir_len, char *dst, size_t dst_len) {
        char buf[65536];
        snprintf(dir, dir_len, "/tmp/hbg-bench-kmod-XXXXXX");
        if (!mkdtemp(dir)) {
                dir[0] = 0;
                return -errno;
        }
        snprintf(dst, dst_len, "%s/" MODULE_NAME, dir);
        if (chmod(dir, 0755) < 0)
                return -errno;
        int in = open(src, O_RDONLY | O_CLOEXEC), out = -1, err = 0;
        if (in < 0)
                return -errno;
        out = open(dst, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
        if (out < 0 || fchmod(out, 0644) < 0)
                err = -errno;
        for (ssize_t n; err == 0 && (n = read(in, buf, sizeof(buf))) != 0;) {
                if (n < 0 || write(out, buf, (size_t)n) != n)
                        err = n < 0 ? -errno : -EIO;
        }
        close(in);
        if (out >= 0 && close(out) < 0 && err == 0)
                err = -errno;
        return err;
}

static void remove_module(char *dir, const char *dst) {
        if (!dir[0])
                return;
        unlink(dst);
        rmdir(dir);
        dir[0] = 0;
}

/* Tasks of case i in this run: the shape's size (--sizes, --quick), capped. */
static uint64_t case_tasks(const struct cmp *c, unsigned i, uint64_t instr_size) {
        uint64_t n = instr_size;
        for (unsigned s = 0; !n && s < dag_shape_count(); s++)
                if (strcmp(dag_shape_name(s), cases[i].shape) == 0)
                        n = c->sizes[s];
        if (!n)
                n = dag_default_size(cases[i].shape, c->quick);
        return cases[i].max_tasks && n > cases[i].max_tasks ? cases[i].max_tasks : n;
}

static void use_kernel(struct cmp *c, unsigned i, unsigned k) {
        c->kernel = kernels[k].name;
        c->floats = cases[i].floats;
}

/* ns per task, median of the repetitions, of every case x kernel; 0:
 * failed. The kernels take turns: repetition r of every case and kernel
 * (each a producer of its own, warmed up) before repetition r + 1, so
 * that the machine's drift falls on all of them alike. */
static void rows(struct cmp *c, const char *socket, pid_t hbgd, const char *mode, unsigned threads,
                 double ns[N_CASES][N_KERNELS]) {
        double wall[N_CASES][N_KERNELS][64];
        uint64_t tasks[N_CASES][N_KERNELS] = { { 0 } }, rss[N_CASES][N_KERNELS] = { { 0 } };
        bool failed[N_CASES][N_KERNELS] = { { false } };
        for (unsigned r = 0; r < c->repeat; r++)
                for (unsigned i = 0; i < N_CASES; i++)
                        for (unsigned k = 0; k < N_KERNELS; k++) {
                                struct cmp_run run;
                                if (failed[i][k])
                                        continue;
                                use_kernel(c, i, k);
                                int err = cmp_run_producers(c, socket, cases[i].shape, case_tasks(c, i, 0), 1,
                                                            c->warmup, 1, NULL, "run", &run);
                                if (err < 0 || run.reps != 1) {
                                        fprintf(stderr, "hbg-bench: %s, hbg-%s: failed (%s)\n", cases[i].label,
                                                kernels[k].name, strerror(err < 0 ? -err : EPROTO));
                                        c->failures++;
                                        failed[i][k] = true;
                                } else {
                                        wall[i][k][r] = run.wall_ns[0];
                                        tasks[i][k] = run.tasks;
                                        rss[i][k] = run.rss_kib > rss[i][k] ? run.rss_kib : rss[i][k];
                                }
                                cmp_run_free(&run);
                        }
        report_table_header(&c->report);
        for (unsigned i = 0; i < N_CASES; i++)
                for (unsigned k = 0; k < N_KERNELS; k++) {
                        char system[48];
                        double sorted[64], min, median;
                        if (failed[i][k])
                                continue;
                        snprintf(system, sizeof(system), "hbg-%s", kernels[k].name);
                        memcpy(sorted, wall[i][k], c->repeat * sizeof(double));
                        bench_min_median(sorted, c->repeat, &min, &median);
                        struct report_row row = {
                                .shape = cases[i].label, .system = system, .mode = mode, .threads = threads,
                                .clients = 1, .tasks = tasks[i][k], .ns_per_task = median / (double)tasks[i][k],
                                .tasks_per_s = (double)tasks[i][k] / (median / 1e9),
                                .rss_kib = bench_proc_peak_rss_kib(hbgd) + rss[i][k],
                        };
                        report_row(&c->report, &row);
                        cmp_spread_metrics(c, cases[i].label, system, mode, threads, 1, wall[i][k], c->repeat,
                                           tasks[i][k]);
                        ns[i][k] = row.ns_per_task;
                }
}

/* The path of hbgd's profile that cmp_hbg_instr() wrote for tag. */
static const char *profile(const struct cmp *c, char *buf, size_t len, const char *mode, const char *tag) {
        snprintf(buf, len, "%s/callgrind.hbgd.%s.%s.out", c->out, mode, tag);
        return buf;
}

/* hbgd's instructions per task of every case x kernel: a run of the case
 * minus a 1-task run of the same kernel and tensor size, each on an hbgd
 * of its own under callgrind; and its split into the kernel's body and
 * the dispatch (the rest). 0: failed, or (body) not split. */
static void instructions(struct cmp *c, const char *mode, unsigned threads, double ir[N_CASES][N_KERNELS],
                         double dispatch[N_CASES][N_KERNELS]) {
        uint64_t size = c->quick ? 2000 : 10000;
        struct cmp_instr base[N_CASES][N_KERNELS];
        uint64_t base_body[N_CASES][N_KERNELS];
        printf("\n-- [%s] kernel rows: hbgd's instructions per task (callgrind, %" PRIu64 "-task graphs or fewer,"
               " %u threads, a 1-task run subtracted; body: the kernel's run function)\n", cmp_elapsed(c), size,
               threads);
        printf("%-18s %-15s %12s %12s %12s\n", "shape", "system", "hbgd", "body", "dispatch");
        for (unsigned i = 0; i < N_CASES; i++)
                for (unsigned k = 0; k < N_KERNELS; k++) {
                        char tag[96], system[48], profile_s[400];
                        struct cmp_instr run;
                        unsigned j = 0;
                        use_kernel(c, i, k);
                        /* One base per kernel and tensor size. */
                        while (j < i && cases[j].floats != cases[i].floats)
                                j++;
                        if (j == i) {
                                snprintf(tag, sizeof(tag), "kbase.%s.%" PRIu64 "f", kernels[k].name, cases[i].floats);
                                if (cmp_hbg_instr(c, mode, threads, "independent", 1, tag, "run", 0, 1,
                                                  &base[i][k]) < 0)
                                        memset(&base[i][k], 0, sizeof(base[i][k]));
                                profile(c, profile_s, sizeof(profile_s), mode, tag);
                                base_body[i][k] = cg_function_inclusive(profile_s, kernels[k].run_fn);
                        } else {
                                base[i][k] = base[j][k];
                                base_body[i][k] = base_body[j][k];
                        }
                        snprintf(tag, sizeof(tag), "%s.%s", cases[i].label, kernels[k].name);
                        snprintf(system, sizeof(system), "hbg-%s", kernels[k].name);
                        if (!base[i][k].hbgd ||
                            cmp_hbg_instr(c, mode, threads, cases[i].shape, case_tasks(c, i, size), tag, "run", 0,
                                          1, &run) < 0) {
                                fprintf(stderr, "hbg-bench: callgrind run of hbgd (%s, %s) failed\n", cases[i].label,
                                        system);
                                c->failures++;
                                continue;
                        }
                        double d = cmp_per_task(run.hbgd, base[i][k].hbgd, run.tasks);
                        report_metric(&c->report, "instructions_per_task_hbgd", cases[i].label, system, mode,
                                      threads, 1, d, "instructions");
                        ir[i][k] = d;
                        /* The body of every task, counted in both runs. */
                        profile(c, profile_s, sizeof(profile_s), mode, tag);
                        uint64_t body = cg_function_inclusive(profile_s, kernels[k].run_fn);
                        char body_s[24] = "-", dispatch_s[24] = "-";
                        if (body && base_body[i][k] && body < run.hbgd && base_body[i][k] < base[i][k].hbgd) {
                                double b = cmp_per_task(body, base_body[i][k], run.tasks);
                                dispatch[i][k] = cmp_per_task(run.hbgd - body, base[i][k].hbgd - base_body[i][k],
                                                              run.tasks);
                                report_metric(&c->report, "instructions_per_task_hbgd_body", cases[i].label, system,
                                              mode, threads, 1, b, "instructions");
                                report_metric(&c->report, "instructions_per_task_hbgd_dispatch", cases[i].label,
                                              system, mode, threads, 1, dispatch[i][k], "instructions");
                                snprintf(body_s, sizeof(body_s), "%.0f", b);
                                snprintf(dispatch_s, sizeof(dispatch_s), "%.0f", dispatch[i][k]);
                        } else
                                printf("(no %s in the profile of %s, %s: no split)\n", kernels[k].run_fn,
                                       cases[i].label, system);
                        printf("%-18s %-15s %12.0f %12s %12s\n", cases[i].label, system, d, body_s, dispatch_s);
                }
}

/* module / built-in of both figures, for every module kernel and built-in. */
static void ratio(struct cmp *c, const char *metric, unsigned i, const char *pair, const char *mode,
                  unsigned threads, double module, double builtin, char *buf, size_t len) {
        snprintf(buf, len, "-");
        if (module <= 0 || builtin <= 0)
                return;
        snprintf(buf, len, "%.3f", module / builtin);
        report_metric(&c->report, metric, cases[i].label, pair, mode, threads, 1, module / builtin, "ratio");
}

static void ratios(struct cmp *c, const char *mode, unsigned threads, double ns[N_CASES][N_KERNELS],
                   double ir[N_CASES][N_KERNELS], double dispatch[N_CASES][N_KERNELS]) {
        printf("\n  module / built-in     %-18s %8s %12s %14s\n", "shape", "ns/task", "hbgd Ir/task",
               "dispatch Ir");
        for (unsigned i = 0; i < N_CASES; i++)
                for (unsigned m = 0; m < N_KERNELS; m++)
                        for (unsigned b = 0; kernels[m].module && b < N_KERNELS; b++) {
                                char pair[64], ns_s[16], ir_s[16], d_s[16];
                                if (kernels[b].module)
                                        continue;
                                snprintf(pair, sizeof(pair), "%s/%s", kernels[m].name, kernels[b].name);
                                ratio(c, "module_over_builtin_ns_per_task", i, pair, mode, threads, ns[i][m],
                                      ns[i][b], ns_s, sizeof(ns_s));
                                ratio(c, "module_over_builtin_instructions_hbgd", i, pair, mode, threads, ir[i][m],
                                      ir[i][b], ir_s, sizeof(ir_s));
                                ratio(c, "module_over_builtin_instructions_hbgd_dispatch", i, pair, mode, threads,
                                      dispatch[i][m], dispatch[i][b], d_s, sizeof(d_s));
                                printf("  %-21s %-18s %8s %12s %14s\n", pair, cases[i].label, ns_s, ir_s, d_s);
                        }
}

void cmp_kernels(struct cmp *c) {
        unsigned mode_index = c->modes[0], threads = c->report.plot_threads;
        for (unsigned m = 0; m < c->n_modes; m++)
                if (c->modes[m] == HBG_COMPLETION_DEFAULT)
                        mode_index = HBG_COMPLETION_DEFAULT;
        const char *mode = completion_mode_name(mode_index);
        char src[300], dir[64] = "", hbgd[300], conf[CMP_CONFIG_LEN];
        printf("\n-- kernels: built-in and module kernels per task, completion %s, %u threads [%s]\n", mode, threads,
               cmp_elapsed(c));
        if (threads < completion_mode_min_threads(mode_index)) {
                printf("kernel rows skipped: %s needs %u threads or more\n", mode,
                       completion_mode_min_threads(mode_index));
                return;
        }
        /* No module, no rows: never a figure without it. */
        if (access(module_source(c, src, sizeof(src)), R_OK) != 0) {
                printf("kernel rows skipped: no module at %s (%s); `make` builds it, or give --module PATH\n", src,
                       strerror(errno));
                return;
        }
        int err = copy_module(src, dir, sizeof(dir), c->module, sizeof(c->module));
        if (err < 0) {
                fprintf(stderr, "hbg-bench: cannot copy %s to a private directory (%s): no kernel rows\n", src,
                        strerror(-err));
                c->failures++;
                remove_module(dir, c->module);
                c->module[0] = 0;
                return;
        }
        printf("module %s (loaded from its copy %s)\n", src, c->module);
        double ns[N_CASES][N_KERNELS] = { { 0 } }, ir[N_CASES][N_KERNELS] = { { 0 } };
        double dispatch[N_CASES][N_KERNELS] = { { 0 } };
        struct bench_hbgd h;
        snprintf(hbgd, sizeof(hbgd), "%s/hbgd", c->dir);
        if (bench_hbgd_start_config(&h, hbgd, mode, threads, cmp_hbgd_config(c, conf, sizeof(conf)), NULL, 30000) <
            0)
                c->failures++;
        else {
                rows(c, h.socket, h.pid, mode, threads, ns);
                int st = bench_hbgd_stop(&h, 10000);
                if (st != 0) {
                        fprintf(stderr, "hbg-bench: hbgd (kernel rows) did not exit cleanly (%d)\n", st);
                        c->failures++;
                }
                if (c->instructions && cmp_have_valgrind())
                        instructions(c, mode, threads, ir, dispatch);
                else if (c->instructions)
                        printf("kernel rows: instruction counts skipped: valgrind is not installed\n");
                ratios(c, mode, threads, ns, ir, dispatch);
        }
        c->kernel = NULL;
        c->floats = 0;
        remove_module(dir, c->module);
        c->module[0] = 0;
}
