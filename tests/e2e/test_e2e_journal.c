/* SPDX-License-Identifier: MIT */
/*
 * hbgd's log lines as the journal and a terminal get them
 * (docs/OPERATIONS.md, "Logs"):
 *   fields    this test binds an AF_UNIX datagram socket, starts a real
 *             hbgd with [log] journal_socket naming it, and reads what
 *             hbgd sends there in the journal's native protocol: a kernel
 *             failing (EIO) and a task failing validation (ERANGE) each
 *             give a line with MESSAGE, PRIORITY, SYSLOG_IDENTIFIER,
 *             HBG_SESSION, HBG_PID, HBG_GRAPH, HBG_TASK, HBG_KERNEL and
 *             ERRNO of the values this test knows; a refused session one
 *             with ERRNO; a session name holding a newline, a C1 CSI and
 *             a byte that is not UTF-8 arrives as valid UTF-8 with its
 *             controls escaped, as on stderr (docs/SECURITY.md, "Strings
 *             from clients");
 *   terminal  hbgd with a pseudo-terminal as stderr writes "hbgd: ..."
 *             lines without <N> prefixes; with a file as stderr, "<N>hbgd:".
 *   limits    (as root, acting as another uid) the log's rate limits
 *             cannot be reset by session ids: two sessions of one uid whose
 *             ids differ by 64 (63 connections opened between them), taking
 *             turns at failing graphs, each get ratelimit_burst lines
 *             (session_ids_64_apart); eight sessions of one uid at once,
 *             then eight more one after the other, together get
 *             ratelimit_burst_per_uid (sessions_of_one_uid); counted in
 *             lines, in one window far longer than the test.
 *   writer    hbgd's stderr a pipe nobody reads, with every line logged:
 *             while a client floods it with failing graphs, hbgd answers
 *             status requests and runs another uid's graphs right, counts
 *             the lines it dropped in hbgctl status, and says so in the log
 *             once the pipe is read (stderr_not_read).
 */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <pty.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "hbg/hbg.h"
#include "tests/e2e/daemon_util.h"
#include "tests/e2e/e2e_kid.h"
#include "tests/e2e/e2e_util.h"
#include "tests/check_main.h"

/* ------------------------------------------------------------ a journal entry */

#define MAX_FIELDS 32

struct field {
        char key[64];
        char value[1200];
        size_t len;
};

struct entry {
        struct field f[MAX_FIELDS];
        unsigned n;
};

/* One datagram of the native protocol: KEY=value\n, or KEY\n, a 64-bit
 * little-endian length, the value and \n. */
static void parse_entry(const uint8_t *buf, size_t len, struct entry *e) {
        memset(e, 0, sizeof(*e));
        size_t i = 0;
        while (i < len) {
                ck_assert_uint_lt(e->n, MAX_FIELDS);
                struct field *f = &e->f[e->n++];
                size_t k = i;
                while (i < len && buf[i] != '=' && buf[i] != '\n')
                        i++;
                ck_assert_msg(i < len && i > k && i - k < sizeof(f->key), "a field without a key or end");
                memcpy(f->key, buf + k, i - k);
                for (size_t j = 0; f->key[j]; j++)
                        ck_assert_msg((f->key[j] >= 'A' && f->key[j] <= 'Z') || f->key[j] == '_' ||
                                              (f->key[j] >= '0' && f->key[j] <= '9'),
                                      "bad key %s", f->key);
                if (buf[i] == '=') {
                        size_t v = ++i;
                        while (i < len && buf[i] != '\n')
                                i++;
                        ck_assert_msg(i < len, "field %s: no newline at its end", f->key);
                        f->len = i - v;
                        ck_assert_uint_lt(f->len, sizeof(f->value));
                        memcpy(f->value, buf + v, f->len);
                        i++;
                } else {
                        i++;
                        ck_assert_msg(len - i >= 8, "field %s: no length", f->key);
                        uint64_t n = 0;
                        for (unsigned b = 0; b < 8; b++)
                                n |= (uint64_t)buf[i + b] << (8 * b);
                        i += 8;
                        ck_assert_msg(n < sizeof(f->value) && len - i >= n + 1 && buf[i + n] == '\n',
                                      "field %s: bad binary value", f->key);
                        memcpy(f->value, buf + i, n);
                        f->len = n;
                        i += n + 1;
                }
        }
}

static const char *field(const struct entry *e, const char *key) {
        for (unsigned i = 0; i < e->n; i++)
                if (strcmp(e->f[i].key, key) == 0)
                        return e->f[i].value;
        return NULL;
}

#define MAX_ENTRIES 256

struct journal {
        int fd;
        char path[108];
        struct entry *e;
        unsigned n;
};

