/* SPDX-License-Identifier: MIT */
/*
 * hbgd's io thread, wired together: the event loop, the listener, the
 * connections, signals (SIGTERM/SIGINT shut down, SIGHUP reloads), the
 * housekeeping timer (deadlines, released sessions, graph ages, systemd
 * status and watchdog; its period: tick.c), rings the engine stopped, and
 * shutdown. docs/PROTOCOL.md describes what a client sees.
 */
#include "daemon/daemon.h"

#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/timerfd.h>
#include <syslog.h>
#include <systemd/sd-daemon.h>
#include <time.h>
#include <unistd.h>

#include "common/errtext.h"
#include "daemon/daemon_private.h"
#include "daemon/conn.h"
#include "daemon/config_keys.h"
#include "daemon/conn_close.h"
#include "daemon/listener.h"
#include "daemon/refusal.h"
#include "daemon/tick.h"
#include "daemon/log.h"
#include "daemon/notify.h"
#include "shm/layout.h"
#include "common/clock.h"
#include "daemon/engine/engine_stats.h"

/* Startup's log lines get this long to be written before READY=1. */
#define LOG_SYNC_MS 1000

/* The soft RLIMIT_NOFILE (1024 under systemd) exists for select(); hbgd
 * polls, so it takes the hard limit. What is left is shared out by
 * max_connections; running out is survived (listener.c). */
static void raise_fd_limit(void) {
        struct rlimit rl;
        if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
                rl.rlim_cur = rl.rlim_max;
                setrlimit(RLIMIT_NOFILE, &rl);
        }
}

/* ------------------------------------------------------------ shutdown */

static bool sessions_idle(struct hbgd *d) {
        for (struct conn *c = d->conns; c; c = c->next) {
                if (!c->session)
                        continue;
                struct hbg_cpl_header *ch = c->session->regions.cpl;
                /* Through the memfd: the io thread never faults on a
                 * client's region (RUNTIME_LOGIC.md §8). */
                if (ring_graphs_submitted(c->session->ring) != atomic_load(&ch->graphs_retired))
                        return false;
        }
        return true;
}

static void finish_shutdown(struct hbgd *d) {
        while (d->conns)
                conn_close(d->conns, "hbgd stopped");
        d->done = true;
}

static void begin_shutdown(struct hbgd *d, const char *why) {
        if (d->stopping)
                return;
        d->stopping = true;
        hbgd_tick_set(d, true);
        d->stop_deadline_ms = clock_now_ms() + d->cfg.shutdown_grace_ms;
        hbgd_notify("STOPPING=1");
        if (d->n_sessions == 0)
                hbgd_log(LOG_NOTICE, "%s: not accepting sessions; none open", why);
        else
                hbgd_log(LOG_NOTICE, "%s: not accepting sessions; %u open session%s get%s %u ms to finish their graphs",
                         why, d->n_sessions, d->n_sessions == 1 ? "" : "s", d->n_sessions == 1 ? "s" : "",
                         d->cfg.shutdown_grace_ms);
        /* A socket systemd passed stays with systemd: connections made
         * now wait in its backlog for the next hbgd. On our own socket
         * they would be reset when we exit: accept them, and refuse them
         * with -ESHUTDOWN (conn_accept). */
        if (d->listen_src && !d->listen_owned) {
                io_source_del(d->loop, d->listen_src);
                d->listen_src = NULL;
        }
        if (sessions_idle(d))
                finish_shutdown(d);
}

/* ------------------------------------------------------------ systemd */

