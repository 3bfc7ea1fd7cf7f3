/* SPDX-License-Identifier: MIT */
/* hbgd.conf: every key with a valid and an invalid value, file:line in
 * every error, and nothing applied from a file that fails. */
#include <check.h>
#include <stdbool.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <syslog.h>
#include <unistd.h>

#include "daemon/config.h"
#include "daemon/config_keys.h"
#include "daemon/daemon.h"
#include "tests/check_main.h"

static char path[64];

static void write_file(const char *text) {
        snprintf(path, sizeof(path), "/tmp/hbg-config-XXXXXX");
        int fd = mkstemp(path);
        ck_assert_int_ge(fd, 0);
        ck_assert_int_eq(write(fd, text, strlen(text)), (ssize_t)strlen(text));
        close(fd);
}

static int load(const char *text, struct hbgd_config *cfg, char *err, size_t len) {
        hbgd_config_default(cfg);
        write_file(text);
        int r = hbgd_config_load(cfg, path, err, len);
        unlink(path);
        return r;
}

struct key_case {
        const char *section, *key, *good, *bad;
};

/* One valid and one invalid value per key. */
static const struct key_case keys[] = {
        { "scheduler", "threads", "2", "65" },
        { "scheduler", "clusters", "16", "1025" },
        { "scheduler", "spin_before_park_us", "10", "-1" },
        { "scheduler", "max_spinning_threads", "2", "65" },
        { "scheduler", "max_awake_threads", "2", "65" },
        { "scheduler", "move_off_shared_cpu", "0", "2" },
        { "scheduler", "stall_timeout_ms", "2000", "ten" },
        { "scheduler", "completion_mode", "lazy", "fast" },
        { "scheduler", "session_weights", "0:4, 65534:2", "0:101" },
        { "session", "task_window", "32768", "4097x" },
        { "session", "flag_window", "1024", "99999999999" },
        { "session", "heap_size", "16M", "16Q" },
        { "session", "mailbox_entries", "256", "" },
        { "session", "graph_table_entries", "64", "2097152" },
        { "session", "spare_rings", "0", "9" },
        { "session", "spare_rings_burst", "4", "9" },
        { "session", "spare_rings_burst_s", "5", "0" },
        { "session", "spare_regions", "0", "65" },
        { "limits", "max_connections", "100", "0" },
        { "limits", "max_connections_per_uid", "4", "1000001" },
        { "limits", "max_sessions", "8", "x8" },
        { "limits", "max_sessions_per_uid", "2", "65537" },
        { "limits", "max_memory", "8G", "9x" },
        { "limits", "max_memory_per_uid", "512M", "-1" },
        { "limits", "max_task_window", "65536", "33554432" },
        { "limits", "max_heap_size", "2G", "2T" },
        { "limits", "max_message_size", "128K", "32M" },
        { "limits", "handshake_timeout_ms", "500", "99" },
        { "limits", "requests_per_turn", "4", "4097" },
        { "limits", "max_threads_per_session", "2", "65" },
        { "limits", "max_task_cost", "1000", "lots" },
        { "limits", "kernel_time_budget_ms", "50", "0" },
        { "limits", "max_recorded_graphs", "8", "65537" },
        { "limits", "max_recorded_tasks", "1024", "16777217" },
        { "limits", "max_stall_timeout_ms", "60000", "86400001" },
        { "limits", "shutdown_grace_ms", "100", "3600001" },
        { "access", "allowed_users", "0, 65534", "no-such-user-hbg" },
        { "access", "allowed_groups", "0", "no-such-group-hbg" },
        { "access", "visibility", "all", "everyone" },
        { "access", "admin_groups", "0, 4500", "no-such-group-hbg" },
        { "access", "monitor_groups", "4501", "no-such-group-hbg" },
        { "trace", "thread_events", "1024", "15" },
        { "log", "level", "debug", "chatty" },
        { "log", "journal_socket", "/run/hbg-test/journal", "journal.sock" },
        { "log", "ratelimit_interval_ms", "1000", "3600001" },
        { "log", "ratelimit_burst", "100", "0" },
        { "log", "ratelimit_burst_per_uid", "200", "1000001" },
        { "socket", "mode", "0600", "0999" },
        { "socket", "group", "users", "hbg users" },
        { "kernels", "modules", "/usr/lib/hbg/kernels/nn.so /opt/k.so", "lib/nn.so" },
};

