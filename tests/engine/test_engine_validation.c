/* SPDX-License-Identifier: MIT */
/*
 * Hostile descriptors end to end: every validation rule of
 * daemon/engine/validate.c validate_task() and of kernel_validate()
 * (daemon/engine/kernels.h), each on its own.
 *
 * Each rule submits one graph [good G, bad B, dependant P(B), independent
 * I(G)] on a fresh ring and checks: the graph's status is the rule's error
 * and its first_error_task is B; P did not run, G and I did; the whole heap
 * equals a shadow copy (canary 0xA5 everywhere no task may write, the end
 * of the heap included); the error latch names B; no external task was
 * handed over; then a good graph on the same ring succeeds. The harness
 * puts the heap at the very end of the malloc'd submission region, so under
 * ASan any access past the heap (a tensor or predicate that escaped
 * validation) is reported.
 *
 * The bad task starts from a valid one (fill_f32 of `bad_out`, or a valid
 * copy/add/gemm/... for kernel-specific rules) and breaks exactly one
 * thing; the `controls` loop runs the valid starting points and boundary
 * values through the same graph and expects success, so each rule's
 * failure is caused by its one change.
 */
#include <check.h>
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/clock.h"
#include "daemon/engine/engine.h"
#include "daemon/engine/engine_recorded.h"
#include "daemon/engine/engine_stats.h"
#include "daemon/engine/failures.h"
#include "daemon/engine/kernels.h"
#include "daemon/engine/slot.h"
#include "daemon/engine/validate.h"
#include "tests/engine/harness.h"
#include "tests/check_main.h"

#define HEAP_BYTES (64u * 1024u)
#define FIRST_ID UINT64_C(1000)
#define NF 64u                  /* floats per buffer */
#define BUF_BYTES (NF * 4u)
#define CANARY 0xA5
#define D_WINDOW 256u
#define WAIT_MS 20000

#define V_G 1.0f                /* G fills g_out */
#define V_BAD 9.0f              /* the bad task's base fill value */
#define V_DEP 3.0f              /* P fills dep_out */
#define V_IND 4.0f              /* I fills ind_out */
#define V_IN 2.0f               /* bad_in */
#define V_IN2 0.5f              /* bad_in2 */

struct vctx {
        struct hbg_engine *e;
        struct harness_ring h;
        uint8_t *expect;        /* shadow heap */
        uint64_t g_out, bad_in, bad_in2, bad_out, dep_out, ind_out, chk_out, chk_out2;
        uint64_t heap_size;
        uint16_t bad_kernel;    /* the kernel B's failure must name */
};

/* ------------------------------------------------------------ helpers */

static int never_external(void *ud, uint64_t id) {
        (void)ud;
        ck_abort_msg("task %llu was handed over as external", (unsigned long long)id);
        return 0;
}

static struct hbg_task_desc *desc_of(struct harness_ring *h, uint64_t id) {
        return (struct hbg_task_desc *)(void *)((char *)h->sub + h->g.sub_descs_offset +
                                                (id & (h->g.task_window - 1)) * 64);
}

static void fill_f32(uint8_t *base, uint64_t off, uint64_t bytes, float v) {
        for (uint64_t i = 0; i < bytes / 4; i++)
                memcpy(base + off + 4 * i, &v, 4);
}

static uint64_t buffer(struct vctx *c) {
        harness_alloc(&c->h, 64); /* guard line, stays canary */
        return harness_alloc(&c->h, BUF_BYTES);
}

static void setup(struct vctx *c) {
        struct hbg_engine_config cfg;
        struct hbg_geometry_request req;

        memset(c, 0, sizeof(*c));
        engine_config_default(&cfg);
        cfg.threads = 2;
        cfg.clusters = 2;
        cfg.stall_timeout_ms = 5000;
        ck_assert_int_eq(engine_new(&c->e, &cfg), 0);
        geometry_request_default(&req);
        req.task_window = D_WINDOW;
        req.flag_window = D_WINDOW;
        req.heap_size = HEAP_BYTES;
        req.graph_table_entries = 16;
        req.mailbox_entries = 16;
        ck_assert_int_eq(harness_ring_init(&c->h, c->e, &req, FIRST_ID), 0);
        c->heap_size = c->h.g.heap_size;
        ck_assert_uint_eq(c->heap_size, HEAP_BYTES);
        /* The heap ends exactly where the malloc'd region ends. */
        ck_assert_uint_eq(c->h.g.sub_heap_offset + c->heap_size, c->h.g.sub_region_size);
        c->h.external = never_external;

        memset(c->h.heap, CANARY, c->heap_size);
        c->g_out = buffer(c);
        c->bad_in = buffer(c);
        c->bad_in2 = buffer(c);
        c->bad_out = buffer(c);
        c->dep_out = buffer(c);
        c->ind_out = buffer(c);
        c->chk_out = buffer(c);
        c->chk_out2 = buffer(c);
        fill_f32(c->h.heap, c->bad_in, BUF_BYTES, V_IN);
        fill_f32(c->h.heap, c->bad_in2, BUF_BYTES, V_IN2);
        c->expect = malloc(c->heap_size);
        ck_assert_ptr_nonnull(c->expect);
        memcpy(c->expect, c->h.heap, c->heap_size);
}

static void teardown(struct vctx *c) {
        harness_ring_destroy(&c->h);
        engine_free(c->e);
        free(c->expect);
}

static void check_heap(struct vctx *c, const char *name, const char *when) {
        for (uint64_t i = 0; i < c->heap_size; i++)
                if (c->h.heap[i] != c->expect[i])
                        ck_abort_msg("%s: %s: heap byte %llu is 0x%02x, expected 0x%02x "
                                     "(g_out %llu bad_in %llu bad_in2 %llu bad_out %llu "
                                     "dep_out %llu ind_out %llu)",
                                     name, when, (unsigned long long)i, c->h.heap[i], c->expect[i],
                                     (unsigned long long)c->g_out, (unsigned long long)c->bad_in,
                                     (unsigned long long)c->bad_in2, (unsigned long long)c->bad_out,
                                     (unsigned long long)c->dep_out, (unsigned long long)c->ind_out);
}

static struct harness_task fill_task(uint64_t off, uint64_t bytes, float v, uint16_t blocks) {
        struct harness_task t = { .kernel = { HBG_KERNEL_FILL_F32 }, .lane_mask = 1,
                                  .block_num = blocks, .n_tensors = 1, .n_scalars = 1 };
        t.tensors[0] = harness_tensor(off, bytes, HBG_DIR_OUT);
        t.scalars[0] = harness_f32_scalar(v);
        return t;
}

static struct harness_task copy_task(struct vctx *c) {
        struct harness_task t = { .kernel = { 0, HBG_KERNEL_COPY_F32 }, .lane_mask = 2,
                                  .block_num = 2, .n_tensors = 2 };
        t.tensors[0] = harness_tensor(c->bad_in, BUF_BYTES, HBG_DIR_IN);
        t.tensors[1] = harness_tensor(c->bad_out, BUF_BYTES, HBG_DIR_OUT);
        return t;
}

static struct harness_task add_task(struct vctx *c) {
        struct harness_task t = { .kernel = { 0, 0, HBG_KERNEL_ADD_F32 }, .lane_mask = 4,
                                  .block_num = 3, .n_tensors = 3 };
        t.tensors[0] = harness_tensor(c->bad_in, BUF_BYTES, HBG_DIR_IN);
        t.tensors[1] = harness_tensor(c->bad_in2, BUF_BYTES, HBG_DIR_IN);
        t.tensors[2] = harness_tensor(c->bad_out, BUF_BYTES, HBG_DIR_OUT);
        return t;
}

/* C[4x4] += A[4x4] B[4x4] with A = bad_in (2.0), B = bad_in2 (0.5). */
static struct harness_task gemm_task(struct vctx *c) {
        struct harness_task t = { .kernel = { HBG_KERNEL_GEMM_F32 }, .lane_mask = 1,
                                  .block_num = 2, .n_tensors = 3, .n_scalars = 3,
                                  .scalars = { 4, 4, 4 } };
        t.tensors[0] = harness_tensor(c->bad_in, 64, HBG_DIR_IN);
        t.tensors[1] = harness_tensor(c->bad_in2, 64, HBG_DIR_IN);
        t.tensors[2] = harness_tensor(c->bad_out, 64, HBG_DIR_INOUT);
        return t;
}

/* bad_out[0] = the sum of bad_in (64 x 2.0), on AIC in 3 blocks: a
 * kernel that does not split runs as one part all the same. */
static struct harness_task reduce_task(struct vctx *c) {
        struct harness_task t = { .kernel = { HBG_KERNEL_REDUCE_SUM_F32 }, .lane_mask = 1,
                                  .block_num = 3, .n_tensors = 2 };
        t.tensors[0] = harness_tensor(c->bad_in, BUF_BYTES, HBG_DIR_IN);
        t.tensors[1] = harness_tensor(c->bad_out, 4, HBG_DIR_OUT);
        return t;
}

static struct harness_task spin_task(uint64_t ns) {
        struct harness_task t = { .kernel = { HBG_KERNEL_SPIN_NS }, .lane_mask = 1,
                                  .block_num = 1, .n_scalars = 1, .scalars = { ns } };
        return t;
}

