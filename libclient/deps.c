/* SPDX-License-Identifier: MIT */
/*
 * Dependencies derived from tensor regions: all three hazards.
 *
 *   RAW  a reader depends on the overlapping writers recorded;
 *   WAR  a writer depends on the overlapping readers recorded;
 *   WAW  a writer depends on the overlapping writers recorded.
 *
 * Records live with the allocation they fall in (found by binary search;
 * bytes outside every allocation go to one extra list). A write covering a
 * record's whole range supersedes it: the record is dropped after the
 * writer took its dependency, since whoever comes later depends on the
 * writer, which depends on the dropped task. Records of complete tasks
 * (below the watermark) are dropped as they are met and by a sweep, so the
 * memory kept is bounded by the tasks in flight. Extra dependencies are
 * harmless (partial overlaps keep their records); missing ones would be
 * bugs.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "libclient/client_private.h"

int hbgc_scratch_reserve(hbg_client *c, size_t n) {
        if (n <= c->scratch_cap && c->scratch)
                return 0;
        size_t cap = c->scratch_cap ? c->scratch_cap : 64;
        while (cap < n)
                cap *= 2;
        uint64_t *v = realloc(c->scratch, cap * sizeof(*v));
        if (!v)
                return -ENOMEM;
        c->scratch = v;
        c->scratch_cap = cap;
        return 0;
}

static int list_push(struct dep_tracker *dt, struct dep_list *l, struct dep_rec r) {
        if (l->n == l->cap) {
                size_t cap = l->cap ? 2 * l->cap : 8;
                struct dep_rec *v = realloc(l->v, cap * sizeof(*v));
                if (!v)
                        return -ENOMEM;
                l->v = v;
                l->cap = cap;
        }
        l->v[l->n++] = r;
        dt->n_recs++;
        return 0;
}

static void list_remove(struct dep_tracker *dt, struct dep_list *l, size_t i) {
        l->v[i] = l->v[--l->n];
        dt->n_recs--;
}

/* Index of the first allocation ending after lo. */
static size_t alloc_first(const struct dep_tracker *dt, uint64_t lo) {
        size_t a = 0, b = dt->n_allocs;
        while (a < b) {
                size_t m = a + (b - a) / 2;
                if (dt->allocs[m].offset + dt->allocs[m].size <= lo)
                        a = m + 1;
                else
                        b = m;
        }
        return a;
}

/* Call fn for each list holding records of [lo, hi), with the part of the
 * range that falls in it. Stops at the first negative return. */
typedef int (*visit_fn)(struct dep_tracker *dt, struct dep_list *l, uint64_t lo, uint64_t hi, void *arg);

static int visit(struct dep_tracker *dt, uint64_t lo, uint64_t hi, visit_fn fn, void *arg) {
        uint64_t covered = lo;
        bool gap = false;
        for (size_t i = alloc_first(dt, lo); i < dt->n_allocs && dt->allocs[i].offset < hi; i++) {
                struct heap_alloc *a = &dt->allocs[i];
                uint64_t end = a->offset + a->size;
                if (a->offset > covered)
                        gap = true;
                int r = fn(dt, &a->recs, a->offset > lo ? a->offset : lo, end < hi ? end : hi, arg);
                if (r)
                        return r;
                covered = end;
        }
        if (gap || covered < hi)
                return fn(dt, &dt->unallocated, lo, hi, arg);
        return 0;
}

/* ---------------------------------------------------------------- collect */

struct collect_arg {
        hbg_client *c;
        bool write;
        uint64_t wm;
        size_t *n;
};

static int collect_one(struct dep_tracker *dt, struct dep_list *l, uint64_t lo, uint64_t hi, void *arg) {
        struct collect_arg *ca = arg;
        hbg_client *c = ca->c;
        for (size_t i = 0; i < l->n;) {
                struct dep_rec *r = &l->v[i];
                if (r->id < ca->wm) {
                        list_remove(dt, l, i);
                        continue;
                }
                if (r->lo < hi && lo < r->hi && (ca->write || r->write)) {
                        if (hbgc_scratch_reserve(c, *ca->n + 1) < 0)
                                return -ENOMEM;
                        c->scratch[(*ca->n)++] = r->id;
                }
                i++;
        }
        return 0;
}

int hbgc_deps_collect(hbg_client *c, const struct access *a, size_t na, size_t *n) {
        struct collect_arg ca = { .c = c, .wm = c->dt->keep_all ? 0 : hbgc_watermark(c), .n = n };
        for (size_t i = 0; i < na; i++) {
                ca.write = a[i].write;
                int err = visit(c->dt, a[i].lo, a[i].hi, collect_one, &ca);
                if (err < 0)
                        return err;
        }
        return 0;
}

