/* SPDX-License-Identifier: MIT */
/*
 * Engine life cycle, the scheduler loop, cores, parking and counters
 * (RUNTIME_LOGIC.md §9).
 */
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <linux/futex.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <syslog.h>
#include <time.h>
#include <unistd.h>

#include "daemon/engine_private.h"

/* ------------------------------------------------------------ small things */

int64_t engine_now_ms(void) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static int64_t now_ns(void) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static void log_stderr(void *userdata, int priority, const char *fmt, va_list ap) {
        (void)userdata;
        char buf[1024];
        vsnprintf(buf, sizeof(buf), fmt, ap);
        fprintf(stderr, "<%d>%s\n", priority, buf);
}

void engine_log(struct hbg_engine *e, int priority, const char *fmt, ...) {
        va_list ap;
        va_start(ap, fmt);
        if (e->cfg.log)
                e->cfg.log(e->cfg.log_userdata, priority, fmt, ap);
        else
                log_stderr(NULL, priority, fmt, ap);
        va_end(ap);
}

static long futex(_Atomic uint32_t *word, int op, uint32_t val, const struct timespec *timeout) {
        return syscall(SYS_futex, word, op, val, timeout, NULL, 0);
}

/* ------------------------------------------------------------ config */

void hbg_engine_config_default(struct hbg_engine_config *ret) {
        *ret = (struct hbg_engine_config){
                .threads = 4,
                .clusters = 8,
                .spin_before_park_ns = 50000,
                .stall_timeout_ms = 10000,
                .classify_batch = 64,
                .max_rings = 256,
                .max_threads_per_ring = 0,
                .max_task_cost = UINT64_C(1) << 31,
                .completion_mode = HBG_COMPLETION_EAGER,
        };
}

int hbg_engine_config_validate(const struct hbg_engine_config *cfg, const char **ret_error) {
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
        if (cfg->classify_batch < 1 || cfg->classify_batch > 4096) {
                *ret_error = "classify_batch: must be between 1 and 4096";
                return -ERANGE;
        }
        if (cfg->max_rings < 1 || cfg->max_rings > HBG_ENGINE_MAX_RINGS) {
                *ret_error = "max_rings: must be between 1 and 1024";
                return -ERANGE;
        }
        if (cfg->spin_before_park_ns > UINT64_C(1000000000)) {
                *ret_error = "spin_before_park_ns: must not exceed 1 s";
                return -ERANGE;
        }
        if (cfg->max_threads_per_ring > cfg->threads) {
                *ret_error = "max_threads_per_session: must not exceed threads";
                return -ERANGE;
        }
        if (cfg->completion_mode != HBG_COMPLETION_EAGER) {
                *ret_error = "completion_mode: unknown mode";
                return -EINVAL;
        }
        *ret_error = NULL;
        return 0;
}

/* ------------------------------------------------------------ rings */

/* Hazard-pointer acquire (§9.3): publish, then re-check the slot. Both
 * seq_cst: against the remover's "clear slot; read hazards". */
static struct hbg_ring *ring_enter(struct sched_thread *t, unsigned idx) {
        struct hbg_ring *r = atomic_load_explicit(&t->engine->rings[idx], memory_order_acquire);
        if (!r)
                return NULL;
        atomic_store(&t->hazard, r);
        if (atomic_load(&t->engine->rings[idx]) != r) {
                atomic_store_explicit(&t->hazard, NULL, memory_order_release);
                return NULL;
        }
        return r;
}

static void ring_leave(struct sched_thread *t) {
        atomic_store_explicit(&t->hazard, NULL, memory_order_release);
}

/* The second hazard slot, for a short look at another ring while the
 * thread visits one (fair share). Same protocol as ring_enter(). */
static struct hbg_ring *ring_peek_enter(struct sched_thread *t, unsigned idx) {
        struct hbg_ring *r = atomic_load_explicit(&t->engine->rings[idx], memory_order_acquire);
        if (!r)
                return NULL;
        atomic_store(&t->peek_hazard, r);
        if (atomic_load(&t->engine->rings[idx]) != r) {
                atomic_store_explicit(&t->peek_hazard, NULL, memory_order_release);
                return NULL;
        }
        return r;
}

