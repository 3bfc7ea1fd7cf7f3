/* SPDX-License-Identifier: MIT */
/*
 * Recording a graph for replay (docs/RUNTIME_LOGIC.md §14, PROTOCOL.md):
 * the client's memfd checked (sealed, the right size), its tasks handed to
 * the engine, which validates each once, and their memory charged to the
 * session's uid within max_recorded_tasks (refused tasks count too: they
 * cost the validation). The validation runs on the slow-work thread
 * (daemon/slow_work.h); the rest on the io thread.
 */
#include "daemon/record.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <syslog.h>

#include "daemon/log.h"
#include "shm/layout.h"
#include "common/clock.h"
#include "daemon/engine/engine_recorded.h"

/* Seals that make the memfd's contents fixed: what we read cannot change
 * under us, and the mapping cannot fault (SIGBUS) by shrinking. */
#define RECORD_SEALS (F_SEAL_WRITE | F_SEAL_SHRINK | F_SEAL_GROW)

struct record_job {
        struct slow_job work;          /* first: the worker hands us this */
        struct session *s;
        const struct hbgd_config *cfg;
        const struct hbg_recorded_task *map;
        size_t bytes;
        uint32_t tasks;
        uint64_t memory;               /* charged to the session's uid */
        /* The worker's result. */
        struct recorded_graph *graph;
        int err;
        uint32_t bad;
        const char *why;
        int64_t validate_ns;           /* how long the worker took */
};

static void validate_run(struct slow_job *work) {
        struct record_job *j = (struct record_job *)work;
        int64_t t0 = clock_now_ns();
        j->err = ring_record_validate(j->s->ring, j->map, j->tasks, &j->graph, &j->bad, &j->why);
        j->validate_ns = clock_now_ns() - t0;
}

/* [log] level = debug: what the recording cost and how it ended. */
static void log_summary(const struct record_job *j, int err, uint32_t graph, const char *msg) {
        const struct session *s = j->s;
        char end[300];
        if (err < 0)
                snprintf(end, sizeof(end), "refused: %s", msg);
        else
                snprintf(end, sizeof(end), "graph %" PRIu32 "; the session has recorded %" PRIu64 " tasks of "
                         "max_recorded_tasks %" PRIu64, graph, s->recorded_tasks, j->cfg->max_recorded_tasks);
        hbgd_log_session(LOG_DEBUG, s->log_limit,
                         "session %" PRIu64 ": recording of %" PRIu32 " tasks (%zu bytes of records, %" PRIu64
                         " bytes charged) validated in %" PRId64 " us: %s",
                         s->id, j->tasks, j->bytes, j->memory, j->validate_ns / 1000, end);
}

static void record_job_free(struct record_job *j) {
        if (j->map)
                munmap((void *)j->map, j->bytes);
        recorded_graph_free(j->graph);
        free(j);
}

int record_memfd_check(int fd, uint64_t tasks, char *msg, size_t msg_len) {
        int seals = fcntl(fd, F_GET_SEALS);
        if (seals < 0 || (seals & RECORD_SEALS) != RECORD_SEALS) {
                snprintf(msg, msg_len, "the tasks must come in a memfd sealed against writing, growing "
                                       "and shrinking (F_SEAL_WRITE, F_SEAL_GROW, F_SEAL_SHRINK)");
                return -EBADF;
        }
        struct stat st;
        uint64_t bytes = tasks * sizeof(struct hbg_recorded_task);
        if (fstat(fd, &st) < 0) {
                int err = -errno;
                snprintf(msg, msg_len, "cannot read the memfd's size: %s", strerror(-err));
                return err;
        }
        if ((uint64_t)st.st_size != bytes) {
                snprintf(msg, msg_len, "the memfd holds %lld bytes, %" PRIu64 " tasks are %" PRIu64,
                         (long long)st.st_size, tasks, bytes);
                return -EINVAL;
        }
        return 0;
}

