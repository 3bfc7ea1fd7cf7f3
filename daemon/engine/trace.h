/* SPDX-License-Identifier: MIT */
/*
 * The task timeline (docs/OPERATIONS.md, "Tracing"): per-thread buffers
 * of fixed records that the scheduler threads fill only while a trace is
 * on. The hot path reads one word, relaxed (trace_epoch()): zero while no
 * trace runs, so tracing off costs one predictable branch per task.
 */
#pragma once

#include <stdalign.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "daemon/engine/engine.h"
#include "daemon/engine/engine_trace.h"

struct hbg_engine;
struct hbg_ring;
struct task_slot;

/*
 * One thread's buffer: records [0, n) of the trace whose epoch is in
 * head's high 32 bits, n in its low 32. The thread is its only writer;
 * it writes record n, then stores head (release), so a reader that loads
 * head (acquire) reads every record below n complete, and they never
 * change while that epoch lasts (the buffer only grows; a full one drops
 * and counts). A new epoch starts the buffer over, by the writer, at its
 * first record of that epoch: hbgd starts a new trace only once the
 * previous one is read or abandoned (daemon/tracing.c).
 */
struct trace_buf {
        alignas(64) _Atomic uint64_t head;
        _Atomic uint64_t dropped;         /* records of head's epoch that did not fit */
};

struct trace_state {
        /* 0: off; else the running trace's number. Written by the thread
         * that starts and stops traces (release), read by every recorder:
         * relaxed on the hot path, acquire again before a record is
         * written (the buffers and the filter below were set before). */
        alignas(64) _Atomic uint32_t epoch;
        uint32_t last_epoch;              /* the starter's own */
        _Atomic uint64_t session;         /* record only this ring's session; 0: any */
        _Atomic int64_t uid;              /* only rings of this uid; -1: any */
        _Atomic int64_t started_ns;       /* CLOCK_MONOTONIC at start */
        struct trace_buf *bufs;           /* one per engine thread, from engine_new() */
        struct hbg_trace_event *events;   /* thread_events per thread, at the first start */
        unsigned nbufs;
        unsigned thread_events;           /* engine cfg.trace_thread_events */
        _Atomic uint64_t unbuffered;      /* recorded by a thread with no buffer: dropped */
};

/* The running trace's epoch, 0 if none: the hot path's one look. */
static inline uint32_t trace_epoch(const struct trace_state *ts) {
        return atomic_load_explicit(&ts->epoch, memory_order_relaxed);
}

int trace_init(struct trace_state *ts, unsigned threads, unsigned thread_events);
void trace_fini(struct trace_state *ts);
/* The calling thread records into buffer `index` from now on. */
void trace_thread_bind(struct trace_state *ts, unsigned index);

/* The recorders, called only when trace_epoch() returned ep != 0. */
/* A task run: blocks [block, block + blocks) of task id on this thread
 * from start_tick to end_tick (ktime.h: the run's own stamps, so that a
 * dependant stamped ready at end_tick is not drawn ready before its input
 * ended), with its result (0 or a negative errno); the run of block 0
 * also records the task's fanins (HBG_TRACE_FANINS). */
void trace_task(struct trace_state *ts, uint32_t ep, const struct hbg_ring *r, const struct task_slot *s,
                uint64_t id, uint32_t block, uint32_t blocks, int result, uint64_t start_tick, uint64_t end_tick);
/* A host task from made ready to its answer read now. */
void trace_host(struct trace_state *ts, uint32_t ep, const struct hbg_ring *r, const struct task_slot *s,
                uint64_t id, int result);
/* Graph record `number` (ids first..last) retired now, noticed at since_ns. */
void trace_graph(struct trace_state *ts, uint32_t ep, const struct hbg_ring *r, uint64_t number, uint64_t first,
                 uint64_t last, int result, int64_t since_ns);
/* The calling thread parks (HBG_TRACE_PARK) or woke (HBG_TRACE_WAKE). */
void trace_instant(struct trace_state *ts, uint32_t ep, enum hbg_trace_kind kind);
