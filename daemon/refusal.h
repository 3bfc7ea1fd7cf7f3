/* SPDX-License-Identifier: MIT */
/* Refused connections, kept until they read why (daemon/refusal.c). */
#pragma once

#include <stdint.h>
#include <sys/socket.h>

struct hbgd;

/* Refuse an accepted socket of peer cr: Error{code, why} at once, then
 * keep it (bounded) until the client closes, so that it reads the Error
 * before any reset; logged (rate limited). Takes fd. */
void refusal_start(struct hbgd *d, int fd, const struct ucred *cr, int code, const char *why);
/* Close refused connections past their deadline. */
void refusal_expire(struct hbgd *d, int64_t now_ms);
void refusal_close_all(struct hbgd *d);
