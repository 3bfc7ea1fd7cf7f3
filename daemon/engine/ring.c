/* SPDX-License-Identifier: MIT */
/*
 * A ring's life cycle: creating and freeing its private memory (lazy zero
 * mappings, §10.1), counters.
 */
#include "daemon/engine/ring.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "daemon/engine/client_read.h"
#include "daemon/engine/completion.h"
#include "daemon/engine/engine_state.h"
#include "daemon/engine/failures.h"
#include "daemon/engine/live_graphs.h"
#include "daemon/engine/recorded.h"
#include "daemon/engine/engine_spares.h"
#include "daemon/engine/ring_spares.h"
#include "daemon/engine/lazy_alloc.h"
#include "common/clock.h"
#include "daemon/engine/engine_stats.h"

static size_t slots_bytes(const struct hbg_geometry *g) {
        return g->task_window * sizeof(struct task_slot);
}

/* The failure table's entries: geometry_fail_tags() (shm/geometry.h),
 * whose reach the client relies on too. */
static uint64_t fail_tags_count(const struct hbg_geometry *g) {
        return geometry_fail_tags(g);
}

static size_t fail_tags_bytes(const struct hbg_geometry *g) {
        return fail_tags_count(g) * sizeof(_Atomic uint64_t);
}

static size_t failures_bytes(const struct hbg_geometry *g) {
        return g->task_window * sizeof(struct failure);
}

static size_t graph_noticed_bytes(const struct hbg_geometry *g) {
        return g->graph_table_entries * sizeof(_Atomic int64_t);
}

static size_t queue_bytes(const struct hbg_geometry *g) {
        return g->task_window * sizeof(struct mpmc_cell);
}

/* The ring's lazy arrays, whole pages each: the size of their one
 * mapping (ring_new() takes them in this order). */
static uint64_t arrays_bytes(const struct hbg_geometry *g) {
        return lazy_bytes(slots_bytes(g)) + (SHAPE_EXEC_COUNT + 1) * lazy_bytes(queue_bytes(g)) +
               lazy_bytes(fail_tags_bytes(g)) + lazy_bytes(failures_bytes(g)) +
               lazy_bytes(graph_noticed_bytes(g)) + lazy_bytes(live_graphs_seen_bytes(g));
}

/* Every lazy array counts whole pages: pre-faulted (ring_prefault()),
 * all of them are resident. */
uint64_t ring_memory(unsigned nthreads, const struct hbg_geometry *g) {
        uint64_t per_thread = sizeof(struct ring_thread) + (uint64_t)failsafe_capacity(g) * sizeof(uint64_t);
        return sizeof(struct hbg_ring) + arrays_bytes(g) + nthreads * per_thread;
}

/* engine_spares.h's calls: here, where the arrays' sizes are known
 * (ring_spares.c, the store, sits below this file). */
int engine_spare_fill(struct hbg_engine *e, const struct hbg_geometry *g, unsigned want, uint64_t max_bytes) {
        return ring_spares_fill(&e->spares, arrays_bytes(g), slots_bytes(g), want, max_bytes);
}

unsigned engine_spares(struct hbg_engine *e, uint64_t *ret_bytes, uint64_t *ret_taken) {
        return ring_spares_ready(&e->spares, ret_bytes, ret_taken);
}

void engine_spares_trim(struct hbg_engine *e, unsigned keep) {
        ring_spares_trim(&e->spares, keep);
}

uint64_t engine_spares_waiting(struct hbg_engine *e) {
        return ring_spares_waiting(&e->spares);
}

/* The i-th lazy array ring_prefault() faults in, false past the last,
 * in the order a first graph needs them: its tasks' slots, the queues
 * they pass through, then what only failures and graph bookkeeping touch,
 * then the completion policy's. */
static bool lazy_array(const struct hbg_ring *r, unsigned i, struct lazy_span *ret) {
        const struct hbg_geometry *g = &r->g;
        size_t cells = queue_bytes(g);
        if (i == 0) {
                *ret = (struct lazy_span){ r->slots, slots_bytes(g) };
                return true;
        }
        i--;
        if (i < SHAPE_EXEC_COUNT) {
                *ret = (struct lazy_span){ r->ready[i].cells, cells };
                return true;
        }
        i -= SHAPE_EXEC_COUNT;
        const struct lazy_span rest[] = {
                { r->retire.cells, cells },
                { (void *)r->fail.tags.entries, fail_tags_bytes(g) },
                { r->fail.list, failures_bytes(g) },
                { r->retirer.graph_noticed_ns, graph_noticed_bytes(g) },
                { (void *)r->live.seen, live_graphs_seen_bytes(g) },
        };
        if (i < sizeof(rest) / sizeof(rest[0])) {
                *ret = rest[i];
                return true;
        }
        i -= sizeof(rest) / sizeof(rest[0]);
        const struct completion_policy *policy = r->engine->completion;
        return policy->ring_lazy_array && policy->ring_lazy_array(r, i, ret);
}

