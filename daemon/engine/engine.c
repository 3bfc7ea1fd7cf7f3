/* SPDX-License-Identifier: MIT */
/*
 * The engine's public surface (daemon/engine/engine.h): configuration, life
 * cycle, the threads' roles and counters.
 */
#include "daemon/engine/engine.h"
#include "daemon/engine/engine_stats.h"
#include "daemon/engine/engine_trace.h"

#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <syslog.h>
#include <unistd.h>

#include "daemon/engine/completion.h"
#include "daemon/engine/engine_log.h"
#include "daemon/engine/engine_state.h"
#include "daemon/engine/fair_share_slots.h"
#include "daemon/engine/ring.h"
#include "daemon/engine/ring_table.h"
#include "daemon/engine/ready.h"
#include "daemon/engine/wakeup.h"

void engine_config_default(struct hbg_engine_config *ret) {
        *ret = (struct hbg_engine_config){
                .threads = 4,
                .clusters = 8,
                .spin_before_park_ns = 50000,
                .move_off_shared_cpu = 1,
                .stall_timeout_ms = 10000,
                .classify_batch = 64,
                .max_rings = 256,
                .max_threads_per_share = 0,
                .max_task_cost = UINT64_C(1) << 31,
                .kernel_time_budget_ms = 10000,
                .max_recorded_graphs = 64,
                .completion_mode = HBG_COMPLETION_DEFAULT,
                .trace_thread_events = HBG_TRACE_THREAD_EVENTS,
        };
}

int engine_config_validate(const struct hbg_engine_config *cfg, const char **ret_error) {
        const char *dummy;
        if (!ret_error)
                ret_error = &dummy;
        if (cfg->threads < 1 || cfg->threads > HBG_ENGINE_MAX_THREADS) {
                *ret_error = "threads: must be between 1 and 64";
                return -ERANGE;
        }
        if (cfg->clusters < 1 || cfg->clusters > HBG_ENGINE_MAX_CLUSTERS) {
                *ret_error = "clusters: must be between 1 and 1024 (with no cores no task could run)";
                return -ERANGE;
        }
        if (cfg->classify_batch < 1 || cfg->classify_batch > HBG_ENGINE_MAX_CLASSIFY_BATCH) {
                *ret_error = "classify_batch: must be between 1 and 4096";
                return -ERANGE;
        }
        if (cfg->max_rings < 1 || cfg->max_rings > HBG_ENGINE_MAX_RINGS) {
                *ret_error = "max_rings: must be between 1 and 1024";
                return -ERANGE;
        }
        if (cfg->max_spinning_threads > HBG_ENGINE_MAX_THREADS) {
                *ret_error = "max_spinning_threads: must be between 0 (automatic) and 64";
                return -ERANGE;
        }
        if (cfg->max_awake_threads > HBG_ENGINE_MAX_THREADS) {
                *ret_error = "max_awake_threads: must be between 0 (automatic) and 64";
                return -ERANGE;
        }
        if (cfg->max_recorded_graphs > HBG_ENGINE_MAX_RECORDED) {
                *ret_error = "max_recorded_graphs: must be between 0 (none) and 65536";
                return -ERANGE;
        }
        if (cfg->trace_thread_events < HBG_TRACE_THREAD_EVENTS_MIN ||
            cfg->trace_thread_events > HBG_TRACE_THREAD_EVENTS_MAX) {
                *ret_error = "trace_thread_events: must be between 16 and 4194304";
                return -ERANGE;
        }
        if (cfg->kernel_time_budget_ms < 1 || cfg->kernel_time_budget_ms > HBG_ENGINE_MAX_KERNEL_BUDGET_MS) {
                *ret_error = "kernel_time_budget_ms: must be between 1 and 3600000 (an hour)";
                return -ERANGE;
        }
        if (cfg->spin_before_park_ns > UINT64_C(1000000000)) {
                *ret_error = "spin_before_park_ns: must not exceed 1 s";
                return -ERANGE;
        }
        const struct completion_policy *policy = completion_policy(cfg->completion_mode);
        if (!policy) {
                *ret_error = completion_unknown_why();
                return -EINVAL;
        }
        if (policy->thread_main && cfg->threads < 2) {
                *ret_error = policy->thread_why;
                return -EINVAL;
        }
        if (cfg->max_threads_per_share > cfg->threads - (policy->thread_main ? 1u : 0u)) {
                *ret_error = "max_threads_per_session: must not exceed the scheduler threads";
                return -ERANGE;
        }
        *ret_error = NULL;
        return 0;
}

