/* SPDX-License-Identifier: MIT */
/*
 * Who may connect, and what those who may not are told: a real hbgd
 * started as root, hbgctl run as other users with setpriv(1) and
 * libhbgclient in forked children that switch uid, gid and groups
 * (setgroups, setresgid, setresuid). The uids and gids (4242, 4343, 4344)
 * need no /etc/passwd or /etc/group entry.
 *
 *   kernel_semantics      what the refusal handling relies on: a unix
 *                         SEQPACKET socket closed with records unread
 *                         resets its peer once, and what it sent before
 *                         is still readable (runs as any user)
 *   supplementary_groups  allowed_groups matches a supplementary group
 *                         (SO_PEERGROUPS) and the primary one; without
 *                         one, hbgctl exits 4 and the client gets -EACCES,
 *                         both with hbgd's reason
 *   socket_permissions    a directory or socket mode that keeps the user
 *                         out: exit 4 naming socket, owner, mode and fix
 *   connection_limit      max_connections_per_uid: the refusal says so
 *   refusal_race          a refusal while Hello and SessionRequest are
 *                         already sent is never a reset or broken pipe,
 *                         with hbgd holding the refused connection and
 *                         with its refusal slots full (both io backends);
 *                         it holds at most 16 and logs 10 per 10 s
 *   stopping              a connection while hbgd stops: -ESHUTDOWN, exit 3
 *
 * Needs root (the whole point is other uids): as another user it runs
 * kernel_semantics only and exits 77, saying so.
 */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <limits.h>
#include <poll.h>
#include <pwd.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "hbg/hbg.h"
#include "proto/wire.h"
#include "tests/e2e/daemon_util.h"
#include "tests/e2e/e2e_kid.h"
#include "tests/e2e/e2e_util.h"
#include "tests/check_main.h"

#define USER 4242u
#define GROUP_OK 4343u          /* the allowed group */
#define GROUP_OTHER 4344u
#define REPEAT 50
#define REFUSALS_HELD 16        /* daemon/refusal.c */

/* A copy of hbgctl and libhbgclient that any uid may run (the build tree
 * may be in a home directory others cannot enter). */
static char ctl_dir[PATH_MAX];
static char ctl_bin[PATH_MAX + 16];
static char graph_file[PATH_MAX + 16];  /* a graph for `hbgctl run`, readable by all */

/* ------------------------------------------------------------ setup */

static void exe_dir(char *buf, size_t size) {
        ssize_t n = readlink("/proc/self/exe", buf, size - 1);
        buf[n > 0 ? n : 0] = 0;
        char *slash = strrchr(buf, '/');
        if (slash)
                *slash = 0;
}

static bool copy_file(const char *from, const char *to) {
        int in = open(from, O_RDONLY | O_CLOEXEC);
        int out = open(to, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0755);
        bool ok = in >= 0 && out >= 0;
        char buf[65536];
        ssize_t n;
        while (ok && (n = read(in, buf, sizeof(buf))) > 0)
                ok = write(out, buf, (size_t)n) == n;
        if (in >= 0)
                close(in);
        if (out >= 0)
                close(out);
        return ok && fchmodat(AT_FDCWD, to, 0755, 0) == 0;
}

static pid_t ctl_owner;

static void remove_ctl_copy(void) {
        char p[PATH_MAX + 64];
        /* Not in Check's forked test processes. */
        if (!ctl_dir[0] || getpid() != ctl_owner)
                return;
        snprintf(p, sizeof(p), "%s/bin/hbgctl", ctl_dir);
        unlink(p);
        unlink(graph_file);
        snprintf(p, sizeof(p), "%s/lib/libhbgclient.so.%d", ctl_dir, HBG_VERSION_MAJOR);
        unlink(p);
        snprintf(p, sizeof(p), "%s/bin", ctl_dir);
        rmdir(p);
        snprintf(p, sizeof(p), "%s/lib", ctl_dir);
        rmdir(p);
        rmdir(ctl_dir);
}

/* DIR/bin/hbgctl finds DIR/lib/ by its rpath ($ORIGIN/../lib). */
static bool make_ctl_copy(void) {
        char here[PATH_MAX], from[PATH_MAX + 64], to[PATH_MAX + 64], lib[PATH_MAX];
        exe_dir(here, sizeof(here));
        snprintf(ctl_dir, sizeof(ctl_dir), "/tmp/hbg-access-XXXXXX");
        if (!mkdtemp(ctl_dir) || chmod(ctl_dir, 0755) < 0) {
                fprintf(stderr, "test_e2e_access: mkdtemp: %s\n", strerror(errno));
                return false;
        }
        ctl_owner = getpid();
        atexit(remove_ctl_copy);
        snprintf(from, sizeof(from), "%s/bin", ctl_dir);
        snprintf(to, sizeof(to), "%s/lib", ctl_dir);
        if (mkdir(from, 0755) < 0 || mkdir(to, 0755) < 0)
                return false;
        snprintf(from, sizeof(from), "%s/../lib/libhbgclient.so.%d", here, HBG_VERSION_MAJOR);
        if (!realpath(from, lib)) {
                fprintf(stderr, "test_e2e_access: %s: %s\n", from, strerror(errno));
                return false;
        }
        snprintf(to, sizeof(to), "%s/lib/libhbgclient.so.%d", ctl_dir, HBG_VERSION_MAJOR);
        snprintf(from, sizeof(from), "%s/../bin/hbgctl", here);
        snprintf(ctl_bin, sizeof(ctl_bin), "%s/bin/hbgctl", ctl_dir);
        if (!copy_file(lib, to) || !copy_file(from, ctl_bin)) {
                fprintf(stderr, "test_e2e_access: cannot copy %s and %s to %s\n", from, lib, ctl_dir);
                return false;
        }
        static const char graph[] = "{ \"tensors\": { \"x\": { \"len\": 4 } },\n"
                                    "  \"tasks\": [ { \"kernel\": \"fill_f32\", \"args\": [\"x\"], "
                                    "\"scalars\": [2] } ],\n"
                                    "  \"outputs\": [\"x\"] }\n";
        snprintf(graph_file, sizeof(graph_file), "%s/graph.json", ctl_dir);
        FILE *f = fopen(graph_file, "w");
        bool ok = f && fputs(graph, f) >= 0;
        if (f)
                ok = fclose(f) == 0 && ok;
        return ok && chmod(graph_file, 0644) == 0;
}

/* ------------------------------------------------------------ hbgctl as another user */

struct result {
        int code;                      /* exit status, or 128 + signal */
        char out[4096], err[4096];
};

static void slurp(int fd, char *buf, size_t size) {
        size_t n = 0;
        ssize_t r;
        lseek(fd, 0, SEEK_SET);
        while (n + 1 < size && (r = read(fd, buf + n, size - 1 - n)) > 0)
                n += (size_t)r;
        buf[n] = 0;
        close(fd);
}

