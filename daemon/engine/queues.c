/* SPDX-License-Identifier: MIT */
/*
 * A thread's continuation and the deques (RUNTIME_LOGIC.md §10.4), as the
 * stages share them: ready.c fills them, dispatch.c takes from them, the
 * looks at a ring (work.c) and the parking thread read them. The wake
 * lists' two halves are inline (queues.h).
 */
#include "daemon/engine/queues.h"

bool queues_deques_nonempty(struct hbg_ring *r) {
        for (unsigned i = 0; i < r->engine->nthreads; i++)
                if (ws_size_hint(&r->per_thread[i].deque) > 0)
                        return true;
        return false;
}

uint64_t queues_ready_hint(struct sched_thread *t, struct hbg_ring *r) {
        uint64_t ready = ws_size_hint(&r->per_thread[t->index].deque);
        for (unsigned i = 0; i < SHAPE_EXEC_COUNT; i++)
                ready += mpmc_size_hint(&r->ready[i]);
        return ready;
}

bool queues_continuation_take(struct sched_thread *t, struct hbg_ring *r, uint64_t *ret_id) {
        struct ring_thread *rt = &r->per_thread[t->index];
        if (!rt->has_continuation)
                return false;
        rt->has_continuation = false;
        *ret_id = rt->continuation;
        return true;
}