/* The i-th span of the session's regions ring_prefault() faults in
 * after the ring's own arrays, false past the last: hbgd's mappings of
 * the descriptors it reads for every task and of the completion region it
 * writes. The client's first write of a page allocates it, but hbgd's
 * mapping still takes a fault of its own at its first read: on this VM
 * every 64th parked 1-task graph paid 10-40 µs for it (docs/PERFORMANCE.md).
 * Populating them changes no byte the client wrote. Not the fanins and
 * arguments (6 MiB for the default window) nor the heap: the client's. */
static bool region_span(const struct hbg_ring *r, unsigned i, struct lazy_span *ret) {
        const struct hbg_geometry *g = &r->g;
        const struct lazy_span spans[] = {
                { r->descs, g->task_window * sizeof(*r->descs) },
                { r->cpl, g->cpl_region_size },
        };
        if (i >= sizeof(spans) / sizeof(spans[0]))
                return false;
        *ret = spans[i];
        return true;
}

/* Every task the client submitted is complete: its cursor is not past the
 * watermark (it is 0 before the first publish, below the first id).
 * Relaxed loads: a hint; a client that lies about its cursor only changes
 * when its own pages fault. The regions are faulted in only then: a graph
 * running meanwhile faults its pages in itself, and the pre-fault would
 * take a core from it. */
static bool ring_idle(const struct hbg_ring *r) {
        return client_read_u64(r, &r->sub->submitted) <=
               atomic_load_explicit(&r->cpl->completed_watermark, memory_order_relaxed);
}

/* The i-th span ring_prefault() faults in: the ring's n_arrays
 * arrays, then the regions'. */
static bool prefault_span(const struct hbg_ring *r, unsigned i, unsigned n_arrays, struct lazy_span *ret) {
        return i < n_arrays ? lazy_array(r, i, ret) : region_span(r, i - n_arrays, ret);
}

/* The regions go a page at a time, *stop looked at before each, so that
 * a session's close does not leave the piece running longer than that
 * page. A fault on a page a client is punching waits for the whole punch
 * (client_read.h); hbgd pre-faults a session's ring only once its region
 * is sealed against punches, but the engine does not rely on it. The
 * regions' pages of one call taking max_wait_ns in all (memory short, or
 * a punch) end the pre-fault, as does a busy ring (not ring_idle()). The
 * rest faults on first touch. */
int ring_prefault(struct hbg_ring *r, uint64_t *cursor, uint64_t max_bytes, const _Atomic bool *stop,
                  uint64_t max_wait_ns) {
        const uint64_t page = (uint64_t)sysconf(_SC_PAGESIZE);
        struct lazy_span a;
        uint64_t at = *cursor, start = 0, waited = 0;
        unsigned n_arrays = 0;
        while (lazy_array(r, n_arrays, &a))
                n_arrays++;
        for (unsigned i = 0; prefault_span(r, i, n_arrays, &a); i++) {
                uint64_t end = start + a.bytes;
                /* A spare's arrays are all resident already. */
                if (r->arrays_warm && lazy_arena_holds(&r->arrays, a.p) && at < end)
                        at = end;
                while (at < end) {
                        if (max_bytes == 0) { /* the piece ended inside this span */
                                *cursor = at;
                                return 1;
                        }
                        if (stop && atomic_load_explicit(stop, memory_order_relaxed))
                                return -ECANCELED;
                        if (i >= n_arrays && !ring_idle(r)) {
                                *cursor = at; /* a busy ring: the rest on first touch */
                                return 0;
                        }
                        char *p = (char *)a.p + (at - start);
                        uint64_t len = end - at < max_bytes ? end - at : max_bytes;
                        /* The regions a page at a time (above). */
                        if (i >= n_arrays && len > page - (uintptr_t)p % page)
                                len = page - (uintptr_t)p % page;
                        int64_t t0 = i >= n_arrays ? clock_now_ns() : 0;
                        int err = lazy_populate(p, len);
                        if (err < 0)
                                return err;
                        at += len;
                        max_bytes -= len;
                        if (i >= n_arrays && (waited += (uint64_t)(clock_now_ns() - t0)) >= max_wait_ns) {
                                *cursor = at; /* pages that waited: the rest on first touch */
                                return 0;
                        }
                }
                start = end;
        }
        *cursor = at;
        return 0;
}

