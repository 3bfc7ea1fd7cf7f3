/* SPDX-License-Identifier: MIT */
#include "shm/layout.h"

#include <errno.h>
#include <string.h>

#include "shm/completion.h"

void layout_sub_region_init(void *base, const struct hbg_geometry *g) {
        struct hbg_sub_header *h = base;

        h->magic = HBG_SUB_MAGIC;
        h->layout_version = HBG_LAYOUT_VERSION;
        h->region_size = g->sub_region_size;
        h->task_window_log2 = g->task_window_log2;
        h->mailbox_log2 = g->mailbox_log2;
        h->heap_size = g->heap_size;
        h->descs_offset = g->sub_descs_offset;
        h->fanins_offset = g->sub_fanins_offset;
        h->args_offset = g->sub_args_offset;
        h->mailbox_offset = g->sub_mailbox_offset;
        h->heap_offset = g->sub_heap_offset;
        h->graphs_offset = g->sub_graphs_offset;
        h->graph_ring_log2 = g->graph_table_log2;
        atomic_store_explicit(&h->submitted, 0, memory_order_relaxed);
        atomic_store_explicit(&h->mailbox_tail, 0, memory_order_relaxed);
        atomic_store_explicit(&h->graphs_submitted, 0, memory_order_relaxed);
        atomic_store_explicit(&h->ext_sleepers, 0, memory_order_relaxed);
        atomic_store_explicit(&h->ext_looking, 0, memory_order_relaxed);
        atomic_store_explicit(&h->ext_look_until_ns, 0, memory_order_relaxed);
        atomic_store_explicit(&h->graph_sleepers, 0, memory_order_relaxed);
}

void layout_cpl_region_init(void *base, const struct hbg_geometry *g, uint64_t first_id) {
        struct hbg_cpl_header *h = base;

        h->magic = HBG_CPL_MAGIC;
        h->layout_version = HBG_LAYOUT_VERSION;
        h->region_size = g->cpl_region_size;
        h->task_window_log2 = g->task_window_log2;
        h->flag_window_log2 = g->flag_window_log2;
        h->graph_table_log2 = g->graph_table_log2;
        h->graphs_offset = g->cpl_graphs_offset;
        h->flags_offset = g->cpl_flags_offset;
        h->first_id = first_id;
        h->ext_ready_offset = g->cpl_ext_ready_offset;
        atomic_store_explicit(&h->completed_watermark, first_id, memory_order_relaxed);
        atomic_store_explicit(&h->classified, first_id, memory_order_relaxed);
        atomic_store_explicit(&h->need_wakeup, 0, memory_order_relaxed);
        atomic_store_explicit(&h->answer_moving, 0, memory_order_relaxed);
        atomic_store_explicit(&h->error_code, 0, memory_order_relaxed);
        atomic_store_explicit(&h->error_task, 0, memory_order_relaxed);
        atomic_store_explicit(&h->failed_high, 0, memory_order_relaxed);
        atomic_store_explicit(&h->graphs_retired, 0, memory_order_relaxed);
        atomic_store_explicit(&h->ext_ready_tail, 0, memory_order_relaxed);
        atomic_store_explicit(&h->mailbox_consumed, 0, memory_order_relaxed);
        atomic_store_explicit(&h->ext_wake, 0, memory_order_relaxed);
        atomic_store_explicit(&h->graph_wake, 0, memory_order_relaxed);

        /* The flags stay as the caller gave them, zero: the stamp of lap -1,
         * every slot's previous occupant (RUNTIME_LOGIC.md §3.3). Nothing
         * here is proportional to the window. */
        /* Publication to other threads/processes happens through whatever
         * hands them the region (fd passing, thread start): a full barrier. */
        atomic_thread_fence(memory_order_release);
}

/* The entry's plain fields are stored with atomic builtins: a reader may
 * copy an entry while hbgd rewrites it for record k + G (the seqlock then
 * discards the copy), which must not be a data race. Release: each store
 * is ordered after the `seq` = 0 before it, so a reader whose acquire
 * load saw it sees that `seq` changed (shm/layout.h). */
#define ENTRY_STORE(field, v) __atomic_store_n(&(field), (v), __ATOMIC_RELEASE)

void layout_graph_entry_publish(struct hbg_graph_entry *e, uint64_t k, uint64_t graph_id, int32_t status,
                             uint16_t kernel, uint64_t task, const char *message) {
        /* Invalidate first; the release stores below are ordered after it. */
        atomic_store_explicit(&e->seq, 0, memory_order_relaxed);
        ENTRY_STORE(e->graph_id, graph_id);
        ENTRY_STORE(e->status, status);
        ENTRY_STORE(e->kernel, status ? kernel : (uint16_t)0);
        ENTRY_STORE(e->reserved0, (uint16_t)0);
        ENTRY_STORE(e->first_error_task, status ? task : 0);
        size_t n = 0;
        if (status && message)
                for (; n < HBG_GRAPH_MESSAGE_MAX - 1 && message[n]; n++)
                        ENTRY_STORE(e->message[n], message[n]);
        ENTRY_STORE(e->message[n], '\0');
        /* Release: the fields before the record number a reader checks. */
        atomic_store_explicit(&e->seq, k + 1, memory_order_release);
}

