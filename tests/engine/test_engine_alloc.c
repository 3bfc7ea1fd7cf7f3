/* SPDX-License-Identifier: MIT */
/*
 * The engine's constructors when allocation fails: engine_new() and
 * engine_ring_add() (ring_new()) with the k-th allocation (malloc,
 * calloc, aligned_alloc, posix_memalign, mmap) or thread creation failing,
 * for every k until one run needs no failure. Each must return -ENOMEM or
 * -EAGAIN and leave nothing behind: the error path is the destructor, and
 * a destructor that frees what was never set up (the per-thread array of a
 * ring before it was zeroed, once) is a wild free that ASan reports; what
 * is not freed, LeakSanitizer reports at exit.
 *
 * The allocator is injected at link time (-Wl,--wrap=...): the engine's
 * code is unchanged.
 */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "daemon/engine/engine.h"
#include "daemon/engine/engine_stats.h"
#include "daemon/engine/engine_spares.h"
#include "daemon/engine/lazy_alloc.h"
#include "daemon/engine/ring.h"
#include "daemon/engine/ring_spares.h"
#include "daemon/engine/work.h"
#include "shm/geometry.h"
#include "shm/layout.h"
#include "shm/producer.h"
#include "tests/engine/harness.h"
#include "tests/check_main.h"

/* ------------------------------------------------------------ injection */

static unsigned long calls, fail_at; /* fail_at 0: never */
static bool armed;

static bool fail_now(void) {
        if (!armed)
                return false;
        return ++calls == fail_at;
}

void *__real_malloc(size_t n);
void *__real_calloc(size_t n, size_t size);
void *__real_aligned_alloc(size_t align, size_t n);
int __real_posix_memalign(void **ret, size_t align, size_t n);
void *__real_mmap(void *addr, size_t len, int prot, int flags, int fd, off_t off);
int __real_pthread_create(pthread_t *t, const pthread_attr_t *a, void *(*fn)(void *), void *arg);

void *__wrap_malloc(size_t n);
void *__wrap_calloc(size_t n, size_t size);
void *__wrap_aligned_alloc(size_t align, size_t n);
int __wrap_posix_memalign(void **ret, size_t align, size_t n);
void *__wrap_mmap(void *addr, size_t len, int prot, int flags, int fd, off_t off);
int __wrap_pthread_create(pthread_t *t, const pthread_attr_t *a, void *(*fn)(void *), void *arg);

void *__wrap_malloc(size_t n) {
        return fail_now() ? NULL : __real_malloc(n);
}

void *__wrap_calloc(size_t n, size_t size) {
        return fail_now() ? NULL : __real_calloc(n, size);
}

void *__wrap_aligned_alloc(size_t align, size_t n) {
        return fail_now() ? NULL : __real_aligned_alloc(align, n);
}

int __wrap_posix_memalign(void **ret, size_t align, size_t n) {
        return fail_now() ? ENOMEM : __real_posix_memalign(ret, align, n);
}

/* The lazy arrays (anonymous, MAP_NORESERVE) mapped while `noting`. */
static bool noting;
static struct {
        void *p;
        size_t len;
} noted[64];
static unsigned n_noted;

void *__wrap_mmap(void *addr, size_t len, int prot, int flags, int fd, off_t off) {
        if (fail_now()) {
                errno = ENOMEM;
                return MAP_FAILED;
        }
        void *p = __real_mmap(addr, len, prot, flags, fd, off);
        if (noting && p != MAP_FAILED && (flags & MAP_ANONYMOUS) && (flags & MAP_NORESERVE) && n_noted < 64) {
                noted[n_noted].p = p;
                noted[n_noted++].len = len;
        }
        return p;
}

int __wrap_pthread_create(pthread_t *t, const pthread_attr_t *a, void *(*fn)(void *), void *arg) {
        return fail_now() ? EAGAIN : __real_pthread_create(t, a, fn, arg);
}

static void arm(unsigned long k) {
        calls = 0;
        fail_at = k;
        armed = true;
}

/* Disarm; true if the k-th call came (the run did fail somewhere). */
static bool disarm(void) {
        armed = false;
        return calls >= fail_at;
}

/* ------------------------------------------------------------ tests */

static void config(struct hbg_engine_config *cfg, unsigned mode) {
        engine_config_default(cfg);
        cfg->threads = 3;
        cfg->clusters = 4;
        cfg->completion_mode = mode;
}

/* The default geometry with a task window of `window`, a flag window a
 * quarter of it and a 64 KiB heap. */
static void window_geometry(struct hbg_geometry *g, uint64_t window) {
        struct hbg_geometry_request req;
        geometry_request_default(&req);
        req.task_window = window;
        req.flag_window = window / 4;
        req.heap_size = 1 << 16;
        ck_assert_int_eq(geometry_init(g, &req, NULL), 0);
}

/* Every allocation of engine_new() failing in turn, under each policy. */
START_TEST(engine_new_fails_cleanly) {
        unsigned long k;
        for (k = 1; k < 10000; k++) {
                struct hbg_engine_config cfg;
                config(&cfg, (unsigned)_i);
                struct hbg_engine *e = NULL;
                arm(k);
                int err = engine_new(&e, &cfg);
                bool failed = disarm();
                if (!failed) {
                        ck_assert_int_eq(err, 0);
                        engine_free(e);
                        break;
                }
                ck_assert_msg(err == -ENOMEM || err == -EAGAIN, "allocation %lu failing: %d (%s)", k, err,
                              strerror(-err));
                ck_assert_ptr_null(e);
        }
        ck_assert_msg(k > 1 && k < 10000, "engine_new: %lu allocations", k);
        printf("engine_new (%s): each of %lu allocations failed in turn\n",
               completion_mode_name(_i), k - 1);
}
END_TEST

static void released(void *userdata) {
        ++*(unsigned *)userdata;
}

/* Every allocation of a ring failing in turn (the regions are the
 * caller's and come first). */
