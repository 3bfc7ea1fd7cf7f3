/* SPDX-License-Identifier: MIT */
/*
 * geometry_init(): every invalid request is rejected with the documented
 * error and a message naming the field; a valid request gets the layout
 * computed here independently. layout_cpl_region_check() and
 * layout_sub_region_check() on fresh and damaged region headers.
 */
#include <check.h>
#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "shm/completion.h"
#include "shm/geometry.h"
#include "shm/layout.h"
#include "tests/check_main.h"

#define POW2(n) (UINT64_C(1) << (n))

/* What the layout must be, from the entry sizes fixed by the protocol. The
 * headers are whole cache lines; their exact size is pinned by layout.h. */
#define SUB_HEADER_BYTES ((uint64_t)sizeof(struct hbg_sub_header))
#define CPL_HEADER_BYTES ((uint64_t)sizeof(struct hbg_cpl_header))
#define DESC_BYTES 64u
#define FANINS_BYTES 128u
#define ARGS_BYTES 256u
#define GRAPH_RECORD_BYTES 32u
#define MAILBOX_ENTRY_BYTES 32u
#define GRAPH_ENTRY_BYTES 128u
#define EXT_READY_BYTES 8u
#define STAMP_BYTES 4u

static uint64_t align64(uint64_t v) {
        return (v + 63) / 64 * 64;
}

/* Expect `field` with value `value` to fail with `err`, and the message to
 * start with the field name. Everything else is the default request. */
static void expect_reject(const char *field, uint64_t value, int err) {
        struct hbg_geometry_request req;
        struct hbg_geometry g;
        const char *msg = NULL;
        int r;

        geometry_request_default(&req);
        if (strcmp(field, "task_window") == 0) {
                req.task_window = value;
                /* Keep F <= D where D is still valid, so only D is wrong. */
                if (value >= 256 && value < req.flag_window)
                        req.flag_window = value;
        } else if (strcmp(field, "flag_window") == 0) {
                req.flag_window = value;
        } else if (strcmp(field, "heap_size") == 0) {
                req.heap_size = value;
        } else if (strcmp(field, "mailbox_entries") == 0) {
                req.mailbox_entries = value;
        } else if (strcmp(field, "graph_table_entries") == 0) {
                req.graph_table_entries = value;
        } else {
                ck_abort_msg("unknown field %s", field);
        }

        memset(&g, 0xa5, sizeof(g));
        r = geometry_init(&g, &req, &msg);
        ck_assert_msg(r == err, "%s = %llu: returned %d, expected %d (%s)", field,
                      (unsigned long long)value, r, err, msg ? msg : "no message");
        ck_assert_msg(msg != NULL, "%s = %llu: no error message", field,
                      (unsigned long long)value);
        ck_assert_msg(strncmp(msg, field, strlen(field)) == 0,
                      "%s = %llu: message \"%s\" does not name the field", field,
                      (unsigned long long)value, msg);
        ck_assert_msg(msg[strlen(field)] == ':', "%s = %llu: message \"%s\" names another field",
                      field, (unsigned long long)value, msg);

        /* Same result with no message pointer at all. */
        ck_assert_int_eq(geometry_init(&g, &req, NULL), err);
}

static void expect_accept(const struct hbg_geometry_request *req) {
        struct hbg_geometry g;
        const char *msg = "stale";

        ck_assert_msg(geometry_init(&g, req, &msg) == 0,
                      "D=%llu F=%llu heap=%llu M=%llu G=%llu rejected: %s",
                      (unsigned long long)req->task_window, (unsigned long long)req->flag_window,
                      (unsigned long long)req->heap_size,
                      (unsigned long long)req->mailbox_entries,
                      (unsigned long long)req->graph_table_entries, msg ? msg : "(null)");
        ck_assert_ptr_null(msg);
        ck_assert_uint_eq(g.task_window, req->task_window);
        ck_assert_uint_eq(g.flag_window, req->flag_window);
        ck_assert_uint_eq(g.heap_size, req->heap_size);
        ck_assert_uint_eq(g.mailbox_entries, req->mailbox_entries);
        ck_assert_uint_eq(g.graph_table_entries, req->graph_table_entries);
}

/* ---------------------------------------------------------- task_window */

START_TEST(test_task_window) {
        expect_reject("task_window", 0, -EINVAL);
        expect_reject("task_window", 3, -EINVAL);
        expect_reject("task_window", 1000, -EINVAL);
        expect_reject("task_window", POW2(20) + 1, -EINVAL);
        expect_reject("task_window", POW2(14) + POW2(4), -EINVAL);
        expect_reject("task_window", UINT64_MAX, -EINVAL);
        expect_reject("task_window", 1, -ERANGE);
        expect_reject("task_window", 128, -ERANGE);
        expect_reject("task_window", POW2(25), -ERANGE);
        expect_reject("task_window", POW2(63), -ERANGE);

        /* The bounds themselves are valid. */
        struct hbg_geometry_request req;
        geometry_request_default(&req);
        req.task_window = 256;
        req.flag_window = 256;
        expect_accept(&req);
        req.task_window = POW2(HBG_TASK_WINDOW_MAX_LOG2);
        expect_accept(&req);
}
END_TEST

/* ---------------------------------------------------------- flag_window */

