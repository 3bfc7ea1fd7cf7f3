/* SPDX-License-Identifier: MIT */
/* Helpers of the fuzz targets (tests/fuzz/fuzz.h), linked into both the
 * libFuzzer and the replay builds. */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <sys/mman.h>
#include <unistd.h>

#include "tests/fuzz/fuzz.h"

int fuzz_memfd(const char *name, const void *data, size_t size) {
        int fd = memfd_create(name, MFD_CLOEXEC);
        if (fd < 0)
                return -errno;
        const uint8_t *p = data;
        while (size > 0) {
                ssize_t n = write(fd, p, size);
                if (n < 0) {
                        int err = -errno;
                        close(fd);
                        return err;
                }
                p += n;
                size -= (size_t)n;
        }
        return fd;
}

int fuzz_seed(const char *dir, const char *name, const void *data, size_t size) {
        char path[4096];
        snprintf(path, sizeof(path), "%s/%s", dir, name);
        FILE *f = fopen(path, "wb");
        if (!f)
                return -errno;
        bool ok = fwrite(data, 1, size, f) == size;
        if (fclose(f) != 0 || !ok)
                return -EIO;
        return 0;
}
