/* SPDX-License-Identifier: MIT */
/* mailbox.c: the client's reports for external tasks (§10.5). */
#pragma once

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

struct hbg_ring;
struct sched_thread;

/* Mailbox consumer (try-lock, one thread at a time): a ring's
 * (hbg_ring.mailbox_read, starting a cache line); the entries are
 * shared memory (hbg_ring.mailbox). */
struct ring_mailbox_reader {
        _Atomic uint32_t lock;
        _Atomic uint64_t head;
};

bool mailbox_poll(struct sched_thread *t, struct hbg_ring *r);
