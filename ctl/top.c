/* SPDX-License-Identifier: MIT */
/*
 * `hbgctl top`: threads, sessions, kernels and totals with their rates,
 * like pw-top and top. Each snapshot is the difference of two status
 * replies (the daemon's uptime is the clock, so the rates are hbgd's,
 * whatever the round trips cost); the kernels' come from two metrics
 * replies, their quantiles from the histograms' difference: the
 * interval's tasks only. Interactive on a terminal: the screen is redrawn
 * every delay, q or Ctrl-C quits. Batch (-b, or stdout not a terminal):
 * -n snapshots one after the other, with --json one object a line.
 */
#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <termios.h>
#include <unistd.h>

#include "ctl/ctl.h"
#include "ctl/top.h"
#include "ctl/daemon_conn.h"
#include "ctl/error.h"
#include "ctl/output.h"
#include "common/clock.h"

static volatile sig_atomic_t stop_requested;

static void on_signal(int sig) {
        (void)sig;
        stop_requested = 1;
}

static double rate(uint64_t now, uint64_t before, uint64_t dt_ms) {
        return now > before && dt_ms ? (double)(now - before) * 1000.0 / (double)dt_ms : 0.0;
}

static int by_session(const void *a, const void *b) {
        uint64_t x = (*(Hbg__SessionStatus *const *)a)->session_id, y = (*(Hbg__SessionStatus *const *)b)->session_id;
        return x < y ? -1 : x > y;
}

static const Hbg__SessionStatus *find_session(Hbg__SessionStatus **sorted, size_t n, uint64_t id) {
        size_t lo = 0, hi = n;
        while (lo < hi) {
                size_t mid = lo + (hi - lo) / 2;
                if (sorted[mid]->session_id < id)
                        lo = mid + 1;
                else
                        hi = mid;
        }
        return lo < n && sorted[lo]->session_id == id ? sorted[lo] : NULL;
}

/* A rate to the hundredth, written as such: json-c would print the
 * double's 17 digits (0.1 as 0.10000000000000001). */
static void add_rate(json_object *o, const char *key, double v) {
        char text[48];
        snprintf(text, sizeof(text), "%.2f", v);
        json_object_object_add(o, key, json_object_new_double_s(strtod(text, NULL), text));
}

/* A quantile of the interval's observations (cur - prev, in µs to the
 * hundredth), or null when it has none. */
static void add_quantile(json_object *o, const char *key, const Hbg__Histogram *cur, const Hbg__Histogram *prev,
                         double q) {
        uint64_t d[64];
        double v = -1;
        if (cur && cur->n_buckets == cur->n_bounds_ns + 1 && cur->n_buckets <= sizeof(d) / sizeof(d[0])) {
                bool same = prev && prev->n_buckets == cur->n_buckets;
                for (size_t i = 0; i < cur->n_buckets; i++) {
                        uint64_t p = same ? prev->buckets[i] : 0;
                        d[i] = cur->buckets[i] > p ? cur->buckets[i] - p : 0;
                }
                v = hist_quantile_ns(d, cur->bounds_ns, cur->n_bounds_ns, q);
        }
        if (v < 0)
                json_object_object_add(o, key, NULL);
        else
                add_rate(o, key, v / 1000.0);
}

/* The kernels that ran a task (cur's metrics against prev's): tasks per
 * second, run time p50 and p99, wait p99 over the interval. */
static json_object *kernels_snapshot(const Hbg__Metrics *prev, const Hbg__Metrics *cur, uint64_t dt) {
        json_object *a = json_object_new_array();
        for (size_t i = 0; cur && i < cur->n_kernels; i++) {
                const Hbg__MetricKernel *k = cur->kernels[i], *p = metric_kernel_find(prev, k->id);
                static const Hbg__MetricKernel zero = HBG__METRIC_KERNEL__INIT;
                if (!p)
                        p = &zero;
                json_object *e = json_object_new_object();
                json_object_object_add(e, "kernel", json_object_new_string(k->name ? k->name : ""));
                add_rate(e, "tasks_per_s", rate(k->tasks, p->tasks, dt));
                add_quantile(e, "run_p50_us", k->run, p->run, 0.5);
                add_quantile(e, "run_p99_us", k->run, p->run, 0.99);
                add_quantile(e, "wait_p99_us", k->wait, p->wait, 0.99);
                json_object_object_add(e, "tasks", json_object_new_uint64(k->tasks));
                json_object_object_add(e, "failures", json_object_new_uint64(k->failures));
                json_object_array_add(a, e);
        }
        return a;
}

