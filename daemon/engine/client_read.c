/* SPDX-License-Identifier: MIT */
/* Reads of a submission region off hbgd's mapping (client_read.h). */
#include "daemon/engine/client_read.h"

#include <errno.h>
#include <string.h>
#include <unistd.h>

#include "daemon/engine/ring.h"

/* pread(2) of the region's memfd at the offset of `at`; the rest zero.
 * Bounded: a memfd sealed against shrinking reads whole, so a short read
 * or an error ends the loop after at most a few interrupted calls. */
static void read_fd(const struct hbg_ring *r, const void *at, void *out, size_t len) {
        off_t off = (off_t)((const char *)at - (const char *)r->sub);
        size_t done = 0;
        for (unsigned tries = 0; done < len && tries < 8; tries++) {
                ssize_t n = pread(r->sub_fd, (char *)out + done, len - done, off + (off_t)done);
                if (n > 0)
                        done += (size_t)n;
                else if (n == 0 || errno != EINTR)
                        break;
        }
        memset((char *)out + done, 0, len - done);
}

uint64_t client_read_u64(const struct hbg_ring *r, const _Atomic uint64_t *at) {
        if (r->sub_fd < 0)
                return atomic_load_explicit(at, memory_order_acquire);
        uint64_t v;
        read_fd(r, (const void *)at, &v, sizeof(v));
        /* The client's release store of the cursor came after what it
         * covers; our copy of it came before this fence, and our later
         * reads after it: they see what the cursor covers, as after an
         * acquire load (the copy is plain loads in the kernel, on this
         * thread). gcc's ThreadSanitizer refuses fences it cannot model
         * (-Wtsan); it sees no kernel copy either, so it has nothing to
         * order here. */
#ifndef __SANITIZE_THREAD__
        atomic_thread_fence(memory_order_acquire);
#endif
        return v;
}

void client_read(const struct hbg_ring *r, const void *at, void *out, size_t len) {
        if (r->sub_fd < 0)
                memcpy(out, at, len);
        else
                read_fd(r, at, out, len);
}
