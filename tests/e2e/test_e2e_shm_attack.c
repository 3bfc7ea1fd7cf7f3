/* SPDX-License-Identifier: MIT */
/*
 * hbgd against a client that attacks it through shared memory: each test
 * makes one attack from a forked attacker (tests/e2e/e2e_kid.h) on a real
 * hbgd while an honest client runs alongside, then checks that
 *   - hbgd answers a status request during the attack and after it, and
 *     exits 0 on SIGTERM at the end;
 *   - the honest client got every graph right, each within
 *     HONEST_BOUND_MS, and a multi-task workload after the attack too;
 *   - hbgd's fds return to their baseline and its RSS to within
 *     RSS_MARGIN_KB of it once the attacker is gone;
 *   - the attacker got clear errors (a failed graph with its code and a
 *     message, or its session stopped) and hbgd logged why.
 *
 * The attacker opens a session through libhbgclient and finds its own
 * regions in /proc/self/maps (hbgd names its memfds hbg-sub-N and
 * hbg-cpl-N, N the session), or (test_e2e_shm_control's sealed regions
 * and failure list) opens one by raw protocol records to hold the memfds
 * themselves. Writers that race the attacker's own library calls (here
 * the scribbler and the flipper; the cursor mover and the sleepers
 * writer there) are forked processes sharing the mapping: hbgd sees the
 * same as from a thread, and the sanitizers do not report the attacker's
 * deliberate races on its own memory.
 *
 * Here: (a) the submission region scribbled over, (b) descriptors forged,
 * the example module's and a counting module's included, (e) published
 * descriptors flipped. The cursors (c), graph records and mailbox (d),
 * sealed regions (f) and sleepers words (g) are test_e2e_shm_control.c;
 * what both files share is shm_attack_util.c.
 *
 * Every test starts hbgd with stall_timeout_ms = 1000, so that tasks an
 * attack leaves waiting for ever (a forged external task, a graph record
 * promising tasks never submitted) end in one second, not ten.
 *
 * forged_module_descriptors forges the descriptors of module kernels'
 * tasks (the example module and tests/modules' counting module, copied
 * into a fresh 0755 directory under /tmp and named in hbgd's config).
 *
 * HBG_TEST_SCALE divides the work (default 10: 10^5 scribbled words; 1:
 * the 10^6 of the hardening issue, as `make hostile` runs it);
 * HBG_TEST_SEED fixes the random attacks; HBG_TEST_VERBOSE=1 shows hbgd's
 * log (whose checks are then skipped: it is not kept in a file).
 */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "hbg/hbg.h"
#include "proto/wire.h"
#include "common/kernel_sig.h"
#include "shm/layout.h"
#include "tests/e2e/e2e_kid.h"
#include "tests/e2e/e2e_util.h"
#include "tests/e2e/shm_attack_util.h"
#include "tests/module_util.h"
#include "tests/test_util.h"
#include "tests/check_main.h"

/* ------------------------------------------------------------ a. scribble */

/* n random 8-byte writes over the whole region, in 1000 bursts 1 ms
 * apart (about a second whatever n): uniform over the region, and every
 * 64th on the header's cursor lines (a few of 200000 words, which at 10^5
 * writes would otherwise be hit by chance only). */
static void scribble(const void *ctx, uint64_t n) {
        const struct victim *v = ctx;
        uint64_t s = kid_seed() | 1;
        uint64_t words = v->sub_size / 8, header_words = sizeof(struct hbg_sub_header) / 8;
        uint64_t burst = n / 1000 ? n / 1000 : 1;
        volatile uint64_t *w = (volatile uint64_t *)(void *)v->sub;
        for (uint64_t i = 0; i < n; i++) {
                uint64_t r = xorshift(&s);
                uint64_t at = i % 64 == 0 ? 16 + r % (header_words - 16) : r % words;
                w[at] = xorshift(&s);
                if ((i + 1) % burst == 0)
                        sleep_us(1000);
        }
}

