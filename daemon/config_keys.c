/* SPDX-License-Identifier: MIT */
/* hbgd.conf's keys (daemon/config_keys.h): the table of keys, and the
 * table of their types, each reading a value and saying it back. */
#include "daemon/config_keys.h"

#include <ctype.h>
#include <errno.h>
#include <grp.h>
#include <pwd.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

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

/* ------------------------------------------------------------ key types
 *
 * Each type reads a value from the file into its field and says it back
 * in the file's words; the two sit side by side, so what --check-config
 * prints reads back as the same setting (tests/unit/test_config.c). A
 * parser returns false with the reason in msg. */

/* The words of a value chosen from a few, the value being the word's
 * index; one list for reading, saying back and the error message. */
struct words {
        const char *const *names;
        unsigned n;
        const char *sep;  /* between the words in the error message */
        bool any_case;    /* "DEBUG" is debug */
};
#define WORDS(a, s, c) { a, sizeof(a) / sizeof(a[0]), s, c }

/* Indexed by syslog priority. */
static const char *const log_level_names[] = { "emerg", "alert", "crit", "err",
                                               "warning", "notice", "info", "debug" };
static const struct words log_levels = WORDS(log_level_names, " ", true);
/* Indexed by visibility_all. */
static const char *const visibility_names[] = { "own", "all" };
static const struct words visibilities = WORDS(visibility_names, ", ", false);

/* The index of value among w's words, or -1. */
static int word_index(const struct words *w, const char *value) {
        for (unsigned i = 0; i < w->n; i++)
                if ((w->any_case ? strcasecmp(value, w->names[i]) : strcmp(value, w->names[i])) == 0)
                        return (int)i;
        return -1;
}

/* "KEY: 'VALUE' is not one of WORDS". */
static void words_error(const struct words *w, const char *key, const char *value, char *msg, size_t msglen) {
        size_t used = (size_t)snprintf(msg, msglen, "%s: '%s' is not one of ", key, value);
        for (unsigned i = 0; i < w->n && used < msglen; i++) {
                int n = snprintf(msg + used, msglen - used, "%s%s", i ? w->sep : "", w->names[i]);
                used += n > 0 ? (size_t)n : 0;
        }
}

static const char *word_name(const struct words *w, int i) {
        return i >= 0 && (unsigned)i < w->n ? w->names[i] : "?";
}

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

static void store(struct hbgd_config *c, const struct config_key *k, uint64_t v) {
        char *field = (char *)c + k->offset;
        if (k->width == sizeof(uint64_t)) {
                memcpy(field, &v, sizeof(v));
        } else {
                unsigned u = (unsigned)v; /* max fits: the table says so */
                memcpy(field, &u, sizeof(u));
        }
}

static uint64_t load_number(const struct hbgd_config *c, const struct config_key *k) {
        const char *field = (const char *)c + k->offset;
        if (k->width == sizeof(uint64_t)) {
                uint64_t v;
                memcpy(&v, field, sizeof(v));
                return v;
        }
        unsigned u;
        memcpy(&u, field, sizeof(u));
        return u;
}

/* KEY_NUMBER, and KEY_US_AS_NS scaled by 1000 in the field. */
static bool parse_scaled(struct hbgd_config *cfg, const struct config_key *k, const char *value, uint64_t scale,
                         char *msg, size_t msglen) {
        uint64_t v;
        if (!parse_size(value, k->min, k->max, &v)) {
                snprintf(msg, msglen, "%s: '%s' is not a number from %llu to %llu", k->name.key, value,
                         (unsigned long long)k->min, (unsigned long long)k->max);
                return false;
        }
        store(cfg, k, v * scale);
        return true;
}

static bool parse_number(struct hbgd_config *cfg, const struct config_key *k, const char *value, char *msg,
                         size_t msglen) {
        return parse_scaled(cfg, k, value, 1, msg, msglen);
}

