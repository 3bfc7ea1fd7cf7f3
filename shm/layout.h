/* SPDX-License-Identifier: MIT */
/*
 * The shared-memory layout, as both hbgd and libhbgclient map it.
 *
 * Two regions per session (DESIGN.md §3):
 *   submission region  client writes, daemon reads as hostile input
 *   completion region  daemon writes, client maps read-only
 *
 * Rules for every struct in this file:
 *   - fixed-width fields only, explicit padding named `reserved*`/`pad*` that
 *     the writer keeps zero and the reader rejects when non-zero;
 *   - a word written by one side and polled by the other owns a cache line;
 *   - every offset the other side depends on is pinned by _Static_assert, so
 *     an accidental change breaks the build instead of the protocol; a
 *     deliberate change bumps HBG_LAYOUT_VERSION (both sides refuse any
 *     other), except a hint put in header padding that the other side
 *     checks only at connect, if at all: a client-written one in the
 *     submission header, which hbgd never checks (ext_looking,
 *     ext_look_until_ns, task_waiting), and an hbgd-written one in the completion
 *     header, zero until hbgd serves the session, after the client's
 *     connect-time check (answer_moving). An older reader never reads it
 *     and an older writer leaves it zero, so neither side does anything
 *     differently. Such a hint may share a polled word's line: it is
 *     written rarely (answer_moving: at a thread's move).
 * The protocol that moves data through these structs is docs/RUNTIME_LOGIC.md.
 */
#pragma once

#include <stdalign.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "shm/geometry.h"

#define HBG_CACHE_LINE 64u
#define HBG_LAYOUT_VERSION 7u  /* 2: lap stamps (RUNTIME_LOGIC.md §3.2); 3: inline fanins, window_waiting;
                                  4: launch records (§14); 5: graph entries with kernel and message (§12.1);
                                  6: the wake words and their sleepers counts (§10.7);
                                  7: fanins and arguments in arrays of their own (§8) */
#define HBG_SUB_MAGIC UINT32_C(0x42534248) /* "HBSB" little endian */
#define HBG_CPL_MAGIC UINT32_C(0x43504248) /* "HBPC" */

/* ---------------------------------------------------------------- limits */
#define HBG_MAX_FANINS 16u
#define HBG_MAX_TENSOR_ARGS 8u
#define HBG_MAX_SCALAR_ARGS 8u
#define HBG_MAX_BLOCKS 4096u

/* Lanes of a cluster: one AIC (cube) core and two AIV (vector) cores. */
enum hbg_lane {
        HBG_LANE_AIC = 0,
        HBG_LANE_AIV0 = 1,
        HBG_LANE_AIV1 = 2,
        HBG_LANES = 3,
};
#define HBG_LANE_MASK_ALL 0x7u

/* hbg_task_desc.flags */
enum {
        HBG_TASK_HOST_INLINE = 1u << 0,   /* completed at classification, never runs */
        HBG_TASK_EXTERNAL = 1u << 1,      /* completed through the async mailbox */
        HBG_TASK_HAS_PREDICATE = 1u << 2, /* runs only if the predicate f32 != 0 */
        HBG_TASK_FLAGS_ALL = 0x7u,
        /* Not a task's flag: the descriptor is a launch record (§14), the
         * first of `launch.count` ids taken from a recorded graph. */
        HBG_DESC_LAUNCH = 1u << 7,
};

/* hbg_tensor_arg.direction */
enum hbg_direction {
        HBG_DIR_IN = 1,
        HBG_DIR_OUT = 2,
        HBG_DIR_INOUT = 3,
};

/* ------------------------------------------------------ submission region */

struct hbg_sub_header {
        /* line 0: identity and geometry, written once by hbgd at creation.
         * The daemon never reads these back; the client learns the geometry
         * from them. */
        uint32_t magic;
        uint32_t layout_version;
        uint64_t region_size;
        uint32_t task_window_log2;
        uint32_t mailbox_log2;
        uint64_t heap_size;
        uint64_t descs_offset;
        uint64_t fanins_offset;
        uint64_t mailbox_offset;
        uint64_t heap_offset;
        uint64_t graphs_offset;            /* graph record ring */
        uint32_t graph_ring_log2;
        uint32_t reserved0;                /* must be zero */
        uint64_t args_offset;
        uint64_t reserved1[5];             /* must be zero */

