/* SPDX-License-Identifier: MIT */
/* signal.c: telling the client, the last stage of a task's walk: one byte
 * into the session's completion pipe, whether a producer waiting for
 * window space is due one (RUNTIME_LOGIC.md §2.1), and the futex words the
 * client's threads sleep on (§10.7). */
#pragma once

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

struct hbg_ring;

/* A ring's external tasks as signal.c tells the client of them
 * (hbg_ring.ext). */
struct ring_ext {
        /* Wakes of the client's sleeping workers skipped because one
         * looked for work (signal_ext_wake()), looked at again when the
         * look is over (signal_ext_skip_check()): due then (0: none), for
         * the tasks published up to skip_upto; whether one was skipped
         * since. They bound how long a task may wait for a looker kept off
         * its CPU; no wake-up rests on them. */
        _Atomic uint64_t skip_due_ns;
        _Atomic uint64_t skip_upto;
        _Atomic bool skipped_since;
        /* External tasks the stall detector completed (the library posts
         * no mailbox entry for them, but for a narrow race): with
         * the mailbox's head, the tasks answered (signal.c). */
        _Atomic uint64_t stalled;
};

/* One byte into the completion pipe (never blocks, never retried). */
void signal_pipe(struct hbg_ring *r);
/* Does a producer sleep for window space that the watermark now gives?
 * True once per request (it is taken). */
bool signal_window_waiter_due(struct hbg_ring *r);
/* Does a client sleep for one task (a tensor wait) whose stamp is out?
 * Call after publishing stamps and a seq_cst fence (or seq_cst stores).
 * True once per request (it is taken). */
bool signal_task_waiter_due(struct hbg_ring *r);
/* After stamps published with release stores: a seq_cst fence, then the
 * pipe if a tensor wait's request is due. */
void signal_task_waiter_fenced(struct hbg_ring *r);
/* After publishing ready external tasks (published: ext_ready_tail now):
 * bump ext_wake, wake one sleeper if the client says one sleeps and none
 * of its workers looks for work (until its look's end; then
 * signal_ext_skip_check()), or if every scheduler thread is idle. */
void signal_ext_wake(struct hbg_ring *r, uint64_t published);
/* A wake signal_ext_wake() skipped for a looker whose look is over now:
 * if the tasks published by then are not all answered, wake a sleeper.
 * Any thread visiting the ring; cheap when none is pending. True while a
 * look again is pending (not yet due, taken by another thread, or armed
 * again for skips since): the last thread to park comes back for it. */
bool signal_ext_skip_check(struct hbg_ring *r);
/* After graphs retired (or failed when the ring stopped): bump
 * graph_wake, wake every sleeper if the client says one sleeps. */
void signal_graph_wake(struct hbg_ring *r);
/* Does the client want the completion pipe's byte for retired graphs and
 * ready external tasks (sub->pipe_wanted, RUNTIME_LOGIC §10.7)? Call after
 * the signal_*_wake() of the same publication: its seq_cst bump and this
 * seq_cst load are hbgd's half of the pair against a waiting client's
 * "set pipe_wanted; fence; look at the condition". */
bool signal_pipe_wanted(struct hbg_ring *r);
