/* SPDX-License-Identifier: MIT */
/*
 * Graph statuses: reading retired graphs back from the completion region
 * (RUNTIME_LOGIC.md §12.1), keeping the failures with their task, kernel
 * and message, answering for a graph (hbg_graph_status, hbg_graph_error).
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "libclient/client_private.h"
#include "libclient/errors.h"
#include "libclient/graph_status.h"
#include "libclient/hangup.h"
#include "libclient/session.h"
#include "libclient/workers.h"
#include "proto/wire.h"
#include "common/kernel_sig.h"
#include "common/grow.h"

/* ---------------------------------------------------------------- messages */

static uint32_t message_hash(const char *m) {
        uint32_t h = 2166136261u; /* FNV-1a */
        for (; *m; m++)
                h = (h ^ (unsigned char)*m) * 16777619u;
        return h;
}

#define MESSAGE_NOT_KEPT UINT32_MAX

/* The index of message m in the client's table, added if new. Failures
 * mostly repeat a few messages (a reason, "kernel K returned ...", a host
 * task's error), so each is kept once. A refusal's numbers make its
 * message distinct: past HBGC_MAX_MESSAGES distinct ones (the look-up's
 * bound), each further one is kept with its failure (spilled, at
 * HBGC_MAX_MESSAGES + its place), so that none is lost; MESSAGE_NOT_KEPT
 * only when out of memory. */
static uint32_t message_intern(hbg_client *c, const char *m) {
        uint32_t h = message_hash(m);
        for (size_t i = c->n_messages; i-- > 0;)
                if (c->messages[i].hash == h && strcmp(c->messages[i].text, m) == 0)
                        return (uint32_t)i;
        bool spill = c->n_messages >= HBGC_MAX_MESSAGES;
        struct message_entry **v = spill ? &c->spilled : &c->messages;
        size_t *n = spill ? &c->n_spilled : &c->n_messages, *cap = spill ? &c->cap_spilled : &c->cap_messages;
        if (*n >= MESSAGE_NOT_KEPT - HBGC_MAX_MESSAGES || GROW(*v, *cap, *n + 1, 8) < 0)
                return MESSAGE_NOT_KEPT;
        struct message_entry *e = &(*v)[*n];
        e->hash = h;
        snprintf(e->text, sizeof(e->text), "%s", m);
        return (uint32_t)((spill ? HBGC_MAX_MESSAGES : 0) + (*n)++);
}

static const char *message_text(const hbg_client *c, uint32_t i) {
        if (i == MESSAGE_NOT_KEPT)
                return "(message not kept: out of memory)";
        return i < HBGC_MAX_MESSAGES ? c->messages[i].text : c->spilled[i - HBGC_MAX_MESSAGES].text;
}

/* ---------------------------------------------------------------- host failures */

/* With workers, host failures are added by them and read back by the
 * caller's thread: under host_lock. Without, one thread does both. */
static void host_failures_lock(hbg_client *c) {
        if (c->pool.n)
                pthread_mutex_lock(&c->host_lock);
}

static void host_failures_unlock(hbg_client *c) {
        if (c->pool.n)
                pthread_mutex_unlock(&c->host_lock);
}

static int host_failed_locked(hbg_client *c, uint64_t id, int status) {
        if (GROW(c->host_failed, c->cap_host_failed, c->n_host_failed + 1, 8) < 0)
                return -ENOMEM; /* the graph then says what hbgd says */
        /* Host tasks run in id order mostly: insert from the end. */
        size_t i = c->n_host_failed;
        while (i > 0 && c->host_failed[i - 1].id > id) {
                c->host_failed[i] = c->host_failed[i - 1];
                i--;
        }
        c->host_failed[i] = (struct host_failure){ .id = id, .status = status };
        c->n_host_failed++;
        return 0;
}

int hbgc_host_failed(hbg_client *c, uint64_t id, int status) {
        host_failures_lock(c);
        int err = host_failed_locked(c, id, status);
        host_failures_unlock(c);
        return err;
}

/* The status host task id's function returned, if it failed: true and
 * *ret_status. */
static bool host_failure_find(hbg_client *c, uint64_t id, int32_t *ret_status) {
        host_failures_lock(c);
        size_t a = 0, b = c->n_host_failed;
        while (a < b) {
                size_t m = a + (b - a) / 2;
                if (c->host_failed[m].id < id)
                        a = m + 1;
                else
                        b = m;
        }
        bool found = a < c->n_host_failed && c->host_failed[a].id == id;
        if (found)
                *ret_status = c->host_failed[a].status;
        host_failures_unlock(c);
        return found;
}

