/* SPDX-License-Identifier: MIT */
/* The targets, judged from a run's own rows and metrics (targets.h). */
#include "bench/targets.h"

#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "bench/compare.h"
#include "daemon/engine/engine.h"

enum verdict { NOT_MEASURED, NOT_MET, MET };

/* What a judge saw, in words: "chain 1.23x, independent 0.80x". */
struct seen {
        char text[320];
        size_t at;
};

static void say(struct seen *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void say(struct seen *s, const char *fmt, ...) {
        if (s->at >= sizeof(s->text) - 1) {
                s->at = sizeof(s->text); /* full: what follows is cut, "..." */
                return;
        }
        va_list ap;
        va_start(ap, fmt);
        int n = vsnprintf(s->text + s->at, sizeof(s->text) - s->at, fmt, ap);
        va_end(ap);
        if (n > 0)
                s->at += (size_t)n;
}

/* Where the targets are read: hbg's rows and metrics under the default
 * policy at the plotted thread count. */
struct view {
        const struct cmp *c;
        const char *mode;
        unsigned threads;
};

/* A verdict over several figures: not met if one measured is not; met
 * if each is and all of `expected` were measured (0: whatever the run
 * measured); else not measured (a target of three shapes is not met by
 * the one the run had). */
struct tally {
        unsigned measured, met, expected;
};

static void count(struct tally *t, bool met) {
        t->measured++;
        t->met += met;
}

static enum verdict tallied(const struct tally *t) {
        if (t->met < t->measured)
                return NOT_MET;
        return t->measured && t->measured >= t->expected ? MET : NOT_MEASURED;
}

/* The entries of a NULL-terminated list (0 for NULL: every shape). */
static unsigned entries(const char *const *only) {
        unsigned n = 0;
        while (only && only[n])
                n++;
        return n;
}

static const char *const taskflow_shapes[] = { "chain", "independent", "wavefront", NULL };
static const char *const instruction_shapes[] = { "chain", "independent", "layered", NULL };

static bool listed(const char *const *only, const char *shape) {
        if (!only)
                return true;
        for (; *only; only++)
                if (strcmp(*only, shape) == 0)
                        return true;
        return false;
}

/* ns per task of `system` (hbg's mode, or a peer's "") over `peer`'s, one
 * producer, per shape of `only` (NULL: every shape of the run), each at
 * most limit. */
static enum verdict ns_ratio(const struct view *v, const char *system, const char *peer,
                             const char *const *only, double limit, struct seen *s) {
        struct tally t = { .expected = only ? entries(only) : v->c->n_shapes };
        for (unsigned k = 0; k < v->c->n_shapes; k++) {
                const char *shape = cmp_shape(v->c, k);
                if (!listed(only, shape))
                        continue;
                const struct report_row *a = report_find_row(&v->c->report, shape, system, v->mode, v->threads, 1);
                const struct report_row *b = report_find_row(&v->c->report, shape, peer, "", v->threads, 1);
                if (!a || !b || b->ns_per_task <= 0)
                        continue;
                double r = a->ns_per_task / b->ns_per_task;
                say(s, "%s%s %.2fx", t.measured ? ", " : "", shape, r);
                count(&t, r <= limit);
        }
        return tallied(&t);
}

static enum verdict vs_taskflow(const struct view *v, struct seen *s) {
        return ns_ratio(v, "hbg", "taskflow", taskflow_shapes, 1.0, s);
}

static enum verdict vs_tbb(const struct view *v, struct seen *s) {
        return ns_ratio(v, "hbg", "tbb", NULL, 0.4, s);
}

static enum verdict replay_vs_rerun(const struct view *v, struct seen *s) {
        return ns_ratio(v, "hbg-replay", "taskflow-rerun", taskflow_shapes, 1.0, s);
}

/* One metric of hbg's (shape "", one producer unless clients says) against
 * a bound: at most (or, with below, under) limit; said with `decimals`
 * and unit. */
static enum verdict bound(const struct view *v, const char *metric, unsigned clients, double limit, bool below,
                          int decimals, const char *unit, struct seen *s) {
        double x;
        if (!report_find_value(&v->c->report, metric, "", "hbg", v->mode, v->threads, clients, &x))
                return NOT_MEASURED;
        say(s, "%.*f%s", decimals, x, unit);
        return (below ? x < limit : x <= limit) ? MET : NOT_MET;
}

static enum verdict parked_p50(const struct view *v, struct seen *s) {
        return bound(v, "latency_1_task_parked_over_eventfd_p50", 1, 1.5, false, 2, "x", s);
}

static enum verdict parked_p99(const struct view *v, struct seen *s) {
        return bound(v, "latency_1_task_parked_over_eventfd_p99", 1, 2.0, false, 2, "x", s);
}

static enum verdict busy_p50(const struct view *v, struct seen *s) {
        return bound(v, "latency_1_task_busy_p50", 1, 2.0, true, 2, " us", s);
}

static enum verdict connect_p99(const struct view *v, struct seen *s) {
        return bound(v, "connect_burst_8_p99", 8, 1000.0, false, 0, " us", s);
}

static enum verdict idle_cpu(const struct view *v, struct seen *s) {
        return bound(v, "idle_cpu", 0, 0.1, true, 3, " % of a core", s);
}

/* hbg's instructions per task (counted with one producer) on each shape
 * of the target, at most 1,000. */
static enum verdict instructions(const struct view *v, struct seen *s) {
        struct tally t = { .expected = entries(instruction_shapes) };
        for (unsigned k = 0; k < v->c->n_shapes; k++) {
                const char *shape = cmp_shape(v->c, k);
                double x;
                if (!listed(instruction_shapes, shape) ||
                    !report_find_value(&v->c->report, "instructions_per_task", shape, "hbg", v->mode, v->threads, 1,
                                       &x))
                        continue;
                say(s, "%s%s %.0f", t.measured ? ", " : "", shape, x);
                count(&t, x <= 1000);
        }
        return tallied(&t);
}

/* Each shape at each client count of the run (measured when it had a
 * warm-up to compare with). */
static enum verdict first_graph(const struct view *v, struct seen *s) {
        struct tally t = { .expected = v->c->n_shapes * v->c->n_clients };
        for (unsigned k = 0; k < v->c->n_shapes; k++)
                for (unsigned n = 0; n < v->c->n_clients; n++) {
                        const char *shape = cmp_shape(v->c, k);
                        double x;
                        if (!report_find_value(&v->c->report, "first_graph_over_median", shape, "hbg", v->mode,
                                               v->threads, v->c->clients[n], &x))
                                continue;
                        say(s, "%s%s", t.measured ? ", " : "", shape);
                        if (v->c->n_clients > 1)
                                say(s, " (%u)", v->c->clients[n]);
                        say(s, " %.2fx", x);
                        count(&t, x <= 1.5);
                }
        return tallied(&t);
}

/* The fairness row's 1-task graphs beside another uid's backlog: p99 at
 * most one of its kernels plus 5 ms. */
static enum verdict fairness(const struct view *v, struct seen *s) {
        double p99, kernel;
        if (!report_find_value(&v->c->report, "fairness_1_task_p99", "", "hbg", v->mode, v->threads, 0, &p99) ||
            !report_find_value(&v->c->report, "fairness_kernel", "", "hbg", v->mode, v->threads, 0, &kernel))
                return NOT_MEASURED;
        say(s, "%.1f ms against %.0f + 5", p99, kernel);
        return p99 <= kernel + 5 ? MET : NOT_MET;
}

/* Eight producers' tasks per second together against one's alone. */
static enum verdict eight_producers(const struct view *v, struct seen *s) {
        struct tally t = { .expected = v->c->n_shapes };
        for (unsigned k = 0; k < v->c->n_shapes; k++) {
                const char *shape = cmp_shape(v->c, k);
                const struct report_row *one = report_find_row(&v->c->report, shape, "hbg", v->mode, v->threads, 1);
                const struct report_row *eight = report_find_row(&v->c->report, shape, "hbg", v->mode, v->threads, 8);
                if (!one || !eight || one->tasks_per_s <= 0)
                        continue;
                double r = eight->tasks_per_s / one->tasks_per_s;
                say(s, "%s%s %.2f", t.measured ? ", " : "", shape, r);
                count(&t, r >= 0.9);
        }
        return tallied(&t);
}

/* The targets, one place: what each says and how it is judged. */
static const struct target {
        const char *name;       /* the metric's shape column */
        const char *words;
        enum verdict (*judge)(const struct view *v, struct seen *s);
} targets[] = {
        { "parked_p50", "parked 1-task graph p50 <= 1.5x an eventfd round trip beside it", parked_p50 },
        { "parked_p99", "parked 1-task graph p99 <= 2x an eventfd round trip beside it", parked_p99 },
        { "busy_p50", "busy 1-task graph p50 < 2 us", busy_p50 },
        { "vs_taskflow", "build+run per task <= Taskflow's (chain, independent, wavefront)", vs_taskflow },
        { "vs_tbb", "build+run per task <= 0.4x oneTBB's, every shape", vs_tbb },
        { "replay_vs_taskflow", "replay <= Taskflow's rerun (chain, independent, wavefront)", replay_vs_rerun },
        { "instructions", "<= 1,000 instructions per task (chain, independent, layered)", instructions },
        { "first_graph", "a session's first graph <= 1.5x its later ones, every shape", first_graph },
        { "connect_p99", "hbg_connect p99 <= 1 ms, 8 producers at once", connect_p99 },
        { "fairness_p99", "fairness: 1-task graph p99 <= a kernel + 5 ms", fairness },
        { "idle_cpu", "idle hbgd < 0.1 % of a core", idle_cpu },
        { "eight_producers", "8 producers >= 0.9x one (tasks/s)", eight_producers },
};

void cmp_targets(struct cmp *c) {
        struct view v = { c, completion_mode_name(HBG_COMPLETION_DEFAULT), c->report.plot_threads };
        static const char *const words[] = { [NOT_MEASURED] = "-", [NOT_MET] = "not met", [MET] = "met" };
        printf("\n-- [%s] targets (docs/PERFORMANCE.md), from this run: %s, %u threads; - not measured here\n",
               cmp_elapsed(c), v.mode, v.threads);
        for (size_t i = 0; i < sizeof(targets) / sizeof(targets[0]); i++) {
                struct seen s = { .at = 0 };
                s.text[0] = 0;
                enum verdict d = targets[i].judge(&v, &s);
                printf("  %-8s %s%s%s%s\n", words[d], targets[i].words, s.at ? ": " : "", s.text,
                       s.at >= sizeof(s.text) ? "..." : "");
                if (d != NOT_MEASURED)
                        report_metric(&c->report, "target_met", targets[i].name, "hbg", v.mode, v.threads, 0,
                                      d == MET, "bool");
        }
}