static struct harness_task softmax_task(struct vctx *c) {
        struct harness_task t = { .kernel = { HBG_KERNEL_SOFTMAX_ROWS_F32 }, .lane_mask = 1,
                                  .block_num = 1, .n_tensors = 1, .n_scalars = 2,
                                  .scalars = { 4, 16 } };
        t.tensors[0] = harness_tensor(c->bad_out, BUF_BYTES, HBG_DIR_INOUT);
        return t;
}

static struct harness_task fail_task(int64_t code) {
        struct harness_task t = { .kernel = { HBG_KERNEL_FAIL, HBG_KERNEL_FAIL, HBG_KERNEL_FAIL },
                                  .lane_mask = 7, .block_num = 3, .n_scalars = 1,
                                  .scalars = { (uint64_t)code } };
        return t;
}

/* ------------------------------------------------------------ rules */

enum rule {
        /* daemon/engine/validate.c validate_task() */
        R_ID_NEXT_LAP,
        R_ID_PREV_LAP,
        R_ID_ZERO,
        R_RESERVED2,
        R_RESERVED0_0,
        R_RESERVED0_1,
        R_RESERVED0_2,
        R_RESERVED1_0,
        R_RESERVED1_1,
        R_RESERVED1_2,
        R_INLINE_BESIDE_PAYLOAD,
        R_FLAG_UNKNOWN_BIT3,
        R_FLAG_UNKNOWN_BIT7,
        R_LANE_BIT3,
        R_LANE_BIT7,
        R_BLOCKS_ZERO,
        R_BLOCKS_4097,
        R_BLOCKS_65535,
        R_FANINS_17,
        R_FANINS_255,
        R_TENSORS_9,
        R_SCALARS_9,
        R_FANIN_SELF,
        R_FANIN_FUTURE,
        R_FANIN_BELOW_FIRST,
        R_FANIN_HUGE,
        R_FANIN_LAST_OF_16_BAD,
        R_INLINE_AND_EXTERNAL,
        R_PRED_AT_HEAP_END,
        R_PRED_STRADDLES_END,
        R_PRED_MISALIGNED,
        R_PRED_OVERFLOW,
        R_DUMMY_WITH_KERNEL,
        R_DUMMY_WITH_TENSOR,
        R_DUMMY_WITH_SCALAR,
        R_INLINE_WITH_LANES,
        R_INLINE_WITH_SCALAR,
        R_EXTERNAL_WITH_LANES,
        R_EXTERNAL_WITH_KERNEL,
        R_KERNEL_ON_INACTIVE_LANE,
        R_KERNEL_UNKNOWN_99,
        R_KERNEL_UNKNOWN_COUNT,
        R_KERNEL_NONE_ON_ACTIVE_LANE,
        R_KERNEL_UNKNOWN_MIX_LANE,
        R_KERNEL_UNKNOWN_LOW_LANE,
        /* kernel_validate() */
        R_TENSOR_COUNT_HIGH,
        R_TENSOR_COUNT_ZERO,
        R_SCALAR_COUNT,
        R_DIRECTION_IN,
        R_DIRECTION_INOUT,
        R_DIRECTION_ZERO,
        R_TENSOR_RESERVED,
        R_OFFSET_MISALIGNED,
        R_LENGTH_MISALIGNED,
        R_LENGTH_ZERO,
        R_PAST_HEAP_END,
        R_AT_HEAP_END,
        R_OFFSET_PLUS_LENGTH_OVERFLOW,
        R_LENGTH_OVERFLOW,
        R_OUT_OVERLAPS_IN,
        R_COPY_OUT_PARTIAL,
        R_GEMM_C_OVERLAPS_A,
        R_F32_SCALAR_HIGH_BITS,
        R_COPY_SHORT_INPUT,
        R_ADD_SHORT_B,
        R_ADD_LONG_INPUTS,
        R_GEMM_SHAPE_A,
        R_GEMM_SHAPE_C,
        R_GEMM_DIM_ZERO,
        R_GEMM_DIM_TOO_BIG,
        R_SOFTMAX_SHAPE,
        R_SPIN_TOO_LONG,
        R_FAIL_CODE_ZERO,
        R_FAIL_CODE_TOO_LOW,
        R_MIX_SECOND_LANE_SIGNATURE,
        R_MIX_UNSPLIT_AFTER_SPLIT,
        R_MIX_SPLIT_AFTER_UNSPLIT,
        R_COUNT,
        /* Not validation: a valid fail kernel returning -EIO. */
        R_KERNEL_FAILS = R_COUNT,
};

static const struct {
        const char *name;
        int err;
        const char *why; /* what the message says, where another rule could refuse the same */
} rules[R_COUNT + 1] = {
        [R_ID_NEXT_LAP] = { "descriptor id of the next lap", -EPROTO },
        [R_ID_PREV_LAP] = { "descriptor id of the previous lap", -EPROTO },
        [R_ID_ZERO] = { "descriptor id zero", -EPROTO },
        [R_RESERVED2] = { "reserved2 non-zero", -EPROTO },
        [R_RESERVED0_0] = { "reserved0[0] non-zero", -EPROTO },
        [R_RESERVED0_1] = { "reserved0[1] non-zero", -EPROTO },
        [R_RESERVED0_2] = { "reserved0[2] non-zero", -EPROTO },
        [R_RESERVED1_0] = { "fanins_inline[0] set, no fanins", -EPROTO },
        [R_RESERVED1_1] = { "fanins_inline[1] set, no fanins", -EPROTO },
        [R_RESERVED1_2] = { "fanins_inline[2] set, no fanins", -EPROTO },
        [R_INLINE_BESIDE_PAYLOAD] = { "fanins_inline[0] set, 4 fanins in the slot's fanins", -EPROTO },
        [R_FLAG_UNKNOWN_BIT3] = { "unknown flag bit 3", -EINVAL },
        [R_FLAG_UNKNOWN_BIT7] = { "unknown flag bit 7", -EINVAL },
        [R_LANE_BIT3] = { "lane mask bit 3", -EINVAL },
        [R_LANE_BIT7] = { "lane mask bit 7 only", -EINVAL },
        [R_BLOCKS_ZERO] = { "block_num 0", -ERANGE },
        [R_BLOCKS_4097] = { "block_num 4097", -ERANGE },
        [R_BLOCKS_65535] = { "block_num 65535", -ERANGE },
        [R_FANINS_17] = { "17 fanins", -E2BIG },
        [R_FANINS_255] = { "255 fanins", -E2BIG },
        [R_TENSORS_9] = { "9 tensors", -E2BIG },
        [R_SCALARS_9] = { "9 scalars", -E2BIG },
        [R_FANIN_SELF] = { "fanin equal to own id", -EINVAL },
        [R_FANIN_FUTURE] = { "fanin on a later task", -EINVAL },
        [R_FANIN_BELOW_FIRST] = { "fanin below the ring's first id", -EINVAL },
        [R_FANIN_HUGE] = { "fanin UINT64_MAX", -EINVAL },
        [R_FANIN_LAST_OF_16_BAD] = { "16th of 16 fanins bad", -EINVAL },
        [R_INLINE_AND_EXTERNAL] = { "host-inline and external", -EINVAL },
        [R_PRED_AT_HEAP_END] = { "predicate at the heap end", -ERANGE },
        [R_PRED_STRADDLES_END] = { "predicate straddles the heap end", -ERANGE },
        [R_PRED_MISALIGNED] = { "predicate misaligned", -ERANGE },
        [R_PRED_OVERFLOW] = { "predicate offset + 4 overflows", -ERANGE },
        [R_DUMMY_WITH_KERNEL] = { "dummy with a kernel", -EINVAL },
        [R_DUMMY_WITH_TENSOR] = { "dummy with a tensor", -EINVAL },
        [R_DUMMY_WITH_SCALAR] = { "dummy with a scalar", -EINVAL },
        [R_INLINE_WITH_LANES] = { "host-inline with lanes", -EINVAL },
        [R_INLINE_WITH_SCALAR] = { "host-inline with a scalar", -EINVAL },
        [R_EXTERNAL_WITH_LANES] = { "external with lanes", -EINVAL },
        [R_EXTERNAL_WITH_KERNEL] = { "external with a kernel id", -EINVAL },
        [R_KERNEL_ON_INACTIVE_LANE] = { "kernel on an inactive lane", -EINVAL },
        [R_KERNEL_UNKNOWN_99] = { "unknown kernel 99", -ENOENT },
        [R_KERNEL_UNKNOWN_COUNT] = { "unknown kernel HBG_KERNEL_COUNT", -ENOENT },
        [R_KERNEL_NONE_ON_ACTIVE_LANE] = { "kernel NONE on an active lane", -ENOENT },
        [R_KERNEL_UNKNOWN_MIX_LANE] = { "unknown kernel on a MIX lane", -ENOENT },
        [R_KERNEL_UNKNOWN_LOW_LANE] = { "unknown kernel on the lower MIX lane", -ENOENT },
        [R_TENSOR_COUNT_HIGH] = { "wrong tensor count (2 for fill)", -EINVAL },
        [R_TENSOR_COUNT_ZERO] = { "wrong tensor count (0 for fill)", -EINVAL },
        [R_SCALAR_COUNT] = { "wrong scalar count", -EINVAL },
        [R_DIRECTION_IN] = { "wrong direction (IN for OUT)", -EINVAL },
        [R_DIRECTION_INOUT] = { "wrong direction (INOUT for OUT)", -EINVAL },
        [R_DIRECTION_ZERO] = { "direction 0", -EINVAL },
        [R_TENSOR_RESERVED] = { "tensor reserved non-zero", -EINVAL },
        [R_OFFSET_MISALIGNED] = { "misaligned tensor offset", -EINVAL },
        [R_LENGTH_MISALIGNED] = { "misaligned tensor length", -EINVAL },
        [R_LENGTH_ZERO] = { "empty tensor", -EINVAL },
        [R_PAST_HEAP_END] = { "tensor past the heap end", -ERANGE },
        [R_AT_HEAP_END] = { "tensor starting at the heap end", -ERANGE },
        [R_OFFSET_PLUS_LENGTH_OVERFLOW] = { "offset + length overflows 2^64", -EOVERFLOW },
        [R_LENGTH_OVERFLOW] = { "huge length overflows 2^64", -EOVERFLOW },
        [R_OUT_OVERLAPS_IN] = { "output overlaps an input", -EINVAL },
        [R_COPY_OUT_PARTIAL] = { "copy output partly over its input", -EINVAL },
        [R_GEMM_C_OVERLAPS_A] = { "gemm inout C overlaps A", -EINVAL },
        [R_F32_SCALAR_HIGH_BITS] = { "f32 scalar with upper bits", -EINVAL },
        [R_COPY_SHORT_INPUT] = { "copy input shorter than output", -EINVAL },
        [R_ADD_SHORT_B] = { "add input b shorter than output", -EINVAL },
        [R_ADD_LONG_INPUTS] = { "add inputs longer than output", -EINVAL },
        [R_GEMM_SHAPE_A] = { "gemm shape does not fit A", -EINVAL },
        [R_GEMM_SHAPE_C] = { "gemm shape does not fit C", -EINVAL },
        [R_GEMM_DIM_ZERO] = { "gemm k = 0", -EINVAL },
        [R_GEMM_DIM_TOO_BIG] = { "gemm m > 2^20", -ERANGE },
        [R_SOFTMAX_SHAPE] = { "softmax shape does not fit X", -EINVAL },
        [R_SPIN_TOO_LONG] = { "spin_ns longer than 1 s", -ERANGE },
        [R_FAIL_CODE_ZERO] = { "fail code 0", -ERANGE },
        [R_FAIL_CODE_TOO_LOW] = { "fail code -4096", -ERANGE },
        [R_MIX_SECOND_LANE_SIGNATURE] = { "MIX lane kernel with another signature", -EINVAL },
        [R_MIX_UNSPLIT_AFTER_SPLIT] = { "MIX lane kernel that does not split after one that does", -EINVAL,
                                        "does not split" },
        [R_MIX_SPLIT_AFTER_UNSPLIT] = { "MIX lane kernel that splits after one that does not", -EINVAL,
                                        "does not split" },
        [R_KERNEL_FAILS] = { "kernel fail returns -EIO", -EIO },
};

