/* SPDX-License-Identifier: MIT */
/* A session's regions and channels (daemon/session_regions.h). */
#include "daemon/session_regions.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include "shm/layout.h"

void session_regions_clear(struct session_regions *r) {
        *r = (struct session_regions){
                .sub_fd = -1, .cpl_fd = -1,
                .doorbell_fd = -1, .doorbell_peer_fd = -1,
                .completion_fd = -1, .completion_peer_fd = -1,
        };
}

static int make_memfd(const char *what, const char *label, uint64_t size, int *ret_fd) {
        char name[64];
        snprintf(name, sizeof(name), "hbg-%s-%s", what, label);
        int fd = memfd_create(name, MFD_CLOEXEC | MFD_ALLOW_SEALING);
        if (fd < 0)
                return -errno;
        if (ftruncate(fd, (off_t)size) < 0) {
                int err = -errno;
                close(fd);
                return err;
        }
        *ret_fd = fd;
        return 0;
}

static int map_shared(int fd, uint64_t size, void **ret) {
        void *p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
        if (p == MAP_FAILED)
                return -errno;
        *ret = p;
        return 0;
}

static int make(struct session_regions *r, const struct hbg_geometry *g, const char *label, uint64_t first_id,
                const char **why) {
        int err;
        *why = "cannot create the session's shared memory";
        if ((err = make_memfd("sub", label, g->sub_region_size, &r->sub_fd)) < 0 ||
            (err = make_memfd("cpl", label, g->cpl_region_size, &r->cpl_fd)) < 0 ||
            (err = map_shared(r->sub_fd, g->sub_region_size, &r->sub)) < 0 ||
            (err = map_shared(r->cpl_fd, g->cpl_region_size, &r->cpl)) < 0)
                return err;

        /* Fresh memfds read as zero; initialise the headers and flags. */
        layout_sub_region_init(r->sub, g);
        layout_cpl_region_init(r->cpl, g, first_id);

        /* Sizes fixed for good: a client cannot shrink a region under us
         * (SIGBUS) nor grow it. The completion region additionally refuses
         * every writable mapping made from now on: ours exists already.
         * The submission region gets that seal once the client has mapped
         * it (session.c, session_serve()): then no hole can be punched in
         * it. */
        if (fcntl(r->sub_fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW) < 0 ||
            fcntl(r->cpl_fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_FUTURE_WRITE | F_SEAL_SEAL) < 0)
                return -errno;

        /* Channels: two file descriptions per channel, one for each side. */
        *why = "cannot create the session's doorbell and completion channels";
        int db[2], cp[2];
        if (socketpair(AF_UNIX, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, db) < 0)
                return -errno;
        r->doorbell_fd = db[0];
        r->doorbell_peer_fd = db[1];
        if (pipe2(cp, O_NONBLOCK | O_CLOEXEC) < 0)
                return -errno;
        r->completion_peer_fd = cp[0];
        r->completion_fd = cp[1];
        return 0;
}

int session_regions_make(struct session_regions *r, const struct hbg_geometry *g, const char *label,
                         uint64_t first_id, const char **why) {
        session_regions_clear(r);
        int err = make(r, g, label, first_id, why);
        if (err < 0)
                session_regions_free(r, g);
        return err;
}

static void close_fd(int *fd) {
        if (*fd >= 0)
                close(*fd);
        *fd = -1;
}

void session_regions_sent(struct session_regions *r) {
        close_fd(&r->cpl_fd);
        close_fd(&r->doorbell_peer_fd);
        close_fd(&r->completion_peer_fd);
}

void session_regions_free(struct session_regions *r, const struct hbg_geometry *g) {
        if (r->sub)
                munmap(r->sub, g->sub_region_size);
        if (r->cpl)
                munmap(r->cpl, g->cpl_region_size);
        close_fd(&r->sub_fd);
        close_fd(&r->cpl_fd);
        close_fd(&r->doorbell_fd);
        close_fd(&r->doorbell_peer_fd);
        close_fd(&r->completion_fd);
        close_fd(&r->completion_peer_fd);
        session_regions_clear(r);
}
