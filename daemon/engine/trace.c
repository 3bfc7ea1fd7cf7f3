/* SPDX-License-Identifier: MIT */
/*
 * The task timeline's buffers (trace.h; docs/OPERATIONS.md, "Tracing"):
 * per-thread arrays of fixed records, written by their thread only while
 * a trace is on, read by hbgd's io thread. No lock anywhere: a recorder
 * never waits, a full buffer drops and counts.
 */
#include "daemon/engine/trace.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "daemon/engine/engine_state.h"
#include "daemon/engine/ring.h"
#include "daemon/engine/slot.h"
#include "common/clock.h"

/* The buffer the calling thread records into (NULL: none, the io thread). */
static _Thread_local struct trace_buf *trace_self;

int trace_init(struct trace_state *ts, unsigned threads, unsigned thread_events) {
        memset(ts, 0, sizeof(*ts));
        ts->thread_events = thread_events;
        atomic_store_explicit(&ts->uid, -1, memory_order_relaxed);
        ts->bufs = aligned_alloc(64, threads * sizeof(*ts->bufs));
        if (!ts->bufs)
                return -ENOMEM;
        memset(ts->bufs, 0, threads * sizeof(*ts->bufs));
        ts->nbufs = threads;
        return 0;
}

void trace_fini(struct trace_state *ts) {
        free(ts->bufs);
        free(ts->events);
        ts->bufs = NULL;
        ts->events = NULL;
}

void trace_thread_bind(struct trace_state *ts, unsigned index) {
        trace_self = index < ts->nbufs ? &ts->bufs[index] : NULL;
}

/* The next record of this thread's buffer for trace ep, or NULL (none, or
 * full: counted). The acquire load pairs with the starter's release store
 * of the epoch: the events array and the filter are visible. */
static struct hbg_trace_event *record_begin(struct trace_state *ts, uint32_t ep, uint32_t *ret_n) {
        struct trace_buf *b = trace_self;
        if (atomic_load_explicit(&ts->epoch, memory_order_acquire) != ep)
                return NULL; /* stopped (or restarted) meanwhile */
        if (!b || !ts->events) {
                atomic_fetch_add_explicit(&ts->unbuffered, 1, memory_order_relaxed);
                return NULL;
        }
        /* This thread is the only writer of head: relaxed. */
        uint64_t h = atomic_load_explicit(&b->head, memory_order_relaxed);
        uint32_t n = (uint32_t)(h >> 32) == ep ? (uint32_t)h : 0;
        if ((uint32_t)(h >> 32) != ep) {
                /* The first record of this trace: the buffer starts over.
                 * dropped is reset before head names the epoch (the
                 * release below), so a reader of this epoch's head sees 0
                 * or later counts. */
                atomic_store_explicit(&b->dropped, 0, memory_order_relaxed);
                atomic_store_explicit(&b->head, (uint64_t)ep << 32, memory_order_release);
        }
        if (n >= ts->thread_events) {
                atomic_fetch_add_explicit(&b->dropped, 1, memory_order_relaxed);
                return NULL;
        }
        *ret_n = n;
        return &ts->events[(size_t)(b - ts->bufs) * ts->thread_events + n];
}

/* Record n is written: publish it (release: the reader's acquire load of
 * head sees the whole record). */
static void record_end(uint32_t ep, uint32_t n) {
        atomic_store_explicit(&trace_self->head, ((uint64_t)ep << 32) | (n + 1), memory_order_release);
}

/* Is ring r's work recorded by trace ep? The epoch first, with acquire
 * (pairs with the starter's release store of it): the filter read next is
 * ep's or a later trace's. The filter loads are acquire too, pairing with
 * its release stores: a later trace's filter (stored after the stop of
 * ep) makes record_begin's epoch check see that stop, so no record of ep
 * is ever made under another trace's filter (weakly ordered CPUs). */
static bool ring_traced(struct trace_state *ts, uint32_t ep, const struct hbg_ring *r) {
        if (atomic_load_explicit(&ts->epoch, memory_order_acquire) != ep)
                return false;
        uint64_t session = atomic_load_explicit(&ts->session, memory_order_acquire);
        int64_t uid = atomic_load_explicit(&ts->uid, memory_order_acquire);
        if (session && r->log_fields.session != session)
                return false;
        return uid < 0 || (r->log_fields.has_uid && (int64_t)r->log_fields.uid == uid);
}

