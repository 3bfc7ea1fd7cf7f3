/* SPDX-License-Identifier: MIT */
/* hbgd.conf's keys (daemon/config_keys.h): the table, and a setting said
 * back in the file's words. */
#include "daemon/config_keys.h"

#include <errno.h>
#include <grp.h>
#include <pwd.h>
#include <stdio.h>
#include <string.h>

#include "daemon/engine/engine.h"
#include "daemon/engine/engine_spares.h"
#include "daemon/spare_regions.h"
#include "daemon/engine/engine_trace.h"
#include "proto/wire.h"

#define NUM(sec, k, field, lo, hi)                                                            \
        { { sec, k }, KEY_NUMBER, offsetof(struct hbgd_config, field),                        \
          sizeof(((struct hbgd_config *)0)->field), lo, hi }

const struct config_key config_keys[] = {
        NUM("scheduler", "threads", engine.threads, 1, HBG_ENGINE_MAX_THREADS),
        NUM("scheduler", "clusters", engine.clusters, 1, HBG_ENGINE_MAX_CLUSTERS),
        { { "scheduler", "spin_before_park_us" }, KEY_US_AS_NS,
          offsetof(struct hbgd_config, engine.spin_before_park_ns), sizeof(uint64_t), 0, 1000000 },
        NUM("scheduler", "max_spinning_threads", engine.max_spinning_threads, 0, HBG_ENGINE_MAX_THREADS),
        NUM("scheduler", "max_awake_threads", engine.max_awake_threads, 0, HBG_ENGINE_MAX_THREADS),
        NUM("scheduler", "move_off_shared_cpu", engine.move_off_shared_cpu, 0, 1),
        NUM("scheduler", "stall_timeout_ms", engine.stall_timeout_ms, 0, UINT64_C(86400000)),
        { { "scheduler", "completion_mode" }, KEY_COMPLETION, 0, 0, 0, 0 },
        { { "scheduler", "session_weights" }, KEY_WEIGHTS, 0, 0, 0, 0 },
        NUM("session", "task_window", session_default.task_window, 0, HBG_TASK_WINDOW_MAX),
        NUM("session", "flag_window", session_default.flag_window, 0, HBG_TASK_WINDOW_MAX),
        NUM("session", "heap_size", session_default.heap_size, 0, HBG_HEAP_MAX),
        NUM("session", "mailbox_entries", session_default.mailbox_entries, 0, HBG_MAILBOX_MAX),
        NUM("session", "graph_table_entries", session_default.graph_table_entries, 0, HBG_GRAPH_TABLE_MAX),
        NUM("session", "spare_rings", spare_rings, 0, HBG_ENGINE_MAX_SPARE_RINGS),
        NUM("session", "spare_rings_burst", spare_rings_burst, 0, HBG_ENGINE_MAX_SPARE_RINGS),
        NUM("session", "spare_rings_burst_s", spare_rings_burst_s, 1, 86400),
        NUM("session", "spare_regions", spare_regions, 0, SPARE_REGIONS_MAX),
        NUM("limits", "max_connections", limits.max_connections, 1, 1000000),
        NUM("limits", "max_connections_per_uid", limits.max_connections_per_uid, 1, 1000000),
        NUM("limits", "max_sessions", limits.max_sessions, 0, 65536),
        NUM("limits", "max_sessions_per_uid", limits.max_sessions_per_uid, 0, 65536),
        NUM("limits", "max_memory", limits.max_memory, 0, UINT64_C(1) << 50),
        NUM("limits", "max_memory_per_uid", limits.max_memory_per_uid, 0, UINT64_C(1) << 50),
        NUM("limits", "max_task_window", max_task_window, 0, HBG_TASK_WINDOW_MAX),
        NUM("limits", "max_heap_size", max_heap_size, 0, HBG_HEAP_MAX),
        NUM("limits", "max_message_size", max_message, 0, UINT64_C(16) << 20),
        NUM("limits", "handshake_timeout_ms", handshake_timeout_ms, 100, 3600000),
        NUM("limits", "requests_per_turn", requests_per_turn, 1, 4096),
        NUM("limits", "max_threads_per_session", engine.max_threads_per_share, 0, HBG_ENGINE_MAX_THREADS),
        NUM("limits", "max_task_cost", engine.max_task_cost, 0, UINT64_MAX),
        NUM("limits", "kernel_time_budget_ms", engine.kernel_time_budget_ms, 1, HBG_ENGINE_MAX_KERNEL_BUDGET_MS),
        NUM("limits", "max_recorded_graphs", engine.max_recorded_graphs, 0, HBG_ENGINE_MAX_RECORDED),
        NUM("limits", "max_recorded_tasks", max_recorded_tasks, 0, UINT64_C(1) << 24),
        NUM("limits", "max_stall_timeout_ms", max_stall_timeout_ms, 0, UINT64_C(86400000)),
        NUM("limits", "shutdown_grace_ms", shutdown_grace_ms, 0, UINT64_C(3600000)),
        { { "access", "allowed_users" }, KEY_USERS, 0, 0, 0, 0 },
        { { "access", "allowed_groups" }, KEY_GROUPS, 0, 0, 0, 0 },
        { { "access", "visibility" }, KEY_VISIBILITY, 0, 0, 0, 0 },
        { { "access", "admin_groups" }, KEY_GROUP_LIST, offsetof(struct hbgd_config, admin_groups), 0, 0, 0 },
        { { "access", "monitor_groups" }, KEY_GROUP_LIST, offsetof(struct hbgd_config, monitor_groups), 0, 0, 0 },
        { { "log", "level" }, KEY_LOG_LEVEL, 0, 0, 0, 0 },
        { { "log", "journal_socket" }, KEY_SOCKET_PATH, offsetof(struct hbgd_config, journal_socket),
          sizeof(((struct hbgd_config *)0)->journal_socket), 0, 0 },
        NUM("log", "ratelimit_interval_ms", log_ratelimit_interval_ms, 0, 3600000),
        NUM("log", "ratelimit_burst", log_ratelimit_burst, 1, 1000000),
        NUM("log", "ratelimit_burst_per_uid", log_ratelimit_burst_per_uid, 1, 1000000),
        { { "socket", "mode" }, KEY_MODE, offsetof(struct hbgd_config, socket_mode), sizeof(unsigned), 0, 0777 },
        { { "socket", "group" }, KEY_NAME, offsetof(struct hbgd_config, socket_group),
          sizeof(((struct hbgd_config *)0)->socket_group), 0, 0 },
        NUM("trace", "thread_events", engine.trace_thread_events, HBG_TRACE_THREAD_EVENTS_MIN,
            HBG_TRACE_THREAD_EVENTS_MAX),
        { { "kernels", "modules" }, KEY_PATHS, offsetof(struct hbgd_config, kernel_modules),
          sizeof(((struct hbgd_config *)0)->kernel_modules), 0, HBGD_MAX_KERNEL_MODULES },
};
const size_t config_n_keys = sizeof(config_keys) / sizeof(config_keys[0]);
_Static_assert(sizeof(config_keys) / sizeof(config_keys[0]) <= CONFIG_KEYS_MAX, "CONFIG_KEYS_MAX holds the table");