static int fail(const char **ret_error, const char *msg) {
        if (ret_error)
                *ret_error = msg;
        return -EPROTO;
}

static bool all_zero(const void *p, size_t n) {
        const unsigned char *b = p;
        for (size_t i = 0; i < n; i++)
                if (b[i])
                        return false;
        return true;
}

int layout_cpl_region_check(const void *base, uint64_t size, const char **ret_error) {
        const struct hbg_cpl_header *h = base;
        struct hbg_geometry_request req;
        struct hbg_geometry g;

        if (size < sizeof(*h))
                return fail(ret_error, "completion region: smaller than its header");
        if (h->magic != HBG_CPL_MAGIC)
                return fail(ret_error, "completion region: bad magic");
        if (h->layout_version != HBG_LAYOUT_VERSION)
                return fail(ret_error, "completion region: another layout version than this library's "
                                       "(hbgd and libhbgclient must come from the same release)");
        if (h->reserved0 || h->reserved4 ||
            !all_zero(h->pad1, sizeof(h->pad1)) || !all_zero(h->pad2, sizeof(h->pad2)) ||
            !all_zero(h->pad3, sizeof(h->pad3)) || !all_zero(h->pad4, sizeof(h->pad4)) ||
            !all_zero(h->pad5, sizeof(h->pad5)) || !all_zero(h->pad6, sizeof(h->pad6)) ||
            !all_zero(h->pad7, sizeof(h->pad7)) || !all_zero(h->pad8, sizeof(h->pad8)) ||
            !all_zero(h->pad9, sizeof(h->pad9)))
                return fail(ret_error, "completion region: non-zero padding");
        if (h->task_window_log2 > HBG_TASK_WINDOW_MAX_LOG2 ||
            h->flag_window_log2 > HBG_TASK_WINDOW_MAX_LOG2 ||
            h->graph_table_log2 > HBG_GRAPH_TABLE_MAX_LOG2)
                return fail(ret_error, "completion region: geometry out of range");

        geometry_request_default(&req);
        req.task_window = UINT64_C(1) << h->task_window_log2;
        req.flag_window = UINT64_C(1) << h->flag_window_log2;
        req.graph_table_entries = UINT64_C(1) << h->graph_table_log2;
        if (geometry_init(&g, &req, NULL) < 0)
                return fail(ret_error, "completion region: invalid geometry");
        if (h->region_size != g.cpl_region_size || h->region_size > size ||
            h->flags_offset != g.cpl_flags_offset || h->graphs_offset != g.cpl_graphs_offset ||
            h->ext_ready_offset != g.cpl_ext_ready_offset)
                return fail(ret_error, "completion region: sizes do not match its geometry");
        return 0;
}

int layout_sub_region_check(const void *base, uint64_t size, const char **ret_error) {
        const struct hbg_sub_header *h = base;
        struct hbg_geometry_request req;
        struct hbg_geometry g;

        if (size < sizeof(*h))
                return fail(ret_error, "submission region: smaller than its header");
        if (h->magic != HBG_SUB_MAGIC)
                return fail(ret_error, "submission region: bad magic");
        if (h->layout_version != HBG_LAYOUT_VERSION)
                return fail(ret_error, "submission region: another layout version than this library's "
                                       "(hbgd and libhbgclient must come from the same release)");
        if (h->reserved0 || !all_zero(h->reserved1, sizeof(h->reserved1)) ||
            !all_zero(h->pad1, sizeof(h->pad1)) || !all_zero(h->pad3, sizeof(h->pad3)) ||
            !all_zero(h->pad4, sizeof(h->pad4)) || !all_zero(h->pad5, sizeof(h->pad5)) ||
            !all_zero(h->pad6, sizeof(h->pad6)))
                return fail(ret_error, "submission region: non-zero padding");
        if (h->task_window_log2 > HBG_TASK_WINDOW_MAX_LOG2 || h->mailbox_log2 > HBG_MAILBOX_MAX_LOG2 ||
            h->graph_ring_log2 > HBG_GRAPH_TABLE_MAX_LOG2)
                return fail(ret_error, "submission region: geometry out of range");

        /* The submission layout does not depend on F: the smallest will do. */
        req = (struct hbg_geometry_request){
                .task_window = UINT64_C(1) << h->task_window_log2,
                .flag_window = UINT64_C(1) << HBG_FLAG_WINDOW_MIN_LOG2,
                .heap_size = h->heap_size,
                .mailbox_entries = UINT64_C(1) << h->mailbox_log2,
                .graph_table_entries = UINT64_C(1) << h->graph_ring_log2,
        };
        if (geometry_init(&g, &req, NULL) < 0)
                return fail(ret_error, "submission region: invalid geometry");
        if (h->region_size != g.sub_region_size || h->region_size > size ||
            h->descs_offset != g.sub_descs_offset || h->fanins_offset != g.sub_fanins_offset ||
            h->args_offset != g.sub_args_offset || h->graphs_offset != g.sub_graphs_offset ||
            h->mailbox_offset != g.sub_mailbox_offset || h->heap_offset != g.sub_heap_offset)
                return fail(ret_error, "submission region: sizes do not match its geometry");
        return 0;
}
