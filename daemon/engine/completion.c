/* SPDX-License-Identifier: MIT */
/*
 * The completion policies' table (daemon/engine/completion.h): the one
 * place that lists them. Its order is the modes' numbers; the first is
 * the default (HBG_COMPLETION_DEFAULT): eager-batched, the one that did
 * best across the benchmark's shapes (docs/PERFORMANCE.md, "The default
 * policy"). Eager, the seed's design, follows it and stays selectable.
 * Everything that names modes asks here.
 */
#include "daemon/engine/completion.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

extern const struct completion_policy completion_eager, completion_lazy, completion_resolver,
        completion_eager_batched;

static const struct completion_policy *const policies[] = {
        &completion_eager_batched,
        &completion_eager,
        &completion_lazy,
        &completion_resolver,
};
#define N_POLICIES (sizeof(policies) / sizeof(policies[0]))

const struct completion_policy *completion_policy(unsigned mode) {
        return mode < N_POLICIES ? policies[mode] : NULL;
}

unsigned completion_mode_count(void) {
        return N_POLICIES;
}

const char *completion_mode_name(unsigned mode) {
        const struct completion_policy *p = completion_policy(mode);
        return p ? p->name : NULL;
}

int completion_mode_parse(const char *name, unsigned *ret) {
        for (unsigned m = 0; name && m < N_POLICIES; m++)
                if (strcmp(policies[m]->name, name) == 0) {
                        *ret = m;
                        return 0;
                }
        return -EINVAL;
}

unsigned completion_mode_min_threads(unsigned mode) {
        const struct completion_policy *p = completion_policy(mode);
        return p && p->thread_main ? 2u : 1u;
}

/* The names joined, built once: they outlive every caller, like a static
 * string (a message may point to them). */
#define UNKNOWN_WHY "completion_mode: unknown mode (one of "
static char mode_list[256], unknown_why[sizeof(UNKNOWN_WHY) + sizeof(mode_list)];
static pthread_once_t mode_list_once = PTHREAD_ONCE_INIT;

static void mode_list_build(void) {
        size_t at = 0;
        for (unsigned m = 0; m < N_POLICIES; m++) {
                int n = snprintf(mode_list + at, sizeof(mode_list) - at, "%s%s", m ? ", " : "", policies[m]->name);
                if (n < 0 || (size_t)n >= sizeof(mode_list) - at)
                        break;
                at += (size_t)n;
        }
        snprintf(unknown_why, sizeof(unknown_why), UNKNOWN_WHY "%s)", mode_list);
}

const char *completion_mode_list(void) {
        pthread_once(&mode_list_once, mode_list_build);
        return mode_list;
}

const char *completion_unknown_why(void) {
        pthread_once(&mode_list_once, mode_list_build);
        return unknown_why;
}
