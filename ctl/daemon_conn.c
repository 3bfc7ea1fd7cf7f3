/* SPDX-License-Identifier: MIT */
/* Connecting to hbgd's control socket, one request and its reply. */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "ctl/ctl.h"

int ctl_connect(const char *path) {
        struct sockaddr_un sa = { .sun_family = AF_UNIX };
        if (strlen(path) >= sizeof(sa.sun_path)) {
                fprintf(stderr, "hbgctl: socket path too long: %s\n", path);
                return -EXIT_USAGE;
        }
        strcpy(sa.sun_path, path);
        int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
        if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
                int err = errno;
                if (fd >= 0)
                        close(fd);
                fprintf(stderr, "hbgctl: hbgd is not running on %s: %s\n", path, strerror(err));
                return -EXIT_NOT_RUNNING;
        }
        return fd;
}

/* Send one envelope, receive one (blocking with a timeout). */
Hbg__Envelope *ctl_roundtrip(int fd, Hbg__Envelope *env) {
        if (wire_send(fd, env, NULL, 0, HBG_WIRE_MAX_MSG_DEFAULT) < 0) {
                fprintf(stderr, "hbgctl: cannot talk to hbgd: %s\n", strerror(errno));
                return NULL;
        }
        struct pollfd p = { .fd = fd, .events = POLLIN };
        if (poll(&p, 1, 10000) <= 0) {
                fprintf(stderr, "hbgctl: hbgd did not answer within 10 s\n");
                return NULL;
        }
        Hbg__Envelope *reply = NULL;
        int fds[HBG_WIRE_MAX_FDS];
        unsigned nfds = 0;
        int err = wire_recv(fd, 16u << 20, &reply, fds, 0, &nfds);
        if (err < 0) {
                fprintf(stderr, "hbgctl: bad reply from hbgd: %s\n", strerror(-err));
                return NULL;
        }
        if (reply->msg_case == HBG__ENVELOPE__MSG_ERROR) {
                fprintf(stderr, "hbgctl: hbgd: %s\n", reply->error->message);
                wire_free(reply);
                return NULL;
        }
        return reply;
}
