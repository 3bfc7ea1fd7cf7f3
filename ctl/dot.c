/* SPDX-License-Identifier: MIT */
/*
 * `hbgctl run --dot FILE`: the graph of a graph file in Graphviz dot form.
 * Tasks are nodes (name and kernel); edges are the dependencies the
 * client library gives hbgd: the explicit ones ("after", dashed) and those
 * it derives from the tensors (libclient/deps.c's rules: a reader depends
 * on the overlapping writers recorded, a writer on the overlapping readers
 * and writers; a write covering a record's whole range supersedes it).
 * Shown as the file says them: a task with more than 16 dependencies is
 * not split into the dummy tasks the library adds to join them.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "ctl/ctl.h"

struct rec {
        uint64_t lo, hi;
        size_t task;
};

struct rec_list {
        struct rec *v;
        size_t n, cap;
};

/* The records of one tensor: its readers and its writers apart, so that
 * a read looks at the writers only. */
struct tensor_recs {
        struct rec_list reads, writes;
};

struct derive {
        struct plan *p;
        struct tensor_recs *recs;   /* one per tensor of the file */
        size_t *deps;               /* of the task being added */
        size_t n_deps, cap_deps;
};

static int push(struct rec_list *l, struct rec r) {
        if (l->n == l->cap) {
                size_t cap = l->cap ? 2 * l->cap : 8;
                struct rec *v = realloc(l->v, cap * sizeof(*v));
                if (!v)
                        return -ENOMEM;
                l->v = v;
                l->cap = cap;
        }
        l->v[l->n++] = r;
        return 0;
}

static int add_dep(struct derive *d, size_t task) {
        if (d->n_deps == d->cap_deps) {
                size_t cap = d->cap_deps ? 2 * d->cap_deps : 16;
                size_t *v = realloc(d->deps, cap * sizeof(*v));
                if (!v)
                        return -ENOMEM;
                d->deps = v;
                d->cap_deps = cap;
        }
        d->deps[d->n_deps++] = task;
        return 0;
}

/* The tensor the range [lo, hi) lies in (ranges never cross tensors in a
 * graph file): tensors are laid out in file order. */
static struct tensor_recs *tensor_of(struct derive *d, uint64_t lo) {
        size_t a = 0, b = d->p->n_tensors;
        while (a < b) {
                size_t m = a + (b - a) / 2;
                const hbg_tensor *t = &d->p->tensors[m].t;
                if (t->offset + t->bytes <= lo)
                        a = m + 1;
                else
                        b = m;
        }
        return a < d->p->n_tensors ? &d->recs[a] : NULL;
}

static int collect(struct derive *d, const struct rec_list *l, uint64_t lo, uint64_t hi) {
        for (size_t i = 0; i < l->n; i++)
                if (l->v[i].lo < hi && lo < l->v[i].hi && add_dep(d, l->v[i].task) < 0)
                        return -ENOMEM;
        return 0;
}

/* Drop the records inside [lo, hi): a write covering them supersedes them. */
static void supersede(struct rec_list *l, uint64_t lo, uint64_t hi) {
        for (size_t i = 0; i < l->n;) {
                if (l->v[i].lo >= lo && l->v[i].hi <= hi)
                        l->v[i] = l->v[--l->n];
                else
                        i++;
        }
}

struct access {
        uint64_t lo, hi;
        bool write;
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
        const hbg_task *t = &d->p->compiled[i];
        struct access a[HBG_MAX_TASK_TENSORS + 1];
        size_t na = accesses(t, a);
        d->n_deps = 0;
        for (size_t k = 0; k < na; k++) {
                struct tensor_recs *tr = tensor_of(d, a[k].lo);
                if (!tr)
                        continue;
                if (collect(d, &tr->writes, a[k].lo, a[k].hi) < 0 ||
                    (a[k].write && collect(d, &tr->reads, a[k].lo, a[k].hi) < 0))
                        return -ENOMEM;
        }
        /* Writes first, so that the task's own read of a range it writes
         * stays recorded (as the library does). */
        for (int pass = 0; pass < 2; pass++)
                for (size_t k = 0; k < na; k++) {
                        struct tensor_recs *tr = tensor_of(d, a[k].lo);
                        if (!tr || a[k].write != (pass == 0))
                                continue;
                        struct rec r = { a[k].lo, a[k].hi, i };
                        if (a[k].write) {
                                supersede(&tr->reads, r.lo, r.hi);
                                supersede(&tr->writes, r.lo, r.hi);
                                if (push(&tr->writes, r) < 0)
                                        return -ENOMEM;
                        } else {
                                const struct rec_list *l = &tr->reads;
                                if (l->n && l->v[l->n - 1].task == i && l->v[l->n - 1].lo == r.lo &&
                                    l->v[l->n - 1].hi == r.hi)
                                        continue;
                                if (push(&tr->reads, r) < 0)
                                        return -ENOMEM;
                        }
                }
        return 0;
}

static int by_index(const void *a, const void *b) {
        size_t x = *(const size_t *)a, y = *(const size_t *)b;
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
        struct derive d = { .p = p, .recs = calloc(p->n_tensors ? p->n_tensors : 1, sizeof(*d.recs)) };
        int err = d.recs ? 0 : -ENOMEM;
        size_t edges = 0;

        fprintf(f, "digraph ");
        dot_string(f, graph_file_name(p));
        fprintf(f, " {\n  node [shape=box];\n");
        for (size_t i = 0; i < p->n_tasks && err == 0; i++) {
                char nb[64], label[320];
                const hbg_task *t = &p->compiled[i];
                snprintf(label, sizeof(label), "%s\n%s", graph_file_task_name(p, i, nb, sizeof(nb)),
                         t->kernel ? t->kernel : "dummy");
                fprintf(f, "  t%zu [label=", i);
                dot_string(f, label);
                fprintf(f, "];\n");
                if ((err = derive_task(&d, i)) < 0)
                        break;
                /* derived: solid; explicit only: dashed */
                if (d.n_deps)
                        qsort(d.deps, d.n_deps, sizeof(*d.deps), by_index);
                for (size_t k = 0; k < d.n_deps; k++) {
                        if (k && d.deps[k] == d.deps[k - 1])
                                continue;
                        fprintf(f, "  t%zu -> t%zu;\n", d.deps[k], i);
                        edges++;
                }
                for (unsigned k = 0; k < t->n_deps; k++) {
                        size_t dep = (size_t)t->deps[k];
                        if (d.n_deps && bsearch(&dep, d.deps, d.n_deps, sizeof(*d.deps), by_index))
                                continue;
                        bool twice = false;
                        for (unsigned m = 0; m < k; m++)
                                twice = twice || t->deps[m] == t->deps[k];
                        if (twice)
                                continue;
                        fprintf(f, "  t%zu -> t%zu [style=dashed];\n", dep, i);
                        edges++;
                }
        }
        fprintf(f, "}\n");
        for (size_t i = 0; d.recs && i < p->n_tensors; i++) {
                free(d.recs[i].reads.v);
                free(d.recs[i].writes.v);
        }
        free(d.recs);
        free(d.deps);
        if (err == 0 && (fflush(f) != 0 || ferror(f)))
                err = errno ? -errno : -EIO;
        *ret_edges = edges;
        return err;
}
