/* SPDX-License-Identifier: MIT */
/* What test_e2e_metrics and test_e2e_exporter share (metrics_util.h). */
#include "tests/e2e/metrics_util.h"

#include <check.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tests/e2e/daemon_util.h"
#include "tests/e2e/e2e_util.h"

/* ------------------------------------------------------------ reading a file */

char *slurp_fd(int fd) {
        size_t cap = 4096, n = 0;
        char *buf = malloc(cap);
        ck_assert_ptr_nonnull(buf);
        ssize_t r;
        lseek(fd, 0, SEEK_SET);
        while ((r = read(fd, buf + n, cap - n - 1)) > 0) {
                n += (size_t)r;
                if (cap - n < 2) {
                        buf = realloc(buf, cap *= 2);
                        ck_assert_ptr_nonnull(buf);
                }
        }
        buf[n] = 0;
        return buf;
}

/* ------------------------------------------------------------ an OpenMetrics checker */

/*
 * Checks the text format of OpenMetrics 1.0 as far as hbgctl uses it:
 * metadata lines (TYPE first, then UNIT, then HELP; a UNIT is the name's
 * suffix), every sample belonging to the family declared last (a counter's
 * samples end in _total; an info's in _info, value 1; a gauge's are the
 * name; a histogram's _bucket with
 * an "le" label, _count and _sum), no family twice, label syntax, numbers,
 * and "# EOF" as the last line. Histograms per label set: bounds
 * increasing up to le="+Inf", buckets cumulative, +Inf equal to _count,
 * a _sum. Every sample is kept for the assertions.
 */

bool ends_with(const char *s, const char *suffix) {
        size_t a = strlen(s), b = strlen(suffix);
        return a >= b && strcmp(s + a - b, suffix) == 0;
}