START_TEST(each_key) {
        const struct key_case *k = &keys[_i];
        struct hbgd_config cfg, dflt;
        char text[256], err[512] = "";

        hbgd_config_default(&dflt);
        /* Two comment lines first, so the key is on line 4. */
        snprintf(text, sizeof(text), "; hbgd.conf\n# test\n[%s]\n%s = %s\n", k->section, k->key, k->good);
        ck_assert_msg(load(text, &cfg, err, sizeof(err)) == 0, "%s.%s = %s: %s", k->section, k->key,
                      k->good, err);
        ck_assert_msg(memcmp(&cfg, &dflt, sizeof(cfg)) != 0, "%s.%s = %s changed nothing", k->section,
                      k->key, k->good);

        snprintf(text, sizeof(text), "; hbgd.conf\n# test\n[%s]\n%s = %s\n", k->section, k->key, k->bad);
        ck_assert_int_eq(load(text, &cfg, err, sizeof(err)), -EINVAL);
        ck_assert_msg(strstr(err, path) == err, "error does not start with the file name: %s", err);
        char where[80];
        snprintf(where, sizeof(where), "%s:4:", path);
        bool has_line = strstr(err, where) != NULL;
        /* Values the parser accepts but the whole-config check refuses name
         * the section instead of a line. */
        char section[40];
        snprintf(section, sizeof(section), "[%s]", k->section);
        ck_assert_msg(has_line || strstr(err, section), "%s.%s = %s: no line or section in '%s'",
                      k->section, k->key, k->bad, err);
        /* Nothing applied. */
        ck_assert_msg(memcmp(&cfg, &dflt, sizeof(cfg)) == 0, "a failing file changed the config");
}
END_TEST

/* An over-long user or group list: the error names the key given. */
START_TEST(long_lists_name_their_key) {
        static const struct { const char *section, *key; } lists[] = {
                { "access", "allowed_users" }, { "access", "allowed_groups" },
                { "access", "admin_groups" },  { "access", "monitor_groups" },
        };
        char value[600], text[700], err[512], want[64];
        memset(value, 'a', sizeof(value) - 1);
        value[sizeof(value) - 1] = 0;
        for (size_t i = 0; i < sizeof(lists) / sizeof(lists[0]); i++) {
                struct hbgd_config cfg;
                snprintf(text, sizeof(text), "[%s]\n%s = %s\n", lists[i].section, lists[i].key, value);
                ck_assert_int_eq(load(text, &cfg, err, sizeof(err)), -EINVAL);
                snprintf(want, sizeof(want), "%s: longer than 511 characters", lists[i].key);
                ck_assert_msg(strstr(err, want), "%s: '%s' does not say '%s'", lists[i].key, err, want);
        }
}
END_TEST

START_TEST(values_applied) {
        struct hbgd_config cfg;
        char err[512] = "";
        ck_assert_int_eq(load("[scheduler]\nthreads = 3\nclusters = 5\nspin_before_park_us = 7\n"
                              "[session]\nheap_size = 2M\ntask_window = 1024\nflag_window = 512\n"
                              "[limits]\nmax_message_size = 4K\n[access]\nallowed_users = 0 7\n"
                              "[log]\nlevel = warning\n",
                              &cfg, err, sizeof(err)),
                         0);
        ck_assert_uint_eq(cfg.engine.threads, 3);
        ck_assert_uint_eq(cfg.engine.clusters, 5);
        ck_assert_uint_eq(cfg.engine.spin_before_park_ns, 7000);
        ck_assert_uint_eq(cfg.session_default.heap_size, 2u << 20);
        ck_assert_uint_eq(cfg.session_default.task_window, 1024);
        ck_assert_uint_eq(cfg.session_default.flag_window, 512);
        ck_assert_uint_eq(cfg.max_message, 4096);
        ck_assert_uint_eq(cfg.n_allowed_uids, 2);
        ck_assert_uint_eq(cfg.allowed_uids[1], 7);
        ck_assert_int_eq(cfg.log_level, LOG_WARNING);
}
END_TEST

