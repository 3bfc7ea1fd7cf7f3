/* SPDX-License-Identifier: MIT */
/* `hbgctl run FILE`: compile a graph file and run it through
 * libhbgclient, like any producer; print the outputs. --dry-run and --dot
 * go to run_dry.c (no session), failures are reported by run_report.c. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "ctl/ctl.h"
#include "ctl/run.h"
#include "ctl/daemon_conn.h"
#include "ctl/dot.h"
#include "ctl/error.h"
#include "ctl/graph_file.h"
#include "ctl/graph_read.h"
#include "ctl/output.h"
#include "ctl/progress.h"
#include "ctl/run_dry.h"
#include "ctl/run_report.h"
#include "proto/kernel_table.h"
#include "shm/layout.h"
#include "shm/producer.h"
#include "common/clock.h"

/* The graph failed in hbgd: its first failing task, by its index and name
 * in the file, its kernel and hbgd's (or the library's) message. */
static int graph_failed(struct plan *p, const hbg_graph_error_info *info) {
        char nb[64];
        /* ids grow with the file order; dummies joining more than 16
         * dependencies sit right before the task they serve. */
        size_t lo = 0, hi = p->n_tasks;
        while (lo < hi) {
                size_t mid = (lo + hi) / 2;
                if (p->ids[mid] < info->task)
                        lo = mid + 1;
                else
                        hi = mid;
        }
        const char *name = lo < p->n_tasks ? graph_file_task_name(p, lo, nb, sizeof(nb)) : NULL;
        bool named = name && name != nb; /* else the index says it */
        char where[160] = "", kern[96] = "";
        if (lo < p->n_tasks)
                snprintf(where, sizeof(where), " at task %zu%s%s%s", lo, named ? " \"" : "", named ? name : "",
                         named ? "\"" : "");
        if (info->kernel[0])
                snprintf(kern, sizeof(kern), " (kernel %s)", info->kernel);
        /* The code in the words hbgd's log and the library use (common/errtext.c). */
        ctl_error(info->code, "graph failed%s%s: %s%s%s", where, kern, hbg_strerror(info->code),
                  info->message[0] ? ": " : "", info->message);
        if (opt_json) {
                json_object *o = json_object_new_object();
                json_object *e = ctl_error_json(EXIT_FAIL);
                json_object_object_add(e, "task", lo < p->n_tasks ? json_object_new_uint64(lo) : NULL);
                json_object_object_add(e, "id", json_object_new_uint64(info->task));
                json_object_object_add(e, "name", named ? json_object_new_string(name) : NULL);
                json_object_object_add(e, "kernel", info->kernel[0] ? json_object_new_string(info->kernel) : NULL);
                json_object_object_add(o, "status", json_object_new_string("error"));
                json_object_object_add(o, "error", e);
                print_json(o);
                json_object_put(o);
        }
        return EXIT_FAIL;
}

int run_parse_size(const char *s, uint64_t *ret) {
        static const struct { char c; unsigned shift; } suffixes[] = { { 'K', 10 }, { 'M', 20 }, { 'G', 30 } };
        char *end;
        if (*s < '0' || *s > '9')
                return -EINVAL;
        errno = 0;
        uint64_t v = strtoull(s, &end, 10);
        if (errno)
                return -EINVAL;
        if (*end) {
                size_t k = 0;
                while (k < sizeof(suffixes) / sizeof(suffixes[0]) && suffixes[k].c != (*end & ~0x20))
                        k++;
                /* "80M", "80MB", "80MiB" */
                if (k == sizeof(suffixes) / sizeof(suffixes[0]) ||
                    (end[1] && strcmp(end + 1, "B") != 0 && strcmp(end + 1, "iB") != 0))
                        return -EINVAL;
                if (v > (UINT64_MAX >> suffixes[k].shift))
                        return -EINVAL;
                v <<= suffixes[k].shift;
        }
        if (v == 0)
                return -EINVAL;
        *ret = v;
        return 0;
}

/* A session with hbgd (*ret), its heap and window as asked: 0, or the
 * exit status after the message (and the JSON error). */