        /* line 2: producer cursor. ids < submitted are fully written
         * (release by the client, acquire by hbgd; still validated). */
        alignas(HBG_CACHE_LINE) _Atomic uint64_t submitted;
        /* Non-zero while the producer sleeps for window space: the
         * watermark it waits for. hbgd signals the completion pipe once
         * the watermark reaches it and clears it (RUNTIME_LOGIC §2.1). */
        _Atomic uint64_t window_waiting;
        /* Non-zero while the client sleeps for one task (a tensor wait):
         * that task's id + 1. hbgd signals the completion pipe once the
         * task's stamp is out and clears it (§2.1), where window_waiting
         * waits for the watermark, which an earlier task may hold back.
         * A hint once padding (rules above): hbgd of the same layout that
         * does not read it leaves the wait to window_waiting. */
        _Atomic uint64_t task_waiting;
        uint8_t pad1[HBG_CACHE_LINE - 3 * sizeof(uint64_t)];

        /* line 3: mailbox entries posted (a hint for a reader of the
         * region; hbgd never reads it: it consumes by each entry's `seq`,
         * §10.5). Since layout 6 the library's posters reserve entries on
         * a private counter and leave this zero (§10.7). */
        alignas(HBG_CACHE_LINE) _Atomic uint64_t mailbox_tail;
        uint8_t pad3[HBG_CACHE_LINE - sizeof(uint64_t)];

        /* line 4: graph record producer cursor: records < graphs_submitted
         * are written (release by the client, acquire by hbgd). */
        alignas(HBG_CACHE_LINE) _Atomic uint64_t graphs_submitted;
        uint8_t pad4[HBG_CACHE_LINE - sizeof(uint64_t)];

        /* line 5: how many of the client's threads sleep (or are about to)
         * on the completion region's ext_wake word; hbgd makes its futex
         * wake only when this is non-zero (seq_cst both sides, §10.7).
         * Client-written: it only decides whether hbgd makes one wake
         * system call per publication for this client's own ring. */
        alignas(HBG_CACHE_LINE) _Atomic uint32_t ext_sleepers;
        /* How many of the client's worker threads look for a ready
         * external task now, about to take what is published: while it
         * is non-zero hbgd wakes no sleeper (each looker, when it stops
         * looking, decrements it and then loads ext_wake, seq_cst both
         * sides, §10.7 step 5). Client-written, like ext_sleepers:
         * garbage only delays this client's own wake-ups, by about a
         * look. Once padding, with no layout version of its own (rules
         * above). */
        _Atomic uint32_t ext_looking;
        /* Until when (CLOCK_MONOTONIC ns) the latest looker looks, at
         * most HBG_EXT_LOOK_NS ahead (hbgd clamps it: another clock, or
         * garbage): past it hbgd ignores ext_looking, and it wakes a
         * sleeper then for tasks it skipped the wake of and nobody
         * answered, so that a looker kept off its CPU delays them by
         * about a look. Written before the count, relaxed: it only ever
         * makes hbgd wake, never not. */
        _Atomic uint64_t ext_look_until_ns;
        uint8_t pad5[HBG_CACHE_LINE - 2 * sizeof(uint32_t) - sizeof(uint64_t)];

        /* line 6: the same for graph_wake (hbg_graph_wait's sleepers). */
        alignas(HBG_CACHE_LINE) _Atomic uint32_t graph_sleepers;
        /* Does the client want the completion pipe's byte for retired
         * graphs and ready external tasks (HBG_PIPE_*; §10.7)? hbgd loads
         * it (seq_cst) after the wake words' bump and writes the byte only
         * when non-zero: a client whose workers sleep on the futex words
         * makes the busy path free of system calls. Client-written: it
         * only decides whether hbgd writes that client's own pipe. */
        _Atomic uint32_t pipe_wanted;
        uint8_t pad6[HBG_CACHE_LINE - 2 * sizeof(uint32_t)];
};
/* The longest look for work of a client's worker (ext_look_until_ns). */
#define HBG_EXT_LOOK_NS 20000u
/* pipe_wanted's bits. */
#define HBG_PIPE_ALWAYS 2u   /* hbg_client_fd() was asked for (an event loop; before 1.6.0's
                              * last change, also a client without host workers) */