int record_start(struct record_job **ret, struct session *s, const struct hbgd_config *cfg, int fd,
                 uint64_t tasks, char *msg, size_t msg_len) {
        if (tasks == 0 || tasks > UINT32_MAX) {
                snprintf(msg, msg_len, "a recorded graph has 1 to %" PRIu32 " tasks", UINT32_MAX);
                return -EINVAL;
        }
        if (tasks > cfg->max_recorded_tasks || s->recorded_tasks > cfg->max_recorded_tasks - tasks) {
                snprintf(msg, msg_len,
                         "recording %" PRIu64 " tasks would exceed max_recorded_tasks (%" PRIu64
                         ") for this session, which has recorded %" PRIu64,
                         tasks, cfg->max_recorded_tasks, s->recorded_tasks);
                return -E2BIG;
        }
        if (ring_record_full(s->ring)) {
                snprintf(msg, msg_len, "max_recorded_graphs reached (%u)", cfg->engine.max_recorded_graphs);
                return -ENOSPC;
        }
        int err = record_memfd_check(fd, tasks, msg, msg_len);
        if (err < 0)
                return err;
        uint64_t bytes = tasks * sizeof(struct hbg_recorded_task);
        struct record_job *j = calloc(1, sizeof(*j));
        if (!j) {
                snprintf(msg, msg_len, "out of memory");
                return -ENOMEM;
        }
        j->s = s;
        j->cfg = cfg;
        j->tasks = (uint32_t)tasks;
        j->bytes = bytes;
        j->memory = engine_recorded_memory((uint32_t)tasks);
        j->work.run = validate_run;
        j->work.uid = s->uid;
        err = acct_add_memory(s->acct, &cfg->limits, s->uid, j->memory, "the recorded graph", msg, msg_len);
        if (err < 0) {
                free(j);
                return err;
        }
        void *map = mmap(NULL, bytes, PROT_READ, MAP_SHARED, fd, 0);
        if (map == MAP_FAILED) {
                err = -errno;
                acct_remove_memory(s->acct, s->uid, j->memory);
                free(j);
                snprintf(msg, msg_len, "cannot map the memfd");
                return err;
        }
        j->map = map;
        *ret = j;
        return 0;
}

struct slow_job *record_job_work(struct record_job *j) {
        return &j->work;
}

int record_finish(struct record_job *j, uint32_t *ret_graph, char *msg, size_t msg_len) {
        struct session *s = j->s;
        int err = j->err;
        if (err == 0) {
                /* Charged for the most n tasks can keep; now what they
                 * keep (recorded_graph_memory() <= the charge). */
                uint64_t kept = recorded_graph_memory(j->graph);
                if (kept < j->memory) {
                        acct_remove_memory(s->acct, s->uid, j->memory - kept);
                        j->memory = kept;
                }
                err = ring_record_add(s->ring, j->graph);
                j->graph = NULL; /* taken, or freed on -ENOSPC */
        }
        if (err < 0) {
                acct_remove_memory(s->acct, s->uid, j->memory);
                /* Validated and refused: the work was done all the same,
                 * so it counts against the session's budget (a client
                 * cannot make hbgd validate without end). */
                if (err != -ENOSPC && err != -ENOMEM)
                        s->recorded_tasks += j->tasks;
                if (err == -ENOSPC)
                        snprintf(msg, msg_len, "max_recorded_graphs reached (%u)",
                                 j->cfg->engine.max_recorded_graphs);
                else if (j->why)
                        snprintf(msg, msg_len, "task %" PRIu32 ": %s", j->bad, j->why);
                else
                        snprintf(msg, msg_len, "out of memory");
                log_summary(j, err, 0, msg);
                record_job_free(j);
                return err;
        }
        s->memory += j->memory;
        s->recorded_tasks += j->tasks;
        *ret_graph = (uint32_t)err;
        log_summary(j, 0, *ret_graph, NULL);
        record_job_free(j);
        return 0;
}

void record_abandon(struct record_job *j) {
        acct_remove_memory(j->s->acct, j->s->uid, j->memory);
        record_job_free(j);
}
