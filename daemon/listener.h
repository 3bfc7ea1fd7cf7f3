/* SPDX-License-Identifier: MIT */
/* hbgd's listening socket (daemon/listener.c). */
#pragma once

#include <stdint.h>

struct hbgd;
struct io_source;

/* The activated socket if systemd passed one, else bind cfg.socket_path. */
int listener_open(struct hbgd *d);
void listener_on_readable(struct io_source *src, uint32_t events, void *userdata);
void listener_close(struct hbgd *d);
