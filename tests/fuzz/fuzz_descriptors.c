/* SPDX-License-Identifier: MIT */
/*
 * Fuzz target: descriptor and graph-record validation, through a real
 * engine (2 scheduler threads; 1 under TSan) and the in-process client of one ring
 * (tests/engine/harness.h). Each input is one graph on a fresh ring:
 *
 *   byte 0        graph-record forgery: bit 0 set -> bytes 1..3 are XORed
 *                 into the record's first_id, last_id and reserved fields
 *                 (low byte) after it is published; bit 1 set -> the
 *                 heap's arrays start as subnormal floats, both signs
 *                 (the kernels' inputs; else zero)
 *   then per task (until the input ends, at most MAX_TASKS):
 *     kind        a valid task to start from (templates[kind % N]),
 *                 depending on the task before it
 *     n           then n (offset, value) pairs: byte `offset % 448` of
 *                 the task's descriptor, fanins and arguments, one after
 *                 the other, is XORed with `value`
 *                 before the task is published
 *
 * So an all-zero forgery is a valid graph, and the fuzzer reaches each
 * field one byte at a time: ids, kernels, lanes, block counts, tensor
 * offsets and lengths (overflowing), fanins at or above the task's own
 * id, flags, reserved fields, counts above the limits.
 *
 * The promise checked: hbgd-side code never crashes, never touches memory
 * outside the ring's heap (ASan: the heap ends where the region's
 * allocation ends), and every graph is accounted for: it retires (with
 * any status) or the ring is stopped, within WAIT_MS.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "daemon/engine/engine.h"
#include "daemon/engine/engine_stats.h"
#include "common/kernel_sig.h"
#include "tests/fuzz/fuzz.h"
#include "tests/engine/harness.h"

#define WINDOW 256u   /* the smallest window (shm/geometry.h) */
#define HEAP_BYTES 4096u
#define MAX_TASKS 48u
#define WAIT_MS 10000
#define SLOT_BYTES (sizeof(struct hbg_task_desc) + sizeof(struct hbg_task_fanins) + sizeof(struct hbg_task_args))
_Static_assert(SLOT_BYTES == 448, "the corpus's offsets are of 448-byte slots");

static struct hbg_engine *engine;

/* Two scheduler threads, but one under TSan: a forged graph's kernels may
 * race on the client's own heap (two tasks without the dependency that
 * would order them), which hbgd allows (it is the client's memory, and
 * only its results suffer) and TSan would report as a race of this
 * process. */
#if defined(__SANITIZE_THREAD__)
#define ENGINE_THREADS 1u
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define ENGINE_THREADS 1u
#endif
#endif
#ifndef ENGINE_THREADS
#define ENGINE_THREADS 2u
#endif

static int external_ok(void *ud, uint64_t id) {
        (void)ud;
        (void)id;
        return 0;
}

static void quiet_log(void *ud, int priority, const struct hbg_log_fields *f, const char *fmt, va_list ap) {
        (void)ud;
        (void)priority;
        (void)f;
        (void)fmt;
        (void)ap;
}

static struct hbg_engine *the_engine(void) {
        if (engine)
                return engine;
        struct hbg_engine_config cfg;
        engine_config_default(&cfg);
        cfg.threads = ENGINE_THREADS;
        cfg.clusters = 2;
        /* A graph that can never finish (its record forged past the last
         * task) ends when the stall detector stops its ring: soon, here. */
        cfg.stall_timeout_ms = 200;
        cfg.max_task_cost = UINT64_C(1) << 22; /* each kernel a few ms at most */
        cfg.log = quiet_log;
        int err = engine_new(&engine, &cfg);
        if (err < 0) {
                fprintf(stderr, "engine: %s\n", strerror(-err));
                abort();
        }
        return engine;
}

/* Buffers of the templates: four 256-byte f32 arrays in the heap. */
enum { BUF_A, BUF_B, BUF_C, BUF_D, N_BUFS };
#define BUF_BYTES 256u