/* [scheduler] session_weights: pairs by uid or name, the lookup, and the
 * shapes the parser refuses. */
START_TEST(session_weights) {
        struct hbgd_config cfg;
        char err[512] = "";
        ck_assert_int_eq(load("[scheduler]\nsession_weights = root:3, 7:100 65534:1\n", &cfg, err, sizeof(err)), 0);
        ck_assert_uint_eq(cfg.n_session_weights, 3);
        ck_assert_uint_eq(hbgd_config_session_weight(&cfg, 0), 3);
        ck_assert_uint_eq(hbgd_config_session_weight(&cfg, 7), 100);
        ck_assert_uint_eq(hbgd_config_session_weight(&cfg, 65534), 1);
        ck_assert_uint_eq(hbgd_config_session_weight(&cfg, 1234), 1); /* not listed */
        static const char *const bad[] = { "0:0", "0:101", "0", ":3", "0:", "0:x", "0:2k", "0:-1",
                                           "no-such-user-hbg:2", "0:2 0:3" };
        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
                char text[128];
                snprintf(text, sizeof(text), "[scheduler]\nsession_weights = %s\n", bad[i]);
                ck_assert_msg(load(text, &cfg, err, sizeof(err)) == -EINVAL, "'%s' accepted", bad[i]);
                ck_assert_msg(strstr(err, "session_weights") || strstr(err, "unknown user"), "'%s': %s", bad[i], err);
        }
}
END_TEST

START_TEST(whole_file_errors) {
        struct hbgd_config cfg;
        char err[512] = "";
        /* Unknown key and section, with their line. */
        ck_assert_int_eq(load("[scheduler]\nthreads = 2\nthreadz = 3\n", &cfg, err, sizeof(err)), -EINVAL);
        ck_assert_ptr_nonnull(strstr(err, ":3: unknown key 'threadz'"));
        ck_assert_int_eq(load("[nope]\nx = 1\n", &cfg, err, sizeof(err)), -EINVAL);
        ck_assert_msg(strstr(err, ":1: unknown section [nope]") && !strchr(err, '\n'), "%s", err);
        /* A line that is not key = value. */
        ck_assert_int_eq(load("[scheduler]\nthreads\n", &cfg, err, sizeof(err)), -EINVAL);
        ck_assert_ptr_nonnull(strstr(err, ":2:"));
        /* Geometry checked as a whole: F > D. */
        ck_assert_int_eq(load("[session]\ntask_window = 1024\nflag_window = 4096\n", &cfg, err, sizeof(err)),
                         -EINVAL);
        ck_assert_ptr_nonnull(strstr(err, "flag_window"));
        /* Missing file. */
        hbgd_config_default(&cfg);
        ck_assert_int_eq(hbgd_config_load(&cfg, "/nonexistent/hbgd.conf", err, sizeof(err)), -ENOENT);
        ck_assert_ptr_nonnull(strstr(err, "/nonexistent/hbgd.conf"));
        /* A directory: said so, not "read error after line 0". */
        char dir[] = "/tmp/hbg-config-dir-XXXXXX";
        ck_assert_ptr_nonnull(mkdtemp(dir));
        hbgd_config_default(&cfg);
        int r = hbgd_config_load(&cfg, dir, err, sizeof(err));
        rmdir(dir);
        ck_assert_int_eq(r, -EISDIR);
        char want[64];
        snprintf(want, sizeof(want), "%s: is a directory", dir);
        ck_assert_msg(strncmp(err, want, strlen(want)) == 0 && !strstr(err, "read error"), "%s", err);
}
END_TEST

/* The lines of err (one problem each), counted; each of want[] must be
 * the start of one of them after "FILE:". */
static unsigned err_lines(const char *err) {
        unsigned n = err[0] ? 1 : 0;
        for (const char *p = err; *p; p++)
                n += *p == '\n';
        return n;
}

static void assert_has_line(const char *err, const char *want) {
        char needle[256];
        snprintf(needle, sizeof(needle), "%s:%s", path, want);
        const char *at = strstr(err, needle);
        ck_assert_msg(at && (at == err || at[-1] == '\n'), "no line '%s' in:\n%s", needle, err);
}

