/* SPDX-License-Identifier: MIT */
/*
 * The scheduler threads' loops (RUNTIME_LOGIC.md §9.4): visiting every
 * ring in turn, spinning, parking without lost wake-ups. (A completion
 * policy's own thread runs the policy's loop: completion.h.)
 */
#include "daemon/engine/sched.h"

#include <errno.h>
#include <inttypes.h>
#include <sched.h>
#include <stdio.h>
#include <sys/resource.h>
#include <time.h>

#include "daemon/engine/completion.h"
#include "daemon/engine/dispatch.h"
#include "daemon/engine/engine_state.h"
#include "daemon/engine/ingest.h"
#include "daemon/engine/mailbox.h"
#include "daemon/engine/queues.h"
#include "daemon/engine/ready.h"
#include "daemon/engine/retire.h"
#include "daemon/engine/ring.h"
#include "daemon/engine/ring_table.h"
#include "daemon/engine/signal.h"
#include "daemon/engine/stall.h"
#include "daemon/engine/wakeup.h"
#include "daemon/engine/work.h"
#include "common/clock.h"

/* What a parking thread's last look over the rings found. */
struct park_look {
        bool work;          /* work it must not sleep through */
        bool ready;         /* ready kernel tasks, its or a peer's to run */
        bool deferred;      /* its own stamps deferred (the failsafe heap) */
        bool skip_due;      /* a skipped wake of a client's worker is due a look */
        uint64_t stall_ms;  /* the smallest stall limit of a ring with work pending */
};

/* The re-check after the idle count went up (§9.4): every ring of the
 * `high` slots, until one has work; with ask, each ring's need_wakeup
 * set first. */
static void park_recheck(struct sched_thread *t, unsigned high, bool ask, struct park_look *l) {
        struct hbg_engine *e = t->engine;
        for (unsigned i = 0; i < high && !l->work; i++) {
                struct hbg_ring *r = ring_table_enter(t, i);
                if (!r)
                        continue;
                if (ask)
                        atomic_store(&r->cpl->need_wakeup, 1);
                /* The policy's last look (lazy: the walk that keeps the
                 * watermark live, after our idle count went up). */
                if (e->completion->before_park && e->completion->before_park(t, r))
                        l->work = true;
                ready_continuation_flush(t, r); /* none hidden while we sleep */
                l->work = l->work || work_external(r) || mpmc_maybe_nonempty(&r->retire) ||
                          launch_pending(t, r);
                l->skip_due = signal_ext_skip_check(r) || l->skip_due;
                for (unsigned s = 0; s < SHAPE_EXEC_COUNT; s++)
                        l->ready = l->ready || mpmc_maybe_nonempty(&r->ready[s]);
                /* Tasks in a busy peer's deque are work to steal. */
                l->ready = l->ready || queues_deques_nonempty(r);
                l->work = l->work || (t->clusters > 0 && l->ready);
                if (r->stall.timeout_ms && (l->stall_ms == 0 || r->stall.timeout_ms < l->stall_ms) &&
                    stall_unfinished(r))
                        l->stall_ms = r->stall.timeout_ms;
                l->deferred = l->deferred || failsafe_heap_len(&r->per_thread[t->index].completer.heap) > 0;
                ring_table_leave(t);
        }
}

/* Sleeping: whatever surplus it held back is run; the next one is
 * counted from nothing. */
static void park_surplus_forget(struct sched_thread *t, unsigned high) {
        for (unsigned i = 0; i < high; i++) {
                struct hbg_ring *r = ring_table_enter(t, i);
                if (!r)
                        continue;
                ready_surplus_forget(t, r);
                ring_table_leave(t);
        }
}

/* How long the park may last, in *ts; NULL: until woken. */
static struct timespec *park_timeout(const struct park_look *l, bool last, struct timespec *ts) {
        if (l->skip_due && last) {
                /* A wake skipped for a client's looking worker is
                 * looked at again a look from now (signal.c): the
                 * last thread to go idle comes back for it; one
                 * that is not leaves it to a thread still awake.
                 * (Sooner than any poll below.) */
                *ts = (struct timespec){ .tv_nsec = HBG_EXT_LOOK_NS };
                return ts;
        }
        if (l->deferred) {
                /* Our deferred stamps wait for the watermark, which
                 * others move without telling us: poll gently. */
                *ts = (struct timespec){ .tv_nsec = 1000000 };
                return ts;
        }
        if (l->stall_ms) {
                /* The check itself runs every 100 ms at most: a
                 * session's tiny limit must not make parked threads
                 * wake more often than every 10 ms. */
                uint64_t ms = l->stall_ms / 4;
                if (ms > 1000)
                        ms = 1000;
                if (ms < 10)
                        ms = 10;
                *ts = (struct timespec){ .tv_sec = (time_t)(ms / 1000), .tv_nsec = (long)(ms % 1000) * 1000000 };
                return ts;
        }
        return NULL;
}

