/* SPDX-License-Identifier: MIT */
/* A session's geometry under the config (daemon/session_geometry.h). */
#include "daemon/session_geometry.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>

static uint64_t pick(uint64_t asked, uint64_t dflt) {
        return asked ? asked : dflt;
}

int session_geometry(const struct hbgd_config *cfg, const struct hbg_geometry_request *asked,
                     struct hbg_geometry *ret, char *msg, size_t msg_len) {
        const struct hbg_geometry_request *dflt = &cfg->session_default;
        struct hbg_geometry_request req = {
                .task_window = pick(asked->task_window, dflt->task_window),
                .flag_window = pick(asked->flag_window, dflt->flag_window),
                .heap_size = pick(asked->heap_size, dflt->heap_size),
                .mailbox_entries = pick(asked->mailbox_entries, dflt->mailbox_entries),
                .graph_table_entries = pick(asked->graph_table_entries, dflt->graph_table_entries),
        };
        /* A default flag window follows the task window when only that
         * was asked for. */
        if (!asked->flag_window && asked->task_window)
                req.flag_window = req.task_window;
        if (req.task_window > cfg->max_task_window) {
                snprintf(msg, msg_len, "task_window %" PRIu64 " is above [limits] max_task_window = %" PRIu64,
                         req.task_window, cfg->max_task_window);
                return -E2BIG;
        }
        if (req.heap_size > cfg->max_heap_size) {
                snprintf(msg, msg_len, "heap_size %" PRIu64 " is above [limits] max_heap_size = %" PRIu64,
                         req.heap_size, cfg->max_heap_size);
                return -E2BIG;
        }
        const char *why = NULL;
        int err = geometry_init(ret, &req, &why);
        if (err < 0)
                snprintf(msg, msg_len, "invalid session geometry: %s", why);
        return err;
}