START_TEST(test_flag_window) {
        struct hbg_geometry_request req;

        /* 0 must not reach a count-trailing-zeros (UBSan build checks). */
        expect_reject("flag_window", 0, -EINVAL);
        expect_reject("flag_window", 3, -EINVAL);
        expect_reject("flag_window", 300, -EINVAL);
        expect_reject("flag_window", 4096 + 16, -EINVAL);  /* >= 4 trailing zeros */
        expect_reject("flag_window", 4096 + 256, -EINVAL); /* 8 trailing zeros */
        expect_reject("flag_window", 4096 - 256, -EINVAL);
        expect_reject("flag_window", UINT64_MAX, -EINVAL);
        expect_reject("flag_window", UINT64_MAX << 8, -EINVAL);
        expect_reject("flag_window", 1, -ERANGE);
        expect_reject("flag_window", 16, -ERANGE);
        expect_reject("flag_window", 64, -ERANGE);
        expect_reject("flag_window", 128, -ERANGE);
        /* Valid powers of two above task_window (default D = 2^12). */
        expect_reject("flag_window", POW2(15), -EINVAL);
        expect_reject("flag_window", POW2(24), -EINVAL);
        /* Above the range the range check answers first, not F > D. */
        expect_reject("flag_window", POW2(25), -ERANGE);
        expect_reject("flag_window", POW2(63), -ERANGE);

        geometry_request_default(&req);
        for (unsigned l = 8; l <= 14; l++) {
                req.task_window = POW2(14);
                req.flag_window = POW2(l);
                expect_accept(&req);
        }
        /* flag_window == task_window, at both ends of the range. */
        req.task_window = req.flag_window = 256;
        expect_accept(&req);
        req.task_window = req.flag_window = POW2(HBG_TASK_WINDOW_MAX_LOG2);
        expect_accept(&req);
}
END_TEST

START_TEST(test_flag_window_exceeds_task_window) {
        struct hbg_geometry_request req;
        struct hbg_geometry g;
        const char *msg = NULL;

        for (unsigned d = 8; d < HBG_TASK_WINDOW_MAX_LOG2; d++) {
                geometry_request_default(&req);
                req.task_window = POW2(d);
                req.flag_window = POW2(d + 1);
                msg = NULL;
                ck_assert_int_eq(geometry_init(&g, &req, &msg), -EINVAL);
                ck_assert_ptr_nonnull(msg);
                ck_assert_msg(strncmp(msg, "flag_window", 11) == 0, "D=2^%u: \"%s\"", d, msg);

                req.flag_window = POW2(d);
                expect_accept(&req);
        }
}
END_TEST

/* ------------------------------------------------------------ heap_size */

START_TEST(test_heap_size) {
        struct hbg_geometry_request req;

        expect_reject("heap_size", 0, -EINVAL);
        expect_reject("heap_size", 1, -EINVAL);
        expect_reject("heap_size", 63, -EINVAL);
        expect_reject("heap_size", 100, -EINVAL);
        expect_reject("heap_size", 96, -EINVAL);
        expect_reject("heap_size", HBG_HEAP_MAX + 64, -ERANGE);
        expect_reject("heap_size", POW2(41), -ERANGE);
        expect_reject("heap_size", UINT64_MAX - 63, -ERANGE);

        geometry_request_default(&req);
        req.heap_size = 64;
        expect_accept(&req);
        req.heap_size = 128;
        expect_accept(&req);
        req.heap_size = HBG_HEAP_MAX;
        expect_accept(&req);
        req.heap_size = HBG_HEAP_MAX - 64;
        expect_accept(&req);
        /* Largest everything still fits in 64 bits. */
        req.heap_size = HBG_HEAP_MAX;
        req.task_window = req.flag_window = POW2(HBG_TASK_WINDOW_MAX_LOG2);
        req.mailbox_entries = POW2(HBG_MAILBOX_MAX_LOG2);
        req.graph_table_entries = POW2(HBG_GRAPH_TABLE_MAX_LOG2);
        expect_accept(&req);
}
END_TEST

/* ----------------------------------------- mailbox and graph table counts */

static void check_pow2_count(const char *field, unsigned min_log2, unsigned max_log2) {
        struct hbg_geometry_request req;

        expect_reject(field, 0, -EINVAL);
        expect_reject(field, 3, -EINVAL);
        expect_reject(field, POW2(min_log2) + 1, -EINVAL);
        expect_reject(field, POW2(max_log2) - 1, -EINVAL);
        expect_reject(field, POW2(max_log2) + POW2(min_log2), -EINVAL);
        expect_reject(field, UINT64_MAX, -EINVAL);
        expect_reject(field, POW2(min_log2) / 2, -ERANGE);
        expect_reject(field, 1, -ERANGE);
        expect_reject(field, POW2(max_log2 + 1), -ERANGE);
        expect_reject(field, POW2(63), -ERANGE);

        for (unsigned l = min_log2; l <= max_log2; l++) {
                geometry_request_default(&req);
                if (strcmp(field, "mailbox_entries") == 0)
                        req.mailbox_entries = POW2(l);
                else
                        req.graph_table_entries = POW2(l);
                expect_accept(&req);
        }
}

START_TEST(test_mailbox_entries) {
        ck_assert_uint_eq(HBG_MAILBOX_MIN_LOG2, 4);
        check_pow2_count("mailbox_entries", HBG_MAILBOX_MIN_LOG2, HBG_MAILBOX_MAX_LOG2);
}
END_TEST

