/* SPDX-License-Identifier: MIT */
/*
 * Growing an array by realloc(): the one way hbg does it (daemon, library,
 * hbgctl). The capacity doubles from a first size until the elements
 * needed fit, with the byte count checked for overflow; on failure the
 * array and its capacity are left as they were. Header only.
 */
#pragma once

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>

/* The capacity that holds `need` elements of `size` bytes: cap (first when
 * 0) doubled until it does; 0 when the bytes would overflow. */
static inline size_t grow_capacity(size_t cap, size_t need, size_t first, size_t size) {
        size_t n = cap ? cap : first;
        while (n < need) {
                if (n > SIZE_MAX / 2)
                        return 0;
                n *= 2;
        }
        return n > SIZE_MAX / size ? 0 : n;
}

/*
 * Room for `need` elements in the array v (an lvalue of pointer type) of
 * capacity cap (an lvalue of type size_t): 0, or -ENOMEM with v and cap
 * unchanged. need is evaluated once; v and cap more than once.
 */
#define GROW(v, cap, need, first)                                                                   \
        __extension__({                                                                             \
                size_t grow_need_ = (need);                                                         \
                int grow_err_ = 0;                                                                  \
                if (grow_need_ > (cap) || !(v)) {                                                   \
                        size_t grow_cap_ = grow_capacity((cap), grow_need_ ? grow_need_ : 1, (first), \
                                                         sizeof(*(v)));                             \
                        void *grow_p_ = grow_cap_ ? realloc((v), grow_cap_ * sizeof(*(v))) : NULL;  \
                        if (grow_p_) {                                                              \
                                (v) = grow_p_;                                                      \
                                (cap) = grow_cap_;                                                  \
                        } else {                                                                    \
                                grow_err_ = -ENOMEM;                                                \
                        }                                                                           \
                }                                                                                   \
                grow_err_;                                                                          \
        })