static int scribble_fn(int sock, void *arg) {
        struct victim v;
        if (attacker_start(sock, arg, &v) < 0)
                return 1;
        hbg_tensor t;
        if (hbg_tensor_alloc(v.c, 4096, &t) < 0) {
                kid_say(sock, "FAIL hbg_tensor_alloc: %s", hbg_last_error(v.c));
                return 1;
        }
        struct tally tl = { 0 };
        fill_graph(&v, t, 0.5f, &tl); /* graphs before ... */
        uint64_t n = 1000000 / scale();
        pid_t w = fork_writer(scribble, &v, n);
        graphs_while_writer(&v, t, w, &tl); /* ... and during */
        kid_say(sock, "NOTE %" PRIu64 " random 8-byte writes over the %" PRIu64 "-byte submission region", n,
                v.sub_size);
        tally_say(sock, &tl, "the attacker's graphs");
        /* The first failure hbgd reported is in its log (a session's first
         * ten lines always are); else a stop is. */
        char a[160], b[160];
        if (tl.failed) {
                snprintf(a, sizeof(a), "%s: graph ", v.name);
                snprintf(b, sizeof(b), "failed: %s at task", hbg_strerror(tl.first_code));
                expect_log(sock, a, b);
        } else if (tl.gone) {
                snprintf(a, sizeof(a), "%s: stopped: ", v.name);
                expect_log(sock, a, "");
        }
        return attacker_end(sock, &v, 0);
}

START_TEST(scribble_submission_region) {
        run_attack("scribble_submission_region", scribble_fn);
}
END_TEST

/* ------------------------------------------------------------ b. forged descriptors */

enum field {
        F_ID,           /* id += value */
        F_RESERVED2,
        F_RESERVED0,    /* reserved0[value] = 1 */
        F_KERNEL,       /* kernel[lane AIV0] = value */
        F_KERNEL_AIC,   /* kernel[lane AIC] (inactive) = value */
        F_LANE_MASK,
        F_FLAGS,        /* flags = value */
        F_BLOCK_NUM,
        F_N_FANINS,
        F_N_TENSORS,
        F_N_SCALARS,
        F_FANIN,        /* one inline fanin: own id + (int64_t)value */
        F_FANIN_ABS,    /* one inline fanin: value */
        F_INLINE_STRAY, /* fanins_inline[2] = value with no fanins */
        F_SLOT_FANINS, /* four fanins in the slot's fanins, the last own id + value */
        F_T_OFFSET,     /* tensor `index` (0 unless said): offset = value */
        F_T_OFFSET_ADD, /* tensor index: offset += value */
        F_T_LENGTH,
        F_T_DIRECTION,
        F_T_RESERVED,
        F_T_OVERLAP,    /* tensor index: offset = tensor 0's + value */
        F_SCALAR,       /* scalar index |= value */
        F_PREDICATE,    /* HAS_PREDICATE, predicate_offset = value */
        F_PREDICATE_AT_HEAP_END,
        F_T_AT_HEAP_END, /* tensor index ends 128 bytes past the heap */
        F_CYCLE,        /* two tasks, each the other's fanin */
};

struct mutation {
        const char *what;
        enum field field;
        uint64_t value;
        int code;               /* the graph's status */
        const char *why;        /* hbgd's reason in its log */
        const char *kernel;     /* the forged task's kernel as built (NULL: fill_f32) */
        unsigned index;         /* the tensor or scalar the F_T_ and F_SCALAR fields change */
};

#define TENSOR "fill_f32: tensor out "

