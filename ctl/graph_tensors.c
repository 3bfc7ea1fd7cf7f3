/* SPDX-License-Identifier: MIT */
/*
 * A graph file's tensors (docs/GRAPH_FILES.md): those "tensors" declares,
 * and those the file uses only through element ranges without declaring
 * them, indexed by name for the compiler (graph_file.c).
 */
#include "ctl/graph_tensors.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/grow.h"
#include "ctl/graph_file.h"
#include "ctl/graph_read.h"

static int parse_tensor(struct plan *p, const char *name, json_object *spec, struct gtensor *t);
static int declare_implicit(struct plan *p, json_object *ts);

int graph_tensors_parse(struct plan *p) {
        json_object *ts;
        if (!json_object_object_get_ex(p->root, "tensors", &ts))
                return graph_read_error(p, AT_TEXT("$"), "missing \"tensors\"");
        if (!json_object_is_type(ts, json_type_object))
                return graph_read_error(p, AT_TEXT("$.tensors"), "expected an object, got %s", graph_read_type_name(ts));
        size_t n = (size_t)json_object_object_length(ts), i = 0;
        p->tensors = calloc(n ? n : 1, sizeof(*p->tensors));
        p->tensor_index = json_object_new_object();
        if (!p->tensors || !p->tensor_index)
                return graph_read_error(p, AT_TEXT("$.tensors"), "out of memory");
        p->cap_tensors = n ? n : 1;
        p->broken_tensors = json_object_new_object();
        if (!p->broken_tensors)
                return graph_read_error(p, AT_TEXT("$.tensors"), "out of memory");
        json_object_object_foreach(ts, name, spec) {
                /* Every tensor checked: one with errors is left out of the
                 * index (tasks naming it say nothing more about it). */
                if (parse_tensor(p, name, spec, &p->tensors[i]) < 0) {
                        json_object_object_add(p->broken_tensors, name, NULL);
                        continue;
                }
                json_object_object_add(p->tensor_index, name, json_object_new_int((int)i));
                i++;
        }
        p->n_tensors = i;
        int err = declare_implicit(p, ts);
        if (err < 0)
                return err;
        return graph_file_n_errors(p) ? -EINVAL : 0;
}

/* The end of a range reference, "name[lo:hi]" (or, single, "name[i]"),
 * with its name's length in *ret_nl; 0 for a whole tensor or a malformed
 * range (graph_read_ref() says what is wrong with it). */
static uint64_t range_end(const char *s, bool single, size_t *ret_nl) {
        const char *br = strchr(s, '[');
        *ret_nl = br ? (size_t)(br - s) : strlen(s);
        if (!br || br[1] < '0' || br[1] > '9')
                return 0;
        char *end;
        errno = 0;
        uint64_t lo = strtoull(br + 1, &end, 10), hi;
        if (*end == ']' && single)
                hi = lo + 1;
        else if (*end == ':' && end[1] >= '0' && end[1] <= '9')
                hi = strtoull(end + 1, &end, 10);
        else
                return 0;
        return errno || *end != ']' || end[1] || lo >= hi || hi > GRAPH_TENSOR_MAX_LEN ? 0 : hi;
}

/* A reference v of a task or an output to a tensor "tensors" (ts) does
 * not name: its range's end in implicit (the largest), or its name in
 * whole when it is used whole (or its range is malformed). */
static void note_undeclared(json_object *ts, json_object *v, bool single, json_object *implicit, json_object *whole) {
        if (!v || !json_object_is_type(v, json_type_string))
                return;
        size_t nl;
        uint64_t hi = range_end(json_object_get_string(v), single, &nl);
        char name[256];
        if (nl == 0 || nl >= sizeof(name))
                return;
        memcpy(name, json_object_get_string(v), nl);
        name[nl] = 0;
        if (json_object_object_get_ex(ts, name, NULL))
                return;
        json_object *cur;
        if (!hi)
                json_object_object_add(whole, name, NULL);
        else if (!json_object_object_get_ex(implicit, name, &cur) || (uint64_t)json_object_get_int64(cur) < hi)
                json_object_object_add(implicit, name, json_object_new_int64((int64_t)hi));
}

/*
 * Tensors a file uses only through element ranges without declaring them
 * ("s[0:1]" in args, "p[0]" in when): zero-filled, as long as the largest
 * range's end (docs/GRAPH_FILES.md). One used whole anywhere stays
 * unknown: its length would be a guess. The names live in p->implicit.
 */
