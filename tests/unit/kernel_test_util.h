/* SPDX-License-Identifier: MIT */
/*
 * What the tests of the built-in kernels share (test_kernels,
 * test_kernel_budget, test_kernel_validation): a test heap, its floats,
 * tensor arguments and the kernels by id.
 */
#ifndef HBG_TESTS_KERNEL_TEST_UTIL_H
#define HBG_TESTS_KERNEL_TEST_UTIL_H

#include <check.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "daemon/engine/kernels.h"
#include "common/kernel_sig.h"
#include "shm/layout.h"

#define HEAP_SIZE (64u * 1024u)
#define CANARY 0xa5u

#define IN HBG_DIR_IN
#define OUT HBG_DIR_OUT
#define INOUT HBG_DIR_INOUT

static inline uint64_t splitmix(uint64_t *s) {
        uint64_t z = (*s += UINT64_C(0x9e3779b97f4a7c15));

        z = (z ^ (z >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
        z = (z ^ (z >> 27)) * UINT64_C(0x94d049bb133111eb);
        return z ^ (z >> 31);
}

/* A float in [-2, 2) with 22 fraction bits: exact, never NaN. */
static inline float rnd_f32(uint64_t *s) {
        int32_t v = (int32_t)(splitmix(s) >> 40) - (1 << 23);

        return (float)v / (float)(1 << 22);
}

static inline uint8_t *heap_alloc(void) {
        uint8_t *h = aligned_alloc(64, HEAP_SIZE);

        ck_assert_ptr_nonnull(h);
        return h;
}

static inline float get_f32(const uint8_t *heap, uint64_t off) {
        float v;

        memcpy(&v, heap + off, sizeof(v));
        return v;
}

static inline void put_f32(uint8_t *heap, uint64_t off, float v) {
        memcpy(heap + off, &v, sizeof(v));
}

static inline uint64_t f32_bits(float v) {
        uint32_t b;

        memcpy(&b, &v, sizeof(b));
        return b;
}

static inline float bits_f32(uint64_t raw) {
        uint32_t b = (uint32_t)raw;
        float v;

        memcpy(&v, &b, sizeof(v));
        return v;
}

static inline struct hbg_kernel_tensor_arg T(uint64_t off, uint64_t len, uint32_t dir) {
        return (struct hbg_kernel_tensor_arg){ .offset = off, .length = len, .direction = dir };
}

static inline const struct kernel_info *K(uint16_t id) {
        const struct kernel_info *k = kernel_lookup(id);

        ck_assert_msg(k != NULL, "kernel %u missing", id);
        return k;
}

/* C += A x B, row-major, in the order of the plain loop (test_kernels'
 * reference, and what gemm's checked loop must equal bit for bit). */
static inline void ref_gemm(uint8_t *h, const struct hbg_kernel_args *a) {
        uint64_t m = a->scalars[0], n = a->scalars[1], k = a->scalars[2];
        uint64_t A = a->tensors[0].offset, B = a->tensors[1].offset, C = a->tensors[2].offset;

        for (uint64_t i = 0; i < m; i++) {
                for (uint64_t j = 0; j < n; j++) {
                        float c = get_f32(h, C + (i * n + j) * 4);
                        for (uint64_t p = 0; p < k; p++)
                                c += get_f32(h, A + (i * k + p) * 4) * get_f32(h, B + (p * n + j) * 4);
                        put_f32(h, C + (i * n + j) * 4, c);
                }
        }
}

#endif
