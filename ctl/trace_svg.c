/* SPDX-License-Identifier: MIT */
/*
 * `hbgctl trace --svg FILE`: the timeline drawn without a browser. One
 * row per scheduler thread (and one per session with host tasks), a box
 * per task run coloured by its kernel (class "task", its details in a
 * <title> tooltip), parks as short grey ticks; what is not a box is idle
 * time. A time axis in ms below, the kernels' colours as a legend.
 */
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ctl/trace_svg.h"
#include "ctl/trace.h"
#include "proto/wire.h"
#include "common/grow.h"

#define K_TASK HBG__TRACE_KIND__TRACE_TASK
#define K_HOST HBG__TRACE_KIND__TRACE_HOST
#define K_PARK HBG__TRACE_KIND__TRACE_PARK
/* Kernel ids are 16 bits (hbg.proto KernelInfo.id). */
#define KERNEL_IDS 65536u

#define SVG_WIDTH 1200.0
#define LABEL_W 150.0
#define ROW_H 22.0
#define TOP 30.0

struct svg {
        char *buf;
        size_t len, cap;
        bool oom;
};

static void out(struct svg *s, const char *fmt, ...) {
        va_list ap;
        for (;;) {
                if (s->oom)
                        return;
                size_t room = s->cap - s->len;
                va_start(ap, fmt);
                int n = vsnprintf(s->buf ? s->buf + s->len : NULL, s->buf ? room : 0, fmt, ap);
                va_end(ap);
                if (n < 0) {
                        s->oom = true;
                        return;
                }
                if (s->buf && (size_t)n < room) {
                        s->len += (size_t)n;
                        return;
                }
                if (GROW(s->buf, s->cap, s->len + (size_t)n + 1, 65536) < 0) {
                        s->oom = true;
                        return;
                }
        }
}

/* Text for XML: markup characters escaped, control characters dropped. */
static void out_text(struct svg *s, const char *text) {
        for (const char *p = text; *p; p++) {
                switch (*p) {
                case '&': out(s, "&amp;"); break;
                case '<': out(s, "&lt;"); break;
                case '>': out(s, "&gt;"); break;
                case '"': out(s, "&quot;"); break;
                case '\'': out(s, "&apos;"); break;
                default:
                        if ((unsigned char)*p >= 0x20)
                                out(s, "%c", *p);
                }
        }
}

static unsigned kernel_hue(uint32_t kernel) {
        return (kernel * 137u + 20u) % 360u;
}

/* The row of a session's host tasks: after the threads, in order of
 * first appearance. */
static size_t host_row(uint64_t *sessions, size_t *n, uint64_t session) {
        for (size_t i = 0; i < *n; i++)
                if (sessions[i] == session)
                        return i;
        sessions[*n] = session;
        return (*n)++;
}

/* A step of 1, 2 or 5 times a power of ten giving about 10 ticks. */
static double tick_step(double span_ms) {
        double step = 1e-3;
        while (span_ms / step > 10) {
                if (span_ms / (step * 2) <= 10)
                        return step * 2;
                if (span_ms / (step * 5) <= 10)
                        return step * 5;
                step *= 10;
        }
        return step;
}

/* Event ev in row `row`: a park as a tick, a task as a box with its
 * details in a tooltip. */
static void draw_event(struct svg *s, const struct trace_data *t, const struct trace_event *ev, size_t row,
                       double span, double plot_w) {
        /* What began before the trace is drawn from its start. */
        int64_t start = ev->start_ns > 0 ? ev->start_ns : 0;
        double x = LABEL_W + (double)start / span * plot_w;
        double y = TOP + (double)row * ROW_H;
        if (ev->kind == K_PARK) {
                out(s, "<line class=\"park\" x1=\"%.2f\" x2=\"%.2f\" y1=\"%.1f\" y2=\"%.1f\" stroke=\"#888\"/>\n",
                    x, x, y + ROW_H - 6, y + ROW_H - 2);
                return;
        }
        double w = (double)(ev->end_ns - start) / span * plot_w;
        if (w < 0.5)
                w = 0.5;
        bool host = ev->kind == K_HOST;
        out(s, "<rect class=\"task\" x=\"%.2f\" y=\"%.1f\" width=\"%.2f\" height=\"%.1f\" fill=\"hsl(%u,65%%,%s)\">"
               "<title>", x, y + 3, w, ROW_H - 6, host ? 0u : kernel_hue(ev->kernel), host ? "40%" : "55%");
        out_text(s, host ? "host task" : trace_kernel_name(t, ev->kernel));
        out(s, ": session %" PRIu64 " task %" PRIu64 ", %.1f us", ev->session, ev->id,
            (double)(ev->end_ns - ev->start_ns) / 1000.0);
        if (ev->wait_ns >= 0)
                out(s, ", waited %.1f us", (double)ev->wait_ns / 1000.0);
        if (ev->result)
                out(s, ", result %d", ev->result);
        out(s, "</title></rect>\n");
}

