/* SPDX-License-Identifier: MIT */
/* hbgd: argument parsing and wiring only; daemon.c wires the io side. */
#include <errno.h>
#include <getopt.h>
#include <malloc.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <syslog.h>

#include "daemon/config.h"
#include "daemon/config_keys.h"
#include "daemon/daemon.h"
#include "daemon/engine/engine_kernels.h"
#include "daemon/kernel_modules.h"
#include "daemon/kernel_rows.h"
#include "daemon/log.h"
#include "proto/wire.h"

/* At exit, the log writer gets this long to write what is queued. */
#define LOG_DRAIN_MS 1000

/* hbgd's options: one entry each, the usage printed from it. */
enum { OPT_SOCKET = 256, OPT_CONFIG, OPT_THREADS, OPT_CLUSTERS, OPT_COMPLETION, OPT_CHECK_CONFIG,
       OPT_HELP = 'h', OPT_VERSION = 'V' };

static const struct opt_def {
        const char *name;
        int id;                 /* the short name when < 256 */
        int has_arg;            /* no_argument, required_argument, optional_argument */
        const char *arg;
        const char *help;
} opt_defs[] = {
        { "socket", OPT_SOCKET, required_argument, "PATH",
          "listen on PATH (default " HBG_DEFAULT_SOCKET ", or the socket\n"
          "passed by systemd socket activation)" },
        { "config", OPT_CONFIG, required_argument, "FILE",
          "read settings from FILE (INI; options given on the command\n"
          "line win over it); SIGHUP re-reads it" },
        { "threads", OPT_THREADS, required_argument, "N", "scheduler threads (default 4)" },
        { "clusters", OPT_CLUSTERS, required_argument, "N",
          "groups of task slots, not hardware (default 8)" },
        /* help: completion_help(), from the engine's table of policies */
        { "completion", OPT_COMPLETION, required_argument, "MODE", NULL },
        { "check-config", OPT_CHECK_CONFIG, optional_argument, "FILE",
          "check FILE (or --config's) as at start, print the\n"
          "effective settings, exit 0 (valid) or 1; starts nothing" },
        { "help", OPT_HELP, no_argument, NULL, "this text" },
        { "version", OPT_VERSION, no_argument, NULL, "print the version" },
};
#define N_OPTS (sizeof(opt_defs) / sizeof(opt_defs[0]))

/* --completion's help: the modes as the engine's table names them. */
static const char *completion_help(char *buf, size_t size) {
        snprintf(buf, size, "completion policy (default %s), one of:\n%s\n(MODE help: the names, one a line)",
                 completion_mode_name(HBG_COMPLETION_DEFAULT), completion_mode_list());
        return buf;
}

static void usage(FILE *f) {
        fprintf(f, "Usage: hbgd [OPTIONS]\n"
                   "       hbgd --check-config [FILE]\n"
                   "Run the hbg task-graph daemon in the foreground.\n\n");
        for (size_t i = 0; i < N_OPTS; i++) {
                const struct opt_def *d = &opt_defs[i];
                char head[64], s[8] = "", arg[32] = "";
                if (d->id < 256)
                        snprintf(s, sizeof(s), "-%c, ", d->id);
                if (d->has_arg == optional_argument)
                        snprintf(arg, sizeof(arg), "[=%s]", d->arg);
                else if (d->arg)
                        snprintf(arg, sizeof(arg), " %s", d->arg);
                snprintf(head, sizeof(head), "%s--%s%s", s, d->name, arg);
                fprintf(f, "  %-26s ", head);
                char help[256];
                const char *text = d->id == OPT_COMPLETION ? completion_help(help, sizeof(help)) : d->help;
                /* continuation lines line up under the first */
                for (const char *p = text; *p; p++) {
                        fputc(*p, f);
                        if (*p == '\n')
                                fprintf(f, "  %-26s ", "");
                }
                fputc('\n', f);
        }
        fprintf(f, "\nEnvironment: HBGD_IO=epoll forces the epoll event loop.\n");
}

/* --check-config: the settings as hbgd.conf would say them. */
static void print_config(const struct hbgd_config *cfg, const char *file) {
        if (file)
                printf("# hbgd %s: %s is valid. The settings hbgd would run with:\n", HBG_VERSION, file);
        else
                printf("# hbgd %s: no configuration file. The settings hbgd would run with:\n", HBG_VERSION);
        printf("# socket %s\n", cfg->socket_path);
        const char *section = "";
        for (size_t i = 0; hbgd_config_key_at(i); i++) {
                const struct hbgd_config_key *k = hbgd_config_key_at(i);
                char value[1024];
                if (strcmp(section, k->section) != 0) {
                        printf("%s[%s]\n", section[0] ? "\n" : "", k->section);
                        section = k->section;
                }
                hbgd_config_format(cfg, i, value, sizeof(value));
                printf("%s = %s\n", k->key, value);
        }
        const struct hbg_kernel_sig *s;
        for (size_t i = 0; (s = engine_kernel_sig(i)) != NULL; i++) {
                if (s->module)
                        printf("# module kernel %s (id %u) from %s\n", s->name, s->id, s->module);
        }
}

