/* SPDX-License-Identifier: MIT */
/*
 * The listening socket: socket activation or our own bind (with [socket]
 * mode and group; a socket file nobody serves is replaced, one somebody
 * serves is named with its hbgd's pid), and the accept loop. Accepting never starves: each turn takes up to ACCEPT_PER_TURN
 * connections and, if more may be queued, the loop comes back without a
 * new event (io_uring's multishot poll fires only on new arrivals). When
 * hbgd is out of file descriptors, the queue is still drained: a reserve
 * descriptor is given up to accept and close one connection at a time, so
 * dead connections never clog the backlog (docs/SECURITY.md).
 */
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <syslog.h>
#include <systemd/sd-daemon.h>
#include <unistd.h>

#include "daemon/daemon_private.h"
#include "daemon/conn.h"
#include "daemon/listener.h"
#include "daemon/tick.h"
#include "common/text.h"
#include "daemon/log.h"
#include "proto/wire.h"
#include "common/clock.h"

#define ACCEPT_PER_TURN 64

/* How long a second hbgd waits for the first to say who it is. */
#define PROBE_MS 2000

/* One request to the hbgd serving fd and its reply (blocking, bounded by
 * PROBE_MS): the reply of the kind wanted, or NULL. */
static Hbg__Envelope *probe_roundtrip(int fd, Hbg__Envelope *env, Hbg__Envelope__MsgCase want) {
        if (wire_send(fd, env, NULL, 0, HBG_WIRE_MAX_MSG_DEFAULT) < 0)
                return NULL;
        struct pollfd p = { .fd = fd, .events = POLLIN };
        if (poll(&p, 1, PROBE_MS) <= 0)
                return NULL;
        Hbg__Envelope *reply = NULL;
        int fds[1];
        unsigned nfds = 0;
        if (wire_recv(fd, HBG_WIRE_MAX_MSG_DEFAULT, &reply, fds, 0, &nfds) < 0)
                return NULL;
        if (reply->msg_case != want) {
                wire_free(reply);
                return NULL;
        }
        return reply;
}

/* Who serves the socket fd is connected to, for the message of a second
 * instance: hbgd's own answer (its version and pid from a status reply),
 * else the pid that called listen() on it (SO_PEERCRED: systemd's, for an
 * activated socket). */
static void describe_server(int fd, char *buf, size_t len) {
        struct ucred cr = { 0 };
        socklen_t cl = sizeof(cr);
        bool have_cred = getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &cl) == 0 && cr.pid > 0;
        Hbg__Hello hello;
        Hbg__Envelope env;
        wire_hello(&env, &hello, "hbgd " HBG_VERSION " (second instance)");
        Hbg__Envelope *r = probe_roundtrip(fd, &env, HBG__ENVELOPE__MSG_HELLO);
        if (r) {
                wire_free(r);
                Hbg__StatusRequest rq = HBG__STATUS_REQUEST__INIT;
                rq.kind = HBG__STATUS_KIND__STATUS_DAEMON;
                env = (Hbg__Envelope)HBG__ENVELOPE__INIT;
                env.msg_case = HBG__ENVELOPE__MSG_STATUS_REQUEST;
                env.status_request = &rq;
                r = probe_roundtrip(fd, &env, HBG__ENVELOPE__MSG_STATUS_REPLY);
        }
        if (r && r->status_reply->daemon && r->status_reply->daemon->pid) {
                const Hbg__DaemonStatus *ds = r->status_reply->daemon;
                char version[32];
                text_copy_str(version, sizeof(version), ds->version ? ds->version : "", TEXT_TERMINAL);
                snprintf(buf, len, "hbgd %s, pid %u", version, ds->pid);
        } else if (have_cred) {
                snprintf(buf, len, "pid %d (it did not answer as hbgd does)", (int)cr.pid);
        } else {
                snprintf(buf, len, "another process");
        }
        wire_free(r);
}

/* bind() failed with err: the line that says why and what to do. */
static void log_bind_failure(const struct hbgd *d, int err) {
        const char *path = d->cfg.socket_path;
        char dir[sizeof(d->cfg.socket_path)];
        snprintf(dir, sizeof(dir), "%s", path);
        char *slash = strrchr(dir, '/');
        if (slash)
                *(slash == dir ? slash + 1 : slash) = 0;
        bool dflt = strcmp(path, HBG_DEFAULT_SOCKET) == 0;
        char hint[400] = "";
        if (err == -ENOENT && access(dir, F_OK) < 0)
                snprintf(hint, sizeof(hint), ": the directory %s does not exist%s", dir,
                         dflt ? ". Run by hand, give hbgd a socket of its own, e.g. `hbgd --socket "
                                "/tmp/hbgd.sock`, and its clients the same path (HBG_SOCKET or hbgctl "
                                "--socket); under systemd, hbgd.socket creates it (systemctl start hbgd.socket)"
                              : "");
        else if (err == -EACCES || err == -EPERM)
                snprintf(hint, sizeof(hint), ": no permission to create it in %s%s", dir,
                         dflt ? " (run hbgd as root, under systemd's hbgd.socket, or with --socket PATH "
                                "in a directory of yours)"
                              : "");
        hbgd_log_fields(LOG_ERR, &(struct hbg_log_fields){ .err = err }, "cannot listen on %s: %s%s", path,
                        strerror(-err), hint);
}

