/* SPDX-License-Identifier: MIT */
/*
 * `hbgctl trace`: the task timeline (docs/OPERATIONS.md, "Tracing").
 * One connection: TRACE_START for --duration, TRACE_FETCH until hbgd has
 * handed every record over (docs/PROTOCOL.md, "Tracing"), then the
 * Chrome trace-event JSON that Perfetto and chrome://tracing open:
 *   - pid hbgd's, one track (tid) per scheduler thread, named "scheduler N";
 *   - one complete slice ("X") per task run, named by its kernel, args
 *     session, graph, task, block, blocks, result, wait_us;
 *   - graphs as async slices ("b"/"e", category "graph", one track per
 *     session: "graphs (session N)") from hbgd noticing the graph, or the
 *     first moment one of its traced tasks was ready if that came first
 *     (graphs_hold_their_tasks()), to its retirement; one still in flight
 *     when the trace ended ends there, args in_flight true;
 *   - host tasks as async slices ("b"/"e", category "host", an id per
 *     task) on a track per session, "host tasks (session N)", from made
 *     ready to hbgd reading the answer (they overlap: not "X");
 *   - dependencies as flows ("s" at the end of the fanin's slice, "f" bound
 *     to the dependant's first slice, category "dep"), where both ran in
 *     the trace;
 *   - parks and wake-ups as thread instants ("i");
 *   - otherData: what was dropped, the duration, the buffers' size.
 * Times are µs from the trace's start (hbgd's CLOCK_MONOTONIC); what began
 * before it (a task run, a host task, a graph) is shown from the start,
 * args before_trace true, as a viewer drops a negative time. SIGINT or
 * SIGTERM ends the recording early (TRACE_STOP); the trace is written. With --svg
 * the same timeline is drawn as SVG (ctl/trace_svg.c).
 */
#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ctl/ctl.h"
#include "ctl/daemon_conn.h"
#include "ctl/error.h"
#include "ctl/output.h"
#include "ctl/trace.h"
#include "ctl/trace_svg.h"
#include "common/grow.h"

/* Host tasks' tracks: tid HOST_TID_BASE + session (scheduler threads are
 * 0 .. 63). */
#define HOST_TID_BASE 1000000u

static void trace_free(struct trace_data *t) {
        for (size_t i = 0; i < t->n_kernels; i++)
                free(t->kernel_names[i]);
        free(t->kernel_names);
        free(t->events);
        free(t->graphs);
        free(t->deps);
        memset(t, 0, sizeof(*t));
}

static int by_session_first(const void *a, const void *b) {
        const struct trace_event *x = a, *y = b;
        if (x->session != y->session)
                return x->session < y->session ? -1 : 1;
        if (x->first_id != y->first_id)
                return x->first_id < y->first_id ? -1 : 1;
        return (int)x->in_flight - (int)y->in_flight; /* retired first */
}

/* By session and graph number, the retired one first. */
static int by_session_graph(const void *a, const void *b) {
        const struct trace_event *x = a, *y = b;
        if (x->session != y->session)
                return x->session < y->session ? -1 : 1;
        if (x->id != y->id)
                return x->id < y->id ? -1 : 1;
        return (int)x->in_flight - (int)y->in_flight;
}

/* A graph that retired as the trace stopped is in both lists: the
 * retirement is kept. t->graphs is sorted by_session_graph() (by graph
 * number, not first task: the two copies of a record a client rewrote
 * meanwhile may differ in their tasks, never in their number). */
static void drop_retired_open(struct trace_data *t) {
        size_t k = 0;
        for (size_t i = 0; i < t->n_graphs; i++) {
                const struct trace_event *g = &t->graphs[i];
                if (g->in_flight && k > 0 && t->graphs[k - 1].session == g->session && t->graphs[k - 1].id == g->id)
                        continue;
                t->graphs[k++] = *g;
        }
        t->n_graphs = k;
}

