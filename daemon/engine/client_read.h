/* SPDX-License-Identifier: MIT */
/*
 * Reads of a session's submission region by a thread that serves every
 * client (the io thread, the slow-work thread): through the region's memfd,
 * not through hbgd's mapping of it (SECURITY.md, "punching holes").
 *
 * A client may punch a hole in its own region (fallocate, MADV_REMOVE)
 * while hbgd reads it. Linux makes a fault on a page inside a hole being
 * punched wait until the whole punch is done, about 0.25 ms per MiB of
 * pages it frees (a 1 GiB heap: a quarter of a second). A read(2) of the
 * memfd waits for no punch: it copies the pages that are there, and a
 * hole reads as zeros. Scheduler threads read the region through the
 * mapping, as a kernel does: for them a punch costs as a kernel turn does.
 */
#pragma once

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

struct hbg_ring;

/* The client's cursor at `at` (inside the region), with acquire order:
 * what the caller reads after it (client_read()) is at least as new. */
uint64_t client_read_u64(const struct hbg_ring *r, const _Atomic uint64_t *at);
/* Copy len bytes at `at` (inside the region) into out; bytes that could
 * not be read are zero. */
void client_read(const struct hbg_ring *r, const void *at, void *out, size_t len);
