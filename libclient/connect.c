/* SPDX-License-Identifier: MIT */
/*
 * Connecting: the handshake with hbgd, mapping and checking the session's
 * regions and channels, and disconnecting (docs/PROTOCOL.md).
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "libclient/client_private.h"
#include "libclient/deps.h"
#include "libclient/errors.h"
#include "libclient/hangup.h"
#include "libclient/host.h"
#include "libclient/kernels.h"
#include "libclient/replay.h"
#include "libclient/session.h"
#include "libclient/workers.h"
#include "common/sockperm.h"
#include "proto/wire.h"
#include "common/clock.h"

/* ---------------------------------------------------------------- handshake */

static int send_env(int sock, Hbg__Envelope *env) {
        return wire_send(sock, env, NULL, 0, HBG_WIRE_MAX_MSG_DEFAULT);
}

static void close_fds(int *fds, unsigned n) {
        for (unsigned i = 0; i < n; i++)
                if (fds[i] >= 0) {
                        close(fds[i]);
                        fds[i] = -1;
                }
}

static bool fd_size_at_least(int fd, uint64_t size) {
        struct stat st;
        return fstat(fd, &st) == 0 && st.st_size >= 0 && (uint64_t)st.st_size >= size;
}

/* Map hbgd's wake page (protocol 1.5) read-only. Anything wrong with it
 * leaves the doorbell alone to wake hbgd: no reason to refuse a session
 * that works without it. */
static void map_wake_page(hbg_client *c, int fd) {
        if (!fd_size_at_least(fd, HBG_WAKE_PAGE_SIZE))
                return;
        const struct hbg_wake_page *p = mmap(NULL, HBG_WAKE_PAGE_SIZE, PROT_READ, MAP_SHARED, fd, 0);
        if (p == MAP_FAILED)
                return;
        if (p->magic != HBG_WAKE_MAGIC) {
                munmap((void *)(uintptr_t)p, HBG_WAKE_PAGE_SIZE);
                return;
        }
        c->wake_n = p->wake_n == 0 ? 1 : p->wake_n > INT_MAX ? INT_MAX : (int)p->wake_n;
        atomic_store_explicit(&c->wake_trust, (p->flags & HBG_WAKE_OWN) != 0, memory_order_relaxed);
        c->wake_page = p;
}

/* Regions this library cannot read: hbgd comes from another release
 * (the layout is not negotiated, PROTOCOL.md). Both sides' versions;
 * hbgd's layout where its region says it (0: unknown). */
static int other_release(const hbg_client *c, const char *what, uint32_t hbgd_layout) {
        char layout[40] = "";
        if (hbgd_layout)
                snprintf(layout, sizeof(layout), ", shared-memory layout %u", hbgd_layout);
        return hbgc_fail(NULL, -EPROTO,
                         "%s: hbgd and libhbgclient must come from the same release (hbgd says '%s', protocol "
                         "1.%u%s; this is libhbgclient %s, protocol 1.%u, shared-memory layout %u)",
                         what, c->hbgd_name, c->hbgd_minor, layout, HBG_VERSION, HBG_PROTO_MINOR,
                         HBG_LAYOUT_VERSION);
}

/* Map the regions of a session reply (fds: sub, cpl), the submission
 * region sealed against writable mappings; the memfds are closed. */
