/* SPDX-License-Identifier: MIT */
/* hbgctl run --dry-run and --dot (ctl/run_dry.h): the plan laid out as an
 * empty heap would hold it, checked by hbgctl and, through a
 * validate-only request (docs/PROTOCOL.md), by hbgd, without a session. */
#include "ctl/run_dry.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <stdarg.h>
#include <sys/mman.h>
#include <unistd.h>

#include "ctl/daemon_conn.h"
#include "ctl/dot.h"
#include "ctl/error.h"
#include "ctl/graph_read.h"
#include "ctl/output.h"
#include "ctl/run_report.h"
#include "proto/kernel_table.h"
#include "shm/layout.h"
#include "shm/producer.h"
#include "common/clock.h"

/* Pass 2 of the graph file: every task as an hbg_task, before the run
 * (those with errors of pass 1 left out, as zero tasks). Every error
 * noted; -EINVAL if any (-ENOMEM: no room for the tasks). */
int run_compile(struct plan *p) {
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

/* The tensors laid out as hbg_tensor_alloc() would (64-byte aligned, in
 * file order) in an empty heap; the bytes they take. */
uint64_t run_dry_layout(struct plan *p) {
        uint64_t off = 0;
        for (size_t i = 0; i < p->n_tensors; i++) {
                off = (off + 63) & ~(uint64_t)63;
                p->tensors[i].t = (hbg_tensor){ off, p->tensors[i].len * 4 };
                off += p->tensors[i].len * 4;
        }
        return off;
}

/* Tensors that do not fit a heap of heap_size bytes (laid out as
 * run_dry_layout() did), each an error that names the option. */
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
        producer_task_encode(&rt->desc, rt->payload.fanins, &rt->payload.args, (uint64_t)i + 1, &r, fanins, nf);
}

/* Compiled tasks first .. first + n - 1 in a memfd sealed as hbgd
 * requires. */
static int tasks_memfd(const struct plan *p, size_t first, size_t n, int *ret_fd) {
        int fd = memfd_create("hbgctl-dry-run", MFD_CLOEXEC | MFD_ALLOW_SEALING);
        if (fd < 0)
                return -errno;
        size_t bytes = n * sizeof(struct hbg_recorded_task);
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
        for (size_t i = 0; i < n; i++)
                encode_task(p, first + i, &m[i]);
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
        bool ran;                   /* hbgd answered: validated the tasks, or refused them as a run */
        int exit;                   /* else: why not, as an exit status */
        char why[512];              /* and in words */
        uint64_t heap_size, max_task_cost, omitted;
};

/* hbgd's validate-only request (docs/PROTOCOL.md): its errors noted at
 * their tasks' paths. hbgd validates on its slow-work thread: a big file
 * may wait behind other users' work. */
#define VALIDATE_TIMEOUT_MS 120000
/* The first protocol minor with ValidateRequest (proto/wire.h). */
#define VALIDATE_MINOR 2u

/* hbgd could not check: why, and the exit status of that. */
static void not_checked(struct hbgd_check *hc, int exit, const char *fmt, ...)
        __attribute__((format(printf, 3, 4)));
static void not_checked(struct hbgd_check *hc, int exit, const char *fmt, ...) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(hc->why, sizeof(hc->why), fmt, ap);
        va_end(ap);
        hc->exit = exit;
}

/* Tasks first .. first + n - 1 validated by hbgd on connection fd: their
 * errors noted; -1 when hbgd did not check them (hc says why, or the
 * file's error as a run's session would refuse it is noted). */
static int ask_piece(const struct ctl_opts *o, struct plan *p, struct hbgd_check *hc, int fd, size_t first,
                     size_t n) {
        struct ctl_failure fail;
        int mfd = -1;
        int err = tasks_memfd(p, first, n, &mfd);
        if (err < 0) {
                not_checked(hc, EXIT_FAIL, "cannot make the memfd of %zu tasks: %s", n, strerror(-err));
                return -1;
        }
        Hbg__ValidateRequest rq = HBG__VALIDATE_REQUEST__INIT;
        rq.tasks = n;
        rq.first_task = first;
        rq.heap_size = o->heap;
        rq.task_window = o->window;
        Hbg__Envelope env = HBG__ENVELOPE__INIT, *reply = NULL;
        env.msg_case = HBG__ENVELOPE__MSG_VALIDATE_REQUEST;
        env.validate_request = &rq;
        ctl_errors_quiet(true);
        err = ctl_roundtrip(fd, &env, mfd, VALIDATE_TIMEOUT_MS, &reply, &fail);
        ctl_errors_quiet(false);
        close(mfd);
        if (err < 0 && fail.at == CTL_AT_HBGD && ctl_exit_status(&fail) == EXIT_FAIL) {
                /* Refused as the run's session would be (a window or
                 * heap above hbgd's limits, too many tasks): the file
                 * as run with these options has this error. */
                hc->ran = true;
                graph_file_error(p, "$", fail.message, "hbgd");
                return -1;
        }
        if (err < 0) {
                /* hbgd went away, did not answer in time, or refused as
                 * it refuses a connection (stopping). */
                not_checked(hc, ctl_exit_status(&fail), "%s%s",
                            fail.at == CTL_AT_HBGD ? "hbgd refused the request: " : "no answer from hbgd: ",
                            fail.at == CTL_AT_HBGD ? fail.message : strerror(-fail.err));
                hc->ran = false;
                return -1;
        }
        if (reply->msg_case != HBG__ENVELOPE__MSG_VALIDATE_REPLY) {
                not_checked(hc, EXIT_FAIL, "unexpected answer from hbgd (message %d)", (int)reply->msg_case);
                hc->ran = false;
                wire_free(reply);
                return -1;
        }
        const Hbg__ValidateReply *r = reply->validate_reply;
        /* Tensors beyond hbgd's heap first (the tasks' errors follow). */
        if (!hc->ran)
                check_heap(p, r->heap_size, o->heap ? "the asked" : "hbgd's default");
        hc->ran = true;
        hc->heap_size = r->heap_size;
        hc->max_task_cost = r->max_task_cost;
        hc->omitted += r->errors_omitted;
        for (size_t i = 0; i < r->n_errors; i++) {
                const Hbg__TaskError *e = r->errors[i];
                char path[64];
                if (e->task >= n)
                        continue;       /* not one we sent */
                snprintf(path, sizeof(path), "$.tasks[%zu]", first + e->task);
                graph_file_error(p, path, e->message && e->message[0] ? e->message : hbg_strerror(e->code), "hbgd");
        }
        wire_free(reply);
        return 0;
}

