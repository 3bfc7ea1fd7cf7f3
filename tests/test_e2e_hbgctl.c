/* SPDX-License-Identifier: MIT */
/*
 * hbgctl end to end: build/bin/hbgctl run as a subprocess against a real
 * hbgd (tests/daemon_util.c, one per test), its --json output parsed with
 * json-c. Graph files are tests/graphs/ (*.json); their expected outputs are
 * computed by hand below (every value is exact in f32).
 *
 * $HBGCTL overrides the hbgctl binary (default: ../bin/hbgctl next to this
 * test), $HBG_TEST_GRAPHS the graph directory (default: tests/graphs found
 * from the working directory or above this binary). CK_RUN_CASE=usage|
 * status|run|malformed|big runs one group.
 */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <limits.h>
#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <json-c/json.h>

#include "hbg/hbg.h"
#include "proto/wire.h"
#include "tests/daemon_util.h"

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

/* Run hbgctl with the NULL-terminated argument list; HBG_SOCKET is set to
 * env_socket in its environment (removed if NULL). */
static struct result ctl_v(const char *env_socket, const char *const *args) {
        char dir[] = "/tmp/hbgctl-test.XXXXXX", out[64], err[64];
        ck_assert(mkdtemp(dir));
        snprintf(out, sizeof(out), "%s/out", dir);
        snprintf(err, sizeof(err), "%s/err", dir);
        const char *argv[64] = { hbgctl_bin };
        int n = 1;
        for (; args[n - 1] && n < 63; n++)
                argv[n] = args[n - 1];
        argv[n] = NULL;
        pid_t pid = fork();
        ck_assert(pid >= 0);
        if (pid == 0) {
                int o = open(out, O_WRONLY | O_CREAT | O_TRUNC, 0600);
                int e = open(err, O_WRONLY | O_CREAT | O_TRUNC, 0600);
                if (o < 0 || e < 0 || dup2(o, 1) < 0 || dup2(e, 2) < 0)
                        _exit(126);
                if (env_socket)
                        setenv("HBG_SOCKET", env_socket, 1);
                else
                        unsetenv("HBG_SOCKET");
                execv(hbgctl_bin, (char *const *)argv);
                _exit(127);
        }
        int st;
        while (waitpid(pid, &st, 0) < 0)
                ck_assert(errno == EINTR);
        struct result r = {
                .code = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st),
                .out = slurp(out),
                .err = slurp(err),
        };
        unlink(out);
        unlink(err);
        rmdir(dir);
        return r;
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

