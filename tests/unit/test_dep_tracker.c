/* SPDX-License-Identifier: MIT */
/*
 * The dependency tracker (common/dep_tracker.c) on its own:
 *   readers   an input every task reads: reads depend on nothing, a write
 *             on every reader, later reads on that write only;
 *   random    random reads and writes over allocations and unallocated
 *             bytes against the history of every access: each task is
 *             ordered (directly or through its dependencies) after every
 *             earlier conflicting access not swept as complete, depends
 *             on no access that does not conflict, and each list's count
 *             of write records matches its records;
 *   kept      a cut that keeps complete writes: a read, and a write that
 *             reads first (INOUT), still depend on such a write; a pure
 *             write and complete reads do not; a sweep keeps exactly
 *             those writes.
 */
#include <check.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/dep_tracker.h"
#include "tests/check_main.h"

static int cmp_u64(const void *a, const void *b) {
        uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
        return x < y ? -1 : x > y;
}

/* ids sorted, duplicates dropped; returns the new count. */
static size_t sort_unique(uint64_t *v, size_t n) {
        if (n > 1)
                qsort(v, n, sizeof(*v), cmp_u64);
        size_t k = 0;
        for (size_t i = 0; i < n; i++)
                if (k == 0 || v[k - 1] != v[i])
                        v[k++] = v[i];
        return k;
}

static size_t collect(struct dep_tracker *dt, uint64_t lo, uint64_t hi, bool write, struct dep_ids *ids) {
        struct access a = { .lo = lo, .hi = hi, .write = write };
        ids->n = 0;
        ck_assert_int_eq(dep_tracker_collect(dt, &a, 1, DEP_CUT_NONE, ids), 0);
        return ids->n = sort_unique(ids->v, ids->n);
}

static void commit(struct dep_tracker *dt, uint64_t lo, uint64_t hi, bool write, uint64_t id) {
        struct access a = { .lo = lo, .hi = hi, .write = write };
        ck_assert_int_eq(dep_tracker_commit(dt, &a, 1, id), 0);
}

START_TEST(readers) {
        struct dep_tracker dt = { 0 };
        struct dep_ids ids = { 0 };
        ck_assert_int_eq(dep_tracker_add_alloc(&dt, 0, 4096), 0);
        enum { READERS = 5000 };
        for (uint64_t id = 0; id < READERS; id++) {
                ck_assert_uint_eq(collect(&dt, 0, 4096, false, &ids), 0);
                commit(&dt, 0, 4096, false, id);
        }
        ck_assert_uint_eq(dt.allocs[0].recs.n_writes, 0);
        /* A write after them depends on each of them (WAR). */
        ck_assert_uint_eq(collect(&dt, 100, 200, true, &ids), READERS);
        ck_assert_uint_eq(ids.v[0], 0);
        ck_assert_uint_eq(ids.v[READERS - 1], READERS - 1);
        commit(&dt, 0, 4096, true, READERS);
        ck_assert_uint_eq(dt.allocs[0].recs.n_writes, 1);
        ck_assert_uint_eq(dt.allocs[0].recs.n, 1); /* the readers are superseded */
        /* A read now: on that write only (RAW). */
        ck_assert_uint_eq(collect(&dt, 0, 8, false, &ids), 1);
        ck_assert_uint_eq(ids.v[0], READERS);
        /* The sweep drops complete records and keeps the count right. */
        commit(&dt, 0, 8, false, READERS + 1);
        dep_tracker_sweep(&dt, (struct dep_cut){ READERS + 1, READERS + 1 });
        ck_assert_uint_eq(dt.allocs[0].recs.n_writes, 0);
        ck_assert_uint_eq(dt.allocs[0].recs.n, 1);
        ck_assert_uint_eq(collect(&dt, 0, 8, false, &ids), 0);
        free(ids.v);
        dep_tracker_free(&dt);
}
END_TEST

/* Every list's n_writes is its count of write records. */
static void check_counts(const struct dep_tracker *dt) {
        for (size_t i = 0; i <= dt->n_allocs; i++) {
                const struct dep_list *l = i < dt->n_allocs ? &dt->allocs[i].recs : &dt->unallocated;
                size_t w = 0;
                for (size_t j = 0; j < l->n; j++)
                        w += l->v[j].write;
                ck_assert_uint_eq(l->n_writes, w);
        }
}

/* The reference is the history of every access. A task must come after
 * each earlier conflicting access (overlapping, one of them a write)
 * unless that one was swept as complete: directly, or through the tasks
 * it depends on (ancestors, kept as bit sets). And it depends on nothing
 * that does not conflict. */
enum { RANDOM_TASKS = 4000, WORDS = (RANDOM_TASKS + 63) / 64 };

struct history {
        struct access a[RANDOM_TASKS];
        uint64_t anc[RANDOM_TASKS][WORDS];
};

static bool conflicts(const struct access *x, const struct access *y) {
        return x->lo < y->hi && y->lo < x->hi && (x->write || y->write);
}