/* sub_fd, when given, holds the whole region for good: a readable file
 * (a memfd) sealed against shrinking, not some other descriptor a read
 * could block on or come back short from. */
static bool sub_fd_usable(int fd, const struct hbg_geometry *g) {
        if (fd < 0)
                return true;
        struct stat st;
        int fl = fcntl(fd, F_GETFL), seals = fcntl(fd, F_GET_SEALS);
        return fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && (uint64_t)st.st_size >= g->sub_region_size &&
               fl >= 0 && (fl & O_ACCMODE) != O_WRONLY && !(fl & O_PATH) && seals >= 0 && (seals & F_SEAL_SHRINK);
}

/*
 * Every large array is a lazy zero mapping (daemon/engine/lazy_alloc.h) whose
 * all-zero state is the initial one: slots FREE and unowned, wake lists
 * open for the first lap (ring_lap() counts from first_id), queues empty,
 * no failure tags. So creating a ring costs no more than its small header,
 * whatever its window (docs/SECURITY.md).
 */
int ring_new(struct hbg_engine *e, const struct hbg_ring_params *p, struct hbg_ring **ret) {
        const struct hbg_geometry *g = &p->geometry;
        if (!sub_fd_usable(p->sub_fd, g))
                return -EINVAL;
        struct hbg_ring *r = aligned_alloc(64, sizeof(*r));
        int err = -ENOMEM;

        if (!r)
                return -ENOMEM;
        memset(r, 0, sizeof(*r));
        r->engine = e;
        snprintf(r->name, sizeof(r->name), "%s", p->name ? p->name : "ring");
        r->log_fields = p->log_fields;
        r->g = *g;
        r->released = p->released;
        r->released_userdata = p->released_userdata;
        r->first_id = p->first_id;
        r->task_mask = g->task_window - 1;
        r->completion_fd = p->completion_fd;
        r->sub_fd = p->sub_fd;
        /* Published with the ring (rings[], seq_cst). */
        atomic_store_explicit(&r->served, !p->serve_later, memory_order_relaxed);
        r->sub = p->sub_region;
        r->heap = (uint8_t *)p->sub_region + g->sub_heap_offset;
        r->descs = (struct hbg_task_desc *)((char *)p->sub_region + g->sub_descs_offset);
        r->fanins = (struct hbg_task_fanins *)((char *)p->sub_region + g->sub_fanins_offset);
        r->args = (struct hbg_task_args *)((char *)p->sub_region + g->sub_args_offset);
        r->graph_records = (struct hbg_graph_record *)((char *)p->sub_region + g->sub_graphs_offset);
        r->mailbox = (struct hbg_mailbox_entry *)((char *)p->sub_region + g->sub_mailbox_offset);
        r->cpl = p->cpl_region;
        r->graph_table = (struct hbg_graph_entry *)((char *)p->cpl_region + g->cpl_graphs_offset);
        r->ext_ready = (_Atomic uint64_t *)((char *)p->cpl_region + g->cpl_ext_ready_offset);
        flag_window_init(&r->window, g, p->cpl_region, p->first_id);
        /* Parked threads set need_wakeup only on the rings they saw: a new
         * ring starts with it set, so that its first publish rings the
         * doorbell whatever the threads do (at worst one doorbell too
         * many), and adding it wakes nobody (§9.4). */
        atomic_store_explicit(&r->cpl->need_wakeup, 1, memory_order_relaxed);
        atomic_store(&r->claim, p->first_id);
        r->retirer.expected_first = p->first_id;
        r->stall.timeout_ms = p->stall_timeout_ms ? p->stall_timeout_ms : e->cfg.stall_timeout_ms;
        r->stall.wm = p->first_id;
        r->stall.since_ms = clock_now_ms();
        pthread_mutex_init(&r->cold_lock, NULL);

        r->per_thread = aligned_alloc(64, e->nthreads * sizeof(*r->per_thread));
        /* Zeroed before anything can fail: ring_free() destroys every
         * completer, initialised or not (a zeroed one is empty). */
        if (r->per_thread)
                memset(r->per_thread, 0, e->nthreads * sizeof(*r->per_thread));
        r->fail.max = (uint32_t)g->task_window;
        r->fail.tags.mask = fail_tags_count(g) - 1;
        if (!r->per_thread)
                goto fail;
        /* A spare of this size if hbgd keeps one ready (faulted in, so
         * the first graph touches warm pages), else cold pages. */
        r->arrays_warm = ring_spares_take(&e->spares, arrays_bytes(g), &r->arrays);
        if (!r->arrays_warm) {
                if (lazy_arena_map(&r->arrays, arrays_bytes(g)) < 0)
                        goto fail;
                /* The slots first: the one array big enough for huge pages. */
                lazy_hint_huge(r->arrays.base, slots_bytes(g));
        }
        r->slots = lazy_arena_take(&r->arrays, slots_bytes(g));
        for (unsigned i = 0; i < SHAPE_EXEC_COUNT; i++)
                mpmc_init(&r->ready[i], lazy_arena_take(&r->arrays, queue_bytes(g)), g->task_window);
        mpmc_init(&r->retire, lazy_arena_take(&r->arrays, queue_bytes(g)), g->task_window);
        r->fail.tags.entries = lazy_arena_take(&r->arrays, fail_tags_bytes(g));
        r->fail.list = lazy_arena_take(&r->arrays, failures_bytes(g));
        r->retirer.graph_noticed_ns = lazy_arena_take(&r->arrays, graph_noticed_bytes(g));
        r->live.seen = lazy_arena_take(&r->arrays, live_graphs_seen_bytes(g));
        if (r->arrays.used != r->arrays.size)
                goto fail; /* not laid out as arrays_bytes() says: cannot happen */
        for (unsigned i = 0; i < e->nthreads; i++) {
                err = completer_init(&r->per_thread[i].completer, &r->window,
                                         failsafe_capacity(g));
                if (err < 0)
                        goto fail;
        }
        err = -ENOMEM;
        if (e->completion->ring_init && (err = e->completion->ring_init(r)) < 0)
                goto fail;
        *ret = r;
        return 0;
fail:
        ring_free(r);
        return err;
}