/* Exit 3, a specific message, for every verb that needs hbgd. */
START_TEST(not_running) {
        char gone[PATH_MAX], file[PATH_MAX];
        struct hbgd_proc *d = start();
        snprintf(gone, sizeof(gone), "%s/gone.sock", d->dir);
        graph_path(file, sizeof(file), "kernels.json");
        const char *verbs[] = { "status", "sessions", "graphs", "threads", "kernels" };
        for (size_t i = 0; i < sizeof(verbs) / sizeof(verbs[0]); i++) {
                struct result r = ctl(NULL, "--socket", gone, verbs[i]);
                ASSERT_CODE(r, 3);
                ck_assert_msg(strstr(r.err, "hbgd is not running on"), "%s: %s", verbs[i], r.err);
                result_free(&r);
                r = ctl(gone, verbs[i], "--json");   /* via HBG_SOCKET */
                ASSERT_CODE(r, 3);
                result_free(&r);
        }
        struct result r = ctl(NULL, "run", file, "--socket", gone);
        ASSERT_CODE(r, 3);
        ck_assert(strstr(r.err, "hbgd is not running on"));
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

/* ------------------------------------------------------------ status verbs */

START_TEST(status_verbs) {
        struct hbgd_proc *d = start();
        const char *S = d->socket_path;
        /* A session with one graph run, so sessions and graphs have rows. */
        hbg_client *c;
        ck_assert_int_eq(hbg_connect(&c, S), 0);
        hbg_task t = HBG_TASK_INIT("noop");
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
        result_free(&r);

        /* --json */
        r = ctl(NULL, "--json", "--socket", S, "status");
        ASSERT_CODE(r, 0);
        json_object *o = parse_json(&r), *dm = get(o, "daemon");
        ck_assert_str_eq(json_object_get_string(get(dm, "version")), HBG_VERSION);
        ck_assert_int_eq(json_object_get_int64(get(dm, "pid")), d->pid);
        ck_assert_int_ge(json_object_get_int64(get(dm, "sessions")), 1);
        ck_assert_int_ge(json_object_get_int64(get(dm, "graphs_retired")), 1);
        json_object_put(o);
        result_free(&r);

        r = ctl(S, "sessions", "--json");
        ASSERT_CODE(r, 0);
        o = parse_json(&r);
        json_object *a = get(o, "sessions");
        ck_assert_int_ge(json_object_array_length(a), 1);
        json_object *s0 = json_object_array_get_idx(a, 0);
        ck_assert_int_eq(json_object_get_int64(get(s0, "pid")), getpid());
        ck_assert_int_ge(json_object_get_int64(get(s0, "submitted")), 1);
        json_object_put(o);
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
        json_object_put(o);
        result_free(&r);

        r = ctl(S, "--json", "kernels");
        ASSERT_CODE(r, 0);
        o = parse_json(&r);
        a = get(o, "kernels");
        ck_assert_int_eq(json_object_array_length(a), 12);
        bool found = false;
        for (size_t i = 0; i < json_object_array_length(a); i++) {
                json_object *k = json_object_array_get_idx(a, i);
                if (strcmp(json_object_get_string(get(k, "name")), "axpy_f32") == 0) {
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

START_TEST(run_graphs) {
        struct hbgd_proc *d = start();
        const char *S = d->socket_path;
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
 *   hbgctl: graph failed at task 1 "boom" (kernel fail): Input/output error: kernel fail failed: ... */
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
        json_object_put(o);
        result_free(&r);

        r = ctl(S, "run", path);
        ASSERT_CODE(r, 1);
        char want[256];
        snprintf(want, sizeof(want), "hbgctl: graph failed at task %u \"%s\" (kernel %s): %s: ", index, task, kernel,
                 strerror(-code));
        ck_assert_msg(r.out[0] == 0 && strstr(r.err, want) && strstr(r.err, what), "%s: stderr does not say "
                      "\"%s...%s\": %s", file, want, what, r.err);
        result_free(&r);
}

START_TEST(run_failing) {
        struct hbgd_proc *d = start();
        /* A kernel's error at run time (fail returns its scalar), and the
         * validator's reason for a task it refuses. */
        run_fails(d->socket_path, "fail.json", 1, "boom", "fail", -5, "kernel fail failed: Input/output error");
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

static Suite *suite(void) {
        Suite *s = suite_create("hbgctl");
        TCase *tc = tcase_create("usage");
        tcase_set_timeout(tc, 60);
        tcase_add_test(tc, usage_errors);
        tcase_add_test(tc, not_running);
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
        tc = tcase_create("big");
        tcase_set_timeout(tc, 300);
        tcase_add_test(tc, run_big);
        suite_add_tcase(s, tc);
        return s;
}

int main(void) {
        signal(SIGPIPE, SIG_IGN);
        if (access(daemon_binary(), X_OK) < 0) {
                fprintf(stderr, "test_e2e_hbgctl: %s: %s; build it or set HBGD\n", daemon_binary(),
                        strerror(errno));
                return 1;
        }
        if (!find_paths() || daemon_util_init() < 0)
                return 1;
        SRunner *sr = srunner_create(suite());
        srunner_run_all(sr, CK_NORMAL);
        int failed = srunner_ntests_failed(sr);
        srunner_free(sr);
        daemon_util_cleanup();
        return failed ? 1 : 0;
}