static int run_connect(const struct ctl_opts *o, hbg_client **ret) {
        /* hbgctl's own explanation of a socket that is missing or not ours
         * to open, found without connecting: a probe connection to hbgd
         * would be a second refusal in its log for one run. */
        if (faccessat(AT_FDCWD, o->socket, W_OK, AT_EACCESS) < 0) {
                int fd = ctl_connect(o->socket);
                if (fd < 0) {
                        int rc = ctl_exit_status(&(struct ctl_failure){ .at = CTL_AT_CONNECT, .err = fd });
                        run_fail_json(rc, NULL);
                        return rc;
                }
                close(fd);
        }
        hbg_connect_options copts = HBG_CONNECT_OPTIONS_INIT;
        copts.socket_path = o->socket;
        copts.heap_bytes = o->heap;
        copts.task_window = o->window;
        int err = hbg_connect_opts(ret, &copts);
        if (err < 0) {
                /* the message, then hbgd's refusal's fix and exit status */
                ctl_error(err, "hbg_connect: %s", hbg_last_error(NULL));
                ctl_explain_refusal(err, hbg_last_error(NULL));
                int rc = ctl_exit_status(&(struct ctl_failure){ .at = CTL_AT_LIBRARY, .err = err });
                run_fail_json(rc, NULL);
                return rc;
        }
        return 0;
}

/* The file's tensors in the session's heap, with their initial values: 0,
 * or the exit status. */
static int alloc_tensors(struct plan *p, hbg_client *c) {
        for (size_t i = 0; i < p->n_tensors; i++) {
                struct gtensor *t = &p->tensors[i];
                int err = hbg_tensor_alloc(c, t->len * 4, &t->t);
                if (err < 0) {
                        char msg[512];
                        snprintf(msg, sizeof(msg), "$.tensors.%s (%" PRIu64 " elements): %s (%s)%s",
                                 t->name, t->len, hbg_strerror(err), hbg_last_error(c),
                                 err == -ENOMEM ? "; hbgctl run --heap BYTES asks for a bigger heap, up to "
                                                  "hbgd's [limits] max_heap_size"
                                                : "");
                        return run_fail_code(p, err, msg, NULL);
                }
                float *d = hbg_tensor_data(c, t->t);
                for (uint64_t k = 0; k < t->len; k++)
                        d[k] = t->init == INIT_FILL   ? (float)t->value
                               : t->init == INIT_IOTA ? (float)(t->start + (double)k * t->step)
                                                      : 0.0f;
        }
        return 0;
}

/* Add every compiled task (its deps from file indices to the ids given),
 * the progress line following: 0, or the exit status (the progress line
 * ended, *pg NULL). *ret_added: how many were added. */
static int add_tasks(struct plan *p, hbg_client *c, struct progress **pg, size_t *ret_added) {
        char nb[64];
        for (size_t i = 0; i < p->n_tasks; i++) {
                hbg_task *t = &p->compiled[i];
                for (unsigned d = 0; d < t->n_deps; d++)
                        t->deps[d] = p->ids[t->deps[d]];
                int err = hbg_graph_add(c, t, &p->ids[i]);
                if (err < 0) {
                        char msg[512];
                        snprintf(msg, sizeof(msg), "$.tasks[%zu]: %s (%s)", i, hbg_strerror(err),
                                 hbg_last_error(c));
                        progress_end(*pg, p->ids, *ret_added, false);
                        *pg = NULL;
                        return run_fail_code(p, err, msg, graph_file_task_name(p, i, nb, sizeof(nb)));
                }
                *ret_added = i + 1;
                progress_update(*pg, p->ids, *ret_added, false, false);
        }
        return 0;
}

/* Submit the graph and wait for it, the progress line redrawn between
 * slices of the wait and then ended: 0, or the exit status (the graph's
 * first failing task, or why it could not run). */
static int submit_and_wait(struct plan *p, hbg_client *c, struct progress *pg, size_t added) {
        uint64_t g = 0;
        int err = hbg_graph_submit(c, &g);
        bool submitted = err == 0;
        /* With a progress line: the wait in slices, redrawn between them
         * (a wait that times out leaves the graph as it is). */
        while (err == 0 && (err = hbg_graph_wait(c, g, pg ? 200 : -1)) == -ETIMEDOUT && pg) {
                /* Finished after all (-ETIMEDOUT its own status, or done
                 * since)? Its status and message from a wait that does
                 * not wait. */
                if (hbg_graph_status(c, g, NULL) != 1) {
                        err = hbg_graph_wait(c, g, 0);
                        break;
                }
                err = 0;
                progress_update(pg, p->ids, added, true, true);
        }
        progress_end(pg, p->ids, added, err == 0);
        if (err == 0)
                return 0;
        hbg_graph_error_info info = HBG_GRAPH_ERROR_INFO_INIT;
        if (submitted && hbg_graph_error(c, g, &info) == 0 && info.code < 0)
                return graph_failed(p, &info);
        char msg[512];
        const char *why = hbg_last_error(c);
        snprintf(msg, sizeof(msg), "%s", why[0] ? why : hbg_strerror(err));
        return run_fail_code(p, err, msg, NULL);
}