START_TEST(test_graph_table_entries) {
        ck_assert_uint_eq(HBG_GRAPH_TABLE_MIN_LOG2, 2);
        check_pow2_count("graph_table_entries", HBG_GRAPH_TABLE_MIN_LOG2,
                         HBG_GRAPH_TABLE_MAX_LOG2);
}
END_TEST

START_TEST(test_null_ret_error) {
        struct hbg_geometry_request req;
        struct hbg_geometry g;

        geometry_request_default(&req);
        ck_assert_int_eq(geometry_init(&g, &req, NULL), 0);
        req.flag_window = 0;
        ck_assert_int_eq(geometry_init(&g, &req, NULL), -EINVAL);
        req.flag_window = 64;
        ck_assert_int_eq(geometry_init(&g, &req, NULL), -ERANGE);
        geometry_request_default(&req);
        req.task_window = 0;
        ck_assert_int_eq(geometry_init(&g, &req, NULL), -EINVAL);
        geometry_request_default(&req);
        req.heap_size = HBG_HEAP_MAX * 2;
        ck_assert_int_eq(geometry_init(&g, &req, NULL), -ERANGE);
        geometry_request_default(&req);
        req.mailbox_entries = 5;
        ck_assert_int_eq(geometry_init(&g, &req, NULL), -EINVAL);
        geometry_request_default(&req);
        req.graph_table_entries = 2;
        ck_assert_int_eq(geometry_init(&g, &req, NULL), -ERANGE);
}
END_TEST

/* ---------------------------------------------------------------- layout */

static void check_layout(const struct hbg_geometry_request *req) {
        struct hbg_geometry g;
        uint64_t d = req->task_window, f = req->flag_window, m = req->mailbox_entries;
        uint64_t gt = req->graph_table_entries, heap = req->heap_size;

        ck_assert_int_eq(geometry_init(&g, req, NULL), 0);

        ck_assert_uint_eq(POW2(g.task_window_log2), d);
        ck_assert_uint_eq(POW2(g.flag_window_log2), f);
        ck_assert_uint_eq(POW2(g.mailbox_log2), m);
        ck_assert_uint_eq(POW2(g.graph_table_log2), gt);

        /* Submission region:
         *   header | descs | fanins | arguments | graph records | mailbox |
         *   heap. */
        uint64_t descs = align64(SUB_HEADER_BYTES);
        uint64_t fanins = align64(descs + d * DESC_BYTES);
        uint64_t args = align64(fanins + d * FANINS_BYTES);
        uint64_t records = align64(args + d * ARGS_BYTES);
        uint64_t mailbox = align64(records + gt * GRAPH_RECORD_BYTES);
        uint64_t heap_off = align64(mailbox + m * MAILBOX_ENTRY_BYTES);
        uint64_t sub_size = align64(heap_off + heap);

        ck_assert_uint_eq(g.sub_descs_offset, descs);
        ck_assert_uint_eq(g.sub_fanins_offset, fanins);
        ck_assert_uint_eq(g.sub_args_offset, args);
        ck_assert_uint_eq(g.sub_graphs_offset, records);
        ck_assert_uint_eq(g.sub_mailbox_offset, mailbox);
        ck_assert_uint_eq(g.sub_heap_offset, heap_off);
        ck_assert_uint_eq(g.sub_region_size, sub_size);

        ck_assert_uint_eq(g.sub_descs_offset % 64, 0);
        ck_assert_uint_eq(g.sub_fanins_offset % 64, 0);
        ck_assert_uint_eq(g.sub_args_offset % 64, 0);
        ck_assert_uint_eq(g.sub_graphs_offset % 64, 0);
        ck_assert_uint_eq(g.sub_mailbox_offset % 64, 0);
        ck_assert_uint_eq(g.sub_heap_offset % 64, 0);
        ck_assert_uint_eq(g.sub_region_size % 64, 0);
        /* In order, no overlap. */
        ck_assert_uint_ge(g.sub_descs_offset, sizeof(struct hbg_sub_header));
        ck_assert_uint_ge(g.sub_fanins_offset, g.sub_descs_offset + d * DESC_BYTES);
        ck_assert_uint_ge(g.sub_args_offset, g.sub_fanins_offset + d * FANINS_BYTES);
        ck_assert_uint_ge(g.sub_graphs_offset, g.sub_args_offset + d * ARGS_BYTES);
        ck_assert_uint_ge(g.sub_mailbox_offset, g.sub_graphs_offset + gt * GRAPH_RECORD_BYTES);
        ck_assert_uint_ge(g.sub_heap_offset, g.sub_mailbox_offset + m * MAILBOX_ENTRY_BYTES);
        ck_assert_uint_ge(g.sub_region_size, g.sub_heap_offset + heap);
        ck_assert_uint_lt(g.sub_region_size, g.sub_heap_offset + heap + 64);

        /* Completion region: header | graph table | external-ready | flags. */
        uint64_t graphs = align64(CPL_HEADER_BYTES);
        uint64_t ext = align64(graphs + gt * GRAPH_ENTRY_BYTES);
        uint64_t flags = align64(ext + d * EXT_READY_BYTES);
        uint64_t cpl_size = align64(flags + f * STAMP_BYTES);

        ck_assert_uint_eq(g.cpl_graphs_offset, graphs);
        ck_assert_uint_eq(g.cpl_ext_ready_offset, ext);
        ck_assert_uint_eq(g.cpl_flags_offset, flags);
        ck_assert_uint_eq(g.cpl_region_size, cpl_size);
        ck_assert_uint_eq(g.cpl_graphs_offset % 64, 0);
        ck_assert_uint_eq(g.cpl_ext_ready_offset % 64, 0);
        ck_assert_uint_eq(g.cpl_flags_offset % 64, 0);
        ck_assert_uint_eq(g.cpl_region_size % 64, 0);
        ck_assert_uint_ge(g.cpl_graphs_offset, sizeof(struct hbg_cpl_header));
        ck_assert_uint_ge(g.cpl_ext_ready_offset, g.cpl_graphs_offset + gt * GRAPH_ENTRY_BYTES);
        ck_assert_uint_ge(g.cpl_flags_offset, g.cpl_ext_ready_offset + d * EXT_READY_BYTES);
        ck_assert_uint_ge(g.cpl_region_size, g.cpl_flags_offset + f * STAMP_BYTES);
        ck_assert_uint_lt(g.cpl_region_size, g.cpl_flags_offset + f * STAMP_BYTES + 64);
}

