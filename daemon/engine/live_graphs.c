/* SPDX-License-Identifier: MIT */
/*
 * The live graphs of a ring, for hbgctl graphs (RUNTIME_LOGIC.md §12.5):
 * when hbgd first saw each graph record (stamped by hbgd's io thread on
 * its housekeeping tick and before each listing, never by a scheduler
 * thread), and a copied, validated view of the records not yet retired.
 * Both calls are made by one thread, which alone touches the stamps.
 */
#include "daemon/engine/live_graphs.h"

#include <errno.h>
#include <pthread.h>
#include <string.h>

#include "daemon/engine/client_read.h"
#include "daemon/engine/failures.h"
#include "daemon/engine/ring.h"
#include "common/clock.h"
#include "daemon/engine/engine_stats.h"

/* Scanned for the failed state at most; the failure list is pruned as
 * graphs retire, so it is short unless a client never sends records. */
#define LIVE_FAILURE_SCAN 4096u
/* New records stamped per call at most (a client's cursor is hostile). */
#define NOTE_MAX 4096u
/* Completion flags read per listing at most (the io thread's time). */
#define LIVE_FLAG_SCAN 65536u

static const char *const state_names[HBG_LIVE_STATE_COUNT] = {
        [HBG_LIVE_WAITING] = "waiting",
        [HBG_LIVE_RUNNING] = "running",
        [HBG_LIVE_FAILED] = "failed",
        [HBG_LIVE_RETIRING] = "retiring",
};

const char *live_state_name(enum hbg_live_state s) {
        return (unsigned)s < HBG_LIVE_STATE_COUNT ? state_names[s] : "unknown";
}

size_t live_graphs_seen_bytes(const struct hbg_geometry *g) {
        return g->graph_table_entries * sizeof(struct graph_seen);
}

uint64_t ring_graphs_submitted(const struct hbg_ring *r) {
        return client_read_u64(r, &r->sub->graphs_submitted);
}

/*
 * Stamp the records hbgd has not seen yet with now_ms. The client's cursor
 * is hostile: one that moved back stamps nothing, one more than G ahead
 * only the last G (the retirer stops such a ring), and at most NOTE_MAX
 * per call (the rest on the next). Records retired meanwhile are skipped.
 */
bool ring_note_graphs(struct hbg_ring *r, int64_t now_ms) {
        uint64_t G = r->g.graph_table_entries;
        uint64_t retired = atomic_load_explicit(&r->cpl->graphs_retired, memory_order_acquire);
        uint64_t submitted = client_read_u64(r, &r->sub->graphs_submitted);
        uint64_t from = r->live.noted > retired ? r->live.noted : retired;
        if (submitted <= from)
                return submitted > retired;
        if (submitted - from > G)
                from = submitted - G;
        uint64_t to = submitted - from > NOTE_MAX ? from + NOTE_MAX : submitted;
        for (uint64_t k = from; k < to; k++) {
                struct graph_seen *s = &r->live.seen[k & (G - 1)];
                if (s->number_plus_1 != k + 1)
                        *s = (struct graph_seen){ .number_plus_1 = k + 1, .ms = now_ms };
        }
        r->live.noted = to;
        return true;
}

/* Mark the listed graphs that hold a pending failure (a bounded scan of
 * the failure list; graphs are contiguous and sorted by their ids). */
static void mark_failed(struct hbg_ring *r, struct hbg_live_graph *g, size_t n) {
        if (n == 0)
                return;
        pthread_mutex_lock(&r->cold_lock);
        uint32_t nf = r->fail.n < LIVE_FAILURE_SCAN ? r->fail.n : LIVE_FAILURE_SCAN;
        for (uint32_t i = 0; i < nf; i++) {
                uint64_t id = r->fail.list[i].id;
                if (id < g[0].first_id || id > g[n - 1].last_id)
                        continue;
                size_t lo = 0, hi = n;
                while (lo < hi) {
                        size_t mid = lo + (hi - lo) / 2;
                        if (g[mid].last_id < id)
                                lo = mid + 1;
                        else
                                hi = mid;
                }
                if (lo < n && g[lo].first_id <= id)
                        g[lo].state = HBG_LIVE_FAILED;
        }
        pthread_mutex_unlock(&r->cold_lock);
}

/*
 * Tasks of [first, last] complete (§12.5): those below the watermark, and
 * of the others each id whose flag holds its own stamp (§3.2). Only ids
 * below wm + F can hold one (a later id's slot still belongs to an id
 * below it), so a listing reads at most F flags of a ring, and at most
 * *budget (then the count is a lower bound). The tasks pay nothing for
 * it: their flags are written anyway. Relaxed loads: a count, nothing is
 * read through them.
 */
