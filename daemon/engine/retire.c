/* SPDX-License-Identifier: MIT */
/*
 * Graph retirement (RUNTIME_LOGIC.md §12.1-§12.2), the stage after a
 * task's completion: graph records whose last id the watermark passed
 * are retired (a combining lock), each with its status from the failure
 * list (failures.c) and its entry published, then the client told
 * (signal.c). A ring that stops (an error, its removal) has every graph
 * it still holds retired as failed: stopping a ring is retiring its
 * graphs with the reason.
 */
#include "daemon/engine/retire.h"

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <syslog.h>

#include "common/errtext.h"
#include "daemon/engine/client_read.h"
#include "daemon/engine/engine_log.h"
#include "daemon/engine/engine_state.h"
#include "daemon/engine/failures.h"
#include "daemon/engine/ring.h"
#include "daemon/engine/signal.h"
#include "daemon/engine/engine_stats.h"

static bool graph_lock(struct hbg_ring *r) {
        uint32_t expected = 0;
        return atomic_compare_exchange_strong(&r->retirer.lock, &expected, 1);
}

static void graph_unlock(struct hbg_ring *r) {
        atomic_store(&r->retirer.lock, 0);
}

/* Graph records up to `submitted` (at most a graph ring ahead of the
 * retired ones) are noticed now: their latency counts from here. Under
 * the retire lock. */
static void notice_graphs(struct hbg_ring *r, uint64_t submitted, int64_t *now) {
        uint64_t n = atomic_load_explicit(&r->retirer.graphs_noticed, memory_order_relaxed);
        uint64_t end = r->retirer.next + r->g.graph_table_entries;
        if (submitted < end)
                end = submitted;
        if (n < r->retirer.next)
                n = r->retirer.next;
        if (n >= end)
                return;
        if (*now == 0)
                *now = clock_now_ns();
        /* Release, both: a reader that loads graphs_noticed (acquire) past
         * n reads n's time; one that reads a time of n + G (a later pass,
         * after graphs_retired passed n) then sees n retired
         * (acquire; live_graphs.c, graph_noticed_at()). */
        for (; n < end; n++)
                atomic_store_explicit(&r->retirer.graph_noticed_ns[n & (r->g.graph_table_entries - 1)], *now,
                                      memory_order_release);
        atomic_store_explicit(&r->retirer.graphs_noticed, n, memory_order_release);
}

/* Metrics of the graph being published: its latency and failure. */
static void count_graph(struct hbg_ring *r, int code, int64_t *now) {
        if (*now == 0)
                *now = clock_now_ns();
        uint64_t n = r->retirer.next;
        int64_t since = *now;
        _Atomic int64_t *at = &r->retirer.graph_noticed_ns[n & (r->g.graph_table_entries - 1)];
        if (n < atomic_load_explicit(&r->retirer.graphs_noticed, memory_order_relaxed)) {
                since = atomic_load_explicit(at, memory_order_relaxed);
        } else { /* first seen as it retires (a stopped ring's): noticed now */
                atomic_store_explicit(at, since, memory_order_release);
                atomic_store_explicit(&r->retirer.graphs_noticed, n + 1, memory_order_release);
        }
        hist_observe(&r->retirer.graph_latency, since < *now ? (uint64_t)(*now - since) : 0);
        uint32_t trace = trace_epoch(&r->engine->trace);
        if (trace)
                trace_graph(&r->engine->trace, trace, r, n, r->retirer.cur.first_id, r->retirer.cur.last_id, code,
                            since);
        if (code)
                stat_add(&r->retirer.graphs_failed_by_errno[errno_slot(code)], 1);
}

/* The graph's message (§12.1): why as it is; for a kernel's own error
 * (why NULL) "kernel NAME returned -EIO": the code's words are the
 * reader's to add (hbg_strerror(), hbgctl, this log), once. */
