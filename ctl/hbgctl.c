/* SPDX-License-Identifier: MIT */
/*
 * hbgctl: show what hbgd is doing, and run graph files.
 *   hbgctl [--socket PATH] [--json] [status|sessions|graphs|threads|kernels|version]
 *   hbgctl [--socket PATH] [--json] run FILE          (docs/GRAPH_FILES.md)
 * Options are accepted before or after the verb.
 * Exit: 0 ok, 1 failure, 2 bad usage, 3 hbgd not running.
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <poll.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include <json-c/json.h>

#include "hbg/hbg.h"
#include "proto/wire.h"
#include "shm/kernel_sig.h"

#ifndef HBG_VERSION
#define HBG_VERSION "0.0.0"
#endif

#define DEFAULT_SOCKET "/run/hbgd/hbgd.sock"

enum { EXIT_FAIL = 1, EXIT_USAGE = 2, EXIT_NOT_RUNNING = 3 };

static bool opt_json;

static int connect_to(const char *path) {
        struct sockaddr_un sa = { .sun_family = AF_UNIX };
        if (strlen(path) >= sizeof(sa.sun_path)) {
                fprintf(stderr, "hbgctl: socket path too long: %s\n", path);
                return -EXIT_USAGE;
        }
        strcpy(sa.sun_path, path);
        int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
        if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
                int err = errno;
                if (fd >= 0)
                        close(fd);
                fprintf(stderr, "hbgctl: hbgd is not running on %s: %s\n", path, strerror(err));
                return -EXIT_NOT_RUNNING;
        }
        return fd;
}

/* Send one envelope, receive one (blocking with a timeout). */
static Hbg__Envelope *roundtrip(int fd, Hbg__Envelope *env) {
        if (wire_send(fd, env, NULL, 0, HBG_WIRE_MAX_MSG_DEFAULT) < 0) {
                fprintf(stderr, "hbgctl: cannot talk to hbgd: %s\n", strerror(errno));
                return NULL;
        }
        struct pollfd p = { .fd = fd, .events = POLLIN };
        if (poll(&p, 1, 10000) <= 0) {
                fprintf(stderr, "hbgctl: hbgd did not answer within 10 s\n");
                return NULL;
        }
        Hbg__Envelope *reply = NULL;
        int fds[HBG_WIRE_MAX_FDS];
        unsigned nfds = 0;
        int err = wire_recv(fd, 16u << 20, &reply, fds, 0, &nfds);
        if (err < 0) {
                fprintf(stderr, "hbgctl: bad reply from hbgd: %s\n", strerror(-err));
                return NULL;
        }
        if (reply->msg_case == HBG__ENVELOPE__MSG_ERROR) {
                fprintf(stderr, "hbgctl: hbgd: %s\n", reply->error->message);
                wire_free(reply);
                return NULL;
        }
        return reply;
}

/* ------------------------------------------------------------ tables */

static void print_daemon(const Hbg__DaemonStatus *d) {
        printf("hbgd %s, pid %u, up %" PRIu64 " s, %s\n", d->version, d->pid, d->uptime_ms / 1000,
               d->io_backend);
        printf("threads   %u\nclusters  %u\ncompletion_mode %s\nsessions  %u\ntasks     %" PRIu64
               " completed\ngraphs    %" PRIu64 " retired, %" PRIu64 " failed\n",
               d->threads, d->clusters, d->completion_mode && d->completion_mode[0] ? d->completion_mode : "?",
               d->sessions, d->tasks_completed, d->graphs_retired, d->graphs_failed);
}

static void print_threads(const Hbg__StatusReply *r) {
        printf("%-6s %8s %12s %12s %12s %10s %10s %10s %8s %8s\n", "thread", "clusters", "classified",
               "dispatched", "published", "failsafe", "advances", "cas_fail", "parks", "wakeups");
        for (size_t i = 0; i < r->n_threads; i++) {
                const Hbg__ThreadStatus *t = r->threads[i];
                printf("%-6u %8u %12" PRIu64 " %12" PRIu64 " %12" PRIu64 " %10" PRIu64 " %10" PRIu64
                       " %10" PRIu64 " %8" PRIu64 " %8" PRIu64 "\n",
                       t->index, t->clusters, t->classified, t->dispatched, t->published,
                       t->failsafe_pushes, t->watermark_advances, t->watermark_cas_failures,
                       t->parks, t->wakeups);
        }
}

static void print_sessions(const Hbg__StatusReply *r) {
        printf("%-8s %-8s %-6s %-24s %12s %12s %10s %8s\n", "session", "pid", "uid", "name",
               "submitted", "watermark", "graphs", "failed");
        for (size_t i = 0; i < r->n_sessions; i++) {
                const Hbg__SessionStatus *s = r->sessions[i];
                printf("%-8" PRIu64 " %-8u %-6u %-24s %12" PRIu64 " %12" PRIu64 " %10" PRIu64
                       " %8" PRIu64 "\n",
                       s->session_id, s->pid, s->uid, s->name, s->submitted, s->watermark,
                       s->graphs_retired, s->graphs_failed);
        }
}

static void print_graphs(const Hbg__StatusReply *r) {
        printf("%-8s %12s %12s %12s %12s\n", "session", "submitted", "retired", "failed",
               "watermark");
        for (size_t i = 0; i < r->n_graphs; i++) {
                const Hbg__GraphStatus *g = r->graphs[i];
                printf("%-8" PRIu64 " %12" PRIu64 " %12" PRIu64 " %12" PRIu64 " %12" PRIu64 "\n",
                       g->session_id, g->graphs_submitted, g->graphs_retired, g->graphs_failed,
                       g->watermark);
        }
}