START_TEST(test_default_layout) {
        struct hbg_geometry_request req;
        struct hbg_geometry g;

        ck_assert_uint_eq(sizeof(struct hbg_sub_header) % 64, 0);
        ck_assert_uint_eq(sizeof(struct hbg_cpl_header) % 64, 0);
        ck_assert_uint_eq(sizeof(struct hbg_task_desc), DESC_BYTES);
        ck_assert_uint_eq(sizeof(struct hbg_task_fanins), FANINS_BYTES);
        ck_assert_uint_eq(sizeof(struct hbg_task_args), ARGS_BYTES);
        ck_assert_uint_eq(sizeof(struct hbg_task_payload), FANINS_BYTES + ARGS_BYTES);
        ck_assert_uint_eq(sizeof(struct hbg_graph_record), GRAPH_RECORD_BYTES);
        ck_assert_uint_eq(sizeof(struct hbg_mailbox_entry), MAILBOX_ENTRY_BYTES);
        ck_assert_uint_eq(sizeof(struct hbg_graph_entry), GRAPH_ENTRY_BYTES);
        ck_assert_uint_eq(sizeof(hbg_stamp_t), STAMP_BYTES);

        geometry_request_default(&req);
        check_layout(&req);

        /* The default in numbers: D = F = 2^12, 64 MiB heap, M = 1024,
         * G = 256. */
        uint64_t sh = SUB_HEADER_BYTES, ch = CPL_HEADER_BYTES;
        ck_assert_int_eq(geometry_init(&g, &req, NULL), 0);
        ck_assert_uint_eq(g.task_window, 4096);
        ck_assert_uint_eq(g.flag_window, 4096);
        ck_assert_uint_eq(g.sub_descs_offset, sh);
        ck_assert_uint_eq(g.sub_fanins_offset, sh + 4096 * 64);
        ck_assert_uint_eq(g.sub_args_offset, sh + 4096 * 64 + 4096 * 128);
        ck_assert_uint_eq(g.sub_graphs_offset, sh + 4096 * 64 + 4096 * 384);
        ck_assert_uint_eq(g.sub_mailbox_offset, sh + 4096 * 64 + 4096 * 384 + 256 * 32);
        ck_assert_uint_eq(g.sub_heap_offset,
                          sh + 4096 * 64 + 4096 * 384 + 256 * 32 + 1024 * 32);
        ck_assert_uint_eq(g.sub_region_size, sh + 4096 * 64 + 4096 * 384 + 256 * 32 +
                                                     1024 * 32 + (UINT64_C(64) << 20));
        ck_assert_uint_eq(g.cpl_graphs_offset, ch);
        ck_assert_uint_eq(g.cpl_ext_ready_offset, ch + 256 * GRAPH_ENTRY_BYTES);
        ck_assert_uint_eq(g.cpl_flags_offset, ch + 256 * GRAPH_ENTRY_BYTES + 4096 * 8);
        ck_assert_uint_eq(g.cpl_region_size, ch + 256 * GRAPH_ENTRY_BYTES + 4096 * 8 + 4096 * 4);
        /* Every id a completer holds unpublished is in [WM, WM + D). */
        ck_assert_uint_eq(failsafe_capacity(&g), 4096);
}
END_TEST

START_TEST(test_layout_extremes) {
        struct hbg_geometry_request req;

        /* Smallest of everything. */
        req = (struct hbg_geometry_request){
                .task_window = 256,
                .flag_window = 256,
                .heap_size = 64,
                .mailbox_entries = POW2(HBG_MAILBOX_MIN_LOG2),
                .graph_table_entries = POW2(HBG_GRAPH_TABLE_MIN_LOG2),
        };
        check_layout(&req);
        /* Largest of everything. */
        req = (struct hbg_geometry_request){
                .task_window = POW2(HBG_TASK_WINDOW_MAX_LOG2),
                .flag_window = POW2(HBG_TASK_WINDOW_MAX_LOG2),
                .heap_size = HBG_HEAP_MAX,
                .mailbox_entries = POW2(HBG_MAILBOX_MAX_LOG2),
                .graph_table_entries = POW2(HBG_GRAPH_TABLE_MAX_LOG2),
        };
        check_layout(&req);
        /* A mixed one with an odd-looking heap. */
        req = (struct hbg_geometry_request){
                .task_window = 1024,
                .flag_window = 512,
                .heap_size = 64 * 12345,
                .mailbox_entries = 64,
                .graph_table_entries = 8,
        };
        check_layout(&req);
}
END_TEST

