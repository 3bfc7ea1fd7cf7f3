/* SPDX-License-Identifier: MIT */
/*
 * Dependencies derived from tensor regions: records of which task read or
 * wrote which bytes, and the dependencies a new access has on them. No
 * session here: the client library keeps one tracker per session and one
 * per recording (libclient/deps.c), and hbgctl run --dot one per graph
 * file (ctl/dot.c).
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* One dependency record: task `id` read or wrote heap bytes [lo, hi). */
struct dep_rec {
        uint64_t lo, hi, id;
        bool write;
};

struct dep_list {
        struct dep_rec *v;
        size_t n, cap;
        size_t n_writes;        /* records with write set: a read needs none of the others */
};

/* An allocation of the heap; records of the tasks touching it. bytes:
 * the size asked for (size rounded up), 0 when the owner keeps none. */
struct heap_alloc {
        uint64_t offset, size, bytes;
        struct dep_list recs;
};

/* Dependency records by heap region: the allocations (sorted by offset,
 * never overlapping) with their records. A recording's tracker keeps every
 * record (keep_all: its ids are not the session's, no watermark applies). */
struct dep_tracker {
        struct heap_alloc *allocs;
        size_t n_allocs, cap_allocs;
        struct dep_list unallocated; /* accesses outside every allocation */
        size_t n_recs;             /* records in all lists */
        size_t sweep_at;           /* sweep complete records at this count */
        bool keep_all;             /* never drop complete ones */
};

/* One heap access of a task being added. reads_first: a write of bytes
 * the task reads first (HBG_INOUT), which needs a failed writer's data
 * as a read does (dep_cut). */
struct access {
        uint64_t lo, hi;
        bool write;
        bool reads_first;
};

/* A growable array of task ids (the dependencies found). */
struct dep_ids {
        uint64_t *v;
        size_t n, cap;
};

/* Room for n ids in *ids. 0 or -ENOMEM. Inline: the task-adding path
 * asks once per task and almost never grows. */
int dep_ids_grow(struct dep_ids *ids, size_t n);
static inline int dep_ids_reserve(struct dep_ids *ids, size_t n) {
        return n <= ids->cap && ids->v ? 0 : dep_ids_grow(ids, n);
}

/* Insert the allocation [offset, offset + size) at its place in the
 * sorted list (it must overlap none). 0 or -ENOMEM. */
int dep_tracker_add_alloc(struct dep_tracker *dt, uint64_t offset, uint64_t size);

/* The allocation starting at offset: its index, or -1 if none does. */
long dep_tracker_find_alloc(const struct dep_tracker *dt, uint64_t offset);

/* Forget allocation i and its records: later accesses of its bytes
 * depend on nothing recorded before (until an allocation covers them
 * again, they fall in the unallocated list). */
void dep_tracker_remove_alloc(struct dep_tracker *dt, size_t i);

/* Which records the tracker may forget: those of tasks below
 * complete_below (complete), except writes at or above keep_writes_from,
 * which stay dependencies of accesses that read: a task reading what a
 * failed or skipped task should have written must name it, so that hbgd
 * skips it too (RUNTIME_LOGIC §12.2); one that only overwrites it need
 * not (a retry of the failed graph runs). keep_writes_from >=
 * complete_below keeps none. */
struct dep_cut {
        uint64_t complete_below;
        uint64_t keep_writes_from;
};
static inline bool dep_cut_drops(struct dep_cut cut, const struct dep_rec *r) {
        return r->id < cut.complete_below && (!r->write || r->id < cut.keep_writes_from);
}
/* Nothing forgotten (a recording's ids, a graph file's). */
#define DEP_CUT_NONE ((struct dep_cut){ 0, 0 })

/* Append to ids the tasks an access list depends on (RAW on writers, WAR
 * and WAW for a write), duplicates possible. Records `cut` drops are
 * dropped as they are met (unless keep_all). 0 or -ENOMEM. */
int dep_tracker_collect(struct dep_tracker *dt, const struct access *a, size_t na, struct dep_cut cut,
                        struct dep_ids *ids);

/* Record the accesses of task id (after its dependencies were collected):
 * a write covering a record's whole range supersedes the record. 0 or
 * -ENOMEM (the records are then incomplete). */
int dep_tracker_commit(struct dep_tracker *dt, const struct access *a, size_t na, uint64_t id);

/* Is a sweep of complete records due (the record count doubled since the
 * last)? Then dep_tracker_sweep drops those `cut` drops. */
static inline bool dep_tracker_sweep_due(const struct dep_tracker *dt) {
        return dt->n_recs >= dt->sweep_at && !dt->keep_all;
}
void dep_tracker_sweep(struct dep_tracker *dt, struct dep_cut cut);

/* The first writer of bytes in [lo, hi) for which pending(arg, id) says
 * true: true and its id, else false. */
bool dep_tracker_find_writer(struct dep_tracker *dt, uint64_t lo, uint64_t hi,
                                  bool (*pending)(void *arg, uint64_t id), void *arg, uint64_t *ret_id);

void dep_tracker_free(struct dep_tracker *dt);