static void print_kernels(const Hbg__StatusReply *r) {
        printf("%-4s %-18s %-10s %s\n", "id", "kernel", "splittable", "arguments");
        for (size_t i = 0; i < r->n_kernels; i++) {
                const Hbg__KernelInfo *k = r->kernels[i];
                printf("%-4u %-18s %-10s ", k->id, k->name, k->splittable ? "yes" : "no");
                for (size_t j = 0; j < k->n_args; j++)
                        printf("%s%s %s", j ? ", " : "", k->args[j]->kind, k->args[j]->name);
                printf("\n");
        }
}

/* ------------------------------------------------------------ protobuf -> JSON */

static json_object *pb_to_json(const ProtobufCMessage *m);

static json_object *pb_value(const ProtobufCFieldDescriptor *f, const void *p) {
        switch (f->type) {
        case PROTOBUF_C_TYPE_INT32:
        case PROTOBUF_C_TYPE_SINT32:
        case PROTOBUF_C_TYPE_SFIXED32:
                return json_object_new_int(*(const int32_t *)p);
        case PROTOBUF_C_TYPE_UINT32:
        case PROTOBUF_C_TYPE_FIXED32:
                return json_object_new_int64(*(const uint32_t *)p);
        case PROTOBUF_C_TYPE_INT64:
        case PROTOBUF_C_TYPE_SINT64:
        case PROTOBUF_C_TYPE_SFIXED64:
                return json_object_new_int64(*(const int64_t *)p);
        case PROTOBUF_C_TYPE_UINT64:
        case PROTOBUF_C_TYPE_FIXED64:
                return json_object_new_uint64(*(const uint64_t *)p);
        case PROTOBUF_C_TYPE_BOOL:
                return json_object_new_boolean(*(const protobuf_c_boolean *)p);
        case PROTOBUF_C_TYPE_FLOAT:
                return json_object_new_double(*(const float *)p);
        case PROTOBUF_C_TYPE_DOUBLE:
                return json_object_new_double(*(const double *)p);
        case PROTOBUF_C_TYPE_ENUM: {
                const ProtobufCEnumValue *v = protobuf_c_enum_descriptor_get_value(
                        f->descriptor, *(const int *)p);
                return v ? json_object_new_string(v->name) : json_object_new_int(*(const int *)p);
        }
        case PROTOBUF_C_TYPE_STRING: {
                const char *s = *(char *const *)p;
                return json_object_new_string(s ? s : "");
        }
        case PROTOBUF_C_TYPE_MESSAGE: {
                const ProtobufCMessage *sub = *(ProtobufCMessage *const *)p;
                return sub ? pb_to_json(sub) : NULL;
        }
        default:
                return NULL;
        }
}

static size_t pb_size(const ProtobufCFieldDescriptor *f) {
        switch (f->type) {
        case PROTOBUF_C_TYPE_INT64:
        case PROTOBUF_C_TYPE_SINT64:
        case PROTOBUF_C_TYPE_SFIXED64:
        case PROTOBUF_C_TYPE_UINT64:
        case PROTOBUF_C_TYPE_FIXED64:
        case PROTOBUF_C_TYPE_DOUBLE:
                return 8;
        case PROTOBUF_C_TYPE_BOOL:
                return sizeof(protobuf_c_boolean);
        case PROTOBUF_C_TYPE_ENUM:
                return sizeof(int);
        case PROTOBUF_C_TYPE_STRING:
        case PROTOBUF_C_TYPE_MESSAGE:
        case PROTOBUF_C_TYPE_BYTES:
                return sizeof(void *);
        default:
                return 4;
        }
}

static json_object *pb_to_json(const ProtobufCMessage *m) {
        json_object *o = json_object_new_object();
        const ProtobufCMessageDescriptor *d = m->descriptor;
        for (unsigned i = 0; i < d->n_fields; i++) {
                const ProtobufCFieldDescriptor *f = &d->fields[i];
                const char *base = (const char *)m;
                if (f->label == PROTOBUF_C_LABEL_REPEATED) {
                        size_t n = *(const size_t *)(base + f->quantifier_offset);
                        const char *arr = *(char *const *)(base + f->offset);
                        json_object *a = json_object_new_array();
                        for (size_t j = 0; j < n; j++) {
                                json_object *v = pb_value(f, arr + j * pb_size(f));
                                if (v)
                                        json_object_array_add(a, v);
                        }
                        json_object_object_add(o, f->name, a);
                } else {
                        json_object *v = pb_value(f, base + f->offset);
                        if (v)
                                json_object_object_add(o, f->name, v);
                }
        }
        return o;
}

static void print_json(json_object *o) {
        printf("%s\n", json_object_to_json_string_ext(o, JSON_C_TO_STRING_PRETTY |
                                                             JSON_C_TO_STRING_SPACED |
                                                             JSON_C_TO_STRING_NOSLASHESCAPE));
}