static const struct mutation mutations[] = {
        { "kernel id out of range", F_KERNEL, 0xffff, -ENOENT, "unknown kernel" },
        { "kernel id HBG_KERNEL_COUNT", F_KERNEL, HBG_KERNEL_COUNT, -ENOENT, "unknown kernel" },
        { "kernel id 0 on an active lane", F_KERNEL, 0, -ENOENT, "unknown kernel" },
        { "another kernel's signature (spin_ns)", F_KERNEL, HBG_KERNEL_SPIN_NS, -EINVAL,
          "spin_ns: wrong number of tensor arguments (takes 0)" },
        { "a kernel on an inactive lane", F_KERNEL_AIC, HBG_KERNEL_FILL_F32, -EINVAL, "kernel given for an inactive lane" },
        { "lane mask bit 3", F_LANE_MASK, 0x0a, -EINVAL, "lane mask has bits beyond the three lanes" },
        { "lane mask 0xff", F_LANE_MASK, 0xff, -EINVAL, "lane mask has bits beyond the three lanes" },
        { "no lanes but a kernel", F_LANE_MASK, 0, -EINVAL, "dummy, host-inline and host tasks have no lanes or kernels" },
        { "block_num 0", F_BLOCK_NUM, 0, -ERANGE, "block_num out of range (1..4096)" },
        { "block_num 4097", F_BLOCK_NUM, HBG_MAX_BLOCKS + 1, -ERANGE, "block_num out of range (1..4096)" },
        { "block_num 65535", F_BLOCK_NUM, 0xffff, -ERANGE, "block_num out of range (1..4096)" },
        { "17 fanins", F_N_FANINS, HBG_MAX_FANINS + 1, -E2BIG, "too many fanins, tensors or scalars" },
        { "9 tensors", F_N_TENSORS, HBG_MAX_TENSOR_ARGS + 1, -E2BIG, "too many fanins, tensors or scalars" },
        { "255 scalars", F_N_SCALARS, 255, -E2BIG, "too many fanins, tensors or scalars" },
        { "no tensor for fill_f32", F_N_TENSORS, 0, -EINVAL, "fill_f32: wrong number of tensor arguments (takes 1)" },
        { "2 scalars for fill_f32", F_N_SCALARS, 2, -EINVAL, "fill_f32: wrong number of scalar arguments (takes 1)" },
        { "tensor offset + length overflows", F_T_OFFSET, UINT64_MAX - 255, -EOVERFLOW, TENSOR "offset + length overflows" },
        { "tensor past the heap's end", F_T_AT_HEAP_END, 0, -ERANGE, TENSOR "extends past the end of the heap" },
        { "tensor length 2^64 - 4", F_T_LENGTH, UINT64_MAX - 3, -EOVERFLOW, TENSOR "offset + length overflows" },
        { "tensor length 0", F_T_LENGTH, 0, -EINVAL, TENSOR "is empty" },
        { "tensor offset misaligned", F_T_OFFSET_ADD, 2, -EINVAL, TENSOR "offset or length is not a multiple of 4" },
        { "tensor direction IN for an output", F_T_DIRECTION, HBG_DIR_IN, -EINVAL, TENSOR "has the wrong direction" },
        { "tensor direction 2^32 - 1", F_T_DIRECTION, UINT32_MAX, -EINVAL, TENSOR "has the wrong direction" },
        { "tensor reserved field", F_T_RESERVED, 1, -EINVAL, TENSOR "reserved field is not zero" },
        { "f32 scalar with high bits", F_SCALAR, UINT64_C(1) << 40, -EINVAL,
          "fill_f32: f32 scalar v has its upper 32 bits set" },
        { "fanin equal to its own id", F_FANIN, 0, -EINVAL, "fanin is not an earlier task of this ring" },
        { "fanin own id + 1", F_FANIN, 1, -EINVAL, "fanin is not an earlier task of this ring" },
        { "fanin 2^64 - 1", F_FANIN_ABS, UINT64_MAX, -EINVAL, "fanin is not an earlier task of this ring" },
        { "fanin beyond the inline ones equal to its own id", F_SLOT_FANINS, 0, -EINVAL, "fanin is not an earlier task of this ring" },
        { "fanin beyond the inline ones own id + 1000", F_SLOT_FANINS, 1000, -EINVAL, "fanin is not an earlier task of this ring" },
        { "a cycle of two tasks", F_CYCLE, 0, -EINVAL, "fanin is not an earlier task of this ring" },
        { "inline fanin slot beyond the count", F_INLINE_STRAY, 1, -EPROTO, "inline fanin slot beyond the task's fanins not zero" },
        { "id of the next lap", F_ID, ATTACK_WINDOW, -EPROTO, "descriptor id does not match its slot's id" },
        { "id of the previous lap", F_ID, (uint64_t)-(int64_t)ATTACK_WINDOW, -EPROTO, "descriptor id does not match its slot's id" },
        { "reserved2", F_RESERVED2, 1, -EPROTO, "descriptor reserved field not zero" },
        { "reserved0[0]", F_RESERVED0, 0, -EPROTO, "descriptor reserved field not zero" },
        { "reserved0[1]", F_RESERVED0, 1, -EPROTO, "descriptor reserved field not zero" },
        { "reserved0[2]", F_RESERVED0, 2, -EPROTO, "descriptor reserved field not zero" },
        { "unknown flag 0x40", F_FLAGS, 0x40, -EINVAL, "unknown task flag" },
        { "launch flag in a ring without recorded graphs", F_FLAGS, HBG_DESC_LAUNCH, -EINVAL, "unknown task flag" },
        { "host-inline and external", F_FLAGS, HBG_TASK_HOST_INLINE | HBG_TASK_EXTERNAL, -EINVAL,
          "a task cannot be both host-inline and a host task" },
        { "external with a kernel", F_FLAGS, HBG_TASK_EXTERNAL, -EINVAL,
          "dummy, host-inline and host tasks have no lanes or kernels" },
        { "predicate past the heap", F_PREDICATE_AT_HEAP_END, 0, -ERANGE, "predicate element outside the heap or misaligned" },
        { "predicate offset overflows", F_PREDICATE, UINT64_MAX - 3, -ERANGE, "predicate element outside the heap or misaligned" },
        { "predicate misaligned", F_PREDICATE, 2, -ERANGE, "predicate element outside the heap or misaligned" },
};
#define N_MUTATIONS (sizeof(mutations) / sizeof(mutations[0]))

