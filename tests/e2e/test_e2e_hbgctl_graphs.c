/* SPDX-License-Identifier: MIT */
/*
 * hbgctl end to end, its graph verbs and run's options: graphs (live,
 * hostile records), cancel and kill, top, run from stdin, --progress,
 * graph progress, --dry-run against hbgd, the heap, small points, and
 * hostile session names. Run as test_e2e_hbgctl is
 * (tests/e2e/hbgctl_util.h). CK_RUN_CASE=graphs|run runs one group.
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

/* ------------------------------------------------------------ graphs */

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
 * A dry run does not depend on max_recorded_tasks (0 here: no recordings
 * at all): a file of PIECES_TASKS tasks, more than one validate request
 * takes, goes in pieces. Each task waits for the one before, across the
 * pieces' boundary too; the one bad gemm, in the second piece, is the only
 * error, at its own index. The real run of the same file is refused for
 * that task as well.
 */
#define PIECES_TASKS (HBG_VALIDATE_MAX_TASKS + 1000)

START_TEST(run_dry_run_pieces) {
        char dir[] = "/tmp/hbgctl-pieces.XXXXXX", conf[PATH_MAX], path[PATH_MAX];
        ck_assert(mkdtemp(dir));
        snprintf(conf, sizeof(conf), "%s/hbgd.conf", dir);
        FILE *f = fopen(conf, "w");
        ck_assert(f && fputs("[limits]\nmax_recorded_tasks = 0\n", f) >= 0 && fclose(f) == 0);
        struct hbgd_proc *d = NULL;
        int err = daemon_start(&d, (const char *const[]){ "--config", conf, NULL }, NULL);
        ck_assert_msg(err == 0, "hbgd did not start: %s", strerror(-err));
        const char *S = d->socket_path;
        snprintf(path, sizeof(path), "%s/pieces.json", dir);
        f = fopen(path, "w");
        ck_assert(f);
        const unsigned bad = HBG_VALIDATE_MAX_TASKS + 500;
        fprintf(f, "{\"tensors\": {\"A\": {\"len\": 4096}, \"B\": {\"len\": 4096}, \"C\": {\"len\": 4096}}, "
                   "\"tasks\": [");
        for (unsigned i = 0; i < PIECES_TASKS; i++) {
                fprintf(f, "%s{\"name\": \"t%u\", ", i ? ", " : "", i);
                if (i)
                        fprintf(f, "\"after\": [\"t%u\"], ", i - 1);
                if (i == bad)
                        fprintf(f, "\"kernel\": \"gemm_f32\", \"args\": [\"A\", \"B\", \"C\"], \"scalars\": [64, 64, 128]}");
                else
                        fprintf(f, "\"kernel\": \"noop\"}");
        }
        fprintf(f, "]}\n");
        ck_assert_int_eq(fclose(f), 0);
        struct result r = ctl(S, "run", "--dry-run", "--json", path);
        ASSERT_CODE(r, 1);
        json_object *o = parse_json(&r), *errs = get(o, "errors");
        ck_assert_int_eq(json_object_array_length(errs), 1);
        char want[64];
        snprintf(want, sizeof(want), "$.tasks[%u]", bad);
        ck_assert_str_eq(json_object_get_string(get(json_object_array_get_idx(errs, 0), "path")), want);
        ck_assert_msg(strstr(json_object_get_string(get(json_object_array_get_idx(errs, 0), "message")),
                             "gemm_f32: shape does not fit A"), "%s", r.out);
        json_object_put(o);
        result_free(&r);
        r = ctl(S, "run", path);
        ASSERT_CODE(r, 1);
        snprintf(want, sizeof(want), "failed at task %u \"t%u\"", bad, bad);
        ck_assert_msg(strstr(r.err, want) && strstr(r.err, "shape does not fit A"), "%s", r.err);
        result_free(&r);
        unlink(path);
        unlink(conf);
        rmdir(dir);
        daemon_destroy(d);
}
END_TEST

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

        /* More tasks refused than hbgd's reply lists: the count is of all
         * of them, and says how many are listed. */
        snprintf(path, sizeof(path), "%s/many_bad.json", d->dir);
        FILE *f = fopen(path, "w");
        ck_assert(f);
        fprintf(f, "{\"tensors\": {\"A\": {\"len\": 4096}, \"B\": {\"len\": 4096}, \"C\": {\"len\": 4096}}, "
                   "\"tasks\": [");
        for (int i = 0; i < 1000; i++) /* shapes only hbgd's check refuses */
                fprintf(f, "%s{\"kernel\": \"gemm_f32\", \"args\": [\"A\", \"B\", \"C\"], \"scalars\": [64, 64, 128]}",
                        i ? ", " : "");
        fprintf(f, "]}\n");
        ck_assert_int_eq(fclose(f), 0);
        r = ctl(S, "run", "--dry-run", path);
        ASSERT_CODE(r, 1);
        const char *count = strstr(r.err, "hbgctl: 1000 errors in ");
        unsigned listed = 0, more = 0;
        ck_assert_msg(count && sscanf(strchr(count, '(') ? strchr(count, '(') : "", "(%u listed; hbgd refused %u more",
                                      &listed, &more) == 2 && listed + more == 1000 && more > 0,
                      "%.300s", count ? count : r.err);
        result_free(&r);
        unlink(path);

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

static Suite *suite(void) {
        Suite *s = suite_create("hbgctl_graphs");
        TCase *tc;
        tc = tcase_create("graphs");
        tcase_set_timeout(tc, 120);
        tcase_add_test(tc, graphs_live);
        tcase_add_test(tc, cancel_kill);
        tcase_add_test(tc, graphs_hostile);
        tcase_add_test(tc, top_batch);
        tcase_add_test(tc, graphs_progress);
        tcase_add_test(tc, hostile_names);
        suite_add_tcase(s, tc);
        tc = tcase_create("run");
        tcase_set_timeout(tc, 120);
        tcase_add_test(tc, run_stdin);
        tcase_add_test(tc, run_progress);
        tcase_add_test(tc, run_dry_run);
        tcase_add_test(tc, run_dry_run_pieces);
        tcase_add_test(tc, run_heap);
        tcase_add_test(tc, run_small_points);
        suite_add_tcase(s, tc);
        return s;
}

const struct check_main check_main = {
        .suite = suite,
        .ignore_sigpipe = true,
        .setup = hbgctl_util_setup,
        .teardown = daemon_util_cleanup,
};