static void format_number(const struct hbgd_config *cfg, const struct config_key *k, char *buf, size_t len) {
        snprintf(buf, len, "%llu", (unsigned long long)load_number(cfg, k));
}

static bool parse_us_as_ns(struct hbgd_config *cfg, const struct config_key *k, const char *value, char *msg,
                           size_t msglen) {
        return parse_scaled(cfg, k, value, 1000, msg, msglen);
}

static void format_us_as_ns(const struct hbgd_config *cfg, const struct config_key *k, char *buf, size_t len) {
        snprintf(buf, len, "%llu", (unsigned long long)(load_number(cfg, k) / 1000));
}

/* A user (group) given by number or name: its id, or false and the
 * message. A number is taken as it is, whether or not it has a name. */
static bool lookup_id(const char *tok, bool group, unsigned long *ret, char *msg, size_t msglen) {
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
                        snprintf(msg, msglen, "unknown group '%s'", tok);
                return g != NULL;
        }
        struct passwd *p = getpwnam(tok);
        if (p)
                *ret = p->pw_uid;
        else
                snprintf(msg, msglen, "unknown user '%s'", tok);
        return p != NULL;
}

/* A list of users or groups into ids[] (HBGD_MAX_ALLOWED), *ret_n. */
static bool parse_id_list(const char *value, bool groups, uint32_t *ids, unsigned *ret_n, char *msg,
                          size_t msglen) {
        char buf[512];
        if (snprintf(buf, sizeof(buf), "%s", value) >= (int)sizeof(buf)) {
                /* The caller names the key (admin_groups, monitor_groups...). */
                snprintf(msg, msglen, "longer than %zu characters", sizeof(buf) - 1);
                return false;
        }
        unsigned n = 0;
        for (char *save = NULL, *tok = strtok_r(buf, " ,", &save); tok; tok = strtok_r(NULL, " ,", &save)) {
                if (n == HBGD_MAX_ALLOWED) {
                        snprintf(msg, msglen, "more than %u entries", HBGD_MAX_ALLOWED);
                        return false;
                }
                unsigned long id;
                if (!lookup_id(tok, groups, &id, msg, msglen))
                        return false;
                ids[n++] = (uint32_t)id;
        }
        *ret_n = n;
        return true;
}

_Static_assert(sizeof(uid_t) == sizeof(uint32_t) && sizeof(gid_t) == sizeof(uint32_t), "ids are 32 bits");

/* "a, b": names where the system knows them, else the numbers. */
static void format_ids(char *buf, size_t len, const uint32_t *ids, unsigned n, bool groups) {
        size_t used = 0;
        buf[0] = 0;
        for (unsigned i = 0; i < n && i < HBGD_MAX_ALLOWED && used < len; i++) {
                const char *name = NULL;
                if (groups) {
                        struct group *g = getgrgid((gid_t)ids[i]);
                        name = g ? g->gr_name : NULL;
                } else {
                        struct passwd *pw = getpwuid((uid_t)ids[i]);
                        name = pw ? pw->pw_name : NULL;
                }
                int k = name ? snprintf(buf + used, len - used, "%s%s", i ? ", " : "", name)
                             : snprintf(buf + used, len - used, "%s%u", i ? ", " : "", (unsigned)ids[i]);
                used += k > 0 ? (size_t)k : 0;
        }
}

static bool parse_users(struct hbgd_config *cfg, const struct config_key *k, const char *value, char *msg,
                        size_t msglen) {
        (void)k;
        return parse_id_list(value, false, (uint32_t *)cfg->allowed_uids, &cfg->n_allowed_uids, msg, msglen);
}

static void format_users(const struct hbgd_config *cfg, const struct config_key *k, char *buf, size_t len) {
        (void)k;
        format_ids(buf, len, (const uint32_t *)cfg->allowed_uids, cfg->n_allowed_uids, false);
}

