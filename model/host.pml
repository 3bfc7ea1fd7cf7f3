/*
 * Host functions in parallel (docs/RUNTIME_LOGIC.md §15.1): hbgd hands
 * external tasks to a producer's worker threads through the external-ready
 * ring, takes their results back through the mailbox, and wakes sleeping
 * workers through the ext_wake futex word behind the ext_sleepers count.
 * A Promela model over explicit x86-TSO store buffers, as completion.pml;
 * tests/scripts/test-model.sh checks it and its mutants.
 *
 * hbgd (one process) makes E external tasks ready one by one while fewer
 * than D are in flight (the window), so ring slots and mailbox entries are
 * reused; it consumes the mailbox in order. NW workers take from the ring
 * (multi-consumer: CAS on the client-private head), run, post to the
 * mailbox (multi-producer: CAS on the client-private mailbox_next, within
 * room), and sleep on ext_wake when there is nothing to take (Dekker-style
 * with ext_sleepers). A worker that has just run a task may look for the
 * next one first, counted in ext_looking, which makes hbgd wake nobody
 * until the look's time is over (§10.7 step 5; the model has no clock,
 * so hbgd may take the look as over or not at any publication). The producer thread, once every task is complete,
 * stops the workers (hbg_disconnect).
 *
 * Selected with cpp (spin -DNAME):
 *   FUTEX_BARRIER   FUTEX_WAIT drains the store buffer before it compares
 *                   the word (Linux's barrier (A) in futex_wait_setup);
 *                   by default it does not: the protocol must not need it;
 *   SC              stores reach memory at once (no store buffers);
 * the mutants, each of which the checker must catch:
 *   PLAIN_SLEEPERS  (a) the sleepers increment is a load and a plain
 *                   (release) store, not a locked fetch_add: lost wake-up;
 *   SLEEPERS_FIRST  (b) hbgd loads ext_sleepers before it bumps ext_wake:
 *                   lost wake-up;
 *   NO_RECHECK      (c) the sleeper does not re-check tail != head after
 *                   its increment: lost wake-up;
 *   TAKE_NO_CAS     (d) the take is load head, store head + 1: doubled task;
 *   NO_ROOM         (e) the mailbox reservation does not check
 *                   k < mailbox_consumed + M: an entry overwritten before
 *                   hbgd consumed it (a lost completion);
 *   SEQ_FIRST       (f) the entry's seq is stored before its task id
 *                   (program order; TSO keeps store order, a compiler or a
 *                   weaker CPU need not): hbgd reads a stale entry;
 *   TAIL_FIRST      (g) hbgd publishes ext_ready_tail before it writes the
 *                   slot: a worker takes a stale id;
 *   STOP_ONCE       (h) the stop is one FUTEX_WAKE(INT_MAX) with no change
 *                   of the word, not repeated until no sleeper is counted:
 *                   a worker between its re-check and FUTEX_WAIT sleeps
 *                   for ever (the word is read-only to the client);
 *   LOOKERS_FIRST   (i) hbgd loads ext_looking before it bumps ext_wake:
 *                   lost wake-up;
 *   GIVE_UP_KEPT    (j) a looker that gives up sleeps still counted in
 *                   ext_looking: hbgd skips the wake-up it needs;
 * and a variant that must pass:
 *   NO_PEER_WAKE    a worker that takes a task does not wake a peer: the
 *                   peer wake is for parallelism, no wake-up rests on it
 *                   (hbgd wakes one sleeper per publication).
 */

/* ---- bounds ---------------------------------------------------------- */
#ifndef NW
#define NW 2                    /* worker threads (1, 2 or 3) */
#endif
#ifndef E
#define E 5                     /* external tasks 0 .. E-1, made ready in order (E > D: slots reused) */
#endif
#ifndef D
#define D 4                     /* task window = external-ready ring entries */
#endif
#ifndef M
#define M 2                     /* mailbox entries (M < D: the room check matters) */
#endif
#define SB 2                    /* store-buffer entries per thread */
#define H NW                    /* hbgd's store buffer (workers are 0 .. NW-1) */

/* ---- shared memory, one array so that a buffer entry is (address, value).
 * Ids are stored plus one, so that zero (the initial memory) is "none". */
