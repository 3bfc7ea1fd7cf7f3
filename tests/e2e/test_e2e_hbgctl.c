/* SPDX-License-Identifier: MIT */
/*
 * hbgctl end to end: build/bin/hbgctl run as a subprocess against a real
 * hbgd (tests/e2e/daemon_util.c, one per test), its --json output parsed with
 * json-c (tests/e2e/hbgctl_util.h). Graph files are tests/graphs/ (*.json);
 * their expected outputs are computed by hand below (every value is exact
 * in f32). Here: its usage errors, the status verbs, graph files run,
 * malformed and big, --dot, --help and --version; CK_RUN_CASE=usage|
 * status|run|malformed|cli|big runs one group. The graph verbs and the
 * rest of run's options: test_e2e_hbgctl_graphs; hbgd's own command line
 * and the timeline: test_e2e_hbgctl_hbgd.
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
#include "tests/e2e/hbgctl_util.h"
#include "tests/check_main.h"

/* ------------------------------------------------------------ usage */

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

static Suite *suite(void) {
        Suite *s = suite_create("hbgctl");
        TCase *tc;
        tc = tcase_create("usage");
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
        tcase_add_test(tc, run_dot);
        suite_add_tcase(s, tc);
        tc = tcase_create("malformed");
        tcase_set_timeout(tc, 120);
        tcase_add_test(tc, run_malformed);
        suite_add_tcase(s, tc);
        tc = tcase_create("cli");
        tcase_set_timeout(tc, 120);
        tcase_add_test(tc, help_version);
        suite_add_tcase(s, tc);
        tc = tcase_create("big");
        tcase_set_timeout(tc, 300);
        tcase_add_test(tc, run_big);
        suite_add_tcase(s, tc);
        return s;
}

const struct check_main check_main = {
        .suite = suite,
        .ignore_sigpipe = true,
        .setup = hbgctl_util_setup,
        .teardown = daemon_util_cleanup,
};
