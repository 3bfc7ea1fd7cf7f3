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
 * are dropped as they are met and by a sweep, so the memory kept is
 * bounded by the tasks in flight. Extra dependencies are harmless (partial
 * overlaps keep their records); missing ones would be bugs.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common/dep_tracker.h"
#include "common/grow.h"

int dep_ids_grow(struct dep_ids *ids, size_t n) {
        return GROW(ids->v, ids->cap, n, 64);
}

static int list_push(struct dep_tracker *dt, struct dep_list *l, struct dep_rec r) {
        if (GROW(l->v, l->cap, l->n + 1, 8) < 0)
                return -ENOMEM;
        l->v[l->n++] = r;
        l->n_writes += r.write;
        dt->n_recs++;
        return 0;
}

static void list_remove(struct dep_tracker *dt, struct dep_list *l, size_t i) {
        l->n_writes -= l->v[i].write;
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

int dep_tracker_add_alloc(struct dep_tracker *dt, uint64_t offset, uint64_t size) {
        if (GROW(dt->allocs, dt->cap_allocs, dt->n_allocs + 1, 64) < 0)
                return -ENOMEM;
        size_t i = alloc_first(dt, offset);
        memmove(&dt->allocs[i + 1], &dt->allocs[i], (dt->n_allocs - i) * sizeof(dt->allocs[0]));
        dt->allocs[i] = (struct heap_alloc){ .offset = offset, .size = size };
        dt->n_allocs++;
        return 0;
}

long dep_tracker_find_alloc(const struct dep_tracker *dt, uint64_t offset) {
        size_t i = alloc_first(dt, offset);
        return i < dt->n_allocs && dt->allocs[i].offset == offset ? (long)i : -1;
}

void dep_tracker_remove_alloc(struct dep_tracker *dt, size_t i) {
        dt->n_recs -= dt->allocs[i].recs.n;
        free(dt->allocs[i].recs.v);
        memmove(&dt->allocs[i], &dt->allocs[i + 1], (dt->n_allocs - i - 1) * sizeof(dt->allocs[0]));
        dt->n_allocs--;
}

/* Call fn for each list holding records of [lo, hi), with the part of the
 * range that falls in it. Stops at the first non-zero return. */
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
        bool write;
        bool reads;             /* the access reads (a write: reads_first) */
        struct dep_cut cut;
        struct dep_ids *ids;
};

static int collect_one(struct dep_tracker *dt, struct dep_list *l, uint64_t lo, uint64_t hi, void *arg) {
        struct collect_arg *ca = arg;
        struct dep_ids *ids = ca->ids;
        /* A read depends on writers only: none here, nothing to scan (an
         * input every task reads would otherwise cost a scan of all its
         * readers per task; the sweep drops complete records). */
        if (!ca->write && l->n_writes == 0)
                return 0;
        for (size_t i = 0; i < l->n;) {
                struct dep_rec *r = &l->v[i];
                if (dep_cut_drops(ca->cut, r)) {
                        list_remove(dt, l, i);
                        continue;
                }
                /* A complete record kept (a write hbgd may have failed)
                 * is a dependency of a read only. */
                bool complete = r->id < ca->cut.complete_below;
                if (r->lo < hi && lo < r->hi && (ca->write || r->write) && (!complete || ca->reads)) {
                        if (dep_ids_reserve(ids, ids->n + 1) < 0)
                                return -ENOMEM;
                        ids->v[ids->n++] = r->id;
                }
                i++;
        }
        return 0;
}

int dep_tracker_collect(struct dep_tracker *dt, const struct access *a, size_t na, struct dep_cut cut,
                        struct dep_ids *ids) {
        struct collect_arg ca = { .cut = dt->keep_all ? DEP_CUT_NONE : cut, .ids = ids };
        for (size_t i = 0; i < na; i++) {
                ca.write = a[i].write;
                ca.reads = !a[i].write || a[i].reads_first;
                int err = visit(dt, a[i].lo, a[i].hi, collect_one, &ca);
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

int dep_tracker_commit(struct dep_tracker *dt, const struct access *a, size_t na, uint64_t id) {
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
        return err;
}

/* ---------------------------------------------------------------- sweep */

static void sweep_list(struct dep_tracker *dt, struct dep_list *l, struct dep_cut cut) {
        for (size_t i = 0; i < l->n;) {
                if (dep_cut_drops(cut, &l->v[i]))
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

/* Amortised O(1) per record: the next sweep once the count doubled. */
void dep_tracker_sweep(struct dep_tracker *dt, struct dep_cut cut) {
        for (size_t i = 0; i < dt->n_allocs; i++)
                sweep_list(dt, &dt->allocs[i].recs, cut);
        sweep_list(dt, &dt->unallocated, cut);
        dt->sweep_at = 2 * dt->n_recs > 4096 ? 2 * dt->n_recs : 4096;
}

/* ---------------------------------------------------------------- queries */

struct writer_arg {
        bool (*pending)(void *arg, uint64_t id);
        void *arg;
        uint64_t id;
        bool found;
};

static int writer_one(struct dep_tracker *dt, struct dep_list *l, uint64_t lo, uint64_t hi, void *arg) {
        struct writer_arg *wa = arg;
        (void)dt;
        if (l->n_writes == 0)
                return 0;
        for (size_t i = 0; i < l->n; i++) {
                const struct dep_rec *r = &l->v[i];
                if (r->write && r->lo < hi && lo < r->hi && wa->pending(wa->arg, r->id)) {
                        wa->id = r->id;
                        wa->found = true;
                        return 1;
                }
        }
        return 0;
}

bool dep_tracker_find_writer(struct dep_tracker *dt, uint64_t lo, uint64_t hi,
                                  bool (*pending)(void *arg, uint64_t id), void *arg, uint64_t *ret_id) {
        struct writer_arg wa = { .pending = pending, .arg = arg };
        visit(dt, lo, hi, writer_one, &wa);
        if (wa.found)
                *ret_id = wa.id;
        return wa.found;
}

void dep_tracker_free(struct dep_tracker *dt) {
        for (size_t i = 0; i < dt->n_allocs; i++)
                free(dt->allocs[i].recs.v);
        free(dt->allocs);
        free(dt->unallocated.v);
        *dt = (struct dep_tracker){ 0 };
}
