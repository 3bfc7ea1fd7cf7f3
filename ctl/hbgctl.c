/* SPDX-License-Identifier: MIT */
/*
 * hbgctl: show what hbgd is doing, and run graph files.
 *   hbgctl [OPTIONS] [COMMAND [ARG]]   (hbgctl help, docs/man/hbgctl.1)
 * Options are accepted before or after the command. Two tables say it
 * all: the verbs (name, argument, help, handler) and the options (which
 * verb takes each); the usage, `help VERB` and the shell completion
 * (`help --list`) are printed from them.
 * Exit: 0 ok, 1 failure, 2 bad usage, 3 hbgd not running (or stopping),
 * 4 permission denied (the socket, or hbgd's [access]).
 */
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ctl/ctl.h"
#include "ctl/admin.h"
#include "ctl/run.h"
#include "ctl/status.h"
#include "ctl/top.h"
#include "ctl/trace.h"
#include "ctl/error.h"
#include "ctl/exporter.h"
#include "ctl/metrics.h"
#include "ctl/output.h"

struct verb;
typedef int (*verb_fn)(const struct verb *v, const struct ctl_opts *o, const char *arg);

/* The verbs, like systemctl's: one entry each. */
struct verb {
        const char *name;
        const char *arg;                /* in the usage; NULL: takes none */
        bool arg_optional;
        const char *arg_what;           /* when it is missing */
        const char *help;               /* one line */
        const char *more;               /* `help VERB` adds it (NULL: nothing) */
        verb_fn run;
        Hbg__StatusKind kind;           /* for the status verbs */
        unsigned n_args;                /* more than one: all required, in o->args */
};

static int verb_status(const struct verb *v, const struct ctl_opts *o, const char *arg) {
        (void)arg;
        return cmd_status(o, v->kind);
}

static int verb_run(const struct verb *v, const struct ctl_opts *o, const char *arg) {
        (void)v;
        return cmd_run(o, arg);
}

static int verb_top(const struct verb *v, const struct ctl_opts *o, const char *arg) {
        (void)v, (void)arg;
        return cmd_top(o);
}

/* The metrics, printed or (--listen) served: the exporter is above the
 * printer. */
static int verb_metrics(const struct verb *v, const struct ctl_opts *o, const char *arg) {
        (void)v, (void)arg;
        return o->listen ? cmd_metrics_listen(o) : cmd_metrics(o);
}

static int verb_wait(const struct verb *v, const struct ctl_opts *o, const char *arg) {
        (void)v, (void)arg;
        return cmd_wait(o);
}

static int verb_cancel(const struct verb *v, const struct ctl_opts *o, const char *arg) {
        (void)v, (void)arg;
        return cmd_cancel(o, o->args[0], o->args[1]);
}

static int verb_kill(const struct verb *v, const struct ctl_opts *o, const char *arg) {
        (void)v;
        return cmd_kill(o, arg);
}

static int verb_version(const struct verb *v, const struct ctl_opts *o, const char *arg) {
        (void)v, (void)o, (void)arg;
        if (opt_json) {
                json_object *j = json_object_new_object();
                json_object_object_add(j, "hbgctl", json_object_new_string(HBG_VERSION));
                print_json(j);
                json_object_put(j);
        } else {
                printf("hbgctl %s\n", HBG_VERSION);
        }
        return 0;
}

static int verb_trace(const struct verb *v, const struct ctl_opts *o, const char *arg) {
        (void)v, (void)arg;
        return cmd_trace(o);
}

static int verb_help(const struct verb *v, const struct ctl_opts *o, const char *arg);

