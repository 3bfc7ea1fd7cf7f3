/* SPDX-License-Identifier: MIT */
/*
 * hbgctl end to end: build/bin/hbgctl run as a subprocess against a real
 * hbgd (tests/e2e/daemon_util.c, one per test), its --json output parsed with
 * json-c. Graph files are tests/graphs/ (*.json); their expected outputs are
 * computed by hand below (every value is exact in f32).
 *
 * $HBGCTL overrides the hbgctl binary (default: ../bin/hbgctl next to this
 * test), $HBG_TEST_GRAPHS the graph directory (default: tests/graphs found
 * from the working directory or above this binary). CK_RUN_CASE=usage|
 * status|run|malformed|cli|big runs one group. The cli group also runs
 * hbgd's own command line (--help, --version, --check-config).
 */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <inttypes.h>
#include <libgen.h>
#include <limits.h>
#include <locale.h>
#include <pwd.h>
#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>
#include <wchar.h>

#include <json-c/json.h>

#include "hbg/hbg.h"
#include "proto/wire.h"
#include "shm/layout.h"
#include "common/kernel_sig.h"
#include "tests/e2e/daemon_util.h"
#include "tests/check_main.h"

#define WAIT_MS 60000 /* "never hangs" */

static char hbgctl_bin[PATH_MAX];
static char graphs_dir[2048];

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
                fprintf(stderr, "test_e2e_hbgctl: %s: %s; build it or set HBGCTL\n", hbgctl_bin,
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
        fprintf(stderr, "test_e2e_hbgctl: tests/graphs not found; set HBG_TEST_GRAPHS\n");
        return false;
}

/* ------------------------------------------------------------ running hbgctl */

struct result {
        int code;       /* exit code, or 128 + signal */
        char *out, *err;
};