/* ---------------------------------------------------------------- commit */

struct commit_arg {
        bool write;
        uint64_t id;
};

static int commit_one(struct dep_tracker *dt, struct dep_list *l, uint64_t lo, uint64_t hi, void *arg) {
        struct commit_arg *ca = arg;
        if (ca->write) {
                /* Superseded: every record inside [lo, hi). */
                for (size_t i = 0; i < l->n;) {
                        if (l->v[i].lo >= lo && l->v[i].hi <= hi)
                                list_remove(dt, l, i);
                        else
                                i++;
                }
        } else if (l->n > 0) {
                /* The same task reading the same range twice. */
                const struct dep_rec *last = &l->v[l->n - 1];
                if (last->id == ca->id && last->lo == lo && last->hi == hi)
                        return 0;
        }
        return list_push(dt, l, (struct dep_rec){ .lo = lo, .hi = hi, .id = ca->id, .write = ca->write });
}

static void sweep_list(struct dep_tracker *dt, struct dep_list *l, uint64_t wm) {
        for (size_t i = 0; i < l->n;) {
                if (l->v[i].id < wm)
                        list_remove(dt, l, i);
                else
                        i++;
        }
        if (l->n == 0 && l->cap > 64) {
                free(l->v);
                l->v = NULL;
                l->cap = 0;
        }
}

/* Drop the records of complete tasks everywhere, once the record count
 * doubled since the last sweep: amortised O(1) per record. */
static void maybe_sweep(hbg_client *c, struct dep_tracker *dt) {
        if (dt->n_recs < dt->sweep_at || dt->keep_all)
                return;
        uint64_t wm = hbgc_watermark(c);
        for (size_t i = 0; i < dt->n_allocs; i++)
                sweep_list(dt, &dt->allocs[i].recs, wm);
        sweep_list(dt, &dt->unallocated, wm);
        dt->sweep_at = 2 * dt->n_recs > 4096 ? 2 * dt->n_recs : 4096;
}

int hbgc_deps_commit_to(hbg_client *c, struct dep_tracker *dt, const struct access *a, size_t na, uint64_t id) {
        int err = 0;
        /* Writes first: a task's own read of a range it also writes must
         * not be dropped by its own write (harmless either way, but keeps
         * the records exact). */
        for (int pass = 0; pass < 2; pass++)
                for (size_t i = 0; i < na; i++) {
                        if (a[i].write != (pass == 0))
                                continue;
                        struct commit_arg ca = { .write = a[i].write, .id = id };
                        int r = visit(dt, a[i].lo, a[i].hi, commit_one, &ca);
                        if (r < 0 && err == 0)
                                err = r;
                }
        maybe_sweep(c, dt);
        return err;
}

int hbgc_deps_commit(hbg_client *c, const struct access *a, size_t na, uint64_t id) {
        return hbgc_deps_commit_to(c, c->dt, a, na, id);
}

/* ---------------------------------------------------------------- queries */

struct pending_arg {
        hbg_client *c;
        uint64_t id;
        bool found;
};

static int pending_one(struct dep_tracker *dt, struct dep_list *l, uint64_t lo, uint64_t hi, void *arg) {
        struct pending_arg *pa = arg;
        hbg_client *c = pa->c;
        (void)dt;
        for (size_t i = 0; i < l->n; i++) {
                const struct dep_rec *r = &l->v[i];
                if (r->write && r->lo < hi && lo < r->hi && !hbgc_task_done(c, r->id)) {
                        pa->id = r->id;
                        pa->found = true;
                        return 1;
                }
        }
        return 0;
}

bool hbgc_deps_pending_writer(hbg_client *c, uint64_t lo, uint64_t hi, uint64_t *ret_id) {
        struct pending_arg pa = { .c = c };
        visit(&c->deps, lo, hi, pending_one, &pa);
        if (pa.found)
                *ret_id = pa.id;
        return pa.found;
}

void hbgc_deps_tracker_free(struct dep_tracker *dt) {
        for (size_t i = 0; i < dt->n_allocs; i++)
                free(dt->allocs[i].recs.v);
        free(dt->allocs);
        free(dt->unallocated.v);
        *dt = (struct dep_tracker){ 0 };
}

void hbgc_deps_free(hbg_client *c) {
        hbgc_deps_tracker_free(&c->deps);
        free(c->scratch);
        c->scratch = NULL;
        c->scratch_cap = 0;
}