START_TEST(ring_add_fails_cleanly) {
        struct hbg_engine_config cfg;
        config(&cfg, (unsigned)_i);
        struct hbg_engine *e = NULL;
        ck_assert_int_eq(engine_new(&e, &cfg), 0);
        struct hbg_geometry g;
        window_geometry(&g, 1024);
        void *sub = calloc(1, g.sub_region_size), *cpl = calloc(1, g.cpl_region_size);
        ck_assert(sub && cpl);
        layout_sub_region_init(sub, &g);
        layout_cpl_region_init(cpl, &g, 0);
        unsigned n_released = 0;
        struct hbg_ring_params p = {
                .geometry = g, .sub_region = sub, .sub_fd = -1, .cpl_region = cpl, .first_id = 0,
                .completion_fd = -1, .name = "alloc", .released = released, .released_userdata = &n_released,
        };
        unsigned long k;
        for (k = 1; k < 10000; k++) {
                struct hbg_ring *r = NULL;
                arm(k);
                int err = engine_ring_add(e, &p, &r);
                bool failed = disarm();
                if (!failed) {
                        ck_assert_int_eq(err, 0);
                        engine_ring_remove(e, r, -ESHUTDOWN);
                        while (n_released == 0) {
                                engine_collect(e);
                                sched_yield();
                        }
                        break;
                }
                ck_assert_msg(err == -ENOMEM, "allocation %lu failing: %d (%s)", k, err, strerror(-err));
                /* A ring that never started is not "released". */
                ck_assert_uint_eq(n_released, 0);
        }
        ck_assert_msg(k > 1 && k < 10000, "engine_ring_add: %lu allocations", k);
        printf("ring_add (%s): each of %lu allocations failed in turn\n",
               completion_mode_name(_i), k - 1);
        engine_free(e);
        free(sub);
        free(cpl);
}
END_TEST

/* Pages of [p, p + len) resident now (mincore), and how many in all. */
static size_t resident_range(const void *p, size_t len, size_t *ret_total) {
        size_t page = (size_t)sysconf(_SC_PAGESIZE);
        uintptr_t start = (uintptr_t)p & ~(uintptr_t)(page - 1), end = (uintptr_t)p + len;
        size_t n = (end - start + page - 1) / page, resident = 0;
        unsigned char *vec = malloc(n);
        ck_assert_ptr_nonnull(vec);
        ck_assert_int_eq(mincore((void *)start, end - start, vec), 0);
        for (size_t k = 0; k < n; k++)
                resident += vec[k] & 1;
        free(vec);
        *ret_total = n;
        return resident;
}

/* A session's region as hbgd maps it: shared, zero, nothing resident. */
static void *map_region(uint64_t size) {
        void *p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
        ck_assert(p != MAP_FAILED);
        return p;
}

/* Pages of the noted arrays resident now (mincore), and how many in all. */
static size_t resident_pages(size_t *ret_total) {
        size_t page = (size_t)sysconf(_SC_PAGESIZE), resident = 0, total = 0;
        for (unsigned i = 0; i < n_noted; i++) {
                size_t n = (noted[i].len + page - 1) / page;
                unsigned char *vec = malloc(n);
                ck_assert_ptr_nonnull(vec);
                ck_assert_int_eq(mincore(noted[i].p, noted[i].len, vec), 0);
                for (size_t k = 0; k < n; k++)
                        resident += vec[k] & 1;
                total += n;
                free(vec);
        }
        *ret_total = total;
        return resident;
}

/* An engine of completion mode `mode` with one ring of a 4096-task
 * window, its regions mapped as hbgd maps them; with `note`, the ring's
 * lazy mappings noted (resident_pages()); with `serve_later`, a ring no
 * thread visits. */
struct prefault_ring {
        struct hbg_engine *e;
        struct hbg_geometry g;
        void *sub, *cpl;
        struct hbg_ring *r;
        unsigned n_released;
};

static void prefault_ring_open(struct prefault_ring *pr, unsigned mode, const char *name, bool note,
                               bool serve_later) {
        struct hbg_engine_config cfg;
        config(&cfg, mode);
        pr->e = NULL;
        ck_assert_int_eq(engine_new(&pr->e, &cfg), 0);
        window_geometry(&pr->g, 4096);
        pr->sub = map_region(pr->g.sub_region_size);
        pr->cpl = map_region(pr->g.cpl_region_size);
        layout_sub_region_init(pr->sub, &pr->g);
        layout_cpl_region_init(pr->cpl, &pr->g, 0);
        pr->n_released = 0;
        struct hbg_ring_params p = {
                .geometry = pr->g, .sub_region = pr->sub, .sub_fd = -1, .cpl_region = pr->cpl, .first_id = 0,
                .completion_fd = -1, .name = name, .released = released, .released_userdata = &pr->n_released,
                .serve_later = serve_later,
        };
        pr->r = NULL;
        n_noted = 0;
        noting = note;
        ck_assert_int_eq(engine_ring_add(pr->e, &p, &pr->r), 0);
        noting = false;
}

static void prefault_ring_close(struct prefault_ring *pr) {
        engine_ring_remove(pr->e, pr->r, -ESHUTDOWN);
        while (pr->n_released == 0) {
                engine_collect(pr->e);
                sched_yield();
        }
        engine_free(pr->e);
        munmap(pr->sub, pr->g.sub_region_size);
        munmap(pr->cpl, pr->g.cpl_region_size);
}

/*
 * A new ring's private arrays are lazy (nothing resident: creating it is
 * cheap whatever its window); ring_prefault(), a piece at a time,
 * makes every page of them resident, and the memory a session is charged
 * for (engine_ring_memory()) covers all those pages. It then faults in
 * its mapping of the regions' descriptors and completion region (the last
 * span as wholly as the others), not the fanins, arguments or the
 * client's heap.
 */
