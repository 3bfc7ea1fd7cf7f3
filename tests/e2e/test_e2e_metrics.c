/* SPDX-License-Identifier: MIT */
/*
 * `hbgctl metrics` against a real hbgd (docs/OPERATIONS.md, "Metrics"):
 *   counts     graphs that succeed, one failing in a kernel (EIO), one
 *              failing validation (ERANGE) and a refused session (E2BIG);
 *              the text is checked as OpenMetrics (metrics_util.c), the
 *              counts against what the test ran, exactly; more graphs, a
 *              second scrape (no counter went down, the graph counts went up
 *              by what ran), the session closed, a third one;
 *              hbgd's process, memory charged per uid and graphs in flight
 *              (a graph held by its host task) in the same scrapes;
 *   kernels    per-kernel figures, every task timed: 100 add_f32 tasks
 *              and 7 failing `fail` tasks, counted exactly per kernel in
 *              hbg_kernel_tasks/failures, both histograms' counts equal
 *              to the tasks run, the kernels' tasks adding up to the tasks
 *              executed; the same in `hbgctl kernels --json`.
 *   output     --output FILE replaces FILE atomically (a reader holding
 *              the old file keeps it whole; mode 0644; no temporary file
 *              left), fails cleanly where it cannot write, and leaves FILE
 *              alone when hbgd is down.
 *   in_flight_hostile  a client writing graphs_submitted: the graphs in
 *              flight stay within what hbgd read.
 * The Prometheus text and the exporter (--listen): test_e2e_exporter.
 * $HBGCTL overrides the hbgctl binary (default: ../bin/hbgctl next to this
 * test).
 */
#include <check.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <json-c/json.h>

#include "hbg/hbg.h"
#include "shm/layout.h"
#include "tests/e2e/daemon_util.h"
#include "tests/e2e/e2e_util.h"
#include "tests/e2e/metrics_util.h"
#include "tests/check_main.h"


#define THREADS 2
#define GOOD 5