static int scratch(void) {
        char path[] = "/tmp/hbg-access-out-XXXXXX";
        int fd = mkstemp(path);
        ck_assert_msg(fd >= 0, "mkstemp: %s", strerror(errno));
        unlink(path);
        return fd;
}

/* hbgctl --socket SOCK ARGS... as `ids` (setpriv options, NULL: as root). */
static void ctl_run_argv(struct result *r, const char *const *ids, const char *sock, const char *const *args) {
        const char *argv[24];
        int n = 0;
        if (ids) {
                argv[n++] = "setpriv";
                for (const char *const *i = ids; *i; i++)
                        argv[n++] = *i;
                argv[n++] = "--";
        }
        argv[n++] = ctl_bin;
        argv[n++] = "--socket";
        argv[n++] = sock;
        for (const char *const *a = args; *a && n < 23; a++)
                argv[n++] = *a;
        argv[n] = NULL;
        int out = scratch(), err = scratch();
        fflush(NULL);
        pid_t pid = fork();
        ck_assert_int_ge(pid, 0);
        if (pid == 0) {
                if (dup2(out, 1) < 0 || dup2(err, 2) < 0)
                        _exit(126);
                execvp(argv[0], (char *const *)argv);
                _exit(127);
        }
        int st;
        while (waitpid(pid, &st, 0) < 0)
                ck_assert(errno == EINTR);
        r->code = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
        slurp(out, r->out, sizeof(r->out));
        slurp(err, r->err, sizeof(r->err));
}

/* hbgctl --socket SOCK VERB [ARG] as `ids` (NULL: as root). */
static void ctl_run_as(struct result *r, const char *const *ids, const char *sock, const char *verb,
                       const char *arg) {
        ctl_run_argv(r, ids, sock, (const char *const[]){ verb, arg, NULL });
}

/* The same with two arguments (cancel SESSION GRAPH). */
static void ctl_run_as2(struct result *r, const char *const *ids, const char *sock, const char *verb,
                        const char *arg1, const char *arg2) {
        ctl_run_argv(r, ids, sock, (const char *const[]){ verb, arg1, arg2, NULL });
}

static void ctl_as(struct result *r, const char *const *ids, const char *sock, const char *verb) {
        ctl_run_as(r, ids, sock, verb, NULL);
}

#define IDS(...) ((const char *const[]){ __VA_ARGS__, NULL })
#define AS_USER_IN(groups) IDS("--reuid=4242", "--regid=4242", "--groups=" groups)
#define AS_USER_NO_GROUPS IDS("--reuid=4242", "--regid=4242", "--clear-groups")

#define ASSERT_CTL(d, r, want, what)                                                                  \
        D_ASSERT(d, (r).code == (want), "%s: hbgctl exit %d, want %d\nstdout:\n%.300s\nstderr:\n%.500s", \
                 what, \
                 (r).code, (want), (r).out, (r).err)
#define ASSERT_SAYS(d, r, needle, what)                                                            \
        D_ASSERT(d, strstr((r).err, needle), "%s: hbgctl's stderr does not say \"%.200s\":\n%.600s", \
                 what, \
                 needle, (r).err)

/* Neither the reset nor the broken pipe a refusal used to show. */
static bool says_no_reset(const char *s) {
        return !strcasestr(s, "reset") && !strcasestr(s, "broken pipe") && !strcasestr(s, "EPIPE");
}

/* ------------------------------------------------------------ clients as another user */

struct ids {
        uid_t uid;
        gid_t gid;
        gid_t groups[4];
        int n_groups;
};

static const struct ids user_in_ok = { USER, USER, { GROUP_OK }, 1 };
static const struct ids user_in_other = { USER, USER, { GROUP_OTHER }, 1 };
static const struct ids user_primary_ok = { USER, GROUP_OK, { 0 }, 0 };
static const struct ids user_alone = { USER, USER, { 0 }, 0 };

/* In the child of kid_start(SAME_UID, ...): become ids; "FAIL" if not. */
static bool become(int sock, const struct ids *id) {
        if (setgroups((size_t)id->n_groups, id->groups) < 0 || setresgid(id->gid, id->gid, id->gid) < 0 ||
            setresuid(id->uid, id->uid, id->uid) < 0) {
                kid_say(sock, "FAIL cannot become uid %u: %s", (unsigned)id->uid, strerror(errno));
                return false;
        }
        /* The change of credentials cleared it. */
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        return true;
}

struct connect_arg {
        const struct ids *ids;
        const char *path;
        unsigned hold;                 /* refused raw connections held open first */
        unsigned repeat;
};

/* hbg_connect() `repeat` times: "GOT code message" for the first result,
 * FAIL if a later one differs in code, or any mentions a reset. */
static int connect_fn(int sock, void *argp) {
        const struct connect_arg *a = argp;
        if (!become(sock, a->ids))
                return 1;
        int held[REFUSALS_HELD * 2];
        for (unsigned i = 0; i < a->hold; i++)
                held[i] = cx_connect(a->path, false);
        int first = 1;
        char msg[600] = "";
        for (unsigned i = 0; i < a->repeat; i++) {
                hbg_client *c = NULL;
                int err = hbg_connect(&c, a->path);
                const char *why = hbg_last_error(NULL);
                hbg_disconnect(c);
                if (i == 0) {
                        first = err;
                        snprintf(msg, sizeof(msg), "%s", why);
                }
                if (err != first || !says_no_reset(why)) {
                        kid_say(sock, "FAIL connect %u of %u: %d (%s) [%s], the first: %d [%s]", i + 1, a->repeat,
                                err, hbg_strerror(err), why, first, msg);
                        return 1;
                }
        }
        for (unsigned i = 0; i < a->hold; i++)
                if (held[i] >= 0)
                        close(held[i]);
        kid_say(sock, "GOT %d %s", first, msg);
        return 0;
}

/* hbg_connect() as ids, repeat times alike: its code, message in msg. */
static int connect_as(struct hbgd_proc *d, const struct ids *ids, unsigned hold, unsigned repeat, char *msg,
                      size_t size) {
        struct connect_arg a = { ids, d->socket_path, hold, repeat };
        struct kid k;
        char buf[700];
        kid_start(&k, SAME_UID, connect_fn, &a);
        const char *got = kid_expect(d, &k, "GOT", WAIT_MS, buf, sizeof(buf), "the client");
        char *end;
        long code = strtol(got, &end, 10);
        snprintf(msg, size, "%s", *end == ' ' ? end + 1 : end);
        kid_end(d, &k, IO_MS, "the client");
        return (int)code;
}

/* Lines of hbgd's log containing needle, once there are at least `want`
 * (hbgd's log writer writes a line soon after it is logged) or IO_MS
 * passed. */