/* Out of the idle counts again. Somebody is awake now: clients need not
 * ring. The flags an asker left (this thread's own, set without
 * sleeping, or a sleeper's, which the first thread to wake after it
 * takes) are cleared, but not here: a ring this thread finds work in is
 * cleared as it is visited (visit_ring()), and the rest at its first idle
 * turn (flags_clear()), so a wake-up answers its client before it walks
 * every idle session's flag. Meanwhile a flag left set only makes that
 * ring's client wake hbgd once needlessly (the visit or the kick clears
 * it); a thread that takes nobody's flags clears only those of rings it
 * finds work in. */
static void park_end(struct sched_thread *t, bool ask, bool slept) {
        struct hbg_engine *e = t->engine;
        if (t->clusters > 0)
                atomic_fetch_sub(&e->idle_executors, 1);
        atomic_fetch_sub(&e->idle, 1);
        bool taken = atomic_load_explicit(&e->wakeup_asked, memory_order_relaxed) &&
                     atomic_exchange(&e->wakeup_asked, false);
        if (taken || (ask && !slept))
                t->flags_to_clear = true;
        t->just_woke = t->first_pass = slept;
        t->gave_way_loop = 0;
}

/*
 * Park (§9.4). The last thread to go idle sets NEED_WAKEUP in every ring,
 * then re-checks every ring for client-made work; the client publishes
 * `submitted` then reads NEED_WAKEUP. Both sides seq_cst (store->load
 * pair), so either we see the work or the client wakes us: its doorbell,
 * whose kick bumps the private word we read before our idle count (so a
 * thread between its re-check and its wait does not sleep) and wakes it.
 * The client also FUTEX_WAKEs the wake page's word, which a thread within
 * its spurious-wake budget waits on too (futex_waitv): that only makes it
 * start sooner; no client can stop the private word's wakes.
 */
static void park(struct sched_thread *t) {
        struct hbg_engine *e = t->engine;
        bool page = t->calm_until_ms <= clock_now_ms();
        uint32_t seq = atomic_load(&e->wake_seq);
        unsigned idle = atomic_fetch_add(&e->idle, 1) + 1;
        bool last = idle == e->nschedulers;
        /* Who sets need_wakeup: the last thread to park, or one that parks
         * while the others are inside long tasks, if a ring could wake a
         * thread that may run (dispatch.c before_long(), §9.4). */
        bool ask = last || (idle + atomic_load(&e->in_long) >= e->nschedulers && wakeup_could_help(e, idle));
        struct park_look l = { 0 };
        bool slept = false;
        if (t->clusters > 0)
                atomic_fetch_add(&e->idle_executors, 1);
        /* The counts before the re-check below, against a waker's fence
         * between its publish and its look at them (wakeup_fence()): the
         * counts are seq_cst RMWs, but the re-check's loads are not all
         * seq_cst, and an RMW is no fence. */
        wakeup_fence();
        unsigned high = atomic_load(&e->rings_high);
        park_recheck(t, high, ask, &l);
        /* Ready tasks this thread cannot run (it owns no cluster) while an
         * owner sleeps: wake the owners before sleeping. */
        if (!l.work && l.ready && t->clusters == 0) {
                wakeup_fence(); /* this thread parks: the ready tasks it saw before the count */
                wakeup_executor(e);
        }
        if (!l.work && !atomic_load(&e->stop)) {
                park_surplus_forget(t, high);
                struct timespec ts;
                struct timespec *timeout = park_timeout(&l, last, &ts);
                /* The flags this thread set, for the first to wake to
                 * clear (seq_cst: after them, before the sleep). */
                if (ask)
                        atomic_store(&e->wakeup_asked, true);
                slept = true;
                /* Woken through the page: a client's wake, counted in the
                 * loop if it finds no work. */
                t->woken_directly = wakeup_thread_park(t, page, seq, timeout) == 1 &&
                                    atomic_load(&e->wake_seq) == seq; /* not hbgd's own wake too */
        }
        park_end(t, ask, slept);
}

