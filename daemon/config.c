/* SPDX-License-Identifier: MIT */
/* hbgd's settings (daemon/config.h): one table of keys. */
#include "daemon/config.h"

#include <ctype.h>
#include <errno.h>
#include <grp.h>
#include <pwd.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <syslog.h>

#include "daemon/engine/engine_spares.h"
#include "daemon/engine/engine_trace.h"
#include "daemon/engine/fair_share.h"
#include "proto/wire.h"

void hbgd_config_default(struct hbgd_config *ret) {
        memset(ret, 0, sizeof(*ret));
        snprintf(ret->socket_path, sizeof(ret->socket_path), "%s", HBG_DEFAULT_SOCKET);
        engine_config_default(&ret->engine);
        geometry_request_default(&ret->session_default);
        ret->spare_rings = 1;
        ret->spare_rings_burst = 8;
        ret->spare_rings_burst_s = 60;
        ret->max_task_window = UINT64_C(1) << 20;
        ret->max_recorded_tasks = UINT64_C(1) << 16;
        ret->max_heap_size = UINT64_C(1) << 30;
        ret->max_stall_timeout_ms = 600000;
        ret->limits = (struct hbgd_limits){
                .max_connections = 1024,
                .max_connections_per_uid = 64,
                .max_sessions = 64,
                .max_sessions_per_uid = 16,
                .max_memory = 0,          /* half of RAM */
                .max_memory_per_uid = 0,  /* a quarter of RAM */
        };
        ret->handshake_timeout_ms = 10000;
        ret->requests_per_turn = 16;
        ret->max_message = HBG_WIRE_MAX_MSG_DEFAULT;
        ret->shutdown_grace_ms = 5000;
        ret->log_level = LOG_INFO;
        ret->log_ratelimit_interval_ms = 10000;
        ret->log_ratelimit_burst = 10;
        ret->log_ratelimit_burst_per_uid = 50;
        /* As systemd/hbgd.socket's SocketMode= and SocketGroup=. */
        ret->socket_mode = 0660;
        snprintf(ret->socket_group, sizeof(ret->socket_group), "%s", "hbg");
}

/* ------------------------------------------------------------ the table */

enum key_type {
        KEY_NUMBER,      /* decimal, optional K/M/G suffix (powers of 1024) */
        KEY_US_AS_NS,    /* microseconds in the file, nanoseconds in the field */
        KEY_USERS,       /* names or uids */
        KEY_WEIGHTS,     /* user:weight pairs */
        KEY_GROUPS,      /* names or gids */
        KEY_LOG_LEVEL,   /* emerg .. debug */
        KEY_COMPLETION,  /* completion_mode_list() */
        KEY_SOCKET_PATH, /* an absolute AF_UNIX socket path (a char array field) */
        KEY_MODE,        /* permission bits in octal, 0 .. 0777 */
        KEY_NAME,        /* a user or group name or number, not looked up (a char array field) */
        KEY_GROUP_LIST,  /* names or gids into a struct hbgd_gids field */
        KEY_VISIBILITY,  /* own, all */
        KEY_PATHS,       /* absolute paths separated by spaces (a char array field) */
};

struct key {
        struct hbgd_config_key name;
        enum key_type type;
        size_t offset;   /* in struct hbgd_config */
        size_t width;    /* bytes of the field (numbers) */
        uint64_t min, max;
};

#define NUM(sec, k, field, lo, hi)                                                            \
        { { sec, k }, KEY_NUMBER, offsetof(struct hbgd_config, field),                        \
          sizeof(((struct hbgd_config *)0)->field), lo, hi }