static unsigned log_lines(const struct hbgd_proc *d, const char *needle, unsigned want) {
        long long end = daemon_now_ms() + IO_MS;
        for (;;) {
                FILE *f = fopen(d->log_path, "r");
                char line[1024];
                unsigned n = 0;
                while (f && fgets(line, sizeof(line), f))
                        n += strstr(line, needle) != NULL;
                if (f)
                        fclose(f);
                if (n >= want || daemon_now_ms() >= end)
                        return n;
                usleep(20 * 1000);
        }
}

static struct hbgd_proc *start_open(int mode, const char *conf) {
        struct hbgd_proc *d = start_hbgd_conf(mode, conf);
        open_to_all(d);
        return d;
}

/* ------------------------------------------------------------ kernel semantics */

START_TEST(kernel_semantics) {
        int sv[2];
        char b;
        /* Our records unread when the peer closes: a reset, reported once,
         * then what the peer sent, then the end. */
        ck_assert_int_eq(socketpair(AF_UNIX, SOCK_SEQPACKET, 0, sv), 0);
        ck_assert_int_eq(send(sv[0], "h", 1, 0), 1);
        ck_assert_int_eq(send(sv[0], "s", 1, 0), 1);
        ck_assert_int_eq(send(sv[1], "E", 1, 0), 1);
        close(sv[1]);
        ck_assert_int_eq(recv(sv[0], &b, 1, MSG_DONTWAIT), -1);
        ck_assert_msg(errno == ECONNRESET, "first receive after an unread close: %s, want ECONNRESET",
                      strerror(errno));
        ck_assert_int_eq(recv(sv[0], &b, 1, MSG_DONTWAIT), 1);
        ck_assert_int_eq(b, 'E');
        ck_assert_int_eq(recv(sv[0], &b, 1, MSG_DONTWAIT), 0);
        close(sv[0]);
        /* The reset may come on a send instead (then EPIPE), the record stays. */
        ck_assert_int_eq(socketpair(AF_UNIX, SOCK_SEQPACKET, 0, sv), 0);
        ck_assert_int_eq(send(sv[0], "h", 1, 0), 1);
        ck_assert_int_eq(send(sv[1], "E", 1, 0), 1);
        close(sv[1]);
        ck_assert_int_eq(send(sv[0], "s", 1, MSG_NOSIGNAL), -1);
        ck_assert_msg(errno == ECONNRESET || errno == EPIPE, "send after an unread close: %s", strerror(errno));
        ck_assert_int_eq(recv(sv[0], &b, 1, MSG_DONTWAIT), 1);
        ck_assert_int_eq(b, 'E');
        close(sv[0]);
        /* Nothing unread at the close: a send fails EPIPE, no reset on
         * receive: the record, then the end. */
        ck_assert_int_eq(socketpair(AF_UNIX, SOCK_SEQPACKET, 0, sv), 0);
        ck_assert_int_eq(send(sv[1], "E", 1, 0), 1);
        close(sv[1]);
        ck_assert_int_eq(send(sv[0], "h", 1, MSG_NOSIGNAL), -1);
        ck_assert_msg(errno == EPIPE, "send to a closed peer: %s, want EPIPE", strerror(errno));
        ck_assert_int_eq(recv(sv[0], &b, 1, MSG_DONTWAIT), 1);
        ck_assert_int_eq(recv(sv[0], &b, 1, MSG_DONTWAIT), 0);
        close(sv[0]);
        /* hbgd's way: SHUT_WR after the Error; the client still sends, and
         * reads the record, then the end; hbgd sees the client's close. */
        ck_assert_int_eq(socketpair(AF_UNIX, SOCK_SEQPACKET, 0, sv), 0);
        ck_assert_int_eq(send(sv[1], "E", 1, 0), 1);
        ck_assert_int_eq(shutdown(sv[1], SHUT_WR), 0);
        ck_assert_int_eq(send(sv[0], "h", 1, MSG_NOSIGNAL), 1);
        ck_assert_int_eq(recv(sv[0], &b, 1, MSG_DONTWAIT), 1);
        ck_assert_int_eq(recv(sv[0], &b, 1, MSG_DONTWAIT), 0);
        ck_assert_int_eq(recv(sv[1], &b, 1, MSG_DONTWAIT), 1);
        close(sv[0]);
        struct pollfd p = { .fd = sv[1], .events = POLLIN };
        ck_assert_int_eq(poll(&p, 1, 0), 1);
        ck_assert_msg(p.revents & POLLHUP, "no POLLHUP after the client's close: 0x%x", (unsigned)p.revents);
        ck_assert_int_eq(recv(sv[1], &b, 1, MSG_DONTWAIT), 0);
        close(sv[1]);
}
END_TEST

/* ------------------------------------------------------------ (a), (b) */

START_TEST(supplementary_groups) {
        struct hbgd_proc *d = start_open(MODE_EPOLL, "[access]\nallowed_groups = 4343\n");
        const char *S = d->socket_path;
        struct result r;
        char msg[600];

        /* (a) A supplementary group is enough, and so is the primary one. */
        ctl_as(&r, AS_USER_IN("4343"), S, "status");
        ASSERT_CTL(d, r, 0, "uid 4242 in group 4343 (supplementary)");
        D_ASSERT(d, strstr(r.out, "hbgd"), "hbgctl status printed no daemon:\n%.800s", r.out);
        ctl_as(&r, IDS("--reuid=4242", "--regid=4343", "--clear-groups"), S, "status");
        ASSERT_CTL(d, r, 0, "uid 4242 with primary group 4343");
        int err = connect_as(d, &user_in_ok, 0, 1, msg, sizeof(msg));
        D_ASSERT(d, err == 0, "hbg_connect as uid 4242 in group 4343: %d [%s]", err, msg);
        err = connect_as(d, &user_primary_ok, 0, 1, msg, sizeof(msg));
        D_ASSERT(d, err == 0, "hbg_connect as uid 4242 with primary group 4343: %d [%s]", err, msg);

        /* (b) Without it: hbgd's reason, exit 4 and -EACCES. */
        ctl_as(&r, AS_USER_IN("4344"), S, "status");
        ASSERT_CTL(d, r, 4, "uid 4242 in group 4344 only");
        ASSERT_SAYS(d, r, "hbgd refused the connection: uid 4242 (gid 4242, groups 4344) is not in "
                    "allowed_users or allowed_groups of hbgd", "not allowed");
        ASSERT_SAYS(d, r, "ask the administrator to add", "not allowed");
        D_ASSERT(d, says_no_reset(r.err), "hbgctl speaks of a reset:\n%.800s", r.err);
        fprintf(stderr, "supplementary_groups: hbgctl as uid 4242 (groups 4344):\n%s", r.err);
        ctl_as(&r, AS_USER_NO_GROUPS, S, "sessions");
        ASSERT_CTL(d, r, 4, "uid 4242 without groups");
        ASSERT_SAYS(d, r, "no supplementary groups", "uid 4242 without groups");
        /* `run` connects through libhbgclient: the same reason and exit. */
        ctl_run_as(&r, AS_USER_IN("4344"), S, "run", graph_file);
        ASSERT_CTL(d, r, 4, "hbgctl run as uid 4242 in group 4344 only");
        ASSERT_SAYS(d, r, "hbgd refused the connection: uid 4242 (gid 4242, groups 4344)", "hbgctl run");
        ASSERT_SAYS(d, r, "ask the administrator to add", "hbgctl run");
        /* ...and hbgd logs it once: run connects once. The lines are in
         * order, so once a later refusal's line (no groups) is there,
         * every refusal of uid 4242 in group 4344 is counted: status, run. */
        ctl_as(&r, AS_USER_NO_GROUPS, S, "status");
        ASSERT_CTL(d, r, 4, "uid 4242 without groups, after run");
        D_ASSERT(d, log_lines(d, "no supplementary groups) is not in", 2) == 2, "the refusals without groups "
                 "were not logged");
        unsigned logged = log_lines(d, "groups 4344) is not in", 0);
        D_ASSERT(d, logged == 2, "status and run refused, %u lines logged, want 2 (one each)", logged);
        ctl_run_as(&r, AS_USER_IN("4343"), S, "run", graph_file);
        ASSERT_CTL(d, r, 0, "hbgctl run as uid 4242 in group 4343");

        err = connect_as(d, &user_in_other, 0, 1, msg, sizeof(msg));
        D_ASSERT(d, err == -EACCES, "hbg_connect as uid 4242 in group 4344: %d [%s], want -EACCES", err, msg);
        D_ASSERT(d, strstr(msg, "uid 4242 (gid 4242, groups 4344) is not in allowed_users or allowed_groups"),
                 "hbg_last_error(NULL) lacks hbgd's reason: %s", msg);
        fprintf(stderr, "supplementary_groups: hbg_connect as uid 4242 (groups 4344): %s\n", msg);
        err = connect_as(d, &user_alone, 0, 1, msg, sizeof(msg));
        D_ASSERT(d, err == -EACCES, "hbg_connect as uid 4242 without groups: %d [%s]", err, msg);
        stop_hbgd(d);
}
END_TEST

