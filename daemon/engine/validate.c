/* SPDX-License-Identifier: MIT */
/*
 * A task's validation (RUNTIME_LOGIC.md §10.1, §14): the checks a copied
 * descriptor and the fanins and arguments its counts cover must pass, the copy
 * into the daemon's slot, and the work bound per task (§9.5), the checks
 * a run of tasks alike shares made once (struct validate_memo). Used for
 * submitted tasks and, once, for recorded ones.
 */
#include "daemon/engine/validate.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "daemon/engine/engine_state.h"
#include "daemon/engine/ring.h"
#include "daemon/engine/engine_recorded.h"

/* What a task is validated against: its ring's heap and the engine's
 * limit (a ring's fixed geometry and config, or a validate-only
 * request's). */
struct task_rules {
        uint64_t heap_size;
        uint64_t max_task_cost;
};

/* Where a task's fanins beyond the inline ones (HBG_MAX_FANINS of room)
 * and its arguments are: the submission region's arrays, or a recorded
 * task's payload. Read only as far as the descriptor's counts cover. */
struct task_parts {
        const uint64_t *fanins;
        const struct hbg_task_args *args;
};

/* Active lanes of a (checked) lane mask. */
static const uint8_t lanes_of_mask[HBG_LANE_MASK_ALL + 1] = { 0, 1, 1, 2, 1, 2, 2, 3 };

/* A refused task's kernel (§12.2), when no lane's own check named one:
 * the first active lane's, if it is one. Only on the failure path: a task
 * that passes gets its first lane's kernel in check_fields()'s lane pass. */
static void name_first_kernel(struct task_slot *s, const struct hbg_task_desc *d) {
        for (unsigned lanes = d->lane_mask & HBG_LANE_MASK_ALL; lanes; lanes &= lanes - 1) {
                unsigned lane = (unsigned)__builtin_ctz(lanes);
                if (kernel_lookup(d->kernel[lane])) {
                        s->report_kernel = d->kernel[lane];
                        return;
                }
        }
}

#define STEP static inline __attribute__((always_inline)) int

/* The descriptor's own fields: its id, zero reserved fields, known flags
 * and lanes, counts within the limits, unused inline fanins zero (§8).
 * kind_passed: its kind bytes are a passed task's (struct validate_memo),
 * so the checks that read only them are known to pass and are left out;
 * the rest keep their order. */
STEP check_header(const struct hbg_task_desc *d, uint64_t id, bool kind_passed, const char **why) {
        if (d->id != id) {
                *why = "descriptor id does not match its slot's id";
                return -EPROTO;
        }
        uint8_t reserved0 = kind_passed ? 0 : d->reserved0[0] | d->reserved0[1] | d->reserved0[2];
        if (d->reserved2 | reserved0) {
                *why = "descriptor reserved field not zero";
                return -EPROTO;
        }
        if (!kind_passed && (d->flags & ~HBG_TASK_FLAGS_ALL)) {
                *why = "unknown task flag";
                return -EINVAL;
        }
        if (!kind_passed && (d->lane_mask & ~HBG_LANE_MASK_ALL)) {
                *why = "lane mask has bits beyond the three lanes";
                return -EINVAL;
        }
        if (!kind_passed && (d->block_num < 1 || d->block_num > HBG_MAX_BLOCKS)) {
                *why = "block_num out of range (1..4096)";
                return -ERANGE;
        }
        if (d->n_fanins > HBG_MAX_FANINS ||
            (!kind_passed && (d->n_tensors > HBG_MAX_TENSOR_ARGS || d->n_scalars > HBG_MAX_SCALAR_ARGS))) {
                *why = "too many fanins, tensors or scalars";
                return -E2BIG;
        }
        /* Fanins: inline in the (copied) descriptor, the unused inline slots
         * zero, or all in the slot's fanins with the inline ones zero (§8). */
        unsigned inline_used = d->n_fanins <= HBG_INLINE_FANINS ? d->n_fanins : 0;
        uint64_t unused = 0;
        for (unsigned i = 0; i < HBG_INLINE_FANINS; i++)
                unused |= i >= inline_used ? d->fanins_inline[i] : 0;
        if (unused) {
                *why = "inline fanin slot beyond the task's fanins not zero";
                return -EPROTO;
        }
        return 0;
}