/* Add the bad task of rule `r`; it gets id h->prod.next_id. */
static uint64_t add_bad(struct vctx *c, enum rule r) {
        uint64_t id = c->h.prod.next_id;
        uint64_t heap = c->heap_size;
        uint64_t g = id - 1; /* the good task G */
        struct harness_task t = fill_task(c->bad_out, BUF_BYTES, V_BAD, 2);

        switch (r) {
        case R_FLAG_UNKNOWN_BIT3: t.flags = 1u << 3; break;
        case R_FLAG_UNKNOWN_BIT7: t.flags = 1u << 7; break;
        case R_LANE_BIT3: t.lane_mask = 1u | (1u << 3); break;
        case R_LANE_BIT7:
                t.lane_mask = 1u << 7;
                t.kernel[0] = 0;
                break;
        case R_BLOCKS_4097: t.block_num = 4097; break;
        case R_BLOCKS_65535: t.block_num = 65535; break;
        case R_INLINE_BESIDE_PAYLOAD:
                t.n_fanins = 4;
                for (unsigned i = 0; i < 4; i++)
                        t.fanins[i] = g;
                break;
        case R_FANINS_17:
                t.n_fanins = 17;
                for (unsigned i = 0; i < HBG_MAX_FANINS; i++)
                        t.fanins[i] = g;
                break;
        case R_FANINS_255:
                t.n_fanins = 255;
                for (unsigned i = 0; i < HBG_MAX_FANINS; i++)
                        t.fanins[i] = g;
                break;
        case R_TENSORS_9:
                t.n_tensors = 9;
                for (unsigned i = 1; i < HBG_MAX_TENSOR_ARGS; i++)
                        t.tensors[i] = harness_tensor(c->bad_in, 4, HBG_DIR_IN);
                break;
        case R_SCALARS_9: t.n_scalars = 9; break;
        case R_FANIN_SELF: t.n_fanins = 1; t.fanins[0] = id; break;
        case R_FANIN_FUTURE: t.n_fanins = 1; t.fanins[0] = id + 1; break;
        case R_FANIN_BELOW_FIRST: t.n_fanins = 1; t.fanins[0] = FIRST_ID - 1; break;
        case R_FANIN_HUGE: t.n_fanins = 1; t.fanins[0] = UINT64_MAX; break;
        case R_FANIN_LAST_OF_16_BAD:
                t.n_fanins = 16;
                for (unsigned i = 0; i < 15; i++)
                        t.fanins[i] = g;
                t.fanins[15] = id + 2;
                break;
        case R_INLINE_AND_EXTERNAL:
                t = (struct harness_task){ .flags = HBG_TASK_HOST_INLINE | HBG_TASK_EXTERNAL };
                break;
        case R_PRED_AT_HEAP_END:
                t.flags = HBG_TASK_HAS_PREDICATE;
                t.predicate_offset = heap;
                break;
        case R_PRED_STRADDLES_END:
                /* Aligned to 2 only: still the end check must not be fooled. */
                t.flags = HBG_TASK_HAS_PREDICATE;
                t.predicate_offset = heap - 2;
                break;
        case R_PRED_MISALIGNED:
                t.flags = HBG_TASK_HAS_PREDICATE;
                t.predicate_offset = c->bad_in + 1;
                break;
        case R_PRED_OVERFLOW:
                t.flags = HBG_TASK_HAS_PREDICATE;
                t.predicate_offset = UINT64_MAX - 3;
                break;
        case R_DUMMY_WITH_KERNEL:
                t = (struct harness_task){ .kernel = { HBG_KERNEL_NOOP } };
                break;
        case R_DUMMY_WITH_TENSOR:
                t = (struct harness_task){ .n_tensors = 1 };
                t.tensors[0] = harness_tensor(c->bad_out, BUF_BYTES, HBG_DIR_OUT);
                break;
        case R_DUMMY_WITH_SCALAR:
                t = (struct harness_task){ .n_scalars = 1, .scalars = { 1 } };
                break;
        case R_INLINE_WITH_LANES: t.flags = HBG_TASK_HOST_INLINE; break;
        case R_INLINE_WITH_SCALAR:
                t = (struct harness_task){ .flags = HBG_TASK_HOST_INLINE, .n_scalars = 1 };
                break;
        case R_EXTERNAL_WITH_LANES: t.flags = HBG_TASK_EXTERNAL; break;
        case R_EXTERNAL_WITH_KERNEL:
                t = (struct harness_task){ .flags = HBG_TASK_EXTERNAL,
                                           .kernel = { 0, HBG_KERNEL_NOOP } };
                break;
        case R_KERNEL_ON_INACTIVE_LANE: t.kernel[2] = HBG_KERNEL_NOOP; break;
        case R_KERNEL_UNKNOWN_99: t.kernel[0] = 99; break;
        case R_KERNEL_UNKNOWN_COUNT: t.kernel[0] = HBG_KERNEL_COUNT; break;
        case R_KERNEL_NONE_ON_ACTIVE_LANE: t.kernel[0] = HBG_KERNEL_NONE; break;
        case R_KERNEL_UNKNOWN_MIX_LANE:
                t.lane_mask = 3;
                t.kernel[1] = 0xffff;
                break;
        case R_KERNEL_UNKNOWN_LOW_LANE: /* the failure names lane 1's kernel, the first known */
                t.lane_mask = 3;
                t.kernel[1] = t.kernel[0];
                t.kernel[0] = 0xffff;
                break;
        case R_TENSOR_COUNT_HIGH:
                t.n_tensors = 2;
                t.tensors[1] = harness_tensor(c->bad_in, 4, HBG_DIR_IN);
                break;
        case R_TENSOR_COUNT_ZERO: t.n_tensors = 0; break;
        case R_SCALAR_COUNT: t.n_scalars = 0; break;
        case R_DIRECTION_IN: t.tensors[0].direction = HBG_DIR_IN; break;
        case R_DIRECTION_INOUT: t.tensors[0].direction = HBG_DIR_INOUT; break;
        case R_DIRECTION_ZERO: t.tensors[0].direction = 0; break;
        case R_TENSOR_RESERVED: t.tensors[0].reserved = 1; break;
        case R_OFFSET_MISALIGNED: t.tensors[0].offset = c->bad_out + 2; t.tensors[0].length = 64; break;
        case R_LENGTH_MISALIGNED: t.tensors[0].length = 62; break;
        case R_LENGTH_ZERO: t.tensors[0].length = 0; break;
        case R_PAST_HEAP_END:
                /* Covers the last line of the heap and one line past it. */
                t.tensors[0] = harness_tensor(heap - 64, 128, HBG_DIR_OUT);
                break;
        case R_AT_HEAP_END: t.tensors[0] = harness_tensor(heap, 4, HBG_DIR_OUT); break;
        case R_OFFSET_PLUS_LENGTH_OVERFLOW:
                t.tensors[0] = harness_tensor(UINT64_MAX - 3, 8, HBG_DIR_OUT);
                break;
        case R_LENGTH_OVERFLOW:
                t.tensors[0] = harness_tensor(c->bad_out, UINT64_MAX - 3, HBG_DIR_OUT);
                break;
        case R_OUT_OVERLAPS_IN:
                t = add_task(c);
                t.tensors[2].offset = c->bad_in2 + BUF_BYTES - 4; /* last element of b */
                break;
        case R_COPY_OUT_PARTIAL:
                /* The very range would be in place (allowed); shifted by
                 * one element it is a partial overlap. */
                t = copy_task(c);
                t.tensors[1].offset = c->bad_in + 4;
                break;
        case R_GEMM_C_OVERLAPS_A:
                t = gemm_task(c);
                t.tensors[2].offset = c->bad_in + 60;
                break;
        case R_F32_SCALAR_HIGH_BITS: t.scalars[0] |= UINT64_C(1) << 32; break;
        case R_COPY_SHORT_INPUT:
                t = copy_task(c);
                t.tensors[0].length = BUF_BYTES - 4;
                break;
        case R_ADD_SHORT_B:
                t = add_task(c);
                t.tensors[1].length = 4;
                break;
        case R_ADD_LONG_INPUTS:
                /* No silent truncation: every tensor as long as the output. */
                t = add_task(c);
                t.tensors[2].length = BUF_BYTES - 4;
                break;
        case R_GEMM_SHAPE_A:
                t = gemm_task(c);
                t.tensors[0].length = 60;
                break;
        case R_GEMM_SHAPE_C:
                t = gemm_task(c);
                t.scalars[1] = 5; /* n = 5: B (given 80 bytes) fits, C (64) does not */
                t.tensors[1].length = 80;
                break;
        case R_GEMM_DIM_ZERO:
                t = gemm_task(c);
                t.scalars[2] = 0;
                break;
        case R_GEMM_DIM_TOO_BIG:
                t = gemm_task(c);
                t.scalars[0] = (UINT64_C(1) << 20) + 1;
                break;
        case R_SOFTMAX_SHAPE:
                t = softmax_task(c);
                t.scalars[1] = 17;
                break;
        case R_SPIN_TOO_LONG: t = spin_task(UINT64_C(1000000001)); break;
        case R_FAIL_CODE_ZERO: t = fail_task(0); break;
        case R_FAIL_CODE_TOO_LOW: t = fail_task(-4096); break;
        case R_MIX_SECOND_LANE_SIGNATURE:
                /* scale_f32 wants an INOUT tensor where fill has an OUT. */
                t.lane_mask = 3;
                t.kernel[1] = HBG_KERNEL_SCALE_F32;
                break;
        /* The one part a task of a kernel that does not split runs
         * could run only one of two kernels. */
        case R_MIX_UNSPLIT_AFTER_SPLIT:
                t = copy_task(c);
                t.lane_mask = 3;
                t.kernel[0] = HBG_KERNEL_COPY_F32;
                t.kernel[1] = HBG_KERNEL_REDUCE_SUM_F32;
                break;
        case R_MIX_SPLIT_AFTER_UNSPLIT:
                t = reduce_task(c);
                t.lane_mask = 5;
                t.kernel[2] = HBG_KERNEL_COPY_F32;
                break;
        case R_KERNEL_FAILS: t = fail_task(-EIO); break;
        default: break;
        }

        ck_assert_uint_eq(harness_add_task(&c->h, &t), id);

        /* Rules the harness cannot express: patch the written descriptor
         * (not yet published). */
        struct hbg_task_desc *d = desc_of(&c->h, id);
        ck_assert_uint_eq(d->id, id);
        switch (r) {
        case R_ID_NEXT_LAP: d->id = id + D_WINDOW; break;
        case R_ID_PREV_LAP: d->id = id - D_WINDOW; break;
        case R_ID_ZERO: d->id = 0; break;
        case R_RESERVED2: d->reserved2 = 1; break;
        case R_RESERVED0_0: d->reserved0[0] = 1; break;
        case R_RESERVED0_1: d->reserved0[1] = 0x80; break;
        case R_RESERVED0_2: d->reserved0[2] = 1; break;
        case R_RESERVED1_0: d->fanins_inline[0] = 1; break;
        case R_RESERVED1_1: d->fanins_inline[1] = UINT64_C(1) << 63; break;
        case R_RESERVED1_2: d->fanins_inline[2] = 1; break;
        case R_INLINE_BESIDE_PAYLOAD: d->fanins_inline[0] = g; break;
        case R_BLOCKS_ZERO: d->block_num = 0; break;
        default: break;
        }
        /* The kernel B's failure names (§12.2): the lane whose own check
         * refused it, else the first active lane's kernel that is one. */
        c->bad_kernel = HBG_KERNEL_NONE;
        if (r == R_MIX_SECOND_LANE_SIGNATURE)
                c->bad_kernel = HBG_KERNEL_SCALE_F32;
        else if (r == R_MIX_UNSPLIT_AFTER_SPLIT)
                c->bad_kernel = HBG_KERNEL_REDUCE_SUM_F32;
        else if (r == R_MIX_SPLIT_AFTER_UNSPLIT)
                c->bad_kernel = HBG_KERNEL_COPY_F32;
        else
                for (unsigned lane = 0; lane < HBG_LANES && c->bad_kernel == HBG_KERNEL_NONE; lane++)
                        if ((d->lane_mask & (1u << lane)) && d->kernel[lane] != HBG_KERNEL_NONE &&
                            d->kernel[lane] < HBG_KERNEL_COUNT)
                                c->bad_kernel = d->kernel[lane];
        return id;
}

