/* SPDX-License-Identifier: MIT */
/*
 * `hbgctl metrics` against a real hbgd (docs/OPERATIONS.md, "Metrics"):
 *   counts     graphs that succeed, one failing in a kernel (EIO), one
 *              failing validation (ERANGE) and a refused session (E2BIG);
 *              the text is checked as OpenMetrics by the checker below, the
 *              counts against what the test ran, exactly; more graphs, a
 *              second scrape (no counter went down, the graph counts went up
 *              by what ran), the session closed, a third one;
 *              hbgd's process, memory charged per uid and graphs in flight
 *              (a graph held by its host task) in the same scrapes;
 *   kernels    per-kernel figures, every task timed: 100 add_f32 tasks
 *              and 7 failing `fail` tasks, counted exactly per kernel in
 *              hbg_kernel_tasks/failures, both histograms' counts equal
 *              to the tasks run, the kernels' tasks adding up to the tasks
 *              executed; the same in `hbgctl kernels --json`.
 *   output     --output FILE replaces FILE atomically (a reader holding
 *              the old file keeps it whole; mode 0644; no temporary file
 *              left), fails cleanly where it cannot write, and leaves FILE
 *              alone when hbgd is down.
 *   prometheus --format=prometheus: Debian's promtool check metrics has
 *              nothing to say about it; counters' families carry _total,
 *              no UNIT, no EOF; the same samples as the OpenMetrics text.
 *   exporter   --listen 127.0.0.1:0: GET /metrics negotiated by Accept
 *              (OpenMetrics with the exporter's process_* families, or
 *              0.0.4), fresh values at each scrape, 404, 405, 400, 431,
 *              503 while hbgd is down, exit 0 on SIGTERM; no rows per uid
 *              without --per-uid; the request line exactly, a NUL, a head
 *              of 8 KiB with and without its end, a pipelined request.
 *   exporter_conns  idle connections hold up no scrape, the oldest idle
 *              ones dropped when all are taken; --per-uid; its start time
 *              with btime far into /proc/stat.
 *   in_flight_hostile  a client writing graphs_submitted: the graphs in
 *              flight stay within what hbgd read.
 * $HBGCTL overrides the hbgctl binary (default: ../bin/hbgctl next to this
 * test).
 */
#include <check.h>
#include <sched.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <netinet/in.h>
#include <arpa/inet.h>
#include <time.h>
#include <unistd.h>

#include <json-c/json.h>

#include "daemon/engine/engine.h"
#include "hbg/hbg.h"
#include "shm/layout.h"
#include "tests/e2e/daemon_util.h"
#include "tests/e2e/e2e_util.h"
#include "tests/check_main.h"

static char hbgctl_bin[PATH_MAX];

/* ------------------------------------------------------------ running hbgctl */

struct result {
        int code;       /* exit code, or 128 + signal */
        char *out, *err;
};

static char *slurp_fd(int fd) {
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

/* hbgctl --socket SOCK ARGS... (NULL-terminated). */
static struct result hbgctl(const char *sock, ...) {
        const char *argv[32] = { hbgctl_bin, "--socket", sock };
        unsigned n = 3;
        va_list ap;
        va_start(ap, sock);
        for (const char *a; n < 31 && (a = va_arg(ap, const char *));)
                argv[n++] = a;
        va_end(ap);
        argv[n] = NULL;
        FILE *o = tmpfile(), *e = tmpfile();
        ck_assert(o && e);
        pid_t pid = fork();
        ck_assert_int_ge(pid, 0);
        if (pid == 0) {
                if (dup2(fileno(o), 1) < 0 || dup2(fileno(e), 2) < 0)
                        _exit(126);
                execv(hbgctl_bin, (char *const *)argv);
                _exit(127);
        }
        int st;
        ck_assert_int_eq(waitpid(pid, &st, 0), pid);
        struct result r = { .code = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st) };
        r.out = slurp_fd(fileno(o));
        r.err = slurp_fd(fileno(e));
        fclose(o);
        fclose(e);
        return r;
}