#define A_SLOT 0                /* D external-ready ids (completion region) */
#define A_TAIL (D)              /* ext_ready_tail (completion region) */
#define A_WAKE (D + 1)          /* ext_wake (completion region, futex word) */
#define A_SLEEPERS (D + 2)      /* ext_sleepers (submission region) */
#define A_HEAD (D + 3)          /* ext_head (client-private) */
#define A_NEXT (D + 4)          /* mailbox_next (client-private) */
#define A_CONSUMED (D + 5)      /* mailbox_consumed (completion region) */
#define A_STOP (D + 6)          /* stopping (client-private) */
#define A_SLEEPING (D + 7)      /* the pool's own count of sleepers (client-private) */
#define A_MBTASK (D + 8)        /* M mailbox entries: task id ... */
#define A_MBSEQ (D + 8 + M)     /* ... and seq */
#define A_LOOKING (D + 8 + 2 * M) /* ext_looking (submission region) */
#define NADDR (D + 9 + 2 * M)
byte mem[NADDR];

/* x86-TSO, as completion.pml: one FIFO store buffer per thread. A plain
 * store (a release store is mov) enters the buffer; the flusher moves the
 * oldest entry to memory at any time; a load reads the newest entry of
 * its own buffer for the address, else memory; a locked instruction
 * (lock cmpxchg, lock xadd, xchg for a seq_cst store) waits until the
 * buffer is empty. */
byte sb_a[(NW + 1) * SB];
byte sb_v[(NW + 1) * SB];
byte sb_len[NW + 1];

#define SBI(p, k) ((p) * SB + (k))
#define SB_HAS(p, a, k) (sb_len[p] > (k) && sb_a[SBI(p, k)] == (a))
#define LOAD(p, a) (SB_HAS(p, a, 1) -> sb_v[SBI(p, 1)] : \
                    (SB_HAS(p, a, 0) -> sb_v[SBI(p, 0)] : mem[a]))
#define LOCKED_READY(p) (sb_len[p] == 0)
#ifdef SC
#define PLAIN_READY(p) true
#define PLAIN(p, a, v) mem_write(a, v)
#else
#define PLAIN_READY(p) (sb_len[p] < SB)
#define PLAIN(p, a, v) sb_a[SBI(p, sb_len[p])] = a; sb_v[SBI(p, sb_len[p])] = v; sb_len[p]++
#endif

/* ---- the futex: who is queued on ext_wake ---------------------------- */
bit queued[NW];

/* ---- ghost state: what the properties talk about; no protocol step reads
 * it, but the producer waits for `done == E` (the end of hbg_graph_wait,
 * whose own sleep is not modelled) */
bit taken[E];                   /* a worker's take claimed it */
bit executed[E];                /* the host function ran */
bit completed[E];               /* hbgd completed it from its mailbox entry */
byte done;                      /* how many hbgd completed */
byte consumed_g;                /* mailbox entries hbgd has read */
byte kof[E];                    /* the mailbox entry reserved for a task */
byte task_of[E];                /* the task an entry was reserved for */

/* A store reaching memory: a ring slot only once the task it held was
 * taken (its CAS won), a mailbox entry only once hbgd has read the entry
 * it replaces. */
inline mem_write(a, v) {
        if
        :: a >= A_SLOT && a < A_SLOT + D && v > D ->
                assert(taken[v - 1 - D])
        :: a >= A_MBTASK && a < A_MBTASK + M && kof[v - 1] >= M ->
                assert(kof[v - 1] - M < consumed_g)
        :: else -> skip
        fi;
        mem[a] = v
}

/* FUTEX_WAKE(1): any one queued waiter (the kernel's choice). */
inline futex_wake_one() {
        atomic {
                if
                :: queued[0] -> queued[0] = 0
#if NW >= 2
                :: queued[1] -> queued[1] = 0
#endif
#if NW == 3
                :: queued[2] -> queued[2] = 0
#endif
                :: else -> skip
                fi
        }
}

/* FUTEX_WAKE(INT_MAX) */
inline futex_wake_all() {
        atomic {
                queued[0] = 0;
#if NW >= 2
                queued[1] = 0;
#endif
#if NW == 3
                queued[2] = 0;
#endif
                skip
        }
}