/* ------------------------------------------------------------ the graph */

static void wait_ok(struct vctx *c, uint64_t k, const char *name, struct hbg_graph_entry *ge) {
        int rc = harness_wait_graph(&c->h, k, WAIT_MS, ge);
        ck_assert_msg(rc == 0, "%s: graph %llu not retired (%d)", name, (unsigned long long)k, rc);
}

/* The good graph after the bad one: copy G's output, add it to I's. */
static void good_graph_after(struct vctx *c, const char *name) {
        struct harness_task cp = { .kernel = { HBG_KERNEL_COPY_F32 }, .lane_mask = 1, .block_num = 4,
                                   .n_tensors = 2 };
        cp.tensors[0] = harness_tensor(c->g_out, BUF_BYTES, HBG_DIR_IN);
        cp.tensors[1] = harness_tensor(c->chk_out, BUF_BYTES, HBG_DIR_OUT);
        uint64_t tc = harness_add_task(&c->h, &cp);
        struct harness_task ad = { .kernel = { 0, HBG_KERNEL_ADD_F32, HBG_KERNEL_ADD_F32 },
                                   .lane_mask = 6, .block_num = 2, .n_fanins = 1,
                                   .fanins = { tc }, .n_tensors = 3 };
        ad.tensors[0] = harness_tensor(c->chk_out, BUF_BYTES, HBG_DIR_IN);
        ad.tensors[1] = harness_tensor(c->ind_out, BUF_BYTES, HBG_DIR_IN);
        ad.tensors[2] = harness_tensor(c->chk_out2, BUF_BYTES, HBG_DIR_OUT);
        harness_add_task(&c->h, &ad);
        uint64_t k = harness_end_graph(&c->h, 0x600d);
        struct hbg_graph_entry ge;
        wait_ok(c, k, name, &ge);
        ck_assert_msg(ge.status == 0, "%s: good graph after the bad one: status %d (task %llu)",
                      name, ge.status, (unsigned long long)ge.first_error_task);
        ck_assert_uint_eq(ge.graph_id, 0x600d);
        fill_f32(c->expect, c->chk_out, BUF_BYTES, V_G);
        fill_f32(c->expect, c->chk_out2, BUF_BYTES, V_G + V_IND);
        check_heap(c, name, "after the good graph");
}

/* What a dry run (engine_validate()) says of B as task 0 of a recording:
 * its code, and its message in *msg; 0 if it passes there (a rule on B's
 * id or fanins, which a recording numbers otherwise). */
static int dry_run_message(struct vctx *c, uint64_t b, char *msg, size_t len);