/* The CPUs this process may run on (its affinity mask: a cpuset or
 * systemd's CPUAffinity= narrows it), at least 1; the online CPUs if the
 * mask cannot be read. */
static unsigned cpus_allowed(void) {
        cpu_set_t set;
        long n = sched_getaffinity(0, sizeof(set), &set) == 0 ? CPU_COUNT(&set) : sysconf(_SC_NPROCESSORS_ONLN);
        return n > 0 ? (unsigned)n : 1u;
}

/* The engine's sizes from its configuration: threads and their roles,
 * the automatic limits. */
static void engine_sizes(struct hbg_engine *e, const struct hbg_engine_config *cfg) {
        e->completion = completion_policy(cfg->completion_mode);
        e->nthreads = cfg->threads;
        e->nschedulers = cfg->threads - (e->completion->thread_main ? 1u : 0u);
        unsigned cpus = cpus_allowed(); /* both automatic limits count the same CPUs */
        e->max_spinners = cfg->max_spinning_threads ? cfg->max_spinning_threads : cpus > 2 ? cpus - 1 : 1u;
        e->max_awake = cfg->max_awake_threads ? cfg->max_awake_threads : cpus;
        if (e->cfg.max_threads_per_share == 0)
                e->cfg.max_threads_per_share = e->nschedulers > 1 ? e->nschedulers - 1 : 1;
        e->kernel_budget_ns = kernel_budget_ns(cfg->kernel_time_budget_ms);
}

/* Each kernel's message for a task that ran past its time budget. */
static int budget_messages(struct hbg_engine *e, const struct hbg_engine_config *cfg) {
        e->budget_why = calloc(kernel_count(), sizeof(*e->budget_why));
        if (!e->budget_why)
                return -ENOMEM;
        for (size_t i = 0; i < kernel_count(); i++)
                snprintf(e->budget_why[i], sizeof(e->budget_why[i]),
                         "%s: kernel exceeded its time budget of %" PRIu64 " ms", kernel_at(i)->sig->name,
                         cfg->kernel_time_budget_ms);
        return 0;
}

/* The cycle counter calibrated, and each thread's kernel times and run
 * averages. */
static int thread_kernel_times(struct hbg_engine *e) {
        ktime_calibrate(&e->ktime_clock);
        if (e->ktime_clock.doubt)
                engine_log(e, LOG_WARNING, NULL, "per-kernel times and traces: %s", e->ktime_clock.doubt);
        /* Each thread's kernel times in memory of its own (whole cache
         * lines: a neighbour's writes share none). */
        size_t ktime_bytes = (kernel_count() * sizeof(struct ktime_kernel) + 63) & ~(size_t)63;
        /* Whole cache lines too: written at every run. */
        size_t avg_bytes = (kernel_count() * sizeof(uint64_t) + 63) & ~(size_t)63;
        /* A counter whose rate is in doubt steers no wake-up: 0, every
         * surplus is worth one. */
        e->long_run_ticks = (uint64_t)((double)READY_SURPLUS_WAKE_NS / e->ktime_clock.ns_per_tick);
        e->surplus_wake_ticks = e->ktime_clock.doubt ? 0 : e->long_run_ticks;
        for (unsigned i = 0; i < e->nthreads; i++) {
                e->threads[i].ktime = aligned_alloc(64, ktime_bytes ? ktime_bytes : 64);
                e->threads[i].run_avg = aligned_alloc(64, avg_bytes ? avg_bytes : 64);
                if (!e->threads[i].ktime || !e->threads[i].run_avg)
                        return -ENOMEM;
                memset(e->threads[i].ktime, 0, ktime_bytes);
                e->threads[i].ktime_clock = e->ktime_clock;
                for (size_t k = 0; k < kernel_count(); k++)
                        e->threads[i].run_avg[k] = e->long_run_ticks;
        }
        return 0;
}