static int cmd_status(const char *path, Hbg__StatusKind kind) {
        int fd = connect_to(path);
        if (fd < 0)
                return -fd;
        Hbg__Hello hello = HBG__HELLO__INIT;
        hello.version_major = HBG_PROTO_MAJOR;
        hello.version_minor = HBG_PROTO_MINOR;
        hello.name = (char *)"hbgctl";
        Hbg__Envelope env = HBG__ENVELOPE__INIT;
        env.msg_case = HBG__ENVELOPE__MSG_HELLO;
        env.hello = &hello;
        Hbg__Envelope *reply = roundtrip(fd, &env);
        if (!reply) {
                close(fd);
                return EXIT_FAIL;
        }
        wire_free(reply);
        Hbg__StatusRequest rq = HBG__STATUS_REQUEST__INIT;
        rq.kind = kind;
        env = (Hbg__Envelope)HBG__ENVELOPE__INIT;
        env.msg_case = HBG__ENVELOPE__MSG_STATUS_REQUEST;
        env.status_request = &rq;
        reply = roundtrip(fd, &env);
        close(fd);
        if (!reply)
                return EXIT_FAIL;
        if (reply->msg_case != HBG__ENVELOPE__MSG_STATUS_REPLY) {
                fprintf(stderr, "hbgctl: unexpected reply from hbgd (message %d)\n",
                        (int)reply->msg_case);
                wire_free(reply);
                return EXIT_FAIL;
        }
        const Hbg__StatusReply *r = reply->status_reply;
        if (opt_json) {
                json_object *o = pb_to_json(&r->base);
                print_json(o);
                json_object_put(o);
        } else if (kind == HBG__STATUS_KIND__STATUS_DAEMON) {
                if (r->daemon)
                        print_daemon(r->daemon);
                if (r->n_sessions) {
                        printf("\n");
                        print_sessions(r);
                }
        } else if (kind == HBG__STATUS_KIND__STATUS_THREADS) {
                print_threads(r);
        } else if (kind == HBG__STATUS_KIND__STATUS_SESSIONS) {
                print_sessions(r);
        } else if (kind == HBG__STATUS_KIND__STATUS_GRAPHS) {
                print_graphs(r);
        } else if (kind == HBG__STATUS_KIND__STATUS_KERNELS) {
                print_kernels(r);
        }
        wire_free(reply);
        return 0;
}

/* ------------------------------------------------------------ graph files */

enum { INIT_ZERO, INIT_FILL, INIT_IOTA };

struct gtensor {
        const char *name;
        uint64_t len;
        int init;
        double value, start, step;
        hbg_tensor t;   /* offset valid once allocated */
};

struct plan {
        const char *file;
        json_object *root, *tasks, *outputs;
        struct gtensor *tensors;
        size_t n_tensors;
        json_object *tensor_index;   /* name -> index */
        json_object *task_index;     /* task name -> task index */
        size_t n_tasks;
        uint64_t *ids;               /* task index -> id (pass 2) */
        char err[512];
};

static int perr(struct plan *p, const char *path, const char *fmt, ...)
        __attribute__((format(printf, 3, 4)));
static int perr(struct plan *p, const char *path, const char *fmt, ...) {
        int n = snprintf(p->err, sizeof(p->err), "%s: %s: ", p->file, path);
        va_list ap;
        va_start(ap, fmt);
        if (n >= 0 && (size_t)n < sizeof(p->err))
                vsnprintf(p->err + n, sizeof(p->err) - (size_t)n, fmt, ap);
        va_end(ap);
        return -1;
}

static const char *type_name(json_object *o) {
        return o ? json_type_to_name(json_object_get_type(o)) : "null";
}

/* Keys of object o must be among the NULL-terminated list. */
static int check_keys(struct plan *p, json_object *o, const char *path, const char *const *keys) {
        json_object_object_foreach(o, k, v) {
                (void)v;
                bool ok = false;
                for (size_t i = 0; keys[i]; i++)
                        ok = ok || strcmp(keys[i], k) == 0;
                if (!ok)
                        return perr(p, path, "unknown key \"%s\"", k);
        }
        return 0;
}

static int get_number(struct plan *p, json_object *o, const char *path, double *ret) {
        json_type t = json_object_get_type(o);
        if (t != json_type_int && t != json_type_double)
                return perr(p, path, "expected a number, got %s", type_name(o));
        *ret = json_object_get_double(o);
        return 0;
}

static int get_uint(struct plan *p, json_object *o, const char *path, uint64_t max, uint64_t *ret) {
        if (json_object_get_type(o) != json_type_int)
                return perr(p, path, "expected an integer, got %s", type_name(o));
        const char *s = json_object_get_string(o);
        if (s[0] == '-')
                return perr(p, path, "expected a non-negative integer, got %s", s);
        errno = 0;
        uint64_t v = strtoull(s, NULL, 10);
        if (errno || v > max)
                return perr(p, path, "%s is out of range (at most %" PRIu64 ")", s, max);
        *ret = v;
        return 0;
}

