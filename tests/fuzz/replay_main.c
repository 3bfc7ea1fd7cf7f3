/* SPDX-License-Identifier: MIT */
/*
 * The plain-build driver of a fuzz target: runs every file of its corpus
 * through LLVMFuzzerTestOneInput() once, in name order, and names each
 * before running it (a crash points at its input), after checking that its
 * hand-made seeds are what the seed writer makes now. With arguments,
 * runs those files or directories instead; `--write-seeds DIR` writes
 * the target's hand-made seeds.
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

/* The whole of path, malloc'd (*len its size), or NULL (said why). */
static uint8_t *read_all(const char *path, size_t *len) {
        FILE *f = fopen(path, "rb");
        if (!f) {
                fprintf(stderr, "%s: %s\n", path, strerror(errno));
                return NULL;
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
        if (!buf)
                fprintf(stderr, "%s: out of memory\n", path);
        *len = n;
        return buf;
}

static int run_file(const char *path) {
        size_t n;
        uint8_t *buf = read_all(path, &n);
        if (!buf)
                return -1;
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

/*
 * The corpus's hand-made seeds are what the seed writer makes now: a
 * seed whose bytes went stale (a field or a version moved on, a built-in
 * kernel's text changed the table's digest) still replays, but no longer
 * reaches the path it was made for, and nothing else would say so. The
 * seeds are written into a fresh directory and compared by name; 0, or
 * the count of seeds missing or different (each named), or -1.
 */
static int seeds_current(void) {
        const char *tmp = getenv("TMPDIR");
        char dir[2048];
        snprintf(dir, sizeof(dir), "%s/hbg-seeds-XXXXXX", tmp && *tmp ? tmp : "/tmp");
        if (!mkdtemp(dir)) {
                fprintf(stderr, "seeds: %s: %s\n", dir, strerror(errno));
                return -1;
        }
        int err = fuzz_write_seeds(dir), stale = 0;
        if (err < 0) {
                fprintf(stderr, "seeds: cannot write them into %s: %s\n", dir, strerror(-err));
                stale = -1;
        }
        struct dirent **names;
        int n = scandir(dir, &names, NULL, by_name);
        for (int i = 0; i < n; i++) {
                char mine[4096], kept[4096];
                snprintf(mine, sizeof(mine), "%s/%s", dir, names[i]->d_name);
                snprintf(kept, sizeof(kept), "%s/%s", FUZZ_CORPUS, names[i]->d_name);
                struct stat st;
                if (stale >= 0 && stat(mine, &st) == 0 && S_ISREG(st.st_mode)) {
                        size_t a = 0, b = 0;
                        uint8_t *want = read_all(mine, &a);
                        uint8_t *have = access(kept, F_OK) == 0 ? read_all(kept, &b) : NULL;
                        if (!want || !have || a != b || memcmp(want, have, a) != 0) {
                                fprintf(stderr, "seed %s: not what the seed writer makes now\n", kept);
                                stale++;
                        }
                        free(want);
                        free(have);
                }
                unlink(mine);
                free(names[i]);
        }
        if (n >= 0)
                free(names);
        rmdir(dir);
        if (stale > 0)
                fprintf(stderr, "%d stale seed(s): write them again with --write-seeds %s, keeping each old "
                        "input under its SHA-1 name (sha1sum), as an input of an older client\n",
                        stale, FUZZ_CORPUS);
        return stale;
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
                if (seeds_current() != 0)
                        return 1;
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