/* The time axis. */
static void draw_axis(struct svg *s, double span, double plot_w, double axis_y) {
        out(s, "<line x1=\"%.1f\" x2=\"%.1f\" y1=\"%.1f\" y2=\"%.1f\" stroke=\"black\"/>\n", LABEL_W, LABEL_W + plot_w,
            axis_y, axis_y);
        double span_ms = span / 1e6, step = tick_step(span_ms);
        for (double ms = 0; ms <= span_ms + step / 2; ms += step) {
                double x = LABEL_W + ms / span_ms * plot_w;
                out(s, "<line x1=\"%.1f\" x2=\"%.1f\" y1=\"%.1f\" y2=\"%.1f\" stroke=\"black\"/>"
                       "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">%g ms</text>\n",
                    x, x, axis_y, axis_y + 4, x, axis_y + 16, ms);
        }
}

/* The legend: kernels by colour, those `used` by a task. */
static void draw_legend(struct svg *s, const struct trace_data *t, const bool *used, double axis_y) {
        unsigned k_at = 0;
        for (unsigned k = 0; k < KERNEL_IDS; k++) {
                if (!used[k])
                        continue;
                double x = LABEL_W + (double)(k_at % 4) * 250, y = axis_y + 30 + (double)(k_at / 4) * 18;
                out(s, "<rect x=\"%.1f\" y=\"%.1f\" width=\"12\" height=\"12\" fill=\"hsl(%u,65%%,55%%)\"/>"
                       "<text x=\"%.1f\" y=\"%.1f\">", x, y, kernel_hue(k), x + 16, y + 10);
                out_text(s, trace_kernel_name(t, k));
                out(s, "</text>\n");
                k_at++;
        }
}

char *trace_svg(const struct trace_data *t, size_t *ret_len) {
        struct svg s = { 0 };
        uint64_t *sessions = calloc(t->n_events + 1, sizeof(*sessions));
        if (!sessions)
                return NULL;
        size_t n_host = 0;
        int64_t t_end = (int64_t)t->duration_ns;
        for (size_t i = 0; i < t->n_events; i++) {
                if (t->events[i].kind == K_HOST)
                        host_row(sessions, &n_host, t->events[i].session);
                if (t->events[i].end_ns > t_end)
                        t_end = t->events[i].end_ns;
        }
        double span = t_end > 0 ? (double)t_end : 1.0;
        double plot_w = SVG_WIDTH - LABEL_W - 20;
        size_t rows = t->n_threads + n_host;
        double axis_y = TOP + (double)rows * ROW_H + 10;
        bool *used = calloc(KERNEL_IDS, sizeof(*used));
        if (!used) {
                free(sessions);
                return NULL;
        }
        for (size_t i = 0; i < t->n_events; i++)
                if (t->events[i].kind == K_TASK && t->events[i].kernel < KERNEL_IDS)
                        used[t->events[i].kernel] = true;
        unsigned n_legend = 0;
        for (unsigned k = 0; k < KERNEL_IDS; k++)
                n_legend += used[k];
        double height = axis_y + 40 + (n_legend + 3) / 4 * 18.0 + 10;

        out(&s, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
                "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" height=\"%.0f\" "
                "font-family=\"sans-serif\" font-size=\"11\">\n", SVG_WIDTH, height);
        out(&s, "<title>hbgd task timeline: %" PRIu64 " us, %u threads, %" PRIu64 " events dropped</title>\n",
            t->duration_ns / 1000, t->n_threads, t->dropped + t->unbuffered);
        out(&s, "<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n");
        out(&s, "<text x=\"10\" y=\"18\" font-size=\"13\">hbgd task timeline (idle: the grey rows' gaps)</text>\n");
        for (size_t r = 0; r < rows; r++) {
                double y = TOP + (double)r * ROW_H;
                out(&s, "<rect class=\"row\" x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"#eee\"/>\n",
                    LABEL_W, y + 2, plot_w, ROW_H - 4);
                if (r < t->n_threads)
                        out(&s, "<text x=\"10\" y=\"%.1f\">scheduler %zu</text>\n", y + ROW_H / 2 + 4, r);
                else
                        out(&s, "<text x=\"10\" y=\"%.1f\">session %" PRIu64 " host tasks</text>\n", y + ROW_H / 2 + 4,
                            sessions[r - t->n_threads]);
        }
        for (size_t i = 0; i < t->n_events; i++) {
                const struct trace_event *ev = &t->events[i];
                size_t row;
                if (ev->kind == K_TASK || ev->kind == K_PARK)
                        row = ev->thread;
                else if (ev->kind == K_HOST)
                        row = t->n_threads + host_row(sessions, &n_host, ev->session);
                else
                        continue;
                if (row >= rows)
                        continue;
                draw_event(&s, t, ev, row, span, plot_w);
        }
        draw_axis(&s, span, plot_w, axis_y);
        draw_legend(&s, t, used, axis_y);
        out(&s, "</svg>\n");
        free(sessions);
        free(used);
        if (s.oom) {
                free(s.buf);
                return NULL;
        }
        *ret_len = s.len;
        return s.buf;
}