static void ring_peek_leave(struct sched_thread *t) {
        atomic_store_explicit(&t->peek_hazard, NULL, memory_order_release);
}

int hbg_engine_ring_add(struct hbg_engine *e, const struct hbg_ring_params *p,
                        struct hbg_ring **ret) {
        struct hbg_ring *r;
        int err = ring_new(e, p, &r);
        if (err < 0)
                return err;

        pthread_mutex_lock(&e->rings_lock);
        unsigned idx;
        for (idx = 0; idx < e->cfg.max_rings; idx++)
                if (!atomic_load(&e->rings[idx]))
                        break;
        if (idx == e->cfg.max_rings) {
                pthread_mutex_unlock(&e->rings_lock);
                /* Never published: nobody else knows it; not released. */
                ring_free(r);
                return -ENOSPC;
        }
        r->index = idx;
        atomic_store(&e->rings[idx], r);
        atomic_fetch_add(&e->ring_count, 1);
        if (atomic_load(&e->rings_high) <= idx)
                atomic_store(&e->rings_high, idx + 1);
        pthread_mutex_unlock(&e->rings_lock);
        hbg_engine_kick(e);
        *ret = r;
        return 0;
}

uint64_t hbg_engine_ring_memory(const struct hbg_engine *e, const struct hbg_geometry *g) {
        return ring_memory(e->nthreads, g);
}

static void fold_completer_stats(struct hbg_completer_stats *into, const struct hbg_completer_stats *s) {
        hbg_stat_inc(&into->published, hbg_stat_get(&s->published));
        hbg_stat_inc(&into->deferred, hbg_stat_get(&s->deferred));
        hbg_stat_inc(&into->retries, hbg_stat_get(&s->retries));
        hbg_stat_inc(&into->advances, hbg_stat_get(&s->advances));
        hbg_stat_inc(&into->cas_failures, hbg_stat_get(&s->cas_failures));
}

/*
 * Removal (§9.3) never waits for a scheduler thread: the ring leaves
 * rings[] (seq_cst, against ring_enter()'s re-check), its graphs are
 * failed, and it waits on e->removed until no hazard pointer holds it. A
 * thread inside a long kernel of this ring keeps its hazard until the
 * kernel returns; hbg_engine_collect() frees the ring after that.
 */
void hbg_engine_ring_remove(struct hbg_engine *e, struct hbg_ring *r, int reason) {
        if (!r)
                return;
        atomic_store(&r->removing, true);
        r->removal_reason = reason < 0 ? reason : -ESHUTDOWN;
        pthread_mutex_lock(&e->rings_lock);
        atomic_store(&e->rings[r->index], NULL);
        atomic_fetch_sub(&e->ring_count, 1);
        r->next_removed = e->removed;
        e->removed = r;
        pthread_mutex_unlock(&e->rings_lock);
        /* Fail what is pending now, so the client (if still there) hears at
         * once; safe while threads still run: the combining retire lock. */
        ring_fail_quietly(r, r->removal_reason);
}

static bool ring_held(struct hbg_engine *e, struct hbg_ring *r) {
        for (unsigned i = 0; i < e->nthreads; i++)
                if (atomic_load(&e->threads[i].hazard) == r ||
                    atomic_load(&e->threads[i].peek_hazard) == r)
                        return true;
        return false;
}

/* Free one removed ring nobody holds: final graph failures, counters
 * folded into the threads, the owner told. */
static void ring_reclaim(struct hbg_engine *e, struct hbg_ring *r) {
        for (unsigned i = 0; i < e->nthreads; i++)
                fold_completer_stats(&e->threads[i].retired_completer,
                                     &r->per_thread[i].completer.stats);
        ring_stop(r, r->removal_reason);
        void (*released)(void *) = r->released;
        void *userdata = r->released_userdata;
        ring_free(r);
        if (released)
                released(userdata);
}