START_TEST(random_against_history) {
        struct dep_tracker dt = { 0 };
        struct dep_ids ids = { 0 };
        struct history *h = calloc(1, sizeof(*h));
        ck_assert_ptr_nonnull(h);
        /* Three allocations with a gap: [0,1024) [2048,3072) [3072,4096). */
        ck_assert_int_eq(dep_tracker_add_alloc(&dt, 0, 1024), 0);
        ck_assert_int_eq(dep_tracker_add_alloc(&dt, 3072, 1024), 0);
        ck_assert_int_eq(dep_tracker_add_alloc(&dt, 2048, 1024), 0);
        srand(12345);
        uint64_t swept_below = 0;
        for (uint64_t id = 0; id < RANDOM_TASKS; id++) {
                struct access *a = &h->a[id];
                a->lo = (uint64_t)rand() % 5000;
                a->hi = a->lo + 1 + (uint64_t)rand() % 600;
                a->write = rand() % 4 == 0;
                size_t n = collect(&dt, a->lo, a->hi, a->write, &ids);
                for (size_t k = 0; k < n; k++) {
                        uint64_t d = ids.v[k];
                        ck_assert_uint_lt(d, id);
                        ck_assert_msg(conflicts(a, &h->a[d]), "task %llu depends on %llu, no conflict",
                                      (unsigned long long)id, (unsigned long long)d);
                        for (unsigned w = 0; w < WORDS; w++)
                                h->anc[id][w] |= h->anc[d][w];
                        h->anc[id][d / 64] |= 1ull << (d % 64);
                }
                for (uint64_t d = swept_below; d < id; d++)
                        if (conflicts(a, &h->a[d]))
                                ck_assert_msg(h->anc[id][d / 64] >> (d % 64) & 1,
                                              "task %llu not ordered after %llu", (unsigned long long)id,
                                              (unsigned long long)d);
                commit(&dt, a->lo, a->hi, a->write, id);
                check_counts(&dt);
                if (id % 1000 == 999) {
                        swept_below = id - 500;
                        dep_tracker_sweep(&dt, (struct dep_cut){ swept_below, swept_below });
                        check_counts(&dt);
                }
        }
        dep_tracker_remove_alloc(&dt, 1);
        check_counts(&dt);
        free(h);
        free(ids.v);
        dep_tracker_free(&dt);
}
END_TEST

/* One access (with reads_first) collected under cut: the ids found. */
static size_t collect_cut(struct dep_tracker *dt, struct access a, struct dep_cut cut, struct dep_ids *ids) {
        ids->n = 0;
        ck_assert_int_eq(dep_tracker_collect(dt, &a, 1, cut, ids), 0);
        return ids->n = sort_unique(ids->v, ids->n);
}

START_TEST(kept_writes) {
        struct dep_tracker dt = { 0 };
        struct dep_ids ids = { 0 };
        ck_assert_int_eq(dep_tracker_add_alloc(&dt, 0, 4096), 0);
        commit(&dt, 0, 64, true, 10);    /* a write, complete below */
        commit(&dt, 64, 128, false, 11); /* a read, complete below */
        commit(&dt, 128, 192, true, 2);  /* a write below the kept range */
        struct dep_cut cut = { .complete_below = 20, .keep_writes_from = 5 };
        struct access rd = { .lo = 0, .hi = 192 }, out = { .lo = 0, .hi = 192, .write = true };
        struct access inout = { .lo = 0, .hi = 192, .write = true, .reads_first = true };
        ck_assert_uint_eq(collect_cut(&dt, out, cut, &ids), 0);
        ck_assert_uint_eq(collect_cut(&dt, inout, cut, &ids), 1);
        ck_assert_uint_eq(ids.v[0], 10);
        ck_assert_uint_eq(collect_cut(&dt, rd, cut, &ids), 1);
        ck_assert_uint_eq(ids.v[0], 10);
        /* The collects dropped the read and the write below 5. */
        ck_assert_uint_eq(dt.allocs[0].recs.n, 1);
        ck_assert_uint_eq(dt.allocs[0].recs.n_writes, 1);
        /* No failure: the cut keeps none. */
        dep_tracker_sweep(&dt, (struct dep_cut){ 20, 20 });
        ck_assert_uint_eq(dt.n_recs, 0);
        /* A sweep under the cut keeps the write. */
        commit(&dt, 0, 64, true, 30);
        commit(&dt, 64, 128, false, 31);
        dep_tracker_sweep(&dt, (struct dep_cut){ 40, 25 });
        ck_assert_uint_eq(dt.allocs[0].recs.n, 1);
        ck_assert_uint_eq(collect_cut(&dt, rd, (struct dep_cut){ 40, 25 }, &ids), 1);
        ck_assert_uint_eq(ids.v[0], 30);
        free(ids.v);
        dep_tracker_free(&dt);
}
END_TEST

static Suite *dep_tracker_suite(void) {
        Suite *s = suite_create("dep_tracker");
        TCase *tc = tcase_create("tracker");
        tcase_add_test(tc, readers);
        tcase_add_test(tc, random_against_history);
        tcase_add_test(tc, kept_writes);
        suite_add_tcase(s, tc);
        return s;
}

const struct check_main check_main = { .suite = dep_tracker_suite };
