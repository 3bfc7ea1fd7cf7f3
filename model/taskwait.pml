/*
 * A tensor wait's request for one task (docs/RUNTIME_LOGIC.md §2.1,
 * task_waiting): the client waits for task 1 while task 0, added before
 * it, holds the watermark back (it never completes here, so the
 * watermark's own request, window_waiting, answers nothing and is left
 * out). The client stores its request, looks at task 1's stamp, and
 * sleeps until the completion pipe has a byte if the look found nothing;
 * woken, it looks again (a byte of an earlier request may wake it), and
 * withdraws its request when it is done. The scheduler threads complete
 * tasks 1 and 2 (another task of the ring, completed by the other
 * thread): each publishes its task's stamp and then, at the visit's end
 * (under eager, after that seq_cst store; under eager-batched, at the
 * walk after its seq_cst fence; under lazy and resolver, after a seq_cst
 * fence), loads the request; if the task it names is
 * complete, it takes the request (CAS) and writes the pipe. Both
 * threads' loads and CASes race on the one word.
 *
 * Every access the argument rests on is seq_cst in the code (the
 * client's store and its look; the stamp store under eager, the fence
 * after the stamps under eager-batched, lazy and resolver, and the load of
 * the request):
 * Promela's interleaving is that total order.
 *
 * Mutants, each of which the checker must catch as a lost wake-up (the
 * client asleep for ever with task 1 complete and both threads done):
 *   LOOK_FIRST   the client looks at the stamp before it stores its
 *                request (a look that missed the stamp and a thread that
 *                missed the request);
 *   LOAD_FIRST   a thread loads the request before its stamp is out
 *                (the batched walk's fence left out: the load may pass
 *                the release store).
 */
#define WAITED 1                /* the task the client waits for */

byte stamp[3];                  /* stamp[i]: task i is complete (task 0 never is) */
byte task_waiting;              /* the request: id + 1, 0 none */
byte pipe;                      /* bytes in the completion pipe */
bit asleep;                     /* the client is in its poll() */
bit thread_done[2];

inline take_request(id) {
        /* signal_task_waiter_due(): the request names a complete task */
        atomic {
                if
                :: task_waiting != 0 && stamp[task_waiting - 1] -> task_waiting = 0; pipe++
                :: else -> skip
                fi
        }
}

/* A scheduler thread completing task `id`. */
proctype sched(byte me; byte id) {
#ifdef LOAD_FIRST
        byte want = task_waiting;
        stamp[id] = 1;
        atomic {
                if
                :: want != 0 && want == task_waiting && stamp[want - 1] -> task_waiting = 0; pipe++
                :: else -> skip
                fi
        }
#else
        stamp[id] = 1;
        take_request(id);
#endif
        thread_done[me] = 1
}

active proctype client() {
        bit done;
#ifdef LOOK_FIRST
        done = stamp[WAITED];
        task_waiting = WAITED + 1;
#else
        task_waiting = WAITED + 1;
        done = stamp[WAITED];
#endif
        do
        :: done -> break
        :: !done ->
                asleep = 1;
                atomic { pipe > 0 -> pipe--; asleep = 0 };   /* poll() on the pipe, then drain it */
                done = stamp[WAITED]
        od;
        task_waiting = 0
}

/* No lost wake-up: the waited task complete, both threads done, and the
 * client asleep with nothing in its pipe. */
active proctype monitor() {
end:    atomic {
                thread_done[0] && thread_done[1] && stamp[WAITED] && asleep && pipe == 0 ->
                assert(false)
        }
}

init {
        atomic {
                run sched(0, WAITED);
                run sched(1, 2)
        }
}