/* FUTEX_WAIT(&ext_wake, seq): under the bucket lock, queue only if the word
 * still holds seq (else EAGAIN); then sleep until a FUTEX_WAKE dequeues. */
#ifdef FUTEX_BARRIER
#define FUTEX_READY(p) LOCKED_READY(p)
#else
#define FUTEX_READY(p) true
#endif
inline futex_wait(p, seq) {
        atomic {
                FUTEX_READY(p) ->
                if
                :: mem[A_WAKE] == seq -> queued[p] = 1
                :: else -> skip
                fi
        };
        !queued[p]
}

/* The mailbox has room for entry mailbox_next. */
#ifdef NO_ROOM
#define ROOM true
#else
#define ROOM (mem[A_NEXT] < mem[A_CONSUMED] + M)
#endif

/* ---- a worker (libclient's worker loop) ------------------------------
 *
 * Granularity: a step makes one shared access another thread's outcome
 * depends on, with these merges, each sound because it only drops
 * interleavings whose outcome an unmerged step also has:
 *  - the take's loads of head, tail and (when head == tail) stopping are
 *    one step: head <= tail and both only grow, so an older head read
 *    before the tail only makes the CAS fail (a retry, nothing shared
 *    changes), and "none" read separately is "none" read at once;
 *    stopping only turns true;
 *  - the run is the step of the winning CAS (the function body touches
 *    nothing shared);
 *  - the mailbox reservation is one step: a failed CAS changes nothing,
 *    and the room it checked (mailbox_consumed only grows) still holds at
 *    the CAS;
 *  - the sleeper's seq load is its increment's step: a seq read earlier
 *    can only be older, which makes FUTEX_WAIT return EAGAIN (a retry);
 *    the pool's private count `sleeping` moves in the same steps as
 *    ext_sleepers (C: just before the increment, just after the
 *    decrement, both locked; each observer reads only one of the two);
 *  - the re-check reads tail, head and stopping in one step (as the take);
 *  - a looker's decrement and its seq_cst load of ext_wake are one step:
 *    under TSO the locked decrement empties the buffer and the load reads
 *    memory right after it (the load is C11's half of the pair, below the
 *    model's level); what the looker does next re-reads everything.
 */