START_TEST(ring_prefault_resident) {
        struct prefault_ring pr;
        prefault_ring_open(&pr, (unsigned)_i, "prefault", true, false);
        struct hbg_engine *e = pr.e;
        struct hbg_ring *r = pr.r;
        const struct hbg_geometry g = pr.g;
        void *sub = pr.sub, *cpl = pr.cpl;
        /* The ring's arrays are one mapping (lazy_arena), the resolver's
         * queues more. */
        ck_assert_uint_ge(n_noted, 1);
        size_t total, before = resident_pages(&total);
        size_t page = (size_t)sysconf(_SC_PAGESIZE);
        ck_assert_msg(before < total / 8, "a new ring has %zu of its %zu lazy pages resident already", before, total);
        ck_assert_msg((uint64_t)total * page <= engine_ring_memory(e, &g),
                      "the charge (%" PRIu64 " bytes) does not cover the %zu pages of the ring's arrays",
                      engine_ring_memory(e, &g), total);

        /* A stop already set: nothing done. */
        _Atomic bool stop = true;
        uint64_t cursor = 0;
        ck_assert_int_eq(ring_prefault(r, &cursor, 64 << 10, &stop, UINT64_MAX), -ECANCELED);
        ck_assert_uint_eq(cursor, 0);
        atomic_store(&stop, false);
        unsigned pieces = 0;
        int more;
        while ((more = ring_prefault(r, &cursor, 64 << 10, &stop, UINT64_MAX)) > 0)
                ck_assert_uint_lt(++pieces, 100000);
        ck_assert_int_eq(more, 0);
        size_t after = resident_pages(&total);
        ck_assert_msg(after == total, "after ring_prefault(): %zu of %zu pages resident (%zu before)", after,
                      total, before);
        /* In pieces of at most 64 KiB: the ring's slots alone are 32. */
        ck_assert_uint_ge(pieces, 32);
        struct {
                const char *what;
                const void *p;
                uint64_t len;
        } spans[] = {
                { "descriptors", (char *)sub + g.sub_descs_offset, g.task_window * sizeof(struct hbg_task_desc) },
                { "completion region", cpl, g.cpl_region_size },
        };
        for (size_t k = 0; k < sizeof(spans) / sizeof(spans[0]); k++) {
                size_t all, in = resident_range(spans[k].p, spans[k].len, &all);
                ck_assert_msg(in == all, "after ring_prefault(): %zu of the %s' %zu pages resident", in,
                              spans[k].what, all);
        }
        size_t heap_all, heap_in = resident_range((char *)sub + g.sub_heap_offset, g.heap_size, &heap_all);
        ck_assert_msg(heap_in <= 1, "ring_prefault() faulted in %zu of the heap's %zu pages", heap_in, heap_all);
        /* The fanins' and arguments' first and last pages may be the
         * descriptors' and the graph records'; none between. */
        size_t pl_all, pl_in = resident_range((char *)sub + g.sub_fanins_offset,
                                              g.task_window * (sizeof(struct hbg_task_fanins) +
                                                               sizeof(struct hbg_task_args)),
                                              &pl_all);
        ck_assert_msg(pl_in <= 2, "ring_prefault() faulted in %zu of the fanins' and arguments' %zu pages", pl_in,
                      pl_all);
        /* Done: nothing more to do. */
        ck_assert_int_eq(ring_prefault(r, &cursor, 64 << 10, NULL, UINT64_MAX), 0);
        printf("ring_prefault_resident (%s): %zu -> %zu of %zu pages, %u pieces\n", completion_mode_name(_i),
               before, after, total, pieces + 1);

        prefault_ring_close(&pr);
}
END_TEST

/* The claim's look at what it may take reads no slot of the ring's first
 * lap (RUNTIME_LOGIC §10.1 (c)): those slots have had no occupant. A read
 * of a cold ring's slot page ahead of its first write mapped the zero
 * page, and the write then faulted again. Tasks published to a ring no
 * thread visits yet (serve_later): every published id is claimable, and
 * no page of the slots is resident after the look. */
START_TEST(first_lap_claim_reads_no_slot) {
        struct prefault_ring pr;
        prefault_ring_open(&pr, (unsigned)_i, "first lap", false, true);
        struct hbg_ring *r = pr.r;
        struct hbg_producer p;
        producer_init(&p, &pr.g, pr.sub, pr.cpl, 0);
        const struct hbg_task_record t = { .block_num = 1 };
        for (unsigned i = 0; i < 600; i++)
                ck_assert_uint_eq(producer_write(&p, &t, NULL, 0), i);
        producer_publish(&p);
        ck_assert_uint_eq(work_claimable(r, 0, 16, false), 16);
        ck_assert_uint_eq(work_claimable(r, 16, 1024, false), 584);
        ck_assert_uint_eq(work_claimable(r, 600, 16, false), 0);
        size_t all, in = resident_range(r->slots, pr.g.task_window * sizeof(struct task_slot), &all);
        ck_assert_msg(in == 0, "the look made %zu of the slots' %zu pages resident", in, all);
        prefault_ring_close(&pr);
}
END_TEST

/* From the second lap on, the look waits for the previous occupant's
 * release (§10.1 (c)): with every id of the first lap complete and id 0's
 * slot held as if its occupant were still completing, id D is not
 * claimed, nor counted by a look that starts in the first lap, until the
 * slot is released. */
START_TEST(later_lap_claim_waits_for_release) {
        struct hbg_engine_config cfg;
        config(&cfg, (unsigned)_i);
        struct hbg_engine *e = NULL;
        ck_assert_int_eq(engine_new(&e, &cfg), 0);
        struct hbg_geometry_request req;
        geometry_request_default(&req);
        req.task_window = 256;
        req.flag_window = 256;
        req.heap_size = 64u << 10;
        struct harness_ring h;
        ck_assert_int_eq(harness_ring_init(&h, e, &req, 0), 0);
        const uint64_t D = h.g.task_window;
        struct harness_task t = { .block_num = 1 };
        for (uint64_t i = 0; i < D; i++)
                harness_add_task(&h, &t);
        struct hbg_graph_entry ge;
        ck_assert_int_eq(harness_wait_graph(&h, harness_end_graph(&h, 1), 10000, &ge), 0);
        ck_assert_int_eq(ge.status, 0);

        struct task_slot *held = ring_slot(h.ring, D);
        ck_assert_int_eq(atomic_load(&held->state), SLOT_FREE);
        atomic_store(&held->state, SLOT_COMPLETING);
        for (unsigned i = 0; i < 8; i++)
                harness_add_task(&h, &t);
        uint64_t k = harness_end_graph(&h, 2);
        struct timespec pause = { .tv_nsec = 50 * 1000000L };
        nanosleep(&pause, NULL);
        uint64_t claimed = atomic_load(&h.ring->claim);
        ck_assert_uint_eq(claimed, D);
        ck_assert_uint_eq(work_claimable(h.ring, D, 8, false), 0);
        ck_assert_uint_eq(work_claimable(h.ring, D - 8, 16, false), 8);
        atomic_store(&held->state, SLOT_FREE);
        ring_kick(h.ring);
        ck_assert_int_eq(harness_wait_graph(&h, k, 10000, &ge), 0);
        ck_assert_int_eq(ge.status, 0);
        claimed = atomic_load(&h.ring->claim);
        ck_assert_uint_eq(claimed, D + 8);
        harness_ring_destroy(&h);
        engine_free(e);
}
END_TEST

/*
 * A busy ring (a task submitted and not complete: here a host task nobody
 * answers) gets its arrays faulted in, and not the regions: the graph
 * running faults its own pages, and the pre-fault would take a core from
 * it.
 */
