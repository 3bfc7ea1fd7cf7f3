/* SPDX-License-Identifier: MIT */
/*
 * hbgd's io side: the listening socket, client connections and their
 * sessions, doorbells, signals and shutdown. Everything here runs on the
 * io thread; the scheduler threads live in the engine (daemon/engine/engine.h).
 */
#pragma once

#include "daemon/config.h"

struct hbgd;

/* Set up (engine threads, io loop, socket: the activated one if any, else
 * bind config->socket_path). Signals SIGTERM/SIGINT/SIGHUP must already be
 * blocked in the calling thread. */
int hbgd_new(struct hbgd **ret, const struct hbgd_config *cfg);
/* Serve until SIGTERM/SIGINT and the shutdown that follows. 0 or -errno. */
int hbgd_run(struct hbgd *d);
struct hbgd *hbgd_free(struct hbgd *d);
