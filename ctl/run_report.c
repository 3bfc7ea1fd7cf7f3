/* SPDX-License-Identifier: MIT */
/* hbgctl run's failures as it reports them (ctl/run_report.h). */
#include "ctl/run_report.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ctl/ctl.h"
#include "ctl/error.h"
#include "ctl/graph_read.h"
#include "ctl/output.h"

/* With --json: {"status": "error", "error": {code, exit, message, name}}
 * from the last ctl_error(); "name" the task's, as in a failed graph's
 * error (where "task" is its index). */
void run_fail_json(int exit_code, const char *task) {
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
int run_fail_code(struct plan *p, int code, const char *msg, const char *task) {
        if (task)
                ctl_error(code, "%s: task %s: %s", graph_file_name(p), task, msg);
        else
                ctl_error(code, "%s", msg);
        run_fail_json(EXIT_FAIL, task);
        return EXIT_FAIL;
}

int run_fail(struct plan *p, const char *msg, const char *task) {
        return run_fail_code(p, 0, msg, task);
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
int run_print_errors(struct plan *p, int exit_code, uint64_t unlisted) {
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
        if (unlisted && !opt_json)
                fprintf(stderr, "hbgctl: %" PRIu64 " errors in %s (%zu listed; hbgd refused %" PRIu64
                                " more task%s)\n",
                        n + unlisted, graph_file_name(p), n, unlisted, unlisted == 1 ? "" : "s");
        else if (n > 1 && !opt_json)
                fprintf(stderr, "hbgctl: %zu errors in %s\n", n, graph_file_name(p));
        return exit_code;
}

/* The file's errors as the JSON answer of a run that did not start. */
int run_file_errors(struct plan *p) {
        run_print_errors(p, EXIT_FAIL, 0);
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