static char *slurp(const char *path) {
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

static void result_free(struct result *r) {
        free(r->out);
        free(r->err);
}

/* How to run a program: which one, its standard input, its stderr on a
 * terminal (a pty whose output is collected). */
struct how {
        const char *bin;          /* NULL: hbgctl */
        const char *stdin_path;   /* NULL: inherited */
        bool stderr_tty;
};

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
static struct result run_v(const struct how *h, const char *env_socket, const char *const *args) {
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

static struct result ctl_v(const char *env_socket, const char *const *args) {
        static const struct how plain = { 0 };
        return run_v(&plain, env_socket, args);
}

#define ctl(sock, ...) ctl_v((sock), (const char *const[]){ __VA_ARGS__, NULL })

#define ASSERT_CODE(r, want)                                                            \
        ck_assert_msg((r).code == (want), "exit %d, want %d\nstdout:\n%s\nstderr:\n%s", \
                      (r).code, (want), (r).out, (r).err)

static json_object *parse_json(const struct result *r) {
        json_object *o = json_tokener_parse(r->out);
        ck_assert_msg(o, "stdout is not JSON:\n%s\nstderr:\n%s", r->out, r->err);
        return o;
}

static json_object *get(json_object *o, const char *key) {
        json_object *v = NULL;
        ck_assert_msg(json_object_object_get_ex(o, key, &v), "no \"%s\" in %s", key,
                      json_object_to_json_string(o));
        return v;
}

static struct hbgd_proc *start(void) {
        struct hbgd_proc *d = NULL;
        int err = daemon_start(&d, NULL, NULL);
        ck_assert_msg(err == 0, "hbgd did not start: %s", strerror(-err));
        return d;
}

static void graph_path(char *buf, size_t sz, const char *name) {
        snprintf(buf, sz, "%s/%s", graphs_dir, name);
}

/* ------------------------------------------------------------ usage */

static void assert_usage_error(struct result r, const char *what) {
        ASSERT_CODE(r, 2);
        ck_assert_msg(strstr(r.err, what), "stderr does not say \"%s\":\n%s", what, r.err);
        ck_assert_msg(!strstr(r.err, "Usage:"), "stderr dumps the help:\n%s", r.err);
        ck_assert_msg(r.out[0] == 0, "stdout not empty:\n%s", r.out);
        result_free(&r);
}

START_TEST(usage_errors) {
        assert_usage_error(ctl(NULL, "--socket", "/nonexistent", "bogus"), "unknown command 'bogus'");
        assert_usage_error(ctl(NULL, "--bogus"), "unknown option '--bogus'");
        assert_usage_error(ctl(NULL, "status", "-x"), "unknown option '-x'");
        assert_usage_error(ctl(NULL, "run"), "run needs a graph FILE");
        assert_usage_error(ctl(NULL, "--json", "run"), "run needs a graph FILE");
        assert_usage_error(ctl(NULL, "status", "extra"), "unexpected argument 'extra'");
        assert_usage_error(ctl(NULL, "run", "a.json", "b.json"), "unexpected argument 'b.json'");
        assert_usage_error(ctl(NULL, "status", "--socket"), "needs an argument");
        assert_usage_error(ctl(NULL, "status", "--progress"), "option '--progress' is an option of run, not of status");
        assert_usage_error(ctl(NULL, "-b", "sessions"), "option '--batch' is an option of top, not of sessions");
        assert_usage_error(ctl(NULL, "top", "-n", "0"), "-n: '0'");
        assert_usage_error(ctl(NULL, "top", "-d", "soon"), "-d: 'soon'");
        assert_usage_error(ctl(NULL, "help", "bogus"), "unknown command 'bogus'");
        assert_usage_error(ctl(NULL, "help", "run", "top"), "unexpected argument 'top'");
        struct result r = ctl(NULL, "--help");
        ASSERT_CODE(r, 0);
        ck_assert(strstr(r.out, "Usage:"));
        result_free(&r);
        r = ctl(NULL, "version");
        ASSERT_CODE(r, 0);
        ck_assert_str_eq(r.out, "hbgctl " HBG_VERSION "\n");
        result_free(&r);
        r = ctl(NULL, "version", "--json");
        ASSERT_CODE(r, 0);
        json_object *o = parse_json(&r);
        ck_assert_str_eq(json_object_get_string(get(o, "hbgctl")), HBG_VERSION);
        json_object_put(o);
        result_free(&r);
}
END_TEST

/* stdout is one JSON object with "error": {code, exit, message}; `status`
 * (run's) is "error" when given. The code is a negative errno where the
 * failure has one (hbgd not running: the connect's), else 0. */
static void assert_json_error(const struct result *r, const char *status, int exit_code, const char *what) {
        json_object *o = parse_json(r), *e = get(o, "error");
        if (status)
                ck_assert_str_eq(json_object_get_string(get(o, "status")), status);
        ck_assert_int_eq(json_object_get_int(get(e, "exit")), exit_code);
        ck_assert_msg(exit_code == 3 ? json_object_get_int(get(e, "code")) < 0 : json_object_get_int(get(e, "code")) <= 0,
                      "code %s", json_object_to_json_string(e));
        ck_assert_msg(strstr(json_object_get_string(get(e, "message")), what), "%s", json_object_to_json_string(e));
        json_object_put(o);
}

/* Exit 3, a specific message, for every verb that needs hbgd. */
START_TEST(not_running) {
        char gone[PATH_MAX], file[PATH_MAX];
        struct hbgd_proc *d = start();
        snprintf(gone, sizeof(gone), "%s/gone.sock", d->dir);
        graph_path(file, sizeof(file), "kernels.json");
        const char *verbs[] = { "status", "sessions", "graphs", "threads", "kernels", "top" };
        for (size_t i = 0; i < sizeof(verbs) / sizeof(verbs[0]); i++) {
                struct result r = ctl(NULL, "--socket", gone, verbs[i]);
                ASSERT_CODE(r, 3);
                ck_assert_msg(strstr(r.err, "hbgd is not running on"), "%s: %s", verbs[i], r.err);
                result_free(&r);
                r = ctl(gone, verbs[i], "--json");   /* via HBG_SOCKET */
                ASSERT_CODE(r, 3);
                assert_json_error(&r, NULL, 3, "hbgd is not running on");
                result_free(&r);
        }
        struct result r = ctl(NULL, "run", file, "--socket", gone);
        ASSERT_CODE(r, 3);
        ck_assert(strstr(r.err, "hbgd is not running on"));
        ck_assert_msg(r.out[0] == 0, "%s", r.out);
        result_free(&r);
        r = ctl(NULL, "run", file, "--socket", gone, "--json");
        ASSERT_CODE(r, 3);
        assert_json_error(&r, "error", 3, "hbgd is not running on");
        result_free(&r);
        r = ctl(gone, "top", "-b", "-n", "1", "--json");
        ASSERT_CODE(r, 3);
        assert_json_error(&r, NULL, 3, "hbgd is not running on");
        result_free(&r);
        r = ctl(NULL, "--socket", gone);   /* default verb */
        ASSERT_CODE(r, 3);
        result_free(&r);
        /* hbgd stopped: its own socket path */
        char sock[sizeof(d->socket_path)];
        memcpy(sock, d->socket_path, sizeof(sock));
        daemon_stop(d, 30000);
        r = ctl(NULL, "--socket", sock, "status");
        ASSERT_CODE(r, 3);
        result_free(&r);
        daemon_destroy(d);
}
END_TEST

/* Is process pid blocked in poll() or ppoll() (/proc/PID/syscall)? */
static bool in_poll(pid_t pid) {
        char path[64], buf[64] = "";
        snprintf(path, sizeof(path), "/proc/%d/syscall", (int)pid);
        FILE *f = fopen(path, "r");
        if (!f)
                return false;
        long nr = -1;
        bool ok = fgets(buf, sizeof(buf), f) && sscanf(buf, "%ld", &nr) == 1;
        fclose(f);
#ifdef SYS_poll
        if (ok && nr == SYS_poll)
                return true;
#endif
        return ok && nr == SYS_ppoll;
}

/* hbgd gone while hbgctl waits for its answer (the connection reset, no
 * Error queued): hbgd is not running, exit 3, as when it was gone before. */
START_TEST(gone_mid_request) {
        struct hbgd_proc *d = start();
        char out[PATH_MAX], err[PATH_MAX];
        snprintf(out, sizeof(out), "%s/top.out", d->dir);
        snprintf(err, sizeof(err), "%s/top.err", d->dir);
        /* Stopped, hbgd still listens: the connect completes from the
         * backlog and hbgctl waits in poll() for the answer. */
        ck_assert_int_eq(kill(d->pid, SIGSTOP), 0);
        pid_t pid = fork();
        ck_assert(pid >= 0);
        if (pid == 0) {
                int o = open(out, O_WRONLY | O_CREAT | O_TRUNC, 0600), e = open(err, O_WRONLY | O_CREAT | O_TRUNC, 0600);
                if (o < 0 || e < 0 || dup2(o, 1) < 0 || dup2(e, 2) < 0)
                        _exit(126);
                execl(hbgctl_bin, hbgctl_bin, "--socket", d->socket_path, "top", "-b", "-n", "1", (char *)NULL);
                _exit(127);
        }
        int tries = 0;
        while (!in_poll(pid) && tries++ < 10000)
                usleep(1000);
        ck_assert_msg(in_poll(pid), "hbgctl top never waited for hbgd's answer");
        ck_assert_int_eq(kill(d->pid, SIGKILL), 0);
        int st;
        while (waitpid(pid, &st, 0) < 0)
                ck_assert(errno == EINTR);
        char *e = slurp(err);
        ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 3, "top: status %#x, want exit 3:\n%s", st, e);
        ck_assert_msg(strstr(e, "hbgd closed the connection"), "%s", e);
        free(e);
        daemon_destroy(d);
}
END_TEST

/* ------------------------------------------------------------ status verbs */

/* Every word of the line (a table's header) is a key of the JSON object
 * (a row of the same table): the text and --json use the same names. */
static void assert_names(const char *line, json_object *row) {
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

/* The other way round: every key of the JSON object (a row) is a word of
 * the table's header, the first line of text, but `except` (or NULL). */
static void assert_all_shown(const char *text, json_object *row, const char *except) {
        char header[1024];
        snprintf(header, sizeof(header), " %.*s ", (int)strcspn(text, "\n"), text);
        json_object_object_foreach(row, key, val) {
                (void)val;
                char w[80];
                snprintf(w, sizeof(w), " %s ", key);
                ck_assert_msg((except && strcmp(key, except) == 0) || strstr(header, w), "the text lacks %s:\n%s",
                              key, text);
        }
}

/* The first line of out starting with `prefix`. */
static const char *line_at(const char *out, const char *prefix) {
        for (const char *l = out; l && *l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : NULL)
                if (strncmp(l, prefix, strlen(prefix)) == 0)
                        return l;
        ck_abort_msg("no line starting with \"%s\" in:\n%s", prefix, out);
        return NULL;
}

/* The JSON of `hbgctl --json ARGS` and the text of `hbgctl ARGS`. */
static json_object *json_and_text(const char *S, const char *verb, char **ret_text) {
        struct result r = ctl(S, verb, "--json");
        ASSERT_CODE(r, 0);
        json_object *o = parse_json(&r);
        result_free(&r);
        r = ctl(S, verb);
        ASSERT_CODE(r, 0);
        *ret_text = r.out;
        free(r.err);
        return o;
}

/* Each verb's JSON is one object with its sections only, and its text
 * shows the JSON's names. */
static void check_names(const char *S) {
        char *text;
        json_object *o = json_and_text(S, "status", &text);
        ck_assert_int_eq(json_object_object_length(o), 2);
        json_object *dm = get(o, "daemon");
        /* "name value" lines after the headline, up to the blank line */
        for (const char *l = strchr(text, '\n') + 1; *l && *l != '\n'; l = strchr(l, '\n') + 1) {
                char key[64];
                ck_assert_int_eq(sscanf(l, "%63s", key), 1);
                ck_assert_msg(json_object_object_get_ex(dm, key, NULL), "label %s not in daemon", key);
        }
        assert_names(line_at(text, "session "), json_object_array_get_idx(get(o, "sessions"), 0));
        json_object_put(o);
        free(text);

        static const char *const verbs[] = { "sessions", "graphs", "threads", "kernels" };
        for (size_t i = 0; i < sizeof(verbs) / sizeof(verbs[0]); i++) {
                o = json_and_text(S, verbs[i], &text);
                ck_assert_msg(json_object_object_length(o) == 1, "%s: %s", verbs[i], json_object_to_json_string(o));
                json_object *a = get(o, verbs[i]);
                ck_assert_int_ge(json_object_array_length(a), 1);
                assert_names(text, json_object_array_get_idx(a, 0));
                json_object_put(o);
                free(text);
        }
}

START_TEST(status_verbs) {
        struct hbgd_proc *d = start();
        const char *S = d->socket_path;
        /* A session with one graph of N_TASKS kernel tasks run, so sessions
         * and graphs have rows and the session's counters something to
         * count. */
        enum { N_TASKS = 8 };
        hbg_client *c;
        ck_assert_int_eq(hbg_connect(&c, S), 0);
        hbg_task t = HBG_TASK_INIT("noop");
        for (int i = 0; i < N_TASKS; i++)
                ck_assert_int_eq(hbg_graph_add(c, &t, NULL), 0);
        uint64_t g;
        ck_assert_int_eq(hbg_graph_submit(c, &g), 0);
        ck_assert_int_eq(hbg_graph_wait(c, g, 20000), 0);

        /* tables */
        struct result r = ctl(NULL, "--socket", S);
        ASSERT_CODE(r, 0);
        ck_assert_msg(strstr(r.out, "hbgd " HBG_VERSION ", pid") && strstr(r.out, "threads") &&
                              strstr(r.out, "session"),
                      "%s", r.out);
        result_free(&r);
        r = ctl(S, "status");
        ASSERT_CODE(r, 0);
        ck_assert(strstr(r.out, "completed"));
        const char *closing = strstr(r.out, "\nsessions_closing ");
        ck_assert_msg(closing, "%s", r.out);
        closing += strlen("\nsessions_closing");
        closing += strspn(closing, " ");
        ck_assert_msg(strncmp(closing, "0\n", 2) == 0, "%s", r.out);
        ck_assert_msg(strstr(r.out, "\nspare_regions ") && strstr(r.out, "\nspare_regions_taken "), "%s", r.out);
        ck_assert_msg(strstr(r.out, " served\n"), "no served session in the table:\n%s", r.out);
        result_free(&r);
        r = ctl(NULL, "sessions", "--socket", S);
        ASSERT_CODE(r, 0);
        ck_assert_msg(strstr(r.out, "session") && strstr(r.out, "watermark"), "%s", r.out);
        ck_assert_msg(strchr(r.out, '\n') != strrchr(r.out, '\n'), "no session row:\n%s", r.out);
        result_free(&r);
        r = ctl(NULL, "--socket", S, "graphs");
        ASSERT_CODE(r, 0);
        ck_assert_msg(strstr(r.out, "submitted") && strstr(r.out, "retired"), "%s", r.out);
        ck_assert_msg(strchr(r.out, '\n') != strrchr(r.out, '\n'), "no graph row:\n%s", r.out);
        result_free(&r);
        r = ctl(S, "threads");
        ASSERT_CODE(r, 0);
        ck_assert_msg(strncmp(r.out, "thread", 6) == 0 && strstr(r.out, "\n0 "), "%s", r.out);
        result_free(&r);
        r = ctl(S, "kernels");
        ASSERT_CODE(r, 0);
        ck_assert_msg(strstr(r.out, "add_f32") && strstr(r.out, "in a, in b, out out") &&
                              strstr(r.out, "gemm_f32") && strstr(r.out, "fail"),
                      "%s", r.out);
        /* What --json has of a kernel's arguments, under the same names. */
        ck_assert_msg(strstr(r.out, " splittable ") && strstr(r.out, " in_place ") && strstr(r.out, " length_rule\n") &&
                              strstr(r.out, "every tensor exactly as long as the output\n"),
                      "%s", r.out);
        result_free(&r);

        /* --json */
        r = ctl(NULL, "--json", "--socket", S, "status");
        ASSERT_CODE(r, 0);
        json_object *o = parse_json(&r), *dm = get(o, "daemon");
        ck_assert_str_eq(json_object_get_string(get(dm, "version")), HBG_VERSION);
        ck_assert_int_eq(json_object_get_int64(get(dm, "pid")), d->pid);
        ck_assert_int_ge(json_object_get_int64(get(dm, "sessions")), 1);
        ck_assert_int_ge(json_object_get_int64(get(dm, "graphs_retired")), 1);
        /* No session closed: none kept. */
        ck_assert_int_eq(json_object_get_int64(get(dm, "sessions_closing")), 0);
        /* The session took a set made ahead only if the fill was done. */
        ck_assert_int_le(json_object_get_int64(get(dm, "spare_regions_taken")), 1);
        ck_assert_int_le(json_object_get_int64(get(dm, "spare_regions")), 8);
        json_object_put(o);
        result_free(&r);

        r = ctl(S, "sessions", "--json");
        ASSERT_CODE(r, 0);
        o = parse_json(&r);
        json_object *a = get(o, "sessions");
        ck_assert_int_ge(json_object_array_length(a), 1);
        json_object *s0 = json_object_array_get_idx(a, 0);
        ck_assert_int_eq(json_object_get_int64(get(s0, "pid")), getpid());
        ck_assert_int_ge(json_object_get_int64(get(s0, "submitted")), N_TASKS);
        /* the scheduler threads' counters for this session (hbgctl(1)) */
        ck_assert_int_ge(json_object_get_int64(get(s0, "classified")), N_TASKS);
        ck_assert_int_gt(json_object_get_int64(get(s0, "dispatched")), 0);
        ck_assert_int_ge(json_object_get_int64(get(s0, "completed")), N_TASKS);
        get(s0, "failsafe_pushes");
        get(s0, "failsafe_retries");
        get(s0, "watermark_advances");
        get(s0, "watermark_cas_failures");
        /* A library session that ran a graph is served. */
        ck_assert_str_eq(json_object_get_string(get(s0, "serving")), "served");
        /* the uid as a number, and its user's name beside it (as ps) */
        ck_assert_int_eq(json_object_get_int64(get(s0, "uid")), getuid());
        struct passwd *pw = getpwuid(getuid());
        ck_assert(pw);
        ck_assert_str_eq(json_object_get_string(get(s0, "user")), pw->pw_name);
        json_object_put(o);
        result_free(&r);
        /* the text drops none of the JSON's fields: every key is a column,
         * the uid shown by its user's name */
        r = ctl(S, "sessions");
        ASSERT_CODE(r, 0);
        {
                struct result j = ctl(S, "sessions", "--json");
                json_object *jo = parse_json(&j), *row = json_object_array_get_idx(get(jo, "sessions"), 0);
                assert_all_shown(r.out, row, "uid");
                char me[80];
                snprintf(me, sizeof(me), " %s ", pw->pw_name);
                ck_assert_msg(strstr(strchr(r.out, '\n'), me), "the session's user is not shown:\n%s", r.out);
                json_object_put(jo);
                result_free(&j);
        }
        result_free(&r);

        r = ctl(S, "graphs", "--json");
        ASSERT_CODE(r, 0);
        o = parse_json(&r);
        a = get(o, "graphs");
        ck_assert_int_ge(json_object_array_length(a), 1);
        json_object *g0 = json_object_array_get_idx(a, 0);
        ck_assert_int_eq(json_object_get_int64(get(g0, "graphs_submitted")), 1);
        ck_assert_int_eq(json_object_get_int64(get(g0, "graphs_retired")), 1);
        ck_assert_int_eq(json_object_get_int64(get(g0, "graphs_failed")), 0);
        json_object_put(o);
        result_free(&r);

        r = ctl(S, "threads", "--json");
        ASSERT_CODE(r, 0);
        o = parse_json(&r);
        a = get(o, "threads");
        ck_assert_int_ge(json_object_array_length(a), 1);
        get(json_object_array_get_idx(a, 0), "dispatched");
        get(json_object_array_get_idx(a, 0), "continued");
        get(json_object_array_get_idx(a, 0), "stolen");
        get(json_object_array_get_idx(a, 0), "batch_linked");
        get(json_object_array_get_idx(a, 0), "failsafe_retries");
        get(json_object_array_get_idx(a, 0), "watermark_cas_failures");
        {
                /* the text shows every counter of the JSON (hbgctl(1)) */
                struct result text = ctl(S, "threads");
                ASSERT_CODE(text, 0);
                assert_all_shown(text.out, json_object_array_get_idx(a, 0), NULL);
                result_free(&text);
        }
        json_object_put(o);
        result_free(&r);

        r = ctl(S, "--json", "kernels");
        ASSERT_CODE(r, 0);
        o = parse_json(&r);
        a = get(o, "kernels");
        ck_assert_int_eq(json_object_array_length(a), HBG_KERNEL_COUNT - 1);
        bool found = false;
        for (size_t i = 0; i < json_object_array_length(a); i++) {
                json_object *k = json_object_array_get_idx(a, i);
                /* Every kernel with its module (these: hbgd's own) and
                 * its full signature. */
                ck_assert_str_eq(json_object_get_string(get(k, "module")), "built-in");
                ck_assert_int_gt(json_object_get_string_len(get(k, "summary")), 0);
                ck_assert_int_gt(json_object_get_string_len(get(k, "length_rule")), 0);
                if (strcmp(json_object_get_string(get(k, "name")), "axpy_f32") == 0) {
                        ck_assert(json_object_get_boolean(get(k, "in_place")));
                        ck_assert_str_eq(json_object_get_string(get(k, "length")), "LENGTH_EQUAL");
                        json_object *args = get(k, "args");
                        ck_assert_int_eq(json_object_array_length(args), 3);
                        ck_assert_str_eq(json_object_get_string(get(json_object_array_get_idx(args, 1), "kind")), "inout");
                        ck_assert_str_eq(json_object_get_string(get(json_object_array_get_idx(args, 2), "kind")), "f32");
                        found = true;
                }
        }
        ck_assert(found);
        json_object_put(o);
        result_free(&r);

        check_names(S);
        hbg_disconnect(c);
        daemon_destroy(d);
}
END_TEST

/* ------------------------------------------------------------ graph files */

struct expect_out {
        const char *name;
        long len;
        double sum, min, max;
        int n_head;
        double head[8];
};

/* Run `file` with --json (options in the order given by variant), expect
 * status ok, n_tasks and the outputs. */
static void run_ok(const char *S, const char *file, int variant, long n_tasks,
                   const struct expect_out *ex, size_t n_ex) {
        char path[PATH_MAX];
        if (file[0] == '/')
                snprintf(path, sizeof(path), "%s", file);
        else
                graph_path(path, sizeof(path), file);
        struct result r;
        if (variant == 0)
                r = ctl(NULL, "--socket", S, "run", "--json", path);
        else if (variant == 1)
                r = ctl(NULL, "run", path, "--json", "--socket", S);
        else
                r = ctl(S, "--json", "run", path);
        ASSERT_CODE(r, 0);
        json_object *o = parse_json(&r);
        ck_assert_str_eq(json_object_get_string(get(o, "status")), "ok");
        ck_assert_int_eq(json_object_get_int64(get(o, "tasks")), n_tasks);
        ck_assert_int_ge(json_object_get_int64(get(o, "elapsed_us")), 0);
        ck_assert_int_ge(json_object_get_int64(get(o, "compile_us")), 0);
        json_object *outs = get(o, "outputs");
        ck_assert_int_eq(json_object_object_length(outs), (int)n_ex);
        for (size_t i = 0; i < n_ex; i++) {
                json_object *t = get(outs, ex[i].name);
                ck_assert_int_eq(json_object_get_int64(get(t, "len")), ex[i].len);
                ck_assert_msg(json_object_get_double(get(t, "sum")) == ex[i].sum,
                              "%s %s: sum %.17g, want %.17g", file, ex[i].name,
                              json_object_get_double(get(t, "sum")), ex[i].sum);
                ck_assert_msg(json_object_get_double(get(t, "min")) == ex[i].min, "%s %s: min %g",
                              file, ex[i].name, json_object_get_double(get(t, "min")));
                ck_assert_msg(json_object_get_double(get(t, "max")) == ex[i].max, "%s %s: max %g",
                              file, ex[i].name, json_object_get_double(get(t, "max")));
                json_object *h = get(t, "head");
                ck_assert_int_eq(json_object_array_length(h), ex[i].n_head);
                for (int k = 0; k < ex[i].n_head; k++)
                        ck_assert_msg(json_object_get_double(json_object_array_get_idx(h, k)) ==
                                              ex[i].head[k],
                                      "%s %s: head[%d] = %g, want %g", file, ex[i].name, k,
                                      json_object_get_double(json_object_array_get_idx(h, k)),
                                      ex[i].head[k]);
        }
        json_object_put(o);
        result_free(&r);
}

/* predicates.json: p = [0, 1]: x*10 skipped, x[0:2]*3 runs, p[0] = 1,
 * x[2:4]*5 now runs, p[1] = 0, x*100 skipped, s = sum(x) runs. */
static const struct expect_out pred[] = {
        { "x", 4, 16, 3, 5, 4, { 3, 3, 5, 5 } },
        { "p", 2, 1, 0, 1, 2, { 1, 0 } },
        { "s", 1, 16, 16, 16, 1, { 16 } },
};

/* The format's example as first written: s and p used only through
 * ranges, not declared, so zero-filled (the reduce is skipped: p[0] is
 * 0); c = a + b, its first half halved. */
static void run_format_example(const char *S) {
        struct expect_out c = { "c", 4096, 0, INFINITY, -INFINITY, 8, { 0 } };
        for (int i = 0; i < 4096; i++) {
                float v = 1.5f + (float)(0.0 + i * 0.001);
                if (i < 2048)
                        v *= 0.5f;
                c.sum += v;
                c.min = v < c.min ? v : c.min;
                c.max = v > c.max ? v : c.max;
                if (i < 8)
                        c.head[i] = v;
        }
        run_ok(S, "format_example.json", 0, 4, &c, 1);
}

START_TEST(run_graphs) {
        struct hbgd_proc *d = start();
        const char *S = d->socket_path;
        run_format_example(S);
        /* Every kernel once: x = 0..7, y = 1, A = [1 2; 3 4], B = ones, sm = 3. */
        static const struct expect_out kern[] = {
                /* z[0:2] = 5, z[2:4] = x[2:4], z[4:8] = x[4:8] + 1 */
                { "z", 8, 41, 2, 8, 8, { 5, 5, 2, 3, 5, 6, 7, 8 } },
                /* w = x*x, then * 0.5 */
                { "w", 8, 70, 0, 24.5, 8, { 0, 0.5, 2, 4.5, 8, 12.5, 18, 24.5 } },
                /* y = 2x + y */
                { "y", 8, 64, 1, 15, 8, { 1, 3, 5, 7, 9, 11, 13, 15 } },
                /* s = sum(w) */
                { "s", 1, 70, 70, 70, 1, { 70 } },
                /* C += A·ones: row sums */
                { "C", 4, 20, 3, 7, 4, { 3, 3, 7, 7 } },
                /* softmax of equal values */
                { "sm", 4, 2, 0.5, 0.5, 4, { 0.5, 0.5, 0.5, 0.5 } },
        };
        for (int v = 0; v < 3; v++)
                run_ok(S, "kernels.json", v, 11, kern, sizeof(kern) / sizeof(kern[0]));
        run_ok(S, "predicates.json", 0, 7, pred, 3);
        /* y = x; y[512:] *= 2; y[:512] += -1 * x[:512] = 0 */
        static const struct expect_out aft[] = {
                { "y", 1024, 785920, 0, 2046, 8, { 0 } },
                { "y[1020:1024]", 4, 8172, 2040, 2046, 4, { 2040, 2042, 2044, 2046 } },
        };
        run_ok(S, "after.json", 1, 5, aft, 2);

        /* human output of the same file */
        char path[PATH_MAX];
        graph_path(path, sizeof(path), "kernels.json");
        struct result r = ctl(S, "run", path);
        ASSERT_CODE(r, 0);
        ck_assert_msg(strncmp(r.out, "ok: 11 tasks in ", 16) == 0, "%s", r.out);
        ck_assert_msg(strstr(r.out, "\nz ") && strstr(r.out, "5 5 2 3 5 6 7 8") &&
                              strstr(r.out, "0.5 0.5 0.5 0.5"),
                      "%s", r.out);
        result_free(&r);

        /* The examples run too. */
        const char *examples[] = { "graph_basic.json", "graph_gemm.json", "graph_predicate.json" };
        for (size_t i = 0; i < 3; i++) {
                snprintf(path, sizeof(path), "%s/../../examples/%s", graphs_dir, examples[i]);
                r = ctl(S, "run", "--json", path);
                ASSERT_CODE(r, 0);
                json_object *o = parse_json(&r);
                ck_assert_str_eq(json_object_get_string(get(o, "status")), "ok");
                json_object_put(o);
                result_free(&r);
        }
        daemon_destroy(d);
}
END_TEST

/* A graph failing in hbgd: status error, and an error object naming the
 * task (index and name in the file), its kernel, the errno and hbgd's
 * message; the same on stderr without --json:
 *   hbgctl: graph failed at task 1 "boom" (kernel fail): Input/output error: kernel fail returned -EIO */
static void run_fails(const char *S, const char *file, unsigned index, const char *task, const char *kernel,
                      int code, const char *what) {
        char path[PATH_MAX];
        graph_path(path, sizeof(path), file);
        struct result r = ctl(S, "run", "--json", path);
        ASSERT_CODE(r, 1);
        json_object *o = parse_json(&r);
        ck_assert_str_eq(json_object_get_string(get(o, "status")), "error");
        json_object *e = get(o, "error");
        ck_assert_str_eq(json_object_get_string(get(e, "name")), task);
        ck_assert_int_eq(json_object_get_int64(get(e, "task")), index);
        ck_assert_str_eq(json_object_get_string(get(e, "kernel")), kernel);
        ck_assert_int_eq(json_object_get_int(get(e, "code")), code);
        ck_assert_str_eq(json_object_get_string(get(e, "errno")), strerrorname_np(-code));
        const char *msg = json_object_get_string(get(e, "message"));
        ck_assert_msg(strstr(msg, what), "%s: message \"%s\" does not say \"%s\"", file, msg, what);
        /* one meaning per key: "task" is the index (in "error"), "name" the name */
        ck_assert_msg(!json_object_object_get_ex(o, "task", NULL), "a second \"task\": %s",
                      json_object_to_json_string(o));
        ck_assert_int_eq(json_object_get_int(get(get(o, "error"), "exit")), 1);
        json_object_put(o);
        result_free(&r);

        r = ctl(S, "run", path);
        ASSERT_CODE(r, 1);
        char want[256];
        /* the code in hbg_strerror()'s words, which hbgd's log uses too */
        snprintf(want, sizeof(want), "hbgctl: graph failed at task %u \"%s\" (kernel %s): %s: ", index, task, kernel,
                 hbg_strerror(code));
        ck_assert_msg(r.out[0] == 0 && strstr(r.err, want) && strstr(r.err, what), "%s: stderr does not say "
                      "\"%s...%s\": %s", file, want, what, r.err);
        /* the errno's words once: the message does not repeat them */
        const char *words = strstr(r.err, want) + strlen(want);
        ck_assert_msg(!strstr(words, hbg_strerror(code)), "%s: \"%s\" twice: %s", file, hbg_strerror(code), r.err);
        result_free(&r);
}

START_TEST(run_failing) {
        struct hbgd_proc *d = start();
        /* A kernel's error at run time (fail returns its scalar), and the
         * validator's reason for a task it refuses. */
        run_fails(d->socket_path, "fail.json", 1, "boom", "fail", -5, "kernel fail returned -EIO");
        run_fails(d->socket_path, "rejected.json", 1, "bad_gemm", "gemm_f32", -EINVAL,
                  "gemm_f32: shape does not fit A");
        /* hbgd is fine afterwards */
        run_ok(d->socket_path, "predicates.json", 2, 7, pred, 3);
        daemon_destroy(d);
}
END_TEST

/* ------------------------------------------------------------ malformed */

static const struct {
        const char *file, *msg;
} malformed[] = {
        { "bad_json_eof.json", "bad_json_eof.json:4:1: invalid JSON" },
        { "bad_json_comma.json", "bad_json_comma.json:2:" },
        { "bad_missing_tasks.json", "$: missing \"tasks\"" },
        { "bad_missing_tensors.json", "$: missing \"tensors\"" },
        { "bad_missing_kernel.json", "$.tasks[1]: missing \"kernel\"" },
        { "bad_missing_len.json", "$.tensors.x: missing \"len\"" },
        { "bad_type_len.json", "$.tensors.x.len: expected an integer, got string" },
        { "bad_type_args.json", "$.tasks[0].args: expected an array, got string" },
        { "bad_type_scalar.json", "$.tasks[0].scalars[0]: expected a number, got string" },
        { "bad_type_u64.json", "$.tasks[0].scalars[0]: expected an integer, got double" },
        { "bad_type_tasks.json", "$.tasks: expected an array, got object" },
        { "bad_unknown_tensor.json", "$.tasks[1].args[1]: unknown tensor \"s\"" },
        { "bad_unknown_kernel.json", "$.tasks[0].kernel: unknown kernel \"nope\"" },
        { "bad_range.json", "$.tasks[0].args[0]: bad range in \"x[2:9]\"" },
        { "bad_range_empty.json", "$.tasks[0].args[0]: bad range in \"x[3:1]\"" },
        { "bad_range_syntax.json", "$.tasks[0].args[0]: bad range in \"x[1-2]\"" },
        { "bad_when.json", "$.tasks[0].when: \"x[0:2]\" must be one element" },
        { "bad_after.json", "$.tasks[0].after[0]: \"later\" is not the name of an earlier task" },
        { "bad_arity.json", "$.tasks[0]: kernel add_f32 takes 3 tensor arguments, got 2" },
        { "bad_output.json", "$.outputs[0]: unknown tensor \"q\"" },
        { "bad_key.json", "$.tasks[0]: unknown key \"kernal\"" },
        { "bad_keys_two.json", "$.tasks[0]: unknown key \"colour\"" },
        { "bad_type_task.json", "$.tasks[1]: expected an object, got int" },
        { "bad_type_name.json", "$.tasks[0].name: expected a string, got int" },
        { "bad_name_twice.json", "$.tasks[1].name: task name \"a\" is used twice" },
        { "bad_type_scalars.json", "$.tasks[0].scalars: expected an array, got int" },
        { "bad_blocks.json", "$.tasks[0].blocks: must be 1..4096" },
        { "bad_lanes.json", "$.tasks[0].lanes: unknown lanes \"wide\"" },
        { "bad_type_after.json", "$.tasks[1].after: expected an array, got string" },
        { "bad_null_after.json", "$.tasks[0].after: expected an array, got null" },
};

START_TEST(run_malformed) {
        struct hbgd_proc *d = start();
        char path[PATH_MAX];
        for (size_t i = 0; i < sizeof(malformed) / sizeof(malformed[0]); i++) {
                graph_path(path, sizeof(path), malformed[i].file);
                struct result r = ctl(d->socket_path, "run", path);
                ASSERT_CODE(r, 1);
                ck_assert_msg(strstr(r.err, malformed[i].msg), "%s: stderr does not say '%s':\n%s",
                              malformed[i].file, malformed[i].msg, r.err);
                ck_assert_msg(!strstr(r.err, "Usage:") && r.out[0] == 0, "%s", r.err);
                result_free(&r);
                r = ctl(d->socket_path, "run", path, "--json");
                ASSERT_CODE(r, 1);
                json_object *o = parse_json(&r);
                ck_assert_str_eq(json_object_get_string(get(o, "status")), "error");
                ck_assert(strstr(json_object_get_string(get(get(o, "error"), "message")), malformed[i].msg));
                json_object_put(o);
                result_free(&r);
        }
        /* A file that is not there. */
        struct result r = ctl(d->socket_path, "run", "/nonexistent/graph.json");
        ASSERT_CODE(r, 1);
        ck_assert_msg(strstr(r.err, "/nonexistent/graph.json: No such file"), "%s", r.err);
        result_free(&r);
        /* Malformed files are reported without hbgd too (exit 1, not 3). */
        graph_path(path, sizeof(path), "bad_range.json");
        r = ctl(NULL, "--socket", "/nonexistent/sock", "run", path);
        ASSERT_CODE(r, 1);
        result_free(&r);
        daemon_destroy(d);
}
END_TEST

/* ------------------------------------------------------------ big */

/* More than 100k tasks, far more than the task window: x[k] += 1 (axpy
 * with alpha 1 and a one) N times round-robin over 64 elements, then
 * s = sum(x). Every element is a chain of WAW/RAW dependencies. */
START_TEST(run_big) {
        enum { N = 120000, E = 64 };
        struct hbgd_proc *d = start();
        char path[PATH_MAX];
        snprintf(path, sizeof(path), "%s/big.json", d->dir);
        FILE *f = fopen(path, "w");
        ck_assert(f);
        fprintf(f, "{\"tensors\": {\"x\": {\"len\": %d}, \"one\": {\"len\": 1, \"init\": \"fill\", "
                   "\"value\": 1}, \"s\": {\"len\": 1}},\n \"tasks\": [\n",
                E);
        for (int i = 0; i < N; i++)
                fprintf(f, "  {\"kernel\": \"axpy_f32\", \"args\": [\"one\", \"x[%d:%d]\"], \"scalars\": [1]},\n",
                        i % E, i % E + 1);
        fprintf(f, "  {\"kernel\": \"reduce_sum_f32\", \"args\": [\"x\", \"s\"]}],\n \"outputs\": [\"x\", \"s\"]}\n");
        ck_assert_int_eq(fclose(f), 0);
        const double per = (double)N / E;   /* 1875 */
        const struct expect_out ex[] = {
                { "x", E, N, per, per, 8, { per, per, per, per, per, per, per, per } },
                { "s", 1, N, N, N, 1, { N } },
        };
        run_ok(d->socket_path, path, 0, N + 1, ex, 2);
        unlink(path);
        daemon_destroy(d);
}
END_TEST

/* ------------------------------------------------------------ help, version */

START_TEST(help_version) {
        const char *const opts[] = { "-V", "--version" };
        for (int i = 0; i < 2; i++) {
                struct result r = ctl(NULL, opts[i]);
                ASSERT_CODE(r, 0);
                ck_assert_str_eq(r.out, "hbgctl " HBG_VERSION "\n");
                result_free(&r);
        }
        struct result r = ctl(NULL, "--json", "-V");
        ASSERT_CODE(r, 0);
        json_object *o = parse_json(&r);
        ck_assert_str_eq(json_object_get_string(get(o, "hbgctl")), HBG_VERSION);
        json_object_put(o);
        result_free(&r);

        /* help lists every command; each has its usage, however asked */
        r = ctl(NULL, "help");
        ASSERT_CODE(r, 0);
        ck_assert(strncmp(r.out, "Usage: hbgctl", 13) == 0);
        char *help = r.out;
        free(r.err);
        r = ctl(NULL, "help", "--list");
        ASSERT_CODE(r, 0);
        char *list = r.out;
        free(r.err);
        int n = 0;
        for (char *save = NULL, *v = strtok_r(list, "\n", &save); v; v = strtok_r(NULL, "\n", &save), n++) {
                char want[128], line[128];
                snprintf(line, sizeof(line), "\n  %s", v);
                ck_assert_msg(strstr(help, line), "help does not list %s:\n%s", v, help);
                snprintf(want, sizeof(want), "Usage: hbgctl [OPTIONS] %s", v);
                struct result a = ctl(NULL, v, "-h"), b = ctl(NULL, "help", v);
                ASSERT_CODE(a, 0);
                ASSERT_CODE(b, 0);
                ck_assert_msg(strncmp(a.out, want, strlen(want)) == 0, "%s -h:\n%s", v, a.out);
                ck_assert_str_eq(a.out, b.out);
                /* an installed hbgctl has no source tree: it points at pages */
                ck_assert_msg(!strstr(a.out, "docs/"), "%s -h names a source-tree path:\n%s", v, a.out);
                result_free(&a);
                result_free(&b);
        }
        /* -h before the command, and after its argument */
        r = ctl(NULL, "--help", "run");
        struct result r2 = ctl(NULL, "run", "x.json", "--help");
        ASSERT_CODE(r, 0);
        ASSERT_CODE(r2, 0);
        ck_assert_msg(strncmp(r.out, "Usage: hbgctl [OPTIONS] run FILE", 32) == 0, "%s", r.out);
        ck_assert_str_eq(r.out, r2.out);
        result_free(&r);
        result_free(&r2);
        ck_assert_int_ge(n, 9);
        ck_assert(strstr(help, "\n  top ") && strstr(help, "\n  graphs ") && strstr(help, "\n  run FILE "));
        free(help);
        free(list);

        /* a command's options, for the completion */
        r = ctl(NULL, "help", "--list", "run");
        ASSERT_CODE(r, 0);
        ck_assert_msg(strstr(r.out, "--dot=FILE\n") && strstr(r.out, "--progress\n") && strstr(r.out, "--dry-run\n") &&
                              strstr(r.out, "--socket=PATH\n") && strstr(r.out, "--help -h\n") && !strstr(r.out, "--batch"),
                      "%s", r.out);
        result_free(&r);
        r = ctl(NULL, "help", "--list", "top");
        ASSERT_CODE(r, 0);
        ck_assert_msg(strstr(r.out, "--iterations=N -n\n") && strstr(r.out, "--delay=SECONDS -d\n") &&
                              strstr(r.out, "--batch -b\n") && !strstr(r.out, "--dot"),
                      "%s", r.out);
        result_free(&r);

        r = ctl(NULL, "help", "--json");
        ASSERT_CODE(r, 0);
        o = parse_json(&r);
        json_object *cmds = get(o, "commands");
        ck_assert_int_eq(json_object_array_length(cmds), n);
        ck_assert_int_ge(json_object_array_length(get(o, "options")), 4);
        json_object_put(o);
        result_free(&r);
}
END_TEST

/* ------------------------------------------------------------ graphs */

static int host_ok(void *userdata) {
        (void)userdata;
        return 0;
}

/* Our session's entry of `graphs --json` (a new reference). */
static json_object *my_graphs(const char *S, uint64_t *session) {
        struct result r;
        if (*session == 0) {
                r = ctl(S, "sessions", "--json");
                ASSERT_CODE(r, 0);
                json_object *o = parse_json(&r), *a = get(o, "sessions");
                for (size_t i = 0; i < json_object_array_length(a); i++) {
                        json_object *e = json_object_array_get_idx(a, i);
                        if (json_object_get_int64(get(e, "pid")) == getpid())
                                *session = json_object_get_uint64(get(e, "session"));
                }
                json_object_put(o);
                result_free(&r);
                ck_assert_msg(*session, "our session is not listed");
        }
        r = ctl(S, "graphs", "--json");
        ASSERT_CODE(r, 0);
        json_object *o = parse_json(&r), *a = get(o, "graphs"), *mine = NULL;
        for (size_t i = 0; i < json_object_array_length(a); i++) {
                json_object *e = json_object_array_get_idx(a, i);
                if (json_object_get_uint64(get(e, "session")) == *session)
                        mine = json_object_get(e);
        }
        json_object_put(o);
        result_free(&r);
        ck_assert_msg(mine, "session %llu not in graphs", (unsigned long long)*session);
        return mine;
}

/*
 * Two live graphs: graph 0 = a failing kernel and a host task (which runs
 * only in our wait, so the graph stays live), graph 1 = a noop behind it.
 * `graphs` lists both with their state, tasks done/total and age; after
 * the wait, none.
 */
START_TEST(graphs_live) {
        struct hbgd_proc *d = start();
        const char *S = d->socket_path;
        hbg_client *c;
        ck_assert_int_eq(hbg_connect(&c, S), 0);
        hbg_task f = HBG_TASK_INIT("fail");
        f.n_scalars = 1;
        f.scalars[0] = (uint64_t)(int64_t)-EIO;
        hbg_task h = HBG_TASK_INIT(NULL);
        h.host_fn = host_ok;
        hbg_task n = HBG_TASK_INIT("noop");
        uint64_t g0, g1;
        ck_assert_int_eq(hbg_graph_add(c, &f, NULL), 0);
        ck_assert_int_eq(hbg_graph_add(c, &h, NULL), 0);
        ck_assert_int_eq(hbg_graph_submit(c, &g0), 0);
        ck_assert_int_eq(hbg_graph_add(c, &n, NULL), 0);
        ck_assert_int_eq(hbg_graph_submit(c, &g1), 0);

        /* hbgd runs the failing kernel soon (liveness: 20 s) */
        uint64_t session = 0;
        json_object *mine = NULL, *live = NULL;
        for (long long end = daemon_now_ms() + 20000;; usleep(10000)) {
                json_object_put(mine);
                mine = my_graphs(S, &session);
                live = get(mine, "live");
                /* graph 0's kernel failed (and completed), graph 1's noop
                 * taken by a scheduler */
                if (json_object_array_length(live) == 2 &&
                    strcmp(json_object_get_string(get(json_object_array_get_idx(live, 0), "state")), "failed") == 0 &&
                    json_object_get_uint64(get(json_object_array_get_idx(live, 0), "tasks_done")) == 1 &&
                    strcmp(json_object_get_string(get(json_object_array_get_idx(live, 1), "state")), "running") == 0 &&
                    json_object_get_uint64(get(json_object_array_get_idx(live, 1), "tasks_done")) == 1)
                        break;
                ck_assert_msg(daemon_now_ms() < end, "graph 0 not failed, or graph 1 not running with its noop done, "
                                             "within 20 s: %s",
                              json_object_to_json_string(mine));
        }
        ck_assert_int_eq(json_object_get_uint64(get(mine, "graphs_submitted")), 2);
        ck_assert_int_eq(json_object_get_uint64(get(mine, "graphs_retired")), 0);
        ck_assert_int_eq(json_object_get_uint64(get(mine, "live_omitted")), 0);
        json_object *l0 = json_object_array_get_idx(live, 0), *l1 = json_object_array_get_idx(live, 1);
        ck_assert_int_eq(json_object_get_uint64(get(l0, "graph")), 0);
        ck_assert_int_eq(json_object_get_uint64(get(l0, "graph_id")), g0);
        ck_assert_int_eq(json_object_get_uint64(get(l0, "tasks")), 2);
        ck_assert_int_eq(json_object_get_uint64(get(l0, "tasks_done")), 1);   /* the failed kernel */
        ck_assert_int_eq(json_object_get_uint64(get(l1, "graph")), 1);
        ck_assert_int_eq(json_object_get_uint64(get(l1, "graph_id")), g1);
        ck_assert_int_eq(json_object_get_uint64(get(l1, "tasks")), 1);
        /* done, though the host task before it is not: tasks complete,
         * not the completed prefix */
        ck_assert_int_eq(json_object_get_uint64(get(l1, "tasks_done")), 1);
        ck_assert_str_eq(json_object_get_string(get(l1, "state")), "running");
        ck_assert_int_eq(json_object_get_uint64(get(l1, "first_id")),
                         json_object_get_uint64(get(l0, "last_id")) + 1);
        /* the age counts from when hbgd first saw the record */
        uint64_t age = json_object_get_uint64(get(l0, "age_ms"));
        json_object_put(mine);
        usleep(150000);
        mine = my_graphs(S, &session);
        live = get(mine, "live");
        ck_assert_int_eq(json_object_array_length(live), 2);
        uint64_t age2 = json_object_get_uint64(get(json_object_array_get_idx(live, 0), "age_ms"));
        ck_assert_msg(age2 >= age + 145, "age %llu ms, 150 ms later %llu ms", (unsigned long long)age,
                      (unsigned long long)age2);
        json_object_put(mine);

        /* the text: the session's counters, then its live graphs */
        struct result r = ctl(S, "graphs");
        ASSERT_CODE(r, 0);
        const char *hdr = line_at(r.out, "    graph ");
        ck_assert_msg(strstr(hdr, "failed") && strstr(hdr, "running") && strstr(hdr, "tasks_done"), "%s", r.out);
        mine = my_graphs(S, &session);
        assert_names(hdr + 4, json_object_array_get_idx(get(mine, "live"), 0));
        assert_names(r.out, mine);
        json_object_put(mine);
        result_free(&r);

        /* the host task runs in the wait: both retire */
        ck_assert_int_eq(hbg_graph_wait(c, g0, 20000), -EIO);
        ck_assert_int_eq(hbg_graph_wait(c, g1, 20000), 0);
        mine = my_graphs(S, &session);
        ck_assert_int_eq(json_object_array_length(get(mine, "live")), 0);
        ck_assert_int_eq(json_object_get_uint64(get(mine, "graphs_retired")), 2);
        ck_assert_int_eq(json_object_get_uint64(get(mine, "graphs_failed")), 1);
        json_object_put(mine);
        hbg_disconnect(c);
        daemon_destroy(d);
}
END_TEST

/* The session ids of this process, ascending (sessions --json). */
static size_t my_sessions(const char *S, uint64_t *ret, size_t max) {
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

/* hbgd's tasks completed so far, from `hbgctl status --json`. */
static uint64_t daemon_tasks_completed(const char *S) {
        struct result r = ctl(S, "status", "--json");
        ASSERT_CODE(r, 0);
        json_object *o = parse_json(&r);
        uint64_t n = json_object_get_uint64(get(get(o, "daemon"), "tasks_completed"));
        json_object_put(o);
        result_free(&r);
        return n;
}

static void assert_graph_error(hbg_client *c, uint64_t g, int code, uint64_t task, const char *kernel,
                               const char *message) {
        hbg_graph_error_info info = HBG_GRAPH_ERROR_INFO_INIT;
        ck_assert_int_eq(hbg_graph_error(c, g, &info), 0);
        ck_assert_msg(info.code == code && info.task == task && strcmp(info.kernel, kernel) == 0 &&
                              strcmp(info.message, message) == 0,
                      "graph %llu: code %d task %llu kernel '%s' message '%s'; want %d, %llu, '%s', '%s'",
                      (unsigned long long)g, info.code, (unsigned long long)info.task, info.kernel, info.message,
                      code, (unsigned long long)task, kernel, message);
}

/* A spin_ns task of `blocks` blocks of 1 s each (hbgd's cost limit takes
 * two): far longer than any cancel takes to land. */
static uint64_t add_spin(hbg_client *c, uint16_t blocks) {
        hbg_task t = HBG_TASK_INIT("spin_ns");
        t.blocks = blocks;
        t.n_scalars = 1;
        t.scalars[0] = 1000000000;
        uint64_t id;
        ck_assert_int_eq(hbg_graph_add(c, &t, &id), 0);
        return id;
}

static uint64_t add_noop_after(hbg_client *c, uint64_t dep) {
        hbg_task t = HBG_TASK_INIT("noop");
        t.n_deps = 1;
        t.deps[0] = dep;
        uint64_t id;
        ck_assert_int_eq(hbg_graph_add(c, &t, &id), 0);
        return id;
}

/*
 * The admin verbs and the producer's cancel (as root, an admin):
 *   - `cancel SESSION GRAPH` of a graph running a long kernel: the kernel
 *     stops, its dependant does not run, the wait returns -ECANCELED with
 *     "cancelled by uid 0";
 *   - tasks not started (behind a host task that runs only in our wait)
 *     fail with -ECANCELED when they come to run;
 *   - hbg_graph_cancel() from the producer; -EALREADY once finished;
 *   - hbg_i64() for fail's code;
 *   - `kill SESSION`: that client's wait gets -ECONNRESET with hbgd's
 *     reason, the other session goes on;
 *   - bad numbers are usage errors, unknown sessions and graphs fail.
 */
START_TEST(cancel_kill) {
        struct hbgd_proc *d = start();
        const char *S = d->socket_path;
        hbg_client *c;
        ck_assert_int_eq(hbg_connect(&c, S), 0);
        uint64_t sess[2];
        ck_assert_int_eq(my_sessions(S, sess, 2), 1);
        char session[32], graph[32];
        snprintf(session, sizeof(session), "%llu", (unsigned long long)sess[0]);

        /* fail with hbg_i64(): the i64 helper's bits are fail's code */
        hbg_task f = HBG_TASK_INIT("fail");
        f.n_scalars = 1;
        f.scalars[0] = hbg_i64(-EIO);
        uint64_t fid, g;
        ck_assert_int_eq(hbg_i64(-1), UINT64_MAX);
        ck_assert_int_eq(hbg_graph_add(c, &f, &fid), 0);
        ck_assert_int_eq(hbg_graph_submit(c, &g), 0);
        ck_assert_int_eq(hbg_graph_wait(c, g, WAIT_MS), -EIO);

        /* (a) a running kernel and its dependant */
        uint64_t spin = add_spin(c, 2);
        add_noop_after(c, spin);
        ck_assert_int_eq(hbg_graph_submit(c, &g), 0);
        snprintf(graph, sizeof(graph), "%llu", (unsigned long long)g);
        struct result r = ctl(S, "cancel", session, graph);
        ASSERT_CODE(r, 0);
        ck_assert_msg(strstr(r.out, "cancelled"), "%s", r.out);
        result_free(&r);
        ck_assert_int_eq(hbg_graph_wait(c, g, WAIT_MS), -ECANCELED);
        ck_assert_msg(strstr(hbg_last_error(c), "cancelled by uid 0"), "%s", hbg_last_error(c));
        assert_graph_error(c, g, -ECANCELED, spin, "spin_ns", "cancelled by uid 0");
        /* cancelled once: its status is decided, a second cancel fails */
        r = ctl(S, "cancel", session, graph);
        ASSERT_CODE(r, 1);
        ck_assert_msg(strstr(r.err, "not live"), "%s", r.err);
        result_free(&r);

        /* (b) a kernel task not started: behind a host task of our wait */
        hbg_task h = HBG_TASK_INIT(NULL);
        h.host_fn = host_ok;
        uint64_t hid;
        ck_assert_int_eq(hbg_graph_add(c, &h, &hid), 0);
        uint64_t behind = add_noop_after(c, hid);
        ck_assert_int_eq(hbg_graph_submit(c, &g), 0);
        snprintf(graph, sizeof(graph), "%llu", (unsigned long long)g);
        r = ctl(S, "--json", "cancel", session, graph);
        ASSERT_CODE(r, 0);
        json_object *o = parse_json(&r);
        ck_assert_msg(strstr(json_object_get_string(get(o, "message")), "cancelled"), "%s", r.out);
        json_object_put(o);
        result_free(&r);
        ck_assert_int_eq(hbg_graph_wait(c, g, WAIT_MS), -ECANCELED);
        assert_graph_error(c, g, -ECANCELED, behind, "noop", "cancelled by uid 0");

        /* (c) the producer's own cancel */
        spin = add_spin(c, 2);
        ck_assert_int_eq(hbg_graph_submit(c, &g), 0);
        ck_assert_int_eq(hbg_graph_cancel(c, g), 0);
        ck_assert_int_eq(hbg_graph_wait(c, g, WAIT_MS), -ECANCELED);
        assert_graph_error(c, g, -ECANCELED, spin, "spin_ns", "cancelled by uid 0");
        ck_assert_int_eq(hbg_graph_cancel(c, g), -EALREADY);
        ck_assert_int_eq(hbg_graph_cancel(c, g + 1), -EINVAL);
        /* the session goes on */
        hbg_task n = HBG_TASK_INIT("noop");
        ck_assert_int_eq(hbg_graph_add(c, &n, NULL), 0);
        ck_assert_int_eq(hbg_graph_submit(c, &g), 0);
        ck_assert_int_eq(hbg_graph_wait(c, g, WAIT_MS), 0);

        /* (d) kill: a second session with a long kernel */
        hbg_client *c2;
        ck_assert_int_eq(hbg_connect(&c2, S), 0);
        uint64_t first = sess[0];
        ck_assert_int_eq(my_sessions(S, sess, 2), 2);
        snprintf(session, sizeof(session), "%llu", (unsigned long long)(sess[0] == first ? sess[1] : sess[0]));
        add_spin(c2, 2);
        uint64_t g2;
        ck_assert_int_eq(hbg_graph_submit(c2, &g2), 0);
        r = ctl(S, "kill", session);
        ASSERT_CODE(r, 0);
        result_free(&r);
        ck_assert_int_eq(hbg_graph_wait(c2, g2, WAIT_MS), -ECONNRESET);
        char want[128];
        snprintf(want, sizeof(want), "session %s closed by uid 0 (hbgctl kill)", session);
        ck_assert_msg(strstr(hbg_last_error(c2), want), "hbg_last_error: %s", hbg_last_error(c2));
        hbg_disconnect(c2);
        ck_assert_int_eq(my_sessions(S, sess, 2), 1);
        ck_assert_int_eq(hbg_graph_add(c, &n, NULL), 0);
        ck_assert_int_eq(hbg_graph_submit(c, &g), 0);
        ck_assert_int_eq(hbg_graph_wait(c, g, WAIT_MS), 0);

        /* usage and unknown targets */
        assert_usage_error(ctl(S, "cancel", "1"), "cancel needs a SESSION and a GRAPH number");
        assert_usage_error(ctl(S, "cancel", "x", "0"), "session: 'x' is not a session number");
        assert_usage_error(ctl(S, "kill", "3x"), "'3x' is not a session number");
        r = ctl(S, "kill", "999999");
        ASSERT_CODE(r, 1);
        ck_assert_msg(strstr(r.err, "no session 999999"), "%s", r.err);
        result_free(&r);
        hbg_disconnect(c);
        daemon_destroy(d);
}
END_TEST

/* Our session's submission region, found in our mappings (hbgd names the
 * memfd hbg-sub-SESSION). */
static struct hbg_sub_header *my_sub_region(void) {
        FILE *f = fopen("/proc/self/maps", "re");
        ck_assert(f);
        char line[512];
        void *found = NULL;
        while (!found && fgets(line, sizeof(line), f)) {
                unsigned long lo, hi;
                if (strstr(line, "/memfd:hbg-sub-") && sscanf(line, "%lx-%lx", &lo, &hi) == 2)
                        found = (void *)lo;
        }
        fclose(f);
        ck_assert_msg(found, "no hbg-sub- mapping");
        struct hbg_sub_header *sh = found;
        ck_assert_uint_eq(sh->magic, HBG_SUB_MAGIC);
        return sh;
}

/*
 * A client that lies in its graph records: a valid record whose graph
 * never ends, then the whole ring of records garbage, its cursor as far
 * ahead as allowed. hbgd lists the valid one and counts the rest as not
 * listed, and reads no further than the ring.
 */
START_TEST(graphs_hostile) {
        struct hbgd_proc *d = start();
        const char *S = d->socket_path;
        hbg_client *c;
        ck_assert_int_eq(hbg_connect(&c, S), 0);
        hbg_task n = HBG_TASK_INIT("noop");
        uint64_t id, g;
        ck_assert_int_eq(hbg_graph_add(c, &n, &id), 0);
        ck_assert_int_eq(hbg_graph_submit(c, &g), 0);
        ck_assert_int_eq(hbg_graph_wait(c, g, 20000), 0);

        struct hbg_sub_header *sh = my_sub_region();
        struct hbg_graph_record *rec = (struct hbg_graph_record *)(void *)((char *)sh + sh->graphs_offset);
        uint64_t G = UINT64_C(1) << sh->graph_ring_log2, k = atomic_load(&sh->graphs_submitted);
        ck_assert_uint_eq(k, 1);
        rec[k & (G - 1)] = (struct hbg_graph_record){ .graph_id = 77, .first_id = id + 1,
                                                      .last_id = id + UINT64_C(1000000000000) };
        for (uint64_t j = 1; j < G; j++)
                rec[(k + j) & (G - 1)] = (struct hbg_graph_record){
                        .graph_id = j, .first_id = j * 7919, .last_id = UINT64_MAX - j, .reserved = j % 3 };
        atomic_store_explicit(&sh->graphs_submitted, k + G, memory_order_release);

        uint64_t session = 0;
        json_object *mine = my_graphs(S, &session), *live = get(mine, "live");
        ck_assert_msg(json_object_array_length(live) == 1, "%s", json_object_to_json_string(mine));
        json_object *l0 = json_object_array_get_idx(live, 0);
        ck_assert_int_eq(json_object_get_uint64(get(l0, "graph")), k);
        ck_assert_int_eq(json_object_get_uint64(get(l0, "graph_id")), 77);
        ck_assert_int_eq(json_object_get_uint64(get(l0, "tasks")), UINT64_C(1000000000000));
        ck_assert_int_eq(json_object_get_uint64(get(l0, "tasks_done")), 0);
        ck_assert_str_eq(json_object_get_string(get(l0, "state")), "waiting");
        ck_assert_int_eq(json_object_get_uint64(get(mine, "live_omitted")), G - 1);
        json_object_put(mine);
        struct result r = ctl(S, "graphs");
        ASSERT_CODE(r, 0);
        ck_assert_msg(strstr(r.out, "more live graphs not listed"), "%s", r.out);
        result_free(&r);
        hbg_disconnect(c);
        r = ctl(S, "status");   /* hbgd serves on */
        ASSERT_CODE(r, 0);
        result_free(&r);
        daemon_destroy(d);
}
END_TEST

/* ------------------------------------------------------------ top */

/* A producer in a child process: graphs of noops until killed. It writes
 * one byte to `ready` once its first graph ran. */
static pid_t producer(const char *S) {
        int p[2];
        ck_assert_int_eq(pipe(p), 0);
        pid_t pid = fork();
        ck_assert(pid >= 0);
        if (pid == 0) {
                close(p[0]);
                hbg_client *c;
                if (hbg_connect(&c, S) < 0)
                        _exit(1);
                for (bool told = false;;) {
                        hbg_task t = HBG_TASK_INIT("noop");
                        uint64_t g;
                        for (int i = 0; i < 64; i++)
                                if (hbg_graph_add(c, &t, NULL) < 0)
                                        _exit(1);
                        if (hbg_graph_submit(c, &g) < 0 || hbg_graph_wait(c, g, 20000) < 0)
                                _exit(1);
                        if (!told && write(p[1], "x", 1) == 1)
                                told = true;
                }
        }
        close(p[1]);
        char x;
        ck_assert_msg(read(p[0], &x, 1) == 1, "the producer died");
        close(p[0]);
        return pid;
}

START_TEST(top_batch) {
        struct hbgd_proc *d = start();
        const char *S = d->socket_path;
        pid_t prod = producer(S);

        struct result r = ctl(S, "top", "-b", "-n", "2", "-d", "0.05");
        ASSERT_CODE(r, 0);
        /* two snapshots, each with the totals, the threads and the sessions */
        const char *second = strstr(r.out + 1, "\nhbgd " HBG_VERSION);
        ck_assert_msg(strncmp(r.out, "hbgd " HBG_VERSION, 5 + strlen(HBG_VERSION)) == 0 && second &&
                              !strstr(second + 1, "\nhbgd "),
                      "%s", r.out);
        ck_assert_msg(!strchr(r.out, '\033'), "escape sequences in batch mode:\n%s", r.out);
        char want[64];
        snprintf(want, sizeof(want), " %d ", (int)prod);
        ck_assert_msg(strstr(second, want), "the producer's session (pid %d) is not in:\n%s", (int)prod, r.out);
        /* the producer's row ends with its serving state */
        const char *row = strstr(second, want), *eol = row ? strchr(row, '\n') : NULL;
        ck_assert_msg(strstr(second, " serving") && eol && eol - row > 7 && strncmp(eol - 7, " served", 7) == 0,
                      "no serving column, or the producer's session not served:\n%s", r.out);
        char *text = r.out;
        free(r.err);

        r = ctl(S, "top", "-b", "-n", "3", "-d", "0.05", "--json");
        ASSERT_CODE(r, 0);
        json_object *snap[3];
        char *line = r.out;
        for (int i = 0; i < 3; i++) {
                char *nl = strchr(line, '\n');
                ck_assert_msg(nl, "snapshot %d missing:\n%s", i, r.out);
                *nl = 0;
                snap[i] = json_tokener_parse(line);
                ck_assert_msg(snap[i], "snapshot %d is not JSON: %s", i, line);
                line = nl + 1;
        }
        ck_assert_msg(*line == 0, "more than 3 snapshots: %s", line);
        /* rates to the hundredth, not a double's 17 digits */
        for (const char *q = strstr(r.out, "_per_s\":"); q; q = strstr(q + 1, "_per_s\":")) {
                const char *num = q + strlen("_per_s\":");
                size_t digits = strspn(num, "-0123456789"), frac = num[digits] == '.' ? strspn(num + digits + 1, "0123456789") : 0;
                ck_assert_msg(frac <= 2, "a rate with %zu decimals: %.40s", frac, q);
        }
        for (int i = 0; i < 3; i++) {
                json_object *t = get(snap[i], "total");
                ck_assert_int_gt(json_object_get_int64(get(snap[i], "interval_ms")), 0);
                ck_assert_int_eq(json_object_array_length(get(snap[i], "threads")), 4);
                ck_assert_int_ge(json_object_get_int64(get(t, "sessions")), 1);
                bool found = false;
                json_object *ss = get(snap[i], "sessions");
                for (size_t k = 0; k < json_object_array_length(ss); k++) {
                        json_object *e = json_object_array_get_idx(ss, k);
                        if (json_object_get_int64(get(e, "pid")) != prod)
                                continue;
                        found = true;
                        /* its first graph ran: hbgd serves it */
                        ck_assert_str_eq(json_object_get_string(get(e, "serving")), "served");
                }
                ck_assert_msg(found, "producer not in %s", json_object_to_json_string(snap[i]));
                if (i == 0)
                        continue;
                /* a rate is the counter's difference over the interval */
                json_object *p = get(snap[i - 1], "total");
                double dt = (double)json_object_get_int64(get(snap[i], "interval_ms"));
                double dn = (double)(json_object_get_uint64(get(t, "tasks_completed")) -
                                     json_object_get_uint64(get(p, "tasks_completed")));
                double rate = json_object_get_double(get(t, "tasks_per_s"));
                ck_assert_msg(fabs(rate - dn * 1000.0 / dt) <= 0.005 + 1e-9 * rate, "tasks_per_s %g, %g tasks in %g ms",
                              rate, dn, dt);
        }
        /* the text's names are the JSON's */
        assert_names(line_at(text, "thread "), json_object_array_get_idx(get(snap[2], "threads"), 0));
        assert_names(line_at(text, "session "), json_object_array_get_idx(get(snap[2], "sessions"), 0));
        for (const char *l = strchr(text, '\n') + 1; *l && *l != '\n'; l = strchr(l, '\n') + 1) {
                char key[64];
                ck_assert_int_eq(sscanf(l, "%63s", key), 1);
                ck_assert_msg(json_object_object_get_ex(get(snap[2], "total"), key, NULL), "label %s", key);
        }
        for (int i = 0; i < 3; i++)
                json_object_put(snap[i]);
        free(text);
        result_free(&r);
        kill(prod, SIGKILL);
        waitpid(prod, NULL, 0);
        daemon_destroy(d);
}
END_TEST

/* ------------------------------------------------------------ run -, --progress */

START_TEST(run_stdin) {
        struct hbgd_proc *d = start();
        const char *S = d->socket_path;
        char path[PATH_MAX];
        graph_path(path, sizeof(path), "predicates.json");
        struct how in = { .stdin_path = path };
        struct result r = run_v(&in, S, (const char *const[]){ "run", "-", "--json", NULL });
        ASSERT_CODE(r, 0);
        json_object *o = parse_json(&r);
        ck_assert_str_eq(json_object_get_string(get(o, "status")), "ok");
        ck_assert_int_eq(json_object_get_int64(get(o, "tasks")), 7);
        ck_assert_int_eq(json_object_get_double(get(get(get(o, "outputs"), "s"), "sum")), 16);
        json_object_put(o);
        result_free(&r);
        /* errors name <stdin> */
        graph_path(path, sizeof(path), "bad_range.json");
        r = run_v(&in, S, (const char *const[]){ "run", "-", NULL });
        ASSERT_CODE(r, 1);
        ck_assert_msg(strstr(r.err, "<stdin>: $.tasks[0].args[0]: bad range"), "%s", r.err);
        result_free(&r);
        /* more than 64 MiB: refused, whatever follows */
        snprintf(path, sizeof(path), "%s/huge.json", d->dir);
        FILE *f = fopen(path, "w");
        ck_assert(f);
        fputc('[', f);
        static char spaces[1 << 16];
        memset(spaces, ' ', sizeof(spaces));
        for (int i = 0; i < 64 * 16 + 1; i++)
                ck_assert_int_eq(fwrite(spaces, 1, sizeof(spaces), f), sizeof(spaces));
        ck_assert_int_eq(fclose(f), 0);
        r = run_v(&in, S, (const char *const[]){ "run", "-", "--json", NULL });
        ASSERT_CODE(r, 1);
        ck_assert_msg(strstr(r.err, "<stdin>: a graph file on standard input may be at most 64 MiB"), "%s", r.err);
        assert_json_error(&r, "error", 1, "at most 64 MiB");
        result_free(&r);
        unlink(path);
        daemon_destroy(d);
}
END_TEST

START_TEST(run_progress) {
        struct hbgd_proc *d = start();
        const char *S = d->socket_path;
        char path[PATH_MAX];
        graph_path(path, sizeof(path), "kernels.json");
        /* not a terminal: the final line only */
        struct result r = ctl(S, "run", "--progress", path);
        ASSERT_CODE(r, 0);
        ck_assert_msg(strncmp(r.out, "ok: 11 tasks in ", 16) == 0, "%s", r.out);
        ck_assert_msg(strncmp(r.err, "tasks 11/11, graphs 1/1, ", 25) == 0 && !strchr(r.err, '\r') &&
                              strchr(r.err, '\n') == strrchr(r.err, '\n'),
                      "%s", r.err);
        result_free(&r);
        /* a terminal: the line redrawn in place, then the final one */
        struct how tty = { .stderr_tty = true };
        r = run_v(&tty, S, (const char *const[]){ "run", "--progress", "--json", path, NULL });
        ASSERT_CODE(r, 0);
        json_object *o = parse_json(&r);
        ck_assert_str_eq(json_object_get_string(get(o, "status")), "ok");
        json_object_put(o);
        ck_assert_msg(strncmp(r.err, "\rtasks ", 7) == 0 && strstr(r.err, "\033[K") &&
                              strstr(r.err, "\rtasks 11/11, graphs 1/1, "),
                      "%s", r.err);
        result_free(&r);
        daemon_destroy(d);
}
END_TEST

/* ------------------------------------------------------------ progress */

/*
 * A host task first (it runs only in our wait) and 200 noops after it,
 * independent of it: `graphs` counts the noops done while the completed
 * prefix is still 0 (a slow first task must not look like a hang).
 */
START_TEST(graphs_progress) {
        struct hbgd_proc *d = start();
        const char *S = d->socket_path;
        hbg_client *c;
        ck_assert_int_eq(hbg_connect(&c, S), 0);
        hbg_task h = HBG_TASK_INIT(NULL);
        h.host_fn = host_ok;
        hbg_task n = HBG_TASK_INIT("noop");
        ck_assert_int_eq(hbg_graph_add(c, &h, NULL), 0);
        for (int i = 0; i < 200; i++)
                ck_assert_int_eq(hbg_graph_add(c, &n, NULL), 0);
        uint64_t g;
        ck_assert_int_eq(hbg_graph_submit(c, &g), 0);
        uint64_t session = 0, done = 0;
        for (long long end = daemon_now_ms() + 20000;; usleep(10000)) {
                json_object *mine = my_graphs(S, &session), *live = get(mine, "live");
                ck_assert_int_eq(json_object_array_length(live), 1);
                json_object *l = json_object_array_get_idx(live, 0);
                ck_assert_int_eq(json_object_get_uint64(get(l, "tasks")), 201);
                done = json_object_get_uint64(get(l, "tasks_done"));
                /* the watermark stays at the host task */
                ck_assert_int_eq(json_object_get_uint64(get(mine, "watermark")),
                                 json_object_get_uint64(get(l, "first_id")));
                json_object_put(mine);
                if (done == 200)
                        break;
                ck_assert_msg(done < 200 && daemon_now_ms() < end, "tasks_done %llu of 201 after 20 s (the 200 noops)",
                              (unsigned long long)done);
        }
        ck_assert_int_eq(hbg_graph_wait(c, g, 20000), 0);
        hbg_disconnect(c);
        daemon_destroy(d);
}
END_TEST

/* ------------------------------------------------------------ --dry-run against hbgd */

/*
 * dry_run_errors.json: add_f32 on 1024, 1024 and 512 elements, a gemm
 * shape that does not fit A, an unknown tensor. With hbgd every error is
 * reported, with its path and element counts, hbgd's with numbers; without
 * it the file's own rules run and the output says what was not checked.
 */
START_TEST(run_dry_run) {
        struct hbgd_proc *d = start();
        const char *S = d->socket_path, *gone = "/nonexistent/hbgd.sock";
        char path[PATH_MAX];
        graph_path(path, sizeof(path), "dry_run_errors.json");
        static const char *const add_err =
                "$.tasks[0].args[0]: add_f32: a (argument 0) has 1024 elements, out (argument 2) 512";
        static const char *const gemm_err = "$.tasks[2]: gemm_f32: shape does not fit A: m*k = 64*128 = 8192 "
                                            "elements, A has 4096";
        static const char *const typo_err = "$.tasks[3].args[1]: unknown tensor \"nope\"";
        struct result r = ctl(S, "run", "--dry-run", path);
        ASSERT_CODE(r, 1);
        ck_assert_msg(strstr(r.err, add_err) && strstr(r.err, gemm_err) && strstr(r.err, typo_err) &&
                              strstr(r.err, "3 errors in ") && !strstr(r.err, "not checked"),
                      "%s", r.err);
        /* in file order */
        ck_assert(strstr(r.err, add_err) < strstr(r.err, gemm_err) && strstr(r.err, gemm_err) < strstr(r.err, typo_err));
        result_free(&r);
        r = ctl(S, "run", "--dry-run", "--json", path);
        ASSERT_CODE(r, 1);
        json_object *o = parse_json(&r), *errs = get(o, "errors");
        ck_assert_str_eq(json_object_get_string(get(o, "status")), "error");
        ck_assert_int_eq(json_object_array_length(errs), 3);
        ck_assert_int_eq(json_object_array_length(get(o, "checked_by")), 2);
        json_object *e2 = json_object_array_get_idx(errs, 1);
        ck_assert_str_eq(json_object_get_string(get(e2, "path")), "$.tasks[2]");
        ck_assert_str_eq(json_object_get_string(get(e2, "by")), "hbgd");
        ck_assert_int_eq(json_object_get_uint64(get(o, "heap_size")), 64u << 20);
        json_object_put(o);
        result_free(&r);
        /* nothing ran, nothing kept: no session, no graph */
        r = ctl(S, "status", "--json");
        ASSERT_CODE(r, 0);
        o = parse_json(&r);
        ck_assert_int_eq(json_object_get_int(get(get(o, "daemon"), "sessions_opened")), 0);
        ck_assert_int_eq(json_object_get_int(get(get(o, "daemon"), "tasks_completed")), 0);
        json_object_put(o);
        result_free(&r);

        /* without hbgd: the file's rules, and what was not checked */
        r = ctl(gone, "run", "--dry-run", path);
        ASSERT_CODE(r, 1);
        ck_assert_msg(strstr(r.err, add_err) && strstr(r.err, typo_err) && !strstr(r.err, "gemm_f32") &&
                              strstr(r.err, "not checked: hbgd's checks (kernels' own rules such as gemm shapes") &&
                              strstr(r.err, "hbgd is not running on /nonexistent/hbgd.sock"),
                      "%s", r.err);
        result_free(&r);
        graph_path(path, sizeof(path), "kernels.json");
        r = ctl(gone, "run", "--dry-run", "--json", path);
        ASSERT_CODE(r, 3);
        o = parse_json(&r);
        ck_assert_str_eq(json_object_get_string(get(o, "status")), "unchecked");
        ck_assert_int_eq(json_object_array_length(get(o, "checked_by")), 1);
        ck_assert_int_eq(json_object_array_length(get(o, "errors")), 0);
        json_object_put(o);
        result_free(&r);
        r = ctl(S, "run", "--dry-run", path);
        ASSERT_CODE(r, 0);
        ck_assert_msg(strncmp(r.out, "ok: 11 tasks checked by hbgctl and hbgd in ", 43) == 0, "%s", r.out);
        result_free(&r);

        /* a real run stops at the same rules, with the path and elements */
        graph_path(path, sizeof(path), "dry_run_errors.json");
        r = ctl(S, "run", path);
        ASSERT_CODE(r, 1);
        ck_assert_msg(strstr(r.err, add_err) && strstr(r.err, typo_err), "%s", r.err);
        result_free(&r);
        daemon_destroy(d);
}
END_TEST

/*
 * --heap and --window: a tensor of 17 Mi elements (68 MiB) does not fit
 * hbgd's default heap (64 MiB): the message names --heap; with --heap 80M
 * it runs, and the dry run checks against that heap.
 */
START_TEST(run_heap) {
        struct hbgd_proc *d = start();
        const char *S = d->socket_path;
        char dir[] = "/tmp/hbgctl-heap.XXXXXX", path[PATH_MAX];
        ck_assert(mkdtemp(dir));
        snprintf(path, sizeof(path), "%s/big.json", dir);
        FILE *f = fopen(path, "w");
        ck_assert(f);
        fprintf(f, "{\"tensors\": {\"x\": {\"len\": %u}}, \"tasks\": [{\"kernel\": \"noop\"}]}\n", 17u << 20);
        fclose(f);
        struct result r = ctl(S, "run", path);
        ASSERT_CODE(r, 1);
        ck_assert_msg(strstr(r.err, "$.tensors.x (17825792 elements)") && strstr(r.err, "hbgctl run --heap BYTES"),
                      "%s", r.err);
        result_free(&r);
        r = ctl(S, "run", "--dry-run", path);
        ASSERT_CODE(r, 1);
        ck_assert_msg(strstr(r.err, "$.tensors.x: 17825792 elements at element 0 do not fit hbgd's default heap of "
                                    "16777216 elements") && strstr(r.err, "--heap"),
                      "%s", r.err);
        result_free(&r);
        r = ctl(S, "run", "--dry-run", "--heap", "80M", path);
        ASSERT_CODE(r, 0);
        ck_assert_msg(strncmp(r.out, "ok: 1 task checked by hbgctl and hbgd in ", 41) == 0 &&
                              strstr(r.out, "(heap 83886080 bytes)"),
                      "%s", r.out);
        result_free(&r);
        r = ctl(S, "run", "--heap", "80M", path);
        ASSERT_CODE(r, 0);
        ck_assert_msg(strncmp(r.out, "ok: 1 task in ", 14) == 0, "%s", r.out);
        result_free(&r);
        r = ctl("/nonexistent/hbgd.sock", "run", "--dry-run", path);
        ASSERT_CODE(r, 3);
        ck_assert_msg(strncmp(r.out, "unchecked: 1 task checked by hbgctl in ", 39) == 0, "%s", r.out);
        result_free(&r);
        r = ctl(S, "run", "--heap", "80M", "--window", "1K", "--json", path);
        ASSERT_CODE(r, 0);
        result_free(&r);
        /* hbgd's own limit: above max_heap_size (1 GiB) */
        r = ctl(S, "run", "--dry-run", "--heap", "2G", path);
        ASSERT_CODE(r, 1);
        ck_assert_msg(strstr(r.err, "max_heap_size") && !strstr(r.err, "not checked"), "%s", r.err);
        result_free(&r);
        /* hbgd refusing the dry run's window or heap is an error of the
         * file as run with them (the run is refused the same), not a
         * check that did not happen */
        static const char *const refused[][3] = { { "--heap", "2G", "max_heap_size" },
                                                  { "--window", "1G", "max_task_window" } };
        for (size_t i = 0; i < 2; i++) {
                r = ctl(S, "run", "--dry-run", "--json", refused[i][0], refused[i][1], path);
                ASSERT_CODE(r, 1);
                json_object *o = parse_json(&r), *errs = get(o, "errors");
                ck_assert_str_eq(json_object_get_string(get(o, "status")), "error");
                ck_assert_msg(json_object_array_length(errs) == 1, "%s", r.out);
                json_object *e = json_object_array_get_idx(errs, 0);
                ck_assert_str_eq(json_object_get_string(get(e, "path")), "$");
                ck_assert_str_eq(json_object_get_string(get(e, "by")), "hbgd");
                ck_assert_msg(strstr(json_object_get_string(get(e, "message")), refused[i][2]), "%s", r.out);
                ck_assert_msg(json_object_is_type(get(o, "not_checked"), json_type_null), "%s", r.out);
                json_object_put(o);
                result_free(&r);
        }
        /* A window the run's session would be refused: the dry run says
         * so too (hbgd's geometry rule), and accepts one it would grant. */
        r = ctl(S, "run", "--dry-run", "--heap", "80M", "--window", "3000", path);
        ASSERT_CODE(r, 1);
        ck_assert_msg(strstr(r.err, "big.json: $: ") && strstr(r.err, "task_window: must be a power of two") &&
                              !strstr(r.err, "not checked"),
                      "%s", r.err);
        result_free(&r);
        r = ctl(S, "run", "--dry-run", "--heap", "80M", "--window", "4K", path);
        ASSERT_CODE(r, 0);
        result_free(&r);
        assert_usage_error(ctl(S, "run", "--heap", "80X", path), "--heap: '80X' is not a size in bytes");
        assert_usage_error(ctl(S, "run", "--window", "0", path), "--window: '0' is not a number of tasks");
        unlink(path);
        rmdir(dir);
        daemon_destroy(d);
}
END_TEST

/* A directory for a graph file; the examples' --help and -h (they would
 * connect and run otherwise), and a bad argument a usage error. */
START_TEST(run_small_points) {
        struct result r = ctl("/nonexistent/hbgd.sock", "run", "--dry-run", graphs_dir);
        ASSERT_CODE(r, 1);
        ck_assert_msg(strstr(r.err, "is a directory, not a graph file") && !strstr(r.err, "read error"), "%s", r.err);
        result_free(&r);
        static const char *const examples[] = { "hbg-example-gemm-softmax", "hbg-example-host-parallel" };
        for (size_t i = 0; i < 2; i++) {
                char ex[PATH_MAX + 32];
                snprintf(ex, sizeof(ex), "%s", hbgctl_bin);
                snprintf(strrchr(ex, '/'), sizeof(ex) - (size_t)(strrchr(ex, '/') - ex), "/%s", examples[i]);
                const struct how how = { .bin = ex };
                static const char *const helps[] = { "--help", "-h" };
                for (size_t h = 0; h < 2; h++) {
                        r = run_v(&how, "/nonexistent/hbgd.sock", (const char *const[]){ helps[h], NULL });
                        ASSERT_CODE(r, 0);
                        ck_assert_msg(strncmp(r.out, "Usage: ", 7) == 0 && r.err[0] == 0, "%s %s:\n%s\n%s",
                                      examples[i], helps[h], r.out, r.err);
                        result_free(&r);
                }
                r = run_v(&how, "/nonexistent/hbgd.sock", (const char *const[]){ "--bogus", NULL });
                ASSERT_CODE(r, 2);
                ck_assert_msg(strstr(r.err, "unexpected argument '--bogus'") && strstr(r.err, "Usage: "), "%s: %s",
                              examples[i], r.err);
                result_free(&r);
        }
}
END_TEST

/* ------------------------------------------------------------ --dot, --dry-run */

START_TEST(run_dot) {
        char path[PATH_MAX], dot[PATH_MAX + 16];
        const char *gone = "/nonexistent/hbgd.sock";   /* none of this needs hbgd */
        graph_path(path, sizeof(path), "deps.json");
        struct result r = ctl(gone, "run", "--dot", "-", path);
        ASSERT_CODE(r, 0);
        ck_assert_msg(strncmp(r.out, "digraph ", 8) == 0, "%s", r.out);
        static const char *const nodes[] = { "t0 [label=\"fill_a\\nfill_f32\"];", "t1 [label=\"copy_ab\\ncopy_f32\"];",
                                             "t2 [label=\"scale_a\\nscale_f32\"];", "t3 [label=\"gate\\nnoop\"];",
                                             "t4 [label=\"sum_b\\nreduce_sum_f32\"];" };
        for (size_t i = 0; i < 5; i++)
                ck_assert_msg(strstr(r.out, nodes[i]), "no %s in:\n%s", nodes[i], r.out);
        /* RAW a, WAW a, WAR a, explicit "after", RAW b: and nothing else */
        static const char *const edges[] = { "t0 -> t1;", "t0 -> t2;", "t1 -> t2;", "t1 -> t3 [style=dashed];",
                                             "t1 -> t4;" };
        int n = 0;
        for (const char *l = r.out; (l = strstr(l, " -> ")); l++, n++)
                ;
        ck_assert_msg(n == 5, "%d edges:\n%s", n, r.out);
        for (size_t i = 0; i < 5; i++)
                ck_assert_msg(strstr(r.out, edges[i]), "no %s in:\n%s", edges[i], r.out);
        char *text = r.out;
        free(r.err);

        /* to a file, with --json; the same graph */
        char dir[] = "/tmp/hbgctl-dot.XXXXXX";
        ck_assert(mkdtemp(dir));
        snprintf(dot, sizeof(dot), "%s/g.dot", dir);
        r = ctl(gone, "run", path, "--dot", dot, "--json");
        ASSERT_CODE(r, 0);
        json_object *o = parse_json(&r);
        ck_assert_str_eq(json_object_get_string(get(o, "status")), "ok");
        ck_assert_int_eq(json_object_get_int(get(o, "edges")), 5);
        ck_assert_int_eq(json_object_get_int(get(o, "tasks")), 5);
        ck_assert(!json_object_get_boolean(get(o, "run")));
        json_object_put(o);
        result_free(&r);
        char *file = slurp(dot);
        ck_assert_str_eq(file, text);
        free(file);
        /* Graphviz reads it, where it is installed (the test needs it not) */
        if (access("/usr/bin/dot", X_OK) == 0) {
                char cmd[PATH_MAX + 64];
                snprintf(cmd, sizeof(cmd), "/usr/bin/dot -Tcanon '%s' >/dev/null", dot);
                ck_assert_int_eq(system(cmd), 0);
        }
        unlink(dot);
        rmdir(dir);
        free(text);

        /* --dry-run checks, does not run */
        graph_path(path, sizeof(path), "kernels.json");
        r = ctl(gone, "run", "--dry-run", path);
        ASSERT_CODE(r, 3);      /* hbgd's checks could not run */
        ck_assert_msg(strncmp(r.out, "unchecked: 11 tasks checked by hbgctl in ", 41) == 0 && strstr(r.out, "not run"),
                      "%s", r.out);
        ck_assert_msg(strstr(r.err, "not checked: hbgd's checks"), "%s", r.err);
        result_free(&r);
        /* predicates drawn: a diamond with its "when" */
        graph_path(path, sizeof(path), "predicates.json");
        r = ctl(gone, "run", "--dot", "-", path);
        ASSERT_CODE(r, 0);
        ck_assert_msg(strstr(r.out, "t0 [label=\"tasks[0]\\nscale_f32\\nwhen p[0]\", shape=diamond];") &&
                              strstr(r.out, "t2 [label=\"tasks[2]\\nfill_f32\"];"),
                      "%s", r.out);
        result_free(&r);
        graph_path(path, sizeof(path), "bad_range.json");
        r = ctl(gone, "run", "--dry-run", path);
        ASSERT_CODE(r, 1);
        ck_assert(strstr(r.err, "bad range"));
        result_free(&r);
        r = ctl(gone, "run", "--dot", "-", "--json", path);
        assert_usage_error(r, "--dot - and --json would both write to standard output");
}
END_TEST

/* ------------------------------------------------------------ a client's name */

/*
 * A session named to attack the operator's terminal: an OSC setting the
 * window title (ESC ... BEL), a C1 CSI (U+009B) asking for the cursor's
 * position, two bytes that are not UTF-8, DEL, and two characters across
 * the 64 bytes hbgd keeps: a 4-byte one across byte 63 once hbgd made the
 * name valid UTF-8 (each stray byte became U+FFFD, 3 bytes), a 3-byte one
 * across byte 63 of the name as sent.
 */
#define HOSTILE_HEAD "\x1b]0;PWNED\x07\xc2\x9b" "6n\xff\xfe\x7f"
#define HOSTILE_PAD "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa" /* 40: the name's bytes 17..56 */
#define HOSTILE_NAME HOSTILE_HEAD HOSTILE_PAD "\xf0\x9f\x98\x80\xe2\x82\xac" "tail"
/* What hbgd keeps: valid UTF-8, cut before the 4-byte character. */
#define HOSTILE_KEPT "\x1b]0;PWNED\x07\xc2\x9b" "6n\xef\xbf\xbd\xef\xbf\xbd\x7f" HOSTILE_PAD
/* How text shows it. */
#define HOSTILE_SHOWN "\\x1b]0;PWNED\\x07\\u009b6n\xef\xbf\xbd\xef\xbf\xbd\\x7f" HOSTILE_PAD

/* No byte that moves a terminal (C0 but newline, DEL, a C1 control in
 * UTF-8), and all of it valid UTF-8 (glibc's decoder). */
static void assert_inert(const char *what, const char *s) {
        locale_t utf8 = newlocale(LC_CTYPE_MASK, "C.UTF-8", (locale_t)0);
        ck_assert_msg(utf8, "no C.UTF-8 locale");
        locale_t old = uselocale(utf8);
        mbstate_t st = { 0 };
        size_t len = strlen(s);
        for (size_t i = 0; i < len;) {
                wchar_t wc;
                size_t n = mbrtowc(&wc, s + i, len - i, &st);
                ck_assert_msg(n != (size_t)-1 && n != (size_t)-2, "%s: not UTF-8 at byte %zu:\n%s", what, i, s);
                ck_assert_msg(wc == '\n' || (wc >= 0x20 && wc != 0x7f && !(wc >= 0x80 && wc <= 0x9f)),
                              "%s: control U+%04X at byte %zu:\n%s", what, (unsigned)wc, i, s);
                i += n;
        }
        uselocale(old);
        freelocale(utf8);
}

START_TEST(hostile_names) {
        ck_assert_int_gt(strlen(HOSTILE_NAME), 64);
        ck_assert_int_eq(strlen(HOSTILE_KEPT), 61);
        struct hbgd_proc *d = start();
        const char *S = d->socket_path;
        hbg_connect_options opts = HBG_CONNECT_OPTIONS_INIT;
        opts.socket_path = S;
        opts.name = HOSTILE_NAME;
        hbg_client *c;
        ck_assert_int_eq(hbg_connect_opts(&c, &opts), 0);

        /* JSON: valid UTF-8 (json-c checks), the name as hbgd keeps it */
        struct result r = ctl(S, "sessions", "--json");
        ASSERT_CODE(r, 0);
        assert_inert("sessions --json", r.out);
        json_tokener *tok = json_tokener_new();
        json_tokener_set_flags(tok, JSON_TOKENER_STRICT | JSON_TOKENER_VALIDATE_UTF8);
        json_object *o = json_tokener_parse_ex(tok, r.out, (int)strlen(r.out));
        ck_assert_msg(o, "not JSON (%s):\n%s", json_tokener_error_desc(json_tokener_get_error(tok)), r.out);
        json_tokener_free(tok);
        json_object *a = get(o, "sessions"), *mine = NULL;
        for (size_t i = 0; i < json_object_array_length(a); i++)
                if (json_object_get_int64(get(json_object_array_get_idx(a, i), "pid")) == getpid())
                        mine = json_object_array_get_idx(a, i);
        ck_assert_msg(mine, "our session is not in:\n%s", r.out);
        ck_assert_str_eq(json_object_get_string(get(mine, "name")), HOSTILE_KEPT);
        uint64_t session = json_object_get_uint64(get(mine, "session"));
        json_object_put(o);
        result_free(&r);

        /* text: every control visible, nothing raw */
        static const char *const verbs[][6] = {
                { "sessions" }, { "status" }, { "top", "-b", "-n", "1" }, { "top", "-b", "-n", "1", "--json" },
        };
        for (size_t v = 0; v < sizeof(verbs) / sizeof(verbs[0]); v++) {
                r = ctl_v(S, verbs[v]);
                ASSERT_CODE(r, 0);
                assert_inert(verbs[v][0], r.out);
                if (!strstr(verbs[v][4] ? verbs[v][4] : "", "--json"))
                        ck_assert_msg(strstr(r.out, HOSTILE_SHOWN), "%s: the name is not shown escaped:\n%s",
                                      verbs[v][0], r.out);
                result_free(&r);
        }

        /* hbgd's log line about the session */
        hbg_disconnect(c);
        char *log = slurp(d->log_path), *all = strdup(log), want[64], *line = NULL, *save = NULL;
        snprintf(want, sizeof(want), "session %" PRIu64 " (pid %d", session, (int)getpid());
        for (char *l = strtok_r(log, "\n", &save); l && !line; l = strtok_r(NULL, "\n", &save))
                if (strstr(l, want) && strstr(l, "D="))
                        line = l;
        ck_assert_msg(line, "no line \"%s ...\" in hbgd's log:\n%s", want, all);
        assert_inert("hbgd's log", line);
        ck_assert_msg(strstr(line, HOSTILE_SHOWN), "the name is not escaped in: %s", line);
        free(all);
        free(log);
        daemon_destroy(d);
}
END_TEST

/* ------------------------------------------------------------ hbgd's options */

static struct result hbgd_v(const char *const *args) {
        struct how h = { .bin = daemon_binary() };
        return run_v(&h, NULL, args);
}
#define hbgd(...) hbgd_v((const char *const[]){ __VA_ARGS__, NULL })

START_TEST(hbgd_options) {
        const char *const helps[] = { "-h", "--help" };
        for (int i = 0; i < 2; i++) {
                struct result r = hbgd(helps[i]);
                ASSERT_CODE(r, 0);
                ck_assert_msg(strncmp(r.out, "Usage: hbgd", 11) == 0 && strstr(r.out, "--check-config"), "%s", r.out);
                result_free(&r);
        }
        const char *const versions[] = { "-V", "--version" };
        for (int i = 0; i < 2; i++) {
                struct result r = hbgd(versions[i]);
                ASSERT_CODE(r, 0);
                ck_assert_str_eq(r.out, "hbgd " HBG_VERSION "\n");
                result_free(&r);
        }
        struct result r = hbgd("-x");
        ASSERT_CODE(r, 2);
        ck_assert(strstr(r.err, "unknown option '-x'"));
        result_free(&r);

        /* --check-config: the defaults, a file, options on top, errors */
        char dir[] = "/tmp/hbgd-check.XXXXXX", conf[64], bad[64], sock[64];
        ck_assert(mkdtemp(dir));
        snprintf(conf, sizeof(conf), "%s/good.conf", dir);
        snprintf(bad, sizeof(bad), "%s/bad.conf", dir);
        snprintf(sock, sizeof(sock), "%s/hbgd.sock", dir);
        FILE *f = fopen(conf, "w");
        ck_assert(f);
        fprintf(f, "[scheduler]\nthreads = 3\ncompletion_mode = lazy\n[limits]\nmax_sessions = 7\n");
        ck_assert_int_eq(fclose(f), 0);
        f = fopen(bad, "w");
        ck_assert(f);
        fprintf(f, "[scheduler]\nthreads = 3\nbogus = 1\n");
        ck_assert_int_eq(fclose(f), 0);

        r = hbgd("--check-config", "--socket", sock);
        ASSERT_CODE(r, 0);
        ck_assert_msg(strstr(r.out, "\n[scheduler]\nthreads = 4\n") && strstr(r.out, "\n[limits]\n") &&
                              strstr(r.out, "\nmax_sessions = 64\n") && strstr(r.out, "\ncompletion_mode = eager-batched\n"),
                      "%s", r.out);
        result_free(&r);
        r = hbgd("--check-config", conf, "--socket", sock);
        ASSERT_CODE(r, 0);
        ck_assert_msg(strstr(r.out, "\nthreads = 3\n") && strstr(r.out, "\nmax_sessions = 7\n") &&
                              strstr(r.out, "\ncompletion_mode = lazy\n") && strstr(r.out, conf),
                      "%s", r.out);
        result_free(&r);
        char eq[128];
        snprintf(eq, sizeof(eq), "--check-config=%s", conf);
        r = hbgd(eq, "--threads", "2", "--socket", sock);
        ASSERT_CODE(r, 0);
        ck_assert_msg(strstr(r.out, "\nthreads = 2\n") && strstr(r.out, "\nmax_sessions = 7\n"), "%s", r.out);
        result_free(&r);
        /* a count out of range says the range the option takes */
        static const char *const bad_threads[] = { "0", "abc", "-1", "65" };
        for (size_t i = 0; i < sizeof(bad_threads) / sizeof(bad_threads[0]); i++) {
                r = hbgd(eq, "--threads", bad_threads[i], "--socket", sock);
                ASSERT_CODE(r, 1); /* --check-config: 1 for what it found wrong */
                ck_assert_msg(strstr(r.err, "is not a number between 1 and 64"), "--threads %s: %s", bad_threads[i],
                              r.err);
                result_free(&r);
        }
        r = hbgd("--config", conf, "--check-config", "--socket", sock);
        ASSERT_CODE(r, 0);
        ck_assert_msg(strstr(r.out, "\nthreads = 3\n"), "%s", r.out);
        result_free(&r);
        /* what it printed reads back the same */
        r = hbgd("--check-config", conf);
        char again[64];
        snprintf(again, sizeof(again), "%s/again.conf", dir);
        f = fopen(again, "w");
        ck_assert(f);
        fputs(r.out, f);
        ck_assert_int_eq(fclose(f), 0);
        struct result r2 = hbgd("--check-config", again);
        ASSERT_CODE(r2, 0);
        ck_assert_str_eq(strchr(r2.out, '\n'), strchr(r.out, '\n'));
        result_free(&r);
        result_free(&r2);
        unlink(again);

        char want[512];
        snprintf(want, sizeof(want), "hbgd: %s:3: unknown key 'bogus' in section [scheduler]", bad);
        r = hbgd("--check-config", bad);
        ASSERT_CODE(r, 1);
        ck_assert_msg(strstr(r.err, want) && r.out[0] == 0, "%s", r.err);
        result_free(&r);
        /* Every error of a file, each at its line with its key and reason. */
        f = fopen(bad, "w");
        ck_assert(f);
        fprintf(f, "[scheduler]\ncompletion_mode = fast\nthreads = 99\n[sesion]\n[session]\nheap_size = 16MB\n"
                   "[limits]\nmax_sessions = -1\n[log]\nlevel = verbose\n[access] extra\n[scheduler]\n");
        ck_assert_int_eq(fclose(f), 0);
        r = hbgd("--check-config", bad);
        ASSERT_CODE(r, 1);
        static const char *const several[] = {
                "2: completion_mode: 'fast' is not one of",
                "3: threads: '99' is not a number from 1 to 64",
                "4: unknown section [sesion]",
                "6: heap_size: '16MB' is not a number from 0 to",
                "8: max_sessions: '-1' is not a number from 0 to 65536",
                "10: level: 'verbose' is not one of",
                "11: text after ']' in the header of section [access]: 'extra'",
                "12: section [scheduler] given again (first on line 1)",
        };
        unsigned lines = 0;
        for (const char *p = r.err; *p; p++)
                lines += *p == '\n';
        for (size_t i = 0; i < sizeof(several) / sizeof(several[0]); i++) {
                snprintf(want, sizeof(want), "hbgd: %s:%s", bad, several[i]);
                ck_assert_msg(strstr(r.err, want), "no line '%s' in:\n%s", want, r.err);
        }
        ck_assert_msg(lines == sizeof(several) / sizeof(several[0]) && r.out[0] == 0, "%s", r.err);
        result_free(&r);
        /* The shipped example passes (each section once, every key known). */
        snprintf(want, sizeof(want), "%s/systemd/hbgd.conf.example", HBG_SRCDIR);
        r = hbgd("--check-config", want);
        ASSERT_CODE(r, 0);
        result_free(&r);
        r = hbgd("--check-config", "/nonexistent/hbgd.conf");
        ASSERT_CODE(r, 1);
        ck_assert_msg(strstr(r.err, "/nonexistent/hbgd.conf: No such file"), "%s", r.err);
        result_free(&r);
        r = hbgd("--check-config", conf, "--completion=resolver", "--threads", "1");
        ASSERT_CODE(r, 1);
        ck_assert_msg(r.err[0] && r.out[0] == 0, "%s", r.err);
        result_free(&r);
        /* it started nothing */
        ck_assert_msg(access(sock, F_OK) < 0, "%s exists", sock);
        unlink(conf);
        unlink(bad);
        rmdir(dir);
}
END_TEST

/* ------------------------------------------------------------ hbgd run by hand */

/* A group other than ours, by name ("" and our gid if there is none). */
static gid_t other_group(char *name, size_t len) {
        gid_t gid = getegid();
        name[0] = 0;
        setgrent();
        for (struct group *g; (g = getgrent());)
                if (g->gr_gid != getegid() && strlen(g->gr_name) < len) {
                        snprintf(name, len, "%s", g->gr_name);
                        gid = g->gr_gid;
                        break;
                }
        endgrent();
        return gid;
}

static void write_text(const char *path, const char *text) {
        FILE *f = fopen(path, "w");
        ck_assert_msg(f, "%s: %s", path, strerror(errno));
        fputs(text, f);
        ck_assert_int_eq(fclose(f), 0);
}

/* [socket] mode and group on the socket hbgd binds; a group that does not
 * exist (a warning, hbgd's own group); a second hbgd on the same socket
 * names the first's pid; `hbgctl wait` right after starting hbgd, and
 * against nothing; without --socket and without /run/hbgd, a hint. */
START_TEST(hbgd_by_hand) {
        char dir[] = "/tmp/hbgd-hand.XXXXXX", conf[64], text[160], group[64], none[64];
        ck_assert(mkdtemp(dir));
        snprintf(conf, sizeof(conf), "%s/hbgd.conf", dir);
        snprintf(none, sizeof(none), "%s/none.sock", dir);
        gid_t gid = other_group(group, sizeof(group));
        if (!group[0])
                fprintf(stderr, "hbgd_by_hand: no group besides gid %u here: the group is checked as ours\n",
                        (unsigned)gid);
        snprintf(text, sizeof(text), "[socket]\nmode = 0640\ngroup = %s\n", group);
        write_text(conf, text);
        struct hbgd_proc *d;
        const char *args[] = { "--config", conf, NULL };
        ck_assert_int_eq(daemon_start(&d, args, NULL), 0);
        struct stat st;
        ck_assert_int_eq(stat(d->socket_path, &st), 0);
        ck_assert_msg(S_ISSOCK(st.st_mode) && (st.st_mode & 07777) == 0640, "mode %o, want socket 0640",
                      (unsigned)st.st_mode);
        ck_assert_msg(st.st_gid == gid, "group %u, want %u (%s)", (unsigned)st.st_gid, (unsigned)gid, group);

        struct result r = ctl(NULL, "--socket", d->socket_path, "wait", "--timeout", "20");
        ASSERT_CODE(r, 0);
        result_free(&r);
        /* A second hbgd: who serves the socket, and the socket still served. */
        r = hbgd("--socket", d->socket_path);
        ASSERT_CODE(r, 1);
        char want[160];
        snprintf(want, sizeof(want), "cannot listen on %s: it is served by hbgd %s, pid %d", d->socket_path,
                 HBG_VERSION, (int)d->pid);
        ck_assert_msg(strstr(r.err, want) && !strstr(r.err, "Address already in use"), "want '%s' in:\n%s", want,
                      r.err);
        result_free(&r);
        r = ctl(NULL, "--socket", d->socket_path, "status");
        ASSERT_CODE(r, 0);
        result_free(&r);
        daemon_destroy(d);

        /* The default mode, and a group that does not exist. */
        write_text(conf, "[socket]\ngroup = no-such-group-hbg\n");
        ck_assert_int_eq(daemon_start(&d, args, NULL), 0);
        ck_assert_int_eq(stat(d->socket_path, &st), 0);
        ck_assert_msg((st.st_mode & 07777) == 0660 && st.st_gid == getegid(), "mode %o group %u, want 0660 and %u",
                      (unsigned)(st.st_mode & 07777), (unsigned)st.st_gid, (unsigned)getegid());
        char *log = slurp(d->log_path); /* startup's lines are written before READY=1 */
        ck_assert_msg(strstr(log, "[socket] group 'no-such-group-hbg' does not exist"), "no warning in:\n%s", log);
        free(log);
        daemon_destroy(d);

        /* hbgctl wait right after starting hbgd, as a script does. */
        char sock[64];
        snprintf(sock, sizeof(sock), "%s/script.sock", dir);
        pid_t pid = fork();
        ck_assert(pid >= 0);
        if (pid == 0) {
                prctl(PR_SET_PDEATHSIG, SIGKILL);
                int devnull = open("/dev/null", O_WRONLY);
                dup2(devnull, 2);
                unsetenv("NOTIFY_SOCKET");
                execl(daemon_binary(), "hbgd", "--socket", sock, "--threads", "1", (char *)NULL);
                _exit(127);
        }
        r = ctl(NULL, "--socket", sock, "wait", "--timeout", "20");
        ASSERT_CODE(r, 0);
        result_free(&r);
        r = ctl(NULL, "--socket", sock, "status");
        ASSERT_CODE(r, 0);
        result_free(&r);
        kill(pid, SIGTERM);
        int ws;
        while (waitpid(pid, &ws, 0) < 0)
                ck_assert(errno == EINTR);

        /* Nothing there: exit 3 after the timeout. */
        r = ctl(NULL, "--socket", none, "wait", "--timeout", "0.2");
        ASSERT_CODE(r, 3);
        ck_assert_msg(strstr(r.err, "did not answer"), "%s", r.err);
        result_free(&r);

        /* No --socket, no /run/hbgd: the message names --socket. */
        if (access("/run/hbgd", F_OK) == 0) {
                fprintf(stderr, "hbgd_by_hand: SKIP the --socket hint: /run/hbgd exists on this machine\n");
        } else {
                r = hbgd("--threads", "1");
                ASSERT_CODE(r, 1);
                ck_assert_msg(strstr(r.err, "/run/hbgd does not exist") && strstr(r.err, "--socket"), "%s", r.err);
                result_free(&r);
        }
        unlink(conf);
        rmdir(dir);
}
END_TEST

/* ------------------------------------------------------------ trace */

/* Start hbgctl with args (HBG_SOCKET = S) without waiting: its pid. */
static pid_t ctl_spawn(const char *S, const char *const *args, const char *out, const char *err) {
        const char *argv[16] = { hbgctl_bin };
        int n = 1;
        for (; args[n - 1] && n < 15; n++)
                argv[n] = args[n - 1];
        argv[n] = NULL;
        pid_t pid = fork();
        ck_assert(pid >= 0);
        if (pid == 0) {
                int o = open(out, O_WRONLY | O_CREAT | O_TRUNC, 0600);
                int e = open(err, O_WRONLY | O_CREAT | O_TRUNC, 0600);
                if (o < 0 || e < 0 || dup2(o, 1) < 0 || dup2(e, 2) < 0)
                        _exit(126);
                setenv("HBG_SOCKET", S, 1);
                execv(hbgctl_bin, (char *const *)argv);
                _exit(127);
        }
        return pid;
}

/* hbgd's log says `needle` (it is written before the trace reply). */
static bool hbgd_log_says(struct hbgd_proc *d, const char *needle) {
        for (int i = 0; i < WAIT_MS / 10; i++) {
                char *log = slurp(d->log_path);
                bool found = strstr(log, needle) != NULL;
                free(log);
                if (found)
                        return true;
                usleep(10000);
        }
        return false;
}

static int64_t jint(json_object *o, const char *key) {
        return json_object_get_int64(get(o, key));
}

/* Well-formed XML, as far as an SVG of ours goes: every element closed in
 * order, attributes quoted, only the five entities; counts the elements
 * <rect class="task". */
static bool xml_well_formed(const char *x, unsigned *ret_task_boxes, char *why, size_t size) {
        const char *stack[64];
        size_t lens[64], depth = 0;
        *ret_task_boxes = 0;
        if (strncmp(x, "<?xml ", 6) == 0) {
                x = strstr(x, "?>");
                if (!x)
                        return snprintf(why, size, "unterminated XML declaration"), false;
                x += 2;
        }
        bool root_seen = false;
        while (*x) {
                if (*x == '&') {
                        static const char *const ents[] = { "&amp;", "&lt;", "&gt;", "&quot;", "&apos;" };
                        bool ok = false;
                        for (size_t i = 0; i < 5 && !ok; i++)
                                ok = strncmp(x, ents[i], strlen(ents[i])) == 0;
                        if (!ok)
                                return snprintf(why, size, "bad entity at %.20s", x), false;
                        x++;
                        continue;
                }
                if (*x != '<') {
                        if (depth == 0 && *x != '\n' && *x != ' ')
                                return snprintf(why, size, "text outside the root: %.20s", x), false;
                        x++;
                        continue;
                }
                if (x[1] == '/') {
                        const char *name = x + 2;
                        size_t len = strcspn(name, "> \n");
                        if (depth == 0 || lens[depth - 1] != len || strncmp(stack[depth - 1], name, len) != 0)
                                return snprintf(why, size, "</%.*s> closes nothing open", (int)len, name), false;
                        depth--;
                        if (!(x = strchr(name, '>')))
                                return snprintf(why, size, "unterminated end tag"), false;
                        x++;
                        continue;
                }
                const char *name = x + 1;
                size_t len = strcspn(name, "/> \n");
                if (len == 0)
                        return snprintf(why, size, "a tag without a name: %.20s", x), false;
                if (depth == 0 && root_seen)
                        return snprintf(why, size, "a second root element"), false;
                root_seen = true;
                if (len == 4 && strncmp(name, "rect", 4) == 0 && strncmp(name + 4, " class=\"task\"", 13) == 0)
                        ++*ret_task_boxes;
                /* The attributes: name="value" pairs, no < inside. */
                const char *p = name + len;
                bool quoted = false;
                for (; *p && (quoted || (*p != '>' && !(*p == '/' && p[1] == '>'))); p++) {
                        if (*p == '"')
                                quoted = !quoted;
                        else if (*p == '<')
                                return snprintf(why, size, "< inside a tag: %.30s", x), false;
                }
                if (!*p)
                        return snprintf(why, size, "unterminated tag: %.30s", x), false;
                if (*p == '/') {
                        x = p + 2;
                        continue;
                }
                if (depth == 64)
                        return snprintf(why, size, "nested too deep"), false;
                stack[depth] = name;
                lens[depth++] = len;
                x = p + 1;
        }
        if (depth || !root_seen)
                return snprintf(why, size, depth ? "<%.*s> not closed" : "no root element", (int)(depth ? lens[depth - 1] : 0),
                                depth ? stack[depth - 1] : ""), false;
        return true;
}

#define TRACE_GRAPHS 3u
#define TRACE_FAN 6u  /* noops between the root and the join, beside the host task */

/*
 * hbgctl trace on a graph whose shape the test knows: TRACE_GRAPHS graphs
 * of a root noop, TRACE_FAN noops and a host task after it, a join noop
 * after all of those, run while `trace --session N -o FILE --svg FILE`
 * records (for 600 s, ended by SIGINT once they are done: nothing timed).
 * The JSON: every slice is on a named track of hbgd's pid, begins no
 * later than it ends; one "X" slice per kernel task run, each task id of
 * ours once, named by its kernel, with the graph it belongs to; one async
 * slice per host task (not "X": they overlap) on the session's host track,
 * an id each; the graphs' "b" and "e" pair up by id, none in flight, each
 * holding its tasks' slices; one
 * flow per dependency between two kernel tasks (root -> each fan noop ->
 * join: 2 * TRACE_FAN a graph, none through the host task), its "s"
 * inside the fanin's slice and its "f" inside the dependant's; no drops.
 * The SVG is well-formed with one box per task.
 */
START_TEST(trace_timeline) {
        struct hbgd_proc *d = start();
        const char *S = d->socket_path;
        hbg_client *c;
        ck_assert_int_eq(hbg_connect(&c, S), 0);
        uint64_t sess;
        ck_assert_int_eq(my_sessions(S, &sess, 1), 1);
        char session[32], json_path[PATH_MAX], svg_path[PATH_MAX], out[PATH_MAX], err[PATH_MAX], started[96];
        snprintf(session, sizeof(session), "%llu", (unsigned long long)sess);
        snprintf(json_path, sizeof(json_path), "%s/trace.json", d->dir);
        snprintf(svg_path, sizeof(svg_path), "%s/trace.svg", d->dir);
        snprintf(out, sizeof(out), "%s/trace.out", d->dir);
        snprintf(err, sizeof(err), "%s/trace.err", d->dir);
        pid_t ctl_pid = ctl_spawn(S, (const char *const[]){ "trace", "--session", session, "--duration", "600", "-o",
                                                            json_path, "--svg", svg_path, NULL },
                                  out, err);
        snprintf(started, sizeof(started), "trace of session %s for 600000 ms started", session);
        ck_assert_msg(hbgd_log_says(d, started), "no \"%s\" in hbgd's log", started);

        /* Per graph: root, TRACE_FAN noops, join. */
        uint64_t kernel_ids[TRACE_GRAPHS * (TRACE_FAN + 2)], graphs[TRACE_GRAPHS];
        size_t n_ids = 0;
        for (unsigned g = 0; g < TRACE_GRAPHS; g++) {
                hbg_task root = HBG_TASK_INIT("noop"), join = HBG_TASK_INIT("noop"), h = HBG_TASK_INIT(NULL);
                uint64_t root_id, host_id;
                ck_assert_int_eq(hbg_graph_add(c, &root, &root_id), 0);
                kernel_ids[n_ids++] = root_id;
                for (unsigned i = 0; i < TRACE_FAN; i++) {
                        uint64_t id = add_noop_after(c, root_id);
                        kernel_ids[n_ids++] = id;
                        join.deps[join.n_deps++] = id;
                }
                h.host_fn = host_ok;
                h.n_deps = 1;
                h.deps[0] = root_id;
                ck_assert_int_eq(hbg_graph_add(c, &h, &host_id), 0);
                join.deps[join.n_deps++] = host_id;
                ck_assert_int_eq(hbg_graph_add(c, &join, &kernel_ids[n_ids++]), 0);
                ck_assert_int_eq(hbg_graph_submit(c, &graphs[g]), 0);
                ck_assert_int_eq(hbg_graph_wait(c, graphs[g], WAIT_MS), 0);
        }
        ck_assert_int_eq(kill(ctl_pid, SIGINT), 0);
        int st;
        while (waitpid(ctl_pid, &st, 0) < 0)
                ck_assert(errno == EINTR);
        char *errs = slurp(err);
        ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "hbgctl trace: status %d\n%s", st, errs);
        free(errs);

        char *text = slurp(json_path);
        json_object *o = json_tokener_parse(text);
        ck_assert_msg(o, "the trace is not JSON:\n%.2000s", text);
        free(text);
        json_object *evs = get(o, "traceEvents");
        ck_assert_int_eq(jint(get(o, "otherData"), "dropped"), 0);
        int64_t pid = -1;
        uint64_t tracks[128];
        size_t n_tracks = 0, n_tasks = 0, n_host = 0, n_begin = 0, n_end = 0, n_flows = 0;
        bool seen[TRACE_GRAPHS * (TRACE_FAN + 2)] = { false };
        /* Async slices (graphs and host tasks) by id: begun, then ended. */
        char begins[2 * TRACE_GRAPHS][48] = { { 0 } };
        int64_t begin_ts[2 * TRACE_GRAPHS] = { 0 }, end_ts[2 * TRACE_GRAPHS] = { 0 };
        int64_t async_graph[2 * TRACE_GRAPHS]; /* a graph slice's graph, -1 for a host task's */
        /* Each kernel task's slice (one block each) and thread, by index. */
        int64_t slice_start[TRACE_GRAPHS * (TRACE_FAN + 2)], slice_end[TRACE_GRAPHS * (TRACE_FAN + 2)];
        int64_t slice_tid[TRACE_GRAPHS * (TRACE_FAN + 2)];
        json_object *flows[4 * TRACE_GRAPHS * TRACE_FAN];
        /* The tracks first: metadata names them. */
        for (size_t i = 0; i < json_object_array_length(evs); i++) {
                json_object *e = json_object_array_get_idx(evs, i);
                const char *ph = json_object_get_string(get(e, "ph"));
                if (strcmp(ph, "M") != 0)
                        continue;
                if (strcmp(json_object_get_string(get(e, "name")), "process_name") == 0)
                        pid = jint(e, "pid");
                else if (n_tracks < 128)
                        tracks[n_tracks++] = (uint64_t)jint(e, "tid");
        }
        ck_assert_int_eq(pid, d->pid);
        for (size_t i = 0; i < json_object_array_length(evs); i++) {
                json_object *e = json_object_array_get_idx(evs, i);
                const char *ph = json_object_get_string(get(e, "ph"));
                if (strcmp(ph, "M") == 0)
                        continue;
                bool tracked = false;
                for (size_t k = 0; k < n_tracks; k++)
                        tracked = tracked || tracks[k] == (uint64_t)jint(e, "tid");
                ck_assert_msg(tracked && jint(e, "pid") == pid, "an event on no named track: %s", json_object_to_json_string(e));
                double ts = json_object_get_double(get(e, "ts"));
                if (strcmp(ph, "s") == 0 || strcmp(ph, "f") == 0) {
                        ck_assert_str_eq(json_object_get_string(get(e, "cat")), "dep");
                        ck_assert_uint_lt(n_flows, 4 * TRACE_GRAPHS * TRACE_FAN);
                        flows[n_flows++] = e;
                        continue;
                }
                ck_assert_msg(strcmp(json_object_get_string(get(e, "cat")), "host") != 0 || strcmp(ph, "X") != 0,
                              "a host task as an \"X\" slice (they overlap): %s", json_object_to_json_string(e));
                if (strcmp(ph, "X") == 0) {
                        ck_assert_msg(json_object_get_double(get(e, "dur")) >= 0, "ends before it begins: %s",
                                      json_object_to_json_string(e));
                        json_object *a = get(e, "args");
                        ck_assert_int_eq(jint(a, "session"), (int64_t)sess);
                        ck_assert_int_eq(jint(a, "result"), 0);
                        n_tasks++;
                        ck_assert_str_eq(json_object_get_string(get(e, "name")), "noop");
                        uint64_t task = (uint64_t)jint(a, "task");
                        size_t k = 0;
                        while (k < n_ids && kernel_ids[k] != task)
                                k++;
                        ck_assert_msg(k < n_ids && !seen[k], "task %" PRIu64 ": not ours, or run twice", task);
                        seen[k] = true;
                        ck_assert_int_eq(jint(a, "graph"), (int64_t)graphs[k / (TRACE_FAN + 2)]);
                        slice_start[k] = llround(ts * 1000);
                        slice_end[k] = slice_start[k] + llround(json_object_get_double(get(e, "dur")) * 1000);
                        slice_tid[k] = jint(e, "tid");
                } else if (strcmp(ph, "b") == 0 || strcmp(ph, "e") == 0) {
                        const char *id = json_object_get_string(get(e, "id"));
                        const char *cat = json_object_get_string(get(e, "cat"));
                        bool begin = ph[0] == 'b';
                        size_t k = 0;
                        while (k < n_begin && strcmp(begins[k], id) != 0)
                                k++;
                        if (begin) {
                                ck_assert_msg(k == n_begin, "async slice %s begins twice", id);
                                ck_assert_uint_lt(n_begin, 2 * TRACE_GRAPHS);
                                json_object *a = get(e, "args");
                                ck_assert_int_eq(jint(a, "session"), (int64_t)sess);
                                async_graph[n_begin] = -1;
                                if (strcmp(cat, "host") == 0) {
                                        n_host++;
                                        ck_assert_int_eq(jint(a, "result"), 0);
                                } else {
                                        async_graph[n_begin] = jint(a, "graph");
                                        ck_assert_str_eq(cat, "graph");
                                        ck_assert_msg(!json_object_get_boolean(get(a, "in_flight")),
                                                      "graph %s in flight after its wait", id);
                                }
                                snprintf(begins[n_begin], sizeof(begins[0]), "%s", id);
                                begin_ts[n_begin++] = llround(ts * 1000);
                                continue;
                        }
                        ck_assert_msg(k < n_begin, "async slice %s ends without a beginning", id);
                        ck_assert_msg(begin_ts[k] <= llround(ts * 1000), "async slice %s ends before it begins", id);
                        end_ts[k] = llround(ts * 1000);
                        begins[k][0] = 0;
                        n_end++;
                } else {
                        ck_assert_msg(strcmp(ph, "i") == 0, "unexpected phase %s", ph);
                }
        }
        ck_assert_uint_eq(n_tasks, n_ids);
        ck_assert_uint_eq(n_host, TRACE_GRAPHS);
        ck_assert_uint_eq(n_begin, 2 * TRACE_GRAPHS);
        ck_assert_uint_eq(n_end, 2 * TRACE_GRAPHS);
        /* Each graph's slice holds its tasks' (a graph's record comes
         * after its tasks, which may run before hbgd sees it). */
        for (size_t k = 0; k < n_ids; k++) {
                size_t a = 0;
                while (a < n_begin && async_graph[a] != (int64_t)graphs[k / (TRACE_FAN + 2)])
                        a++;
                ck_assert_msg(a < n_begin, "no slice for graph %" PRIu64, graphs[k / (TRACE_FAN + 2)]);
                ck_assert_msg(begin_ts[a] <= slice_start[k] && slice_end[k] <= end_ts[a],
                              "task %" PRIu64 " runs %" PRId64 "..%" PRId64 " ns outside its graph's slice %" PRId64
                              "..%" PRId64, kernel_ids[k], slice_start[k], slice_end[k], begin_ts[a], end_ts[a]);
        }
        /* The flows: "s" then "f" of one id, an edge of ours each, once,
         * each end inside the slice of its task on that task's track. */
        ck_assert_uint_eq(n_flows, 2 * 2 * TRACE_GRAPHS * TRACE_FAN);
        bool edge_seen[TRACE_GRAPHS * (TRACE_FAN + 2)][2] = { { false } };
        for (size_t i = 0; i < n_flows; i += 2) {
                json_object *fs = flows[i], *ff = flows[i + 1];
                ck_assert_str_eq(json_object_get_string(get(fs, "ph")), "s");
                ck_assert_str_eq(json_object_get_string(get(ff, "ph")), "f");
                ck_assert_int_eq(jint(fs, "id"), jint(ff, "id"));
                uint64_t from = (uint64_t)jint(get(fs, "args"), "from_task"), to = (uint64_t)jint(get(fs, "args"), "to_task");
                size_t kf = 0, kt = 0;
                while (kf < n_ids && kernel_ids[kf] != from)
                        kf++;
                while (kt < n_ids && kernel_ids[kt] != to)
                        kt++;
                ck_assert_msg(kf < n_ids && kt < n_ids, "a flow %" PRIu64 " -> %" PRIu64 " between no tasks of ours",
                              from, to);
                size_t g = kf / (TRACE_FAN + 2), pf = kf % (TRACE_FAN + 2), pt = kt % (TRACE_FAN + 2);
                /* root (0) -> a fan noop (1..FAN), or a fan noop -> join (FAN + 1) */
                ck_assert_msg(kt / (TRACE_FAN + 2) == g && ((pf == 0 && pt >= 1 && pt <= TRACE_FAN) ||
                                                            (pf >= 1 && pf <= TRACE_FAN && pt == TRACE_FAN + 1)),
                              "a flow %" PRIu64 " -> %" PRIu64 " that is no dependency", from, to);
                bool *once = &edge_seen[pf == 0 ? kt : kf][pf == 0 ? 0 : 1];
                ck_assert_msg(!*once, "the flow %" PRIu64 " -> %" PRIu64 " twice", from, to);
                *once = true;
                int64_t s_ts = llround(json_object_get_double(get(fs, "ts")) * 1000);
                int64_t f_ts = llround(json_object_get_double(get(ff, "ts")) * 1000);
                ck_assert_msg(jint(fs, "tid") == slice_tid[kf] && s_ts >= slice_start[kf] && s_ts <= slice_end[kf],
                              "flow start outside task %" PRIu64 "'s slice: %s", from, json_object_to_json_string(fs));
                ck_assert_msg(jint(ff, "tid") == slice_tid[kt] && f_ts >= slice_start[kt] && f_ts <= slice_end[kt],
                              "flow end outside task %" PRIu64 "'s slice: %s", to, json_object_to_json_string(ff));
        }
        json_object_put(o);

        char *svg = slurp(svg_path), why[128];
        unsigned boxes;
        ck_assert_msg(xml_well_formed(svg, &boxes, why, sizeof(why)), "the SVG is not well-formed: %s", why);
        ck_assert_uint_eq(boxes, n_ids + TRACE_GRAPHS);
        free(svg);
        hbg_disconnect(c);
        daemon_destroy(d);
}
END_TEST

/*
 * A graph still in flight when the trace ends: root noop -> host task ->
 * join noop, its host task left unanswered (no worker threads: it runs
 * only inside our wait) while `hbgctl trace --duration 0.3` records. The
 * JSON shows it as a graph slice with args in_flight, ending at the
 * trace's end; the root's slice is there, the join's is not.
 */
START_TEST(trace_open_graph) {
        struct hbgd_proc *d = start();
        const char *S = d->socket_path;
        hbg_client *c;
        ck_assert_int_eq(hbg_connect(&c, S), 0);
        uint64_t sess, root_id, host_id, join_id, graph;
        ck_assert_int_eq(my_sessions(S, &sess, 1), 1);
        char session[32];
        snprintf(session, sizeof(session), "%llu", (unsigned long long)sess);
        hbg_task root = HBG_TASK_INIT("noop"), join = HBG_TASK_INIT("noop"), h = HBG_TASK_INIT(NULL);
        ck_assert_int_eq(hbg_graph_add(c, &root, &root_id), 0);
        h.host_fn = host_ok;
        h.n_deps = 1;
        h.deps[0] = root_id;
        ck_assert_int_eq(hbg_graph_add(c, &h, &host_id), 0);
        join.deps[join.n_deps++] = host_id;
        ck_assert_int_eq(hbg_graph_add(c, &join, &join_id), 0);

        /* The trace starts first (its log line), then the graph goes; the
         * trace ends (SIGINT) once the root ran: the host task is then
         * ready and waits for this thread, which is not waiting yet. */
        char dir[] = "/tmp/hbg-trace-open.XXXXXX", out[64], err[64];
        ck_assert(mkdtemp(dir));
        snprintf(out, sizeof(out), "%s/out", dir);
        snprintf(err, sizeof(err), "%s/err", dir);
        pid_t ctl_pid = ctl_spawn(S, (const char *const[]){ "trace", "--session", session, "--duration", "600", NULL },
                                  out, err);
        char started[96];
        snprintf(started, sizeof(started), "trace of session %s for 600000 ms started", session);
        ck_assert_msg(hbgd_log_says(d, started), "no \"%s\" in hbgd's log", started);
        ck_assert_int_eq(hbg_graph_submit(c, &graph), 0);
        for (int waited = 0; daemon_tasks_completed(S) < 1; waited += 10) {
                ck_assert_msg(waited < WAIT_MS, "the root did not run within %d ms", WAIT_MS);
                usleep(10000);
        }
        ck_assert_int_eq(kill(ctl_pid, SIGINT), 0);
        int st;
        while (waitpid(ctl_pid, &st, 0) < 0)
                ck_assert(errno == EINTR);
        char *errs = slurp(err), *text = slurp(out);
        ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "hbgctl trace: status %d\n%s", st, errs);
        ck_assert_int_eq(hbg_graph_wait(c, graph, WAIT_MS), 0);
        unlink(out);
        unlink(err);
        rmdir(dir);

        json_object *o = json_tokener_parse(text);
        ck_assert_msg(o, "the trace is not JSON:\n%.2000s", text);
        int64_t end_ns = llround(json_object_get_double(get(get(o, "otherData"), "duration_us")) * 1000);
        json_object *evs = get(o, "traceEvents");
        size_t n_open = 0, n_open_end = 0, n_root = 0, n_join = 0;
        char id[48] = "";
        for (size_t i = 0; i < json_object_array_length(evs); i++) {
                json_object *e = json_object_array_get_idx(evs, i);
                const char *ph = json_object_get_string(get(e, "ph"));
                if (strcmp(ph, "X") == 0) {
                        uint64_t task = (uint64_t)jint(get(e, "args"), "task");
                        n_root += task == root_id;
                        n_join += task == join_id;
                        continue;
                }
                if (strcmp(ph, "b") != 0 && strcmp(ph, "e") != 0)
                        continue;
                if (strcmp(json_object_get_string(get(e, "cat")), "graph") != 0)
                        continue;
                if (ph[0] == 'b') {
                        json_object *a = get(e, "args");
                        ck_assert_msg(json_object_get_boolean(get(a, "in_flight")), "graph retired in the trace: %s",
                                      json_object_to_json_string(e));
                        ck_assert_int_eq(jint(a, "graph"), (int64_t)graph);
                        ck_assert_int_eq(jint(a, "first_task"), (int64_t)root_id);
                        ck_assert_int_eq(jint(a, "last_task"), (int64_t)join_id);
                        snprintf(id, sizeof(id), "%s", json_object_get_string(get(e, "id")));
                        n_open++;
                } else {
                        ck_assert_str_eq(json_object_get_string(get(e, "id")), id);
                        ck_assert_int_eq(llround(json_object_get_double(get(e, "ts")) * 1000), end_ns);
                        n_open_end++;
                }
        }
        ck_assert_uint_eq(n_open, 1);
        ck_assert_uint_eq(n_open_end, 1);
        ck_assert_uint_eq(n_root, 1);
        ck_assert_uint_eq(n_join, 0);
        json_object_put(o);
        free(text);
        free(errs);
        hbg_disconnect(c);
        daemon_destroy(d);
}
END_TEST

/*
 * [trace] thread_events = 16: a trace of TRACE_DROP_TASKS noops fills the
 * scheduler threads' buffers; what did not fit is counted: otherData
 * says buffer_events 16 and dropped > 0, no thread's track holds more
 * than 16 records, the records kept and the dropped ones account for at
 * least every task run, and hbgctl says so on stderr.
 */
#define TRACE_DROP_TASKS 200u

START_TEST(trace_drops) {
        char dir[] = "/tmp/hbg-trace-drops.XXXXXX", conf[64], out[64], err[64];
        ck_assert(mkdtemp(dir));
        snprintf(conf, sizeof(conf), "%s/hbgd.conf", dir);
        snprintf(out, sizeof(out), "%s/out", dir);
        snprintf(err, sizeof(err), "%s/err", dir);
        write_text(conf, "[trace]\nthread_events = 16\n");
        struct hbgd_proc *d;
        const char *args[] = { "--config", conf, NULL };
        ck_assert_int_eq(daemon_start(&d, args, NULL), 0);
        const char *S = d->socket_path;
        hbg_client *c;
        ck_assert_int_eq(hbg_connect(&c, S), 0);
        uint64_t sess;
        ck_assert_int_eq(my_sessions(S, &sess, 1), 1);
        char session[32], started[96];
        snprintf(session, sizeof(session), "%llu", (unsigned long long)sess);
        pid_t ctl_pid = ctl_spawn(S, (const char *const[]){ "trace", "--session", session, "--duration", "600", NULL },
                                  out, err);
        snprintf(started, sizeof(started), "trace of session %s for 600000 ms started", session);
        ck_assert_msg(hbgd_log_says(d, started), "no \"%s\" in hbgd's log", started);
        for (unsigned i = 0; i < TRACE_DROP_TASKS; i++) {
                hbg_task t = HBG_TASK_INIT("noop");
                ck_assert_int_eq(hbg_graph_add(c, &t, NULL), 0);
        }
        uint64_t graph;
        ck_assert_int_eq(hbg_graph_submit(c, &graph), 0);
        ck_assert_int_eq(hbg_graph_wait(c, graph, WAIT_MS), 0);
        ck_assert_int_eq(kill(ctl_pid, SIGINT), 0);
        int st;
        while (waitpid(ctl_pid, &st, 0) < 0)
                ck_assert(errno == EINTR);
        char *errs = slurp(err), *text = slurp(out);
        ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "hbgctl trace: status %d\n%s", st, errs);
        ck_assert_msg(strstr(errs, "events dropped") && strstr(errs, "buffer of 16 events"),
                      "hbgctl does not report the drops:\n%s", errs);
        json_object *o = json_tokener_parse(text);
        ck_assert_msg(o, "the trace is not JSON:\n%.2000s", text);
        json_object *other = get(o, "otherData");
        ck_assert_int_eq(jint(other, "buffer_events"), 16);
        int64_t dropped = jint(other, "dropped");
        ck_assert_int_gt(dropped, 0);
        json_object *evs = get(o, "traceEvents");
        size_t per_tid[64] = { 0 }, n_tasks = 0;
        for (size_t i = 0; i < json_object_array_length(evs); i++) {
                json_object *e = json_object_array_get_idx(evs, i);
                const char *ph = json_object_get_string(get(e, "ph"));
                if (strcmp(ph, "X") != 0 && strcmp(ph, "i") != 0)
                        continue;
                int64_t tid = jint(e, "tid");
                ck_assert_msg(tid >= 0 && tid < 64, "a thread's record off the scheduler tracks: %s",
                              json_object_to_json_string(e));
                per_tid[tid]++;
                n_tasks += ph[0] == 'X';
        }
        for (size_t i = 0; i < 64; i++)
                ck_assert_msg(per_tid[i] <= 16, "scheduler %zu: %zu records in a buffer of 16", i, per_tid[i]);
        ck_assert_msg(n_tasks + (uint64_t)dropped >= TRACE_DROP_TASKS, "%zu task slices + %" PRId64
                      " dropped < %u tasks run", n_tasks, dropped, TRACE_DROP_TASKS);
        json_object_put(o);
        free(text);
        free(errs);
        hbg_disconnect(c);
        daemon_destroy(d);
        unlink(conf);
        unlink(out);
        unlink(err);
        rmdir(dir);
}
END_TEST