static int declare_implicit(struct plan *p, json_object *ts) {
        json_object *tasks, *outputs, *whole = json_object_new_object();
        p->implicit = json_object_new_object();
        if (!whole || !p->implicit) {
                json_object_put(whole);
                return graph_read_error(p, AT_TEXT("$.tensors"), "out of memory");
        }
        size_t n = json_object_object_get_ex(p->root, "tasks", &tasks) && json_object_is_type(tasks, json_type_array)
                           ? json_object_array_length(tasks)
                           : 0;
        for (size_t i = 0; i < n; i++) {
                json_object *task = json_object_array_get_idx(tasks, i), *args, *when;
                if (!json_object_is_type(task, json_type_object))
                        continue;
                if (json_object_object_get_ex(task, "args", &args) && json_object_is_type(args, json_type_array))
                        for (size_t k = 0; k < json_object_array_length(args); k++)
                                note_undeclared(ts, json_object_array_get_idx(args, k), false, p->implicit, whole);
                if (json_object_object_get_ex(task, "when", &when))
                        note_undeclared(ts, when, true, p->implicit, whole);
        }
        if (json_object_object_get_ex(p->root, "outputs", &outputs) && json_object_is_type(outputs, json_type_array))
                for (size_t k = 0; k < json_object_array_length(outputs); k++)
                        note_undeclared(ts, json_object_array_get_idx(outputs, k), false, p->implicit, whole);
        size_t more = 0;
        json_object_object_foreach(p->implicit, counted, end_counted) {
                (void)end_counted;
                more += !json_object_object_get_ex(whole, counted, NULL);
        }
        if (GROW(p->tensors, p->cap_tensors, p->n_tensors + more, p->n_tensors + more) < 0) {
                json_object_put(whole);
                return graph_read_error(p, AT_TEXT("$.tensors"), "out of memory");
        }
        json_object_object_foreach(p->implicit, name, end) {
                if (json_object_object_get_ex(whole, name, NULL))
                        continue;
                uint64_t len = (uint64_t)json_object_get_int64(end);
                p->tensors[p->n_tensors] = (struct gtensor){
                        .name = name, .len = len, .init = INIT_ZERO, .step = 1.0, .t = { 0, len * 4 } };
                json_object_object_add(p->tensor_index, name, json_object_new_int((int)p->n_tensors));
                p->n_tensors++;
        }
        json_object_put(whole);
        return 0;
}

/* Tensor `name` of "tensors" into *t; -EINVAL after its error. */
static int parse_tensor(struct plan *p, const char *name, json_object *spec, struct gtensor *t) {
        static const char *const keys[] = { "len", "init", "value", "start", "step", NULL };
        char path[320];
        snprintf(path, sizeof(path), "$.tensors.%s", name);
        if (!name[0] || strchr(name, '[') || strlen(name) >= 256)
                return graph_read_error(p, AT_TEXT(path), "bad tensor name");
        if (!json_object_is_type(spec, json_type_object))
                return graph_read_error(p, AT_TEXT(path), "expected an object, got %s", graph_read_type_name(spec));
        if (graph_read_check_keys(p, spec, AT_TEXT(path), keys) < 0)
                return -EINVAL;
        t->name = name;
        t->step = 1.0;
        json_object *v;
        char sub[360];
        snprintf(sub, sizeof(sub), "%s.len", path);
        if (!json_object_object_get_ex(spec, "len", &v))
                return graph_read_error(p, AT_TEXT(path), "missing \"len\"");
        if (graph_read_uint(p, v, AT_TEXT(sub), GRAPH_TENSOR_MAX_LEN, &t->len) < 0)
                return -EINVAL;
        if (t->len == 0)
                return graph_read_error(p, AT_TEXT(sub), "must be at least 1");
        t->init = INIT_ZERO;
        if (json_object_object_get_ex(spec, "init", &v)) {
                snprintf(sub, sizeof(sub), "%s.init", path);
                const char *s = json_object_is_type(v, json_type_string)
                                        ? json_object_get_string(v)
                                        : NULL;
                if (!s)
                        return graph_read_error(p, AT_TEXT(sub), "expected a string, got %s", graph_read_type_name(v));
                if (strcmp(s, "zero") == 0)
                        t->init = INIT_ZERO;
                else if (strcmp(s, "fill") == 0)
                        t->init = INIT_FILL;
                else if (strcmp(s, "iota") == 0)
                        t->init = INIT_IOTA;
                else
                        return graph_read_error(p, AT_TEXT(sub), "unknown init \"%s\" (zero, fill, iota)", s);
        }
        if (json_object_object_get_ex(spec, "value", &v)) {
                snprintf(sub, sizeof(sub), "%s.value", path);
                if (t->init != INIT_FILL)
                        return graph_read_error(p, AT_TEXT(sub), "\"value\" is only for \"init\": \"fill\"");
                if (graph_read_number(p, v, AT_TEXT(sub), &t->value) < 0)
                        return -EINVAL;
        } else if (t->init == INIT_FILL) {
                return graph_read_error(p, AT_TEXT(path), "\"init\": \"fill\" needs \"value\"");
        }
        static const char *const iota_keys[] = { "start", "step" };
        double *iota_dst[] = { &t->start, &t->step };
        for (int k = 0; k < 2; k++)
                if (json_object_object_get_ex(spec, iota_keys[k], &v)) {
                        snprintf(sub, sizeof(sub), "%s.%s", path, iota_keys[k]);
                        if (t->init != INIT_IOTA)
                                return graph_read_error(p, AT_TEXT(sub), "\"%s\" is only for \"init\": \"iota\"",
                                            iota_keys[k]);
                        if (graph_read_number(p, v, AT_TEXT(sub), iota_dst[k]) < 0)
                                return -EINVAL;
                }
        t->t = (hbg_tensor){ 0, t->len * 4 };
        return 0;
}
