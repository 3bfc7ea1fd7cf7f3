/* SPDX-License-Identifier: MIT */
/*
 * Who may connect, and what those who may not are told: a real hbgd
 * started as root, hbgctl run as other users with setpriv(1) and
 * libhbgclient in forked children that switch uid, gid and groups
 * (setgroups, setresgid, setresuid). The uids and gids (4242, 4343, 4344)
 * need no /etc/passwd or /etc/group entry.
 *
 *   socket_permissions    a directory or socket mode that keeps the user
 *                         out: exit 4 naming socket, owner, mode and fix
 *
 * Needs root (the whole point is other uids): as another user it exits 77,
 * saying so.
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
#include "tests/daemon_util.h"
#include "tests/e2e_kid.h"
#include "tests/e2e_util.h"

#define USER 4242u
#define GROUP_OK 4343u          /* the socket's group */
#define GROUP_OTHER 4344u

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

/* hbgctl --socket SOCK VERB [ARG] as `ids` (setpriv options, NULL: as
 * root). */
static void ctl_run_as(struct result *r, const char *const *ids, const char *sock, const char *verb,
                       const char *arg) {
        const char *argv[16];
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
        argv[n++] = verb;
        if (arg)
                argv[n++] = arg;
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

static void ctl_as(struct result *r, const char *const *ids, const char *sock, const char *verb) {
        ctl_run_as(r, ids, sock, verb, NULL);
}

#define IDS(...) ((const char *const[]){ __VA_ARGS__, NULL })
#define AS_USER_IN(groups) IDS("--reuid=4242", "--regid=4242", "--groups=" groups)

#define ASSERT_CTL(d, r, want, what)                                                                  \
        D_ASSERT(d, (r).code == (want), "%s: hbgctl exit %d, want %d\nstdout:\n%.300s\nstderr:\n%.500s", \
                 what, \
                 (r).code, (want), (r).out, (r).err)
#define ASSERT_SAYS(d, r, needle, what)                                                            \
        D_ASSERT(d, strstr((r).err, needle), "%s: hbgctl's stderr does not say \"%.200s\":\n%.600s", \
                 what, \
                 needle, (r).err)

/* ------------------------------------------------------------ clients as another user */

struct ids {
        uid_t uid;
        gid_t gid;
        gid_t groups[4];
        int n_groups;
};

static const struct ids user_in_ok = { USER, USER, { GROUP_OK }, 1 };
static const struct ids user_in_other = { USER, USER, { GROUP_OTHER }, 1 };

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
 * FAIL if a later one differs in code. */
static int connect_fn(int sock, void *argp) {
        const struct connect_arg *a = argp;
        if (!become(sock, a->ids))
                return 1;
        int held[32];
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
                if (err != first) {
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

static struct hbgd_proc *start_open(int mode, const char *conf) {
        struct hbgd_proc *d = start_hbgd_conf(mode, conf);
        open_to_all(d);
        return d;
}

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

static Suite *suite(void) {
        Suite *s = suite_create("e2e_access");
        TCase *tc = tcase_create("access");
        tcase_set_timeout(tc, 120);
        tcase_add_test(tc, socket_permissions);
        suite_add_tcase(s, tc);
        return s;
}

int main(void) {
        signal(SIGPIPE, SIG_IGN);
        if (geteuid() != 0) {
                fprintf(stderr, "test_e2e_access: SKIPPED: switching to other uids and groups needs root (run it "
                        "as root, as CI does)\n");
                return 77;
        }
        if (access(daemon_binary(), X_OK) < 0 || !make_ctl_copy() || daemon_util_init() < 0)
                return 1;
        SRunner *sr = srunner_create(suite());
        srunner_run_all(sr, CK_NORMAL);
        int failed = srunner_ntests_failed(sr);
        srunner_free(sr);
        daemon_util_cleanup();
        return failed ? 1 : 0;
}