static const struct verb verbs[] = {
        { "status", NULL, false, NULL, "the daemon and its sessions (default)", NULL, verb_status,
          HBG__STATUS_KIND__STATUS_DAEMON },
        { "sessions", NULL, false, NULL, "one line per session", NULL, verb_status,
          HBG__STATUS_KIND__STATUS_SESSIONS },
        { "graphs", NULL, false, NULL, "graph counters and live graphs per session",
          "Each session's graph counters, then its live graphs (submitted, not retired):\n"
          "graph number, the client's id, state (waiting, running, failed, retiring),\n"
          "tasks done (complete, in any order) of all, and the age since hbgd saw it.\n",
          verb_status, HBG__STATUS_KIND__STATUS_GRAPHS },
        { "threads", NULL, false, NULL, "one line per scheduler thread", NULL, verb_status,
          HBG__STATUS_KIND__STATUS_THREADS },
        { "kernels", NULL, false, NULL, "hbgd's kernels, their modules and arguments", NULL, verb_status,
          HBG__STATUS_KIND__STATUS_KERNELS },
        { "top", NULL, false, NULL, "threads, sessions and rates, refreshed",
          "Interactive on a terminal (q or Ctrl-C quits); -b prints snapshots.\n", verb_top, 0 },
        { "run", "FILE", false, "graph FILE", "run the graph described in a JSON file (- reads stdin)",
          "The format is GRAPH_FILES.md (man hbgctl: FILES). --dry-run asks hbgd to check\n"
          "every task (without hbgd: the file's own rules, and it says what was not\n"
          "checked); --dot needs no hbgd.\n", verb_run, 0 },
        { "metrics", NULL, false, NULL, "metrics for Prometheus (OpenMetrics or text 0.0.4; --listen: served)",
          "hbgd's counters, gauges and latency histograms (OPERATIONS.md, \"Metrics\"; man hbgd:\n"
          "FILES). --format=prometheus for node exporter's textfile collector; --listen\n"
          "ADDR:PORT serves GET /metrics over HTTP, fresh from hbgd at each scrape, without\n"
          "the rows per uid unless --per-uid (whoever reaches the port sees them).\n", verb_metrics,
          HBG__STATUS_KIND__STATUS_METRICS },
        { "wait", NULL, false, NULL, "wait until hbgd answers (after starting it)",
          "Exit 0 once hbgd answers a status request; 3 if its socket takes no connection\n"
          "within --timeout (default 30 s). With --json, the status hbgd answered.\n", verb_wait, 0 },
        { "cancel", "SESSION GRAPH", false, "SESSION and a GRAPH number", "cancel a live graph",
          "The numbers `hbgctl graphs` shows. Its tasks not started fail with -ECANCELED,\n"
          "its running kernels stop at their next check; the graph's message is\n"
          "\"cancelled by uid N\". The session's own user, root and [access] admin_groups may.\n",
          verb_cancel, 0, 2 },
        { "kill", "SESSION", false, "SESSION number", "close a session",
          "Its client gets -ECONNRESET with hbgd's reason, its unfinished graphs fail.\n"
          "The session's own user, root and [access] admin_groups may.\n",
          verb_kill, 0, 0 },
        { "trace", NULL, false, NULL, "record what hbgd's threads do: a timeline for Perfetto (or SVG)",
          "Records --duration seconds (default 1) of every session you may trace (yours;\n"
          "root and admin_groups: all), or --session N's, and writes Chrome trace-event\n"
          "JSON (Perfetto, chrome://tracing) to -o FILE or stdout: a track per scheduler\n"
          "thread, a slice per task run named by its kernel, graphs as async slices,\n"
          "parks and wake-ups as instants, host tasks on a track per session. --svg FILE\n"
          "draws the timeline as SVG instead (with -o, both). Dropped events are\n"
          "reported on stderr and in the JSON's otherData.\n", verb_trace, 0 },
        { "help", "COMMAND", true, NULL, "this help, or a command's", NULL, verb_help, 0 },
        { "version", NULL, false, NULL, "hbgctl's version", NULL, verb_version, 0 },
};
#define N_VERBS (sizeof(verbs) / sizeof(verbs[0]))

