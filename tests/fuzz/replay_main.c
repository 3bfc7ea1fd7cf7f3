/* SPDX-License-Identifier: MIT */
/*
 * The plain-build driver of a fuzz target: runs every file of its corpus
 * through LLVMFuzzerTestOneInput() once, in name order, and names each
 * before running it (a crash points at its input). With arguments, runs
 * those files or directories instead; `--write-seeds DIR` writes the
 * target's hand-made seeds.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "tests/fuzz/fuzz.h"

#ifndef FUZZ_CORPUS
#error "FUZZ_CORPUS: the target's corpus directory"
#endif

static int run_file(const char *path) {
        FILE *f = fopen(path, "rb");
        if (!f) {
                fprintf(stderr, "%s: %s\n", path, strerror(errno));
                return -1;
        }
        size_t cap = 4096, n = 0;
        uint8_t *buf = malloc(cap);
        size_t got;
        while (buf && (got = fread(buf + n, 1, cap - n, f)) > 0) {
                n += got;
                if (n == cap) {
                        uint8_t *nb = realloc(buf, cap *= 2);
                        if (!nb) {
                                free(buf);
                                buf = NULL;
                        } else {
                                buf = nb;
                        }
                }
        }
        fclose(f);
        if (!buf) {
                fprintf(stderr, "%s: out of memory\n", path);
                return -1;
        }
        fprintf(stderr, "  %s (%zu bytes)", path, n);
        struct timespec t0, t1;
        clock_gettime(CLOCK_MONOTONIC, &t0);
        LLVMFuzzerTestOneInput(buf, n);
        clock_gettime(CLOCK_MONOTONIC, &t1);
        fprintf(stderr, " %.1f ms\n", (double)(t1.tv_sec - t0.tv_sec) * 1e3 + (double)(t1.tv_nsec - t0.tv_nsec) / 1e6);
        free(buf);
        return 0;
}

static int by_name(const struct dirent **a, const struct dirent **b) {
        return strcmp((*a)->d_name, (*b)->d_name);
}

/* Every regular file of dir; the count run, or -1. */
static int run_dir(const char *dir) {
        struct dirent **names;
        int n = scandir(dir, &names, NULL, by_name);
        if (n < 0) {
                fprintf(stderr, "%s: %s\n", dir, strerror(errno));
                return -1;
        }
        int ran = 0, rc = 0;
        for (int i = 0; i < n; i++) {
                char path[4096];
                struct stat st;
                snprintf(path, sizeof(path), "%s/%s", dir, names[i]->d_name);
                if (rc == 0 && stat(path, &st) == 0 && S_ISREG(st.st_mode)) {
                        if (run_file(path) < 0)
                                rc = -1;
                        else
                                ran++;
                }
                free(names[i]);
        }
        free(names);
        return rc < 0 ? -1 : ran;
}

int main(int argc, char **argv) {
        if (argc == 3 && strcmp(argv[1], "--write-seeds") == 0) {
                int err = fuzz_write_seeds(argv[2]);
                if (err < 0)
                        fprintf(stderr, "seeds: %s: %s\n", argv[2], strerror(-err));
                return err < 0;
        }
        int total = 0;
        if (argc < 2) {
                total = run_dir(FUZZ_CORPUS);
                if (total == 0) {
                        fprintf(stderr, "%s: empty corpus\n", FUZZ_CORPUS);
                        return 1;
                }
        }
        for (int i = 1; i < argc && total >= 0; i++) {
                struct stat st;
                if (stat(argv[i], &st) == 0 && S_ISDIR(st.st_mode)) {
                        int n = run_dir(argv[i]);
                        total = n < 0 ? -1 : total + n;
                } else {
                        total = run_file(argv[i]) < 0 ? -1 : total + 1;
                }
        }
        if (total < 0)
                return 1;
        fprintf(stderr, "%d inputs ran\n", total);
        return 0;
}