/* The need_wakeup flags park() left this thread to clear: seq_cst, and
 * a full pass follows before any park, so a doorbell that finds a flag
 * clear kicks nobody, counting on this thread to see the publish that
 * rang it (ring_kick, §9.4). Only served rings (ring_table_enter()). */
static void flags_clear(struct sched_thread *t) {
        unsigned high = atomic_load(&t->engine->rings_high);
        t->flags_to_clear = false;
        for (unsigned i = 0; i < high; i++) {
                struct hbg_ring *r = ring_table_enter(t, i);
                if (!r)
                        continue;
                if (atomic_load(&r->cpl->need_wakeup))
                        atomic_store(&r->cpl->need_wakeup, 0);
                ring_table_leave(t);
        }
}

/* The clock is read every CLOCK_EVERY turns of the loop, not every turn:
 * it only paces the stall check (100 ms), the idle spin (50 us) and the
 * look again at a skipped wake (20 us), and a turn that did work took at
 * least a task. */
#define CLOCK_EVERY 8u

static bool visit_ring(struct sched_thread *t, struct hbg_ring *r, bool check_stall) {
        const struct completion_policy *ops = t->engine->completion;
        bool work = false;

        /* A ring between requests: a few loads, not a full visit (many
         * open, idle sessions cost the busy one little). The stall check's
         * turn (every 100 ms) still visits every ring in full: the check
         * must see idle rings too (that restarts its clock), and a launch
         * record waiting for ids never submitted looks idle but fails there. */
        bool idle = work_none(r);
        if (!check_stall && idle)
                return false;
        /* Work here, and this thread looks at it: its client need not
         * ring (seq_cst, before the visit's loads of its cursors, §9.4). */
        if (!idle && atomic_load_explicit(&r->cpl->need_wakeup, memory_order_relaxed))
                atomic_store(&r->cpl->need_wakeup, 0);

        work |= ops->tick(t, r);
        work |= mailbox_poll(t, r);
        work |= ingest_ring(t, r);
        work |= dispatch_retire_queue(t, r, 16);
        work |= dispatch_ring(t, r);
        if (work_graphs_arrived(r))
                retire_graphs(r);
        if (check_stall)
                stall_check(t, r);
        /* Paced like the clock: a skipped wake waits a look (20 us). */
        if (t->loops % CLOCK_EVERY == 0)
                signal_ext_skip_check(r);
        if (ops->end_visit)
                work |= ops->end_visit(t, r);
        /* Nothing hidden outlives the visit: park, removal and the stall
         * detector see every ready task in the queues (§10.4). */
        ready_continuation_flush(t, r);
        return work;
}

/* A pass over many ring slots looks at the ring this thread last
 * answered and left drained every ANSWERED_LOOK_EVERY slots: a client
 * waiting for an answer, then sending its next request, would otherwise
 * wait for the pass over every other session, idle ones included (§9.4).
 * Between users, fair share's turns still rule every kernel start. */
#define ANSWERED_LOOK_EVERY 4

static void spin_yield(struct sched_thread *t, int64_t before_ns);

/* After a visit of r (ring idx) that did work (`did`), or any visit of
 * the answered ring's slot: r is the answered ring if the visit did work
 * and left it drained; that ring left with work, or another ring in its
 * slot, ends the looks. True if r was answered now. */
static bool note_answered(struct sched_thread *t, struct hbg_ring *r, unsigned idx, bool did) {
        bool drained = work_none(r);
        if (did && drained) {
                t->answered_ring = idx + 1;
                t->answered_serial = r->serial;
                return true;
        }
        if (t->answered_ring == idx + 1 && (!drained || r->serial != t->answered_serial))
                t->answered_ring = 0;
        return false;
}

/* A thread woken from its park that just answered a ring gives way at
 * once, not after the rest of its pass and an idle one: the client that
 * woke it was often put on this CPU, yielding there while it waits for
 * the answer, and with many idle sessions open the passes are what it
 * would wait for (§9.4). Once per wake: a busy thread's answers come
 * from threads that did not park. */