bool hbgc_host_cancelled(hbg_client *c, uint64_t id) {
        if (atomic_load_explicit(&c->n_cancelled, memory_order_relaxed) == 0)
                return false;
        bool found = false;
        host_failures_lock(c);
        size_t n = atomic_load_explicit(&c->n_cancelled, memory_order_relaxed);
        for (size_t i = 0; i < n && !found; i++)
                found = c->cancelled[i].first <= id && id <= c->cancelled[i].last;
        host_failures_unlock(c);
        return found;
}

/* Graph k was cancelled: its host functions not started yet are skipped.
 * Without room to note it they run, as before a cancel. */
static void host_cancelled_add(hbg_client *c, uint64_t k) {
        const struct hbg_graph_record *rec = &c->prod.records[k & (c->g.graph_table_entries - 1)];
        host_failures_lock(c);
        size_t n = atomic_load_explicit(&c->n_cancelled, memory_order_relaxed);
        if (GROW(c->cancelled, c->cap_cancelled, n + 1, 4) == 0) {
                c->cancelled[n] = (struct id_range){ rec->first_id, rec->last_id };
                atomic_store_explicit(&c->n_cancelled, n + 1, memory_order_relaxed);
        }
        host_failures_unlock(c);
}

/* Graph k was read back: its host failures and cancel are not needed any
 * more (the record is ours and not overwritten before k is read back). */
static void host_failures_drop(hbg_client *c, uint64_t k) {
        uint64_t last = c->prod.records[k & (c->g.graph_table_entries - 1)].last_id;
        host_failures_lock(c);
        size_t n = 0;
        while (n < c->n_host_failed && c->host_failed[n].id <= last)
                n++;
        if (n > 0) {
                memmove(c->host_failed, c->host_failed + n, (c->n_host_failed - n) * sizeof(c->host_failed[0]));
                c->n_host_failed -= n;
        }
        /* Graphs are read back in order, but may be cancelled in any. */
        size_t nc = atomic_load_explicit(&c->n_cancelled, memory_order_relaxed), kept = 0;
        for (size_t i = 0; i < nc; i++)
                if (c->cancelled[i].last > last)
                        c->cancelled[kept++] = c->cancelled[i];
        if (kept != nc)
                atomic_store_explicit(&c->n_cancelled, kept, memory_order_relaxed);
        host_failures_unlock(c);
}

/* ---------------------------------------------------------------- entries */

static int32_t sane_status(int32_t st) {
        return st > 0 || st < -4095 ? -EPROTO : st;
}

/* Graph entry e (a copy), checked: what the library reports. hbgd's
 * message must end within its array and is shown with control bytes
 * replaced; a kernel id this library does not know (a newer hbgd's) is
 * passed on without a name. */
static void entry_outcome(hbg_client *c, const struct hbg_graph_entry *e, struct graph_outcome *o) {
        o->status = sane_status(e->status);
        o->task = 0;
        o->kernel = -1;
        o->message[0] = '\0';
        if (o->status == 0)
                return;
        o->task = e->first_error_task;
        if (e->reserved0) {
                o->status = -EPROTO;
                snprintf(o->message, sizeof(o->message), "hbgd's graph entry has a non-zero reserved field");
                return;
        }
        if (e->kernel != HBG_KERNEL_NONE)
                o->kernel = e->kernel;
        const char *end = memchr(e->message, '\0', sizeof(e->message));
        if (!end) {
                snprintf(o->message, sizeof(o->message), "(hbgd's message is not terminated)");
        } else {
                size_t n = (size_t)(end - e->message);
                for (size_t i = 0; i < n; i++) {
                        unsigned char ch = (unsigned char)e->message[i];
                        o->message[i] = ch < 0x20 || ch == 0x7f ? '?' : (char)ch;
                }
                o->message[n] = '\0';
        }
        /* hbgd knows only that the client reported a failure; this library
         * knows which host function returned what. */
        int32_t hst;
        if (host_failure_find(c, o->task, &hst) && hst == o->status) {
                o->kernel = -1;
                /* Its errno's name, not its words: a reader prints those
                 * beside the code (as for hbgd's "kernel NAME returned"). */
                const char *name = strerrorname_np(-hst);
                if (name)
                        snprintf(o->message, sizeof(o->message), "host task returned -%s", name);
                else
                        snprintf(o->message, sizeof(o->message), "host task returned %d", hst);
        }
}

static int failures_push(hbg_client *c, struct graph_failure f) {
        if (GROW(c->failures, c->cap_failures, c->n_failures + 1, 16) < 0)
                return -ENOMEM;
        c->failures[c->n_failures++] = f;
        return 0;
}