/* One snapshot: cur against prev (prev's sessions get sorted); the
 * kernels from the metrics replies mprev and mcur. */
static json_object *snapshot(Hbg__StatusReply *prev, const Hbg__StatusReply *cur, const Hbg__StatusReply *mprev,
                             const Hbg__StatusReply *mcur) {
        const Hbg__DaemonStatus *pd = prev->daemon, *cd = cur->daemon;
        uint64_t dt = cd->uptime_ms > pd->uptime_ms ? cd->uptime_ms - pd->uptime_ms : 0;
        json_object *o = json_object_new_object(), *total = json_object_new_object();
        json_object_object_add(o, "hbgd", json_object_new_string(cd->version ? cd->version : ""));
        json_object_object_add(o, "pid", json_object_new_int64(cd->pid));
        json_object_object_add(o, "uptime_ms", json_object_new_uint64(cd->uptime_ms));
        json_object_object_add(o, "interval_ms", json_object_new_uint64(dt));

        json_object_object_add(total, "sessions", json_object_new_int64(cd->sessions));
        add_rate(total, "tasks_per_s", rate(cd->tasks_completed, pd->tasks_completed, dt));
        add_rate(total, "graphs_per_s", rate(cd->graphs_retired, pd->graphs_retired, dt));
        add_rate(total, "graphs_failed_per_s", rate(cd->graphs_failed, pd->graphs_failed, dt));
        json_object_object_add(total, "tasks_completed", json_object_new_uint64(cd->tasks_completed));
        json_object_object_add(total, "graphs_retired", json_object_new_uint64(cd->graphs_retired));
        json_object_object_add(total, "graphs_failed", json_object_new_uint64(cd->graphs_failed));
        json_object_object_add(o, "total", total);

        json_object *threads = json_object_new_array();
        for (size_t i = 0; i < cur->n_threads; i++) {
                const Hbg__ThreadStatus *t = cur->threads[i];
                const Hbg__ThreadStatus *p = i < prev->n_threads ? prev->threads[i] : NULL;
                static const Hbg__ThreadStatus zero = HBG__THREAD_STATUS__INIT;
                if (!p || p->index != t->index)
                        p = &zero;
                json_object *e = json_object_new_object();
                json_object_object_add(e, "thread", json_object_new_int64(t->index));
                add_rate(e, "executed_per_s", rate(t->executed_tasks, p->executed_tasks, dt));
                add_rate(e, "dispatched_per_s", rate(t->dispatched, p->dispatched, dt));
                add_rate(e, "parks_per_s", rate(t->parks, p->parks, dt));
                add_rate(e, "wakeups_per_s", rate(t->wakeups, p->wakeups, dt));
                add_rate(e, "spurious_per_s", rate(t->spurious_wakeups, p->spurious_wakeups, dt));
                json_object_object_add(e, "executed_tasks", json_object_new_uint64(t->executed_tasks));
                json_object_object_add(e, "parks", json_object_new_uint64(t->parks));
                json_object_array_add(threads, e);
        }
        json_object_object_add(o, "threads", threads);

        qsort(prev->sessions, prev->n_sessions, sizeof(*prev->sessions), by_session);
        json_object *sessions = json_object_new_array();
        for (size_t i = 0; i < cur->n_sessions; i++) {
                const Hbg__SessionStatus *s = cur->sessions[i];
                const Hbg__SessionStatus *p = find_session(prev->sessions, prev->n_sessions, s->session_id);
                static const Hbg__SessionStatus zero = HBG__SESSION_STATUS__INIT;
                if (!p)
                        p = &zero;   /* new: everything it did is this interval's */
                json_object *e = json_object_new_object();
                json_object_object_add(e, "session", json_object_new_uint64(s->session_id));
                json_object_object_add(e, "pid", json_object_new_int64(s->pid));
                json_object_object_add(e, "name", json_object_new_string(s->name ? s->name : ""));
                add_rate(e, "tasks_per_s", rate(s->completed, p->completed, dt));
                add_rate(e, "graphs_per_s", rate(s->graphs_retired, p->graphs_retired, dt));
                json_object_object_add(e, "graphs_failed", json_object_new_uint64(s->graphs_failed));
                json_object_object_add(e, "failed", json_object_new_uint64(s->failed));
                json_object_object_add(e, "completed", json_object_new_uint64(s->completed));
                json_object_object_add(e, "serving", json_object_new_string(s->serving ? s->serving : ""));
                json_object_array_add(sessions, e);
        }
        json_object_object_add(o, "sessions", sessions);

        uint64_t mdt = mcur->daemon && mprev->daemon && mcur->daemon->uptime_ms > mprev->daemon->uptime_ms
                               ? mcur->daemon->uptime_ms - mprev->daemon->uptime_ms
                               : 0;
        json_object_object_add(o, "kernels", kernels_snapshot(mprev->metrics, mcur->metrics, mdt));
        return o;
}