static void answer_given(struct sched_thread *t) {
        if (!t->just_woke) {
                /* Another answer in the turn that gave way: its client
                 * gets the idle turn's yield. */
                if (t->gave_way_loop == t->loops)
                        t->gave_way_loop = t->loops - 1;
                return;
        }
        t->just_woke = false;
        t->gave_way_loop = t->loops;
        spin_yield(t, clock_now_ns());
}

/* The look at the answered ring within a pass of `high` slots: its new
 * request, if any, now. */
static bool visit_answered(struct sched_thread *t, unsigned high) {
        unsigned idx = t->answered_ring - 1;
        struct hbg_ring *r = idx < high ? ring_table_enter(t, idx) : NULL;
        if (!r || r->serial != t->answered_serial) {
                if (r)
                        ring_table_leave(t);
                t->answered_ring = 0; /* removed, or another ring in its slot */
                return false;
        }
        bool work = visit_ring(t, r, false);
        bool answered = note_answered(t, r, idx, work);
        ring_table_leave(t);
        if (answered)
                answer_given(t);
        return work;
}

/* One pass over the `high` ring slots from this thread's cursor (which
 * moves on one for the next pass), the answered ring looked at every
 * ANSWERED_LOOK_EVERY slots: true if any visit did work. */
static bool visit_pass(struct sched_thread *t, unsigned high, bool check_stall) {
        bool work = false;
        for (unsigned n = 0; n < high; n++) {
                unsigned idx = (t->ring_cursor + n) % high;
                struct hbg_ring *r = ring_table_enter(t, idx);
                if (r) {
                        bool did = visit_ring(t, r, check_stall);
                        bool answered = (did || idx + 1 == t->answered_ring) && note_answered(t, r, idx, did);
                        work |= did;
                        ring_table_leave(t);
                        if (answered)
                                answer_given(t);
                }
                if (t->answered_ring && high > ANSWERED_LOOK_EVERY && n % ANSWERED_LOOK_EVERY == 0)
                        work |= visit_answered(t, high);
        }
        t->ring_cursor++;
        return work;
}

/* Idle: may this thread spin, or must it park at once? At most
 * max_spinners threads spin together (the count is a hint, relaxed: one
 * thread too many for a moment only costs a little CPU). */
static bool spin_slot_take(struct sched_thread *t) {
        struct hbg_engine *e = t->engine;
        if (t->spinning)
                return true;
        if (atomic_fetch_add_explicit(&e->spinners, 1, memory_order_relaxed) >= e->max_spinners) {
                atomic_fetch_sub_explicit(&e->spinners, 1, memory_order_relaxed);
                return false;
        }
        t->spinning = true;
        return true;
}

static void spin_slot_drop(struct sched_thread *t) {
        if (!t->spinning)
                return;
        t->spinning = false;
        atomic_fetch_sub_explicit(&t->engine->spinners, 1, memory_order_relaxed);
}

/* A yield that took less than this let nothing else run here (a yield
 * alone returns in about 0.2 us); a longer one may have. */
#define YIELD_ALONE_NS 1000
/* That many longer yields in a row within YIELDS_TAKEN_WINDOW_NS, each of
 * which switched this thread away: a task is there to stay (the producer
 * this thread answers, yielding while it waits for the answer). A
 * producer that never yields needs no move: two tasks that both keep
 * running are spread over the CPUs by the kernel. */
#define YIELDS_TAKEN_TO_MOVE 4
#define YIELDS_TAKEN_WINDOW_NS 1000000
/* Moves at most this often per thread; a move soon after the last one
 * (the balancer or the producer undid it) doubles the gap, up to the
 * most; a quiet spell resets it. The most is short: a producer and the
 * thread answering it, put on one CPU again, take turns there until the
 * next move (each answer then about 1.7 us instead of 1.0), and a move
 * costs two system calls (docs/PERFORMANCE.md). */
#define MOVE_GAP_MIN_NS 1000000
#define MOVE_GAP_MAX_NS 4000000

/*
 * Move this thread off the CPU it is on, to any other it may run on:
 * its allowed set without this CPU, then the set as it was (the kernel
 * migrates it at the first call; the second keeps it where it landed).
 * Nothing else changes (what the set written back leaves out:
 * hbgd.conf(5), move_off_shared_cpu). False where the set has one CPU or
 * the calls are refused.
 */