static uint16_t task_kernel(const struct task_slot *s) {
        for (unsigned lane = 0; lane < HBG_LANES; lane++)
                if ((s->lane_mask & (1u << lane)) && s->kernel[lane])
                        return s->kernel[lane]->sig->id;
        return HBG_KERNEL_NONE;
}

/* A ready time from before this trace began tells nothing (a host
 * task's stamp from an earlier lap, before the trace): 0. */
static int64_t ready_in_trace(struct trace_state *ts, int64_t ready_ns) {
        return ready_ns >= atomic_load_explicit(&ts->started_ns, memory_order_acquire) ? ready_ns : 0;
}

/* The CLOCK_MONOTONIC time of tick `then`, from a reading of both clocks
 * now: the task's stamps are ticks (ktime.h), and over the microseconds
 * to seconds back they reach the rate's error is negligible. A tick after
 * now (another core's counter a little ahead) counts as now. */
static int64_t tick_ns(const struct ktime_clock *c, uint64_t then, uint64_t now_tick, int64_t now_ns) {
        int64_t back = (int64_t)(now_tick - then);
        return back > 0 ? now_ns - (int64_t)((double)back * c->ns_per_tick) : now_ns;
}

/* The dependency edges into task id (arrows in hbgctl trace): the slot's
 * validated fanins, HBG_TRACE_RECORD_FANINS per record, after the task's
 * own record. Ring r is traced (checked by the caller). */
static void trace_fanins(struct trace_state *ts, uint32_t ep, const struct hbg_ring *r, const struct task_slot *s,
                         uint64_t id) {
        unsigned nf = s->n_fanins < HBG_MAX_FANINS ? s->n_fanins : HBG_MAX_FANINS;
        for (unsigned i = 0; i < nf; i += HBG_TRACE_RECORD_FANINS) {
                uint32_t n;
                struct hbg_trace_event *ev = record_begin(ts, ep, &n);
                if (!ev)
                        return;
                unsigned k = nf - i < HBG_TRACE_RECORD_FANINS ? nf - i : HBG_TRACE_RECORD_FANINS;
                *ev = (struct hbg_trace_event){ .session = r->log_fields.session, .id = id,
                                                .kernel = HBG_KERNEL_NONE, .kind = HBG_TRACE_FANINS,
                                                .n_fanins = (uint8_t)k };
                memcpy(ev->fanins, &s->fanins[i], k * sizeof(ev->fanins[0]));
                record_end(ep, n);
        }
}

void trace_task(struct trace_state *ts, uint32_t ep, const struct hbg_ring *r, const struct task_slot *s,
                uint64_t id, uint32_t block, uint32_t blocks, int result, uint64_t start_tick, uint64_t end_tick) {
        if (!ring_traced(ts, ep, r))
                return;
        uint32_t n;
        struct hbg_trace_event *ev = record_begin(ts, ep, &n);
        if (!ev)
                return;
        const struct ktime_clock *c = &r->engine->ktime_clock;
        uint64_t now_tick = ktime_now();
        int64_t now = clock_now_ns();
        *ev = (struct hbg_trace_event){
                .start_ns = tick_ns(c, start_tick, now_tick, now), .end_ns = tick_ns(c, end_tick, now_tick, now),
                .session = r->log_fields.session, .id = id,
                .u.task = { .ready_ns = ready_in_trace(ts, tick_ns(c, s->ready_tick, now_tick, now)),
                            .block = block, .blocks = blocks },
                .kernel = task_kernel(s), .kind = HBG_TRACE_TASK, .result = result,
        };
        record_end(ep, n);
        if (block == 0)
                trace_fanins(ts, ep, r, s, id);
}

void trace_host(struct trace_state *ts, uint32_t ep, const struct hbg_ring *r, const struct task_slot *s,
                uint64_t id, int result) {
        if (!ring_traced(ts, ep, r))
                return;
        int64_t ready = ready_in_trace(ts, s->host_ready_ns);
        if (ready == 0)
                return; /* made ready before the trace: its start is unknown */
        uint32_t n;
        struct hbg_trace_event *ev = record_begin(ts, ep, &n);
        if (!ev)
                return;
        *ev = (struct hbg_trace_event){
                .start_ns = ready, .end_ns = clock_now_ns(), .session = r->log_fields.session, .id = id,
                .u.task = { .ready_ns = ready, .block = 0, .blocks = s->block_num },
                .kernel = task_kernel(s), .kind = HBG_TRACE_HOST, .result = result,
        };
        record_end(ep, n);
}

