/* SPDX-License-Identifier: MIT */
/*
 * Test harness playing the client of one ring, in-process: regions in
 * ordinary memory, the engine's ring bound to them, a real pipe for the
 * completion signal. It
 * writes tasks and graph records exactly as the protocol says
 * (RUNTIME_LOGIC.md §8, §10) and waits for graphs.
 * Not thread-safe: one harness ring per thread.
 */
#pragma once

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "daemon/engine/engine.h"
#include "shm/completion.h"
#include "shm/geometry.h"
#include "shm/layout.h"
#include "shm/producer.h"

/* A task as the tests build it: the producer's record plus its fanins. */
struct harness_task {
        uint16_t kernel[HBG_LANES];
        uint8_t lane_mask;
        uint8_t flags;
        uint16_t block_num;
        uint8_t n_fanins, n_tensors, n_scalars;
        uint64_t fanins[HBG_MAX_FANINS];
        struct hbg_tensor_arg tensors[HBG_MAX_TENSOR_ARGS];
        uint64_t scalars[HBG_MAX_SCALAR_ARGS];
        uint64_t predicate_offset;
};

/* Called for each external task the daemon hands over; returns the status
 * to post in the mailbox (0 or a negative errno). */
typedef int (*harness_external_fn)(void *userdata, uint64_t id);

struct harness_ring {
        struct hbg_engine *engine;
        struct hbg_ring *ring;
        struct hbg_geometry g;
        void *sub, *cpl;
        struct hbg_sub_header *sh;
        struct hbg_cpl_header *ch;
        uint8_t *heap;
        int efd;                   /* completion pipe: read end */
        int efd_write;             /* its write end, the engine's */
        /* The engine let go of the ring. Set by whichever thread's
         * engine_collect() frees it (release), read by the owner
         * (acquire) before it frees the regions. */
        _Atomic bool released;
        uint64_t first_id;
        struct hbg_producer prod;  /* libhbgclient's producer code, shm/producer.h:
                                      next_id, published, graphs, mailbox_tail ... */
        uint64_t heap_used;
        uint64_t doorbells;        /* kicks because NEED_WAKEUP was set */
        harness_external_fn external;
        void *external_userdata;
        bool served;               /* hbg_ring_params.serve_later was not set, or served since */
};

int harness_ring_init(struct harness_ring *h, struct hbg_engine *e,
                      const struct hbg_geometry_request *req, uint64_t first_id);
/* The same in fair share share_id with weight (RUNTIME_LOGIC.md §9.5);
 * harness_ring_init() puts every ring in share 0 with weight 1. */
int harness_ring_init_share(struct harness_ring *h, struct hbg_engine *e, const struct hbg_geometry_request *req,
                            uint64_t first_id, uint32_t share_id, unsigned weight);
/* The same, added with hbg_ring_params.serve_later: no scheduler thread
 * visits it until engine_ring_serve(). */
int harness_ring_init_unserved(struct harness_ring *h, struct hbg_engine *e, const struct hbg_geometry_request *req,
                               uint64_t first_id);
/* engine_ring_serve(); the harness's doorbell kicks from then on. */
void harness_ring_serve(struct harness_ring *h);
void harness_ring_destroy(struct harness_ring *h);
/* Remove the ring from the engine and wait until it is released (its
 * regions stay, for the caller to inspect). */
void harness_ring_remove(struct harness_ring *h, int reason);

/* Bump allocation in the heap, 64-byte aligned. Aborts when full. */
uint64_t harness_alloc(struct harness_ring *h, uint64_t bytes);
static inline float *harness_f32(struct harness_ring *h, uint64_t offset) {
        return (float *)(void *)(h->heap + offset);
}

/* Write one task (waits for the window); returns its id. Not yet
 * published: harness_publish() or harness_end_graph() does that. */
uint64_t harness_add_task(struct harness_ring *h, const struct harness_task *t);
/* Publish written tasks; ring the doorbell if the engine sleeps. */
void harness_publish(struct harness_ring *h);
/* Close the graph of tasks written since the last one; returns its record
 * number. An empty graph is not allowed (returns UINT64_MAX). */
uint64_t harness_end_graph(struct harness_ring *h, uint64_t graph_id);
/* Wait until graph record `k` is retired: 0 and its entry, or -ETIMEDOUT. */
int harness_wait_graph(struct harness_ring *h, uint64_t k, int timeout_ms,
                       struct hbg_graph_entry *ret);
/* Serve external tasks once (also done while waiting). */
void harness_serve_external(struct harness_ring *h);

/* Convenience for building tasks. */
struct hbg_tensor_arg harness_tensor(uint64_t offset, uint64_t bytes, enum hbg_direction dir);
uint64_t harness_f32_scalar(float v);