const struct hbgd_config_key *hbgd_config_key_at(size_t i) {
        return i < config_n_keys ? &config_keys[i].name : NULL;
}

/* "a, b": names where the system knows them, else the numbers. */
static void format_ids(char *buf, size_t len, const unsigned *ids, unsigned n, bool groups) {
        size_t used = 0;
        buf[0] = 0;
        for (unsigned i = 0; i < n && used < len; i++) {
                const char *name = NULL;
                if (groups) {
                        struct group *g = getgrgid((gid_t)ids[i]);
                        name = g ? g->gr_name : NULL;
                } else {
                        struct passwd *pw = getpwuid((uid_t)ids[i]);
                        name = pw ? pw->pw_name : NULL;
                }
                int k = name ? snprintf(buf + used, len - used, "%s%s", i ? ", " : "", name)
                             : snprintf(buf + used, len - used, "%s%u", i ? ", " : "", ids[i]);
                used += k > 0 ? (size_t)k : 0;
        }
}

int hbgd_config_format(const struct hbgd_config *cfg, size_t i, char *buf, size_t len) {
        static const char *const levels[] = { "emerg", "alert", "crit", "err", "warning", "notice", "info", "debug" };
        if (i >= config_n_keys || len == 0)
                return -EINVAL;
        const struct config_key *k = &config_keys[i];
        const char *field = (const char *)cfg + k->offset;
        uint64_t v = 0;
        unsigned ids[HBGD_MAX_ALLOWED];
        switch (k->type) {
        case KEY_NUMBER:
        case KEY_US_AS_NS:
                if (k->width == sizeof(uint64_t)) {
                        memcpy(&v, field, sizeof(v));
                } else {
                        unsigned u;
                        memcpy(&u, field, sizeof(u));
                        v = u;
                }
                snprintf(buf, len, "%llu", (unsigned long long)(k->type == KEY_US_AS_NS ? v / 1000 : v));
                break;
        case KEY_USERS:
                for (unsigned j = 0; j < cfg->n_allowed_uids && j < HBGD_MAX_ALLOWED; j++)
                        ids[j] = (unsigned)cfg->allowed_uids[j];
                format_ids(buf, len, ids, cfg->n_allowed_uids, false);
                break;
        case KEY_GROUPS:
                for (unsigned j = 0; j < cfg->n_allowed_gids && j < HBGD_MAX_ALLOWED; j++)
                        ids[j] = (unsigned)cfg->allowed_gids[j];
                format_ids(buf, len, ids, cfg->n_allowed_gids, true);
                break;
        case KEY_GROUP_LIST: {
                const struct hbgd_gids *g = (const struct hbgd_gids *)field;
                for (unsigned j = 0; j < g->n && j < HBGD_MAX_ALLOWED; j++)
                        ids[j] = (unsigned)g->gids[j];
                format_ids(buf, len, ids, g->n, true);
                break;
        }
        case KEY_VISIBILITY:
                snprintf(buf, len, "%s", cfg->visibility_all ? "all" : "own");
                break;
        case KEY_WEIGHTS: {
                size_t used = 0;
                buf[0] = 0;
                for (unsigned j = 0; j < cfg->n_session_weights && j < HBGD_MAX_ALLOWED && used < len; j++) {
                        char who[64];
                        unsigned uid = (unsigned)cfg->session_weights[j].uid;
                        format_ids(who, sizeof(who), &uid, 1, false);
                        int n = snprintf(buf + used, len - used, "%s%s:%u", j ? ", " : "", who,
                                         cfg->session_weights[j].weight);
                        used += n > 0 ? (size_t)n : 0;
                }
                break;
        }
        case KEY_LOG_LEVEL:
                snprintf(buf, len, "%s", cfg->log_level >= 0 && cfg->log_level < 8 ? levels[cfg->log_level] : "?");
                break;
        case KEY_COMPLETION: {
                const char *m = completion_mode_name(cfg->engine.completion_mode);
                snprintf(buf, len, "%s", m ? m : "?");
                break;
        }
        case KEY_SOCKET_PATH:
        case KEY_NAME:
        case KEY_PATHS:
                snprintf(buf, len, "%.*s", (int)k->width, field);
                break;
        case KEY_MODE: {
                unsigned m;
                memcpy(&m, field, sizeof(m));
                snprintf(buf, len, "%04o", m);
                break;
        }
        }
        return 0;
}