/* Every problem of a file, each with its own line, key and reason (not
 * the first only, not "syntax error" for the rest, not the message of one
 * line at another's number). */
START_TEST(every_error_reported) {
        struct hbgd_config cfg, dflt;
        char err[4096] = "";
        hbgd_config_default(&dflt);
        ck_assert_int_eq(load("; broken\n"                    /* 1 */
                              "[scheduler]\n"                 /* 2 */
                              "completion_mode = fast\n"      /* 3 */
                              "threads = 99\n"                /* 4 */
                              "clusters = 4\n"                /* 5: fine */
                              "[sesion]\n"                    /* 6 */
                              "x = 1\n"                       /* 7: in the unknown section, not reported */
                              "[session]\n"                   /* 8 */
                              "heap_size = 16MB\n"            /* 9 */
                              "[limits]\n"                    /* 10 */
                              "max_sessions = -1\n"           /* 11 */
                              "bogus = 2\n"                   /* 12 */
                              "[log]\n"                       /* 13 */
                              "level = verbose\n",            /* 14 */
                              &cfg, err, sizeof(err)),
                         -EINVAL);
        assert_has_line(err, "3: completion_mode: 'fast' is not one of");
        assert_has_line(err, "4: threads: '99' is not a number from 1 to 64");
        assert_has_line(err, "6: unknown section [sesion]");
        assert_has_line(err, "9: heap_size: '16MB' is not a number from 0 to");
        assert_has_line(err, "11: max_sessions: '-1' is not a number from 0 to 65536");
        assert_has_line(err, "12: unknown key 'bogus' in section [limits]");
        assert_has_line(err, "14: level: 'verbose' is not one of");
        ck_assert_msg(err_lines(err) == 7, "want 7 lines:\n%s", err);
        ck_assert_msg(!strstr(err, "syntax error"), "%s", err);
        ck_assert_msg(memcmp(&cfg, &dflt, sizeof(cfg)) == 0, "a failing file changed the config");

        /* A section given again: said, and its keys still checked. */
        ck_assert_int_eq(load("[access]\n"                     /* 1 */
                              "visibility = own\n"             /* 2 */
                              "[log]\n"                        /* 3 */
                              "[access]\n"                     /* 4 */
                              "visibility = mine\n"            /* 5 */
                              "bogus = 1\n"                    /* 6 */
                              "admin_groups = root\n"          /* 7: fine */
                              "[log]\n"                        /* 8 */
                              "level = loud\n",                /* 9 */
                              &cfg, err, sizeof(err)),
                         -EINVAL);
        assert_has_line(err, "4: section [access] given again (first on line 1)");
        assert_has_line(err, "5: visibility: given again in [access] (first on line 2)");
        assert_has_line(err, "6: unknown key 'bogus' in section [access]");
        assert_has_line(err, "8: section [log] given again (first on line 3)");
        assert_has_line(err, "9: level: 'loud' is not one of");
        ck_assert_msg(err_lines(err) == 5, "want 5 lines:\n%s", err);

        /* Text after a header's ']': said, and the section still taken,
         * so its keys and a second header of it are checked too. */
        ck_assert_int_eq(load("[scheduler] junk\n"             /* 1 */
                              "threads = 999\n"                /* 2 */
                              "[scheduler]\n"                  /* 3 */
                              "clusters = 0\n",                /* 4 */
                              &cfg, err, sizeof(err)),
                         -EINVAL);
        assert_has_line(err, "1: text after ']' in the header of section [scheduler]: 'junk'");
        assert_has_line(err, "2: threads: '999' is not a number from 1 to 64");
        assert_has_line(err, "3: section [scheduler] given again (first on line 1)");
        assert_has_line(err, "4: clusters: '0' is not a number from 1 to");
        ck_assert_msg(err_lines(err) == 4, "want 4 lines:\n%s", err);

        /* The case: the range at the line of the value. */
        ck_assert_int_eq(load("[scheduler]\nthreads = 99\nclusters = 4\n", &cfg, err, sizeof(err)), -EINVAL);
        assert_has_line(err, "2: threads: '99' is not a number from 1 to 64");
        ck_assert_uint_eq(err_lines(err), 1);

        /* Rules of the settings together, at the line of the key they
         * name; a default heap or window every session would be refused. */
        ck_assert_int_eq(load("[scheduler]\n"                  /* 1 */
                              "threads = 1\n"                  /* 2 */
                              "completion_mode = resolver\n"   /* 3 */
                              "[session]\n"                    /* 4 */
                              "task_window = 1000\n"           /* 5 */
                              "heap_size = 1G\n"               /* 6 */
                              "[limits]\n"                     /* 7 */
                              "max_heap_size = 64M\n",         /* 8 */
                              &cfg, err, sizeof(err)),
                         -EINVAL);
        assert_has_line(err, "3: completion_mode resolver: needs at least 2 threads");
        assert_has_line(err, "5: task_window: must be a power of two");
        assert_has_line(err, "6: heap_size: 1073741824 is above [limits] max_heap_size");
        ck_assert_msg(err_lines(err) == 3, "want 3 lines:\n%s", err);

        /* More problems than err holds: the last line counts the rest. */
        char big[8192] = "[limits]\n";
        for (int i = 0; i < 100; i++)
                strcat(big, "nope = 1\n");
        char small[300];
        ck_assert_int_eq(load(big, &cfg, small, sizeof(small)), -EINVAL);
        ck_assert_msg(strstr(small, "more errors not shown"), "%s", small);
        assert_has_line(small, "2: unknown key 'nope'");
}
END_TEST