/* Graph entries are read back as they retire and only failures are kept
 * (graph numbers ascending), so the status of a graph the table has long
 * reused stays known, at a cost proportional to the failed graphs only
 * (32 bytes each; their messages are kept once per distinct message, and
 * past HBGC_MAX_MESSAGES of them, 132 bytes per further failure). */
void hbgc_harvest(hbg_client *c) {
        uint64_t r = atomic_load_explicit(&c->ch->graphs_retired, memory_order_acquire);
        hbgc_host_effects(c);
        if (r > c->prod.graphs)
                r = c->prod.graphs; /* never more than we submitted */
        /* Stopped short, a wait looks again soon: no byte comes for it. */
        c->harvest_stuck = false;
        while (c->harvested < r) {
                uint64_t k = c->harvested;
                struct hbg_graph_entry e;
                if (producer_graph_entry(&c->prod, k, &e) != 0) {
                        c->harvest_stuck = true;
                        break;
                }
                struct graph_outcome o;
                entry_outcome(c, &e, &o);
                if (o.status != 0 &&
                    failures_push(c, (struct graph_failure){ .graph = k, .task = o.task, .status = o.status,
                                                              .kernel = o.kernel,
                                                              .message = message_intern(c, o.message) }) < 0) {
                        c->harvest_stuck = true; /* try again later */
                        break;
                }
                if (c->pool.n || c->n_host_failed || atomic_load_explicit(&c->n_cancelled, memory_order_relaxed))
                        host_failures_drop(c, k);
                c->harvested = k + 1;
        }
}

int hbgc_graph_state(hbg_client *c, uint64_t k, struct graph_outcome *o) {
        hbgc_harvest(c);
        if (k < c->harvested) {
                size_t a = 0, b = c->n_failures;
                while (a < b) {
                        size_t m = a + (b - a) / 2;
                        if (c->failures[m].graph < k)
                                a = m + 1;
                        else
                                b = m;
                }
                *o = (struct graph_outcome){ .status = 0, .kernel = -1 };
                if (a < c->n_failures && c->failures[a].graph == k) {
                        const struct graph_failure *f = &c->failures[a];
                        o->status = f->status;
                        o->task = f->task;
                        o->kernel = f->kernel;
                        snprintf(o->message, sizeof(o->message), "%s", message_text(c, f->message));
                }
                return o->status;
        }
        /* Retired but graphs_retired not advanced yet: the entry says so. */
        struct hbg_graph_entry e;
        if (producer_graph_entry(&c->prod, k, &e) == 0) {
                hbgc_host_effects(c);
                entry_outcome(c, &e, o);
                return o->status;
        }
        o->status = 1;
        return 1;
}

/* The kernel's name for a reported id ("" none or unknown): in c's kernel
 * table, valid until hbg_disconnect(). */
static const char *kernel_name(const hbg_client *c, int id) {
        const struct hbg_kernel_sig *k =
                id > 0 && id <= UINT16_MAX ? kernel_table_by_id(&c->kernels, (uint16_t)id) : NULL;
        return k ? k->name : "";
}

int hbgc_graph_result(hbg_client *c, uint64_t k, const struct graph_outcome *o, const char *fn) {
        if (o->status < 0) {
                char kern[96] = "";
                if (o->kernel >= 0)
                        snprintf(kern, sizeof(kern), " (kernel %s)",
                                 kernel_name(c, o->kernel)[0] ? kernel_name(c, o->kernel) : "unknown to hbgd's table");
                hbgc_fail(c, o->status, "%s: graph %" PRIu64 " failed at task %" PRIu64 "%s: %s: %s", fn, k, o->task,
                          kern, hbg_strerror(o->status), o->message[0] ? o->message : "no message");
        }
        return o->status;
}

int hbgc_graph_check(hbg_client *c, uint64_t graph, const char *fn) {
        if (!c)
                return -EINVAL;
        if (hbgc_in_host(c))
                return hbgc_fail(c, -EDEADLK, "%s: called from a host function of this client", fn);
        if (graph >= c->prod.graphs)
                return hbgc_fail(c, -EINVAL, "%s: graph %" PRIu64 " has not been submitted", fn, graph);
        return 0;
}

/* Graph's outcome without waiting; -ECONNRESET when it runs and hbgd went
 * away. */
static int outcome_now(hbg_client *c, uint64_t graph, struct graph_outcome *o, const char *fn) {
        int st = hbgc_graph_state(c, graph, o);
        if (st == 1 && hbgc_check_socket(c) < 0) {
                st = hbgc_graph_state(c, graph, o);
                if (st == 1)
                        return hbgc_fail(c, -ECONNRESET, "%s: hbgd went away before graph %" PRIu64 " finished",
                                         fn, graph);
        }
        return st;
}

