/* SPDX-License-Identifier: MIT */
/* The status verbs: one StatusRequest to hbgd, its reply printed. */
#include <stdio.h>
#include <unistd.h>

#include "ctl/ctl.h"

int cmd_status(const char *path, Hbg__StatusKind kind) {
        int fd = ctl_connect(path);
        if (fd < 0)
                return -fd;
        Hbg__Hello hello = HBG__HELLO__INIT;
        hello.version_major = HBG_PROTO_MAJOR;
        hello.version_minor = HBG_PROTO_MINOR;
        hello.name = (char *)"hbgctl";
        Hbg__Envelope env = HBG__ENVELOPE__INIT;
        env.msg_case = HBG__ENVELOPE__MSG_HELLO;
        env.hello = &hello;
        Hbg__Envelope *reply = ctl_roundtrip(fd, &env);
        if (!reply) {
                close(fd);
                return ctl_failure_exit();
        }
        wire_free(reply);
        Hbg__StatusRequest rq = HBG__STATUS_REQUEST__INIT;
        rq.kind = kind;
        env = (Hbg__Envelope)HBG__ENVELOPE__INIT;
        env.msg_case = HBG__ENVELOPE__MSG_STATUS_REQUEST;
        env.status_request = &rq;
        reply = ctl_roundtrip(fd, &env);
        close(fd);
        if (!reply)
                return ctl_failure_exit();
        if (reply->msg_case != HBG__ENVELOPE__MSG_STATUS_REPLY) {
                fprintf(stderr, "hbgctl: unexpected reply from hbgd (message %d)\n",
                        (int)reply->msg_case);
                wire_free(reply);
                return EXIT_FAIL;
        }
        const Hbg__StatusReply *r = reply->status_reply;
        if (opt_json) {
                json_object *o = pb_to_json(&r->base);
                print_json(o);
                json_object_put(o);
        } else if (kind == HBG__STATUS_KIND__STATUS_DAEMON) {
                if (r->daemon)
                        print_daemon(r->daemon);
                if (r->n_sessions) {
                        printf("\n");
                        print_sessions(r);
                }
        } else if (kind == HBG__STATUS_KIND__STATUS_THREADS) {
                print_threads(r);
        } else if (kind == HBG__STATUS_KIND__STATUS_SESSIONS) {
                print_sessions(r);
        } else if (kind == HBG__STATUS_KIND__STATUS_GRAPHS) {
                print_graphs(r);
        } else if (kind == HBG__STATUS_KIND__STATUS_KERNELS) {
                print_kernels(r);
        }
        wire_free(reply);
        return 0;
}
