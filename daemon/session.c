/* SPDX-License-Identifier: MIT */
#include "daemon/session.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <unistd.h>

#include "shm/layout.h"

static int make_memfd(const char *name, const char *what, uint64_t size, int *ret_fd) {
        char label[64];
        snprintf(label, sizeof(label), "hbg-%s-%s", what, name);
        int fd = memfd_create(label, MFD_CLOEXEC | MFD_ALLOW_SEALING);
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

int session_regions_create(struct session_regions *s, const struct hbg_geometry *g, const char *name) {
        int err;

        memset(s, 0, sizeof(*s));
        s->sub_fd = s->cpl_fd = s->doorbell_fd = s->completion_fd = -1;
        s->g = *g;
        s->first_id = 0;

        if ((err = make_memfd(name, "sub", g->sub_region_size, &s->sub_fd)) < 0 ||
            (err = make_memfd(name, "cpl", g->cpl_region_size, &s->cpl_fd)) < 0 ||
            (err = map_shared(s->sub_fd, g->sub_region_size, &s->sub)) < 0 ||
            (err = map_shared(s->cpl_fd, g->cpl_region_size, &s->cpl)) < 0)
                goto fail;

        /* Fresh memfds read as zero; initialise the headers and flags. */
        hbg_sub_region_init(s->sub, g);
        hbg_cpl_region_init(s->cpl, g, s->first_id);

        /* Sizes fixed for good: a client cannot shrink a region under us
         * (SIGBUS) nor grow it. The completion region additionally refuses
         * every writable mapping made from now on: ours exists already. */
        if (fcntl(s->sub_fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) < 0 ||
            fcntl(s->cpl_fd, F_ADD_SEALS,
                  F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_FUTURE_WRITE | F_SEAL_SEAL) < 0) {
                err = -errno;
                goto fail;
        }

        s->doorbell_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
        s->completion_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
        if (s->doorbell_fd < 0 || s->completion_fd < 0) {
                err = -errno;
                goto fail;
        }
        return 0;
fail:
        session_regions_destroy(s);
        return err;
}

void session_regions_destroy(struct session_regions *s) {
        if (s->sub)
                munmap(s->sub, s->g.sub_region_size);
        if (s->cpl)
                munmap(s->cpl, s->g.cpl_region_size);
        int *fds[] = { &s->sub_fd, &s->cpl_fd, &s->doorbell_fd, &s->completion_fd };
        for (unsigned i = 0; i < 4; i++)
                if (*fds[i] >= 0) {
                        close(*fds[i]);
                        *fds[i] = -1;
                }
        s->sub = s->cpl = NULL;
}
