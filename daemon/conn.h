/* SPDX-License-Identifier: MIT */
/* A connection to hbgd: the protocol spoken on it (daemon/conn.c). */
#pragma once

#include <stdint.h>

struct hbgd;
struct conn;

/* Take an accepted socket: check the peer, charge the connection, watch
 * it. A refused peer gets an Error record with the reason (refusal.c). */
void conn_accept(struct hbgd *d, int fd);
/* Close a connection (and its session, asynchronously), logging `why` if
 * not NULL. Safe inside the connection's own callback: the memory is freed
 * by conn_free_dead() after the io round. */
void conn_close(struct conn *c, const char *why);
void conn_free_dead(struct hbgd *d);
/* Close connections past their deadline (handshake / idle). */
void conn_expire(struct hbgd *d, int64_t now_ms);
