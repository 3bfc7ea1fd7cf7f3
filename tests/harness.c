/* SPDX-License-Identifier: MIT */
#include "tests/harness.h"

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
        h->released = true;
}

int harness_ring_init(struct harness_ring *h, struct hbg_engine *e,
                      const struct hbg_geometry_request *req, uint64_t first_id) {
        const char *why = NULL;
        memset(h, 0, sizeof(*h));
        int err = hbg_geometry_init(&h->g, req, &why);
        if (err < 0)
                return err;
        h->engine = e;
        h->sub = aligned_alloc(64, h->g.sub_region_size);
        h->cpl = aligned_alloc(64, h->g.cpl_region_size);
        if (!h->sub || !h->cpl)
                die("out of memory");
        memset(h->sub, 0, h->g.sub_region_size);
        memset(h->cpl, 0, h->g.cpl_region_size);
        hbg_sub_region_init(h->sub, &h->g);
        hbg_cpl_region_init(h->cpl, &h->g, first_id);
        h->sh = h->sub;
        h->ch = h->cpl;
        h->heap = (uint8_t *)h->sub + h->g.sub_heap_offset;
        h->first_id = h->next_id = h->published = h->graph_first = first_id;
        atomic_store(&h->sh->submitted, first_id);
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
                .cpl_region = h->cpl,
                .first_id = first_id,
                .completion_fd = h->efd_write,
                .name = "harness",
                .released = harness_released,
                .released_userdata = h,
        };
        return hbg_engine_ring_add(e, &p, &h->ring);
}

void harness_ring_remove(struct harness_ring *h, int reason) {
        if (!h->ring)
                return;
        hbg_engine_ring_remove(h->engine, h->ring, reason);
        h->ring = NULL;
        /* Removal does not wait for the scheduler threads: collect until
         * the engine let go of the ring. */
        while (!h->released) {
                hbg_engine_collect(h->engine);
                if (!h->released)
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

void harness_serve_external(struct harness_ring *h) {
        uint64_t tail = atomic_load_explicit(&h->ch->ext_ready_tail, memory_order_acquire);
        _Atomic uint64_t *ext = (_Atomic uint64_t *)((char *)h->cpl + h->g.cpl_ext_ready_offset);
        struct hbg_mailbox_entry *mb = (struct hbg_mailbox_entry *)((char *)h->sub + h->g.sub_mailbox_offset);

        while (h->ext_head < tail) {
                uint64_t id = atomic_load_explicit(&ext[h->ext_head & (h->g.task_window - 1)],
                                                   memory_order_relaxed);
                /* Mailbox back-pressure: entry k only once k < consumed + M. */
                while (h->mailbox_tail >= atomic_load_explicit(&h->ch->mailbox_consumed, memory_order_acquire) +
                                                  h->g.mailbox_entries)
                        sched_yield();
                int status = h->external ? h->external(h->external_userdata, id) : 0;
                struct hbg_mailbox_entry *e = &mb[h->mailbox_tail & (h->g.mailbox_entries - 1)];
                e->task_id = id;
                e->status = status;
                atomic_store_explicit(&e->seq, h->mailbox_tail + 1, memory_order_release);
                h->mailbox_tail++;
                atomic_store_explicit(&h->sh->mailbox_tail, h->mailbox_tail, memory_order_seq_cst);
                h->ext_head++;
                if (atomic_load(&h->ch->need_wakeup)) {
                        h->doorbells++;
                        hbg_ring_kick(h->ring);
                }
        }
}

void harness_publish(struct harness_ring *h) {
        if (h->published == h->next_id)
                return;
        h->published = h->next_id;
        /* seq_cst: against the engine's "set NEED_WAKEUP; re-read submitted"
         * (RUNTIME_LOGIC.md §9.4). */
        atomic_store(&h->sh->submitted, h->published);
        if (atomic_load(&h->ch->need_wakeup)) {
                h->doorbells++;
                hbg_ring_kick(h->ring);
        }
}

static uint64_t watermark(struct harness_ring *h) {
        return atomic_load_explicit(&h->ch->completed_watermark, memory_order_acquire);
}

uint64_t harness_add_task(struct harness_ring *h, const struct harness_task *t) {
        uint64_t id = h->next_id;
        /* Window: id < WM + D. Publish what we have so it can progress. */
        while (id >= watermark(h) + h->g.task_window) {
                harness_publish(h);
                harness_serve_external(h);
                sched_yield();
        }
        uint64_t slot = id & (h->g.task_window - 1);
        struct hbg_task_desc *d = (struct hbg_task_desc *)((char *)h->sub + h->g.sub_descs_offset) + slot;
        struct hbg_task_payload *p =
                (struct hbg_task_payload *)((char *)h->sub + h->g.sub_payloads_offset) + slot;
        memset(d, 0, sizeof(*d));
        d->id = id;
        memcpy(d->kernel, t->kernel, sizeof(d->kernel));
        d->lane_mask = t->lane_mask;
        d->flags = t->flags;
        d->block_num = t->block_num ? t->block_num : 1;
        d->n_fanins = t->n_fanins;
        d->n_tensors = t->n_tensors;
        d->n_scalars = t->n_scalars;
        d->predicate_offset = t->predicate_offset;
        memset(p, 0, sizeof(*p));
        memcpy(p->fanins, t->fanins, sizeof(p->fanins));
        memcpy(p->tensors, t->tensors, sizeof(p->tensors));
        memcpy(p->scalars, t->scalars, sizeof(p->scalars));
        h->next_id++;
        return id;
}

uint64_t harness_end_graph(struct harness_ring *h, uint64_t graph_id) {
        if (h->next_id == h->graph_first)
                return UINT64_MAX;
        harness_publish(h);
        uint64_t k = h->graphs;
        while (k >= atomic_load_explicit(&h->ch->graphs_retired, memory_order_acquire) +
                            h->g.graph_table_entries) {
                harness_serve_external(h);
                sched_yield();
        }
        struct hbg_graph_record *rec =
                (struct hbg_graph_record *)((char *)h->sub + h->g.sub_graphs_offset) +
                (k & (h->g.graph_table_entries - 1));
        rec->graph_id = graph_id;
        rec->first_id = h->graph_first;
        rec->last_id = h->next_id - 1;
        rec->reserved = 0;
        h->graphs = k + 1;
        h->graph_first = h->next_id;
        atomic_store(&h->sh->graphs_submitted, h->graphs);
        if (atomic_load(&h->ch->need_wakeup)) {
                h->doorbells++;
                hbg_ring_kick(h->ring);
        }
        return k;
}

static int64_t now_ms(void) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int harness_wait_graph(struct harness_ring *h, uint64_t k, int timeout_ms,
                       struct hbg_graph_entry *ret) {
        struct hbg_graph_entry *e =
                (struct hbg_graph_entry *)((char *)h->cpl + h->g.cpl_graphs_offset) +
                (k & (h->g.graph_table_entries - 1));
        int64_t deadline = now_ms() + timeout_ms;

        for (;;) {
                if (atomic_load_explicit(&e->seq, memory_order_acquire) == k + 1) {
                        ret->graph_id = e->graph_id;
                        ret->status = e->status;
                        ret->first_error_task = e->first_error_task;
                        atomic_store_explicit(&ret->seq, k + 1, memory_order_relaxed);
                        return 0;
                }
                harness_serve_external(h);
                int64_t left = deadline - now_ms();
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
