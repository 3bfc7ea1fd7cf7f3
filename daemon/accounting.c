/* SPDX-License-Identifier: MIT */
/* Per-user and total resource accounting (daemon/accounting.h). */
#include "daemon/accounting.h"

#include <errno.h>
#include <inttypes.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "common/grow.h"

/* Read once: glibc asks the kernel (sysinfo()) at every call, and the
 * default budgets are looked at for every session request. */
static uint64_t physical_memory(void) {
        static _Atomic uint64_t known;
        uint64_t bytes = atomic_load_explicit(&known, memory_order_relaxed);
        if (bytes)
                return bytes;
        long pages = sysconf(_SC_PHYS_PAGES), size = sysconf(_SC_PAGESIZE);
        bytes = pages <= 0 || size <= 0 ? UINT64_C(4) << 30 /* unknown: assume a small machine */
                                        : (uint64_t)pages * (uint64_t)size;
        atomic_store_explicit(&known, bytes, memory_order_relaxed);
        return bytes;
}

uint64_t acct_max_memory(const struct hbgd_limits *l) {
        return l->max_memory ? l->max_memory : physical_memory() / 2;
}

uint64_t acct_max_memory_per_uid(const struct hbgd_limits *l) {
        return l->max_memory_per_uid ? l->max_memory_per_uid : physical_memory() / 4;
}

static struct uid_usage *find(const struct accounting *a, uid_t uid) {
        for (size_t i = 0; i < a->n_users; i++)
                if (a->users[i].uid == uid)
                        return &a->users[i];
        return NULL;
}

const struct uid_usage *acct_user(const struct accounting *a, uid_t uid) {
        return find(a, uid);
}

static struct uid_usage *find_or_add(struct accounting *a, uid_t uid) {
        struct uid_usage *u = find(a, uid);
        if (u)
                return u;
        if (GROW(a->users, a->cap_users, a->n_users + 1, 16) < 0)
                return NULL;
        u = &a->users[a->n_users++];
        *u = (struct uid_usage){ .uid = uid };
        return u;
}

/* Forget a user with nothing charged, so the table stays as small as the
 * set of users connected now. */
static void maybe_drop(struct accounting *a, struct uid_usage *u) {
        if (u->connections || u->sessions || u->memory)
                return;
        *u = a->users[--a->n_users];
}

int acct_add_connection(struct accounting *a, const struct hbgd_limits *l, uid_t uid, char *why,
                        size_t why_len) {
        if (a->connections >= l->max_connections) {
                snprintf(why, why_len, "too many connections to hbgd (max_connections = %u)",
                         l->max_connections);
                return -EUSERS;
        }
        struct uid_usage *u = find_or_add(a, uid);
        if (!u) {
                snprintf(why, why_len, "out of memory");
                return -ENOMEM;
        }
        if (uid != 0 && u->connections >= l->max_connections_per_uid) {
                maybe_drop(a, u);
                snprintf(why, why_len, "too many connections for uid %u (max_connections_per_uid = %u)",
                         (unsigned)uid, l->max_connections_per_uid);
                return -EUSERS;
        }
        u->connections++;
        a->connections++;
        return 0;
}

void acct_remove_connection(struct accounting *a, uid_t uid) {
        struct uid_usage *u = find(a, uid);
        if (!u || !u->connections)
                return;
        u->connections--;
        a->connections--;
        maybe_drop(a, u);
}

#define MIB (UINT64_C(1) << 20)

/* May uid be charged `memory` more bytes (for `what`)? 0, or -EDQUOT with
 * the limit and the figures in why[]. u: uid's usage, NULL if none yet. */
static int memory_fits(const struct accounting *a, const struct hbgd_limits *l, const struct uid_usage *u,
                       uid_t uid, uint64_t memory, const char *what, char *why, size_t why_len) {
        uint64_t total_max = acct_max_memory(l), user_max = acct_max_memory_per_uid(l);
        if (memory > total_max || a->memory > total_max - memory) {
                snprintf(why, why_len,
                         "hbgd's memory budget is used up: %s needs %" PRIu64 " MiB, %" PRIu64
                         " of %" PRIu64 " MiB are left ([limits] max_memory)",
                         what, (memory + MIB - 1) / MIB,
                         (total_max - (a->memory < total_max ? a->memory : total_max)) / MIB, total_max / MIB);
                return -EDQUOT;
        }
        uint64_t used = u ? u->memory : 0;
        if (uid != 0 && (memory > user_max || used > user_max - memory)) {
                uint64_t left = used < user_max ? user_max - used : 0;
                snprintf(why, why_len,
                         "this user's hbgd memory budget is used up: %s needs %" PRIu64
                         " MiB, %" PRIu64 " of %" PRIu64 " MiB are left ([limits] max_memory_per_uid)",
                         what, (memory + MIB - 1) / MIB, left / MIB, user_max / MIB);
                return -EDQUOT;
        }
        return 0;
}

int acct_add_session(struct accounting *a, const struct hbgd_limits *l, uid_t uid, uint64_t memory,
                     char *why, size_t why_len) {
        if (a->sessions >= l->max_sessions) {
                snprintf(why, why_len, "too many sessions (max_sessions = %u)", l->max_sessions);
                return -EUSERS;
        }
        const struct uid_usage *known = find(a, uid);
        if (uid != 0 && (known ? known->sessions : 0) >= l->max_sessions_per_uid) {
                snprintf(why, why_len, "too many sessions for this user (max_sessions_per_uid = %u)",
                         l->max_sessions_per_uid);
                return -EUSERS;
        }
        int err = memory_fits(a, l, known, uid, memory, "this session", why, why_len);
        if (err < 0)
                return err;
        struct uid_usage *u = find_or_add(a, uid);
        if (!u) {
                snprintf(why, why_len, "out of memory");
                return -ENOMEM;
        }
        u->sessions++;
        u->memory += memory;
        a->sessions++;
        a->memory += memory;
        return 0;
}

int acct_add_memory(struct accounting *a, const struct hbgd_limits *l, uid_t uid, uint64_t memory,
                    const char *what, char *why, size_t why_len) {
        struct uid_usage *u = find(a, uid);
        if (!u || !u->sessions) {
                snprintf(why, why_len, "no session charged to this user");
                return -EINVAL;
        }
        int err = memory_fits(a, l, u, uid, memory, what, why, why_len);
        if (err < 0)
                return err;
        u->memory += memory;
        a->memory += memory;
        return 0;
}

void acct_remove_session(struct accounting *a, uid_t uid, uint64_t memory) {
        struct uid_usage *u = find(a, uid);
        if (!u || !u->sessions)
                return;
        u->sessions--;
        u->memory -= memory < u->memory ? memory : u->memory;
        a->sessions--;
        a->memory -= memory < a->memory ? memory : a->memory;
        maybe_drop(a, u);
}

void acct_remove_memory(struct accounting *a, uid_t uid, uint64_t memory) {
        struct uid_usage *u = find(a, uid);
        if (!u)
                return;
        u->memory -= memory < u->memory ? memory : u->memory;
        a->memory -= memory < a->memory ? memory : a->memory;
}

void acct_free(struct accounting *a) {
        free(a->users);
        *a = (struct accounting){ 0 };
}
