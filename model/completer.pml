/*
 * One completer thread (included by completion.pml): worker_main of
 * tests/unit/test_completion_stress.c over shm/completion.c (eager, batched),
 * or the lazy policy's steps (daemon/engine/completion_lazy.c).
 *
 * Granularity. A step (an atomic block) makes at most one access to shared
 * memory that another thread's outcome depends on, with these exceptions,
 * each sound because the condition it reads, once true, stays true:
 *  - a wait that C spins on (the window, a fanin, a deferred id's gate) is
 *    a blocking guard: a failed attempt changes nothing but the cached
 *    watermark. So there are no spin cycles, every execution ends, and a
 *    frozen watermark leaves a completer blocked: an invalid end state;
 *  - the window (id < WM + D), the fanin (set) and the slot gate
 *    (id < WM + F) only ever turn true, so reading them at the instant of
 *    the stamp store that follows them is one of C's interleavings;
 *  - a scan reads the stamps of [cur, cur + D) one by one, and while
 *    WM == cur each of them only turns from unset to set (the gate keeps
 *    x + F out while x >= WM): what the loads return is what one read of
 *    all of them returns at the last load. If WM moved meanwhile the CAS
 *    fails and the scan's result is dropped.
 * The cached watermark (§5) is left out: it is a value once read from WM,
 * and WM only grows, so every decision taken on the cache (x < cache, the
 * gate x < cache + F) is the one a fresh read of WM takes; it saves reads,
 * it never changes an outcome.
 */

#define G_OPEN 1                /* gate open: store the stamp */
#define G_SHUT 2                /* previous owner not certified: defer */

/* The eager frontier's stamp store (HBG_FRONTIER_STORE): seq_cst (xchg),
 * or release (mov) in the HBG_UNSAFE_UNORDERED_FRONTIER build. */
#ifdef UNORDERED_FRONTIER
#define STORE_FRONTIER(p, x) STORE_RELEASE(p, x)
#define STORE_FRONTIER_READY(p) STORE_RELEASE_READY(p)
#else
#define STORE_FRONTIER(p, x) STORE_SEQ_CST(p, x)
#define STORE_FRONTIER_READY(p) STORE_SEQ_CST_READY(p)
#endif

/* The policy's store of a completed id's stamp, and of a deferred one's:
 * eager both HBG_FRONTIER_STORE; batched release, then (retry through
 * completer_try_set_flag) HBG_FRONTIER_STORE; lazy release both. */
#if defined(BATCHED)
#define STORE_DONE(p, x) STORE_RELEASE(p, x)
#define STORE_DONE_READY(p) STORE_RELEASE_READY(p)
#define STORE_RETRY(p, x) STORE_FRONTIER(p, x)
#define STORE_RETRY_READY(p) STORE_FRONTIER_READY(p)
#elif defined(LAZY)
#define STORE_DONE(p, x) STORE_RELEASE(p, x)
#define STORE_DONE_READY(p) STORE_RELEASE_READY(p)
#define STORE_RETRY(p, x) STORE_RELEASE(p, x)
#define STORE_RETRY_READY(p) STORE_RELEASE_READY(p)
#else
#define STORE_DONE(p, x) STORE_FRONTIER(p, x)
#define STORE_DONE_READY(p) STORE_FRONTIER_READY(p)
#define STORE_RETRY(p, x) STORE_FRONTIER(p, x)
#define STORE_RETRY_READY(p) STORE_FRONTIER_READY(p)
#endif

/* What a stored stamp obliges its completer to (ghost): eager walks at
 * once (its WM load is next), batched and lazy later. */
#if defined(BATCHED) || defined(LAZY)
#define OWE(p, x) pend[p] = 1
#else
#define OWE(p, x) role[p] = R_PRELOAD; rid[p] = x
#endif

/* completer_flag_is_set (completion.h): its own stamp (acquire),
 * else a fresh WM (acquire). */
#define IS_SET(p, f) (f == NONE || IS_STAMPED(p, f) || f < wm)

/* The gate of §3.4: x's slot is free once x - F is below WM. */
#define GATE_OPEN(x) (x - wm < F)