unsigned hbg_engine_collect(struct hbg_engine *e) {
        struct hbg_ring *free_list = NULL;
        unsigned held = 0;

        pthread_mutex_lock(&e->rings_lock);
        for (struct hbg_ring **p = &e->removed; *p;) {
                struct hbg_ring *r = *p;
                if (ring_held(e, r)) {
                        held++;
                        p = &r->next_removed;
                        continue;
                }
                *p = r->next_removed;
                r->next_removed = free_list;
                free_list = r;
        }
        pthread_mutex_unlock(&e->rings_lock);
        /* Outside the lock: `released` may call back into the engine. */
        while (free_list) {
                struct hbg_ring *r = free_list;
                free_list = r->next_removed;
                ring_reclaim(e, r);
        }
        return held;
}

/*
 * Fair share (§9.5). Thread t is about to start another task of r, which
 * has long tasks, and r.running counts t. It leaves r when another ring
 * has work and either fewer threads on it than r has, or r is over its cap
 * (max_threads_per_ring). Only long tasks pay for this look (a scan of the
 * rings through the second hazard slot); a lone ring never does.
 */
bool engine_should_yield_ring(struct sched_thread *t, struct hbg_ring *r) {
        struct hbg_engine *e = t->engine;
        if (atomic_load_explicit(&e->ring_count, memory_order_relaxed) < 2)
                return false;
        unsigned mine = atomic_load_explicit(&r->running, memory_order_relaxed);
        bool over_cap = mine > e->cfg.max_threads_per_ring;
        unsigned high = atomic_load_explicit(&e->rings_high, memory_order_acquire);
        bool yield = false;
        for (unsigned i = 0; i < high && !yield; i++) {
                struct hbg_ring *x = ring_peek_enter(t, i);
                if (!x)
                        continue;
                if (x != r && !atomic_load_explicit(&x->removing, memory_order_relaxed) &&
                    (over_cap || atomic_load_explicit(&x->running, memory_order_relaxed) < mine))
                        yield = ring_has_work(x);
                ring_peek_leave(t);
        }
        return yield;
}

/* ------------------------------------------------------------ wake & park */

void hbg_engine_kick(struct hbg_engine *e) {
        atomic_fetch_add(&e->wake_seq, 1);
        if (atomic_load(&e->idle) > 0)
                futex(&e->wake_seq, FUTEX_WAKE_PRIVATE, INT_MAX, NULL);
}

void hbg_ring_kick(struct hbg_ring *r) {
        if (atomic_load_explicit(&r->cpl->need_wakeup, memory_order_relaxed))
                atomic_store_explicit(&r->cpl->need_wakeup, 0, memory_order_relaxed);
        hbg_engine_kick(r->engine);
}

/* Surplus work any thread can do appeared: wake one parked peer (§9.4). */
void engine_wake_one(struct hbg_engine *e) {
        if (atomic_load_explicit(&e->idle, memory_order_relaxed) == 0)
                return;
        atomic_fetch_add(&e->wake_seq, 1);
        futex(&e->wake_seq, FUTEX_WAKE_PRIVATE, 1, NULL);
}

/* Ready tasks appeared that need a core: make sure a parked thread that
 * owns clusters wakes. When some threads own none, a single futex wake may
 * land on one of those, which cannot run the task: wake them all then
 * (such configurations are the unusual ones). */
void engine_wake_executor(struct hbg_engine *e) {
        if (atomic_load_explicit(&e->idle_executors, memory_order_relaxed) == 0)
                return;
        atomic_fetch_add(&e->wake_seq, 1);
        futex(&e->wake_seq, FUTEX_WAKE_PRIVATE, e->all_execute ? 1 : INT_MAX, NULL);
}

/*
 * Park (§9.4). The last thread to go idle sets NEED_WAKEUP in every ring,
 * then re-checks every ring for client-made work; the client publishes
 * `submitted` then reads NEED_WAKEUP. Both sides seq_cst (store->load
 * pair), so either we see the work or the client rings the doorbell.
 */
