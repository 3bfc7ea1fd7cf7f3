/* SPDX-License-Identifier: MIT */
/*
 * Validate-only requests (docs/PROTOCOL.md, hbgctl run --dry-run): a
 * client's tasks checked by the engine's own validation
 * (engine_validate(), the code every submitted task passes, kernels'
 * checks included) against the heap its session would get, every error
 * reported, nothing run and nothing kept. Needs no session, so it works
 * for anyone [access] admits. Bounded: at most HBG_VALIDATE_MAX_TASKS
 * tasks per request (a larger graph comes in pieces, each saying where
 * it begins), validated on the slow-work thread like a recording (one
 * request per connection at a time), the errors listed as far as they fit
 * max_message_size.
 */
#include "daemon/validate_request.h"
#include "daemon/record.h"
#include "daemon/session.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>

#include "shm/geometry.h"
#include "shm/layout.h"
#include "daemon/engine/engine_recorded.h"

/* An error's share of a reply: its message, the fields and the framing. */
#define ERROR_BYTES (HBG_VALIDATE_MESSAGE_MAX + 32)

struct task_error {
        uint32_t task;
        int32_t code;
        char message[HBG_VALIDATE_MESSAGE_MAX];
};

struct validate_job {
        struct slow_job work;          /* first: the worker hands us this */
        const struct hbg_engine *e;
        const struct hbg_recorded_task *map;
        size_t bytes;
        uint32_t tasks;
        uint64_t first;                /* the number of the request's first task in its graph */
        uint64_t heap_size;
        uint64_t max_task_cost;
        /* The worker's result: the first max_errors errors, and how many. */
        struct task_error *errors;
        size_t n_errors, max_errors;
        uint64_t bad;
        int err;
        /* The reply's parts (validate_reply()). */
        Hbg__TaskError *pb;
        Hbg__TaskError **pb_ptrs;
};

static void collect(void *userdata, uint32_t task, int code, const char *message) {
        struct validate_job *j = userdata;
        j->bad++;
        if (j->n_errors >= j->max_errors)
                return;
        struct task_error *x = &j->errors[j->n_errors++];
        x->task = task;
        x->code = code;
        snprintf(x->message, sizeof(x->message), "%s", message);
}

static void validate_run(struct slow_job *work) {
        struct validate_job *j = (struct validate_job *)work;
        int n = engine_validate(j->e, j->heap_size, j->first, j->map, j->tasks, collect, j);
        j->err = n < 0 ? n : 0;
}

void validate_free(struct validate_job *j) {
        if (!j)
                return;
        if (j->map)
                munmap((void *)j->map, j->bytes);
        free(j->errors);
        free(j->pb);
        free(j->pb_ptrs);
        free(j);
}

int validate_start(struct validate_job **ret, const struct hbg_engine *e, const struct hbgd_config *cfg,
                   uid_t uid, int fd, uint64_t first, uint64_t tasks, uint64_t task_window, uint64_t heap_size,
                   char *msg, size_t msg_len) {
        if (tasks == 0 || tasks > HBG_VALIDATE_MAX_TASKS) {
                snprintf(msg, msg_len, "a validate request has 1 to %u tasks (a larger graph comes in pieces)",
                         HBG_VALIDATE_MAX_TASKS);
                return -E2BIG;
        }
        /* Ids stay far from wrapping (a fanin is an id below its task's). */
        if (first > UINT64_MAX / 2) {
                snprintf(msg, msg_len, "first_task %" PRIu64 " is not a task's number", first);
                return -EINVAL;
        }
        /* The geometry a session asking for task_window and heap_size
         * would get, refused as that session would be. */
        struct hbg_geometry g;
        int err = session_geometry(cfg, &(struct hbg_geometry_request){ .task_window = task_window,
                                                                         .heap_size = heap_size },
                                   &g, msg, msg_len);
        if (err < 0)
                return err;
        if ((err = record_memfd_check(fd, tasks, msg, msg_len)) < 0)
                return err;
        uint64_t bytes = tasks * sizeof(struct hbg_recorded_task);
        struct validate_job *j = calloc(1, sizeof(*j));
        if (!j) {
                snprintf(msg, msg_len, "out of memory");
                return -ENOMEM;
        }
        j->e = e;
        j->tasks = (uint32_t)tasks;
        j->first = first;
        j->bytes = bytes;
        j->heap_size = g.heap_size;
        j->max_task_cost = cfg->engine.max_task_cost;
        j->max_errors = cfg->max_message > 4096 ? (cfg->max_message - 1024) / ERROR_BYTES : 1;
        if (j->max_errors > tasks)
                j->max_errors = tasks;
        j->errors = calloc(j->max_errors, sizeof(*j->errors));
        void *map = j->errors ? mmap(NULL, bytes, PROT_READ, MAP_SHARED, fd, 0) : MAP_FAILED;
        if (map == MAP_FAILED) {
                err = j->errors ? -errno : -ENOMEM;
                validate_free(j);
                snprintf(msg, msg_len, err == -ENOMEM ? "out of memory" : "cannot map the memfd");
                return err;
        }
        j->map = map;
        j->work.run = validate_run;
        j->work.uid = uid;
        *ret = j;
        return 0;
}

struct slow_job *validate_job_work(struct validate_job *j) {
        return &j->work;
}

int validate_reply(struct validate_job *j, Hbg__ValidateReply *r, char *msg, size_t msg_len) {
        if (j->err < 0) {
                snprintf(msg, msg_len, "out of memory");
                return j->err;
        }
        hbg__validate_reply__init(r);
        r->tasks = j->tasks;
        r->heap_size = j->heap_size;
        r->max_task_cost = j->max_task_cost;
        r->errors_omitted = j->bad - j->n_errors;
        if (j->n_errors == 0)
                return 0;
        j->pb = calloc(j->n_errors, sizeof(*j->pb));
        j->pb_ptrs = calloc(j->n_errors, sizeof(*j->pb_ptrs));
        if (!j->pb || !j->pb_ptrs) {
                snprintf(msg, msg_len, "out of memory");
                return -ENOMEM;
        }
        for (size_t i = 0; i < j->n_errors; i++) {
                hbg__task_error__init(&j->pb[i]);
                j->pb[i].task = j->errors[i].task;
                j->pb[i].code = j->errors[i].code;
                /* hbgd's own text (kernel and tensor names from its table):
                 * valid UTF-8 for a proto3 string. */
                j->pb[i].message = j->errors[i].message;
                j->pb_ptrs[i] = &j->pb[i];
        }
        r->n_errors = j->n_errors;
        r->errors = j->pb_ptrs;
        return 0;
}
