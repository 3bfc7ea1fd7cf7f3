/* SPDX-License-Identifier: MIT */
/*
 * Graph replay (RUNTIME_LOGIC.md §14): hbg_graph_record_begin/end hand a
 * recording to hbgd, which validates it once and keeps it; hbg_graph_launch
 * runs it again as if its tasks were added now, for the cost of a gate
 * task and one launch record per window's worth of tasks.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "libclient/client_private.h"
#include "libclient/deps.h"
#include "libclient/errors.h"
#include "libclient/graph.h"
#include "libclient/hangup.h"
#include "libclient/host.h"
#include "libclient/recording.h"
#include "libclient/replay.h"
#include "libclient/session.h"
#include "proto/wire.h"
#include "common/grow.h"

/* hbgd validates the whole recording before it answers. */
#define RECORD_TIMEOUT_MS 60000

HBG_EXPORT int hbg_graph_record_begin(hbg_client *c) {
        int err = hbgc_usable(c, "hbg_graph_record_begin");
        if (err < 0)
                return err;
        if (c->rec)
                return hbgc_fail(c, -EBUSY, "hbg_graph_record_begin: a graph is being recorded already");
        if (hbgc_rec_begin(c) < 0)
                return hbgc_fail(c, -ENOMEM, "hbg_graph_record_begin: out of memory");
        return 0;
}

/* ---------------------------------------------------------------- record */

static int cmp_access(const void *a, const void *b) {
        const struct access *x = a, *y = b;
        return x->lo < y->lo ? -1 : x->lo > y->lo;
}

/* Every access of the recording, merged into disjoint ranges (a range is
 * written if any access to it writes, and read first if any reads it):
 * what a launch's gate collects its dependencies for. Coarser than the
 * accesses, never finer: at worst an extra dependency. */
static size_t merge_footprint(struct access *a, size_t n) {
        if (n == 0)
                return 0;
        qsort(a, n, sizeof(*a), cmp_access);
        size_t out = 0;
        for (size_t i = 1; i < n; i++) {
                if (a[i].lo <= a[out].hi) {
                        if (a[i].hi > a[out].hi)
                                a[out].hi = a[i].hi;
                        bool reads = !a[out].write || a[out].reads_first || !a[i].write || a[i].reads_first;
                        a[out].write = a[out].write || a[i].write;
                        a[out].reads_first = a[out].write && reads;
                } else {
                        a[++out] = a[i];
                }
        }
        return out + 1;
}

static int cmp_rec(const void *a, const void *b) {
        const struct dep_rec *x = a, *y = b;
        if (x->id != y->id)
                return x->id < y->id ? -1 : 1;
        return (int)y->write - (int)x->write; /* a task's write before its read */
}

/* The recording's records at its end, in task order: after a launch they
 * go into the session's records (with launch ids), as if its tasks had
 * been added one by one. */
static int last_records(const struct dep_tracker *dt, struct dep_rec **ret, size_t *ret_n) {
        size_t n = dt->unallocated.n;
        for (size_t i = 0; i < dt->n_allocs; i++)
                n += dt->allocs[i].recs.n;
        struct dep_rec *v = n ? malloc(n * sizeof(*v)) : NULL;
        if (n && !v)
                return -ENOMEM;
        size_t k = 0;
        for (size_t i = 0; i < dt->n_allocs; i++)
                for (size_t j = 0; j < dt->allocs[i].recs.n; j++)
                        v[k++] = dt->allocs[i].recs.v[j];
        for (size_t j = 0; j < dt->unallocated.n; j++)
                v[k++] = dt->unallocated.v[j];
        if (n)
                qsort(v, n, sizeof(*v), cmp_rec);
        *ret = v;
        *ret_n = n;
        return 0;
}

/* The tasks in a memfd sealed as hbgd requires (no write, grow, shrink). */
static int tasks_memfd(const struct recording *r, int *ret_fd) {
        int fd = memfd_create("hbg-recorded-graph", MFD_CLOEXEC | MFD_ALLOW_SEALING);
        if (fd < 0)
                return -errno;
        const char *p = (const char *)r->tasks;
        size_t left = r->n * sizeof(*r->tasks);
        while (left) {
                ssize_t w = write(fd, p, left);
                if (w < 0 && errno == EINTR)
                        continue;
                if (w <= 0) {
                        int err = w < 0 ? -errno : -EIO;
                        close(fd);
                        return err;
                }
                p += w;
                left -= (size_t)w;
        }
        if (fcntl(fd, F_ADD_SEALS, F_SEAL_WRITE | F_SEAL_GROW | F_SEAL_SHRINK | F_SEAL_SEAL) < 0) {
                int err = -errno;
                close(fd);
                return err;
        }
        *ret_fd = fd;
        return 0;
}