/*
 * The same against module kernels (hbgd with the example module, then
 * tests/modules' "counting": relu_f32 256, rownorm_f32 257, tm_count 258):
 * the generic checks are hbgd's, whoever defined the kernel, and run
 * before the module's own check (tm_count counts its calls).
 */
#define MOD_RELU 256u
#define MOD_TM_COUNT 258u
static const struct mutation module_mutations[] = {
        { "relu_f32: x past the heap's end", F_T_AT_HEAP_END, 0, -ERANGE,
          "relu_f32: tensor x extends past the end of the heap", "relu_f32", 0 },
        { "relu_f32: y offset + length overflows", F_T_OFFSET, UINT64_MAX - 255, -EOVERFLOW,
          "relu_f32: tensor y offset + length overflows", "relu_f32", 1 },
        { "rownorm_f32: X past the heap's end", F_T_AT_HEAP_END, 0, -ERANGE,
          "rownorm_f32: tensor X extends past the end of the heap", "rownorm_f32", 0 },
        { "tm_count: out past the heap's end", F_T_AT_HEAP_END, 0, -ERANGE,
          "tm_count: tensor out extends past the end of the heap", "tm_count", 1 },
        { "relu_f32: y direction IN", F_T_DIRECTION, HBG_DIR_IN, -EINVAL, "relu_f32: tensor y has the wrong direction",
          "relu_f32", 1 },
        { "relu_f32: x direction OUT", F_T_DIRECTION, HBG_DIR_OUT, -EINVAL,
          "relu_f32: tensor x has the wrong direction", "relu_f32", 0 },
        { "rownorm_f32: X direction IN", F_T_DIRECTION, HBG_DIR_IN, -EINVAL,
          "rownorm_f32: tensor X has the wrong direction", "rownorm_f32", 0 },
        { "relu_f32: one tensor", F_N_TENSORS, 1, -EINVAL, "relu_f32: wrong number of tensor arguments (takes 2)",
          "relu_f32", 0 },
        { "relu_f32: three tensors", F_N_TENSORS, 3, -EINVAL, "relu_f32: wrong number of tensor arguments (takes 2)",
          "relu_f32", 0 },
        { "rownorm_f32: two tensors", F_N_TENSORS, 2, -EINVAL,
          "rownorm_f32: wrong number of tensor arguments (takes 1)", "rownorm_f32", 0 },
        { "rownorm_f32: one scalar", F_N_SCALARS, 1, -EINVAL,
          "rownorm_f32: wrong number of scalar arguments (takes 2)", "rownorm_f32", 0 },
        { "relu_f32: y overlaps x, not in place", F_T_OVERLAP, 4, -EINVAL,
          "relu_f32: output y overlaps tensor x (only an input of the very same range may be shared)", "relu_f32",
          1 },
        { "tm_count: out overlaps in", F_T_OVERLAP, 128, -EINVAL, "tm_count: output out overlaps tensor in",
          "tm_count", 1 },
        { "relu_f32: x shorter than y", F_T_LENGTH, 128, -EINVAL,
          "relu_f32: tensor x is not as long as y (every tensor exactly as long as the output)", "relu_f32", 0 },
        { "relu_f32: x empty", F_T_LENGTH, 0, -EINVAL, "relu_f32: tensor x is empty", "relu_f32", 0 },
        { "rownorm_f32: X misaligned", F_T_OFFSET_ADD, 2, -EINVAL,
          "rownorm_f32: tensor X offset or length is not a multiple of 4", "rownorm_f32", 0 },
        { "tm_count: f32 scalar with high bits", F_SCALAR, UINT64_C(1) << 40, -EINVAL,
          "tm_count: f32 scalar f has its upper 32 bits set", "tm_count", 1 },
        { "tm_count: f32 scalar with bit 63", F_SCALAR, UINT64_C(1) << 63, -EINVAL,
          "tm_count: f32 scalar f has its upper 32 bits set", "tm_count", 1 },
        { "relu_f32 task relabelled tm_count", F_KERNEL, MOD_TM_COUNT, -EINVAL,
          "tm_count: wrong number of scalar arguments (takes 2)", "relu_f32", 0 },
        { "unknown module kernel id 256 + 50", F_KERNEL, MOD_RELU + 50, -ENOENT, "unknown kernel", "relu_f32", 0 },
        { "unknown module kernel id one past the last", F_KERNEL, MOD_TM_COUNT + 1, -ENOENT, "unknown kernel",
          "tm_count", 0 },
        { "module kernel on an inactive lane", F_KERNEL_AIC, MOD_RELU, -EINVAL, "kernel given for an inactive lane",
          "relu_f32", 0 },
};