/* The finished run: its times and each output's length, sum, min, max
 * and first values, as text or JSON. */
static void print_outputs(struct plan *p, hbg_client *c, int64_t compile_ns, double elapsed) {
        json_object *res = json_object_new_object(), *outs = json_object_new_object();
        json_object_object_add(res, "status", json_object_new_string("ok"));
        json_object_object_add(res, "tasks", json_object_new_uint64(p->n_tasks));
        json_object_object_add(res, "compile_us", json_object_new_int64(compile_ns / 1000));
        json_object_object_add(res, "elapsed_us", json_object_new_int64((int64_t)elapsed));
        size_t n_out = p->outputs ? json_object_array_length(p->outputs) : 0;
        if (!opt_json) {
                printf("ok: %zu task%s in %.3f ms (compiled in %.3f ms before)\n", p->n_tasks,
                       p->n_tasks == 1 ? "" : "s", elapsed / 1e3, (double)compile_ns / 1e6);
                if (n_out)
                        printf("%-16s %10s %16s %14s %14s  %s\n", "output", "len", "sum", "min", "max",
                               "head");
        }
        for (size_t i = 0; i < n_out; i++) {
                const char *name = json_object_get_string(json_object_array_get_idx(p->outputs, i));
                hbg_tensor t;
                graph_file_ref(p, name, "$.outputs", false, &t);
                const float *d = hbg_tensor_data(c, t);
                uint64_t len = t.bytes / 4;
                double sum = 0;
                float mn = d[0], mx = d[0];
                json_object *head = json_object_new_array();
                for (uint64_t k = 0; k < len; k++) {
                        sum += (double)d[k];
                        mn = d[k] < mn ? d[k] : mn;
                        mx = d[k] > mx ? d[k] : mx;
                        if (k < 8)
                                json_object_array_add(head, json_object_new_double(d[k]));
                }
                json_object *st = json_object_new_object();
                json_object_object_add(st, "len", json_object_new_uint64(len));
                json_object_object_add(st, "sum", json_object_new_double(sum));
                json_object_object_add(st, "min", json_object_new_double(mn));
                json_object_object_add(st, "max", json_object_new_double(mx));
                json_object_object_add(st, "head", head);
                json_object_object_add(outs, name, st);
                if (!opt_json) {
                        char shown[4 * 256];
                        printf("%-16s %10" PRIu64 " %16.9g %14.7g %14.7g  ", ctl_shown(name, shown, sizeof(shown)),
                               len, sum, mn, mx);
                        for (uint64_t k = 0; k < len && k < 8; k++)
                                printf("%s%.7g", k ? " " : "", d[k]);
                        printf("%s\n", len > 8 ? " ..." : "");
                }
        }
        json_object_object_add(res, "outputs", outs);
        if (opt_json)
                print_json(res);
        json_object_put(res);
}

static void fetch_kernels(const struct ctl_opts *o, struct plan *p);

/* Read and check the file (the compile time into *compile_ns): 0, or the
 * exit status after its errors. A dry run goes on with the tasks without
 * errors of their own, for hbgd to check them. */
static int load_file(const struct ctl_opts *o, struct plan *p, int64_t *compile_ns) {
        int64_t t0 = clock_now_ns();
        if (graph_file_load(p) < 0)
                return run_fail(p, p->err, NULL);
        /* Only a kernel this build does not know (a module's) needs hbgd's
         * table: any other file costs hbgd one connection, the run's (or
         * the dry run's) own. The built-ins' signatures are the same in
         * every hbgd (stable ids). */
        if (graph_file_names_unknown_kernel(p)) {
                int64_t t1 = clock_now_ns();
                fetch_kernels(o, p);
                t0 += clock_now_ns() - t1;
        }
        if (graph_file_parse(p) < 0 && !(o->dry_run && p->tasks && p->bad)) {
                /* The other tasks' rules between tensors too (laid out as
                 * a dry run does): every error before the run. */
                if (p->tasks && p->bad) {
                        run_dry_layout(p);
                        run_compile(p);
                }
                return p->errors ? run_file_errors(p) : run_fail(p, p->err, NULL);
        }
        *compile_ns += clock_now_ns() - t0;
        return 0;
}

