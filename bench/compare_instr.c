/* SPDX-License-Identifier: MIT */
/*
 * The comparison's instruction counts (bench/compare.h): hbgd and one
 * producer, each under callgrind for the whole of a fixed run (start-up,
 * spinning and parking included), and the peers the same way. A second,
 * one-task run of the same processes is subtracted, so that the figure is
 * what the graph's tasks cost, not what starting a process costs:
 *   Ir per task = (Ir(run of N tasks) - Ir(run of 1 task)) / (N - 1).
 * Under valgrind the threads of a process run one at a time: the counts
 * are of the path taken, with no real concurrency (docs/PERFORMANCE.md).
 * The gemm shape is left out: its tiles' arithmetic would drown the rest.
 * --quick counts 2000-task graphs of three shapes (no edges, one chain,
 * random edges): valgrind runs threads one at a time, and the resolver's
 * hand-offs between threads make its runs slow there. Replay (the default
 * policy) is counted as the difference between one and three launches of
 * a graph recorded first (replay_instr()).
 *
 * The producer's count, and a peer's, includes the bench's own making of
 * the graph's description (bench/dag.c, dag_make(): the layered shape's
 * random edges cost ~200 instructions a task), which no user of the
 * runtime pays for the runtime: its share per task is shown beside the
 * total ("gen"), counted as dag_make()'s inclusive cost in the same
 * profile, the 1-task run's subtracted likewise.
 *
 * Under each of hbg's rows, the same counts by stage (bench/instr_stages.h):
 * where a task's instructions go in hbgd and in the producer.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench/bench_util.h"
#include "bench/callgrind_files.h"
#include "bench/compare.h"
#include "bench/hbgd_proc.h"
#include "bench/instr_stages.h"
#include "daemon/engine/engine.h"

bool cmp_have_valgrind(void) {
        return system("valgrind --version >/dev/null 2>&1") == 0;
}

int cmp_hbg_instr(struct cmp *c, const char *mode, unsigned threads, const char *shape, uint64_t size,
                  const char *tag, const char *command, unsigned warmup, unsigned repeat, struct cmp_instr *ret) {
        char hbgd[300], hbgd_out[320], prod_out[320], hbgd_file[360], prod_file[360];
        snprintf(hbgd, sizeof(hbgd), "%s/hbgd", c->dir);
        snprintf(hbgd_out, sizeof(hbgd_out), "%s/callgrind.hbgd.%s.%s.out", c->out, mode, tag);
        snprintf(prod_out, sizeof(prod_out), "%s/callgrind.producer.%s.%s.out", c->out, mode, tag);
        snprintf(hbgd_file, sizeof(hbgd_file), "--callgrind-out-file=%s", hbgd_out);
        snprintf(prod_file, sizeof(prod_file), "--callgrind-out-file=%s", prod_out);
        /* --fair-sched=yes: with valgrind's default lock, a thread that
         * spins without blocking can keep the others off for seconds. */
        const char *hbgd_wrap[] = { "valgrind", "-q", "--tool=callgrind", "--fair-sched=yes", hbgd_file, NULL };
        const char *prod_wrap[] = { "valgrind", "-q", "--tool=callgrind", "--fair-sched=yes", prod_file, NULL };
        struct bench_hbgd h;
        struct cmp_run run;
        memset(ret, 0, sizeof(*ret));
        unlink(hbgd_out);
        unlink(prod_out);
        char conf[CMP_CONFIG_LEN];
        if (bench_hbgd_start_config(&h, hbgd, mode, threads, cmp_hbgd_config(c, conf, sizeof(conf)), hbgd_wrap,
                                    120000) < 0)
                return -EIO;
        int err = cmp_run_producers(c, h.socket, shape, size, 1, warmup, repeat, prod_wrap, command, &run);
        ret->tasks = run.tasks;
        cmp_run_free(&run);
        int st = bench_hbgd_stop(&h, 120000);
        if (err < 0 || st != 0)
                return err < 0 ? err : -EIO;
        ret->hbgd = cg_profile_total(hbgd_out);
        ret->producer = cg_profile_total(prod_out);
        ret->generation = cg_function_inclusive(prod_out, "dag_make");
        return ret->hbgd && ret->producer ? 0 : -EIO;
}