/* Copy only the fanins and arguments the (validated) counts cover, once;
 * everything after reads the copies. The fanins must be earlier tasks
 * of this ring: [fanin_lo, id). */
STEP copy_parts(struct task_slot *s, const struct hbg_task_desc *d, const struct task_parts *shared,
                uint64_t id, uint64_t fanin_lo, const char **why) {
        _Static_assert(sizeof(s->fanins) >= sizeof(d->fanins_inline), "the inline fanins fit the slot's");
        if (d->n_fanins <= HBG_INLINE_FANINS) /* all of them, in fixed moves: the unused are zero (checked) */
                memcpy(s->fanins, d->fanins_inline, sizeof(d->fanins_inline));
        else
                memcpy(s->fanins, shared->fanins, d->n_fanins * sizeof(s->fanins[0]));
        if (d->n_tensors)
                memcpy(s->args.tensors, shared->args->tensors, d->n_tensors * sizeof(s->args.tensors[0]));
        if (d->n_scalars)
                memcpy(s->args.scalars, shared->args->scalars, d->n_scalars * sizeof(s->args.scalars[0]));
        for (unsigned i = 0; i < d->n_fanins; i++) {
                uint64_t f = s->fanins[i];
                if (f >= id || f < fanin_lo) {
                        *why = "fanin is not an earlier task of this ring";
                        return -EINVAL;
                }
        }
        s->n_fanins = d->n_fanins;
        return 0;
}

/* What every kind of task has: its kind flags (not both host kinds), its
 * predicate inside the heap, its lanes and blocks, into the slot.
 * kind_passed: as check_header()'s. */
STEP take_common(const struct task_rules *rules, struct task_slot *s, const struct hbg_task_desc *d,
                 bool kind_passed, const char **why) {
        if (!kind_passed && (d->flags & HBG_TASK_HOST_INLINE) && (d->flags & HBG_TASK_EXTERNAL)) {
                *why = "a task cannot be both host-inline and a host task";
                return -EINVAL;
        }
        if (d->flags & HBG_TASK_HAS_PREDICATE) {
                uint64_t end;
                if (d->predicate_offset % 4 != 0 ||
                    __builtin_add_overflow(d->predicate_offset, 4, &end) || end > rules->heap_size) {
                        *why = "predicate element outside the heap or misaligned";
                        return -ERANGE;
                }
        }
        s->predicate_offset = d->predicate_offset;
        s->flags = d->flags;
        s->lane_mask = d->lane_mask;
        s->lanes = lanes_of_mask[d->lane_mask & HBG_LANE_MASK_ALL]; /* (checked, masked anyway) */
        s->block_num = d->block_num;
        return 0;
}

/* A dummy, host-inline or host task: no lanes, kernels or arguments. */
STEP take_laneless(struct task_slot *s, const struct hbg_task_desc *d, const char **why) {
        if (d->lane_mask != 0 || d->kernel[0] || d->kernel[1] || d->kernel[2]) {
                *why = "dummy, host-inline and host tasks have no lanes or kernels";
                return -EINVAL;
        }
        if (d->n_tensors || d->n_scalars) {
                *why = "dummy, host-inline and host tasks take no arguments";
                return -EINVAL;
        }
        s->kind = (d->flags & HBG_TASK_HOST_INLINE) ? KIND_INLINE
                  : (d->flags & HBG_TASK_EXTERNAL) ? KIND_EXTERNAL
                                                   : KIND_DUMMY;
        s->shape = SHAPE_DUMMY;
        /* Nothing of the slot's previous occupant left in what the memo
         * hands on (take_alike() writes the same). */
        s->args.n_tensors = s->args.n_scalars = 0;
        s->ktime_kernel = 0;
        return 0;
}

/* The lanes a kernel task's checks look at, lowest first: the active
 * ones, and the inactive ones given a kernel (refused). */
static inline unsigned lanes_to_check(const struct hbg_task_desc *d) {
        unsigned given = (d->kernel[0] != HBG_KERNEL_NONE) | (d->kernel[1] != HBG_KERNEL_NONE) << 1 |
                         (d->kernel[2] != HBG_KERNEL_NONE) << 2;
        return (d->lane_mask | given) & HBG_LANE_MASK_ALL;
}