START_TEST(ring_prefault_busy_skips_regions) {
        struct prefault_ring pr;
        prefault_ring_open(&pr, (unsigned)_i, "busy", false, false);
        struct hbg_task_desc *d = (struct hbg_task_desc *)(void *)((char *)pr.sub + pr.g.sub_descs_offset);
        d[0] = (struct hbg_task_desc){ .id = 0, .flags = HBG_TASK_EXTERNAL, .block_num = 1 };
        atomic_store(&((struct hbg_sub_header *)pr.sub)->submitted, 1);
        ring_kick(pr.r);

        uint64_t cursor = 0;
        unsigned pieces = 0;
        int more;
        while ((more = ring_prefault(pr.r, &cursor, 64 << 10, NULL, UINT64_MAX)) > 0)
                ck_assert_uint_lt(++pieces, 100000);
        ck_assert_int_eq(more, 0);
        size_t all, in = resident_range(d, pr.g.task_window * sizeof(*d), &all);
        ck_assert_msg(in <= 1, "a busy ring's pre-fault faulted in %zu of the descriptors' %zu pages", in, all);
        prefault_ring_close(&pr);
}
END_TEST

/*
 * A task with more than three fanins and no arguments writes 128 bytes
 * beyond its descriptor, beside its neighbours' (layout version 7): a
 * window of such tasks on a fresh region makes the descriptors and the
 * fanins resident and leaves the arguments untouched. In one 384-byte
 * payload a task, the same tasks made three times the pages resident.
 * Then, a lap on (ids masked into slots), tasks with arguments write
 * them into the arguments' slots and nothing into the fanins'.
 */
START_TEST(fanins_apart_from_arguments) {
        struct hbg_geometry g;
        window_geometry(&g, 4096);
        void *sub = map_region(g.sub_region_size), *cpl = map_region(g.cpl_region_size);
        const uint64_t first = 1000, D = g.task_window;
        layout_sub_region_init(sub, &g);
        layout_cpl_region_init(cpl, &g, first);
        struct hbg_producer p;
        producer_init(&p, &g, sub, cpl, first);
        const struct hbg_task_record t = { .block_num = 1 };
        for (uint64_t id = first; id < first + D; id++) {
                uint64_t fanins[4] = { 0, 0, 0, 0 };
                unsigned n = id >= first + 4 ? 4 : 0;
                for (unsigned i = 0; i < n; i++)
                        fanins[i] = id - 1 - i;
                ck_assert_uint_eq(producer_write(&p, &t, fanins, n), id);
        }
        const struct hbg_task_fanins *f = (const void *)((char *)sub + g.sub_fanins_offset);
        const struct hbg_task_args *a = (const void *)((char *)sub + g.sub_args_offset);
        const struct hbg_task_desc *d = (const void *)((char *)sub + g.sub_descs_offset);
        uint64_t last = first + D - 1;
        ck_assert_uint_eq(d[last & (D - 1)].n_fanins, 4);
        ck_assert_uint_eq(d[last & (D - 1)].fanins_inline[0], 0);
        ck_assert_uint_eq(f[last & (D - 1)].ids[0], last - 1);
        ck_assert_uint_eq(f[last & (D - 1)].ids[3], last - 4);
        size_t fanins_all, fanins_in = resident_range(f, D * sizeof(*f), &fanins_all);
        ck_assert_msg(fanins_in == fanins_all, "%zu of the fanins' %zu pages resident", fanins_in, fanins_all);
        /* The first page may be the fanins' last, the last the graph
         * records'; none between. */
        size_t args_all, args_in = resident_range(a, D * sizeof(*a), &args_all);
        ck_assert_msg(args_in <= 1, "%zu of the arguments' %zu pages resident", args_in, args_all);

        /* A task with two tensors and a scalar on the next lap: its
         * arguments in its slot of the arguments, its slot's fanins as
         * the lap before left them. */
        struct hbg_task_record k = { .kernel = { 0, 1, 0 }, .lane_mask = 2, .block_num = 1, .n_tensors = 2,
                                     .n_scalars = 1 };
        k.tensors[0] = (struct hbg_tensor_arg){ .offset = 64, .length = 64, .direction = HBG_DIR_IN };
        k.tensors[1] = (struct hbg_tensor_arg){ .offset = 128, .length = 64, .direction = HBG_DIR_OUT };
        k.scalars[0] = 77;
        uint64_t slot = (first + D) & (D - 1);
        struct hbg_task_fanins lap_before = f[slot];
        uint64_t id = producer_write(&p, &k, NULL, 0);
        ck_assert_uint_eq(id, first + D);
        ck_assert_uint_ne(slot, id);
        ck_assert_uint_eq(a[slot].tensors[0].offset, 64);
        ck_assert_uint_eq(a[slot].tensors[1].offset, 128);
        ck_assert_uint_eq(a[slot].tensors[1].direction, HBG_DIR_OUT);
        ck_assert_uint_eq(a[slot].scalars[0], 77);
        ck_assert_uint_eq(d[slot].n_tensors, 2);
        ck_assert_uint_eq(d[slot].n_fanins, 0);
        ck_assert(memcmp(&f[slot], &lap_before, sizeof(lap_before)) == 0);
        munmap(sub, g.sub_region_size);
        munmap(cpl, g.cpl_region_size);
}
END_TEST

/* A geometry of `window` tasks with its regions (calloc'd, initialised). */
static void small_geometry(struct hbg_geometry *g, uint64_t window, void **sub, void **cpl) {
        window_geometry(g, window);
        *sub = calloc(1, g->sub_region_size);
        *cpl = calloc(1, g->cpl_region_size);
        ck_assert(*sub && *cpl);
        layout_sub_region_init(*sub, g);
        layout_cpl_region_init(*cpl, g, 0);
}

/*
 * The regions' pages of one call taking max_wait_ns in all end the
 * pre-fault (a client punching holes makes each fault wait for its punch,
 * and the slow-work thread sets up every client's sessions): with 0, the
 * first page of the regions ends it, the rest left to first touch.
 */
START_TEST(ring_prefault_waited_ends) {
        struct prefault_ring pr;
        prefault_ring_open(&pr, (unsigned)_i, "waited", false, false);
        uint64_t cursor = 0;
        unsigned pieces = 0;
        int more;
        while ((more = ring_prefault(pr.r, &cursor, 64 << 10, NULL, 0)) > 0)
                ck_assert_uint_lt(++pieces, 100000);
        ck_assert_int_eq(more, 0);
        const char *descs = (const char *)pr.sub + pr.g.sub_descs_offset;
        size_t all, in = resident_range(descs, pr.g.task_window * sizeof(struct hbg_task_desc), &all);
        ck_assert_msg(in <= 2, "the pre-fault went on after a page that waited: %zu of the descriptors' %zu pages",
                      in, all);
        size_t cpl_all, cpl_in = resident_range(pr.cpl, pr.g.cpl_region_size, &cpl_all);
        ck_assert_msg(cpl_in < cpl_all, "the pre-fault went on to the completion region (%zu of %zu pages)", cpl_in,
                      cpl_all);
        prefault_ring_close(&pr);
}
END_TEST