/* Send the recording; hbgd's number for it, or its refusal. */
static int send_recording(hbg_client *c, const struct recording *r, uint32_t *ret_graph) {
        int fd, err = tasks_memfd(r, &fd);
        if (err < 0)
                return hbgc_fail(c, err, "hbg_graph_record_end: cannot create the memfd for %zu tasks", r->n);
        Hbg__RecordRequest rq = HBG__RECORD_REQUEST__INIT;
        rq.tasks = r->n;
        Hbg__Envelope out = HBG__ENVELOPE__INIT;
        out.msg_case = HBG__ENVELOPE__MSG_RECORD_REQUEST;
        out.record_request = &rq;
        err = wire_send(c->sock, &out, &fd, 1, HBG_WIRE_MAX_MSG_DEFAULT);
        close(fd);
        if (err == -EPIPE || err == -ECONNRESET || err == -ENOTCONN) {
                c->dead = true;
                return hbgc_fail(c, -ECONNRESET, "hbg_graph_record_end: hbgd went away");
        }
        if (err < 0)
                return hbgc_fail(c, err == -EAGAIN ? -ECONNRESET : err,
                                 "hbg_graph_record_end: cannot send the recording to hbgd");
        Hbg__Envelope *env = NULL;
        int fds[HBG_WIRE_MAX_FDS];
        unsigned nfds = 0;
        err = hbgc_recv_env(c->sock, RECORD_TIMEOUT_MS, &env, fds, 0, &nfds);
        if (err < 0) {
                /* Even after a timeout: a late reply would be taken for the
                 * answer to the next recording. */
                c->dead = true;
                return hbgc_fail(c, err == -ETIMEDOUT ? err : -ECONNRESET,
                                 "hbg_graph_record_end: no answer from hbgd%s",
                                 err == -ETIMEDOUT ? " in time: the connection is given up" : "");
        }
        if (env->msg_case == HBG__ENVELOPE__MSG_RECORD_REPLY) {
                *ret_graph = env->record_reply->graph;
                err = 0;
        } else if (env->msg_case == HBG__ENVELOPE__MSG_ERROR) {
                err = hbgc_daemon_error(c, env->error, "recorded graph");
        } else {
                err = hbgc_fail(c, -EPROTO, "hbg_graph_record_end: unexpected answer from hbgd");
        }
        wire_free(env);
        return err;
}

static void recorded_free(struct recorded *g) {
        if (!g)
                return;
        free(g->footprint);
        free(g->last);
        free(g->host);
        free(g);
}

HBG_EXPORT int hbg_graph_record_end(hbg_client *c, uint32_t *ret_recorded) {
        int err = hbgc_usable(c, "hbg_graph_record_end");
        if (err == 0)
                err = hbgc_check_alive(c, "hbg_graph_record_end");
        if (err < 0)
                return err;
        struct recording *r = c->rec;
        if (!r)
                return hbgc_fail(c, -EINVAL, "hbg_graph_record_end: no graph is being recorded");
        if (!ret_recorded)
                return hbgc_fail(c, -EINVAL, "hbg_graph_record_end: ret_recorded is NULL");
        /* From here on the recording is over, whatever happens. */
        c->rec = NULL;
        c->dt = &c->deps;
        struct recorded *g = calloc(1, sizeof(*g));
        if (r->n == 0) {
                err = hbgc_fail(c, -EINVAL, "hbg_graph_record_end: nothing was recorded");
                goto out;
        }
        if (r->broken) {
                err = hbgc_fail(c, -ENOMEM, "hbg_graph_record_end: the recording ran out of memory");
                goto out;
        }
        if (!g || GROW(c->recorded, c->cap_recorded, c->n_recorded + 1, 8) < 0) {
                err = hbgc_fail(c, -ENOMEM, "hbg_graph_record_end: out of memory");
                goto out;
        }
        if ((err = send_recording(c, r, &g->graph)) < 0)
                goto out;
        if (last_records(&r->deps, &g->last, &g->n_last) < 0) {
                err = hbgc_fail(c, -ENOMEM, "hbg_graph_record_end: out of memory");
                goto out;
        }
        g->n = (uint32_t)r->n;
        g->n_fp = merge_footprint(r->footprint, r->n_fp);
        g->footprint = r->footprint;
        r->footprint = NULL;
        g->host = r->host;      /* in id order: tasks were appended so */
        g->n_host = r->n_host;
        r->host = NULL;
        c->recorded[c->n_recorded] = g;
        *ret_recorded = (uint32_t)c->n_recorded++;
        g = NULL;
out:
        recorded_free(g);
        hbgc_rec_free(r);
        return err;
}

