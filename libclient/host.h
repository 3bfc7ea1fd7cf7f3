/* SPDX-License-Identifier: MIT */
/* libclient/host.c for the other files of libhbgclient: host (external) tasks and the completion mailbox. */
#pragma once

#include "libclient/client_private.h"

/* Allocate the host function table (D slots). 0 or -ENOMEM. */
int hbgc_host_reserve(hbg_client *c);
/* Remember the host function of external task id (table reserved). */
void hbgc_host_register(hbg_client *c, uint64_t id, hbg_host_fn fn, void *userdata);
/* Run ready host tasks and post their completions (never blocks for
 * long); returns how many ran. Also harvests retired graphs. */
int hbgc_process(hbg_client *c);
/* Run external task id (taken from the ring by this thread) if it is ours
 * and still waiting, and post its status. 1 if a host function ran. */
int hbgc_host_run(hbg_client *c, uint64_t id);
/* Is task id complete? Without the client's completer cache: any thread. */
bool hbgc_task_done_shared(const hbg_client *c, uint64_t id);
void hbgc_host_free(hbg_client *c);
