/* SPDX-License-Identifier: MIT */
/* The one main() of the Check tests (tests/check_main.c). A test file
 * defines `const struct check_main check_main = { ... }`: the suite it runs
 * and, when it needs them, what to do before and after. The runner builds
 * the suite, runs it (CK_RUN_SUITE and CK_RUN_CASE select as usual) and
 * exits 0 when everything passed, 1 when a test or the setup failed, or
 * CHECK_SKIP (77, a skip to tests/scripts/run-tests.sh) when the tests that
 * ran passed but some could not run here. */
#pragma once

#include <check.h>
#include <stdbool.h>

/* The exit status of a test that could not run (Automake's convention). */
#define CHECK_SKIP 77

struct check_main {
        /* The suite; built after setup, so it may depend on what setup found. */
        Suite *(*suite)(void);
        /* Clients that lose hbgd must see errors, not die of SIGPIPE. */
        bool ignore_sigpipe;
        /* Optional, before the suite is built: 0 to go on, CHECK_SKIP to skip
         * the whole test (it says why on stderr), anything else fails it
         * (no teardown then). */
        int (*setup)(void);
        /* Optional, after the run whatever its result. */
        void (*teardown)(void);
        /* Optional, after a run without failures: 0, or CHECK_SKIP when tests
         * were left out (it says which on stderr). */
        int (*skipped)(void);
};

/* Defined by each test file. */
extern const struct check_main check_main;