/* The options; `verb` NULL: every verb's. Short names are unique across
 * verbs (one getopt string). */
enum {
        OPT_SOCKET = 256,
        OPT_JSON,
        OPT_PROGRESS,
        OPT_DOT,
        OPT_DRY_RUN,
        OPT_HEAP,
        OPT_WINDOW,
        OPT_LIST,
        OPT_TIMEOUT,
        OPT_FORMAT,
        OPT_LISTEN,
        OPT_PER_UID,
        OPT_DURATION,
        OPT_SESSION,
        OPT_SVG,
        OPT_OUTPUT = 'o',
        OPT_HELP = 'h',
        OPT_VERSION = 'V',
        OPT_BATCH = 'b',
        OPT_ITERATIONS = 'n',
        OPT_DELAY = 'd',
};

static const struct opt_def {
        const char *verb;
        const char *name;
        int id;                         /* the short name when < 256 */
        const char *arg;                /* NULL: takes none */
        const char *help;
} opt_defs[] = {
        { NULL, "socket", OPT_SOCKET, "PATH", "hbgd's socket (default $HBG_SOCKET, then " HBG_DEFAULT_SOCKET ")" },
        { NULL, "json", OPT_JSON, NULL, "print one JSON object (top -b: one per snapshot)" },
        { NULL, "help", OPT_HELP, NULL, "this help (after a command: the command's)" },
        { NULL, "version", OPT_VERSION, NULL, "print hbgctl's version" },
        { "run", "progress", OPT_PROGRESS, NULL, "a progress line on a terminal (stderr)" },
        { "run", "dot", OPT_DOT, "FILE", "write the graph as Graphviz dot to FILE (- stdout), do not run it" },
        { "run", "dry-run", OPT_DRY_RUN, NULL, "check the file with hbgd's rules, do not run it" },
        { "run", "heap", OPT_HEAP, "BYTES", "the session heap (suffixes K, M, G; default hbgd's)" },
        { "run", "window", OPT_WINDOW, "TASKS", "tasks in flight, a power of two (suffixes K, M, G)" },
        { "top", "batch", OPT_BATCH, NULL, "print snapshots, no screen control" },
        { "top", "iterations", OPT_ITERATIONS, "N", "stop after N snapshots" },
        { "top", "delay", OPT_DELAY, "SECONDS", "between snapshots (default 1)" },
        { "metrics trace", "output", OPT_OUTPUT, "FILE", "write FILE instead of stdout (metrics: replaced atomically)" },
        { "metrics", "format", OPT_FORMAT, "FORMAT", "openmetrics (default) or prometheus (text 0.0.4); help: the names" },
        { "metrics", "listen", OPT_LISTEN, "ADDR:PORT", "serve GET /metrics over HTTP there (the exporter)" },
        { "metrics", "per-uid", OPT_PER_UID, NULL, "the exporter serves the rows per uid too (hbg_user_*)" },
        { "trace", "duration", OPT_DURATION, "SECONDS", "how long to record (default 1, at most 600)" },
        { "trace", "session", OPT_SESSION, "N", "only session N (as `hbgctl sessions` shows)" },
        { "trace", "svg", OPT_SVG, "FILE", "draw the timeline as SVG into FILE" },
        { "help", "list", OPT_LIST, NULL, "names only, one a line (for shell completion)" },
        { "wait", "timeout", OPT_TIMEOUT, "SECONDS", "give up after SECONDS (default 30; 0: try once)" },
};
#define N_OPTS (sizeof(opt_defs) / sizeof(opt_defs[0]))

static bool opt_list;

static const struct verb *find_verb(const char *name) {
        for (size_t i = 0; i < N_VERBS; i++)
                if (strcmp(verbs[i].name, name) == 0)
                        return &verbs[i];
        return NULL;
}

/* d->verb is NULL (every verb's) or the names of the verbs that take it,
 * space-separated. */