/*
 * [G, B, P(B, G), I(G)] on a fresh ring. `bad` adds B (for rules) or is
 * NULL and `control` adds a valid task (for controls) whose expected heap
 * effect `control` also applies to the shadow. `want` is the expected
 * graph status.
 */
static void run_graph(struct vctx *c, const char *name, int want, enum rule r,
                      uint64_t (*control)(struct vctx *c, unsigned i), unsigned ci) {
        struct harness_task tg = fill_task(c->g_out, BUF_BYTES, V_G, 2);
        uint64_t g = harness_add_task(&c->h, &tg);
        ck_assert_uint_eq(g, FIRST_ID);
        uint64_t b = control ? control(c, ci) : add_bad(c, r);
        ck_assert_uint_eq(b, g + 1);
        struct harness_task tp = fill_task(c->dep_out, BUF_BYTES, V_DEP, 3);
        tp.n_fanins = 2;
        tp.fanins[0] = b;
        tp.fanins[1] = g;
        harness_add_task(&c->h, &tp);
        struct harness_task ti = fill_task(c->ind_out, BUF_BYTES, V_IND, 1);
        ti.n_fanins = 1;
        ti.fanins[0] = g;
        harness_add_task(&c->h, &ti);
        uint64_t k = harness_end_graph(&c->h, 0xbad);
        ck_assert_uint_eq(k, 0);

        struct hbg_graph_entry ge;
        wait_ok(c, k, name, &ge);
        ck_assert_uint_eq(ge.graph_id, 0xbad);
        ck_assert_msg(ge.status == want, "%s: graph status %d, expected %d", name, ge.status, want);
        if (want != 0) {
                ck_assert_msg(ge.first_error_task == b, "%s: first_error_task %llu, expected %llu",
                              name, (unsigned long long)ge.first_error_task,
                              (unsigned long long)b);
                if (!control)
                        ck_assert_msg(ge.kernel == c->bad_kernel, "%s: the failure names kernel %u, expected %u",
                                      name, ge.kernel, c->bad_kernel);
                /* The validator's reason reaches the graph table. */
                ck_assert_msg(memchr(ge.message, '\0', sizeof(ge.message)) && ge.message[0] &&
                                      strcmp(ge.message, "session stopped") != 0,
                              "%s: no message in the graph entry", name);
                if (!control && rules[r].why)
                        ck_assert_msg(strstr(ge.message, rules[r].why), "%s: message '%s', want '%s'", name,
                                      ge.message, rules[r].why);
                /* With the numbers a dry run gives (as far as the entry
                 * holds them). */
                char dry[HBG_VALIDATE_MESSAGE_MAX];
                if (!control && dry_run_message(c, b, dry, sizeof(dry)) == want) {
                        dry[sizeof(ge.message) - 1] = '\0';
                        ck_assert_msg(strcmp(ge.message, dry) == 0, "%s: the run says '%s', a dry run '%s'", name,
                                      ge.message, dry);
                }
        }

        /* G and I ran; P ran only if B succeeded. */
        fill_f32(c->expect, c->g_out, BUF_BYTES, V_G);
        fill_f32(c->expect, c->ind_out, BUF_BYTES, V_IND);
        if (want == 0)
                fill_f32(c->expect, c->dep_out, BUF_BYTES, V_DEP);
        check_heap(c, name, "after the graph");

        /* The error latch names B; the ring goes on; nothing external. */
        struct ring_stats rs;
        ring_stats(c->h.ring, &rs);
        ck_assert_msg(!rs.broken, "%s: ring broken", name);
        ck_assert_int_eq(rs.error, want);
        ck_assert_int_eq(atomic_load(&c->h.ch->error_code), want);
        if (want != 0) {
                ck_assert_uint_eq(atomic_load(&c->h.ch->error_task), b);
                ck_assert_msg(rs.failed == 2, "%s: ring counts %llu failed tasks, expected 2 (B, P)",
                              name, (unsigned long long)rs.failed);
        } else {
                ck_assert_uint_eq(rs.failed, 0);
        }
        ck_assert_uint_eq(rs.completed, 4);
        ck_assert_uint_eq(rs.graphs_retired, 1);
        ck_assert_uint_eq(rs.graphs_failed, want != 0);
        ck_assert_uint_eq(atomic_load(&c->h.ch->ext_ready_tail), 0);

        good_graph_after(c, name);
        ring_stats(c->h.ring, &rs);
        ck_assert_uint_eq(rs.completed, 6);
        ck_assert_uint_eq(rs.graphs_retired, 2);
        ck_assert(!rs.broken);
}

struct first_refusal {
        uint32_t n;
        int code;
        char message[HBG_VALIDATE_MESSAGE_MAX];
};

static void keep_refusal(void *userdata, uint32_t task, int code, const char *message) {
        (void)task;
        struct first_refusal *f = userdata;
        if (f->n++ == 0) {
                f->code = code;
                snprintf(f->message, sizeof(f->message), "%s", message);
        }
}

/* Task id of the ring as a recorded task (descriptor, fanins, arguments),
 * as it was written. */
static struct hbg_recorded_task recorded_of(struct vctx *c, uint64_t id) {
        uint64_t slot = id & (c->h.g.task_window - 1);
        const char *sub = (const char *)c->h.sub;
        struct hbg_recorded_task t;
        memcpy(&t.desc, desc_of(&c->h, id), sizeof(t.desc));
        memcpy(t.payload.fanins, sub + c->h.g.sub_fanins_offset + slot * sizeof(struct hbg_task_fanins),
               sizeof(t.payload.fanins));
        memcpy(&t.payload.args, sub + c->h.g.sub_args_offset + slot * sizeof(struct hbg_task_args),
               sizeof(t.payload.args));
        return t;
}

static int dry_run_message(struct vctx *c, uint64_t b, char *msg, size_t len) {
        struct hbg_recorded_task t = recorded_of(c, b);
        t.desc.id = 1;
        struct first_refusal f = { 0 };
        ck_assert_int_eq(engine_validate(c->e, c->heap_size, 0, &t, 1, keep_refusal, &f), (int)f.n);
        snprintf(msg, len, "%s", f.n ? f.message : "");
        return f.n ? f.code : 0;
}

START_TEST(validation_rule) {
        struct vctx c;
        setup(&c);
        run_graph(&c, rules[_i].name, rules[_i].err, (enum rule)_i, NULL, 0);
        teardown(&c);
}
END_TEST

/*
 * A refusal's numbers reach its own graph's message, for the lowest
 * FAILURE_DETAILS refused tasks of graphs not yet decided. A host task
 * (external, answered only once the test waits) holds the watermark
 * while graph 1 refuses FAILURE_DETAILS softmax tasks whose rows differ
 * and graph 2 one more: graph 1 says its first task's numbers, graph 2
 * only the reason. Once they are decided, graph 3's refusal has its
 * numbers again.
 */
static uint64_t refuse_softmax(struct vctx *c, unsigned rows) {
        struct harness_task t = softmax_task(c);
        t.scalars[0] = rows; /* rows of 16 columns: more than bad_out's NF floats */
        return harness_add_task(&c->h, &t);
}

static void expect_softmax_message(struct vctx *c, uint64_t k, unsigned rows, bool numbers) {
        struct hbg_graph_entry ge;
        wait_ok(c, k, "refusal_numbers_bounded", &ge);
        ck_assert_int_eq(ge.status, -EINVAL);
        char want[HBG_GRAPH_MESSAGE_MAX];
        if (numbers)
                snprintf(want, sizeof(want),
                         "softmax_rows_f32: shape does not fit X: rows*cols = %u*16 = %u elements, X has %u", rows,
                         rows * 16, NF);
        else
                snprintf(want, sizeof(want), "softmax_rows_f32: shape does not fit X");
        ck_assert_msg(strcmp(ge.message, want) == 0, "graph %llu says '%s', expected '%s'", (unsigned long long)k,
                      ge.message, want);
}

START_TEST(refusal_numbers_bounded) {
        struct vctx c;
        setup(&c);
        c.h.external = NULL; /* the hold: answered 0 once the test waits */
        struct harness_task hold = { .flags = HBG_TASK_EXTERNAL, .block_num = 1 };
        harness_add_task(&c.h, &hold);
        ck_assert_uint_eq(harness_end_graph(&c.h, 0), 0);
        for (unsigned i = 0; i < FAILURE_DETAILS; i++)
                refuse_softmax(&c, 17 + i);
        ck_assert_uint_eq(harness_end_graph(&c.h, 1), 1);
        refuse_softmax(&c, 99);
        ck_assert_uint_eq(harness_end_graph(&c.h, 2), 2);
        harness_publish(&c.h);
        /* Every refusal completed, nothing decided (the hold is not
         * answered before harness_wait_graph() serves it). */
        struct ring_stats rs = { 0 };
        for (int64_t end = clock_now_ms() + WAIT_MS; clock_now_ms() < end;) {
                ring_stats(c.h.ring, &rs);
                if (rs.completed >= FAILURE_DETAILS + 1)
                        break;
                usleep(1000);
        }
        ck_assert_uint_eq(rs.completed, FAILURE_DETAILS + 1);
        ck_assert_uint_eq(rs.graphs_retired, 0);
        struct hbg_graph_entry ge;
        wait_ok(&c, 0, "refusal_numbers_bounded", &ge);
        ck_assert_int_eq(ge.status, 0);
        expect_softmax_message(&c, 1, 17, true);
        expect_softmax_message(&c, 2, 99, false);
        refuse_softmax(&c, 42);
        ck_assert_uint_eq(harness_end_graph(&c.h, 3), 3);
        expect_softmax_message(&c, 3, 42, true);
        teardown(&c);
}
END_TEST

