/* SPDX-License-Identifier: MIT */
/* hbgd: argument parsing and wiring only; daemon.c wires the io side. */
#include <errno.h>
#include <getopt.h>
#include <malloc.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "daemon/config.h"
#include "daemon/daemon.h"
#include "daemon/log.h"
#include "proto/wire.h"

static void usage(FILE *f) {
        fprintf(f,
                "Usage: hbgd [OPTIONS]\n"
                "Run the hbg task-graph daemon in the foreground.\n\n"
                "  --socket PATH   listen on PATH (default %s, or the socket\n"
                "                  passed by systemd socket activation)\n"
                "  --config FILE   read settings from FILE (INI; options given on the\n"
                "                  command line win over it); SIGHUP re-reads it\n"
                "  --threads N     scheduler threads (default 4)\n"
                "  --clusters N    core clusters (default 8)\n"
                "  --completion=MODE  completion policy: eager (default), lazy,\n"
                "                  resolver (needs 2 threads or more) or eager-batched\n"
                "  --help          this text\n"
                "  --version       print the version\n\n"
                "Environment: HBGD_IO=epoll forces the epoll event loop.\n",
                HBG_DEFAULT_SOCKET);
}

static int parse_uint(const char *opt, const char *s, unsigned max, unsigned *ret) {
        char *end;
        errno = 0;
        unsigned long v = strtoul(s, &end, 10);
        if (errno || *end || end == s || v > max) {
                fprintf(stderr, "hbgd: %s: '%s' is not a number between 0 and %u\n", opt, s, max);
                return -EINVAL;
        }
        *ret = (unsigned)v;
        return 0;
}

int main(int argc, char **argv) {
        static const struct option opts[] = {
                { "socket", required_argument, NULL, 's' },
                { "config", required_argument, NULL, 'c' },
                { "threads", required_argument, NULL, 't' },
                { "clusters", required_argument, NULL, 'C' },
                { "completion", required_argument, NULL, 'm' },
                { "help", no_argument, NULL, 'h' },
                { "version", no_argument, NULL, 'V' },
                {},
        };
        struct hbgd_config cfg;
        int c;

        /* Session start and end allocate and free the same few hundred KiB
         * each time: keep it instead of giving it back to the kernel and
         * faulting it in again (glibc's dynamic mmap threshold and brk
         * trimming cost ~0.2 ms of page faults and TLB shootdowns per
         * connect). A fixed threshold also ends the dynamic one. */
        mallopt(M_MMAP_THRESHOLD, 1 << 20);
        mallopt(M_TRIM_THRESHOLD, 64 << 20);
        hbgd_config_default(&cfg);
        /* The config file first, so that options override it. */
        for (int i = 1; i < argc; i++) {
                const char *path = NULL;
                if (strcmp(argv[i], "--config") == 0 && i + 1 < argc)
                        path = argv[i + 1];
                else if (strncmp(argv[i], "--config=", 9) == 0)
                        path = argv[i] + 9;
                if (path) {
                        char err[512];
                        if (strlen(path) >= sizeof(cfg.config_path)) {
                                fprintf(stderr, "hbgd: --config: path too long\n");
                                return 2;
                        }
                        snprintf(cfg.config_path, sizeof(cfg.config_path), "%s", path);
                        if (hbgd_config_load(&cfg, path, err, sizeof(err)) < 0) {
                                fprintf(stderr, "hbgd: %s\n", err);
                                return 2;
                        }
                }
        }
        while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
                switch (c) {
                case 's':
                        if (strlen(optarg) >= sizeof(cfg.socket_path)) {
                                fprintf(stderr, "hbgd: --socket: path longer than %zu bytes\n",
                                        sizeof(cfg.socket_path) - 1);
                                return 2;
                        }
                        snprintf(cfg.socket_path, sizeof(cfg.socket_path), "%s", optarg);
                        break;
                case 'c':
                        break; /* loaded above */
                case 't':
                        if (parse_uint("--threads", optarg, 64, &cfg.engine.threads) < 0)
                                return 2;
                        break;
                case 'C':
                        if (parse_uint("--clusters", optarg, 1024, &cfg.engine.clusters) < 0)
                                return 2;
                        break;
                case 'm':
                        if (hbg_completion_mode_parse(optarg, &cfg.engine.completion_mode) < 0) {
                                fprintf(stderr, "hbgd: --completion: '%s' is not one of eager, lazy, resolver, eager-batched\n",
                                        optarg);
                                return 2;
                        }
                        break;
                case 'h':
                        usage(stdout);
                        return 0;
                case 'V':
                        printf("hbgd %s\n", HBG_VERSION);
                        return 0;
                default:
                        fprintf(stderr, "hbgd: try --help\n");
                        return 2;
                }
        }
        if (optind < argc) {
                fprintf(stderr, "hbgd: unexpected argument '%s'\n", argv[optind]);
                return 2;
        }
        const char *io = getenv("HBGD_IO");
        cfg.force_epoll = io && strcmp(io, "epoll") == 0;
        const char *why;
        if (hbg_engine_config_validate(&cfg.engine, &why) < 0) {
                fprintf(stderr, "hbgd: %s\n", why);
                return 2;
        }

        /* Signals are read from a signalfd by the io thread: block them
         * before any thread exists, so every thread inherits the mask. */
        sigset_t mask;
        sigemptyset(&mask);
        sigaddset(&mask, SIGTERM);
        sigaddset(&mask, SIGINT);
        sigaddset(&mask, SIGHUP);
        sigprocmask(SIG_BLOCK, &mask, NULL);
        signal(SIGPIPE, SIG_IGN);

        struct hbgd *d;
        hbgd_set_log_level(cfg.log_level);
        if (hbgd_new(&d, &cfg) < 0)
                return 1;
        int err = hbgd_run(d);
        hbgd_free(d);
        return err < 0 ? 1 : 0;
}