/* Lane `lane` of lanes_to_check(d): refused if inactive (a kernel
 * given for it), else its kernel looked up, in *ret. */
static inline int lane_kernel(const struct hbg_task_desc *d, unsigned lane, const struct kernel_info **ret,
                              const char **why) {
        if (!(d->lane_mask & (1u << lane))) {
                *why = "kernel given for an inactive lane";
                return -EINVAL;
        }
        *ret = kernel_lookup(d->kernel[lane]);
        if (!*ret) {
                *why = "unknown kernel";
                return -ENOENT;
        }
        return 0;
}

/* The message of a task naming a kernel that does not split beside
 * another kernel (§9.1). */
static const char unsplit_beside_another[] = "a kernel that does not split must be its task's only kernel";

/*
 * A kernel task whose first active lane's kernel k does not split (§9.1),
 * from take_lanes() once that lane passed the look-up: one part, 0 of 1,
 * on that lane, whatever block_num and the other lanes say, decided here
 * once so that dispatch and the completion count read the slot alone. Its
 * other lanes must name k too and run nothing; k is checked and its work
 * counted once, as that one part. Out of line: the common task's path
 * pays one test of k's signature for it. The rules by value: their
 * address taken, the validating loop would keep them on its stack for
 * every task.
 */
static __attribute__((cold, noinline)) int take_unsplit(uint64_t heap_size, uint64_t max_task_cost,
                                                        struct task_slot *s, const struct hbg_task_desc *d,
                                                        const struct kernel_info *k, const char **why) {
        s->block_num = 1;
        s->lanes = 1;
        unsigned lanes = lanes_to_check(d); /* the lowest is k's */
        s->kernel[__builtin_ctz(lanes)] = k;
        for (lanes &= lanes - 1; lanes; lanes &= lanes - 1) {
                unsigned lane = (unsigned)__builtin_ctz(lanes);
                const struct kernel_info *other;
                int err = lane_kernel(d, lane, &other, why);
                if (err < 0)
                        return err;
                if (other != k) {
                        s->report_kernel = d->kernel[lane];
                        *why = unsplit_beside_another;
                        return -EINVAL;
                }
                s->kernel[lane] = k;
        }
        int err = kernel_validate_entry(k, &s->args, heap_size, why);
        if (err < 0)
                return err;
        if (max_task_cost && kernel_cost(k, &s->args, 1) > max_task_cost) {
                *why = kernel_cost_message(k);
                return -E2BIG;
        }
        return 0;
}

/* The work a kernel task makes a thread do, summed over its lanes and
 * bounded per task (§9.5): the parts each lane's share is of, the sum, the
 * limit, and the first lane's kernel whose share took the sum past it. */
struct work_sum {
        uint32_t parts;
        uint64_t cost, limit;
        const struct kernel_info *over;
};

static inline struct work_sum work_sum_start(const struct task_rules *rules, const struct task_slot *s) {
        return (struct work_sum){ .parts = (uint32_t)s->block_num * s->lanes,
                                  .limit = rules->max_task_cost ? rules->max_task_cost : UINT64_MAX /* 0: none */ };
}

/* Lane `lane`'s kernel k on the task's (copied) arguments: k's checks,
 * then its share of the work added to w. */
STEP lane_args(const struct task_rules *rules, struct task_slot *s, const struct hbg_task_desc *d, unsigned lane,
               const struct kernel_info *k, struct work_sum *w, const char **why) {
        int err = kernel_validate_entry(k, &s->args, rules->heap_size, why);
        if (err < 0) {
                s->report_kernel = d->kernel[lane];
                return err;
        }
        /* Each lane runs its kernel for its share of the parts:
         * block_num of block_num * lanes (§9.1). */
        uint64_t c = kernel_cost(k, &s->args, w->parts);
        if (s->lanes > 1)
                c /= s->lanes;
        w->cost = __builtin_add_overflow(w->cost, c, &w->cost) ? UINT64_MAX : w->cost;
        if (w->cost > w->limit && !w->over)
                w->over = k;
        return 0;
}