#define HBG_PIPE_WAITING 1u  /* a wait of the caller's thread polls the pipe now */
_Static_assert(sizeof(struct hbg_sub_header) == 7 * HBG_CACHE_LINE, "sub header size");
_Static_assert(offsetof(struct hbg_sub_header, magic) == 0, "magic");
_Static_assert(offsetof(struct hbg_sub_header, layout_version) == 4, "layout_version");
_Static_assert(offsetof(struct hbg_sub_header, region_size) == 8, "region_size");
_Static_assert(offsetof(struct hbg_sub_header, task_window_log2) == 16, "task_window_log2");
_Static_assert(offsetof(struct hbg_sub_header, mailbox_log2) == 20, "mailbox_log2");
_Static_assert(offsetof(struct hbg_sub_header, heap_size) == 24, "heap_size");
_Static_assert(offsetof(struct hbg_sub_header, descs_offset) == 32, "descs_offset");
_Static_assert(offsetof(struct hbg_sub_header, fanins_offset) == 40, "fanins_offset");
_Static_assert(offsetof(struct hbg_sub_header, mailbox_offset) == 48, "mailbox_offset");
_Static_assert(offsetof(struct hbg_sub_header, heap_offset) == 56, "heap_offset");
_Static_assert(offsetof(struct hbg_sub_header, graphs_offset) == 64, "graphs_offset");
_Static_assert(offsetof(struct hbg_sub_header, graph_ring_log2) == 72, "graph_ring_log2");
_Static_assert(offsetof(struct hbg_sub_header, reserved0) == 76, "reserved0");
_Static_assert(offsetof(struct hbg_sub_header, args_offset) == 80, "args_offset");
_Static_assert(offsetof(struct hbg_sub_header, reserved1) == 88, "reserved1");
_Static_assert(offsetof(struct hbg_sub_header, submitted) == 128, "submitted");
_Static_assert(offsetof(struct hbg_sub_header, window_waiting) == 136, "window_waiting");
_Static_assert(offsetof(struct hbg_sub_header, task_waiting) == 144, "task_waiting");
_Static_assert(offsetof(struct hbg_sub_header, mailbox_tail) == 192, "mailbox_tail");
_Static_assert(offsetof(struct hbg_sub_header, graphs_submitted) == 256, "graphs_submitted");
_Static_assert(offsetof(struct hbg_sub_header, ext_sleepers) == 320, "ext_sleepers");
_Static_assert(offsetof(struct hbg_sub_header, ext_looking) == 324, "ext_looking");
_Static_assert(offsetof(struct hbg_sub_header, ext_look_until_ns) == 328, "ext_look_until_ns");
_Static_assert(offsetof(struct hbg_sub_header, graph_sleepers) == 384, "graph_sleepers");
_Static_assert(offsetof(struct hbg_sub_header, pipe_wanted) == 388, "pipe_wanted");

/* One task, slot id & (D-1). The client writes it before publishing
 * `submitted`; hbgd copies it once, then validates the copy. */
