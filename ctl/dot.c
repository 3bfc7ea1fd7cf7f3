/* SPDX-License-Identifier: MIT */
/*
 * `hbgctl run --dot FILE`: the graph of a graph file in Graphviz dot form.
 * Tasks are nodes (name and kernel; a predicated task a diamond with its
 * "when" element, whose writer's edge is a derived one); edges are the dependencies the
 * client library gives hbgd: the explicit ones ("after", dashed) and those
 * it derives from the tensors, found by the library's own tracker
 * (common/dep_tracker.c, linked in). Shown as the file says them: a
 * task with more than 16 dependencies is not split into the dummy tasks
 * the library adds to join them.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "ctl/dot.h"

#include "ctl/error.h"
#include "ctl/graph_read.h"
#include "common/dep_tracker.h"

/* The tracker of the whole file (tensors are its allocations, task
 * indexes its ids; nothing completes, so every record is kept) and the
 * dependencies of the task being added. */
struct derive {
        struct plan *p;
        struct dep_tracker dt;
        struct dep_ids deps;
};

static size_t accesses(const hbg_task *t, struct access *a) {
        size_t n = 0;
        for (unsigned i = 0; i < t->n_args; i++)
                a[n++] = (struct access){ t->args[i].tensor.offset, t->args[i].tensor.offset + t->args[i].tensor.bytes,
                                          t->args[i].dir != HBG_IN };
        if (t->has_predicate)
                a[n++] = (struct access){ t->predicate.offset, t->predicate.offset + 4, false };
        return n;
}

/* Task i's derived dependencies into d->deps, then its records. */
static int derive_task(struct derive *d, size_t i) {
        struct access a[HBG_MAX_TASK_TENSORS + 1];
        size_t na = accesses(&d->p->compiled[i], a);
        d->deps.n = 0;
        int err = dep_tracker_collect(&d->dt, a, na, DEP_CUT_NONE, &d->deps);
        return err < 0 ? err : dep_tracker_commit(&d->dt, a, na, i);
}

static int by_index(const void *a, const void *b) {
        uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
        return x < y ? -1 : x > y;
}

/* A dot string: backslashes and quotes escaped. */
static void dot_string(FILE *f, const char *s) {
        fputc('"', f);
        for (; *s; s++) {
                if (*s == '"' || *s == '\\')
                        fputc('\\', f);
                if (*s == '\n')
                        fputs("\\n", f);
                else
                        fputc(*s, f);
        }
        fputc('"', f);
}

int dot_write(struct plan *p, FILE *f, size_t *ret_edges) {
        struct derive d = { .p = p, .dt = { .keep_all = true } };
        int err = 0;
        size_t edges = 0;

        for (size_t i = 0; i < p->n_tensors && err == 0; i++)
                if (p->tensors[i].t.bytes)
                        err = dep_tracker_add_alloc(&d.dt, p->tensors[i].t.offset, p->tensors[i].t.bytes);

        fprintf(f, "digraph ");
        dot_string(f, graph_file_name(p));
        fprintf(f, " {\n  node [shape=box];\n");
        for (size_t i = 0; i < p->n_tasks && err == 0; i++) {
                /* names as text (controls and stray bytes escaped), never
                 * cut inside a character */
                char nb[64], name[4 * 256], kernel[4 * 64], when[4 * 256];
                char label[sizeof(name) + sizeof(kernel) + sizeof(when) + 8];
                const hbg_task *t = &p->compiled[i];
                /* A predicated task: "when x[i]" as the file says it, and
                 * drawn as a diamond (it may complete without running). */
                json_object *w = NULL;
                bool pred = t->has_predicate &&
                            json_object_object_get_ex(json_object_array_get_idx(p->tasks, i), "when", &w);
                snprintf(label, sizeof(label), "%s\n%s%s%s",
                         ctl_shown(graph_file_task_name(p, i, nb, sizeof(nb)), name, sizeof(name)),
                         ctl_shown(t->kernel ? t->kernel : "dummy", kernel, sizeof(kernel)), pred ? "\nwhen " : "",
                         pred ? ctl_shown(json_object_get_string(w), when, sizeof(when)) : "");
                fprintf(f, "  t%zu [label=", i);
                dot_string(f, label);
                fprintf(f, "%s];\n", pred ? ", shape=diamond" : "");
                if ((err = derive_task(&d, i)) < 0)
                        break;
                /* derived: solid; explicit only: dashed */
                if (d.deps.n)
                        qsort(d.deps.v, d.deps.n, sizeof(*d.deps.v), by_index);
                for (size_t k = 0; k < d.deps.n; k++) {
                        if (k && d.deps.v[k] == d.deps.v[k - 1])
                                continue;
                        fprintf(f, "  t%" PRIu64 " -> t%zu;\n", d.deps.v[k], i);
                        edges++;
                }
                for (unsigned k = 0; k < t->n_deps; k++) {
                        uint64_t dep = t->deps[k];
                        if (d.deps.n && bsearch(&dep, d.deps.v, d.deps.n, sizeof(*d.deps.v), by_index))
                                continue;
                        bool twice = false;
                        for (unsigned m = 0; m < k; m++)
                                twice = twice || t->deps[m] == t->deps[k];
                        if (twice)
                                continue;
                        fprintf(f, "  t%" PRIu64 " -> t%zu [style=dashed];\n", dep, i);
                        edges++;
                }
        }
        fprintf(f, "}\n");
        dep_tracker_free(&d.dt);
        free(d.deps.v);
        if (err == 0 && (fflush(f) != 0 || ferror(f)))
                err = errno ? -errno : -EIO;
        *ret_edges = edges;
        return err;
}