/* The index in t->graphs of the graph holding task id of session, or -1. */
static int64_t graph_index_of(const struct trace_data *t, uint64_t session, uint64_t id) {
        size_t lo = 0, hi = t->n_graphs;
        while (lo < hi) { /* the first graph after (session, id) */
                size_t mid = (lo + hi) / 2;
                const struct trace_event *g = &t->graphs[mid];
                if (g->session < session || (g->session == session && g->first_id <= id))
                        lo = mid + 1;
                else
                        hi = mid;
        }
        if (lo == 0)
                return -1;
        const struct trace_event *g = &t->graphs[lo - 1];
        return g->session == session && id >= g->first_id && id <= g->last_id ? (int64_t)(lo - 1) : -1;
}

int64_t trace_graph_of(const struct trace_data *t, uint64_t session, uint64_t id) {
        int64_t i = graph_index_of(t, session, id);
        return i >= 0 ? (int64_t)t->graphs[i].id : -1;
}

/* hbgd knows a graph once it has seen its record, which the client
 * writes at hbg_graph_submit(), after its tasks: they may have been taken
 * in, and run, before. A graph's slice begins no later than the
 * earliest moment one of its tasks in the trace was ready (a run's start
 * less its wait; the start where the wait is not known): it holds its
 * tasks. */
static void graphs_hold_their_tasks(struct trace_data *t) {
        for (size_t i = 0; i < t->n_events; i++) {
                const struct trace_event *ev = &t->events[i];
                if (ev->kind != HBG__TRACE_KIND__TRACE_TASK && ev->kind != HBG__TRACE_KIND__TRACE_HOST)
                        continue;
                int64_t g = graph_index_of(t, ev->session, ev->id);
                if (g < 0)
                        continue;
                int64_t ready = ev->start_ns;
                if (ev->kind == HBG__TRACE_KIND__TRACE_TASK && ev->wait_ns > 0)
                        ready -= ev->wait_ns;
                if (ready < t->graphs[g].start_ns)
                        t->graphs[g].start_ns = ready;
        }
}

/* hbgd's kernel names by id, and its pid (a status request). */
static int load_kernels(const struct ctl_opts *o, struct trace_data *t, struct ctl_failure *fail) {
        Hbg__Envelope *reply = NULL;
        int err = ctl_status(o->socket, HBG__STATUS_KIND__STATUS_KERNELS, &reply, fail);
        if (err < 0)
                return err;
        const Hbg__StatusReply *r = reply->status_reply;
        t->pid = r->daemon ? r->daemon->pid : 0;
        uint32_t max = 0;
        for (size_t i = 0; i < r->n_kernels; i++)
                if (r->kernels[i]->id + 1 > max)
                        max = r->kernels[i]->id + 1;
        t->kernel_names = calloc(max ? max : 1, sizeof(*t->kernel_names));
        if (!t->kernel_names) {
                wire_free(reply);
                return ctl_error(-ENOMEM, "trace: out of memory");
        }
        t->n_kernels = max;
        for (size_t i = 0; i < r->n_kernels; i++)
                t->kernel_names[r->kernels[i]->id] = strdup(r->kernels[i]->name ? r->kernels[i]->name : "?");
        wire_free(reply);
        return 0;
}

static int add_event(struct trace_data *t, const Hbg__TraceEvent *p) {
        struct trace_event ev = {
                .kind = p->kind, .thread = p->thread, .start_ns = p->start_ns, .end_ns = p->end_ns,
                .session = p->session_id, .id = p->id, .wait_ns = p->wait_ns, .block = p->block,
                .blocks = p->blocks, .kernel = p->kernel, .result = p->result, .first_id = p->first_id,
                .last_id = p->last_id, .in_flight = p->in_flight,
        };
        struct trace_event **arr = &t->events;
        size_t *n = &t->n_events, *cap = &t->cap_events;
        if (ev.kind == HBG__TRACE_KIND__TRACE_GRAPH) {
                arr = &t->graphs;
                n = &t->n_graphs;
                cap = &t->cap_graphs;
        } else if (ev.kind == HBG__TRACE_KIND__TRACE_FANINS) {
                arr = &t->deps;
                n = &t->n_deps;
                cap = &t->cap_deps;
                ev.n_fanins = p->n_fanins < 4 ? (unsigned)p->n_fanins : 4;
                memcpy(ev.fanins, p->fanins, ev.n_fanins * sizeof(ev.fanins[0]));
        }
        if (GROW(*arr, *cap, *n + 1, 1024) < 0)
                return ctl_error(-ENOMEM, "trace: out of memory");
        (*arr)[(*n)++] = ev;
        return 0;
}

