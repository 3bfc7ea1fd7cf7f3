/* SPDX-License-Identifier: MIT */
/*
 * The listening socket: socket activation or our own bind, and the accept
 * loop. Accepting never starves: each turn takes up to ACCEPT_PER_TURN
 * connections and, if more may be queued, the loop comes back without a
 * new event (io_uring's multishot poll fires only on new arrivals). When
 * hbgd is out of file descriptors, the queue is still drained: a reserve
 * descriptor is given up to accept and close one connection at a time, so
 * dead connections never clog the backlog (docs/SECURITY.md).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <syslog.h>
#include <systemd/sd-daemon.h>
#include <unistd.h>

#include "daemon/daemon_private.h"
#include "daemon/log.h"
#include "proto/wire.h"
#include "shm/util.h"

#define ACCEPT_PER_TURN 64

static int bind_socket(struct hbgd *d) {
        const char *path = d->cfg.socket_path;
        struct sockaddr_un sa = { .sun_family = AF_UNIX };
        if (strlen(path) >= sizeof(sa.sun_path))
                return -ENAMETOOLONG;
        strcpy(sa.sun_path, path);
        int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
        if (fd < 0)
                return -errno;
        if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
                if (errno != EADDRINUSE) {
                        int err = -errno;
                        close(fd);
                        return err;
                }
                /* A socket file is there: take it over only if nobody answers. */
                int probe = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
                bool alive = probe >= 0 && connect(probe, (struct sockaddr *)&sa, sizeof(sa)) == 0;
                if (probe >= 0)
                        close(probe);
                if (alive) {
                        close(fd);
                        return -EADDRINUSE;
                }
                unlink(path);
                if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
                        int err = -errno;
                        close(fd);
                        return err;
                }
        }
        if (listen(fd, SOMAXCONN) < 0) {
                int err = -errno;
                close(fd);
                return err;
        }
        d->listen_fd = fd;
        d->listen_owned = true;
        return 0;
}

/* Socket activation: the listening SOCK_SEQPACKET AF_UNIX socket named
 * "hbgd" (FileDescriptorName=), or the only suitable one. Every other
 * passed fd is closed. Returns 1 (activated), 0 (nothing passed), -errno. */
static int activated_socket(struct hbgd *d) {
        char **names = NULL;
        int n = sd_listen_fds_with_names(1, &names);
        if (n <= 0)
                return n;
        int found = -1, suitable = 0, first_suitable = -1;
        for (int i = 0; i < n; i++) {
                int fd = SD_LISTEN_FDS_START + i;
                if (sd_is_socket_unix(fd, SOCK_SEQPACKET, 1, NULL, 0) <= 0)
                        continue;
                suitable++;
                if (first_suitable < 0)
                        first_suitable = fd;
                if (found < 0 && names && names[i] && strcmp(names[i], "hbgd") == 0)
                        found = fd;
        }
        if (found < 0 && suitable == 1)
                found = first_suitable;
        for (int i = 0; i < n; i++) {
                int fd = SD_LISTEN_FDS_START + i;
                if (fd == found)
                        continue;
                const char *name = names && names[i] ? names[i] : "?";
                bool ok = sd_is_socket_unix(fd, SOCK_SEQPACKET, 1, NULL, 0) > 0;
                hbgd_log(LOG_WARNING, "closing activated fd %d (name '%s'): %s", fd, name,
                         ok ? "another listening socket, not named 'hbgd'"
                            : "not a listening SEQPACKET unix socket");
                close(fd);
        }
        if (names)
                for (int i = 0; i < n; i++)
                        free(names[i]);
        free(names);
        if (found < 0) {
                hbgd_log(LOG_ERR, "socket activation: %s", suitable ? "several listening sockets and none named 'hbgd'"
                                                          : "no listening SEQPACKET unix socket passed");
                return -EBADF;
        }
        fcntl(found, F_SETFL, fcntl(found, F_GETFL) | O_NONBLOCK);
        d->listen_fd = found;
        return 1;
}

int listener_open(struct hbgd *d) {
        int err = activated_socket(d);
        if (err == 0)
                err = bind_socket(d);
        if (err < 0)
                return err;
        d->reserve_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
        return 0;
}

void listener_close(struct hbgd *d) {
        if (d->listen_src) {
                io_source_del(d->loop, d->listen_src);
                d->listen_src = NULL;
        }
        if (d->listen_fd >= 0) {
                close(d->listen_fd);
                d->listen_fd = -1;
        }
        if (d->listen_owned) {
                unlink(d->cfg.socket_path);
                d->listen_owned = false;
        }
        if (d->reserve_fd >= 0) {
                close(d->reserve_fd);
                d->reserve_fd = -1;
        }
}

/* Out of descriptors: accept one connection with the reserve descriptor
 * and close it at once (the peer sees a hang-up). false if even that
 * failed; the timer retries then. */
static bool shed_one(struct hbgd *d) {
        if (d->reserve_fd < 0)
                d->reserve_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
        if (d->reserve_fd < 0)
                return false;
        close(d->reserve_fd);
        d->reserve_fd = -1;
        int fd = accept4(d->listen_fd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
        bool shed = fd >= 0;
        if (shed)
                close(fd);
        d->reserve_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
        int64_t now = hbg_now_ms();
        if (shed && now - d->last_shed_log_ms >= 10000) {
                d->last_shed_log_ms = now;
                hbgd_log(LOG_WARNING, "out of file descriptors (RLIMIT_NOFILE): closing new connections "
                         "until some are free; see max_connections in hbgd.conf(5)");
        }
        return shed;
}

void listener_on_readable(struct io_source *src, uint32_t events, void *userdata) {
        struct hbgd *d = userdata;
        (void)events;
        for (unsigned i = 0; i < ACCEPT_PER_TURN; i++) {
                int fd = accept4(d->listen_fd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
                if (fd >= 0) {
                        conn_accept(d, fd);
                        continue;
                }
                switch (errno) {
                case EAGAIN:
                        return; /* drained */
                case EINTR:
                case ECONNABORTED:
                case EPROTO:
                        continue;
                case EMFILE:
                case ENFILE:
                case ENOBUFS:
                case ENOMEM:
                        if (shed_one(d))
                                continue;
                        return; /* the timer comes back */
                default:
                        hbgd_log_fields(LOG_ERR, &(struct hbg_log_fields){ .err = -errno }, "accept: %s",
                                        strerror(errno));
                        return;
                }
        }
        io_source_again(d->loop, src);
}
