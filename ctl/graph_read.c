/* SPDX-License-Identifier: MIT */
/* Reading a graph file's values, and the plan's errors and name
 * (ctl/graph_read.h). */
#include "ctl/graph_read.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ctl/graph_file.h"

static const char *jpath_text(const struct jpath *at, char *buf, size_t len) {
        if (at->text)
                return at->text;
        int n = snprintf(buf, len, "$.tasks[%zu]", at->task);
        if (at->key && n >= 0 && (size_t)n < len)
                n += snprintf(buf + n, len - (size_t)n, ".%s", at->key);
        if (at->index != NO_INDEX && n >= 0 && (size_t)n < len)
                snprintf(buf + n, len - (size_t)n, "[%zu]", at->index);
        return buf;
}

/* An error of the file at its JSON path: kept (every one is reported),
 * the first also in p->err. Returns -EINVAL. */
int graph_read_error(struct plan *p, const struct jpath *at, const char *fmt, ...) {
        char msg[sizeof(p->err)], path[96];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(msg, sizeof(msg), fmt, ap);
        va_end(ap);
        graph_file_error(p, jpath_text(at, path, sizeof(path)), msg, "hbgctl");
        return -EINVAL;
}

void graph_file_error(struct plan *p, const char *path, const char *msg, const char *by) {
        if (!p->errors && !p->err[0])
                snprintf(p->err, sizeof(p->err), "%s: %s: %s", graph_file_name(p), path, msg);
        if (!p->errors && !(p->errors = json_object_new_array()))
                return;
        json_object *e = json_object_new_object();
        json_object_object_add(e, "path", json_object_new_string(path));
        json_object_object_add(e, "message", json_object_new_string(msg));
        json_object_object_add(e, "by", json_object_new_string(by));
        json_object_array_add(p->errors, e);
}

size_t graph_file_n_errors(const struct plan *p) {
        return p->errors ? json_object_array_length(p->errors) : 0;
}

const char *graph_read_type_name(json_object *o) {
        return o ? json_type_to_name(json_object_get_type(o)) : "null";
}

/* Key k's place in the NULL-terminated list keys (that of the NULL when
 * it is not there). */
size_t graph_read_key_index(const char *const *keys, const char *k) {
        size_t i = 0;
        while (keys[i] && strcmp(keys[i], k) != 0)
                i++;
        return i;
}

/* Keys of object o must be among the NULL-terminated list. */
int graph_read_check_keys(struct plan *p, json_object *o, const struct jpath *at, const char *const *keys) {
        json_object_object_foreach(o, k, v) {
                (void)v;
                if (!keys[graph_read_key_index(keys, k)])
                        return graph_read_error(p, at, "unknown key \"%s\"", k);
        }
        return 0;
}

int graph_read_number(struct plan *p, json_object *o, const struct jpath *at, double *ret) {
        json_type t = json_object_get_type(o);
        if (t != json_type_int && t != json_type_double)
                return graph_read_error(p, at, "expected a number, got %s", graph_read_type_name(o));
        *ret = json_object_get_double(o);
        return 0;
}

int graph_read_uint(struct plan *p, json_object *o, const struct jpath *at, uint64_t max, uint64_t *ret) {
        if (json_object_get_type(o) != json_type_int)
                return graph_read_error(p, at, "expected an integer, got %s", graph_read_type_name(o));
        const char *s = json_object_get_string(o);
        if (s[0] == '-')
                return graph_read_error(p, at, "expected a non-negative integer, got %s", s);
        errno = 0;
        uint64_t v = strtoull(s, NULL, 10);
        if (errno || v > max)
                return graph_read_error(p, at, "%s is out of range (at most %" PRIu64 ")", s, max);
        *ret = v;
        return 0;
}

/* "name" or "name[lo:hi]" (elements) or, with single, "name[i]". */
int graph_read_ref(struct plan *p, const char *s, const struct jpath *at, bool single, hbg_tensor *ret) {
        const char *br = strchr(s, '[');
        size_t nl = br ? (size_t)(br - s) : strlen(s);
        char name[256];
        if (nl == 0 || nl >= sizeof(name))
                return graph_read_error(p, at, "\"%s\" is not a tensor name", s);
        memcpy(name, s, nl);
        name[nl] = 0;
        json_object *ix;
        if (!json_object_object_get_ex(p->tensor_index, name, &ix)) {
                /* A tensor with errors of its own: reported there. */
                if (p->broken_tensors && json_object_object_get_ex(p->broken_tensors, name, NULL))
                        return -EINVAL;
                return graph_read_error(p, at,
                                        "unknown tensor \"%s\" (not in \"tensors\"; only a tensor used "
                                        "through element ranges alone may be left out)",
                                        name);
        }
        const struct gtensor *t = &p->tensors[json_object_get_int(ix)];
        uint64_t lo = 0, hi = t->len;
        if (br) {
                char *end;
                const char *q = br + 1;
                if (*q < '0' || *q > '9')
                        return graph_read_error(p, at, "bad range in \"%s\": expected name[lo:hi]", s);
                errno = 0;
                lo = strtoull(q, &end, 10);
                if (*end == ']' && single) {
                        hi = lo + 1;
                } else {
                        if (*end != ':' || end[1] < '0' || end[1] > '9')
                                return graph_read_error(p, at, "bad range in \"%s\": expected %s", s,
                                            single ? "name[i]" : "name[lo:hi]");
                        hi = strtoull(end + 1, &end, 10);
                }
                if (errno || *end != ']' || end[1])
                        return graph_read_error(p, at, "bad range in \"%s\": expected %s", s,
                                    single ? "name[i]" : "name[lo:hi]");
                if (lo >= hi || hi > t->len)
                        return graph_read_error(p, at,
                                    "bad range in \"%s\": need lo < hi <= %" PRIu64
                                    " (the length of %s)",
                                    s, t->len, name);
        }
        if (single && hi - lo != 1)
                return graph_read_error(p, at, "\"%s\" must be one element, e.g. %s[0]", s, name);
        return hbg_tensor_slice_f32(t->t, lo, hi, ret) < 0
                       ? graph_read_error(p, at, "bad range in \"%s\"", s)
                       : 0;
}

int graph_file_ref(struct plan *p, const char *s, const char *path, bool single, hbg_tensor *ret) {
        return graph_read_ref(p, s, AT_TEXT(path), single, ret);
}

const char *graph_file_name(const struct plan *p) {
        return strcmp(p->file, "-") == 0 ? "<stdin>" : p->file;
}