/* Once every lane passed: the work refused if it passed the limit (a
 * lane's own fault is said first). */
STEP work_within_limit(struct task_slot *s, const struct work_sum *w, const char **why) {
        if (w->over) {
                s->report_kernel = w->over->sig->id;
                *why = kernel_cost_message(w->over);
                return -E2BIG;
        }
        return 0;
}

/* A kernel task: each lane's checks, and the work this task makes a
 * thread do, bounded per task so that no session can hold a thread for
 * long (§9.5, docs/SECURITY.md): in one pass, the work refused only once
 * every lane passed. */
STEP take_lanes(const struct task_rules *rules, struct task_slot *s, const struct hbg_task_desc *d,
                const char **why) {
        s->kind = KIND_KERNEL;
        s->shape = s->lanes > 1 ? SHAPE_MIX : (d->lane_mask & 1u) ? SHAPE_AIC : SHAPE_AIV;
        s->args.n_tensors = d->n_tensors;
        s->args.n_scalars = d->n_scalars;
        struct work_sum w = work_sum_start(rules, s);
        /* Lanes in order: an active one's checks, an inactive one given a
         * kernel refused; the others need no look. Each active lane's kernel
         * is looked up once, here; the first one's names the task (its
         * failures, its times' kernel in ktime.h) and says whether the
         * task splits (§9.1). */
        for (unsigned lanes = lanes_to_check(d); lanes; lanes &= lanes - 1) {
                unsigned lane = (unsigned)__builtin_ctz(lanes);
                const struct kernel_info *k;
                int err = lane_kernel(d, lane, &k, why);
                if (err < 0)
                        return err;
                if (s->report_kernel == HBG_KERNEL_NONE) {
                        s->report_kernel = d->kernel[lane];
                        s->ktime_kernel = (uint16_t)k->index;
                        if (__builtin_expect(!k->sig->splittable, 0))
                                return take_unsplit(rules->heap_size, rules->max_task_cost, s, d, k, why);
                } else if (__builtin_expect(!k->sig->splittable, 0)) {
                        /* A later lane's (the first one's splits). */
                        s->report_kernel = d->kernel[lane];
                        *why = unsplit_beside_another;
                        return -EINVAL;
                }
                s->kernel[lane] = k;
                err = lane_args(rules, s, d, lane, k, &w, why);
                if (err < 0)
                        return err;
        }
        return work_within_limit(s, &w, why);
}

/* A descriptor's kind bytes (kernels, lanes, flags, blocks, counts and
 * reserved bytes: 16..31), n_fanins zeroed: what memo_alike() compares. */
#define KIND_FIRST offsetof(struct hbg_task_desc, kernel)
_Static_assert(offsetof(struct hbg_task_desc, predicate_offset) - KIND_FIRST == sizeof(((struct validate_memo *)0)->key),
               "the kind bytes are the sixteen before the predicate");

static inline void kind_key(const struct hbg_task_desc *d, uint64_t key[2]) {
        unsigned char b[sizeof(((struct validate_memo *)0)->key)];
        memcpy(b, (const unsigned char *)d + KIND_FIRST, sizeof(b));
        b[offsetof(struct hbg_task_desc, n_fanins) - KIND_FIRST] = 0;
        memcpy(key, b, sizeof(b));
}

/* Whether d's kind bytes are those of the task memo kept. */
static inline bool memo_alike(const struct validate_memo *memo, const struct hbg_task_desc *d) {
        uint64_t key[2];
        kind_key(d, key);
        return memo->kept && ((key[0] ^ memo->key[0]) | (key[1] ^ memo->key[1])) == 0;
}

/* Task s passed: keep what its kind bytes decided. A kernel task's
 * arguments are checked on every lane of its mask, or on its first lane
 * alone when its kernel does not split (take_unsplit(): one lane left). */
