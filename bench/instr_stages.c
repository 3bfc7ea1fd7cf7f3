/* SPDX-License-Identifier: MIT */
/* The stages of a task's path, by source file (instr_stages.h). */
#include "bench/instr_stages.h"

#include <stdbool.h>
#include <string.h>

#define FILES(...) ((const char *const[]){ __VA_ARGS__, NULL })

/* hbgd, in the order a task meets them (RUNTIME_LOGIC.md §10.1-§12). */
static const struct instr_stage hbgd_stages[] = {
        /* Claiming submitted ids, the copy out of the client's memory. */
        { "ingest", FILES("engine/ingest.c", "engine/client_read.c", "engine/work.c") },
        /* The copy checked, the kernel's signature and cost. */
        { "validate", FILES("engine/validate.c", "engine/kernels.c", "engine/recorded.c") },
        /* The slot re-initialised, fanins linked; launched graphs. */
        { "classify", FILES("engine/classify.c", "engine/launch.c") },
        /* Made ready: wake lists, continuation, deques, queues (their
         * pops by dispatch.c included). */
        { "ready", FILES("engine/ready.c", "engine/queues.c") },
        /* Taken and run: the fair share's turns, the kernel, its times,
         * cancels, tracing. */
        { "run", FILES("engine/dispatch.c", "engine/fair_share.c", "engine/kernels_builtin.c", "engine/ktime.c",
                       "engine/cancel.c", "engine/trace.c") },
        /* The status final, the stamp published, the watermark moved. */
        { "complete", FILES("engine/complete.c", "engine/completion.c", "engine/completion_eager.c",
                            "engine/completion_eager_batched.c", "engine/completion_lazy.c",
                            "engine/completion_resolver.c", "engine/failures.c", "shm/completion.c") },
        /* Graphs retired, the client told. */
        { "retire", FILES("engine/retire.c", "engine/signal.c", "engine/live_graphs.c") },
        /* The threads' loop: visits, parking and waking, rings. */
        { "schedule", FILES("engine/sched.c", "engine/wakeup.c", "engine/wake_pages.c", "engine/stall.c",
                            "engine/mailbox.c", "engine/ring.c", "engine/ring_table.c", "engine/fair_share_slots.c",
                            "engine/engine.c") },
        { "other", FILES("") },
};

/* The producer: hbg_graph_add()'s checks and record, the tensor
 * dependencies, the descriptor written and published, and the bench's
 * own program (the graph's description, each hbg_task filled in). */
static const struct instr_stage producer_stages[] = {
        { "add", FILES("libclient/graph.c", "libclient/session.c", "libclient/kernels.c", "libclient/errors.c",
                       "libclient/hangup.c", "libclient/wait.c", "common/kernel_sig.c") },
        { "deps", FILES("libclient/deps.c", "common/dep_tracker.c") },
        { "write", FILES("shm/producer.c") },
        { "bench", FILES("bench/") },
        { "other", FILES("") },
};

const struct instr_stages instr_stages_hbgd = {
        "hbgd", hbgd_stages, sizeof(hbgd_stages) / sizeof(hbgd_stages[0]) };
const struct instr_stages instr_stages_producer = {
        "producer", producer_stages, sizeof(producer_stages) / sizeof(producer_stages[0]) };

_Static_assert(sizeof(hbgd_stages) / sizeof(hbgd_stages[0]) <= INSTR_STAGES_MAX, "INSTR_STAGES_MAX");
_Static_assert(sizeof(producer_stages) / sizeof(producer_stages[0]) <= INSTR_STAGES_MAX, "INSTR_STAGES_MAX");

/* Does path name `want`: at its end after a '/' (or whole), or, for a
 * directory ("bench/"), as a whole component anywhere? */
static bool names(const char *path, const char *want) {
        size_t n = strlen(path), w = strlen(want);
        if (w == 0)
                return false;
        if (want[w - 1] == '/') {
                if (strncmp(path, want, w) == 0)
                        return true;
                for (const char *p = strchr(path, '/'); p; p = strchr(p + 1, '/'))
                        if (strncmp(p + 1, want, w) == 0)
                                return true;
                return false;
        }
        return n >= w && strcmp(path + n - w, want) == 0 && (n == w || path[n - w - 1] == '/');
}

unsigned instr_stage_of(const struct instr_stages *s, const char *file) {
        for (unsigned i = 0; i + 1 < s->n; i++)
                for (const char *const *f = s->v[i].files; *f; f++)
                        if (names(file, *f))
                                return i;
        return s->n - 1;
}

static void add_up(const struct instr_stages *s, const struct cg_files *p, double *sum) {
        for (size_t i = 0; i < p->n; i++)
                if (p->v[i].name)
                        sum[instr_stage_of(s, p->v[i].name)] += (double)p->v[i].ir;
}

void instr_stages_per_task(const struct instr_stages *s, const struct cg_files *run, const struct cg_files *base,
                           uint64_t tasks, double *out) {
        double r[INSTR_STAGES_MAX] = { 0 }, b[INSTR_STAGES_MAX] = { 0 };
        add_up(s, run, r);
        add_up(s, base, b);
        for (unsigned i = 0; i < s->n; i++)
                out[i] = tasks > 1 ? (r[i] - b[i]) / (double)(tasks - 1) : 0;
}
