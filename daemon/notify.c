/* SPDX-License-Identifier: MIT */
/* Notifications to the service manager (daemon/notify.h). */
#include "daemon/notify.h"

#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>

/* ------------------------------------------------------------ notify */

/*
 * sd_notify() sends on a blocking datagram socket: if the receiver does not
 * read (a test harness that took READY=1 and moved on, or a busy manager),
 * the eleventh queued message blocks the io thread, and with it SIGTERM.
 * Ours never blocks: a message that does not fit is dropped (they are
 * state updates; the next one says the same or more).
 */
static int notify_fd = -2; /* -2: not opened yet, -1: no NOTIFY_SOCKET */
static struct sockaddr_un notify_addr;
static socklen_t notify_len;

void hbgd_notify(const char *fmt, ...) {
        if (notify_fd == -2) {
                const char *path = getenv("NOTIFY_SOCKET");
                notify_fd = -1;
                if (path && (path[0] == '/' || path[0] == '@') && strlen(path) < sizeof(notify_addr.sun_path)) {
                        notify_addr.sun_family = AF_UNIX;
                        memcpy(notify_addr.sun_path, path, strlen(path));
                        if (path[0] == '@')
                                notify_addr.sun_path[0] = 0;
                        notify_len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + strlen(path));
                        notify_fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
                }
        }
        if (notify_fd < 0)
                return;
        char msg[512];
        va_list ap;
        va_start(ap, fmt);
        int n = vsnprintf(msg, sizeof(msg), fmt, ap);
        va_end(ap);
        if (n < 0)
                return;
        ssize_t sent = sendto(notify_fd, msg, strlen(msg), MSG_DONTWAIT | MSG_NOSIGNAL,
                              (struct sockaddr *)&notify_addr, notify_len);
        (void)sent;
}

