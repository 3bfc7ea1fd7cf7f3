/* SPDX-License-Identifier: MIT */
/*
 * Why connect() to hbgd's socket failed with EACCES: the owner, group and
 * mode of the socket and of its directory, and which of the two stops this
 * process (checked with its effective uid and groups, as the kernel checks
 * them: search permission on the directory, write permission on the
 * socket). For the messages of libhbgclient (hbg_last_error()) and hbgctl
 * (exit 4, with the fix). Thread-safe; looks names up with the _r calls.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <sys/stat.h>
#include <sys/types.h>

struct sockperm {
        char dir[108];                 /* the socket's directory */
        bool have_dir, have_sock;      /* stat() of each worked */
        struct stat dir_st, sock_st;
        bool dir_denied;               /* this process may not search dir */
        bool sock_denied;              /* it may not write to the socket */
};

void sockperm_inspect(const char *path, struct sockperm *ret);

/* "root:hbg 0660": names where they resolve, else numbers. */
void sockperm_owner(const struct stat *st, char *buf, size_t size);

/* "socket P (root:hbg 0660) in D (root:root 0755): this process (uid U,
 * gid G, groups ...) may not write to the socket". */
void sockperm_describe(const struct sockperm *p, const char *path, char *buf, size_t size);

/* A user's or group's name, else its number, in buf (returned). */
const char *sockperm_user_name(uid_t uid, char *buf, size_t size);
const char *sockperm_group_name(gid_t gid, char *buf, size_t size);

/* "uid 4242, gid 4242, groups 4343 4344": this process's effective ids. */
void sockperm_self(char *buf, size_t size);