static bool move_off_cpu(void) {
        cpu_set_t allowed, others;
        int cpu = sched_getcpu();
        if (cpu < 0 || cpu >= CPU_SETSIZE || sched_getaffinity(0, sizeof(allowed), &allowed) < 0 ||
            !CPU_ISSET(cpu, &allowed))
                return false;
        others = allowed;
        CPU_CLR(cpu, &others);
        if (CPU_COUNT(&others) == 0 || sched_setaffinity(0, sizeof(others), &others) < 0)
                return false;
        (void)sched_setaffinity(0, sizeof(allowed), &allowed);
        return true;
}

/* Tell the client this thread answered last that its answer comes from
 * a thread on the move (or no longer): a move onto an idle vCPU takes
 * 50-250 us here, and a wait that slept meanwhile is woken by the moved
 * thread onto that thread's new CPU, undoing the move (§9.4). */
static void answered_moving(struct sched_thread *t, uint32_t moving) {
        if (!t->answered_ring)
                return;
        unsigned idx = t->answered_ring - 1;
        unsigned high = atomic_load_explicit(&t->engine->rings_high, memory_order_acquire);
        struct hbg_ring *r = idx < high ? ring_table_enter(t, idx) : NULL;
        if (!r)
                return;
        /* Relaxed: a hint that only lengthens the client's own spin. */
        if (r->serial == t->answered_serial)
                atomic_store_explicit(&r->cpl->answer_moving, moving, memory_order_relaxed);
        ring_table_leave(t);
}

/* This thread's involuntary context switches so far, -1 if unknown. A
 * yield that let another task run here counts one; a yield with nothing
 * else runnable, or one that took long because the host ran something
 * else in the machine's place, none. */
static long switches_away(void) {
        struct rusage ru;
        return getrusage(RUSAGE_THREAD, &ru) == 0 ? ru.ru_nivcsw : -1;
}

/*
 * The idle spin gives way (§9.4). Where a producer and the spinning
 * thread were put on one CPU while another sits idle, they take turns:
 * each answer waits for the producer's yield, then for ours, and the
 * scheduler keeps them there (each is runnable only while the other
 * runs). A run of yields that each let something run here, close
 * together, says so; the thread then moves to another CPU, spaced by a
 * gap that grows while moves keep recurring (other load on every CPU,
 * which no move helps). Only successful moves are counted. The yields'
 * times find a run; the kernel's count of this thread's switches,
 * read at its first yield and its last (not at every yield: in a run,
 * each read delays the producer's next answer), confirms that the
 * others were switches too.
 */
static void spin_yield(struct sched_thread *t, int64_t before_ns) {
        sched_yield();
        int64_t after = clock_now_ns();
        if (after - before_ns < YIELD_ALONE_NS || !t->engine->cfg.move_off_shared_cpu) {
                t->yields_taken = 0;
                return;
        }
        if (t->move_gap_ns == 0)
                t->move_gap_ns = MOVE_GAP_MIN_NS;
        if (t->yields_taken == 0 || after - t->taken_since_ns > YIELDS_TAKEN_WINDOW_NS) {
                /* A run that cannot end in a move (too soon after the
                 * last) is not counted: no reads of the switches for it. */
                if (after + YIELDS_TAKEN_WINDOW_NS - t->moved_ns < t->move_gap_ns) {
                        t->yields_taken = 0;
                        return;
                }
                t->yields_taken = 0;
                t->taken_since_ns = after;
                t->switches_seen = switches_away();
        }
        if (++t->yields_taken < YIELDS_TAKEN_TO_MOVE)
                return;
        t->yields_taken = 0;
        if (after - t->moved_ns < t->move_gap_ns)
                return;
        /* Switches away since the run's first yield (whose own came
         * before that read): one at each of the three yields since, or
         * preemptions between them, another task here all the same. */
        if (t->switches_seen < 0 || switches_away() - t->switches_seen < YIELDS_TAKEN_TO_MOVE - 1)
                return;
        if (after - t->moved_ns < 4 * t->move_gap_ns)
                t->move_gap_ns = t->move_gap_ns * 2 > MOVE_GAP_MAX_NS ? MOVE_GAP_MAX_NS : t->move_gap_ns * 2;
        else
                t->move_gap_ns = MOVE_GAP_MIN_NS;
        t->moved_ns = after;
        answered_moving(t, 1);
        if (move_off_cpu())
                stat_add(&t->stats.moves, 1);
        answered_moving(t, 0);
}