void ring_free(struct hbg_ring *r) {
        if (!r)
                return;
        if (r->per_thread) {
                if (r->engine->completion->ring_free)
                        r->engine->completion->ring_free(r);
                for (unsigned i = 0; i < r->engine->nthreads; i++)
                        completer_destroy(&r->per_thread[i].completer);
        }
        recorded_free_ring(r);
        free(r->fail.details); /* failures.c's table of refusals' numbers */
        pthread_mutex_destroy(&r->cold_lock);
        /* To the spares' store: kept for the next fill to make zero into
         * a spare, on the slow-work thread, if one is wanted; else
         * unmapped now (ring_spares_give_back()). */
        ring_spares_give_back(&r->engine->spares, &r->arrays, r->arrays_warm);
        free(r->per_thread);
        free(r);
}

void ring_stats(const struct hbg_ring *r, struct ring_stats *ret) {
        uint64_t completed = 0, failed = 0;
        for (unsigned i = 0; i < r->engine->nthreads; i++) {
                completed += stat_get(&r->per_thread[i].completed);
                failed += stat_get(&r->per_thread[i].failed);
        }
        *ret = (struct ring_stats){
                .submitted = atomic_load_explicit(&r->submitted_seen, memory_order_relaxed),
                .classified = atomic_load_explicit(&r->claim, memory_order_relaxed),
                .watermark = watermark_read(&r->window),
                .completed = completed,
                .failed = failed,
                .graphs_retired = atomic_load(&r->cpl->graphs_retired),
                .graphs_noticed = atomic_load_explicit(&r->retirer.graphs_noticed, memory_order_relaxed),
                .graphs_failed = atomic_load(&r->retirer.graphs_failed),
                .error = atomic_load(&r->cpl->error_code),
                .broken = atomic_load(&r->broken),
        };
}

void ring_counters_add_thread(const struct hbg_ring *r, unsigned thread, struct ring_counters *sum) {
        const struct ring_thread *rt = &r->per_thread[thread];
        const struct hbg_completer_stats *c = &rt->completer.stats;
        sum->dispatched += stat_get(&rt->dispatched);
        sum->published += stat_get(&c->published);
        sum->failsafe_pushes += stat_get(&c->deferred);
        sum->failsafe_retries += stat_get(&c->retries);
        sum->watermark_advances += stat_get(&c->advances);
        sum->watermark_cas_failures += stat_get(&c->cas_failures);
}

void ring_counters(const struct hbg_ring *r, struct ring_counters *ret) {
        *ret = (struct ring_counters){ 0 };
        for (unsigned i = 0; i < r->engine->nthreads; i++)
                ring_counters_add_thread(r, i, ret);
}