static struct harness_task template(unsigned kind, const uint64_t *buf, uint64_t prev) {
        struct harness_task t = { 0 };
        switch (kind % 8) {
        case 0: /* fill_f32 on AIV0 */
                t = (struct harness_task){ .kernel = { 0, HBG_KERNEL_FILL_F32 }, .lane_mask = 2,
                                           .block_num = 2, .n_tensors = 1, .n_scalars = 1 };
                t.tensors[0] = harness_tensor(buf[BUF_A], BUF_BYTES, HBG_DIR_OUT);
                t.scalars[0] = harness_f32_scalar(1.5f);
                break;
        case 1: /* copy_f32 A -> B */
                t = (struct harness_task){ .kernel = { 0, HBG_KERNEL_COPY_F32 }, .lane_mask = 2,
                                           .block_num = 2, .n_tensors = 2 };
                t.tensors[0] = harness_tensor(buf[BUF_A], BUF_BYTES, HBG_DIR_IN);
                t.tensors[1] = harness_tensor(buf[BUF_B], BUF_BYTES, HBG_DIR_OUT);
                break;
        case 2: /* add_f32 A + B -> C on AIV1 */
                t = (struct harness_task){ .kernel = { 0, 0, HBG_KERNEL_ADD_F32 }, .lane_mask = 4,
                                           .block_num = 3, .n_tensors = 3 };
                t.tensors[0] = harness_tensor(buf[BUF_A], BUF_BYTES, HBG_DIR_IN);
                t.tensors[1] = harness_tensor(buf[BUF_B], BUF_BYTES, HBG_DIR_IN);
                t.tensors[2] = harness_tensor(buf[BUF_C], BUF_BYTES, HBG_DIR_OUT);
                break;
        case 3: /* gemm 4x4x4 on AIC */
                t = (struct harness_task){ .kernel = { HBG_KERNEL_GEMM_F32 }, .lane_mask = 1,
                                           .block_num = 2, .n_tensors = 3, .n_scalars = 3,
                                           .scalars = { 4, 4, 4 } };
                t.tensors[0] = harness_tensor(buf[BUF_A], 64, HBG_DIR_IN);
                t.tensors[1] = harness_tensor(buf[BUF_B], 64, HBG_DIR_IN);
                t.tensors[2] = harness_tensor(buf[BUF_D], 64, HBG_DIR_INOUT);
                break;
        case 4: /* a dummy (no lanes) */
                t = (struct harness_task){ .block_num = 1 };
                break;
        case 5: /* an external task (the mailbox) */
                t = (struct harness_task){ .flags = HBG_TASK_EXTERNAL, .block_num = 1 };
                break;
        case 6: /* softmax rows with a predicate */
                t = (struct harness_task){ .kernel = { HBG_KERNEL_SOFTMAX_ROWS_F32 }, .lane_mask = 1,
                                           .flags = HBG_TASK_HAS_PREDICATE, .block_num = 1,
                                           .n_tensors = 1, .n_scalars = 2, .scalars = { 4, 16 },
                                           .predicate_offset = buf[BUF_A] };
                t.tensors[0] = harness_tensor(buf[BUF_C], BUF_BYTES, HBG_DIR_INOUT);
                break;
        default: /* fail with a code on every lane */
                t = (struct harness_task){ .kernel = { HBG_KERNEL_FAIL, HBG_KERNEL_FAIL, HBG_KERNEL_FAIL },
                                           .lane_mask = 7, .block_num = 3, .n_scalars = 1,
                                           .scalars = { (uint64_t)-EIO } };
                break;
        }
        if (prev) {
                t.fanins[0] = prev;
                t.n_fanins = 1;
        }
        return t;
}

static uint8_t *slot_desc(struct harness_ring *h, uint64_t id) {
        return (uint8_t *)h->sub + h->g.sub_descs_offset + (id & (h->g.task_window - 1)) * sizeof(struct hbg_task_desc);
}

static uint8_t *slot_fanins(struct harness_ring *h, uint64_t id) {
        return (uint8_t *)h->sub + h->g.sub_fanins_offset +
               (id & (h->g.task_window - 1)) * sizeof(struct hbg_task_fanins);
}

static uint8_t *slot_args(struct harness_ring *h, uint64_t id) {
        return (uint8_t *)h->sub + h->g.sub_args_offset + (id & (h->g.task_window - 1)) * sizeof(struct hbg_task_args);
}

static void forge_slot(struct harness_ring *h, uint64_t id, size_t off, uint8_t value) {
        const size_t desc = sizeof(struct hbg_task_desc), fanins = sizeof(struct hbg_task_fanins);
        off %= SLOT_BYTES;
        if (off < desc)
                slot_desc(h, id)[off] ^= value;
        else if (off < desc + fanins)
                slot_fanins(h, id)[off - desc] ^= value;
        else
                slot_args(h, id)[off - desc - fanins] ^= value;
}

/* Subnormal floats of both signs, every one different, in the array at
 * offset: what the kernels must take without a trap or a slow path that
 * outruns their cost (hbgd sets no flush-to-zero). */
