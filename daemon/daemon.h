/* SPDX-License-Identifier: MIT */
/*
 * hbgd's io side: the listening socket, client connections and their
 * sessions, doorbells, signals and shutdown. Everything here runs on the
 * io thread; the scheduler threads live in the engine (daemon/engine.h).
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "daemon/engine.h"
#include "shm/geometry.h"

#define HBGD_DEFAULT_SOCKET "/run/hbgd/hbgd.sock"
#define HBGD_MAX_ALLOWED 32

struct hbgd_config {
        char socket_path[108];
        char config_path[4096];   /* --config FILE, re-read on SIGHUP; "" = none */
        struct hbg_engine_config engine;
        struct hbg_geometry_request session_default; /* used for zero request fields */
        uint64_t max_task_window;
        uint64_t max_heap_size;
        unsigned max_sessions;
        unsigned max_sessions_per_uid;
        size_t max_message;
        uid_t allowed_uids[HBGD_MAX_ALLOWED];
        unsigned n_allowed_uids;
        gid_t allowed_gids[HBGD_MAX_ALLOWED];
        unsigned n_allowed_gids;   /* no uid and no gid listed: everyone may connect */
        unsigned shutdown_grace_ms;
        int log_level;             /* syslog priority: lines above it are dropped */
        bool force_epoll;
};

void hbgd_config_default(struct hbgd_config *ret);

struct hbgd;

/* Set up (engine threads, io loop, socket: the activated one if any, else
 * bind config->socket_path). Signals SIGTERM/SIGINT/SIGHUP must already be
 * blocked in the calling thread. */
int hbgd_new(struct hbgd **ret, const struct hbgd_config *cfg);
/* Serve until SIGTERM/SIGINT and the shutdown that follows. 0 or -errno. */
int hbgd_run(struct hbgd *d);
struct hbgd *hbgd_free(struct hbgd *d);

void hbgd_log(int priority, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Drop log lines less important than `priority` (LOG_ERR .. LOG_DEBUG). */
void hbgd_set_log_level(int priority);
