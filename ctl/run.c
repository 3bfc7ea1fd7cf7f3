/* SPDX-License-Identifier: MIT */
/* `hbgctl run FILE`: compile a graph file and run it through
 * libhbgclient, like any producer; print the outputs. --dry-run and --dot
 * compile it without hbgd (tensors laid out as the heap would, no data). */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ctl/ctl.h"
#include "shm/util.h"

/* With --json: {"status": "error", "error": {code, exit, message},
 * "task": ...} from the last ctl_error(). */
static void run_json_error(int exit_code, const char *task) {
        if (!opt_json)
                return;
        json_object *o = json_object_new_object();
        json_object_object_add(o, "status", json_object_new_string("error"));
        json_object_object_add(o, "error", ctl_error_json(exit_code));
        if (task)
                json_object_object_add(o, "task", json_object_new_string(task));
        print_json(o);
        json_object_put(o);
}

/* A failure of the run (code: a negative errno or 0). */
static int run_error_code(struct plan *p, int code, const char *msg, const char *task) {
        if (task)
                ctl_error(EXIT_FAIL, code, "%s: task %s: %s", graph_file_name(p), task, msg);
        else
                ctl_error(EXIT_FAIL, code, "%s", msg);
        run_json_error(EXIT_FAIL, task);
        return EXIT_FAIL;
}

static int run_error(struct plan *p, const char *msg, const char *task) {
        return run_error_code(p, 0, msg, task);
}

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
        ctl_error(EXIT_FAIL, info->code, "graph failed%s%s: %s: %s", where, kern, strerror(-info->code),
                  info->message[0] ? info->message : hbg_strerror(info->code));
        if (opt_json) {
                json_object *o = json_object_new_object();
                json_object *e = ctl_error_json(EXIT_FAIL);
                json_object_object_add(e, "task", lo < p->n_tasks ? json_object_new_uint64(lo) : NULL);
                json_object_object_add(e, "id", json_object_new_uint64(info->task));
                json_object_object_add(e, "name", named ? json_object_new_string(name) : NULL);
                json_object_object_add(e, "kernel", info->kernel[0] ? json_object_new_string(info->kernel) : NULL);
                json_object_object_add(o, "status", json_object_new_string("error"));
                json_object_object_add(o, "error", e);
                if (name)
                        json_object_object_add(o, "task", json_object_new_string(name));
                print_json(o);
                json_object_put(o);
        }
        return EXIT_FAIL;
}

/* Pass 2 of the graph file: every task as an hbg_task, before the run. */
static int compile_tasks(struct plan *p) {
        p->resolved = true;
        p->compiled = calloc(p->n_tasks, sizeof(*p->compiled));
        p->ids = calloc(p->n_tasks, sizeof(*p->ids));
        if (!p->compiled || !p->ids) {
                snprintf(p->err, sizeof(p->err), "out of memory for %zu tasks", p->n_tasks);
                return -1;
        }
        for (size_t i = 0; i < p->n_tasks; i++)
                if (graph_file_task(p, i, &p->compiled[i]) < 0)
                        return -1;
        return 0;
}

/* --dry-run, --dot: the file compiled against a heap laid out as
 * hbg_tensor_alloc() would (64-byte aligned, in file order), no hbgd. */
static int run_offline(const struct ctl_opts *o, struct plan *p, int64_t compile_ns) {
        uint64_t off = 0;
        for (size_t i = 0; i < p->n_tensors; i++) {
                off = (off + 63) & ~(uint64_t)63;
                p->tensors[i].t = (hbg_tensor){ off, p->tensors[i].len * 4 };
                off += p->tensors[i].len * 4;
        }
        int64_t t0 = hbg_now_ns();
        if (compile_tasks(p) < 0)
                return run_error(p, p->err, NULL);
        compile_ns += hbg_now_ns() - t0;
        size_t edges = 0;
        bool to_stdout = o->dot && strcmp(o->dot, "-") == 0;
        if (o->dot) {
                FILE *f = to_stdout ? stdout : fopen(o->dot, "we");
                if (!f) {
                        char msg[512];
                        snprintf(msg, sizeof(msg), "cannot write %s: %s", o->dot, strerror(errno));
                        return run_error_code(p, -errno, msg, NULL);
                }
                int err = dot_write(p, f, &edges);
                if (!to_stdout && fclose(f) != 0 && err == 0)
                        err = -errno;
                if (err < 0) {
                        char msg[512];
                        snprintf(msg, sizeof(msg), "cannot write %s: %s", o->dot, strerror(-err));
                        return run_error_code(p, err, msg, NULL);
                }
        }
        if (opt_json) {
                json_object *res = json_object_new_object();
                json_object_object_add(res, "status", json_object_new_string("ok"));
                json_object_object_add(res, "tasks", json_object_new_uint64(p->n_tasks));
                json_object_object_add(res, "compile_us", json_object_new_int64(compile_ns / 1000));
                json_object_object_add(res, "run", json_object_new_boolean(false));
                if (o->dot) {
                        json_object_object_add(res, "dot", json_object_new_string(o->dot));
                        json_object_object_add(res, "edges", json_object_new_uint64(edges));
                }
                print_json(res);
                json_object_put(res);
        } else if (!to_stdout) {
                printf("ok: %zu tasks checked in %.3f ms, not run", p->n_tasks, (double)compile_ns / 1e6);
                if (o->dot)
                        printf("; %zu dependencies written to %s", edges, o->dot);
                printf("\n");
        }
        return 0;
}

