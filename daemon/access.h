/* SPDX-License-Identifier: MIT */
/* Who may connect, and what a peer may see and do (daemon/access.c). */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <sys/socket.h>
#include <sys/types.h>

#include "daemon/config.h"

/* May the peer on fd (credentials cr, from SO_PEERCRED) connect under
 * [access]? 0, or -EACCES with a message for the peer in why[] (its uid and
 * groups; no name lookups). Reads the peer's supplementary groups
 * (SO_PEERGROUPS) when allowed_groups is set and uid and primary gid do
 * not already decide. */
int access_check(const struct hbgd_config *cfg, int fd, const struct ucred *cr, char *why, size_t size);
enum access_role {
        ACCESS_USER,                   /* its own sessions (visibility own) */
        ACCESS_MONITOR,                /* monitor_groups: sees all, opens no session */
        ACCESS_ADMIN,                  /* root, admin_groups: sees and acts on all */
};
/* The peer's role under cfg (reads SO_PEERGROUPS when a group list is set
 * and the primary gid does not decide). */
enum access_role access_role(const struct hbgd_config *cfg, int fd, const struct ucred *cr);
/* May a peer of role `role` and uid `uid` see (or act on) a session of
 * `owner`? Admins and monitors see everything, everyone with
 * visibility = all; acting is for admins and the owner (tool_requests.c). */
static inline bool access_sees(const struct hbgd_config *cfg, enum access_role role, uid_t uid, uid_t owner) {
        return role != ACCESS_USER || cfg->visibility_all || uid == owner;
}