/* ------------------------------------------------------------ (c) */

/* "root:4343 0660" the way hbgctl names them (a name where one exists). */
static void owner_text(uid_t uid, gid_t gid, mode_t mode, char *buf, size_t size) {
        struct passwd *pw = getpwuid(uid);
        struct group *gr = getgrgid(gid);
        char u[32], g[32];
        snprintf(u, sizeof(u), "%u", (unsigned)uid);
        snprintf(g, sizeof(g), "%u", (unsigned)gid);
        snprintf(buf, size, "%s:%s %04o", pw ? pw->pw_name : u, gr ? gr->gr_name : g, (unsigned)mode);
}

START_TEST(socket_permissions) {
        struct hbgd_proc *d = start_open(MODE_EPOLL, "[limits]\nmax_connections_per_uid = 64\n");
        const char *S = d->socket_path;
        struct result r;
        char want[256], msg[600];

        /* The directory keeps everyone but root out. */
        ck_assert_int_eq(chmod(d->dir, 0700), 0);
        ctl_as(&r, AS_USER_IN("4343"), S, "status");
        ASSERT_CTL(d, r, 4, "socket directory 0700");
        ASSERT_SAYS(d, r, S, "socket directory 0700");
        owner_text(0, 0, 0700, want, sizeof(want));
        ASSERT_SAYS(d, r, want, "socket directory 0700");
        ASSERT_SAYS(d, r, "may not enter the directory", "socket directory 0700");
        ASSERT_SAYS(d, r, "ask the administrator", "socket directory 0700");
        D_ASSERT(d, !strstr(r.err, "not running"), "a permission error reported as not running:\n%.800s", r.err);
        fprintf(stderr, "socket_permissions: directory 0700:\n%s", r.err);
        int err = connect_as(d, &user_in_ok, 0, 1, msg, sizeof(msg));
        D_ASSERT(d, err == -EACCES, "hbg_connect through a 0700 directory: %d [%s]", err, msg);
        D_ASSERT(d, strstr(msg, S) && strstr(msg, want), "hbg_last_error(NULL) does not name %s and %s: %s", S,
                 want, msg);

        /* The socket's group may write, and the user is not in it. */
        ck_assert_int_eq(chmod(d->dir, 0755), 0);
        ck_assert_int_eq(chown(S, 0, GROUP_OK), 0);
        ck_assert_int_eq(chmod(S, 0660), 0);
        ctl_as(&r, AS_USER_IN("4344"), S, "status");
        ASSERT_CTL(d, r, 4, "socket root:4343 0660, user not in 4343");
        owner_text(0, GROUP_OK, 0660, want, sizeof(want));
        ASSERT_SAYS(d, r, want, "socket root:4343 0660");
        ASSERT_SAYS(d, r, "may not write to the socket", "socket root:4343 0660");
        struct group *gr = getgrgid(GROUP_OK);
        snprintf(want, sizeof(want), "usermod -aG %s", gr ? gr->gr_name : "4343");
        ASSERT_SAYS(d, r, want, "socket root:4343 0660");
        ASSERT_SAYS(d, r, "log in again", "socket root:4343 0660");
        fprintf(stderr, "socket_permissions: socket root:4343 0660:\n%s", r.err);
        err = connect_as(d, &user_in_other, 0, 1, msg, sizeof(msg));
        D_ASSERT(d, err == -EACCES && strstr(msg, "may not write to the socket"),
                 "hbg_connect to a socket of another group: %d [%s]", err, msg);
        /* In the group, it works. */
        ctl_as(&r, AS_USER_IN("4343"), S, "status");
        ASSERT_CTL(d, r, 0, "socket root:4343 0660, user in 4343");
        stop_hbgd(d);
}
END_TEST

/* ------------------------------------------------------------ (d) */

/* As uid 4242: two connections hbgd answered, held until 'Q'. */
static int two_connections_fn(int sock, void *arg) {
        const char *path = arg;
        int fds[2];
        char why[256];
        for (unsigned i = 0; i < 2; i++) {
                fds[i] = cx_connect(path, false);
                if (fds[i] < 0 || cx_send(fds[i], HBG__ENVELOPE__MSG_HELLO, 0, 0) < 0 ||
                    cx_expect(fds[i], HBG__ENVELOPE__MSG_HELLO, IO_MS, why, sizeof(why)) < 0) {
                        kid_say(sock, "FAIL connection %u of uid 4242: %s", i + 1,
                                fds[i] < 0 ? strerror(-fds[i]) : why);
                        return 1;
                }
        }
        kid_say(sock, "READY");
        kid_cmd(sock);
        close(fds[0]);
        close(fds[1]);
        return 0;
}

