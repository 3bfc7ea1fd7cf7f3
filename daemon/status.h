/* SPDX-License-Identifier: MIT */
/* Status requests (daemon/status.c). */
#pragma once

struct conn;
struct Hbg__StatusRequest;

/* Answer a status request on c. 0, or a negative errno if the reply could
 * not be sent (the caller closes the connection). */
int status_reply(struct conn *c, const struct Hbg__StatusRequest *rq);
