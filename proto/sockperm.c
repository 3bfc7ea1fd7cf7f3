/* SPDX-License-Identifier: MIT */
/* What stops this process from opening hbgd's socket (proto/sockperm.h). */
#include "common/sockperm.h"

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <pwd.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

/* Groups named in a description; more are counted. */
#define GROUPS_SHOWN 8

const char *sockperm_user_name(uid_t uid, char *buf, size_t size) {
        char tmp[1024];
        struct passwd pw, *res = NULL;
        if (getpwuid_r(uid, &pw, tmp, sizeof(tmp), &res) == 0 && res && res->pw_name[0])
                snprintf(buf, size, "%s", res->pw_name);
        else
                snprintf(buf, size, "%u", (unsigned)uid);
        return buf;
}

const char *sockperm_group_name(gid_t gid, char *buf, size_t size) {
        /* A group's entry lists its members: room for a few hundred. */
        char tmp[8192];
        struct group gr, *res = NULL;
        if (getgrgid_r(gid, &gr, tmp, sizeof(tmp), &res) == 0 && res && res->gr_name[0])
                snprintf(buf, size, "%s", res->gr_name);
        else
                snprintf(buf, size, "%u", (unsigned)gid);
        return buf;
}

void sockperm_owner(const struct stat *st, char *buf, size_t size) {
        char u[64], g[64];
        snprintf(buf, size, "%s:%s %04o", sockperm_user_name(st->st_uid, u, sizeof(u)),
                 sockperm_group_name(st->st_gid, g, sizeof(g)), (unsigned)(st->st_mode & 07777));
}

void sockperm_self(char *buf, size_t size) {
        gid_t groups[256];
        int n = getgroups(256, groups);
        int all = n < 0 ? getgroups(0, NULL) : n;
        size_t at = 0;
        int k = snprintf(buf, size, "uid %u, gid %u", (unsigned)geteuid(), (unsigned)getegid());
        at = k > 0 ? (size_t)k : 0;
        for (int i = 0; i < n && i < GROUPS_SHOWN && at < size; i++) {
                k = snprintf(buf + at, size - at, "%s%u", i ? " " : ", groups ", (unsigned)groups[i]);
                at += k > 0 ? (size_t)k : 0;
        }
        if (at >= size)
                return;
        if (all == 0)
                snprintf(buf + at, size - at, ", no supplementary groups");
        else if (all > GROUPS_SHOWN || n < 0)
                snprintf(buf + at, size - at, ", %d groups in all", all);
}

void sockperm_inspect(const char *path, struct sockperm *p) {
        memset(p, 0, sizeof(*p));
        const char *slash = strrchr(path, '/');
        if (!slash)
                snprintf(p->dir, sizeof(p->dir), ".");
        else if (slash == path)
                snprintf(p->dir, sizeof(p->dir), "/");
        else
                snprintf(p->dir, sizeof(p->dir), "%.*s", (int)(slash - path), path);
        p->have_dir = stat(p->dir, &p->dir_st) == 0;
        p->have_sock = stat(path, &p->sock_st) == 0;
        /* AT_EACCESS: the effective ids and the groups, like connect(). */
        p->dir_denied = faccessat(AT_FDCWD, p->dir, X_OK, AT_EACCESS) < 0 && errno == EACCES;
        p->sock_denied = !p->dir_denied && faccessat(AT_FDCWD, path, W_OK, AT_EACCESS) < 0 && errno == EACCES;
}

void sockperm_describe(const struct sockperm *p, const char *path, char *buf, size_t size) {
        char sock[200] = "", dir[200] = "", self[160];
        if (p->have_sock)
                sockperm_owner(&p->sock_st, sock, sizeof(sock));
        else
                snprintf(sock, sizeof(sock), "not visible to this process");
        if (p->have_dir)
                sockperm_owner(&p->dir_st, dir, sizeof(dir));
        else
                snprintf(dir, sizeof(dir), "not visible to this process");
        sockperm_self(self, sizeof(self));
        const char *denied = p->dir_denied    ? "may not enter the directory"
                             : p->sock_denied ? "may not write to the socket"
                                              : "was refused (by a directory above, or a security module)";
        snprintf(buf, size, "socket %s (%s) in %s (%s): this process (%s) %s", path, sock, p->dir, dir, self,
                 denied);
}
