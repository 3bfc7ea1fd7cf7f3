/* SPDX-License-Identifier: MIT */
/*
 * `hbg-bench --compare OLD.csv NEW.csv`: two results.csv side by side, the
 * ratio NEW / OLD of ns per task for every row both have (below 1: NEW is
 * faster), their geometric mean, and the rows only one has. A change's
 * effect on the whole suite is one command.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench/bench.h"
#include "bench/report.h"

struct result {
        char key[160];          /* shape,system,mode,threads,clients */
        double ns_per_task, p99_us;
        bool matched;
};

struct results {
        struct result *v;
        unsigned n;
};

/* Splits a CSV line (no quoting: ours has none) into at most max fields. */
static unsigned split(char *line, char **f, unsigned max) {
        unsigned n = 0;
        line[strcspn(line, "\r\n")] = 0;
        for (char *p = line; n < max;) {
                f[n++] = p;
                char *comma = strchr(p, ',');
                if (!comma)
                        break;
                *comma = 0;
                p = comma + 1;
        }
        return n;
}

static int load(const char *path, struct results *r) {
        FILE *f = fopen(path, "r");
        char line[1024];
        r->v = NULL;
        r->n = 0;
        if (!f) {
                fprintf(stderr, "hbg-bench --compare: %s: %s\n", path, strerror(errno));
                return -errno;
        }
        if (!fgets(line, sizeof(line), f) || strncmp(line, REPORT_RESULTS_HEADER, strlen(REPORT_RESULTS_HEADER)) != 0) {
                fprintf(stderr, "hbg-bench --compare: %s is not a results.csv (its header is not\n  %s)\n", path,
                        REPORT_RESULTS_HEADER);
                fclose(f);
                return -EINVAL;
        }
        unsigned cap = 0, lineno = 1;
        while (fgets(line, sizeof(line), f)) {
                char *fld[12];
                lineno++;
                if (split(line, fld, 12) != 11) {
                        fprintf(stderr, "hbg-bench --compare: %s:%u: expected 11 fields\n", path, lineno);
                        fclose(f);
                        free(r->v);
                        return -EINVAL;
                }
                if (r->n == cap) {
                        cap = cap ? 2 * cap : 64;
                        struct result *v = realloc(r->v, cap * sizeof(*v));
                        if (!v) {
                                fclose(f);
                                free(r->v);
                                return -ENOMEM;
                        }
                        r->v = v;
                }
                struct result *x = &r->v[r->n++];
                int len = snprintf(x->key, sizeof(x->key), "%s,%s,%s,%s,%s", fld[0], fld[1], fld[2],
                                   fld[3], fld[4]);
                if (len < 0 || (size_t)len >= sizeof(x->key)) {
                        /* Truncated keys could match the wrong row. */
                        fprintf(stderr, "hbg-bench --compare: %s:%u: key fields longer than %zu bytes\n",
                                path, lineno, sizeof(x->key) - 1);
                        fclose(f);
                        free(r->v);
                        return -EINVAL;
                }
                x->ns_per_task = strtod(fld[7], NULL);
                x->p99_us = fld[9][0] ? strtod(fld[9], NULL) : NAN;
                x->matched = false;
        }
        fclose(f);
        return 0;
}

void bench_regress_usage(FILE *out) {
        fputs("regression guard: hbg-bench --compare OLD.csv NEW.csv\n"
              "  per row of two results.csv: ns per task before and after, NEW/OLD (< 1: faster)\n",
              out);
}

int bench_regress_main(int argc, char **argv) {
        if (argc != 3) {
                bench_regress_usage(stderr);
                return BENCH_EXIT_USAGE;
        }
        struct results old, new;
        if (load(argv[1], &old) < 0)
                return BENCH_EXIT_USAGE;
        if (load(argv[2], &new) < 0) {
                free(old.v);
                return BENCH_EXIT_USAGE;
        }
        printf("%-44s %12s %12s %8s\n", "shape,system,mode,threads,clients", "old ns/task", "new ns/task", "new/old");
        double log_sum = 0;
        unsigned matched = 0;
        for (unsigned i = 0; i < new.n; i++) {
                struct result *n = &new.v[i], *o = NULL;
                for (unsigned k = 0; k < old.n && !o; k++)
                        if (!old.v[k].matched && strcmp(old.v[k].key, n->key) == 0)
                                o = &old.v[k];
                if (!o) {
                        printf("%-44s %12s %12.1f %8s\n", n->key, "-", n->ns_per_task, "new row");
                        continue;
                }
                o->matched = n->matched = true;
                double ratio = o->ns_per_task > 0 ? n->ns_per_task / o->ns_per_task : NAN;
                printf("%-44s %12.1f %12.1f %8.3f\n", n->key, o->ns_per_task, n->ns_per_task, ratio);
                if (ratio > 0 && isfinite(ratio)) {
                        log_sum += log(ratio);
                        matched++;
                }
        }
        for (unsigned k = 0; k < old.n; k++)
                if (!old.v[k].matched)
                        printf("%-44s %12.1f %12s %8s\n", old.v[k].key, old.v[k].ns_per_task, "-", "gone");
        if (matched)
                printf("\ngeometric mean of new/old over %u rows: %.3f\n", matched, exp(log_sum / matched));
        free(old.v);
        free(new.v);
        return BENCH_EXIT_OK;
}