static bool parse_groups(struct hbgd_config *cfg, const struct config_key *k, const char *value, char *msg,
                         size_t msglen) {
        (void)k;
        return parse_id_list(value, true, (uint32_t *)cfg->allowed_gids, &cfg->n_allowed_gids, msg, msglen);
}

static void format_groups(const struct hbgd_config *cfg, const struct config_key *k, char *buf, size_t len) {
        (void)k;
        format_ids(buf, len, (const uint32_t *)cfg->allowed_gids, cfg->n_allowed_gids, true);
}

static bool parse_group_list(struct hbgd_config *cfg, const struct config_key *k, const char *value, char *msg,
                             size_t msglen) {
        struct hbgd_gids *g = (struct hbgd_gids *)((char *)cfg + k->offset);
        return parse_id_list(value, true, (uint32_t *)g->gids, &g->n, msg, msglen);
}

static void format_group_list(const struct hbgd_config *cfg, const struct config_key *k, char *buf, size_t len) {
        const struct hbgd_gids *g = (const struct hbgd_gids *)((const char *)cfg + k->offset);
        format_ids(buf, len, (const uint32_t *)g->gids, g->n, true);
}

/* "alice:4 bob:2 1001:3": user names or uids, weights 1..100. */
static bool parse_weights(struct hbgd_config *cfg, const struct config_key *k, const char *value, char *msg,
                          size_t msglen) {
        (void)k;
        char buf[512];
        if (snprintf(buf, sizeof(buf), "%s", value) >= (int)sizeof(buf)) {
                snprintf(msg, msglen, "session_weights: longer than %zu characters", sizeof(buf) - 1);
                return false;
        }
        unsigned n = 0;
        for (char *save = NULL, *tok = strtok_r(buf, " ,", &save); tok; tok = strtok_r(NULL, " ,", &save)) {
                if (n == HBGD_MAX_ALLOWED) {
                        snprintf(msg, msglen, "session_weights: more than %u entries", HBGD_MAX_ALLOWED);
                        return false;
                }
                char *colon = strrchr(tok, ':');
                uint64_t w;
                if (!colon || colon == tok ||
                    !parse_size(colon + 1, 1, HBG_FAIR_SHARE_WEIGHT_MAX, &w) || !isdigit((unsigned char)colon[1])) {
                        snprintf(msg, msglen, "session_weights: '%s' is not USER:WEIGHT with a weight from 1 to %u",
                                 tok, HBG_FAIR_SHARE_WEIGHT_MAX);
                        return false;
                }
                *colon = 0;
                unsigned long id;
                if (!lookup_id(tok, false, &id, msg, msglen))
                        return false;
                uid_t uid = (uid_t)id;
                for (unsigned i = 0; i < n; i++)
                        if (cfg->session_weights[i].uid == uid) {
                                snprintf(msg, msglen, "session_weights: user '%s' given twice", tok);
                                return false;
                        }
                cfg->session_weights[n++] = (struct hbgd_session_weight){ uid, (unsigned)w };
        }
        cfg->n_session_weights = n;
        return true;
}

static void format_weights(const struct hbgd_config *cfg, const struct config_key *k, char *buf, size_t len) {
        (void)k;
        size_t used = 0;
        buf[0] = 0;
        for (unsigned j = 0; j < cfg->n_session_weights && j < HBGD_MAX_ALLOWED && used < len; j++) {
                char who[64];
                uint32_t uid = (uint32_t)cfg->session_weights[j].uid;
                format_ids(who, sizeof(who), &uid, 1, false);
                int n = snprintf(buf + used, len - used, "%s%s:%u", j ? ", " : "", who,
                                 cfg->session_weights[j].weight);
                used += n > 0 ? (size_t)n : 0;
        }
}

static bool parse_log_level(struct hbgd_config *cfg, const struct config_key *k, const char *value, char *msg,
                            size_t msglen) {
        int i = word_index(&log_levels, value);
        if (i < 0) {
                words_error(&log_levels, k->name.key, value, msg, msglen);
                return false;
        }
        cfg->log_level = i;
        return true;
}