static const struct column thread_cols[] = {
        { "thread", -6, NULL },          { "executed_per_s", 14, NULL }, { "dispatched_per_s", 16, NULL },
        { "parks_per_s", 12, NULL },     { "wakeups_per_s", 13, NULL },  { "spurious_per_s", 14, NULL },
        { "executed_tasks", 14, NULL },
};

static const struct column session_cols[] = {
        { "session", -8, NULL },       { "pid", -8, NULL },          { "name", -20, NULL },
        { "tasks_per_s", 12, NULL },   { "graphs_per_s", 12, NULL }, { "graphs_failed", 13, NULL },
        { "failed", 10, NULL },        { "serving", -10, session_serving_text },
};

static const struct column kernel_cols[] = {
        { "kernel", -18, NULL },       { "tasks_per_s", 12, NULL },  { "run_p50_us", 11, NULL },
        { "run_p99_us", 11, NULL },    { "wait_p99_us", 11, NULL },  { "tasks", 12, NULL },
        { "failures", 8, NULL },
};

static void snapshot_text(json_object *o, double delay_s) {
        static const char *const totals[] = { "sessions",         "tasks_per_s",     "graphs_per_s",
                                              "graphs_failed_per_s", "tasks_completed", "graphs_retired",
                                              "graphs_failed" };
        json_object *v, *total = NULL, *threads = NULL, *sessions = NULL, *kernels = NULL;
        json_object_object_get_ex(o, "kernels", &kernels);
        json_object_object_get_ex(o, "total", &total);
        json_object_object_get_ex(o, "threads", &threads);
        json_object_object_get_ex(o, "sessions", &sessions);
        char shown[256];
        printf("hbgd %s, pid %s",
               ctl_shown(json_object_object_get_ex(o, "hbgd", &v) ? json_object_get_string(v) : "?", shown,
                         sizeof(shown)),
               json_object_object_get_ex(o, "pid", &v) ? json_object_get_string(v) : "?");
        printf(", up %" PRIu64 " s, every %.2f s\n",
               json_object_object_get_ex(o, "uptime_ms", &v) ? json_object_get_uint64(v) / 1000 : 0, delay_s);
        print_labels(stdout, total, totals, sizeof(totals) / sizeof(totals[0]));
        printf("\n");
        print_table(stdout, "", thread_cols, sizeof(thread_cols) / sizeof(thread_cols[0]), threads);
        printf("\n");
        print_table(stdout, "", session_cols, sizeof(session_cols) / sizeof(session_cols[0]), sessions);
        if (kernels && json_object_array_length(kernels) > 0) {
                printf("\n");
                print_table(stdout, "", kernel_cols, sizeof(kernel_cols) / sizeof(kernel_cols[0]), kernels);
        }
}

