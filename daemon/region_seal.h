/* SPDX-License-Identifier: MIT */
/*
 * Sealing a client's submission memfd F_SEAL_FUTURE_WRITE on the client's
 * behalf (a client that rang before it sealed the region itself, as one
 * of protocol 1.5 or older does; docs/PROTOCOL.md).
 *
 * F_ADD_SEALS takes the file's lock, which the client can hold for as
 * long as it likes: a punch of the region holds it for the whole punch,
 * and a write(2) into the memfd from a buffer that faults slowly (a FUSE
 * mapping whose server does not answer) for as long as that takes. So
 * the seal runs on a thread of its own, which touches nothing but this
 * object: a seal that never returns holds that thread and its own
 * session's service back, and no thread that serves other clients. The
 * result comes back on the io thread, through an eventfd in its loop.
 */
#pragma once

#include "daemon/io_loop.h"

struct region_seal;

/* Called on the io thread once the seal is on (0) or cannot be (a
 * negative errno: the client sealed the seals, F_SEAL_SEAL, without
 * this one); the object is gone by then. Not called after
 * region_seal_abandon(). */
typedef void (*region_seal_done)(void *userdata, int result);

/* Start sealing fd (duplicated: the caller may close its own). 0 and
 * *ret, or a negative errno (no thread, no descriptor); done is not called
 * then. The object is the io thread's until done ran or it is abandoned. */
int region_seal_start(struct io_loop *loop, int fd, region_seal_done done, void *userdata,
                      struct region_seal **ret);
/* Before done: done will not be called; the thread, if still in the
 * seal, frees what is left when it returns (it holds a duplicate of the
 * memfd until then, so the caller should keep the region charged to its
 * owner until done, and abandon only when hbgd stops). io thread;
 * accepts NULL. */
void region_seal_abandon(struct region_seal *s);