static int peer_instr(struct cmp *c, const char *name, unsigned threads, const char *shape, uint64_t size,
                      const char *tag, struct cmp_instr *ret) {
        char out[320], file[360];
        snprintf(out, sizeof(out), "%s/callgrind.%s.%s.out", c->out, name, tag);
        snprintf(file, sizeof(file), "--callgrind-out-file=%s", out);
        const char *wrap[] = { "valgrind", "-q", "--tool=callgrind", "--fair-sched=yes", file, NULL };
        double ns[64];
        unsigned n;
        uint64_t rss;
        memset(ret, 0, sizeof(*ret));
        unlink(out);
        int err = cmp_peer_run(c, name, threads, shape, size, wrap, false, ns, &n, &ret->tasks, &rss);
        if (err < 0)
                return err;
        ret->producer = cg_profile_total(out);
        ret->generation = cg_function_inclusive(out, "dag_make");
        return ret->producer ? 0 : -EIO;
}

/* Is shape k counted in this run? */
static bool counted_shape(const struct cmp *c, const char *shape) {
        if (strcmp(shape, "gemm") == 0)
                return false;
        return !c->quick || strcmp(shape, "chain") == 0 || strcmp(shape, "independent") == 0 ||
               strcmp(shape, "layered") == 0;
}

double cmp_per_task(uint64_t run, uint64_t base, uint64_t tasks) {
        return tasks > 1 && run > base ? (double)(run - base) / (double)(tasks - 1) : 0;
}

/* The generation's share of a row: its metric, and its column into col
 * ("-" where a profile has no dag_make(): a build that inlined it, not a
 * cost of 0). */
static void generation_share(struct cmp *c, const char *shape, const char *system, const char *mode,
                             unsigned threads, const struct cmp_instr *run, const struct cmp_instr *base,
                             char *col, size_t len) {
        if (!run->generation || !base->generation) {
                snprintf(col, len, "-");
                return;
        }
        double g = cmp_per_task(run->generation, base->generation, run->tasks);
        report_metric(&c->report, "instructions_per_task_generation", shape, system, mode, threads, 1, g,
                      "instructions");
        snprintf(col, len, "%.0f", g);
}

/* The profile of one process's run, as cmp_hbg_instr() named it. */
static int read_profile(const struct cmp *c, const char *process, const char *mode, const char *tag,
                        struct cg_files *ret) {
        char path[320];
        snprintf(path, sizeof(path), "%s/callgrind.%s.%s.%s.out", c->out, process, mode, tag);
        return cg_files_read(path, ret);
}

static const struct instr_stages *const stage_sets[2] = { &instr_stages_hbgd, &instr_stages_producer };

/* The 1-task runs' profiles by file, hbgd's and the producer's (stage_sets'
 * order), read once per policy; ok[k] false when one cannot be read (said,
 * and counted as a failed part of the run). */
struct stage_bases {
        struct cg_files files[2];
        bool ok[2];
};

static void profile_unread(struct cmp *c, const char *process, const char *mode, const char *tag, int err) {
        fprintf(stderr, "hbg-bench: %s's profile (%s, %s) cannot be read by stage: %s\n", process, mode, tag,
                strerror(-err));
        c->failures++;
}

static void stage_bases_read(struct cmp *c, const char *mode, struct stage_bases *b) {
        for (unsigned k = 0; k < 2; k++) {
                int err = read_profile(c, stage_sets[k]->process, mode, "base", &b->files[k]);
                if (err < 0)
                        profile_unread(c, stage_sets[k]->process, mode, "base", err);
                b->ok[k] = err == 0;
        }
}