static void fill_subnormal(struct harness_ring *h, uint64_t offset) {
        for (unsigned i = 0; i < BUF_BYTES / sizeof(uint32_t); i++) {
                uint32_t bits = ((i + 1) * 2654435761u) & 0x007fffffu; /* exponent 0: subnormal */
                bits |= (i & 1) ? 0x80000000u : 0;
                memcpy(h->heap + offset + i * sizeof(bits), &bits, sizeof(bits));
        }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        if (size < 1)
                return 0;
        struct hbg_engine *e = the_engine();
        struct hbg_geometry_request req;
        geometry_request_default(&req);
        req.task_window = WINDOW;
        req.flag_window = WINDOW;
        req.heap_size = HEAP_BYTES;
        req.graph_table_entries = 4;
        req.mailbox_entries = 16;
        struct harness_ring h;
        int err = harness_ring_init(&h, e, &req, 1000);
        if (err < 0) {
                fprintf(stderr, "ring: %s\n", strerror(-err));
                abort();
        }
        h.external = external_ok;
        uint64_t buf[N_BUFS];
        for (unsigned b = 0; b < N_BUFS; b++)
                buf[b] = harness_alloc(&h, BUF_BYTES);
        if (data[0] & 2)
                for (unsigned b = 0; b < N_BUFS; b++)
                        fill_subnormal(&h, buf[b]);

        uint8_t record_forgery = data[0];
        size_t pos = 1 + ((record_forgery & 1) ? 3 : 0);
        uint64_t prev = 0;
        unsigned n_tasks = 0;
        while (pos < size && n_tasks < MAX_TASKS) {
                unsigned kind = data[pos++];
                unsigned n = pos < size ? data[pos++] : 0;
                struct harness_task t = template(kind, buf, prev);
                uint64_t id = harness_add_task(&h, &t);
                /* The forgery goes in before the task is published. */
                for (unsigned k = 0; k < n && pos + 3 <= size; k++, pos += 3)
                        forge_slot(&h, id, (size_t)data[pos] | (size_t)data[pos + 1] << 8, data[pos + 2]);
                prev = (kind & 0x80) ? 0 : id;
                n_tasks++;
        }
        if (n_tasks == 0) {
                struct harness_task t = template(4, buf, 0);
                harness_add_task(&h, &t);
        }
        uint64_t k = harness_end_graph(&h, 7);
        if (k == UINT64_MAX)
                abort();
        if ((record_forgery & 1) && size >= 4) {
                struct hbg_graph_record *rec =
                        (struct hbg_graph_record *)(void *)((uint8_t *)h.sub + h.g.sub_graphs_offset +
                                                            (k & (h.g.graph_table_entries - 1)) *
                                                                    sizeof(struct hbg_graph_record));
                rec->first_id ^= data[1];
                rec->last_id ^= data[2];
                rec->reserved ^= data[3];
        }
        struct hbg_graph_entry entry;
        int rc = harness_wait_graph(&h, k, WAIT_MS, &entry);
        struct ring_stats st;
        ring_stats(h.ring, &st);
        if (rc < 0 && !st.broken) {
                fprintf(stderr, "graph neither retired nor its ring stopped after %d ms "
                        "(submitted %llu classified %llu watermark %llu completed %llu)\n",
                        WAIT_MS, (unsigned long long)st.submitted, (unsigned long long)st.classified,
                        (unsigned long long)st.watermark, (unsigned long long)st.completed);
                abort();
        }
        harness_ring_destroy(&h);
        return 0;
}

/* Valid graphs, one per template, a chain of all of them, and a few
 * single-byte forgeries (the first desc byte: the id; byte 16: a kernel). */
int fuzz_write_seeds(const char *dir) {
        uint8_t in[64];
        char name[32];
        int err = 0;
        for (unsigned kind = 0; kind < 8 && !err; kind++) {
                in[0] = 0, in[1] = (uint8_t)(kind | 0x80), in[2] = 0;
                snprintf(name, sizeof(name), "single_%u", kind);
                err = fuzz_seed(dir, name, in, 3);
        }
        size_t n = 1;
        in[0] = 0;
        for (unsigned kind = 0; kind < 8; kind++)
                in[n++] = (uint8_t)kind, in[n++] = 0;
        if (!err)
                err = fuzz_seed(dir, "chain_all", in, n);
        static const uint8_t forged_id[] = { 0, 1, 1, 0, 0, 0x01 };
        static const uint8_t forged_kernel[] = { 0, 0, 1, 16, 0, 0x7f };
        static const uint8_t forged_fanin[] = { 0, 1, 0, 2, 1, 40, 0, 0xff };
        static const uint8_t forged_record[] = { 1, 0, 3, 0, 4, 0 };
        in[0] = 2; /* the chain again, on subnormal inputs */
        if (!err)
                err = fuzz_seed(dir, "subnormal_chain_all", in, n);
        if (!err)
                err = fuzz_seed(dir, "forged_id", forged_id, sizeof(forged_id));
        if (!err)
                err = fuzz_seed(dir, "forged_kernel", forged_kernel, sizeof(forged_kernel));
        if (!err)
                err = fuzz_seed(dir, "forged_fanin", forged_fanin, sizeof(forged_fanin));
        if (!err)
                err = fuzz_seed(dir, "forged_record", forged_record, sizeof(forged_record));
        return err;
}
