/* SPDX-License-Identifier: MIT */
/*
 * hbgctl: show what hbgd is doing.
 *   hbgctl [--socket PATH] [status|threads|sessions|kernels|version]
 * Exit: 0 ok, 1 failure, 2 bad usage, 3 hbgd not running.
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "proto/wire.h"

#ifndef HBG_VERSION
#define HBG_VERSION "0.0.0"
#endif

enum { EXIT_USAGE = 2, EXIT_NOT_RUNNING = 3 };

static int connect_to(const char *path) {
        struct sockaddr_un sa = { .sun_family = AF_UNIX };
        if (strlen(path) >= sizeof(sa.sun_path)) {
                fprintf(stderr, "hbgctl: socket path too long: %s\n", path);
                return -EXIT_USAGE;
        }
        strcpy(sa.sun_path, path);
        int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
        if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
                int err = errno;
                if (fd >= 0)
                        close(fd);
                fprintf(stderr, "hbgctl: hbgd is not running on %s: %s\n", path, strerror(err));
                return -EXIT_NOT_RUNNING;
        }
        return fd;
}

/* Send one envelope, receive one (blocking with a timeout). */
static Hbg__Envelope *roundtrip(int fd, Hbg__Envelope *env) {
        if (wire_send(fd, env, NULL, 0, HBG_WIRE_MAX_MSG_DEFAULT) < 0) {
                fprintf(stderr, "hbgctl: cannot talk to hbgd: %s\n", strerror(errno));
                return NULL;
        }
        struct pollfd p = { .fd = fd, .events = POLLIN };
        if (poll(&p, 1, 10000) <= 0) {
                fprintf(stderr, "hbgctl: hbgd did not answer within 10 s\n");
                return NULL;
        }
        Hbg__Envelope *reply = NULL;
        int fds[HBG_WIRE_MAX_FDS];
        unsigned nfds = 0;
        int err = wire_recv(fd, 16u << 20, &reply, fds, 0, &nfds);
        if (err < 0) {
                fprintf(stderr, "hbgctl: bad reply from hbgd: %s\n", strerror(-err));
                return NULL;
        }
        if (reply->msg_case == HBG__ENVELOPE__MSG_ERROR) {
                fprintf(stderr, "hbgctl: hbgd: %s\n", reply->error->message);
                wire_free(reply);
                return NULL;
        }
        return reply;
}

static void print_daemon(const Hbg__DaemonStatus *d) {
        printf("hbgd %s, pid %u, up %" PRIu64 " s, %s\n", d->version, d->pid, d->uptime_ms / 1000,
               d->io_backend);
        printf("threads   %u\nclusters  %u\nsessions  %u\ntasks     %" PRIu64
               " completed\ngraphs    %" PRIu64 " retired, %" PRIu64 " failed\n",
               d->threads, d->clusters, d->sessions, d->tasks_completed, d->graphs_retired,
               d->graphs_failed);
}

static void print_threads(const Hbg__StatusReply *r) {
        printf("%-6s %8s %12s %12s %12s %10s %10s %10s %8s %8s\n", "thread", "clusters", "classified",
               "dispatched", "published", "failsafe", "advances", "cas_fail", "parks", "wakeups");
        for (size_t i = 0; i < r->n_threads; i++) {
                const Hbg__ThreadStatus *t = r->threads[i];
                printf("%-6u %8u %12" PRIu64 " %12" PRIu64 " %12" PRIu64 " %10" PRIu64 " %10" PRIu64
                       " %10" PRIu64 " %8" PRIu64 " %8" PRIu64 "\n",
                       t->index, t->clusters, t->classified, t->dispatched, t->published,
                       t->failsafe_pushes, t->watermark_advances, t->watermark_cas_failures,
                       t->parks, t->wakeups);
        }
}

static void print_sessions(const Hbg__StatusReply *r) {
        printf("%-8s %-8s %-6s %-24s %12s %12s %10s %8s\n", "session", "pid", "uid", "name",
               "submitted", "watermark", "graphs", "failed");
        for (size_t i = 0; i < r->n_sessions; i++) {
                const Hbg__SessionStatus *s = r->sessions[i];
                printf("%-8" PRIu64 " %-8u %-6u %-24s %12" PRIu64 " %12" PRIu64 " %10" PRIu64
                       " %8" PRIu64 "\n",
                       s->session_id, s->pid, s->uid, s->name, s->submitted, s->watermark,
                       s->graphs_retired, s->graphs_failed);
        }
}