/* Does this pass make the stall check (every 100 ms)? Not the first pass
 * after a wake-up, which answers it: the check's full visits of idle
 * rings would come first (after a park of 100 ms, every time). Owed
 * (*ret_owed), it is made in the next pass, before any park. */
static inline bool stall_check_turn(struct sched_thread *t, int64_t now_ms, bool *ret_owed) {
        bool check_stall = now_ms - t->last_stall_check_ms >= 100;
        *ret_owed = check_stall && t->first_pass;
        check_stall = check_stall && !t->first_pass;
        t->first_pass = false;
        if (check_stall)
                t->last_stall_check_ms = now_ms;
        return check_stall;
}

/* The first turn of an idle spell (from *idle_since, INT64_MIN: no spin,
 * park at once). answered: the last pass with work answered a client and
 * did not give way yet. True when this turn gave way, which ends it. */
static inline bool idle_begin(struct sched_thread *t, bool answered, int64_t *idle_since) {
        t->just_woke = false; /* a wake that found nothing to answer */
        *idle_since = clock_now_ns();
        if (!spin_slot_take(t)) {
                *idle_since = INT64_MIN; /* no spinning: park now */
                return false;
        }
        if (!answered)
                return false;
        /* The first idle turn after work gives way at once, not
         * CLOCK_EVERY turns later: a producer put on this CPU, waiting for
         * the answer just published, reads it now (§9.4). Counted like
         * the spin's yields towards a move off a shared CPU. */
        spin_yield(t, *idle_since);
        if (t->flags_to_clear)
                flags_clear(t); /* after the answer, a pass after */
        return true;
}

/* Any later idle turn: what is owed, the spin, or the park once the spin
 * is over (the spell ends: *idle_since 0). */
static inline void idle_turn(struct sched_thread *t, bool stall_owed, int64_t *idle_since) {
        if (t->flags_to_clear || stall_owed) {
                /* After the answer, before another pass: the flags park()
                 * left, and the stall check. */
                if (t->flags_to_clear)
                        flags_clear(t);
                return;
        }
        if (*idle_since != INT64_MIN && t->loops % CLOCK_EVERY != 0) {
                cpu_relax();
                return;
        }
        int64_t now_ns = *idle_since != INT64_MIN ? clock_now_ns() : 0;
        if (*idle_since != INT64_MIN && (uint64_t)(now_ns - *idle_since) < t->engine->cfg.spin_before_park_ns) {
                /* Every CLOCK_EVERY idle turns the spin gives way: a thread
                 * woken onto this CPU (the producer this thread just
                 * answered, or a peer) runs first, not after the spin or
                 * the rest of a time slice (§9.4). With nothing else
                 * runnable here it returns at once. */
                spin_yield(t, now_ns);
                return;
        }
        spin_slot_drop(t);
        park(t);
        t->now_ms = clock_now_ms();
        t->yields_taken = 0; /* a run of taken yields is one spin's */
        *idle_since = 0;
}

void *sched_thread_main(void *arg) {
        struct sched_thread *t = arg;
        struct hbg_engine *e = t->engine;
        int64_t idle_since = 0;
        bool worked = false; /* the last turn did work: the next idle one yields */

        trace_thread_bind(&e->trace, t->index);

        t->now_ms = clock_now_ms();
        while (!atomic_load_explicit(&e->stop, memory_order_relaxed)) {
                unsigned high = atomic_load_explicit(&e->rings_high, memory_order_acquire);
                if (++t->loops % CLOCK_EVERY == 0)
                        t->now_ms = clock_now_ms();
                sched_heartbeat(t);
                bool stall_owed;
                bool check_stall = stall_check_turn(t, t->now_ms, &stall_owed);

                bool work = visit_pass(t, high, check_stall);
                if (t->woken_directly) {
                        t->woken_directly = false;
                        if (!work)
                                wakeup_spurious(t, clock_now_ms());
                }

                if (work) {
                        idle_since = 0;
                        worked = true;
                        spin_slot_drop(t);
                        continue;
                }
                if (idle_since == 0) {
                        /* Not when the last pass with work gave way
                         * already, right after its answer. */
                        bool answered = worked && t->gave_way_loop + 1 != t->loops;
                        worked = false;
                        if (idle_begin(t, answered, &idle_since))
                                continue;
                }
                idle_turn(t, stall_owed, &idle_since);
        }
        spin_slot_drop(t);
        return NULL;
}