struct mutation_set {
        const struct mutation *m;
        size_t n;
};
static const struct mutation_set builtin_mutations = { mutations, N_MUTATIONS };
static const struct mutation_set module_set = { module_mutations,
                                                sizeof(module_mutations) / sizeof(module_mutations[0]) };

/* The task a mutation forges, before the forgery: fill_f32 on t1, or the
 * module kernel it names: relu_f32 and tm_count t1 -> t2 (tm_count with
 * k 7 and f 1.0), rownorm_f32 on t1 as 8 rows of 8. */
static hbg_task forged_task(const struct mutation *m, hbg_tensor t1, hbg_tensor t2) {
        if (!m->kernel)
                return fill_task(t1, 3.0f);
        hbg_task t = HBG_TASK_INIT(m->kernel);
        t.n_args = 1;
        t.args[0].tensor = t1;
        if (strcmp(m->kernel, "rownorm_f32") == 0) {
                t.args[0].dir = HBG_INOUT;
                t.n_scalars = 2;
                t.scalars[0] = 8;
                t.scalars[1] = 8;
                return t;
        }
        t.args[0].dir = HBG_IN;
        t.args[1].tensor = t2;
        t.args[1].dir = HBG_OUT;
        t.n_args = 2;
        if (strcmp(m->kernel, "tm_count") == 0) {
                t.n_scalars = 2;
                t.scalars[0] = 7;
                t.scalars[1] = hbg_f32(1.0f);
        }
        return t;
}
/* A session per few mutations: each failing graph is one line of hbgd's
 * log, of which it keeps ten per session per 10 s. */
#define MUTATIONS_PER_SESSION 5

static void mutate(const struct victim *v, const struct mutation *m, uint64_t id, uint64_t partner) {
        struct hbg_task_desc *d = &v->descs[id & (v->D - 1)];
        struct hbg_task_args *p = &v->args[id & (v->D - 1)];
        uint64_t *fanins = v->fanins[id & (v->D - 1)].ids;
        uint64_t value = m->value;
        unsigned ix = m->index;
        switch (m->field) {
        case F_ID: d->id += value; break;
        case F_RESERVED2: d->reserved2 = value; break;
        case F_RESERVED0: d->reserved0[value] = 1; break;
        case F_KERNEL: d->kernel[HBG_LANE_AIV0] = (uint16_t)value; break;
        case F_KERNEL_AIC: d->kernel[HBG_LANE_AIC] = (uint16_t)value; break;
        case F_LANE_MASK: d->lane_mask = (uint8_t)value; break;
        case F_FLAGS: d->flags = (uint8_t)value; break;
        case F_BLOCK_NUM: d->block_num = (uint16_t)value; break;
        case F_N_FANINS: d->n_fanins = (uint8_t)value; break;
        case F_N_TENSORS: d->n_tensors = (uint8_t)value; break;
        case F_N_SCALARS: d->n_scalars = (uint8_t)value; break;
        case F_FANIN: d->n_fanins = 1; d->fanins_inline[0] = id + value; break;
        case F_FANIN_ABS: d->n_fanins = 1; d->fanins_inline[0] = value; break;
        case F_INLINE_STRAY: d->fanins_inline[2] = value; break;
        case F_SLOT_FANINS:
                d->n_fanins = 4;
                for (unsigned i = 0; i < 3; i++)
                        fanins[i] = id - 1;
                fanins[3] = id + value;
                break;
        case F_T_OFFSET: p->tensors[ix].offset = value; break;
        case F_T_OFFSET_ADD: p->tensors[ix].offset += value; break;
        case F_T_LENGTH: p->tensors[ix].length = value; break;
        case F_T_DIRECTION: p->tensors[ix].direction = (uint32_t)value; break;
        case F_T_RESERVED: p->tensors[ix].reserved = (uint32_t)value; break;
        case F_T_OVERLAP: p->tensors[ix].offset = p->tensors[0].offset + value; break;
        case F_SCALAR: p->scalars[ix] |= value; break;
        case F_PREDICATE: d->flags |= HBG_TASK_HAS_PREDICATE; d->predicate_offset = value; break;
        case F_PREDICATE_AT_HEAP_END:
                d->flags |= HBG_TASK_HAS_PREDICATE;
                d->predicate_offset = v->heap_size;
                break;
        case F_T_AT_HEAP_END: p->tensors[ix].offset = v->heap_size - p->tensors[ix].length + 128; break;
        case F_CYCLE:
                d->n_fanins = 1;
                d->fanins_inline[0] = partner;
                v->descs[partner & (v->D - 1)].n_fanins = 1;
                v->descs[partner & (v->D - 1)].fanins_inline[0] = id;
                break;
        }
}

