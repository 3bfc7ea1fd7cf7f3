/* SPDX-License-Identifier: MIT */
/*
 * hbgctl: show what hbgd is doing, and run graph files.
 *   hbgctl [--socket PATH] [--json] [status|sessions|graphs|threads|kernels|version]
 *   hbgctl [--socket PATH] [--json] run FILE          (docs/GRAPH_FILES.md)
 *   hbgctl [--socket PATH] metrics [--output FILE]    (docs/OPERATIONS.md, "Metrics")
 * Options are accepted before or after the verb.
 * Exit: 0 ok, 1 failure, 2 bad usage, 3 hbgd not running (or stopping),
 * 4 permission denied (the socket, or hbgd's [access]).
 */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ctl/ctl.h"

/* The verbs, like systemctl's: one entry each. `arg` names the argument a
 * verb takes (NULL: none). */
struct verb {
        const char *name;
        const char *arg;                /* in the usage */
        const char *arg_what;           /* when it is missing */
        const char *help;
        int (*run)(const struct verb *v, const char *path, const char *arg);
        Hbg__StatusKind kind;           /* for the status verbs */
};

static int verb_status(const struct verb *v, const char *path, const char *arg) {
        (void)arg;
        return cmd_status(path, v->kind);
}

static int verb_run(const struct verb *v, const char *path, const char *arg) {
        (void)v;
        return cmd_run(path, arg);
}

static int verb_metrics(const struct verb *v, const char *path, const char *arg) {
        (void)v, (void)arg;
        return cmd_metrics(path);
}

static int verb_version(const struct verb *v, const char *path, const char *arg) {
        (void)v, (void)path, (void)arg;
        if (opt_json)
                printf("{ \"hbgctl\": \"%s\" }\n", HBG_VERSION);
        else
                printf("hbgctl %s\n", HBG_VERSION);
        return 0;
}

static const struct verb verbs[] = {
        { "status", NULL, NULL, "the daemon and its sessions (default)", verb_status,
          HBG__STATUS_KIND__STATUS_DAEMON },
        { "sessions", NULL, NULL, "one line per session", verb_status, HBG__STATUS_KIND__STATUS_SESSIONS },
        { "graphs", NULL, NULL, "graph counters per session", verb_status, HBG__STATUS_KIND__STATUS_GRAPHS },
        { "threads", NULL, NULL, "one line per scheduler thread", verb_status,
          HBG__STATUS_KIND__STATUS_THREADS },
        { "kernels", NULL, NULL, "the built-in kernels and their arguments", verb_status,
          HBG__STATUS_KIND__STATUS_KERNELS },
        { "run", "FILE", "graph FILE", "run the graph described in a JSON file (docs/GRAPH_FILES.md)",
          verb_run, 0 },
        { "metrics", NULL, NULL, "OpenMetrics text for Prometheus (--output FILE: replace FILE atomically)",
          verb_metrics, HBG__STATUS_KIND__STATUS_METRICS },
        { "version", NULL, NULL, "hbgctl's version", verb_version, 0 },
};
#define N_VERBS (sizeof(verbs) / sizeof(verbs[0]))

static void usage(FILE *f) {
        fprintf(f, "Usage: hbgctl [--socket PATH] [--json] [COMMAND]\nCommands:\n");
        for (size_t i = 0; i < N_VERBS; i++) {
                char head[32];
                snprintf(head, sizeof(head), "%s%s%s", verbs[i].name, verbs[i].arg ? " " : "",
                         verbs[i].arg ? verbs[i].arg : "");
                fprintf(f, "  %-11s %s\n", head, verbs[i].help);
        }
        fprintf(f,
                "Options (before or after the command):\n"
                "  --socket PATH  hbgd's socket (default $HBG_SOCKET, then %s)\n"
                "  --json         print JSON\n"
                "  --output FILE  metrics: write FILE (atomically) instead of stdout\n"
                "Exit status: 0 ok, 1 failure, 2 bad usage, 3 hbgd not running or stopping,\n"
                "             4 permission denied (the socket, or hbgd's allowed users and groups).\n",
                HBG_DEFAULT_SOCKET);
}

static const struct verb *find_verb(const char *name) {
        for (size_t i = 0; i < N_VERBS; i++)
                if (strcmp(verbs[i].name, name) == 0)
                        return &verbs[i];
        return NULL;
}

int main(int argc, char **argv) {
        static const struct option opts[] = {
                { "socket", required_argument, NULL, 's' },
                { "json", no_argument, NULL, 'j' },
                { "output", required_argument, NULL, 'o' },
                { "help", no_argument, NULL, 'h' },
                {},
        };
        const char *path = NULL;
        int c;
        opterr = 0;
        while ((c = getopt_long(argc, argv, ":h", opts, NULL)) != -1) {
                switch (c) {
                case 's':
                        path = optarg;
                        break;
                case 'j':
                        opt_json = true;
                        break;
                case 'o':
                        opt_output = optarg;
                        break;
                case 'h':
                        usage(stdout);
                        return 0;
                case ':':
                        fprintf(stderr, "hbgctl: option '%s' needs an argument\n", argv[optind - 1]);
                        return EXIT_USAGE;
                default:
                        if (optopt)
                                fprintf(stderr, "hbgctl: unknown option '-%c' (try --help)\n", optopt);
                        else
                                fprintf(stderr, "hbgctl: unknown option '%s' (try --help)\n",
                                        argv[optind - 1]);
                        return EXIT_USAGE;
                }
        }
        const char *name = optind < argc ? argv[optind++] : "status";
        const struct verb *v = find_verb(name);
        if (!v) {
                fprintf(stderr, "hbgctl: unknown command '%s' (", name);
                for (size_t i = 0; i < N_VERBS; i++)
                        fprintf(stderr, "%s%s", i ? ", " : "", verbs[i].name);
                fprintf(stderr, ")\n");
                return EXIT_USAGE;
        }
        const char *arg = NULL;
        if (v->arg) {
                if (optind >= argc) {
                        fprintf(stderr, "hbgctl: %s needs a %s\n", v->name, v->arg_what);
                        return EXIT_USAGE;
                }
                arg = argv[optind++];
        }
        if (optind < argc) {
                fprintf(stderr, "hbgctl: unexpected argument '%s'\n", argv[optind]);
                return EXIT_USAGE;
        }
        if (opt_output && v->run != verb_metrics) {
                fprintf(stderr, "hbgctl: --output is an option of metrics only\n");
                return EXIT_USAGE;
        }
        return v->run(v, hbg_socket_path(path), arg);
}
