/* SPDX-License-Identifier: MIT */
/*
 * hbgd's settings: defaults, and hbgd.conf, an INI file read strictly
 * (config.c): every key is one entry of one table; an unknown section or
 * key, a section or key given twice, text after a section's ']' and a
 * value out of range are errors. docs/OPERATIONS.md and hbgd.conf(5)
 * describe them.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "daemon/accounting.h"
#include "daemon/engine/engine.h"
#include "proto/wire.h"
#include "shm/geometry.h"

#define HBGD_MAX_ALLOWED 32
/* [kernels] modules: at most this many, this long altogether. */
#define HBGD_MAX_KERNEL_MODULES 32
#define HBGD_KERNEL_MODULES_LEN 1024

struct hbgd_config {
        char socket_path[108];
        char config_path[4096];   /* --config FILE, re-read on SIGHUP; "" = none */
        struct hbg_engine_config engine;
        struct hbg_geometry_request session_default; /* used for zero request fields */
        unsigned spare_rings;     /* [session] spare_rings: rings' arrays faulted in ahead (spare_rings.c) */
        unsigned spare_rings_burst;   /* [session] spare_rings_burst: more of them after a burst */
        unsigned spare_rings_burst_s; /* [session] spare_rings_burst_s: for that long */
        unsigned spare_regions;   /* [session] spare_regions: regions and channels made ahead (spare_regions.c) */
        uint64_t max_task_window;
        uint64_t max_heap_size;
        uint64_t max_recorded_tasks; /* per session, all its recorded graphs */
        uint64_t max_stall_timeout_ms; /* the largest stall limit a session may ask for */
        struct hbgd_limits limits; /* connections, sessions, memory */
        unsigned handshake_timeout_ms; /* a connection without a session must send a
                                          complete request at least this often */
        unsigned requests_per_turn;    /* records read from one connection before the
                                          others get their turn */
        uint64_t max_message;
        uid_t allowed_uids[HBGD_MAX_ALLOWED];
        unsigned n_allowed_uids;
        gid_t allowed_gids[HBGD_MAX_ALLOWED];
        unsigned n_allowed_gids;   /* no uid and no gid listed: everyone may connect */
        /* [access] visibility, admin_groups, monitor_groups (docs/SECURITY.md,
         * "Who sees what"): with visibility own a peer sees its own sessions
         * and graphs and the daemon-wide totals; root and admin_groups see
         * and act on everything; monitor_groups query status and metrics as
         * an admin sees them but open no session. */
        bool visibility_all;
        struct hbgd_gids {
                gid_t gids[HBGD_MAX_ALLOWED];
                unsigned n;
        } admin_groups, monitor_groups;
        /* Fair-share weights of users ([scheduler] session_weights), each
         * shared by all the user's sessions; users not listed have weight 1. */
        struct hbgd_session_weight {
                uid_t uid;
                unsigned weight;
        } session_weights[HBGD_MAX_ALLOWED];
        unsigned n_session_weights;
        unsigned shutdown_grace_ms;
        int log_level;             /* syslog priority: lines above it are dropped */
        char journal_socket[108];  /* [log] journal_socket: the journal's native
                                      protocol on this socket; "" = default */
        /* [log] ratelimit_*: lines about one session, and refusals, logged
         * per interval at most (0: no limit); lines about all sessions of
         * one uid (root's excepted) */
        unsigned log_ratelimit_interval_ms, log_ratelimit_burst, log_ratelimit_burst_per_uid;
        /* [socket] mode and group: applied to the socket hbgd binds
         * itself (not to one systemd passes); group "" keeps hbgd's own,
         * a group that does not exist is warned about (listener.c). */
        unsigned socket_mode;
        char socket_group[64];
        /* [kernels] modules: absolute paths of kernel modules, separated
         * by single spaces, loaded once at start (daemon/kernel_modules.h;
         * SIGHUP loads nothing); "" = none. */
        char kernel_modules[HBGD_KERNEL_MODULES_LEN];
        bool force_epoll;
};

void hbgd_config_default(struct hbgd_config *ret);
/* The fair-share weight of uid (all its sessions together): its
 * session_weights entry, or 1. */
unsigned hbgd_config_session_weight(const struct hbgd_config *cfg, uid_t uid);
/* The housekeeping tick's slow period in ms (tick.c), not a key of the
 * file. Out of line, in another object than its caller, so that the test
 * build tests/hbgd-hooks can wrap it (HBGD_TEST_IDLE_TICK_MS). */
unsigned hbgd_config_idle_tick_ms(void);

/* Apply the file at `path` on top of *cfg. Returns 0, or -EINVAL with
 * every problem of the file in err, one a line ("FILE:LINE: message", in
 * file order; checks of the settings as a whole "FILE: [section] ..."; a
 * last line says how many did not fit), or -errno when the file cannot be
 * read ("FILE: reason"). Nothing is applied when it fails. */
int hbgd_config_load(struct hbgd_config *cfg, const char *path, char *err, size_t errlen);

/* The table of keys, for tests and documentation checks. */
struct hbgd_config_key {
        const char *section;
        const char *key;
};
/* hbgd_config_key_at(), hbgd_config_format(): config_keys.h. */