/*
 * A ring with the submission memfd (sub_fd): what the io thread reads of
 * the region (the graph cursor and records, for hbgctl graphs and a
 * cancel) comes through the memfd, not through the mapping, in which a
 * fault could wait for a client's punch (client_read.h). Here the memfd
 * holds a graph that the mapping does not: only reads of the memfd see
 * it, in the listing, the cancel, and the removal that fails it (its
 * last steps run on the remover's thread). A descriptor that is no file
 * of the region's size, or not sealed against shrinking, is refused.
 */
START_TEST(io_reads_through_memfd) {
        struct hbg_engine_config cfg;
        config(&cfg, (unsigned)_i);
        struct hbg_engine *e = NULL;
        ck_assert_int_eq(engine_new(&e, &cfg), 0);
        struct hbg_geometry g;
        void *sub, *cpl;
        small_geometry(&g, 1024, &sub, &cpl);

        int fd = memfd_create("io-reads", MFD_CLOEXEC | MFD_ALLOW_SEALING);
        ck_assert_int_ge(fd, 0);
        ck_assert_int_eq(ftruncate(fd, (off_t)g.sub_region_size), 0);
        char *other = mmap(NULL, g.sub_region_size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
        ck_assert(other != MAP_FAILED);
        layout_sub_region_init(other, &g);
        struct hbg_graph_record *rec = (struct hbg_graph_record *)(void *)(other + g.sub_graphs_offset);
        rec[0] = (struct hbg_graph_record){ .graph_id = 77, .first_id = 0, .last_id = 3 };
        atomic_store(&((struct hbg_sub_header *)(void *)other)->graphs_submitted, 1);

        unsigned n_released = 0;
        struct hbg_ring_params p = {
                .geometry = g, .sub_region = sub, .sub_fd = fd, .cpl_region = cpl, .first_id = 0,
                .completion_fd = -1, .name = "io-reads", .released = released, .released_userdata = &n_released,
        };
        int fds[2];
        ck_assert_int_eq(pipe2(fds, O_CLOEXEC), 0);
        struct hbg_ring *r = NULL;
        p.sub_fd = fds[0];
        ck_assert_int_eq(engine_ring_add(e, &p, &r), -EINVAL);
        int small = memfd_create("io-reads-small", MFD_CLOEXEC | MFD_ALLOW_SEALING);
        ck_assert_int_eq(ftruncate(small, (off_t)g.sub_region_size - 4096), 0);
        ck_assert_int_eq(fcntl(small, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW), 0);
        p.sub_fd = small;
        ck_assert_int_eq(engine_ring_add(e, &p, &r), -EINVAL);
        /* Not sealed against shrinking: a read could come back short. */
        p.sub_fd = fd;
        ck_assert_int_eq(engine_ring_add(e, &p, &r), -EINVAL);
        ck_assert_int_eq(fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW), 0);
        ck_assert_int_eq(engine_ring_add(e, &p, &r), 0);

        struct hbg_live_graph live[4];
        uint64_t n_live = 0;
        size_t n = ring_live_graphs(r, live, 4, &n_live);
        ck_assert_uint_eq(n, 1);
        ck_assert_uint_eq(n_live, 1);
        ck_assert_uint_eq(live[0].graph_id, 77);
        ck_assert_uint_eq(live[0].last_id, 3);
        ck_assert_int_eq(ring_cancel_graph(r, 0, "io-reads"), 0);
        ck_assert_int_eq(ring_cancel_graph(r, 1, "io-reads"), -ENOENT);

        /* The ring's removal fails its graphs on this thread, as on hbgd's
         * io thread: the one graph the memfd holds. */
        engine_ring_remove(e, r, -ESHUTDOWN);
        while (n_released == 0) {
                engine_collect(e);
                sched_yield();
        }
        const struct hbg_cpl_header *ch = cpl;
        ck_assert_uint_eq(atomic_load(&ch->graphs_retired), 1);
        engine_free(e);
        munmap(other, g.sub_region_size);
        close(fd);
        close(small);
        close(fds[0]);
        close(fds[1]);
        free(sub);
        free(cpl);
}
END_TEST

/* This process's mapped bytes (/proc/self/statm: its first number, in
 * pages). */
static size_t mapped_bytes(void) {
        FILE *f = fopen("/proc/self/statm", "r");
        ck_assert_ptr_nonnull(f);
        unsigned long pages = 0;
        ck_assert_int_eq(fscanf(f, "%lu", &pages), 1);
        fclose(f);
        return pages * (size_t)sysconf(_SC_PAGESIZE);
}

/* An arena of LAZY_HUGE_MIN or more (a ring's arrays at a window of
 * 8192 or more, and its spares) starts on a 2 MiB boundary, a smaller one
 * anywhere; either way exactly its bytes stay mapped (the slack taken to
 * align it is given back), and unmapping it leaves none of them. */
START_TEST(lazy_arena_huge_boundary) {
        size_t page = (size_t)sysconf(_SC_PAGESIZE);
        const size_t sizes[] = { LAZY_HUGE_MIN - page, LAZY_HUGE_MIN, (8u << 20) + 3 * page };
        for (size_t k = 0; k < sizeof(sizes) / sizeof(sizes[0]); k++) {
                /* Several: where a mapping lands differs. */
                for (size_t i = 0; i < 8; i++) {
                        struct lazy_arena a;
                        size_t before = mapped_bytes();
                        ck_assert_int_eq(lazy_arena_map(&a, sizes[k]), 0);
                        ck_assert_uint_eq(mapped_bytes() - before, sizes[k]);
                        ck_assert_uint_eq(a.size, sizes[k]);
                        if (sizes[k] >= LAZY_HUGE_MIN)
                                ck_assert_uint_eq((uintptr_t)a.base % LAZY_HUGE_ALIGN, 0);
                        a.base[0] = 1;
                        a.base[a.size - 1] = 1;
                        ck_assert_ptr_nonnull(lazy_arena_take(&a, sizes[k]));
                        ck_assert_ptr_null(lazy_arena_take(&a, 1));
                        char *base = a.base;
                        lazy_arena_unmap(&a);
                        ck_assert_ptr_null(a.base);
                        ck_assert_uint_eq(mapped_bytes(), before);
                        unsigned char v;
                        ck_assert_int_eq(mincore(base, page, &v), -1);
                }
        }
}
END_TEST

/* An engine and the regions of rings of two sizes, for the spare tests. */
struct spare_fixture {
        struct hbg_engine *e;
        struct hbg_geometry g, other; /* task windows 4096 and 2048 */
        void *sub, *cpl, *osub, *ocpl;
};