/* Cluster i belongs to scheduler thread i mod n: every cluster has
 * exactly one owner; with more schedulers than clusters the extra ones
 * own none and classify, complete and retire only (§9.2). A completion
 * policy's own thread (the resolver, §11.3) owns none. */
static void threads_assign(struct hbg_engine *e, const struct hbg_engine_config *cfg) {
        unsigned ns = e->nschedulers;
        for (unsigned i = 0; i < e->nthreads; i++) {
                struct sched_thread *t = &e->threads[i];
                t->engine = e;
                t->index = i;
                t->clusters = i >= ns ? 0 : cfg->clusters / ns + (i < cfg->clusters % ns ? 1 : 0);
                t->ring_cursor = i;
        }
        e->all_execute = cfg->clusters >= ns;
}

/* The threads started, each named; threads_started counts them. */
static int threads_start(struct hbg_engine *e, const struct hbg_engine_config *cfg) {
        unsigned ns = e->nschedulers;
        for (unsigned i = 0; i < e->nthreads; i++) {
                void *(*body)(void *) = i >= ns ? e->completion->thread_main : sched_thread_main;
                int err = -pthread_create(&e->threads[i].thread, NULL, body, &e->threads[i]);
                if (err < 0)
                        return err;
                e->threads_started++;
                /* For ps -L, top -H and perf: 15 characters at most. */
                char name[32];
                if (i < ns)
                        snprintf(name, sizeof(name), "hbgd-sched%u", i);
                else
                        snprintf(name, sizeof(name), "hbgd-%s", completion_mode_name(cfg->completion_mode));
                name[15] = '\0';
                (void)pthread_setname_np(e->threads[i].thread, name);
        }
        return 0;
}

/* One cleanup path: engine_free() takes the engine in any state this
 * constructor can leave it in (threads_started counts the live threads). */
int engine_new(struct hbg_engine **ret, const struct hbg_engine_config *cfg) {
        const char *why;
        int err = engine_config_validate(cfg, &why);
        if (err < 0)
                return err;

        struct hbg_engine *e = calloc(1, sizeof(*e));
        if (!e)
                return -ENOMEM;
        e->cfg = *cfg;
        ring_spares_init(&e->spares); /* before any failure: engine_free() destroys it */
        engine_sizes(e, cfg);
        if ((err = budget_messages(e, cfg)) < 0)
                goto fail;
        err = -pthread_mutex_init(&e->rings_lock, NULL);
        if (err < 0)
                goto fail;
        e->rings_lock_ready = true;
        err = -ENOMEM;
        e->rings = calloc(cfg->max_rings, sizeof(*e->rings));
        e->shares = aligned_alloc(64, cfg->max_rings * sizeof(*e->shares));
        e->threads = aligned_alloc(64, cfg->threads * sizeof(*e->threads));
        if (e->threads) /* before any failure: engine_free() frees their tables */
                memset(e->threads, 0, cfg->threads * sizeof(*e->threads));
        if (!e->rings || !e->shares || !e->threads)
                goto fail;
        memset(e->shares, 0, cfg->max_rings * sizeof(*e->shares));
        if ((err = trace_init(&e->trace, cfg->threads, cfg->trace_thread_events)) < 0)
                goto fail;
        if ((err = thread_kernel_times(e)) < 0)
                goto fail;
        if (e->completion->engine_init && (err = e->completion->engine_init(e)) < 0)
                goto fail;
        threads_assign(e, cfg);
        bool page_waits;
        if ((err = wake_pages_init(&e->wake_pages, e->all_execute ? 1u : (uint32_t)INT_MAX, &page_waits)) < 0)
                goto fail;
        atomic_store_explicit(&e->page_waits, page_waits, memory_order_relaxed);
        if ((err = threads_start(e, cfg)) < 0)
                goto fail;
        *ret = e;
        return 0;
fail:
        engine_free(e);
        return err;
}

