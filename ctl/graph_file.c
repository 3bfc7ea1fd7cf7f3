/* SPDX-License-Identifier: MIT */
/*
 * The graph-file compiler (docs/GRAPH_FILES.md): a JSON document, checked
 * as a whole first (every error names its JSON path), then turned into
 * hbg_tasks one at a time. Kernel signatures come from the plan's kernel
 * table: the running hbgd's (run.c fetches it) or the built-ins.
 */
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "ctl/graph_file.h"
#include "ctl/graph_read.h"
#include "ctl/graph_tensors.h"
#include "common/kernel_sig.h"

/*
 * The kernel's rules between its tensors (pass 2, tensors placed): the
 * check libhbgclient makes in hbg_graph_add() and hbgd in its validation
 * (common/kernel_sig.h, one implementation), said in the file's terms: the
 * argument's path and element counts.
 */
static int check_kernel_rules(struct plan *p, size_t i, const struct hbg_kernel_sig *sg, const hbg_task *t) {
        if (!sg || sg->n_tensors == 0)
                return 0;
        struct hbg_kernel_tensor kt[HBG_MAX_TENSOR_ARGS];
        for (unsigned a = 0; a < sg->n_tensors; a++)
                kt[a] = (struct hbg_kernel_tensor){ t->args[a].tensor.offset, t->args[a].tensor.bytes };
        unsigned a, b;
        enum hbg_kernel_tensor_problem pr = kernel_sig_check_tensors(sg, kt, &a, &b);
        if (pr == HBG_TENSORS_OK)
                return 0;
        if (pr == HBG_TENSORS_OVERLAP)
                return graph_read_error(p, AT_ELEM(i, "args", a), "%s: %s (argument %u) overlaps %s (argument %u)%s", sg->name,
                            sg->tensors[a].name, a, sg->tensors[b].name, b,
                            sg->in_place ? ": an output may share only the very same range with an input"
                                         : ": outputs of this kernel may not overlap other tensors");
        return graph_read_error(p, AT_ELEM(i, "args", a),
                    "%s: %s (argument %u) has %" PRIu64 " elements, %s (argument %u) %" PRIu64 ": %s",
                    sg->name, sg->tensors[a].name, a, kt[a].length / 4, sg->tensors[b].name, b,
                    kt[b].length / 4, sg->length_rule);
}

/* A task object's members, found in one walk over the object rather than
 * a hashed lookup per key (every task is read twice). */
enum { M_NAME, M_KERNEL, M_ARGS, M_SCALARS, M_BLOCKS, M_LANES, M_AFTER, M_WHEN, M_COUNT };
static const char *const task_keys[M_COUNT + 1] = { "name",  "kernel", "args",  "scalars", "blocks",
                                                    "lanes", "after",  "when",  NULL };
struct members {
        unsigned present;        /* a bit per M_: the key is there */
        json_object *v[M_COUNT]; /* its value (NULL: absent, or JSON null) */
        const char *unknown;     /* the first key not among task_keys */
};

static void task_members(json_object *o, struct members *m) {
        *m = (struct members){ 0 };
        json_object_object_foreach(o, k, v) {
                size_t i = graph_read_key_index(task_keys, k);
                if (i == M_COUNT) {
                        if (!m->unknown)
                                m->unknown = k;
                        continue;
                }
                m->present |= 1u << i;
                m->v[i] = v;
        }
}

/* Is member `which` there; its value in *v (NULL for JSON null). */
static bool member(const struct members *m, unsigned which, json_object **v) {
        *v = m->v[which];
        return (m->present >> which) & 1u;
}

/* The task's "name" into p->task_index (pass 1 only): later tasks may name
 * this one in "after" even when it has errors of its own. */
static int task_name(struct plan *p, size_t i, const struct members *m) {
        json_object *v;
        if (p->resolved || !member(m, M_NAME, &v))
                return 0;
        if (!json_object_is_type(v, json_type_string))
                return graph_read_error(p, AT_TASK(i, "name"), "expected a string, got %s", graph_read_type_name(v));
        const char *nm = json_object_get_string(v);
        if (json_object_object_get_ex(p->task_index, nm, NULL))
                return graph_read_error(p, AT_TASK(i, "name"), "task name \"%s\" is used twice", nm);
        json_object_object_add(p->task_index, nm, json_object_new_int64((int64_t)i));
        return 0;
}

