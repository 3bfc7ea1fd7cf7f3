/* SPDX-License-Identifier: MIT */
/* The status verbs: one StatusRequest to hbgd, its reply printed; and
 * `wait`, until hbgd answers one. */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "common/clock.h"
#include "ctl/ctl.h"
#include "ctl/status.h"
#include "ctl/daemon_conn.h"
#include "ctl/error.h"
#include "ctl/output.h"

int cmd_status(const struct ctl_opts *o, Hbg__StatusKind kind) {
        Hbg__Envelope *reply = NULL;
        struct ctl_failure fail;
        if (ctl_status(o->socket, kind, &reply, &fail) < 0)
                return ctl_exit_status(&fail);
        json_object *j = status_json(kind, reply->status_reply);
        if (opt_json)
                print_json(j);
        else
                status_print_text(kind, j);
        json_object_put(j);
        wire_free(reply);
        return 0;
}

/* How often `wait` tries to connect. */
#define WAIT_RETRY_MS 50

/* Can a connection be made to path? 0, or -errno of connect(). */
static int try_connect(const char *path) {
        struct sockaddr_un sa = { .sun_family = AF_UNIX };
        if (strlen(path) >= sizeof(sa.sun_path))
                return -ENAMETOOLONG;
        strcpy(sa.sun_path, path);
        int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
        if (fd < 0)
                return -errno;
        int err = connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 ? -errno : 0;
        close(fd);
        return err;
}

/* Until the socket takes connections (no socket yet, or nobody listening:
 * hbgd is starting), then one status request: its outcome is ours. Any
 * other failure to connect (permission) is reported at once: waiting
 * would not change it. */
int cmd_wait(const struct ctl_opts *o) {
        int64_t deadline = clock_now_ns() + (int64_t)(o->timeout_s * 1e9); /* at most 86400 s */
        int err;
        while ((err = try_connect(o->socket)) == -ENOENT || err == -ECONNREFUSED || err == -ENOTDIR) {
                if (clock_now_ns() >= deadline) {
                        ctl_error(-ETIMEDOUT, "hbgd did not answer on %s within %g s: %s", o->socket, o->timeout_s,
                                  strerror(-err));
                        return EXIT_NOT_RUNNING;
                }
                poll(NULL, 0, WAIT_RETRY_MS);
        }
        Hbg__Envelope *reply = NULL;
        struct ctl_failure fail;
        if (ctl_status(o->socket, HBG__STATUS_KIND__STATUS_DAEMON, &reply, &fail) < 0)
                return ctl_exit_status(&fail);
        if (opt_json) {
                json_object *j = status_json(HBG__STATUS_KIND__STATUS_DAEMON, reply->status_reply);
                print_json(j);
                json_object_put(j);
        }
        wire_free(reply);
        return 0;
}