struct hbg_engine *engine_free(struct hbg_engine *e) {
        if (!e)
                return NULL;
        atomic_store(&e->stop, true);
        for (unsigned i = 0; i < e->threads_started; i++) {
                /* A thread may be parked with no timeout: keep kicking. */
                wakeup_all(e);
                pthread_join(e->threads[i].thread, NULL);
        }
        if (e->rings) {
                unsigned high = atomic_load(&e->rings_high);
                for (unsigned i = 0; i < high; i++) {
                        struct hbg_ring *r = atomic_load(&e->rings[i]);
                        if (r)
                                engine_ring_remove(e, r, -ESHUTDOWN);
                }
        }
        /* Every thread has exited: nothing holds a ring any more (the
         * owner's threads that held one are gone too). */
        if (e->threads) {
                ring_table_drop_holds(e);
                engine_collect(e);
        }
        if (e->rings_lock_ready)
                pthread_mutex_destroy(&e->rings_lock);
        if (e->completion && e->completion->engine_free)
                e->completion->engine_free(e);
        free(e->rings);
        free(e->shares);
        for (unsigned i = 0; e->threads && i < e->nthreads; i++) {
                free(e->threads[i].ktime);
                free(e->threads[i].run_avg);
        }
        free(e->threads);
        trace_fini(&e->trace);
        free(e->budget_why);
        wake_pages_free(&e->wake_pages);
        ring_spares_destroy(&e->spares);
        free(e);
        return NULL;
}

void engine_thread_alive(const struct hbg_engine *e, unsigned thread,
                         struct hbg_thread_alive *ret) {
        const struct sched_thread *t = &e->threads[thread];
        ret->heartbeat = atomic_load_explicit(&t->heartbeat, memory_order_relaxed);
        ret->parked = atomic_load_explicit(&t->parked, memory_order_relaxed);
}

/* A ring's graph metrics, added to ret (the ring may be in use). */
static void ring_graph_metrics(const struct hbg_ring *r, struct engine_metrics *ret) {
        ret->graphs_submitted += atomic_load_explicit(&r->retirer.graphs_noticed, memory_order_relaxed);
        histogram_read(&r->retirer.graph_latency, &ret->graph_latency);
        for (unsigned i = 0; i < HBG_ERRNO_SLOTS; i++)
                ret->graphs_failed[i] +=
                        atomic_load_explicit(&r->retirer.graphs_failed_by_errno[i], memory_order_relaxed);
}

void engine_metrics(const struct hbg_engine *e, struct engine_metrics *ret) {
        struct hbg_engine *me = (struct hbg_engine *)e;
        memset(ret, 0, sizeof(*ret));
        pthread_mutex_lock(&me->rings_lock);
        ret->graphs_submitted = e->freed_graphs_noticed;
        histogram_read(&e->freed_graph_latency, &ret->graph_latency);
        memcpy(ret->graphs_failed, e->freed_graphs_failed, sizeof(ret->graphs_failed));
        unsigned high = atomic_load(&e->rings_high);
        for (unsigned i = 0; i < high; i++) {
                struct hbg_ring *r = atomic_load(&e->rings[i]);
                if (r)
                        ring_graph_metrics(r, ret);
        }
        for (const struct hbg_ring *r = e->removed; r; r = r->next_removed)
                ring_graph_metrics(r, ret);
        pthread_mutex_unlock(&me->rings_lock);
        for (unsigned i = 0; i < HBG_HIST_BUCKETS; i++)
                ret->graphs_retired += ret->graph_latency.buckets[i];
        for (unsigned t = 0; t < e->nthreads; t++)
                for (unsigned i = 0; i < HBG_ERRNO_SLOTS; i++)
                        ret->tasks_failed[i] += stat_get(&e->threads[t].tasks_failed[i]);
}

/* The tasks whose last block thread t ran: every one is timed, so its
 * run histograms count them (no counter of its own on the task's path). */
