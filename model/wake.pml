/*
 * The producer -> hbgd wake-up (docs/RUNTIME_LOGIC.md §9.4; what it
 * covers, the bounds and what spin reported: §15.2): parked scheduler
 * threads that sleep on hbgd's private word and, within their spurious-
 * wake budget, on the words of the wake pages in use as well (one
 * futex_waitv: a wake of any word ends the sleep); an honest client that
 * publishes, wakes its uid's page's word directly (FUTEX_WAKE, read-only:
 * it cannot bump the word), skips the doorbell when that wake woke
 * somebody on a page marked its uid's own, and confirms before it sleeps
 * (need_wakeup still set: the doorbell after all); the io thread's kick,
 * which bumps and wakes the private word; and a hostile client that
 * wakes its page's word at will, waits on it itself (a wake of one
 * sleeper may land on its waiter and say "woke one"), makes every wake
 * of it fail (a FUTEX_WAIT_REQUEUE_PI sleeper) and requeues hbgd's
 * sleepers off it.
 *
 * UNSERVED (OLD_CLIENT implies it): the ring starts unserved (§9.3:
 * hbgd serves a session once its
 * submission region is sealed against punching): no thread visits it,
 * so none sets or clears its need_wakeup, until the io thread serves it
 * at the first doorbell: at once (a 1.6 client sealed the region and rang
 * as it connected), or a while later (hbgd seals the region itself on
 * its slow-work thread, for an older client: OLD_CLIENT, which rings no
 * doorbell at connect). Serving sets `served`, then looks at the
 * client's cursor: if it published, it kicks as a doorbell does, whatever
 * need_wakeup says: clears need_wakeup, bumps the private word and wakes
 * one sleeper (wakeup_ring_served()); if not, it leaves need_wakeup set.
 *
 * The hostile client's page: by default another uid's (it never touches
 * the honest client's word); SAME_UID: the honest client's own (a client
 * of the same uid); SHARED: the page the uids past hbgd's first 32 share,
 * not marked own, so the honest client rings the doorbell after every
 * wake. tests/scripts/test-model.sh checks it and its mutants.
 *
 * Every access the argument rests on is seq_cst in the code (the publish
 * of `submitted`, the load of need_wakeup, the bump of the word, the idle
 * count, the re-check, the clearing of need_wakeup by an awake thread,
 * the exchange of `asked` and the confirm's load): Promela's interleaving
 * is that total order. A
 * futex call is one atomic step (the kernel's hash-bucket lock):
 * FUTEX_WAIT/futex_waitv compare and enqueue, FUTEX_WAKE dequeues.
 * Timeouts are left out: they only ever wake a thread.
 *
 * The flags the last thread to park set are cleared by one thread: the
 * asker itself if its re-check found work, else the first thread to wake
 * after it slept (it takes `asked`), at its first idle turn, followed by
 * another pass; here that clear is made at the wake, before the next
 * visit (the code's order in between only delays it: a flag left set
 * only makes the client wake hbgd needlessly), and the mark is made with
 * the flags, kept even when the asker then finds work (more clears than
 * the code makes, the direction that could lose a wake-up). Every thread
 * clears the flag of a ring it finds work in, as it visits it (here: a
 * visit that takes the client's work).
 *
 * PEER: the completion policy's own thread (the resolver, which
 * schedules nothing) makes work claimable once (it moved the watermark)
 * and wakes a peer as wakeup_one() does: only if some thread is idle and
 * fewer than CAP (max_awake_threads, 1 here: the tightest) scheduler
 * threads are awake; a bump of the private word, then a wake of one of
 * its sleepers. (The fences the code puts between the publish and the
 * idle count, on both sides, are what lets the interleaving stand for
 * them.)
 *
 * Mutants, each of which the checker must catch (a lost wake-up: work
 * published, client and io thread done, every thread asleep):
 *   TRUST_WAKE    (with SAME_UID) the client trusts a wake that "woke
 *                 one" and never confirms: a waiter of its uid took it;
 *   NO_RECHECK    the parking thread does not look at the rings after
 *                 setting need_wakeup;
 *   KICK_PAGE     (with SAME_UID) the io thread's kick wakes the page's
 *                 word instead of the private one (the hostile waiter
 *                 takes it, or a requeue moved the sleeper off it);
 *   SERVE_NO_KICK serving sets `served` and wakes nobody, though the
 *                 client published;
 *   SERVE_CLEAR_QUIET serving a ring its client has not published to
 *                 clears need_wakeup all the same (without a kick): the
 *                 client's publish then wakes nobody;
 *   SERVE_LOOK_FIRST (with TRUST_WAKE: a client of another uid, which
 *                 trusts a wake that woke a thread and never confirms)
 *                 serving looks at the client's cursor before it sets
 *                 `served`: a publish after the look wakes a thread that
 *                 passes the ring over, and nothing kicks it;
 *   SERVE_BUMP_FIRST serving bumps the private word before it sets
 *                 `served` (a thread that read the new word and then
 *                 missed `served` sleeps);
 *   CLEAR_UNSERVED (with OLD_CLIENT) the thread that took the flags
 *                 clears need_wakeup of a ring it does not visit (not
 *                 served yet): the older
 *                 client's confirm then never rings, and nothing serves
 *                 the ring;
 *   AWAKE_COUNTS_POLICY (with PEER) the awake count is threads - idle,
 *                 the policy's own thread included, where the code counts
 *                 schedulers - idle and skips only while one is awake: the
 *                 policy's thread is always awake, so the cap always looks
 *                 reached, and its wake is skipped while both schedulers
 *                 sleep.
 */
