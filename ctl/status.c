/* SPDX-License-Identifier: MIT */
/* The status verbs: one StatusRequest to hbgd, its reply printed. */
#include <stdio.h>
#include <unistd.h>

#include "ctl/ctl.h"

int cmd_status(const char *path, Hbg__StatusKind kind) {
        int code;
        Hbg__Envelope *reply = ctl_status(path, kind, &code);
        if (!reply)
                return code;
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