static void result_free(struct result *r) {
        free(r->out);
        free(r->err);
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
#define MAX_SAMPLES 4096
#define MAX_FAMILIES 128

struct sample {
        char name[96];
        char labels[160];      /* as written, without the braces */
        double value;
};

struct scrape {
        struct sample s[MAX_SAMPLES];
        size_t n;
        char families[MAX_FAMILIES][96];
        char types[MAX_FAMILIES][16];
        size_t n_families;
        unsigned sample_every; /* from hbg_task_run_seconds' help; 1: every run timed */
};

static bool ends_with(const char *s, const char *suffix) {
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
        const char *start = ++q;
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
        ck_assert_msg((size_t)(q - start) < size, "labels too long: %s", line);
        snprintf(labels, size, "%.*s", (int)(q - start), start);
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

static void parse_openmetrics(const char *text, struct scrape *sc) {
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
static double value_of(const struct scrape *sc, const char *name, const char *labels) {
        for (size_t i = 0; i < sc->n; i++)
                if (strcmp(sc->s[i].name, name) == 0 && strcmp(sc->s[i].labels, labels) == 0)
                        return sc->s[i].value;
        return -1;
}

/* The sum over every label set of name. */
static double sum_of(const struct scrape *sc, const char *name) {
        double v = 0;
        for (size_t i = 0; i < sc->n; i++)
                if (strcmp(sc->s[i].name, name) == 0)
                        v += sc->s[i].value;
        return v;
}

/* The first sample of name whose labels start with prefix; -1 if none. */
static double value_with(const struct scrape *sc, const char *name, const char *prefix) {
        for (size_t i = 0; i < sc->n; i++)
                if (strcmp(sc->s[i].name, name) == 0 && strncmp(sc->s[i].labels, prefix, strlen(prefix)) == 0)
                        return sc->s[i].value;
        return -1;
}

/* How many samples name has (label sets). */
static unsigned samples_of(const struct scrape *sc, const char *name) {
        unsigned n = 0;
        for (size_t i = 0; i < sc->n; i++)
                n += strcmp(sc->s[i].name, name) == 0;
        return n;
}

/* The type of family name, "" if there is no such family. */
static const char *type_of(const struct scrape *sc, const char *name) {
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
static void assert_not_decreasing(const struct scrape *before, const struct scrape *after, const char *what) {
        for (size_t i = 0; i < before->n; i++) {
                const struct sample *s = &before->s[i];
                if (!is_counter_sample(before, s))
                        continue;
                double v = value_of(after, s->name, s->labels);
                ck_assert_msg(v >= s->value, "%s: %s{%s} went from %g to %g", what, s->name, s->labels, s->value, v);
        }
}

static struct scrape *scrape(struct hbgd_proc *d) {
        struct result r = hbgctl(d->socket_path, "metrics", NULL);
        D_ASSERT(d, r.code == 0, "hbgctl metrics: exit %d: %s", r.code, r.err);
        struct scrape *sc = malloc(sizeof(*sc));
        ck_assert_ptr_nonnull(sc);
        parse_openmetrics(r.out, sc);
        result_free(&r);
        return sc;
}

/* ------------------------------------------------------------ graphs */

static hbg_task fill(hbg_tensor x, float v) {
        hbg_task t = HBG_TASK_INIT("fill_f32");
        t.n_args = 1;
        t.args[0].tensor = x;
        t.args[0].dir = HBG_OUT;
        t.n_scalars = 1;
        t.scalars[0] = hbg_f32(v);
        return t;
}

static hbg_task scale(hbg_tensor x, float v) {
        hbg_task t = HBG_TASK_INIT("scale_f32");
        t.n_args = 1;
        t.args[0].tensor = x;
        t.args[0].dir = HBG_INOUT;
        t.n_scalars = 1;
        t.scalars[0] = hbg_f32(v);
        return t;
}

static hbg_task fail_task(int64_t code) {
        hbg_task t = HBG_TASK_INIT("fail");
        t.n_scalars = 1;
        t.scalars[0] = (uint64_t)code;
        return t;
}

/* Submit the graph built so far and wait: its result. */
static int finish(struct hbgd_proc *d, hbg_client *c) {
        uint64_t g;
        int err = hbg_graph_submit(c, &g);
        D_ASSERT(d, err == 0, "submit: %s [%s]", hbg_strerror(err), hbg_last_error(c));
        return hbg_graph_wait(c, g, WAIT_MS);
}

static int host_nothing(void *userdata) {
        (void)userdata;
        return 0;
}

/* n graphs of two kernel tasks each (fill, then scale): all succeed. */
static void good_graphs(struct hbgd_proc *d, hbg_client *c, hbg_tensor x, unsigned n) {
        for (unsigned i = 0; i < n; i++) {
                hbg_task t[2] = { fill(x, (float)i), scale(x, 2.0f) };
                ck_assert_int_eq(hbg_graph_add_n(c, t, 2, NULL), 0);
                int err = finish(d, c);
                D_ASSERT(d, err == 0, "graph %u: %s [%s]", i, hbg_strerror(err), hbg_last_error(c));
        }
}

#define THREADS 2
#define GOOD 5

START_TEST(counts) {
        const char *const args[] = { "--threads", "2", NULL };
        struct hbgd_proc *d = start_hbgd(MODE_URING, args);
        hbg_client *c = NULL;
        int err = hbg_connect(&c, d->socket_path);
        D_ASSERT(d, err == 0, "hbg_connect: %s", hbg_strerror(err));
        hbg_tensor x;
        ck_assert_int_eq(hbg_tensor_alloc(c, 4 * sizeof(float), &x), 0);

        good_graphs(d, c, x, GOOD);
        /* A kernel failing (EIO); the scale after it is skipped. */
        uint64_t boom;
        hbg_task f = fill(x, 1.0f), k = fail_task(-EIO);
        ck_assert_int_eq(hbg_graph_add(c, &f, NULL), 0);
        ck_assert_int_eq(hbg_graph_add(c, &k, &boom), 0);
        hbg_task after = scale(x, 3.0f);
        after.n_deps = 1;
        after.deps[0] = boom;
        ck_assert_int_eq(hbg_graph_add(c, &after, NULL), 0);
        err = finish(d, c);
        D_ASSERT(d, err == -EIO, "the failing kernel's graph: %s", hbg_strerror(err));
        /* A task failing validation: fail's code must be a negative errno. */
        hbg_task invalid = fail_task(0);
        ck_assert_int_eq(hbg_graph_add(c, &invalid, NULL), 0);
        err = finish(d, c);
        D_ASSERT(d, err == -ERANGE, "the invalid task's graph: %s", hbg_strerror(err));
        /* A session refused: a task window above max_task_window. */
        hbg_connect_options o = HBG_CONNECT_OPTIONS_INIT;
        o.socket_path = d->socket_path;
        o.task_window = UINT64_C(1) << 21;
        hbg_client *big = NULL;
        err = hbg_connect_opts(&big, &o);
        D_ASSERT(d, err == -E2BIG, "the session too large: %s", hbg_strerror(err));

        struct scrape *s1 = scrape(d);
        const unsigned graphs = GOOD + 2;
        D_ASSERT(d, value_of(s1, "hbg_graphs_submitted_total", "") == graphs, "graphs submitted: %g",
                 value_of(s1, "hbg_graphs_submitted_total", ""));
        D_ASSERT(d, value_of(s1, "hbg_graphs_retired_total", "") == graphs, "graphs retired: %g",
                 value_of(s1, "hbg_graphs_retired_total", ""));
        D_ASSERT(d, value_of(s1, "hbg_graph_latency_seconds_count", "") == graphs, "graph latencies: %g",
                 value_of(s1, "hbg_graph_latency_seconds_count", ""));
        D_ASSERT(d, value_of(s1, "hbg_graphs_failed_total", "errno=\"EIO\"") == 1, "graphs failed with EIO");
        D_ASSERT(d, value_of(s1, "hbg_graphs_failed_total", "errno=\"ERANGE\"") == 1, "graphs failed with ERANGE");
        D_ASSERT(d, sum_of(s1, "hbg_graphs_failed_total") == 2, "graphs failed: %g",
                 sum_of(s1, "hbg_graphs_failed_total"));
        D_ASSERT(d, value_of(s1, "hbg_tasks_failed_total", "errno=\"EIO\"") == 1, "tasks failed with EIO");
        D_ASSERT(d, value_of(s1, "hbg_tasks_failed_total", "errno=\"ERANGE\"") == 1, "tasks failed with ERANGE");
        D_ASSERT(d, sum_of(s1, "hbg_tasks_failed_total") == 2, "tasks failed (the skipped one not counted): %g",
                 sum_of(s1, "hbg_tasks_failed_total"));
        /* Kernel tasks run: two per good graph, fill and fail. */
        D_ASSERT(d, sum_of(s1, "hbg_tasks_executed_total") == 2 * GOOD + 2, "tasks executed: %g",
                 sum_of(s1, "hbg_tasks_executed_total"));
        D_ASSERT(d, sum_of(s1, "hbg_tasks_classified_total") == 2 * GOOD + 3 + 1, "tasks classified: %g",
                 sum_of(s1, "hbg_tasks_classified_total"));
        D_ASSERT(d, value_of(s1, "hbg_sessions", "") == 1, "sessions");
        D_ASSERT(d, value_of(s1, "hbg_sessions_opened_total", "") == 1, "sessions opened");
        /* Built on the io thread or not (a set of regions made ahead
         * ready at its connect or not), it is counted as opened. */
        D_ASSERT(d, samples_of(s1, "hbg_sessions_set_up_inline_total") == 1 &&
                            value_of(s1, "hbg_sessions_set_up_inline_total", "") <= 1,
                 "sessions set up inline: %g", value_of(s1, "hbg_sessions_set_up_inline_total", ""));
        D_ASSERT(d, value_of(s1, "hbg_sessions_closing", "") == 0 && samples_of(s1, "hbg_sessions_closing") == 1,
                 "sessions closing");
        D_ASSERT(d, value_of(s1, "hbg_sessions_refused_total", "errno=\"E2BIG\"") == 1, "sessions refused");
        /* What hbgd keeps made ahead (status' numbers; a session took a
         * set only if the fill had made one before its connect). */
        static const char *const spares[] = { "hbg_spare_rings", "hbg_spare_ring_bytes", "hbg_spare_rings_taken_total",
                                              "hbg_spare_regions", "hbg_spare_regions_taken_total" };
        for (size_t i = 0; i < sizeof(spares) / sizeof(spares[0]); i++)
                D_ASSERT(d, samples_of(s1, spares[i]) == 1, "%s: %u samples", spares[i], samples_of(s1, spares[i]));
        D_ASSERT(d, value_of(s1, "hbg_spare_regions", "") <= 8 && value_of(s1, "hbg_spare_regions_taken_total", "") <= 1,
                 "spare regions %g, taken %g", value_of(s1, "hbg_spare_regions", ""),
                 value_of(s1, "hbg_spare_regions_taken_total", ""));
        D_ASSERT(d, value_of(s1, "hbg_scheduler_threads", "") == THREADS, "threads");
        /* hbgd's build and process. */
        char build[96];
        snprintf(build, sizeof(build), "version=\"%s\",", HBG_VERSION);
        D_ASSERT(d, value_with(s1, "hbg_build_info", build) == 1 && samples_of(s1, "hbg_build_info") == 1,
                 "hbg_build_info{%s...}", build);
        D_ASSERT(d, strcmp(type_of(s1, "hbg_build"), "info") == 0, "hbg_build's type: '%s'", type_of(s1, "hbg_build"));
        D_ASSERT(d, value_of(s1, "hbg_process_open_fds", "") >= 4, "hbgd's open fds: %g",
                 value_of(s1, "hbg_process_open_fds", ""));
        D_ASSERT(d, value_of(s1, "hbg_process_resident_memory_bytes", "") > 0, "hbgd's resident memory");
        D_ASSERT(d, value_of(s1, "hbg_process_cpu_seconds_total", "") >= 0, "hbgd's CPU time");
        double started = value_of(s1, "hbg_process_start_time_seconds", ""), now = (double)time(NULL);
        D_ASSERT(d, started > now - 3600 && started <= now + 1, "hbgd started at %f, now is %f", started, now);
        /* Memory: the one session open, this test's uid's, all of it. */
        char uid[32];
        snprintf(uid, sizeof(uid), "uid=\"%u\"", (unsigned)geteuid());
        double charged = value_of(s1, "hbg_memory_charged_bytes", "");
        D_ASSERT(d, charged > 0 && value_of(s1, "hbg_user_memory_charged_bytes", uid) == charged,
                 "memory charged: %g in all, %g to %s", charged, value_of(s1, "hbg_user_memory_charged_bytes", uid), uid);
        D_ASSERT(d, samples_of(s1, "hbg_user_memory_charged_bytes") == 1, "memory charged to other users");
        D_ASSERT(d, value_of(s1, "hbg_user_sessions", uid) == 1, "sessions of %s", uid);
        D_ASSERT(d, value_of(s1, "hbg_memory_limit_bytes", "") >= charged &&
                            value_of(s1, "hbg_user_memory_limit_bytes", "") > 0,
                 "memory limits");
        D_ASSERT(d, value_of(s1, "hbg_graphs_in_flight", "") == 0, "graphs in flight: %g",
                 value_of(s1, "hbg_graphs_in_flight", ""));
        /* Per thread: every thread labelled; every task timed, by the
         * thread that ran its last block. */
        ck_assert_uint_eq(s1->sample_every, 1);
        for (unsigned i = 0; i < THREADS; i++) {
                char label[32];
                snprintf(label, sizeof(label), "thread=\"%u\"", i);
                double runs = value_of(s1, "hbg_tasks_executed_total", label);
                D_ASSERT(d, runs >= 0 && value_of(s1, "hbg_task_blocks_dispatched_total", label) >= 0,
                         "thread %u has no counters", i);
                D_ASSERT(d, value_of(s1, "hbg_task_run_seconds_count", label) == runs,
                         "thread %u: %g tasks, %g timed", i, runs, value_of(s1, "hbg_task_run_seconds_count", label));
        }
        /* The completion path's counters, hbgctl threads' names: a
         * counter each, a sample per thread. */
        static const char *const completion[] = { "hbg_watermark_advances", "hbg_watermark_cas_failures",
                                                  "hbg_failsafe_pushes", "hbg_failsafe_retries" };
        for (size_t i = 0; i < sizeof(completion) / sizeof(completion[0]); i++) {
                char total[64];
                snprintf(total, sizeof(total), "%s_total", completion[i]);
                D_ASSERT(d, strcmp(type_of(s1, completion[i]), "counter") == 0 && samples_of(s1, total) == THREADS,
                         "%s: type '%s', %u samples for %u threads", completion[i], type_of(s1, completion[i]),
                         samples_of(s1, total), THREADS);
        }
        D_ASSERT(d, sum_of(s1, "hbg_watermark_advances_total") > 0, "the watermark never moved");

        /* More graphs: a second scrape. */
        good_graphs(d, c, x, 20);
        struct scrape *s2 = scrape(d);
        assert_not_decreasing(s1, s2, "second scrape");
        D_ASSERT(d, value_of(s2, "hbg_graphs_retired_total", "") == graphs + 20, "graphs retired: %g",
                 value_of(s2, "hbg_graphs_retired_total", ""));
        D_ASSERT(d, sum_of(s2, "hbg_tasks_executed_total") == 2 * GOOD + 2 + 40, "tasks executed: %g",
                 sum_of(s2, "hbg_tasks_executed_total"));

        /* A graph in flight: its host task runs only in this client's
         * wait. */
        hbg_task h = HBG_TASK_INIT(NULL);
        h.host_fn = host_nothing;
        uint64_t held;
        ck_assert_int_eq(hbg_graph_add(c, &h, NULL), 0);
        ck_assert_int_eq(hbg_graph_submit(c, &held), 0);
        struct scrape *s_held = NULL;
        for (long long end = daemon_now_ms() + WAIT_MS;;) { /* until hbgd has read the graph's record */
                free(s_held);
                s_held = scrape(d);
                if (value_of(s_held, "hbg_graphs_submitted_total", "") == graphs + 21 || daemon_now_ms() > end)
                        break;
                sleep_us(20000);
        }
        D_ASSERT(d, value_of(s_held, "hbg_graphs_in_flight", "") == 1, "graphs in flight, one held: %g",
                 value_of(s_held, "hbg_graphs_in_flight", ""));
        err = hbg_graph_wait(c, held, WAIT_MS);
        D_ASSERT(d, err == 0, "the host task's graph: %s", hbg_strerror(err));
        free(s_held);
        s_held = scrape(d);
        D_ASSERT(d, value_of(s_held, "hbg_graphs_in_flight", "") == 0, "graphs in flight after the wait: %g",
                 value_of(s_held, "hbg_graphs_in_flight", ""));
        free(s_held);

        /* The session gone (its ring freed and its counters folded into
         * the totals once its last kernel returned): nothing went down. */
        hbg_disconnect(c);
        struct scrape *s3 = NULL;
        for (long long end = daemon_now_ms() + WAIT_MS;;) {
                free(s3);
                s3 = scrape(d);
                if (value_of(s3, "hbg_sessions", "") == 0 || daemon_now_ms() > end)
                        break;
                sleep_us(20000);
        }
        D_ASSERT(d, value_of(s3, "hbg_sessions", "") == 0, "the session is still open");
        sleep_us(300000); /* the housekeeping timer frees the ring */
        struct scrape *s4 = scrape(d);
        assert_not_decreasing(s2, s3, "after the session closed");
        assert_not_decreasing(s3, s4, "after its ring was freed");
        D_ASSERT(d, value_of(s4, "hbg_graphs_retired_total", "") == graphs + 21, "graphs retired: %g",
                 value_of(s4, "hbg_graphs_retired_total", ""));
        D_ASSERT(d, value_of(s4, "hbg_graphs_submitted_total", "") == graphs + 21, "graphs submitted: %g",
                 value_of(s4, "hbg_graphs_submitted_total", ""));
        /* Nothing charged with no session. */
        D_ASSERT(d, value_of(s4, "hbg_memory_charged_bytes", "") == 0 &&
                            samples_of(s4, "hbg_user_memory_charged_bytes") == 0,
                 "memory charged with no session: %g", value_of(s4, "hbg_memory_charged_bytes", ""));
        free(s1);
        free(s2);
        free(s3);
        free(s4);
        stop_hbgd(d);
}
END_TEST

/* ------------------------------------------------------------ per kernel */

static hbg_task add(hbg_tensor a, hbg_tensor b, hbg_tensor out) {
        hbg_task t = HBG_TASK_INIT("add_f32");
        t.n_args = 3;
        t.args[0].tensor = a;
        t.args[0].dir = HBG_IN;
        t.args[1].tensor = b;
        t.args[1].dir = HBG_IN;
        t.args[2].tensor = out;
        t.args[2].dir = HBG_OUT;
        return t;
}

#define ADDS 100
#define FAILS 7

/* Kernel `name` of `hbgctl kernels --json`'s array; NULL if absent. */
static json_object *json_kernel(json_object *kernels, const char *name) {
        for (size_t i = 0; i < json_object_array_length(kernels); i++) {
                json_object *k = json_object_array_get_idx(kernels, i), *n;
                if (json_object_object_get_ex(k, "name", &n) && strcmp(json_object_get_string(n), name) == 0)
                        return k;
        }
        return NULL;
}

static uint64_t json_u64(json_object *o, const char *key) {
        json_object *v;
        ck_assert_msg(json_object_object_get_ex(o, key, &v), "no %s in %s", key, json_object_to_json_string(o));
        return json_object_get_uint64(v);
}

/* A histogram of kernels --json: its count, checked against its buckets. */
static uint64_t json_hist_count(json_object *k, const char *key) {
        json_object *h, *b, *bounds;
        ck_assert_msg(json_object_object_get_ex(k, key, &h) && json_object_object_get_ex(h, "buckets", &b) &&
                              json_object_object_get_ex(h, "bounds_ns", &bounds),
                      "no %s histogram in %s", key, json_object_to_json_string(k));
        uint64_t sum = 0;
        for (size_t i = 0; i < json_object_array_length(b); i++)
                sum += json_object_get_uint64(json_object_array_get_idx(b, i));
        ck_assert_uint_eq(sum, json_u64(h, "count"));
        ck_assert(json_object_array_length(b) == 0 ||
                  json_object_array_length(b) == json_object_array_length(bounds) + 1);
        return sum;
}

START_TEST(kernels) {
        const char *const args[] = { "--threads", "2", NULL };
        struct hbgd_proc *d = start_hbgd(MODE_URING, args);
        hbg_client *c = NULL;
        int err = hbg_connect(&c, d->socket_path);
        D_ASSERT(d, err == 0, "hbg_connect: %s", hbg_strerror(err));
        hbg_tensor a, b, out[ADDS];
        ck_assert_int_eq(hbg_tensor_alloc(c, 64 * sizeof(float), &a), 0);
        ck_assert_int_eq(hbg_tensor_alloc(c, 64 * sizeof(float), &b), 0);
        for (unsigned i = 0; i < ADDS; i++)
                ck_assert_int_eq(hbg_tensor_alloc(c, 64 * sizeof(float), &out[i]), 0);
        /* a and b first (fill_f32), then the adds, all at once: they wait
         * for both. The fills in 64 blocks each, which the two threads
         * share: a task counts once, by whichever thread ends it. */
        hbg_task fa = fill(a, 1.0f), fb = fill(b, 2.0f);
        fa.blocks = fb.blocks = 64;
        uint64_t ia, ib;
        ck_assert_int_eq(hbg_graph_add(c, &fa, &ia), 0);
        ck_assert_int_eq(hbg_graph_add(c, &fb, &ib), 0);
        for (unsigned i = 0; i < ADDS; i++) {
                hbg_task t = add(a, b, out[i]);
                t.n_deps = 2;
                t.deps[0] = ia;
                t.deps[1] = ib;
                ck_assert_int_eq(hbg_graph_add(c, &t, NULL), 0);
        }
        err = finish(d, c);
        D_ASSERT(d, err == 0, "the adds' graph: %s [%s]", hbg_strerror(err), hbg_last_error(c));
        /* Failing kernels, one graph each. */
        for (unsigned i = 0; i < FAILS; i++) {
                hbg_task k = fail_task(-EIO);
                ck_assert_int_eq(hbg_graph_add(c, &k, NULL), 0);
                err = finish(d, c);
                D_ASSERT(d, err == -EIO, "failing graph %u: %s", i, hbg_strerror(err));
        }

        struct scrape *s = scrape(d);
        static const struct {
                const char *name;
                double tasks, failures;
        } want[] = { { "add_f32", ADDS, 0 }, { "fill_f32", 2, 0 }, { "fail", FAILS, FAILS } };
        double all = 0;
        for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
                char label[64];
                snprintf(label, sizeof(label), "kernel=\"%s\"", want[i].name);
                double tasks = value_of(s, "hbg_kernel_tasks_total", label);
                D_ASSERT(d, tasks == want[i].tasks, "%s: %g tasks, want %g", want[i].name, tasks, want[i].tasks);
                D_ASSERT(d, value_of(s, "hbg_kernel_failures_total", label) == want[i].failures,
                         "%s: %g failures, want %g", want[i].name, value_of(s, "hbg_kernel_failures_total", label),
                         want[i].failures);
                D_ASSERT(d, value_of(s, "hbg_kernel_run_seconds_count", label) == tasks,
                         "%s: %g run times for %g tasks", want[i].name,
                         value_of(s, "hbg_kernel_run_seconds_count", label), tasks);
                D_ASSERT(d, value_of(s, "hbg_kernel_wait_seconds_count", label) == tasks,
                         "%s: %g waits for %g tasks", want[i].name,
                         value_of(s, "hbg_kernel_wait_seconds_count", label), tasks);
                all += tasks;
        }
        /* Only the kernels that ran are listed, and they are every task. */
        D_ASSERT(d, samples_of(s, "hbg_kernel_tasks_total") == sizeof(want) / sizeof(want[0]),
                 "%u kernels listed", samples_of(s, "hbg_kernel_tasks_total"));
        D_ASSERT(d, sum_of(s, "hbg_tasks_executed_total") == all && sum_of(s, "hbg_task_run_seconds_count") == all,
                 "tasks executed %g, timed per thread %g, per kernel %g", sum_of(s, "hbg_tasks_executed_total"),
                 sum_of(s, "hbg_task_run_seconds_count"), all);
        free(s);

        struct result r = hbgctl(d->socket_path, "kernels", "--json", NULL);
        D_ASSERT(d, r.code == 0, "hbgctl kernels --json: exit %d: %s", r.code, r.err);
        json_object *o = json_tokener_parse(r.out), *ks = NULL;
        D_ASSERT(d, o && json_object_object_get_ex(o, "kernels", &ks), "kernels --json: %s", r.out);
        for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
                json_object *k = json_kernel(ks, want[i].name);
                D_ASSERT(d, k, "kernels --json has no %s", want[i].name);
                D_ASSERT(d, json_u64(k, "tasks") == want[i].tasks && json_u64(k, "failures") == want[i].failures,
                         "kernels --json: %s", json_object_to_json_string(k));
                D_ASSERT(d, json_hist_count(k, "run") == want[i].tasks && json_hist_count(k, "wait") == want[i].tasks,
                         "kernels --json: %s", json_object_to_json_string(k));
        }
        /* A kernel that ran nothing: zeros, empty histograms. */
        json_object *idle = json_kernel(ks, "gemm_f32");
        D_ASSERT(d, idle && json_u64(idle, "tasks") == 0 && json_hist_count(idle, "run") == 0,
                 "kernels --json: gemm_f32 ran nothing");
        json_object_put(o);
        result_free(&r);
        hbg_disconnect(c);
        stop_hbgd(d);
}
END_TEST

/* ------------------------------------------------------------ --output */

static unsigned entries(const char *dir) {
        DIR *dp = opendir(dir);
        ck_assert_ptr_nonnull(dp);
        unsigned n = 0;
        for (struct dirent *e; (e = readdir(dp));)
                n += strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0;
        closedir(dp);
        return n;
}

START_TEST(output) {
        struct hbgd_proc *d = start_hbgd(MODE_URING, NULL);
        char dir[] = "/tmp/hbg-metrics.XXXXXX", file[64];
        ck_assert_ptr_nonnull(mkdtemp(dir));
        snprintf(file, sizeof(file), "%s/hbgd.prom", dir);
        int fd = open(file, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
        ck_assert_int_ge(fd, 0);
        ck_assert_int_eq(write(fd, "old\n", 4), 4);
        close(fd);
        int old = open(file, O_RDONLY | O_CLOEXEC);
        ck_assert_int_ge(old, 0);

        struct result r = hbgctl(d->socket_path, "metrics", "--output", file, NULL);
        D_ASSERT(d, r.code == 0, "metrics --output: exit %d: %s", r.code, r.err);
        ck_assert_msg(r.out[0] == 0, "metrics --output printed: %s", r.out);
        result_free(&r);
        struct stat st;
        ck_assert_int_eq(stat(file, &st), 0);
        ck_assert_msg((st.st_mode & 07777) == 0644, "mode %o", (unsigned)(st.st_mode & 07777));
        ck_assert_uint_eq(entries(dir), 1); /* no temporary file left */
        int now = open(file, O_RDONLY | O_CLOEXEC);
        ck_assert_int_ge(now, 0);
        char *text = slurp_fd(now);
        close(now);
        struct scrape *sc = malloc(sizeof(*sc));
        ck_assert_ptr_nonnull(sc);
        parse_openmetrics(text, sc);
        ck_assert(value_of(sc, "hbg_graphs_retired_total", "") == 0);
        free(sc);
        free(text);
        /* Replaced, not rewritten: the old file, still open, is whole. */
        char *was = slurp_fd(old);
        ck_assert_str_eq(was, "old\n");
        free(was);
        close(old);

        /* Where it cannot write: exit 1, a message naming the file. */
        r = hbgctl(d->socket_path, "metrics", "--output", "/nonexistent-hbg-dir/hbgd.prom", NULL);
        ck_assert_int_eq(r.code, 1);
        ck_assert_msg(strstr(r.err, "/nonexistent-hbg-dir/hbgd.prom"), "stderr: %s", r.err);
        result_free(&r);
        /* An option of metrics only. */
        r = hbgctl(d->socket_path, "status", "--output", file, NULL);
        ck_assert_int_eq(r.code, 2);
        result_free(&r);

        /* hbgd down: exit 3, the file as it was. */
        ck_assert_int_eq(stat(file, &st), 0);
        ino_t ino = st.st_ino;
        char sock[sizeof(d->socket_path)];
        snprintf(sock, sizeof(sock), "%s", d->socket_path);
        stop_hbgd(d);
        r = hbgctl(sock, "metrics", "--output", file, NULL);
        ck_assert_int_eq(r.code, 3);
        result_free(&r);
        ck_assert_int_eq(stat(file, &st), 0);
        ck_assert_uint_eq(st.st_ino, ino);
        ck_assert_uint_eq(entries(dir), 1);
        unlink(file);
        rmdir(dir);
}
END_TEST

/* ------------------------------------------------------------ --format=prometheus */

/* `promtool check metrics` on text: its exit status, what it said in *ret_said. */
static int promtool_check(const char *text, char **ret_said) {
        FILE *in = tmpfile(), *o = tmpfile();
        ck_assert(in && o);
        ck_assert_uint_eq(fwrite(text, 1, strlen(text), in), strlen(text));
        fflush(in);
        lseek(fileno(in), 0, SEEK_SET);
        pid_t pid = fork();
        ck_assert_int_ge(pid, 0);
        if (pid == 0) {
                if (dup2(fileno(in), 0) < 0 || dup2(fileno(o), 1) < 0 || dup2(fileno(o), 2) < 0)
                        _exit(126);
                execlp("promtool", "promtool", "check", "metrics", (char *)NULL);
                _exit(127);
        }
        int st;
        ck_assert_int_eq(waitpid(pid, &st, 0), pid);
        *ret_said = slurp_fd(fileno(o));
        fclose(in);
        fclose(o);
        return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

/* Check text as Prometheus' 0.0.4 format the way hbgctl writes it: every
 * family has TYPE and HELP; a counter's family is named as its sample
 * (with _total); no UNIT, no EOF. Then promtool has nothing to say. */
static void check_prometheus_text(struct hbgd_proc *d, const char *text) {
        ck_assert_msg(!strstr(text, "# EOF") && !strstr(text, "# UNIT"), "OpenMetrics-only lines in 0.0.4 text");
        ck_assert_msg(strstr(text, "# TYPE hbg_graphs_submitted_total counter\n# HELP hbg_graphs_submitted_total ") &&
                              strstr(text, "\nhbg_graphs_submitted_total "),
                      "a counter's family is not named as its sample");
        ck_assert_msg(strstr(text, "# TYPE hbg_build_info gauge\n"), "0.0.4 has no info type: a gauge");
        char *said = NULL;
        int code = promtool_check(text, &said);
        D_ASSERT(d, code != 127, "promtool not found (Debian's prometheus package; make deps installs it)");
        D_ASSERT(d, code == 0 && said[0] == 0, "promtool check metrics: exit %d: %s", code, said);
        free(said);
}

/* --listen that is not ADDR:PORT, a port above 65535 included (which the
 * resolver would have cut to its low 16 bits): refused, exit 2. */
START_TEST(listen_refused) {
        struct hbgd_proc *d = start_hbgd(MODE_URING, NULL);
        static const char *const bad[] = { "127.0.0.1:99999", "127.0.0.1:65536", "127.0.0.1:80x",
                                           "127.0.0.1:+80", "127.0.0.1:", "9464" };
        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
                struct result r = hbgctl(d->socket_path, "metrics", "--listen", bad[i], NULL);
                ck_assert_msg(r.code == 2 && strstr(r.err, "is not ADDR:PORT"), "--listen %s: exit %d, %s", bad[i],
                              r.code, r.err);
                result_free(&r);
        }
        stop_hbgd(d);
}
END_TEST

START_TEST(prometheus) {
        const char *const args[] = { "--threads", "2", NULL };
        struct hbgd_proc *d = start_hbgd(MODE_URING, args);
        hbg_client *c = NULL;
        int err = hbg_connect(&c, d->socket_path);
        D_ASSERT(d, err == 0, "hbg_connect: %s", hbg_strerror(err));
        hbg_tensor x;
        ck_assert_int_eq(hbg_tensor_alloc(c, 4 * sizeof(float), &x), 0);
        good_graphs(d, c, x, 3);
        hbg_task k = fail_task(-EIO);
        ck_assert_int_eq(hbg_graph_add(c, &k, NULL), 0);
        err = finish(d, c);
        D_ASSERT(d, err == -EIO, "the failing kernel's graph: %s", hbg_strerror(err));

        struct result r = hbgctl(d->socket_path, "metrics", "--format=prometheus", NULL);
        D_ASSERT(d, r.code == 0, "metrics --format=prometheus: exit %d: %s", r.code, r.err);
        check_prometheus_text(d, r.out);
        /* The same figures as the OpenMetrics text. */
        struct scrape *om = scrape(d);
        D_ASSERT(d, strstr(r.out, "\nhbg_graphs_retired_total 4\n") && value_of(om, "hbg_graphs_retired_total", "") == 4,
                 "graphs retired in both formats");
        D_ASSERT(d, strstr(r.out, "\nhbg_tasks_failed_total{errno=\"EIO\"} 1\n"), "tasks failed in 0.0.4");
        free(om);
        result_free(&r);
        /* An explicit --format=openmetrics is the default's text. */
        r = hbgctl(d->socket_path, "metrics", "--format=openmetrics", NULL);
        D_ASSERT(d, r.code == 0 && ends_with(r.out, "# EOF\n"), "metrics --format=openmetrics: exit %d", r.code);
        result_free(&r);
        r = hbgctl(d->socket_path, "metrics", "--format=json", NULL);
        ck_assert_int_eq(r.code, 2);
        ck_assert_msg(strstr(r.err, "openmetrics, prometheus"), "stderr: %s", r.err);
        result_free(&r);
        hbg_disconnect(c);
        stop_hbgd(d);
}
END_TEST

/* ------------------------------------------------------------ --listen */

/* hbgctl --socket sock metrics --listen 127.0.0.1:0 [--per-uid]: its
 * pid; the port it says it bound in *ret_port. With fake_stat, the
 * exporter runs in its own mount namespace with that file over
 * /proc/stat. */
static pid_t start_exporter(const char *sock, bool per_uid, const char *fake_stat, int *ret_port) {
        int p[2];
        ck_assert_int_eq(pipe2(p, O_CLOEXEC), 0);
        pid_t pid = fork();
        ck_assert_int_ge(pid, 0);
        if (pid == 0) {
                /* Ended with this test, whatever way it ends. */
                if (dup2(p[1], 2) < 0 || prctl(PR_SET_PDEATHSIG, SIGKILL) < 0)
                        _exit(126);
                if (fake_stat && (unshare(CLONE_NEWNS) < 0 || mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0 ||
                                  mount(fake_stat, "/proc/stat", NULL, MS_BIND, NULL) < 0)) {
                        fprintf(stderr, "cannot put %s over /proc/stat: %s\n", fake_stat, strerror(errno));
                        _exit(125);
                }
                execl(hbgctl_bin, hbgctl_bin, "--socket", sock, "metrics", "--listen", "127.0.0.1:0",
                      per_uid ? "--per-uid" : (char *)NULL, (char *)NULL);
                _exit(127);
        }
        close(p[1]);
        char line[512];
        size_t n = 0;
        while (n < sizeof(line) - 1) {
                ssize_t r = read(p[0], line + n, 1);
                if (r <= 0 || line[n] == '\n')
                        break;
                n++;
        }
        line[n] = 0;
        close(p[0]); /* later lines (failed scrapes) get EPIPE: stderr only */
        const char *at = strstr(line, "http://127.0.0.1:");
        ck_assert_msg(at && sscanf(at, "http://127.0.0.1:%d/metrics", ret_port) == 1, "exporter said: %s", line);
        return pid;
}

struct http_reply {
        int status;
        char *head;      /* status line and headers */
        char *body;
};

/* A connection to 127.0.0.1:port. */
static int connect_to(int port) {
        int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        ck_assert_int_ge(fd, 0);
        struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port) };
        a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        ck_assert_int_eq(connect(fd, (struct sockaddr *)&a, sizeof(a)), 0);
        return fd;
}

/* Send len bytes of request to 127.0.0.1:port (the write side left
 * open), read the reply to the end (the exporter closes). */
static struct http_reply http_n(int port, const char *request, size_t len) {
        int fd = connect_to(port);
        ck_assert_int_eq(send(fd, request, len, MSG_NOSIGNAL), (ssize_t)len);
        char *all = slurp_fd(fd);
        close(fd);
        struct http_reply r = { 0 };
        char *split = strstr(all, "\r\n\r\n");
        ck_assert_msg(split && sscanf(all, "HTTP/1.1 %d ", &r.status) == 1, "not an HTTP reply: %s", all);
        *split = 0;
        r.head = all;
        r.body = strdup(split + 4);
        return r;
}

static struct http_reply http(int port, const char *request) {
        return http_n(port, request, strlen(request));
}

static void http_free(struct http_reply *r) {
        free(r->head);
        free(r->body);
}

#define PROM_ACCEPT                                                                                            \
        "application/openmetrics-text;version=1.0.0,application/openmetrics-text;version=0.0.1;q=0.75,"      \
        "text/plain;version=0.0.4;q=0.5,*/*;q=0.1"

START_TEST(exporter) {
        struct hbgd_proc *d = start_hbgd(MODE_URING, NULL);
        int port;
        pid_t exp = start_exporter(d->socket_path, false, NULL, &port);

        /* As Prometheus asks: OpenMetrics, with the exporter's process. */
        struct http_reply r = http(port, "GET /metrics HTTP/1.1\r\nHost: x\r\nAccept: " PROM_ACCEPT "\r\n\r\n");
        D_ASSERT(d, r.status == 200, "status %d", r.status);
        D_ASSERT(d, strstr(r.head, "\r\nContent-Type: application/openmetrics-text; version=1.0.0; charset=utf-8"),
                 "head: %s", r.head);
        struct scrape *sc = malloc(sizeof(*sc));
        ck_assert_ptr_nonnull(sc);
        parse_openmetrics(r.body, sc);
        D_ASSERT(d, value_of(sc, "process_open_fds", "") >= 3 && value_of(sc, "process_resident_memory_bytes", "") > 0 &&
                            value_of(sc, "process_cpu_seconds_total", "") >= 0,
                 "the exporter's process_* families");
        D_ASSERT(d, value_of(sc, "hbg_sessions_opened_total", "") == 0, "sessions opened");
        http_free(&r);

        /* Fresh at each scrape: a session opened in between shows. */
        hbg_client *c = NULL;
        int err = hbg_connect(&c, d->socket_path);
        D_ASSERT(d, err == 0, "hbg_connect: %s", hbg_strerror(err));
        r = http(port, "GET /metrics?x=1 HTTP/1.1\r\nHost: x\r\nAccept: application/openmetrics-text\r\n\r\n");
        D_ASSERT(d, r.status == 200, "status %d", r.status);
        parse_openmetrics(r.body, sc);
        D_ASSERT(d, value_of(sc, "hbg_sessions_opened_total", "") == 1 && value_of(sc, "hbg_sessions", "") == 1,
                 "a second scrape without the session opened since");
        /* Whoever reaches the port: no rows per uid without --per-uid;
         * the budget per uid (a setting, no uid in it) is served. */
        D_ASSERT(d, !strstr(r.body, "uid=\"") && !strstr(r.body, "hbg_user_memory_charged") &&
                            !strstr(r.body, "hbg_user_sessions") && value_of(sc, "hbg_memory_charged_bytes", "") > 0,
                 "rows per uid served without --per-uid");
        D_ASSERT(d, value_of(sc, "hbg_user_memory_limit_bytes", "") > 0, "no hbg_user_memory_limit_bytes");
        http_free(&r);
        hbg_disconnect(c);

        /* No Accept, or one ranking text/plain higher: text 0.0.4. */
        const char *plain[] = { "GET /metrics HTTP/1.1\r\n\r\n",
                                "GET /metrics HTTP/1.0\r\naccept: text/plain;q=0.9, application/openmetrics-text;q=0.5\r\n\r\n",
                                "GET /metrics HTTP/1.1\r\nAccept: application/openmetrics-text;q=0\r\n\r\n" };
        for (size_t i = 0; i < sizeof(plain) / sizeof(plain[0]); i++) {
                r = http(port, plain[i]);
                D_ASSERT(d, r.status == 200 && strstr(r.head, "\r\nContent-Type: text/plain; version=0.0.4; charset=utf-8"),
                         "request %zu: %d %s", i, r.status, r.head);
                check_prometheus_text(d, r.body);
                D_ASSERT(d, strstr(r.body, "\nprocess_open_fds "), "request %zu: no process_open_fds", i);
                http_free(&r);
        }

        /* What else it answers. */
        static const struct {
                const char *request;
                int status;
        } other[] = {
                { "GET / HTTP/1.1\r\n\r\n", 404 },
                { "GET /metricsx HTTP/1.1\r\n\r\n", 404 },
                { "POST /metrics HTTP/1.1\r\nContent-Length: 0\r\n\r\n", 405 },
                { "DELETE /metrics HTTP/1.1\r\n\r\n", 405 },
                { "hello\r\n\r\n", 400 },
                { "GET /metrics SPDY/3\r\n\r\n", 400 },
                /* Exactly METHOD SP TARGET SP HTTP/x.y. */
                { "GET\t/metrics HTTP/1.1\r\n\r\n", 400 },
                { "GET  /metrics HTTP/1.1\r\n\r\n", 400 },
                { "GET /metrics HTTP/1.1 x\r\n\r\n", 400 },
                { "GET /metrics HTTP/1.x\r\n\r\n", 400 },
                { "GET /metrics HTTP/1.10\r\n\r\n", 400 },
                { " GET /metrics HTTP/1.1\r\n\r\n", 400 },
                { "GET /metrics HTTP/2.0\r\n\r\n", 505 },
        };
        for (size_t i = 0; i < sizeof(other) / sizeof(other[0]); i++) {
                r = http(port, other[i].request);
                D_ASSERT(d, r.status == other[i].status, "request %zu: %d, not %d", i, r.status, other[i].status);
                http_free(&r);
        }
        /* A head larger than the exporter reads: 431, and it serves on. */
        size_t big = 16384;
        char *huge = malloc(big + 64);
        ck_assert_ptr_nonnull(huge);
        int n = snprintf(huge, big + 64, "GET /metrics HTTP/1.1\r\nX-Big: ");
        memset(huge + n, 'a', big - (size_t)n);
        snprintf(huge + big, 64, "\r\n\r\n");
        r = http(port, huge);
        D_ASSERT(d, r.status == 431, "a huge request: %d", r.status);
        http_free(&r);
        /* A head of exactly 8 KiB, blank line included, is read whole; 8
         * KiB without its end is too large at once (the exporter waits
         * for no more). */
        const size_t max = 8192;
        n = snprintf(huge, big, "GET /metrics HTTP/1.1\r\nX-Big: ");
        memset(huge + n, 'a', max - (size_t)n - 4);
        memcpy(huge + max - 4, "\r\n\r\n", 4);
        r = http_n(port, huge, max);
        D_ASSERT(d, r.status == 200, "a head of 8 KiB: %d", r.status);
        http_free(&r);
        huge[max - 4] = 'a';
        r = http_n(port, huge, max);
        D_ASSERT(d, r.status == 431, "8 KiB and no end of the head: %d", r.status);
        http_free(&r);
        free(huge);
        /* A NUL in the head: 400 at once. */
        static const char nul[] = "GET /metrics HTTP/1.1\r\nX-A: a\0b\r\n\r\n";
        r = http_n(port, nul, sizeof(nul) - 1);
        D_ASSERT(d, r.status == 400, "a NUL in the head: %d", r.status);
        http_free(&r);
        /* Only the first request's head counts: a pipelined second one
         * asking for OpenMetrics changes nothing. */
        r = http(port, "GET /metrics HTTP/1.1\r\n\r\nGET /metrics HTTP/1.1\r\nAccept: application/openmetrics-text\r\n\r\n");
        D_ASSERT(d, r.status == 200 && strstr(r.head, "\r\nContent-Type: text/plain; version=0.0.4;"),
                 "a pipelined request: %d %s", r.status, r.head);
        http_free(&r);

        /* hbgd gone: 503 with the reason, until it is back. */
        char sock[sizeof(d->socket_path)];
        snprintf(sock, sizeof(sock), "%s", d->socket_path);
        stop_hbgd(d);
        r = http(port, "GET /metrics HTTP/1.1\r\n\r\n");
        ck_assert_msg(r.status == 503 && strstr(r.body, "did not answer"), "hbgd down: %d %s", r.status, r.body);
        http_free(&r);

        /* SIGTERM: exit 0. */
        ck_assert_int_eq(kill(exp, SIGTERM), 0);
        int st;
        ck_assert_int_eq(waitpid(exp, &st, 0), exp);
        ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "exporter exit status %#x", st);
        free(sc);
}
END_TEST