static void print_kernels(const Hbg__StatusReply *r) {
        printf("%-4s %-18s %s\n", "id", "kernel", "arguments");
        for (size_t i = 0; i < r->n_kernels; i++) {
                const Hbg__KernelInfo *k = r->kernels[i];
                printf("%-4u %-18s ", k->id, k->name);
                for (size_t j = 0; j < k->n_args; j++)
                        printf("%s%s %s", j ? ", " : "", k->args[j]->kind, k->args[j]->name);
                printf("\n");
        }
}

static void usage(FILE *f) {
        fprintf(f, "Usage: hbgctl [--socket PATH] [status|threads|sessions|kernels|version]\n"
                   "Show what hbgd is doing. --socket defaults to $HBG_SOCKET, then %s.\n"
                   "Exit status: 0 ok, 1 failure, 2 bad usage, 3 hbgd not running.\n",
                "/run/hbgd/hbgd.sock");
}

int main(int argc, char **argv) {
        static const struct option opts[] = {
                { "socket", required_argument, NULL, 's' },
                { "help", no_argument, NULL, 'h' },
                {},
        };
        const char *path = getenv("HBG_SOCKET");
        int c;
        while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
                switch (c) {
                case 's':
                        path = optarg;
                        break;
                case 'h':
                        usage(stdout);
                        return 0;
                default:
                        fprintf(stderr, "hbgctl: try --help\n");
                        return EXIT_USAGE;
                }
        }
        const char *verb = optind < argc ? argv[optind++] : "status";
        if (optind < argc) {
                fprintf(stderr, "hbgctl: unexpected argument '%s'\n", argv[optind]);
                return EXIT_USAGE;
        }
        Hbg__StatusKind kind;
        if (strcmp(verb, "status") == 0)
                kind = HBG__STATUS_KIND__STATUS_DAEMON;
        else if (strcmp(verb, "threads") == 0)
                kind = HBG__STATUS_KIND__STATUS_THREADS;
        else if (strcmp(verb, "sessions") == 0)
                kind = HBG__STATUS_KIND__STATUS_SESSIONS;
        else if (strcmp(verb, "kernels") == 0)
                kind = HBG__STATUS_KIND__STATUS_KERNELS;
        else if (strcmp(verb, "version") == 0) {
                printf("hbgctl %s\n", HBG_VERSION);
                return 0;
        } else {
                fprintf(stderr, "hbgctl: unknown command '%s' (status, threads, sessions, kernels, version)\n",
                        verb);
                return EXIT_USAGE;
        }
        if (!path || !*path)
                path = "/run/hbgd/hbgd.sock";

        int fd = connect_to(path);
        if (fd < 0)
                return -fd;
        Hbg__Hello hello = HBG__HELLO__INIT;
        hello.version_major = HBG_PROTO_MAJOR;
        hello.version_minor = HBG_PROTO_MINOR;
        hello.name = (char *)"hbgctl";
        Hbg__Envelope env = HBG__ENVELOPE__INIT;
        env.msg_case = HBG__ENVELOPE__MSG_HELLO;
        env.hello = &hello;
        Hbg__Envelope *reply = roundtrip(fd, &env);
        if (!reply) {
                close(fd);
                return 1;
        }
        wire_free(reply);
        Hbg__StatusRequest rq = HBG__STATUS_REQUEST__INIT;
        rq.kind = kind;
        env = (Hbg__Envelope)HBG__ENVELOPE__INIT;
        env.msg_case = HBG__ENVELOPE__MSG_STATUS_REQUEST;
        env.status_request = &rq;
        reply = roundtrip(fd, &env);
        close(fd);
        if (!reply || reply->msg_case != HBG__ENVELOPE__MSG_STATUS_REPLY) {
                wire_free(reply);
                return 1;
        }
        const Hbg__StatusReply *r = reply->status_reply;
        if (kind == HBG__STATUS_KIND__STATUS_DAEMON && r->daemon) {
                print_daemon(r->daemon);
                if (r->n_sessions) {
                        printf("\n");
                        print_sessions(r);
                }
        } else if (kind == HBG__STATUS_KIND__STATUS_THREADS) {
                print_threads(r);
        } else if (kind == HBG__STATUS_KIND__STATUS_SESSIONS) {
                print_sessions(r);
        } else if (kind == HBG__STATUS_KIND__STATUS_KERNELS) {
                print_kernels(r);
        }
        wire_free(reply);
        return 0;
}
