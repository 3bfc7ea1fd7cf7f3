/* SPDX-License-Identifier: MIT */
/*
 * Connecting to hbgd's control socket, one request and its reply (every
 * verb goes through ctl_request(): connect, hello, request, reply), and what hbgctl says when it may not connect: the exit status
 * of each refusal and what to do about it (docs/man/hbgctl.1, EXIT STATUS).
 * The message of a failure goes through ctl_error() (stderr, and the
 * --json error object); the fixes that follow it are stderr's only.
 */
#include <errno.h>
#include <grp.h>
#include <poll.h>
#include <pwd.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "ctl/ctl.h"
#include "common/sockperm.h"

/* The exit status of the last failure ctl_roundtrip() printed. */
static int last_exit = EXIT_FAIL;

int ctl_failure_exit(void) {
        return last_exit;
}

/* ------------------------------------------------------------ who we are */

struct self {
        char name[64];                 /* the user's name, or "" */
        char who[96];                  /* "alice (uid 1001)" or "uid 4242" */
        gid_t primary;                 /* from the password database */
};

static void self_get(struct self *s) {
        char buf[2048];
        struct passwd pw, *res = NULL;
        uid_t uid = geteuid();
        s->name[0] = 0;
        s->primary = getegid();
        if (getpwuid_r(uid, &pw, buf, sizeof(buf), &res) == 0 && res && res->pw_name[0]) {
                snprintf(s->name, sizeof(s->name), "%s", res->pw_name);
                s->primary = res->pw_gid;
        }
        if (s->name[0])
                snprintf(s->who, sizeof(s->who), "%s (uid %u)", s->name, (unsigned)uid);
        else
                snprintf(s->who, sizeof(s->who), "uid %u", (unsigned)uid);
}

/* Is the user a member of gid in the group database (whether or not this
 * process, started before, has it)? */
static bool member_in_db(const struct self *s, gid_t gid) {
        if (!s->name[0])
                return false;
        gid_t groups[512];
        int n = 512;
        if (getgrouplist(s->name, s->primary, groups, &n) < 0)
                return false;
        for (int i = 0; i < n; i++)
                if (groups[i] == gid)
                        return true;
        return false;
}

/* ------------------------------------------------------------ the socket's permissions */

/* connect() said EACCES: which file stops us, and the fix. */
static void explain_permission(const char *path) {
        struct sockperm p;
        struct self s;
        char why[640];
        sockperm_inspect(path, &p);
        sockperm_describe(&p, path, why, sizeof(why));
        self_get(&s);
        ctl_error(EXIT_ACCESS, -EACCES, "permission denied: %s", why);

        const char *what = p.dir_denied ? p.dir : path;
        const struct stat *st = p.dir_denied ? &p.dir_st : &p.sock_st;
        bool known = p.dir_denied ? p.have_dir : p.have_sock;
        /* What the group needs: search on the directory, write on the socket. */
        mode_t need = p.dir_denied ? S_IXGRP : S_IWGRP;
        char group[64];
        if (!known || !(p.dir_denied || p.sock_denied)) {
                fprintf(stderr, "hbgctl: ask the administrator to let %s reach %s (a directory on its way or a "
                        "security module denies it)\n", s.who, path);
        } else if (!(st->st_mode & need) || st->st_gid == 0) {
                /* No group to join: the file must change. */
                fprintf(stderr, "hbgctl: %s %s: ask the administrator to open it to hbgd's users (hbgd.socket: "
                        "SocketGroup=hbg, SocketMode=0660, DirectoryMode=0755)\n", what,
                        st->st_gid == 0 ? "belongs to group root"
                        : p.dir_denied  ? "lets no group enter"
                                        : "lets no group write to it");
        } else if (member_in_db(&s, st->st_gid)) {
                sockperm_group_name(st->st_gid, group, sizeof(group));
                fprintf(stderr, "hbgctl: %s is in group %s, but this login session started before that: log "
                        "in again (or run `newgrp %s`)\n", s.who, group, group);
        } else {
                sockperm_group_name(st->st_gid, group, sizeof(group));
                fprintf(stderr, "hbgctl: add %s to group %s: usermod -aG %s %s (as root), then log in again\n",
                        s.who, group, group, s.name[0] ? s.name : "USER");
        }
}

/* ------------------------------------------------------------ hbgd's refusals */

static void fix_not_allowed(const struct self *s) {
        fprintf(stderr, "hbgctl: ask the administrator to add %s or one of its groups to allowed_users or "
                "allowed_groups ([access] in hbgd.conf(5)), then `systemctl reload hbgd`\n", s->who);
}

static void fix_too_many(const struct self *s) {
        fprintf(stderr, "hbgctl: close some of %s's connections to hbgd (`hbgctl sessions` lists its sessions), "
                "or ask the administrator to raise the limit named above\n", s->who);
}

static void fix_not_admin(const struct self *s) {
        fprintf(stderr, "hbgctl: only the session's own user, root and [access] admin_groups of hbgd.conf(5) may "
                "do this; %s is neither\n", s->who);
}

static void fix_stopping(const struct self *s) {
        (void)s;
        fprintf(stderr, "hbgctl: try again once hbgd has started again (`systemctl status hbgd`)\n");
}

/* hbgd's refusals of a connection (docs/PROTOCOL.md): exit status and fix. */
static const struct refusal {
        int code;
        int exit;
        void (*fix)(const struct self *s);
} refusals[] = {
        { -EACCES, EXIT_ACCESS, fix_not_allowed },
        { -EUSERS, EXIT_FAIL, fix_too_many },
        { -ESHUTDOWN, EXIT_NOT_RUNNING, fix_stopping },
        /* an admin request (cancel, kill) on another user's session */
        { -EPERM, EXIT_ACCESS, fix_not_admin },
};

