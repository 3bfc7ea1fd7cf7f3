/* SPDX-License-Identifier: MIT */
/*
 * StarPU 1.3 (bench/peers/peer.h): per run, one starpu_task per task of
 * one codelet whose CPU function calls peer_body, with explicit task
 * dependencies on its fanins' tasks (starpu_task_declare_deps_array), all
 * submitted in index order, then starpu_task_wait_for_all. No data
 * handles: the order is the explicit dependencies alone.
 *
 * Task lifetime: a fanin may have finished before its successor declares
 * the dependency, which StarPU allows provided the finished task was not
 * destroyed (starpu_task_dep.h). So tasks are not auto-destroyed: they
 * live in one array (starpu_task_init gives destroy = 0) and are cleaned
 * after starpu_task_wait_for_all, which returns only once every task's
 * termination, the last StarPU access to it, is over.
 *
 * Debian builds StarPU with non-blocking drivers: idle workers poll their
 * queues without sleeping, so with as many workers as CPUs the thread
 * submitting the graph shares a CPU with a spinning worker.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>

#include <starpu.h>

#include "bench/peers/peer.h"

const char *const peer_name = "starpu";

/* The codelet's function gets only cl_arg: the context of the current run
 * is here, the task index in cl_arg. */
static struct peer_ctx *current;

static void run_task(void *buffers[], void *cl_arg) {
        (void)buffers;
        peer_body(current, (uint32_t)(uintptr_t)cl_arg);
}

static struct starpu_codelet codelet = {
        .cpu_funcs = { run_task },
        .nbuffers = 0,
        .name = "peer_body",
};

/*
 * The scheduler: eager, one central queue, set here so that the
 * environment cannot change what is measured. Against lws (a queue
 * per worker, stealing; StarPU 1.3's default), medians of three
 * rounds on a 2-CPU VM, 2 and 4 workers: eager about twice as fast on the
 * wide graphs (independent, tree, layered, attention), lws 1.2 to 2 times
 * faster on the narrow ones (chain, wavefront). The performance-model
 * schedulers (dm*) have nothing to model in bodies this small.
 */
static const char starpu_sched[] = "eager";

int peer_init(unsigned threads) {
        if (threads > STARPU_MAXCPUS)
                return -EINVAL;        /* Debian's build caps CPU workers */
        /* No banner, no start-up notes on stderr. */
        setenv("STARPU_SILENT", "1", 1);
        /* StarPU 1.3 takes STARPU_SCHED before conf.sched_policy_name,
         * precedence_over_environment_variables notwithstanding. */
        setenv("STARPU_SCHED", starpu_sched, 1);
        struct starpu_conf conf;
        int err = starpu_conf_init(&conf);
        if (err < 0)
                return err;
        /* The options of this program, not stray STARPU_* variables, say
         * what is measured. */
        conf.precedence_over_environment_variables = 1;
        conf.ncpus = (int)threads;
        conf.ncuda = 0;
        conf.nopencl = 0;
        conf.nmic = 0;
        conf.nmpi_ms = 0;
        conf.sched_policy_name = starpu_sched;
        err = starpu_init(&conf);
        return err < 0 ? err : 0;
}

void peer_fini(void) {
        starpu_shutdown();
}

/* No graph object to keep: every run builds its tasks anew. */
int peer_rerun(struct peer_ctx *ctx) {
        (void)ctx;
        return -ENOTSUP;
}

int peer_run(struct peer_ctx *ctx) {
        const struct dag *d = ctx->d;
        uint32_t n = d->n;
        if (d->max_fanin > 16)
                return -EINVAL;         /* dag.h's bound, the size of deps[] */
        struct starpu_task *tasks = malloc(((size_t)n ? n : 1) * sizeof(*tasks));
        if (!tasks)
                return -ENOMEM;
        current = ctx;
        int err = 0;
        uint32_t submitted = 0;      /* tasks initialised */
        for (uint32_t t = 0; t < n; t++) {
                struct starpu_task *task = &tasks[t];
                starpu_task_init(task);
                task->cl = &codelet;
                task->cl_arg = (void *)(uintptr_t)t;
                struct starpu_task *deps[16];
                uint32_t k = 0;
                for (uint32_t e = d->fanin_start[t]; e < d->fanin_start[t + 1]; e++)
                        deps[k++] = &tasks[d->fanins[e]];
                if (k)
                        starpu_task_declare_deps_array(task, k, deps);
                /* Initialised, so cleaned below, submitted or not. */
                submitted = t + 1;
                err = starpu_task_submit(task);
                if (err < 0)
                        break;
        }
        /* Also after a failed submit: the tasks already submitted may
         * still run and must be over before they are cleaned. */
        starpu_task_wait_for_all();
        for (uint32_t t = 0; t < submitted; t++)
                starpu_task_clean(&tasks[t]);
        free(tasks);
        return err < 0 ? err : 0;
}
