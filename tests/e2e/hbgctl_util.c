/* SPDX-License-Identifier: MIT */
/*
 * What the hbgctl end-to-end tests share (tests/e2e/hbgctl_util.h):
 * finding hbgctl and the graph files, running a program and collecting
 * its exit code and output, hbgctl's JSON, an hbgd of the test's own.
 */
#include "tests/e2e/hbgctl_util.h"

#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

char hbgctl_bin[PATH_MAX];
char graphs_dir[2048];

/* The directory of this executable. */
static void exe_dir(char *buf, size_t sz) {
        ssize_t n = readlink("/proc/self/exe", buf, sz - 1);
        if (n < 0)
                n = 0;
        buf[n] = 0;
        char *slash = strrchr(buf, '/');
        if (slash)
                *slash = 0;
}

static bool find_paths(void) {
        char dir[1024];
        const char *e = getenv("HBGCTL");
        exe_dir(dir, sizeof(dir));
        if (e && *e)
                snprintf(hbgctl_bin, sizeof(hbgctl_bin), "%s", e);
        else
                snprintf(hbgctl_bin, sizeof(hbgctl_bin), "%s/../bin/hbgctl", dir);
        if (access(hbgctl_bin, X_OK) < 0) {
                fprintf(stderr, "%s: %s: %s; build it or set HBGCTL\n", program_invocation_short_name, hbgctl_bin,
                        strerror(errno));
                return false;
        }
        e = getenv("HBG_TEST_GRAPHS");
        if (e && *e) {
                snprintf(graphs_dir, sizeof(graphs_dir), "%s", e);
                return true;
        }
        if (access("tests/graphs/kernels.json", R_OK) == 0) {
                snprintf(graphs_dir, sizeof(graphs_dir), "tests/graphs");
                return true;
        }
        for (int up = 0; up < 5; up++) {
                char probe[PATH_MAX + 64];
                snprintf(probe, sizeof(probe), "%s/tests/graphs/kernels.json", dir);
                if (access(probe, R_OK) == 0) {
                        snprintf(graphs_dir, sizeof(graphs_dir), "%s/tests/graphs", dir);
                        return true;
                }
                char *slash = strrchr(dir, '/');
                if (!slash || slash == dir)
                        break;
                *slash = 0;
        }
        fprintf(stderr, "%s: tests/graphs not found; set HBG_TEST_GRAPHS\n", program_invocation_short_name);
        return false;
}

/* ------------------------------------------------------------ running hbgctl */

char *slurp(const char *path) {
        FILE *f = fopen(path, "r");
        ck_assert_msg(f, "%s: %s", path, strerror(errno));
        size_t cap = 4096, n = 0;
        char *buf = malloc(cap);
        size_t r;
        while ((r = fread(buf + n, 1, cap - n - 1, f)) > 0) {
                n += r;
                if (cap - n < 2)
                        buf = realloc(buf, cap *= 2);
        }
        buf[n] = 0;
        fclose(f);
        return buf;
}

void result_free(struct result *r) {
        free(r->out);
        free(r->err);
}

/* Read the pty's master until the child's side is gone. */
static char *drain_pty(int master) {
        size_t cap = 4096, n = 0;
        char *buf = malloc(cap);
        for (;;) {
                if (cap - n < 2)
                        buf = realloc(buf, cap *= 2);
                ssize_t r = read(master, buf + n, cap - n - 1);
                if (r > 0)
                        n += (size_t)r;
                else if (r < 0 && errno == EINTR)
                        continue;
                else
                        break;    /* EIO: no slave open any more */
        }
        buf[n] = 0;
        return buf;
}

/* Run the program with the NULL-terminated argument list; HBG_SOCKET is
 * set to env_socket in its environment (removed if NULL). */
struct result run_v(const struct how *h, const char *env_socket, const char *const *args) {
        char dir[] = "/tmp/hbgctl-test.XXXXXX", out[64], err[64];
        const char *bin = h->bin ? h->bin : hbgctl_bin;
        ck_assert(mkdtemp(dir));
        snprintf(out, sizeof(out), "%s/out", dir);
        snprintf(err, sizeof(err), "%s/err", dir);
        const char *argv[64] = { bin };
        int n = 1;
        for (; args[n - 1] && n < 63; n++)
                argv[n] = args[n - 1];
        argv[n] = NULL;
        int master = -1, slave = -1;
        if (h->stderr_tty) {
                /* The slave is open from before the fork, so that the
                 * master reads EIO only once the program closed it. */
                char name[128];
                master = posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC);
                ck_assert_msg(master >= 0 && grantpt(master) == 0 && unlockpt(master) == 0 &&
                                      ptsname_r(master, name, sizeof(name)) == 0,
                              "no pty: %s", strerror(errno));
                slave = open(name, O_RDWR | O_NOCTTY | O_CLOEXEC);
                ck_assert_msg(slave >= 0, "%s: %s", name, strerror(errno));
        }
        pid_t pid = fork();
        ck_assert(pid >= 0);
        if (pid == 0) {
                int o = open(out, O_WRONLY | O_CREAT | O_TRUNC, 0600);
                int e = h->stderr_tty ? slave : open(err, O_WRONLY | O_CREAT | O_TRUNC, 0600);
                if (o < 0 || e < 0 || dup2(o, 1) < 0 || dup2(e, 2) < 0)
                        _exit(126);
                if (h->stdin_path) {
                        int i = open(h->stdin_path, O_RDONLY);
                        if (i < 0 || dup2(i, 0) < 0)
                                _exit(126);
                }
                if (env_socket)
                        setenv("HBG_SOCKET", env_socket, 1);
                else
                        unsetenv("HBG_SOCKET");
                execv(bin, (char *const *)argv);
                _exit(127);
        }
        if (slave >= 0)
                close(slave);
        char *tty_out = master >= 0 ? drain_pty(master) : NULL;
        if (master >= 0)
                close(master);
        int st;
        while (waitpid(pid, &st, 0) < 0)
                ck_assert(errno == EINTR);
        struct result r = {
                .code = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st),
                .out = slurp(out),
                .err = tty_out ? tty_out : slurp(err),
        };
        unlink(out);
        unlink(err);
        rmdir(dir);
        return r;
}

