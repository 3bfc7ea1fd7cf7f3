/* SPDX-License-Identifier: MIT */
/*
 * Reads of a session's submission region by a thread that serves every
 * client (the io thread, the slow-work thread): through the region's memfd,
 * not through hbgd's mapping of it (SECURITY.md, "punching holes").
 *
 * A client may punch a hole in its own region (fallocate, MADV_REMOVE)
 * while hbgd reads it. Linux makes a fault on a page inside a hole being
 * punched wait until the whole punch is done, about 0.25 ms per MiB of
 * pages it frees (a 1 GiB heap: a quarter of a second). A pread(2) of the
 * memfd waits for no punch: it copies the pages that are there, and a
 * hole reads as zeros. Scheduler threads read the region through the
 * mapping, as a kernel does, and only once the ring is served: hbgd
 * serves a session once its region is sealed against punching
 * (hbg_ring_params.serve_later, RUNTIME_LOGIC.md §8). The one read the
 * io thread makes through the mapping is the serve's own look at the
 * client's cursors (engine_ring_serve(), work_external()), after
 * that seal: no punch can be under way then, and no write(2) into the
 * memfd (the seal waited for any in flight and refuses new ones).
 *
 * A ring being removed runs its last steps (failing its graphs, telling
 * the client) on the io thread too, in code the scheduler threads share
 * (retire.c, signal.c): there, the client_* calls below read through the
 * memfd once the ring is removing, and client_reachable() says whether a
 * word of the region may be touched at all (a wake or a pipe byte is then
 * sent without looking at the client's words).
 *
 * A copy through the memfd is not one access: a cursor may read torn
 * while the client writes it. It is the client's word either way,
 * checked as such; only its own session can be hurt.
 */
#pragma once

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "daemon/engine/ring.h"

/* The client's cursor at `at` (inside the region), with acquire order:
 * what the caller reads after it (client_read()) is at least as new. */
uint64_t client_read_u64(const struct hbg_ring *r, const _Atomic uint64_t *at);
/* Copy len bytes at `at` (inside the region) into out; bytes that could
 * not be read are zero. */
void client_read(const struct hbg_ring *r, const void *at, void *out, size_t len);

/* May the calling thread touch the region through hbgd's mapping? Not
 * once the ring is being removed (its last steps run on the io thread).
 * Relaxed: engine_ring_remove() stores `removing` (seq_cst) before it
 * runs the ring's last steps on its own thread, which then sees it; a
 * scheduler thread that reads it late only reads the mapping as before. */
static inline bool client_reachable(const struct hbg_ring *r) {
        return !atomic_load_explicit(&r->removing, memory_order_relaxed);
}

/* A cursor (acquire) and a copy for code shared by the scheduler threads
 * and a ring's removal: through the mapping while client_reachable(),
 * else through the memfd. Inline: the scheduler threads' retirement
 * pass copies a record per graph, as it did before with a plain copy. */
static inline uint64_t client_cursor(const struct hbg_ring *r, const _Atomic uint64_t *at) {
        if (client_reachable(r))
                return atomic_load_explicit(at, memory_order_acquire);
        return client_read_u64(r, at);
}

static inline void client_copy(const struct hbg_ring *r, const void *at, void *out, size_t len) {
        if (client_reachable(r))
                memcpy(out, at, len);
        else
                client_read(r, at, out, len);
}