/* ------------------------------------------------ layout_cpl_region_check */

struct region {
        struct hbg_geometry g;
        unsigned char *base;
};

static void region_init(struct region *r) {
        struct hbg_geometry_request req;

        geometry_request_default(&req);
        ck_assert_int_eq(geometry_init(&r->g, &req, NULL), 0);
        r->base = aligned_alloc(64, r->g.cpl_region_size);
        ck_assert_ptr_nonnull(r->base);
        memset(r->base, 0, r->g.cpl_region_size);
        layout_cpl_region_init(r->base, &r->g, 0);
}

typedef int region_check_fn(const void *base, uint64_t size, const char **ret_error);

/* check() refuses the header at base with -EPROTO and a message that
 * starts with the region's name. */
static void expect_rejected(region_check_fn *check, const void *base, uint64_t size, const char *region,
                            const char *what) {
        const char *msg = NULL;
        int ret = check(base, size, &msg);

        ck_assert_msg(ret == -EPROTO, "%s: returned %d, expected -EPROTO", what, ret);
        ck_assert_msg(msg != NULL, "%s: no message", what);
        ck_assert_msg(strncmp(msg, region, strlen(region)) == 0, "%s: message \"%s\"", what, msg);
        ck_assert_int_eq(check(base, size, NULL), -EPROTO);
}

static void expect_region_rejected(const struct region *r, uint64_t size, const char *what) {
        expect_rejected(layout_cpl_region_check, r->base, size, "completion region", what);
}

/* Every field of a header, padding marked: the table must name each byte
 * of the header once (header_fields_cover()), so that a pad field added
 * to the header without a line here fails the test. */
struct header_field {
        const char *name;
        size_t offset, size;
        bool padding;
};
#define FIELD(type, f) { #f, offsetof(type, f), sizeof(((type *)0)->f), false }
#define PAD(type, f) { #f, offsetof(type, f), sizeof(((type *)0)->f), true }

static const struct header_field cpl_fields[] = {
        FIELD(struct hbg_cpl_header, magic),
        FIELD(struct hbg_cpl_header, layout_version),
        FIELD(struct hbg_cpl_header, region_size),
        FIELD(struct hbg_cpl_header, task_window_log2),
        FIELD(struct hbg_cpl_header, flag_window_log2),
        FIELD(struct hbg_cpl_header, graph_table_log2),
        PAD(struct hbg_cpl_header, reserved0),
        FIELD(struct hbg_cpl_header, graphs_offset),
        FIELD(struct hbg_cpl_header, flags_offset),
        FIELD(struct hbg_cpl_header, first_id),
        FIELD(struct hbg_cpl_header, ext_ready_offset),
        FIELD(struct hbg_cpl_header, completed_watermark),
        PAD(struct hbg_cpl_header, pad1),
        FIELD(struct hbg_cpl_header, classified),
        PAD(struct hbg_cpl_header, pad2),
        FIELD(struct hbg_cpl_header, need_wakeup),
        FIELD(struct hbg_cpl_header, answer_moving),
        PAD(struct hbg_cpl_header, pad3),
        FIELD(struct hbg_cpl_header, error_code),
        PAD(struct hbg_cpl_header, reserved4),
        FIELD(struct hbg_cpl_header, error_task),
        FIELD(struct hbg_cpl_header, failed_high),
        PAD(struct hbg_cpl_header, pad4),
        FIELD(struct hbg_cpl_header, graphs_retired),
        PAD(struct hbg_cpl_header, pad5),
        FIELD(struct hbg_cpl_header, ext_ready_tail),
        PAD(struct hbg_cpl_header, pad6),
        FIELD(struct hbg_cpl_header, mailbox_consumed),
        PAD(struct hbg_cpl_header, pad7),
        FIELD(struct hbg_cpl_header, ext_wake),
        PAD(struct hbg_cpl_header, pad8),
        FIELD(struct hbg_cpl_header, graph_wake),
        PAD(struct hbg_cpl_header, pad9),
};