START_TEST(counts) {
        const char *const args[] = { "--threads", "2", NULL };
        struct hbgd_proc *d = start_hbgd(MODE_URING, args);
        hbg_client *c = NULL;
        int err = hbg_connect(&c, d->socket_path);
        D_ASSERT(d, err == 0, "hbg_connect: %s", hbg_strerror(err));
        hbg_tensor x;
        ck_assert_int_eq(hbg_tensor_alloc(c, 4 * sizeof(float), &x), 0);

        good_graphs(d, c, x, GOOD);
        /* A kernel failing (EIO); the scale after it is skipped. */
        uint64_t boom;
        hbg_task f = fill(x, 1.0f), k = fail_task(-EIO);
        ck_assert_int_eq(hbg_graph_add(c, &f, NULL), 0);
        ck_assert_int_eq(hbg_graph_add(c, &k, &boom), 0);
        hbg_task after = scale(x, 3.0f);
        after.n_deps = 1;
        after.deps[0] = boom;
        ck_assert_int_eq(hbg_graph_add(c, &after, NULL), 0);
        err = finish(d, c);
        D_ASSERT(d, err == -EIO, "the failing kernel's graph: %s", hbg_strerror(err));
        /* A task failing validation: fail's code must be a negative errno. */
        hbg_task invalid = fail_task(0);
        ck_assert_int_eq(hbg_graph_add(c, &invalid, NULL), 0);
        err = finish(d, c);
        D_ASSERT(d, err == -ERANGE, "the invalid task's graph: %s", hbg_strerror(err));
        /* A session refused: a task window above max_task_window. */
        hbg_connect_options o = HBG_CONNECT_OPTIONS_INIT;
        o.socket_path = d->socket_path;
        o.task_window = UINT64_C(1) << 21;
        hbg_client *big = NULL;
        err = hbg_connect_opts(&big, &o);
        D_ASSERT(d, err == -E2BIG, "the session too large: %s", hbg_strerror(err));

        struct scrape *s1 = scrape(d);
        const unsigned graphs = GOOD + 2;
        D_ASSERT(d, value_of(s1, "hbg_graphs_submitted_total", "") == graphs, "graphs submitted: %g",
                 value_of(s1, "hbg_graphs_submitted_total", ""));
        D_ASSERT(d, value_of(s1, "hbg_graphs_retired_total", "") == graphs, "graphs retired: %g",
                 value_of(s1, "hbg_graphs_retired_total", ""));
        D_ASSERT(d, value_of(s1, "hbg_graph_latency_seconds_count", "") == graphs, "graph latencies: %g",
                 value_of(s1, "hbg_graph_latency_seconds_count", ""));
        D_ASSERT(d, value_of(s1, "hbg_graphs_failed_total", "errno=\"EIO\"") == 1, "graphs failed with EIO");
        D_ASSERT(d, value_of(s1, "hbg_graphs_failed_total", "errno=\"ERANGE\"") == 1, "graphs failed with ERANGE");
        D_ASSERT(d, sum_of(s1, "hbg_graphs_failed_total") == 2, "graphs failed: %g",
                 sum_of(s1, "hbg_graphs_failed_total"));
        D_ASSERT(d, value_of(s1, "hbg_tasks_failed_total", "errno=\"EIO\"") == 1, "tasks failed with EIO");
        D_ASSERT(d, value_of(s1, "hbg_tasks_failed_total", "errno=\"ERANGE\"") == 1, "tasks failed with ERANGE");
        D_ASSERT(d, sum_of(s1, "hbg_tasks_failed_total") == 2, "tasks failed (the skipped one not counted): %g",
                 sum_of(s1, "hbg_tasks_failed_total"));
        /* Kernel tasks run: two per good graph, fill and fail. */
        D_ASSERT(d, sum_of(s1, "hbg_tasks_executed_total") == 2 * GOOD + 2, "tasks executed: %g",
                 sum_of(s1, "hbg_tasks_executed_total"));
        D_ASSERT(d, sum_of(s1, "hbg_tasks_classified_total") == 2 * GOOD + 3 + 1, "tasks classified: %g",
                 sum_of(s1, "hbg_tasks_classified_total"));
        D_ASSERT(d, value_of(s1, "hbg_sessions", "") == 1, "sessions");
        D_ASSERT(d, value_of(s1, "hbg_sessions_opened_total", "") == 1, "sessions opened");
        /* Built on the io thread or not (a set of regions made ahead
         * ready at its connect or not), it is counted as opened. */
        D_ASSERT(d, samples_of(s1, "hbg_sessions_set_up_inline_total") == 1 &&
                            value_of(s1, "hbg_sessions_set_up_inline_total", "") <= 1,
                 "sessions set up inline: %g", value_of(s1, "hbg_sessions_set_up_inline_total", ""));
        D_ASSERT(d, value_of(s1, "hbg_sessions_closing", "") == 0 && samples_of(s1, "hbg_sessions_closing") == 1,
                 "sessions closing");
        D_ASSERT(d, value_of(s1, "hbg_sessions_refused_total", "errno=\"E2BIG\"") == 1, "sessions refused");
        /* What hbgd keeps made ahead (status' numbers; a session took a
         * set only if the fill had made one before its connect). */
        static const char *const spares[] = { "hbg_spare_rings", "hbg_spare_ring_bytes", "hbg_spare_rings_taken_total",
                                              "hbg_spare_regions", "hbg_spare_regions_taken_total" };
        for (size_t i = 0; i < sizeof(spares) / sizeof(spares[0]); i++)
                D_ASSERT(d, samples_of(s1, spares[i]) == 1, "%s: %u samples", spares[i], samples_of(s1, spares[i]));
        D_ASSERT(d, value_of(s1, "hbg_spare_regions", "") <= 8 && value_of(s1, "hbg_spare_regions_taken_total", "") <= 1,
                 "spare regions %g, taken %g", value_of(s1, "hbg_spare_regions", ""),
                 value_of(s1, "hbg_spare_regions_taken_total", ""));
        D_ASSERT(d, value_of(s1, "hbg_scheduler_threads", "") == THREADS, "threads");
        /* hbgd's build and process. */
        char build[96];
        snprintf(build, sizeof(build), "version=\"%s\",", HBG_VERSION);
        D_ASSERT(d, value_with(s1, "hbg_build_info", build) == 1 && samples_of(s1, "hbg_build_info") == 1,
                 "hbg_build_info{%s...}", build);
        D_ASSERT(d, strcmp(type_of(s1, "hbg_build"), "info") == 0, "hbg_build's type: '%s'", type_of(s1, "hbg_build"));
        D_ASSERT(d, value_of(s1, "hbg_process_open_fds", "") >= 4, "hbgd's open fds: %g",
                 value_of(s1, "hbg_process_open_fds", ""));
        D_ASSERT(d, value_of(s1, "hbg_process_resident_memory_bytes", "") > 0, "hbgd's resident memory");
        D_ASSERT(d, value_of(s1, "hbg_process_cpu_seconds_total", "") >= 0, "hbgd's CPU time");
        double started = value_of(s1, "hbg_process_start_time_seconds", ""), now = (double)time(NULL);
        D_ASSERT(d, started > now - 3600 && started <= now + 1, "hbgd started at %f, now is %f", started, now);
        /* Memory: the one session open, this test's uid's, all of it. */
        char uid[32];
        snprintf(uid, sizeof(uid), "uid=\"%u\"", (unsigned)geteuid());
        double charged = value_of(s1, "hbg_memory_charged_bytes", "");
        D_ASSERT(d, charged > 0 && value_of(s1, "hbg_user_memory_charged_bytes", uid) == charged,
                 "memory charged: %g in all, %g to %s", charged, value_of(s1, "hbg_user_memory_charged_bytes", uid), uid);
        D_ASSERT(d, samples_of(s1, "hbg_user_memory_charged_bytes") == 1, "memory charged to other users");
        D_ASSERT(d, value_of(s1, "hbg_user_sessions", uid) == 1, "sessions of %s", uid);
        D_ASSERT(d, value_of(s1, "hbg_memory_limit_bytes", "") >= charged &&
                            value_of(s1, "hbg_user_memory_limit_bytes", "") > 0,
                 "memory limits");
        D_ASSERT(d, value_of(s1, "hbg_graphs_in_flight", "") == 0, "graphs in flight: %g",
                 value_of(s1, "hbg_graphs_in_flight", ""));
        /* Per thread: every thread labelled; every task timed, by the
         * thread that ran its last block. */
        ck_assert_uint_eq(s1->sample_every, 1);
        for (unsigned i = 0; i < THREADS; i++) {
                char label[32];
                snprintf(label, sizeof(label), "thread=\"%u\"", i);
                double runs = value_of(s1, "hbg_tasks_executed_total", label);
                D_ASSERT(d, runs >= 0 && value_of(s1, "hbg_task_blocks_dispatched_total", label) >= 0,
                         "thread %u has no counters", i);
                D_ASSERT(d, value_of(s1, "hbg_task_run_seconds_count", label) == runs,
                         "thread %u: %g tasks, %g timed", i, runs, value_of(s1, "hbg_task_run_seconds_count", label));
        }
        /* The completion path's counters, hbgctl threads' names: a
         * counter each, a sample per thread. */
        static const char *const completion[] = { "hbg_watermark_advances", "hbg_watermark_cas_failures",
                                                  "hbg_failsafe_pushes", "hbg_failsafe_retries" };
        for (size_t i = 0; i < sizeof(completion) / sizeof(completion[0]); i++) {
                char total[64];
                snprintf(total, sizeof(total), "%s_total", completion[i]);
                D_ASSERT(d, strcmp(type_of(s1, completion[i]), "counter") == 0 && samples_of(s1, total) == THREADS,
                         "%s: type '%s', %u samples for %u threads", completion[i], type_of(s1, completion[i]),
                         samples_of(s1, total), THREADS);
        }
        D_ASSERT(d, sum_of(s1, "hbg_watermark_advances_total") > 0, "the watermark never moved");

        /* More graphs: a second scrape. */
        good_graphs(d, c, x, 20);
        struct scrape *s2 = scrape(d);
        assert_not_decreasing(s1, s2, "second scrape");
        D_ASSERT(d, value_of(s2, "hbg_graphs_retired_total", "") == graphs + 20, "graphs retired: %g",
                 value_of(s2, "hbg_graphs_retired_total", ""));
        D_ASSERT(d, sum_of(s2, "hbg_tasks_executed_total") == 2 * GOOD + 2 + 40, "tasks executed: %g",
                 sum_of(s2, "hbg_tasks_executed_total"));

        /* A graph in flight: its host task runs only in this client's
         * wait. */
        hbg_task h = HBG_TASK_INIT(NULL);
        h.host_fn = host_ok;
        uint64_t held;
        ck_assert_int_eq(hbg_graph_add(c, &h, NULL), 0);
        ck_assert_int_eq(hbg_graph_submit(c, &held), 0);
        struct scrape *s_held = NULL;
        for (long long end = daemon_now_ms() + WAIT_MS;;) { /* until hbgd has read the graph's record */
                free(s_held);
                s_held = scrape(d);
                if (value_of(s_held, "hbg_graphs_submitted_total", "") == graphs + 21 || daemon_now_ms() > end)
                        break;
                sleep_us(20000);
        }
        D_ASSERT(d, value_of(s_held, "hbg_graphs_in_flight", "") == 1, "graphs in flight, one held: %g",
                 value_of(s_held, "hbg_graphs_in_flight", ""));
        err = hbg_graph_wait(c, held, WAIT_MS);
        D_ASSERT(d, err == 0, "the host task's graph: %s", hbg_strerror(err));
        free(s_held);
        s_held = scrape(d);
        D_ASSERT(d, value_of(s_held, "hbg_graphs_in_flight", "") == 0, "graphs in flight after the wait: %g",
                 value_of(s_held, "hbg_graphs_in_flight", ""));
        free(s_held);

        /* The session gone (its ring freed and its counters folded into
         * the totals once its last kernel returned): nothing went down. */
        hbg_disconnect(c);
        struct scrape *s3 = NULL;
        for (long long end = daemon_now_ms() + WAIT_MS;;) {
                free(s3);
                s3 = scrape(d);
                if (value_of(s3, "hbg_sessions", "") == 0 || daemon_now_ms() > end)
                        break;
                sleep_us(20000);
        }
        D_ASSERT(d, value_of(s3, "hbg_sessions", "") == 0, "the session is still open");
        sleep_us(300000); /* the housekeeping timer frees the ring */
        struct scrape *s4 = scrape(d);
        assert_not_decreasing(s2, s3, "after the session closed");
        assert_not_decreasing(s3, s4, "after its ring was freed");
        D_ASSERT(d, value_of(s4, "hbg_graphs_retired_total", "") == graphs + 21, "graphs retired: %g",
                 value_of(s4, "hbg_graphs_retired_total", ""));
        D_ASSERT(d, value_of(s4, "hbg_graphs_submitted_total", "") == graphs + 21, "graphs submitted: %g",
                 value_of(s4, "hbg_graphs_submitted_total", ""));
        /* Nothing charged with no session. */
        D_ASSERT(d, value_of(s4, "hbg_memory_charged_bytes", "") == 0 &&
                            samples_of(s4, "hbg_user_memory_charged_bytes") == 0,
                 "memory charged with no session: %g", value_of(s4, "hbg_memory_charged_bytes", ""));
        free(s1);
        free(s2);
        free(s3);
        free(s4);
        stop_hbgd(d);
}
END_TEST

