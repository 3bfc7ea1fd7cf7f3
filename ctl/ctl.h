/* SPDX-License-Identifier: MIT */
/*
 * hbgctl's modules, each calling only those below it:
 *   hbgctl.c      options, the verb table, help
 *   top.c         `top`: rates from successive status replies
 *   run.c         `run FILE`: compile a graph file and run it via libhbgclient
 *   progress.c    run --progress: the progress line
 *   dot.c         run --dot: the graph in Graphviz form
 *   status.c      the status verbs: one request to hbgd, printed; wait
 *   metrics.c     `metrics`: OpenMetrics text made from a status reply
 *   graph_file.c  the graph-file compiler (docs/GRAPH_FILES.md)
 *   output.c      tables and JSON (one set of names for both), errors
 *   admin.c       `cancel` and `kill`: one admin request each
 *   daemon_conn.c connecting to hbgd and one request/reply
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <json-c/json.h>

#include "hbg/hbg.h"
#include "proto/wire.h"

/* Exit codes a script can use (docs/man/hbgctl.1): 3 also when hbgd is
 * stopping; 4 when this user may not open the socket or hbgd's [access]
 * refuses it. */
enum { EXIT_FAIL = 1, EXIT_USAGE = 2, EXIT_NOT_RUNNING = 3, EXIT_ACCESS = 4 };

/* --json: print JSON instead of tables (output.c). */
extern bool opt_json;

/* The options of one invocation (hbgctl.c's table says which verb takes
 * which). */
struct ctl_opts {
        const char *socket;     /* resolved: --socket, $HBG_SOCKET or the default */
        bool progress;          /* run --progress */
        bool dry_run;           /* run --dry-run */
        const char *dot;        /* run --dot FILE ("-": stdout) */
        uint64_t heap;          /* run --heap BYTES (0: hbgd's default) */
        uint64_t window;        /* run --window TASKS (0: hbgd's default) */
        bool batch;             /* top -b */
        long iterations;        /* top -n (-1: until stopped) */
        double delay_s;         /* top -d */
        double timeout_s;       /* wait --timeout */
        const char *const *args; /* the command's arguments (verbs of more than one) */
};

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
/* The one request path of every verb: connect, hello, request rq, its
 * reply. The reply envelope if it is of case `want` (wire_free() it) and
 * *ret_exit 0, or NULL with a message printed (hbgd's Error with its fix)
 * and *ret_exit the exit code to return. */
Hbg__Envelope *ctl_request(const char *path, Hbg__Envelope *rq, Hbg__Envelope__MsgCase want, int *ret_exit);
/* ctl_request() of one StatusRequest of `kind`: its StatusReply. */
Hbg__Envelope *ctl_status(const char *path, Hbg__StatusKind kind, int *ret_exit);
/* admin.c: `cancel SESSION GRAPH`, `kill SESSION`. */
int cmd_cancel(const struct ctl_opts *o, const char *session, const char *graph);
int cmd_kill(const struct ctl_opts *o, const char *session);

/* output.c */
/* An error: "hbgctl: MESSAGE" on stderr, remembered for the JSON error
 * object (err: a negative errno or 0). Returns exit_code. */