/* [kernels] modules, loaded before anything starts, and the kernel table
 * checked to fit the session reply: 0, or -EINVAL with every refusal
 * printed. */
static int load_modules(const struct hbgd_config *cfg) {
        char err[4096];
        if (kernel_modules_load(cfg->kernel_modules, err, sizeof(err)) == 0) {
                int r = kernel_rows_check_fit(err, sizeof(err));
                if (r == 0)
                        return 0;
                fprintf(stderr, "hbgd: %s\n", r == -EMSGSIZE ? err : strerror(-r));
                return -EINVAL;
        }
        for (char *save = NULL, *line = strtok_r(err, "\n", &save); line; line = strtok_r(NULL, "\n", &save))
                fprintf(stderr, "hbgd: %s\n", line);
        return -EINVAL;
}

static int parse_uint(const char *opt, const char *s, unsigned min, unsigned max, unsigned *ret) {
        char *end;
        errno = 0;
        unsigned long v = strtoul(s, &end, 10);
        if (errno || *end || end == s || s[0] == '-' || v < min || v > max) {
                fprintf(stderr, "hbgd: %s: '%s' is not a number between %u and %u\n", opt, s, min, max);
                return -EINVAL;
        }
        *ret = (unsigned)v;
        return 0;
}

/* The command line, before it is applied to the settings. */
struct args {
        const char *config, *sock_path, *threads, *clusters, *completion;
        bool check;                     /* --check-config */
};

/* Read the options into *a: true to go on, false to exit with *ret_exit
 * (--help, --version, a bad option). */
static bool read_args(int argc, char **argv, struct args *a, int *ret_exit) {
        struct option lopts[N_OPTS + 1];
        for (size_t i = 0; i < N_OPTS; i++)
                lopts[i] = (struct option){ opt_defs[i].name, opt_defs[i].has_arg, NULL, opt_defs[i].id };
        lopts[N_OPTS] = (struct option){ 0 };
        int c;
        opterr = 0;
        while ((c = getopt_long(argc, argv, "hV", lopts, NULL)) != -1) {
                switch (c) {
                case OPT_SOCKET:
                        a->sock_path = optarg;
                        break;
                case OPT_CONFIG:
                        a->config = optarg;
                        break;
                case OPT_THREADS:
                        a->threads = optarg;
                        break;
                case OPT_CLUSTERS:
                        a->clusters = optarg;
                        break;
                case OPT_COMPLETION:
                        a->completion = optarg;
                        break;
                case OPT_CHECK_CONFIG:
                        a->check = true;
                        if (optarg)
                                a->config = optarg;
                        break;
                case OPT_HELP:
                        usage(stdout);
                        *ret_exit = 0;
                        return false;
                case OPT_VERSION:
                        printf("hbgd %s\n", HBG_VERSION);
                        *ret_exit = 0;
                        return false;
                default:
                        if (optopt && optopt < 256)
                                fprintf(stderr, "hbgd: unknown option '-%c' (try --help)\n", optopt);
                        else if (optopt)
                                fprintf(stderr, "hbgd: option '%s' needs an argument\n", argv[optind - 1]);
                        else
                                fprintf(stderr, "hbgd: unknown option '%s' (try --help)\n", argv[optind - 1]);
                        *ret_exit = 2;
                        return false;
                }
        }
        /* hbgd --check-config FILE */
        if (a->check && optind + 1 == argc)
                a->config = argv[optind++];
        if (optind < argc) {
                fprintf(stderr, "hbgd: unexpected argument '%s'\n", argv[optind]);
                *ret_exit = 2;
                return false;
        }
        if (a->completion && strcmp(a->completion, "help") == 0) {
                /* What shell completion offers: the table's names. */
                for (unsigned m = 0; m < completion_mode_count(); m++)
                        printf("%s\n", completion_mode_name(m));
                *ret_exit = 0;
                return false;
        }
        return true;
}

/* The configuration file, then the options over it, into cfg, checked:
 * 0, or -EINVAL with every problem printed. */