/* SIGINT or SIGTERM: end the recording early, still write the trace. */
static volatile sig_atomic_t stop_asked;

static void on_stop_signal(int sig) {
        (void)sig;
        stop_asked = 1;
}

/* Sleep ms, or less if a stop is asked (the signal interrupts poll). */
static void sleep_ms(uint64_t ms) {
        if (!stop_asked)
                poll(NULL, 0, (int)ms);
}

/* Start the trace, wait for it, fetch every record into t. */
static int take_trace(const struct ctl_opts *o, struct trace_data *t, struct ctl_failure *fail) {
        int fd = ctl_open(o->socket, NULL, fail);
        if (fd < 0)
                return fd;
        Hbg__Envelope env, *reply = NULL;
        int err = 0;
        Hbg__TraceRequest rq = HBG__TRACE_REQUEST__INIT;
        rq.action = HBG__TRACE_ACTION__TRACE_START;
        rq.session_id = o->trace_session;
        rq.duration_ms = o->trace_duration_ms;
        hbg__envelope__init(&env);
        env.msg_case = HBG__ENVELOPE__MSG_TRACE_REQUEST;
        env.trace_request = &rq;
        bool done = false;
        unsigned empty = 0; /* fetch replies in a row that brought nothing */
        while (err == 0 && !done) {
                err = ctl_roundtrip(fd, &env, -1, CTL_REPLY_TIMEOUT_MS, &reply, fail);
                if (err < 0)
                        break;
                if (reply->msg_case != HBG__ENVELOPE__MSG_TRACE_REPLY) {
                        *fail = (struct ctl_failure){ .at = CTL_AT_EXCHANGE, .err = -EPROTO };
                        err = ctl_error(-EPROTO, "unexpected reply from hbgd (message %d)", (int)reply->msg_case);
                        break;
                }
                const Hbg__TraceReply *r = reply->trace_reply;
                rq.action = stop_asked && r->running ? HBG__TRACE_ACTION__TRACE_STOP : HBG__TRACE_ACTION__TRACE_FETCH;
                if (r->running && !stop_asked) {
                        /* Ask again at the end, at least every 200 ms (a
                         * connection without a session must keep asking). */
                        sleep_ms(r->remaining_ms < 200 ? r->remaining_ms + 1 : 200);
                } else {
                        t->duration_ns = r->duration_ns;
                        t->unbuffered = r->unbuffered;
                        t->buffer_events = r->buffer_events;
                        t->n_threads = r->n_threads;
                        t->dropped = 0;
                        for (size_t i = 0; i < r->n_threads; i++)
                                t->dropped += r->threads[i]->dropped;
                        for (size_t i = 0; i < r->n_events && err == 0; i++)
                                err = add_event(t, r->events[i]);
                        done = r->done;
                        /* A reply with no record that is not the last: the
                         * threads' table fills hbgd's message size. Twice
                         * in a row would be forever. */
                        empty = r->n_events || done || r->running ? 0 : empty + 1;
                        if (empty == 2 && err == 0) {
                                *fail = (struct ctl_failure){ .at = CTL_AT_EXCHANGE, .err = -EMSGSIZE };
                                err = ctl_error(-EMSGSIZE, "hbgd's replies have no room for the trace's records "
                                                           "([limits] max_message_size is too small for %zu threads)",
                                                r->n_threads);
                        }
                }
                wire_free(reply);
                reply = NULL;
        }
        wire_free(reply);
        close(fd);
        if (err < 0 && fail->err == 0)
                *fail = (struct ctl_failure){ .at = CTL_AT_EXCHANGE, .err = err };
        if (err == 0 && t->n_graphs) {
                qsort(t->graphs, t->n_graphs, sizeof(*t->graphs), by_session_graph);
                drop_retired_open(t);
                qsort(t->graphs, t->n_graphs, sizeof(*t->graphs), by_session_first);
                graphs_hold_their_tasks(t);
        }
        return err;
}