active [NW] proctype worker() {
        byte p = _pid;          /* workers are declared first: 0 .. NW-1 */
        byte h, t, v, k, seq, s;
        bit ok, st;
        bit looking;            /* counted in ext_looking */
        bit worked;             /* ran a task since its last sleep */

        do
        :: true ->
                /* The MC take: head (relaxed), tail (acquire), the slot,
                 * CAS head -> head + 1 (acq_rel). */
                atomic { h = LOAD(p, A_HEAD); t = mem[A_TAIL]; st = mem[A_STOP] };
                if
                :: h != t && looking ->
                        /* The look found a task: stop looking, then take
                         * it (or lose it to a peer) from the top. */
                        atomic { LOCKED_READY(p) -> mem[A_LOOKING]--; looking = 0; h = 0; t = 0; st = 0 }
                :: h != t && !looking ->
                        atomic { v = mem[A_SLOT + h % D] };
                        /* The winning take runs the task: the slot held the
                         * id claimed, and no task runs twice. */
#ifdef TAKE_NO_CAS
                        atomic {
                                PLAIN_READY(p) -> PLAIN(p, A_HEAD, h + 1); ok = 1;
                                taken[h] = 1;
                                assert(v == h + 1);
                                assert(!executed[v - 1]);
                                executed[v - 1] = 1
                        };
#else
                        atomic {
                                LOCKED_READY(p) ->
                                if
                                :: mem[A_HEAD] == h ->
                                        mem[A_HEAD] = h + 1; ok = 1;
                                        taken[h] = 1;
                                        assert(v == h + 1);
                                        assert(!executed[v - 1]);
                                        executed[v - 1] = 1
                                :: else -> ok = 0; v = 0
                                fi
                        };
#endif
                        if
                        :: ok ->
                                worked = 1;
                                /* Wake a peer when more is ready and
                                 * someone sleeps. */
                                if
#ifndef NO_PEER_WAKE
                                :: t > h + 1 ->
                                        atomic { s = LOAD(p, A_SLEEPERS) };
                                        if
                                        :: s > 0 -> futex_wake_one()
                                        :: else -> skip
                                        fi;
                                        s = 0
#endif
                                :: else -> skip
                                fi;
                                /* The MP post: reserve k by CAS on
                                 * mailbox_next while k < mailbox_consumed + M
                                 * (else wait: a blocking guard), write the
                                 * entry, then seq = k + 1 (release). */
                                atomic {
                                        LOCKED_READY(p) && ROOM ->
                                        k = mem[A_NEXT];
                                        mem[A_NEXT] = k + 1;
                                        kof[v - 1] = k; task_of[k] = v - 1
                                };
#ifdef SEQ_FIRST
                                atomic { PLAIN_READY(p) -> PLAIN(p, A_MBSEQ + k % M, k + 1) };
                                atomic { PLAIN_READY(p) -> PLAIN(p, A_MBTASK + k % M, v); k = 0; v = 0 }
#else
                                atomic { PLAIN_READY(p) -> PLAIN(p, A_MBTASK + k % M, v) };
                                atomic { PLAIN_READY(p) -> PLAIN(p, A_MBSEQ + k % M, k + 1); k = 0; v = 0 }
#endif
                        :: else -> skip         /* lost the CAS: take again */
                        fi
                :: st -> break                  /* nothing to take, stopping */
                :: h == t && !st && !looking && worked ->
                        /* Just ran a task: look for the next one, counted
                         * (fetch_add, seq_cst), or sleep at once (below). */
                        atomic { LOCKED_READY(p) -> mem[A_LOOKING]++; looking = 1; worked = 0; h = 0; t = 0 }
                :: h == t && !st && looking ->
                        /* Nothing yet: look again (from the top), or give
                         * up: decrement, then sleep (the next time round,
                         * not looking). */
                        if
                        :: skip
#ifdef GIVE_UP_KEPT
                        :: looking = 0; worked = 0
#else
                        :: atomic { LOCKED_READY(p) -> mem[A_LOOKING]--; looking = 0; worked = 0 }
#endif
                        fi;
                        h = 0; t = 0
                :: else ->
                        /* Nothing to take. The sleeper: seq = ext_wake
                         * (acquire); ext_sleepers += 1 (seq_cst);
                         * re-check; FUTEX_WAIT(seq); ext_sleepers -= 1
                         * (seq_cst). */
#ifdef PLAIN_SLEEPERS
                        atomic { LOCKED_READY(p) -> seq = mem[A_WAKE]; mem[A_SLEEPING]++; s = LOAD(p, A_SLEEPERS) };
                        atomic { PLAIN_READY(p) -> PLAIN(p, A_SLEEPERS, s + 1); s = 0 };
#else
                        atomic { LOCKED_READY(p) -> seq = mem[A_WAKE]; mem[A_SLEEPING]++; mem[A_SLEEPERS]++ };
#endif
#ifndef NO_RECHECK
                        atomic { t = mem[A_TAIL]; h = LOAD(p, A_HEAD); st = mem[A_STOP] };
#else
                        atomic { st = mem[A_STOP] };
#endif
                        if
                        :: t == h && !st -> futex_wait(p, seq)
                        :: else -> skip
                        fi;
                        atomic { LOCKED_READY(p) -> mem[A_SLEEPERS]--; mem[A_SLEEPING]--; seq = 0; h = 0; t = 0; st = 0; worked = 0 }
                fi
        od
}