static Suite *suite(void) {
        Suite *s = suite_create("hbgctl");
        TCase *tc = tcase_create("usage");
        tcase_set_timeout(tc, 60);
        tcase_add_test(tc, usage_errors);
        tcase_add_test(tc, not_running);
        tcase_add_test(tc, gone_mid_request);
        suite_add_tcase(s, tc);
        tc = tcase_create("status");
        tcase_set_timeout(tc, 60);
        tcase_add_test(tc, status_verbs);
        suite_add_tcase(s, tc);
        tc = tcase_create("run");
        tcase_set_timeout(tc, 120);
        tcase_add_test(tc, run_graphs);
        tcase_add_test(tc, run_failing);
        suite_add_tcase(s, tc);
        tc = tcase_create("malformed");
        tcase_set_timeout(tc, 120);
        tcase_add_test(tc, run_malformed);
        suite_add_tcase(s, tc);
        tc = tcase_create("cli");
        tcase_set_timeout(tc, 120);
        tcase_add_test(tc, help_version);
        tcase_add_test(tc, graphs_live);
        tcase_add_test(tc, cancel_kill);
        tcase_add_test(tc, graphs_hostile);
        tcase_add_test(tc, top_batch);
        tcase_add_test(tc, run_stdin);
        tcase_add_test(tc, run_progress);
        tcase_add_test(tc, run_dot);
        tcase_add_test(tc, graphs_progress);
        tcase_add_test(tc, run_dry_run);
        tcase_add_test(tc, run_heap);
        tcase_add_test(tc, run_small_points);
        tcase_add_test(tc, hostile_names);
        tcase_add_test(tc, hbgd_options);
        tcase_add_test(tc, hbgd_by_hand);
        suite_add_tcase(s, tc);
        tc = tcase_create("trace");
        tcase_set_timeout(tc, 120);
        tcase_add_test(tc, trace_timeline);
        tcase_add_test(tc, trace_open_graph);
        tcase_add_test(tc, trace_drops);
        suite_add_tcase(s, tc);
        tc = tcase_create("big");
        tcase_set_timeout(tc, 300);
        tcase_add_test(tc, run_big);
        suite_add_tcase(s, tc);
        return s;
}

static int setup(void) {
        return find_paths() ? daemon_util_setup() : -1;
}

const struct check_main check_main = {
        .suite = suite,
        .ignore_sigpipe = true,
        .setup = setup,
        .teardown = daemon_util_cleanup,
};
