/* SPDX-License-Identifier: MIT */
/* Tensors: the session heap's allocator and the tensor helpers. */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "libclient/client_private.h"
#include "libclient/errors.h"
#include "libclient/hangup.h"
#include "libclient/session.h"
#include "common/grow.h"

/* ---------------------------------------------------------------- tensors */

/* Freed ranges whose tasks all completed become gaps again. */
static void reclaim(hbg_client *c) {
        if (c->n_freed == 0)
                return;
        uint64_t wm = hbgc_watermark(c);
        size_t k = 0;
        for (size_t i = 0; i < c->n_freed; i++)
                if (c->freed[i].after > wm)
                        c->freed[k++] = c->freed[i];
        c->n_freed = k;
}

/* First fit over the gaps between allocations and freed ranges not
 * reusable yet (both sorted by offset, never overlapping). */
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
        reclaim(c);

        const struct heap_alloc *al = c->deps.allocs;
        size_t na = c->deps.n_allocs, i = 0, j = 0;
        uint64_t at = 0, pending = 0;
        bool found = false;
        while (i < na || j < c->n_freed) {
                uint64_t off, sz;
                if (j == c->n_freed || (i < na && al[i].offset < c->freed[j].offset)) {
                        off = al[i].offset;
                        sz = al[i++].size;
                } else {
                        off = c->freed[j].offset;
                        sz = c->freed[j++].size;
                        pending += sz;
                }
                if (off - at >= size) {
                        found = true;
                        break;
                }
                at = off + sz;
        }
        if (!found && c->g.heap_size - at < size) {
                for (; j < c->n_freed; j++)
                        pending += c->freed[j].size;
                return hbgc_fail(c, -ENOMEM, "hbg_tensor_alloc: no room for %zu bytes in the session heap (%" PRIu64
                                 " bytes); hbg_tensor_free() the tensors no longer needed (%" PRIu64 " bytes are freed but "
                                 "wait for the tasks added before their free to complete: hbg_graph_wait())",
                                 bytes, c->g.heap_size, pending);
        }
        if (dep_tracker_add_alloc(&c->deps, at, size) < 0)
                return hbgc_fail(c, -ENOMEM, "hbg_tensor_alloc: out of memory");
        c->deps.allocs[dep_tracker_find_alloc(&c->deps, at)].bytes = bytes;
        *ret = (hbg_tensor){ .offset = at, .bytes = bytes };
        return 0;
}

static bool overlaps(const struct access *a, size_t n, uint64_t lo, uint64_t hi) {
        for (size_t i = 0; i < n; i++)
                if (a[i].lo < hi && lo < a[i].hi)
                        return true;
        return false;
}

/* The tensor's bytes go to a freed range, reusable once every task added
 * so far completed (ids below next_id: the watermark passes them; checked
 * by hbg_tensor_alloc, nothing waits here). Its dependency records are
 * forgotten. hbgd is not told: the heap's layout is the client's own. */
HBG_EXPORT int hbg_tensor_free(hbg_client *c, hbg_tensor t) {
        if (!c)
                return -EINVAL;
        /* Like hbg_tensor_alloc: the allocator is the caller's thread's. */
        if (hbgc_self.worker_of == c)
                return hbgc_fail(c, -EDEADLK, "hbg_tensor_free: called from a host function on a worker thread");
        long i = dep_tracker_find_alloc(&c->deps, t.offset);
        if (i < 0 || t.bytes != c->deps.allocs[i].bytes)
                return hbgc_fail(c, -EINVAL, "hbg_tensor_free: offset %" PRIu64 ", %" PRIu64 " bytes is not a live "
                                 "tensor from hbg_tensor_alloc() (%s)", t.offset, t.bytes,
                                 i < 0 ? "freed already, a slice, or unknown" : "a slice of one");
        uint64_t lo = t.offset, hi = lo + c->deps.allocs[i].size;
        if (c->rec && overlaps(c->rec->footprint, c->rec->n_fp, lo, hi))
                return hbgc_fail(c, -EBUSY, "hbg_tensor_free: the graph being recorded uses the tensor");
        for (size_t g = 0; g < c->n_recorded; g++)
                if (overlaps(c->recorded[g]->footprint, c->recorded[g]->n_fp, lo, hi))
                        return hbgc_fail(c, -EBUSY, "hbg_tensor_free: recorded graph %zu uses the tensor (recorded "
                                         "graphs and their tensors live until hbg_disconnect())", g);
        uint64_t after = c->prod.next_id;
        if (after > hbgc_watermark(c)) {
                if (GROW(c->freed, c->cap_freed, c->n_freed + 1, 16) < 0)
                        return hbgc_fail(c, -ENOMEM, "hbg_tensor_free: out of memory");
                size_t k = c->n_freed;
                for (; k > 0 && c->freed[k - 1].offset > lo; k--)
                        c->freed[k] = c->freed[k - 1];
                c->freed[k] = (struct freed_range){ .offset = lo, .size = hi - lo, .after = after };
                c->n_freed++;
        }
        dep_tracker_remove_alloc(&c->deps, (size_t)i);
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