/* ------------------------------------------------------------ per kernel */

static hbg_task add(hbg_tensor a, hbg_tensor b, hbg_tensor out) {
        hbg_task t = HBG_TASK_INIT("add_f32");
        t.n_args = 3;
        t.args[0].tensor = a;
        t.args[0].dir = HBG_IN;
        t.args[1].tensor = b;
        t.args[1].dir = HBG_IN;
        t.args[2].tensor = out;
        t.args[2].dir = HBG_OUT;
        return t;
}

#define ADDS 100
#define FAILS 7

/* Kernel `name` of `hbgctl kernels --json`'s array; NULL if absent. */
static json_object *json_kernel(json_object *kernels, const char *name) {
        for (size_t i = 0; i < json_object_array_length(kernels); i++) {
                json_object *k = json_object_array_get_idx(kernels, i), *n;
                if (json_object_object_get_ex(k, "name", &n) && strcmp(json_object_get_string(n), name) == 0)
                        return k;
        }
        return NULL;
}

static uint64_t json_u64(json_object *o, const char *key) {
        json_object *v;
        ck_assert_msg(json_object_object_get_ex(o, key, &v), "no %s in %s", key, json_object_to_json_string(o));
        return json_object_get_uint64(v);
}

/* A histogram of kernels --json: its count, checked against its buckets. */
static uint64_t json_hist_count(json_object *k, const char *key) {
        json_object *h, *b, *bounds;
        ck_assert_msg(json_object_object_get_ex(k, key, &h) && json_object_object_get_ex(h, "buckets", &b) &&
                              json_object_object_get_ex(h, "bounds_ns", &bounds),
                      "no %s histogram in %s", key, json_object_to_json_string(k));
        uint64_t sum = 0;
        for (size_t i = 0; i < json_object_array_length(b); i++)
                sum += json_object_get_uint64(json_object_array_get_idx(b, i));
        ck_assert_uint_eq(sum, json_u64(h, "count"));
        ck_assert(json_object_array_length(b) == 0 ||
                  json_object_array_length(b) == json_object_array_length(bounds) + 1);
        return sum;
}

