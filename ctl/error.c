/* SPDX-License-Identifier: MIT */
/* hbgctl's failures (ctl/error.h): the last one is kept for the JSON
 * error object; client-chosen text is escaped for the terminal
 * (common/text.h). */
#include "ctl/error.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "common/text.h"

static struct {
        int err;
        char message[512];
        bool set;
} last_error;
static bool errors_quiet;

void ctl_errors_quiet(bool quiet) {
        errors_quiet = quiet;
}

int ctl_error(int err, const char *fmt, ...) {
        if (errors_quiet)
                return err;
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(last_error.message, sizeof(last_error.message), fmt, ap);
        va_end(ap);
        last_error.err = err;
        last_error.set = true;
        char shown[4 * sizeof(last_error.message)];
        fprintf(stderr, "hbgctl: %s\n", ctl_shown(last_error.message, shown, sizeof(shown)));
        return err;
}

const char *ctl_shown(const char *s, char *buf, size_t sz) {
        text_copy_str(buf, sz, s, TEXT_TERMINAL);
        return buf;
}

json_object *ctl_error_json(int exit_code) {
        json_object *e = json_object_new_object();
        json_object_object_add(e, "code", json_object_new_int(last_error.set ? last_error.err : 0));
        json_object_object_add(e, "exit", json_object_new_int(exit_code));
        if (last_error.set && last_error.err < 0) {
                const char *name = strerrorname_np(-last_error.err);
                json_object_object_add(e, "errno", name ? json_object_new_string(name) : NULL);
        }
        json_object_object_add(e, "message",
                               json_object_new_string(last_error.set ? last_error.message : "failed"));
        return e;
}