static void failure_message(const struct failure *f, const struct kernel_info *k, char *buf, size_t len) {
        const char *name = strerrorname_np(-f->code);
        char num[16];
        if (!name) {
                snprintf(num, sizeof(num), "%d", -f->code);
                name = num;
        }
        if (f->why)
                snprintf(buf, len, "%s", f->why);
        else if (k)
                snprintf(buf, len, "kernel %s returned -%s", k->sig->name, name);
        else
                snprintf(buf, len, "task returned -%s", name);
}

/* Write graph record retirer.next's entry, f its failure (code 0: none).
 * `now`: the clock as read by this retirement pass (0: not yet). */
static void publish_graph(struct hbg_ring *r, const struct failure *f, int64_t *now) {
        struct hbg_graph_entry *e = &r->graph_table[r->retirer.next & (r->g.graph_table_entries - 1)];
        /* A failure's detail whole for the log; the entry holds what fits. */
        char msg[FAILURE_DETAIL_MAX];

        msg[0] = '\0';
        if (f->code) {
                const struct kernel_info *k = kernel_lookup(f->kernel);
                char eb[64];
                failure_message(f, k, msg, sizeof(msg));
                /* Rate-limited per session by hbgd's log. */
                engine_log_ring(r, LOG_NOTICE,
                                &(struct hbg_log_fields){ .has_graph = true, .graph = r->retirer.next,
                                                   .has_task = true, .task = f->id,
                                                   .kernel = k ? k->sig->name : NULL, .err = f->code },
                         "%s: graph %" PRIu64 " (client id %" PRIu64 ") failed: %s at task %" PRIu64 " (%s)",
                         r->name, r->retirer.next, r->retirer.cur.graph_id, errtext_daemon(f->code, eb, sizeof(eb)),
                         f->id, msg);
                atomic_fetch_add_explicit(&r->retirer.graphs_failed, 1, memory_order_relaxed);
        }
        count_graph(r, f->code, now);
        layout_graph_entry_publish(e, r->retirer.next, r->retirer.cur.graph_id, f->code, f->kernel, f->id, msg);
        r->retirer.expected_first = r->retirer.cur.last_id + 1;
        r->retirer.next++;
        r->retirer.have = false;
}

/* Copy the next graph record once and validate the copy. false: none
 * available, or the ring broke. Under the retire lock. */
static bool fetch_graph(struct hbg_ring *r, uint64_t submitted) {
        /* The distance rule holds whether or not a record is held: a
         * client cannot publish past the graph ring while one of its
         * graphs waits (SECURITY.md, "graph records"). */
        if (submitted > r->retirer.next && submitted - r->retirer.next > r->g.graph_table_entries) {
                retire_fail(r, -EPROTO, 0, "graphs_submitted is more than the graph ring ahead");
                return false;
        }
        if (r->retirer.have)
                return true;
        if (submitted <= r->retirer.next)
                return false;
        struct hbg_graph_record rec;
        client_copy(r, &r->graph_records[r->retirer.next & (r->g.graph_table_entries - 1)], &rec, sizeof(rec));
        if (rec.reserved != 0 || rec.first_id != r->retirer.expected_first || rec.last_id < rec.first_id) {
                retire_fail(r, -EPROTO, rec.first_id,
                            "graph record is not the contiguous continuation of the previous one");
                return false;
        }
        r->retirer.cur = rec;
        r->retirer.have = true;
        return true;
}

/* Fail every graph record the client has submitted and that is not retired
 * (the ring stopped). Under the retire lock. A stopped ring's records are
 * taken as they are: contiguity no longer matters. The graph holding the
 * task that stopped the ring names it with the reason; the others their
 * first task, "session stopped: <reason>". */