static bool opt_of(const struct opt_def *d, const struct verb *v) {
        if (d->verb == NULL)
                return true;
        if (!v)
                return false;
        size_t n = strlen(v->name);
        for (const char *p = d->verb; (p = strstr(p, v->name)) != NULL; p += n)
                if ((p == d->verb || p[-1] == ' ') && (p[n] == ' ' || p[n] == '\0'))
                        return true;
        return false;
}

/* "-b, --batch" or "--socket PATH" */
static void opt_head(const struct opt_def *d, char *buf, size_t sz) {
        char s[8] = "";
        if (d->id < 256)
                snprintf(s, sizeof(s), "-%c, ", d->id);
        snprintf(buf, sz, "%s--%s%s%s", s, d->name, d->arg ? " " : "", d->arg ? d->arg : "");
}

static void print_opts(FILE *f, const struct verb *v, bool globals) {
        for (size_t i = 0; i < N_OPTS; i++) {
                const struct opt_def *d = &opt_defs[i];
                if ((d->verb == NULL) != globals || !opt_of(d, v))
                        continue;
                char head[48];
                opt_head(d, head, sizeof(head));
                fprintf(f, "  %-22s %s\n", head, d->help);
        }
}

static void usage(FILE *f) {
        fprintf(f, "Usage: hbgctl [OPTIONS] [COMMAND [ARG]]\nCommands:\n");
        for (size_t i = 0; i < N_VERBS; i++) {
                char head[32];
                const struct verb *v = &verbs[i];
                snprintf(head, sizeof(head), "%s%s%s%s%s", v->name, v->arg ? " " : "", v->arg_optional ? "[" : "",
                         v->arg ? v->arg : "", v->arg_optional ? "]" : "");
                fprintf(f, "  %-14s %s\n", head, v->help);
        }
        fprintf(f, "Options (before or after the command):\n");
        print_opts(f, NULL, true);
        fprintf(f, "Command options: hbgctl help COMMAND.\n"
                   "Exit status: 0 ok, 1 failure, 2 bad usage, 3 hbgd not running or stopping,\n"
                   "             4 permission denied (the socket, or hbgd's allowed users and groups).\n");
}

static void verb_usage(FILE *f, const struct verb *v) {
        fprintf(f, "Usage: hbgctl [OPTIONS] %s%s%s%s%s\n%s.\n", v->name, v->arg ? " " : "",
                v->arg_optional ? "[" : "", v->arg ? v->arg : "", v->arg_optional ? "]" : "", v->help);
        if (v->more)
                fprintf(f, "%s", v->more);
        bool any = false;
        for (size_t i = 0; i < N_OPTS; i++)
                any = any || (opt_defs[i].verb && opt_of(&opt_defs[i], v));
        if (any) {
                fprintf(f, "Options:\n");
                print_opts(f, v, false);
        }
        fprintf(f, "Options of every command:\n");
        print_opts(f, NULL, true);
}

static json_object *opts_json(const struct verb *v) {
        json_object *a = json_object_new_array();
        for (size_t i = 0; i < N_OPTS; i++) {
                const struct opt_def *d = &opt_defs[i];
                if (!opt_of(d, v))
                        continue;
                json_object *e = json_object_new_object();
                char s[3] = { '-', (char)d->id, 0 };
                json_object_object_add(e, "option", json_object_new_string(d->name));
                json_object_object_add(e, "short", d->id < 256 ? json_object_new_string(s) : NULL);
                json_object_object_add(e, "arg", d->arg ? json_object_new_string(d->arg) : NULL);
                json_object_object_add(e, "help", json_object_new_string(d->help));
                json_object_array_add(a, e);
        }
        return a;
}

static json_object *verb_json(const struct verb *v) {
        json_object *e = json_object_new_object();
        json_object_object_add(e, "command", json_object_new_string(v->name));
        json_object_object_add(e, "arg", v->arg ? json_object_new_string(v->arg) : NULL);
        json_object_object_add(e, "help", json_object_new_string(v->help));
        return e;
}