static void journal_open(struct journal *j, const char *dir) {
        j->fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
        ck_assert_int_ge(j->fd, 0);
        struct sockaddr_un sa = { .sun_family = AF_UNIX };
        snprintf(j->path, sizeof(j->path), "%s/journal", dir);
        snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", j->path);
        ck_assert_int_eq(bind(j->fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
        j->e = calloc(MAX_ENTRIES, sizeof(*j->e));
        ck_assert_ptr_nonnull(j->e);
        j->n = 0;
}

static void journal_close(struct journal *j) {
        close(j->fd);
        unlink(j->path);
        free(j->e);
}

/* Read entries until one satisfies match() or timeout_ms pass: it, or NULL. */
static const struct entry *journal_find(struct journal *j, bool (*match)(const struct entry *, const void *),
                                        const void *arg, int timeout_ms) {
        for (unsigned i = 0; i < j->n; i++)
                if (match(&j->e[i], arg))
                        return &j->e[i];
        long long end = daemon_now_ms() + timeout_ms;
        for (;;) {
                long long left = end - daemon_now_ms();
                struct pollfd p = { .fd = j->fd, .events = POLLIN };
                if (left <= 0 || poll(&p, 1, (int)left) <= 0)
                        return NULL;
                static uint8_t buf[1 << 16];
                ssize_t n = recv(j->fd, buf, sizeof(buf), MSG_DONTWAIT);
                if (n < 0)
                        continue;
                ck_assert_uint_lt(j->n, MAX_ENTRIES);
                struct entry *e = &j->e[j->n++];
                parse_entry(buf, (size_t)n, e);
                ck_assert_msg(field(e, "MESSAGE") && field(e, "PRIORITY"), "an entry without MESSAGE or PRIORITY");
                ck_assert_str_eq(field(e, "SYSLOG_IDENTIFIER"), "hbgd");
                if (match(e, arg))
                        return e;
        }
}

static bool message_has(const struct entry *e, const void *needle) {
        const char *m = field(e, "MESSAGE");
        return m && strstr(m, needle);
}

static bool graph_is(const struct entry *e, const void *graph) {
        const char *g = field(e, "HBG_GRAPH");
        return g && strcmp(g, graph) == 0;
}

static void expect_field(struct hbgd_proc *d, const struct entry *e, const char *key, const char *want) {
        const char *v = field(e, key);
        D_ASSERT(d, v && strcmp(v, want) == 0, "%s: %s instead of %s in the entry '%s'", key, v ? v : "(none)", want,
                 field(e, "MESSAGE"));
}

static void expect_u64(struct hbgd_proc *d, const struct entry *e, const char *key, uint64_t want) {
        char buf[32];
        snprintf(buf, sizeof(buf), "%" PRIu64, want);
        expect_field(d, e, key, buf);
}

/* ------------------------------------------------------------ fields */

static hbg_task fail_task(int64_t code) {
        hbg_task t = HBG_TASK_INIT("fail");
        t.n_scalars = 1;
        t.scalars[0] = (uint64_t)code;
        return t;
}

/* One fail task as a graph: its graph number and task id; the graph
 * must fail with want. */
static void failing_graph(struct hbgd_proc *d, hbg_client *c, int64_t code, int want, uint64_t *ret_graph,
                          uint64_t *ret_task) {
        hbg_task t = fail_task(code);
        ck_assert_int_eq(hbg_graph_add(c, &t, ret_task), 0);
        ck_assert_int_eq(hbg_graph_submit(c, ret_graph), 0);
        int err = hbg_graph_wait(c, *ret_graph, WAIT_MS);
        D_ASSERT(d, err == want, "graph of fail(%" PRId64 "): %s", code, hbg_strerror(err));
}

/* The session id hbgd gave this process's session. */
static uint64_t my_session(struct hbgd_proc *d) {
        int fd = raw_connect(d->socket_path);
        raw_hello(fd);
        Hbg__Envelope *r = status_of(d, fd, HBG__STATUS_KIND__STATUS_SESSIONS);
        uint64_t id = 0;
        for (size_t i = 0; i < r->status_reply->n_sessions; i++)
                if (r->status_reply->sessions[i]->pid == (uint32_t)getpid())
                        id = r->status_reply->sessions[i]->session_id;
        wire_free(r);
        close(fd);
        D_ASSERT(d, id != 0, "no session of pid %d listed", (int)getpid());
        return id;
}

START_TEST(fields) {
        char dir[] = "/tmp/hbg-journal.XXXXXX";
        ck_assert_ptr_nonnull(mkdtemp(dir));
        struct journal j;
        journal_open(&j, dir);
        char conf[256];
        snprintf(conf, sizeof(conf), "[log]\njournal_socket = %s\n", j.path);
        struct hbgd_proc *d = start_hbgd_conf(MODE_URING, conf);
        char pid[16];
        snprintf(pid, sizeof(pid), "%d", (int)getpid());

        const struct entry *e = journal_find(&j, message_has, "ready:", IO_MS);
        D_ASSERT(d, e, "no 'ready:' entry on the journal socket");
        expect_field(d, e, "PRIORITY", "6");

        hbg_connect_options o = HBG_CONNECT_OPTIONS_INIT;
        o.socket_path = d->socket_path;
        o.name = "two\nlines\xc2\x9b\xff";
        hbg_client *c = NULL;
        int err = hbg_connect_opts(&c, &o);
        D_ASSERT(d, err == 0, "hbg_connect: %s", hbg_strerror(err));
        uint64_t session = my_session(d);
        /* hbgd kept the name as UTF-8 (U+FFFD for the stray byte); the
         * line shows its controls escaped */
        e = journal_find(&j, message_has, "two\\x0alines\\u009b\xef\xbf\xbd", IO_MS);
        D_ASSERT(d, e, "no entry with the session's name escaped");
        expect_u64(d, e, "HBG_SESSION", session);
        const unsigned char *m = (const unsigned char *)field(e, "MESSAGE");
        D_ASSERT(d, m, "no MESSAGE");
        for (size_t i = 0; m && m[i]; i++)
                D_ASSERT(d, m[i] >= 0x20 && m[i] != 0x7f && !(m[i] == 0xc2 && m[i + 1] >= 0x80 && m[i + 1] <= 0x9f),
                         "a control at byte %zu of MESSAGE: %s", i, (const char *)m);

        /* A kernel failing, then a task failing validation. */
        uint64_t g1, t1, g2, t2;
        failing_graph(d, c, -EIO, -EIO, &g1, &t1);
        failing_graph(d, c, 0, -ERANGE, &g2, &t2);
        char graph[32];
        snprintf(graph, sizeof(graph), "%" PRIu64, g1);
        e = journal_find(&j, graph_is, graph, IO_MS);
        D_ASSERT(d, e, "no entry with HBG_GRAPH=%s (the kernel's failure)", graph);
        D_ASSERT(d, strstr(field(e, "MESSAGE"), "failed"), "message: %s", field(e, "MESSAGE"));
        expect_field(d, e, "PRIORITY", "5");
        expect_u64(d, e, "HBG_SESSION", session);
        expect_field(d, e, "HBG_PID", pid);
        expect_u64(d, e, "HBG_TASK", t1);
        expect_field(d, e, "HBG_KERNEL", "fail");
        expect_u64(d, e, "ERRNO", EIO);

        snprintf(graph, sizeof(graph), "%" PRIu64, g2);
        e = journal_find(&j, graph_is, graph, IO_MS);
        D_ASSERT(d, e, "no entry with HBG_GRAPH=%s (the validator's failure)", graph);
        expect_field(d, e, "PRIORITY", "5");
        expect_u64(d, e, "HBG_SESSION", session);
        expect_u64(d, e, "HBG_TASK", t2);
        expect_field(d, e, "HBG_KERNEL", "fail");
        expect_u64(d, e, "ERRNO", ERANGE);

        /* A session refused: too large a task window. */
        o = HBG_CONNECT_OPTIONS_INIT;
        o.socket_path = d->socket_path;
        o.task_window = UINT64_C(1) << 21;
        hbg_client *big = NULL;
        err = hbg_connect_opts(&big, &o);
        D_ASSERT(d, err == -E2BIG, "the session too large: %s", hbg_strerror(err));
        e = journal_find(&j, message_has, "refused", IO_MS);
        D_ASSERT(d, e, "no entry for the refused session");
        expect_u64(d, e, "ERRNO", E2BIG);
        expect_field(d, e, "HBG_PID", pid);
        D_ASSERT(d, field(e, "HBG_SESSION") && strcmp(field(e, "HBG_SESSION"), "0") != 0,
                 "the refused session's line names no connection");

        hbg_disconnect(c);
        stop_hbgd(d);
        journal_close(&j);
        rmdir(dir);
}
END_TEST

/* ------------------------------------------------------------ terminal */

/* Read from the pty until `needle` was seen (true) or timeout_ms passed
 * or the other side closed (false); what was read is appended to buf. */
static bool pty_read_until(int fd, char *buf, size_t size, const char *needle, int timeout_ms) {
        long long end = daemon_now_ms() + timeout_ms;
        size_t len = strlen(buf);
        while (!strstr(buf, needle)) {
                long long left = end - daemon_now_ms();
                struct pollfd p = { .fd = fd, .events = POLLIN };
                if (left <= 0 || poll(&p, 1, (int)left) <= 0)
                        return false;
                ssize_t n = read(fd, buf + len, size - len - 1);
                if (n <= 0) /* EIO: the terminal's other side is gone */
                        return false;
                len += (size_t)n;
                buf[len] = 0;
        }
        return true;
}

START_TEST(terminal) {
        char dir[] = "/tmp/hbg-tty.XXXXXX", sock[64];
        ck_assert_ptr_nonnull(mkdtemp(dir));
        snprintf(sock, sizeof(sock), "%s/hbgd.sock", dir);
        int master;
        pid_t pid = forkpty(&master, NULL, NULL, NULL);
        ck_assert_int_ge(pid, 0);
        if (pid == 0) {
                prctl(PR_SET_PDEATHSIG, SIGKILL);
                unsetenv("NOTIFY_SOCKET");
                unsetenv("JOURNAL_STREAM");
                execl(daemon_binary(), "hbgd", "--socket", sock, "--threads", "1", (char *)NULL);
                _exit(127);
        }
        static char out[1 << 16];
        out[0] = 0;
        bool ready = pty_read_until(master, out, sizeof(out), "ready:", 20000);
        ck_assert_msg(ready, "hbgd wrote no 'ready:' line to its terminal:\n%s", out);

        /* A failing graph: a notice line. */
        hbg_client *c = NULL;
        int err = hbg_connect(&c, sock);
        ck_assert_msg(err == 0, "hbg_connect: %s", hbg_strerror(err));
        hbg_task t = fail_task(-EIO);
        uint64_t g;
        ck_assert_int_eq(hbg_graph_add(c, &t, NULL), 0);
        ck_assert_int_eq(hbg_graph_submit(c, &g), 0);
        ck_assert_int_eq(hbg_graph_wait(c, g, WAIT_MS), -EIO);
        bool failed = pty_read_until(master, out, sizeof(out), "failed:", 20000);
        hbg_disconnect(c);
        kill(pid, SIGTERM);
        pty_read_until(master, out, sizeof(out), "\n(never)", 10000); /* to the end */
        int st;
        ck_assert_int_eq(waitpid(pid, &st, 0), pid);
        close(master);
        ck_assert_msg(failed, "no graph failure line on the terminal:\n%s", out);
        ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "hbgd on a terminal: wait status 0x%x", (unsigned)st);
        unsigned lines = 0;
        for (char *save = NULL, *line = strtok_r(out, "\r\n", &save); line; line = strtok_r(NULL, "\r\n", &save)) {
                ck_assert_msg(strncmp(line, "hbgd: ", 6) == 0, "a terminal line not 'hbgd: ...': %s", line);
                ck_assert_msg(!(line[0] == '<' && line[1] >= '0' && line[1] <= '7' && line[2] == '>'),
                              "a <N> prefix on a terminal: %s", line);
                lines++;
        }
        ck_assert_uint_ge(lines, 3); /* ready, failed, SIGTERM */
        unlink(sock);
        rmdir(dir);

        /* The same hbgd with a file as stderr: priority prefixes. */
        struct hbgd_proc *d = start_hbgd(MODE_URING, NULL);
        {
                FILE *f = fopen(d->log_path, "r");
                ck_assert_ptr_nonnull(f);
                char line[512];
                bool prefixed = false;
                while (fgets(line, sizeof(line), f))
                        prefixed |= strncmp(line, "<6>hbgd: ready:", 15) == 0;
                fclose(f);
                D_ASSERT(d, prefixed, "no '<6>hbgd: ready:' line in hbgd's log file");
        }
        stop_hbgd(d);
}
END_TEST

/* ------------------------------------------------------------ limits */

/* hbgd's log file, whole (NUL-terminated; free() it). */
static char *read_log(const struct hbgd_proc *d) {
        FILE *f = fopen(d->log_path, "re");
        ck_assert_msg(f, "%s: %s", d->log_path, strerror(errno));
        size_t cap = 1 << 16, n = 0;
        char *buf = malloc(cap);
        ck_assert_ptr_nonnull(buf);
        size_t r;
        while ((r = fread(buf + n, 1, cap - n - 1, f)) > 0) {
                n += r;
                if (cap - n - 1 == 0) {
                        cap *= 2;
                        buf = realloc(buf, cap);
                        ck_assert_ptr_nonnull(buf);
                }
        }
        fclose(f);
        buf[n] = 0;
        return buf;
}

/* Wait up to timeout_ms for a line holding needle in hbgd's log. */
static bool log_wait(const struct hbgd_proc *d, const char *needle, int timeout_ms) {
        long long end = daemon_now_ms() + timeout_ms;
        for (;;) {
                char *log = read_log(d);
                bool found = strstr(log, needle) != NULL;
                free(log);
                if (found || daemon_now_ms() >= end)
                        return found;
                sleep_us(20000);
        }
}

/* Is this line about session (its connection's lines and its ring's)?
 * The "messages suppressed" reports are not counted. */
static bool line_about(const char *line, size_t len, uint64_t session) {
        char l[1200], pat[2][64];
        snprintf(l, sizeof(l), "%.*s", (int)len, line);
        if (strstr(l, "messages suppressed"))
                return false;
        snprintf(pat[0], sizeof(pat[0]), "session %" PRIu64 " (", session);
        snprintf(pat[1], sizeof(pat[1]), "connection %" PRIu64 " (", session);
        return strstr(l, pat[0]) || strstr(l, pat[1]);
}

/* Lines of log about a connection or session of process pid (its
 * connections' lines and its rings'), the "messages suppressed" reports
 * not counted. */
static unsigned lines_of_pid(const char *log, pid_t pid) {
        char pat[2][64];
        snprintf(pat[0], sizeof(pat[0]), "(pid %d uid ", (int)pid);
        snprintf(pat[1], sizeof(pat[1]), " (pid %d): ", (int)pid);
        unsigned count = 0;
        for (const char *p = log; *p;) {
                const char *nl = strchr(p, '\n');
                size_t len = nl ? (size_t)(nl - p) : strlen(p);
                char l[1200];
                snprintf(l, sizeof(l), "%.*s", (int)len, p);
                count += !strstr(l, "messages suppressed") && (strstr(l, pat[0]) || strstr(l, pat[1]));
                p += len + (nl != NULL);
        }
        return count;
}

/* Lines of log about any of sessions[0..n). */
static unsigned lines_about(const char *log, const uint64_t *sessions, unsigned n) {
        unsigned count = 0;
        for (const char *p = log; *p;) {
                const char *nl = strchr(p, '\n');
                size_t len = nl ? (size_t)(nl - p) : strlen(p);
                for (unsigned i = 0; i < n; i++)
                        if (line_about(p, len, sessions[i])) {
                                count++;
                                break;
                        }
                p += len + (nl != NULL);
        }
        return count;
}

/* The ids of uid's sessions (STATUS_SESSIONS), in increasing order: how
 * many, at most max. */
static unsigned sessions_of(struct hbgd_proc *d, uid_t uid, uint64_t *ids, unsigned max) {
        int fd = raw_connect(d->socket_path);
        raw_hello(fd);
        Hbg__Envelope *r = status_of(d, fd, HBG__STATUS_KIND__STATUS_SESSIONS);
        unsigned n = 0;
        for (size_t i = 0; i < r->status_reply->n_sessions; i++)
                if (r->status_reply->sessions[i]->uid == (uint32_t)uid && n < max)
                        ids[n++] = r->status_reply->sessions[i]->session_id;
        wire_free(r);
        close(fd);
        for (unsigned i = 1; i < n; i++)
                for (unsigned j = i; j > 0 && ids[j - 1] > ids[j]; j--) {
                        uint64_t t = ids[j];
                        ids[j] = ids[j - 1];
                        ids[j - 1] = t;
                }
        return n;
}

/* A line hbgd logs after everything logged so far: a session of root
 * (held to no uid's limit) named `name`, opened and closed. Lines are
 * written in the order they are logged. */
static void log_mark(struct hbgd_proc *d, const char *name) {
        hbg_connect_options o = HBG_CONNECT_OPTIONS_INIT;
        o.socket_path = d->socket_path;
        o.name = name;
        hbg_client *c = NULL;
        int err = hbg_connect_opts(&c, &o);
        D_ASSERT(d, err == 0, "hbg_connect: %s", hbg_strerror(err));
        hbg_disconnect(c);
        char needle[96];
        snprintf(needle, sizeof(needle), ", %s): D=", name);
        D_ASSERT(d, log_wait(d, needle, IO_MS), "the session '%s' was not logged", name);
}

#define FLOOD_MAX_SESSIONS 16

struct flood {
        const char *path;
        unsigned sessions;      /* 1..FLOOD_MAX_SESSIONS */
        unsigned spacers;       /* connections opened between the first two sessions */
        unsigned graphs;        /* failing graphs per session; 0: until 'Q' */
        bool one_by_one;        /* each session opened, used and closed before the next */
};

/* One fail(-EIO) graph on c: 0, or -1 with why[]. */
static int fail_graph(hbg_client *c, char *why, size_t size) {
        hbg_task t = fail_task(-EIO);
        uint64_t g;
        int err = hbg_graph_add(c, &t, NULL);
        if (!err)
                err = hbg_graph_submit(c, &g);
        if (!err)
                err = hbg_graph_wait(c, g, IO_MS);
        if (err == -EIO)
                return 0;
        snprintf(why, size, "a graph of fail(-EIO) ended with %s", hbg_strerror(err));
        return -1;
}

/* f->one_by_one: on 'G', f->sessions sessions in turn, each connected,
 * failing f->graphs graphs and disconnected: "DONE n". */
static int flood_one_by_one(int sock, const struct flood *f) {
        char why[256];
        kid_say(sock, "READY");
        if (kid_cmd(sock) != 'G')
                return 1;
        unsigned long done = 0;
        for (unsigned i = 0; i < f->sessions; i++) {
                hbg_client *c = NULL;
                int err = hbg_connect(&c, f->path);
                if (err) {
                        kid_say(sock, "FAIL session %u: hbg_connect: %s", i, hbg_strerror(err));
                        return 1;
                }
                for (unsigned r = 0; r < f->graphs; r++, done++)
                        if (fail_graph(c, why, sizeof(why)) < 0) {
                                kid_say(sock, "FAIL session %u, graph %u: %s", i, r, why);
                                return 1;
                        }
                hbg_disconnect(c);
        }
        kid_say(sock, "DONE %lu", done);
        return 0;
}

/*
 * A client (as another uid): f->sessions sessions, f->spacers connections
 * opened and kept between the first and the second (so that their ids
 * differ by spacers + 1), "READY"; on 'G' failing graphs, the sessions
 * taking turns: f->graphs each, or until 'Q' ("DONE n").
 */
static int flood_fn(int sock, void *arg) {
        const struct flood *f = arg;
        if (f->one_by_one)
                return flood_one_by_one(sock, f);
        hbg_client *c[FLOOD_MAX_SESSIONS] = { NULL };
        int spacer[128];
        unsigned n_spacers = 0;
        char why[256];
        for (unsigned i = 0; i < f->sessions; i++) {
                int err = hbg_connect(&c[i], f->path);
                if (err) {
                        kid_say(sock, "FAIL session %u: hbg_connect: %s", i, hbg_strerror(err));
                        return 1;
                }
                while (i == 0 && n_spacers < f->spacers) {
                        int fd = cx_connect(f->path, false);
                        if (fd < 0) {
                                kid_say(sock, "FAIL connection %u: %s", n_spacers, strerror(-fd));
                                return 1;
                        }
                        spacer[n_spacers++] = fd;
                }
        }
        kid_say(sock, "READY");
        if (kid_cmd(sock) != 'G')
                return 1;
        unsigned long done = 0;
        for (unsigned r = 0; f->graphs ? r < f->graphs : !kid_cmd_pending(sock); r++)
                for (unsigned i = 0; i < f->sessions; i++, done++)
                        if (fail_graph(c[i], why, sizeof(why)) < 0) {
                                kid_say(sock, "FAIL session %u, graph %u: %s", i, r, why);
                                return 1;
                        }
        for (unsigned i = 0; i < n_spacers; i++)
                close(spacer[i]);
        for (unsigned i = 0; i < f->sessions; i++)
                hbg_disconnect(c[i]);
        kid_say(sock, "DONE %lu", done);
        return 0;
}

#define BURST 5
#define BURST_PER_UID 12
#define GRAPHS 60

/* Two sessions of one uid with ids 64 apart (the old limit kept 64 slots
 * by session id modulo 64, and a session taking a slot reset its window):
 * 2 x GRAPHS failing graphs in turns, each session's lines held to BURST. */
START_TEST(session_ids_64_apart) {
        struct hbgd_proc *d = start_hbgd_conf(MODE_URING, "[log]\nratelimit_interval_ms = 3600000\n"
                                                          "ratelimit_burst = 5\nratelimit_burst_per_uid = 1000\n"
                                                          "[limits]\nmax_connections_per_uid = 128\n");
        open_to_all(d);
        struct flood f = { .path = d->socket_path, .sessions = 2, .spacers = 63, .graphs = GRAPHS };
        struct kid k;
        char buf[512];
        kid_start(&k, NOBODY, flood_fn, &f);
        kid_expect(d, &k, "READY", WAIT_MS, buf, sizeof(buf), "the client");
        uint64_t ids[2];
        D_ASSERT(d, sessions_of(d, NOBODY, ids, 2) == 2, "the client's two sessions are not listed");
        D_ASSERT(d, ids[1] - ids[0] == 64, "session ids %" PRIu64 " and %" PRIu64 ", not 64 apart", ids[0], ids[1]);
        kid_tell(&k, 'G');
        const char *done = kid_expect(d, &k, "DONE", WAIT_MS, buf, sizeof(buf), "the client");
        D_ASSERT(d, strtoul(done, NULL, 10) == 2 * GRAPHS, "%s graphs failed, want %d", done, 2 * GRAPHS);
        kid_end(d, &k, IO_MS, "the client");
        log_mark(d, "mark-after-64-apart");
        char *log = read_log(d);
        for (unsigned i = 0; i < 2; i++) {
                unsigned n = lines_about(log, &ids[i], 1);
                fprintf(stderr, "session_ids_64_apart: %u lines about session %" PRIu64 " (%d failing graphs)\n", n,
                        ids[i], GRAPHS);
                D_ASSERT(d, n >= 1 && n <= BURST, "%u lines about session %" PRIu64 ", ratelimit_burst = %d", n,
                         ids[i], BURST);
        }
        free(log);
        /* What was left out is counted once the session is gone. */
        for (unsigned i = 0; i < 2; i++) {
                char needle[64];
                snprintf(needle, sizeof(needle), "session %" PRIu64 ": ", ids[i]);
                D_ASSERT(d, log_wait(d, needle, IO_MS), "no 'messages suppressed' line for session %" PRIu64, ids[i]);
                log = read_log(d);
                unsigned left_out = 0;
                const char *p = strstr(log, needle);
                D_ASSERT(d, p && sscanf(p + strlen(needle), "%u messages suppressed", &left_out) == 1 &&
                                    left_out >= GRAPHS + 1 - BURST,
                         "session %" PRIu64 ": %u lines counted as suppressed, want at least %d", ids[i], left_out,
                         GRAPHS + 1 - BURST);
                free(log);
        }
        stop_hbgd(d);
}
END_TEST

/* Eight sessions of one uid at once, GRAPHS / 8 failing graphs each (more
 * than BURST lines each), then eight more of that uid one after the other:
 * their lines together held to BURST_PER_UID (a uid's window outlives its
 * sessions). */
START_TEST(sessions_of_one_uid) {
        enum { SESSIONS = 8 };
        struct hbgd_proc *d = start_hbgd_conf(MODE_URING, "[log]\nratelimit_interval_ms = 3600000\n"
                                                          "ratelimit_burst = 5\nratelimit_burst_per_uid = 12\n");
        open_to_all(d);
        pid_t pids[2];
        for (unsigned round = 0; round < 2; round++) {
                struct flood f = { .path = d->socket_path, .sessions = SESSIONS, .graphs = GRAPHS / SESSIONS,
                                   .one_by_one = round == 1 };
                struct kid k;
                char buf[512];
                kid_start(&k, NOBODY, flood_fn, &f);
                pids[round] = k.pid;
                kid_expect(d, &k, "READY", WAIT_MS, buf, sizeof(buf), "the client");
                uint64_t ids[SESSIONS];
                D_ASSERT(d, round == 1 || sessions_of(d, NOBODY, ids, SESSIONS) == SESSIONS,
                         "the client's sessions are not all listed");
                kid_tell(&k, 'G');
                kid_expect(d, &k, "DONE", WAIT_MS, buf, sizeof(buf), "the client");
                kid_end(d, &k, IO_MS, "the client");
        }
        log_mark(d, "mark-after-one-uid");
        char *log = read_log(d);
        unsigned n0 = lines_of_pid(log, pids[0]), n1 = lines_of_pid(log, pids[1]);
        fprintf(stderr, "sessions_of_one_uid: %u + %u lines about 2 x %d sessions of uid %u\n", n0, n1, SESSIONS,
                (unsigned)NOBODY);
        D_ASSERT(d, n0 >= BURST && n0 + n1 <= BURST_PER_UID, "%u + %u lines about 2 x %d sessions of one uid, "
                 "ratelimit_burst_per_uid = %d", n0, n1, SESSIONS, BURST_PER_UID);
        free(log);
        stop_hbgd(d);
}
END_TEST

/* ------------------------------------------------------------ writer */

/* Bytes waiting in the pipe whose read end is fd. */
static int pipe_queued(int fd) {
        int n = 0;
        return ioctl(fd, FIONREAD, &n) == 0 ? n : -errno;
}

/* hbgd's DaemonStatus.log_lines_dropped, on a fresh connection. */
static uint64_t lines_dropped(struct hbgd_proc *d) {
        Hbg__Envelope *r = daemon_status_fresh(d);
        uint64_t n = r->status_reply->daemon->log_lines_dropped;
        wire_free(r);
        return n;
}

/* stderr a pipe of 4 KiB this test does not read, every line logged
 * (no rate limit): a client of another uid fails graphs without end. */
START_TEST(stderr_not_read) {
        int p[2];
        ck_assert_int_eq(pipe2(p, O_CLOEXEC), 0);
        int cap = fcntl(p[1], F_SETPIPE_SZ, 4096);
        ck_assert_int_gt(cap, 0);
        struct hbgd_proc *d = start_hbgd_conf_fd(MODE_URING, "[log]\nratelimit_interval_ms = 0\n", p[1]);
        close(p[1]);
        open_to_all(d);
        struct flood f = { .path = d->socket_path, .sessions = 1 };
        struct kid k;
        char buf[512];
        kid_start(&k, NOBODY, flood_fn, &f);
        kid_expect(d, &k, "READY", WAIT_MS, buf, sizeof(buf), "the flooding client");
        kid_tell(&k, 'G');

        /* The pipe fills, then hbgd's queue: lines are dropped. */
        long long end = daemon_now_ms() + WAIT_MS;
        uint64_t dropped;
        while ((dropped = lines_dropped(d)) == 0 && daemon_now_ms() < end)
                sleep_us(20000);
        int queued = pipe_queued(p[0]);
        fprintf(stderr, "stderr_not_read: %d bytes in the pipe, %" PRIu64 " lines dropped\n", queued, dropped);
        D_ASSERT(d, dropped > 0, "no log line dropped with stderr full (%d bytes in the pipe of %d)", queued, cap);

        /* hbgd goes on: status, and another uid's graphs, right, while the
         * failing graphs keep coming. */
        fresh_status(d, LIVE_MS, "stderr_not_read");
        honest_graphs(d, 20, "stderr_not_read");
        fresh_status(d, LIVE_MS, "stderr_not_read");
        end = daemon_now_ms() + WAIT_MS;
        uint64_t more;
        while ((more = lines_dropped(d)) == dropped && daemon_now_ms() < end)
                sleep_us(20000);
        D_ASSERT(d, more > dropped, "no more lines dropped while the client went on failing graphs");
        kid_tell(&k, 'Q');
        const char *done = kid_expect(d, &k, "DONE", WAIT_MS, buf, sizeof(buf), "the flooding client");
        fprintf(stderr, "stderr_not_read: the client failed %s graphs\n", done);
        kid_end(d, &k, IO_MS, "the flooding client");

        /* Read, the log catches up and says what it lost. */
        static char out[1 << 16];
        size_t len = 0;
        bool said = false;
        end = daemon_now_ms() + IO_MS;
        while (!said && daemon_now_ms() < end) {
                struct pollfd pf = { .fd = p[0], .events = POLLIN };
                if (poll(&pf, 1, 100) <= 0)
                        continue;
                ssize_t n = read(p[0], out + len, sizeof(out) - 1 - len);
                if (n <= 0)
                        break;
                len += (size_t)n;
                out[len] = 0;
                said = strstr(out, "log lines dropped: the log writer fell behind") != NULL;
                if (len > sizeof(out) / 2 && !said) { /* keep the tail */
                        memmove(out, out + len - 4096, 4096);
                        len = 4096;
                        out[len] = 0;
                }
        }
        D_ASSERT(d, said, "no 'log lines dropped' line once stderr was read");
        /* Drained as it is read: hbgd exits 0 on SIGTERM. */
        struct pollfd pf = { .fd = p[0], .events = POLLIN };
        kill(d->pid, SIGTERM);
        while (daemon_wait_exit(d, 0) == -ETIMEDOUT)
                if (poll(&pf, 1, 100) > 0 && read(p[0], out, sizeof(out)) <= 0)
                        break;
        close(p[0]);
        stop_hbgd(d);
}
END_TEST

/* ------------------------------------------------------------ level */

/* [log] level = debug logs the detail (the effective config at start and
 * after a reload, a session's sizes and charge, what a refused connection
 * failed, a recording's summary); level = info none of it. Loop index:
 * 0 debug, 1 info. */
START_TEST(debug_level) {
        bool debug = _i == 0;
        char text[200], conf[] = "/tmp/hbg-debug-XXXXXX";
        snprintf(text, sizeof(text), "[log]\nlevel = %s\n[access]\nallowed_users = 0\n", debug ? "debug" : "info");
        int cfd = mkstemp(conf);
        ck_assert_int_ge(cfd, 0);
        ck_assert_int_eq(write(cfd, text, strlen(text)), (ssize_t)strlen(text));
        close(cfd);
        /* kept until the reload has read it */
        struct hbgd_proc *d = start_hbgd(MODE_URING, (const char *const[]){ "--config", conf, NULL });
        open_to_all(d);

        hbg_client *c = NULL;
        int err = hbg_connect(&c, d->socket_path);
        D_ASSERT(d, err == 0, "hbg_connect: %s", hbg_strerror(err));
        hbg_tensor a, b;
        ck_assert_int_eq(hbg_tensor_alloc(c, 64 * sizeof(float), &a), 0);
        ck_assert_int_eq(hbg_tensor_alloc(c, 64 * sizeof(float), &b), 0);
        ck_assert_int_eq(hbg_graph_record_begin(c), 0);
        for (int i = 0; i < 2; i++) {
                hbg_task t = HBG_TASK_INIT("copy_f32");
                t.n_args = 2;
                t.args[0].tensor = i ? b : a;
                t.args[0].dir = HBG_IN;
                t.args[1].tensor = i ? a : b;
                t.args[1].dir = HBG_OUT;
                uint64_t id;
                ck_assert_int_eq(hbg_graph_add(c, &t, &id), 0);
        }
        uint32_t rec;
        err = hbg_graph_record_end(c, &rec);
        D_ASSERT(d, err == 0, "hbg_graph_record_end: %s [%s]", hbg_strerror(err), hbg_last_error(c));
        hbg_disconnect(c);
        /* A user the rule refuses (as another uid: root is always allowed). */
        bool refused = geteuid() == 0;
        if (refused) {
                pid_t pid = fork();
                ck_assert(pid >= 0);
                if (pid == 0) {
                        if (setresgid(NOBODY, NOBODY, NOBODY) < 0 || setresuid(NOBODY, NOBODY, NOBODY) < 0)
                                _exit(2);
                        int fd = cx_connect(d->socket_path, false);
                        char why[256];
                        _exit(fd >= 0 && cx_send(fd, HBG__ENVELOPE__MSG_HELLO, 0, 0) == 0 &&
                                              cx_expect_refusal(fd, -EACCES, "allowed_users", IO_MS, why, sizeof(why)) == 0
                                      ? 0
                                      : 1);
                }
                int st;
                ck_assert_int_eq(waitpid(pid, &st, 0), pid);
                D_ASSERT(d, WIFEXITED(st) && WEXITSTATUS(st) == 0, "the other uid was not refused (status %d)", st);
        } else {
                fprintf(stderr, "debug_level: not root: the refused connection's rule is not checked\n");
        }
        kill(d->pid, SIGHUP);
        D_ASSERT(d, daemon_wait_notify(d, "RELOADING=1", IO_MS) == 0, "no RELOADING=1");
        D_ASSERT(d, daemon_wait_notify(d, "READY=1", IO_MS) == 0, "no READY=1 after the reload");
        unlink(conf);
        int st = daemon_stop(d, WAIT_MS); /* the log is written before hbgd exits */
        D_ASSERT(d, WIFEXITED(st) && WEXITSTATUS(st) == 0, "hbgd exit status %d", st);

        FILE *f = fopen(d->log_path, "r");
        ck_assert_ptr_nonnull(f);
        static char log[1 << 18];
        size_t n = fread(log, 1, sizeof(log) - 1, f);
        fclose(f);
        log[n] = 0;
        static const char *const detail[] = {
                "<7>hbgd: config (start): [scheduler] threads = 4\n",
                "<7>hbgd: config (start): [log] level = debug\n",
                "<7>hbgd: config (reload): [access] allowed_users = root\n",
                "<7>hbgd: config (reload): [socket] mode = 0660\n",
                ": asks task_window 0, flag_window 0, heap_size 0",
                ": geometry task_window 4096, flag_window 4096, heap 67108864 bytes, mailbox 1024 entries",
                "bytes charged; uid ",
                ": recording of 2 tasks (",
                " us: graph 0; the session has recorded 2 tasks of max_recorded_tasks 65536",
                "by the rule [access] allowed_users = 0; allowed_groups = (none)",
        };
        for (size_t i = 0; i < sizeof(detail) / sizeof(detail[0]); i++) {
                if (i == sizeof(detail) / sizeof(detail[0]) - 1 && !refused)
                        continue;
                bool has = strstr(log, detail[i]) != NULL;
                if (has != debug)
                        fprintf(stderr, "hbgd's log:\n%s", log);
                ck_assert_msg(has == debug, "level %s: '%s' %s in the log", debug ? "debug" : "info", detail[i],
                              has ? "is" : "is not");
        }
        if (!debug && strstr(log, "<7>"))
                fprintf(stderr, "hbgd's log:\n%s", log);
        ck_assert_msg(debug || !strstr(log, "<7>"), "level info: a debug line in the log");
        daemon_destroy(d);
}
END_TEST

static Suite *suite(void) {
        Suite *s = suite_create("e2e_journal");
        TCase *tc = tcase_create("journal");
        tcase_set_timeout(tc, 120);
        tcase_add_test(tc, fields);
        tcase_add_test(tc, terminal);
        tcase_add_loop_test(tc, debug_level, 0, 2);
        suite_add_tcase(s, tc);
        /* The other uid's clients need root (setresuid). */
        if (geteuid() == 0) {
                tc = tcase_create("limits");
                tcase_set_timeout(tc, 120);
                tcase_add_test(tc, session_ids_64_apart);
                tcase_add_test(tc, sessions_of_one_uid);
                tcase_add_test(tc, stderr_not_read);
                suite_add_tcase(s, tc);
        } else {
                fprintf(stderr, "test_e2e_journal: not root: the rate-limit and writer tests, which act as "
                                "another uid, do not run\n");
        }
        return s;
}

const struct check_main check_main = {
        .suite = suite,
        .ignore_sigpipe = true,
        .setup = daemon_util_setup,
        .teardown = daemon_util_cleanup,
};