static void memo_keep(struct validate_memo *memo, const struct hbg_task_desc *d, const struct task_slot *s) {
        kind_key(d, memo->key); /* again: this path is taken once per change of kind */
        memo->kept = true;
        memo->kind = s->kind;
        memo->shape = s->shape;
        memo->lanes = s->lanes;
        memo->block_num = s->block_num;
        memo->report_kernel = s->report_kernel;
        memo->ktime_kernel = s->ktime_kernel;
        memcpy(memo->kernel, s->kernel, sizeof(memo->kernel));
        unsigned mask = s->kind == KIND_KERNEL ? s->lane_mask & HBG_LANE_MASK_ALL : 0;
        memo->arg_lanes = (uint8_t)(s->lanes == lanes_of_mask[mask] ? mask : mask & -mask);
}

/* A task alike the kept one: the slot's fields its kind bytes decide,
 * then what its own arguments decide, lane by lane as take_lanes() and
 * take_unsplit() check them. */
STEP take_alike(const struct task_rules *rules, struct task_slot *s, const struct hbg_task_desc *d,
                const struct validate_memo *memo, const char **why) {
        s->kind = memo->kind;
        s->shape = memo->shape;
        s->lanes = memo->lanes;
        s->block_num = memo->block_num;
        s->args.n_tensors = d->n_tensors;
        s->args.n_scalars = d->n_scalars;
        s->report_kernel = memo->report_kernel;
        s->ktime_kernel = memo->ktime_kernel;
        memcpy(s->kernel, memo->kernel, sizeof(s->kernel));
        struct work_sum w = work_sum_start(rules, s);
        for (unsigned lanes = memo->arg_lanes; lanes; lanes &= lanes - 1) {
                unsigned lane = (unsigned)__builtin_ctz(lanes);
                int err = lane_args(rules, s, d, lane, s->kernel[lane], &w, why);
                if (err < 0)
                        return err;
        }
        return work_within_limit(s, &w, why);
}

/* The task's checks in order, the slot filled as they pass. With a
 * memo (NULL: none), a task whose kind bytes are the last passed task's
 * skips the checks and look-ups that read only them: they passed for
 * those very bytes. What it does not skip keeps its order, so a task
 * is refused with the same error and reason either way. */
STEP check_fields(const struct task_rules *rules, struct task_slot *s, const struct hbg_task_desc *d,
                  const struct task_parts *shared, uint64_t id, uint64_t fanin_lo, struct validate_memo *memo,
                  const char **why) {
        /* No kernels in the slot until its lane's checks (a failure must
         * not name the slot's previous occupant's); the kernel a failure
         * names is set where a lane's check refuses the task, else by
         * check_task() (name_first_kernel()). */
        _Static_assert(HBG_LANES == 3, "the lanes below are three");
        s->kernel[0] = s->kernel[1] = s->kernel[2] = NULL;
        s->report_kernel = HBG_KERNEL_NONE;
        bool alike = memo && memo_alike(memo, d);
        int err = check_header(d, id, alike, why);
        if (err == 0)
                err = copy_parts(s, d, shared, id, fanin_lo, why);
        if (err == 0)
                err = take_common(rules, s, d, alike, why);
        if (err < 0)
                return err;
        if (alike)
                return take_alike(rules, s, d, memo, why);
        if (d->lane_mask == 0 || (d->flags & (HBG_TASK_HOST_INLINE | HBG_TASK_EXTERNAL)))
                err = take_laneless(s, d, why);
        else
                err = take_lanes(rules, s, d, why);
        if (err == 0 && memo)
                memo_keep(memo, d, s);
        return err;
}

#undef STEP

/* check_fields(), and the kernel a refused task names. Inline in its
 * callers' loops, whose arguments then stay in registers (a call kept
 * the rules and the parts on the stack: 20 instructions a task on chain,
 * 23 on fanin4). */
static inline __attribute__((always_inline)) int check_task(const struct task_rules *rules, struct task_slot *s,
                                                            const struct hbg_task_desc *d,
                                                            const struct task_parts *shared, uint64_t id,
                                                            uint64_t fanin_lo, struct validate_memo *memo,
                                                            const char **why) {
        int err = check_fields(rules, s, d, shared, id, fanin_lo, memo, why);
        if (__builtin_expect(err < 0, 0) && s->report_kernel == HBG_KERNEL_NONE)
                name_first_kernel(s, d);
        return err;
}