/* help --json: {"commands": [...], "options": [...]}, or for one command
 * {"command", "arg", "help", "options"}. */
static void print_help_json(const struct verb *of) {
        json_object *j;
        if (of) {
                j = verb_json(of);
                json_object_object_add(j, "options", opts_json(of));
        } else {
                j = json_object_new_object();
                json_object *a = json_object_new_array();
                for (size_t i = 0; i < N_VERBS; i++)
                        json_object_array_add(a, verb_json(&verbs[i]));
                json_object_object_add(j, "commands", a);
                json_object_object_add(j, "options", opts_json(NULL));
        }
        print_json(j);
        json_object_put(j);
}

/* help [VERB]; with --list the names one a line: the verbs, or the
 * options VERB takes (its own and everyone's) as "--name[=ARG] [-x]".
 * The shell completion reads them (so it cannot go stale). */
static int verb_help(const struct verb *v, const struct ctl_opts *o, const char *arg) {
        (void)v, (void)o;
        const struct verb *of = NULL;
        if (arg && !(of = find_verb(arg))) {
                ctl_error(-EINVAL, "help: unknown command '%s'", arg);
                return EXIT_USAGE;
        }
        if (opt_list) {
                for (size_t i = 0; !of && i < N_VERBS; i++)
                        printf("%s\n", verbs[i].name);
                /* "--name[=ARG] [-x]" */
                for (size_t i = 0; of && i < N_OPTS; i++) {
                        const struct opt_def *d = &opt_defs[i];
                        if (!opt_of(d, of))
                                continue;
                        printf("--%s%s%s", d->name, d->arg ? "=" : "", d->arg ? d->arg : "");
                        if (d->id < 256)
                                printf(" -%c", d->id);
                        printf("\n");
                }
                return 0;
        }
        if (opt_json) {
                print_help_json(of);
                return 0;
        }
        if (of)
                verb_usage(stdout, of);
        else
                usage(stdout);
        return 0;
}

/* A number of seconds > 0 (top -d). */
static int parse_seconds(const char *s, double *ret) {
        char *end;
        errno = 0;
        double v = strtod(s, &end);
        if (errno || end == s || *end || !isfinite(v) || v < 0.01 || v > 86400)
                return -EINVAL;
        *ret = v;
        return 0;
}

/* What the command line says, the verb's arguments aside. */
struct cmdline {
        struct ctl_opts o;
        const char *path;               /* --socket */
        bool help, version;
        const struct opt_def *used[N_OPTS]; /* the verb options given */
        size_t n_used;
};

/* An option whose argument is a number (sizes, counts, seconds): 0, or
 * EXIT_USAGE with a message. */
