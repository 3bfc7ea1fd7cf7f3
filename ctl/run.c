/* SPDX-License-Identifier: MIT */
/* `hbgctl run FILE`: compile a graph file and run it through
 * libhbgclient, like any producer; print the outputs. --dry-run and --dot
 * compile it without a session (tensors laid out as the heap would, no
 * data); --dry-run then has hbgd validate the tasks (a validate-only
 * request, docs/PROTOCOL.md). */
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
#include "ctl/output.h"
#include "ctl/progress.h"
#include "proto/kernel_table.h"
#include "shm/layout.h"
#include "shm/producer.h"
#include "common/clock.h"

/* With --json: {"status": "error", "error": {code, exit, message, name}}
 * from the last ctl_error(); "name" the task's, as in a failed graph's
 * error (where "task" is its index). */
static void run_json_error(int exit_code, const char *task) {
        if (!opt_json)
                return;
        json_object *o = json_object_new_object(), *e = ctl_error_json(exit_code);
        if (task)
                json_object_object_add(e, "name", json_object_new_string(task));
        json_object_object_add(o, "status", json_object_new_string("error"));
        json_object_object_add(o, "error", e);
        print_json(o);
        json_object_put(o);
}

/* A failure of the run (code: a negative errno or 0). */
static int run_error_code(struct plan *p, int code, const char *msg, const char *task) {
        if (task)
                ctl_error(code, "%s: task %s: %s", graph_file_name(p), task, msg);
        else
                ctl_error(code, "%s", msg);
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

/* Pass 2 of the graph file: every task as an hbg_task, before the run
 * (those with errors of pass 1 left out, as zero tasks). Every error
 * noted; -EINVAL if any (-ENOMEM: no room for the tasks). */
static int compile_tasks(struct plan *p) {
        p->resolved = true;
        p->compiled = calloc(p->n_tasks, sizeof(*p->compiled));
        p->ids = calloc(p->n_tasks, sizeof(*p->ids));
        if (!p->compiled || !p->ids || !p->bad) {
                snprintf(p->err, sizeof(p->err), "out of memory for %zu tasks", p->n_tasks);
                return -ENOMEM;
        }
        for (size_t i = 0; i < p->n_tasks; i++)
                if (!p->bad[i] && graph_file_task(p, i, &p->compiled[i]) < 0) {
                        p->compiled[i] = (hbg_task){ 0 };
                        p->bad[i] = true;
                }
        return graph_file_n_errors(p) ? -EINVAL : 0;
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

/* Where an error is in the file, to sort them: "$.tensors..." first,
 * then the tasks by index, then the rest. */
static uint64_t path_rank(json_object *const *e) {
        const char *path = json_object_get_string(json_object_object_get(*e, "path"));
        if (!path || strncmp(path, "$.tensors", 9) == 0)
                return 0;
        if (strncmp(path, "$.tasks[", 8) == 0)
                return 1 + strtoull(path + 8, NULL, 10);
        return UINT64_MAX;
}

static int by_path(const void *a, const void *b) {
        uint64_t x = path_rank(a), y = path_rank(b);
        return x < y ? -1 : x > y;
}

/* Every noted error of the file on stderr, one a line (the first through
 * ctl_error(): the JSON error); the exit status. */
static int print_errors(struct plan *p, int exit_code) {
        size_t n = graph_file_n_errors(p);
        /* In file order (json-c's sort is a qsort: equal ranks in any
         * order, a task's errors are one per finder at most). */
        if (n > 1)
                json_object_array_sort(p->errors, by_path);
        for (size_t i = 0; i < n; i++) {
                json_object *e = json_object_array_get_idx(p->errors, i);
                const char *path = json_object_get_string(json_object_object_get(e, "path"));
                const char *msg = json_object_get_string(json_object_object_get(e, "message"));
                if (i == 0) {
                        ctl_error(-EINVAL, "%s: %s: %s", graph_file_name(p), path, msg);
                } else {
                        char line[1024], shown[4 * sizeof(line)];
                        snprintf(line, sizeof(line), "%s: %s: %s", graph_file_name(p), path, msg);
                        fprintf(stderr, "hbgctl: %s\n", ctl_shown(line, shown, sizeof(shown)));
                }
        }
        if (n > 1 && !opt_json)
                fprintf(stderr, "hbgctl: %zu errors in %s\n", n, graph_file_name(p));
        return exit_code;
}

/* The file's errors as the JSON answer of a run that did not start. */
static int file_errors(struct plan *p) {
        print_errors(p, EXIT_FAIL);
        if (opt_json) {
                json_object *o = json_object_new_object();
                json_object_object_add(o, "status", json_object_new_string("error"));
                json_object_object_add(o, "error", ctl_error_json(EXIT_FAIL));
                json_object_object_add(o, "errors", json_object_get(p->errors));
                print_json(o);
                json_object_put(o);
        }
        return EXIT_FAIL;
}

/* The tensors laid out as hbg_tensor_alloc() would (64-byte aligned, in
 * file order) in an empty heap; the bytes they take. */
static uint64_t layout_offline(struct plan *p) {
        uint64_t off = 0;
        for (size_t i = 0; i < p->n_tensors; i++) {
                off = (off + 63) & ~(uint64_t)63;
                p->tensors[i].t = (hbg_tensor){ off, p->tensors[i].len * 4 };
                off += p->tensors[i].len * 4;
        }
        return off;
}

/* Tensors that do not fit a heap of heap_size bytes (laid out as
 * layout_offline() did), each an error that names the option. */
static void check_heap(struct plan *p, uint64_t heap_size, const char *whose) {
        for (size_t i = 0; i < p->n_tensors; i++) {
                const struct gtensor *t = &p->tensors[i];
                if (t->t.offset + t->t.bytes <= heap_size)
                        continue;
                char path[320], msg[512];
                snprintf(path, sizeof(path), "$.tensors.%s", t->name);
                snprintf(msg, sizeof(msg),
                         "%" PRIu64 " elements at element %" PRIu64 " do not fit %s heap of %" PRIu64
                         " elements (%" PRIu64 " bytes): hbgctl run --heap BYTES asks for more",
                         t->len, t->t.offset / 4, whose, heap_size / 4, heap_size);
                graph_file_error(p, path, msg, "hbgctl");
        }
}

/* Task i as hbgd's validation reads it: task i + 1 of a recorded graph,
 * its explicit dependencies its fanins (a task with errors of the file
 * goes as a dummy, keeping the indexes). */
static void encode_task(const struct plan *p, size_t i, struct hbg_recorded_task *rt) {
        const hbg_task *t = &p->compiled[i];
        struct hbg_task_record r = { .block_num = 1 };
        uint64_t fanins[HBG_MAX_TASK_DEPS];
        unsigned nf = 0;
        memset(rt, 0, sizeof(*rt));
        if (!p->bad[i]) {
                const struct hbg_kernel_sig *sg = t->kernel ? kernel_table_by_name(&p->kernels, t->kernel) : NULL;
                if (sg) {
                        r.lane_mask = t->lanes ? t->lanes : HBG_LANES_AIV;
                        for (unsigned l = 0; l < HBG_LANES; l++)
                                if (r.lane_mask & (1u << l))
                                        r.kernel[l] = sg->id;
                }
                r.block_num = t->blocks ? t->blocks : 1;
                r.n_tensors = t->n_args;
                for (unsigned a = 0; a < t->n_args; a++)
                        r.tensors[a] = (struct hbg_tensor_arg){ .offset = t->args[a].tensor.offset,
                                                                .length = t->args[a].tensor.bytes,
                                                                .direction = (uint32_t)t->args[a].dir };
                r.n_scalars = t->n_scalars;
                memcpy(r.scalars, t->scalars, t->n_scalars * sizeof(r.scalars[0]));
                if (t->has_predicate) {
                        r.flags |= HBG_TASK_HAS_PREDICATE;
                        r.predicate_offset = t->predicate.offset;
                }
                for (; nf < t->n_deps; nf++)
                        fanins[nf] = t->deps[nf] + 1;
        }
        producer_task_encode(&rt->desc, &rt->payload, (uint64_t)i + 1, &r, fanins, nf);
}

/* The compiled tasks in a memfd sealed as hbgd requires. */
static int tasks_memfd(const struct plan *p, int *ret_fd) {
        int fd = memfd_create("hbgctl-dry-run", MFD_CLOEXEC | MFD_ALLOW_SEALING);
        if (fd < 0)
                return -errno;
        size_t bytes = p->n_tasks * sizeof(struct hbg_recorded_task);
        if (ftruncate(fd, (off_t)bytes) < 0) {
                int err = -errno;
                close(fd);
                return err;
        }
        struct hbg_recorded_task *m = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
        if (m == MAP_FAILED) {
                int err = -errno;
                close(fd);
                return err;
        }
        for (size_t i = 0; i < p->n_tasks; i++)
                encode_task(p, i, &m[i]);
        munmap(m, bytes);
        if (fcntl(fd, F_ADD_SEALS, F_SEAL_WRITE | F_SEAL_GROW | F_SEAL_SHRINK | F_SEAL_SEAL) < 0) {
                int err = -errno;
                close(fd);
                return err;
        }
        *ret_fd = fd;
        return 0;
}

/* What hbgd said of the dry run. */
struct hbgd_check {
        bool ran;                   /* hbgd validated the tasks */
        int exit;                   /* else: why not, as an exit status */
        char why[512];              /* and in words */
        uint64_t heap_size, max_task_cost, omitted;
};

/* hbgd's validate-only request (docs/PROTOCOL.md): its errors noted at
 * their tasks' paths. hbgd validates on its slow-work thread: a big file
 * may wait behind other users' work. */
#define VALIDATE_TIMEOUT_MS 120000

static void ask_hbgd(const struct ctl_opts *o, struct plan *p, struct hbgd_check *hc) {
        hc->exit = EXIT_NOT_RUNNING;
        ctl_errors_quiet(true);
        int fd = ctl_connect(o->socket);
        ctl_errors_quiet(false);
        if (fd < 0) {
                hc->exit = ctl_exit_status(&(struct ctl_failure){ .at = CTL_AT_CONNECT, .err = fd });
                snprintf(hc->why, sizeof(hc->why), "%s on %s",
                         hc->exit == EXIT_ACCESS ? "this user may not use hbgd" : "hbgd is not running", o->socket);
                return;
        }
        Hbg__Hello hello;
        Hbg__Envelope env;
        wire_hello(&env, &hello, "hbgctl");
        Hbg__Envelope *reply = NULL;
        struct ctl_failure fail;
        ctl_errors_quiet(true);
        int err = ctl_roundtrip(fd, &env, &reply, &fail);
        ctl_errors_quiet(false);
        if (err < 0) {
                hc->exit = ctl_exit_status(&fail);
                snprintf(hc->why, sizeof(hc->why), "hbgd on %s did not take the connection", o->socket);
                close(fd);
                return;
        }
        wire_free(reply);
        int mfd;
        err = tasks_memfd(p, &mfd);
        if (err < 0) {
                hc->exit = EXIT_FAIL;
                snprintf(hc->why, sizeof(hc->why), "cannot make the memfd of %zu tasks: %s", p->n_tasks,
                         strerror(-err));
                close(fd);
                return;
        }
        Hbg__ValidateRequest rq = HBG__VALIDATE_REQUEST__INIT;
        rq.tasks = p->n_tasks;
        rq.heap_size = o->heap;
        rq.task_window = o->window;
        env = (Hbg__Envelope)HBG__ENVELOPE__INIT;
        env.msg_case = HBG__ENVELOPE__MSG_VALIDATE_REQUEST;
        env.validate_request = &rq;
        err = wire_send(fd, &env, &mfd, 1, HBG_WIRE_MAX_MSG_DEFAULT);
        close(mfd);
        struct pollfd pf = { .fd = fd, .events = POLLIN };
        int fds[HBG_WIRE_MAX_FDS];
        unsigned nfds = 0;
        reply = NULL;
        if (err == 0 && poll(&pf, 1, VALIDATE_TIMEOUT_MS) <= 0)
                err = -ETIMEDOUT;
        if (err == 0)
                err = wire_recv(fd, 16u << 20, &reply, fds, 0, &nfds);
        close(fd);
        hc->exit = EXIT_FAIL;
        if (err < 0) {
                snprintf(hc->why, sizeof(hc->why), "no answer from hbgd: %s", strerror(-err));
                return;
        }
        if (reply->msg_case == HBG__ENVELOPE__MSG_ERROR) {
                /* An older hbgd does not know the request (EPROTO). */
                snprintf(hc->why, sizeof(hc->why), "hbgd refused the check: %s",
                         reply->error->message && reply->error->message[0] ? reply->error->message
                                                                            : hbg_strerror(reply->error->code));
                wire_free(reply);
                return;
        }
        if (reply->msg_case != HBG__ENVELOPE__MSG_VALIDATE_REPLY) {
                snprintf(hc->why, sizeof(hc->why), "unexpected answer from hbgd (message %d)", (int)reply->msg_case);
                wire_free(reply);
                return;
        }
        const Hbg__ValidateReply *r = reply->validate_reply;
        hc->ran = true;
        hc->exit = 0;
        hc->heap_size = r->heap_size;
        hc->max_task_cost = r->max_task_cost;
        hc->omitted = r->errors_omitted;
        /* Tensors beyond hbgd's heap first (the tasks' errors follow). */
        check_heap(p, r->heap_size, o->heap ? "the asked" : "hbgd's default");
        for (size_t i = 0; i < r->n_errors; i++) {
                const Hbg__TaskError *e = r->errors[i];
                char path[64];
                if (e->task >= p->n_tasks)
                        continue;       /* not one we sent */
                snprintf(path, sizeof(path), "$.tasks[%" PRIu32 "]", e->task);
                graph_file_error(p, path, e->message && e->message[0] ? e->message : hbg_strerror(e->code), "hbgd");
        }
        wire_free(reply);
}

/* --dry-run, --dot: the file compiled against a heap laid out as
 * hbg_tensor_alloc() would, nothing run. --dry-run then has hbgd check
 * every task (ask_hbgd()); without hbgd, the file's own rules only, and
 * the answer says what was not checked (exit status 3, or 4). */
static int run_offline(const struct ctl_opts *o, struct plan *p, int64_t compile_ns) {
        uint64_t used = layout_offline(p);
        int64_t t0 = clock_now_ns();
        compile_tasks(p);
        if (o->heap && used > o->heap)
                check_heap(p, o->heap, "the asked");
        compile_ns += clock_now_ns() - t0;
        size_t edges = 0;
        bool to_stdout = o->dot && strcmp(o->dot, "-") == 0;
        if (o->dot && graph_file_n_errors(p) == 0) {
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
        struct hbgd_check hc = { .exit = 0 };
        if (o->dry_run) {
                t0 = clock_now_ns();
                ask_hbgd(o, p, &hc);
        }
        int64_t check_ns = o->dry_run ? clock_now_ns() - t0 : 0;
        size_t n_err = graph_file_n_errors(p);
        int rc = n_err ? EXIT_FAIL : hc.ran || !o->dry_run ? 0 : hc.exit;
        /* What was not checked, and why. */
        static const char unchecked[] =
                "hbgd's checks (kernels' own rules such as gemm shapes, the heap size, the per-task work limit)";
        if (n_err)
                print_errors(p, EXIT_FAIL);
        if (hc.omitted && !opt_json)
                fprintf(stderr, "hbgctl: and %" PRIu64 " more tasks hbgd refused\n", hc.omitted);
        if (o->dry_run && !hc.ran && !opt_json)
                fprintf(stderr, "hbgctl: not checked: %s: %s\n", unchecked, hc.why);
        if (opt_json) {
                json_object *res = json_object_new_object();
                json_object_object_add(res, "status", json_object_new_string(n_err ? "error" : rc ? "unchecked" : "ok"));
                if (n_err)
                        json_object_object_add(res, "error", ctl_error_json(EXIT_FAIL));
                json_object_object_add(res, "tasks", json_object_new_uint64(p->n_tasks));
                json_object_object_add(res, "compile_us", json_object_new_int64(compile_ns / 1000));
                json_object_object_add(res, "run", json_object_new_boolean(false));
                if (o->dry_run) {
                        json_object *by = json_object_new_array();
                        json_object_array_add(by, json_object_new_string("hbgctl"));
                        if (hc.ran)
                                json_object_array_add(by, json_object_new_string("hbgd"));
                        json_object_object_add(res, "checked_by", by);
                        json_object_object_add(res, "not_checked",
                                               hc.ran ? NULL : json_object_new_string(unchecked));
                        json_object_object_add(res, "not_checked_why", hc.ran ? NULL : json_object_new_string(hc.why));
                        json_object_object_add(res, "heap_size", hc.ran ? json_object_new_uint64(hc.heap_size) : NULL);
                        json_object_object_add(res, "errors", n_err ? json_object_get(p->errors) : json_object_new_array());
                        json_object_object_add(res, "errors_omitted", json_object_new_uint64(hc.omitted));
                } else if (n_err) {
                        json_object_object_add(res, "errors", json_object_get(p->errors));
                }
                if (o->dot && !n_err) {
                        json_object_object_add(res, "dot", json_object_new_string(o->dot));
                        json_object_object_add(res, "edges", json_object_new_uint64(edges));
                }
                print_json(res);
                json_object_put(res);
        } else if (!to_stdout && !n_err) {
                printf("%s: %zu tasks checked by %s in %.3f ms, not run", rc ? "unchecked" : "ok", p->n_tasks,
                       hc.ran ? "hbgctl and hbgd" : "hbgctl", (double)(compile_ns + check_ns) / 1e6);
                if (hc.ran)
                        printf(" (heap %" PRIu64 " bytes)", hc.heap_size);
                if (o->dot)
                        printf("; %zu dependencies written to %s", edges, o->dot);
                printf("\n");
        }
        return rc;
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
                        run_json_error(rc, NULL);
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
                run_json_error(rc, NULL);
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
                        return run_error_code(p, err, msg, NULL);
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
                        return run_error_code(p, err, msg, graph_file_task_name(p, i, nb, sizeof(nb)));
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
        return run_error_code(p, err, msg, NULL);
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
                printf("ok: %zu tasks in %.3f ms (compiled in %.3f ms before)\n", p->n_tasks, elapsed / 1e3,
                       (double)compile_ns / 1e6);
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
                return run_error(p, p->err, NULL);
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
                        layout_offline(p);
                        compile_tasks(p);
                }
                return p->errors ? file_errors(p) : run_error(p, p->err, NULL);
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
        if (compile_tasks(p) < 0) {
                rc = p->errors ? file_errors(p) : run_error(p, p->err, NULL);
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
 * protocol 1.3, or with --dot alone, which needs no hbgd): the built-ins
 * of this build, and p->kernels_note says so. Quiet: the run or the dry
 * run reports hbgd's absence its own way. */
static void fetch_kernels(const struct ctl_opts *o, struct plan *p) {
        if (o->dot && !o->dry_run) {
                snprintf(p->kernels_note, sizeof(p->kernels_note),
                         "checked against the built-in kernels only (--dot alone does not ask hbgd)");
                return;
        }
        snprintf(p->kernels_note, sizeof(p->kernels_note),
                 "checked against the built-in kernels only (hbgd on %s did not list its kernels)", o->socket);
        /* A socket we may not open: no connection (run_connect() explains
         * it without a refusal in hbgd's log). */
        if (faccessat(AT_FDCWD, o->socket, W_OK, AT_EACCESS) < 0)
                return;
        ctl_errors_quiet(true);
        int fd = ctl_connect(o->socket);
        Hbg__Envelope *reply = NULL, env;
        Hbg__Hello hello;
        struct ctl_failure fail;
        uint32_t minor = 0;
        if (fd >= 0) {
                wire_hello(&env, &hello, "hbgctl");
                if (ctl_roundtrip(fd, &env, &reply, &fail) == 0 && reply->msg_case == HBG__ENVELOPE__MSG_HELLO)
                        minor = reply->hello->version_minor;
                wire_free(reply);
                reply = NULL;
        }
        if (fd >= 0 && minor >= KERNEL_TABLE_MINOR) {
                Hbg__StatusRequest rq = HBG__STATUS_REQUEST__INIT;
                rq.kind = HBG__STATUS_KIND__STATUS_KERNELS;
                env = (Hbg__Envelope)HBG__ENVELOPE__INIT;
                env.msg_case = HBG__ENVELOPE__MSG_STATUS_REQUEST;
                env.status_request = &rq;
                if (ctl_roundtrip(fd, &env, &reply, &fail) == 0 && reply->msg_case == HBG__ENVELOPE__MSG_STATUS_REPLY) {
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
                rc = o->dot || o->dry_run ? run_offline(o, &p, compile_ns) : run_online(o, &p, compile_ns);
        graph_file_free(&p);
        return rc;
}