/* "kernel": its signature into *ret_sg (NULL: a dummy), its name *ret_name. */
static int task_kernel(struct plan *p, size_t i, const struct members *m, hbg_task *t,
                       const struct hbg_kernel_sig **ret_sg, const char **ret_name) {
        json_object *v;
        if (!member(m, M_KERNEL, &v))
                return graph_read_error(p, AT_TASK(i, NULL), "missing \"kernel\"");
        if (!json_object_is_type(v, json_type_string))
                return graph_read_error(p, AT_TASK(i, "kernel"), "expected a string, got %s", graph_read_type_name(v));
        const char *kname = json_object_get_string(v);
        const struct hbg_kernel_sig *sg = NULL;
        if (strcmp(kname, HBG_KERNEL_NAME_DUMMY) != 0) {
                sg = kernel_table_by_name(&p->kernels, kname);
                if (!sg)
                        return graph_read_error(p, AT_TASK(i, "kernel"),
                                    "unknown kernel \"%s\" (see hbgctl kernels; \"dummy\" only orders)%s%s",
                                    kname, p->kernels_note[0] ? ": " : "", p->kernels_note);
                t->kernel = sg->name;
        }
        *ret_sg = sg;
        *ret_name = kname;
        return 0;
}

/* "args": as many tensor references as the kernel takes. */
static int task_args(struct plan *p, size_t i, const struct members *m, const struct hbg_kernel_sig *sg,
                     const char *kname, hbg_task *t) {
        size_t want = sg ? sg->n_tensors : 0, n = 0;
        json_object *args = NULL;
        if (member(m, M_ARGS, &args)) {
                if (!json_object_is_type(args, json_type_array))
                        return graph_read_error(p, AT_TASK(i, "args"), "expected an array, got %s", graph_read_type_name(args));
                n = json_object_array_length(args);
        }
        if (n != want)
                return graph_read_error(p, AT_TASK(i, NULL), "kernel %s takes %zu tensor argument%s, got %zu", kname, want,
                            want == 1 ? "" : "s", n);
        for (size_t a = 0; a < n; a++) {
                json_object *e = json_object_array_get_idx(args, a);
                if (!json_object_is_type(e, json_type_string))
                        return graph_read_error(p, AT_ELEM(i, "args", a), "expected a string, got %s", graph_read_type_name(e));
                int err = graph_read_ref(p, json_object_get_string(e), AT_ELEM(i, "args", a), false, &t->args[a].tensor);
                if (err < 0)
                        return err;
                t->args[a].dir = (enum hbg_dir)sg->tensors[a].dir;
        }
        t->n_args = (uint8_t)n;
        return 0;
}

/* "scalars": as many as the kernel takes, each of its kind. */
static int task_scalars(struct plan *p, size_t i, const struct members *m, const struct hbg_kernel_sig *sg,
                        const char *kname, hbg_task *t) {
        size_t want = sg ? sg->n_scalars : 0, n = 0;
        json_object *sc = NULL;
        if (member(m, M_SCALARS, &sc)) {
                if (!json_object_is_type(sc, json_type_array))
                        return graph_read_error(p, AT_TASK(i, "scalars"), "expected an array, got %s", graph_read_type_name(sc));
                n = json_object_array_length(sc);
        }
        if (n != want)
                return graph_read_error(p, AT_TASK(i, NULL), "kernel %s takes %zu scalar%s, got %zu", kname, want,
                            want == 1 ? "" : "s", n);
        for (size_t s = 0; s < n; s++) {
                json_object *e = json_object_array_get_idx(sc, s);
                const struct jpath *at = AT_ELEM(i, "scalars", s);
                int err = 0;
                if (sg->scalars[s].kind == HBG_SCALAR_F32) {
                        double d = 0; /* set by graph_read_number() unless it fails */
                        err = graph_read_number(p, e, at, &d);
                        t->scalars[s] = hbg_f32((float)d);
                } else if (sg->scalars[s].kind == HBG_SCALAR_U64) {
                        err = graph_read_uint(p, e, at, UINT64_MAX, &t->scalars[s]);
                } else {
                        if (json_object_get_type(e) != json_type_int)
                                return graph_read_error(p, at, "expected an integer, got %s", graph_read_type_name(e));
                        errno = 0;
                        int64_t x = json_object_get_int64(e);
                        if (errno)
                                return graph_read_error(p, at, "integer out of range");
                        t->scalars[s] = (uint64_t)x;
                }
                if (err < 0)
                        return err;
        }
        t->n_scalars = (uint8_t)n;
        return 0;
}