static void notify_status(struct hbgd *d, int64_t now) {
        uint64_t completed = d->done_tasks, in_flight = 0;
        for (struct conn *c = d->conns; c; c = c->next) {
                if (!c->session)
                        continue;
                struct ring_stats st;
                ring_stats(c->session->ring, &st);
                completed += st.completed;
                in_flight = metrics_add_sat(in_flight, metrics_graphs_in_flight(&st));
        }
        double secs = (double)(now - d->last_status_ms) / 1000.0;
        double rate = secs > 0 ? (double)(completed - d->last_status_completed) / secs : 0;
        d->last_status_ms = now;
        d->last_status_completed = completed;
        /* Only when it changed: an idle daemon sends nothing. */
        static char last[160];
        char status[160];
        snprintf(status, sizeof(status), "STATUS=%s: %u session%s, %" PRIu64 " graph%s in flight, %.0f tasks/s",
                 d->stopping ? "stopping" : "serving", d->n_sessions, d->n_sessions == 1 ? "" : "s", in_flight,
                 in_flight == 1 ? "" : "s", rate);
        if (strcmp(status, last) == 0)
                return;
        snprintf(last, sizeof(last), "%s", status);
        hbgd_notify("%s", status);
}

/* Every scheduler thread moved since the last check, or is parked idle. */
static bool engine_alive(struct hbgd *d, unsigned *ret_stuck) {
        unsigned n = engine_threads(d->engine);
        bool ok = true;
        for (unsigned i = 0; i < n; i++) {
                struct hbg_thread_alive a;
                engine_thread_alive(d->engine, i, &a);
                if (!a.parked && a.heartbeat == d->hb_last[i] && ok) {
                        ok = false;
                        *ret_stuck = i;
                }
                d->hb_last[i] = a.heartbeat;
        }
        return ok;
}

static void systemd_tick(struct hbgd *d) {
        int64_t now = clock_now_ms();
        if (d->watchdog_usec && now - d->last_watchdog_ms >= (int64_t)(d->watchdog_usec / 2000)) {
                d->last_watchdog_ms = now;
                unsigned stuck = 0;
                if (engine_alive(d, &stuck)) {
                        hbgd_notify("WATCHDOG=1");
                        d->watchdog_withheld = false;
                } else if (!d->watchdog_withheld) {
                        d->watchdog_withheld = true;
                        hbgd_log(LOG_CRIT, "scheduler thread %u made no progress for %" PRIu64
                                 " ms: not pinging the watchdog", stuck, d->watchdog_usec / 2000);
                }
        }
        if (now - d->last_status_ms >= 2000)
                notify_status(d, now);
}

/* [log] level = debug: the settings hbgd runs with, one line a key, as
 * hbgd.conf says them (hbgd --check-config prints the same). */
static void log_effective_config(const struct hbgd *d, const char *when) {
        if (!hbgd_log_enabled(LOG_DEBUG))
                return;
        hbgd_log(LOG_DEBUG, "config (%s): file %s, socket %s%s", when,
                 d->cfg.config_path[0] ? d->cfg.config_path : "(none)",
                 d->listen_owned ? d->cfg.socket_path : "passed by systemd",
                 d->listen_owned ? "" : " ([socket] mode and group not applied)");
        for (size_t i = 0; hbgd_config_key_at(i); i++) {
                const struct hbgd_config_key *k = hbgd_config_key_at(i);
                char value[512];
                hbgd_config_format(&d->cfg, i, value, sizeof(value));
                hbgd_log(LOG_DEBUG, "config (%s): [%s] %s = %s", when, k->section, k->key, value);
        }
}

/* SIGHUP: re-read --config; apply what is safe for new sessions, log
 * what needs a restart. An invalid file changes nothing. */
