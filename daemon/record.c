/* SPDX-License-Identifier: MIT */
/*
 * Recording a graph for replay (docs/RUNTIME_LOGIC.md §14, PROTOCOL.md):
 * the client's memfd checked (sealed, the right size), its tasks handed to
 * the engine, which validates each once, and their memory charged to the
 * session's uid within max_recorded_tasks (refused tasks count too: they
 * cost the validation). io thread only.
 */
#include "daemon/record.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>

#include "shm/layout.h"

/* Seals that make the memfd's contents fixed: what we read cannot change
 * under us, and the mapping cannot fault (SIGBUS) by shrinking. */
#define RECORD_SEALS (F_SEAL_WRITE | F_SEAL_SHRINK | F_SEAL_GROW)

int session_record(struct session *s, const struct hbgd_config *cfg, int fd, uint64_t tasks,
                   uint32_t *ret_graph, char *msg, size_t msg_len) {
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
        uint64_t memory = hbg_engine_recorded_memory((uint32_t)tasks);
        int err = acct_add_memory(s->acct, &cfg->limits, s->uid, memory, "the recorded graph", msg, msg_len);
        if (err < 0)
                return err;
        void *map = mmap(NULL, bytes, PROT_READ, MAP_SHARED, fd, 0);
        if (map == MAP_FAILED) {
                err = -errno;
                acct_remove_memory(s->acct, s->uid, memory);
                snprintf(msg, msg_len, "cannot map the memfd");
                return err;
        }
        uint32_t bad = 0;
        const char *why = NULL;
        err = hbg_ring_record(s->ring, map, (uint32_t)tasks, &bad, &why);
        munmap(map, bytes);
        if (err < 0) {
                acct_remove_memory(s->acct, s->uid, memory);
                /* Validated and refused: the work was done all the same,
                 * so it counts against the session's budget (a client
                 * cannot make the io thread validate without end). */
                if (err != -ENOSPC && err != -ENOMEM)
                        s->recorded_tasks += tasks;
                if (why && err != -ENOSPC)
                        snprintf(msg, msg_len, "task %" PRIu32 ": %s", bad, why);
                else if (why)
                        snprintf(msg, msg_len, "%s (%u)", why, cfg->engine.max_recorded_graphs);
                else
                        snprintf(msg, msg_len, "out of memory");
                return err;
        }
        s->memory += memory;
        s->recorded_tasks += tasks;
        *ret_graph = (uint32_t)err;
        return 0;
}