static void stage_bases_free(struct stage_bases *b) {
        for (unsigned k = 0; k < 2; k++)
                if (b->ok[k])
                        cg_files_free(&b->files[k]);
}

/* A row's instructions per task by stage, for hbgd and the producer: a
 * line each under the row, and the metrics
 * instructions_per_task_{hbgd,producer}_STAGE. */
static void stage_lines(struct cmp *c, const char *mode, unsigned threads, const char *shape, uint64_t tasks,
                        const struct stage_bases *b) {
        for (unsigned k = 0; k < 2; k++) {
                const struct instr_stages *s = stage_sets[k];
                struct cg_files run;
                int err;
                if (!b->ok[k])
                        continue; /* said once, at the base */
                if ((err = read_profile(c, s->process, mode, shape, &run)) < 0) {
                        profile_unread(c, s->process, mode, shape, err);
                        continue;
                }
                double v[INSTR_STAGES_MAX];
                instr_stages_per_task(s, &run, &b->files[k], tasks, v);
                printf("    %-9s", s->process);
                for (unsigned i = 0; i < s->n; i++) {
                        char metric[96];
                        snprintf(metric, sizeof(metric), "instructions_per_task_%s_%s", s->process, s->v[i].name);
                        report_metric(&c->report, metric, shape, "hbg", mode, threads, 1, v[i], "instructions");
                        printf(" %s %.0f", s->v[i].name, v[i]);
                }
                printf("\n");
                cg_files_free(&run);
        }
}

/* A launch of a recorded graph (the default policy only: they differ after
 * classification, where replay changes nothing): the recording and the
 * process start cancel out between 1 and 3 launches after it,
 *   Ir per task = (Ir(record + 3 launches) - Ir(record + 1 launch)) / 2N. */
static void replay_instr(struct cmp *c, const char *mode, unsigned threads, const char *shape, uint64_t size) {
        struct cmp_instr one, three;
        char tag1[64], tag3[64];
        snprintf(tag1, sizeof(tag1), "%s.replay1", shape);
        snprintf(tag3, sizeof(tag3), "%s.replay3", shape);
        if (cmp_hbg_instr(c, mode, threads, shape, size, tag1, "replay", 1, 1, &one) < 0 ||
            cmp_hbg_instr(c, mode, threads, shape, size, tag3, "replay", 1, 3, &three) < 0) {
                fprintf(stderr, "hbg-bench: callgrind run of a replay (%s, %s) failed\n", mode, shape);
                c->failures++;
                return;
        }
        uint64_t n = 2 * three.tasks;
        double d = cmp_per_task(three.hbgd, one.hbgd, n + 1);
        double p = cmp_per_task(three.producer, one.producer, n + 1);
        report_metric(&c->report, "instructions_per_task_hbgd", shape, "hbg-replay", mode, threads, 1, d,
                      "instructions");
        report_metric(&c->report, "instructions_per_task_producer", shape, "hbg-replay", mode, threads, 1, p,
                      "instructions");
        report_metric(&c->report, "instructions_per_task", shape, "hbg-replay", mode, threads, 1, d + p,
                      "instructions");
        printf("%-11s %-10s %-13s %12.0f %12.0f %8s   (hbgd %.0f)\n", shape, "replay", mode, d + p, p, "", d);
}