/* ------------------------------------------------------------ Chrome JSON */

/* µs with ns precision, printed as such (not with a double's 17 digits). */
static json_object *jnum(double v) {
        char text[40];
        snprintf(text, sizeof(text), "%.3f", v);
        return json_object_new_double_s(v, text);
}

static json_object *meta(const char *what, uint32_t pid, uint64_t tid, const char *name) {
        json_object *e = json_object_new_object();
        json_object_object_add(e, "ph", json_object_new_string("M"));
        json_object_object_add(e, "name", json_object_new_string(what));
        json_object_object_add(e, "pid", json_object_new_int64(pid));
        json_object_object_add(e, "tid", json_object_new_int64((int64_t)tid));
        json_object *a = json_object_new_object();
        json_object_object_add(a, "name", json_object_new_string(name));
        json_object_object_add(e, "args", a);
        return e;
}

/* A time as shown: from the trace's start, never before it. Perfetto
 * drops an event of negative time (and a slice's end then has no begin),
 * so what began before the trace is shown from its start. */
static int64_t shown_ns(int64_t ns) {
        return ns > 0 ? ns : 0;
}

static json_object *slice(const char *ph, const char *name, const char *cat, uint32_t pid, uint64_t tid,
                          int64_t ts_ns) {
        json_object *e = json_object_new_object();
        json_object_object_add(e, "ph", json_object_new_string(ph));
        json_object_object_add(e, "name", json_object_new_string(name));
        json_object_object_add(e, "cat", json_object_new_string(cat));
        json_object_object_add(e, "pid", json_object_new_int64(pid));
        json_object_object_add(e, "tid", json_object_new_int64((int64_t)tid));
        json_object_object_add(e, "ts", jnum((double)shown_ns(ts_ns) / 1000.0));
        return e;
}

static json_object *task_args(const struct trace_data *t, const struct trace_event *ev) {
        json_object *a = json_object_new_object();
        int64_t graph = trace_graph_of(t, ev->session, ev->id);
        json_object_object_add(a, "session", json_object_new_int64((int64_t)ev->session));
        json_object_object_add(a, "graph", graph >= 0 ? json_object_new_int64(graph) : NULL);
        json_object_object_add(a, "task", json_object_new_int64((int64_t)ev->id));
        json_object_object_add(a, "block", json_object_new_int64(ev->block));
        json_object_object_add(a, "blocks", json_object_new_int64(ev->blocks));
        json_object_object_add(a, "result", json_object_new_int(ev->result));
        json_object_object_add(a, "wait_us", ev->wait_ns >= 0 ? jnum((double)ev->wait_ns / 1000.0) : NULL);
        if (ev->start_ns < 0)
                json_object_object_add(a, "before_trace", json_object_new_boolean(true));
        return a;
}

/* An async slice ("b" then "e") on session's track `track`. */
static void add_async(json_object *arr, const struct trace_data *t, const char *cat, const char *track,
                      const char *id, uint64_t session, int64_t start_ns, int64_t end_ns, json_object *args) {
        for (int end = 0; end < 2; end++) {
                json_object *e = slice(end ? "e" : "b", track, cat, t->pid, HOST_TID_BASE + session,
                                       end ? end_ns : start_ns);
                json_object_object_add(e, "id", json_object_new_string(id));
                if (!end)
                        json_object_object_add(e, "args", args);
                json_object_array_add(arr, e);
        }
}