#define NT 2                    /* scheduler threads */
#ifndef NG
#define NG 2                    /* the client's publishes */
#endif
#ifndef NH
#define NH 2                    /* the hostile client's moves */
#endif
#if defined(SAME_UID) || defined(SHARED)
#define HOSTILE_ON_PAGE 1       /* the hostile client reaches the honest page's word */
#endif
#if defined(OLD_CLIENT) && !defined(UNSERVED)
#define UNSERVED 1
#endif

byte submitted;                 /* the client's cursor */
byte taken;                     /* work the threads took */
bit need_wakeup = 1;            /* a new ring starts with it set */
bit asked;                      /* a thread that set need_wakeup sleeps */
byte priv;                      /* hbgd's private word */
bit asleep[NT];                 /* inside its wait: the private word */
bit onpage[NT];                 /* ... and the honest client's page's word */
bit onother[NT];                /* ... and the hostile client's own page's word */
byte idle;
#if defined(UNSERVED) && !defined(OLD_CLIENT)
byte doorbells = 1;             /* datagrams not read yet: the connect's (1.6) */
#else
byte doorbells;                 /* datagrams not read yet */
#endif
#ifdef UNSERVED
bit served;                     /* threads visit the ring (§9.3) */
#else
bit served = 1;
#endif
bit sealing;                    /* hbgd seals the region: served after */
bit io_busy;
bit client_done;
bit unconfirmed;                /* a trusted wake not confirmed yet */
#ifdef PEER
#define CAP 1                   /* max_awake_threads */
bit made;                       /* work the policy's thread made claimable */
bit ptaken;                     /* ... taken by a scheduler */
bit peer_done;
#define PEER_WORK (ptaken < made)
#else
#define PEER_WORK false
#endif

/* A wake of one sleeper of the honest page's word: one of hbgd's (its
 * whole wait ends); with the hostile client on that page, its waiter
 * instead (n = 1 all the same), or a failure (n = 0: its PI sleeper's
 * -EINVAL); n = 0 when nobody sleeps there. */
inline wake_page(n) {
        atomic {
                if
                :: onpage[0] -> asleep[0] = 0; onpage[0] = 0; onother[0] = 0; n = 1
                :: onpage[1] -> asleep[1] = 0; onpage[1] = 0; onother[1] = 0; n = 1
#ifdef HOSTILE_ON_PAGE
                :: n = 1
                :: n = 0
#endif
                :: !onpage[0] && !onpage[1] -> n = 0
                fi
        }
}

/* The hostile client's wake of its own page's word (another uid's). */
inline wake_other() {
        atomic {
                if
                :: onother[0] -> asleep[0] = 0; onpage[0] = 0; onother[0] = 0
                :: onother[1] -> asleep[1] = 0; onpage[1] = 0; onother[1] = 0
                :: else -> skip
                fi
        }
}