/* "blocks" and "lanes": a kernel's only. */
static int task_placement(struct plan *p, size_t i, const struct members *m, const struct hbg_kernel_sig *sg,
                          hbg_task *t) {
        json_object *v;
        if (member(m, M_BLOCKS, &v)) {
                uint64_t b;
                int err = graph_read_uint(p, v, AT_TASK(i, "blocks"), 4096, &b);
                if (err < 0)
                        return err;
                if (b == 0)
                        return graph_read_error(p, AT_TASK(i, "blocks"), "must be 1..4096");
                if (!sg && b != 1)
                        return graph_read_error(p, AT_TASK(i, "blocks"), "a dummy task has no blocks");
                t->blocks = (uint16_t)b;
        }
        if (member(m, M_LANES, &v)) {
                const char *s = json_object_is_type(v, json_type_string) ? json_object_get_string(v) : NULL;
                if (!s)
                        return graph_read_error(p, AT_TASK(i, "lanes"), "expected a string, got %s", graph_read_type_name(v));
                if (!sg)
                        return graph_read_error(p, AT_TASK(i, "lanes"), "a dummy task has no lanes");
                if (strcmp(s, "aiv") == 0)
                        t->lanes = HBG_LANES_AIV;
                else if (strcmp(s, "aic") == 0)
                        t->lanes = HBG_LANES_AIC;
                else if (strcmp(s, "mix") == 0)
                        t->lanes = HBG_LANES_MIX;
                else
                        return graph_read_error(p, AT_TASK(i, "lanes"), "unknown lanes \"%s\" (aiv, aic, mix)", s);
        }
        return 0;
}

/* "when": the predicate, one element. */
static int task_when(struct plan *p, size_t i, const struct members *m, hbg_task *t) {
        json_object *v;
        if (!member(m, M_WHEN, &v))
                return 0;
        if (!json_object_is_type(v, json_type_string))
                return graph_read_error(p, AT_TASK(i, "when"), "expected a string, got %s", graph_read_type_name(v));
        int err = graph_read_ref(p, json_object_get_string(v), AT_TASK(i, "when"), true, &t->predicate);
        if (err < 0)
                return err;
        t->has_predicate = 1;
        return 0;
}

/* "after": names of earlier tasks, as their file indices. */
static int task_after(struct plan *p, size_t i, const struct members *m, hbg_task *t) {
        json_object *v;
        if (!member(m, M_AFTER, &v))
                return 0;
        if (!json_object_is_type(v, json_type_array))
                return graph_read_error(p, AT_TASK(i, "after"), "expected an array, got %s", graph_read_type_name(v));
        size_t n = json_object_array_length(v);
        if (n > HBG_MAX_TASK_DEPS)
                return graph_read_error(p, AT_TASK(i, "after"), "at most %d tasks", HBG_MAX_TASK_DEPS);
        for (size_t a = 0; a < n; a++) {
                json_object *e = json_object_array_get_idx(v, a), *ix;
                if (!json_object_is_type(e, json_type_string))
                        return graph_read_error(p, AT_ELEM(i, "after", a), "expected a string, got %s", graph_read_type_name(e));
                const char *dn = json_object_get_string(e);
                if (!json_object_object_get_ex(p->task_index, dn, &ix) || (size_t)json_object_get_int64(ix) >= i)
                        return graph_read_error(p, AT_ELEM(i, "after", a), "\"%s\" is not the name of an earlier task", dn);
                t->deps[a] = (uint64_t)json_object_get_int64(ix);
        }
        t->n_deps = (uint8_t)n;
        return 0;
}

/*
 * Build task i of the file into *t. Pass 1 (graph_file_parse) checks and
 * indexes the names; pass 2 (p->resolved: tensors allocated) builds. The
 * deps are the file indices of earlier tasks: the caller turns them into
 * task ids as it adds the tasks.
 */
