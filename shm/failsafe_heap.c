/* SPDX-License-Identifier: MIT */
#include "shm/failsafe_heap.h"

#include <errno.h>
#include <stdlib.h>

int failsafe_heap_init(struct hbg_failsafe_heap *h, uint32_t capacity) {
        *h = (struct hbg_failsafe_heap){ .capacity = capacity };
        if (capacity == 0)
                return 0;
        /* Entries at len and beyond are never read: no zeroing (a calloc
         * of memory malloc reused costs a memset of D ids per thread at
         * every session start). */
        h->ids = malloc((size_t)capacity * sizeof(*h->ids));
        if (!h->ids) {
                h->capacity = 0;
                return -ENOMEM;
        }
        return 0;
}

void failsafe_heap_destroy(struct hbg_failsafe_heap *h) {
        if (!h)
                return;
        free(h->ids);
        *h = (struct hbg_failsafe_heap){ 0 };
}

int failsafe_heap_push(struct hbg_failsafe_heap *h, uint64_t id) {
        if (h->len >= h->capacity)
                return -ENOSPC;
        uint32_t i = h->len++;
        while (i > 0) {
                uint32_t parent = (i - 1) / 2;
                if (h->ids[parent] <= id)
                        break;
                h->ids[i] = h->ids[parent];
                i = parent;
        }
        h->ids[i] = id;
        return 0;
}

bool failsafe_heap_peek(const struct hbg_failsafe_heap *h, uint64_t *ret_id) {
        if (h->len == 0)
                return false;
        *ret_id = h->ids[0];
        return true;
}

bool failsafe_heap_pop(struct hbg_failsafe_heap *h, uint64_t *ret_id) {
        if (h->len == 0)
                return false;
        *ret_id = h->ids[0];
        uint64_t last = h->ids[--h->len];
        uint32_t i = 0;
        for (;;) {
                uint32_t child = 2 * i + 1;
                if (child >= h->len)
                        break;
                if (child + 1 < h->len && h->ids[child + 1] < h->ids[child])
                        child++;
                if (last <= h->ids[child])
                        break;
                h->ids[i] = h->ids[child];
                i = child;
        }
        if (h->len > 0)
                h->ids[i] = last;
        return true;
}
