/* SPDX-License-Identifier: MIT */
/*
 * The engine's counters, metrics, live graphs and thread health, as hbgd's
 * status, metrics and watchdog read them (the engine keeps them in
 * engine.c, ring.c, live_graphs.c and cancel.c).
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "daemon/engine/engine.h"

/* ------------------------------------------------------------ counters */

struct hbg_thread_stats {
        uint64_t classified;       /* tasks copied and validated */
        uint64_t batch_linked;     /* of them, wired to a fanin classified in the
                                      same batch, with plain stores (§10.1) */
        uint64_t dispatched;       /* blocks started on a core */
        uint64_t executed_tasks;   /* tasks whose last block ran here */
        uint64_t continued;        /* tasks run as this thread's continuation
                                      slot, without a ready queue (§10.4; tasks
                                      it takes back from its own deque are
                                      not counted) */
        uint64_t stolen;           /* tasks taken from a peer's deque (§10.4) */
        uint64_t retired_inline;   /* dummies, host-inline, false predicates, skipped */
        uint64_t failed;           /* tasks failed (validation, kernel, or the
                                      client's report), not counting skipped ones */
        uint64_t published;        /* completion stamps stored */
        uint64_t failsafe_pushes;
        uint64_t failsafe_retries;
        uint64_t watermark_advances;
        uint64_t watermark_cas_failures;
        uint64_t parks;
        uint64_t wakeups;
        uint64_t spurious_wakeups; /* wakes that found no work and that no
                                      wake of hbgd's explains (a client's, §9.4) */
        uint64_t cpu_moves;        /* moves off a CPU its idle spin shared (§9.4) */
        uint32_t clusters;         /* clusters this thread owns */
};

struct ring_stats {
        uint64_t submitted;        /* producer cursor as last seen */
        uint64_t classified;       /* claim cursor */
        uint64_t watermark;
        uint64_t completed;        /* tasks completed (any status) */
        uint64_t failed;           /* tasks failed or skipped */
        uint64_t graphs_retired;
        /* Graph records the retirer has read (hbgd's own count, at most a
         * graph ring past retirer.next whatever graphs_submitted says). */
        uint64_t graphs_noticed;
        uint64_t graphs_failed;
        int32_t error;             /* ring error latch, 0 if none */
        bool broken;               /* stopped because of a protocol error */
};

/* The counters of struct hbg_thread_stats that each scheduler thread
 * keeps per ring, under the same names: one ring's, or one thread's over
 * its rings. */
struct ring_counters {
        uint64_t dispatched;
        uint64_t published;
        uint64_t failsafe_pushes;
        uint64_t failsafe_retries;
        uint64_t watermark_advances;
        uint64_t watermark_cas_failures;
};

/* ------------------------------------------------------------ metrics */

/*
 * Counters and latency histograms for hbgd's metrics (docs/OPERATIONS.md,
 * "Metrics"), over the engine's whole life: rings that were freed are
 * folded in, so every value only grows. Errors are counted per errno:
 * entry e is errno e (a task or graph that failed with -e), entry 0 every
 * code outside 1 .. HBG_ERRNO_SLOTS - 1.
 */
#define HBG_ERRNO_SLOTS 134u           /* Linux errnos end at 133 (EHWPOISON) */

static inline unsigned errno_slot(int code) {
        return code < 0 && -code < (int)HBG_ERRNO_SLOTS ? (unsigned)-code : 0u;
}

struct engine_metrics {
        uint64_t graphs_submitted;     /* graph records read (noticed) */
        uint64_t graphs_retired;       /* finished, with success or failure */
        uint64_t graphs_failed[HBG_ERRNO_SLOTS];
        uint64_t tasks_failed[HBG_ERRNO_SLOTS]; /* skipped dependants not counted */
        /* From the moment a graph record was noticed to its retirement
         * (ns). A graph first seen when it retires counts 0. */
        struct hbg_hist_snapshot graph_latency;
};

void engine_metrics(const struct hbg_engine *e, struct engine_metrics *ret);
/* The run times (ns) of the tasks whose last block thread `thread` ran,
 * every kernel's (daemon/engine/ktime.h). */
void engine_thread_task_time(const struct hbg_engine *e, unsigned thread, struct hbg_hist_snapshot *ret);
/* Kernel kernel_at(kernel)'s tasks, failures, run and wait times, every
 * thread's added up (daemon/engine/ktime.h). */
