/* SPDX-License-Identifier: MIT */
#include "daemon/config.h"

#include <errno.h>
#include <grp.h>
#include <ini.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

struct load {
        struct hbgd_config cfg;
        const char *path;
        int line;                  /* lines seen, to name the failing one */
        char msg[200];
        bool failed;
};

/* A size with an optional K/M/G suffix (powers of 1024). */
static bool parse_size(const char *s, uint64_t max, uint64_t *ret) {
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
        if (v > max)
                return false;
        *ret = v;
        return true;
}

static bool parse_ids(struct load *l, const char *value, bool groups) {
        char buf[512];
        snprintf(buf, sizeof(buf), "%s", value);
        unsigned n = 0;
        for (char *save = NULL, *tok = strtok_r(buf, " ,", &save); tok; tok = strtok_r(NULL, " ,", &save)) {
                if (n == HBGD_MAX_ALLOWED) {
                        snprintf(l->msg, sizeof(l->msg), "more than %u entries", HBGD_MAX_ALLOWED);
                        return false;
                }
                char *end;
                unsigned long id = strtoul(tok, &end, 10);
                if (*end) {
                        if (groups) {
                                struct group *g = getgrnam(tok);
                                if (!g) {
                                        snprintf(l->msg, sizeof(l->msg), "unknown group '%s'", tok);
                                        return false;
                                }
                                id = g->gr_gid;
                        } else {
                                struct passwd *p = getpwnam(tok);
                                if (!p) {
                                        snprintf(l->msg, sizeof(l->msg), "unknown user '%s'", tok);
                                        return false;
                                }
                                id = p->pw_uid;
                        }
                }
                if (groups)
                        l->cfg.allowed_gids[n++] = (gid_t)id;
                else
                        l->cfg.allowed_uids[n++] = (uid_t)id;
        }
        if (groups)
                l->cfg.n_allowed_gids = n;
        else
                l->cfg.n_allowed_uids = n;
        return true;
}

#define KEY(sec, name) (strcmp(section, sec) == 0 && strcmp(key, name) == 0)

static int handler(void *user, const char *section, const char *key, const char *value) {
        struct load *l = user;
        struct hbgd_config *c = &l->cfg;
        uint64_t v;

        if (l->failed)
                return 1;
        l->msg[0] = 0;
#define NUM(max, field)                                                                   \
        do {                                                                              \
                if (!parse_size(value, (max), &v)) {                                      \
                        snprintf(l->msg, sizeof(l->msg), "%s: '%s' is not a number up to %llu", \
                                 key, value, (unsigned long long)(max));                  \
                        return 0;                                                         \
                }                                                                         \
                field = v;                                                                \
        } while (0)
        if (KEY("scheduler", "threads"))
                NUM(64, c->engine.threads);
        else if (KEY("scheduler", "clusters"))
                NUM(1024, c->engine.clusters);
        else if (KEY("scheduler", "spin_before_park_us")) {
                NUM(1000000, v);
                c->engine.spin_before_park_ns = v * 1000;
        } else if (KEY("scheduler", "stall_timeout_ms"))
                NUM(UINT64_C(86400000), c->engine.stall_timeout_ms);
        else if (KEY("session", "task_window"))
                NUM(UINT64_C(1) << 24, c->session_default.task_window);
        else if (KEY("session", "flag_window"))
                NUM(UINT64_C(1) << 24, c->session_default.flag_window);
        else if (KEY("session", "heap_size"))
                NUM(UINT64_C(1) << 40, c->session_default.heap_size);
        else if (KEY("session", "mailbox_entries"))
                NUM(UINT64_C(1) << 20, c->session_default.mailbox_entries);
        else if (KEY("session", "graph_table_entries"))
                NUM(UINT64_C(1) << 20, c->session_default.graph_table_entries);
        else if (KEY("limits", "max_sessions"))
                NUM(65536, c->max_sessions);
        else if (KEY("limits", "max_sessions_per_uid"))
                NUM(65536, c->max_sessions_per_uid);
        else if (KEY("limits", "max_task_window"))
                NUM(UINT64_C(1) << 24, c->max_task_window);
        else if (KEY("limits", "max_heap_size"))
                NUM(UINT64_C(1) << 40, c->max_heap_size);
        else if (KEY("limits", "max_message_size"))
                NUM(UINT64_C(16) << 20, c->max_message);
        else if (KEY("limits", "shutdown_grace_ms"))
                NUM(UINT64_C(3600000), c->shutdown_grace_ms);
        else if (KEY("access", "allowed_users")) {
                if (!parse_ids(l, value, false))
                        return 0;
        } else if (KEY("access", "allowed_groups")) {
                if (!parse_ids(l, value, true))
                        return 0;
        } else if (KEY("log", "level")) {
                static const char *const names[] = { "emerg", "alert", "crit", "err",
                                                     "warning", "notice", "info", "debug" };
                int level = -1;
                for (int i = 0; i < 8; i++)
                        if (strcasecmp(value, names[i]) == 0)
                                level = i;
                if (level < 0) {
                        snprintf(l->msg, sizeof(l->msg),
                                 "level: '%s' is not one of emerg alert crit err warning notice info debug",
                                 value);
                        return 0;
                }
                c->log_level = level;
        } else {
                snprintf(l->msg, sizeof(l->msg), "unknown key '%s' in section [%s]", key, section);
                return 0;
        }
#undef NUM
        return 1;
}

int hbgd_config_load(struct hbgd_config *cfg, const char *path, char *err, size_t errlen) {
        struct load l = { .cfg = *cfg, .path = path };
        FILE *f = fopen(path, "re");
        if (!f) {
                int e = -errno;
                snprintf(err, errlen, "%s: %s", path, strerror(-e));
                return e;
        }
        /* inih reports the line of the first failing handler call. */
        int line = ini_parse_file(f, handler, &l);
        fclose(f);
        if (line != 0) {
                snprintf(err, errlen, "%s:%d: %s", path, line, l.msg[0] ? l.msg : "syntax error");
                return -EINVAL;
        }
        const char *why;
        if (hbg_engine_config_validate(&l.cfg.engine, &why) < 0) {
                snprintf(err, errlen, "%s: [scheduler] %s", path, why);
                return -EINVAL;
        }
        struct hbg_geometry g;
        if (hbg_geometry_init(&g, &l.cfg.session_default, &why) < 0) {
                snprintf(err, errlen, "%s: [session] %s", path, why);
                return -EINVAL;
        }
        if (l.cfg.max_message < 1024) {
                snprintf(err, errlen, "%s: [limits] max_message_size: must be at least 1024", path);
                return -EINVAL;
        }
        *cfg = l.cfg;
        return 0;
}