/* "name" or "name[lo:hi]" (elements) or, with single, "name[i]". */
static int parse_ref(struct plan *p, const char *s, const char *path, bool single, hbg_tensor *ret) {
        const char *br = strchr(s, '[');
        size_t nl = br ? (size_t)(br - s) : strlen(s);
        char name[256];
        if (nl == 0 || nl >= sizeof(name))
                return perr(p, path, "\"%s\" is not a tensor name", s);
        memcpy(name, s, nl);
        name[nl] = 0;
        json_object *ix;
        if (!json_object_object_get_ex(p->tensor_index, name, &ix))
                return perr(p, path, "unknown tensor \"%s\" (not in \"tensors\")", name);
        const struct gtensor *t = &p->tensors[json_object_get_int(ix)];
        uint64_t lo = 0, hi = t->len;
        if (br) {
                char *end;
                const char *q = br + 1;
                if (*q < '0' || *q > '9')
                        return perr(p, path, "bad range in \"%s\": expected name[lo:hi]", s);
                errno = 0;
                lo = strtoull(q, &end, 10);
                if (*end == ']' && single) {
                        hi = lo + 1;
                } else {
                        if (*end != ':' || end[1] < '0' || end[1] > '9')
                                return perr(p, path, "bad range in \"%s\": expected %s", s,
                                            single ? "name[i]" : "name[lo:hi]");
                        hi = strtoull(end + 1, &end, 10);
                }
                if (errno || *end != ']' || end[1])
                        return perr(p, path, "bad range in \"%s\": expected %s", s,
                                    single ? "name[i]" : "name[lo:hi]");
                if (lo >= hi || hi > t->len)
                        return perr(p, path,
                                    "bad range in \"%s\": need lo < hi <= %" PRIu64
                                    " (the length of %s)",
                                    s, t->len, name);
        }
        if (single && hi - lo != 1)
                return perr(p, path, "\"%s\" must be one element, e.g. %s[0]", s, name);
        return hbg_tensor_slice_f32(t->t, lo, hi, ret) < 0
                       ? perr(p, path, "bad range in \"%s\"", s)
                       : 0;
}

static int parse_tensors(struct plan *p) {
        json_object *ts;
        if (!json_object_object_get_ex(p->root, "tensors", &ts))
                return perr(p, "$", "missing \"tensors\"");
        if (!json_object_is_type(ts, json_type_object))
                return perr(p, "$.tensors", "expected an object, got %s", type_name(ts));
        size_t n = (size_t)json_object_object_length(ts), i = 0;
        p->tensors = calloc(n ? n : 1, sizeof(*p->tensors));
        p->tensor_index = json_object_new_object();
        if (!p->tensors || !p->tensor_index)
                return perr(p, "$.tensors", "out of memory");
        static const char *const keys[] = { "len", "init", "value", "start", "step", NULL };
        json_object_object_foreach(ts, name, spec) {
                char path[320];
                snprintf(path, sizeof(path), "$.tensors.%s", name);
                if (!name[0] || strchr(name, '[') || strlen(name) >= 256)
                        return perr(p, path, "bad tensor name");
                if (!json_object_is_type(spec, json_type_object))
                        return perr(p, path, "expected an object, got %s", type_name(spec));
                if (check_keys(p, spec, path, keys) < 0)
                        return -1;
                struct gtensor *t = &p->tensors[i];
                t->name = name;
                t->step = 1.0;
                json_object *v;
                char sub[360];
                snprintf(sub, sizeof(sub), "%s.len", path);
                if (!json_object_object_get_ex(spec, "len", &v))
                        return perr(p, path, "missing \"len\"");
                if (get_uint(p, v, sub, UINT64_C(1) << 36, &t->len) < 0)
                        return -1;
                if (t->len == 0)
                        return perr(p, sub, "must be at least 1");
                t->init = INIT_ZERO;
                if (json_object_object_get_ex(spec, "init", &v)) {
                        snprintf(sub, sizeof(sub), "%s.init", path);
                        const char *s = json_object_is_type(v, json_type_string)
                                                ? json_object_get_string(v)
                                                : NULL;
                        if (!s)
                                return perr(p, sub, "expected a string, got %s", type_name(v));
                        if (strcmp(s, "zero") == 0)
                                t->init = INIT_ZERO;
                        else if (strcmp(s, "fill") == 0)
                                t->init = INIT_FILL;
                        else if (strcmp(s, "iota") == 0)
                                t->init = INIT_IOTA;
                        else
                                return perr(p, sub, "unknown init \"%s\" (zero, fill, iota)", s);
                }
                if (json_object_object_get_ex(spec, "value", &v)) {
                        snprintf(sub, sizeof(sub), "%s.value", path);
                        if (t->init != INIT_FILL)
                                return perr(p, sub, "\"value\" is only for \"init\": \"fill\"");
                        if (get_number(p, v, sub, &t->value) < 0)
                                return -1;
                } else if (t->init == INIT_FILL) {
                        return perr(p, path, "\"init\": \"fill\" needs \"value\"");
                }
                static const char *const iota_keys[] = { "start", "step" };
                double *iota_dst[] = { &t->start, &t->step };
                for (int k = 0; k < 2; k++)
                        if (json_object_object_get_ex(spec, iota_keys[k], &v)) {
                                snprintf(sub, sizeof(sub), "%s.%s", path, iota_keys[k]);
                                if (t->init != INIT_IOTA)
                                        return perr(p, sub, "\"%s\" is only for \"init\": \"iota\"",
                                                    iota_keys[k]);
                                if (get_number(p, v, sub, iota_dst[k]) < 0)
                                        return -1;
                        }
                t->t = (hbg_tensor){ 0, t->len * 4 };
                json_object_object_add(p->tensor_index, name, json_object_new_int((int)i));
                i++;
        }
        p->n_tensors = n;
        return 0;
}

/*
 * Build task i of the file into *t. Pass 1 (ids == NULL) only checks;
 * pass 2 uses the allocated tensors and the ids of earlier tasks.
 */