START_TEST(connection_limit) {
        struct hbgd_proc *d = start_open(MODE_EPOLL, "[limits]\nmax_connections_per_uid = 2\n");
        const char *S = d->socket_path;
        const char *reason = "too many connections for uid 4242 (max_connections_per_uid = 2)";
        struct kid k;
        struct result r;
        char buf[512], msg[600];
        kid_start(&k, USER, two_connections_fn, (void *)S);
        kid_expect(d, &k, "READY", IO_MS, buf, sizeof(buf), "uid 4242");

        ctl_as(&r, AS_USER_NO_GROUPS, S, "status");
        ASSERT_CTL(d, r, 1, "a third connection of uid 4242");
        ASSERT_SAYS(d, r, reason, "max_connections_per_uid");
        ASSERT_SAYS(d, r, "hbgd refused the connection", "max_connections_per_uid");
        fprintf(stderr, "connection_limit:\n%s", r.err);
        int err = connect_as(d, &user_alone, 0, 1, msg, sizeof(msg));
        D_ASSERT(d, err == -EUSERS && strstr(msg, reason), "hbg_connect as a third connection of uid 4242: %d [%s]",
                 err, msg);
        /* Root is not limited per uid. */
        ctl_as(&r, NULL, S, "status");
        ASSERT_CTL(d, r, 0, "root while uid 4242 is at its limit");
        kid_tell(&k, 'Q');
        kid_end(d, &k, IO_MS, "uid 4242");
        ctl_as(&r, AS_USER_NO_GROUPS, S, "status");
        ASSERT_CTL(d, r, 0, "uid 4242 after closing its connections");
        stop_hbgd(d);
}
END_TEST

/* ------------------------------------------------------------ (e) */

/* As a refused user: REPEAT raw connections sending Hello and
 * SessionRequest back to back: both sends succeed, the first thing read is
 * Error{-EACCES}, then the end; never a reset. */
static int raw_race_fn(int sock, void *arg) {
        const char *path = arg;
        if (!become(sock, &user_alone))
                return 1;
        for (unsigned i = 0; i < REPEAT; i++) {
                int fd = cx_connect(path, false);
                if (fd < 0) {
                        kid_say(sock, "FAIL connect %u: %s", i + 1, strerror(-fd));
                        return 1;
                }
                int e1 = cx_send(fd, HBG__ENVELOPE__MSG_HELLO, 0, 0);
                int e2 = cx_send(fd, HBG__ENVELOPE__MSG_SESSION_REQUEST, 0, 0);
                if (e1 < 0 || e2 < 0) {
                        kid_say(sock, "FAIL connection %u: sending Hello: %s, SessionRequest: %s", i + 1,
                                strerror(-e1), strerror(-e2));
                        return 1;
                }
                struct pollfd p = { .fd = fd, .events = POLLIN };
                poll(&p, 1, IO_MS);
                Hbg__Envelope *env = NULL;
                int fds[HBG_WIRE_MAX_FDS];
                unsigned nfds = 0;
                int err = wire_recv(fd, HBG_WIRE_MAX_MSG_DEFAULT, &env, fds, 0, &nfds);
                if (err < 0 || env->msg_case != HBG__ENVELOPE__MSG_ERROR || env->error->code != -EACCES) {
                        kid_say(sock, "FAIL connection %u: the first receive gave %s", i + 1,
                                err < 0 ? strerror(-err) : "another record than Error{-EACCES}");
                        wire_free(env);
                        return 1;
                }
                wire_free(env);
                poll(&p, 1, IO_MS);
                err = wire_recv(fd, HBG_WIRE_MAX_MSG_DEFAULT, &env, fds, 0, &nfds);
                if (err != -ECONNRESET) {
                        kid_say(sock, "FAIL connection %u: after the Error: %s", i + 1,
                                err == 0 ? "another record" : strerror(-err));
                        wire_free(env);
                        return 1;
                }
                close(fd);
        }
        kid_say(sock, "DONE");
        return 0;
}

/* As a refused user: 2 * REFUSALS_HELD connections, each read up to its
 * Error, and one more (hbgd serves the listener in order: once its Error
 * is here, hbgd is done with the others); then one Hello on each of the
 * first ones: hbgd still holds those it can send to. "HELD n ms" (ms: how
 * long it took). */
#define FLOOD (2 * REFUSALS_HELD)
static int flood_fn(int sock, void *arg) {
        const char *path = arg;
        if (!become(sock, &user_alone))
                return 1;
        int fds[FLOOD + 1];
        long long t0 = daemon_now_ms();
        for (unsigned i = 0; i < FLOOD + 1; i++) {
                fds[i] = cx_connect(path, false);
                Hbg__Envelope *env = NULL;
                if (fds[i] < 0 || cx_recv(fds[i], IO_MS, &env) < 0 || env->msg_case != HBG__ENVELOPE__MSG_ERROR) {
                        kid_say(sock, "FAIL connection %u: no Error", i + 1);
                        return 1;
                }
                wire_free(env);
        }
        unsigned held = 0;
        for (unsigned i = 0; i < FLOOD; i++)
                held += cx_send(fds[i], HBG__ENVELOPE__MSG_HELLO, 0, 0) == 0;
        kid_say(sock, "HELD %u %lld", held, daemon_now_ms() - t0);
        kid_cmd(sock);
        for (unsigned i = 0; i < FLOOD + 1; i++)
                close(fds[i]);
        return 0;
}