struct hbg_task_desc {
        uint64_t id;                       /* must equal the id of this lap */
        uint64_t reserved2;                /* must be zero */
        uint16_t kernel[HBG_LANES];        /* kernel per lane (unused lanes 0) */
        uint8_t lane_mask;                 /* bit per enum hbg_lane; 0 = dummy */
        uint8_t flags;                     /* HBG_TASK_* */
        uint16_t block_num;                /* logical blocks, 1..HBG_MAX_BLOCKS */
        uint8_t n_fanins;
        uint8_t n_tensors;
        uint8_t n_scalars;
        uint8_t reserved0[3];              /* must be zero */
        uint64_t predicate_offset;         /* heap byte offset of an f32 */
        /* Up to HBG_INLINE_FANINS fanins live here, the rest of the array
         * zero, and the slot's hbg_task_fanins are not read; with more,
         * this is all zero and hbg_task_fanins holds them. Most tasks then
         * never touch a line beyond this one (RUNTIME_LOGIC §8). */
        union {
                uint64_t fanins_inline[3];
                /* flags == HBG_DESC_LAUNCH, every other field zero: ids
                 * id .. id + count - 1 are tasks first .. first + count - 1
                 * of the session's recorded graph `graph` (§14). */
                struct {
                        uint64_t graph;
                        uint64_t first;
                        uint64_t count;
                } launch;
        };
};
#define HBG_INLINE_FANINS 3u
_Static_assert(sizeof(struct hbg_task_desc) == HBG_CACHE_LINE, "desc size");
_Static_assert(offsetof(struct hbg_task_desc, id) == 0, "desc id");
_Static_assert(offsetof(struct hbg_task_desc, reserved2) == 8, "desc reserved2");
_Static_assert(offsetof(struct hbg_task_desc, kernel) == 16, "desc kernel");
_Static_assert(offsetof(struct hbg_task_desc, lane_mask) == 22, "desc lane_mask");
_Static_assert(offsetof(struct hbg_task_desc, flags) == 23, "desc flags");
_Static_assert(offsetof(struct hbg_task_desc, block_num) == 24, "desc block_num");
_Static_assert(offsetof(struct hbg_task_desc, n_fanins) == 26, "desc n_fanins");
_Static_assert(offsetof(struct hbg_task_desc, n_tensors) == 27, "desc n_tensors");
_Static_assert(offsetof(struct hbg_task_desc, n_scalars) == 28, "desc n_scalars");
_Static_assert(offsetof(struct hbg_task_desc, reserved0) == 29, "desc reserved0");
_Static_assert(offsetof(struct hbg_task_desc, predicate_offset) == 32, "desc predicate");
_Static_assert(offsetof(struct hbg_task_desc, fanins_inline) == 40, "desc fanins_inline");
_Static_assert(offsetof(struct hbg_task_desc, launch.graph) == 40, "desc launch.graph");
_Static_assert(offsetof(struct hbg_task_desc, launch.first) == 48, "desc launch.first");
_Static_assert(offsetof(struct hbg_task_desc, launch.count) == 56, "desc launch.count");

struct hbg_tensor_arg {
        uint64_t offset;                   /* heap byte offset */
        uint64_t length;                   /* bytes */
        uint32_t direction;                /* enum hbg_direction */
        uint32_t reserved;                 /* must be zero */
};
_Static_assert(sizeof(struct hbg_tensor_arg) == 24, "tensor arg size");
_Static_assert(offsetof(struct hbg_tensor_arg, offset) == 0, "tensor arg offset");
_Static_assert(offsetof(struct hbg_tensor_arg, length) == 8, "tensor arg length");
_Static_assert(offsetof(struct hbg_tensor_arg, direction) == 16, "tensor arg direction");
_Static_assert(offsetof(struct hbg_tensor_arg, reserved) == 20, "tensor arg reserved");

/* The fanins of the task in the same slot when it has more than
 * HBG_INLINE_FANINS, and its arguments: two arrays of their own (layout
 * version 7), so that a graph whose tasks have many fanins and no
 * arguments touches 128 bytes a task beyond its descriptor, not 384, and
 * a fresh session's first such graph faults in a third of the pages
 * beyond the descriptors'. */
struct hbg_task_fanins {
        uint64_t ids[HBG_MAX_FANINS];      /* producer ids, each < own id */
};
_Static_assert(sizeof(struct hbg_task_fanins) == 128, "fanins size");

struct hbg_task_args {
        struct hbg_tensor_arg tensors[HBG_MAX_TENSOR_ARGS];
        uint64_t scalars[HBG_MAX_SCALAR_ARGS]; /* raw bits; a kernel's signature
                                                  says how each is read */
};
_Static_assert(sizeof(struct hbg_task_args) == 256, "args size");
_Static_assert(sizeof(struct hbg_task_args) % HBG_CACHE_LINE == 0, "args lines");
_Static_assert(offsetof(struct hbg_task_args, scalars) == 192, "args scalars");

/* A task's fanins and arguments side by side, as a recorded graph keeps
 * them (below). */
struct hbg_task_payload {
        uint64_t fanins[HBG_MAX_FANINS];
        struct hbg_task_args args;
};
_Static_assert(sizeof(struct hbg_task_payload) == 384, "payload size");
_Static_assert(offsetof(struct hbg_task_payload, args.tensors) == 128, "payload tensors");
_Static_assert(offsetof(struct hbg_task_payload, args.scalars) == 320, "payload scalars");

/* One task of a recorded graph as the client hands it to hbgd (a memfd
 * of n of these, §14): task i's descriptor has id i + 1, and its fanins
 * are 0 (the launch's gate, which every launch puts before the graph's
 * tasks) or j + 1 for an earlier task j. hbgd copies and validates each
 * once, when it is recorded. */