static uint64_t count_done(const struct hbg_flag_window *w, uint64_t wm, uint64_t first, uint64_t last,
                           uint64_t *budget) {
        uint64_t done = 0;
        if (first < wm)
                done = (wm > last ? last + 1 : wm) - first;
        uint64_t from = first > wm ? first : wm, to = last;
        if (to >= wm + w->flag_window)
                to = wm + w->flag_window - 1;
        for (uint64_t id = from; id <= to && *budget; id++, (*budget)--)
                done += atomic_load_explicit(flag_slot(w, id), memory_order_relaxed) == flag_stamp_of(w, id);
        return done;
}

/* When retirement first saw record k, 0 if not yet or if k retired
 * meanwhile (retire.h, graph_noticed_ns). The acquire load of
 * graphs_noticed makes k's time visible; a time read that is already
 * k + G's was stored (release) after graphs_retired passed k, and the
 * acquire load of it makes that visible to the load after it. */
static int64_t graph_noticed_at(struct hbg_ring *r, uint64_t k) {
        if (k >= atomic_load_explicit(&r->retirer.graphs_noticed, memory_order_acquire))
                return 0;
        int64_t ns = atomic_load_explicit(&r->retirer.graph_noticed_ns[k & (r->g.graph_table_entries - 1)],
                                          memory_order_acquire);
        return k < atomic_load_explicit(&r->cpl->graphs_retired, memory_order_relaxed) ? 0 : ns;
}

size_t ring_live_graphs(struct hbg_ring *r, struct hbg_live_graph *ret, size_t max, uint64_t *ret_live) {
        uint64_t G = r->g.graph_table_entries;
        /* Acquire: the table entries below it are final (not needed here,
         * but the records below it may be reused by the client). */
        uint64_t retired = atomic_load_explicit(&r->cpl->graphs_retired, memory_order_acquire);
        /* The client's cursor: hostile, bounded by the ring of records. */
        uint64_t submitted = client_read_u64(r, &r->sub->graphs_submitted);
        uint64_t live = submitted > retired ? submitted - retired : 0;
        if (live > G)
                live = G;
        uint64_t wm = watermark_read(&r->window);
        uint64_t claim = atomic_load_explicit(&r->claim, memory_order_relaxed);
        bool broken = atomic_load(&r->broken);
        int64_t now = clock_now_ms();
        size_t n = 0;

        ring_note_graphs(r, now);
        uint64_t prev_last = 0, budget = LIVE_FLAG_SCAN;

        for (uint64_t k = retired; k < retired + live && n < max; k++) {
                /* Copy once, then validate the copy. */
                struct hbg_graph_record rec;
                client_read(r, &r->graph_records[k & (G - 1)], &rec, sizeof(rec));
                if (rec.reserved != 0 || rec.last_id < rec.first_id || (n > 0 && rec.first_id != prev_last + 1))
                        break;  /* not a graph the retirer would take: list no further */
                prev_last = rec.last_id;
                struct hbg_live_graph *g = &ret[n++];
                *g = (struct hbg_live_graph){
                        .number = k,
                        .graph_id = rec.graph_id,
                        .first_id = rec.first_id,
                        .last_id = rec.last_id,
                        .tasks_done = count_done(&r->window, wm, rec.first_id, rec.last_id, &budget),
                        .noticed_ns = graph_noticed_at(r, k),
                        .state = broken                ? HBG_LIVE_FAILED
                                 : wm > rec.last_id    ? HBG_LIVE_RETIRING
                                 : claim > rec.first_id ? HBG_LIVE_RUNNING
                                                        : HBG_LIVE_WAITING,
                };
                const struct graph_seen *seen = &r->live.seen[k & (G - 1)];
                if (seen->number_plus_1 == k + 1 && now > seen->ms)
                        g->age_ms = (uint64_t)(now - seen->ms);
        }
        /* Records retired meanwhile may have been reused by the client:
         * keep only those still live after the copies. */
        uint64_t retired2 = atomic_load_explicit(&r->cpl->graphs_retired, memory_order_acquire);
        size_t skip = 0;
        while (skip < n && ret[skip].number < retired2)
                skip++;
        if (skip) {
                memmove(ret, ret + skip, (n - skip) * sizeof(*ret));
                n -= skip;
                live = live > retired2 - retired ? live - (retired2 - retired) : 0;
        }
        if (!broken)
                mark_failed(r, ret, n);
        *ret_live = live < n ? n : live;
        return n;
}