START_TEST(refusal_race) {
        int mode = _i;
        if (skip_mode(mode, "refusal_race"))
                return;
        long long t0 = daemon_now_ms();
        struct hbgd_proc *d = start_open(mode, "[access]\nallowed_groups = 4343\n");
        const char *S = d->socket_path;
        int base = fd_baseline(d);
        struct kid k;
        char buf[512], msg[600];

        /* Bounded: at most REFUSALS_HELD held at once. Each is held 2 s at
         * most: if the flood took less than 1 s, exactly that many. */
        kid_start(&k, SAME_UID, flood_fn, (void *)S);
        const char *held = kid_expect(d, &k, "HELD", WAIT_MS, buf, sizeof(buf), "the flood");
        unsigned n = 0;
        long long ms = 0;
        D_ASSERT(d, sscanf(held, "%u %lld", &n, &ms) == 2, "the flood said \"%s\"", held);
        D_ASSERT(d, n <= REFUSALS_HELD, "hbgd held %u refused connections at once, at most %u allowed", n,
                 REFUSALS_HELD);
        D_ASSERT(d, ms >= 1000 || n == REFUSALS_HELD, "hbgd held %u of %u refused connections within %lld ms, "
                 "expected %u", n, FLOOD, ms, REFUSALS_HELD);
        fprintf(stderr, "refusal_race (%s): %u refused connections, %u held (%lld ms)\n", mode_name(mode), FLOOD,
                n, ms);
        kid_tell(&k, 'Q');
        kid_end(d, &k, IO_MS, "the flood");
        assert_fd_baseline(d, base, "refusal_race: after the flood");

        /* hbgd holds the refused connections: deterministic at the wire. */
        kid_start(&k, SAME_UID, raw_race_fn, (void *)S);
        kid_expect(d, &k, "DONE", WAIT_MS, buf, sizeof(buf), "the raw client");
        kid_end(d, &k, IO_MS, "the raw client");

        /* libhbgclient, REPEAT times: always hbgd's reason. */
        int err = connect_as(d, &user_alone, 0, REPEAT, msg, sizeof(msg));
        D_ASSERT(d, err == -EACCES && strstr(msg, "is not in allowed_users or allowed_groups of hbgd"),
                 "hbg_connect refused (%s): %d [%s]", mode_name(mode), err, msg);
        /* ...also with every refusal slot taken (refused connections held
         * open by the same client): hbgd closes at once, the reason is
         * found behind the reset. */
        err = connect_as(d, &user_alone, REFUSALS_HELD, REPEAT, msg, sizeof(msg));
        D_ASSERT(d, err == -EACCES && strstr(msg, "is not in allowed_users or allowed_groups of hbgd"),
                 "hbg_connect refused with the slots full (%s): %d [%s]", mode_name(mode), err, msg);
        fprintf(stderr, "refusal_race (%s): %u x Hello+SessionRequest refused, then %u x hbg_connect, twice: %s\n",
                mode_name(mode), REPEAT, REPEAT, msg);
        assert_fd_baseline(d, base, "refusal_race");
        struct result r;
        ctl_as(&r, NULL, S, "status");
        ASSERT_CTL(d, r, 0, "root after the refusals");
        /* About 200 refusals, logged 10 per 10 s at most. */
        unsigned logged = log_lines(d, "refused pid", 1), windows = 1 + (unsigned)((daemon_now_ms() - t0) / 10000);
        D_ASSERT(d, logged >= 1 && logged <= 10 * windows, "hbgd logged %u refusals in %u 10 s windows", logged,
                 windows);
        fprintf(stderr, "refusal_race (%s): %u refusal lines in hbgd's log\n", mode_name(mode), logged);
        stop_hbgd(d);
}
END_TEST

/* [log] ratelimit_*: refusals past the burst are not logged, and the next
 * window's first line counts them. */
START_TEST(refusal_log_limit) {
        struct hbgd_proc *d = start_open(MODE_URING, "[access]\nallowed_groups = 4343\n"
                                                     "[log]\nratelimit_interval_ms = 500\nratelimit_burst = 2\n");
        char msg[600];
        long long t0 = daemon_now_ms();
        int err = connect_as(d, &user_alone, 0, 5, msg, sizeof(msg));
        D_ASSERT(d, err == -EACCES, "5 refused connects: %d [%s]", err, msg);
        long long t1 = daemon_now_ms();
        unsigned logged = log_lines(d, "refused pid", 2);
        /* Within one window (the 5 connects took < 500 ms): 2 lines. */
        D_ASSERT(d, logged == 2 || t1 - t0 >= 500, "%u refusals logged with ratelimit_burst = 2",
                 logged);
        usleep(600 * 1000);
        err = connect_as(d, &user_alone, 0, 1, msg, sizeof(msg));
        D_ASSERT(d, err == -EACCES, "the refused connect after the window: %d [%s]", err, msg);
        D_ASSERT(d, log_lines(d, "earlier refusals not logged)", 1) == 1,
                 "the next window's first refusal line does not count the ones left out");
        if (logged == 2)
                D_ASSERT(d, log_lines(d, "(3 earlier refusals not logged)", 1) == 1, "3 refusals were left out");
        stop_hbgd(d);
}
END_TEST

/* ------------------------------------------------------------ stopping */

static int never_run(void *arg) {
        (void)arg;
        return 0;
}

START_TEST(stopping) {
        struct hbgd_proc *d = start_hbgd_conf(MODE_EPOLL, "[limits]\nshutdown_grace_ms = 60000\n");
        const char *S = d->socket_path;
        /* A graph in flight keeps hbgd stopping: a host task nobody runs. */
        hbg_client *c = NULL;
        int err = hbg_connect(&c, S);
        D_ASSERT(d, err == 0, "hbg_connect: %s", hbg_last_error(NULL));
        hbg_task t = HBG_TASK_INIT(NULL);
        t.host_fn = never_run;
        uint64_t g;
        D_ASSERT(d, hbg_graph_add(c, &t, NULL) == 0 && hbg_graph_submit(c, &g) == 0, "submit: %s",
                 hbg_last_error(c));
        ck_assert_int_eq(kill(d->pid, SIGTERM), 0);
        D_ASSERT(d, daemon_wait_notify(d, "STOPPING=1", IO_MS) == 0, "no STOPPING=1 after SIGTERM");

        struct result r;
        ctl_as(&r, NULL, S, "status");
        ASSERT_CTL(d, r, 3, "hbgctl while hbgd stops");
        ASSERT_SAYS(d, r, "hbgd refused the connection: hbgd is stopping", "hbgctl while hbgd stops");
        fprintf(stderr, "stopping:\n%s", r.err);
        hbg_client *c2 = NULL;
        err = hbg_connect(&c2, S);
        D_ASSERT(d, err == -ESHUTDOWN && strstr(hbg_last_error(NULL), "hbgd is stopping"),
                 "hbg_connect while hbgd stops: %d [%s], want -ESHUTDOWN", err, hbg_last_error(NULL));
        hbg_disconnect(c);
        D_ASSERT(d, daemon_wait_exit(d, WAIT_MS) == 0 && WIFEXITED(d->wstatus) && WEXITSTATUS(d->wstatus) == 0,
                 "hbgd did not exit 0 once its last session left");
        daemon_destroy(d);
}
END_TEST

/* ------------------------------------------------------------ who sees what */

static int host_ok(void *arg) {
        (void)arg;
        return 0;
}

struct holder_arg {
        const struct ids *ids;
        const char *path;
};

/* A session as ids holding graph 0 live (a host task only our wait runs):
 * "UP"; on 'W' waits for it: "G0 code message"; then on 'Q' leaves. */
static int holder_fn(int sock, void *argp) {
        const struct holder_arg *a = argp;
        if (!become(sock, a->ids))
                return 1;
        hbg_client *c;
        int err = hbg_connect(&c, a->path);
        if (err < 0) {
                kid_say(sock, "FAIL connect: %d %s", err, hbg_last_error(NULL));
                return 1;
        }
        hbg_task h = HBG_TASK_INIT(NULL);
        h.host_fn = host_ok;
        uint64_t g;
        if (hbg_graph_add(c, &h, NULL) < 0 || hbg_graph_submit(c, &g) < 0) {
                kid_say(sock, "FAIL submit: %s", hbg_last_error(c));
                return 1;
        }
        kid_say(sock, "UP");
        for (char cmd; (cmd = kid_cmd(sock)) != 0 && cmd != 'Q';) {
                if (cmd != 'W')
                        continue;
                err = hbg_graph_wait(c, g, WAIT_MS);
                hbg_graph_error_info info = HBG_GRAPH_ERROR_INFO_INIT;
                hbg_graph_error(c, g, &info);
                kid_say(sock, "G0 %d %s", err, info.message);
        }
        hbg_disconnect(c);
        return 0;
}