static void reload_config(struct hbgd *d) {
        hbgd_notify("RELOADING=1\nMONOTONIC_USEC=%llu\nSTATUS=reloading %s",
                   (unsigned long long)(clock_now_ns() / 1000),
                   d->cfg.config_path[0] ? d->cfg.config_path : "(no config file)");
        if (!d->cfg.config_path[0]) {
                hbgd_log(LOG_NOTICE, "SIGHUP: started without --config, nothing to reload");
                goto out;
        }
        /* The file over the defaults, as at a start with it: a key removed
         * from the file goes back to its default (an [access]
         * admin_groups line deleted takes the admins' rights away). The
         * engine's settings need a restart and may come from the command
         * line: the file is compared with those hbgd runs with. */
        struct hbgd_config n;
        hbgd_config_default(&n);
        n.engine = d->cfg.engine;
        snprintf(n.config_path, sizeof(n.config_path), "%s", d->cfg.config_path);
        char err[4096];
        if (hbgd_config_load(&n, d->cfg.config_path, err, sizeof(err)) < 0) {
                /* Each problem its own line, with its FILE:LINE. */
                unsigned lines = 0;
                for (char *save = NULL, *line = strtok_r(err, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
                        hbgd_log(LOG_ERR, "SIGHUP: %s", line);
                        lines++;
                }
                hbgd_log(LOG_ERR, "SIGHUP: %s: %s; keeping the current configuration", d->cfg.config_path,
                         lines > 1 ? "errors above" : "error above");
                goto out;
        }
        const struct hbg_engine_config *o = &d->cfg.engine, *ne = &n.engine;
        if (ne->completion_mode != o->completion_mode)
                hbgd_log(LOG_WARNING, "SIGHUP: [scheduler] completion_mode: %s in the file, running with %s "
                         "(needs a restart)", completion_mode_name(ne->completion_mode),
                         completion_mode_name(o->completion_mode));
        if (ne->threads != o->threads)
                hbgd_log(LOG_WARNING, "SIGHUP: [scheduler] threads: %u in the file, running with %u "
                         "(needs a restart)", ne->threads, o->threads);
        if (ne->clusters != o->clusters)
                hbgd_log(LOG_WARNING, "SIGHUP: [scheduler] clusters: %u in the file, running with %u "
                         "(needs a restart)", ne->clusters, o->clusters);
        if (ne->spin_before_park_ns != o->spin_before_park_ns || ne->stall_timeout_ms != o->stall_timeout_ms ||
            ne->max_spinning_threads != o->max_spinning_threads || ne->max_awake_threads != o->max_awake_threads ||
            ne->move_off_shared_cpu != o->move_off_shared_cpu ||
            ne->max_threads_per_share != o->max_threads_per_share || ne->max_task_cost != o->max_task_cost ||
            ne->kernel_time_budget_ms != o->kernel_time_budget_ms ||
            ne->max_recorded_graphs != o->max_recorded_graphs || ne->trace_thread_events != o->trace_thread_events)
                hbgd_log(LOG_WARNING, "SIGHUP: [scheduler] spin_before_park_us/max_spinning_threads/max_awake_threads/move_off_shared_cpu/"
                         "stall_timeout_ms, [limits] "
                         "max_threads_per_session/max_task_cost/kernel_time_budget_ms/max_recorded_graphs, [trace] "
                         "thread_events changed: ignored (needs a restart)");
        if (n.socket_mode != d->cfg.socket_mode || strcmp(n.socket_group, d->cfg.socket_group) != 0)
                hbgd_log(LOG_WARNING, "SIGHUP: [socket] mode/group changed: ignored (applied when hbgd binds its "
                         "socket: needs a restart)");
        /* Modules are loaded once, at start: the table clients were told
         * of stays as it is while hbgd runs. */
        if (strcmp(n.kernel_modules, d->cfg.kernel_modules) != 0)
                hbgd_log(LOG_WARNING, "SIGHUP: [kernels] modules: '%s' in the file, running with '%s': ignored "
                         "(modules are loaded only at start: needs a restart)", n.kernel_modules,
                         d->cfg.kernel_modules);
        snprintf(n.kernel_modules, sizeof(n.kernel_modules), "%s", d->cfg.kernel_modules);
        /* The socket is not a config-file key; the engine keeps its settings,
         * the socket its mode and group. */
        n.engine = d->cfg.engine;
        snprintf(n.socket_path, sizeof(n.socket_path), "%s", d->cfg.socket_path);
        n.socket_mode = d->cfg.socket_mode;
        snprintf(n.socket_group, sizeof(n.socket_group), "%s", d->cfg.socket_group);
        n.force_epoll = d->cfg.force_epoll;
        d->cfg = n;
        hbgd_set_log_level(n.log_level);
        hbgd_log_set_journal_socket(n.journal_socket);
        hbgd_log_set_ratelimit(n.log_ratelimit_interval_ms, n.log_ratelimit_burst, n.log_ratelimit_burst_per_uid);
        hbgd_log(LOG_NOTICE, "SIGHUP: reloaded %s: max_sessions %u, max_sessions_per_uid %u, "
                 "%u allowed users, %u allowed groups, %u session weights (for new sessions); "
                 "kernel modules are not reloaded",
                 d->cfg.config_path, d->cfg.limits.max_sessions, d->cfg.limits.max_sessions_per_uid,
                 d->cfg.n_allowed_uids, d->cfg.n_allowed_gids, d->cfg.n_session_weights);
        log_effective_config(d, "reload");
        spare_rings_want(d); /* the default geometry or the count may have changed */
        spare_regions_want(d);
out:
        hbgd_notify("READY=1");
        notify_status(d, clock_now_ms());
}

/* A ring stopped for a protocol error cannot be used any more: close its
 * session, so the client sees a hang-up, not silence. Whether it did. */
static bool close_if_stopped(struct conn *c) {
        struct ring_stats st;
        ring_stats(c->session->ring, &st);
        if (!st.broken)
                return false;
        char why[96];
        char eb[64];
        snprintf(why, sizeof(why), "session stopped: %s", errtext_daemon(st.error, eb, sizeof(eb)));
        conn_close(c, why);
        return true;
}

/* The engine stopped a ring (hbg_engine_config.ring_stopped). */
static void on_ring_stopped(struct io_source *src, uint32_t events, void *userdata) {
        struct hbgd *d = userdata;
        (void)src;
        (void)events;
        uint64_t v;
        ssize_t n = read(d->stopped_fd, &v, sizeof(v));
        (void)n;
        for (struct conn *c = d->conns, *next; c; c = next) {
                next = c->next;
                if (c->session)
                        close_if_stopped(c);
        }
}

/* From the thread that stopped the ring, mostly a scheduler thread: never
 * blocks (our own non-blocking eventfd, read by the io thread; a counter
 * that cannot reach its limit). */
static void ring_stopped(void *userdata) {
        struct hbgd *d = userdata;
        uint64_t one = 1;
        ssize_t n = write(d->stopped_fd, &one, sizeof(one));
        (void)n;
}

static void on_timer(struct io_source *src, uint32_t events, void *userdata) {
        struct hbgd *d = userdata;
        (void)src;
        (void)events;
        uint64_t v;
        ssize_t n = read(d->timer_fd, &v, sizeof(v));
        (void)n;
        int64_t now = clock_now_ms();
        /* The quick tick while anything here is timed or moving: a
         * connection without a session (a handshake, an hbgctl request),
         * a session's retry, graphs in flight (their ages), refusals,
         * rings still held, a trace, a shutdown. Sessions that are merely
         * open leave hbgd to the slow one. */
        bool busy = d->refusals || d->stopping || d->trace.owner;
        for (struct conn *c = d->conns, *next; c; c = next) {
                next = c->next;
                if (!c->session) {
                        busy = true;
                        continue;
                }
                if (c->deadline_ms)
                        busy = true;
                if (close_if_stopped(c))
                        continue;
                if (session_tick(c->session))
                        busy = true;
                /* the age hbgctl graphs shows (RUNTIME_LOGIC.md §12.5) */
                if (ring_note_graphs(c->session->ring, now))
                        busy = true;
        }
        conn_expire(d, now);
        refusal_expire(d, now);
        tracing_tick(d, now);
        spare_rings_tick(d, now);
        /* Rings of closed sessions whose last kernel has returned. */
        unsigned held = hbgd_collect(d);
        /* Accepting may have stopped for want of descriptors. */
        if (d->listen_src)
                io_source_again(d->loop, d->listen_src);
        systemd_tick(d);
        hbgd_log_flush_suppressed();
        if (d->stopping && !d->done) {
                if (sessions_idle(d)) {
                        finish_shutdown(d);
                } else if (now >= d->stop_deadline_ms) {
                        hbgd_log(LOG_WARNING, "grace period over: failing pending graphs");
                        finish_shutdown(d);
                }
        }
        hbgd_tick_set(d, busy || held);
}

static void on_signal(struct io_source *src, uint32_t events, void *userdata) {
        struct hbgd *d = userdata;
        (void)src;
        (void)events;
        struct signalfd_siginfo si;
        while (read(d->signal_fd, &si, sizeof(si)) == sizeof(si)) {
                if (si.ssi_signo == SIGHUP)
                        reload_config(d);
                else
                        begin_shutdown(d, si.ssi_signo == SIGTERM ? "SIGTERM" : "SIGINT");
        }
}

/* ------------------------------------------------------------ life cycle */

int hbgd_new(struct hbgd **ret, const struct hbgd_config *cfg) {
        struct hbgd *d = calloc(1, sizeof(*d));
        const char *note = NULL;
        int err;

        if (!d)
                return -ENOMEM;
        d->cfg = *cfg;
        d->listen_fd = d->signal_fd = d->timer_fd = d->stopped_fd = d->reserve_fd = -1;
        d->started_ms = clock_now_ms();
        d->cfg.engine.log = hbgd_log_engine;
        hbgd_log_set_journal_socket(cfg->journal_socket);
        hbgd_log_set_ratelimit(cfg->log_ratelimit_interval_ms, cfg->log_ratelimit_burst,
                               cfg->log_ratelimit_burst_per_uid);
        raise_fd_limit();
        if ((err = spare_regions_init(&d->regions)) < 0) {
                hbgd_log(LOG_ERR, "cannot set up the spare regions: %s", strerror(-err));
                goto fail;
        }
        if ((err = kernel_rows_pack(&d->kernel_reply)) < 0) {
                hbgd_log(LOG_ERR, "cannot pack the kernel table for the session replies: %s", strerror(-err));
                goto fail;
        }

        err = io_loop_new(&d->loop, cfg->force_epoll, &note);
        if (err < 0) {
                hbgd_log_fields(LOG_ERR, &(struct hbg_log_fields){ .err = err }, "cannot set up the event loop: %s",
                                strerror(-err));
                goto fail;
        }
        if (note)
                hbgd_log(LOG_NOTICE, "%s", note);

        err = listener_open(d);
        if (err < 0)
                goto fail; /* logged, with what to do */

        sigset_t mask;
        sigemptyset(&mask);
        sigaddset(&mask, SIGTERM);
        sigaddset(&mask, SIGINT);
        sigaddset(&mask, SIGHUP);
        d->signal_fd = signalfd(-1, &mask, SFD_CLOEXEC | SFD_NONBLOCK);
        d->timer_fd = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC | TFD_NONBLOCK);
        d->stopped_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
        if (d->signal_fd < 0 || d->timer_fd < 0 || d->stopped_fd < 0) {
                err = -errno;
                goto fail;
        }
        hbgd_tick_set(d, true);

        d->cfg.engine.ring_stopped = ring_stopped;
        d->cfg.engine.ring_stopped_userdata = d;
        err = engine_new(&d->engine, &d->cfg.engine);
        if (err < 0) {
                hbgd_log_fields(LOG_ERR, &(struct hbg_log_fields){ .err = err },
                                "cannot start the scheduler threads: %s", strerror(-err));
                goto fail;
        }
        if (sd_watchdog_enabled(0, &d->watchdog_usec) <= 0)
                d->watchdog_usec = 0;
        d->last_watchdog_ms = d->last_status_ms = clock_now_ms();
        if ((err = slow_work_new(&d->slow, d->loop)) < 0) {
                hbgd_log_fields(LOG_ERR, &(struct hbg_log_fields){ .err = err },
                                "cannot start the slow-work thread: %s", strerror(-err));
                goto fail;
        }
        spare_rings_want(d);
        spare_regions_want(d);
        if ((err = io_loop_add(d->loop, d->listen_fd, listener_on_readable, d, &d->listen_src)) < 0 ||
            (err = io_loop_add(d->loop, d->signal_fd, on_signal, d, &d->signal_src)) < 0 ||
            (err = io_loop_add(d->loop, d->timer_fd, on_timer, d, &d->timer_src)) < 0 ||
            (err = io_loop_add(d->loop, d->stopped_fd, on_ring_stopped, d, &d->stopped_src)) < 0)
                goto fail;
        *ret = d;
        return 0;
fail:
        hbgd_free(d);
        return err;
}