START_TEST(kernels) {
        const char *const args[] = { "--threads", "2", NULL };
        struct hbgd_proc *d = start_hbgd(MODE_URING, args);
        hbg_client *c = NULL;
        int err = hbg_connect(&c, d->socket_path);
        D_ASSERT(d, err == 0, "hbg_connect: %s", hbg_strerror(err));
        hbg_tensor a, b, out[ADDS];
        ck_assert_int_eq(hbg_tensor_alloc(c, 64 * sizeof(float), &a), 0);
        ck_assert_int_eq(hbg_tensor_alloc(c, 64 * sizeof(float), &b), 0);
        for (unsigned i = 0; i < ADDS; i++)
                ck_assert_int_eq(hbg_tensor_alloc(c, 64 * sizeof(float), &out[i]), 0);
        /* a and b first (fill_f32), then the adds, all at once: they wait
         * for both. The fills in 64 blocks each, which the two threads
         * share: a task counts once, by whichever thread ends it. */
        hbg_task fa = fill(a, 1.0f), fb = fill(b, 2.0f);
        fa.blocks = fb.blocks = 64;
        uint64_t ia, ib;
        ck_assert_int_eq(hbg_graph_add(c, &fa, &ia), 0);
        ck_assert_int_eq(hbg_graph_add(c, &fb, &ib), 0);
        for (unsigned i = 0; i < ADDS; i++) {
                hbg_task t = add(a, b, out[i]);
                t.n_deps = 2;
                t.deps[0] = ia;
                t.deps[1] = ib;
                ck_assert_int_eq(hbg_graph_add(c, &t, NULL), 0);
        }
        err = finish(d, c);
        D_ASSERT(d, err == 0, "the adds' graph: %s [%s]", hbg_strerror(err), hbg_last_error(c));
        /* Failing kernels, one graph each. */
        for (unsigned i = 0; i < FAILS; i++) {
                hbg_task k = fail_task(-EIO);
                ck_assert_int_eq(hbg_graph_add(c, &k, NULL), 0);
                err = finish(d, c);
                D_ASSERT(d, err == -EIO, "failing graph %u: %s", i, hbg_strerror(err));
        }

        struct scrape *s = scrape(d);
        static const struct {
                const char *name;
                double tasks, failures;
        } want[] = { { "add_f32", ADDS, 0 }, { "fill_f32", 2, 0 }, { "fail", FAILS, FAILS } };
        double all = 0;
        for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
                char label[64];
                snprintf(label, sizeof(label), "kernel=\"%s\"", want[i].name);
                double tasks = value_of(s, "hbg_kernel_tasks_total", label);
                D_ASSERT(d, tasks == want[i].tasks, "%s: %g tasks, want %g", want[i].name, tasks, want[i].tasks);
                D_ASSERT(d, value_of(s, "hbg_kernel_failures_total", label) == want[i].failures,
                         "%s: %g failures, want %g", want[i].name, value_of(s, "hbg_kernel_failures_total", label),
                         want[i].failures);
                D_ASSERT(d, value_of(s, "hbg_kernel_run_seconds_count", label) == tasks,
                         "%s: %g run times for %g tasks", want[i].name,
                         value_of(s, "hbg_kernel_run_seconds_count", label), tasks);
                D_ASSERT(d, value_of(s, "hbg_kernel_wait_seconds_count", label) == tasks,
                         "%s: %g waits for %g tasks", want[i].name,
                         value_of(s, "hbg_kernel_wait_seconds_count", label), tasks);
                all += tasks;
        }
        /* Only the kernels that ran are listed, and they are every task. */
        D_ASSERT(d, samples_of(s, "hbg_kernel_tasks_total") == sizeof(want) / sizeof(want[0]),
                 "%u kernels listed", samples_of(s, "hbg_kernel_tasks_total"));
        D_ASSERT(d, sum_of(s, "hbg_tasks_executed_total") == all && sum_of(s, "hbg_task_run_seconds_count") == all,
                 "tasks executed %g, timed per thread %g, per kernel %g", sum_of(s, "hbg_tasks_executed_total"),
                 sum_of(s, "hbg_task_run_seconds_count"), all);
        free(s);

        struct result r = ctl(d->socket_path, "kernels", "--json");
        D_ASSERT(d, r.code == 0, "hbgctl kernels --json: exit %d: %s", r.code, r.err);
        json_object *o = json_tokener_parse(r.out), *ks = NULL;
        D_ASSERT(d, o && json_object_object_get_ex(o, "kernels", &ks), "kernels --json: %s", r.out);
        for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
                json_object *k = json_kernel(ks, want[i].name);
                D_ASSERT(d, k, "kernels --json has no %s", want[i].name);
                D_ASSERT(d, json_u64(k, "tasks") == want[i].tasks && json_u64(k, "failures") == want[i].failures,
                         "kernels --json: %s", json_object_to_json_string(k));
                D_ASSERT(d, json_hist_count(k, "run") == want[i].tasks && json_hist_count(k, "wait") == want[i].tasks,
                         "kernels --json: %s", json_object_to_json_string(k));
        }
        /* A kernel that ran nothing: zeros, empty histograms. */
        json_object *idle = json_kernel(ks, "gemm_f32");
        D_ASSERT(d, idle && json_u64(idle, "tasks") == 0 && json_hist_count(idle, "run") == 0,
                 "kernels --json: gemm_f32 ran nothing");
        json_object_put(o);
        result_free(&r);
        hbg_disconnect(c);
        stop_hbgd(d);
}
END_TEST

