/* SPDX-License-Identifier: MIT */
/*
 * The engine's task timeline, as its owner (hbgd's io thread) starts,
 * stops and reads it; the recorders are daemon/engine/trace.h.
 */
#pragma once

#include <stddef.h>
#include <stdint.h>

struct hbg_engine;

/*
 * The task timeline (docs/OPERATIONS.md, "Tracing"): while a trace is on,
 * each scheduler thread records what it does into a buffer of its own of
 * cfg.trace_thread_events records (full: further records are dropped and
 * counted, never waited for). Times are CLOCK_MONOTONIC in ns. One trace
 * at a time; start, stop and read from one thread (hbgd's io thread).
 */
#define HBG_TRACE_THREAD_EVENTS 65536u        /* the default buffer, in records */
#define HBG_TRACE_THREAD_EVENTS_MIN 16u
#define HBG_TRACE_THREAD_EVENTS_MAX (1u << 22) /* 224 MiB a thread */
#define HBG_TRACE_RECORD_FANINS 4u            /* fanin ids in one HBG_TRACE_FANINS record */

enum hbg_trace_kind {
        HBG_TRACE_TASK = 1,            /* blocks of a kernel task run by this thread */
        HBG_TRACE_HOST = 2,            /* a host task: made ready .. its answer read */
        HBG_TRACE_GRAPH = 3,           /* a graph: noticed .. retired */
        HBG_TRACE_PARK = 4,            /* the thread parks (an instant) */
        HBG_TRACE_WAKE = 5,            /* the thread woke (an instant) */
        HBG_TRACE_FANINS = 6,          /* fanins of task id, recorded with its block 0 */
};

struct hbg_trace_event {
        uint64_t session;              /* the ring's hbg_ring_params.log_fields.session */
        uint64_t id;                   /* task id; graph record number */
        union {
                struct {
                        int64_t start_ns;      /* instants: start == end */
                        int64_t end_ns;
                        union {
                                struct {
                                        int64_t ready_ns;      /* made ready; 0: before the trace */
                                        uint32_t block;        /* first block run */
                                        uint32_t blocks;       /* blocks run */
                                } task;
                                struct {
                                        uint64_t first_id, last_id;
                                } graph;
                        } u;
                };
                /* HBG_TRACE_FANINS: n_fanins of them, from the slot's
                 * validated copy (several records for more). */
                uint64_t fanins[HBG_TRACE_RECORD_FANINS];
        };
        uint16_t kernel;               /* task: its first active lane's kernel id */
        uint8_t kind;                  /* enum hbg_trace_kind */
        uint8_t n_fanins;              /* HBG_TRACE_FANINS: 1..HBG_TRACE_RECORD_FANINS; else 0 */
        int32_t result;                /* 0 or a negative errno */
};

_Static_assert(sizeof(struct hbg_trace_event) == 56, "a trace record is 56 bytes (docs/OPERATIONS.md, \"Tracing\")");

/* Record only rings of this session (0: any) and of this uid (-1: any);
 * parks and wake-ups are the threads' own and always recorded. */
struct hbg_trace_filter {
        uint64_t session;
        int64_t uid;
};

/* Start a trace (the previous one's records are gone). 0, -EBUSY (one is
 * on) or -ENOMEM. */
int engine_trace_start(struct hbg_engine *e, const struct hbg_trace_filter *f);
/* Stop recording. A thread in the middle of a record may still finish it:
 * a reader sees it or not, never half of it. */
void engine_trace_stop(struct hbg_engine *e);
/* Each thread's buffer, in records (cfg.trace_thread_events). */
unsigned engine_trace_buffer_events(const struct hbg_engine *e);
/* When the running (or last) trace started (CLOCK_MONOTONIC ns). */
int64_t engine_trace_started(const struct hbg_engine *e);
/* Thread `thread`'s records of the last trace from index `from`: up to
 * max copied into ret, their number returned; *ret_total: how many it
 * holds, *ret_dropped: how many did not fit. */
size_t engine_trace_read(const struct hbg_engine *e, unsigned thread, uint64_t from, struct hbg_trace_event *ret,
                         size_t max, uint64_t *ret_total, uint64_t *ret_dropped);
/* Records lost because a thread with no buffer made them (hbgd's io
 * thread retiring a closed session's graphs), since the engine started. */
uint64_t engine_trace_unbuffered(const struct hbg_engine *e);