int validate_task(struct hbg_ring *r, struct task_slot *s, const struct hbg_task_desc *d, const uint64_t *fanins,
                  const struct hbg_task_args *args, uint64_t id, uint64_t fanin_lo, struct validate_memo *memo,
                  const char **why) {
        const struct task_rules rules = { r->g.heap_size, r->engine->cfg.max_task_cost };
        const struct task_parts shared = { fanins, args };
        return check_task(&rules, s, d, &shared, id, fanin_lo, memo, why);
}

void validate_claimed_run(struct hbg_ring *r, struct task_slot *const *slots, const struct hbg_task_desc *copies,
                  uint64_t first, unsigned n, struct validate_memo *memo) {
        const struct task_rules rules = { r->g.heap_size, r->engine->cfg.max_task_cost };
        for (unsigned i = 0; i < n; i++) {
                uint64_t id = first + i, slot = id & r->task_mask;
                const struct task_parts shared = { r->fanins[slot].ids, &r->args[slot] };
                struct task_slot *s = slots[i];
                const char *why = NULL;
                s->classify_err = check_task(&rules, s, &copies[i], &shared, id, r->first_id, memo, &why);
                s->classify_why = why;
        }
}

/* Task s failed check_task() with err and why: the message with its
 * numbers where a kernel's check gives them (kernel_explain()) or the
 * work limit refused it. Whether it has numbers. */
static bool explain_task(const struct task_rules *rules, const struct task_slot *s, int err, const char *why,
                         char *buf, size_t len) {
        const struct kernel_info *k = kernel_lookup(s->report_kernel);
        snprintf(buf, len, "%s", why ? why : "invalid task");
        if (!k || s->kind != KIND_KERNEL)
                return false;
        if (why == kernel_cost_message(k)) {
                uint32_t parts = (uint32_t)s->block_num * s->lanes;
                uint64_t cost = 0;
                for (unsigned lane = 0; lane < HBG_LANES; lane++)
                        if (s->kernel[lane]) {
                                uint64_t c = kernel_cost(s->kernel[lane], &s->args, parts) / s->lanes;
                                cost = __builtin_add_overflow(cost, c, &cost) ? UINT64_MAX : cost;
                                if (s->lanes == 1)
                                        break; /* one lane runs (a kernel that does not split) */
                        }
                snprintf(buf, len, "%s: %" PRIu64 " units, the limit is %" PRIu64, why, cost,
                         rules->max_task_cost);
                return true;
        }
        /* The slot's arguments are this task's only if its kernel's check
         * refused it: then the check, run again, says the same. */
        const char *again;
        if (kernel_validate(k, &s->args, rules->heap_size, &again) != err || again != why)
                return false;
        kernel_explain(k, &s->args, rules->heap_size, buf, len);
        return strcmp(buf, why) != 0;
}

bool validate_explain(const struct hbg_ring *r, const struct task_slot *s, int err, const char *why, char *buf,
                      size_t len) {
        const struct task_rules rules = { r->g.heap_size, r->engine->cfg.max_task_cost };
        return why && explain_task(&rules, s, err, why, buf, len);
}

int engine_validate(const struct hbg_engine *e, uint64_t heap_size, uint64_t first,
                    const struct hbg_recorded_task *tasks, uint32_t n, hbg_validate_report_fn report, void *userdata) {
        const struct task_rules rules = { heap_size, e->cfg.max_task_cost };
        struct task_slot *s = aligned_alloc(64, sizeof(*s));
        if (!s)
                return -ENOMEM;
        int bad = 0;
        char msg[HBG_VALIDATE_MESSAGE_MAX];
        struct validate_memo memo = { .kept = false };
        for (uint32_t i = 0; i < n; i++) {
                /* Copied first, as every task hbgd reads (§10.1). */
                struct hbg_recorded_task copy = tasks[i];
                const char *why = NULL;
                memset(s, 0, sizeof(*s));
                const struct task_parts parts = { copy.payload.fanins, &copy.payload.args };
                int err = check_task(&rules, s, &copy.desc, &parts, first + i + 1, 0, &memo, &why);
                if (err == 0)
                        continue;
                explain_task(&rules, s, err, why, msg, sizeof(msg));
                report(userdata, i, err, msg);
                bad++;
        }
        free(s);
        return bad;
}
