/* SPDX-License-Identifier: MIT */
/* What the eager policy (completion_eager.c) and its batched sibling
 * (completion_eager_batched.c) share: the retry of deferred ids. Inline,
 * so that each policy's finish is a direct call, as in one file. */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "daemon/engine/ring.h"

/* tick, for both: publish the deferred ids that may be now (smallest
 * first), each then finished as the policy finishes a published id. */
static inline bool completion_eager_publish_deferred(struct sched_thread *t, struct hbg_ring *r,
                                                     void (*finish)(struct sched_thread *, struct hbg_ring *,
                                                                    uint64_t)) {
        struct hbg_completer *c = ring_completer(t, r);
        uint64_t id;
        bool did = false;

        while (completer_retry_deferred(c, &id) == 1) {
                finish(t, r, id);
                did = true;
        }
        return did;
}