static int take_number(struct ctl_opts *o, const struct opt_def *d, int c, char *value) {
        switch (c) {
        case OPT_HEAP:
        case OPT_WINDOW:
                if (run_parse_size(value, c == OPT_HEAP ? &o->heap : &o->window) < 0) {
                        fprintf(stderr, "hbgctl: --%s: '%s' is not a %s (a number, optionally with K, M or G)\n",
                                d->name, value, c == OPT_HEAP ? "size in bytes" : "number of tasks");
                        return EXIT_USAGE;
                }
                break;
        case OPT_DURATION: {
                char *end;
                errno = 0;
                double t = strtod(value, &end);
                if (errno || end == value || *end || !isfinite(t) || t < 0.001 || t > 600) {
                        fprintf(stderr, "hbgctl: --duration: '%s' is not a number of seconds (0.001 to 600)\n", value);
                        return EXIT_USAGE;
                }
                o->trace_duration_ms = (uint32_t)(t * 1000 + 0.5);
                break;
        }
        case OPT_SESSION: {
                char *end;
                errno = 0;
                unsigned long long n = strtoull(value, &end, 10);
                if (errno || end == value || *end || *value == '-' || n == 0) {
                        fprintf(stderr, "hbgctl: --session: '%s' is not a session number (as `hbgctl sessions` shows)\n",
                                value);
                        return EXIT_USAGE;
                }
                o->trace_session = n;
                break;
        }
        case OPT_ITERATIONS: {
                char *end;
                errno = 0;
                long n = strtol(value, &end, 10);
                if (errno || end == value || *end || n < 1) {
                        fprintf(stderr, "hbgctl: -n: '%s' is not a number of snapshots (1 or more)\n", value);
                        return EXIT_USAGE;
                }
                o->iterations = n;
                break;
        }
        case OPT_TIMEOUT: {
                char *end;
                errno = 0;
                double t = strtod(value, &end);
                if (errno || end == value || *end || !isfinite(t) || t < 0 || t > 86400) {
                        fprintf(stderr, "hbgctl: --timeout: '%s' is not a number of seconds (0 to 86400)\n",
                                value);
                        return EXIT_USAGE;
                }
                o->timeout_s = t;
                break;
        }
        case OPT_DELAY:
                if (parse_seconds(value, &o->delay_s) < 0) {
                        fprintf(stderr, "hbgctl: -d: '%s' is not a number of seconds (0.01 to 86400)\n",
                                value);
                        return EXIT_USAGE;
                }
                break;
        }
        return 0;
}

/* One option d (its id c) with its argument: 0, or EXIT_USAGE with a
 * message. */
static int take_option(struct cmdline *cl, const struct opt_def *d, int c, char *value) {
        struct ctl_opts *o = &cl->o;
        switch (c) {
        case OPT_SOCKET:
                cl->path = value;
                break;
        case OPT_JSON:
                opt_json = true;
                break;
        case OPT_HELP:
                cl->help = true;
                break;
        case OPT_VERSION:
                cl->version = true;
                break;
        case OPT_PROGRESS:
                o->progress = true;
                break;
        case OPT_DOT:
                o->dot = value;
                break;
        case OPT_DRY_RUN:
                o->dry_run = true;
                break;
        case OPT_LIST:
                opt_list = true;
                break;
        case OPT_OUTPUT:
                opt_output = value;
                break;
        case OPT_FORMAT:
                o->metrics_format = value;
                break;
        case OPT_LISTEN:
                o->listen = value;
                break;
        case OPT_PER_UID:
                o->per_uid = true;
                break;
        case OPT_SVG:
                o->trace_svg = value;
                break;
        case OPT_BATCH:
                o->batch = true;
                break;
        default:
                return take_number(o, d, c, value);
        }
        return 0;
}

/* Every option, before or after the command (getopt_long's tables made
 * from opt_defs[]): 0, or EXIT_USAGE with a message. */
static int take_options(int argc, char **argv, struct cmdline *cl) {
        struct option lopts[N_OPTS + 1];
        char shorts[2 * N_OPTS + 2] = ":";
        size_t ns = 1;
        for (size_t i = 0; i < N_OPTS; i++) {
                lopts[i] = (struct option){ opt_defs[i].name, opt_defs[i].arg ? required_argument : no_argument,
                                            NULL, opt_defs[i].id };
                if (opt_defs[i].id < 256) {
                        shorts[ns++] = (char)opt_defs[i].id;
                        if (opt_defs[i].arg)
                                shorts[ns++] = ':';
                }
        }
        lopts[N_OPTS] = (struct option){ 0 };
        shorts[ns] = 0;
        int c;
        opterr = 0;
        while ((c = getopt_long(argc, argv, shorts, lopts, NULL)) != -1) {
                const struct opt_def *d = NULL;
                for (size_t i = 0; i < N_OPTS && !d; i++)
                        if (opt_defs[i].id == c)
                                d = &opt_defs[i];
                if (c == ':') {
                        fprintf(stderr, "hbgctl: option '%s' needs an argument\n", argv[optind - 1]);
                        return EXIT_USAGE;
                }
                if (!d) {
                        if (optopt > 0 && optopt < 256)
                                fprintf(stderr, "hbgctl: unknown option '-%c' (try --help)\n", optopt);
                        else
                                fprintf(stderr, "hbgctl: unknown option '%s' (try --help)\n", argv[optind - 1]);
                        return EXIT_USAGE;
                }
                if (d->verb && cl->n_used < N_OPTS)
                        cl->used[cl->n_used++] = d;
                int rc = take_option(cl, d, c, optarg);
                if (rc)
                        return rc;
        }
        return 0;
}