/* Perfetto puts async slices of one name on one track (several where they
 * overlap): the name says the track. */
static void add_graph(json_object *arr, const struct trace_data *t, const struct trace_event *g) {
        char track[64], id[48];
        snprintf(track, sizeof(track), "graphs (session %" PRIu64 ")", g->session);
        snprintf(id, sizeof(id), "s%" PRIu64 "g%" PRIu64, g->session, g->id);
        json_object *a = json_object_new_object();
        json_object_object_add(a, "session", json_object_new_int64((int64_t)g->session));
        json_object_object_add(a, "graph", json_object_new_int64((int64_t)g->id));
        json_object_object_add(a, "first_task", json_object_new_int64((int64_t)g->first_id));
        json_object_object_add(a, "last_task", json_object_new_int64((int64_t)g->last_id));
        json_object_object_add(a, "in_flight", json_object_new_boolean(g->in_flight));
        json_object_object_add(a, "result", g->in_flight ? NULL : json_object_new_int(g->result));
        if (g->start_ns < 0)
                json_object_object_add(a, "before_trace", json_object_new_boolean(true));
        add_async(arr, t, "graph", track, id, g->session, g->start_ns, g->end_ns, a);
}

static void add_host(json_object *arr, const struct trace_data *t, const struct trace_event *ev) {
        char track[64], id[48];
        snprintf(track, sizeof(track), "host tasks (session %" PRIu64 ")", ev->session);
        snprintf(id, sizeof(id), "s%" PRIu64 "h%" PRIu64, ev->session, ev->id);
        add_async(arr, t, "host", track, id, ev->session, ev->start_ns, ev->end_ns, task_args(t, ev));
}

/* ------------------------------------------------------------ flows */

static int by_task(const void *a, const void *b) {
        const struct trace_event *x = *(const struct trace_event *const *)a, *y = *(const struct trace_event *const *)b;
        if (x->session != y->session)
                return x->session < y->session ? -1 : 1;
        if (x->id != y->id)
                return x->id < y->id ? -1 : 1;
        return x->block < y->block ? -1 : x->block > y->block;
}

/* The kernel task slices of (session, id) in the sorted index: [*ret_lo, return). */
static size_t task_slices(const struct trace_event **idx, size_t n, uint64_t session, uint64_t id, size_t *ret_lo) {
        size_t lo = 0, hi = n;
        while (lo < hi) {
                size_t mid = (lo + hi) / 2;
                if (idx[mid]->session < session || (idx[mid]->session == session && idx[mid]->id < id))
                        lo = mid + 1;
                else
                        hi = mid;
        }
        *ret_lo = lo;
        while (hi < n && idx[hi]->session == session && idx[hi]->id == id)
                hi++;
        return hi < lo ? lo : hi;
}

static json_object *flow(const char *ph, const struct trace_data *t, const struct trace_event *at, int64_t ts,
                         uint64_t n, uint64_t from, uint64_t to) {
        json_object *e = slice(ph, "dep", "dep", t->pid, at->thread, ts);
        json_object_object_add(e, "id", json_object_new_int64((int64_t)n));
        if (ph[0] == 'f')
                json_object_object_add(e, "bp", json_object_new_string("e"));
        json_object *a = json_object_new_object();
        json_object_object_add(a, "from_task", json_object_new_int64((int64_t)from));
        json_object_object_add(a, "to_task", json_object_new_int64((int64_t)to));
        json_object_object_add(e, "args", a);
        return e;
}

/* An arrow per dependency whose two tasks both have a slice: from the end
 * of the fanin's last-ending slice to the start of the dependant's block
 * 0, each 1 ns inside its slice (a viewer binds a flow to the slice that
 * encloses it). Host tasks and tasks with nothing to run have no slice. */