static int apply_args(struct hbgd_config *cfg, const struct args *a) {
        if (a->config) {
                char err[4096];
                if (strlen(a->config) >= sizeof(cfg->config_path)) {
                        fprintf(stderr, "hbgd: --config: path too long\n");
                        return -EINVAL;
                }
                snprintf(cfg->config_path, sizeof(cfg->config_path), "%s", a->config);
                if (hbgd_config_load(cfg, a->config, err, sizeof(err)) < 0) {
                        /* every problem of the file, one a line */
                        for (char *save = NULL, *line = strtok_r(err, "\n", &save); line;
                             line = strtok_r(NULL, "\n", &save))
                                fprintf(stderr, "hbgd: %s\n", line);
                        return -EINVAL;
                }
        }
        if (a->sock_path) {
                if (strlen(a->sock_path) >= sizeof(cfg->socket_path)) {
                        fprintf(stderr, "hbgd: --socket: path longer than %zu bytes\n", sizeof(cfg->socket_path) - 1);
                        return -EINVAL;
                }
                snprintf(cfg->socket_path, sizeof(cfg->socket_path), "%s", a->sock_path);
        }
        if (a->threads && parse_uint("--threads", a->threads, 1, HBG_ENGINE_MAX_THREADS, &cfg->engine.threads) < 0)
                return -EINVAL;
        if (a->clusters && parse_uint("--clusters", a->clusters, 1, HBG_ENGINE_MAX_CLUSTERS, &cfg->engine.clusters) < 0)
                return -EINVAL;
        if (a->completion && completion_mode_parse(a->completion, &cfg->engine.completion_mode) < 0) {
                fprintf(stderr, "hbgd: --completion: '%s' is not one of %s\n", a->completion,
                        completion_mode_list());
                return -EINVAL;
        }
        const char *io = getenv("HBGD_IO");
        cfg->force_epoll = io && strcmp(io, "epoll") == 0;
        const char *why;
        if (engine_config_validate(&cfg->engine, &why) < 0) {
                fprintf(stderr, "hbgd: %s\n", why);
                return -EINVAL;
        }
        return 0;
}

/* Run hbgd with cfg until it is told to stop: the exit status. */
static int run_daemon(const struct hbgd_config *cfg) {
        struct hbgd *d;
        hbgd_set_log_level(cfg->log_level);
        /* From here on lines are written by the log's own thread (after
         * the signal mask: it inherits it). */
        int err = hbgd_log_start();
        if (err < 0) {
                fprintf(stderr, "hbgd: cannot start the log writer: %s\n", strerror(-err));
                return 1;
        }
        const struct hbg_kernel_sig *s;
        for (size_t i = 0; (s = engine_kernel_sig(i)) != NULL; i++) {
                if (s->module)
                        hbgd_log(LOG_NOTICE, "kernel module %s: kernel %s (id %u); its code runs inside hbgd",
                                 s->module, s->name, s->id);
        }
        err = hbgd_new(&d, cfg);
        if (err >= 0) {
                err = hbgd_run(d);
                hbgd_free(d);
        }
        /* What was logged is written before exit, unless the log's
         * reader is stuck (then those lines are lost, not hbgd's exit). */
        hbgd_log_stop(LOG_DRAIN_MS);
        return err < 0 ? 1 : 0;
}

int main(int argc, char **argv) {
        struct hbgd_config cfg;
        struct args a = { 0 };
        int rc;

        /* Session start and end allocate and free the same few hundred KiB
         * each time: keep it instead of giving it back to the kernel and
         * faulting it in again (glibc's dynamic mmap threshold and brk
         * trimming cost ~0.2 ms of page faults and TLB shootdowns per
         * connect). A fixed threshold also ends the dynamic one. */
        mallopt(M_MMAP_THRESHOLD, 1 << 20);
        mallopt(M_TRIM_THRESHOLD, 64 << 20);
        /* Signals are read from a signalfd by the io thread: block them
         * before any thread exists, so every thread inherits the mask;
         * before the kernel modules too, whose code may start threads of
         * its own as it loads. */
        sigset_t mask;
        sigemptyset(&mask);
        sigaddset(&mask, SIGTERM);
        sigaddset(&mask, SIGINT);
        sigaddset(&mask, SIGHUP);
        sigprocmask(SIG_BLOCK, &mask, NULL);
        signal(SIGPIPE, SIG_IGN);
        hbgd_config_default(&cfg);
        if (!read_args(argc, argv, &a, &rc))
                return rc;
        /* The file first, so that options override it. A failed check
         * exits 1; a failed start 2 (as before). */
        if (apply_args(&cfg, &a) < 0 || load_modules(&cfg) < 0)
                return a.check ? 1 : 2;
        if (a.check) {
                print_config(&cfg, a.config);
                return 0;
        }
        return run_daemon(&cfg);
}