/* One forged graph: written by the library, forged before it is
 * published (hbg_graph_submit publishes), then waited for. 0, or -1 with
 * "FAIL" said. */
static int forged_graph(int sock, struct victim *v, const struct mutation *m, hbg_tensor t1, hbg_tensor t2) {
        hbg_task a = forged_task(m, t1, t2), b = fill_task(t2, 4.0f);
        uint64_t id = 0, partner = 0, graph = 0, task = 0;
        int err = hbg_graph_add(v->c, &a, &id);
        if (err == 0 && m->field == F_CYCLE)
                err = hbg_graph_add(v->c, &b, &partner);
        if (err < 0) {
                kid_say(sock, "FAIL %s: hbg_graph_add: %s [%s]", m->what, hbg_strerror(err), hbg_last_error(v->c));
                return -1;
        }
        mutate(v, m, id, partner);
        err = hbg_graph_submit(v->c, &graph);
        if (err == 0)
                err = hbg_graph_wait(v->c, graph, WAIT_MS);
        const char *msg = hbg_last_error(v->c);
        int st = hbg_graph_status(v->c, graph, &task);
        if (err != m->code || st != m->code || task != id || !msg[0]) {
                kid_say(sock, "FAIL %s: graph %" PRIu64 " came to %d (%s), status %d, first failing task %" PRIu64
                        "; expected %d (%s) at task %" PRIu64 " with a message [%s]", m->what, graph, err,
                        strerror(-err), st, task, m->code, strerror(-m->code), id, msg);
                return -1;
        }
        /* A kernel's message names the kernel, and so does the graph's
         * error (a module kernel's name too). */
        hbg_graph_error_info e = HBG_GRAPH_ERROR_INFO_INIT;
        const char *colon = strchr(m->why, ':');
        if (m->kernel && colon &&
            (hbg_graph_error(v->c, graph, &e) != 0 || strncmp(e.kernel, m->why, (size_t)(colon - m->why)) != 0 ||
             e.kernel[colon - m->why] || !strstr(e.message, m->why))) {
                kid_say(sock, "FAIL %s: the graph's error names kernel \"%s\" [%s]; expected \"%.*s\" [%s]", m->what,
                        e.kernel ? e.kernel : "(null)", e.message, (int)(colon - m->why), m->why, m->why);
                return -1;
        }
        char lb[200], lr[300];
        snprintf(lb, sizeof(lb), "%s: graph %" PRIu64 " ", v->name, graph);
        /* The reason, then the numbers behind it where it has some. */
        snprintf(lr, sizeof(lr), "failed: %s at task %" PRIu64 " (%s", hbg_strerror(m->code), id, m->why);
        expect_log(sock, lb, lr);
        return 0;
}

/* A good relu_f32 graph x -> y: 0, or -1 with "FAIL" said. */
static int relu_graph(int sock, struct victim *v, hbg_tensor x, hbg_tensor y, const char *after) {
        float *in = hbg_tensor_data(v->c, x);
        size_t n = x.bytes / sizeof(float);
        for (size_t i = 0; i < n; i++)
                in[i] = (float)i - (float)(n / 2);
        hbg_task t = forged_task(&(struct mutation){ .kernel = "relu_f32" }, x, y);
        uint64_t graph;
        int err = hbg_graph_add(v->c, &t, NULL);
        if (err == 0)
                err = hbg_graph_submit(v->c, &graph);
        if (err == 0)
                err = hbg_graph_wait(v->c, graph, WAIT_MS);
        const float *out = hbg_tensor_data(v->c, y);
        for (size_t i = 0; err == 0 && i < n; i++)
                if (out[i] != (in[i] > 0.0f ? in[i] : 0.0f))
                        err = -EILSEQ;
        if (err == 0)
                return 0;
        kid_say(sock, "FAIL after \"%s\": a good relu_f32 graph of the same session: %d [%s]", after, err,
                hbg_last_error(v->c));
        return -1;
}

/* tm_count's out[0] after one good task: how many times its check() ran
 * in hbgd, this task's included. 0, or -1 with "FAIL" said. */