/* ---- hbgd: ready.c's external publish, signal.c's wake, mailbox.c ----- */
active proctype hbgd() {
        byte made, c, v, s, l;  /* c: mailbox_consumed, hbgd's own copy */

        do
        :: made < E && made - c < D ->
                /* Publish: the id into slot made & (D-1), then
                 * ext_ready_tail = made + 1 (release). */
#ifdef TAIL_FIRST
                atomic { PLAIN_READY(H) -> PLAIN(H, A_TAIL, made + 1) };
                atomic { PLAIN_READY(H) -> PLAIN(H, A_SLOT + made % D, made + 1) };
#else
                atomic { PLAIN_READY(H) -> PLAIN(H, A_SLOT + made % D, made + 1) };
                atomic { PLAIN_READY(H) -> PLAIN(H, A_TAIL, made + 1) };
#endif
                made++;
                /* Wake: fetch_add(ext_wake) (seq_cst, lock xadd), then
                 * load ext_looking and, if zero, ext_sleepers (seq_cst),
                 * FUTEX_WAKE(1) if that is nonzero. */
#ifdef LOOKERS_FIRST
                atomic { l = mem[A_LOOKING] };
                atomic { LOCKED_READY(H) -> mem[A_WAKE]++ };
#elif defined(SLEEPERS_FIRST)
                atomic { s = mem[A_SLEEPERS] };
                atomic { LOCKED_READY(H) -> mem[A_WAKE]++ };
                atomic { l = mem[A_LOOKING] };
#else
                atomic { LOCKED_READY(H) -> mem[A_WAKE]++ };
                atomic { l = mem[A_LOOKING] };
#endif
#ifndef SLEEPERS_FIRST
                /* Lookers counted and their look not over (ext_look_until_ns,
                 * a clock the model has not: either way): no wake. */
                if
                :: l == 0 -> atomic { s = mem[A_SLEEPERS] }
                :: l != 0 -> skip
                :: l != 0 -> l = 0; atomic { s = mem[A_SLEEPERS] }
                fi;
#endif
                if
                :: l == 0 && s != 0 -> futex_wake_one()
                :: else -> skip
                fi;
                s = 0; l = 0
        :: atomic {
                /* Consume entry c when its seq matches (acquire), then its
                 * task id, in one step (nothing may overwrite an entry not
                 * yet consumed: checked where stores reach memory): in
                 * order, the entry the worker reserved, a task run and not
                 * yet completed. */
                        mem[A_MBSEQ + c % M] == c + 1 ->
                        v = mem[A_MBTASK + c % M];
                        assert(v == task_of[c] + 1);
                        assert(executed[v - 1] && !completed[v - 1]);
                        completed[v - 1] = 1;
                        done++;
                        c++;
                        consumed_g = c;
                        v = 0
                };
                atomic { PLAIN_READY(H) -> PLAIN(H, A_CONSUMED, c) }
        :: c == E -> break
        od;
        /* No task lost: every one ran and hbgd completed it. */
        atomic {
                c = 0;
                do
                :: c < E -> assert(executed[c] && completed[c]); c++
                :: else -> break
                od
        }
}

/* ---- the producer: hbg_graph_wait returns, then hbg_disconnect -------- */
active proctype producer() {
        done == E;
        atomic { mem[A_STOP] = 1 };     /* seq_cst store; no other store of its own */
#ifdef STOP_ONCE
        futex_wake_all()
#else
        /* The word is hbgd's, read-only to the client: a wake without a
         * change of it can come before a sleeper queues. So wake, then
         * load the pool's count of sleepers (seq_cst), and again until
         * it is zero: a sleeper counted after that load sees stopping
         * (the same store->load pair as hbgd's, with stopping for the
         * publication and `sleeping` for ext_sleepers). */
        do
        :: futex_wake_all();
           if
           :: mem[A_SLEEPING] == 0 -> break
           :: else -> skip
           fi
        od
#endif
}

/* ---- the flusher: any thread's oldest store reaches memory ----------- */
inline flush(p) {
        atomic {
                sb_len[p] > 0 ->
                mem_write(sb_a[SBI(p, 0)], sb_v[SBI(p, 0)]);
                sb_a[SBI(p, 0)] = sb_a[SBI(p, 1)];
                sb_v[SBI(p, 0)] = sb_v[SBI(p, 1)];
                sb_a[SBI(p, 1)] = 0;
                sb_v[SBI(p, 1)] = 0;
                sb_len[p]--
        }
}

active proctype flusher() {
end:    do
        :: flush(0)
        :: flush(1)
#if NW >= 2
        :: flush(2)
#endif
#if NW == 3
        :: flush(3)
#endif
        od
}