/* Is fd still open at the other end (nothing to read, no EOF)? */
static bool still_open(int fd) {
        char b;
        ssize_t r = recv(fd, &b, 1, MSG_DONTWAIT);
        return r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK);
}

#define EXPORTER_CONNS 16 /* MAX_CONNS of ctl/exporter.c */

/*
 * Connections that send half a request line and wait hold up no scrape:
 * with 3 of them open the scrape is answered while they are all still
 * open (the exporter has closed none of them for its read deadline yet);
 * with more than the exporter serves at once, each new connection drops
 * the oldest idle one, and the rest stay open. Then --per-uid serves the
 * rows per uid, and an exporter that finds btime past the first 4 KiB of
 * /proc/stat knows its start time.
 */
START_TEST(exporter_conns) {
        struct hbgd_proc *d = start_hbgd(MODE_URING, NULL);
        int port;
        pid_t exp = start_exporter(d->socket_path, false, NULL, &port);
        int idle[EXPORTER_CONNS + 2];
        for (unsigned i = 0; i < 3; i++) {
                idle[i] = connect_to(port);
                ck_assert_int_eq(send(idle[i], "GET /metrics HTTP/1.1\r\n", 23, MSG_NOSIGNAL), 23);
        }
        struct http_reply r = http(port, "GET /metrics HTTP/1.1\r\n\r\n");
        D_ASSERT(d, r.status == 200, "a scrape beside 3 idle connections: %d", r.status);
        http_free(&r);
        for (unsigned i = 0; i < 3; i++)
                D_ASSERT(d, still_open(idle[i]), "idle connection %u closed before the scrape was answered", i);
        /* Two more than it takes: the three oldest make room for the two
         * and the scrape. */
        for (unsigned i = 3; i < EXPORTER_CONNS + 2; i++) {
                idle[i] = connect_to(port);
                ck_assert_int_eq(send(idle[i], "GET /", 5, MSG_NOSIGNAL), 5);
        }
        r = http(port, "GET /metrics HTTP/1.1\r\n\r\n");
        D_ASSERT(d, r.status == 200, "a scrape beside %u idle connections: %d", EXPORTER_CONNS + 2, r.status);
        http_free(&r);
        for (unsigned i = 0; i < EXPORTER_CONNS + 2; i++) {
                D_ASSERT(d, still_open(idle[i]) == (i >= 3), "idle connection %u: %s", i,
                         i >= 3 ? "closed" : "still open");
                close(idle[i]);
        }
        ck_assert_int_eq(kill(exp, SIGTERM), 0);
        int st;
        ck_assert_int_eq(waitpid(exp, &st, 0), exp);
        ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "exporter exit status %#x", st);

        /* --per-uid: this uid's rows, with a session open. A /proc/stat
         * with btime after 300 more cpu lines. */
        char fake[] = "/tmp/hbg-test-stat-XXXXXX";
        int fd = mkstemp(fake);
        ck_assert_int_ge(fd, 0);
        FILE *in = fopen("/proc/stat", "re"), *out = fdopen(fd, "w");
        ck_assert(in && out);
        char line[4096];
        while (fgets(line, sizeof(line), in)) {
                if (strncmp(line, "btime ", 6) == 0)
                        for (unsigned i = 0; i < 300; i++)
                                fprintf(out, "cpu%u 1000 20 300 400000 50 0 6 0 0 0\n", 1000 + i);
                fputs(line, out);
        }
        fclose(in);
        ck_assert_int_eq(fclose(out), 0);
        exp = start_exporter(d->socket_path, true, fake, &port);
        hbg_client *c = NULL;
        int err = hbg_connect(&c, d->socket_path);
        D_ASSERT(d, err == 0, "hbg_connect: %s", hbg_strerror(err));
        r = http(port, "GET /metrics HTTP/1.1\r\nAccept: application/openmetrics-text\r\n\r\n");
        D_ASSERT(d, r.status == 200, "status %d", r.status);
        struct scrape *sc = malloc(sizeof(*sc));
        ck_assert_ptr_nonnull(sc);
        parse_openmetrics(r.body, sc);
        char uid[32];
        snprintf(uid, sizeof(uid), "uid=\"%u\"", (unsigned)geteuid());
        D_ASSERT(d, value_of(sc, "hbg_user_sessions", uid) == 1 && value_of(sc, "hbg_user_memory_charged_bytes", uid) > 0,
                 "--per-uid: no rows of %s", uid);
        double started = value_of(sc, "process_start_time_seconds", ""), now = (double)time(NULL);
        D_ASSERT(d, started > now - 3600 && started <= now + 1, "the exporter started at %f, now is %f", started, now);
        http_free(&r);
        free(sc);
        hbg_disconnect(c);
        ck_assert_int_eq(kill(exp, SIGTERM), 0);
        ck_assert_int_eq(waitpid(exp, &st, 0), exp);
        ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "exporter exit status %#x", st);
        unlink(fake);
        stop_hbgd(d);
}
END_TEST