static void format_log_level(const struct hbgd_config *cfg, const struct config_key *k, char *buf, size_t len) {
        (void)k;
        snprintf(buf, len, "%s", word_name(&log_levels, cfg->log_level));
}

static bool parse_visibility(struct hbgd_config *cfg, const struct config_key *k, const char *value, char *msg,
                             size_t msglen) {
        int i = word_index(&visibilities, value);
        if (i < 0) {
                words_error(&visibilities, k->name.key, value, msg, msglen);
                return false;
        }
        cfg->visibility_all = i == 1;
        return true;
}

static void format_visibility(const struct hbgd_config *cfg, const struct config_key *k, char *buf, size_t len) {
        (void)k;
        snprintf(buf, len, "%s", word_name(&visibilities, cfg->visibility_all));
}

static bool parse_completion(struct hbgd_config *cfg, const struct config_key *k, const char *value, char *msg,
                             size_t msglen) {
        if (completion_mode_parse(value, &cfg->engine.completion_mode) < 0) {
                snprintf(msg, msglen, "%s: '%s' is not one of %s", k->name.key, value, completion_mode_list());
                return false;
        }
        return true;
}

static void format_completion(const struct hbgd_config *cfg, const struct config_key *k, char *buf, size_t len) {
        (void)k;
        const char *m = completion_mode_name(cfg->engine.completion_mode);
        snprintf(buf, len, "%s", m ? m : "?");
}

/* The char array fields: KEY_SOCKET_PATH, KEY_NAME, KEY_PATHS. */
static void format_text(const struct hbgd_config *cfg, const struct config_key *k, char *buf, size_t len) {
        snprintf(buf, len, "%.*s", (int)k->width, (const char *)cfg + k->offset);
}

/* Empty: the default. A socket path must fit sun_path. */
static bool parse_socket_path(struct hbgd_config *cfg, const struct config_key *k, const char *value, char *msg,
                              size_t msglen) {
        if ((value[0] && value[0] != '/') || strlen(value) >= k->width) {
                snprintf(msg, msglen, "%s: '%s' is not an absolute path shorter than %zu bytes", k->name.key, value,
                         k->width);
                return false;
        }
        snprintf((char *)cfg + k->offset, k->width, "%s", value);
        return true;
}

/* Looked up when used: a group created later still counts. */
static bool parse_name(struct hbgd_config *cfg, const struct config_key *k, const char *value, char *msg,
                       size_t msglen) {
        for (const char *c = value; *c; c++)
                if (isspace((unsigned char)*c) || *c == ':' || *c == ',') {
                        snprintf(msg, msglen, "%s: '%s' is not one name", k->name.key, value);
                        return false;
                }
        if (strlen(value) >= k->width) {
                snprintf(msg, msglen, "%s: '%s' is longer than %zu characters", k->name.key, value, k->width - 1);
                return false;
        }
        snprintf((char *)cfg + k->offset, k->width, "%s", value);
        return true;
}

/* "PATH PATH ...": absolute, each once, at most k->max of them, into the
 * field with single spaces. Whether each is a module hbgd may load is the
 * loader's check (daemon/kernel_modules.c), at start and --check-config. */