static int build_task(struct plan *p, size_t i, hbg_task *t) {
        json_object *o = json_object_array_get_idx(p->tasks, i), *v;
        char path[64], sub[96];
        snprintf(path, sizeof(path), "$.tasks[%zu]", i);
        if (!json_object_is_type(o, json_type_object))
                return perr(p, path, "expected an object, got %s", type_name(o));
        static const char *const keys[] = { "name", "kernel", "args", "scalars", "blocks",
                                            "lanes", "after", "when", NULL };
        if (check_keys(p, o, path, keys) < 0)
                return -1;
        *t = (hbg_task){ 0 };
        if (!json_object_object_get_ex(o, "kernel", &v))
                return perr(p, path, "missing \"kernel\"");
        snprintf(sub, sizeof(sub), "%s.kernel", path);
        if (!json_object_is_type(v, json_type_string))
                return perr(p, sub, "expected a string, got %s", type_name(v));
        const char *kname = json_object_get_string(v);
        const struct hbg_kernel_sig *sg = NULL;
        if (strcmp(kname, "dummy") != 0) {
                sg = hbg_kernel_sig_by_name(kname);
                if (!sg)
                        return perr(p, sub, "unknown kernel \"%s\" (see hbgctl kernels; \"dummy\" only orders)",
                                    kname);
                t->kernel = sg->name;
        }
        /* args */
        size_t want = sg ? sg->n_tensors : 0, n = 0;
        json_object *args = NULL;
        if (json_object_object_get_ex(o, "args", &args)) {
                snprintf(sub, sizeof(sub), "%s.args", path);
                if (!json_object_is_type(args, json_type_array))
                        return perr(p, sub, "expected an array, got %s", type_name(args));
                n = json_object_array_length(args);
        }
        if (n != want)
                return perr(p, path, "kernel %s takes %zu tensor argument%s, got %zu", kname, want,
                            want == 1 ? "" : "s", n);
        for (size_t a = 0; a < n; a++) {
                json_object *e = json_object_array_get_idx(args, a);
                snprintf(sub, sizeof(sub), "%s.args[%zu]", path, a);
                if (!json_object_is_type(e, json_type_string))
                        return perr(p, sub, "expected a string, got %s", type_name(e));
                if (parse_ref(p, json_object_get_string(e), sub, false, &t->args[a].tensor) < 0)
                        return -1;
                t->args[a].dir = (enum hbg_dir)sg->tensors[a].dir;
        }
        t->n_args = (uint8_t)n;
        /* scalars */
        want = sg ? sg->n_scalars : 0, n = 0;
        json_object *sc = NULL;
        if (json_object_object_get_ex(o, "scalars", &sc)) {
                snprintf(sub, sizeof(sub), "%s.scalars", path);
                if (!json_object_is_type(sc, json_type_array))
                        return perr(p, sub, "expected an array, got %s", type_name(sc));
                n = json_object_array_length(sc);
        }
        if (n != want)
                return perr(p, path, "kernel %s takes %zu scalar%s, got %zu", kname, want,
                            want == 1 ? "" : "s", n);
        for (size_t s = 0; s < n; s++) {
                json_object *e = json_object_array_get_idx(sc, s);
                snprintf(sub, sizeof(sub), "%s.scalars[%zu]", path, s);
                if (sg->scalars[s].kind == HBG_SCALAR_F32) {
                        double d;
                        if (get_number(p, e, sub, &d) < 0)
                                return -1;
                        t->scalars[s] = hbg_f32((float)d);
                } else if (sg->scalars[s].kind == HBG_SCALAR_U64) {
                        if (get_uint(p, e, sub, UINT64_MAX, &t->scalars[s]) < 0)
                                return -1;
                } else {
                        if (json_object_get_type(e) != json_type_int)
                                return perr(p, sub, "expected an integer, got %s", type_name(e));
                        errno = 0;
                        int64_t x = json_object_get_int64(e);
                        if (errno)
                                return perr(p, sub, "integer out of range");
                        t->scalars[s] = (uint64_t)x;
                }
        }
        t->n_scalars = (uint8_t)n;
        if (json_object_object_get_ex(o, "blocks", &v)) {
                uint64_t b;
                snprintf(sub, sizeof(sub), "%s.blocks", path);
                if (get_uint(p, v, sub, 4096, &b) < 0)
                        return -1;
                if (b == 0)
                        return perr(p, sub, "must be 1..4096");
                if (!sg && b != 1)
                        return perr(p, sub, "a dummy task has no blocks");
                t->blocks = (uint16_t)b;
        }
        if (json_object_object_get_ex(o, "lanes", &v)) {
                snprintf(sub, sizeof(sub), "%s.lanes", path);
                const char *s = json_object_is_type(v, json_type_string) ? json_object_get_string(v) : NULL;
                if (!s)
                        return perr(p, sub, "expected a string, got %s", type_name(v));
                if (!sg)
                        return perr(p, sub, "a dummy task has no lanes");
                if (strcmp(s, "aiv") == 0)
                        t->lanes = HBG_LANES_AIV;
                else if (strcmp(s, "aic") == 0)
                        t->lanes = HBG_LANES_AIC;
                else if (strcmp(s, "mix") == 0)
                        t->lanes = HBG_LANES_MIX;
                else
                        return perr(p, sub, "unknown lanes \"%s\" (aiv, aic, mix)", s);
        }
        if (json_object_object_get_ex(o, "when", &v)) {
                snprintf(sub, sizeof(sub), "%s.when", path);
                if (!json_object_is_type(v, json_type_string))
                        return perr(p, sub, "expected a string, got %s", type_name(v));
                if (parse_ref(p, json_object_get_string(v), sub, true, &t->predicate) < 0)
                        return -1;
                t->has_predicate = 1;
        }
        if (json_object_object_get_ex(o, "after", &v)) {
                snprintf(sub, sizeof(sub), "%s.after", path);
                if (!json_object_is_type(v, json_type_array))
                        return perr(p, sub, "expected an array, got %s", type_name(v));
                n = json_object_array_length(v);
                if (n > HBG_MAX_TASK_DEPS)
                        return perr(p, sub, "at most %d tasks", HBG_MAX_TASK_DEPS);
                for (size_t a = 0; a < n; a++) {
                        json_object *e = json_object_array_get_idx(v, a), *ix;
                        snprintf(sub, sizeof(sub), "%s.after[%zu]", path, a);
                        if (!json_object_is_type(e, json_type_string))
                                return perr(p, sub, "expected a string, got %s", type_name(e));
                        const char *dn = json_object_get_string(e);
                        if (!json_object_object_get_ex(p->task_index, dn, &ix) ||
                            (size_t)json_object_get_int64(ix) >= i)
                                return perr(p, sub, "\"%s\" is not the name of an earlier task", dn);
                        if (p->ids)
                                t->deps[a] = p->ids[json_object_get_int64(ix)];
                }
                t->n_deps = (uint8_t)n;
        }
        if (!p->ids && json_object_object_get_ex(o, "name", &v)) {
                snprintf(sub, sizeof(sub), "%s.name", path);
                if (!json_object_is_type(v, json_type_string))
                        return perr(p, sub, "expected a string, got %s", type_name(v));
                const char *nm = json_object_get_string(v);
                if (json_object_object_get_ex(p->task_index, nm, NULL))
                        return perr(p, sub, "task name \"%s\" is used twice", nm);
                json_object_object_add(p->task_index, nm, json_object_new_int64((int64_t)i));
        }
        return 0;
}