static int module_checks(int sock, struct victim *v, hbg_tensor in, hbg_tensor out, float *ret) {
        hbg_task t = forged_task(&(struct mutation){ .kernel = "tm_count" }, in, out);
        uint64_t graph;
        int err = hbg_graph_add(v->c, &t, NULL);
        if (err == 0)
                err = hbg_graph_submit(v->c, &graph);
        if (err == 0)
                err = hbg_graph_wait(v->c, graph, WAIT_MS);
        if (err < 0) {
                kid_say(sock, "FAIL a good tm_count graph: %d [%s]", err, hbg_last_error(v->c));
                return -1;
        }
        *ret = ((const float *)hbg_tensor_data(v->c, out))[0];
        return 0;
}

static int forged_fn(int sock, void *arg) {
        struct victim v;
        if (attacker_start(sock, arg, &v) < 0)
                return 1;
        const struct target *tg = arg;
        const struct mutation_set *set = tg->extra ? tg->extra : &builtin_mutations;
        bool modules = set != &builtin_mutations;
        if (modules && (hbg_client_kernel_id(v.c, "relu_f32") != (int)MOD_RELU ||
                        hbg_client_kernel_id(v.c, "tm_count") != (int)MOD_TM_COUNT)) {
                kid_say(sock, "FAIL hbgd's module kernels have other ids: relu_f32 %d, tm_count %d",
                        hbg_client_kernel_id(v.c, "relu_f32"), hbg_client_kernel_id(v.c, "tm_count"));
                return 1;
        }
        unsigned sessions = 1;
        for (size_t i = 0; i < set->n; i++) {
                hbg_tensor t[3];
                if (i % MUTATIONS_PER_SESSION == 0 && i > 0) {
                        victim_close(&v);
                        if (victim_open(&v, sock, tg->path) < 0)
                                return 1;
                        sessions++;
                }
                for (unsigned k = 0; k < 3; k++)
                        if (hbg_tensor_alloc(v.c, 256, &t[k]) < 0) {
                                kid_say(sock, "FAIL hbg_tensor_alloc: %s", hbg_last_error(v.c));
                                return 1;
                        }
                if (forged_graph(sock, &v, &set->m[i], t[0], t[1]) < 0)
                        return 1;
                /* Only that graph failed: the session goes on. */
                struct tally tl = { 0 };
                if (fill_graph(&v, t[2], 5.0f, &tl) != 0 || tl.corrupted) {
                        kid_say(sock, "FAIL after \"%s\": a good graph of the same session: %d [%s]",
                                set->m[i].what, tl.first_code, tl.first_msg);
                        return 1;
                }
                if (modules && relu_graph(sock, &v, t[0], t[1], set->m[i].what) < 0)
                        return 1;
        }
        kid_say(sock, "NOTE %zu forged descriptors in %u sessions: each failed its graph with the expected code "
                "at the forged task, the good graph after it succeeded", set->n, sessions);
        if (modules) {
                /* No forged task reached tm_count's check(): only the good
                 * one's call is counted. */
                hbg_tensor t[2];
                float calls = -1.0f;
                if (hbg_tensor_alloc(v.c, 256, &t[0]) < 0 || hbg_tensor_alloc(v.c, 256, &t[1]) < 0 ||
                    module_checks(sock, &v, t[0], t[1], &calls) < 0)
                        return 1;
                if (calls != 1.0f) {
                        kid_say(sock, "FAIL tm_count's check() ran %g times for one good task: forged tasks reached "
                                "it", (double)calls);
                        return 1;
                }
                kid_say(sock, "NOTE tm_count's check() ran once, for the good task only");
        }
        return attacker_end(sock, &v, 0);
}

START_TEST(forged_descriptors) {
        run_attack("forged_descriptors", forged_fn);
}
END_TEST

/* The module's file copied into dir (a fresh 0755 directory: the build
 * tree may lie under one others may write, which hbgd refuses). */
static void copy_module(const char *src, const char *dir, const char *name, char *ret, size_t len) {
        snprintf(ret, len, "%s/%s", dir, name);
        module_copy(src, ret);
}

START_TEST(forged_module_descriptors) {
        char dir[] = "/tmp/hbg-e2e-kmod-XXXXXX", a[128], b[128], conf[512], cmd[128];
        ck_assert_ptr_nonnull(mkdtemp(dir));
        ck_assert_int_eq(chmod(dir, 0755), 0);
        copy_module(HBG_TEST_EXAMPLE_MODULE, dir, "hbg-nn.so", a, sizeof(a));
        copy_module(HBG_TEST_MODULES_DIR "/counting.so", dir, "counting.so", b, sizeof(b));
        snprintf(conf, sizeof(conf), STALL_CONF "\n[kernels]\nmodules = %s %s\n", a, b);
        run_attack_conf("forged_module_descriptors", forged_fn, conf, &module_set);
        snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
        if (system(cmd) != 0)
                fprintf(stderr, "cannot remove %s\n", dir);
}
END_TEST