/* The shape of the file: sections once each, nothing after ']' but a
 * comment, keys once each and inside a section. */
START_TEST(strict_structure) {
        struct hbgd_config cfg;
        char err[4096] = "";
        static const struct {
                const char *text, *want; /* want: "LINE: start of the message" */
        } bad[] = {
                { "[scheduler]\nthreads = 2\n[limits]\n[scheduler]\n", "4: section [scheduler] given again (first on line 1)" },
                { "[access] apply to new sessions at once; [scheduler] needs a restart.\n",
                  "1: text after ']' in the header of section [access]: 'apply to new sessions at once;" },
                { "[access\n", "1: '[access': a section header needs a closing ']'" },
                { "threads = 2\n", "1: key 'threads' before any [section]" },
                { "[scheduler]\nthreads = 2\nthreads = 3\n", "3: threads: given again in [scheduler] (first on line 2)" },
                { "[scheduler]\nthreads\n", "2: 'threads' is not KEY = VALUE" },
                { "[scheduler]\n= 2\n", "2: no key before '='" },
                { "[session]\n[daemon]\nx = 1\n", "2: unknown section [daemon] (the sections are scheduler, session," },
        };
        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
                ck_assert_msg(load(bad[i].text, &cfg, err, sizeof(err)) == -EINVAL, "accepted: %s", bad[i].text);
                assert_has_line(err, bad[i].want);
                ck_assert_msg(err_lines(err) == 1, "one problem, more lines:\n%s", err);
        }
        /* A line too long, a NUL byte. */
        char longline[1400];
        memset(longline, 'x', sizeof(longline));
        memcpy(longline, "[log]\nlevel = ", 14);
        strcpy(longline + sizeof(longline) - 2, "\n");
        ck_assert_int_eq(load(longline, &cfg, err, sizeof(err)), -EINVAL);
        assert_has_line(err, "2: line longer than");
        snprintf(path, sizeof(path), "/tmp/hbg-config-XXXXXX");
        int fd = mkstemp(path);
        ck_assert_int_ge(fd, 0);
        ck_assert_int_eq(write(fd, "[log]\nlevel\0 = debug\n", 21), 21);
        close(fd);
        hbgd_config_default(&cfg);
        ck_assert_int_eq(hbgd_config_load(&cfg, path, err, sizeof(err)), -EINVAL);
        unlink(path);
        assert_has_line(err, "2: a NUL byte in the line");

        /* What is fine: comments after ']' and after a value, a BOM, CRLF
         * line ends, blank and indented lines. */
        ck_assert_msg(load("\xef\xbb\xbf; hbgd.conf\r\n[scheduler]  ; the threads\r\n  threads = 3 ; three\r\n\r\n"
                           "[log] # the log\nlevel = debug # all\n",
                           &cfg, err, sizeof(err)) == 0,
                      "%s", err);
        ck_assert_uint_eq(cfg.engine.threads, 3);
        ck_assert_int_eq(cfg.log_level, LOG_DEBUG);
}
END_TEST

