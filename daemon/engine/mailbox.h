/* SPDX-License-Identifier: MIT */
/* mailbox.c: the client's reports for external tasks (§10.5). */
#pragma once

#include <stdbool.h>

struct hbg_ring;
struct sched_thread;

bool mailbox_poll(struct sched_thread *t, struct hbg_ring *r);
