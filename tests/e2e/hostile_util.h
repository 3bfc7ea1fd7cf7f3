/* SPDX-License-Identifier: MIT */
/*
 * hostile_util.c: what the hostile-client tests share (test_e2e_hostile,
 * test_e2e_hostile_engine, test_e2e_hostile_limits, test_e2e_hostile_fair):
 * a child's session by hand, a recording of no-op tasks, a session
 * request, and the adding of tests that need root.
 */
#pragma once

#include <check.h>
#include <stdbool.h>
#include <stddef.h>

#include "tests/check_main.h"
#include "tests/e2e/e2e_util.h"

/* hbgd's configuration of small sessions (1024 tasks and flags, 1 MiB). */
#define SMALL_SESSIONS "[session]\ntask_window = 1024\nflag_window = 1024\nheap_size = 1M\n"

/* In a child: a connection with a session (its fds in fds[]); the
 * socket, or -1 after telling the parent why. */
int kid_session(int sock, const char *path, int fds[SESSION_FDS]);
/* A sealed memfd of n no-op recorded tasks, or -1. */
int recording_of(size_t n);
/* A session request on connection fd (its reply not read). */
void session_request(int fd);

/* A case of s named `name` (CK_RUN_CASE=name runs it alone), 300 s. */
TCase *hostile_case(Suite *s, const char *name);
/* Test t into tc: once (loops 0), or for _i in [0, loops). A test that
 * acts as another uid (needs_root) is left out when not root, said on
 * stderr and counted for hostile_skipped(). */
void hostile_add(TCase *tc, const TTest *t, bool needs_root, int loops);
/* check_main's skipped(): CHECK_SKIP if a test was left out, else 0. */
int hostile_skipped(void);

/* A hostile test binary's check_main (tests/check_main.h): hbgd's helpers
 * set up and cleaned up, SIGPIPE ignored, skipped tests said. */
#define HOSTILE_CHECK_MAIN(suite_fn) \
        const struct check_main check_main = { .suite = (suite_fn), .ignore_sigpipe = true, \
                                               .setup = daemon_util_setup, .teardown = daemon_util_cleanup, \
                                               .skipped = hostile_skipped }
