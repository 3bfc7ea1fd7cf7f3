/* SPDX-License-Identifier: MIT */
/* The status verbs: one StatusRequest to hbgd, its reply printed. */
#include <stdio.h>

#include "ctl/ctl.h"

int cmd_status(const struct ctl_opts *o, Hbg__StatusKind kind) {
        int rc;
        Hbg__Envelope *reply = ctl_status(o->socket, kind, &rc);
        if (!reply)
                return rc;
        json_object *j = status_json(kind, reply->status_reply);
        if (opt_json)
                print_json(j);
        else
                status_print_text(kind, j);
        json_object_put(j);
        wire_free(reply);
        return 0;
}