struct result ctl_v(const char *env_socket, const char *const *args) {
        static const struct how plain = { 0 };
        return run_v(&plain, env_socket, args);
}

json_object *parse_json(const struct result *r) {
        json_object *o = json_tokener_parse(r->out);
        ck_assert_msg(o, "stdout is not JSON:\n%s\nstderr:\n%s", r->out, r->err);
        return o;
}

json_object *get(json_object *o, const char *key) {
        json_object *v = NULL;
        ck_assert_msg(json_object_object_get_ex(o, key, &v), "no \"%s\" in %s", key,
                      json_object_to_json_string(o));
        return v;
}

struct hbgd_proc *start(void) {
        struct hbgd_proc *d = NULL;
        int err = daemon_start(&d, NULL, NULL);
        ck_assert_msg(err == 0, "hbgd did not start: %s", strerror(-err));
        return d;
}

void graph_path(char *buf, size_t sz, const char *name) {
        snprintf(buf, sz, "%s/%s", graphs_dir, name);
}

int hbgctl_util_setup(void) {
        return find_paths() ? daemon_util_setup() : -1;
}

/* The first line of out starting with `prefix`. */
const char *line_at(const char *out, const char *prefix) {
        for (const char *l = out; l && *l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : NULL)
                if (strncmp(l, prefix, strlen(prefix)) == 0)
                        return l;
        ck_abort_msg("no line starting with \"%s\" in:\n%s", prefix, out);
        return NULL;
}

/* Every word of the line (a table's header) is a key of the JSON object
 * (a row of the same table): the text and --json use the same names. */
void assert_names(const char *line, json_object *row) {
        char buf[1024];
        size_t n = strcspn(line, "\n");
        ck_assert(n < sizeof(buf));
        memcpy(buf, line, n);
        buf[n] = 0;
        int words = 0;
        for (char *save = NULL, *w = strtok_r(buf, " ", &save); w; w = strtok_r(NULL, " ", &save), words++)
                ck_assert_msg(json_object_object_get_ex(row, w, NULL), "column \"%s\" is not a key of %s", w,
                              json_object_to_json_string(row));
        ck_assert_int_gt(words, 0);
}

void assert_usage_error(struct result r, const char *what) {
        ASSERT_CODE(r, 2);
        ck_assert_msg(strstr(r.err, what), "stderr does not say \"%s\":\n%s", what, r.err);
        ck_assert_msg(!strstr(r.err, "Usage:"), "stderr dumps the help:\n%s", r.err);
        ck_assert_msg(r.out[0] == 0, "stdout not empty:\n%s", r.out);
        result_free(&r);
}

/* stdout is one JSON object with "error": {code, exit, message}; `status`
 * (run's) is "error" when given. The code is a negative errno where the
 * failure has one (hbgd not running: the connect's), else 0. */
void assert_json_error(const struct result *r, const char *status, int exit_code, const char *what) {
        json_object *o = parse_json(r), *e = get(o, "error");
        if (status)
                ck_assert_str_eq(json_object_get_string(get(o, "status")), status);
        ck_assert_int_eq(json_object_get_int(get(e, "exit")), exit_code);
        ck_assert_msg(exit_code == 3 ? json_object_get_int(get(e, "code")) < 0 : json_object_get_int(get(e, "code")) <= 0,
                      "code %s", json_object_to_json_string(e));
        ck_assert_msg(strstr(json_object_get_string(get(e, "message")), what), "%s", json_object_to_json_string(e));
        json_object_put(o);
}

/* hbgd's tasks completed so far, from `hbgctl status --json`. */
uint64_t daemon_tasks_completed(const char *S) {
        struct result r = ctl(S, "status", "--json");
        ASSERT_CODE(r, 0);
        json_object *o = parse_json(&r);
        uint64_t n = json_object_get_uint64(get(get(o, "daemon"), "tasks_completed"));
        json_object_put(o);
        result_free(&r);
        return n;
}

/* The session ids of this process, ascending (sessions --json). */
size_t my_sessions(const char *S, uint64_t *ret, size_t max) {
        struct result r = ctl(S, "sessions", "--json");
        ASSERT_CODE(r, 0);
        json_object *o = parse_json(&r), *a = get(o, "sessions");
        size_t n = 0;
        for (size_t i = 0; i < json_object_array_length(a) && n < max; i++) {
                json_object *e = json_object_array_get_idx(a, i);
                if (json_object_get_int64(get(e, "pid")) == getpid())
                        ret[n++] = json_object_get_uint64(get(e, "session"));
        }
        json_object_put(o);
        result_free(&r);
        return n;
}

uint64_t add_noop_after(hbg_client *c, uint64_t dep) {
        hbg_task t = HBG_TASK_INIT("noop");
        t.n_deps = 1;
        t.deps[0] = dep;
        uint64_t id;
        ck_assert_int_eq(hbg_graph_add(c, &t, &id), 0);
        return id;
}

int host_ok(void *userdata) {
        (void)userdata;
        return 0;
}