static int map_regions(hbg_client *c, const Hbg__SessionReply *r, int *fds) {
        struct hbg_geometry_request req = {
                .task_window = r->task_window,
                .flag_window = r->flag_window,
                .heap_size = r->heap_size,
                .mailbox_entries = r->mailbox_entries,
                .graph_table_entries = r->graph_table_entries,
        };
        const char *why = NULL;
        int err = geometry_init(&c->g, &req, &why);
        if (err < 0)
                return hbgc_fail(NULL, -EPROTO, "hbgd sent an invalid session geometry: %s", why);
        if (r->sub_region_size != c->g.sub_region_size || r->cpl_region_size != c->g.cpl_region_size)
                return other_release(c, "hbgd's region sizes do not match its geometry", 0);
        if (!fd_size_at_least(fds[0], c->g.sub_region_size) ||
            !fd_size_at_least(fds[1], c->g.cpl_region_size))
                return hbgc_fail(NULL, -EPROTO, "a session memfd is smaller than its region");

        void *sub = mmap(NULL, c->g.sub_region_size, PROT_READ | PROT_WRITE, MAP_SHARED, fds[0], 0);
        if (sub == MAP_FAILED) {
                err = -errno;
                return hbgc_fail(NULL, err, "cannot map the submission region: %s", strerror(-err));
        }
        c->sub = sub;
        /* Mapped: now nobody may map it writable again, nor punch holes in
         * it, which would make hbgd's threads wait (docs/SECURITY.md); a
         * 1.6 hbgd serves the session once this seal is on (and puts it on
         * itself at our first doorbell otherwise). An older hbgd sealed
         * the memfd's seals already. */
        if (c->hbgd_minor >= HBG_PROTO_MINOR_SEALED_SUB &&
            fcntl(fds[0], F_ADD_SEALS, F_SEAL_FUTURE_WRITE | F_SEAL_SEAL) < 0) {
                err = -errno;
                return hbgc_fail(NULL, err, "cannot seal the submission region: %s", strerror(-err));
        }
        /* Read-only: the memfd is sealed F_SEAL_FUTURE_WRITE. */
        void *cpl = mmap(NULL, c->g.cpl_region_size, PROT_READ, MAP_SHARED, fds[1], 0);
        if (cpl == MAP_FAILED) {
                err = -errno;
                return hbgc_fail(NULL, err, "cannot map the completion region: %s", strerror(-err));
        }
        c->cpl = cpl;
        close_fds(fds, 2);
        return 0;
}

/* The mapped regions' headers against the session reply; then the
 * client's views of them. */
static int check_regions(hbg_client *c, const Hbg__SessionReply *r) {
        const char *why = NULL;
        const struct hbg_cpl_header *ch = c->cpl;
        if (ch->magic == HBG_CPL_MAGIC && ch->layout_version != HBG_LAYOUT_VERSION)
                return other_release(c, "completion region: another layout version than this library's",
                                     ch->layout_version);
        int err = layout_cpl_region_check(c->cpl, c->g.cpl_region_size, &why);
        if (err < 0)
                return hbgc_fail(NULL, err, "%s", why);
        if (ch->task_window_log2 != c->g.task_window_log2 ||
            ch->flag_window_log2 != c->g.flag_window_log2 ||
            ch->graph_table_log2 != c->g.graph_table_log2 || ch->first_id != r->first_id)
                return hbgc_fail(NULL, -EPROTO, "completion region: geometry differs from the session reply");
        /* The same for the submission region: its check derives the
         * offsets from its sizes, so the sizes alone are compared here. */
        const struct hbg_sub_header *sh = c->sub;
        if (sh->magic == HBG_SUB_MAGIC && sh->layout_version != HBG_LAYOUT_VERSION)
                return other_release(c, "submission region: another layout version than this library's",
                                     sh->layout_version);
        err = layout_sub_region_check(c->sub, c->g.sub_region_size, &why);
        if (err < 0)
                return hbgc_fail(NULL, err, "%s", why);
        if (sh->task_window_log2 != c->g.task_window_log2 || sh->mailbox_log2 != c->g.mailbox_log2 ||
            sh->graph_ring_log2 != c->g.graph_table_log2 || sh->heap_size != c->g.heap_size)
                return other_release(c, "submission region: header differs from the session reply", 0);

        c->sh = c->sub;
        c->ch = ch;
        c->heap = (uint8_t *)c->sub + c->g.sub_heap_offset;
        return 0;
}

/* The doorbell and the completion channel (fds[2], fds[3]), taken over;
 * the first doorbell rung. */
static int take_channels(hbg_client *c, int *fds) {
        /* The doorbell is our end of a socketpair, the completion channel
         * the read end of a pipe (hbgd keeps the other ends to itself).
         * Ours are made non-blocking, so that no read or write of ours can
         * ever block either. */
        struct stat st_db, st_cp;
        if (fstat(fds[2], &st_db) < 0 || !S_ISSOCK(st_db.st_mode) || fstat(fds[3], &st_cp) < 0 ||
            !S_ISFIFO(st_cp.st_mode))
                return hbgc_fail(NULL, -EPROTO, "hbgd's doorbell is not a socket or its completion "
                                 "channel not a pipe");
        for (unsigned i = 2; i < 4; i++) {
                int fl = fcntl(fds[i], F_GETFL);
                /* hbgd sends them non-blocking: no second call then. */
                if (fl < 0 || (!(fl & O_NONBLOCK) && fcntl(fds[i], F_SETFL, fl | O_NONBLOCK) < 0))
                        return hbgc_fail(NULL, -EPROTO, "hbgd's channels are not usable: %s", strerror(errno));
        }
        c->doorbell_fd = fds[2];
        c->completion_fd = fds[3];
        fds[2] = fds[3] = -1;
        /* The regions are mapped and sealed: hbgd serves the session from
         * this first doorbell on (a 1.6 hbgd; an older one just looks). */
        hbgc_doorbell_send(c);
        /* hbg_client_fd()'s descriptor comes with its first call
         * (notify_make()). */
        return 0;
}

