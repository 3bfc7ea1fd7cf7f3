/* SPDX-License-Identifier: MIT */
/*
 * hbg-bench: helpers every suite uses the same way (bench/bench_util.c):
 * option parsing, the clock, the reproducible random draws, the statistics
 * over the repeats of a case and the CSV file.
 *
 * Messages go to stderr as "hbg-bench SUITE: ...", where SUITE is the
 * `suite` argument, so that every suite reports usage errors alike.
 */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

/* ------------------------------------------------------------ options */

/*
 * The option at argv[*i], "--name VALUE" or "--name=VALUE", where --name is
 * one of `names` (NULL-terminated; each a string literal starting "--").
 * Returns 0 with *name set to the entry of `names` and *value to its value
 * (*i advanced past VALUE when it is the next argument), or -1 after
 * printing why: an unknown option, or one with no value left.
 */
int bench_option(const char *suite, int argc, char **argv, int *i, const char *const *names,
                 const char **name, const char **value);

/*
 * The value of option `name`, printing the usage error and returning false
 * when it is not what the option takes:
 *   - bench_option_u64: a decimal integer in min..max (strtoull alone would
 *     accept "-1", " 7" and "0x10");
 *   - bench_option_uint_list: a comma-separated list of at most max_count
 *     decimal integers in 1..max, into out[0..*count);
 *   - bench_option_name_list: a comma-separated list of at most max_count of
 *     names[0..n_names), into out[0..*count) as indices into names;
 *   - bench_option_common: the options every suite has, name being one of
 *     them: --repeat R (1..max_repeat) and --csv FILE (not empty).
 */
bool bench_option_u64(const char *suite, const char *name, const char *value, uint64_t min,
                      uint64_t max, uint64_t *ret);
bool bench_option_uint_list(const char *suite, const char *name, const char *value, unsigned max,
                            unsigned *out, unsigned *count, unsigned max_count);
bool bench_option_name_list(const char *suite, const char *name, const char *value,
                            const char *const *names, unsigned n_names, unsigned *out,
                            unsigned *count, unsigned max_count);
bool bench_option_common(const char *suite, const char *name, const char *value,
                         unsigned max_repeat, unsigned *repeat, const char **csv);

/* ------------------------------------------------------------ measuring */

/* CLOCK_MONOTONIC in ns. */
int64_t bench_now_ns(void);

/* splitmix64: the suites' reproducible random draws from a fixed seed. */
uint64_t bench_splitmix64(uint64_t *state);

/* Sorts ns[0..n) (n >= 1) and returns its minimum and median (the mean of
 * the middle two when n is even). */
void bench_min_median(double *ns, unsigned n, double *min, double *median);

/* The host section's task body (bench/compare_host.c), the same machine
 * code in every system: `iters` rounds of a dependent multiply-add that
 * the compiler cannot drop. A fixed amount of work, not a time: two of
 * them on one core take twice as long, so a speed-up above the cores
 * cannot show. Returns the last value (meaningless). */
uint64_t bench_spin(uint64_t iters);
/* Rounds of bench_spin() that take about ns on this machine now: the
 * fastest of a few timed runs, scaled (at least 1). */
uint64_t bench_spin_calibrate(uint64_t ns);

/* sum / count rounded to nearest (count >= 1). */
uint64_t bench_mean_u64(uint64_t sum, unsigned count);

/* ------------------------------------------------------------ CSV */

/* Opens path to append one row per case; writes header (one line, '\n'
 * included) only when the file is new or empty, so several invocations can
 * share one file. NULL after printing why. */
FILE *bench_csv_open(const char *suite, const char *path, const char *header);

/* Closes f; -1 after printing that a write to path failed. */
int bench_csv_close(const char *suite, FILE *f, const char *path);