int graph_file_task(struct plan *p, size_t i, hbg_task *t) {
        json_object *o = json_object_array_get_idx(p->tasks, i);
        if (!json_object_is_type(o, json_type_object))
                return graph_read_error(p, AT_TASK(i, NULL), "expected an object, got %s", graph_read_type_name(o));
        struct members m;
        task_members(o, &m);
        int err = task_name(p, i, &m);
        if (err == 0 && m.unknown)
                err = graph_read_error(p, AT_TASK(i, NULL), "unknown key \"%s\"", m.unknown);
        if (err < 0)
                return err;
        *t = (hbg_task){ 0 };
        const struct hbg_kernel_sig *sg = NULL;
        const char *kname = NULL;
        if ((err = task_kernel(p, i, &m, t, &sg, &kname)) < 0 || (err = task_args(p, i, &m, sg, kname, t)) < 0 ||
            (err = task_scalars(p, i, &m, sg, kname, t)) < 0 || (err = task_placement(p, i, &m, sg, t)) < 0 ||
            (err = task_when(p, i, &m, t)) < 0 || (err = task_after(p, i, &m, t)) < 0)
                return err;
        return p->resolved ? check_kernel_rules(p, i, sg, t) : 0;
}

bool graph_file_names_unknown_kernel(const struct plan *p) {
        json_object *tasks, *kernel;
        if (!json_object_is_type(p->root, json_type_object) || !json_object_object_get_ex(p->root, "tasks", &tasks) ||
            !json_object_is_type(tasks, json_type_array))
                return false;
        size_t n = json_object_array_length(tasks);
        for (size_t i = 0; i < n; i++) {
                json_object *t = json_object_array_get_idx(tasks, i);
                if (!json_object_is_type(t, json_type_object) || !json_object_object_get_ex(t, "kernel", &kernel) ||
                    !json_object_is_type(kernel, json_type_string))
                        continue;
                const char *name = json_object_get_string(kernel);
                if (strcmp(name, HBG_KERNEL_NAME_DUMMY) != 0 && !kernel_table_by_name(&p->kernels, name))
                        return true;
        }
        return false;
}

int graph_file_parse(struct plan *p) {
        if (!json_object_is_type(p->root, json_type_object))
                return graph_read_error(p, AT_TEXT("$"), "expected an object, got %s", graph_read_type_name(p->root));
        static const char *const keys[] = { "tensors", "tasks", "outputs", NULL };
        graph_read_check_keys(p, p->root, AT_TEXT("$"), keys);
        /* A tensor's errors stop nothing: the tasks are checked too. */
        if (graph_tensors_parse(p) < 0 && !p->tensor_index)
                return -EINVAL;
        if (!json_object_object_get_ex(p->root, "tasks", &p->tasks))
                return graph_read_error(p, AT_TEXT("$"), "missing \"tasks\"");
        if (!json_object_is_type(p->tasks, json_type_array))
                return graph_read_error(p, AT_TEXT("$.tasks"), "expected an array, got %s", graph_read_type_name(p->tasks));
        p->n_tasks = json_object_array_length(p->tasks);
        if (p->n_tasks == 0)
                return graph_read_error(p, AT_TEXT("$.tasks"), "no tasks");
        p->task_index = json_object_new_object();
        p->bad = calloc(p->n_tasks, sizeof(*p->bad));
        if (!p->task_index || !p->bad)
                return graph_read_error(p, AT_TEXT("$.tasks"), "out of memory");
        /* Every task checked, whatever the others' errors. */
        for (size_t i = 0; i < p->n_tasks; i++) {
                hbg_task t;
                p->bad[i] = graph_file_task(p, i, &t) < 0;
        }
        if (json_object_object_get_ex(p->root, "outputs", &p->outputs)) {
                if (!json_object_is_type(p->outputs, json_type_array))
                        return graph_read_error(p, AT_TEXT("$.outputs"), "expected an array, got %s",
                                    graph_read_type_name(p->outputs));
                for (size_t i = 0; i < json_object_array_length(p->outputs); i++) {
                        json_object *e = json_object_array_get_idx(p->outputs, i);
                        char sub[64];
                        hbg_tensor dummy;
                        snprintf(sub, sizeof(sub), "$.outputs[%zu]", i);
                        if (!json_object_is_type(e, json_type_string))
                                return graph_read_error(p, AT_TEXT(sub), "expected a string, got %s", graph_read_type_name(e));
                        graph_file_ref(p, json_object_get_string(e), sub, false, &dummy);
                }
        }
        return graph_file_n_errors(p) ? -EINVAL : 0;
}


/* The line and column after `used` more bytes: an error's position only,
 * but counted as the document goes by (the buffer is read again). */