static void holder_start(struct hbgd_proc *d, struct kid *k, struct holder_arg *a) {
        char buf[256];
        kid_start(k, SAME_UID, holder_fn, a);
        kid_expect(d, k, "UP", WAIT_MS, buf, sizeof(buf), "a session holder");
}

/* The uids of the sessions `hbgctl sessions` shows to ids (setpriv). */
static unsigned sessions_seen(struct hbgd_proc *d, const char *const *ids, const char *S, bool *sees_4242,
                              bool *sees_4243) {
        struct result r;
        ctl_as(&r, ids, S, "sessions");
        ASSERT_CTL(d, r, 0, "hbgctl sessions");
        /* one line per session: "SESSION PID UID NAME ..." */
        unsigned n = 0;
        *sees_4242 = *sees_4243 = false;
        for (char *line = strtok(r.out, "\n"); line; line = strtok(NULL, "\n")) {
                unsigned long long sid, pid, uid;
                if (sscanf(line, "%llu %llu %llu", &sid, &pid, &uid) != 3)
                        continue;
                n++;
                *sees_4242 |= uid == 4242;
                *sees_4243 |= uid == 4243;
        }
        return n;
}

/* The session id of uid's session, as root sees it. */
static unsigned long long session_of(struct hbgd_proc *d, const char *S, unsigned uid) {
        struct result r;
        ctl_as(&r, NULL, S, "sessions");
        ASSERT_CTL(d, r, 0, "hbgctl sessions as root");
        for (char *line = strtok(r.out, "\n"); line; line = strtok(NULL, "\n")) {
                unsigned long long sid, pid, u;
                if (sscanf(line, "%llu %llu %llu", &sid, &pid, &u) == 3 && u == uid)
                        return sid;
        }
        D_ASSERT(d, false, "no session of uid %u", uid);
        return 0;
}

#define AS_4242 IDS("--reuid=4242", "--regid=4242", "--clear-groups")
#define AS_4243 IDS("--reuid=4243", "--regid=4243", "--clear-groups")
#define AS_ADMIN IDS("--reuid=4244", "--regid=4244", "--groups=4500")
#define AS_MONITOR IDS("--reuid=4245", "--regid=4245", "--groups=4501")

/*
 * [access] visibility = own (the default), admin_groups, monitor_groups:
 * two users each see their own session only, an admin and a monitor see
 * both; the monitor may ask for status and metrics but opens no session;
 * another user may not cancel, kill or trace (exit 4, -EPERM), an admin may
 * cancel ("cancelled by uid 4244") and the owner may kill its own. With
 * visibility = all (SIGHUP), everyone sees everyone; the keys removed from
 * the file by later SIGHUPs go back to their defaults (no admins, own).
 */
