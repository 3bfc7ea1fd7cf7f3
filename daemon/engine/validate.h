/* SPDX-License-Identifier: MIT */
/* validate.c: checking a copied descriptor (hostile input). */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct hbg_ring;
struct task_slot;
struct hbg_task_desc;
struct hbg_task_args;

/* Validate a copied descriptor into s, copying the parts of its fanins
 * (HBG_MAX_FANINS of room) and arguments that its counts cover; fanins
 * must lie in [fanin_lo, id). 0 or a negative errno with *why (static). */
int validate_task(struct hbg_ring *r, struct task_slot *s, const struct hbg_task_desc *d, const uint64_t *fanins,
                  const struct hbg_task_args *args, uint64_t id, uint64_t fanin_lo, const char **why);

/* The numbers behind s's refusal (err, why from validate_task(), the
 * slot not yet reused) into buf: "why: m*k = 64*64 = 4096 elements, A has
 * 1024", as a dry run says it. false, buf unspecified: the check gives
 * none (or the slot's arguments are not the task's). */
bool validate_explain(const struct hbg_ring *r, const struct task_slot *s, int err, const char *why, char *buf,
                      size_t len);