/* A client writing any graphs_submitted into its region: the graphs in
 * flight are what hbgd read, at most a graph ring of the session. */
START_TEST(in_flight_hostile) {
        struct hbgd_proc *d = start_hbgd(MODE_URING, NULL);
        hbg_client *c = NULL;
        int err = hbg_connect(&c, d->socket_path);
        D_ASSERT(d, err == 0, "hbg_connect: %s", hbg_strerror(err));
        uint64_t session = 0, size = 0;
        struct hbg_sub_header *sh = find_session_mapping("sub", &session, &size);
        ck_assert_ptr_nonnull(sh);
        uint64_t G = UINT64_C(1) << sh->graph_ring_log2;
        static const uint64_t lies[] = { UINT64_C(1) << 62, UINT64_MAX, 3 };
        for (size_t i = 0; i < sizeof(lies) / sizeof(lies[0]); i++) {
                atomic_store_explicit(&sh->graphs_submitted, lies[i], memory_order_release);
                struct scrape *sc = scrape(d);
                double v = value_of(sc, "hbg_graphs_in_flight", "");
                D_ASSERT(d, v >= 0 && v <= (double)G, "graphs_submitted %llu: %g graphs in flight (graph ring %llu)",
                         (unsigned long long)lies[i], v, (unsigned long long)G);
                free(sc);
        }
        hbg_disconnect(c);
        stop_hbgd(d);
}
END_TEST