/* The verb's options and arguments (argv[optind..]): *ret_arg its one
 * argument (o->args when more); 0, or EXIT_USAGE with a message. */
static int take_arguments(const struct verb *v, struct cmdline *cl, int argc, char **argv, const char **ret_arg) {
        for (size_t i = 0; i < cl->n_used; i++)
                if (!opt_of(cl->used[i], v)) {
                        fprintf(stderr, "hbgctl: option '--%s' is an option of %s, not of %s\n", cl->used[i]->name,
                                cl->used[i]->verb, v->name);
                        return EXIT_USAGE;
                }
        const char *arg = NULL;
        if (v->n_args > 1) {
                if (argc - optind < (int)v->n_args) {
                        fprintf(stderr, "hbgctl: %s needs a %s\n", v->name, v->arg_what);
                        return EXIT_USAGE;
                }
                cl->o.args = (const char *const *)&argv[optind];
                arg = argv[optind];
                optind += (int)v->n_args;
        } else if (v->arg && optind < argc)
                arg = argv[optind++];
        else if (v->arg && !v->arg_optional) {
                fprintf(stderr, "hbgctl: %s needs a %s\n", v->name, v->arg_what);
                return EXIT_USAGE;
        }
        if (optind < argc) {
                fprintf(stderr, "hbgctl: unexpected argument '%s'\n", argv[optind]);
                return EXIT_USAGE;
        }
        *ret_arg = arg;
        return 0;
}

/* Run the verb: its exit status. Every failure with --json is one JSON
 * object on stdout too, unless the verb printed its own (usage errors
 * print none). */
static int run_verb(const struct verb *v, const struct ctl_opts *o, const char *arg) {
        int rc = v->run(v, o, arg);
        if (rc != 0 && rc != EXIT_USAGE && opt_json && !ctl_json_printed()) {
                json_object *j = json_object_new_object();
                json_object_object_add(j, "error", ctl_error_json(rc));
                print_json(j);
                json_object_put(j);
        }
        return rc;
}

int main(int argc, char **argv) {
        struct cmdline cl = { .o = { .iterations = -1, .delay_s = 1.0, .timeout_s = 30.0, .trace_duration_ms = 1000 } };
        int rc = take_options(argc, argv, &cl);
        if (rc)
                return rc;
        if (cl.version && !cl.help)
                return verb_version(NULL, &cl.o, NULL);
        const char *name = optind < argc ? argv[optind++] : NULL;
        const struct verb *v = find_verb(name ? name : "status");
        if (!v) {
                fprintf(stderr, "hbgctl: unknown command '%s' (", name);
                for (size_t i = 0; i < N_VERBS; i++)
                        fprintf(stderr, "%s%s", i ? ", " : "", verbs[i].name);
                fprintf(stderr, ")\n");
                return EXIT_USAGE;
        }
        if (cl.help) {
                if (name)
                        verb_usage(stdout, v);
                else
                        usage(stdout);
                return 0;
        }
        const char *arg = NULL;
        rc = take_arguments(v, &cl, argc, argv, &arg);
        if (rc)
                return rc;
        cl.o.socket = wire_socket_path(cl.path);
        return run_verb(v, &cl.o, arg);
}
