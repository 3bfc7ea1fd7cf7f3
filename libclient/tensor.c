/* SPDX-License-Identifier: MIT */
/* Tensors: the session heap's allocator and the tensor helpers. */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "libclient/client_private.h"

/* ---------------------------------------------------------------- tensors */

/* First fit over the gaps between allocations (sorted by offset). Nothing
 * is ever freed before hbg_disconnect(), so today this is a bump
 * allocator; the gaps matter once tensors can be freed. */
HBG_EXPORT int hbg_tensor_alloc(hbg_client *c, size_t bytes, hbg_tensor *ret) {
        if (!c)
                return -EINVAL;
        /* Host functions may allocate on the caller's thread (no in_host
         * check); not on a worker thread, beside the caller's own calls
         * (the allocator is the caller's thread's). hbgd gone: the heap is
         * of no use any more. */
        if (hbgc_self.worker_of == c)
                return hbgc_fail(c, -EDEADLK, "hbg_tensor_alloc: called from a host function on a worker thread");
        int err = hbgc_check_alive(c, "hbg_tensor_alloc");
        if (err < 0)
                return err;
        if (!ret || bytes == 0)
                return hbgc_fail(c, -EINVAL, "hbg_tensor_alloc: %s", !ret ? "ret is NULL" : "zero bytes");
        if ((uint64_t)bytes > c->g.heap_size)
                return hbgc_fail(c, -ENOMEM, "hbg_tensor_alloc: %zu bytes is more than the heap (%" PRIu64 " bytes)",
                                 bytes, c->g.heap_size);
        /* heap_size <= 1 TiB: no overflow. */
        uint64_t size = ((uint64_t)bytes + HBG_HEAP_ALIGN - 1) & ~(uint64_t)(HBG_HEAP_ALIGN - 1);

        uint64_t at = 0;
        size_t i = 0;
        for (; i < c->deps.n_allocs; i++) {
                if (c->deps.allocs[i].offset - at >= size)
                        break;
                at = c->deps.allocs[i].offset + c->deps.allocs[i].size;
        }
        if (i == c->deps.n_allocs && c->g.heap_size - at < size)
                return hbgc_fail(c, -ENOMEM, "hbg_tensor_alloc: no room for %zu bytes in the session heap (%" PRIu64
                                 " bytes); tensors live until hbg_disconnect()", bytes, c->g.heap_size);
        if (dep_tracker_add_alloc(&c->deps, at, size) < 0)
                return hbgc_fail(c, -ENOMEM, "hbg_tensor_alloc: out of memory");
        *ret = (hbg_tensor){ .offset = at, .bytes = bytes };
        return 0;
}

HBG_EXPORT void *hbg_tensor_data(hbg_client *c, hbg_tensor t) {
        if (!c || !hbgc_in_heap(c, t.offset, t.bytes))
                return NULL;
        return c->heap + t.offset;
}

HBG_EXPORT int hbg_tensor_slice_f32(hbg_tensor t, uint64_t lo, uint64_t hi, hbg_tensor *ret) {
        uint64_t bytes_lo, bytes_hi, off;
        if (!ret || lo >= hi || __builtin_mul_overflow(lo, 4, &bytes_lo) ||
            __builtin_mul_overflow(hi, 4, &bytes_hi) || bytes_hi > t.bytes ||
            __builtin_add_overflow(t.offset, bytes_lo, &off))
                return -EINVAL;
        *ret = (hbg_tensor){ .offset = off, .bytes = bytes_hi - bytes_lo };
        return 0;
}

HBG_EXPORT uint64_t hbg_f32(float v) {
        uint32_t bits;
        memcpy(&bits, &v, sizeof(bits));
        return bits;
}

HBG_EXPORT uint64_t hbg_i64(int64_t v) {
        /* Two's complement: the conversion keeps the bits (C11 6.3.1.3). */
        return (uint64_t)v;
}
