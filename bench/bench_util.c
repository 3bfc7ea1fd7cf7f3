/* SPDX-License-Identifier: MIT */
/*
 * hbg-bench: what the suites share (declarations in bench/bench_util.h).
 */
#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench/bench_util.h"
#include "common/clock.h"

/* ------------------------------------------------------------ options */

int bench_option(const char *suite, int argc, char **argv, int *i, const char *const *names,
                 const char **name, const char **value) {
        const char *arg = argv[*i];
        /* --name VALUE or --name=VALUE */
        size_t len = strcspn(arg, "=");

        *name = NULL;
        for (const char *const *n = names; *n; n++)
                if (strlen(*n) == len && strncmp(arg, *n, len) == 0)
                        *name = *n;
        if (!*name) {
                fprintf(stderr, "hbg-bench %s: unknown option '%s'"
                        " (hbg-bench %s --help lists them)\n", suite, arg, suite);
                return -1;
        }
        if (arg[len] == '=') {
                *value = arg + len + 1;
                return 0;
        }
        if (*i + 1 >= argc) {
                fprintf(stderr, "hbg-bench %s: %s needs a value\n", suite, *name);
                return -1;
        }
        *value = argv[++*i];
        return 0;
}

/* Decimal only: strtoull alone would accept "-1", " 7" and "0x10". */
static bool parse_u64(const char *s, uint64_t min, uint64_t max, uint64_t *ret) {
        char *end;

        if (*s < '0' || *s > '9')
                return false;
        errno = 0;
        unsigned long long v = strtoull(s, &end, 10);
        if (errno || *end || v < min || v > max)
                return false;
        *ret = v;
        return true;
}

static bool parse_uint_list(const char *s, unsigned max, unsigned *out, unsigned *count,
                            unsigned max_count) {
        *count = 0;
        for (const char *p = s;;) {
                char *end;

                if (*p < '0' || *p > '9' || *count == max_count)
                        return false;
                errno = 0;
                unsigned long v = strtoul(p, &end, 10);
                if (errno || v < 1 || v > max || (*end != ',' && *end != '\0'))
                        return false;
                out[(*count)++] = (unsigned)v;
                if (*end == '\0')
                        return true;
                p = end + 1;
        }
}

static bool parse_name_list(const char *s, const char *const *names, unsigned n_names,
                            unsigned *out, unsigned *count, unsigned max_count) {
        *count = 0;
        for (const char *p = s;;) {
                size_t len = strcspn(p, ",");
                unsigned found = n_names;

                for (unsigned k = 0; k < n_names; k++)
                        if (strlen(names[k]) == len && strncmp(p, names[k], len) == 0)
                                found = k;
                if (found == n_names || *count == max_count)
                        return false;
                out[(*count)++] = found;
                if (p[len] == '\0')
                        return true;
                p += len + 1;
        }
}

bool bench_option_u64(const char *suite, const char *name, const char *value, uint64_t min,
                      uint64_t max, uint64_t *ret) {
        if (parse_u64(value, min, max, ret))
                return true;
        fprintf(stderr, "hbg-bench %s: %s: expected an integer in %" PRIu64 "..%" PRIu64
                ", got '%s'\n", suite, name, min, max, value);
        return false;
}

bool bench_option_uint_list(const char *suite, const char *name, const char *value, unsigned max,
                            unsigned *out, unsigned *count, unsigned max_count) {
        if (parse_uint_list(value, max, out, count, max_count))
                return true;
        fprintf(stderr, "hbg-bench %s: %s: expected up to %u comma-separated counts in 1..%u,"
                " got '%s'\n", suite, name, max_count, max, value);
        return false;
}

bool bench_option_name_list(const char *suite, const char *name, const char *value,
                            const char *const *names, unsigned n_names, unsigned *out,
                            unsigned *count, unsigned max_count) {
        if (parse_name_list(value, names, n_names, out, count, max_count))
                return true;
        fprintf(stderr, "hbg-bench %s: %s: expected a comma-separated list of", suite, name);
        for (unsigned k = 0; k < n_names; k++)
                fprintf(stderr, "%s %s", k ? "," : "", names[k]);
        fprintf(stderr, "; got '%s'\n", value);
        return false;
}

bool bench_option_common(const char *suite, const char *name, const char *value,
                         unsigned max_repeat, unsigned *repeat, const char **csv) {
        if (strcmp(name, "--repeat") == 0) {
                uint64_t v;

                if (!bench_option_u64(suite, name, value, 1, max_repeat, &v))
                        return false;
                *repeat = (unsigned)v;
                return true;
        }
        if (*value == '\0') {
                fprintf(stderr, "hbg-bench %s: %s: empty file name\n", suite, name);
                return false;
        }
        *csv = value;
        return true;
}

/* ------------------------------------------------------------ measuring */

uint64_t bench_spin(uint64_t iters) {
        uint64_t x = iters;
        for (uint64_t i = 0; i < iters; i++) {
                x = x * 6364136223846793005ull + 1442695040888963407ull;
                /* x is an input and output of the (empty) asm: every
                 * round stays, in order. */
                __asm__ volatile("" : "+r"(x));
        }
        return x;
}

uint64_t bench_spin_calibrate(uint64_t ns) {
        const uint64_t probe = 1u << 18;
        int64_t best = INT64_MAX;
        for (int i = 0; i < 7; i++) {
                int64_t t0 = bench_now_ns();
                bench_spin(probe);
                int64_t t = bench_now_ns() - t0;
                best = t > 0 && t < best ? t : best;
        }
        if (best == INT64_MAX)
                return 1;
        uint64_t iters = (uint64_t)((double)ns * (double)probe / (double)best);
        return iters ? iters : 1;
}

int64_t bench_now_ns(void) {
        return clock_now_ns();
}

uint64_t bench_splitmix64(uint64_t *state) {
        uint64_t z = (*state += UINT64_C(0x9e3779b97f4a7c15));
        z = (z ^ (z >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
        z = (z ^ (z >> 27)) * UINT64_C(0x94d049bb133111eb);
        return z ^ (z >> 31);
}

static int cmp_double(const void *a, const void *b) {
        double x = *(const double *)a, y = *(const double *)b;
        return (x > y) - (x < y);
}

void bench_min_median(double *ns, unsigned n, double *min, double *median) {
        qsort(ns, n, sizeof(*ns), cmp_double);
        *min = ns[0];
        *median = n % 2 ? ns[n / 2] : (ns[n / 2 - 1] + ns[n / 2]) / 2;
}

uint64_t bench_mean_u64(uint64_t sum, unsigned count) {
        return (sum + count / 2) / count;
}

/* ------------------------------------------------------------ CSV */

FILE *bench_csv_open(const char *suite, const char *path, const char *header) {
        FILE *f = fopen(path, "a");

        if (!f) {
                fprintf(stderr, "hbg-bench %s: %s: %s\n", suite, path, strerror(errno));
                return NULL;
        }
        if (fseek(f, 0, SEEK_END) == 0 && ftell(f) == 0)
                fputs(header, f);
        return f;
}

int bench_csv_close(const char *suite, FILE *f, const char *path) {
        if (ferror(f) | (fclose(f) != 0)) {
                fprintf(stderr, "hbg-bench %s: %s: write failed\n", suite, path);
                return -1;
        }
        return 0;
}