int ctl_error(int exit_code, int err, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* While quiet, ctl_error() neither prints nor remembers (a look at hbgd
 * whose failure does not matter: run --progress). */
void ctl_errors_quiet(bool quiet);
/* The last ctl_error() as {"code", "exit", "message"} (a new object). */
json_object *ctl_error_json(int exit_code);
/* Whether print_json() printed anything yet. */
bool ctl_json_printed(void);
/* A protobuf message as JSON, field by field (names from the schema). */
json_object *pb_to_json(const ProtobufCMessage *m);
/* Pretty (one object, the status verbs) or one line (top's snapshots). */
void print_json(json_object *o);
void print_json_line(json_object *o);
/* o serialised with json-c's flags, then a newline, to f: valid UTF-8,
 * DEL and C1 controls escaped (common/text.h). */
void write_json(FILE *f, json_object *o, int flags);
/* s as a terminal may show it (controls and stray bytes escaped, cut on a
 * boundary to fit sz, 4 * strlen(s) + 1 always fits): buf. */
const char *ctl_shown(const char *s, char *buf, size_t sz);
/* A status reply as the JSON object of the verb (kind), and its text: the
 * text shows the JSON's names (docs/man/hbgctl.1). */
json_object *status_json(Hbg__StatusKind kind, const Hbg__StatusReply *r);
void status_print_text(Hbg__StatusKind kind, json_object *o);
/* Tables of JSON rows: each column is a key of the rows, its name the
 * header. */
struct column {
        const char *name;       /* JSON key and header */
        int width;              /* at least; negative: left-aligned */
        /* The text of the value, where the generic one does not do (NULL:
         * numbers as they are, doubles with one decimal, booleans yes/no). */
        void (*text)(json_object *v, char *buf, size_t sz);
};
void print_table(FILE *f, const char *indent, const struct column *cols, size_t ncols, json_object *rows);
/* "name value" lines for the keys of o given (width: of the names). */
void print_labels(FILE *f, json_object *o, const char *const *keys, size_t nkeys);

/* status.c */
int cmd_status(const struct ctl_opts *o, Hbg__StatusKind kind);
/* Wait until hbgd answers a status request (o->timeout_s for the socket
 * to take connections): 0, EXIT_NOT_RUNNING after the timeout, or the
 * status request's failure. */
int cmd_wait(const struct ctl_opts *o);

/* top.c */
int cmd_top(const struct ctl_opts *o);

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
        const char *file;            /* "-": standard input */
        json_object *root, *tasks, *outputs;
        struct gtensor *tensors;
        size_t n_tensors;
        json_object *tensor_index;   /* name -> index */
        json_object *task_index;     /* task name -> task index */
        size_t n_tasks;
        bool resolved;               /* pass 2: tensors allocated */
        hbg_task *compiled;          /* pass 2: every task, deps as file indices */
        uint64_t *ids;               /* task index -> id, as they are added */
        bool *bad;                   /* task index -> has an error (pass 1, then 2) */
        json_object *errors;         /* every error: [{path, message, by}], NULL none */
        json_object *broken_tensors; /* names of tensors with errors */
        char err[512];               /* the first error, "FILE: PATH: message" */
};

/* A graph file on standard input may be at most this long. */
#define GRAPH_FILE_STDIN_MAX ((size_t)64 << 20)

/* Read and parse the file (p->file; "-" reads standard input, at most
 * GRAPH_FILE_STDIN_MAX bytes); -1 with p->err set. */
int graph_file_load(struct plan *p);
/* The file's name in messages ("<stdin>" for "-"). */
const char *graph_file_name(const struct plan *p);
/* Note an error at a JSON path ("by": who found it, "hbgctl" or "hbgd"):
 * every one is kept in p->errors, the first also in p->err. */
void graph_file_error(struct plan *p, const char *path, const char *msg, const char *by);
size_t graph_file_n_errors(const struct plan *p);
/* Check the whole document and index tensors and tasks, every error
 * noted (a task's first); -1 if there was any. */
int graph_file_parse(struct plan *p);
/* Task i as an hbg_task (tensors allocated: with the kernel's rules
 * between its tensors checked), its deps the file indices of earlier
 * tasks; -1 after noting its error. */
int graph_file_task(struct plan *p, size_t i, hbg_task *t);
/* A tensor reference ("x", "x[2:5]") as a tensor; -1 with p->err. */
int graph_file_ref(struct plan *p, const char *s, const char *path, bool single, hbg_tensor *ret);
/* The task's "name", or "tasks[i]". */
const char *graph_file_task_name(struct plan *p, size_t i, char *buf, size_t sz);
void graph_file_free(struct plan *p);

/* dot.c */
/* Write the compiled plan (p->compiled, deps as file indices) as a dot
 * digraph: tasks with name and kernel, edges for the explicit and the
 * derived dependencies (the client library's rules). 0 or -errno (with
 * *ret_edges the number of edges written). */
int dot_write(struct plan *p, FILE *f, size_t *ret_edges);

/* progress.c */
struct progress;
/* NULL when progress is not shown (not asked for). On a terminal
 * (stderr) the line is redrawn; elsewhere one final line is printed. */
struct progress *progress_new(const char *socket, size_t n_tasks);
/* Tasks 0..added-1 were added with ids ids[]; `submitted`: the graph was
 * submitted. Redraws at most every 200 ms unless `force`. */
void progress_update(struct progress *pg, const uint64_t *ids, size_t added, bool submitted, bool force);
/* The final line (done: the graph finished), then free. NULL is fine. */
void progress_end(struct progress *pg, const uint64_t *ids, size_t added, bool done);

/* metrics.c: --output FILE (NULL: stdout). */
extern const char *opt_output;
int cmd_metrics(const char *path);

/* run.c */
int cmd_run(const struct ctl_opts *o, const char *file);
/* "1048576", "64K", "80M", "1G" (binary suffixes) into *ret; -1 if not a
 * size (--heap, --window). */
int run_parse_size(const char *s, uint64_t *ret);
