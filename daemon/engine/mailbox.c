/* SPDX-License-Identifier: MIT */
/*
 * The async completion mailbox (RUNTIME_LOGIC.md §10.5): the client's
 * reports for external tasks, consumed by one thread at a time.
 */
#include "daemon/engine/mailbox.h"

#include <errno.h>

#include "daemon/engine/complete.h"
#include "daemon/engine/engine_state.h"
#include "daemon/engine/retire.h"
#include "daemon/engine/ring.h"

bool mailbox_poll(struct sched_thread *t, struct hbg_ring *r) {
        if (atomic_load_explicit(&r->broken, memory_order_relaxed))
                return false;
        uint64_t m = r->g.mailbox_entries;
        uint64_t head = atomic_load_explicit(&r->mailbox_read.head, memory_order_relaxed);
        struct hbg_mailbox_entry *e0 = &r->mailbox[head & (m - 1)];
        /* Cheap unlocked peek first (a hint); then one consumer at a time. */
        uint32_t expected = 0;
        if (atomic_load_explicit(&e0->seq, memory_order_relaxed) != head + 1 ||
            !atomic_compare_exchange_strong(&r->mailbox_read.lock, &expected, 1))
                return false;

        unsigned n = 0;
        for (; n < m; n++) {
                uint64_t k = atomic_load_explicit(&r->mailbox_read.head, memory_order_relaxed);
                struct hbg_mailbox_entry *e = &r->mailbox[k & (m - 1)];
                if (atomic_load_explicit(&e->seq, memory_order_acquire) != k + 1)
                        break;
                uint64_t id = e->task_id;
                int32_t status = e->status;
                bool reserved = e->reserved0 || e->reserved1;
                atomic_store_explicit(&r->mailbox_read.head, k + 1, memory_order_relaxed);
                atomic_store_explicit(&r->cpl->mailbox_consumed, k + 1, memory_order_release);

                struct task_slot *s = ring_slot(r, id);
                /* Padding must be zero (shm/layout.h): not ignored, so that
                 * it can carry meaning in a later layout. */
                if (reserved) {
                        retire_fail(r, -EPROTO, id, "mailbox entry reserved field not zero");
                        break;
                }
                if (id < r->first_id || id >= atomic_load(&r->claim)) {
                        retire_fail(r, -EPROTO, id, "mailbox completion for a task never submitted");
                        break;
                }
                if (!slot_owned_by(s, id, memory_order_acquire))
                        continue; /* so old its slot is reused: cannot tell, ignore */
                if (s->kind != KIND_EXTERNAL) {
                        retire_fail(r, -EPROTO, id, "mailbox completion for a task that is not a host task");
                        break;
                }
                uint32_t st = SLOT_EXTERNAL;
                if (!atomic_compare_exchange_strong(&s->state, &st, SLOT_COMPLETING))
                        continue; /* completed by the stall detector meanwhile */
                if (status > 0 || status < -4095)
                        status = -EINVAL;
                uint32_t trace = trace_epoch(&r->engine->trace);
                if (trace)
                        trace_host(&r->engine->trace, trace, r, s, id, status);
                complete_task(t, r, id, status, status ? "host task reported failure" : NULL);
        }
        atomic_store(&r->mailbox_read.lock, 0);
        return n > 0;
}
