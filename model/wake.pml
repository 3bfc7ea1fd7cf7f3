/*
 * The producer -> hbgd wake-up (docs/RUNTIME_LOGIC.md §9.4; what it
 * covers, the bounds and what spin reported: §15.2): parked scheduler
 * threads, a client that publishes and wakes them directly through the
 * wake page's futex word (FUTEX_WAKE, read-only: it cannot bump the
 * word), the doorbell as the fallback when that wake found nobody, the
 * io thread's kick, a hostile client's extra wakes, and the private word
 * of threads over their spurious-wake budget.
 * tests/scripts/test-model.sh checks it and its mutants.
 *
 * Every access the argument rests on is seq_cst in the code (the publish
 * of `submitted`, the load of need_wakeup, the bump of the word, the idle
 * and calm_parked counts, the re-check): Promela's interleaving is that
 * total order. A futex call is one atomic step (the kernel's hash-bucket
 * lock): FUTEX_WAIT compares and enqueues, FUTEX_WAKE dequeues and says
 * how many. Timeouts are left out: they only ever wake a thread.
 *
 * Mutants, each of which the checker must catch (a lost wake-up: work
 * published, client and io thread done, every thread asleep):
 *   NO_FALLBACK   the client does not ring the doorbell when its wake
 *                 woke nobody (a thread between its re-check and its
 *                 FUTEX_WAIT sleeps on an unchanged word);
 *   NO_RECHECK    the parking thread does not look at the rings after
 *                 setting need_wakeup;
 *   CALM_LATE     a thread going to the private word counts itself in
 *                 calm_parked after its re-check, not before reading the
 *                 word (the kick may skip the private word).
 */
#define NT 2                    /* scheduler threads */
#ifndef NG
#define NG 2                    /* the client's publishes */
#endif
#ifndef NH
#define NH 2                    /* the hostile client's wakes */
#endif

byte submitted;                 /* the client's cursor */
byte taken;                     /* work the threads took */
bit need_wakeup = 1;            /* a new ring starts with it set */
byte word;                      /* the wake page's futex word */
byte calm;                      /* the private word (calm_seq) */
byte calm_parked;
byte idle;
bit onpage[NT];                 /* inside FUTEX_WAIT on the page's word */
bit oncalm[NT];                 /* inside FUTEX_WAIT on the private word */
byte doorbells;                 /* datagrams not read yet */
bit io_busy;
bit client_done;

#define ASLEEP(i) (onpage[i] || oncalm[i])

/* FUTEX_WAKE(1): one sleeper of the word, if any; n: how many. */
inline wake_page(n) {
        atomic {
                if
                :: onpage[0] -> onpage[0] = 0; n = 1
                :: onpage[1] -> onpage[1] = 0; n = 1
                :: else -> n = 0
                fi
        }
}

inline wake_calm() {
        atomic {
                if
                :: oncalm[0] -> oncalm[0] = 0
                :: oncalm[1] -> oncalm[1] = 0
                :: else -> skip
                fi
        }
}

proctype sched(byte me) {
        byte seq;
        bit use_calm;
loop:
        /* A visit of the ring: take what was published. */
        atomic {
                if
                :: taken < submitted -> taken++
                :: else -> skip
                fi
        }
        /* Park. Over its budget or not: a hostile client decides. */
        if
        :: use_calm = 1
        :: use_calm = 0
        fi;
        if
        :: use_calm ->
#ifndef CALM_LATE
                calm_parked++;
#endif
                seq = calm
        :: else -> seq = word
        fi;
        idle++;
        if
        :: idle == NT -> need_wakeup = 1
        :: else -> skip
        fi;
#ifndef NO_RECHECK
        if
        :: taken < submitted ->
                idle--;
#ifndef CALM_LATE
                if
                :: use_calm -> calm_parked--
                :: else -> skip
                fi;
#endif
                goto loop
        :: else -> skip
        fi;
#endif
#ifdef CALM_LATE
        if
        :: use_calm -> calm_parked++
        :: else -> skip
        fi;
#endif
        /* FUTEX_WAIT(word, seq): sleeps only while the word holds seq. */
        atomic {
                if
                :: use_calm && calm == seq -> oncalm[me] = 1
                :: !use_calm && word == seq -> onpage[me] = 1
                :: else -> skip
                fi
        }
end:    !ASLEEP(me);
        if
        :: use_calm -> calm_parked--
        :: else -> skip
        fi;
        idle--;
        need_wakeup = 0;        /* somebody is awake: clients need not wake */
        goto loop
}

/* Publish, then look at need_wakeup (store->load); wake directly, and
 * ring the doorbell only if that woke nobody. */
active proctype client() {
        byte n;
        do
        :: submitted < NG ->
                submitted++;
                if
                :: need_wakeup ->
                        wake_page(n);
#ifndef NO_FALLBACK
                        if
                        :: n == 0 -> doorbells++
                        :: else -> skip
                        fi
#endif
                :: else -> skip
                fi
        :: else -> break
        od;
        client_done = 1
}

/* The doorbell's kick (hbg_ring_kick): clear need_wakeup, bump the word,
 * wake one sleeper if some thread is idle, and the private word's too
 * when some thread sleeps there (wake_sleepers). */
active proctype io() {
        byte n;
end:    do
        :: atomic { doorbells > 0 -> doorbells--; io_busy = 1 }
                need_wakeup = 0;
                word++;
                if
                :: idle > 0 ->
                        wake_page(n);
                        if
                        :: calm_parked > 0 -> calm++; wake_calm()
                        :: else -> skip
                        fi
                :: else -> skip
                fi;
                io_busy = 0
        od
}

/* Another client of the same hbgd: FUTEX_WAKE on the page at will. */
active proctype hostile() {
        byte n, h;
        do
        :: h < NH -> wake_page(n); h++
        :: else -> break
        od
}

/* No lost wake-up: published work, nobody left to wake a thread but the
 * attacker, and every thread asleep. */
active proctype monitor() {
end:    atomic {
                client_done && doorbells == 0 && !io_busy && taken < submitted && ASLEEP(0) && ASLEEP(1) ->
                assert(false)
        }
}

init {
        atomic {
                run sched(0);
                run sched(1)
        }
}