static bool fail_graphs_locked(struct hbg_ring *r, int code) {
        pthread_mutex_lock(&r->cold_lock);
        const char *why = r->stop_why;
        uint64_t task = r->stop_task;
        if (why)
                code = r->stop_code;
        pthread_mutex_unlock(&r->cold_lock);
        char other[HBG_GRAPH_MESSAGE_MAX];
        if (why)
                snprintf(other, sizeof(other), "session stopped: %s", why);
        else
                snprintf(other, sizeof(other), "%s", code == -ESHUTDOWN ? "session stopped: hbgd is shutting down"
                                                                          : "session stopped");
        bool any = false;
        int64_t now = 0;
        for (uint64_t n = 0; n < r->g.graph_table_entries; n++) {
                if (!r->retirer.have) {
                        uint64_t submitted = client_cursor(r, &r->sub->graphs_submitted);
                        if (submitted <= r->retirer.next ||
                            submitted - r->retirer.next > r->g.graph_table_entries)
                                break;
                        client_copy(r, &r->graph_records[r->retirer.next & (r->g.graph_table_entries - 1)],
                                    &r->retirer.cur, sizeof(r->retirer.cur));
                        r->retirer.have = true;
                }
                bool holds = why && task >= r->retirer.cur.first_id && task <= r->retirer.cur.last_id;
                struct failure f = { .id = holds ? task : r->retirer.cur.first_id, .code = code,
                                     .kernel = HBG_KERNEL_NONE, .why = holds ? why : other };
                publish_graph(r, &f, &now);
                any = true;
        }
        return any;
}

static int stop_code(struct hbg_ring *r) {
        int code = atomic_load(&r->cpl->error_code);
        return code ? code : -ESHUTDOWN;
}

static bool retire_graphs_locked(struct hbg_ring *r) {
        uint64_t wm = watermark_read(&r->window);
        /* Records up to here have been looked at: work_graphs_arrived()
         * compares against this, not against what is fetched. */
        uint64_t submitted = client_cursor(r, &r->sub->graphs_submitted);
        atomic_store_explicit(&r->retirer.graphs_seen, submitted, memory_order_relaxed);
        bool any = false;
        int64_t now = 0;
        notice_graphs(r, submitted, &now);

        for (uint64_t n = 0; n < r->g.graph_table_entries; n++) {
                if (atomic_load(&r->broken) || !fetch_graph(r, submitted))
                        break;
                if (wm <= r->retirer.cur.last_id)
                        break;
                struct failure f;
                failures_graph_status(r, r->retirer.next, r->retirer.cur.first_id, r->retirer.cur.last_id, &f);
                publish_graph(r, &f, &now);
                any = true;
        }
        /* After the entries: a cancel's message is in use until then. */
        if (any)
                cancel_prune(r, r->retirer.next);
        if (atomic_load(&r->broken))
                any |= fail_graphs_locked(r, stop_code(r));
        if (any)
                atomic_store_explicit(&r->cpl->graphs_retired, r->retirer.next, memory_order_release);
        /* last_id is the client's: at worst (UINT64_MAX + 1 == 0) every
         * move asks again. */
        atomic_store_explicit(&r->retirer.at,
                              r->retirer.have && !atomic_load(&r->broken) ? r->retirer.cur.last_id + 1 : 0,
                              memory_order_relaxed);
        return any;
}

/*
 * The completer's test before retire_graphs() (§12.1). Graphs: a
 * nonzero retirer.at = L + 1 was stored while graph L was the first
 * unretired one, so every earlier graph was retired and every later one
 * ends above L; whichever stored value the relaxed load returns, skipping
 * when the watermark V < retirer.at leaves no graph that V completes.
 * Window space: the seq_cst pair of §2.1, the watermark loaded
 * (coherence-ordered after our move), then window_waiting.
 */
bool retire_due(struct hbg_ring *r) {
        uint64_t at = atomic_load_explicit(&r->retirer.at, memory_order_relaxed);
        uint64_t wm = atomic_load_explicit(&r->cpl->completed_watermark, memory_order_seq_cst);
        return at == 0 || wm >= at || atomic_load_explicit(&r->sub->window_waiting, memory_order_seq_cst) != 0;
}