int cmd_run(const struct ctl_opts *o, const char *file) {
        struct plan p = { .file = file };
        struct progress *pg = NULL;
        int rc = EXIT_FAIL;
        hbg_client *c = NULL;
        char nb[64];
        if (o->dot && strcmp(o->dot, "-") == 0 && opt_json)
                return ctl_error(EXIT_USAGE, -EINVAL, "--dot - and --json would both write to standard output");
        /* The compile time (reading the file, checking it, building the
         * tasks) is reported apart from the run. */
        int64_t compile_ns = 0, t0 = hbg_now_ns();
        if (graph_file_load(&p) < 0 || graph_file_parse(&p) < 0) {
                rc = run_error(&p, p.err, NULL);
                goto out;
        }
        compile_ns += hbg_now_ns() - t0;
        if (o->dot || o->dry_run) {
                rc = run_offline(o, &p, compile_ns);
                goto out;
        }
        int fd = ctl_connect(o->socket);
        if (fd < 0) {
                rc = -fd;
                run_json_error(rc, NULL);
                goto out;
        }
        close(fd);
        int err = hbg_connect(&c, o->socket);
        if (err < 0) {
                char msg[512];
                snprintf(msg, sizeof(msg), "cannot connect to hbgd: %s", hbg_last_error(NULL));
                /* the message, then hbgd's refusal's fix and exit status */
                ctl_error(EXIT_FAIL, err, "%s", msg);
                rc = ctl_connect_failed(err);
                run_json_error(rc, NULL);
                goto out;
        }
        for (size_t i = 0; i < p.n_tensors; i++) {
                struct gtensor *t = &p.tensors[i];
                err = hbg_tensor_alloc(c, t->len * 4, &t->t);
                if (err < 0) {
                        char msg[512];
                        snprintf(msg, sizeof(msg), "tensor %s (%" PRIu64 " floats): %s (%s)",
                                 t->name, t->len, hbg_strerror(err), hbg_last_error(c));
                        rc = run_error_code(&p, err, msg, NULL);
                        goto out;
                }
                float *d = hbg_tensor_data(c, t->t);
                for (uint64_t k = 0; k < t->len; k++)
                        d[k] = t->init == INIT_FILL   ? (float)t->value
                               : t->init == INIT_IOTA ? (float)(t->start + (double)k * t->step)
                                                      : 0.0f;
        }
        t0 = hbg_now_ns();
        if (compile_tasks(&p) < 0) {
                rc = run_error(&p, p.err, NULL);
                goto out;
        }
        compile_ns += hbg_now_ns() - t0;
        /* The run: first add to the wait's return, as a producer sees it. */
        if (o->progress)
                pg = progress_new(o->socket, p.n_tasks);
        size_t added = 0;
        t0 = hbg_now_ns();
        for (size_t i = 0; i < p.n_tasks; i++) {
                hbg_task *t = &p.compiled[i];
                for (unsigned d = 0; d < t->n_deps; d++)
                        t->deps[d] = p.ids[t->deps[d]];
                err = hbg_graph_add(c, t, &p.ids[i]);
                if (err < 0) {
                        char msg[512];
                        snprintf(msg, sizeof(msg), "%s (%s)", hbg_strerror(err), hbg_last_error(c));
                        progress_end(pg, p.ids, added, false);
                        pg = NULL;
                        rc = run_error_code(&p, err, msg, graph_file_task_name(&p, i, nb, sizeof(nb)));
                        goto out;
                }
                added = i + 1;
                progress_update(pg, p.ids, added, false, false);
        }
        uint64_t g = 0;
        err = hbg_graph_submit(c, &g);
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
                progress_update(pg, p.ids, added, true, true);
        }
        double elapsed = (double)(hbg_now_ns() - t0) / 1e3;
        progress_end(pg, p.ids, added, err == 0);
        pg = NULL;
        if (err < 0) {
                hbg_graph_error_info info = HBG_GRAPH_ERROR_INFO_INIT;
                if (submitted && hbg_graph_error(c, g, &info) == 0 && info.code < 0) {
                        rc = graph_failed(&p, &info);
                        goto out;
                }
                char msg[512];
                const char *why = hbg_last_error(c);
                snprintf(msg, sizeof(msg), "%s", why[0] ? why : hbg_strerror(err));
                rc = run_error_code(&p, err, msg, NULL);
                goto out;
        }
        json_object *res = json_object_new_object(), *outs = json_object_new_object();
        json_object_object_add(res, "status", json_object_new_string("ok"));
        json_object_object_add(res, "tasks", json_object_new_uint64(p.n_tasks));
        json_object_object_add(res, "compile_us", json_object_new_int64(compile_ns / 1000));
        json_object_object_add(res, "elapsed_us", json_object_new_int64((int64_t)elapsed));
        size_t n_out = p.outputs ? json_object_array_length(p.outputs) : 0;
        if (!opt_json) {
                printf("ok: %zu tasks in %.3f ms (compiled in %.3f ms before)\n", p.n_tasks, elapsed / 1e3,
                       (double)compile_ns / 1e6);
                if (n_out)
                        printf("%-16s %10s %16s %14s %14s  %s\n", "output", "len", "sum", "min", "max",
                               "head");
        }
        for (size_t i = 0; i < n_out; i++) {
                const char *name = json_object_get_string(json_object_array_get_idx(p.outputs, i));
                hbg_tensor t;
                graph_file_ref(&p, name, "$.outputs", false, &t);
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
        rc = 0;
out:
        progress_end(pg, p.ids, 0, false);
        hbg_disconnect(c);
        graph_file_free(&p);
        return rc;
}