/* The run in a session: tensors, tasks, submit, wait, outputs. */
static int run_online(const struct ctl_opts *o, struct plan *p, int64_t compile_ns) {
        struct progress *pg = NULL;
        hbg_client *c = NULL;
        size_t added = 0;
        int rc = run_connect(o, &c);
        if (rc == 0)
                rc = alloc_tensors(p, c);
        if (rc)
                goto out;
        int64_t t0 = clock_now_ns();
        if (run_compile(p) < 0) {
                rc = p->errors ? run_file_errors(p) : run_fail(p, p->err, NULL);
                goto out;
        }
        compile_ns += clock_now_ns() - t0;
        /* The run: first add to the wait's return, as a producer sees it. */
        if (o->progress)
                pg = progress_new(o->socket, p->n_tasks);
        t0 = clock_now_ns();
        rc = add_tasks(p, c, &pg, &added);
        if (rc == 0) {
                rc = submit_and_wait(p, c, pg, added);
                pg = NULL;
        }
        if (rc == 0)
                print_outputs(p, c, compile_ns, (double)(clock_now_ns() - t0) / 1e3);
out:
        progress_end(pg, p->ids, 0, false);
        hbg_disconnect(c);
        return rc;
}

/* The first protocol minor version whose hbgd lists its kernels with
 * their full signatures (STATUS_KERNELS). */
#define KERNEL_TABLE_MINOR 3u

/* The kernels of the hbgd on o->socket into p->kernels (STATUS_KERNELS,
 * checked as libhbgclient checks a session reply's table), for the file's
 * kernel names and signatures. Without hbgd (or from one older than
 * protocol 1.3): the built-ins of this build, and p->kernels_note says
 * so. Quiet: the run or the dry run reports hbgd's absence its own way,
 * and --dot alone needs none. */
static void fetch_kernels(const struct ctl_opts *o, struct plan *p) {
        snprintf(p->kernels_note, sizeof(p->kernels_note),
                 "checked against the built-in kernels only (hbgd on %s did not list its kernels)", o->socket);
        /* A socket we may not open: no connection (run_connect() explains
         * it without a refusal in hbgd's log). */
        if (faccessat(AT_FDCWD, o->socket, W_OK, AT_EACCESS) < 0)
                return;
        ctl_errors_quiet(true);
        Hbg__Envelope *reply = NULL, env;
        struct ctl_failure fail;
        uint32_t minor = 0;
        int fd = ctl_open(o->socket, &minor, &fail);
        if (fd >= 0 && minor >= KERNEL_TABLE_MINOR) {
                Hbg__StatusRequest rq = HBG__STATUS_REQUEST__INIT;
                rq.kind = HBG__STATUS_KIND__STATUS_KERNELS;
                env = (Hbg__Envelope)HBG__ENVELOPE__INIT;
                env.msg_case = HBG__ENVELOPE__MSG_STATUS_REQUEST;
                env.status_request = &rq;
                if (ctl_roundtrip(fd, &env, -1, CTL_REPLY_TIMEOUT_MS, &reply, &fail) == 0 &&
                    reply->msg_case == HBG__ENVELOPE__MSG_STATUS_REPLY) {
                        struct kernel_table t;
                        char why[256];
                        const Hbg__StatusReply *r = reply->status_reply;
                        if (kernel_table_import(&t, r->kernels, r->n_kernels, why, sizeof(why)) == 0) {
                                p->kernels = t;
                                p->kernels_note[0] = 0;
                        } else {
                                snprintf(p->kernels_note, sizeof(p->kernels_note),
                                         "checked against the built-in kernels only: %.200s", why);
                        }
                }
                wire_free(reply);
        } else if (fd >= 0 && minor) {
                snprintf(p->kernels_note, sizeof(p->kernels_note),
                         "checked against the built-in kernels only: hbgd speaks protocol %u.%u, which does not "
                         "list its kernels' signatures (hbgctl %s speaks %u.%u)",
                         HBG_PROTO_MAJOR, minor, HBG_VERSION, HBG_PROTO_MAJOR, HBG_PROTO_MINOR);
        }
        ctl_errors_quiet(false);
        if (fd >= 0)
                close(fd);
}

int cmd_run(const struct ctl_opts *o, const char *file) {
        struct plan p = { .file = file };
        kernel_table_builtin(&p.kernels);
        if (o->dot && strcmp(o->dot, "-") == 0 && opt_json) {
                ctl_error(-EINVAL, "--dot - and --json would both write to standard output");
                return EXIT_USAGE;
        }
        /* The compile time (reading the file, checking it, building the
         * tasks) is reported apart from the run. */
        int64_t compile_ns = 0;
        int rc = load_file(o, &p, &compile_ns);
        if (rc == 0)
                rc = o->dot || o->dry_run ? run_dry(o, &p, compile_ns) : run_online(o, &p, compile_ns);
        graph_file_free(&p);
        return rc;
}