START_TEST(kernel_failure_skips_dependants) {
        struct vctx c;
        setup(&c);
        run_graph(&c, rules[R_KERNEL_FAILS].name, -EIO, R_KERNEL_FAILS, NULL, 0);
        teardown(&c);
}
END_TEST

/* ------------------------------------------------------------ controls */

enum control {
        C_BASE_FILL,
        C_FILL_LAST_HEAP_LINE,
        C_PREDICATE_LAST_HEAP_WORD,
        C_BLOCKS_4096,
        C_16_FANINS,
        C_8_TENSOR_SLOTS_UNUSED,
        C_MIX_ALL_LANES,
        C_AIV1_ONLY,
        C_REDUCE_BLOCKS,
        C_REDUCE_MIX,
        C_COPY,
        C_ADD_INPUTS_OVERLAP,
        C_GEMM,
        C_SOFTMAX,
        C_SPIN_ZERO,
        C_DUMMY,
        C_INLINE,
        C_COUNT,
};

static const char *const control_names[C_COUNT] = {
        [C_BASE_FILL] = "control: the base fill",
        [C_FILL_LAST_HEAP_LINE] = "control: fill of the heap's last line",
        [C_PREDICATE_LAST_HEAP_WORD] = "control: predicate in the heap's last word",
        [C_BLOCKS_4096] = "control: block_num 4096",
        [C_16_FANINS] = "control: 16 fanins",
        [C_8_TENSOR_SLOTS_UNUSED] = "control: garbage in unused argument slots",
        [C_MIX_ALL_LANES] = "control: MIX on all three lanes",
        [C_AIV1_ONLY] = "control: AIV1 lane only",
        [C_REDUCE_BLOCKS] = "control: reduce (does not split) in 3 blocks",
        [C_REDUCE_MIX] = "control: reduce (does not split) on all three lanes, 5 blocks",
        [C_COPY] = "control: copy",
        [C_ADD_INPUTS_OVERLAP] = "control: add with identical inputs",
        [C_GEMM] = "control: gemm",
        [C_SOFTMAX] = "control: softmax shape exactly fitting",
        [C_SPIN_ZERO] = "control: spin 0 ns",
        [C_DUMMY] = "control: dummy",
        [C_INLINE] = "control: host-inline",
};

static uint64_t add_control(struct vctx *c, unsigned which) {
        uint64_t id = c->h.prod.next_id, g = id - 1, heap = c->heap_size;
        struct harness_task t = fill_task(c->bad_out, BUF_BYTES, V_BAD, 2);
        uint64_t fx_off = c->bad_out, fx_len = BUF_BYTES;
        float fx = V_BAD;
        bool effect = true;

        switch ((enum control)which) {
        case C_BASE_FILL: break;
        case C_FILL_LAST_HEAP_LINE:
                t.tensors[0] = harness_tensor(heap - 64, 64, HBG_DIR_OUT);
                fx_off = heap - 64;
                fx_len = 64;
                break;
        case C_PREDICATE_LAST_HEAP_WORD:
                /* Canary bytes: a non-zero float, so the task runs. */
                t.flags = HBG_TASK_HAS_PREDICATE;
                t.predicate_offset = heap - 4;
                break;
        case C_BLOCKS_4096: t.block_num = 4096; break;
        case C_16_FANINS:
                t.n_fanins = 16;
                for (unsigned i = 0; i < 16; i++)
                        t.fanins[i] = g;
                break;
        case C_8_TENSOR_SLOTS_UNUSED:
                for (unsigned i = 1; i < HBG_MAX_TENSOR_ARGS; i++)
                        t.tensors[i] = harness_tensor(UINT64_MAX - 1, 3, 77);
                for (unsigned i = 1; i < HBG_MAX_SCALAR_ARGS; i++)
                        t.scalars[i] = UINT64_MAX;
                for (unsigned i = 0; i < HBG_MAX_FANINS; i++)
                        t.fanins[i] = UINT64_MAX;
                break;
        case C_MIX_ALL_LANES:
                t.lane_mask = 7;
                t.kernel[1] = t.kernel[2] = HBG_KERNEL_FILL_F32;
                t.block_num = 5;
                break;
        case C_AIV1_ONLY:
                t.lane_mask = 4;
                t.kernel[0] = 0;
                t.kernel[2] = HBG_KERNEL_FILL_F32;
                break;
        case C_REDUCE_BLOCKS:
        case C_REDUCE_MIX:
                t = reduce_task(c);
                if (which == C_REDUCE_MIX) {
                        t.lane_mask = 7;
                        t.kernel[1] = t.kernel[2] = HBG_KERNEL_REDUCE_SUM_F32;
                        t.block_num = 5;
                }
                fx_len = 4;
                fx = V_IN * NF;
                break;
        case C_COPY:
                t = copy_task(c);
                fx = V_IN;
                break;
        case C_ADD_INPUTS_OVERLAP:
                t = add_task(c);
                t.tensors[1] = t.tensors[0];
                fx = V_IN + V_IN;
                break;
        case C_GEMM:
                t = gemm_task(c);
                /* C starts at 0: each element is 4 * (2.0 * 0.5) = 4.0. */
                fill_f32(c->h.heap, c->bad_out, 64, 0.0f);
                fx_len = 64;
                fx = 4.0f;
                break;
        case C_SOFTMAX:
                /* Rows of equal values: each becomes 1/16 exactly. */
                t = softmax_task(c);
                fill_f32(c->h.heap, c->bad_out, BUF_BYTES, 1.0f);
                fx = 1.0f / 16.0f;
                break;
        case C_SPIN_ZERO:
                t = spin_task(0);
                effect = false;
                break;
        case C_DUMMY:
                t = (struct harness_task){ .n_fanins = 1, .fanins = { g } };
                effect = false;
                break;
        case C_INLINE:
                t = (struct harness_task){ .flags = HBG_TASK_HOST_INLINE };
                effect = false;
                break;
        case C_COUNT: break;
        }
        ck_assert_uint_eq(harness_add_task(&c->h, &t), id);
        if (effect)
                fill_f32(c->expect, fx_off, fx_len, fx);
        return id;
}

START_TEST(controls) {
        struct vctx c;
        setup(&c);
        run_graph(&c, control_names[_i], 0, R_COUNT, add_control, (unsigned)_i);
        teardown(&c);
}
END_TEST

/* ------------------------------------------------------------ transitive */

/*
 * Graph 0 [G, F(fail -EIO)], graph 1 [P(F), I(G)], graph 2 [Q(P)]: graph 1
 * fails only because of F, so -ECANCELED at P; graph 2 likewise at Q. Once
 * with all three in flight together, once with graph 0 retired first.
 */
static void transitive(bool wait_first) {
        struct vctx c;
        const char *name = wait_first ? "transitive, after retirement" : "transitive, in flight";
        struct hbg_graph_entry ge;

        setup(&c);
        struct harness_task tg = fill_task(c.g_out, BUF_BYTES, V_G, 2);
        uint64_t g = harness_add_task(&c.h, &tg);
        struct harness_task tf = fail_task(-EIO);
        uint64_t f = harness_add_task(&c.h, &tf);
        uint64_t k0 = harness_end_graph(&c.h, 100);
        if (wait_first) {
                wait_ok(&c, k0, name, &ge);
                ck_assert_int_eq(ge.status, -EIO);
                ck_assert_uint_eq(ge.first_error_task, f);
        }

        struct harness_task tp = fill_task(c.dep_out, BUF_BYTES, V_DEP, 2);
        tp.n_fanins = 1;
        tp.fanins[0] = f;
        uint64_t p = harness_add_task(&c.h, &tp);
        struct harness_task ti = fill_task(c.ind_out, BUF_BYTES, V_IND, 2);
        ti.n_fanins = 1;
        ti.fanins[0] = g;
        harness_add_task(&c.h, &ti);
        uint64_t k1 = harness_end_graph(&c.h, 101);
        struct harness_task tq = fill_task(c.chk_out, BUF_BYTES, V_BAD, 1);
        tq.n_fanins = 1;
        tq.fanins[0] = p;
        uint64_t q = harness_add_task(&c.h, &tq);
        uint64_t k2 = harness_end_graph(&c.h, 102);

        if (!wait_first) {
                wait_ok(&c, k0, name, &ge);
                ck_assert_int_eq(ge.status, -EIO);
                ck_assert_uint_eq(ge.first_error_task, f);
        }
        wait_ok(&c, k1, name, &ge);
        ck_assert_uint_eq(ge.graph_id, 101);
        ck_assert_msg(ge.status == -ECANCELED, "%s: graph 1 status %d", name, ge.status);
        ck_assert_uint_eq(ge.first_error_task, p);
        wait_ok(&c, k2, name, &ge);
        ck_assert_msg(ge.status == -ECANCELED, "%s: graph 2 status %d", name, ge.status);
        ck_assert_uint_eq(ge.first_error_task, q);

        fill_f32(c.expect, c.g_out, BUF_BYTES, V_G);
        fill_f32(c.expect, c.ind_out, BUF_BYTES, V_IND);
        check_heap(&c, name, "after the graphs");
        /* The latch keeps the first, real, error. */
        ck_assert_int_eq(atomic_load(&c.h.ch->error_code), -EIO);
        ck_assert_uint_eq(atomic_load(&c.h.ch->error_task), f);

        struct harness_task tok = fill_task(c.chk_out2, BUF_BYTES, V_G + V_IND, 1);
        harness_add_task(&c.h, &tok);
        uint64_t k3 = harness_end_graph(&c.h, 103);
        wait_ok(&c, k3, name, &ge);
        ck_assert_int_eq(ge.status, 0);
        fill_f32(c.expect, c.chk_out2, BUF_BYTES, V_G + V_IND);
        check_heap(&c, name, "after the good graph");
        teardown(&c);
}

