/* SPDX-License-Identifier: MIT */
/*
 * hbgd's own command line (--help, --version, --check-config, options
 * and a hand-run hbgd) and the task timeline through hbgctl trace. Run as
 * test_e2e_hbgctl is (tests/e2e/hbgctl_util.h). CK_RUN_CASE=hbgd|trace runs
 * one group.
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

/* Stop hbgctl `pid` (started by ctl_spawn()) as Ctrl-C does: it must
 * exit 0. Its stderr, from file err (malloc'd). */
static char *ctl_interrupt(pid_t pid, const char *err) {
        ck_assert_int_eq(kill(pid, SIGINT), 0);
        int st;
        while (waitpid(pid, &st, 0) < 0)
                ck_assert(errno == EINTR);
        char *errs = slurp(err);
        ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "hbgctl trace: status %d\n%s", st, errs);
        return errs;
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
        char *errs = ctl_interrupt(ctl_pid, err);
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
        char *errs = ctl_interrupt(ctl_pid, err), *text = slurp(out);
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

/* The state of the one live graph of session sess (hbgctl graphs), or ""
 * when it has none. */
static void live_graph_state(const char *S, uint64_t sess, char *state, size_t size) {
        struct result r = ctl(S, "graphs", "--json");
        ASSERT_CODE(r, 0);
        json_object *o = parse_json(&r), *a = get(o, "graphs");
        snprintf(state, size, "%s", "");
        for (size_t i = 0; i < json_object_array_length(a); i++) {
                json_object *g = json_object_array_get_idx(a, i), *live;
                if ((uint64_t)jint(g, "session") == sess && json_object_object_get_ex(g, "live", &live) &&
                    json_object_array_length(live))
                        snprintf(state, size, "%s", json_object_get_string(get(json_object_array_get_idx(live, 0), "state")));
        }
        json_object_put(o);
        result_free(&r);
}

/*
 * A task and its graph that began before the trace: a spin_ns of 1 s,
 * its graph "running" in hbgctl graphs and 50 ms more, when the trace
 * starts (hbgctl has the other 950 ms to start it). Perfetto drops an event of negative time (and a slice's end
 * without its begin), so both are shown from the trace's start with args
 * before_trace true: no event before 0, the task's slice from 0 to its
 * end, the graph's from 0; the SVG's box of the task within the picture.
 */