HBG_EXPORT int hbg_graph_status(hbg_client *c, uint64_t graph, uint64_t *ret_task) {
        int err = hbgc_graph_check(c, graph, "hbg_graph_status");
        if (err < 0)
                return err;
        struct graph_outcome o;
        int st = outcome_now(c, graph, &o, "hbg_graph_status");
        if (st < 0 && st == o.status && ret_task)
                *ret_task = o.task;
        if (st == o.status)
                hbgc_graph_result(c, graph, &o, "hbg_graph_status");
        else /* still running: a caller polling us never sleeps in the library */
                hbgc_ring_confirm(c, HBGC_CONFIRM_AGE_NS);
        return st;
}

HBG_EXPORT int hbg_graph_error(hbg_client *c, uint64_t graph, hbg_graph_error_info *ret_info) {
        int err = hbgc_graph_check(c, graph, "hbg_graph_error");
        if (err < 0)
                return err;
        /* The first version of the struct is the smallest one accepted; a
         * later library writes only the fields a caller's size covers. */
        if (!ret_info || ret_info->size < sizeof(hbg_graph_error_info))
                return hbgc_fail(c, -EINVAL, "hbg_graph_error: ret_info is NULL or its size is not set "
                                 "(HBG_GRAPH_ERROR_INFO_INIT)");
        struct graph_outcome o;
        int st = outcome_now(c, graph, &o, "hbg_graph_error");
        if (st == 1 || st != o.status) {
                /* running (a caller polling us never sleeps in the
                 * library: confirm a trusted wake), or -ECONNRESET */
                hbgc_ring_confirm(c, HBGC_CONFIRM_AGE_NS);
                return st;
        }
        ret_info->code = o.status;
        ret_info->task = o.status ? o.task : 0;
        ret_info->kernel_id = o.status ? o.kernel : -1;
        ret_info->kernel = o.status ? kernel_name(c, o.kernel) : "";
        snprintf(ret_info->message, sizeof(ret_info->message), "%s", o.message);
        return 0;
}

/* A request on the control socket, like a recording's (replay.c). */
#define CANCEL_TIMEOUT_MS 10000

HBG_EXPORT int hbg_graph_cancel(hbg_client *c, uint64_t graph) {
        int err = hbgc_graph_check(c, graph, "hbg_graph_cancel");
        if (err == 0)
                err = hbgc_check_alive(c, "hbg_graph_cancel");
        if (err < 0)
                return err;
        struct graph_outcome o;
        if (hbgc_graph_state(c, graph, &o) != 1)
                return hbgc_fail(c, -EALREADY, "hbg_graph_cancel: graph %" PRIu64 " has finished", graph);
        Hbg__CancelRequest rq = HBG__CANCEL_REQUEST__INIT;
        rq.session_id = 0; /* our own */
        rq.graph = graph;  /* our graph handles are hbgd's record numbers */
        Hbg__Envelope out = HBG__ENVELOPE__INIT;
        out.msg_case = HBG__ENVELOPE__MSG_CANCEL_REQUEST;
        out.cancel_request = &rq;
        err = wire_send(c->sock, &out, NULL, 0, HBG_WIRE_MAX_MSG_DEFAULT);
        if (err < 0) {
                c->dead = err == -EPIPE || err == -ECONNRESET || err == -ENOTCONN || err == -EAGAIN;
                return hbgc_fail(c, c->dead ? -ECONNRESET : err, "hbg_graph_cancel: cannot send the request to hbgd");
        }
        Hbg__Envelope *env = NULL;
        int fds[HBG_WIRE_MAX_FDS];
        unsigned nfds = 0;
        err = hbgc_recv_env(c->sock, CANCEL_TIMEOUT_MS, &env, fds, 0, &nfds);
        if (err < 0) {
                /* A late answer would be taken for the next request's. */
                c->dead = true;
                return hbgc_fail(c, err == -ETIMEDOUT ? err : -ECONNRESET, "hbg_graph_cancel: no answer from hbgd");
        }
        if (env->msg_case == HBG__ENVELOPE__MSG_ADMIN_REPLY) {
                err = 0;
                host_cancelled_add(c, graph);
        } else if (env->msg_case == HBG__ENVELOPE__MSG_ERROR) {
                /* hbgd: "not live" once its status is decided. */
                Hbg__Error e = *env->error;
                if (e.code == -ENOENT || e.code == -EALREADY)
                        e.code = -EALREADY;
                err = hbgc_daemon_error(c, &e, "cancel");
        } else {
                err = hbgc_fail(c, -EPROTO, "hbg_graph_cancel: unexpected answer from hbgd");
        }
        wire_free(env);
        return err;
}