/* Map the regions of a session reply and check them. fds: sub, cpl,
 * doorbell, completion; the memfds are closed here, the channels kept. */
static int map_session(hbg_client *c, const Hbg__SessionReply *r, int *fds) {
        int err = map_regions(c, r, fds);
        if (err < 0 || (err = check_regions(c, r)) < 0)
                return err;

        /* Only reads through the window: the cast drops const for the
         * shared type, nothing is ever stored through it. */
        flag_window_init(&c->window, &c->g, (void *)(uintptr_t)c->cpl, r->first_id);
        err = completer_init(&c->completer, &c->window, 0);
        if (err < 0)
                return hbgc_fail(NULL, err, "out of memory");

        c->session_id = r->session_id;
        c->first_id = r->first_id;
        producer_init(&c->prod, &c->g, c->sub, c->cpl, r->first_id);
        c->harvested = 0;
        err = take_channels(c, fds);
        if (err < 0)
                return err;
        c->deps.sweep_at = 4096;
        c->dt = &c->deps;
        return 0;
}

static void client_free(hbg_client *c) {
        if (!c)
                return;
        /* First: the workers use everything below. */
        hbgc_workers_stop(c);
        if (c->sub)
                munmap(c->sub, c->g.sub_region_size);
        if (c->cpl)
                munmap((void *)(uintptr_t)c->cpl, c->g.cpl_region_size);
        if (c->wake_page)
                munmap((void *)(uintptr_t)c->wake_page, HBG_WAKE_PAGE_SIZE);
        if (c->sock >= 0) {
                /* The hang-up hbgd waits for, now: our io_uring's poll
                 * holds the socket open until the kernel tears the ring
                 * down, later, on a worker of its own; meanwhile hbgd
                 * would still count the session, and a client that
                 * connects again at once could find max_sessions reached.
                 * Not from a forked child: the socket is its parent's too. */
                if (getpid() == c->sock_owner)
                        shutdown(c->sock, SHUT_RDWR);
                close(c->sock);
        }
        if (c->doorbell_fd >= 0)
                close(c->doorbell_fd);
        if (c->completion_fd >= 0)
                close(c->completion_fd);
        if (c->rearm_fd >= 0)
                close(c->rearm_fd);
        if (c->notify_fd >= 0)
                close(c->notify_fd);
        pthread_mutex_destroy(&c->notify_lock);
        completer_destroy(&c->completer);
        kernel_table_free(&c->kernels);
        hbgc_recorded_free_all(c);
        hbgc_deps_free(c);
        hbgc_host_free(c);
        hbgc_hangup_free(c);
        free(c->failures);
        free(c->messages);
        free(c->spilled);
        free(c->host_failed);
        free(c->cancelled);
        pthread_mutex_destroy(&c->host_lock);
        free(c);
}

/* A send or receive of the handshake failed. If hbgd hung up, the Error
 * it sent before is still queued behind the reset (proto/wire.h): its
 * reason and code (a refused connection: -EACCES, -EUSERS, -ESHUTDOWN)
 * instead of the hang-up's. */
static int handshake_failed(int sock, int err, const char *what) {
        Hbg__Envelope *env = NULL;
        if ((err == -EPIPE || err == -ECONNRESET) && wire_recv_queued_error(sock, &env) == 0) {
                err = hbgc_daemon_error(NULL, env->error, "connection");
                wire_free(env);
                return err;
        }
        return hbgc_fail(NULL, err, "%s: %s", what, hbg_strerror(err));
}