struct hbg_recorded_task {
        struct hbg_task_desc desc;
        struct hbg_task_payload payload;
};
_Static_assert(sizeof(struct hbg_recorded_task) == 448, "recorded task size");
_Static_assert(offsetof(struct hbg_recorded_task, payload) == 64, "recorded task payload");

/* Async completion mailbox entry: the client posts "task id finished with
 * status"; hbgd consumes entries in order. `seq` == lap-stamped position
 * marks the entry as written (release by the client, acquire by hbgd). */
struct hbg_mailbox_entry {
        _Atomic uint64_t seq;
        uint64_t task_id;
        int32_t status;                    /* 0 or a negative errno */
        uint32_t reserved0;                /* must be zero */
        uint64_t reserved1;                /* must be zero */
};
_Static_assert(sizeof(struct hbg_mailbox_entry) == 32, "mailbox entry size");
_Static_assert(offsetof(struct hbg_mailbox_entry, seq) == 0, "mailbox entry seq");
_Static_assert(offsetof(struct hbg_mailbox_entry, task_id) == 8, "mailbox entry task_id");
_Static_assert(offsetof(struct hbg_mailbox_entry, status) == 16, "mailbox entry status");
_Static_assert(offsetof(struct hbg_mailbox_entry, reserved0) == 20, "mailbox entry reserved0");
_Static_assert(offsetof(struct hbg_mailbox_entry, reserved1) == 24, "mailbox entry reserved1");

/* A graph: the contiguous id range [first_id, last_id]. The client writes
 * record number k at slot k & (G-1) after publishing the graph's tasks,
 * then advances graphs_submitted. Graph k+1 starts at last_id + 1 of k. */
struct hbg_graph_record {
        uint64_t graph_id;                 /* client-chosen handle, echoed back */
        uint64_t first_id;
        uint64_t last_id;
        uint64_t reserved;                 /* must be zero */
};
_Static_assert(sizeof(struct hbg_graph_record) == 32, "graph record size");
_Static_assert(offsetof(struct hbg_graph_record, graph_id) == 0, "graph record graph_id");
_Static_assert(offsetof(struct hbg_graph_record, first_id) == 8, "graph record first_id");
_Static_assert(offsetof(struct hbg_graph_record, last_id) == 16, "graph record last_id");
_Static_assert(offsetof(struct hbg_graph_record, reserved) == 24, "graph record reserved");

/* ------------------------------------------------------ completion region */

struct hbg_cpl_header {
        /* line 0: identity and geometry, written once at creation. */
        uint32_t magic;
        uint32_t layout_version;
        uint64_t region_size;
        uint32_t task_window_log2;
        uint32_t flag_window_log2;
        uint32_t graph_table_log2;
        uint32_t reserved0;                /* must be zero */
        uint64_t graphs_offset;
        uint64_t flags_offset;
        uint64_t first_id;                 /* the ring's first task id */
        uint64_t ext_ready_offset;         /* D external-ready ids */

        /* line 1: lowest id not yet known complete (exclusive frontier). */
        alignas(HBG_CACHE_LINE) _Atomic uint64_t completed_watermark;
        uint8_t pad1[HBG_CACHE_LINE - sizeof(uint64_t)];

        /* line 2: classification cursor: ids below it have been claimed by
         * a scheduler thread. */
        alignas(HBG_CACHE_LINE) _Atomic uint64_t classified;
        uint8_t pad2[HBG_CACHE_LINE - sizeof(uint64_t)];

        /* line 3: non-zero while the schedulers are parked (and until an
         * awake thread finds work in this ring, or clears the flags after
         * a wake); the client wakes hbgd only then (io_uring SQPOLL's
         * NEED_WAKEUP). */
        alignas(HBG_CACHE_LINE) _Atomic uint32_t need_wakeup;
        /* Non-zero while a scheduler thread whose last answer was to
         * this ring moves to another CPU (RUNTIME_LOGIC §9.4): the
         * client's wait spins through the move instead of sleeping. A
         * hint (see the rules above); clients before it took it for
         * padding. */
        _Atomic uint32_t answer_moving;
        uint8_t pad3[HBG_CACHE_LINE - 2 * sizeof(uint32_t)];

