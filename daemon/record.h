/* SPDX-License-Identifier: MIT */
/* Recording a graph for replay (daemon/record.c). */
#pragma once

#include <stddef.h>
#include <stdint.h>

#include "daemon/config.h"
#include "daemon/session.h"

/* Record the `tasks` tasks in memfd fd (the caller keeps and closes it)
 * as a graph of session s. 0 and its number, or a negative errno with a
 * message for the client in msg[]. */
int session_record(struct session *s, const struct hbgd_config *cfg, int fd, uint64_t tasks,
                   uint32_t *ret_graph, char *msg, size_t msg_len);