static int parse_plan(struct plan *p) {
        if (!json_object_is_type(p->root, json_type_object))
                return perr(p, "$", "expected an object, got %s", type_name(p->root));
        static const char *const keys[] = { "tensors", "tasks", "outputs", NULL };
        if (check_keys(p, p->root, "$", keys) < 0 || parse_tensors(p) < 0)
                return -1;
        if (!json_object_object_get_ex(p->root, "tasks", &p->tasks))
                return perr(p, "$", "missing \"tasks\"");
        if (!json_object_is_type(p->tasks, json_type_array))
                return perr(p, "$.tasks", "expected an array, got %s", type_name(p->tasks));
        p->n_tasks = json_object_array_length(p->tasks);
        if (p->n_tasks == 0)
                return perr(p, "$.tasks", "no tasks");
        p->task_index = json_object_new_object();
        for (size_t i = 0; i < p->n_tasks; i++) {
                hbg_task t;
                if (build_task(p, i, &t) < 0)
                        return -1;
        }
        if (json_object_object_get_ex(p->root, "outputs", &p->outputs)) {
                if (!json_object_is_type(p->outputs, json_type_array))
                        return perr(p, "$.outputs", "expected an array, got %s",
                                    type_name(p->outputs));
                for (size_t i = 0; i < json_object_array_length(p->outputs); i++) {
                        json_object *e = json_object_array_get_idx(p->outputs, i);
                        char sub[64];
                        hbg_tensor dummy;
                        snprintf(sub, sizeof(sub), "$.outputs[%zu]", i);
                        if (!json_object_is_type(e, json_type_string))
                                return perr(p, sub, "expected a string, got %s", type_name(e));
                        if (parse_ref(p, json_object_get_string(e), sub, false, &dummy) < 0)
                                return -1;
                }
        }
        return 0;
}

static int load_file(struct plan *p) {
        FILE *f = fopen(p->file, "r");
        if (!f) {
                snprintf(p->err, sizeof(p->err), "%s: %s", p->file, strerror(errno));
                return -1;
        }
        json_tokener *tok = json_tokener_new();
        json_tokener_set_flags(tok, JSON_TOKENER_STRICT);
        char buf[65536];
        size_t n, line = 1, col = 1;
        enum json_tokener_error jerr = json_tokener_continue;
        while (!p->root && (n = fread(buf, 1, sizeof(buf), f)) > 0) {
                p->root = json_tokener_parse_ex(tok, buf, (int)n);
                jerr = json_tokener_get_error(tok);
                size_t used = p->root || jerr != json_tokener_continue
                                      ? json_tokener_get_parse_end(tok) : n;
                for (size_t k = 0; k < used && k < n; k++) {
                        if (buf[k] == '\n')
                                line++, col = 1;
                        else
                                col++;
                }
                if (jerr != json_tokener_success && jerr != json_tokener_continue)
                        break;
                if (p->root) {
                        /* only white space may follow */
                        for (size_t k = used; k < n; k++)
                                if (buf[k] != ' ' && buf[k] != '\n' && buf[k] != '\t' && buf[k] != '\r') {
                                        snprintf(p->err, sizeof(p->err),
                                                 "%s:%zu:%zu: invalid JSON: text after the document",
                                                 p->file, line, col);
                                        jerr = json_tokener_error_parse_unexpected;
                                        break;
                                }
                }
        }
        bool rerr = ferror(f);
        fclose(f);
        json_tokener_free(tok);
        if (rerr) {
                snprintf(p->err, sizeof(p->err), "%s: read error", p->file);
                return -1;
        }
        if (p->root && jerr == json_tokener_success)
                return 0;
        if (!p->err[0]) {
                if (jerr == json_tokener_continue || jerr == json_tokener_success)
                        snprintf(p->err, sizeof(p->err), "%s:%zu:%zu: invalid JSON: unexpected end of file",
                                 p->file, line, col);
                else
                        snprintf(p->err, sizeof(p->err), "%s:%zu:%zu: invalid JSON: %s", p->file,
                                 line, col, json_tokener_error_desc(jerr));
        }
        return -1;
}