void hbgc_recorded_free_all(hbg_client *c) {
        for (size_t i = 0; i < c->n_recorded; i++)
                recorded_free(c->recorded[i]);
        free(c->recorded);
        c->recorded = NULL;
        c->n_recorded = c->cap_recorded = 0;
        hbgc_rec_free(c->rec);
        c->rec = NULL;
        c->dt = &c->deps;
}

/* ---------------------------------------------------------------- launch */

/* The most ids one launch record stands for. hbgd claims a record whole,
 * with one thread, which expands it classify_batch ids per visit (§14):
 * records as long as the room in the window (up to the whole window) left
 * every other thread idle while one expanded, and replay of a wide graph
 * was slower than building it anew. As many as hbgd claims of plain tasks
 * at once (classify_batch's default), each record goes to whichever thread
 * claims it, in one visit (docs/PERFORMANCE.md). */
#define LAUNCH_RECORD_IDS 64u

/* Room for at least one task in the window (waits like hbg_graph_add). */
static int window_room(hbg_client *c, uint64_t *ret_room) {
        int err = hbgc_wait_window(c);
        *ret_room = producer_room(&c->prod);
        return err;
}

HBG_EXPORT int hbg_graph_launch(hbg_client *c, uint32_t recorded, uint64_t *ret_graph) {
        static const struct hbg_task_record gate_task = { .block_num = 1 };
        int err = hbgc_usable(c, "hbg_graph_launch");
        if (err == 0)
                err = hbgc_check_alive_cheap(c, "hbg_graph_launch");
        if (err < 0)
                return err;
        if (c->rec)
                return hbgc_fail(c, -EBUSY, "hbg_graph_launch: a graph is being recorded "
                                 "(hbg_graph_record_end() ends it)");
        if (recorded >= c->n_recorded)
                return hbgc_fail(c, -EINVAL, "hbg_graph_launch: %" PRIu32 " is not a recorded graph "
                                 "of this client (%zu recorded)", recorded, c->n_recorded);
        if (!ret_graph)
                return hbgc_fail(c, -EINVAL, "hbg_graph_launch: ret_graph is NULL");
        const struct recorded *g = c->recorded[recorded];
        if (g->n_host && hbgc_host_reserve(c) < 0)
                return hbgc_fail(c, -ENOMEM, "hbg_graph_launch: out of memory");

        /* The gate: after every earlier task whose accesses conflict with
         * the recorded graph's (the session's records, now). */
        size_t n = 0;
        if (hbgc_deps_collect(c, g->footprint, g->n_fp, &n) < 0)
                return hbgc_fail(c, -ENOMEM, "hbg_graph_launch: out of memory");
        n = hbgc_sort_unique(c->scratch.v, n);
        uint64_t gate;
        if ((err = hbgc_join_fanins(c, c->scratch.v, &n)) < 0 ||
            (err = hbgc_write_task(c, &gate_task, c->scratch.v, n, &gate)) < 0)
                return err;

        /* The tasks: a launch record per run of at most LAUNCH_RECORD_IDS
         * ids the window has room for; host functions registered before
         * their ids are published. */
        size_t h = 0;
        for (uint64_t first = 0; first < g->n;) {
                uint64_t room;
                if ((err = window_room(c, &room)) < 0)
                        return err;
                uint64_t count = g->n - first < room ? g->n - first : room;
                if (count > LAUNCH_RECORD_IDS)
                        count = LAUNCH_RECORD_IDS;
                for (; h < g->n_host && g->host[h].id <= first + count; h++)
                        hbgc_host_register(c, gate + g->host[h].id, g->host[h].fn, g->host[h].userdata);
                producer_write_launch(&c->prod, g->graph, first, count);
                first += count;
                if (hbgc_maybe_publish(c) < 0)
                        return hbgc_fail(c, -ECONNRESET, "hbg_graph_launch: hbgd went away");
        }

        /* Later tasks depend on the launched ones as if added one by one. */
        for (size_t i = 0; i < g->n_last; i++) {
                const struct dep_rec *d = &g->last[i];
                struct access a = { .lo = d->lo, .hi = d->hi, .write = d->write };
                if (hbgc_deps_commit_to(c, &c->deps, &a, 1, gate + d->id) < 0)
                        return hbgc_fail(c, -ENOMEM, "hbg_graph_launch: the graph was launched, but out of "
                                         "memory recording its tensors: later tasks may miss dependencies on it");
        }
        return hbg_graph_submit(c, ret_graph);
}
