/* SPDX-License-Identifier: MIT */
/*
 * Ring geometry: the sizes both sides of a session agree on.
 *
 * The daemon validates a geometry once, keeps it in private memory and never
 * re-reads it from shared memory (docs/RUNTIME_LOGIC.md §2). Every derived
 * size is computed with overflow checks.
 */
#pragma once

#include <stdint.h>

/* Low bits of an id moved to the top by flag_index(): 2^S consecutive ids
 * land on 2^S different cache lines (docs/RUNTIME_LOGIC.md §3). */
#define HBG_FLAG_SHUFFLE_BITS 4u
/* Stamps are 32 bits, so one 64-byte line holds 2^4 of them. */
#define HBG_STAMPS_PER_LINE_LOG2 4u

/*
 * The limits of a geometry, the one place they are written: geometry_init()
 * checks them and words its messages from them, hbgd's config keys take
 * them as their bounds. The log2 limits are plain numbers so that the
 * messages can spell them (HBG_STR).
 */
/* The smallest flag window that leaves the shuffle its S bits of headroom
 * above the in-line position bits: 2^(S + 4) = 256 flags. */
#define HBG_FLAG_WINDOW_MIN_LOG2 8
_Static_assert(HBG_FLAG_WINDOW_MIN_LOG2 == HBG_FLAG_SHUFFLE_BITS + HBG_STAMPS_PER_LINE_LOG2,
               "the smallest flag window is 2^(S + 4)");
/* The largest task window: it keeps the descriptor array of one session
 * within 1 GiB. The 32-bit stamps do not bound it: an id in flight and the
 * id whose stamp its slot holds are at most D/F laps apart
 * (docs/RUNTIME_LOGIC.md §3.2), 2^16 at most, so stamps, laps cut to 32
 * bits, compare exactly even where they wrap. */
#define HBG_TASK_WINDOW_MAX_LOG2 24

#define HBG_MAILBOX_MIN_LOG2 4
#define HBG_MAILBOX_MAX_LOG2 20
#define HBG_GRAPH_TABLE_MIN_LOG2 2
#define HBG_GRAPH_TABLE_MAX_LOG2 20

#define HBG_HEAP_ALIGN 64u
#define HBG_HEAP_MAX_LOG2 40 /* 1 TiB */
#define HBG_HEAP_MAX (UINT64_C(1) << HBG_HEAP_MAX_LOG2)

#define HBG_TASK_WINDOW_MAX (UINT64_C(1) << HBG_TASK_WINDOW_MAX_LOG2)
#define HBG_MAILBOX_MAX (UINT64_C(1) << HBG_MAILBOX_MAX_LOG2)
#define HBG_GRAPH_TABLE_MAX (UINT64_C(1) << HBG_GRAPH_TABLE_MAX_LOG2)

/* A number macro as a string literal: "2^" HBG_STR(HBG_MAILBOX_MAX_LOG2). */
#define HBG_STR_(x) #x
#define HBG_STR(x) HBG_STR_(x)

/* What a caller asks for; every field is validated by geometry_init(). */
struct hbg_geometry_request {
        uint64_t task_window;      /* D: descriptor slots, power of two */
        uint64_t flag_window;      /* F: completion flags, power of two, F <= D */
        uint64_t heap_size;        /* data heap bytes, multiple of 64 */
        uint64_t mailbox_entries;  /* async completion mailbox, power of two */
        uint64_t graph_table_entries; /* graphs in flight, power of two: the
                                         size of both the record ring and the
                                         status table */
};

/* A validated geometry with every derived size. Daemon-private. */
struct hbg_geometry {
        uint32_t task_window_log2;
        uint32_t flag_window_log2;
        uint32_t mailbox_log2;
        uint32_t graph_table_log2;
        uint64_t task_window;
        uint64_t flag_window;
        uint64_t heap_size;
        uint64_t mailbox_entries;
        uint64_t graph_table_entries;

        /* Submission region:
         *   header | descriptors | fanins | arguments | graph records |
         *   mailbox | heap */
        uint64_t sub_descs_offset;
        uint64_t sub_fanins_offset;
        uint64_t sub_args_offset;
        uint64_t sub_graphs_offset;
        uint64_t sub_mailbox_offset;
        uint64_t sub_heap_offset;
        uint64_t sub_region_size;

        /* Completion region: header | graph table | external-ready | flags */
        uint64_t cpl_graphs_offset;
        uint64_t cpl_ext_ready_offset;
        uint64_t cpl_flags_offset;
        uint64_t cpl_region_size;
};

/*
 * Validate a request and compute the layout. Returns 0, or:
 *   -EINVAL    a window is zero or not a power of two, or F > D, or the heap
 *              size is not a multiple of 64;
 *   -ERANGE    a value is below its minimum or above its maximum (F's range
 *              is checked before F > D: F > 2^24 is -ERANGE for any valid D);
 *   -EOVERFLOW a derived region size does not fit in 64 bits: a guard only,
 *              unreachable within the limits above (the largest region is
 *              below 2^41 bytes).
 * On failure *ret_error (if not NULL) points to a static message that starts
 * with the name of the offending field. Never undefined behaviour.
 */
int geometry_init(struct hbg_geometry *ret, const struct hbg_geometry_request *req,
                      const char **ret_error);

/* Defaults used by tests and, later, by hbgd's configuration. */
void geometry_request_default(struct hbg_geometry_request *ret);

/* hbgd's failure table (RUNTIME_LOGIC §12.2): 2D entries, and no fewer
 * than 2^15, so that a fanin up to entries - D ids below its task is
 * answered exactly: at least 16,384 for every D up to 16,384 (the reach
 * of the old default window's 2D), not only D. The client keeps the
 * writes a failed task's dependants must name as far back (its
 * dependency tracker). */
#define GEOMETRY_FAIL_TAGS_MIN (UINT64_C(1) << 15)
static inline uint64_t geometry_fail_tags(const struct hbg_geometry *g) {
        return 2 * g->task_window > GEOMETRY_FAIL_TAGS_MIN ? 2 * g->task_window : GEOMETRY_FAIL_TAGS_MIN;
}
static inline uint64_t geometry_failure_reach(const struct hbg_geometry *g) {
        return geometry_fail_tags(g) - g->task_window;
}