/* ------------------------------------------------------------ e. flipping published descriptors */

/* For arg ms: random bits flipped in the descriptors, fanins and arguments of the
 * last ids published (those hbgd is copying), now and then anywhere. */
static void flip_published(const void *ctx, uint64_t ms) {
        const struct victim *v = ctx;
        uint64_t s = kid_seed() | 1;
        long long end = daemon_now_ms() + (long long)ms;
        for (unsigned i = 0; (i & 1023) || daemon_now_ms() < end; i++) {
                uint64_t sub = atomic_load_explicit(&v->sh->submitted, memory_order_relaxed);
                uint64_t r = xorshift(&s);
                uint64_t id = i % 8 == 0 ? r >> 20 : sub - 1 - (r >> 20) % 8;
                volatile uint8_t *bytes;
                size_t size;
                if (r & 1) {
                        bytes = (volatile uint8_t *)(void *)&v->descs[id & (v->D - 1)];
                        size = sizeof(struct hbg_task_desc);
                } else if (r & 2) {
                        bytes = (volatile uint8_t *)(void *)&v->fanins[id & (v->D - 1)];
                        size = sizeof(struct hbg_task_fanins);
                } else {
                        bytes = (volatile uint8_t *)(void *)&v->args[id & (v->D - 1)];
                        size = sizeof(struct hbg_task_args);
                }
                bytes[(r >> 8) % size] ^= (uint8_t)(1u << ((r >> 4) % 8));
                if ((i & 1023) == 1023)
                        sched_yield();
        }
}

static int flip_fn(int sock, void *arg) {
        struct victim v;
        if (attacker_start(sock, arg, &v) < 0)
                return 1;
        hbg_tensor t, r[3];
        int err = hbg_tensor_alloc(v.c, 4096, &t);
        for (unsigned i = 0; err == 0 && i < 3; i++)
                err = hbg_tensor_alloc(v.c, 1024, &r[i]);
        /* A recorded graph too: its launch records are descriptors. */
        uint32_t rec = 0;
        if (err == 0)
                err = hbg_graph_record_begin(v.c);
        for (unsigned i = 0; err == 0 && i < 3; i++) {
                hbg_task task = fill_task(r[i], 2.0f);
                err = hbg_graph_add(v.c, &task, NULL);
        }
        if (err == 0)
                err = hbg_graph_record_end(v.c, &rec);
        if (err < 0) {
                kid_say(sock, "FAIL setting up: %s [%s]", hbg_strerror(err), hbg_last_error(v.c));
                return 1;
        }
        struct tally plain = { 0 }, launched = { 0 };
        pid_t w = fork_writer(flip_published, &v, 10000 / scale());
        long long deadline = daemon_now_ms() + WAIT_MS;
        for (unsigned g = 0; writer_running(w) && daemon_now_ms() < deadline; g++) {
                if (plain.gone || launched.gone) {
                        sleep_us(10000);
                        continue;
                }
                if (g % 2) {
                        fill_graph(&v, t, (float)(g % 1000), &plain);
                        continue;
                }
                uint64_t graph;
                err = hbg_graph_launch(v.c, rec, &graph);
                if (err == 0)
                        err = hbg_graph_wait(v.c, graph, WAIT_GRAPH_MS);
                tally_note(&launched, v.c, err);
        }
        if (writer_running(w))
                kill(w, SIGKILL);
        waitpid(w, NULL, 0);
        tally_say(sock, &plain, "plain graphs while published descriptors were flipped");
        tally_say(sock, &launched, "launches while published descriptors were flipped");
        if (plain.failed) {
                char a[160], b[160];
                snprintf(a, sizeof(a), "%s: graph ", v.name);
                snprintf(b, sizeof(b), "failed: ");
                expect_log(sock, a, b);
        }
        return attacker_end(sock, &v, 0);
}

START_TEST(flip_published_descriptors) {
        run_attack("flip_published_descriptors", flip_fn);
}
END_TEST

static Suite *suite(void) {
        Suite *s = suite_create("e2e_shm_attack");
        TCase *tc = tcase_create("shm");
        tcase_set_timeout(tc, 300);
        tcase_add_test(tc, scribble_submission_region);
        tcase_add_test(tc, forged_descriptors);
        tcase_add_test(tc, forged_module_descriptors);
        tcase_add_test(tc, flip_published_descriptors);
        suite_add_tcase(s, tc);
        return s;
}

const struct check_main check_main = {
        .suite = suite,
        .ignore_sigpipe = true,
        .setup = daemon_util_setup,
        .teardown = daemon_util_cleanup,
};