/* [socket] mode and group: octal, as the unit's defaults. */
START_TEST(socket_keys) {
        struct hbgd_config cfg;
        char err[512] = "";
        hbgd_config_default(&cfg);
        ck_assert_uint_eq(cfg.socket_mode, 0660);
        ck_assert_str_eq(cfg.socket_group, "hbg");
        ck_assert_int_eq(load("[socket]\nmode = 0770\ngroup = 0\n", &cfg, err, sizeof(err)), 0);
        ck_assert_uint_eq(cfg.socket_mode, 0770);
        ck_assert_str_eq(cfg.socket_group, "0");
        ck_assert_int_eq(load("[socket]\nmode = 600\ngroup =\n", &cfg, err, sizeof(err)), 0);
        ck_assert_uint_eq(cfg.socket_mode, 0600);
        ck_assert_str_eq(cfg.socket_group, "");
        static const char *const bad[] = { "8", "01000", "rw", "-1", "", "0x1ff" };
        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
                char text[64];
                snprintf(text, sizeof(text), "[socket]\nmode = %s\n", bad[i]);
                ck_assert_msg(load(text, &cfg, err, sizeof(err)) == -EINVAL, "mode '%s' accepted", bad[i]);
                ck_assert_msg(strstr(err, ":2: mode: ") && strstr(err, "from 0 to 0777"), "%s", err);
        }
}
END_TEST

/* The example installed as /etc/hbg/hbgd.conf (and the fuzz corpus's
 * copy) reads with this parser: each section once, no stray text, every
 * key known. */
START_TEST(shipped_example) {
        static const char *const files[] = { "systemd/hbgd.conf.example", "tests/fuzz/corpus/config/example.conf" };
        for (size_t i = 0; i < sizeof(files) / sizeof(files[0]); i++) {
                char p[512], err[4096] = "";
                snprintf(p, sizeof(p), "%s/%s", HBG_SRCDIR, files[i]);
                struct hbgd_config cfg, dflt;
                hbgd_config_default(&cfg);
                hbgd_config_default(&dflt);
                ck_assert_msg(hbgd_config_load(&cfg, p, err, sizeof(err)) == 0, "%s:\n%s", files[i], err);
                /* Every value in it is commented out: the defaults. */
                ck_assert_msg(memcmp(&cfg, &dflt, sizeof(cfg)) == 0, "%s changes a default", files[i]);
        }
}
END_TEST

/* [session] flag_window follows a task_window set alone (as a session's
 * request's does); one set alone above the (default) task window is
 * refused at its line, naming both values and what to set. */
START_TEST(flag_window_follows_task_window) {
        struct hbgd_config cfg;
        char err[512] = "";
        ck_assert_int_eq(load("[session]\ntask_window = 16384\n", &cfg, err, sizeof(err)), 0);
        ck_assert_uint_eq(cfg.session_default.task_window, 16384);
        ck_assert_uint_eq(cfg.session_default.flag_window, 16384);
        ck_assert_int_eq(load("[session]\ntask_window = 1024\n", &cfg, err, sizeof(err)), 0);
        ck_assert_uint_eq(cfg.session_default.flag_window, 1024);
        ck_assert_int_eq(load("[session]\ntask_window = 16384\nflag_window = 2048\n", &cfg, err, sizeof(err)), 0);
        ck_assert_uint_eq(cfg.session_default.flag_window, 2048);
        ck_assert_int_eq(load("[session]\nflag_window = 16384\n", &cfg, err, sizeof(err)), -EINVAL);
        ck_assert_msg(strstr(err, ":2: flag_window: 16384 is above the default task_window (4096): set [session] "
                                  "task_window to 16384 or more too"), "%s", err);
        ck_assert_int_eq(load("[session]\ntask_window = 8192\nflag_window = 16384\n", &cfg, err, sizeof(err)), -EINVAL);
        ck_assert_msg(strstr(err, ":3: flag_window: 16384 is above task_window (8192)"), "%s", err);
}
END_TEST

/* [limits] kernel_time_budget_ms: 10 s by default, 1 ms to an hour, and
 * no value that turns it off. */