void cmp_instructions(struct cmp *c) {
        if (!cmp_have_valgrind()) {
                printf("\ninstruction counts skipped: valgrind is not installed (make bench-deps installs it)\n");
                return;
        }
        uint64_t size = c->quick ? 2000 : 10000;
        unsigned threads = c->report.plot_threads;
        printf("\n-- [%s] instructions per task (callgrind, whole process, %" PRIu64 "-task graphs, %u threads,"
               " a 1-task run subtracted)\n", cmp_elapsed(c), size, threads);
        printf("(gen: part of the producer's count, or a peer's, the bench's own making of the graph's"
               " description; - not found in the profile)\n");
        printf("%-11s %-10s %-13s %12s %12s %8s\n", "shape", "system", "mode", "Ir/task", "producer", "gen");
        for (unsigned m = 0; m < c->n_modes; m++) {
                const char *mode = completion_mode_name(c->modes[m]);
                if (threads < completion_mode_min_threads(c->modes[m]))
                        continue;
                struct cmp_instr base;
                if (cmp_hbg_instr(c, mode, threads, "independent", 1, "base", "run", 0, 1, &base) < 0) {
                        fprintf(stderr, "hbg-bench: callgrind run of hbgd (%s) failed\n", mode);
                        c->failures++;
                        continue;
                }
                struct stage_bases bases;
                stage_bases_read(c, mode, &bases);
                for (unsigned s = 0; s < c->n_shapes; s++) {
                        const char *shape = cmp_shape(c, s);
                        struct cmp_instr run;
                        if (!counted_shape(c, shape))
                                continue;
                        if (cmp_hbg_instr(c, mode, threads, shape, size, shape, "run", 0, 1, &run) < 0) {
                                fprintf(stderr, "hbg-bench: callgrind run of hbgd (%s, %s) failed\n", mode, shape);
                                c->failures++;
                                continue;
                        }
                        double d = cmp_per_task(run.hbgd, base.hbgd, run.tasks);
                        double p = cmp_per_task(run.producer, base.producer, run.tasks);
                        char gen[24];
                        generation_share(c, shape, "hbg", mode, threads, &run, &base, gen, sizeof(gen));
                        report_metric(&c->report, "instructions_per_task_hbgd", shape, "hbg", mode, threads, 1,
                                      d, "instructions");
                        report_metric(&c->report, "instructions_per_task_producer", shape, "hbg", mode, threads,
                                      1, p, "instructions");
                        report_metric(&c->report, "instructions_per_task", shape, "hbg", mode, threads, 1, d + p,
                                      "instructions");
                        printf("%-11s %-10s %-13s %12.0f %12.0f %8s   (hbgd %.0f)\n", shape, "hbg", mode, d + p, p,
                               gen, d);
                        stage_lines(c, mode, threads, shape, run.tasks, &bases);
                        if (c->modes[m] == HBG_COMPLETION_DEFAULT)
                                replay_instr(c, mode, threads, shape, size);
                }
                stage_bases_free(&bases);
        }
        /* hwloc (StarPU) cannot read the CPUID under valgrind and says so
         * at length; its other backends describe the machine well enough. */
        setenv("HWLOC_COMPONENTS", "-x86", 1);
        for (unsigned i = 0; i < c->n_peers; i++) {
                const char *name = cmp_peer_names[c->peers[i]];
                unsigned t = strcmp(name, "floor") == 0 ? 1 : threads;
                char path[320];
                snprintf(path, sizeof(path), "%s/hbg-bench-%s", c->dir, name);
                if (access(path, X_OK) != 0)
                        continue;
                struct cmp_instr base;
                if (peer_instr(c, name, t, "independent", 1, "base", &base) < 0) {
                        c->failures++;
                        continue;
                }
                for (unsigned s = 0; s < c->n_shapes; s++) {
                        const char *shape = cmp_shape(c, s);
                        struct cmp_instr run;
                        if (!counted_shape(c, shape))
                                continue;
                        if (peer_instr(c, name, t, shape, size, shape, &run) < 0) {
                                c->failures++;
                                continue;
                        }
                        double p = cmp_per_task(run.producer, base.producer, run.tasks);
                        char gen[24];
                        report_metric(&c->report, "instructions_per_task", shape, name, "", t, 1, p,
                                      "instructions");
                        generation_share(c, shape, name, "", t, &run, &base, gen, sizeof(gen));
                        printf("%-11s %-10s %-13s %12.0f %12s %8s\n", shape, name, "-", p, "", gen);
                }
        }
}