inline wake_priv() {
        atomic {
                if
                :: asleep[0] -> asleep[0] = 0; onpage[0] = 0; onother[0] = 0
                :: asleep[1] -> asleep[1] = 0; onpage[1] = 0; onother[1] = 0
                :: else -> skip
                fi
        }
}

proctype sched(byte me) {
        byte seq;
        bit page;
loop:
        /* A visit of the ring (if served): one with work has its flag
         * cleared (seq_cst, before the loads that take the work; a
         * publish after the clear is one after the visit, which the
         * client then counts on this thread to see), and what was
         * published is taken. */
        atomic {
                if
                :: served && taken < submitted -> need_wakeup = 0; taken++
#ifdef PEER
                :: ptaken < made -> ptaken = 1
#endif
                :: else -> skip
                fi
        }
        /* Park. Within its budget (the pages' words too) or not: a
         * hostile client decides. */
        if
        :: page = 1
        :: page = 0
        fi;
        seq = priv;
        idle++;
        /* The last to park: the flags (one step here, a loop of seq_cst
         * stores in the code: one ring), and the mark that asks the first
         * thread to wake after it to clear them. The code marks them only
         * before it sleeps; here the mark stays also when the re-check
         * below finds work, so more threads clear than in the code: the
         * direction that could lose a wake-up, and a smaller state space
         * than a bit per thread that remembers it asked. */
        atomic {
                if
                :: idle == NT -> asked = 1;
                        if
                        :: served -> need_wakeup = 1
                        :: else -> skip
                        fi
                :: else -> skip
                fi
        }
#ifndef NO_RECHECK
        if
        :: (served && taken < submitted) || PEER_WORK -> idle--; goto loop
        :: else -> skip
        fi;
#endif
        /* futex_waitv: sleeps only while the private word holds seq. */
        atomic {
                if
                :: priv == seq -> asleep[me] = 1; onpage[me] = page; onother[me] = page
                :: else -> skip
                fi
        }
end:    !asleep[me];
        idle--;
        /* Somebody is awake: clients need not wake. The first thread to
         * wake after an asker slept takes its flags (an exchange) and
         * clears them (seq_cst) before its next visit of their rings:
         * here, in the code at its first idle turn, with a pass after
         * (flags_clear()); the rings it finds work in are cleared as they
         * are visited (above). The asker whose re-check found work clears
         * its flags the same way: in this one-ring model, the clear its
         * visit makes. */
        atomic {
                if
                :: asked -> asked = 0;
#ifndef CLEAR_UNSERVED
                        if
                        :: served -> need_wakeup = 0
                        :: else -> skip
                        fi
#else
                        need_wakeup = 0
#endif
                :: else -> skip
                fi
        }
        goto loop
}

/* Before the client sleeps (or any time after a trusted wake): need_wakeup
 * still set means no hbgd thread looked at the ring's work since: ring
 * after all. */
inline confirm() {
        atomic {
                if
                :: unconfirmed -> unconfirmed = 0;
                        if
                        :: need_wakeup -> doorbells++
                        :: else -> skip
                        fi
                :: else -> skip
                fi
        }
}

/* Publish, then look at need_wakeup (store->load); wake directly; ring
 * the doorbell unless the wake woke somebody on a page of its own. */
active proctype client() {
        byte n;
        do
        :: submitted < NG ->
                submitted++;
                if
                :: need_wakeup ->
                        wake_page(n);
#ifdef SHARED
                        doorbells++
#else
                        if
#ifndef TRUST_WAKE
                        :: n == 1 -> unconfirmed = 1
#else
                        :: n == 1 -> skip
#endif
                        :: else -> doorbells++
                        fi
#endif
                :: else -> skip
                fi
        :: unconfirmed -> confirm()
        :: else -> break
        od;
        /* The wait for the work: its spin, then the confirm, then sleep. */
        confirm();
        client_done = 1
}

/* The doorbell's kick (ring_kick): if need_wakeup is still set,
 * clear it, bump the private word, wake one of its sleepers if some
 * thread is idle; clear already, an awake thread cleared it since and
 * will see the work (it clears the flag before it looks again). KICK_ALWAYS_CHECKED: the
 * kick without that look (the form before it). */
