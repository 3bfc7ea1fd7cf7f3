/* SPDX-License-Identifier: MIT */
/* hbgctl's failures: the message on stderr, remembered for --json's error
 * object, and the exit statuses a verb returns (docs/man/hbgctl.1). */
#pragma once

#include <stdbool.h>
#include <stddef.h>

#include <json-c/json.h>

/* Exit codes a script can use (docs/man/hbgctl.1): 3 also when hbgd is
 * stopping; 4 when this user may not open the socket or hbgd's [access]
 * refuses it. */
enum { EXIT_FAIL = 1, EXIT_USAGE = 2, EXIT_NOT_RUNNING = 3, EXIT_ACCESS = 4 };

/* An error: "hbgctl: MESSAGE" on stderr, remembered for the JSON error
 * object (err: a negative errno or 0). Returns err. */
int ctl_error(int err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* While quiet, ctl_error() neither prints nor remembers (a look at hbgd
 * whose failure does not matter: run --progress). */
void ctl_errors_quiet(bool quiet);
/* The last ctl_error() as {"code", "exit", "message"} (a new object). */
json_object *ctl_error_json(int exit_code);
/* s as a terminal may show it (controls and stray bytes escaped, cut on a
 * boundary to fit sz, 4 * strlen(s) + 1 always fits): buf. */
const char *ctl_shown(const char *s, char *buf, size_t sz);