        /* line 4: the session's error latch: first error wins. */
        alignas(HBG_CACHE_LINE) _Atomic int32_t error_code;
        uint32_t reserved4;
        _Atomic uint64_t error_task;
        /* The highest failed or skipped task's id + 1, only ever raised
         * (UINT64_MAX once the ring is stopped); 0: none. Raised before
         * that task's stamp is published, so a client past it in the
         * watermark sees it (RUNTIME_LOGIC §12.2). Padding before: a
         * client reads it only beside a set error_code, and an hbgd that
         * left it 0 then counts as one that cannot say. */
        _Atomic uint64_t failed_high;
        uint8_t pad4[HBG_CACHE_LINE - 24];

        /* line 5: graphs retired so far (graph records below this count
         * have their final status in the graph table). */
        alignas(HBG_CACHE_LINE) _Atomic uint64_t graphs_retired;
        uint8_t pad5[HBG_CACHE_LINE - sizeof(uint64_t)];

        /* line 6: external tasks made ready so far; entry k of the
         * external-ready ring (slot k & (D-1)) holds the k-th id. */
        alignas(HBG_CACHE_LINE) _Atomic uint64_t ext_ready_tail;
        uint8_t pad6[HBG_CACHE_LINE - sizeof(uint64_t)];

        /* line 7: mailbox entries consumed by hbgd; the client may write
         * entry k only while k < mailbox_consumed + M. */
        alignas(HBG_CACHE_LINE) _Atomic uint64_t mailbox_consumed;
        uint8_t pad7[HBG_CACHE_LINE - sizeof(uint64_t)];

        /* line 8: futex word, bumped (seq_cst) after hbgd published ready
         * external tasks (ext_ready_tail); the client's host workers sleep
         * on it (FUTEX_WAIT on the read-only mapping, §10.7). */
        alignas(HBG_CACHE_LINE) _Atomic uint32_t ext_wake;
        uint8_t pad8[HBG_CACHE_LINE - sizeof(uint32_t)];

        /* line 9: futex word, bumped after graphs retired (graph entries
         * and graphs_retired published) and when the ring stops;
         * hbg_graph_wait() sleeps on it when the client has workers. */
        alignas(HBG_CACHE_LINE) _Atomic uint32_t graph_wake;
        uint8_t pad9[HBG_CACHE_LINE - sizeof(uint32_t)];
};
_Static_assert(sizeof(struct hbg_cpl_header) == 10 * HBG_CACHE_LINE, "cpl header size");
_Static_assert(offsetof(struct hbg_cpl_header, magic) == 0, "cpl magic");
_Static_assert(offsetof(struct hbg_cpl_header, layout_version) == 4, "cpl layout_version");
_Static_assert(offsetof(struct hbg_cpl_header, region_size) == 8, "cpl region_size");
_Static_assert(offsetof(struct hbg_cpl_header, task_window_log2) == 16, "cpl D");
_Static_assert(offsetof(struct hbg_cpl_header, flag_window_log2) == 20, "cpl F");
_Static_assert(offsetof(struct hbg_cpl_header, graph_table_log2) == 24, "cpl graphs");
_Static_assert(offsetof(struct hbg_cpl_header, reserved0) == 28, "cpl reserved0");
_Static_assert(offsetof(struct hbg_cpl_header, graphs_offset) == 32, "cpl graphs_offset");
_Static_assert(offsetof(struct hbg_cpl_header, flags_offset) == 40, "cpl flags_offset");
_Static_assert(offsetof(struct hbg_cpl_header, first_id) == 48, "cpl first_id");
_Static_assert(offsetof(struct hbg_cpl_header, ext_ready_offset) == 56, "cpl ext_ready_offset");
_Static_assert(offsetof(struct hbg_cpl_header, completed_watermark) == 64, "cpl watermark");
_Static_assert(offsetof(struct hbg_cpl_header, classified) == 128, "cpl classified");
_Static_assert(offsetof(struct hbg_cpl_header, need_wakeup) == 192, "cpl need_wakeup");
_Static_assert(offsetof(struct hbg_cpl_header, answer_moving) == 196, "cpl answer_moving");
_Static_assert(offsetof(struct hbg_cpl_header, error_code) == 256, "cpl error_code");
_Static_assert(offsetof(struct hbg_cpl_header, reserved4) == 260, "cpl reserved4");
_Static_assert(offsetof(struct hbg_cpl_header, error_task) == 264, "cpl error_task");
_Static_assert(offsetof(struct hbg_cpl_header, failed_high) == 272, "cpl failed_high");
_Static_assert(offsetof(struct hbg_cpl_header, graphs_retired) == 320, "cpl graphs_retired");
_Static_assert(offsetof(struct hbg_cpl_header, ext_ready_tail) == 384, "cpl ext_ready_tail");
_Static_assert(offsetof(struct hbg_cpl_header, mailbox_consumed) == 448, "cpl mailbox_consumed");
_Static_assert(offsetof(struct hbg_cpl_header, ext_wake) == 512, "cpl ext_wake");
_Static_assert(offsetof(struct hbg_cpl_header, graph_wake) == 576, "cpl graph_wake");