static bool parse_paths(struct hbgd_config *cfg, const struct config_key *k, const char *value, char *msg,
                        size_t msglen) {
        const char *name = k->name.key;
        char buf[HBGD_KERNEL_MODULES_LEN], out[HBGD_KERNEL_MODULES_LEN] = "";
        if (snprintf(buf, sizeof(buf), "%s", value) >= (int)sizeof(buf) || strlen(value) >= k->width) {
                snprintf(msg, msglen, "%s: longer than %zu characters", name, k->width - 1);
                return false;
        }
        size_t used = 0;
        unsigned n = 0;
        for (char *save = NULL, *tok = strtok_r(buf, " \t", &save); tok; tok = strtok_r(NULL, " \t", &save)) {
                if (tok[0] != '/') {
                        snprintf(msg, msglen, "%s: '%.100s' is not an absolute path", name, tok);
                        return false;
                }
                if (++n > k->max) {
                        snprintf(msg, msglen, "%s: more than %llu paths", name, (unsigned long long)k->max);
                        return false;
                }
                for (const char *p = out; *p;) {
                        size_t len = strcspn(p, " ");
                        if (len == strlen(tok) && strncmp(p, tok, len) == 0) {
                                snprintf(msg, msglen, "%s: '%.100s' given twice", name, tok);
                                return false;
                        }
                        p += len + (p[len] == ' ');
                }
                used += (size_t)snprintf(out + used, sizeof(out) - used, "%s%s", used ? " " : "", tok);
        }
        snprintf((char *)cfg + k->offset, k->width, "%s", out);
        return true;
}

static bool parse_mode(struct hbgd_config *cfg, const struct config_key *k, const char *value, char *msg,
                       size_t msglen) {
        char *end;
        errno = 0;
        unsigned long m = strtoul(value, &end, 8);
        if (errno || end == value || *end || !isdigit((unsigned char)value[0]) || m > k->max) {
                snprintf(msg, msglen, "%s: '%s' is not an octal mode from 0 to %04llo", k->name.key, value,
                         (unsigned long long)k->max);
                return false;
        }
        store(cfg, k, m);
        return true;
}

static void format_mode(const struct hbgd_config *cfg, const struct config_key *k, char *buf, size_t len) {
        snprintf(buf, len, "%04llo", (unsigned long long)load_number(cfg, k));
}

static const struct key_type_ops {
        bool (*parse)(struct hbgd_config *cfg, const struct config_key *k, const char *value, char *msg,
                      size_t msglen);
        void (*format)(const struct hbgd_config *cfg, const struct config_key *k, char *buf, size_t len);
} key_types[] = {
        [KEY_NUMBER] = { parse_number, format_number },
        [KEY_US_AS_NS] = { parse_us_as_ns, format_us_as_ns },
        [KEY_USERS] = { parse_users, format_users },
        [KEY_WEIGHTS] = { parse_weights, format_weights },
        [KEY_GROUPS] = { parse_groups, format_groups },
        [KEY_LOG_LEVEL] = { parse_log_level, format_log_level },
        [KEY_COMPLETION] = { parse_completion, format_completion },
        [KEY_SOCKET_PATH] = { parse_socket_path, format_text },
        [KEY_MODE] = { parse_mode, format_mode },
        [KEY_NAME] = { parse_name, format_text },
        [KEY_GROUP_LIST] = { parse_group_list, format_group_list },
        [KEY_VISIBILITY] = { parse_visibility, format_visibility },
        [KEY_PATHS] = { parse_paths, format_text },
};
_Static_assert(sizeof(key_types) / sizeof(key_types[0]) == KEY_TYPES, "every key type has its entry");

bool config_key_parse(struct hbgd_config *cfg, const struct config_key *k, const char *value, char *msg,
                      size_t msglen) {
        /* A key type without its entry is a build's mistake: refused,
         * as hbgd refuses the key (it has no assert()). */
        if (k->type >= KEY_TYPES || !key_types[k->type].parse) {
                snprintf(msg, msglen, "%s: hbgd cannot read this key's type", k->name.key);
                return false;
        }
        return key_types[k->type].parse(cfg, k, value, msg, msglen);
}

int hbgd_config_format(const struct hbgd_config *cfg, size_t i, char *buf, size_t len) {
        if (i >= config_n_keys || len == 0)
                return -EINVAL;
        const struct config_key *k = &config_keys[i];
        if (k->type >= KEY_TYPES || !key_types[k->type].format)
                return -EINVAL;
        key_types[k->type].format(cfg, k, buf, len);
        return 0;
}