static double now_us(void) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

static const char *task_name(struct plan *p, size_t i, char *buf, size_t sz) {
        json_object *o = json_object_array_get_idx(p->tasks, i), *v;
        if (json_object_object_get_ex(o, "name", &v))
                return json_object_get_string(v);
        snprintf(buf, sz, "tasks[%zu]", i);
        return buf;
}

static int run_error(struct plan *p, const char *msg, const char *task) {
        if (task)
                fprintf(stderr, "hbgctl: %s: task %s: %s\n", p->file, task, msg);
        else
                fprintf(stderr, "hbgctl: %s\n", msg);
        if (opt_json) {
                json_object *o = json_object_new_object();
                json_object_object_add(o, "status", json_object_new_string("error"));
                json_object_object_add(o, "error", json_object_new_string(msg));
                if (task)
                        json_object_object_add(o, "task", json_object_new_string(task));
                print_json(o);
                json_object_put(o);
        }
        return EXIT_FAIL;
}

static int cmd_run(const char *path, const char *file) {
        struct plan p = { .file = file };
        int rc = EXIT_FAIL;
        hbg_client *c = NULL;
        char nb[64];
        if (load_file(&p) < 0 || parse_plan(&p) < 0) {
                rc = run_error(&p, p.err, NULL);
                goto out;
        }
        int fd = connect_to(path);
        if (fd < 0) {
                rc = -fd;
                goto out;
        }
        close(fd);
        int err = hbg_connect(&c, path);
        if (err < 0) {
                char msg[512];
                snprintf(msg, sizeof(msg), "cannot connect to hbgd: %s", hbg_last_error(NULL));
                rc = run_error(&p, msg, NULL);
                goto out;
        }
        for (size_t i = 0; i < p.n_tensors; i++) {
                struct gtensor *t = &p.tensors[i];
                err = hbg_tensor_alloc(c, t->len * 4, &t->t);
                if (err < 0) {
                        char msg[512];
                        snprintf(msg, sizeof(msg), "tensor %s (%" PRIu64 " floats): %s (%s)",
                                 t->name, t->len, hbg_strerror(err), hbg_last_error(c));
                        rc = run_error(&p, msg, NULL);
                        goto out;
                }
                float *d = hbg_tensor_data(c, t->t);
                for (uint64_t k = 0; k < t->len; k++)
                        d[k] = t->init == INIT_FILL   ? (float)t->value
                               : t->init == INIT_IOTA ? (float)(t->start + (double)k * t->step)
                                                      : 0.0f;
        }
        p.ids = calloc(p.n_tasks, sizeof(*p.ids));
        if (!p.ids) {
                rc = run_error(&p, "out of memory", NULL);
                goto out;
        }
        double t0 = now_us();
        for (size_t i = 0; i < p.n_tasks; i++) {
                hbg_task t;
                if (build_task(&p, i, &t) < 0) {
                        rc = run_error(&p, p.err, NULL);
                        goto out;
                }
                err = hbg_graph_add(c, &t, &p.ids[i]);
                if (err < 0) {
                        char msg[512];
                        snprintf(msg, sizeof(msg), "%s (%s)", hbg_strerror(err), hbg_last_error(c));
                        rc = run_error(&p, msg, task_name(&p, i, nb, sizeof(nb)));
                        goto out;
                }
        }
        uint64_t g;
        err = hbg_graph_submit(c, &g);
        if (err == 0)
                err = hbg_graph_wait(c, g, -1);
        double elapsed = now_us() - t0;
        if (err < 0) {
                uint64_t bad = UINT64_MAX;
                const char *tn = NULL;
                char msg[512];
                const char *why = hbg_last_error(c);
                snprintf(msg, sizeof(msg), "%s", why[0] ? why : hbg_strerror(err));
                if (hbg_graph_status(c, g, &bad) < 0 && bad != UINT64_MAX) {
                        /* ids grow with the file order; extra dummies in between */
                        size_t lo = 0, hi = p.n_tasks;
                        while (lo < hi) {
                                size_t mid = (lo + hi) / 2;
                                if (p.ids[mid] < bad)
                                        lo = mid + 1;
                                else
                                        hi = mid;
                        }
                        if (lo < p.n_tasks)
                                tn = task_name(&p, lo, nb, sizeof(nb));
                }
                rc = run_error(&p, msg, tn);
                goto out;
        }
        json_object *res = json_object_new_object(), *outs = json_object_new_object();
        json_object_object_add(res, "status", json_object_new_string("ok"));
        json_object_object_add(res, "tasks", json_object_new_uint64(p.n_tasks));
        json_object_object_add(res, "elapsed_us", json_object_new_int64((int64_t)elapsed));
        size_t n_out = p.outputs ? json_object_array_length(p.outputs) : 0;
        if (!opt_json) {
                printf("ok: %zu tasks in %.3f ms\n", p.n_tasks, elapsed / 1e3);
                if (n_out)
                        printf("%-16s %10s %16s %14s %14s  %s\n", "output", "len", "sum", "min", "max",
                               "head");
        }
        for (size_t i = 0; i < n_out; i++) {
                const char *name = json_object_get_string(json_object_array_get_idx(p.outputs, i));
                hbg_tensor t;
                parse_ref(&p, name, "$.outputs", false, &t);
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
                json_object *o = json_object_new_object();
                json_object_object_add(o, "len", json_object_new_uint64(len));
                json_object_object_add(o, "sum", json_object_new_double(sum));
                json_object_object_add(o, "min", json_object_new_double(mn));
                json_object_object_add(o, "max", json_object_new_double(mx));
                json_object_object_add(o, "head", head);
                json_object_object_add(outs, name, o);
                if (!opt_json) {
                        printf("%-16s %10" PRIu64 " %16.9g %14.7g %14.7g  ", name, len, sum, mn, mx);
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
        hbg_disconnect(c);
        free(p.ids);
        free(p.tensors);
        json_object_put(p.tensor_index);
        json_object_put(p.task_index);
        json_object_put(p.root);
        return rc;
}

/* ------------------------------------------------------------ main */

static void usage(FILE *f) {
        fprintf(f,
                "Usage: hbgctl [--socket PATH] [--json] [COMMAND]\n"
                "Commands:\n"
                "  status      the daemon and its sessions (default)\n"
                "  sessions    one line per session\n"
                "  graphs      graph counters per session\n"
                "  threads     one line per scheduler thread\n"
                "  kernels     the built-in kernels and their arguments\n"
                "  run FILE    run the graph described in a JSON file (docs/GRAPH_FILES.md)\n"
                "  version     hbgctl's version\n"
                "Options (before or after the command):\n"
                "  --socket PATH  hbgd's socket (default $HBG_SOCKET, then %s)\n"
                "  --json         print JSON\n"
                "Exit status: 0 ok, 1 failure, 2 bad usage, 3 hbgd not running.\n",
                DEFAULT_SOCKET);
}

int main(int argc, char **argv) {
        static const struct option opts[] = {
                { "socket", required_argument, NULL, 's' },
                { "json", no_argument, NULL, 'j' },
                { "help", no_argument, NULL, 'h' },
                {},
        };
        const char *path = getenv("HBG_SOCKET");
        int c;
        opterr = 0;
        while ((c = getopt_long(argc, argv, ":h", opts, NULL)) != -1) {
                switch (c) {
                case 's':
                        path = optarg;
                        break;
                case 'j':
                        opt_json = true;
                        break;
                case 'h':
                        usage(stdout);
                        return 0;
                case ':':
                        fprintf(stderr, "hbgctl: option '%s' needs an argument\n", argv[optind - 1]);
                        return EXIT_USAGE;
                default:
                        if (optopt)
                                fprintf(stderr, "hbgctl: unknown option '-%c' (try --help)\n", optopt);
                        else
                                fprintf(stderr, "hbgctl: unknown option '%s' (try --help)\n",
                                        argv[optind - 1]);
                        return EXIT_USAGE;
                }
        }
        const char *verb = optind < argc ? argv[optind++] : "status";
        const char *file = NULL;
        if (strcmp(verb, "run") == 0) {
                if (optind >= argc) {
                        fprintf(stderr, "hbgctl: run needs a graph FILE\n");
                        return EXIT_USAGE;
                }
                file = argv[optind++];
        }
        if (optind < argc) {
                fprintf(stderr, "hbgctl: unexpected argument '%s'\n", argv[optind]);
                return EXIT_USAGE;
        }
        Hbg__StatusKind kind;
        if (strcmp(verb, "status") == 0)
                kind = HBG__STATUS_KIND__STATUS_DAEMON;
        else if (strcmp(verb, "threads") == 0)
                kind = HBG__STATUS_KIND__STATUS_THREADS;
        else if (strcmp(verb, "sessions") == 0)
                kind = HBG__STATUS_KIND__STATUS_SESSIONS;
        else if (strcmp(verb, "graphs") == 0)
                kind = HBG__STATUS_KIND__STATUS_GRAPHS;
        else if (strcmp(verb, "kernels") == 0)
                kind = HBG__STATUS_KIND__STATUS_KERNELS;
        else if (strcmp(verb, "version") == 0) {
                if (opt_json)
                        printf("{ \"hbgctl\": \"%s\" }\n", HBG_VERSION);
                else
                        printf("hbgctl %s\n", HBG_VERSION);
                return 0;
        } else if (file) {
                kind = HBG__STATUS_KIND__STATUS_DAEMON;
        } else {
                fprintf(stderr,
                        "hbgctl: unknown command '%s' (status, sessions, graphs, threads, kernels, run, version)\n",
                        verb);
                return EXIT_USAGE;
        }
        if (!path || !*path)
                path = DEFAULT_SOCKET;
        if (file)
                return cmd_run(path, file);
        return cmd_status(path, kind);
}