START_TEST(trace_before_start) {
        struct hbgd_proc *d = start();
        const char *S = d->socket_path;
        hbg_client *c;
        ck_assert_int_eq(hbg_connect(&c, S), 0);
        uint64_t sess, spin_id, graph;
        ck_assert_int_eq(my_sessions(S, &sess, 1), 1);
        char session[32], json_path[PATH_MAX], svg_path[PATH_MAX], out[PATH_MAX], err[PATH_MAX], started[96];
        snprintf(session, sizeof(session), "%llu", (unsigned long long)sess);
        snprintf(json_path, sizeof(json_path), "%s/before.json", d->dir);
        snprintf(svg_path, sizeof(svg_path), "%s/before.svg", d->dir);
        snprintf(out, sizeof(out), "%s/before.out", d->dir);
        snprintf(err, sizeof(err), "%s/before.err", d->dir);
        hbg_task spin = HBG_TASK_INIT("spin_ns");
        spin.n_scalars = 1;
        spin.scalars[0] = 1000000000; /* spin_ns's most */
        ck_assert_int_eq(hbg_graph_add(c, &spin, &spin_id), 0);
        ck_assert_int_eq(hbg_graph_submit(c, &graph), 0);
        char state[32] = "";
        for (int waited = 0; live_graph_state(S, sess, state, sizeof(state)), strcmp(state, "running") != 0;
             waited += 10) {
                ck_assert_msg(waited < WAIT_MS, "the graph is not running within %d ms (state \"%s\")", WAIT_MS, state);
                usleep(10000);
        }
        usleep(50000);
        pid_t ctl_pid = ctl_spawn(S, (const char *const[]){ "trace", "--session", session, "--duration", "600", "-o",
                                                            json_path, "--svg", svg_path, NULL },
                                  out, err);
        snprintf(started, sizeof(started), "trace of session %s for 600000 ms started", session);
        ck_assert_msg(hbgd_log_says(d, started), "no \"%s\" in hbgd's log", started);
        ck_assert_int_eq(hbg_graph_wait(c, graph, WAIT_MS), 0);
        free(ctl_interrupt(ctl_pid, err));

        char *text = slurp(json_path);
        json_object *o = json_tokener_parse(text);
        ck_assert_msg(o, "the trace is not JSON:\n%.2000s", text);
        double duration_us = json_object_get_double(get(get(o, "otherData"), "duration_us"));
        json_object *evs = get(o, "traceEvents");
        size_t n_task = 0, n_begin = 0, n_end = 0;
        for (size_t i = 0; i < json_object_array_length(evs); i++) {
                json_object *e = json_object_array_get_idx(evs, i);
                const char *ph = json_object_get_string(get(e, "ph"));
                if (strcmp(ph, "M") == 0)
                        continue;
                double ts = json_object_get_double(get(e, "ts"));
                ck_assert_msg(ts >= 0, "an event before the trace: %s", json_object_to_json_string(e));
                if (strcmp(ph, "e") == 0 && strcmp(json_object_get_string(get(e, "cat")), "graph") == 0)
                        n_end++;
                json_object *a = NULL;
                if (!json_object_object_get_ex(e, "args", &a))
                        continue; /* an instant (park, wake-up) or an end */
                if (strcmp(ph, "X") == 0 && (uint64_t)jint(a, "task") == spin_id) {
                        double dur = json_object_get_double(get(e, "dur"));
                        ck_assert_msg(ts == 0 && json_object_get_boolean(get(a, "before_trace")) &&
                                              dur > 0 && dur <= duration_us,
                                      "the task that began before the trace: %s (trace %.3f us)",
                                      json_object_to_json_string(e), duration_us);
                        n_task++;
                } else if (strcmp(ph, "b") == 0 && strcmp(json_object_get_string(get(e, "cat")), "graph") == 0) {
                        ck_assert_msg(ts == 0 && jint(a, "graph") == (int64_t)graph &&
                                              json_object_get_boolean(get(a, "before_trace")) &&
                                              !json_object_get_boolean(get(a, "in_flight")),
                                      "the graph that began before the trace: %s", json_object_to_json_string(e));
                        n_begin++;
                }
        }
        ck_assert_uint_eq(n_task, 1);
        ck_assert_uint_eq(n_begin, 1);
        ck_assert_uint_eq(n_end, 1);
        json_object_put(o);
        free(text);

        /* The task's box: from the plot's left edge, within the picture. */
        char *svg = slurp(svg_path);
        const char *box = strstr(svg, "<rect class=\"task\"");
        ck_assert_msg(box, "no task box in the SVG:\n%.2000s", svg);
        double x = -1, w = -1, width = -1;
        const char *at = strstr(box, " x=\""), *wat = strstr(box, " width=\""), *svg_w = strstr(svg, "width=\"");
        ck_assert(at && wat && svg_w);
        x = strtod(at + 4, NULL);
        w = strtod(wat + 8, NULL);
        width = strtod(svg_w + 7, NULL);
        ck_assert_msg(x > 0 && w > 0 && x + w <= width, "the task's box: x %.2f width %.2f, the picture %.2f wide", x,
                      w, width);
        free(svg);
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
        char *errs = ctl_interrupt(ctl_pid, err), *text = slurp(out);
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
        Suite *s = suite_create("hbgctl_hbgd");
        TCase *tc;
        tc = tcase_create("hbgd");
        tcase_set_timeout(tc, 120);
        tcase_add_test(tc, hbgd_options);
        tcase_add_test(tc, hbgd_by_hand);
        suite_add_tcase(s, tc);
        tc = tcase_create("trace");
        tcase_set_timeout(tc, 120);
        tcase_add_test(tc, trace_timeline);
        tcase_add_test(tc, trace_open_graph);
        tcase_add_test(tc, trace_before_start);
        tcase_add_test(tc, trace_drops);
        suite_add_tcase(s, tc);
        return s;
}

const struct check_main check_main = {
        .suite = suite,
        .ignore_sigpipe = true,
        .setup = hbgctl_util_setup,
        .teardown = daemon_util_cleanup,
};
