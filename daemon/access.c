/* SPDX-License-Identifier: MIT */
/*
 * Who may connect: [access] allowed_users and allowed_groups against the
 * peer's credentials, read from the kernel at accept (docs/SECURITY.md).
 * The uid and primary gid come from SO_PEERCRED, the supplementary groups
 * from SO_PEERGROUPS (Linux 4.13): both as they were when the peer called
 * connect(), so `usermod -aG` counts from the user's next login, as for
 * files. On a kernel without SO_PEERGROUPS only the primary group is
 * matched (and the refusal says so).
 *
 * Then what a connected peer may see and do (access_role(), asked at each
 * status or admin request, so that a SIGHUP applies to open connections):
 * root and admin_groups everything, monitor_groups status and metrics as an
 * admin sees them but no session, everyone else their own sessions
 * (docs/SECURITY.md, "Who sees what").
 *
 * No user or group names are looked up here: anyone who can open the
 * socket can make hbgd refuse them, and a name service lookup (LDAP, say)
 * could hold the io thread. Messages give numbers; hbgctl adds names.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "daemon/daemon_private.h"
#include "daemon/access.h"

/* What the stack holds before the heap is asked (ERANGE tells the size). */
#define PEER_GROUPS_INLINE 64
/* The kernel's NGROUPS_MAX: no peer has more. */
#define PEER_GROUPS_MAX 65536
/* Groups named in a refusal; more are "...". */
#define GROUPS_SHOWN 8

struct peer_groups {
        gid_t inline_gids[PEER_GROUPS_INLINE];
        gid_t *gids;                   /* inline_gids or malloc()ed */
        size_t n;
        int err;                       /* 0, or why they are unknown (-ENOPROTOOPT: old kernel) */
};

/* The peer's supplementary groups, at most PEER_GROUPS_MAX. */
static void peer_groups_read(int fd, struct peer_groups *g) {
        g->gids = g->inline_gids;
        g->n = 0;
        g->err = 0;
        socklen_t len = sizeof(g->inline_gids);
        if (getsockopt(fd, SOL_SOCKET, SO_PEERGROUPS, g->gids, &len) == 0) {
                g->n = len / sizeof(gid_t);
                return;
        }
        /* The peer's credentials are fixed at connect(): the size the
         * kernel asks for the first time is the size. */
        if (errno != ERANGE || len > PEER_GROUPS_MAX * sizeof(gid_t)) {
                g->err = errno == ERANGE ? -E2BIG : -errno;
                return;
        }
        g->gids = malloc(len);
        if (!g->gids) {
                g->gids = g->inline_gids;
                g->err = -ENOMEM;
                return;
        }
        if (getsockopt(fd, SOL_SOCKET, SO_PEERGROUPS, g->gids, &len) < 0) {
                g->err = -errno;
                return;
        }
        g->n = len / sizeof(gid_t);
}

static void peer_groups_free(struct peer_groups *g) {
        if (g->gids != g->inline_gids)
                free(g->gids);
        g->gids = g->inline_gids;
}

static bool gid_in(const gid_t *gids, unsigned n, gid_t gid) {
        for (unsigned i = 0; i < n && i < HBGD_MAX_ALLOWED; i++)
                if (gids[i] == gid)
                        return true;
        return false;
}

/* allowed_groups; admin_groups and monitor_groups may connect too. */
static bool gid_allowed(const struct hbgd_config *cfg, gid_t gid) {
        return gid_in(cfg->allowed_gids, cfg->n_allowed_gids, gid) ||
               gid_in(cfg->admin_groups.gids, cfg->admin_groups.n, gid) ||
               gid_in(cfg->monitor_groups.gids, cfg->monitor_groups.n, gid);
}

/* Is the peer (primary gid or a supplementary group) in list? */
static bool peer_in(const struct hbgd_gids *list, int fd, const struct ucred *cr) {
        if (list->n == 0)
                return false;
        if (gid_in(list->gids, list->n, cr->gid))
                return true;
        struct peer_groups g;
        peer_groups_read(fd, &g);
        bool in = false;
        for (size_t i = 0; i < g.n && !in; i++)
                in = gid_in(list->gids, list->n, g.gids[i]);
        peer_groups_free(&g);
        return in;
}

enum access_role access_role(const struct hbgd_config *cfg, int fd, const struct ucred *cr) {
        if (cr->uid == 0 || peer_in(&cfg->admin_groups, fd, cr))
                return ACCESS_ADMIN;
        if (peer_in(&cfg->monitor_groups, fd, cr))
                return ACCESS_MONITOR;
        return ACCESS_USER;
}

/* "uid 4242 (gid 4242, groups 4343 4344) is not ...". */
static void describe_refusal(const struct ucred *cr, const struct peer_groups *g, char *why, size_t size) {
        char groups[160] = "";
        size_t at = 0;
        if (g->err == -ENOPROTOOPT)
                snprintf(groups, sizeof(groups), ", supplementary groups unknown: no SO_PEERGROUPS in this kernel");
        else if (g->err < 0)
                snprintf(groups, sizeof(groups), ", supplementary groups unknown: %s", strerror(-g->err));
        else if (g->n == 0)
                snprintf(groups, sizeof(groups), ", no supplementary groups");
        for (size_t i = 0; g->err == 0 && i < g->n && i < GROUPS_SHOWN && at < sizeof(groups); i++) {
                int k = snprintf(groups + at, sizeof(groups) - at, "%s%u", i ? " " : ", groups ",
                                 (unsigned)g->gids[i]);
                at += k > 0 ? (size_t)k : 0;
        }
        if (g->err == 0 && g->n > GROUPS_SHOWN && at < sizeof(groups))
                snprintf(groups + at, sizeof(groups) - at, " and %zu more", g->n - GROUPS_SHOWN);
        snprintf(why, size, "uid %u (gid %u%s) is not in allowed_users or allowed_groups of hbgd",
                 (unsigned)cr->uid, (unsigned)cr->gid, groups);
}

int access_check(const struct hbgd_config *cfg, int fd, const struct ucred *cr, char *why, size_t size) {
        /* No allowed_users and no allowed_groups: everyone (admin_groups
         * and monitor_groups only add to a list, they close nothing). */
        if (cfg->n_allowed_uids == 0 && cfg->n_allowed_gids == 0)
                return 0;
        if (cr->uid == 0)
                return 0;
        for (unsigned i = 0; i < cfg->n_allowed_uids; i++)
                if (cfg->allowed_uids[i] == cr->uid)
                        return 0;
        if (gid_allowed(cfg, cr->gid))
                return 0;
        struct peer_groups g;
        peer_groups_read(fd, &g);
        bool allowed = false;
        for (size_t i = 0; i < g.n && !allowed; i++)
                allowed = gid_allowed(cfg, g.gids[i]);
        if (!allowed)
                describe_refusal(cr, &g, why, size);
        peer_groups_free(&g);
        return allowed ? 0 : -EACCES;
}
