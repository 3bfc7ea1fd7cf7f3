/* SPDX-License-Identifier: MIT */
#include "tests/engine/harness.h"

#include "common/clock.h"
#include "daemon/engine/engine_stats.h"

#include <errno.h>
#include <poll.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <time.h>
#include <unistd.h>

static void die(const char *what) {
        fprintf(stderr, "harness: %s\n", what);
        abort();
}

static void harness_released(void *userdata) {
        struct harness_ring *h = userdata;
        atomic_store_explicit(&h->released, true, memory_order_release);
}

int harness_ring_init(struct harness_ring *h, struct hbg_engine *e,
                      const struct hbg_geometry_request *req, uint64_t first_id) {
        return harness_ring_init_share(h, e, req, first_id, 0, 0);
}

static int ring_init(struct harness_ring *h, struct hbg_engine *e, const struct hbg_geometry_request *req,
                     uint64_t first_id, uint32_t share_id, unsigned weight, bool serve_later) {
        const char *why = NULL;
        memset(h, 0, sizeof(*h));
        int err = geometry_init(&h->g, req, &why);
        if (err < 0)
                return err;
        h->engine = e;
        h->sub = aligned_alloc(64, h->g.sub_region_size);
        h->cpl = aligned_alloc(64, h->g.cpl_region_size);
        if (!h->sub || !h->cpl)
                die("out of memory");
        memset(h->sub, 0, h->g.sub_region_size);
        memset(h->cpl, 0, h->g.cpl_region_size);
        layout_sub_region_init(h->sub, &h->g);
        layout_cpl_region_init(h->cpl, &h->g, first_id);
        h->sh = h->sub;
        h->ch = h->cpl;
        h->heap = (uint8_t *)h->sub + h->g.sub_heap_offset;
        h->first_id = first_id;
        atomic_store(&h->sh->submitted, first_id);
        producer_init(&h->prod, &h->g, h->sub, h->cpl, first_id);
        /* We wait on the completion pipe, as a client without workers. */
        atomic_store(&h->sh->pipe_wanted, HBG_PIPE_ALWAYS);
        /* The completion pipe, as hbgd has it: the engine writes one byte
         * into the write end, we poll the read end. */
        int pfd[2];
        if (pipe2(pfd, O_NONBLOCK | O_CLOEXEC) < 0)
                die("pipe2");
        h->efd = pfd[0];
        h->efd_write = pfd[1];
        struct hbg_ring_params p = {
                .geometry = h->g,
                .sub_region = h->sub,
                .sub_fd = -1,
                .cpl_region = h->cpl,
                .first_id = first_id,
                .completion_fd = h->efd_write,
                .name = "harness",
                .share_id = share_id,
                .weight = weight,
                .released = harness_released,
                .released_userdata = h,
                .serve_later = serve_later,
        };
        h->served = !serve_later;
        return engine_ring_add(e, &p, &h->ring);
}

int harness_ring_init_share(struct harness_ring *h, struct hbg_engine *e, const struct hbg_geometry_request *req,
                            uint64_t first_id, uint32_t share_id, unsigned weight) {
        return ring_init(h, e, req, first_id, share_id, weight, false);
}

void harness_ring_serve(struct harness_ring *h) {
        h->served = true;
        engine_ring_serve(h->ring);
}

int harness_ring_init_unserved(struct harness_ring *h, struct hbg_engine *e, const struct hbg_geometry_request *req,
                               uint64_t first_id) {
        return ring_init(h, e, req, first_id, 0, 0, true);
}

void harness_ring_remove(struct harness_ring *h, int reason) {
        if (!h->ring)
                return;
        engine_ring_remove(h->engine, h->ring, reason);
        h->ring = NULL;
        /* Removal does not wait for the scheduler threads: collect until
         * the engine let go of the ring. */
        while (!atomic_load_explicit(&h->released, memory_order_acquire)) {
                engine_collect(h->engine);
                if (!atomic_load_explicit(&h->released, memory_order_acquire))
                        sched_yield();
        }
}

void harness_ring_destroy(struct harness_ring *h) {
        harness_ring_remove(h, -ESHUTDOWN);
        if (h->efd >= 0)
                close(h->efd);
        if (h->efd_write >= 0)
                close(h->efd_write);
        free(h->sub);
        free(h->cpl);
        memset(h, 0, sizeof(*h));
        h->efd = h->efd_write = -1;
}

uint64_t harness_alloc(struct harness_ring *h, uint64_t bytes) {
        uint64_t off = h->heap_used;
        uint64_t size = (bytes + 63) & ~UINT64_C(63);
        if (size > h->g.heap_size - off)
                die("heap full");
        h->heap_used += size;
        return off;
}

struct hbg_tensor_arg harness_tensor(uint64_t offset, uint64_t bytes, enum hbg_direction dir) {
        return (struct hbg_tensor_arg){ .offset = offset, .length = bytes, .direction = dir };
}

uint64_t harness_f32_scalar(float v) {
        uint32_t bits;
        memcpy(&bits, &v, sizeof(bits));
        return bits;
}

