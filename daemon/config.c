/* SPDX-License-Identifier: MIT */
/* hbgd's settings (daemon/config.h): defaults, values and the file, read by
 * the one table of keys (config_keys.c). */
#include "daemon/config.h"
#include "daemon/config_keys.h"

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
#include <sys/stat.h>

#include "daemon/engine/engine_spares.h"
#include "daemon/engine/engine_trace.h"
#include "proto/wire.h"

void hbgd_config_default(struct hbgd_config *ret) {
        memset(ret, 0, sizeof(*ret));
        snprintf(ret->socket_path, sizeof(ret->socket_path), "%s", HBG_DEFAULT_SOCKET);
        engine_config_default(&ret->engine);
        geometry_request_default(&ret->session_default);
        ret->spare_rings = 1;
        ret->spare_rings_burst = 8;
        ret->spare_rings_burst_s = 60;
        ret->spare_regions = 8;
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
        unsigned key_line[CONFIG_KEYS_MAX];
        unsigned section_line[CONFIG_KEYS_MAX];
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

static void store(struct hbgd_config *c, const struct config_key *k, uint64_t v) {
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

unsigned hbgd_config_idle_tick_ms(void) {
        return 1000;
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
static bool parse_paths(struct load *l, const struct config_key *k, const char *value) {
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
static bool apply_value(struct load *l, const struct config_key *k, const char *value) {
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
        for (size_t i = 0; i < config_n_keys; i++)
                if (strcmp(config_keys[i].name.section, section) == 0 && strcmp(config_keys[i].name.key, key) == 0)
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
        for (size_t i = 0; i < config_n_keys; i++)
                if (strcmp(config_keys[i].name.section, name) == 0)
                        return (int)i;
        return -1;
}

/* "scheduler, session, ...": every section, in the table's order. */
static void section_names(char *buf, size_t len) {
        size_t used = 0;
        buf[0] = 0;
        for (size_t i = 0; i < config_n_keys && used < len; i++) {
                if (section_index(config_keys[i].name.section) != (int)i)
                        continue;
                int n = snprintf(buf + used, len - used, "%s%s", used ? ", " : "", config_keys[i].name.section);
                used += n > 0 ? (size_t)n : 0;
        }
}

/* "[name]", with nothing after it but a comment. After an error the
 * section is still taken if its name is one: its keys are checked and a
 * second header of it is said too (every error of the file is). */
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
        if (*rest)
                load_error(l, l->line, "text after ']' in the header of section [%s]: '%s'", name, rest);
        int i = section_index(name);
        if (i < 0) {
                char all[160];
                section_names(all, sizeof(all));
                load_error(l, l->line, "unknown section [%s] (the sections are %s)", name, all);
                l->section = -2;
                return;
        }
        if (l->section_line[i]) {
                /* Its keys are still checked (every error of the file is
                 * said): against the first one's, and their values. */
                load_error(l, l->line, "section [%s] given again (first on line %u); a file has each section once",
                           name, l->section_line[i]);
                l->section = i;
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
        const char *section = config_keys[l->section].name.section;
        const struct config_key *k = NULL;
        for (size_t i = 0; i < config_n_keys && !k; i++)
                if (strcmp(config_keys[i].name.section, section) == 0 && strcmp(config_keys[i].name.key, name) == 0)
                        k = &config_keys[i];
        if (!k) {
                load_error(l, l->line, "unknown key '%s' in section [%s]", name, section);
                return;
        }
        size_t ki = (size_t)(k - config_keys);
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
        /* fopen() opens a directory; its first read fails (EISDIR). */
        struct stat st;
        if (fstat(fileno(f), &st) == 0 && S_ISDIR(st.st_mode)) {
                snprintf(err, errlen, "%s: is a directory, not a configuration file", path);
                fclose(f);
                free(l);
                return -EISDIR;
        }
        char *line = NULL;
        size_t cap = 0;
        ssize_t n;
        errno = 0;
        while ((n = getline(&line, &cap, f)) >= 0) {
                l->line++;
                read_line(l, line, (size_t)n);
                errno = 0;
        }
        int rerr = ferror(f) ? -(errno ? errno : EIO) : 0;
        free(line);
        fclose(f);
        if (rerr < 0) {
                snprintf(err, errlen, "%s: cannot read it after line %u: %s", path, l->line, strerror(-rerr));
                free(l);
                return rerr;
        }
        /* The settings as a whole, also when a line failed: every
         * problem of the file in one go. */
        const char *why;
        if (engine_config_validate(&l->cfg.engine, &why) < 0)
                whole_error(l, "scheduler", why);
        /* The flag window follows a task window set alone (as it does in
         * a session's request); one set alone above the task window is
         * said with both values (the default task window went from 16384
         * to 4096: docs/OPERATIONS.md, "Upgrade"). */
        unsigned task_at = key_line(l, "session", "task_window"), flag_at = key_line(l, "session", "flag_window");
        struct hbg_geometry_request *sd = &l->cfg.session_default;
        if (task_at && !flag_at)
                sd->flag_window = sd->task_window;
        struct hbg_geometry g;
        if (flag_at && sd->flag_window > sd->task_window)
                load_error(l, flag_at, "flag_window: %llu is above %stask_window (%llu): set [session] task_window "
                           "to %llu or more too", (unsigned long long)sd->flag_window, task_at ? "" : "the default ",
                           (unsigned long long)sd->task_window, (unsigned long long)sd->flag_window);
        else if (geometry_init(&g, sd, &why) < 0)
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
