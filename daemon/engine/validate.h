/* SPDX-License-Identifier: MIT */
/* validate.c: checking a copied descriptor (hostile input). */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "shm/layout.h"

struct hbg_ring;
struct kernel_info;
struct task_slot;
struct hbg_task_desc;
struct hbg_task_args;

/* What a passed task's kind bytes decided (descriptor bytes 16..31:
 * kernels, lanes, flags, blocks, counts; validate.c), kept by its
 * validator for the next task of the same run: a run of tasks alike skips
 * the checks and look-ups that read only those bytes. One per validating
 * loop, on its stack, started with kept false; never shared. */
struct validate_memo {
        bool kept;
        uint8_t kind, shape, lanes;
        uint8_t arg_lanes; /* lanes whose kernel checks the arguments */
        uint16_t block_num, report_kernel, ktime_kernel;
        uint64_t key[2];
        const struct kernel_info *kernel[HBG_LANES];
};

/* Validate a copied descriptor into s, copying the parts of its fanins
 * (HBG_MAX_FANINS of room) and arguments that its counts cover; fanins
 * must lie in [fanin_lo, id). memo: the loop's (NULL: none), kept when
 * the task passes. 0 or a negative errno with *why (static). */
int validate_task(struct hbg_ring *r, struct task_slot *s, const struct hbg_task_desc *d, const uint64_t *fanins,
                  const struct hbg_task_args *args, uint64_t id, uint64_t fanin_lo, struct validate_memo *memo,
                  const char **why);

/* validate_task() for a run of n copied descriptors of ids first ..
 * first + n - 1 of ring r, copy i into slots[i] (classify_begin()'s),
 * their fanins and arguments from the ring's arrays; each verdict into
 * the slot's classify_err and classify_why. One call for the run: what
 * a call per task costs (its entry, its arguments) is paid once. */
void validate_claimed_run(struct hbg_ring *r, struct task_slot *const *slots, const struct hbg_task_desc *copies,
                  uint64_t first, unsigned n, struct validate_memo *memo);

/* The numbers behind s's refusal (err, why from validation, the
 * slot not yet reused) into buf: "why: m*k = 64*64 = 4096 elements, A has
 * 1024", as a dry run says it. false, buf unspecified: the check gives
 * none (or the slot's arguments are not the task's). */
bool validate_explain(const struct hbg_ring *r, const struct task_slot *s, int err, const char *why, char *buf,
                      size_t len);