static uint64_t thread_tasks_timed(const struct hbg_engine *e, const struct sched_thread *t) {
        struct hbg_hist_snapshot h = { 0 };
        uint64_t n = 0;
        for (size_t k = 0; k < kernel_count(); k++)
                ktime_read_hist(&e->ktime_clock, &t->ktime[k].run, &h);
        for (unsigned i = 0; i < HBG_HIST_BUCKETS; i++)
                n += h.buckets[i];
        return n;
}

void engine_thread_task_time(const struct hbg_engine *e, unsigned thread, struct hbg_hist_snapshot *ret) {
        memset(ret, 0, sizeof(*ret));
        for (size_t k = 0; k < kernel_count(); k++)
                ktime_read_hist(&e->ktime_clock, &e->threads[thread].ktime[k].run, ret);
}

void engine_kernel_times(const struct hbg_engine *e, size_t kernel, struct ktime_snapshot *ret) {
        memset(ret, 0, sizeof(*ret));
        for (unsigned t = 0; t < e->nthreads; t++)
                ktime_read(&e->ktime_clock, &e->threads[t].ktime[kernel], ret);
}

int engine_wake_page_acquire(struct hbg_engine *e, uid_t uid, int *ret_fd) {
        /* No kick for a page just made: threads parked before it do not
         * wait on it, and wait on it the next time they park. The next
         * ring served (at its client's first doorbell) wakes one for it
         * (wake_pages_take_unwaited()), and nothing the page could wake
         * them for comes before that: an unserved ring is not visited.
         * Waking every parked thread here cost a connect that made a page
         * a wake-up per thread and their idle spins, on the CPUs the
         * connecting client needs, and let a uid wake them by opening
         * sessions. */
        return wake_pages_acquire(&e->wake_pages, uid, ret_fd);
}

void engine_wake_page_release(struct hbg_engine *e, int handle) {
        wake_pages_release(&e->wake_pages, handle);
}

int engine_wake_page_ahead(struct hbg_engine *e) {
        return wake_pages_make_ahead(&e->wake_pages);
}

void engine_wake_page_drop_ahead(struct hbg_engine *e) {
        wake_pages_drop_ahead(&e->wake_pages);
}

unsigned engine_threads(const struct hbg_engine *e) {
        return e->nthreads;
}

void engine_thread_stats(const struct hbg_engine *e, unsigned thread,
                         struct hbg_thread_stats *ret) {
        struct hbg_engine *me = (struct hbg_engine *)e;
        const struct sched_thread *t = &e->threads[thread];

        pthread_mutex_lock(&me->rings_lock);
        struct ring_counters sum = t->retired;
        unsigned high = atomic_load(&e->rings_high);
        for (unsigned i = 0; i < high; i++) {
                struct hbg_ring *r = atomic_load(&e->rings[i]);
                if (r)
                        ring_counters_add_thread(r, thread, &sum);
        }
        /* Removed and not folded yet: left out, a counter would go down
         * until engine_collect() frees the ring (as engine_metrics()). */
        for (const struct hbg_ring *r = e->removed; r; r = r->next_removed)
                ring_counters_add_thread(r, thread, &sum);
        pthread_mutex_unlock(&me->rings_lock);

        *ret = (struct hbg_thread_stats){
                .classified = stat_get(&t->stats.classified),
                .batch_linked = stat_get(&t->stats.batch_linked),
                .dispatched = sum.dispatched,
                .executed_tasks = thread_tasks_timed(e, t),
                .continued = stat_get(&t->stats.continued),
                .stolen = stat_get(&t->stats.stolen),
                .retired_inline = stat_get(&t->stats.retired_inline),
                .failed = stat_get(&t->stats.failed),
                .published = sum.published,
                .failsafe_pushes = sum.failsafe_pushes,
                .failsafe_retries = sum.failsafe_retries,
                .watermark_advances = sum.watermark_advances,
                .watermark_cas_failures = sum.watermark_cas_failures,
                .parks = stat_get(&t->stats.parks),
                .wakeups = stat_get(&t->stats.wakeups),
                .spurious_wakeups = stat_get(&t->stats.spurious),
                .cpu_moves = stat_get(&t->stats.moves),
                .clusters = t->clusters,
        };
}
