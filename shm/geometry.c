/* SPDX-License-Identifier: MIT */
#include "shm/geometry.h"

#include <errno.h>
#include <stdbool.h>

#include "shm/layout.h"

void geometry_request_default(struct hbg_geometry_request *ret) {
        *ret = (struct hbg_geometry_request){
                .task_window = 4096,
                .flag_window = 4096,
                .heap_size = UINT64_C(64) << 20,
                .mailbox_entries = 1024,
                .graph_table_entries = 256,
        };
}

static bool is_pow2(uint64_t v) {
        return v != 0 && (v & (v - 1)) == 0;
}

static uint32_t log2_pow2(uint64_t v) {
        return (uint32_t)__builtin_ctzll(v); /* only called with v != 0 */
}

/* Validate a power-of-two count in [2^min_log2, 2^max_log2]. */
static int check_pow2(uint64_t v, uint32_t min_log2, uint32_t max_log2, const char *zero_msg,
                      const char *pow2_msg, const char *range_msg, const char **ret_error) {
        if (v == 0) {
                *ret_error = zero_msg;
                return -EINVAL;
        }
        if (!is_pow2(v)) {
                *ret_error = pow2_msg;
                return -EINVAL;
        }
        uint32_t l = log2_pow2(v);
        if (l < min_log2 || l > max_log2) {
                *ret_error = range_msg;
                return -ERANGE;
        }
        return 0;
}

/* *offset = align_up(*offset, 64) + count * size, all checked. */
static bool place(uint64_t *offset, uint64_t *ret_start, uint64_t count, uint64_t size) {
        uint64_t start, bytes, end;

        if (__builtin_add_overflow(*offset, HBG_CACHE_LINE - 1, &start))
                return false;
        start &= ~(uint64_t)(HBG_CACHE_LINE - 1);
        if (__builtin_mul_overflow(count, size, &bytes) || __builtin_add_overflow(start, bytes, &end))
                return false;
        *ret_start = start;
        *offset = end;
        return true;
}

int geometry_init(struct hbg_geometry *ret, const struct hbg_geometry_request *req,
                      const char **ret_error) {
        const char *dummy;
        struct hbg_geometry g = { 0 };
        int r;

        if (!ret_error)
                ret_error = &dummy;
        *ret_error = NULL;

        r = check_pow2(req->task_window, HBG_FLAG_WINDOW_MIN_LOG2, HBG_TASK_WINDOW_MAX_LOG2,
                       "task_window: must not be zero",
                       "task_window: must be a power of two",
                       "task_window: must be between 2^" HBG_STR(HBG_FLAG_WINDOW_MIN_LOG2) " and 2^" HBG_STR(
                               HBG_TASK_WINDOW_MAX_LOG2),
                       ret_error);
        if (r < 0)
                return r;
        r = check_pow2(req->flag_window, HBG_FLAG_WINDOW_MIN_LOG2, HBG_TASK_WINDOW_MAX_LOG2,
                       "flag_window: must not be zero",
                       "flag_window: must be a power of two",
                       "flag_window: must be between 2^" HBG_STR(HBG_FLAG_WINDOW_MIN_LOG2) " (2^(S+4): the shuffle "
                       "needs S=4 bits of headroom above 16 stamps per line) and 2^" HBG_STR(HBG_TASK_WINDOW_MAX_LOG2),
                       ret_error);
        if (r < 0)
                return r;
        if (req->flag_window > req->task_window) {
                *ret_error = "flag_window: must not exceed task_window";
                return -EINVAL;
        }
        r = check_pow2(req->mailbox_entries, HBG_MAILBOX_MIN_LOG2, HBG_MAILBOX_MAX_LOG2,
                       "mailbox_entries: must not be zero",
                       "mailbox_entries: must be a power of two",
                       "mailbox_entries: must be between 2^" HBG_STR(HBG_MAILBOX_MIN_LOG2) " and 2^" HBG_STR(
                               HBG_MAILBOX_MAX_LOG2),
                       ret_error);
        if (r < 0)
                return r;
        r = check_pow2(req->graph_table_entries, HBG_GRAPH_TABLE_MIN_LOG2, HBG_GRAPH_TABLE_MAX_LOG2,
                       "graph_table_entries: must not be zero",
                       "graph_table_entries: must be a power of two",
                       "graph_table_entries: must be between 2^" HBG_STR(HBG_GRAPH_TABLE_MIN_LOG2) " and 2^" HBG_STR(
                               HBG_GRAPH_TABLE_MAX_LOG2),
                       ret_error);
        if (r < 0)
                return r;
        if (req->heap_size == 0 || req->heap_size % HBG_HEAP_ALIGN != 0) {
                *ret_error = "heap_size: must be a non-zero multiple of 64";
                return -EINVAL;
        }
        if (req->heap_size > HBG_HEAP_MAX) {
                *ret_error = "heap_size: must not exceed 2^" HBG_STR(HBG_HEAP_MAX_LOG2) " bytes";
                return -ERANGE;
        }

        g.task_window = req->task_window;
        g.flag_window = req->flag_window;
        g.heap_size = req->heap_size;
        g.mailbox_entries = req->mailbox_entries;
        g.graph_table_entries = req->graph_table_entries;
        g.task_window_log2 = log2_pow2(g.task_window);
        g.flag_window_log2 = log2_pow2(g.flag_window);
        g.mailbox_log2 = log2_pow2(g.mailbox_entries);
        g.graph_table_log2 = log2_pow2(g.graph_table_entries);

        uint64_t off = sizeof(struct hbg_sub_header);
        if (!place(&off, &g.sub_descs_offset, g.task_window, sizeof(struct hbg_task_desc)) ||
            !place(&off, &g.sub_fanins_offset, g.task_window, sizeof(struct hbg_task_fanins)) ||
            !place(&off, &g.sub_args_offset, g.task_window, sizeof(struct hbg_task_args)) ||
            !place(&off, &g.sub_graphs_offset, g.graph_table_entries, sizeof(struct hbg_graph_record)) ||
            !place(&off, &g.sub_mailbox_offset, g.mailbox_entries, sizeof(struct hbg_mailbox_entry)) ||
            !place(&off, &g.sub_heap_offset, g.heap_size, 1) ||
            !place(&off, &(uint64_t){ 0 }, 0, 1)) {
                *ret_error = "heap_size: submission region size overflows";
                return -EOVERFLOW;
        }
        g.sub_region_size = off;

        off = sizeof(struct hbg_cpl_header);
        if (!place(&off, &g.cpl_graphs_offset, g.graph_table_entries, sizeof(struct hbg_graph_entry)) ||
            !place(&off, &g.cpl_ext_ready_offset, g.task_window, sizeof(uint64_t)) ||
            !place(&off, &g.cpl_flags_offset, g.flag_window, sizeof(hbg_stamp_t)) ||
            !place(&off, &(uint64_t){ 0 }, 0, 1)) {
                *ret_error = "flag_window: completion region size overflows";
                return -EOVERFLOW;
        }
        g.cpl_region_size = off;

        *ret = g;
        return 0;
}
