/* SPDX-License-Identifier: MIT */
/*
 * hbgctl's modules, each calling only those below it:
 *   hbgctl.c      options and the verb table
 *   run.c         `run FILE`: compile a graph file and run it via libhbgclient
 *   status.c      the status verbs: one request to hbgd, printed
 *   metrics.c     `metrics`: OpenMetrics text made from a status reply
 *   graph_file.c  the graph-file compiler (docs/GRAPH_FILES.md)
 *   output.c      tables and JSON
 *   daemon_conn.c connecting to hbgd and one request/reply
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <json-c/json.h>

#include "hbg/hbg.h"
#include "proto/wire.h"

/* Exit codes a script can use (docs/man/hbgctl.1): 3 also when hbgd is
 * stopping; 4 when this user may not open the socket or hbgd's [access]
 * refuses it. */
enum { EXIT_FAIL = 1, EXIT_USAGE = 2, EXIT_NOT_RUNNING = 3, EXIT_ACCESS = 4 };

/* --json: print JSON instead of tables (output.c). */
extern bool opt_json;

/* daemon_conn.c */
/* A connected control socket, or -EXIT_USAGE / -EXIT_NOT_RUNNING /
 * -EXIT_ACCESS (a message printed: for a permission error the socket's and
 * its directory's owner and mode, and the fix). */
int ctl_connect(const char *path);
/* Send one envelope, receive one (with a timeout); NULL after a printed
 * error (hbgd's refusal, with the fix), whose exit status is then
 * ctl_failure_exit(). */
Hbg__Envelope *ctl_roundtrip(int fd, Hbg__Envelope *env);
int ctl_failure_exit(void);
/* hbg_connect() failed with err (its message printed): print the fix for
 * a refusal by hbgd, return the exit status. */
int ctl_connect_failed(int err);
/* Connect, hello, one StatusRequest of `kind`: its StatusReply envelope
 * (wire_free() it), or NULL with a message printed and *ret_exit the exit
 * code to return. */
Hbg__Envelope *ctl_status(const char *path, Hbg__StatusKind kind, int *ret_exit);

/* output.c */
void print_daemon(const Hbg__DaemonStatus *d);
void print_threads(const Hbg__StatusReply *r);
void print_sessions(const Hbg__StatusReply *r);
void print_graphs(const Hbg__StatusReply *r);
void print_kernels(const Hbg__StatusReply *r);
/* A protobuf message as JSON, field by field (names from the schema). */
json_object *pb_to_json(const ProtobufCMessage *m);
void print_json(json_object *o);

/* graph_file.c */
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
        bool resolved;               /* pass 2: tensors allocated */
        hbg_task *compiled;          /* pass 2: every task, deps as file indices */
        uint64_t *ids;               /* task index -> id, as they are added */
        char err[512];
};

/* Read and parse the file (p->file); -1 with p->err set. */
int graph_file_load(struct plan *p);
/* Check the whole document and index tensors and tasks; -1 with p->err. */
int graph_file_parse(struct plan *p);
/* Task i as an hbg_task (tensors allocated), its deps the file indices of
 * earlier tasks; -1 with p->err. */
int graph_file_task(struct plan *p, size_t i, hbg_task *t);
/* A tensor reference ("x", "x[2:5]") as a tensor; -1 with p->err. */
int graph_file_ref(struct plan *p, const char *s, const char *path, bool single, hbg_tensor *ret);
/* The task's "name", or "tasks[i]". */
const char *graph_file_task_name(struct plan *p, size_t i, char *buf, size_t sz);
void graph_file_free(struct plan *p);

/* status.c */
int cmd_status(const char *path, Hbg__StatusKind kind);

/* metrics.c: --output FILE (NULL: stdout). */
extern const char *opt_output;
int cmd_metrics(const char *path);

/* run.c */
int cmd_run(const char *path, const char *file);
