/* SPDX-License-Identifier: MIT */
/*
 * Large zeroed arrays that cost nothing until used: anonymous mappings,
 * whose pages the kernel supplies (zeroed) on first touch. A ring's private
 * arrays are sized by its task window and mostly untouched for small
 * graphs, so creating a session stays cheap however large its window is
 * (docs/SECURITY.md: session set-up never stalls the io thread); hbgd
 * faults them in afterwards, a piece at a time on its slow-work thread
 * (ring_prefault(), lazy_populate()). Every
 * structure kept in them reads all-zero bytes as its initial state.
 * Page aligned, hence cache-line aligned.
 */
#pragma once

#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/mman.h>
#include <unistd.h>

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23 /* Linux 5.14 */
#endif

#define LAZY_HUGE_MIN ((size_t)4 << 20)
#define LAZY_HUGE_ALIGN ((size_t)2 << 20) /* x86-64's huge page */

/* Zero pages, none resident: NULL when the mapping fails. */
static inline void *lazy_map(size_t size) {
        void *p = mmap(NULL, size ? size : 1, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
                       -1, 0);
        return p == MAP_FAILED ? NULL : p;
}

/* The first lap through a window touches every page of an array: huge
 * pages make that a few faults, not thousands (where transparent huge
 * pages are enabled for madvise; a hint), for arrays large enough. */
static inline void lazy_hint_huge(void *p, size_t size) {
        if (size >= LAZY_HUGE_MIN)
                madvise(p, size, MADV_HUGEPAGE);
}

static inline void *lazy_zalloc(size_t size) {
        void *p = lazy_map(size);
        if (p)
                lazy_hint_huge(p, size);
        return p;
}

/* One lazy array: where, how long. */
struct lazy_span {
        void *p;
        size_t bytes;
};

/* The bytes a lazy array of `size` bytes occupies once every page of it
 * is in use: whole pages. */
static inline size_t lazy_bytes(size_t size) {
        size_t page = (size_t)sysconf(_SC_PAGESIZE);
        if (size == 0)
                size = 1;
        return (size + page - 1) / page * page;
}

/*
 * Fault in [p, p + size) of a lazy array ahead of its first use
 * (MADV_POPULATE_WRITE: the pages are allocated and mapped writable as a
 * write would, but nothing is written, so other threads may use the array
 * meanwhile). 0, or -EINVAL where the kernel lacks it (before 5.14: the
 * pages then come on first touch, as without this call), -ENOMEM, ...
 */
static inline int lazy_populate(void *p, size_t size) {
        if (size == 0)
                return 0;
        /* Whole pages: madvise() wants an aligned start. The page p is
         * in is the same lazy array's (page aligned), or the same
         * region's: a region's spans lie inside its page-aligned mapping. */
        uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
        uintptr_t start = (uintptr_t)p & ~(page - 1), end = (uintptr_t)p + size;
        if (madvise((void *)start, end - start, MADV_POPULATE_WRITE) < 0)
                return -errno;
        return 0;
}

static inline void lazy_free(void *p, size_t size) {
        if (p)
                munmap(p, size ? size : 1);
}

/*
 * Several lazy arrays in one mapping, each on a page of its own: one
 * mmap() makes them all and one munmap() frees them. A ring's arrays were
 * nine mappings: nine system calls at every session's set-up and nine at
 * its teardown (each a TLB shoot-down across hbgd's threads), which a
 * burst of connects queued behind (docs/PERFORMANCE.md). The arrays are
 * taken in the order given; only the first may be a huge-page candidate
 * (lazy_hint_huge() on it), so a small array's first touch never faults
 * in a 2 MiB page.
 */
struct lazy_arena {
        char *base;
        size_t size;    /* of the mapping: the sum of lazy_bytes() taken */
        size_t used;
};

/*
 * Map `size` bytes (a sum of lazy_bytes()). 0 or -ENOMEM. An arena of
 * LAZY_HUGE_MIN or more starts on a huge-page boundary: a mapping starts
 * on any page, and an unaligned hinted first array lost up to 2 MiB of
 * itself (below its first boundary and above its last) to small pages,
 * 512 faults where one does, in every session set up without a spare.
 * It is mapped 2 MiB longer and the slack on either side unmapped again
 * (never touched: nothing to free), so the mapping is the arena's bytes
 * alone and no huge page can take in anything beyond them.
 */
static inline int lazy_arena_map(struct lazy_arena *a, size_t size) {
        size_t slack = size >= LAZY_HUGE_MIN ? LAZY_HUGE_ALIGN : 0;
        char *map = lazy_map(size + slack);
        if (!map) {
                *a = (struct lazy_arena){ 0 };
                return -ENOMEM;
        }
        char *base = map;
        if (slack) {
                base = (char *)(((uintptr_t)map + LAZY_HUGE_ALIGN - 1) & ~(uintptr_t)(LAZY_HUGE_ALIGN - 1));
                size_t head = (size_t)(base - map), tail = slack - head; /* head < slack: mmap() gives pages */
                if (head)
                        munmap(map, head);
                munmap(base + size, tail);
        }
        *a = (struct lazy_arena){ .base = base, .size = size };
        return 0;
}

/* The next array of `size` bytes (whole pages), NULL once the mapping's
 * bytes are all taken (a sizing bug, not a lack of memory). */
static inline void *lazy_arena_take(struct lazy_arena *a, size_t size) {
        size_t bytes = lazy_bytes(size);
        if (!a->base || bytes > a->size - a->used)
                return NULL;
        void *p = a->base + a->used;
        a->used += bytes;
        return p;
}

/* Whether p is in the arena's mapping. */
static inline bool lazy_arena_holds(const struct lazy_arena *a, const void *p) {
        return a->base && (const char *)p >= a->base && (const char *)p < a->base + a->size;
}

static inline void lazy_arena_unmap(struct lazy_arena *a) {
        lazy_free(a->base, a->size);
        *a = (struct lazy_arena){ 0 };
}
