/* SPDX-License-Identifier: MIT */
/* hbgctl's output: tables, and JSON made from the schema. */
#include <inttypes.h>
#include <stdio.h>

#include "ctl/ctl.h"

bool opt_json;

void print_daemon(const Hbg__DaemonStatus *d) {
        printf("hbgd %s, pid %u, up %" PRIu64 " s, %s\n", d->version, d->pid, d->uptime_ms / 1000,
               d->io_backend);
        printf("threads   %u\nclusters  %u\ncompletion_mode %s\nsessions  %u\ntasks     %" PRIu64
               " completed\ngraphs    %" PRIu64 " retired, %" PRIu64 " failed\n",
               d->threads, d->clusters, d->completion_mode && d->completion_mode[0] ? d->completion_mode : "?",
               d->sessions, d->tasks_completed, d->graphs_retired, d->graphs_failed);
}

void print_threads(const Hbg__StatusReply *r) {
        printf("%-6s %8s %12s %12s %12s %10s %10s %10s %10s %10s %8s %8s\n", "thread", "clusters",
               "classified", "dispatched", "published", "continued", "stolen", "failsafe", "advances",
               "cas_fail", "parks", "wakeups");
        for (size_t i = 0; i < r->n_threads; i++) {
                const Hbg__ThreadStatus *t = r->threads[i];
                printf("%-6u %8u %12" PRIu64 " %12" PRIu64 " %12" PRIu64 " %10" PRIu64 " %10" PRIu64
                       " %10" PRIu64 " %10" PRIu64 " %10" PRIu64 " %8" PRIu64 " %8" PRIu64 "\n",
                       t->index, t->clusters, t->classified, t->dispatched, t->published, t->continued,
                       t->stolen, t->failsafe_pushes, t->watermark_advances, t->watermark_cas_failures,
                       t->parks, t->wakeups);
        }
}

void print_sessions(const Hbg__StatusReply *r) {
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

void print_graphs(const Hbg__StatusReply *r) {
        printf("%-8s %12s %12s %12s %12s\n", "session", "submitted", "retired", "failed",
               "watermark");
        for (size_t i = 0; i < r->n_graphs; i++) {
                const Hbg__GraphStatus *g = r->graphs[i];
                printf("%-8" PRIu64 " %12" PRIu64 " %12" PRIu64 " %12" PRIu64 " %12" PRIu64 "\n",
                       g->session_id, g->graphs_submitted, g->graphs_retired, g->graphs_failed,
                       g->watermark);
        }
}

void print_kernels(const Hbg__StatusReply *r) {
        printf("%-4s %-18s %-10s %s\n", "id", "kernel", "splittable", "arguments");
        for (size_t i = 0; i < r->n_kernels; i++) {
                const Hbg__KernelInfo *k = r->kernels[i];
                printf("%-4u %-18s %-10s ", k->id, k->name, k->splittable ? "yes" : "no");
                for (size_t j = 0; j < k->n_args; j++)
                        printf("%s%s %s", j ? ", " : "", k->args[j]->kind, k->args[j]->name);
                printf("\n");
        }
}


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

json_object *pb_to_json(const ProtobufCMessage *m) {
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

void print_json(json_object *o) {
        printf("%s\n", json_object_to_json_string_ext(o, JSON_C_TO_STRING_PRETTY |
                                                             JSON_C_TO_STRING_SPACED |
                                                             JSON_C_TO_STRING_NOSLASHESCAPE));
}
