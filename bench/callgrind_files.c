/* SPDX-License-Identifier: MIT */
/*
 * Reading a callgrind out file (valgrind's "Callgrind Format
 * Specification"): header lines `positions:` and `events:`, then
 * `fl=`, `fi=`, `fe=`, `fn=` and the call lines `cfl=` (`cfi=`), `cfn=`,
 * `calls=`, each followed by cost lines "POSITION... COST...". Names may be
 * compressed: "(ID) name" defines ID, "(ID)" refers to it; files share
 * one set of IDs across fl, fi, fe, cfl and cfi. The cost line after a
 * `calls=` line is the call's inclusive cost, not the function's own.
 */
#include "bench/callgrind_files.h"

#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* File IDs as the profile numbers them; ir is the cost of functions
 * defined in that file. */
struct file_table {
        struct cg_file_cost *v;
        size_t n, cap;
};

static int table_slot(struct file_table *t, size_t i) {
        if (i < t->n)
                return 0;
        if (i >= t->cap) {
                size_t cap = t->cap ? t->cap : 64;
                while (cap <= i)
                        cap *= 2;
                struct cg_file_cost *v = realloc(t->v, cap * sizeof(*v));
                if (!v)
                        return -ENOMEM;
                t->v = v;
                t->cap = cap;
        }
        memset(&t->v[t->n], 0, (i + 1 - t->n) * sizeof(t->v[0]));
        t->n = i + 1;
        return 0;
}

/* The file a `fl=`-style value names, its index in t: "(ID) name"
 * defines, "(ID)" refers, a bare "name" (compression off) is looked up
 * by name. -errno on a malformed value or no memory. */
static long file_index(struct file_table *t, char *v) {
        v[strcspn(v, "\n")] = 0;
        if (*v == '(') {
                char *end;
                long id = strtol(v + 1, &end, 10);
                if (*end != ')' || id < 0 || id > 1000000)
                        return -EPROTO;
                if (table_slot(t, (size_t)id) < 0)
                        return -ENOMEM;
                if (end[1] == ' ' && !t->v[id].name && !(t->v[id].name = strdup(end + 2)))
                        return -ENOMEM;
                return id;
        }
        for (size_t i = 0; i < t->n; i++)
                if (t->v[i].name && strcmp(t->v[i].name, v) == 0)
                        return (long)i;
        size_t i = t->n;
        if (table_slot(t, i) < 0 || !(t->v[i].name = strdup(v)))
                return -ENOMEM;
        return (long)i;
}

/* The first event's cost on a cost line: after `positions` position
 * fields ("+3", "-1", "*" or a number each); 0 if the line gives none. */
static uint64_t line_cost(const char *line, unsigned positions) {
        const char *p = line;
        for (unsigned i = 0; i < positions; i++) {
                p += strcspn(p, " \n");
                p += strspn(p, " ");
        }
        return *p >= '0' && *p <= '9' ? strtoull(p, NULL, 10) : 0;
}

static bool starts(const char *line, const char *key) {
        return strncmp(line, key, strlen(key)) == 0;
}

/* One line of the profile into t; *fl the current function's file, *call
 * whether the previous line was a `calls=` line. */
static int read_line(struct file_table *t, char *line, unsigned positions, long *fl, bool *call, uint64_t *total) {
        char c = line[0];
        uint64_t v;
        if ((c >= '0' && c <= '9') || c == '+' || c == '-' || c == '*') {
                uint64_t ir = line_cost(line, positions);
                if (!*call && *fl >= 0)
                        t->v[*fl].ir += ir;
                *call = false;
                return 0;
        }
        long id = 0;
        if (starts(line, "fl="))
                id = *fl = file_index(t, line + 3);
        else if (starts(line, "fi=") || starts(line, "fe="))
                id = file_index(t, line + 3); /* inlined here: still *fl's cost */
        else if (starts(line, "cfl=") || starts(line, "cfi="))
                id = file_index(t, line + 4);
        else if (starts(line, "calls="))
                *call = true;
        else if (sscanf(line, "summary: %" SCNu64, &v) == 1 || (!*total && sscanf(line, "totals: %" SCNu64, &v) == 1))
                *total = v;
        return id < 0 ? (int)id : 0;
}