int hbgd_run(struct hbgd *d) {
        hbgd_log(LOG_INFO, "ready: %u scheduler thread%s, %u cluster%s, %s completion, %s, socket %s",
                 d->cfg.engine.threads, d->cfg.engine.threads == 1 ? "" : "s", d->cfg.engine.clusters,
                 d->cfg.engine.clusters == 1 ? "" : "s",
                 completion_mode_name(d->cfg.engine.completion_mode), io_loop_backend(d->loop),
                 d->listen_owned ? d->cfg.socket_path : "(activated)");
        log_effective_config(d, "start");
        /* Startup's lines are out before anyone is told hbgd is ready
         * (bounded: a log nobody reads delays startup, never stops it). */
        hbgd_log_sync(LOG_SYNC_MS);
        hbgd_notify("READY=1\nSTATUS=ready, %u threads, %s", d->cfg.engine.threads,
                   io_loop_backend(d->loop));
        if (d->watchdog_usec)
                hbgd_notify("WATCHDOG=1");
        while (!d->done) {
                int n = io_loop_run_once(d->loop, hbgd_collect_due(d));
                conn_free_dead(d);
                if (n < 0 && n != -EINTR) {
                        hbgd_log_fields(LOG_ERR, &(struct hbg_log_fields){ .err = n }, "event loop failed: %s",
                                        strerror(-n));
                        return n;
                }
        }
        return 0;
}