START_TEST(visibility_roles) {
        char conf[] = "/tmp/hbg-visibility-XXXXXX";
        int cfd = mkstemp(conf);
        ck_assert_int_ge(cfd, 0);
        static const char own[] = "[access]\nadmin_groups = 4500\nmonitor_groups = 4501\n";
        ck_assert_int_eq(write(cfd, own, sizeof(own) - 1), (ssize_t)sizeof(own) - 1);
        close(cfd);
        chmod(conf, 0644);
        struct hbgd_proc *d = start_hbgd(MODE_EPOLL, (const char *const[]){ "--config", conf, NULL });
        open_to_all(d);
        const char *S = d->socket_path;
        static const struct ids u4242 = { 4242, 4242, { 0 }, 0 }, u4243 = { 4243, 4243, { 0 }, 0 },
                                monitor = { 4245, 4245, { 4501 }, 1 };
        struct holder_arg a1 = { &u4242, S }, a2 = { &u4243, S };
        struct kid k1, k2;
        holder_start(d, &k1, &a1);
        holder_start(d, &k2, &a2);
        bool s42, s43;
        struct result r;

        D_ASSERT(d, sessions_seen(d, AS_4242, S, &s42, &s43) == 1 && s42, "uid 4242 sees others' sessions");
        D_ASSERT(d, sessions_seen(d, AS_4243, S, &s42, &s43) == 1 && s43, "uid 4243 sees others' sessions");
        D_ASSERT(d, sessions_seen(d, AS_ADMIN, S, &s42, &s43) == 2 && s42 && s43, "the admin does not see all");
        D_ASSERT(d, sessions_seen(d, AS_MONITOR, S, &s42, &s43) == 2 && s42 && s43, "the monitor does not see all");
        /* the daemon-wide totals stay: "sessions 2" for everyone */
        ctl_as(&r, AS_4242, S, "status");
        ASSERT_CTL(d, r, 0, "status as 4242");
        D_ASSERT(d, strstr(r.out, "sessions") && strstr(r.out, " 2\n"), "status lost the totals:\n%.600s", r.out);
        ctl_as(&r, AS_4243, S, "graphs");
        ASSERT_CTL(d, r, 0, "graphs as 4243");
        char s42id[32];
        snprintf(s42id, sizeof(s42id), "%llu", session_of(d, S, 4242));
        unsigned rows = 0, others = 0;
        for (char *line = strtok(r.out, "\n"); line; line = strtok(NULL, "\n")) {
                unsigned long long sid;
                if (line[0] >= '0' && line[0] <= '9' && sscanf(line, "%llu", &sid) == 1) {
                        rows++;
                        others += sid == strtoull(s42id, NULL, 10);
                }
        }
        D_ASSERT(d, rows == 1 && others == 0, "graphs shows uid 4243 %u sessions, %u of uid 4242", rows, others);
        ctl_as(&r, AS_MONITOR, S, "metrics");
        ASSERT_CTL(d, r, 0, "metrics as the monitor");
        char msg[600];
        int err = connect_as(d, &monitor, 0, 1, msg, sizeof(msg));
        D_ASSERT(d, err == -EACCES && strstr(msg, "monitor_groups"), "a monitor opened a session: %d [%s]", err,
                 msg);

        /* another user may not act on 4242's session */
        ctl_run_as(&r, AS_4243, S, "kill", s42id);
        ASSERT_CTL(d, r, 4, "kill of another user's session");
        ASSERT_SAYS(d, r, "may not act on session", "kill refused");
        ctl_run_as2(&r, AS_4243, S, "cancel", s42id, "0");
        ASSERT_CTL(d, r, 4, "cancel of another user's graph");
        ASSERT_SAYS(d, r, "only its own uid and [access] admin_groups", "cancel refused");
        /* nor trace it (the task timeline); its owner and an admin may */
        ctl_run_argv(&r, AS_4243, S, IDS("trace", "--session", s42id, "--duration", "0.05", "-o", "/dev/null"));
        ASSERT_CTL(d, r, 4, "trace of another user's session");
        ASSERT_SAYS(d, r, "may not trace session", "trace refused");
        ctl_run_argv(&r, AS_4242, S, IDS("trace", "--session", s42id, "--duration", "0.05", "-o", "/dev/null"));
        ASSERT_CTL(d, r, 0, "trace of one's own session");
        ctl_run_argv(&r, AS_ADMIN, S, IDS("trace", "--session", s42id, "--duration", "0.05", "-o", "/dev/null"));
        ASSERT_CTL(d, r, 0, "trace by an admin");
        /* One trace at a time, but a user's cannot lock admins out: while
         * uid 4242 traces for 30 s, uid 4243 is told to wait, an admin's
         * start ends the user's trace and takes the slot. */
        fflush(NULL);
        pid_t user = fork();
        ck_assert_int_ge(user, 0);
        if (user == 0) {
                int null = open("/dev/null", O_WRONLY);
                if (null < 0 || dup2(null, 1) < 0 || dup2(null, 2) < 0)
                        _exit(126);
                execlp("setpriv", "setpriv", "--reuid=4242", "--regid=4242", "--clear-groups", "--", ctl_bin,
                       "--socket", S, "trace", "--session", s42id, "--duration", "30", "-o", "/dev/null", (char *)NULL);
                _exit(127);
        }
        int busy_tries = 0;
        do { /* until the user's trace runs (its start takes a moment) */
                usleep(20000);
                ctl_run_argv(&r, AS_4243, S, IDS("trace", "--duration", "0.01", "-o", "/dev/null"));
        } while (r.code == 0 && ++busy_tries < 500);
        ASSERT_CTL(d, r, 1, "a second trace while a user's runs");
        ASSERT_SAYS(d, r, "another trace is being taken", "one trace at a time");
        ctl_run_argv(&r, AS_ADMIN, S, IDS("trace", "--duration", "0.05", "-o", "/dev/null"));
        ASSERT_CTL(d, r, 0, "an admin's trace while a user's runs");
        int st;
        while (waitpid(user, &st, 0) < 0)
                ck_assert(errno == EINTR);
        D_ASSERT(d, WIFEXITED(st) && WEXITSTATUS(st) != 0, "the user's trace, taken over, should fail (status %d)", st);
        /* an admin may */
        ctl_run_as2(&r, AS_ADMIN, S, "cancel", s42id, "0");
        ASSERT_CTL(d, r, 0, "cancel by an admin");
        char buf[256];
        kid_tell(&k1, 'W');
        const char *got = kid_expect(d, &k1, "G0", WAIT_MS, buf, sizeof(buf), "uid 4242's session");
        D_ASSERT(d, strstr(got, "-125 cancelled by uid 4244"), "uid 4242's graph: %s", got);
        /* the owner may kill its own session */
        char s43id[32];
        snprintf(s43id, sizeof(s43id), "%llu", session_of(d, S, 4243));
        ctl_run_as(&r, AS_4243, S, "kill", s43id);
        ASSERT_CTL(d, r, 0, "kill of one's own session");
        kid_tell(&k2, 'W');
        got = kid_expect(d, &k2, "G0", WAIT_MS, buf, sizeof(buf), "uid 4243's session");
        D_ASSERT(d, strstr(got, "-104 session stopped: session ") && strstr(got, "closed by uid 4243"),
                 "uid 4243's graph after the kill: %s", got);

        /* visibility = all, on SIGHUP */
        static const char all[] = "[access]\nvisibility = all\n";
        FILE *f = fopen(conf, "w");
        ck_assert(f && fputs(all, f) >= 0 && fclose(f) == 0);
        kill(d->pid, SIGHUP);
        D_ASSERT(d, log_has(d, "SIGHUP: reloaded"), "no reload after SIGHUP");
        struct holder_arg a3 = { &u4243, S };
        struct kid k3;
        holder_start(d, &k3, &a3);
        D_ASSERT(d, sessions_seen(d, AS_4243, S, &s42, &s43) == 2 && s42 && s43,
                 "visibility = all: uid 4243 does not see every session");
        /* admin_groups is no longer in the file: uid 4244 is an admin no
         * more (a key removed goes back to its default). */
        ctl_run_as2(&r, AS_ADMIN, S, "cancel", s42id, "0");
        ASSERT_CTL(d, r, 4, "cancel by an admin removed from the file");
        /* visibility removed too: own again */
        static const char none[] = "[limits]\nmax_sessions = 63\n";
        f = fopen(conf, "w");
        ck_assert(f && fputs(none, f) >= 0 && fclose(f) == 0);
        kill(d->pid, SIGHUP);
        D_ASSERT(d, log_has(d, "max_sessions 63"), "no reload after the second SIGHUP");
        D_ASSERT(d, sessions_seen(d, AS_4243, S, &s42, &s43) == 1 && s43 && !s42,
                 "visibility removed from the file: uid 4243 still sees others' sessions");
        kid_tell(&k1, 'Q');
        kid_tell(&k2, 'Q');
        kid_tell(&k3, 'Q');
        kid_end(d, &k1, IO_MS, "uid 4242's session");
        kid_end(d, &k2, IO_MS, "uid 4243's session");
        kid_end(d, &k3, IO_MS, "uid 4243's second session");
        stop_hbgd(d);
        unlink(conf);
}
END_TEST

static Suite *suite(bool root) {
        Suite *s = suite_create("e2e_access");
        TCase *tc = tcase_create("kernel");
        tcase_add_test(tc, kernel_semantics);
        suite_add_tcase(s, tc);
        if (!root)
                return s;
        tc = tcase_create("access");
        tcase_set_timeout(tc, 120);
        tcase_add_test(tc, supplementary_groups);
        tcase_add_test(tc, socket_permissions);
        tcase_add_test(tc, connection_limit);
        tcase_add_loop_test(tc, refusal_race, 0, N_MODES);
        tcase_add_test(tc, refusal_log_limit);
        tcase_add_test(tc, stopping);
        tcase_add_test(tc, visibility_roles);
        suite_add_tcase(s, tc);
        return s;
}

static bool root;

static int setup(void) {
        root = geteuid() == 0;
        if (root && (access(daemon_binary(), X_OK) < 0 || !make_ctl_copy() || daemon_util_init() < 0))
                return -1;
        return 0;
}

static Suite *root_suite(void) {
        return suite(root);
}

static void teardown(void) {
        if (root)
                daemon_util_cleanup();
}

static int skipped(void) {
        if (root)
                return 0;
        fprintf(stderr, "test_e2e_access: SKIPPED everything but kernel_semantics: switching to other "
                "uids and groups needs root (run it as root, as CI does)\n");
        return CHECK_SKIP;
}

const struct check_main check_main = {
        .suite = root_suite,
        .ignore_sigpipe = true,
        .setup = setup,
        .teardown = teardown,
        .skipped = skipped,
};