static void ask_hbgd(const struct ctl_opts *o, struct plan *p, struct hbgd_check *hc) {
        struct ctl_failure fail;
        uint32_t minor = 0;
        /* A failure is said once, below: as an error of the file or as
         * why hbgd's checks did not run. */
        ctl_errors_quiet(true);
        int fd = ctl_open(o->socket, &minor, &fail);
        ctl_errors_quiet(false);
        if (fd < 0) {
                int exit = ctl_exit_status(&fail);
                if (fail.at == CTL_AT_CONNECT)
                        not_checked(hc, exit, "%s on %s",
                                    exit == EXIT_ACCESS ? "this user may not use hbgd" : "hbgd is not running",
                                    o->socket);
                else
                        not_checked(hc, exit, "hbgd on %s did not take the connection%s%s", o->socket,
                                    fail.message[0] ? ": " : "", fail.message);
                return;
        }
        if (minor < VALIDATE_MINOR) {
                /* It would answer with Error{-EPROTO} and hang up. */
                not_checked(hc, EXIT_FAIL, "hbgd on %s speaks protocol %u.%u, which has no validate request",
                            o->socket, HBG_PROTO_MAJOR, minor);
                close(fd);
                return;
        }
        /* In pieces of at most HBG_VALIDATE_MAX_TASKS, each saying where
         * it begins; an older hbgd takes the graph whole (up to its
         * max_recorded_tasks). */
        size_t piece = minor >= HBG_PROTO_MINOR_VALIDATE_PIECES ? HBG_VALIDATE_MAX_TASKS : p->n_tasks;
        for (size_t first = 0; first < p->n_tasks || first == 0; first += piece) {
                size_t n = p->n_tasks - first < piece ? p->n_tasks - first : piece;
                if (ask_piece(o, p, hc, fd, first, n) < 0) {
                        if (first > 0 && !hc->ran) {
                                /* The pieces before were checked: say which were not. */
                                char why[sizeof(hc->why)];
                                snprintf(why, sizeof(why), "%s", hc->why);
                                snprintf(hc->why, sizeof(hc->why), "tasks %zu to %zu: %.400s", first, p->n_tasks - 1,
                                         why);
                        }
                        break;
                }
                if (n == 0)
                        break;
        }
        close(fd);
}

/* --dry-run, --dot: the file compiled against a heap laid out as
 * hbg_tensor_alloc() would, nothing run. --dry-run then has hbgd check
 * every task (ask_hbgd()); without hbgd, the file's own rules only, and
 * the answer says what was not checked (exit status 3, or 4). */
int run_dry(const struct ctl_opts *o, struct plan *p, int64_t compile_ns) {
        uint64_t used = run_dry_layout(p);
        int64_t t0 = clock_now_ns();
        run_compile(p);
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
                        return run_fail_code(p, -errno, msg, NULL);
                }
                int err = dot_write(p, f, &edges);
                if (!to_stdout && fclose(f) != 0 && err == 0)
                        err = -errno;
                if (err < 0) {
                        char msg[512];
                        snprintf(msg, sizeof(msg), "cannot write %s: %s", o->dot, strerror(-err));
                        return run_fail_code(p, err, msg, NULL);
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
                run_print_errors(p, EXIT_FAIL, hc.omitted);
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
                        json_object_object_add(res, "heap_size",
                                               hc.heap_size ? json_object_new_uint64(hc.heap_size) : NULL);
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
                printf("%s: %zu task%s checked by %s in %.3f ms, not run", rc ? "unchecked" : "ok", p->n_tasks,
                       p->n_tasks == 1 ? "" : "s", hc.ran ? "hbgctl and hbgd" : "hbgctl",
                       (double)(compile_ns + check_ns) / 1e6);
                if (hc.ran)
                        printf(" (heap %" PRIu64 " bytes)", hc.heap_size);
                if (o->dot)
                        printf("; %zu dependencies written to %s", edges, o->dot);
                printf("\n");
        }
        return rc;
}