static void advance_position(const char *buf, size_t used, size_t *line, size_t *col) {
        const char *at = buf, *end = buf + used, *nl;
        while ((nl = memchr(at, '\n', (size_t)(end - at))) != NULL) {
                ++*line;
                *col = 1;
                at = nl + 1;
        }
        *col += (size_t)(end - at);
}

int graph_file_load(struct plan *p) {
        const char *name = graph_file_name(p);
        bool is_stdin = strcmp(p->file, "-") == 0;
        FILE *f = is_stdin ? stdin : fopen(p->file, "r");
        if (!f) {
                int err = -errno;
                snprintf(p->err, sizeof(p->err), "%s: %s", name, strerror(-err));
                return err;
        }
        /* fopen() opens a directory; its first read fails (EISDIR). */
        struct stat st;
        if (fstat(fileno(f), &st) == 0 && S_ISDIR(st.st_mode)) {
                snprintf(p->err, sizeof(p->err), "%s: is a directory, not a graph file (a JSON document)", name);
                if (!is_stdin)
                        fclose(f);
                return -EISDIR;
        }
        size_t total = 0;
        json_tokener *tok = json_tokener_new();
        json_tokener_set_flags(tok, JSON_TOKENER_STRICT);
        char buf[65536];
        size_t n, line = 1, col = 1;
        enum json_tokener_error jerr = json_tokener_continue;
        while (!p->root && (n = fread(buf, 1, sizeof(buf), f)) > 0) {
                /* A file has a size; a pipe may never end. */
                total += n;
                if (is_stdin && total > GRAPH_FILE_STDIN_MAX) {
                        snprintf(p->err, sizeof(p->err), "%s: a graph file on standard input may be at most %zu MiB",
                                 name, GRAPH_FILE_STDIN_MAX >> 20);
                        jerr = json_tokener_error_size;
                        break;
                }
                p->root = json_tokener_parse_ex(tok, buf, (int)n);
                jerr = json_tokener_get_error(tok);
                size_t used = p->root || jerr != json_tokener_continue
                                      ? json_tokener_get_parse_end(tok) : n;
                advance_position(buf, used < n ? used : n, &line, &col);
                if (jerr != json_tokener_success && jerr != json_tokener_continue)
                        break;
                if (p->root) {
                        /* only white space may follow */
                        for (size_t k = used; k < n; k++)
                                if (buf[k] != ' ' && buf[k] != '\n' && buf[k] != '\t' && buf[k] != '\r') {
                                        snprintf(p->err, sizeof(p->err),
                                                 "%s:%zu:%zu: invalid JSON: text after the document",
                                                 name, line, col);
                                        jerr = json_tokener_error_parse_unexpected;
                                        break;
                                }
                }
        }
        int rerr = ferror(f) ? (errno ? errno : EIO) : 0;
        if (!is_stdin)
                fclose(f);
        json_tokener_free(tok);
        if (rerr) {
                snprintf(p->err, sizeof(p->err), "%s: cannot read it: %s", name, strerror(rerr));
                return -rerr;
        }
        if (p->root && jerr == json_tokener_success)
                return 0;
        if (!p->err[0]) {
                if (jerr == json_tokener_continue || jerr == json_tokener_success)
                        snprintf(p->err, sizeof(p->err), "%s:%zu:%zu: invalid JSON: unexpected end of file",
                                 name, line, col);
                else
                        snprintf(p->err, sizeof(p->err), "%s:%zu:%zu: invalid JSON: %s", name,
                                 line, col, json_tokener_error_desc(jerr));
        }
        return jerr == json_tokener_error_size ? -EFBIG : -EINVAL;
}

const char *graph_file_task_name(struct plan *p, size_t i, char *buf, size_t sz) {
        json_object *o = json_object_array_get_idx(p->tasks, i), *v;
        if (json_object_object_get_ex(o, "name", &v))
                return json_object_get_string(v);
        snprintf(buf, sz, "tasks[%zu]", i);
        return buf;
}

void graph_file_free(struct plan *p) {
        kernel_table_free(&p->kernels);
        free(p->bad);
        json_object_put(p->errors);
        json_object_put(p->broken_tensors);
        free(p->ids);
        free(p->compiled);
        free(p->tensors);
        json_object_put(p->tensor_index);
        json_object_put(p->implicit);
        json_object_put(p->task_index);
        json_object_put(p->root);
}