static void spare_fixture_init(struct spare_fixture *f, unsigned mode) {
        struct hbg_engine_config cfg;
        config(&cfg, mode);
        f->e = NULL;
        ck_assert_int_eq(engine_new(&f->e, &cfg), 0);
        small_geometry(&f->g, 4096, &f->sub, &f->cpl);
        small_geometry(&f->other, 2048, &f->osub, &f->ocpl);
}

static void spare_fixture_fini(struct spare_fixture *f) {
        engine_free(f->e);
        free(f->sub);
        free(f->cpl);
        free(f->osub);
        free(f->ocpl);
}

/*
 * Spare ring arrays (ring_spares.h): filled a piece at a time up to the
 * number wanted, all resident; a ring of their size takes one (no new
 * mapping, its arrays resident, only the regions left for its own
 * pre-fault); a
 * ring of another size does not; a fill for another size drops them, and
 * so does a fill wanting fewer.
 */
START_TEST(spare_rings_taken) {
        struct spare_fixture f;
        spare_fixture_init(&f, (unsigned)_i);
        struct hbg_engine *e = f.e;
        struct hbg_geometry g = f.g, other = f.other;
        void *sub = f.sub, *cpl = f.cpl, *osub = f.osub, *ocpl = f.ocpl;
        uint64_t bytes;
        ck_assert_uint_eq(engine_spares(e, &bytes, NULL), 0);

        /* Two spares, 64 KiB a step. */
        unsigned steps = 0;
        int more;
        n_noted = 0;
        noting = true;
        while ((more = engine_spare_fill(e, &g, 2, 64 << 10)) > 0)
                ck_assert_uint_lt(++steps, 100000);
        noting = false;
        ck_assert_int_eq(more, 0);
        ck_assert_uint_eq(n_noted, 2); /* one mapping each */
        ck_assert_uint_eq(engine_spares(e, &bytes, NULL), 2);
        ck_assert_uint_eq(bytes, noted[0].len + noted[1].len);
        ck_assert_uint_ge(steps, 2 * (noted[0].len >> 16) - 1);
        size_t total, resident = resident_pages(&total);
        ck_assert_msg(resident == total, "spares: %zu of %zu pages resident", resident, total);
        /* Done: another call changes nothing. */
        ck_assert_int_eq(engine_spare_fill(e, &g, 2, 64 << 10), 0);
        ck_assert_uint_eq(engine_spares(e, &bytes, NULL), 2);

        /* A ring of that size takes one and maps no arrays of its own. */
        unsigned n_released = 0;
        struct hbg_ring_params p = {
                .geometry = g, .sub_region = sub, .sub_fd = -1, .cpl_region = cpl, .first_id = 0,
                .completion_fd = -1, .name = "spare", .released = released, .released_userdata = &n_released,
        };
        struct hbg_ring *r = NULL;
        unsigned before = n_noted;
        noting = true;
        ck_assert_int_eq(engine_ring_add(e, &p, &r), 0);
        noting = false;
        unsigned policy_maps = n_noted - before; /* the resolver's queues */
        uint64_t taken;
        ck_assert_uint_eq(engine_spares(e, &bytes, &taken), 1);
        ck_assert_uint_eq(taken, 1);
        /* Its pre-fault has only the policy's arrays and the regions
         * (hbgd's mapping of them) left. */
        uint64_t cursor = 0;
        unsigned pieces = 0;
        while ((more = ring_prefault(r, &cursor, 64 << 10, NULL, UINT64_MAX)) > 0)
                ck_assert_uint_lt(++pieces, 100000);
        ck_assert_int_eq(more, 0);
        uint64_t regions = g.task_window * (sizeof(struct hbg_task_desc) + sizeof(struct hbg_task_fanins) +
                                            sizeof(struct hbg_task_args)) +
                           g.cpl_region_size;
        if (policy_maps == 0)
                ck_assert_uint_le(pieces, regions >> 16);

        /* A ring of another size maps its own: the spare stays. */
        struct hbg_ring_params po = p;
        po.geometry = other;
        po.sub_region = osub;
        po.cpl_region = ocpl;
        struct hbg_ring *ro = NULL;
        n_noted = 0;
        noting = true;
        ck_assert_int_eq(engine_ring_add(e, &po, &ro), 0);
        noting = false;
        ck_assert_uint_ge(n_noted, 1);
        ck_assert_uint_eq(engine_spares(e, &bytes, &taken), 1);
        ck_assert_uint_eq(taken, 1);

        /* A fill for the other size drops the spare of this one; one
         * wanting none drops the rest. */
        ck_assert_int_eq(engine_spare_fill(e, &other, 1, 0), 1);
        ck_assert_uint_eq(engine_spares(e, &bytes, NULL), 0);
        ck_assert_int_eq(engine_spare_fill(e, &other, 1, UINT64_MAX), 0);
        ck_assert_uint_eq(engine_spares(e, &bytes, NULL), 1);
        ck_assert_int_eq(engine_spare_fill(e, &other, 0, UINT64_MAX), 0);
        ck_assert_uint_eq(engine_spares(e, &bytes, NULL), 0);
        ck_assert_uint_eq(bytes, 0);
        /* Trimmed to a number, whatever their size. */
        ck_assert_int_eq(engine_spare_fill(e, &g, 2, UINT64_MAX), 1);
        ck_assert_int_eq(engine_spare_fill(e, &g, 2, UINT64_MAX), 0);
        ck_assert_uint_eq(engine_spares(e, &bytes, NULL), 2);
        engine_spares_trim(e, 1);
        ck_assert_uint_eq(engine_spares(e, &bytes, NULL), 1);
        engine_spares_trim(e, 0);
        ck_assert_uint_eq(engine_spares(e, &bytes, NULL), 0);
        printf("spare_rings_taken (%s): 2 spares in %u steps of 64 KiB\n", completion_mode_name(_i), steps + 1);

        engine_ring_remove(e, r, -ESHUTDOWN);
        engine_ring_remove(e, ro, -ESHUTDOWN);
        while (n_released < 2) {
                engine_collect(e);
                sched_yield();
        }
        spare_fixture_fini(&f);
}
END_TEST

/*
 * A freed ring's arena goes back to the store (ring_free()): the next fill
 * makes the spare of it, with no mapping of its own; one of another size
 * is unmapped at once.
 */