#ifdef SERVE_LOOK_FIRST
#define LOOKED served = 1
#else
#define LOOKED skip
#endif

/* wakeup_ring_served(): the doorbell's kick, need_wakeup cleared whatever
 * it was, one sleeper woken. */
inline serve_kick() {
        need_wakeup = 0;
#ifndef SERVE_BUMP_FIRST
        priv++;
#endif
#ifndef SERVE_NO_KICK
        if
        :: idle > 0 -> wake_priv()
        :: else -> skip
        fi
#else
        skip
#endif
}

/* engine_ring_serve(): served, then a look at the client's cursor;
 * if it published, the kick; after a new wake page, the kick whatever it
 * published (either branch may be taken then); if neither, nothing:
 * need_wakeup stays set from the ring's start, and the client's publish
 * wakes a thread. */
inline serve() {
#ifdef SERVE_BUMP_FIRST
        priv++;
#endif
#ifndef SERVE_LOOK_FIRST
        served = 1;
#endif
        if
        :: submitted > taken -> LOOKED; serve_kick()
        :: true -> LOOKED; serve_kick()         /* a wake page was made */
        :: submitted <= taken -> LOOKED;
#ifdef SERVE_CLEAR_QUIET
                need_wakeup = 0;
#endif
                skip
        fi
}

active proctype io() {
        byte n;
end:    do
        /* The first doorbell serves the ring: at once (the client sealed
         * its region), or once hbgd's own seal is done. */
        :: atomic { doorbells > 0 && !served && !sealing -> doorbells--; io_busy = 1 }
                if
                :: serve()
                :: sealing = 1
                fi;
                io_busy = 0
        :: atomic { sealing && !served -> io_busy = 1 }
                serve();
                io_busy = 0
        /* A doorbell while hbgd seals: the serve's look sees the
         * publish that rang it. */
        :: atomic { doorbells > 0 && sealing && !served -> doorbells-- }
        :: atomic { doorbells > 0 && served -> doorbells--; io_busy = 1 }
#ifndef KICK_ALWAYS_CHECKED
                if
                :: need_wakeup ->
#endif
                        need_wakeup = 0;
                        priv++;
                        if
                        :: idle > 0 ->
#ifdef KICK_PAGE
                                wake_page(n)
#else
                                wake_priv()
#endif
                        :: else -> skip
                        fi
#ifndef KICK_ALWAYS_CHECKED
                :: else -> skip
                fi;
#else
                ;
#endif
                io_busy = 0
        od
}

#ifdef PEER
/* The policy's thread: publish, then wakeup_one(): not when nobody is
 * idle or CAP schedulers are awake (they re-check before they park). */
#ifndef AWAKE_COUNTS_POLICY
#define AWAKE_ENOUGH (idle < NT && NT - idle >= CAP)
#else
#define AWAKE_ENOUGH (NT + 1 - idle >= CAP)
#endif
active proctype policy() {
        made = 1;
        if
        :: idle > 0 && !AWAKE_ENOUGH ->
                priv++;
                wake_priv()
        :: else -> skip
        fi;
        peer_done = 1
}
#endif

/* The hostile client: wakes its page's word at will, and requeues
 * hbgd's sleepers off it (they stay asleep on the other words). Its page
 * is the honest client's with HOSTILE_ON_PAGE, another uid's otherwise. */
active proctype hostile() {
        byte n, h;
        do
#ifdef HOSTILE_ON_PAGE
        :: h < NH -> wake_page(n); h++
        :: h < NH -> atomic { onpage[0] = 0; onpage[1] = 0 }; h++
#else
        :: h < NH -> wake_other(); h++
        :: h < NH -> atomic { onother[0] = 0; onother[1] = 0 }; h++
#endif
        :: else -> break
        od
}

/* No lost wake-up: published work, nobody left to wake a thread but the
 * attacker, and every thread asleep. */
active proctype monitor() {
end:    atomic {
                client_done && doorbells == 0 && !io_busy && !(sealing && !served) &&
#ifdef PEER
                peer_done && (taken < submitted || ptaken < made) &&
#else
                taken < submitted &&
#endif
                asleep[0] && asleep[1] ->
                assert(false)
        }
}

init {
        atomic {
                run sched(0);
                run sched(1)
        }
}
