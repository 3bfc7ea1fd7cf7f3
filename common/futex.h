/* SPDX-License-Identifier: MIT */
/*
 * Futex calls on words shared between processes (RUNTIME_LOGIC.md §10.7):
 * the completion region's wake words. Not FUTEX_PRIVATE_FLAG: the word
 * lives in a MAP_SHARED mapping that hbgd and a producer both map, and the
 * kernel must key it by the file page, not by this process's address.
 * FUTEX_WAIT and FUTEX_WAKE only read the word, so they work on the
 * producer's read-only mapping too.
 */
#pragma once

#include <errno.h>
#include <linux/futex.h>
#include <stdatomic.h>
#include <stdint.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

/* Sleep while *word == val (timeout relative, NULL: none). 0 when woken;
 * -EAGAIN (the word had moved), -ETIMEDOUT, -EINTR: look again. */
static inline int futex_wait_shared(const _Atomic uint32_t *word, uint32_t val, const struct timespec *timeout) {
        long r = syscall(SYS_futex, word, FUTEX_WAIT, val, timeout, NULL, 0);
        return r < 0 ? -errno : 0;
}

/* Wake at most n sleepers of word. */
static inline void futex_wake_shared(const _Atomic uint32_t *word, int n) {
        (void)syscall(SYS_futex, word, FUTEX_WAKE, n, NULL, NULL, 0);
}
