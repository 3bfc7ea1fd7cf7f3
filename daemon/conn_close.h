/* SPDX-License-Identifier: MIT */
/* Closing a connection and its session (daemon/conn_close.c). */
#pragma once

struct hbgd;
struct conn;
struct session;

/* Close a connection (and its session, asynchronously), logging `why` if
 * not NULL. Safe inside the connection's own callback: the memory is freed
 * by conn_free_dead() after the io round. */
void conn_close(struct conn *c, const char *why);
void conn_free_dead(struct hbgd *d);
/* session_close(), then what follows it: another look soon for a ring a
 * scheduler thread still holds, and the spare ring the session may have
 * taken, or room for one its memory gave back. */
void conn_close_session(struct hbgd *d, struct session *s, int reason);