static const struct key keys[] = {
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
#define N_KEYS (sizeof(keys) / sizeof(keys[0]))

const struct hbgd_config_key *hbgd_config_key_at(size_t i) {
        return i < N_KEYS ? &keys[i].name : NULL;
}

/* ------------------------------------------------------------ values */

/* One file being read: the settings so far, the message of the value
 * just refused, and every problem found (load_error()). */
struct load {
        struct hbgd_config cfg;
        char msg[200];
        const char *path;
        unsigned line;
        char *err;                     /* the caller's: one problem a line */
        size_t errlen, used;
        unsigned errors, left_out;     /* found; found but not in err (no room) */
        /* The line each key and each section was given on (0: not yet):
         * a second one is an error. A section is known by its first key. */
        unsigned key_line[N_KEYS];
        unsigned section_line[N_KEYS];
        int section;                   /* index of the section's first key; -1: none, -2: unknown */
};

/* The end of err keeps this much for the "and N more" line. */
#define ERR_TAIL 64

/* A size with an optional K/M/G suffix (powers of 1024). */
static bool parse_size(const char *s, uint64_t min, uint64_t max, uint64_t *ret) {
        char *end;
        errno = 0;
        unsigned long long v = strtoull(s, &end, 10);
        if (errno || end == s || *s == '-')
                return false;
        unsigned shift = 0;
        if (*end == 'K' || *end == 'k')
                shift = 10, end++;
        else if (*end == 'M' || *end == 'm')
                shift = 20, end++;
        else if (*end == 'G' || *end == 'g')
                shift = 30, end++;
        if (*end)
                return false;
        if (shift && v > (UINT64_MAX >> shift))
                return false;
        v <<= shift;
        if (v < min || v > max)
                return false;
        *ret = v;
        return true;
}

static void store(struct hbgd_config *c, const struct key *k, uint64_t v) {
        char *field = (char *)c + k->offset;
        if (k->width == sizeof(uint64_t)) {
                memcpy(field, &v, sizeof(v));
        } else {
                unsigned u = (unsigned)v; /* max fits: the table says so */
                memcpy(field, &u, sizeof(u));
        }
}

/* A user (group) given by number or name: its id, or false and the
 * message. A number is taken as it is, whether or not it has a name. */
static bool lookup_id(struct load *l, const char *tok, bool group, unsigned long *ret) {
        char *end;
        errno = 0;
        unsigned long id = strtoul(tok, &end, 10);
        if (*end == 0 && end != tok && errno == 0 && *tok != '-' && id <= UINT32_MAX - 1) {
                *ret = id;
                return true;
        }
        if (group) {
                struct group *g = getgrnam(tok);
                if (g)
                        *ret = g->gr_gid;
                else
                        snprintf(l->msg, sizeof(l->msg), "unknown group '%s'", tok);
                return g != NULL;
        }
        struct passwd *p = getpwnam(tok);
        if (p)
                *ret = p->pw_uid;
        else
                snprintf(l->msg, sizeof(l->msg), "unknown user '%s'", tok);
        return p != NULL;
}

/* A list of users or groups into ids[] (HBGD_MAX_ALLOWED), *ret_n. */
static bool parse_id_list(struct load *l, const char *value, bool groups, uint32_t *ids, unsigned *ret_n) {
        char buf[512];
        if (snprintf(buf, sizeof(buf), "%s", value) >= (int)sizeof(buf)) {
                snprintf(l->msg, sizeof(l->msg), "%s: longer than %zu characters",
                         groups ? "allowed_groups" : "allowed_users", sizeof(buf) - 1);
                return false;
        }
        unsigned n = 0;
        for (char *save = NULL, *tok = strtok_r(buf, " ,", &save); tok; tok = strtok_r(NULL, " ,", &save)) {
                if (n == HBGD_MAX_ALLOWED) {
                        snprintf(l->msg, sizeof(l->msg), "more than %u entries", HBGD_MAX_ALLOWED);
                        return false;
                }
                unsigned long id;
                if (!lookup_id(l, tok, groups, &id))
                        return false;
                ids[n++] = (uint32_t)id;
        }
        *ret_n = n;
        return true;
}

_Static_assert(sizeof(uid_t) == sizeof(uint32_t) && sizeof(gid_t) == sizeof(uint32_t), "ids are 32 bits");

static bool parse_ids(struct load *l, const char *value, bool groups) {
        if (groups)
                return parse_id_list(l, value, true, (uint32_t *)l->cfg.allowed_gids, &l->cfg.n_allowed_gids);
        return parse_id_list(l, value, false, (uint32_t *)l->cfg.allowed_uids, &l->cfg.n_allowed_uids);
}

/* "alice:4 bob:2 1001:3": user names or uids, weights 1..100. */
static bool parse_weights(struct load *l, const char *value) {
        char buf[512];
        if (snprintf(buf, sizeof(buf), "%s", value) >= (int)sizeof(buf)) {
                snprintf(l->msg, sizeof(l->msg), "session_weights: longer than %zu characters", sizeof(buf) - 1);
                return false;
        }
        unsigned n = 0;
        for (char *save = NULL, *tok = strtok_r(buf, " ,", &save); tok; tok = strtok_r(NULL, " ,", &save)) {
                if (n == HBGD_MAX_ALLOWED) {
                        snprintf(l->msg, sizeof(l->msg), "session_weights: more than %u entries", HBGD_MAX_ALLOWED);
                        return false;
                }
                char *colon = strrchr(tok, ':');
                uint64_t w;
                if (!colon || colon == tok ||
                    !parse_size(colon + 1, 1, HBG_FAIR_SHARE_WEIGHT_MAX, &w) || !isdigit((unsigned char)colon[1])) {
                        snprintf(l->msg, sizeof(l->msg),
                                 "session_weights: '%s' is not USER:WEIGHT with a weight from 1 to %u", tok,
                                 HBG_FAIR_SHARE_WEIGHT_MAX);
                        return false;
                }
                *colon = 0;
                unsigned long id;
                if (!lookup_id(l, tok, false, &id))
                        return false;
                uid_t uid = (uid_t)id;
                for (unsigned i = 0; i < n; i++)
                        if (l->cfg.session_weights[i].uid == uid) {
                                snprintf(l->msg, sizeof(l->msg), "session_weights: user '%s' given twice", tok);
                                return false;
                        }
                l->cfg.session_weights[n++] = (struct hbgd_session_weight){ uid, (unsigned)w };
        }
        l->cfg.n_session_weights = n;
        return true;
}

unsigned hbgd_config_session_weight(const struct hbgd_config *cfg, uid_t uid) {
        for (unsigned i = 0; i < cfg->n_session_weights && i < HBGD_MAX_ALLOWED; i++)
                if (cfg->session_weights[i].uid == uid)
                        return cfg->session_weights[i].weight;
        return HBG_FAIR_SHARE_WEIGHT_DEFAULT;
}

static bool parse_level(struct load *l, const char *value) {
        static const char *const names[] = { "emerg", "alert", "crit", "err",
                                             "warning", "notice", "info", "debug" };
        for (int i = 0; i < 8; i++)
                if (strcasecmp(value, names[i]) == 0) {
                        l->cfg.log_level = i;
                        return true;
                }
        snprintf(l->msg, sizeof(l->msg),
                 "level: '%s' is not one of emerg alert crit err warning notice info debug", value);
        return false;
}

/* "PATH PATH ...": absolute, each once, at most k->max of them, into the
 * field with single spaces. Whether each is a module hbgd may load is the
 * loader's check (daemon/kernel_modules.c), at start and --check-config. */
static bool parse_paths(struct load *l, const struct key *k, const char *value) {
        const char *name = k->name.key;
        char buf[HBGD_KERNEL_MODULES_LEN], out[HBGD_KERNEL_MODULES_LEN] = "";
        if (snprintf(buf, sizeof(buf), "%s", value) >= (int)sizeof(buf) || strlen(value) >= k->width) {
                snprintf(l->msg, sizeof(l->msg), "%s: longer than %zu characters", name, k->width - 1);
                return false;
        }
        size_t used = 0;
        unsigned n = 0;
        for (char *save = NULL, *tok = strtok_r(buf, " \t", &save); tok; tok = strtok_r(NULL, " \t", &save)) {
                if (tok[0] != '/') {
                        snprintf(l->msg, sizeof(l->msg), "%s: '%.100s' is not an absolute path", name, tok);
                        return false;
                }
                if (++n > k->max) {
                        snprintf(l->msg, sizeof(l->msg), "%s: more than %llu paths", name,
                                 (unsigned long long)k->max);
                        return false;
                }
                for (const char *p = out; *p;) {
                        size_t len = strcspn(p, " ");
                        if (len == strlen(tok) && strncmp(p, tok, len) == 0) {
                                snprintf(l->msg, sizeof(l->msg), "%s: '%.100s' given twice", name, tok);
                                return false;
                        }
                        p += len + (p[len] == ' ');
                }
                used += (size_t)snprintf(out + used, sizeof(out) - used, "%s%s", used ? " " : "", tok);
        }
        snprintf((char *)&l->cfg + k->offset, k->width, "%s", out);
        return true;
}

/* Parse value for key k into l->cfg: true, or false with l->msg. */
static bool apply_value(struct load *l, const struct key *k, const char *value) {
        const char *name = k->name.key;
        uint64_t v;
        switch (k->type) {
        case KEY_NUMBER:
        case KEY_US_AS_NS:
                if (!parse_size(value, k->min, k->max, &v)) {
                        snprintf(l->msg, sizeof(l->msg), "%s: '%s' is not a number from %llu to %llu", name,
                                 value, (unsigned long long)k->min, (unsigned long long)k->max);
                        return false;
                }
                store(&l->cfg, k, k->type == KEY_US_AS_NS ? v * 1000 : v);
                return true;
        case KEY_USERS:
        case KEY_GROUPS:
                return parse_ids(l, value, k->type == KEY_GROUPS);
        case KEY_WEIGHTS:
                return parse_weights(l, value);
        case KEY_LOG_LEVEL:
                return parse_level(l, value);
        case KEY_SOCKET_PATH:
                /* Empty: the default. A socket path must fit sun_path. */
                if ((value[0] && value[0] != '/') || strlen(value) >= k->width) {
                        snprintf(l->msg, sizeof(l->msg), "%s: '%s' is not an absolute path shorter than %zu bytes",
                                 name, value, k->width);
                        return false;
                }
                snprintf((char *)&l->cfg + k->offset, k->width, "%s", value);
                return true;
        case KEY_MODE: {
                char *end;
                errno = 0;
                unsigned long m = strtoul(value, &end, 8);
                if (errno || end == value || *end || !isdigit((unsigned char)value[0]) || m > k->max) {
                        snprintf(l->msg, sizeof(l->msg), "%s: '%s' is not an octal mode from 0 to %04llo", name,
                                 value, (unsigned long long)k->max);
                        return false;
                }
                store(&l->cfg, k, m);
                return true;
        }
        case KEY_NAME:
                /* Looked up when used: a group created later still counts. */
                for (const char *c = value; *c; c++)
                        if (isspace((unsigned char)*c) || *c == ':' || *c == ',') {
                                snprintf(l->msg, sizeof(l->msg), "%s: '%s' is not one name", name, value);
                                return false;
                        }
                if (strlen(value) >= k->width) {
                        snprintf(l->msg, sizeof(l->msg), "%s: '%s' is longer than %zu characters", name, value,
                                 k->width - 1);
                        return false;
                }
                snprintf((char *)&l->cfg + k->offset, k->width, "%s", value);
                return true;
                return true;
        case KEY_GROUP_LIST: {
                struct hbgd_gids *g = (struct hbgd_gids *)((char *)&l->cfg + k->offset);
                return parse_id_list(l, value, true, (uint32_t *)g->gids, &g->n);
        }
        case KEY_VISIBILITY:
                if (strcmp(value, "own") != 0 && strcmp(value, "all") != 0) {
                        snprintf(l->msg, sizeof(l->msg), "visibility: '%s' is not one of own, all", value);
                        return false;
                }
                l->cfg.visibility_all = strcmp(value, "all") == 0;
                return true;
        case KEY_PATHS:
                return parse_paths(l, k, value);
        case KEY_COMPLETION:
                if (completion_mode_parse(value, &l->cfg.engine.completion_mode) < 0) {
                        snprintf(l->msg, sizeof(l->msg),
                                 "completion_mode: '%s' is not one of %s", value, completion_mode_list());
                        return false;
                }
                return true;
        }
        snprintf(l->msg, sizeof(l->msg), "%s: no parser for this key", name);
        return false;
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
        if (i >= N_KEYS || len == 0)
                return -EINVAL;
        const struct key *k = &keys[i];
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

/* ------------------------------------------------------------ the file */

/* Report one problem: "FILE:LINE: message" (line 0: "FILE: message"),
 * one a line in l->err, as many as fit. */
static void load_error(struct load *l, unsigned line, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void load_error(struct load *l, unsigned line, const char *fmt, ...) {
        char msg[400], full[600];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(msg, sizeof(msg), fmt, ap);
        va_end(ap);
        if (line)
                snprintf(full, sizeof(full), "%s:%u: %s", l->path, line, msg);
        else
                snprintf(full, sizeof(full), "%s: %s", l->path, msg);
        l->errors++;
        size_t n = strlen(full) + (l->used ? 1 : 0);
        if (l->left_out || l->errlen < ERR_TAIL || l->used + n >= l->errlen - ERR_TAIL) {
                l->left_out++;
                return;
        }
        snprintf(l->err + l->used, l->errlen - l->used, "%s%s", l->used ? "\n" : "", full);
        l->used += n;
}

static char *strip(char *s) {
        while (isspace((unsigned char)*s))
                s++;
        char *e = s + strlen(s);
        while (e > s && isspace((unsigned char)e[-1]))
                *--e = 0;
        return s;
}

/* A comment after a value or a section header: ';' or '#' after a space. */
static void cut_comment(char *s) {
        for (char *p = s; *p; p++)
                if ((*p == ';' || *p == '#') && (p == s || isspace((unsigned char)p[-1]))) {
                        *p = 0;
                        return;
                }
}

/* The line key was given on, 0 if none. */
static unsigned key_line(const struct load *l, const char *section, const char *key) {
        for (size_t i = 0; i < N_KEYS; i++)
                if (strcmp(keys[i].name.section, section) == 0 && strcmp(keys[i].name.key, key) == 0)
                        return l->key_line[i];
        return 0;
}

/* An error of the settings together (the engine's or the geometry's rule,
 * "KEY: why" or "KEY VALUE: why"): at the line of the key it names when
 * the file sets it, else the section's name says where. */
static void whole_error(struct load *l, const char *section, const char *why) {
        char key[64];
        size_t n = strcspn(why, ": ");
        snprintf(key, sizeof(key), "%.*s", (int)(n < sizeof(key) ? n : sizeof(key) - 1), why);
        unsigned at = key_line(l, section, key);
        load_error(l, at, "%s%s%s%s", at ? "" : "[", at ? "" : section, at ? "" : "] ", why);
}

static int section_index(const char *name) {
        for (size_t i = 0; i < N_KEYS; i++)
                if (strcmp(keys[i].name.section, name) == 0)
                        return (int)i;
        return -1;
}

/* "scheduler, session, ...": every section, in the table's order. */
static void section_names(char *buf, size_t len) {
        size_t used = 0;
        buf[0] = 0;
        for (size_t i = 0; i < N_KEYS && used < len; i++) {
                if (section_index(keys[i].name.section) != (int)i)
                        continue;
                int n = snprintf(buf + used, len - used, "%s%s", used ? ", " : "", keys[i].name.section);
                used += n > 0 ? (size_t)n : 0;
        }
}

/* "[name]", with nothing after it but a comment. */
static void read_section(struct load *l, char *s) {
        char *close = strchr(s, ']');
        if (!close) {
                load_error(l, l->line, "'%s': a section header needs a closing ']'", s);
                l->section = -2;
                return;
        }
        *close = 0;
        char *rest = close + 1;
        cut_comment(rest);
        rest = strip(rest);
        char *name = strip(s + 1);
        if (*rest) {
                load_error(l, l->line, "text after ']' in the header of section [%s]: '%s'", name, rest);
                l->section = -2;
                return;
        }
        int i = section_index(name);
        if (i < 0) {
                char all[160];
                section_names(all, sizeof(all));
                load_error(l, l->line, "unknown section [%s] (the sections are %s)", name, all);
                l->section = -2;
                return;
        }
        if (l->section_line[i]) {
                load_error(l, l->line, "section [%s] given again (first on line %u); a file has each section once",
                           name, l->section_line[i]);
                l->section = -2;
                return;
        }
        l->section_line[i] = l->line;
        l->section = i;
}

/* "key = value" in the current section. */
static void read_key(struct load *l, char *s) {
        char *eq = strchr(s, '=');
        if (!eq) {
                load_error(l, l->line, "'%s' is not KEY = VALUE", s);
                return;
        }
        *eq = 0;
        char *name = strip(s), *value = eq + 1;
        cut_comment(value);
        value = strip(value);
        if (!*name) {
                load_error(l, l->line, "no key before '='");
                return;
        }
        if (l->section == -2) /* the header's error was reported, not each of its keys */
                return;
        if (l->section == -1) {
                load_error(l, l->line, "key '%s' before any [section]", name);
                return;
        }
        const char *section = keys[l->section].name.section;
        const struct key *k = NULL;
        for (size_t i = 0; i < N_KEYS && !k; i++)
                if (strcmp(keys[i].name.section, section) == 0 && strcmp(keys[i].name.key, name) == 0)
                        k = &keys[i];
        if (!k) {
                load_error(l, l->line, "unknown key '%s' in section [%s]", name, section);
                return;
        }
        size_t ki = (size_t)(k - keys);
        if (l->key_line[ki]) {
                load_error(l, l->line, "%s: given again in [%s] (first on line %u)", name, section, l->key_line[ki]);
                return;
        }
        l->key_line[ki] = l->line;
        l->msg[0] = 0;
        if (apply_value(l, k, value))
                return;
        /* Every message names its key. */
        size_t kl = strlen(name);
        bool named = strncmp(l->msg, name, kl) == 0 && l->msg[kl] == ':';
        load_error(l, l->line, "%s%s%s", named ? "" : name, named ? "" : ": ", l->msg);
}

/* Longest line read; longer ones are an error. */
#define LINE_MAX_LEN 1024

static void read_line(struct load *l, char *line, size_t len) {
        if (l->line == 1 && len >= 3 && memcmp(line, "\xef\xbb\xbf", 3) == 0) { /* a UTF-8 BOM */
                line += 3;
                len -= 3;
        }
        if (memchr(line, 0, len)) {
                load_error(l, l->line, "a NUL byte in the line");
                return;
        }
        if (len > LINE_MAX_LEN) {
                load_error(l, l->line, "line longer than %d characters", LINE_MAX_LEN);
                return;
        }
        char *s = strip(line);
        if (*s == 0 || *s == ';' || *s == '#')
                return;
        if (*s == '[')
                read_section(l, s);
        else
                read_key(l, s);
}

int hbgd_config_load(struct hbgd_config *cfg, const char *path, char *err, size_t errlen) {
        struct load *l = calloc(1, sizeof(*l));
        if (!l) {
                snprintf(err, errlen, "%s: out of memory", path);
                return -ENOMEM;
        }
        l->cfg = *cfg;
        l->path = path;
        l->err = err;
        l->errlen = errlen;
        l->section = -1;
        if (errlen)
                err[0] = 0;
        FILE *f = fopen(path, "re");
        if (!f) {
                int e = -errno;
                snprintf(err, errlen, "%s: %s", path, strerror(-e));
                free(l);
                return e;
        }
        char *line = NULL;
        size_t cap = 0;
        ssize_t n;
        while ((n = getline(&line, &cap, f)) >= 0) {
                l->line++;
                read_line(l, line, (size_t)n);
        }
        int rerr = ferror(f) ? -EIO : 0;
        free(line);
        fclose(f);
        if (rerr < 0) {
                snprintf(err, errlen, "%s: read error after line %u", path, l->line);
                free(l);
                return rerr;
        }
        /* The settings as a whole, also when a line failed: every
         * problem of the file in one go. */
        const char *why;
        if (engine_config_validate(&l->cfg.engine, &why) < 0)
                whole_error(l, "scheduler", why);
        struct hbg_geometry g;
        if (geometry_init(&g, &l->cfg.session_default, &why) < 0)
                whole_error(l, "session", why);
        if (l->cfg.session_default.heap_size > l->cfg.max_heap_size) {
                unsigned at = key_line(l, "session", "heap_size");
                load_error(l, at ? at : key_line(l, "limits", "max_heap_size"),
                           "%sheap_size: %llu is above [limits] max_heap_size (%llu): every session would be refused",
                           at ? "" : "[session] ", (unsigned long long)l->cfg.session_default.heap_size,
                           (unsigned long long)l->cfg.max_heap_size);
        }
        if (l->cfg.session_default.task_window > l->cfg.max_task_window) {
                unsigned at = key_line(l, "session", "task_window");
                load_error(l, at ? at : key_line(l, "limits", "max_task_window"),
                           "%stask_window: %llu is above [limits] max_task_window (%llu): every session would be "
                           "refused",
                           at ? "" : "[session] ", (unsigned long long)l->cfg.session_default.task_window,
                           (unsigned long long)l->cfg.max_task_window);
        }
        if (l->cfg.max_message < 1024) {
                unsigned at = key_line(l, "limits", "max_message_size");
                load_error(l, at, "%smax_message_size: '%llu' is less than 1024", at ? "" : "[limits] ",
                           (unsigned long long)l->cfg.max_message);
        }
        if (l->left_out)
                snprintf(err + l->used, errlen - l->used, "%s%s: %u more errors not shown", l->used ? "\n" : "",
                         path, l->left_out);
        int r = l->errors ? -EINVAL : 0;
        if (r == 0)
                *cfg = l->cfg;
        free(l);
        return r;
}
