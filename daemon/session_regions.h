/* SPDX-License-Identifier: MIT */
/*
 * A session's two regions and two channels (session.h): made at its
 * build, or ahead of it by spare_regions.c, the same way either way.
 */
#pragma once

#include <stdint.h>

#include "shm/geometry.h"

struct session_regions {
        int sub_fd, cpl_fd;             /* memfds (a set never handed out: fresh) */
        void *sub, *cpl;                /* hbgd's read-write mappings */
        int doorbell_fd, doorbell_peer_fd;     /* the doorbell socketpair: ours, the client's */
        int completion_fd, completion_peer_fd; /* the completion pipe: write end (ours), read end */
};

/* Everything -1 or NULL: nothing made. */
void session_regions_clear(struct session_regions *r);

/*
 * Regions of geometry g, their memfds named hbg-sub-LABEL and
 * hbg-cpl-LABEL (seen in /proc/PID/maps), their headers written (the
 * completion region's for first_id), the submission memfd sealed against
 * shrinking and growing, the completion memfd also against writable
 * mappings (ours is made already) and further seals; then the channels.
 * 0, or -errno with *why for the client and nothing left made.
 */
int session_regions_make(struct session_regions *r, const struct hbg_geometry *g, const char *label,
                         uint64_t first_id, const char **why);

/* The client has its copies: what only it needed closed (the completion
 * memfd, the client's ends of the channels). The submission memfd stays
 * open: the io thread reads the region through it (client_read.h). */
void session_regions_sent(struct session_regions *r);

/* Unmaps and closes what r holds (g: its geometry); r cleared. */
void session_regions_free(struct session_regions *r, const struct hbg_geometry *g);