static const struct header_field sub_fields[] = {
        FIELD(struct hbg_sub_header, magic),
        FIELD(struct hbg_sub_header, layout_version),
        FIELD(struct hbg_sub_header, region_size),
        FIELD(struct hbg_sub_header, task_window_log2),
        FIELD(struct hbg_sub_header, mailbox_log2),
        FIELD(struct hbg_sub_header, heap_size),
        FIELD(struct hbg_sub_header, descs_offset),
        FIELD(struct hbg_sub_header, fanins_offset),
        FIELD(struct hbg_sub_header, mailbox_offset),
        FIELD(struct hbg_sub_header, heap_offset),
        FIELD(struct hbg_sub_header, graphs_offset),
        FIELD(struct hbg_sub_header, graph_ring_log2),
        PAD(struct hbg_sub_header, reserved0),
        FIELD(struct hbg_sub_header, args_offset),
        PAD(struct hbg_sub_header, reserved1),
        FIELD(struct hbg_sub_header, submitted),
        FIELD(struct hbg_sub_header, window_waiting),
        FIELD(struct hbg_sub_header, task_waiting),
        PAD(struct hbg_sub_header, pad1),
        FIELD(struct hbg_sub_header, mailbox_tail),
        PAD(struct hbg_sub_header, pad3),
        FIELD(struct hbg_sub_header, graphs_submitted),
        PAD(struct hbg_sub_header, pad4),
        FIELD(struct hbg_sub_header, ext_sleepers),
        FIELD(struct hbg_sub_header, ext_looking),
        FIELD(struct hbg_sub_header, ext_look_until_ns),
        PAD(struct hbg_sub_header, pad5),
        FIELD(struct hbg_sub_header, graph_sleepers),
        FIELD(struct hbg_sub_header, pipe_wanted),
        PAD(struct hbg_sub_header, pad6),
};

static void header_fields_cover(const struct header_field *f, size_t n, size_t header_size) {
        unsigned char owner[1024] = { 0 };

        ck_assert_uint_le(header_size, sizeof(owner));
        for (size_t i = 0; i < n; i++) {
                ck_assert_msg(f[i].offset + f[i].size <= header_size, "%s beyond the header", f[i].name);
                for (size_t b = f[i].offset; b < f[i].offset + f[i].size; b++) {
                        ck_assert_msg(!owner[b], "byte %zu in %s and another field", b, f[i].name);
                        owner[b] = 1;
                }
        }
        for (size_t b = 0; b < header_size; b++)
                ck_assert_msg(owner[b], "byte %zu of the header is in no field of the table", b);
}

/* One non-zero byte anywhere in any pad or reserved field is refused;
 * the header is valid again after each. */
static void expect_padding_checked(region_check_fn *check, unsigned char *base, uint64_t size,
                                   const char *region, const struct header_field *f, size_t n,
                                   size_t header_size) {
        static const unsigned char values[] = { 0x01, 0x80, 0xff };
        unsigned fields = 0;
        char what[96];

        header_fields_cover(f, n, header_size);
        for (size_t i = 0; i < n; i++) {
                if (!f[i].padding)
                        continue;
                fields++;
                for (size_t b = 0; b < f[i].size; b++) {
                        unsigned char *p = base + f[i].offset + b;
                        ck_assert_uint_eq(*p, 0);
                        *p = values[b % sizeof(values)];
                        snprintf(what, sizeof(what), "%s byte %zu = 0x%02x", f[i].name, b, *p);
                        expect_rejected(check, base, size, region, what);
                        *p = 0;
                }
        }
        ck_assert_uint_gt(fields, 0);
        ck_assert_int_eq(check(base, size, NULL), 0);
}

START_TEST(test_region_check_fresh) {
        struct region r;
        const char *msg = NULL;

        region_init(&r);
        ck_assert_int_eq(layout_cpl_region_check(r.base, r.g.cpl_region_size, &msg), 0);
        ck_assert_int_eq(layout_cpl_region_check(r.base, r.g.cpl_region_size, NULL), 0);
        /* A mapping larger than the region is fine (page rounding). */
        ck_assert_int_eq(layout_cpl_region_check(r.base, r.g.cpl_region_size + 4096, NULL), 0);

        const struct hbg_cpl_header *h = (const void *)r.base;
        ck_assert_uint_eq(h->magic, HBG_CPL_MAGIC);
        ck_assert_uint_eq(h->layout_version, HBG_LAYOUT_VERSION);
        ck_assert_uint_eq(h->region_size, r.g.cpl_region_size);
        ck_assert_uint_eq(h->flags_offset, r.g.cpl_flags_offset);
        ck_assert_uint_eq(h->graphs_offset, r.g.cpl_graphs_offset);
        ck_assert_uint_eq(h->ext_ready_offset, r.g.cpl_ext_ready_offset);
        free(r.base);
}
END_TEST

START_TEST(test_region_check_other_geometries) {
        for (unsigned d = 8; d <= 16; d++) {
                for (unsigned f = 8; f <= d; f++) {
                        struct hbg_geometry_request req;
                        struct hbg_geometry g;
                        unsigned char *base;

                        geometry_request_default(&req);
                        req.task_window = POW2(d);
                        req.flag_window = POW2(f);
                        ck_assert_int_eq(geometry_init(&g, &req, NULL), 0);
                        base = aligned_alloc(64, g.cpl_region_size);
                        ck_assert_ptr_nonnull(base);
                        memset(base, 0, g.cpl_region_size);
                        layout_cpl_region_init(base, &g, (uint64_t)d * 1000 + f);
                        ck_assert_msg(layout_cpl_region_check(base, g.cpl_region_size, NULL) == 0,
                                      "D=2^%u F=2^%u rejected", d, f);
                        free(base);
                }
        }
}
END_TEST