/*
 * Retire every graph the watermark has passed (or fail them all once the
 * ring is broken). Combining: whoever holds the lock re-runs while somebody
 * asked meanwhile, so a request is never lost and nobody waits. The flag
 * and the lock are seq_cst: "store request; try lock" against "unlock;
 * load request" is a store->load pair on both sides (§12.1).
 * Called after the watermark moved (and when a ring fails).
 */
void retire_graphs(struct hbg_ring *r) {
        const struct hbg_engine_config *cfg = &r->engine->cfg;
        atomic_store(&r->retirer.pending, 1);
        while (atomic_load(&r->retirer.pending) && graph_lock(r)) {
                atomic_store(&r->retirer.pending, 0);
                bool broken = atomic_load(&r->broken);
                bool retired = retire_graphs_locked(r);
                /* The owner hears of a ring the engine stopped only from a
                 * pass that found it broken, which failed its graphs: the
                 * client never gets the hang-up before the reason. */
                bool tell = broken && atomic_exchange(&r->stop_untold, false);
                bool window = signal_window_waiter_due(r);
                graph_unlock(r);
                if (retired)
                        signal_graph_wake(r);
                /* The window's byte was asked for (window_waiting). */
                if (window || (retired && signal_pipe_wanted(r)))
                        signal_pipe(r);
                if (tell && cfg->ring_stopped)
                        cfg->ring_stopped(cfg->ring_stopped_userdata);
        }
}

/* Latch the error, mark the ring broken; true if this call broke it.
 * The reason goes in first (the first one wins), so that whoever sees
 * the ring broken and fails its graphs finds it. */
static bool ring_break(struct hbg_ring *r, int code, uint64_t task, const char *why) {
        if (why) {
                pthread_mutex_lock(&r->cold_lock);
                if (!r->stop_why) {
                        r->stop_why = why;
                        r->stop_task = task;
                        r->stop_code = code;
                }
                pthread_mutex_unlock(&r->cold_lock);
        }
        int32_t zero = 0;
        if (atomic_compare_exchange_strong(&r->cpl->error_code, &zero, code))
                atomic_store_explicit(&r->cpl->error_task, task, memory_order_release);
        failures_raise_high(&r->cpl->failed_high, UINT64_MAX);
        bool expected = false;
        return atomic_compare_exchange_strong(&r->broken, &expected, true);
}

void retire_fail(struct hbg_ring *r, int code, uint64_t task, const char *why) {
        if (!ring_break(r, code, task, why))
                return;
        char eb[64];
        engine_log_ring(r, LOG_WARNING, &(struct hbg_log_fields){ .has_task = true, .task = task, .err = code },
                        "%s: stopped: %s (task %" PRIu64 ": %s)", r->name, why, task,
                        errtext_daemon(code, eb, sizeof(eb)));
        /* After broken: a retire pass that takes this sees the ring broken
         * and fails its graphs first (retire_graphs()). */
        atomic_store(&r->stop_untold, true);
        /* From inside the retire lock this only leaves a request, which the
         * holder serves when it unlocks. */
        retire_graphs(r);
}

void retire_fail_quietly(struct hbg_ring *r, int code) {
        if (ring_break(r, code, 0, NULL))
                retire_graphs(r);
}

/* Called once no scheduler thread can touch the ring any more. */
void retire_stopped(struct hbg_ring *r, int code) {
        int32_t zero = 0;
        if (atomic_compare_exchange_strong(&r->cpl->error_code, &zero, code))
                atomic_store_explicit(&r->cpl->error_task, 0, memory_order_release);
        failures_raise_high(&r->cpl->failed_high, UINT64_MAX);
        atomic_store(&r->broken, true);
        unsigned spins = 0;
        while (!graph_lock(r))
                engine_relax(&spins);
        bool any = fail_graphs_locked(r, code);
        if (any)
                atomic_store_explicit(&r->cpl->graphs_retired, r->retirer.next, memory_order_release);
        graph_unlock(r);
        if (any) {
                signal_graph_wake(r);
                signal_pipe(r);
        }
}
