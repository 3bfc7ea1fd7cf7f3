/* SPDX-License-Identifier: MIT */
/*
 * libhbgclient's joining of more than 16 fanins (libclient/fanin_join.c)
 * on its own, the dummies written by the test:
 *   every_count  for every n up to 600, and some far larger: at most 16
 *                left as they were; above, exactly ceil((n - 16) / 15)
 *                dummies and 16 left, ascending; each dummy of 2 to 16
 *                ascending fanins; every fanin and every dummy reached
 *                exactly once from what is left (nothing dropped, nothing
 *                doubled), no deeper than the levels of 16 need
 *                (L dummies deep where 16^L < n <= 16^(L + 1));
 *   write_fails  a dummy's failure ends the join with its error.
 */
#include <check.h>
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "libclient/fanin_join.h"
#include "tests/check_main.h"

#define FIRST_DUMMY 1000000000u /* dummies' ids: newer than every fanin */

struct dummies {
        size_t n, cap;
        uint64_t (*fanins)[16];
        unsigned char *count;
        size_t fail_at;  /* the write that fails (1-based), 0: none */
};

static struct dummies made;

static int write_dummy(hbg_client *c, const uint64_t *fanins, size_t n, uint64_t *ret_id) {
        ck_assert_ptr_null(c);
        ck_assert_msg(n >= 2 && n <= 16, "a dummy of %zu fanins", n);
        for (size_t j = 1; j < n; j++)
                ck_assert_msg(fanins[j - 1] < fanins[j], "a dummy's fanins out of order");
        if (made.fail_at && made.n + 1 == made.fail_at)
                return -ECONNRESET;
        if (made.n == made.cap) {
                made.cap = made.cap ? 2 * made.cap : 64;
                made.fanins = realloc(made.fanins, made.cap * sizeof(made.fanins[0]));
                made.count = realloc(made.count, made.cap);
                ck_assert(made.fanins && made.count);
        }
        memcpy(made.fanins[made.n], fanins, n * sizeof(fanins[0]));
        made.count[made.n] = (unsigned char)n;
        *ret_id = FIRST_DUMMY + made.n++;
        return 0;
}

/* Fanin f of the original list: its index; dummies count after them. */
static size_t node_of(uint64_t id, size_t n) {
        if (id >= FIRST_DUMMY)
                return n + (size_t)(id - FIRST_DUMMY);
        ck_assert_msg(id % 3 == 2 && (id - 5) / 3 < n, "an id that is no fanin: %llu", (unsigned long long)id);
        return (size_t)(id - 5) / 3;
}

/* Count each node reached from `id` in seen[], and return the depth. */
static unsigned reach(uint64_t id, size_t n, unsigned *seen) {
        size_t k = node_of(id, n);
        seen[k]++;
        if (id < FIRST_DUMMY)
                return 0;
        unsigned deepest = 0;
        size_t d = (size_t)(id - FIRST_DUMMY);
        for (unsigned j = 0; j < made.count[d]; j++) {
                unsigned depth = reach(made.fanins[d][j], n, seen);
                deepest = depth > deepest ? depth : deepest;
        }
        return deepest + 1;
}

static void check_join(size_t n) {
        uint64_t *deps = malloc((n ? n : 1) * sizeof(*deps));
        ck_assert_ptr_nonnull(deps);
        for (size_t i = 0; i < n; i++)
                deps[i] = 3 * i + 5;
        made.n = 0;
        size_t left = n;
        ck_assert_int_eq(hbgc_fanin_join(NULL, deps, &left, write_dummy), 0);
        if (n <= 16) {
                ck_assert_uint_eq(left, n);
                ck_assert_uint_eq(made.n, 0);
                for (size_t i = 0; i < n; i++)
                        ck_assert_uint_eq(deps[i], 3 * i + 5);
                free(deps);
                return;
        }
        ck_assert_uint_eq(left, 16);
        ck_assert_msg(made.n == (n - 16 + 14) / 15, "%zu fanins took %zu dummies, not %zu", n, made.n,
                      (n - 16 + 14) / 15);
        unsigned *seen = calloc(n + made.n, sizeof(*seen));
        ck_assert_ptr_nonnull(seen);
        unsigned depth = 0;
        for (size_t i = 0; i < left; i++) {
                if (i > 0)
                        ck_assert_msg(deps[i - 1] < deps[i], "what is left is out of order");
                unsigned d = reach(deps[i], n, seen);
                depth = d > depth ? d : depth;
        }
        for (size_t k = 0; k < n + made.n; k++)
                ck_assert_msg(seen[k] == 1, "n %zu: %s %zu reached %u times", n, k < n ? "fanin" : "dummy",
                              k < n ? k : k - n, seen[k]);
        unsigned levels = 0;
        for (size_t cover = 16; cover < n; cover *= 16)
                levels++;
        ck_assert_msg(depth <= levels, "n %zu: dummies %u deep, more than %u", n, depth, levels);
        free(seen);
        free(deps);
}

START_TEST(every_count) {
        for (size_t n = 0; n <= 600; n++)
                check_join(n);
        /* 3887: the first count for which a short dummy last would make
         * a level more. */
        static const size_t large[] = { 3887, 3902, 4095, 4096, 4097, 65536, 65537, 69907, 100003 };
        for (size_t i = 0; i < sizeof(large) / sizeof(large[0]); i++)
                check_join(large[i]);
        free(made.fanins);
        free(made.count);
        made = (struct dummies){ 0 };
}
END_TEST

START_TEST(write_fails) {
        uint64_t deps[100];
        for (size_t i = 0; i < 100; i++)
                deps[i] = 3 * i + 5;
        made.n = 0;
        made.fail_at = 3;
        size_t n = 100;
        ck_assert_int_eq(hbgc_fanin_join(NULL, deps, &n, write_dummy), -ECONNRESET);
        ck_assert_uint_eq(made.n, 2);
        made.fail_at = 0;
        free(made.fanins);
        free(made.count);
        made = (struct dummies){ 0 };
}
END_TEST

static Suite *fanin_join_suite(void) {
        Suite *s = suite_create("fanin_join");
        TCase *tc = tcase_create("join");
        tcase_add_test(tc, every_count);
        tcase_add_test(tc, write_fails);
        suite_add_tcase(s, tc);
        return s;
}

const struct check_main check_main = { .suite = fanin_join_suite };