void trace_graph(struct trace_state *ts, uint32_t ep, const struct hbg_ring *r, uint64_t number, uint64_t first,
                 uint64_t last, int result, int64_t since_ns) {
        if (!ring_traced(ts, ep, r))
                return;
        uint32_t n;
        struct hbg_trace_event *ev = record_begin(ts, ep, &n);
        if (!ev)
                return;
        int64_t now = clock_now_ns();
        *ev = (struct hbg_trace_event){
                .start_ns = since_ns && since_ns <= now ? since_ns : now, .end_ns = now,
                .session = r->log_fields.session, .id = number, .u.graph = { .first_id = first, .last_id = last },
                .kernel = HBG_KERNEL_NONE, .kind = HBG_TRACE_GRAPH, .result = result,
        };
        record_end(ep, n);
}

void trace_instant(struct trace_state *ts, uint32_t ep, enum hbg_trace_kind kind) {
        uint32_t n;
        struct hbg_trace_event *ev = record_begin(ts, ep, &n);
        if (!ev)
                return;
        int64_t now = clock_now_ns();
        *ev = (struct hbg_trace_event){ .start_ns = now, .end_ns = now, .kernel = HBG_KERNEL_NONE,
                                        .kind = (uint8_t)kind };
        record_end(ep, n);
}

/* ------------------------------------------------------------ the reader */

int engine_trace_start(struct hbg_engine *e, const struct hbg_trace_filter *f) {
        struct trace_state *ts = &e->trace;
        if (atomic_load_explicit(&ts->epoch, memory_order_relaxed))
                return -EBUSY;
        if (!ts->events) {
                /* Zero pages until a thread writes: a trace costs the
                 * memory its records use. Kept until the engine goes (a
                 * late recorder of a stopped trace may still write). */
                ts->events = calloc((size_t)ts->nbufs * ts->thread_events, sizeof(*ts->events));
                if (!ts->events)
                        return -ENOMEM;
        }
        /* Release: the stop of the previous trace (epoch 0) comes before
         * these for whoever reads them (ring_traced()). */
        atomic_store_explicit(&ts->session, f->session, memory_order_release);
        atomic_store_explicit(&ts->uid, f->uid, memory_order_release);
        atomic_store_explicit(&ts->started_ns, clock_now_ns(), memory_order_release);
        if (++ts->last_epoch == 0)
                ts->last_epoch = 1;
        /* Release: a recorder that sees this epoch (acquire, record_begin)
         * sees the events array and the filter above. */
        atomic_store_explicit(&ts->epoch, ts->last_epoch, memory_order_release);
        return 0;
}

void engine_trace_stop(struct hbg_engine *e) {
        atomic_store_explicit(&e->trace.epoch, 0, memory_order_release);
}

unsigned engine_trace_buffer_events(const struct hbg_engine *e) {
        return e->trace.thread_events;
}

int64_t engine_trace_started(const struct hbg_engine *e) {
        return atomic_load_explicit(&e->trace.started_ns, memory_order_relaxed);
}

size_t engine_trace_read(const struct hbg_engine *e, unsigned thread, uint64_t from, struct hbg_trace_event *ret,
                         size_t max, uint64_t *ret_total, uint64_t *ret_dropped) {
        const struct trace_state *ts = &e->trace;
        *ret_total = *ret_dropped = 0;
        if (thread >= ts->nbufs || !ts->events || ts->last_epoch == 0)
                return 0;
        struct trace_buf *b = &ts->bufs[thread];
        /* Acquire: the records below n are complete (record_end). */
        uint64_t h = atomic_load_explicit(&b->head, memory_order_acquire);
        if ((uint32_t)(h >> 32) != ts->last_epoch)
                return 0; /* nothing recorded by this thread in the last trace */
        uint64_t n = (uint32_t)h;
        *ret_total = n;
        *ret_dropped = atomic_load_explicit(&b->dropped, memory_order_relaxed);
        size_t k = 0;
        for (uint64_t i = from; i < n && k < max; i++)
                ret[k++] = ts->events[(size_t)thread * ts->thread_events + i];
        return k;
}

uint64_t engine_trace_unbuffered(const struct hbg_engine *e) {
        return atomic_load_explicit(&e->trace.unbuffered, memory_order_relaxed);
}
