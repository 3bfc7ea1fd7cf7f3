/* SPDX-License-Identifier: MIT */
/*
 * hbgd's metrics (docs/OPERATIONS.md, "Metrics"): the io side's own
 * counters, and the STATUS_METRICS reply's Metrics message built from
 * them and the engine's (daemon/engine/engine.h). Structured values only;
 * hbgctl metrics writes the text.
 */
#pragma once

#include <stdint.h>
#include <sys/types.h>

#include "daemon/engine/engine.h"
#include "daemon/engine/engine_stats.h"
#include "hbg.pb-c.h"

/* Counted by the io thread (conn.c), read by status replies. */
struct hbgd_counters {
        uint64_t connections_accepted;
        uint64_t sessions_opened;
        uint64_t sessions_set_up_inline; /* of those, built on the io thread (conn.c) */
        uint64_t sessions_refused[HBG_ERRNO_SLOTS]; /* connections and session requests */
};

static inline void metrics_count_refusal(struct hbgd_counters *c, int err) {
        c->sessions_refused[errno_slot(err)]++;
}

struct hbgd;
struct metrics_reply;
struct session;
enum access_role;

/* DaemonStatus's counters (connections, accepted, sessions opened, log
 * lines dropped). */
void metrics_fill_daemon(const struct hbgd *d, Hbg__DaemonStatus *ds);
/* A session's graphs in flight from its ring's stats: records hbgd has
 * read and not retired yet. hbgd's own figures, not the client's
 * graphs_submitted: at most a graph ring per session. */
uint64_t metrics_graphs_in_flight(const struct ring_stats *st);
/* a + b, UINT64_MAX where it would wrap. */
static inline uint64_t metrics_add_sat(uint64_t a, uint64_t b) {
        return b > UINT64_MAX - a ? UINT64_MAX : a + b;
}
/* reply->metrics for a STATUS_METRICS request of a peer of uid asker and
 * role, in memory *ret owns (free it with metrics_reply_free() after
 * sending). 0 or -ENOMEM. */
int metrics_reply_new(const struct hbgd *d, uid_t asker, enum access_role role, Hbg__StatusReply *reply,
                      struct metrics_reply **ret);
/* reply->metrics with only its per-kernel figures (Metrics.kernels), for
 * STATUS_KERNELS: daemon-wide aggregates, like every metric. The same
 * ownership; 0 or -ENOMEM. */
int metrics_kernels_reply_new(const struct hbgd *d, Hbg__StatusReply *reply, struct metrics_reply **ret);
struct metrics_reply *metrics_reply_free(struct metrics_reply *m);
