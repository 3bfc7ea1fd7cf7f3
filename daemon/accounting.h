/* SPDX-License-Identifier: MIT */
/*
 * What each user costs hbgd: connections, sessions and the memory of their
 * sessions (hbgd-private arrays plus both shared regions, as if every page
 * were in use), against per-uid and total limits from [limits]
 * (docs/OPERATIONS.md). Per-uid limits do not apply to uid 0: root can
 * stop the service anyway, and must always be able to connect to look at
 * it; the totals apply to everyone (docs/SECURITY.md). io thread only.
 */
#pragma once

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

struct hbgd_limits {
        unsigned max_connections;          /* all users */
        unsigned max_connections_per_uid;
        unsigned max_sessions;
        unsigned max_sessions_per_uid;
        uint64_t max_memory;               /* bytes, all sessions; 0: half of RAM */
        uint64_t max_memory_per_uid;       /* bytes; 0: a quarter of RAM */
};

struct uid_usage {
        uid_t uid;
        unsigned connections;
        unsigned sessions;
        uint64_t memory;
};

struct accounting {
        struct uid_usage *users;           /* users with something charged */
        size_t n_users, cap_users;
        unsigned connections;
        unsigned sessions;
        uint64_t memory;
};

/* The memory limits with 0 ("automatic") resolved against this machine. */
uint64_t acct_max_memory(const struct hbgd_limits *l);
uint64_t acct_max_memory_per_uid(const struct hbgd_limits *l);

/* Charge a connection. 0, or -EUSERS with a message naming the limit and
 * its value in why[]; -ENOMEM. */
int acct_add_connection(struct accounting *a, const struct hbgd_limits *l, uid_t uid, char *why,
                        size_t why_len);
void acct_remove_connection(struct accounting *a, uid_t uid);

/* Charge a session costing `memory` bytes. 0, or -EUSERS (session count)
 * or -EDQUOT (memory) with a message naming the limit and the figures in
 * why[]; -ENOMEM. */
int acct_add_session(struct accounting *a, const struct hbgd_limits *l, uid_t uid, uint64_t memory,
                     char *why, size_t why_len);
void acct_remove_session(struct accounting *a, uid_t uid, uint64_t memory);
/* Charge `memory` more bytes to a session of uid (for `what`, named in the
 * message); acct_remove_session() refunds them with the session's. 0, or
 * -EDQUOT with why[]. */
int acct_add_memory(struct accounting *a, const struct hbgd_limits *l, uid_t uid, uint64_t memory,
                    const char *what, char *why, size_t why_len);
/* Take back what acct_add_memory() charged, before the session ends. */
void acct_remove_memory(struct accounting *a, uid_t uid, uint64_t memory);

const struct uid_usage *acct_user(const struct accounting *a, uid_t uid);
void acct_free(struct accounting *a);