START_TEST(spare_rings_from_freed_rings) {
        struct spare_fixture f;
        spare_fixture_init(&f, (unsigned)_i);
        struct hbg_engine *e = f.e;
        struct hbg_geometry g = f.g, other = f.other;
        void *sub = f.sub, *cpl = f.cpl, *osub = f.osub, *ocpl = f.ocpl;
        uint64_t bytes, taken;
        while (engine_spare_fill(e, &g, 1, UINT64_MAX) > 0)
                ;
        ck_assert_uint_eq(engine_spares(e, &bytes, NULL), 1);

        unsigned n_released = 0;
        struct hbg_ring_params p = {
                .geometry = g, .sub_region = sub, .sub_fd = -1, .cpl_region = cpl, .first_id = 0,
                .completion_fd = -1, .name = "reused", .released = released, .released_userdata = &n_released,
        };
        struct hbg_ring *r = NULL, *ro = NULL;
        ck_assert_int_eq(engine_ring_add(e, &p, &r), 0);
        ck_assert_uint_eq(engine_spares(e, &bytes, &taken), 0);
        ck_assert_uint_eq(taken, 1);
        engine_ring_remove(e, r, -ESHUTDOWN);
        while (n_released < 1) {
                engine_collect(e);
                sched_yield();
        }

        /* Its arena is the next spare: no new mapping. */
        n_noted = 0;
        noting = true;
        unsigned steps = 0;
        int more;
        while ((more = engine_spare_fill(e, &g, 1, 64 << 10)) > 0)
                ck_assert_uint_lt(++steps, 100000);
        noting = false;
        ck_assert_int_eq(more, 0);
        ck_assert_uint_eq(n_noted, 0);
        ck_assert_uint_eq(engine_spares(e, &bytes, NULL), 1);
        ck_assert_uint_ge(steps + 1, bytes >> 16);
        const uint64_t arena = bytes;
        /* And a ring takes it as any spare. */
        ck_assert_int_eq(engine_ring_add(e, &p, &r), 0);
        ck_assert_uint_eq(engine_spares(e, &bytes, &taken), 0);
        ck_assert_uint_eq(taken, 2);

        /* Freed, one of another size and this one: this one's arena
         * waits and the next fill reuses it; the other's is unmapped. */
        struct hbg_ring_params po = p;
        po.geometry = other;
        po.sub_region = osub;
        po.cpl_region = ocpl;
        n_noted = 0;
        noting = true;
        ck_assert_int_eq(engine_ring_add(e, &po, &ro), 0);
        noting = false;
        ck_assert_uint_ge(n_noted, 1);
        void *other_arrays = noted[0].p; /* ring_new() maps its arena first */
        engine_ring_remove(e, ro, -ESHUTDOWN);
        engine_ring_remove(e, r, -ESHUTDOWN);
        while (n_released < 3) {
                engine_collect(e);
                sched_yield();
        }
        ck_assert_uint_eq(engine_spares_waiting(e), arena);
        unsigned char v;
        ck_assert_int_eq(mincore(other_arrays, 1, &v), -1); /* not of the spares' size: unmapped at once */
        n_noted = 0;
        noting = true;
        while (engine_spare_fill(e, &g, 1, UINT64_MAX) > 0)
                ;
        noting = false;
        ck_assert_uint_eq(n_noted, 0);
        ck_assert_uint_eq(engine_spares(e, &bytes, NULL), 1);
        printf("spare_rings_from_freed_rings (%s): a freed ring's arena zeroed into a spare in %u steps of "
               "64 KiB\n", completion_mode_name(_i), steps + 1);
        spare_fixture_fini(&f);
}
END_TEST

static bool mapped(const void *p) {
        unsigned char v;
        return mincore((void *)(uintptr_t)p, 1, &v) == 0;
}

/*
 * The store alone (ring_spares.h): an arena given back is never handed out
 * as it was; the fill zeroes every byte before it is ready (a piece at a
 * time) and keeps its mapping. Only arenas of the spares' size wait, and
 * no more than the spares wanted beside those ready: the rest is unmapped
 * at once, a cold one first when a warm one comes. A fill unmaps what it
 * cannot use; a trim and the store's end unmap those waiting.
 */