START_TEST(kernel_time_budget) {
        struct hbgd_config cfg;
        char err[512] = "";
        hbgd_config_default(&cfg);
        ck_assert_uint_eq(cfg.engine.kernel_time_budget_ms, 10000);
        ck_assert_int_eq(load("[limits]\nkernel_time_budget_ms = 1\n", &cfg, err, sizeof(err)), 0);
        ck_assert_uint_eq(cfg.engine.kernel_time_budget_ms, 1);
        ck_assert_int_eq(load("[limits]\nkernel_time_budget_ms = 3600000\n", &cfg, err, sizeof(err)), 0);
        ck_assert_uint_eq(cfg.engine.kernel_time_budget_ms, 3600000);
        /* --check-config shows it as the file says it. */
        size_t i = 0;
        while (hbgd_config_key_at(i) && strcmp(hbgd_config_key_at(i)->key, "kernel_time_budget_ms") != 0)
                i++;
        char v[64];
        ck_assert_int_eq(hbgd_config_format(&cfg, i, v, sizeof(v)), 0);
        ck_assert_str_eq(v, "3600000");
        static const char *const bad[] = { "0", "3600001", "-5", "1x", "" };
        for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
                char text[96];
                snprintf(text, sizeof(text), "[limits]\nkernel_time_budget_ms = %s\n", bad[i]);
                ck_assert_msg(load(text, &cfg, err, sizeof(err)) == -EINVAL, "'%s' accepted", bad[i]);
                ck_assert_msg(strstr(err, "kernel_time_budget_ms"), "'%s': error does not name the key: %s",
                              bad[i], err);
        }
}
END_TEST

/* The settings as --check-config says them (hbgd.c's print_config(),
 * without its comment lines): every key of the table, by section. */
static void format_all(const struct hbgd_config *cfg, char *text, size_t len) {
        size_t used = 0;
        const char *section = "";
        for (size_t i = 0; hbgd_config_key_at(i); i++) {
                const struct hbgd_config_key *k = hbgd_config_key_at(i);
                char value[1024];
                ck_assert_int_eq(hbgd_config_format(cfg, i, value, sizeof(value)), 0);
                int n = snprintf(text + used, len - used, "%s%s%s%s = %s\n", strcmp(section, k->section) ? "[" : "",
                                 strcmp(section, k->section) ? k->section : "",
                                 strcmp(section, k->section) ? "]\n" : "", k->key, value);
                ck_assert(n > 0 && (size_t)n < len - used);
                used += (size_t)n;
                section = k->section;
        }
}

/* What is said back reads back as the same settings. */
static void assert_round_trip(const struct hbgd_config *cfg) {
        static char text[16384];
        char err[1024] = "";
        struct hbgd_config back;
        format_all(cfg, text, sizeof(text));
        ck_assert_msg(load(text, &back, err, sizeof(err)) == 0, "%s\nin:\n%s", err, text);
        for (size_t i = 0; hbgd_config_key_at(i); i++) {
                char said[1024], again[1024];
                hbgd_config_format(cfg, i, said, sizeof(said));
                hbgd_config_format(&back, i, again, sizeof(again));
                ck_assert_msg(strcmp(said, again) == 0, "%s = %s read back as %s", hbgd_config_key_at(i)->key,
                              said, again);
        }
        ck_assert_msg(memcmp(&back, cfg, sizeof(back)) == 0, "read back as other settings:\n%s", text);
}

START_TEST(defaults_round_trip) {
        struct hbgd_config cfg;
        hbgd_config_default(&cfg);
        assert_round_trip(&cfg);
}
END_TEST

/* Every key's valid case above at once: a value other than the default
 * for every key, so for every type of key. */