/* The terminal in non-canonical mode without echo (keys one by one). */
struct term {
        bool raw;
        struct termios saved;
};

static void term_raw(struct term *t) {
        if (!isatty(STDIN_FILENO) || tcgetattr(STDIN_FILENO, &t->saved) < 0)
                return;
        struct termios r = t->saved;
        r.c_lflag &= ~(tcflag_t)(ICANON | ECHO);
        r.c_cc[VMIN] = 0;
        r.c_cc[VTIME] = 0;
        t->raw = tcsetattr(STDIN_FILENO, TCSANOW, &r) == 0;
}

static void term_restore(struct term *t) {
        if (t->raw)
                tcsetattr(STDIN_FILENO, TCSANOW, &t->saved);
}

/* Wait delay_s; false when asked to quit (q, Ctrl-C, SIGTERM). */
static bool pause_for(double delay_s, bool keys) {
        int64_t end = clock_now_ns() + (int64_t)(delay_s * 1e9);
        while (!stop_requested) {
                int64_t left = end - clock_now_ns();
                if (left <= 0)
                        return true;
                struct pollfd p = { .fd = STDIN_FILENO, .events = POLLIN };
                int n = poll(&p, keys ? 1 : 0, (int)((left + 999999) / 1000000));
                if (n > 0) {
                        char ch;
                        ssize_t r = read(STDIN_FILENO, &ch, 1);
                        if (r == 1 && (ch == 'q' || ch == 'Q'))
                                return false;
                        if (r == 0)  /* stdin closed: keys no more */
                                keys = false;
                }
        }
        return false;
}

int cmd_top(const struct ctl_opts *o) {
        bool interactive = !o->batch && !opt_json && isatty(STDOUT_FILENO);
        struct term term = { 0 };
        int rc = 0;
        struct ctl_failure fail;
        Hbg__Envelope *prev = NULL, *cur = NULL, *mprev = NULL, *mcur = NULL;
        if (ctl_status(o->socket, HBG__STATUS_KIND__STATUS_DAEMON, &prev, &fail) < 0 ||
            ctl_status(o->socket, HBG__STATUS_KIND__STATUS_METRICS, &mprev, &fail) < 0) {
                wire_free(prev);
                return ctl_exit_status(&fail);
        }
        if (interactive) {
                struct sigaction sa = { .sa_handler = on_signal };
                sigemptyset(&sa.sa_mask);
                sigaction(SIGINT, &sa, NULL);
                sigaction(SIGTERM, &sa, NULL);
                term_raw(&term);
                printf("\033[H\033[2Jhbgctl top: sampling every %.2f s (q quits)\n", o->delay_s);
                fflush(stdout);
        }
        for (long i = 0; o->iterations < 0 || i < o->iterations; i++) {
                if (!pause_for(o->delay_s, interactive && term.raw))
                        break;
                if (ctl_status(o->socket, HBG__STATUS_KIND__STATUS_DAEMON, &cur, &fail) < 0) {
                        rc = ctl_exit_status(&fail);
                        break;
                }
                if (ctl_status(o->socket, HBG__STATUS_KIND__STATUS_METRICS, &mcur, &fail) < 0) {
                        wire_free(cur);
                        rc = ctl_exit_status(&fail);
                        break;
                }
                json_object *j = snapshot(prev->status_reply, cur->status_reply, mprev->status_reply,
                                          mcur->status_reply);
                if (opt_json) {
                        print_json_line(j);
                } else {
                        if (interactive)
                                printf("\033[H\033[2J");
                        else if (i)
                                printf("\n");
                        snapshot_text(j, o->delay_s);
                }
                fflush(stdout);
                json_object_put(j);
                wire_free(prev);
                prev = cur;
                wire_free(mprev);
                mprev = mcur;
        }
        wire_free(prev);
        wire_free(mprev);
        term_restore(&term);
        return rc;
}
