/* SPDX-License-Identifier: MIT */
/* A connection to hbgd: the protocol spoken on it (daemon/conn.c). */
#pragma once

#include <stdint.h>

struct hbgd;
struct conn;

/* Take an accepted socket: check the peer, charge the connection, watch
 * it. A refused peer gets an Error record with the reason (refusal.c). */
void conn_accept(struct hbgd *d, int fd);
/* Closing one: conn_close.h. */
/* Close connections past their deadline (handshake / idle). */
void conn_expire(struct hbgd *d, int64_t now_ms);