static void park(struct sched_thread *t) {
        struct hbg_engine *e = t->engine;
        uint32_t seq = atomic_load(&e->wake_seq);
        unsigned idle = atomic_fetch_add(&e->idle, 1) + 1;
        bool last = idle == e->nthreads;
        bool work = false, unfinished = false, deferred = false, ready = false;
        if (t->clusters > 0)
                atomic_fetch_add(&e->idle_executors, 1);
        unsigned high = atomic_load(&e->rings_high);

        for (unsigned i = 0; i < high && !work; i++) {
                struct hbg_ring *r = ring_enter(t, i);
                if (!r)
                        continue;
                if (last)
                        atomic_store(&r->cpl->need_wakeup, 1);
                work = ring_has_external_work(r) || mpmc_maybe_nonempty(&r->retire);
                for (unsigned s = 0; s < SHAPE_EXEC_COUNT; s++)
                        ready = ready || mpmc_maybe_nonempty(&r->ready[s]);
                work = work || (t->clusters > 0 && ready);
                unfinished = unfinished || ring_unfinished(r);
                deferred = deferred || hbg_failsafe_heap_len(&r->per_thread[t->index].completer.heap) > 0;
                ring_leave(t);
        }
        /* Ready tasks this thread cannot run (it owns no cluster) while an
         * owner sleeps: wake the owners before sleeping. */
        if (!work && ready && t->clusters == 0)
                engine_wake_executor(e);
        if (!work && !atomic_load(&e->stop)) {
                struct timespec ts, *timeout = NULL;
                if (deferred) {
                        /* Our deferred stamps wait for the watermark, which
                         * others move without telling us: poll gently. */
                        ts = (struct timespec){ .tv_nsec = 1000000 };
                        timeout = &ts;
                } else if (unfinished && e->cfg.stall_timeout_ms) {
                        uint64_t ms = e->cfg.stall_timeout_ms / 4;
                        if (ms > 1000)
                                ms = 1000;
                        if (ms == 0)
                                ms = 1;
                        ts = (struct timespec){ .tv_sec = (time_t)(ms / 1000),
                                                .tv_nsec = (long)(ms % 1000) * 1000000 };
                        timeout = &ts;
                }
                stat_add(&t->stats.parks, 1);
                atomic_store_explicit(&t->parked, true, memory_order_relaxed);
                futex(&e->wake_seq, FUTEX_WAIT_PRIVATE, seq, timeout);
                atomic_store_explicit(&t->parked, false, memory_order_relaxed);
                stat_add(&t->stats.wakeups, 1);
        }
        if (t->clusters > 0)
                atomic_fetch_sub(&e->idle_executors, 1);
        atomic_fetch_sub(&e->idle, 1);
        /* Somebody is awake now: clients need not ring. */
        high = atomic_load(&e->rings_high);
        for (unsigned i = 0; i < high; i++) {
                struct hbg_ring *r = ring_enter(t, i);
                if (!r)
                        continue;
                if (atomic_load_explicit(&r->cpl->need_wakeup, memory_order_relaxed))
                        atomic_store_explicit(&r->cpl->need_wakeup, 0, memory_order_relaxed);
                ring_leave(t);
        }
}

/* ------------------------------------------------------------ the loop */

static bool visit_ring(struct sched_thread *t, struct hbg_ring *r, bool check_stall) {
        const struct completion_ops *ops = t->engine->completion;
        bool work = false;

        work |= ops->tick(t, r);
        work |= ring_poll_mailbox(t, r);
        work |= ring_classify(t, r);
        work |= ring_retire_ready(t, r, 16);
        work |= dispatch_ring(t, r);
        if (ring_graphs_arrived(r))
                ring_retire_graphs(r);
        if (check_stall)
                ring_check_stall(t, r);
        return work;
}

static void engine_sleep_ms(long ms) {
        struct timespec ts = { .tv_sec = ms / 1000, .tv_nsec = (ms % 1000) * 1000000 };
        while (nanosleep(&ts, &ts) < 0)
                ;
}

