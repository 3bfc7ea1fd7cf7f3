/*
 * The completion protocol (docs/RUNTIME_LOGIC.md §2-§7, §11) as a Promela
 * model over explicit x86-TSO store buffers; what it covers, the bounds,
 * the properties and what spin reported: RUNTIME_LOGIC.md §15.
 * tests/scripts/test-model.sh checks it and its mutants.
 *
 * The completers run tests/unit/test_completion_stress.c's worker_main on
 * shm/completion.c: claim an id, wait for the window (§2) and for the id's
 * fanin (§5), execute, publish the stamp or defer it (§3.4, §6), walk the
 * watermark (§4.2). Selected with cpp (spin -DNAME):
 *   (default)            eager (§11.1): completer_publish_or_defer, then
 *                        watermark_update per id;
 *   BATCHED              eager-batched (§11.4): release stamps, one fence
 *                        and watermark_walk_after_batch per visit;
 *   LAZY                 lazy (§11.2): release stamps, one bounded attempt
 *                        per id, full walks per visit and before parking;
 * the mutants, each of which the checker must catch:
 *   UNORDERED_FRONTIER   HBG_UNSAFE_UNORDERED_FRONTIER: the stamp store is a
 *                        plain (release) store, the frontier's store->load
 *                        pair loses its fence (§4.3);
 *   NO_RECHECK           the walker does not re-read the new frontier's
 *                        stamp after its CAS (§4.2, §4.3);
 *   NO_BATCH_FENCE       eager-batched without its per-visit fence (§11.4);
 *   NO_LAPS              a stamp says "set", not which lap (§3.2);
 *   HEAP_CAP=n           a failsafe heap of n < D entries (§6.2);
 * and SC: stores reach memory at once (no store buffers), to show which
 * failures need TSO.
 */

/* ---- bounds ---------------------------------------------------------- */
#ifndef NCOMP
#define NCOMP 3                 /* completer threads */
#endif
#define F 2                     /* flag window: ids x and x + F share a slot */
#define D 4                     /* task window: ids in flight lie in [WM, WM + D) */
#ifndef NIDS
#define NIDS 6                  /* ids 0 .. NIDS - 1, first_id = 0 */
#endif
#define END NIDS
#define SB 2                    /* store-buffer entries per completer */
#ifndef HEAP_CAP
#define HEAP_CAP D              /* failsafe_capacity() (§6.2) */
#endif
#define NONE 255

/* A small fixed DAG, ids in topological order: 3 and 4 read a fanin whose
 * slot a later lap may already hold (reach 3 > F, the §5 fallback to the
 * watermark), 5 reads the id just below it, whose slot may still hold the
 * previous owner's stamp. */
#define FANIN(x) ((x) == 3 -> 0 : ((x) == 4 -> 1 : ((x) == 5 -> 4 : NONE)))

/* §3.2: slot and stamp (the lap plus one; zero is lap -1, §3.3).
 * flag_index's shuffle (§3.1) is a bijection on the slots: left out. */
#define SLOT(x) ((x) % F)
#ifdef NO_LAPS
#define STAMP(x) 1
#else
#define STAMP(x) ((x) / F + 1)
#endif

/* ---- shared memory --------------------------------------------------- */
byte flag[F];                   /* the stamps, in memory (all zero: §3.3) */
byte wm;                        /* completed_watermark, in memory */
byte next_claim;                /* the stress test's claim cursor */

/* x86-TSO: one FIFO store buffer per completer. A plain store (a release
 * store compiles to mov) enters the buffer; the flusher moves the oldest
 * entry to memory at any time; a load reads the newest entry of its own
 * buffer for that address, else memory; a locked instruction (xchg for a
 * seq_cst store, lock cmpxchg, lock xadd) and mfence wait until the buffer
 * is empty. Only stamps are ever stored plainly here, so an entry is the
 * id whose stamp it carries. */
byte sb_id[NCOMP * SB];
byte sb_len[NCOMP];

#define SB_HAS(p, s, k) (sb_len[p] > (k) && SLOT(sb_id[(p) * SB + (k)]) == (s))
/* Store forwarding (SB == 2): the newest entry for the slot, else memory. */
#define LOAD_STAMP(p, s) \
        (SB_HAS(p, s, 1) -> STAMP(sb_id[(p) * SB + 1]) : \
         (SB_HAS(p, s, 0) -> STAMP(sb_id[(p) * SB]) : flag[s]))
#define IS_STAMPED(p, x) (LOAD_STAMP(p, SLOT(x)) == STAMP(x))

/* ---- ghost state: what the properties talk about, no protocol reads it */
bit done[NIDS + D];             /* executed (the stress test's exec[]) */
bit stored[NIDS + 1];           /* its stamp store has been issued */
byte who[NIDS + 1];             /* ... by this completer (batched; 0 once below WM) */
byte finished;                  /* completers past their exit path */

