/* SPDX-License-Identifier: MIT */
/*
 * `hbgctl run --progress`: "tasks DONE/TOTAL, graphs DONE/N, SECONDS s".
 * On a terminal (stderr) the line is redrawn at most every 200 ms while
 * the graph is added and runs; elsewhere only the final line is printed.
 * Tasks done are the tasks of the session hbgd counts complete, in any
 * order (a status request on a connection of its own, by the session's
 * pid), not its watermark: one slow first task must not hide the
 * thousands done after it. The session runs only this file (and the join
 * tasks the library adds for more than 16 dependencies, rarely: the
 * count stops at the tasks added).
 */
#include <stdlib.h>
#include <unistd.h>

#include "ctl/ctl.h"
#include "common/clock.h"

#define REDRAW_NS 200000000

struct progress {
        const char *socket;
        size_t n_tasks;
        bool tty;
        bool drawn;                /* a line is on the terminal */
        int64_t start_ns, last_ns;
        unsigned calls;
        /* from hbgd, when it answered */
        bool known;
        uint64_t completed, graphs_retired;
};

struct progress *progress_new(const char *socket, size_t n_tasks) {
        struct progress *pg = calloc(1, sizeof(*pg));
        if (!pg)
                return NULL;
        pg->socket = socket;
        pg->n_tasks = n_tasks;
        pg->tty = isatty(STDERR_FILENO);
        pg->start_ns = clock_now_ns();
        return pg;
}

/* Our session's completed tasks from hbgd; quietly nothing if it does
 * not say. */
static void ask_hbgd(struct progress *pg) {
        int rc;
        ctl_errors_quiet(true);
        Hbg__Envelope *e = ctl_status(pg->socket, HBG__STATUS_KIND__STATUS_SESSIONS, &rc);
        ctl_errors_quiet(false);
        if (!e)
                return;
        const Hbg__StatusReply *r = e->status_reply;
        for (size_t i = 0; i < r->n_sessions; i++)
                if (r->sessions[i]->pid == (uint32_t)getpid()) {
                        pg->known = true;
                        pg->completed = r->sessions[i]->completed;
                        pg->graphs_retired = r->sessions[i]->graphs_retired;
                }
        wire_free(e);
}

/* Of the first `added` tasks, how many are done. */
static size_t done_of(const struct progress *pg, size_t added) {
        return pg->completed < added ? (size_t)pg->completed : added;
}

static void draw(struct progress *pg, size_t done, bool done_known, uint64_t graphs_done, bool submitted,
                 bool final) {
        double s = (double)(clock_now_ns() - pg->start_ns) / 1e9;
        char d[32];
        if (done_known)
                snprintf(d, sizeof(d), "%zu", done);
        else
                snprintf(d, sizeof(d), "?");
        fprintf(stderr, "%stasks %s/%zu, graphs %llu/%d, %.1f s%s", pg->tty ? "\r" : "", d, pg->n_tasks,
                (unsigned long long)graphs_done, submitted ? 1 : 0, s, pg->tty ? "\033[K" : "");
        if (final || !pg->tty)
                fputc('\n', stderr);
        fflush(stderr);
        pg->drawn = pg->tty && !final;
}

void progress_update(struct progress *pg, const uint64_t *ids, size_t added, bool submitted, bool force) {
        (void)ids;
        if (!pg || !pg->tty)
                return;
        /* the clock once every 64 calls: this runs once per task added */
        if (!force && (pg->calls++ & 63) != 0)
                return;
        int64_t now = clock_now_ns();
        if (!force && pg->drawn && now - pg->last_ns < REDRAW_NS)
                return;
        pg->last_ns = now;
        ask_hbgd(pg);
        draw(pg, pg->known ? done_of(pg, added) : 0, pg->known, pg->known ? pg->graphs_retired : 0, submitted,
             false);
}

void progress_end(struct progress *pg, const uint64_t *ids, size_t added, bool done) {
        (void)ids;
        if (!pg)
                return;
        if (done) {
                draw(pg, pg->n_tasks, true, 1, true, true);
        } else {
                ask_hbgd(pg);
                draw(pg, pg->known ? done_of(pg, added) : 0, pg->known, pg->known ? pg->graphs_retired : 0,
                     added == pg->n_tasks, true);
        }
        free(pg);
}