/*
 * The wake page (RUNTIME_LOGIC.md §8, §9.4; protocol 1.5): one per uid
 * (the uids past hbgd's first 32 at once share one), a sealed memfd that
 * hbgd alone can write and the uid's clients map read-only. The parked
 * scheduler threads sleep on `word`; a client that finds NEED_WAKEUP set
 * after publishing wakes `wake_n` of them with FUTEX_WAKE (a shared
 * futex: a wake works on a read-only mapping), and rings the doorbell
 * unless the page is its uid's own and the wake woke somebody.
 */
#define HBG_WAKE_MAGIC UINT32_C(0x4b574248) /* "HBWK" */
#define HBG_WAKE_PAGE_SIZE 4096u
/* flags: the page is the client's uid's own: a wake that woke somebody
 * woke one of hbgd's threads, unless a client of the same uid waits on
 * the word; the doorbell may be left out then. Without it (a page shared
 * between uids, or an hbgd whose page had one for all, which left the
 * field 0) the client rings the doorbell after every wake. */
#define HBG_WAKE_OWN UINT32_C(1)

struct hbg_wake_page {
        /* line 0: identity, written once before the first client. */
        uint32_t magic;
        uint32_t wake_n;                   /* sleepers a client's wake asks for (1, or all) */
        uint32_t flags;                    /* HBG_WAKE_OWN, or 0 */
        uint8_t pad0[HBG_CACHE_LINE - 12];
        /* line 1: the futex word clients FUTEX_WAKE; it stays 0 (parked
         * threads wait for it to be woken, not for it to change). */
        alignas(HBG_CACHE_LINE) _Atomic uint32_t word;
        uint8_t pad1[HBG_CACHE_LINE - sizeof(uint32_t)];
};
_Static_assert(sizeof(struct hbg_wake_page) <= HBG_WAKE_PAGE_SIZE, "wake page size");
_Static_assert(offsetof(struct hbg_wake_page, magic) == 0, "wake page magic");
_Static_assert(offsetof(struct hbg_wake_page, wake_n) == 4, "wake page wake_n");
_Static_assert(offsetof(struct hbg_wake_page, flags) == 8, "wake page flags");
_Static_assert(offsetof(struct hbg_wake_page, word) == 64, "wake page word");

/* Graph table entry k & (G-1): the final status of graph record k
 * (RUNTIME_LOGIC.md §12.1), two cache lines. hbgd writes it as a seqlock:
 * `seq` = 0 (relaxed), the fields (release stores), then `seq` = k + 1
 * (release). A reader loads `seq` (acquire), copies the entry (acquire
 * loads) and loads `seq` again: the copy is graph k's only if both loads
 * saw k + 1. No fences (ThreadSanitizer models none). A success writes the
 * first line only (message[0] = 0). */
#define HBG_GRAPH_MESSAGE_MAX 96u
struct hbg_graph_entry {
        _Atomic uint64_t seq;              /* record number + 1; 0 = never retired, or being written */
        uint64_t graph_id;
        int32_t status;                    /* 0 ok, negative errno failed */
        uint16_t kernel;                   /* the failing task's kernel id, HBG_KERNEL_NONE if it
                                              has none (valid when status != 0) */
        uint16_t reserved0;                /* must be zero */
        uint64_t first_error_task;         /* valid when status != 0 */
        /* Why, NUL-terminated within the array (when status != 0): the
         * validator's reason, "kernel NAME returned -EIO", the stall
         * detector's reason... */
        char message[HBG_GRAPH_MESSAGE_MAX];
};
_Static_assert(sizeof(struct hbg_graph_entry) == 2 * HBG_CACHE_LINE, "graph entry size");
_Static_assert(offsetof(struct hbg_graph_entry, seq) == 0, "graph entry seq");
_Static_assert(offsetof(struct hbg_graph_entry, graph_id) == 8, "graph entry graph_id");
_Static_assert(offsetof(struct hbg_graph_entry, status) == 16, "graph entry status");
_Static_assert(offsetof(struct hbg_graph_entry, kernel) == 20, "graph entry kernel");
_Static_assert(offsetof(struct hbg_graph_entry, reserved0) == 22, "graph entry reserved0");
_Static_assert(offsetof(struct hbg_graph_entry, first_error_task) == 24, "graph entry first_error_task");
_Static_assert(offsetof(struct hbg_graph_entry, message) == 32, "graph entry message");