/* ------------------------------------------------------------ --output */

static unsigned entries(const char *dir) {
        DIR *dp = opendir(dir);
        ck_assert_ptr_nonnull(dp);
        unsigned n = 0;
        for (struct dirent *e; (e = readdir(dp));)
                n += strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0;
        closedir(dp);
        return n;
}

START_TEST(output) {
        struct hbgd_proc *d = start_hbgd(MODE_URING, NULL);
        char dir[] = "/tmp/hbg-metrics.XXXXXX", file[64];
        ck_assert_ptr_nonnull(mkdtemp(dir));
        snprintf(file, sizeof(file), "%s/hbgd.prom", dir);
        int fd = open(file, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
        ck_assert_int_ge(fd, 0);
        ck_assert_int_eq(write(fd, "old\n", 4), 4);
        close(fd);
        int old = open(file, O_RDONLY | O_CLOEXEC);
        ck_assert_int_ge(old, 0);

        struct result r = ctl(d->socket_path, "metrics", "--output", file);
        D_ASSERT(d, r.code == 0, "metrics --output: exit %d: %s", r.code, r.err);
        ck_assert_msg(r.out[0] == 0, "metrics --output printed: %s", r.out);
        result_free(&r);
        struct stat st;
        ck_assert_int_eq(stat(file, &st), 0);
        ck_assert_msg((st.st_mode & 07777) == 0644, "mode %o", (unsigned)(st.st_mode & 07777));
        ck_assert_uint_eq(entries(dir), 1); /* no temporary file left */
        int now = open(file, O_RDONLY | O_CLOEXEC);
        ck_assert_int_ge(now, 0);
        char *text = slurp_fd(now);
        close(now);
        struct scrape *sc = malloc(sizeof(*sc));
        ck_assert_ptr_nonnull(sc);
        parse_openmetrics(text, sc);
        ck_assert(value_of(sc, "hbg_graphs_retired_total", "") == 0);
        free(sc);
        free(text);
        /* Replaced, not rewritten: the old file, still open, is whole. */
        char *was = slurp_fd(old);
        ck_assert_str_eq(was, "old\n");
        free(was);
        close(old);

        /* Where it cannot write: exit 1, a message naming the file. */
        r = ctl(d->socket_path, "metrics", "--output", "/nonexistent-hbg-dir/hbgd.prom");
        ck_assert_int_eq(r.code, 1);
        ck_assert_msg(strstr(r.err, "/nonexistent-hbg-dir/hbgd.prom"), "stderr: %s", r.err);
        result_free(&r);
        /* An option of metrics only. */
        r = ctl(d->socket_path, "status", "--output", file);
        ck_assert_int_eq(r.code, 2);
        result_free(&r);

        /* hbgd down: exit 3, the file as it was. */
        ck_assert_int_eq(stat(file, &st), 0);
        ino_t ino = st.st_ino;
        char sock[sizeof(d->socket_path)];
        snprintf(sock, sizeof(sock), "%s", d->socket_path);
        stop_hbgd(d);
        r = ctl(sock, "metrics", "--output", file);
        ck_assert_int_eq(r.code, 3);
        result_free(&r);
        ck_assert_int_eq(stat(file, &st), 0);
        ck_assert_uint_eq(st.st_ino, ino);
        ck_assert_uint_eq(entries(dir), 1);
        unlink(file);
        rmdir(dir);
}
END_TEST

/* A client writing any graphs_submitted into its region: the graphs in
 * flight are what hbgd read, at most a graph ring of the session. */
START_TEST(in_flight_hostile) {
        struct hbgd_proc *d = start_hbgd(MODE_URING, NULL);
        hbg_client *c = NULL;
        int err = hbg_connect(&c, d->socket_path);
        D_ASSERT(d, err == 0, "hbg_connect: %s", hbg_strerror(err));
        uint64_t session = 0, size = 0;
        struct hbg_sub_header *sh = find_session_mapping("sub", &session, &size);
        ck_assert_ptr_nonnull(sh);
        uint64_t G = UINT64_C(1) << sh->graph_ring_log2;
        static const uint64_t lies[] = { UINT64_C(1) << 62, UINT64_MAX, 3 };
        for (size_t i = 0; i < sizeof(lies) / sizeof(lies[0]); i++) {
                atomic_store_explicit(&sh->graphs_submitted, lies[i], memory_order_release);
                struct scrape *sc = scrape(d);
                double v = value_of(sc, "hbg_graphs_in_flight", "");
                D_ASSERT(d, v >= 0 && v <= (double)G, "graphs_submitted %llu: %g graphs in flight (graph ring %llu)",
                         (unsigned long long)lies[i], v, (unsigned long long)G);
                free(sc);
        }
        hbg_disconnect(c);
        stop_hbgd(d);
}
END_TEST

static Suite *suite(void) {
        Suite *s = suite_create("e2e_metrics");
        TCase *tc = tcase_create("metrics");
        tcase_set_timeout(tc, 120);
        tcase_add_test(tc, counts);
        tcase_add_test(tc, kernels);
        tcase_add_test(tc, output);
        tcase_add_test(tc, in_flight_hostile);
        suite_add_tcase(s, tc);
        return s;
}

static int setup(void) {
        return hbgctl_util_setup();
}

const struct check_main check_main = {
        .suite = suite,
        .ignore_sigpipe = true,
        .setup = setup,
        .teardown = daemon_util_cleanup,
};