struct hbgd *hbgd_free(struct hbgd *d) {
        if (!d)
                return NULL;
        while (d->conns)
                conn_close(d->conns, NULL);
        conn_free_dead(d);
        /* Every connection's job was taken back with it (a running
         * pre-fault piece finishes in slow_work_free(), without its done;
         * engine_free() then lets go of the ring it held). */
        spare_rings_stop(d);
        spare_regions_stop(d);
        slow_work_free(d->slow);
        refusal_close_all(d);
        listener_close(d);
        if (d->signal_src)
                io_source_del(d->loop, d->signal_src);
        if (d->timer_src)
                io_source_del(d->loop, d->timer_src);
        if (d->stopped_src)
                io_source_del(d->loop, d->stopped_src);
        /* Joins the threads (a running kernel finishes: bounded by
         * max_task_cost) and releases every session's ring. */
        engine_free(d->engine);
        acct_free(&d->acct);
        if (d->signal_fd >= 0)
                close(d->signal_fd);
        if (d->timer_fd >= 0)
                close(d->timer_fd);
        if (d->stopped_fd >= 0)
                close(d->stopped_fd); /* after the engine: its threads write it */
        io_loop_free(d->loop);
        kernel_rows_packed_free(&d->kernel_reply);
        free(d);
        return NULL;
}
