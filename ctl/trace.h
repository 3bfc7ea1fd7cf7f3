/* SPDX-License-Identifier: MIT */
/* `hbgctl trace` (ctl/trace.c): the records hbgd sent, and the two ways
 * they are written: Chrome trace-event JSON (trace.c) and SVG
 * (trace_svg.c, its own header trace_svg.h). */
#pragma once

#include <json-c/json.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* One record as hbgd sent it (hbg.proto TraceEvent); times in ns from the
 * trace's start. */
struct trace_event {
        int kind;                       /* Hbg__TraceKind */
        uint32_t thread;
        int64_t start_ns, end_ns;
        uint64_t session, id;
        int64_t wait_ns;                /* -1: unknown */
        uint32_t block, blocks, kernel;
        int32_t result;
        uint64_t first_id, last_id;     /* graphs */
        bool in_flight;                 /* graphs: not retired at the trace's end */
        uint64_t fanins[4];             /* fanin records: n_fanins of them */
        unsigned n_fanins;
};

struct trace_data {
        uint32_t pid;                   /* hbgd's */
        char **kernel_names;            /* by kernel id; NULL: no such kernel */
        size_t n_kernels;
        struct trace_event *events;     /* tasks, host tasks, parks, wake-ups: thread by thread */
        size_t n_events, cap_events;
        struct trace_event *graphs;     /* sorted by session, then first task */
        size_t n_graphs, cap_graphs;
        struct trace_event *deps;       /* fanin records (TRACE_FANINS) */
        size_t n_deps, cap_deps;
        uint32_t n_threads;
        uint64_t duration_ns;
        uint64_t dropped, unbuffered;
        uint32_t buffer_events;
};

/* The kernel's name ("task" if hbgd did not list it). */
static inline const char *trace_kernel_name(const struct trace_data *t, uint32_t id) {
        return id < t->n_kernels && t->kernel_names[id] ? t->kernel_names[id] : "task";
}
/* The graph number of task `id` of `session`, -1 if no graph of the
 * trace (retired, or in flight at its end) holds it. */
int64_t trace_graph_of(const struct trace_data *t, uint64_t session, uint64_t id);
json_object *trace_chrome_json(const struct trace_data *t);

struct ctl_opts;
/* `hbgctl trace`: the task timeline as Chrome trace-event JSON (and SVG). */
int cmd_trace(const struct ctl_opts *o);