/* Who is bound to move the watermark past the frontier id rid[p]:
 * R_PRELOAD  stored its stamp, its seq_cst WM load is still to come;
 * R_WALK     walking from cur == rid (before its CAS);
 * R_RECHECK  its CAS set WM = rid, the re-read of rid's stamp is to come;
 * R_CHECK    batched: read WM == rid after its fence, looks at its stamp next.
 * pend[p]: batched/lazy stamps stored that p itself will still walk over
 * (before its next fence + WM load, or its park). */
#define R_NONE 0
#define R_PRELOAD 1
#define R_WALK 2
#define R_RECHECK 3
#define R_CHECK 4
byte role[NCOMP];
byte rid[NCOMP];
bit pend[NCOMP];

#define OBLIGED(p) ((role[p] != R_NONE && rid[p] == wm) || (pend[p] && who[wm] == p))
#if defined(LAZY)
/* Lazy has no frontier hand-off: any thread still awake walks again (its
 * tick, its park), so the frontier is owed while one is. */
#define SOMEONE_OBLIGED (finished < NCOMP)
#elif NCOMP == 3
#define SOMEONE_OBLIGED (OBLIGED(0) || OBLIGED(1) || OBLIGED(2))
#else
#define SOMEONE_OBLIGED (OBLIGED(0) || OBLIGED(1) || OBLIGED(2) || OBLIGED(3))
#endif
#if NCOMP == 3
#define BUFFERS_EMPTY (sb_len[0] == 0 && sb_len[1] == 0 && sb_len[2] == 0)
#elif NCOMP == 4
#define BUFFERS_EMPTY (sb_len[0] == 0 && sb_len[1] == 0 && sb_len[2] == 0 && sb_len[3] == 0)
#else
#error "NCOMP is 3 or 4"
#endif

/* Liveness (the freeze): every execution reaches WM == END. Checked with
 * pan -a; the safety runs compile with -DNOCLAIM. */
ltl reaches_end { <> (wm == END) }

/* A stamp reaching memory: the slot gate (§3.4) must have certified the
 * slot's previous owner x - F (below WM), and that owner's stamp must be
 * the one overwritten (no lap skipped, none written twice). */
inline mem_write(x) {
        assert(x < F || x - F < wm);
#ifndef NO_LAPS
        assert(flag[SLOT(x)] == STAMP(x) - 1);
#endif
        flag[SLOT(x)] = STAMP(x)
}

/* The store of x's stamp, as a statement inside the step that decides
 * it, with the guard that lets the step run. seq_cst is xchg on x86: it
 * waits until the buffer is drained, then writes memory. release is mov:
 * into the buffer (a full buffer stalls the core until the flusher makes
 * room). Under SC both write memory at once. */
#define STORE_SEQ_CST_READY(p) (sb_len[p] == 0)
#define STORE_SEQ_CST(p, x) mem_write(x); STORED(p, x)
#ifdef SC
#define STORE_RELEASE_READY(p) true
#define STORE_RELEASE(p, x) mem_write(x); STORED(p, x)
#else
#define STORE_RELEASE_READY(p) (sb_len[p] < SB)
#define STORE_RELEASE(p, x) sb_id[p * SB + sb_len[p]] = x; sb_len[p]++; STORED(p, x)
#endif
#ifdef BATCHED
#define STORED(p, x) stored[x] = 1; who[x] = p
#define FORGET(x) who[x] = 0
#else
#define STORED(p, x) stored[x] = 1
#define FORGET(x) skip
#endif

/* The WM CAS moved the watermark from c to n: every id in [c, n) must be
 * executed and its stamp issued (§4.4 invariant 2). */
inline check_prefix(c, n) {
        i = c;
        do
        :: i < n -> assert(done[i] && stored[i]); FORGET(i); i++
        :: else -> break
        od;
        i = 0
}

#include "completer.pml"

/* ---- the flusher: any completer's oldest store reaches memory -------- */
inline flush(p) {
        atomic {
                sb_len[p] > 0 ->
                mem_write(sb_id[p * SB]);
                sb_id[p * SB] = sb_id[p * SB + 1];
                sb_id[p * SB + 1] = 0;
                sb_len[p]--
        }
}

active proctype flusher() {
end:    do
        :: flush(0)
        :: flush(1)
        :: flush(2)
#if NCOMP == 4
        :: flush(3)
#endif
        od
}

/* ---- the monitor ----------------------------------------------------- */
active proctype monitor() {
end:    do
        /* No completion lost: a published frontier stamp always has
         * someone bound to walk past it (the §4.3 argument as an
         * invariant). The moment nobody is, the watermark is frozen.
         * (The monitor stops there, so that pan -A, which ignores
         * assertions, sees the freeze as the invalid end state it leads
         * to.) */
        :: atomic { wm < END && stored[wm] && !SOMEONE_OBLIGED -> assert(false); break }
        /* Every completer done and every store in memory: all counted. */
        :: atomic { finished == NCOMP && BUFFERS_EMPTY -> assert(wm == END); break }
        od
}