static const struct refusal *find_refusal(int code) {
        for (size_t i = 0; i < sizeof(refusals) / sizeof(refusals[0]); i++)
                if (refusals[i].code == code)
                        return &refusals[i];
        return NULL;
}

int ctl_connect_failed(int err) {
        const struct refusal *r = find_refusal(err);
        if (!r)
                return err == -ENOENT || err == -ECONNREFUSED ? EXIT_NOT_RUNNING : EXIT_FAIL;
        struct self s;
        self_get(&s);
        r->fix(&s);
        return r->exit;
}

/* An Error from hbgd: print it (a refusal with its fix); sets last_exit. */
static void print_error(const Hbg__Error *e) {
        const char *msg = e->message && e->message[0] ? e->message : strerror(e->code < 0 ? -e->code : EPROTO);
        const struct refusal *r = find_refusal(e->code);
        if (!r) {
                last_exit = ctl_error(EXIT_FAIL, e->code, "hbgd: %s", msg);
                return;
        }
        ctl_error(r->exit, e->code, "hbgd refused %s: %s", e->code == -EPERM ? "the request" : "the connection",
                  msg);
        last_exit = ctl_connect_failed(e->code);
}

/* A send or receive failed: hbgd's queued Error if it hung up, else err. */
static void print_failure(int fd, int err, const char *what) {
        Hbg__Envelope *env = NULL;
        if ((err == -EPIPE || err == -ECONNRESET) && wire_recv_queued_error(fd, &env) == 0) {
                print_error(env->error);
                wire_free(env);
                return;
        }
        /* Hung up without an Error: hbgd went away (stopped, killed) while
         * we waited, which is "not running" as much as finding it gone. */
        bool gone = err == -ECONNRESET || err == -EPIPE;
        last_exit = ctl_error(gone ? EXIT_NOT_RUNNING : EXIT_FAIL, err, "%s: %s", what,
                              gone ? "hbgd closed the connection (it stopped)" : strerror(-err));
}

/* ------------------------------------------------------------ requests */

int ctl_connect(const char *path) {
        struct sockaddr_un sa = { .sun_family = AF_UNIX };
        if (strlen(path) >= sizeof(sa.sun_path)) {
                return -ctl_error(EXIT_USAGE, -ENAMETOOLONG, "socket path too long: %s", path);
        }
        strcpy(sa.sun_path, path);
        int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
        if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
                int err = errno;
                if (fd >= 0)
                        close(fd);
                if (err == EACCES || err == EPERM) {
                        explain_permission(path);
                        return -EXIT_ACCESS;
                }
                return -ctl_error(EXIT_NOT_RUNNING, -err, "hbgd is not running on %s: %s", path, strerror(err));
        }
        return fd;
}

/* Send one envelope, receive one (blocking with a timeout). */
Hbg__Envelope *ctl_roundtrip(int fd, Hbg__Envelope *env) {
        int err = wire_send(fd, env, NULL, 0, HBG_WIRE_MAX_MSG_DEFAULT);
        if (err < 0) {
                print_failure(fd, err, "cannot talk to hbgd");
                return NULL;
        }
        struct pollfd p = { .fd = fd, .events = POLLIN };
        if (poll(&p, 1, 10000) <= 0) {
                last_exit = ctl_error(EXIT_FAIL, -ETIMEDOUT, "hbgd did not answer within 10 s");
                return NULL;
        }
        Hbg__Envelope *reply = NULL;
        int fds[HBG_WIRE_MAX_FDS];
        unsigned nfds = 0;
        err = wire_recv(fd, 16u << 20, &reply, fds, 0, &nfds);
        if (err < 0) {
                print_failure(fd, err, "bad reply from hbgd");
                return NULL;
        }
        if (reply->msg_case == HBG__ENVELOPE__MSG_ERROR) {
                print_error(reply->error);
                wire_free(reply);
                return NULL;
        }
        return reply;
}

Hbg__Envelope *ctl_request(const char *path, Hbg__Envelope *rq, Hbg__Envelope__MsgCase want, int *ret_exit) {
        int fd = ctl_connect(path);
        if (fd < 0) {
                *ret_exit = -fd;
                return NULL;
        }
        Hbg__Hello hello = HBG__HELLO__INIT;
        hello.version_major = HBG_PROTO_MAJOR;
        hello.version_minor = HBG_PROTO_MINOR;
        hello.name = (char *)"hbgctl";
        Hbg__Envelope env = HBG__ENVELOPE__INIT;
        env.msg_case = HBG__ENVELOPE__MSG_HELLO;
        env.hello = &hello;
        Hbg__Envelope *reply = ctl_roundtrip(fd, &env);
        if (reply) {
                wire_free(reply);
                reply = ctl_roundtrip(fd, rq);
        }
        close(fd);
        if (!reply) {
                *ret_exit = ctl_failure_exit();
                return NULL;
        }
        if (reply->msg_case != want) {
                *ret_exit = ctl_error(EXIT_FAIL, -EPROTO, "unexpected reply from hbgd (message %d)",
                                      (int)reply->msg_case);
                wire_free(reply);
                return NULL;
        }
        *ret_exit = 0;
        return reply;
}

Hbg__Envelope *ctl_status(const char *path, Hbg__StatusKind kind, int *ret_exit) {
        Hbg__StatusRequest rq = HBG__STATUS_REQUEST__INIT;
        rq.kind = kind;
        Hbg__Envelope env = HBG__ENVELOPE__INIT;
        env.msg_case = HBG__ENVELOPE__MSG_STATUS_REQUEST;
        env.status_request = &rq;
        return ctl_request(path, &env, HBG__ENVELOPE__MSG_STATUS_REPLY, ret_exit);
}