static bool find_hbgctl(void) {
        const char *e = getenv("HBGCTL");
        if (e && *e) {
                snprintf(hbgctl_bin, sizeof(hbgctl_bin), "%s", e);
        } else {
                char self[PATH_MAX - 32];
                ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
                self[n > 0 ? n : 0] = 0;
                char *slash = strrchr(self, '/');
                if (slash)
                        *slash = 0;
                snprintf(hbgctl_bin, sizeof(hbgctl_bin), "%s/../bin/hbgctl", self);
        }
        if (access(hbgctl_bin, X_OK) < 0) {
                fprintf(stderr, "test_e2e_metrics: %s: %s; build it or set HBGCTL\n", hbgctl_bin, strerror(errno));
                return false;
        }
        return true;
}

static Suite *suite(void) {
        Suite *s = suite_create("e2e_metrics");
        TCase *tc = tcase_create("metrics");
        tcase_set_timeout(tc, 120);
        tcase_add_test(tc, counts);
        tcase_add_test(tc, kernels);
        tcase_add_test(tc, output);
        tcase_add_test(tc, listen_refused);
        tcase_add_test(tc, prometheus);
        tcase_add_test(tc, exporter);
        tcase_add_test(tc, exporter_conns);
        tcase_add_test(tc, in_flight_hostile);
        suite_add_tcase(s, tc);
        return s;
}

static int setup(void) {
        return find_hbgctl() ? daemon_util_setup() : -1;
}

const struct check_main check_main = {
        .suite = suite,
        .ignore_sigpipe = true,
        .setup = setup,
        .teardown = daemon_util_cleanup,
};