static bool valid_name(const char *s) {
        if (!*s || !(s[0] == '_' || s[0] == ':' || (s[0] >= 'a' && s[0] <= 'z') || (s[0] >= 'A' && s[0] <= 'Z')))
                return false;
        for (; *s; s++)
                if (!(*s == '_' || *s == ':' || (*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') ||
                      (*s >= '0' && *s <= '9')))
                        return false;
        return true;
}

/* Parse `{a="x",b="y"}` at *p (advanced past it) into labels (the text
 * between the braces); le (if present) is copied to le[]. */
static void parse_labels(const char **p, const char *line, char *labels, size_t size, char *le, size_t le_size) {
        const char *q = *p;
        labels[0] = le[0] = 0;
        if (*q != '{')
                return;
        const char *begin = ++q;
        while (*q != '}') {
                const char *k = q;
                while (*q && *q != '=')
                        q++;
                ck_assert_msg(*q == '=' && q[1] == '"', "label without =\"...\": %s", line);
                char key[64];
                snprintf(key, sizeof(key), "%.*s", (int)(q - k), k);
                ck_assert_msg(valid_name(key) && !strchr(key, ':'), "bad label name '%s': %s", key, line);
                q += 2;
                const char *v = q;
                while (*q && *q != '"') {
                        if (*q == '\\') {
                                ck_assert_msg(q[1] == '\\' || q[1] == '"' || q[1] == 'n', "bad escape: %s", line);
                                q++;
                        }
                        q++;
                }
                ck_assert_msg(*q == '"', "unterminated label value: %s", line);
                if (strcmp(key, "le") == 0)
                        snprintf(le, le_size, "%.*s", (int)(q - v), v);
                q++;
                ck_assert_msg(*q == ',' || *q == '}', "labels: expected , or }: %s", line);
                if (*q == ',')
                        q++;
        }
        ck_assert_msg((size_t)(q - begin) < size, "labels too long: %s", line);
        snprintf(labels, size, "%.*s", (int)(q - begin), begin);
        *p = q + 1;
}

/* The labels without le="..." (a histogram's label set). */
static void without_le(const char *labels, char *out, size_t size) {
        out[0] = 0;
        char copy[160];
        snprintf(copy, sizeof(copy), "%s", labels);
        for (char *save = NULL, *tok = strtok_r(copy, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
                if (strncmp(tok, "le=", 3) == 0)
                        continue;
                size_t len = strlen(out);
                snprintf(out + len, size - len, "%s%s", len ? "," : "", tok);
        }
}

static double parse_number(const char *s, bool integer, const char *line) {
        char *end;
        ck_assert_msg(*s, "no value: %s", line);
        if (strcmp(s, "+Inf") == 0)
                return INFINITY;
        double v = strtod(s, &end);
        ck_assert_msg(*end == 0, "value is not a number: %s", line);
        if (integer)
                ck_assert_msg(!strpbrk(s, ".eE") && v >= 0, "a count that is not a non-negative integer: %s", line);
        return v;
}

struct hist_state {
        bool started;
        char labels[160];
        double last_le, last_count;
        bool inf_seen, count_seen, sum_seen;
        double inf_count;
};

static void hist_close(const char *family, struct hist_state *h) {
        if (!h->started)
                return;
        ck_assert_msg(h->inf_seen, "%s{%s}: no le=\"+Inf\" bucket", family, h->labels);
        ck_assert_msg(h->count_seen && h->sum_seen, "%s{%s}: _count or _sum missing", family, h->labels);
}

void parse_openmetrics(const char *text, struct scrape *sc) {
        memset(sc, 0, sizeof(*sc));
        ck_assert_msg(ends_with(text, "# EOF\n"), "does not end with '# EOF\\n'");
        char *copy = strdup(text);
        char family[96] = "", type[16] = "";
        bool have_unit = false, have_help = false, have_samples = false, eof = false;
        struct hist_state h = { .last_le = -INFINITY };
        for (char *save = NULL, *line = strtok_r(copy, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
                ck_assert_msg(!eof, "a line after # EOF: %s", line);
                if (line[0] == '#') {
                        if (strcmp(line, "# EOF") == 0) {
                                eof = true;
                                continue;
                        }
                        char kw[8], name[96], rest[512] = "";
                        int k = sscanf(line, "# %7s %95s %511[^\n]", kw, name, rest);
                        ck_assert_msg(k >= 2, "bad metadata line: %s", line);
                        if (strcmp(kw, "TYPE") == 0) {
                                if (strcmp(type, "histogram") == 0)
                                        hist_close(family, &h);
                                ck_assert_msg(valid_name(name), "bad family name: %s", line);
                                for (size_t i = 0; i < sc->n_families; i++)
                                        ck_assert_msg(strcmp(sc->families[i], name) != 0, "family %s twice", name);
                                ck_assert_msg(strcmp(rest, "counter") == 0 || strcmp(rest, "gauge") == 0 ||
                                                      strcmp(rest, "histogram") == 0 || strcmp(rest, "info") == 0,
                                              "type hbgctl does not use (or a bad one): %s", line);
                                ck_assert_uint_lt(sc->n_families, MAX_FAMILIES);
                                snprintf(sc->families[sc->n_families], sizeof(sc->families[0]), "%s", name);
                                snprintf(sc->types[sc->n_families++], sizeof(sc->types[0]), "%s", rest);
                                snprintf(family, sizeof(family), "%s", name);
                                snprintf(type, sizeof(type), "%s", rest);
                                have_unit = have_help = have_samples = false;
                                h = (struct hist_state){ .last_le = -INFINITY };
                                continue;
                        }
                        ck_assert_msg(strcmp(name, family) == 0 && !have_samples,
                                      "metadata for another family than the one declared last, or after "
                                      "its samples: %s",
                                      line);
                        if (strcmp(kw, "UNIT") == 0) {
                                ck_assert_msg(!have_unit && !have_help, "UNIT twice or after HELP: %s", line);
                                char suffix[64];
                                snprintf(suffix, sizeof(suffix), "_%s", rest);
                                ck_assert_msg(rest[0] && ends_with(name, suffix), "unit is not the name's suffix: %s",
                                              line);
                                have_unit = true;
                        } else if (strcmp(kw, "HELP") == 0) {
                                ck_assert_msg(!have_help, "HELP twice: %s", line);
                                ck_assert_msg(rest[0], "empty HELP: %s", line);
                                have_help = true;
                                const char *every = strstr(rest, "one run in ");
                                if (strcmp(name, "hbg_task_run_seconds") == 0) {
                                        sc->sample_every = 1;
                                        ck_assert_msg(!every || sscanf(every, "one run in %u is timed",
                                                                       &sc->sample_every) == 1,
                                                      "the task run time's help garbles the sampling: %s", line);
                                }
                        } else {
                                ck_abort_msg("unknown metadata line: %s", line);
                        }
                        continue;
                }
                /* A sample: name{labels} value */
                ck_assert_msg(family[0], "a sample before any TYPE: %s", line);
                const char *p = line;
                char name[96];
                size_t nl = strcspn(p, "{ ");
                ck_assert_msg(nl < sizeof(name), "name too long: %s", line);
                snprintf(name, sizeof(name), "%.*s", (int)nl, p);
                p += nl;
                char labels[160], le[32];
                parse_labels(&p, line, labels, sizeof(labels), le, sizeof(le));
                ck_assert_msg(*p == ' ', "no space before the value: %s", line);
                p++;
                ck_assert_msg(!strchr(p, ' '), "timestamps or exemplars are not expected: %s", line);
                have_samples = true;

                char want[128];
                bool integer = true;
                if (strcmp(type, "counter") == 0) {
                        integer = !ends_with(family, "_seconds"); /* CPU time */
                        snprintf(want, sizeof(want), "%s_total", family);
                        ck_assert_msg(strcmp(name, want) == 0, "counter %s: sample %s", family, line);
                } else if (strcmp(type, "gauge") == 0) {
                        ck_assert_msg(strcmp(name, family) == 0, "gauge %s: sample %s", family, line);
                        integer = false;
                } else if (strcmp(type, "info") == 0) {
                        snprintf(want, sizeof(want), "%s_info", family);
                        ck_assert_msg(strcmp(name, want) == 0 && strcmp(p, "1") == 0, "info %s: sample %s", family,
                                      line);
                } else {
                        char set[160];
                        without_le(labels, set, sizeof(set));
                        if (strcmp(name + strlen(family), "_bucket") == 0 && strncmp(name, family, strlen(family)) == 0) {
                                ck_assert_msg(le[0], "bucket without le: %s", line);
                                if (!h.started || strcmp(set, h.labels) != 0) {
                                        hist_close(family, &h);
                                        h = (struct hist_state){ .started = true, .last_le = -INFINITY };
                                        snprintf(h.labels, sizeof(h.labels), "%s", set);
                                }
                                ck_assert_msg(!h.inf_seen, "bucket after +Inf: %s", line);
                                double b = parse_number(le, false, line);
                                ck_assert_msg(b > h.last_le, "le not increasing: %s", line);
                                ck_assert_msg(strcmp(le, "+Inf") == 0 || strpbrk(le, ".e"),
                                              "le is not a float in canonical form: %s", line);
                                double v = parse_number(p, true, line);
                                ck_assert_msg(v >= h.last_count, "buckets not cumulative: %s", line);
                                h.last_le = b;
                                h.last_count = v;
                                if (isinf(b)) {
                                        h.inf_seen = true;
                                        h.inf_count = v;
                                }
                        } else if (ends_with(name, "_count") && strncmp(name, family, strlen(family)) == 0 &&
                                   strlen(name) == strlen(family) + 6) {
                                ck_assert_msg(h.inf_seen && strcmp(set, h.labels) == 0, "_count before its buckets: %s",
                                              line);
                                ck_assert_msg(parse_number(p, true, line) == h.inf_count, "+Inf bucket != _count: %s",
                                              line);
                                h.count_seen = true;
                        } else if (ends_with(name, "_sum") && strncmp(name, family, strlen(family)) == 0 &&
                                   strlen(name) == strlen(family) + 4) {
                                ck_assert_msg(h.count_seen && strcmp(set, h.labels) == 0, "_sum out of place: %s", line);
                                h.sum_seen = true;
                                integer = false;
                                ck_assert_msg(parse_number(p, false, line) >= 0, "negative sum: %s", line);
                        } else {
                                ck_abort_msg("histogram %s: sample %s", family, line);
                        }
                }
                ck_assert_uint_lt(sc->n, MAX_SAMPLES);
                struct sample *s = &sc->s[sc->n++];
                snprintf(s->name, sizeof(s->name), "%s", name);
                snprintf(s->labels, sizeof(s->labels), "%s", labels);
                s->value = parse_number(p, integer, line);
        }
        if (strcmp(type, "histogram") == 0)
                hist_close(family, &h);
        ck_assert_msg(eof, "no # EOF");
        free(copy);
}

/* The value of name{labels}, or -1 if there is no such sample. */
double value_of(const struct scrape *sc, const char *name, const char *labels) {
        for (size_t i = 0; i < sc->n; i++)
                if (strcmp(sc->s[i].name, name) == 0 && strcmp(sc->s[i].labels, labels) == 0)
                        return sc->s[i].value;
        return -1;
}

/* The sum over every label set of name. */
double sum_of(const struct scrape *sc, const char *name) {
        double v = 0;
        for (size_t i = 0; i < sc->n; i++)
                if (strcmp(sc->s[i].name, name) == 0)
                        v += sc->s[i].value;
        return v;
}

/* The first sample of name whose labels start with prefix; -1 if none. */
double value_with(const struct scrape *sc, const char *name, const char *prefix) {
        for (size_t i = 0; i < sc->n; i++)
                if (strcmp(sc->s[i].name, name) == 0 && strncmp(sc->s[i].labels, prefix, strlen(prefix)) == 0)
                        return sc->s[i].value;
        return -1;
}

/* How many samples name has (label sets). */
unsigned samples_of(const struct scrape *sc, const char *name) {
        unsigned n = 0;
        for (size_t i = 0; i < sc->n; i++)
                n += strcmp(sc->s[i].name, name) == 0;
        return n;
}

/* The type of family name, "" if there is no such family. */
const char *type_of(const struct scrape *sc, const char *name) {
        for (size_t i = 0; i < sc->n_families; i++)
                if (strcmp(sc->families[i], name) == 0)
                        return sc->types[i];
        return "";
}

static bool is_counter_sample(const struct scrape *sc, const struct sample *s) {
        for (size_t i = 0; i < sc->n_families; i++) {
                size_t n = strlen(sc->families[i]);
                if (strncmp(s->name, sc->families[i], n) != 0)
                        continue;
                if (strcmp(sc->types[i], "counter") == 0 && strcmp(s->name + n, "_total") == 0)
                        return true;
                if (strcmp(sc->types[i], "histogram") == 0 && s->name[n] == '_')
                        return true; /* buckets, count and sum are counters too */
        }
        return false;
}

/* Every counter of `before` is in `after`, not smaller. */
void assert_not_decreasing(const struct scrape *before, const struct scrape *after, const char *what) {
        for (size_t i = 0; i < before->n; i++) {
                const struct sample *s = &before->s[i];
                if (!is_counter_sample(before, s))
                        continue;
                double v = value_of(after, s->name, s->labels);
                ck_assert_msg(v >= s->value, "%s: %s{%s} went from %g to %g", what, s->name, s->labels, s->value, v);
        }
}

struct scrape *scrape(struct hbgd_proc *d) {
        struct result r = ctl(d->socket_path, "metrics");
        D_ASSERT(d, r.code == 0, "hbgctl metrics: exit %d: %s", r.code, r.err);
        struct scrape *sc = malloc(sizeof(*sc));
        ck_assert_ptr_nonnull(sc);
        parse_openmetrics(r.out, sc);
        result_free(&r);
        return sc;
}

/* ------------------------------------------------------------ graphs */

hbg_task fill(hbg_tensor x, float v) {
        hbg_task t = HBG_TASK_INIT("fill_f32");
        t.n_args = 1;
        t.args[0].tensor = x;
        t.args[0].dir = HBG_OUT;
        t.n_scalars = 1;
        t.scalars[0] = hbg_f32(v);
        return t;
}

hbg_task scale(hbg_tensor x, float v) {
        hbg_task t = HBG_TASK_INIT("scale_f32");
        t.n_args = 1;
        t.args[0].tensor = x;
        t.args[0].dir = HBG_INOUT;
        t.n_scalars = 1;
        t.scalars[0] = hbg_f32(v);
        return t;
}

hbg_task fail_task(int64_t code) {
        hbg_task t = HBG_TASK_INIT("fail");
        t.n_scalars = 1;
        t.scalars[0] = (uint64_t)code;
        return t;
}

/* Submit the graph built so far and wait: its result. */
int finish(struct hbgd_proc *d, hbg_client *c) {
        uint64_t g;
        int err = hbg_graph_submit(c, &g);
        D_ASSERT(d, err == 0, "submit: %s [%s]", hbg_strerror(err), hbg_last_error(c));
        return hbg_graph_wait(c, g, WAIT_MS);
}

/* n graphs of two kernel tasks each (fill, then scale): all succeed. */
void good_graphs(struct hbgd_proc *d, hbg_client *c, hbg_tensor x, unsigned n) {
        for (unsigned i = 0; i < n; i++) {
                hbg_task t[2] = { fill(x, (float)i), scale(x, 2.0f) };
                ck_assert_int_eq(hbg_graph_add_n(c, t, 2, NULL), 0);
                int err = finish(d, c);
                D_ASSERT(d, err == 0, "graph %u: %s [%s]", i, hbg_strerror(err), hbg_last_error(c));
        }
}
