/* SPDX-License-Identifier: MIT */
/*
 * Failsafe min-heap of task ids whose completion stamp could not be
 * published yet (docs/RUNTIME_LOGIC.md §6). One per completing thread and
 * ring; capacity fixed at creation, so pushing never allocates.
 */
#pragma once

#include <stdbool.h>
#include <stdint.h>

struct hbg_failsafe_heap {
        uint64_t *ids;
        uint32_t len;
        uint32_t capacity;
};

/* Allocate storage for `capacity` ids (0 is allowed: every push then
 * reports -ENOSPC). Returns 0 or -ENOMEM. */
int failsafe_heap_init(struct hbg_failsafe_heap *h, uint32_t capacity);
void failsafe_heap_destroy(struct hbg_failsafe_heap *h);

/* Returns 0, or -ENOSPC when full (the id is not stored). */
int failsafe_heap_push(struct hbg_failsafe_heap *h, uint64_t id);
/* Smallest id, false when empty. */
bool failsafe_heap_peek(const struct hbg_failsafe_heap *h, uint64_t *ret_id);
/* Remove the smallest id; false when empty. */
bool failsafe_heap_pop(struct hbg_failsafe_heap *h, uint64_t *ret_id);

static inline uint32_t failsafe_heap_len(const struct hbg_failsafe_heap *h) {
        return h->len;
}