START_TEST(ring_spares_given_back_zeroed) {
        const size_t page = (size_t)sysconf(_SC_PAGESIZE), bytes = 40 * page;
        struct ring_spares sp;
        ring_spares_init(&sp);
        struct lazy_arena a, got, other;

        /* Before any fill, nothing is kept. */
        ck_assert_int_eq(lazy_arena_map(&a, bytes), 0);
        char *base = a.base;
        ring_spares_give_back(&sp, &a, true);
        ck_assert_ptr_null(a.base);
        ck_assert(!mapped(base));

        /* One spare wanted, made, taken by a ring, used, given back. */
        while (ring_spares_fill(&sp, bytes, 0, 1, UINT64_MAX) > 0)
                ;
        ck_assert(ring_spares_take(&sp, bytes, &a));
        base = a.base;
        memset(base, 0xa5, bytes); /* a session's leftovers */
        ck_assert_ptr_nonnull(lazy_arena_take(&a, bytes)); /* a ring's arrays, all taken */
        ring_spares_give_back(&sp, &a, true);
        ck_assert_ptr_null(a.base);
        ck_assert(mapped(base));
        ck_assert(!ring_spares_take(&sp, bytes, &got));
        ck_assert_uint_eq(ring_spares_waiting(&sp), bytes);
        /* Another of the size: one waits already, as many as wanted. */
        ck_assert_int_eq(lazy_arena_map(&other, bytes), 0);
        char *second = other.base;
        ring_spares_give_back(&sp, &other, false);
        ck_assert(!mapped(second));

        unsigned steps = 0;
        int more;
        while ((more = ring_spares_fill(&sp, bytes, 0, 1, 3 * page)) > 0) {
                ck_assert(!ring_spares_take(&sp, bytes, &got)); /* not before every byte is zero */
                ck_assert_uint_lt(++steps, 1000);
        }
        ck_assert_int_eq(more, 0);
        ck_assert_uint_eq(steps + 1, (bytes + 3 * page - 1) / (3 * page));
        ck_assert_uint_eq(sp.reused, 1);
        ck_assert_uint_eq(ring_spares_waiting(&sp), 0);
        ck_assert(ring_spares_take(&sp, bytes, &got));
        ck_assert_ptr_eq(got.base, base);
        ck_assert_uint_eq(got.size, bytes);
        ck_assert_uint_eq(got.used, 0); /* its arrays taken again from the start */
        for (size_t i = 0; i < bytes; i++)
                ck_assert_msg(got.base[i] == 0, "byte %zu of a reused arena is %#x", i, (unsigned)got.base[i]);
        lazy_arena_unmap(&got);

        /* Three wanted: a cold one of another size is not kept; two cold
         * ones of the size are, then a warm one takes a cold one's place;
         * the fill zeroes the warm one first and a fill wanting fewer
         * unmaps the rest. */
        while (ring_spares_fill(&sp, bytes, 0, 3, UINT64_MAX) > 0)
                ;
        struct lazy_arena taken[3];
        for (unsigned i = 0; i < 3; i++)
                ck_assert(ring_spares_take(&sp, bytes, &taken[i]));
        ck_assert_int_eq(lazy_arena_map(&other, 2 * bytes), 0);
        second = other.base;
        ring_spares_give_back(&sp, &other, true);
        ck_assert(!mapped(second));
        char *cold[3];
        for (unsigned i = 0; i < 3; i++) {
                ck_assert_int_eq(lazy_arena_map(&other, bytes), 0);
                cold[i] = other.base;
                ring_spares_give_back(&sp, &other, false);
        }
        ck_assert(mapped(cold[0]) && mapped(cold[1]) && mapped(cold[2]));
        char *warm = taken[0].base;
        ring_spares_give_back(&sp, &taken[0], true);
        ck_assert(mapped(warm));
        ck_assert(!mapped(cold[0]));
        ring_spares_give_back(&sp, &taken[1], false); /* full: unmapped */
        ck_assert_uint_eq(ring_spares_waiting(&sp), 3 * bytes);
        ck_assert_int_eq(ring_spares_fill(&sp, bytes, 0, 3, UINT64_MAX), 1);
        ck_assert(ring_spares_take(&sp, bytes, &got));
        ck_assert_ptr_eq(got.base, warm);
        ring_spares_give_back(&sp, &got, true);
        ck_assert_int_eq(ring_spares_fill(&sp, bytes, 0, 1, UINT64_MAX), 1); /* the warm one, zeroed */
        ck_assert_int_eq(ring_spares_fill(&sp, bytes, 0, 1, UINT64_MAX), 0); /* no more wanted: unmapped */
        ck_assert(!mapped(cold[1]) && !mapped(cold[2]));
        ck_assert_uint_eq(ring_spares_waiting(&sp), 0);
        ck_assert(ring_spares_take(&sp, bytes, &got));
        ck_assert_ptr_eq(got.base, warm);

        /* Zeroing cut short by a fill of another size: that arena goes. */
        ring_spares_give_back(&sp, &got, true);
        ck_assert_int_eq(ring_spares_fill(&sp, bytes, 0, 1, page), 1);
        ck_assert(mapped(warm));
        uint64_t reused = sp.reused;
        ck_assert_int_eq(ring_spares_fill(&sp, 2 * bytes, 0, 1, page), 1);
        /* (Its address may be mapped again already: the new arena's.) */
        ck_assert(sp.filling.size == 2 * bytes && !sp.filling_zero);
        ck_assert_uint_eq(ring_spares_waiting(&sp), 0);
        while (ring_spares_fill(&sp, bytes, 0, 1, UINT64_MAX) > 0)
                ;
        ck_assert_uint_eq(sp.reused, reused);

        /* A cold one alone: its pages dropped and faulted in again
         * (MADV_DONTNEED), not written over; zero all the same. */
        ck_assert(ring_spares_take(&sp, bytes, &got));
        memset(got.base, 0x5a, bytes / 2);
        base = got.base;
        ring_spares_give_back(&sp, &got, false);
        ck_assert_int_eq(ring_spares_fill(&sp, bytes, 0, 1, page), 1);
        ck_assert(sp.filling.base == base && !sp.filling_zero);
        while (ring_spares_fill(&sp, bytes, 0, 1, UINT64_MAX) > 0)
                ;
        ck_assert_uint_eq(sp.reused, reused + 1);
        ck_assert(ring_spares_take(&sp, bytes, &got));
        ck_assert_ptr_eq(got.base, base);
        for (size_t i = 0; i < bytes; i++)
                ck_assert_msg(got.base[i] == 0, "byte %zu of a reused cold arena is %#x", i, (unsigned)got.base[i]);
        ring_spares_give_back(&sp, &got, true);
        while (ring_spares_fill(&sp, bytes, 0, 1, UINT64_MAX) > 0)
                ;

        /* A trim unmaps those waiting, the store's end everything. */
        ck_assert(ring_spares_take(&sp, bytes, &got));
        base = got.base;
        ring_spares_give_back(&sp, &got, true);
        ck_assert(mapped(base));
        ring_spares_trim(&sp, 1);
        ck_assert(!mapped(base));
        while (ring_spares_fill(&sp, bytes, 0, 2, UINT64_MAX) > 0)
                ;
        ck_assert(ring_spares_take(&sp, bytes, &got));
        base = got.base;
        ring_spares_give_back(&sp, &got, true);
        char *ready = sp.ready[0].base;
        ck_assert(mapped(base) && mapped(ready));
        ring_spares_destroy(&sp);
        ck_assert(!mapped(base) && !mapped(ready));
        for (unsigned i = 2; i < 3; i++)
                lazy_arena_unmap(&taken[i]);
}
END_TEST

static Suite *suite(void) {
        Suite *s = suite_create("engine_alloc");
        TCase *tc = tcase_create("alloc");
        tcase_set_timeout(tc, 120);
        tcase_add_loop_test(tc, engine_new_fails_cleanly, 0, (int)completion_mode_count());
        tcase_add_loop_test(tc, ring_add_fails_cleanly, 0, (int)completion_mode_count());
        tcase_add_loop_test(tc, ring_prefault_resident, 0, (int)completion_mode_count());
        tcase_add_loop_test(tc, first_lap_claim_reads_no_slot, 0, (int)completion_mode_count());
        tcase_add_loop_test(tc, later_lap_claim_waits_for_release, 0, (int)completion_mode_count());
        tcase_add_loop_test(tc, ring_prefault_busy_skips_regions, 0, (int)completion_mode_count());
        tcase_add_loop_test(tc, ring_prefault_waited_ends, 0, (int)completion_mode_count());
        tcase_add_loop_test(tc, io_reads_through_memfd, 0, (int)completion_mode_count());
        tcase_add_loop_test(tc, spare_rings_taken, 0, (int)completion_mode_count());
        tcase_add_loop_test(tc, spare_rings_from_freed_rings, 0, (int)completion_mode_count());
        tcase_add_test(tc, ring_spares_given_back_zeroed);
        tcase_add_test(tc, lazy_arena_huge_boundary);
        tcase_add_test(tc, fanins_apart_from_arguments);
        suite_add_tcase(s, tc);
        return s;
}

const struct check_main check_main = { .suite = suite };