static void *thread_main(void *arg) {
        struct sched_thread *t = arg;
        struct hbg_engine *e = t->engine;
        int64_t idle_since = 0;

        bool test_stall = e->test_stall_thread == (int)t->index;

        while (!atomic_load_explicit(&e->stop, memory_order_relaxed)) {
                bool work = false;
                unsigned high = atomic_load_explicit(&e->rings_high, memory_order_acquire);
                int64_t now_ms = engine_now_ms();
                atomic_store_explicit(&t->heartbeat,
                                      atomic_load_explicit(&t->heartbeat, memory_order_relaxed) + 1,
                                      memory_order_relaxed);
                if (test_stall && now_ms >= e->test_stall_at_ms) {
                        /* Test only: a wedged scheduler thread (no
                         * heartbeat, not parked) until the engine stops. */
                        engine_log(e, LOG_WARNING, "thread %u: stalled on purpose (HBGD_TEST_STALL_THREAD)",
                                   t->index);
                        while (!atomic_load_explicit(&e->stop, memory_order_relaxed))
                                engine_sleep_ms(10);
                        break;
                }
                bool check_stall = now_ms - t->last_stall_check_ms >= 100;
                if (check_stall)
                        t->last_stall_check_ms = now_ms;

                for (unsigned n = 0; n < high; n++) {
                        struct hbg_ring *r = ring_enter(t, (t->ring_cursor + n) % high);
                        if (!r)
                                continue;
                        work |= visit_ring(t, r, check_stall);
                        ring_leave(t);
                }
                t->ring_cursor++;

                if (work) {
                        idle_since = 0;
                        continue;
                }
                int64_t now = now_ns();
                if (idle_since == 0)
                        idle_since = now;
                if ((uint64_t)(now - idle_since) < e->cfg.spin_before_park_ns || test_stall) {
#if defined(__x86_64__) || defined(__i386__)
                        __builtin_ia32_pause();
#endif
                        continue;
                }
                park(t);
                idle_since = 0;
        }
        return NULL;
}

/* ------------------------------------------------------------ life cycle */

/* One cleanup path: hbg_engine_free() takes the engine in any state this
 * constructor can leave it in (threads_started counts the live threads). */
int hbg_engine_new(struct hbg_engine **ret, const struct hbg_engine_config *cfg) {
        const char *why;
        int err = hbg_engine_config_validate(cfg, &why);
        if (err < 0)
                return err;

        struct hbg_engine *e = calloc(1, sizeof(*e));
        if (!e)
                return -ENOMEM;
        e->cfg = *cfg;
        if (e->cfg.max_threads_per_ring == 0)
                e->cfg.max_threads_per_ring = cfg->threads > 1 ? cfg->threads - 1 : 1;
        e->completion = &completion_eager_ops;
        e->nthreads = cfg->threads;
        e->test_stall_thread = -1;
        err = -pthread_mutex_init(&e->rings_lock, NULL);
        if (err < 0)
                goto fail;
        e->rings_lock_ready = true;
        err = -ENOMEM;
        e->rings = calloc(cfg->max_rings, sizeof(*e->rings));
        e->threads = aligned_alloc(64, cfg->threads * sizeof(*e->threads));
        if (!e->rings || !e->threads)
                goto fail;
        memset(e->threads, 0, cfg->threads * sizeof(*e->threads));
        const char *stall = getenv("HBGD_TEST_STALL_THREAD");
        if (stall && *stall) {
                /* Test only: "N" or "N:MS" (stall thread N after MS ms). */
                char *end;
                unsigned long n = strtoul(stall, &end, 10);
                unsigned long ms = *end == ':' ? strtoul(end + 1, NULL, 10) : 0;
                if (n < cfg->threads) {
                        e->test_stall_thread = (int)n;
                        e->test_stall_at_ms = engine_now_ms() + (int64_t)ms;
                }
        }

        /* Cluster i belongs to thread i mod n: every cluster has exactly one
         * owner; with more threads than clusters the extra threads own none
         * and classify, complete and retire only (§9.2). */
        for (unsigned i = 0; i < e->nthreads; i++) {
                struct sched_thread *t = &e->threads[i];
                t->engine = e;
                t->index = i;
                t->clusters = cfg->clusters / e->nthreads + (i < cfg->clusters % e->nthreads ? 1 : 0);
                t->ring_cursor = i;
        }
        e->all_execute = cfg->clusters >= e->nthreads;
        for (unsigned i = 0; i < e->nthreads; i++) {
                err = -pthread_create(&e->threads[i].thread, NULL, thread_main, &e->threads[i]);
                if (err < 0)
                        goto fail;
                e->threads_started++;
        }
        *ret = e;
        return 0;
fail:
        hbg_engine_free(e);
        return err;
}