START_TEST(test_region_check_damaged) {
        struct region r;
        struct hbg_cpl_header *h;

        region_init(&r);
        h = (void *)r.base;

        h->magic ^= 1;
        expect_region_rejected(&r, r.g.cpl_region_size, "bad magic");
        h->magic ^= 1;
        ck_assert_int_eq(layout_cpl_region_check(r.base, r.g.cpl_region_size, NULL), 0);

        h->magic = HBG_SUB_MAGIC;
        expect_region_rejected(&r, r.g.cpl_region_size, "submission magic");
        h->magic = HBG_CPL_MAGIC;

        h->layout_version = HBG_LAYOUT_VERSION + 1;
        expect_region_rejected(&r, r.g.cpl_region_size, "version + 1");
        h->layout_version = 0;
        expect_region_rejected(&r, r.g.cpl_region_size, "version 0");
        h->layout_version = HBG_LAYOUT_VERSION;

        /* One non-zero byte anywhere in a pad or reserved field. */
        expect_padding_checked(layout_cpl_region_check, r.base, r.g.cpl_region_size, "completion region",
                               cpl_fields, sizeof(cpl_fields) / sizeof(cpl_fields[0]),
                               sizeof(struct hbg_cpl_header));

        /* The header claims more than is mapped. */
        expect_region_rejected(&r, r.g.cpl_region_size - 1, "mapping one byte short");
        expect_region_rejected(&r, r.g.cpl_region_size - 4096, "mapping a page short");
        expect_region_rejected(&r, sizeof(struct hbg_cpl_header), "header-only mapping");
        expect_region_rejected(&r, sizeof(struct hbg_cpl_header) - 1, "mapping below header");
        expect_region_rejected(&r, 0, "empty mapping");

        /* Sizes and offsets that do not follow from the geometry. */
        h->region_size += 64;
        expect_region_rejected(&r, r.g.cpl_region_size + 4096, "region_size + 64");
        h->region_size -= 128;
        expect_region_rejected(&r, r.g.cpl_region_size + 4096, "region_size - 64");
        h->region_size += 64;
        h->flags_offset += 64;
        expect_region_rejected(&r, r.g.cpl_region_size, "flags_offset");
        h->flags_offset -= 64;
        h->graphs_offset = 0;
        expect_region_rejected(&r, r.g.cpl_region_size, "graphs_offset");
        h->graphs_offset = r.g.cpl_graphs_offset;
        h->ext_ready_offset += 64;
        expect_region_rejected(&r, r.g.cpl_region_size, "ext_ready_offset");
        h->ext_ready_offset = r.g.cpl_ext_ready_offset;

        /* Geometry out of range or inconsistent. */
        h->flag_window_log2 = 7;
        expect_region_rejected(&r, r.g.cpl_region_size, "F = 2^7");
        h->flag_window_log2 = 255;
        expect_region_rejected(&r, r.g.cpl_region_size, "F = 2^255");
        h->flag_window_log2 = h->task_window_log2 + 1;
        expect_region_rejected(&r, r.g.cpl_region_size, "F > D");
        h->flag_window_log2 = r.g.flag_window_log2;
        h->task_window_log2 = 25;
        expect_region_rejected(&r, r.g.cpl_region_size, "D = 2^25");
        h->task_window_log2 = UINT32_MAX;
        expect_region_rejected(&r, r.g.cpl_region_size, "D = 2^(2^32-1)");
        h->task_window_log2 = r.g.task_window_log2;
        h->graph_table_log2 = 1;
        expect_region_rejected(&r, r.g.cpl_region_size, "G = 2");
        h->graph_table_log2 = 64;
        expect_region_rejected(&r, r.g.cpl_region_size, "G = 2^64");
        h->graph_table_log2 = r.g.graph_table_log2;

        ck_assert_int_eq(layout_cpl_region_check(r.base, r.g.cpl_region_size, NULL), 0);
        free(r.base);
}
END_TEST

/* ------------------------------------------------ layout_sub_region_check */

/* A fresh submission region, with a small heap. */
static void sub_region_init(struct region *r) {
        struct hbg_geometry_request req;

        geometry_request_default(&req);
        req.heap_size = 64 * 1024;
        ck_assert_int_eq(geometry_init(&r->g, &req, NULL), 0);
        r->base = aligned_alloc(64, r->g.sub_region_size);
        ck_assert_ptr_nonnull(r->base);
        memset(r->base, 0, r->g.sub_region_size);
        layout_sub_region_init(r->base, &r->g);
}

static void expect_sub_rejected(const struct region *r, uint64_t size, const char *what) {
        expect_rejected(layout_sub_region_check, r->base, size, "submission region", what);
}

START_TEST(test_sub_region_check_fresh) {
        struct region r;
        const char *msg = NULL;

        sub_region_init(&r);
        ck_assert_int_eq(layout_sub_region_check(r.base, r.g.sub_region_size, &msg), 0);
        ck_assert_int_eq(layout_sub_region_check(r.base, r.g.sub_region_size, NULL), 0);
        ck_assert_int_eq(layout_sub_region_check(r.base, r.g.sub_region_size + 4096, NULL), 0);
        free(r.base);

        /* Other geometries: the check derives the layout from the header's
         * D, M, G and heap size alone. */
        for (unsigned d = 8; d <= 14; d += 3) {
                struct hbg_geometry_request req = {
                        .task_window = POW2(d),
                        .flag_window = POW2(8),
                        .heap_size = 64 * 7,
                        .mailbox_entries = POW2(d - 4),
                        .graph_table_entries = POW2(d - 6),
                };
                ck_assert_int_eq(geometry_init(&r.g, &req, NULL), 0);
                r.base = aligned_alloc(64, r.g.sub_region_size);
                ck_assert_ptr_nonnull(r.base);
                memset(r.base, 0, r.g.sub_region_size);
                layout_sub_region_init(r.base, &r.g);
                ck_assert_msg(layout_sub_region_check(r.base, r.g.sub_region_size, NULL) == 0,
                              "D=2^%u rejected", d);
                free(r.base);
        }
}
END_TEST

