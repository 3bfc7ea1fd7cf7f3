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

static inline void *lazy_zalloc(size_t size) {
        if (size == 0)
                size = 1;
        void *p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
                       -1, 0);
        return p == MAP_FAILED ? NULL : p;
}

static inline void lazy_free(void *p, size_t size) {
        if (p)
                munmap(p, size ? size : 1);
}
