/* SPDX-License-Identifier: MIT */
/* Kernel modules for tests that load them (tests/unit/test_kernel_modules.c,
 * tests/e2e/test_e2e_modules.c, tests/e2e/test_e2e_shm_attack.c). */
#pragma once

#include <check.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

/* Copy the module src to dst (0644): into a fresh 0755 directory, since
 * the build tree may lie under one others may write, which hbgd refuses. */
static inline void module_copy(const char *src, const char *dst) {
        int in = open(src, O_RDONLY | O_CLOEXEC);
        ck_assert_msg(in >= 0, "cannot open %s (build the tests' modules)", src);
        int out = open(dst, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
        ck_assert_int_ge(out, 0);
        char buf[65536];
        ssize_t n;
        while ((n = read(in, buf, sizeof(buf))) > 0)
                ck_assert_int_eq(write(out, buf, (size_t)n), n);
        close(in);
        ck_assert_int_eq(fchmod(out, 0644), 0);
        close(out);
}