START_TEST(transitive_in_flight) {
        transitive(false);
}
END_TEST

START_TEST(transitive_after_retirement) {
        transitive(true);
}
END_TEST

/* ------------------------------------------------------------ a rule after a task alike */

static int external_ok(void *ud, uint64_t id) {
        (void)ud;
        (void)id;
        return 0;
}

/* t as task id `to` of a recorded graph: its id, and its fanins as far
 * before it as they were (the inline ones and the payload's alike). */
static void move_task(struct hbg_recorded_task *t, uint64_t to) {
        uint64_t from = t->desc.id;
        t->desc.id = to;
        for (unsigned i = 0; i < HBG_INLINE_FANINS; i++)
                if (t->desc.fanins_inline[i])
                        t->desc.fanins_inline[i] += to - from;
        for (unsigned i = 0; i < HBG_MAX_FANINS; i++)
                if (t->payload.fanins[i])
                        t->payload.fanins[i] += to - from;
}

/* Tasks that pass, to go first. For most rules one of them is the bad
 * task's starting point, alike in the bytes validation keeps from a
 * passed task (kernels, lanes, flags, blocks, counts: validate.c
 * memo_alike()), so the bad one takes the path that skips their checks. */
enum before { B_FILL, B_FILL_MIX, B_COPY, B_ADD, B_GEMM, B_SOFTMAX, B_SPIN, B_FAIL, B_REDUCE, B_REDUCE_MIX,
              B_DUMMY, B_INLINE, B_EXTERNAL, B_PREDICATE, B_COUNT };

static struct harness_task task_before(struct vctx *c, enum before k) {
        struct harness_task t = fill_task(c->bad_out, BUF_BYTES, V_BAD, 2);
        switch (k) {
        case B_FILL: break;
        case B_FILL_MIX:
                t.lane_mask = 3;
                t.kernel[1] = t.kernel[0];
                break;
        case B_COPY: t = copy_task(c); break;
        case B_ADD: t = add_task(c); break;
        case B_GEMM: t = gemm_task(c); break;
        case B_SOFTMAX: t = softmax_task(c); break;
        case B_SPIN: t = spin_task(1000); break;
        case B_FAIL: t = fail_task(-EIO); break;
        case B_REDUCE: t = reduce_task(c); break; /* does not split: one part of its 3 blocks */
        case B_REDUCE_MIX:
                t = reduce_task(c);
                t.lane_mask = 7;
                t.kernel[1] = t.kernel[2] = t.kernel[0];
                break;
        case B_DUMMY: t = (struct harness_task){ .block_num = 1 }; break;
        case B_INLINE: t = (struct harness_task){ .flags = HBG_TASK_HOST_INLINE, .block_num = 1 }; break;
        case B_EXTERNAL: t = (struct harness_task){ .flags = HBG_TASK_EXTERNAL, .block_num = 1 }; break;
        case B_PREDICATE:
                t.flags = HBG_TASK_HAS_PREDICATE;
                t.predicate_offset = c->bad_in;
                break;
        case B_COUNT: break;
        }
        return t;
}

struct verdict {
        int err;
        const char *why;
        struct task_slot *s;
};

/* A slot as the previous occupant's might be: no field zero. */
static struct task_slot *used_slot(void) {
        struct task_slot *s = aligned_alloc(64, sizeof(*s));
        ck_assert_ptr_nonnull(s);
        memset(s, 0x5a, sizeof(*s));
        return s;
}

/* Task t validated as id 3 of a recorded graph into a used slot: with
 * memo, after `first` as id 1 passed with its kind kept and, if mid is
 * set, after *mid as id 2 (pass or not); without, alone. */
static struct verdict validate_after(struct vctx *c, struct hbg_recorded_task first,
                                     const struct hbg_recorded_task *mid, struct hbg_recorded_task t, bool memo) {
        struct validate_memo m = { .kept = false };
        struct verdict v = { .s = used_slot() };
        move_task(&first, 1);
        move_task(&t, 3);
        if (memo) {
                int err = validate_task(c->h.ring, v.s, &first.desc, first.payload.fanins, &first.payload.args, 1, 0,
                                        &m, &v.why);
                ck_assert_msg(err == 0 && m.kept, "the first task: %d %s", err, v.why ? v.why : "");
                if (mid) {
                        struct hbg_recorded_task second = *mid;
                        move_task(&second, 2);
                        (void)validate_task(c->h.ring, v.s, &second.desc, second.payload.fanins,
                                            &second.payload.args, 2, 0, &m, &v.why);
                }
                memset(v.s, 0x5a, sizeof(*v.s));
                v.why = NULL; /* as every caller starts */
        }
        v.err = validate_task(c->h.ring, v.s, &t.desc, t.payload.fanins, &t.payload.args, 3, 0, memo ? &m : NULL,
                              &v.why);
        return v;
}

/* t after first (and mid), with the memo and without: the same verdict,
 * reason and named kernel, and for a task that passes the same slot,
 * byte for byte. */
static void expect_alike(struct vctx *c, struct hbg_recorded_task first, const struct hbg_recorded_task *mid,
                         struct hbg_recorded_task t, const char *name, unsigned k) {
        struct verdict with = validate_after(c, first, mid, t, true), without = validate_after(c, first, mid, t, false);
        ck_assert_msg(with.err == without.err && with.why == without.why &&
                              with.s->report_kernel == without.s->report_kernel,
                      "%s after task %u of task_before(): %d '%s' (kernel %u) with the memo, %d '%s' (kernel %u) "
                      "without",
                      name, k, with.err, with.why ? with.why : "", with.s->report_kernel, without.err,
                      without.why ? without.why : "", without.s->report_kernel);
        if (with.err == 0)
                ck_assert_msg(memcmp(with.s, without.s, sizeof(*with.s)) == 0,
                              "%s after task %u of task_before(): the slots differ", name, k);
        free(with.s);
        free(without.s);
}

/*
 * Each rule's bad task B, and each task of task_before(), validated into
 * a used slot after each task of task_before() with the first one's kind
 * kept (a run of tasks alike skips the checks that read only what they
 * share) and without: the same verdict and reason every time, and the
 * same slot for those that pass; and each task of task_before() again
 * after itself and B. Says that the skipped checks passed for the second
 * task too, that those left keep their order, and that what is taken
 * from the kept task is what its own checks would have written.
 */
START_TEST(rule_after_alike_task) {
        struct vctx c;
        setup(&c);
        c.h.external = external_ok;
        struct harness_task tg = fill_task(c.g_out, BUF_BYTES, V_G, 2);
        uint64_t g = harness_add_task(&c.h, &tg);
        uint64_t b = add_bad(&c, (enum rule)_i);
        ck_assert_uint_eq(b, g + 1);
        uint64_t first_before = b + 1;
        for (unsigned k = 0; k < B_COUNT; k++) {
                struct harness_task t = task_before(&c, (enum before)k);
                if (k > 0) { /* in order: they share buffers */
                        t.n_fanins = 1;
                        t.fanins[0] = first_before + k - 1;
                }
                ck_assert_uint_eq(harness_add_task(&c.h, &t), first_before + k);
        }
        struct hbg_graph_entry ge;
        ck_assert_int_eq(harness_wait_graph(&c.h, harness_end_graph(&c.h, 1), WAIT_MS, &ge), 0);

        struct hbg_recorded_task bad = recorded_of(&c, b);
        for (unsigned k = 0; k < B_COUNT; k++) {
                struct hbg_recorded_task first = recorded_of(&c, first_before + k);
                expect_alike(&c, first, NULL, bad, rules[_i].name, k);
                /* What was kept outlives a task refused in between. */
                expect_alike(&c, first, &bad, first, "the first task again after the rule's", k);
                if (_i == 0)
                        for (unsigned j = 0; j < B_COUNT; j++)
                                expect_alike(&c, first, NULL, recorded_of(&c, first_before + j), "a task that passes",
                                             k);
        }
        teardown(&c);
}
END_TEST

