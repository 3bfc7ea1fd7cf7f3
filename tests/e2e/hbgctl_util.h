/* SPDX-License-Identifier: MIT */
/*
 * hbgctl_util.c: what the hbgctl end-to-end tests share (test_e2e_hbgctl,
 * test_e2e_hbgctl_graphs, test_e2e_hbgctl_hbgd; test_e2e_metrics and
 * test_e2e_exporter run hbgctl through it too). $HBGCTL overrides the
 * hbgctl binary (default: ../bin/hbgctl next to the test), $HBG_TEST_GRAPHS
 * the graph directory (default: tests/graphs found from the working
 * directory or above the test's binary).
 */
#pragma once

#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <json-c/json.h>

#include "hbg/hbg.h"
#include "tests/e2e/daemon_util.h"

#define WAIT_MS 60000 /* "never hangs" */

extern char hbgctl_bin[PATH_MAX];
extern char graphs_dir[2048];

struct result {
        int code;       /* exit code, or 128 + signal */
        char *out, *err;
};

void result_free(struct result *r);
/* A file's whole text (malloc'd). */
char *slurp(const char *path);

/* How to run a program: which one, its standard input, its stderr on a
 * terminal (a pty whose output is collected). */
struct how {
        const char *bin;          /* NULL: hbgctl */
        const char *stdin_path;   /* NULL: inherited */
        bool stderr_tty;
};

/* Run the program with the NULL-terminated argument list; HBG_SOCKET is
 * set to env_socket in its environment (removed if NULL). */
struct result run_v(const struct how *h, const char *env_socket, const char *const *args);
/* hbgctl with args. */
struct result ctl_v(const char *env_socket, const char *const *args);

#define ctl(sock, ...) ctl_v((sock), (const char *const[]){ __VA_ARGS__, NULL })

#define ASSERT_CODE(r, want)                                                            \
        ck_assert_msg((r).code == (want), "exit %d, want %d\nstdout:\n%s\nstderr:\n%s", \
                      (r).code, (want), (r).out, (r).err)

json_object *parse_json(const struct result *r);
json_object *get(json_object *o, const char *key);
/* An hbgd of the test's own (tests/e2e/daemon_util.c). */
struct hbgd_proc *start(void);
/* tests/graphs/NAME. */
void graph_path(char *buf, size_t sz, const char *name);

/* The first line of out starting with `prefix`. */
const char *line_at(const char *out, const char *prefix);
/* Every word of the line (a table's header) is a key of the JSON object
 * (a row of the same table): the text and --json use the same names. */
void assert_names(const char *line, json_object *row);
/* r is a usage error (exit 2) whose stderr says `what`, without the
 * help and with nothing on stdout; frees r. */
void assert_usage_error(struct result r, const char *what);
/* stdout is one JSON object with "error": {code, exit, message}; `status`
 * (run's) is "error" when given. The code is a negative errno where the
 * failure has one (hbgd not running: the connect's), else 0. */
void assert_json_error(const struct result *r, const char *status, int exit_code, const char *what);
/* hbgd's tasks completed so far, from `hbgctl status --json`. */
uint64_t daemon_tasks_completed(const char *S);
/* The session ids of this process, ascending (sessions --json). */
size_t my_sessions(const char *S, uint64_t *ret, size_t max);
/* A noop task depending on task dep, added to c: its id. */
uint64_t add_noop_after(hbg_client *c, uint64_t dep);

/* A host function that succeeds. */
int host_ok(void *userdata);

/* check_main's setup: hbgctl and the graphs found, then the daemon's. */
int hbgctl_util_setup(void);