static void add_flows(json_object *arr, const struct trace_data *t) {
        const struct trace_event **idx = calloc(t->n_events + 1, sizeof(*idx));
        if (!idx)
                return;
        size_t n = 0;
        for (size_t i = 0; i < t->n_events; i++)
                if (t->events[i].kind == HBG__TRACE_KIND__TRACE_TASK)
                        idx[n++] = &t->events[i];
        qsort(idx, n, sizeof(*idx), by_task);
        uint64_t flows = 0;
        for (size_t d = 0; d < t->n_deps; d++) {
                const struct trace_event *dep = &t->deps[d], *to = NULL;
                size_t lo, hi = task_slices(idx, n, dep->session, dep->id, &lo);
                if (lo < hi && idx[lo]->block == 0)
                        to = idx[lo];
                for (unsigned k = 0; to && k < dep->n_fanins; k++) {
                        const struct trace_event *from = NULL;
                        size_t flo, fhi = task_slices(idx, n, dep->session, dep->fanins[k], &flo);
                        for (size_t i = flo; i < fhi; i++)
                                if (!from || idx[i]->end_ns > from->end_ns)
                                        from = idx[i];
                        if (!from)
                                continue;
                        int64_t s_ts = from->end_ns - (from->end_ns > from->start_ns);
                        int64_t f_ts = shown_ns(to->start_ns) + (to->end_ns > shown_ns(to->start_ns));
                        flows++;
                        json_object_array_add(arr, flow("s", t, from, s_ts, flows, from->id, to->id));
                        json_object_array_add(arr, flow("f", t, to, f_ts, flows, from->id, to->id));
                }
        }
        free(idx);
}

static bool seen_session(const uint64_t *s, size_t n, uint64_t v) {
        for (size_t i = 0; i < n; i++)
                if (s[i] == v)
                        return true;
        return false;
}

json_object *trace_chrome_json(const struct trace_data *t) {
        json_object *root = json_object_new_object();
        json_object *arr = json_object_new_array();
        json_object_array_add(arr, meta("process_name", t->pid, 0, "hbgd"));
        for (uint32_t i = 0; i < t->n_threads; i++) {
                char name[32];
                snprintf(name, sizeof(name), "scheduler %u", i);
                json_object_array_add(arr, meta("thread_name", t->pid, i, name));
        }
        /* A named track per session with host tasks or graphs (their
         * async slices are drawn by it). */
        uint64_t *sessions = calloc(t->n_events + t->n_graphs + 1, sizeof(*sessions));
        size_t n_sessions = 0;
        for (size_t i = 0; sessions && i < t->n_events + t->n_graphs; i++) {
                const struct trace_event *ev = i < t->n_events ? &t->events[i] : &t->graphs[i - t->n_events];
                if ((ev->kind == HBG__TRACE_KIND__TRACE_HOST || ev->kind == HBG__TRACE_KIND__TRACE_GRAPH) &&
                    !seen_session(sessions, n_sessions, ev->session)) {
                        char name[48];
                        snprintf(name, sizeof(name), "session %" PRIu64, ev->session);
                        json_object_array_add(arr, meta("thread_name", t->pid, HOST_TID_BASE + ev->session, name));
                        sessions[n_sessions++] = ev->session;
                }
        }
        free(sessions);
        for (size_t i = 0; i < t->n_events; i++) {
                const struct trace_event *ev = &t->events[i];
                json_object *e;
                switch (ev->kind) {
                case HBG__TRACE_KIND__TRACE_TASK:
                        e = slice("X", trace_kernel_name(t, ev->kernel), "task", t->pid, ev->thread, ev->start_ns);
                        json_object_object_add(e, "dur", jnum((double)(ev->end_ns - shown_ns(ev->start_ns)) / 1000.0));
                        json_object_object_add(e, "args", task_args(t, ev));
                        break;
                case HBG__TRACE_KIND__TRACE_HOST:
                        add_host(arr, t, ev);
                        continue;
                case HBG__TRACE_KIND__TRACE_PARK:
                case HBG__TRACE_KIND__TRACE_WAKE:
                        e = slice("i", ev->kind == HBG__TRACE_KIND__TRACE_PARK ? "park" : "wake", "thread", t->pid,
                                  ev->thread, ev->start_ns);
                        json_object_object_add(e, "s", json_object_new_string("t"));
                        break;
                default:
                        continue;
                }
                json_object_array_add(arr, e);
        }
        for (size_t i = 0; i < t->n_graphs; i++)
                add_graph(arr, t, &t->graphs[i]);
        add_flows(arr, t);
        json_object_object_add(root, "traceEvents", arr);
        json_object_object_add(root, "displayTimeUnit", json_object_new_string("ms"));
        json_object *other = json_object_new_object();
        json_object_object_add(other, "source", json_object_new_string("hbgctl trace " HBG_VERSION));
        json_object_object_add(other, "clock", json_object_new_string("CLOCK_MONOTONIC of hbgd's host, from the trace's start"));
        json_object_object_add(other, "duration_us", jnum((double)t->duration_ns / 1000.0));
        json_object_object_add(other, "threads", json_object_new_int64(t->n_threads));
        json_object_object_add(other, "buffer_events", json_object_new_int64(t->buffer_events));
        json_object_object_add(other, "dropped", json_object_new_int64((int64_t)t->dropped));
        json_object_object_add(other, "unbuffered", json_object_new_int64((int64_t)t->unbuffered));
        json_object_object_add(root, "otherData", other);
        return root;
}