static int handshake(hbg_client *c, const hbg_connect_options *o) {
        Hbg__Envelope *env = NULL;
        int fds[HBG_WIRE_MAX_FDS] = { -1, -1, -1, -1, -1 };
        unsigned nfds = 0;
        int err;

        Hbg__Hello hello;
        Hbg__Envelope out;
        wire_hello(&out, &hello,
                   o->name ? o->name : program_invocation_short_name ? program_invocation_short_name : "");
        if ((err = send_env(c->sock, &out)) < 0)
                return handshake_failed(c->sock, err, "cannot send hello to hbgd");
        /* The session request goes right behind the hello (hbgd reads them
         * in order): one round trip less. Zeros: the daemon's defaults. */
        Hbg__SessionRequest sr = HBG__SESSION_REQUEST__INIT;
        sr.task_window = o->task_window;
        sr.flag_window = o->flag_window;
        sr.heap_size = o->heap_bytes;
        sr.graph_table_entries = o->graph_table;
        sr.mailbox_entries = o->mailbox;
        sr.stall_timeout_ms = o->stall_timeout_ms;
        /* hbgd sends no kernel table when its own is this one. */
        sr.kernels_digest = kernel_table_builtin_digest();
        Hbg__Envelope req = HBG__ENVELOPE__INIT;
        req.msg_case = HBG__ENVELOPE__MSG_SESSION_REQUEST;
        req.session_request = &sr;
        if ((err = send_env(c->sock, &req)) < 0)
                return handshake_failed(c->sock, err, "cannot send the session request");
        err = hbgc_recv_env(c->sock, HBGC_HANDSHAKE_TIMEOUT_MS, &env, fds, 0, &nfds);
        if (err < 0)
                return handshake_failed(c->sock, err, "no hello from hbgd");
        if (env->msg_case == HBG__ENVELOPE__MSG_ERROR) {
                err = hbgc_daemon_error(NULL, env->error, "connection");
                wire_free(env);
                return err;
        }
        if (env->msg_case != HBG__ENVELOPE__MSG_HELLO || env->hello->version_major != HBG_PROTO_MAJOR) {
                wire_free(env);
                return hbgc_fail(NULL, -EPROTO, "hbgd did not answer with a hello of protocol %u",
                                 HBG_PROTO_MAJOR);
        }
        c->hbgd_minor = env->hello->version_minor;
        /* hbgd's words, for messages: printable bytes only. */
        size_t n = 0;
        for (const char *s = env->hello->name; s && *s && n + 1 < sizeof(c->hbgd_name); s++)
                if (*s >= 0x20 && *s < 0x7f)
                        c->hbgd_name[n++] = *s;
        c->hbgd_name[n] = 0;
        c->task_wake = c->hbgd_minor >= HBG_PROTO_MINOR_TASK_WAKE;
        wire_free(env);

        err = hbgc_recv_env(c->sock, HBGC_HANDSHAKE_TIMEOUT_MS, &env, fds, HBG_WIRE_MAX_FDS, &nfds);
        if (err < 0)
                return handshake_failed(c->sock, err, "no session reply from hbgd");
        if (env->msg_case == HBG__ENVELOPE__MSG_ERROR) {
                close_fds(fds, nfds);
                err = hbgc_daemon_error(NULL, env->error, "session");
                wire_free(env);
                return err;
        }
        /* 4 fds, and the wake page from a 1.5 hbgd. */
        unsigned want = c->hbgd_minor >= HBG_PROTO_MINOR_WAKE_PAGE ? 5 : 4;
        if (env->msg_case != HBG__ENVELOPE__MSG_SESSION_REPLY || nfds != want ||
            env->session_reply->fds != want) {
                close_fds(fds, nfds);
                wire_free(env);
                return hbgc_fail(NULL, -EPROTO, "hbgd's session reply is not a reply with %u fds", want);
        }
        err = map_session(c, env->session_reply, fds);
        if (err == 0 && want == 5)
                map_wake_page(c, fds[4]);
        if (err == 0)
                err = hbgc_kernels_take(c, env->session_reply);
        close_fds(fds, want);
        wire_free(env);
        return err;
}

/* The caller's options as this version knows them: fields it does not
 * know must be zero (the Linux extensible-struct rule). */