/* One completion flag: the lap (plus one) of the id that owns the slot. */
typedef _Atomic uint32_t hbg_stamp_t;
_Static_assert(sizeof(hbg_stamp_t) == 4, "stamp size");
_Static_assert((HBG_CACHE_LINE / sizeof(hbg_stamp_t)) == (1u << HBG_STAMPS_PER_LINE_LOG2),
               "stamps per line");

/* ------------------------------------------------------ region set-up */

/* Write a fresh submission region header (region zeroed by the caller). */
void layout_sub_region_init(void *base, const struct hbg_geometry *g);

/* Write a fresh completion region's header. The caller hands it zeroed (a
 * new memfd, calloc): zero flags hold the stamp of lap -1, so no initial
 * value can be mistaken for a real id (RUNTIME_LOGIC.md §3.3), and an empty
 * graph table. O(1): nothing depends on the window. `first_id` is the
 * ring's first task id (0 for a new ring). */
void layout_cpl_region_init(void *base, const struct hbg_geometry *g, uint64_t first_id);

/* hbgd: publish graph record k's entry e (the seqlock above). message may
 * be NULL (none); it is cut to HBG_GRAPH_MESSAGE_MAX - 1 bytes. Only the
 * first line is written when status is 0. */
void layout_graph_entry_publish(struct hbg_graph_entry *e, uint64_t k, uint64_t graph_id, int32_t status,
                             uint16_t kernel, uint64_t task, const char *message);
/* A reader: copy entry e if it is graph record k's. 0 and *ret (its
 * message copied only when status != 0, as hbgd wrote it: the caller
 * validates), or 1 when e is not k's (not retired yet, being rewritten).
 * Inline: the client reads every retired entry. */
static inline int layout_graph_entry_read(const struct hbg_graph_entry *e, uint64_t k, struct hbg_graph_entry *ret) {
        if (atomic_load_explicit(&e->seq, memory_order_acquire) != k + 1)
                return 1;
        /* Acquire loads of the fields (plain loads on x86): had one read a
         * store of a rewrite (a release store, after the rewrite's seq =
         * 0), the seq load below, ordered after it, sees 0 or a later
         * record's seq. */
        ret->graph_id = __atomic_load_n(&e->graph_id, __ATOMIC_ACQUIRE);
        ret->status = __atomic_load_n(&e->status, __ATOMIC_ACQUIRE);
        ret->kernel = __atomic_load_n(&e->kernel, __ATOMIC_ACQUIRE);
        ret->reserved0 = __atomic_load_n(&e->reserved0, __ATOMIC_ACQUIRE);
        ret->first_error_task = __atomic_load_n(&e->first_error_task, __ATOMIC_ACQUIRE);
        ret->message[0] = '\0';
        if (ret->status != 0)
                for (size_t i = 0; i < HBG_GRAPH_MESSAGE_MAX; i++)
                        ret->message[i] = __atomic_load_n(&e->message[i], __ATOMIC_ACQUIRE);
        if (atomic_load_explicit(&e->seq, memory_order_relaxed) != k + 1)
                return 1;
        atomic_store_explicit(&ret->seq, k + 1, memory_order_relaxed);
        return 0;
}

/* Check a mapped completion region's header: magic, version, padding zero,
 * sizes and offsets that follow from the geometry it states, and a mapping
 * of `size` bytes that holds the region (used by the client after mmap).
 * Returns 0 or -EPROTO with a message in *ret_error (if not NULL). */
int layout_cpl_region_check(const void *base, uint64_t size, const char **ret_error);
/* The same for a fresh submission region's header, as hbgd wrote it: the
 * client checks it after mmap, before it writes to the region. */
int layout_sub_region_check(const void *base, uint64_t size, const char **ret_error);
