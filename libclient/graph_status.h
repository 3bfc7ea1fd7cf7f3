/* SPDX-License-Identifier: MIT */
/* libclient/graph_status.c for the other files of libhbgclient: reading retired graphs back, graph statuses and errors. */
#pragma once

#include "libclient/client_private.h"

/* Read back graph entries retired since the last call. */
void hbgc_harvest(hbg_client *c);
/* Graph k: its outcome; returns o->status (1 running, 0 ok, < 0 failed). */
int hbgc_graph_state(hbg_client *c, uint64_t k, struct graph_outcome *o);
/* Record a failure as c's last error ("FN: graph K failed at task T
 * (kernel K): message"); returns o->status. */
int hbgc_graph_result(hbg_client *c, uint64_t k, const struct graph_outcome *o, const char *fn);
/* A host function of task id returned status < 0 (posted to hbgd). */
int hbgc_host_failed(hbg_client *c, uint64_t id, int status);
/* Is task id of a graph this client cancelled (not read back yet)? */
bool hbgc_host_cancelled(hbg_client *c, uint64_t id);
/* 0 if graph was submitted, else -EINVAL with a message. */
int hbgc_graph_check(hbg_client *c, uint64_t graph, const char *fn);