static int take_options(const hbg_connect_options *opts, hbg_connect_options *o) {
        *o = HBG_CONNECT_OPTIONS_INIT;
        if (!opts)
                return 0;
        size_t v1 = offsetof(hbg_connect_options, mailbox) + sizeof(opts->mailbox);
        if (opts->size < v1)
                return hbgc_fail(NULL, -EINVAL, "hbg_connect_opts: opts->size %zu is smaller than version 1.0's "
                                 "%zu (initialise with HBG_CONNECT_OPTIONS_INIT)", opts->size, v1);
        for (size_t i = sizeof(*o); i < opts->size; i++)
                if (((const unsigned char *)opts)[i])
                        return hbgc_fail(NULL, -E2BIG, "hbg_connect_opts: the options have fields newer than "
                                         "this libhbgclient %s (byte %zu is set)", HBG_VERSION, i);
        /* An older caller's struct ends earlier: its missing fields stay
         * zero (the defaults). */
        memcpy(o, opts, opts->size < sizeof(*o) ? opts->size : sizeof(*o));
        o->size = sizeof(*o);
        if (o->host_threads > HBG_MAX_HOST_THREADS)
                return hbgc_fail(NULL, -EINVAL, "hbg_connect_opts: host_threads %" PRIu64 " is more than %u "
                                 "(HBG_MAX_HOST_THREADS)", o->host_threads, HBG_MAX_HOST_THREADS);
        return 0;
}

HBG_EXPORT int hbg_connect(hbg_client **ret, const char *path) {
        hbg_connect_options o = HBG_CONNECT_OPTIONS_INIT;
        o.socket_path = path;
        return hbg_connect_opts(ret, &o);
}

HBG_EXPORT int hbg_connect_opts(hbg_client **ret, const hbg_connect_options *opts) {
        if (!ret)
                return hbgc_fail(NULL, -EINVAL, "hbg_connect: ret is NULL");
        *ret = NULL;
        hbg_connect_options o;
        int err = take_options(opts, &o);
        if (err < 0)
                return err;
        const char *path = wire_socket_path(o.socket_path);
        struct sockaddr_un sa = { .sun_family = AF_UNIX };
        if (strlen(path) >= sizeof(sa.sun_path))
                return hbgc_fail(NULL, -ENAMETOOLONG, "socket path longer than %zu bytes: %s",
                                 sizeof(sa.sun_path) - 1, path);
        memcpy(sa.sun_path, path, strlen(path) + 1);

        hbg_client *c = NULL;
        /* The completer inside is cache-line aligned. */
        size_t size = (sizeof(*c) + HBG_CACHE_LINE - 1) & ~(size_t)(HBG_CACHE_LINE - 1);
        void *mem = NULL;
        if (posix_memalign(&mem, HBG_CACHE_LINE, size) != 0)
                return hbgc_fail(NULL, -ENOMEM, "out of memory");
        c = mem;
        memset(c, 0, size);
        c->sock = c->doorbell_fd = c->completion_fd = c->rearm_fd = c->notify_fd = -1;
        c->hangup.ring_fd = -1;
        c->pool.stop_fd = -1;
        pthread_mutex_init(&c->host_lock, NULL);
        pthread_mutex_init(&c->notify_lock, NULL);

        c->sock = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
        c->sock_owner = getpid();
        if (c->sock < 0) {
                err = -errno;
                client_free(c);
                return hbgc_fail(NULL, err, "socket: %s", strerror(-err));
        }
        int r;
        do
                r = connect(c->sock, (struct sockaddr *)&sa, sizeof(sa));
        while (r < 0 && errno == EINTR);
        if (r < 0) {
                err = -errno;
                client_free(c);
                if (err == -EACCES || err == -EPERM) {
                        struct sockperm p;
                        char why[512];
                        sockperm_inspect(path, &p);
                        sockperm_describe(&p, path, why, sizeof(why));
                        return hbgc_fail(NULL, err, "cannot connect to hbgd: %s: %s", strerror(-err), why);
                }
                return hbgc_fail(NULL, err, "cannot connect to hbgd at %s: %s%s", path, strerror(-err),
                                 err == -ENOENT || err == -ECONNREFUSED
                                         ? " (is hbgd running? the path comes from the argument, $HBG_SOCKET or " HBG_DEFAULT_SOCKET ")"
                                         : "");
        }
        err = handshake(c, &o);
        if (err < 0) {
                client_free(c);
                return err;
        }
        /* The hang-up watch comes with the first call that asks the
         * socket (a submit, an allocation, a cancel, a recording's end:
         * hangup.h): a connect does not pay for an io_uring it may never
         * need. */
        c->hangup.later = true;
        /* The pipe's byte is asked for only by hbg_client_fd() (an event
         * loop) or by a wait about to poll it (HBG_PIPE_WAITING): with
         * workers, they and hbg_graph_wait() sleep on the futex words;
         * without, a wait that spun asks before it polls. A client that
         * spins for its answer costs hbgd no write (RUNTIME_LOGIC §10.7). */
        err = hbgc_workers_start(c, (unsigned)o.host_threads);
        if (err < 0) {
                client_free(c);
                return err;
        }
        hbgc_set_error(NULL, "");
        *ret = c;
        return 0;
}

