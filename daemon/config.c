/* SPDX-License-Identifier: MIT */
/* hbgd's settings (daemon/config.h): defaults and the file, each value
 * read by its key's type in the one table of keys (config_keys.c). */
#include "daemon/config.h"
#include "daemon/config_keys.h"

#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
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

unsigned hbgd_config_idle_tick_ms(void) {
        return 1000;
}

unsigned hbgd_config_session_weight(const struct hbgd_config *cfg, uid_t uid) {
        for (unsigned i = 0; i < cfg->n_session_weights && i < HBGD_MAX_ALLOWED; i++)
                if (cfg->session_weights[i].uid == uid)
                        return cfg->session_weights[i].weight;
        return HBG_FAIR_SHARE_WEIGHT_DEFAULT;
}

/* ------------------------------------------------------------ the file */

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
        if (config_key_parse(&l->cfg, k, value, l->msg, sizeof(l->msg)))
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