START_TEST(values_round_trip) {
        static char text[8192];
        size_t used = 0;
        for (size_t j = 0; j < sizeof(keys) / sizeof(keys[0]); j++) {
                bool new_section = j == 0 || strcmp(keys[j - 1].section, keys[j].section) != 0;
                used += (size_t)snprintf(text + used, sizeof(text) - used, "%s%s%s%s = %s\n",
                                         new_section ? "[" : "", new_section ? keys[j].section : "",
                                         new_section ? "]\n" : "", keys[j].key, keys[j].good);
                ck_assert(used < sizeof(text));
        }
        struct hbgd_config cfg, dflt;
        char err[1024] = "";
        ck_assert_msg(load(text, &cfg, err, sizeof(err)) == 0, "%s\nin:\n%s", err, text);
        hbgd_config_default(&dflt);
        bool type_seen[KEY_TYPES] = { false };
        for (size_t i = 0; i < config_n_keys; i++) {
                char set[1024], dv[1024];
                hbgd_config_format(&cfg, i, set, sizeof(set));
                hbgd_config_format(&dflt, i, dv, sizeof(dv));
                ck_assert_msg(strcmp(set, dv) != 0, "%s = %s is the default", config_keys[i].name.key, set);
                type_seen[config_keys[i].type] = true;
        }
        for (int t = 0; t < KEY_TYPES; t++)
                ck_assert_msg(type_seen[t], "no key of type %d in the table", t);
        assert_round_trip(&cfg);
}
END_TEST

/* Every key of hbgd's table has a case above, and is documented in the
 * three places an operator looks: OPERATIONS.md, hbgd.conf(5) and the
 * example file; the limits in SECURITY.md too. */
static bool file_has(const char *rel, const char *needle) {
        char p[512];
        snprintf(p, sizeof(p), "%s/%s", HBG_SRCDIR, rel);
        FILE *f = fopen(p, "r");
        ck_assert_msg(f, "cannot open %s", p);
        static char buf[1 << 17];
        size_t n = fread(buf, 1, sizeof(buf) - 1, f);
        fclose(f);
        buf[n] = 0;
        return strstr(buf, needle) != NULL;
}

START_TEST(every_key_tested_and_documented) {
        for (size_t i = 0; hbgd_config_key_at(i); i++) {
                const struct hbgd_config_key *k = hbgd_config_key_at(i);
                bool tested = false;
                for (size_t j = 0; j < sizeof(keys) / sizeof(keys[0]); j++)
                        tested |= strcmp(keys[j].section, k->section) == 0 && strcmp(keys[j].key, k->key) == 0;
                ck_assert_msg(tested, "[%s] %s has no case in this test", k->section, k->key);
                char md[96], man[96], ex[96];
                snprintf(md, sizeof(md), "| %s | `%s` |", k->section, k->key);
                snprintf(man, sizeof(man), ".BR %s \"", k->key);
                snprintf(ex, sizeof(ex), ";%s = ", k->key);
                ck_assert_msg(file_has("docs/OPERATIONS.md", md), "[%s] %s missing from OPERATIONS.md",
                              k->section, k->key);
                ck_assert_msg(file_has("docs/man/hbgd.conf.5", man), "%s missing from hbgd.conf.5", k->key);
                ck_assert_msg(file_has("systemd/hbgd.conf.example", ex), "%s missing from hbgd.conf.example",
                              k->key);
                /* Each limit also has its row (default, test) in SECURITY.md. */
                char sec[96];
                snprintf(sec, sizeof(sec), "| `%s` |", k->key);
                ck_assert_msg(strcmp(k->section, "limits") != 0 || file_has("docs/SECURITY.md", sec),
                              "[limits] %s missing from SECURITY.md's table of limits", k->key);
        }
}
END_TEST

static Suite *suite(void) {
        Suite *s = suite_create("config");
        TCase *tc = tcase_create("config");
        tcase_add_loop_test(tc, each_key, 0, (int)(sizeof(keys) / sizeof(keys[0])));
        tcase_add_test(tc, long_lists_name_their_key);
        tcase_add_test(tc, values_applied);
        tcase_add_test(tc, session_weights);
        tcase_add_test(tc, whole_file_errors);
        tcase_add_test(tc, every_error_reported);
        tcase_add_test(tc, strict_structure);
        tcase_add_test(tc, socket_keys);
        tcase_add_test(tc, shipped_example);
        tcase_add_test(tc, kernel_time_budget);
        tcase_add_test(tc, flag_window_follows_task_window);
        tcase_add_test(tc, defaults_round_trip);
        tcase_add_test(tc, values_round_trip);
        tcase_add_test(tc, every_key_tested_and_documented);
        suite_add_tcase(s, tc);
        return s;
}

const struct check_main check_main = { .suite = suite };