/* ------------------------------------------------------------ lanes and the work bound */


/* An engine of one thread whose work limit per task is `limit`. */
static struct hbg_engine *limited_engine(uint64_t limit) {
        struct hbg_engine_config cfg;
        struct hbg_engine *e;
        engine_config_default(&cfg);
        cfg.threads = 1;
        cfg.clusters = 1;
        cfg.max_task_cost = limit;
        ck_assert_int_eq(engine_new(&e, &cfg), 0);
        return e;
}

/* One two-lane task (lanes 0 and 1, one block, one scalar shared by both
 * kernels) through engine_validate() with a work limit of 1000. */
static struct first_refusal two_lanes(struct hbg_engine *e, uint16_t k0, uint16_t k1, uint64_t scalar) {
        struct hbg_recorded_task t;
        memset(&t, 0, sizeof(t));
        t.desc.id = 1;
        t.desc.kernel[0] = k0;
        t.desc.kernel[1] = k1;
        t.desc.lane_mask = 3;
        t.desc.block_num = 1;
        t.desc.n_scalars = 1;
        t.payload.args.scalars[0] = scalar;
        struct first_refusal f = { 0 };
        ck_assert_int_eq(engine_validate(e, HEAP_BYTES, 0, &t, 1, keep_refusal, &f), (int)f.n);
        return f;
}

/* The work bound is refused only once every lane passed its own checks,
 * at the lane where the total first passes the limit. */
START_TEST(work_bound_after_every_lane) {
        struct hbg_engine *e = limited_engine(1000);
        /* Lane 0 (spin_ns, 1 s) alone passes the bound; lane 1 (fail, code
         * 1e9) is refused by its own check: that is said. */
        struct first_refusal f = two_lanes(e, HBG_KERNEL_SPIN_NS, HBG_KERNEL_FAIL, 1000000000);
        ck_assert_uint_eq(f.n, 1);
        ck_assert_int_eq(f.code, -ERANGE);
        ck_assert_msg(strncmp(f.message, "fail: ", 6) == 0, "%s", f.message);
        /* Both lanes spin_ns for 600 ns over 2 parts: 600 units each; the
         * total passes 1000 at lane 1. */
        f = two_lanes(e, HBG_KERNEL_SPIN_NS, HBG_KERNEL_SPIN_NS, 600);
        ck_assert_uint_eq(f.n, 1);
        ck_assert_int_eq(f.code, -E2BIG);
        ck_assert_msg(strncmp(f.message, "spin_ns: ", 9) == 0 && strstr(f.message, "1200 units, the limit is 1000"),
                      "%s", f.message);
        /* 400 each: 800 in all, within the bound. */
        f = two_lanes(e, HBG_KERNEL_SPIN_NS, HBG_KERNEL_SPIN_NS, 400);
        ck_assert_uint_eq(f.n, 0);
        engine_free(e);
}
END_TEST

/* reduce_sum_f32 on three lanes, 3 blocks (a kernel that does not
 * split: one part), summing `in_bytes` at `in_offset` into 4 bytes at
 * 8 * BUF_BYTES, as task `id` of a recorded graph. */
static struct hbg_recorded_task reduce_mix(uint64_t id, uint64_t in_offset, uint64_t in_bytes) {
        struct hbg_recorded_task t;
        memset(&t, 0, sizeof(t));
        t.desc.id = id;
        t.desc.kernel[0] = t.desc.kernel[1] = t.desc.kernel[2] = HBG_KERNEL_REDUCE_SUM_F32;
        t.desc.lane_mask = 7;
        t.desc.block_num = 3;
        t.desc.n_tensors = 2;
        t.payload.args.tensors[0] = harness_tensor(in_offset, in_bytes, HBG_DIR_IN);
        t.payload.args.tensors[1] = harness_tensor(8 * BUF_BYTES, 4, HBG_DIR_OUT);
        return t;
}

/* engine_validate() of t (1 or 2 tasks) on e: the first refusal. */
static struct first_refusal first_refusal_of(struct hbg_engine *e, const struct hbg_recorded_task *t, uint32_t n) {
        struct first_refusal f = { 0 };
        ck_assert_int_eq(engine_validate(e, HEAP_BYTES, 0, t, n, keep_refusal, &f), (int)f.n);
        return f;
}

/* A kernel that does not split, on three lanes: one part, its work
 * counted once, for a task alike the one before it too (its kind kept);
 * and such a task alike a passed one has its arguments checked and its
 * work bounded, refused as it is alone. */
START_TEST(unsplit_counted_once_alike) {
        struct hbg_recorded_task t[2] = { reduce_mix(1, 0, BUF_BYTES), reduce_mix(2, 0, BUF_BYTES) };
        struct hbg_kernel_args a = { .n_tensors = 2 };
        memcpy(a.tensors, t[0].payload.args.tensors, sizeof(a.tensors[0]) * 2);
        uint64_t once = kernel_cost(kernel_lookup(HBG_KERNEL_REDUCE_SUM_F32), &a, 1);
        for (uint64_t limit = once - 1; limit <= once; limit++) {
                struct hbg_engine *e = limited_engine(limit);
                struct first_refusal f = first_refusal_of(e, t, 2);
                ck_assert_msg(f.n == (limit < once ? 2u : 0u), "limit %llu, one run %llu: %u refused (%s)",
                              (unsigned long long)limit, (unsigned long long)once, f.n, f.message);
                engine_free(e);
        }

        struct hbg_engine *e = limited_engine(once);
        /* Its input past the heap's end; then twice as long (over the
         * limit): after a passed task alike, as alone. */
        struct hbg_recorded_task bad[2] = { reduce_mix(2, HEAP_BYTES - BUF_BYTES / 2, BUF_BYTES),
                                            reduce_mix(2, 0, 2 * BUF_BYTES) };
        static const int codes[2] = { -ERANGE, -E2BIG };
        for (unsigned i = 0; i < 2; i++) {
                struct hbg_recorded_task pair[2] = { t[0], bad[i] }, alone = bad[i];
                alone.desc.id = 1;
                struct first_refusal after = first_refusal_of(e, pair, 2), by_itself = first_refusal_of(e, &alone, 1);
                ck_assert_msg(after.n == 1 && by_itself.n == 1 && after.code == codes[i] &&
                                      by_itself.code == codes[i] && strcmp(after.message, by_itself.message) == 0,
                              "case %u: after a task alike %u refused, %d '%s'; alone %u, %d '%s'", i, after.n,
                              after.code, after.message, by_itself.n, by_itself.code, by_itself.message);
        }
        engine_free(e);
}
END_TEST

/* The work bound of a task alike a passed one (its kind kept): refused
 * as without the memo, on one lane and on two. */
START_TEST(work_bound_alike) {
        struct hbg_engine *e = limited_engine(1000);
        static const struct {
                uint8_t lane_mask;
                uint64_t within, over;
                const char *message;
        } cases[] = {
                { 1, 1000, 1001, "1001 units, the limit is 1000" },
                { 3, 500, 600, "1200 units, the limit is 1000" }, /* each lane's share of 2 parts */
        };
        for (unsigned i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
                struct hbg_recorded_task t[2];
                memset(t, 0, sizeof(t));
                for (unsigned j = 0; j < 2; j++) {
                        t[j].desc.id = j + 1;
                        t[j].desc.kernel[0] = HBG_KERNEL_SPIN_NS;
                        if (cases[i].lane_mask & 2u)
                                t[j].desc.kernel[1] = HBG_KERNEL_SPIN_NS;
                        t[j].desc.lane_mask = cases[i].lane_mask;
                        t[j].desc.block_num = 1;
                        t[j].desc.n_scalars = 1;
                        t[j].payload.args.scalars[0] = j ? cases[i].over : cases[i].within;
                }
                struct first_refusal f = { 0 };
                ck_assert_int_eq(engine_validate(e, HEAP_BYTES, 0, t, 2, keep_refusal, &f), (int)f.n);
                ck_assert_msg(f.n == 1 && f.code == -E2BIG && strncmp(f.message, "spin_ns: ", 9) == 0 &&
                                      strstr(f.message, cases[i].message),
                              "lanes %u: %u refused, %d '%s'", cases[i].lane_mask, f.n, f.code, f.message);
        }
        engine_free(e);
}
END_TEST

static Suite *suite(void) {
        Suite *s = suite_create("engine_validation");
        TCase *tc = tcase_create("rules");
        tcase_set_timeout(tc, 120);
        tcase_add_loop_test(tc, validation_rule, 0, R_COUNT);
        tcase_add_loop_test(tc, rule_after_alike_task, 0, R_COUNT);
        tcase_add_test(tc, kernel_failure_skips_dependants);
        tcase_add_test(tc, refusal_numbers_bounded);
        tcase_add_loop_test(tc, controls, 0, C_COUNT);
        tcase_add_test(tc, transitive_in_flight);
        tcase_add_test(tc, transitive_after_retirement);
        tcase_add_test(tc, work_bound_after_every_lane);
        tcase_add_test(tc, unsplit_counted_once_alike);
        tcase_add_test(tc, work_bound_alike);
        suite_add_tcase(s, tc);
        return s;
}

const struct check_main check_main = { .suite = suite };