int cg_files_read(const char *path, struct cg_files *ret) {
        memset(ret, 0, sizeof(*ret));
        FILE *f = fopen(path, "r");
        if (!f)
                return -errno;
        struct file_table t = { 0 };
        char *line = NULL;
        size_t cap = 0;
        unsigned positions = 1;
        long fl = -1;
        bool call = false, events = false;
        int err = 0;
        while (err == 0 && getline(&line, &cap, f) >= 0) {
                if (starts(line, "positions:")) {
                        positions = 0;
                        for (char *w = strtok(line + 10, " \n"); w; w = strtok(NULL, " \n"))
                                positions++;
                } else if (starts(line, "events:")) {
                        /* Ir first, as callgrind writes it by default. */
                        events = strncmp(line + 7 + strspn(line + 7, " "), "Ir", 2) == 0;
                        if (!events)
                                err = -EPROTO;
                } else {
                        err = read_line(&t, line, positions, &fl, &call, &ret->total);
                }
        }
        if (err == 0 && ferror(f))
                err = -EIO; /* a read that failed is not the file's end */
        free(line);
        fclose(f);
        if (err == 0 && !events)
                err = -EPROTO;
        if (err < 0) {
                struct cg_files tmp = { t.v, t.n, 0 };
                cg_files_free(&tmp);
                return err;
        }
        ret->v = t.v;
        ret->n = t.n;
        return 0;
}

uint64_t cg_profile_total(const char *path) {
        FILE *f = fopen(path, "r");
        if (!f)
                return 0;
        char line[512];
        uint64_t summary = 0, totals = 0, v;
        while (fgets(line, sizeof(line), f)) {
                if (sscanf(line, "summary: %" SCNu64, &v) == 1)
                        summary = v;
                else if (sscanf(line, "totals: %" SCNu64, &v) == 1)
                        totals = v;
        }
        fclose(f);
        return summary ? summary : totals;
}

/* "fn=(ID) NAME", "fn=(ID)" or "fn=NAME" (name compression on or off):
 * is it fn? *id remembers fn's ID once a definition names it. */
static bool names_fn(const char *v, const char *fn, long *id) {
        size_t n = strlen(fn);
        if (*v != '(')
                return strncmp(v, fn, n) == 0 && (v[n] == '\n' || v[n] == 0);
        char *end;
        long this = strtol(v + 1, &end, 10);
        if (*end != ')')
                return false;
        if (end[1] == ' ' && strncmp(end + 2, fn, n) == 0 && (end[2 + n] == '\n' || end[2 + n] == 0))
                *id = this;
        return this == *id;
}

uint64_t cg_function_inclusive(const char *path, const char *fn) {
        FILE *f = fopen(path, "r");
        if (!f)
                return 0;
        char line[4096];
        long id = -1;
        bool in_fn = false, call = false, call_to_self = false;
        uint64_t sum = 0;
        while (fgets(line, sizeof(line), f)) {
                char c = line[0];
                if (strncmp(line, "fn=", 3) == 0)
                        in_fn = names_fn(line + 3, fn, &id);
                else if (strncmp(line, "cfn=", 4) == 0)
                        call_to_self = names_fn(line + 4, fn, &id);
                else if (strncmp(line, "calls=", 6) == 0)
                        call = true;
                else if ((c >= '0' && c <= '9') || c == '+' || c == '-' || c == '*') {
                        /* "POSITION IR": fn's own cost, or (after calls=) the
                         * inclusive cost of the call it makes. */
                        const char *sp = strchr(line, ' ');
                        if (in_fn && sp && !(call && call_to_self))
                                sum += strtoull(sp + 1, NULL, 10);
                        call = false;
                }
        }
        fclose(f);
        return sum;
}

void cg_files_free(struct cg_files *f) {
        for (size_t i = 0; i < f->n; i++)
                free(f->v[i].name);
        free(f->v);
        memset(f, 0, sizeof(*f));
}