active [NCOMP] proctype completer() {
        byte p = _pid;          /* completers are declared first: 0 .. NCOMP-1 */
        byte id, x, cur, next, i;
        bit ok;
        byte heap;              /* failsafe heap (§6): the deferred ids as a bit set */
        byte hlen;
        byte hmin = NONE;       /* its minimum */

/* completer_defer(): push, or the ring stops (eager_complete's retire_fail). */
#define DEFER(x) \
        assert(hlen < HEAP_CAP); \
        heap = heap | (1 << x); hlen++; \
        if :: x < hmin -> hmin = x :: else fi

/* ---- watermark_update (shm/completion.c) -------------- */
#define UPDATE(p, x) \
        atomic { /* cur = load(WM, HBG_FRONTIER_LOAD) */ \
                cur = wm; \
                if \
                :: cur != x -> role[p] = R_NONE; rid[p] = 0; ok = 0; cur = 0 \
                :: else -> role[p] = R_WALK; rid[p] = cur; ok = 1 \
                fi \
        }; \
        if \
        :: ok -> \
                next = x + 1; \
                do \
                :: SCAN(p); \
                   atomic { /* CAS(WM, cur -> next), HBG_FRONTIER_RMW: lock cmpxchg */ \
                        sb_len[p] == 0 -> \
                        if \
                        :: wm == cur -> \
                                check_prefix(cur, next); \
                                wm = next; \
                                role[p] = R_RECHECK; rid[p] = next; ok = 1 \
                        :: else -> role[p] = R_NONE; rid[p] = 0; ok = 0 \
                        fi \
                   }; \
                   if :: !ok -> break :: else fi; \
                   RECHECK(p); \
                   if :: !ok -> break :: else fi \
                od \
        :: else \
        fi; \
        cur = 0; next = 0; ok = 0

/* while (next < cur + D && stamp(next) set) next++; acquire loads, taken
 * as one read (see the top). */
#define SCAN(p) \
        atomic { \
                do \
                :: next < cur + D && IS_STAMPED(p, next) -> assert(done[next]); next++ \
                :: else -> break \
                od \
        }

/* The walker's re-read of the new frontier's stamp (HBG_FRONTIER_LOAD):
 * set, keep walking from there; not set, its completer walks. */
#ifdef NO_RECHECK
#define RECHECK(p) role[p] = R_NONE; rid[p] = 0; ok = 0
#else
#define RECHECK(p) \
        atomic { \
                if \
                :: IS_STAMPED(p, next) -> assert(done[next]); cur = next; next = cur + 1; role[p] = R_WALK; rid[p] = cur \
                :: else -> role[p] = R_NONE; rid[p] = 0; ok = 0 \
                fi \
        }
#endif

/* ---- completer_retry_deferred_slow + the policy's finish ------------------ */
/* The heap's minimum, once its gate opens: popped and its stamp stored in
 * one step (the gate only opens further), then finished. Its first
 * statement is the guard, so it serves as a do option. */
#define RETRY_ONE(p) \
        atomic { \
                hlen > 0 && GATE_OPEN(hmin) && STORE_RETRY_READY(p) -> \
                x = hmin; \
                heap = heap & ~(1 << x); hlen--; \
                hmin = NONE; i = x + 1; \
                do \
                :: i < NIDS && (heap & (1 << i)) == 0 -> i++ \
                :: i < NIDS && (heap & (1 << i)) != 0 -> hmin = i; break \
                :: else -> break \
                od; \
                i = 0; \
                STORE_RETRY(p, x); OWE(p, x) \
        }; \
        FINISH(p, x); \
        x = 0

/* ---- eager-batched: watermark_walk_after_batch (per visit, §11.4) ---------- */
#ifdef NO_BATCH_FENCE
#define BATCH_READY(p) (pend[p])
#else
#define BATCH_READY(p) (pend[p] && sb_len[p] == 0) /* mfence: stalls until drained */
#endif
#define WALK_BATCH(p) \
        atomic { /* fence, then the seq_cst load of WM */ \
                BATCH_READY(p) -> \
                cur = wm; \
                pend[p] = 0; role[p] = R_CHECK; rid[p] = cur \
        }; \
        atomic { /* its stamp (acquire): set, walk as eager does */ \
                if \
                :: IS_STAMPED(p, cur) -> x = cur; ok = 1 \
                :: else -> role[p] = R_NONE; rid[p] = 0; ok = 0 \
                fi \
        }; \
        if \
        :: ok -> UPDATE(p, x); x = 0 \
        :: else -> cur = 0 \
        fi

/* ---- lazy (completion_lazy.c) ---------------------------------------- */
/* advance_once(c, bound): scan set stamps from WM below min(WM + D, bound),
 * CAS once (acq_rel: lock cmpxchg); a lost CAS is left alone. ok: moved. */
#define ADVANCE_ONCE(p, bound) \
        atomic { \
                cur = wm; next = cur; \
                do \
                :: next < cur + D && next < bound && IS_STAMPED(p, next) -> assert(done[next]); next++ \
                :: else -> break \
                od \
        }; \
        if \
        :: next == cur -> ok = 0 \
        :: else -> \
                atomic { \
                        sb_len[p] == 0 -> \
                        if \
                        :: wm == cur -> check_prefix(cur, next); wm = next; ok = 1 \
                        :: else -> ok = 0 \
                        fi \
                } \
        fi; \
        cur = 0; next = 0

/* advance_all: advance_once until it does not move WM (a lost CAS ends it,
 * as in C). */
#define ADVANCE_ALL(p) \
        do \
        :: ADVANCE_ONCE(p, END + D); if :: !ok -> break :: else fi \
        od; \
        ok = 0

/* The policy's finish of a published id. */
#if defined(BATCHED)
#define FINISH(p, x) skip       /* batched_finish: walk_due, i.e. pend[p] */
#elif defined(LAZY)
#define FINISH(p, x) ADVANCE_ONCE(p, x + 1); ok = 0
#else
#define FINISH(p, x) UPDATE(p, x)
#endif

/* What a thread does instead of spinning (before_wait, tick). */
#if defined(BATCHED)
#define WAIT_OPTIONS :: RETRY_ONE(p) :: WALK_BATCH(p)
#elif defined(LAZY)
#define WAIT_OPTIONS :: RETRY_ONE(p) :: atomic { IS_STAMPED(p, wm) -> skip }; ADVANCE_ALL(p)
#else
#define WAIT_OPTIONS :: RETRY_ONE(p)
#endif

        do
        :: /* worker_main: retry_deferred(): publish what may be, smallest first */
           do
           :: RETRY_ONE(p)
           :: else -> break
           od;
#ifdef BATCHED
           /* A visit may end here: the walk of what it published. */
           if :: WALK_BATCH(p) :: true fi;
#endif
           /* claim: fetch_add(next_claim) is lock xadd */
           atomic {
                sb_len[p] == 0 ->
                id = next_claim;
                if :: next_claim < END -> next_claim++ :: else fi
           };
           if :: id >= END -> break :: else fi;

           /* Wait for the window (§2: id < WM + D) and the fanin (§5:
            * reads as set), execute, then completer_try_publish's gate (§3.4):
            * store the stamp, or defer. */
           do
           :: atomic {
                id < wm + D && IS_SET(p, FANIN(id)) && GATE_OPEN(id) && STORE_DONE_READY(p) ->
                assert(FANIN(id) == NONE || done[FANIN(id)]);
                assert(id >= wm);       /* WM passed an unpublished id */
                done[id] = 1;
                STORE_DONE(p, id); OWE(p, id)
              };
              FINISH(p, id);
              break
           :: atomic {
                id < wm + D && IS_SET(p, FANIN(id)) && !GATE_OPEN(id) ->
                assert(FANIN(id) == NONE || done[FANIN(id)]);
                done[id] = 1;
#ifdef LAZY
                /* publish(): one bounded attempt to certify the previous
                 * owner, then the gate again, then defer */
                ok = 0
              };
              ADVANCE_ONCE(p, id - F + 1); ok = 0;
              if
              :: atomic { GATE_OPEN(id) && STORE_DONE_READY(p) -> STORE_DONE(p, id); OWE(p, id) };
                 FINISH(p, id)
              :: atomic { !GATE_OPEN(id) -> DEFER(id) }
              fi;
#else
                DEFER(id)
              };
#endif
              break
           WAIT_OPTIONS
           od;
           id = 0
        od;
        id = 0;

        /* Exit: keep retrying until every deferred id is published (the
         * seed made one pass and could leave some behind, P6). */
        do
        :: hlen == 0 -> break
        WAIT_OPTIONS
        od;
#ifdef BATCHED
        do
        :: WALK_BATCH(p)
        :: !pend[p] -> break
        od;
#endif
#ifdef LAZY
        /* park: the idle count is a locked RMW; lazy_before_park's walk
         * follows it. */
        atomic { sb_len[p] == 0 -> skip };
        ADVANCE_ALL(p);
        pend[p] = 0;
#endif
        atomic { finished++; hmin = 0 }
}