HBG_EXPORT void hbg_disconnect(hbg_client *c) {
        /* Not from a host function: it would join its own thread. */
        if (c && hbgc_in_host(c))
                return;
        client_free(c);
}

/* hbg_client_fd()'s descriptor, made at its first call: an epoll of the
 * completion pipe and of rearm_fd, readable when hbgd signalled or when we
 * asked ourselves to be called again. Returns the descriptor or a
 * negative errno (-EMFILE, -ENFILE, -ENOMEM; -ENOSPC past
 * fs.epoll.max_user_watches). */
static int notify_make(hbg_client *c) {
        pthread_mutex_lock(&c->notify_lock);
        int fd = atomic_load_explicit(&c->notify_fd, memory_order_acquire);
        if (fd >= 0) {
                pthread_mutex_unlock(&c->notify_lock);
                return fd;
        }
        int err = 0;
        int rearm = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
        int ep = rearm < 0 ? -1 : epoll_create1(EPOLL_CLOEXEC);
        struct epoll_event ev = { .events = EPOLLIN };
        if (rearm < 0 || ep < 0 || epoll_ctl(ep, EPOLL_CTL_ADD, c->completion_fd, &ev) < 0 ||
            epoll_ctl(ep, EPOLL_CTL_ADD, rearm, &ev) < 0) {
                err = -errno;
                if (ep >= 0)
                        close(ep);
                if (rearm >= 0)
                        close(rearm);
        } else {
                /* The pipe's byte for every event, asked for before the
                 * cursor is looked at: a graph submitted after that look
                 * gets its byte (hbgd loads pipe_wanted seq_cst after it
                 * sees the tasks). */
                atomic_fetch_or_explicit(&c->sh->pipe_wanted, HBG_PIPE_ALWAYS, memory_order_seq_cst);
                /* seq_cst: a task hbgc_process() leaves for a later call
                 * was published (seq_cst) before its load of rearm_fd, by
                 * that thread or through hbgd. Either that load sees
                 * rearm_fd, or our load of the cursor below sees the
                 * task. */
                atomic_store_explicit(&c->rearm_fd, rearm, memory_order_seq_cst);
                /* Release: a thread that loads it sees rearm_fd made. */
                atomic_store_explicit(&c->notify_fd, ep, memory_order_release);
                /* Tasks published before (the cursor starts at 0): ready
                 * host functions may be waiting for a call that had no
                 * descriptor to wake. The loop's first wake takes them up;
                 * a client that published nothing starts quiet. */
                if (atomic_load_explicit(&c->sh->submitted, memory_order_seq_cst) != 0) {
                        uint64_t one = 1;
                        ssize_t n = write(rearm, &one, sizeof(one));
                        (void)n;
                }
        }
        pthread_mutex_unlock(&c->notify_lock);
        /* No message: any thread may call us beside the client's own
         * calls, which write it. */
        return err < 0 ? err : ep;
}

HBG_EXPORT int hbg_client_fd(const hbg_client *c) {
        if (!c)
                return -EINVAL;
        hbg_client *w = (hbg_client *)(uintptr_t)c; /* allocated, not const: its flags */
        /* An event loop on it wants a byte for every event: notify_make()
         * asked for them (HBG_PIPE_ALWAYS, never cleared). */
        int fd = atomic_load_explicit(&w->notify_fd, memory_order_acquire);
        if (fd < 0 && (fd = notify_make(w)) < 0)
                return fd;
        /* The loop sleeps where we cannot confirm a trusted wake: ring
         * the doorbell after every wake from now on (hbgc_ring). */
        atomic_store_explicit(&w->wake_trust, false, memory_order_seq_cst);
        /* A wake trusted before: confirmed now, the loop may sleep next.
         * One trusted concurrently confirms itself (hbgc_ring): store;
         * fence; load on both sides, so one of us sees the other. */
        atomic_thread_fence(memory_order_seq_cst);
        hbgc_ring_confirm(w, 0);
        return fd;
}

