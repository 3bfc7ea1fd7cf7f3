/* SPDX-License-Identifier: MIT */
/*
 * Large zeroed arrays that cost nothing until used: anonymous mappings,
 * whose pages the kernel supplies (zeroed) on first touch. A ring's private
 * arrays are sized by its task window and mostly untouched for small
 * graphs, so creating a session stays cheap however large its window is
 * (docs/SECURITY.md: session set-up never stalls the io thread). Every
 * structure kept in them reads all-zero bytes as its initial state.
 * Page aligned, hence cache-line aligned.
 */
#pragma once

#include <stddef.h>
#include <sys/mman.h>

#define LAZY_HUGE_MIN ((size_t)4 << 20)

static inline void *lazy_zalloc(size_t size) {
        if (size == 0)
                size = 1;
        void *p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
                       -1, 0);
        if (p == MAP_FAILED)
                return NULL;
        /* The first lap through a window touches every page of these
         * arrays: huge pages make that a few faults, not thousands (where
         * transparent huge pages are enabled for madvise; a hint). */
        if (size >= LAZY_HUGE_MIN)
                madvise(p, size, MADV_HUGEPAGE);
        return p;
}

static inline void lazy_free(void *p, size_t size) {
        if (p)
                munmap(p, size ? size : 1);
}