struct hbg_engine *hbg_engine_free(struct hbg_engine *e) {
        if (!e)
                return NULL;
        atomic_store(&e->stop, true);
        for (unsigned i = 0; i < e->threads_started; i++) {
                /* A thread may be parked with no timeout: keep kicking. */
                hbg_engine_kick(e);
                pthread_join(e->threads[i].thread, NULL);
        }
        if (e->rings) {
                unsigned high = atomic_load(&e->rings_high);
                for (unsigned i = 0; i < high; i++) {
                        struct hbg_ring *r = atomic_load(&e->rings[i]);
                        if (r)
                                hbg_engine_ring_remove(e, r, -ESHUTDOWN);
                }
        }
        /* Every thread has exited: nothing holds a ring any more. */
        if (e->threads)
                hbg_engine_collect(e);
        if (e->rings_lock_ready)
                pthread_mutex_destroy(&e->rings_lock);
        free(e->rings);
        free(e->threads);
        free(e);
        return NULL;
}

/* ------------------------------------------------------------ counters */

void hbg_engine_thread_alive(const struct hbg_engine *e, unsigned thread,
                             struct hbg_thread_alive *ret) {
        const struct sched_thread *t = &e->threads[thread];
        ret->heartbeat = atomic_load_explicit(&t->heartbeat, memory_order_relaxed);
        ret->parked = atomic_load_explicit(&t->parked, memory_order_relaxed);
}

unsigned hbg_engine_threads(const struct hbg_engine *e) {
        return e->nthreads;
}

void hbg_engine_thread_stats(const struct hbg_engine *e, unsigned thread,
                             struct hbg_thread_stats *ret) {
        struct hbg_engine *me = (struct hbg_engine *)e;
        const struct sched_thread *t = &e->threads[thread];
        struct hbg_completer_stats sum = { 0 };

        fold_completer_stats(&sum, &t->retired_completer);
        pthread_mutex_lock(&me->rings_lock);
        unsigned high = atomic_load(&e->rings_high);
        for (unsigned i = 0; i < high; i++) {
                struct hbg_ring *r = atomic_load(&e->rings[i]);
                if (r)
                        fold_completer_stats(&sum, &r->per_thread[thread].completer.stats);
        }
        pthread_mutex_unlock(&me->rings_lock);

        *ret = (struct hbg_thread_stats){
                .classified = hbg_stat_get(&t->stats.classified),
                .dispatched = hbg_stat_get(&t->stats.dispatched),
                .executed_tasks = hbg_stat_get(&t->stats.executed_tasks),
                .retired_inline = hbg_stat_get(&t->stats.retired_inline),
                .failed = hbg_stat_get(&t->stats.failed),
                .published = hbg_stat_get(&sum.published),
                .failsafe_pushes = hbg_stat_get(&sum.deferred),
                .failsafe_retries = hbg_stat_get(&sum.retries),
                .watermark_advances = hbg_stat_get(&sum.advances),
                .watermark_cas_failures = hbg_stat_get(&sum.cas_failures),
                .parks = hbg_stat_get(&t->stats.parks),
                .wakeups = hbg_stat_get(&t->stats.wakeups),
                .clusters = t->clusters,
        };
}

void hbg_ring_stats(const struct hbg_ring *r, struct hbg_ring_stats *ret) {
        uint64_t completed = 0, failed = 0;
        for (unsigned i = 0; i < r->engine->nthreads; i++) {
                completed += hbg_stat_get(&r->per_thread[i].completed);
                failed += hbg_stat_get(&r->per_thread[i].failed);
        }
        *ret = (struct hbg_ring_stats){
                .submitted = atomic_load_explicit(&r->submitted_seen, memory_order_relaxed),
                .classified = atomic_load_explicit(&r->claim, memory_order_relaxed),
                .watermark = hbg_watermark_read(&r->window),
                .completed = completed,
                .failed = failed,
                .graphs_retired = atomic_load(&r->cpl->graphs_retired),
                .graphs_failed = atomic_load(&r->graphs_failed),
                .error = atomic_load(&r->cpl->error_code),
                .broken = atomic_load(&r->broken),
        };
}