void engine_kernel_times(const struct hbg_engine *e, size_t kernel, struct ktime_snapshot *ret);
/* A graph the client submitted that is not retired yet (hbgctl graphs,
 * RUNTIME_LOGIC.md §12.5). */
enum hbg_live_state {
        HBG_LIVE_WAITING,          /* none of its tasks claimed by a scheduler yet */
        HBG_LIVE_RUNNING,          /* claimed, not all complete */
        HBG_LIVE_FAILED,           /* a task of it failed (or the ring stopped): it
                                      will report failure */
        HBG_LIVE_RETIRING,         /* complete, its status being published */
        HBG_LIVE_STATE_COUNT,
};
/* "waiting", "running", "failed", "retiring". */
const char *live_state_name(enum hbg_live_state s);

struct hbg_live_graph {
        uint64_t number;           /* graph record number, 0, 1, ... per ring */
        uint64_t graph_id;         /* the client's handle (its record says) */
        uint64_t first_id, last_id;
        uint64_t tasks_done;       /* its tasks complete (in any order), a lower bound
                                      past 65536 flags read per listing */
        uint64_t age_ms;           /* since hbgd first saw its record; 0 not yet */
        int64_t noticed_ns;        /* when a retirement pass first saw it (as
                                      graph latency counts), CLOCK_MONOTONIC;
                                      0: not yet */
        enum hbg_live_state state;
};

/* The client's graph cursor (its region's graphs_submitted), as the calls
 * made off the scheduler threads read it: through the memfd when the ring
 * has one (hbg_ring_params.sub_fd). The client's word: unchecked. */
uint64_t ring_graphs_submitted(const struct hbg_ring *r);
/* Note the graph records the client submitted since the last call, with
 * the time now_ms (the age ring_live_graphs() reports). Cheap: at
 * most a few thousand records per call, no task looked at. Returns
 * whether graphs are in flight (submitted, by the client's word, past
 * those retired). */
bool ring_note_graphs(struct hbg_ring *r, int64_t now_ms);
/* The ring's live graphs, oldest first (notes new records first): up to
 * max copied into ret (each record copied once and validated; the list
 * ends before the first record the retirer would refuse). Returns how
 * many; *ret_live gets how many are live (at most the graph table's size).
 * This and ring_note_graphs() are called from one thread only (hbgd's
 * io thread): they share the ring's stamps without synchronisation. */
size_t ring_live_graphs(struct hbg_ring *r, struct hbg_live_graph *ret, size_t max, uint64_t *ret_live);

/* Cancel graph record `number` of r (RUNTIME_LOGIC §12.6): its tasks
 * not started fail with -ECANCELED and message `why` (copied, cut to the
 * graph message's size), its running kernels stop at their next check,
 * and the graph retires with -ECANCELED and `why` unless a task of it
 * failed for another reason first. Any thread (hbgd: the io thread);
 * touches no task: the scheduler threads act. 0; -ENOENT: not live (its
 * status is decided, or not submitted); -EALREADY: cancelled already;
 * -EBUSY: RING_CANCELS (8) cancels of r pending; -ESHUTDOWN: r stopped. */
int ring_cancel_graph(struct hbg_ring *r, uint64_t number, const char *why);
/* Why the owner stops r (before engine_ring_remove()): its unfinished
 * graphs fail with code and "session stopped: why" instead of "session
 * stopped". The first reason given wins. */
void ring_set_stop_reason(struct hbg_ring *r, int code, const char *why);

unsigned engine_threads(const struct hbg_engine *e);
void engine_thread_stats(const struct hbg_engine *e, unsigned thread,
                         struct hbg_thread_stats *ret);
void ring_stats(const struct hbg_ring *r, struct ring_stats *ret);
/* r's ring_counters, every thread's part added up (hbgctl sessions). It
 * reads lines the scheduler threads write: for status requests, not for
 * ring_stats()' callers on every tick. */
void ring_counters(const struct hbg_ring *r, struct ring_counters *ret);

/* Liveness of one scheduler thread (cheap: two relaxed loads). heartbeat
 * grows on every loop iteration and task start; parked is true while the
 * thread waits for work. A thread whose heartbeat has not moved and that
 * is not parked is stuck (or running one long kernel). hbgd's watchdog
 * uses it (tests/e2e/test_e2e_systemd.c wedges a thread through the
 * test build tests/hbgd-hooks, HBGD_TEST_STALL_THREAD). */
struct hbg_thread_alive {
        uint64_t heartbeat;
        bool parked;
};
void engine_thread_alive(const struct hbg_engine *e, unsigned thread,
                         struct hbg_thread_alive *ret);