/* A ring not served yet is served by its owner (engine_ring_serve()),
 * not kicked (engine.h): the doorbell waits until then, as hbgd's does. */
static void ring_doorbell(struct harness_ring *h, bool ring) {
        if (ring && h->served) {
                h->doorbells++;
                ring_kick(h->ring);
        }
}

void harness_serve_external(struct harness_ring *h) {
        uint64_t id;
        while (producer_next_external(&h->prod, &id)) {
                int status = h->external ? h->external(h->external_userdata, id) : 0;
                bool ring;
                /* Mailbox back-pressure: hbgd consumes while awake. */
                while (producer_complete_external(&h->prod, id, status, &ring) == -EAGAIN)
                        sched_yield();
                ring_doorbell(h, ring);
        }
}

/* A wait for the engine that lasts this long is a hang: say what the
 * engine and the producer show, then stop. A test's own timeout would
 * end it saying nothing. */
#define HARNESS_STUCK_MS 60000

static void harness_stuck(struct harness_ring *h, const char *what) {
        struct ring_stats rs;
        ring_stats(h->ring, &rs);
        fprintf(stderr,
                "harness: %s: no progress for %d s: submitted %llu, claimed %llu, watermark %llu, completed %llu, "
                "graphs retired %llu, ring error %d%s; need_wakeup %u; producer next id %llu, published %llu, "
                "doorbells %llu\n",
                what, HARNESS_STUCK_MS / 1000, (unsigned long long)rs.submitted, (unsigned long long)rs.classified,
                (unsigned long long)rs.watermark, (unsigned long long)rs.completed,
                (unsigned long long)rs.graphs_retired, rs.error, rs.broken ? " (broken)" : "",
                (unsigned)atomic_load(&h->ch->need_wakeup), (unsigned long long)h->prod.next_id,
                (unsigned long long)h->prod.published, (unsigned long long)h->doorbells);
        for (unsigned i = 0; i < engine_threads(h->engine); i++) {
                struct hbg_thread_stats t;
                engine_thread_stats(h->engine, i, &t);
                fprintf(stderr, "harness:   thread %u: classified %llu, dispatched %llu, parks %llu, wakeups %llu\n", i,
                        (unsigned long long)t.classified, (unsigned long long)t.dispatched,
                        (unsigned long long)t.parks, (unsigned long long)t.wakeups);
        }
        abort();
}

void harness_publish(struct harness_ring *h) {
        ring_doorbell(h, producer_publish(&h->prod));
}

uint64_t harness_add_task(struct harness_ring *h, const struct harness_task *t) {
        /* Window: id < WM + D. Publish what we have so it can progress. */
        for (int64_t since = clock_now_ms(); producer_room(&h->prod) == 0;) {
                harness_publish(h);
                harness_serve_external(h);
                sched_yield();
                if (clock_now_ms() - since > HARNESS_STUCK_MS)
                        harness_stuck(h, "waiting for room in the window");
        }
        struct hbg_task_record rec = {
                .lane_mask = t->lane_mask,
                .flags = t->flags,
                .block_num = t->block_num,
                .n_tensors = t->n_tensors,
                .n_scalars = t->n_scalars,
                .predicate_offset = t->predicate_offset,
        };
        memcpy(rec.kernel, t->kernel, sizeof(rec.kernel));
        memcpy(rec.tensors, t->tensors, sizeof(rec.tensors));
        memcpy(rec.scalars, t->scalars, sizeof(rec.scalars));
        /* Counts above the limits (validation tests) go in as given. */
        return producer_write(&h->prod, &rec, t->fanins, t->n_fanins);
}

uint64_t harness_end_graph(struct harness_ring *h, uint64_t graph_id) {
        for (int64_t since = clock_now_ms();;) {
                bool ring;
                int64_t k = producer_end_graph(&h->prod, graph_id, &ring);
                ring_doorbell(h, ring);
                if (k >= 0)
                        return (uint64_t)k;
                if (k == -EINVAL)
                        return UINT64_MAX;
                harness_serve_external(h);
                sched_yield();
                if (clock_now_ms() - since > HARNESS_STUCK_MS)
                        harness_stuck(h, "waiting for room in the graph table");
        }
}

int harness_wait_graph(struct harness_ring *h, uint64_t k, int timeout_ms,
                       struct hbg_graph_entry *ret) {
        int64_t deadline = clock_now_ms() + timeout_ms;

        for (;;) {
                if (producer_graph_entry(&h->prod, k, ret) == 0)
                        return 0;
                harness_serve_external(h);
                int64_t left = deadline - clock_now_ms();
                if (left <= 0)
                        return -ETIMEDOUT;
                struct pollfd pfd = { .fd = h->efd, .events = POLLIN };
                if (poll(&pfd, 1, left > 10 ? 10 : (int)left) > 0) {
                        char buf[64];
                        while (read(h->efd, buf, sizeof(buf)) > 0)
                                ;
                }
        }
}