static int write_file(const char *path, const char *text, size_t len) {
        FILE *f = path && strcmp(path, "-") != 0 ? fopen(path, "we") : stdout;
        if (!f) {
                int err = -errno;
                return ctl_error(err, "trace: cannot write %s: %s", path, strerror(-err));
        }
        bool ok = fwrite(text, 1, len, f) == len;
        ok = (f == stdout ? fflush(f) == 0 : fclose(f) == 0) && ok;
        if (!ok)
                return ctl_error(-EIO, "trace: cannot write %s", path ? path : "stdout");
        return 0;
}

int cmd_trace(const struct ctl_opts *o) {
        struct trace_data t = { 0 };
        struct ctl_failure fail = { 0 };
        struct sigaction sa = { .sa_handler = on_stop_signal }; /* no SA_RESTART: poll returns */
        sigemptyset(&sa.sa_mask);
        sigaction(SIGINT, &sa, NULL);
        sigaction(SIGTERM, &sa, NULL);
        if (load_kernels(o, &t, &fail) < 0 || take_trace(o, &t, &fail) < 0) {
                trace_free(&t);
                return fail.err ? ctl_exit_status(&fail) : EXIT_FAIL;
        }
        if (t.dropped || t.unbuffered)
                fprintf(stderr, "hbgctl: trace: %" PRIu64 " events dropped (a thread's buffer of %u events was "
                                "full: trace for less time)%s\n",
                        t.dropped + t.unbuffered, t.buffer_events,
                        t.unbuffered ? ", some recorded outside the scheduler threads" : "");
        int rc = 0;
        if (o->trace_svg) {
                size_t len;
                char *svg = trace_svg(&t, &len);
                if (!svg)
                        rc = ctl_error(-ENOMEM, "trace: out of memory");
                else
                        rc = write_file(o->trace_svg, svg, len);
                free(svg);
        }
        if (rc == 0 && (opt_output || !o->trace_svg)) {
                json_object *j = trace_chrome_json(&t);
                size_t len;
                const char *text = json_object_to_json_string_length(j, JSON_C_TO_STRING_PLAIN, &len);
                rc = write_file(opt_output, text, len);
                if (rc == 0 && (!opt_output || strcmp(opt_output, "-") == 0))
                        putchar('\n');
                json_object_put(j);
        }
        trace_free(&t);
        return rc < 0 ? EXIT_FAIL : 0;
}