/* [socket] mode and group, on the socket file we just bound (before
 * listen(): nobody connects in between). A group that does not exist, or
 * that we may not give the file, is a warning: the socket keeps hbgd's
 * own group and the mode. */
static void apply_owner(const struct hbgd *d) {
        const struct hbgd_config *cfg = &d->cfg;
        const char *path = cfg->socket_path;
        if (cfg->socket_group[0]) {
                struct group *g = getgrnam(cfg->socket_group);
                char *end;
                errno = 0;
                unsigned long gid = strtoul(cfg->socket_group, &end, 10);
                bool numeric = errno == 0 && *end == 0 && isdigit((unsigned char)cfg->socket_group[0]) &&
                               gid < UINT32_MAX;
                if (!g && !numeric)
                        hbgd_log(LOG_WARNING, "[socket] group '%s' does not exist: %s keeps hbgd's own group "
                                 "(gid %u); create it (groupadd --system %s) or set [socket] group in hbgd.conf",
                                 cfg->socket_group, path, (unsigned)getegid(), cfg->socket_group);
                else if (chown(path, (uid_t)-1, g ? g->gr_gid : (gid_t)gid) < 0)
                        hbgd_log(LOG_WARNING, "[socket] group '%s': cannot give %s to it: %s; it keeps hbgd's "
                                 "own group (gid %u)", cfg->socket_group, path, strerror(errno),
                                 (unsigned)getegid());
        }
        if (chmod(path, cfg->socket_mode) < 0)
                hbgd_log(LOG_WARNING, "[socket] mode %04o: cannot set it on %s: %s", cfg->socket_mode, path,
                         strerror(errno));
}

/* bind() with the mode of [socket] mode from the start: the umask is
 * process-wide, but no other thread creates files while hbgd starts (the
 * log writer only writes). */
static int bind_with_mode(const struct hbgd *d, int fd, const struct sockaddr_un *sa) {
        mode_t old = umask(~d->cfg.socket_mode & 0777);
        int r = bind(fd, (const struct sockaddr *)sa, sizeof(*sa));
        int err = r < 0 ? -errno : 0;
        umask(old);
        return err;
}

static int bind_socket(struct hbgd *d) {
        const char *path = d->cfg.socket_path;
        struct sockaddr_un sa = { .sun_family = AF_UNIX };
        if (strlen(path) >= sizeof(sa.sun_path)) {
                log_bind_failure(d, -ENAMETOOLONG);
                return -ENAMETOOLONG;
        }
        strcpy(sa.sun_path, path);
        int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
        if (fd < 0) {
                int err = -errno;
                log_bind_failure(d, err);
                return err;
        }
        int err = bind_with_mode(d, fd, &sa);
        if (err == -EADDRINUSE) {
                /* A file is there: take it over only if it is a socket
                 * nobody serves (ECONNREFUSED); say who serves it if
                 * someone does. */
                struct stat st;
                if (lstat(path, &st) == 0 && !S_ISSOCK(st.st_mode)) {
                        close(fd);
                        hbgd_log(LOG_ERR, "cannot listen on %s: it exists and is not a socket", path);
                        return -EEXIST;
                }
                int probe = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
                int perr = probe < 0 ? -errno : connect(probe, (struct sockaddr *)&sa, sizeof(sa)) < 0 ? -errno : 0;
                if (perr == 0) {
                        char who[160];
                        describe_server(probe, who, sizeof(who));
                        close(probe);
                        close(fd);
                        hbgd_log_fields(LOG_ERR, &(struct hbg_log_fields){ .err = -EADDRINUSE },
                                        "cannot listen on %s: it is served by %s; stop that one first, or give "
                                        "this one another --socket", path, who);
                        return -EADDRINUSE;
                }
                if (probe >= 0)
                        close(probe);
                if (perr != -ECONNREFUSED) {
                        close(fd);
                        hbgd_log_fields(LOG_ERR, &(struct hbg_log_fields){ .err = perr },
                                        "cannot listen on %s: a socket is there and connecting to it fails "
                                        "with %s; not replacing it", path, strerror(-perr));
                        return perr;
                }
                hbgd_log(LOG_NOTICE, "%s: replacing a socket nobody serves (left by an hbgd that did not "
                         "exit cleanly)", path);
                unlink(path);
                err = bind_with_mode(d, fd, &sa);
        }
        if (err < 0) {
                close(fd);
                log_bind_failure(d, err);
                return err;
        }
        apply_owner(d);
        if (listen(fd, SOMAXCONN) < 0) {
                err = -errno;
                close(fd);
                unlink(path);
                hbgd_log_fields(LOG_ERR, &(struct hbg_log_fields){ .err = err }, "cannot listen on %s: %s", path,
                                strerror(-err));
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
        hbgd_log(LOG_DEBUG, "listening on the socket systemd passed (fd %d): its mode and group are the unit's "
                 "SocketMode= and SocketGroup=, not [socket] mode and group", found);
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
        int64_t now = clock_now_ms();
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
                        hbgd_tick_set(d, true);
                        return; /* the timer comes back, quick */
                default:
                        hbgd_log_fields(LOG_ERR, &(struct hbg_log_fields){ .err = -errno }, "accept: %s",
                                        strerror(errno));
                        return;
                }
        }
        io_source_again(d->loop, src);
}