START_TEST(test_sub_region_check_damaged) {
        struct region r;
        struct hbg_sub_header *h;
        uint64_t size;

        sub_region_init(&r);
        h = (void *)r.base;
        size = r.g.sub_region_size;

        h->magic ^= 1;
        expect_sub_rejected(&r, size, "bad magic");
        h->magic = HBG_CPL_MAGIC;
        expect_sub_rejected(&r, size, "completion magic");
        h->magic = HBG_SUB_MAGIC;
        h->layout_version = HBG_LAYOUT_VERSION + 1;
        expect_sub_rejected(&r, size, "version + 1");
        h->layout_version = 0;
        expect_sub_rejected(&r, size, "version 0");
        h->layout_version = HBG_LAYOUT_VERSION;
        ck_assert_int_eq(layout_sub_region_check(r.base, size, NULL), 0);

        expect_padding_checked(layout_sub_region_check, r.base, size, "submission region", sub_fields,
                               sizeof(sub_fields) / sizeof(sub_fields[0]), sizeof(struct hbg_sub_header));

        /* The header claims more than is mapped. */
        expect_sub_rejected(&r, size - 1, "mapping one byte short");
        expect_sub_rejected(&r, sizeof(struct hbg_sub_header), "header-only mapping");
        expect_sub_rejected(&r, sizeof(struct hbg_sub_header) - 1, "mapping below header");
        expect_sub_rejected(&r, 0, "empty mapping");

        /* Sizes and offsets that do not follow from the geometry. */
        h->region_size += 64;
        expect_sub_rejected(&r, size + 4096, "region_size + 64");
        h->region_size -= 64;
        uint64_t *offsets[] = { &h->descs_offset, &h->fanins_offset, &h->args_offset, &h->graphs_offset,
                                &h->mailbox_offset, &h->heap_offset };
        for (size_t i = 0; i < sizeof(offsets) / sizeof(offsets[0]); i++) {
                *offsets[i] += 64;
                expect_sub_rejected(&r, size, "an offset + 64");
                *offsets[i] -= 64;
        }
        h->heap_size += 64;
        expect_sub_rejected(&r, size + 4096, "heap_size + 64");
        h->heap_size -= 32;
        expect_sub_rejected(&r, size, "heap_size not a multiple of 64");
        h->heap_size = 0;
        expect_sub_rejected(&r, size, "heap_size 0");
        h->heap_size = r.g.heap_size;

        /* Geometry out of range or inconsistent. */
        h->task_window_log2 = 7;
        expect_sub_rejected(&r, size, "D = 2^7");
        h->task_window_log2 = 25;
        expect_sub_rejected(&r, size, "D = 2^25");
        h->task_window_log2 = UINT32_MAX;
        expect_sub_rejected(&r, size, "D = 2^(2^32-1)");
        h->task_window_log2 = r.g.task_window_log2 + 1;
        expect_sub_rejected(&r, 2 * size, "D doubled");
        h->task_window_log2 = r.g.task_window_log2;
        h->mailbox_log2 = 3;
        expect_sub_rejected(&r, size, "M = 2^3");
        h->mailbox_log2 = 64;
        expect_sub_rejected(&r, size, "M = 2^64");
        h->mailbox_log2 = r.g.mailbox_log2;
        h->graph_ring_log2 = 1;
        expect_sub_rejected(&r, size, "G = 2");
        h->graph_ring_log2 = 21;
        expect_sub_rejected(&r, size, "G = 2^21");
        h->graph_ring_log2 = r.g.graph_table_log2;

        ck_assert_int_eq(layout_sub_region_check(r.base, size, NULL), 0);
        free(r.base);
}
END_TEST

static Suite *geometry_suite(void) {
        Suite *s = suite_create("geometry");
        TCase *tc;

        tc = tcase_create("reject");
        tcase_add_test(tc, test_task_window);
        tcase_add_test(tc, test_flag_window);
        tcase_add_test(tc, test_flag_window_exceeds_task_window);
        tcase_add_test(tc, test_heap_size);
        tcase_add_test(tc, test_mailbox_entries);
        tcase_add_test(tc, test_graph_table_entries);
        tcase_add_test(tc, test_null_ret_error);
        suite_add_tcase(s, tc);

        tc = tcase_create("layout");
        tcase_add_test(tc, test_default_layout);
        tcase_add_test(tc, test_layout_extremes);
        suite_add_tcase(s, tc);

        tc = tcase_create("region_check");
        tcase_add_test(tc, test_region_check_fresh);
        tcase_add_test(tc, test_region_check_other_geometries);
        tcase_add_test(tc, test_region_check_damaged);
        tcase_add_test(tc, test_sub_region_check_fresh);
        tcase_add_test(tc, test_sub_region_check_damaged);
        suite_add_tcase(s, tc);

        return s;
}

const struct check_main check_main = { .suite = geometry_suite };
