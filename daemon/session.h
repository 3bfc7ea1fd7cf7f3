/* SPDX-License-Identifier: MIT */
/*
 * A client session's shared resources: the two sealed memfd regions, the
 * doorbell and completion eventfds, and the engine ring bound to them
 * (DESIGN.md §3, docs/PROTOCOL.md).
 */
#pragma once

#include <stdint.h>
#include <sys/types.h>

#include "daemon/engine.h"
#include "shm/geometry.h"

struct session_regions {
        struct hbg_geometry g;
        uint64_t first_id;
        int sub_fd, cpl_fd;            /* memfds, sent to the client */
        int doorbell_fd;               /* client writes, hbgd polls */
        int completion_fd;             /* hbgd writes (non-blocking), client polls */
        void *sub, *cpl;               /* hbgd's read-write mappings */
};

/*
 * Create the regions for geometry g: memfds sized and sealed against shrink
 * and grow (so the client can never make hbgd fault with SIGBUS); the
 * completion region is mapped here read-write first, then sealed with
 * F_SEAL_FUTURE_WRITE so the client can only map it read-only. Returns 0 or
 * a negative errno; on failure nothing is left open.
 */
int session_regions_create(struct session_regions *s, const struct hbg_geometry *g, const char *name);
/* Unmap and close everything still open (fds already handed over stay
 * valid in the client). */
void session_regions_destroy(struct session_regions *s);
