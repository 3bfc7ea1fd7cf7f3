/* SPDX-License-Identifier: MIT */
/*
 * Connecting to hbgd's control socket, one request and its reply (every
 * verb goes through ctl_request(): connect, hello, request, reply), and what hbgctl says when it may not connect: what to
 * do about each refusal, and the exit status of each failure
 * (ctl_exit_status(), docs/man/hbgctl.1, EXIT STATUS), which the verbs
 * return. The message of a failure goes through ctl_error() (stderr, and
 * the --json error object); the fixes that follow it are stderr's only.
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

#include "ctl/daemon_conn.h"

#include "ctl/error.h"
#include "common/errtext.h"
#include "common/sockperm.h"

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
        ctl_error(-EACCES, "permission denied: %s", why);

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

static void fix_not_allowed(const struct self *s, const char *msg) {
        if (msg && strstr(msg, "monitor_groups")) {
                fprintf(stderr, "hbgctl: %s is in [access] monitor_groups, which may query status and metrics but "
                        "not run graphs: run as another user, or ask the administrator to take it out of "
                        "monitor_groups (hbgd.conf(5))\n", s->who);
                return;
        }
        fprintf(stderr, "hbgctl: ask the administrator to add %s or one of its groups to allowed_users or "
                "allowed_groups ([access] in hbgd.conf(5)), then `systemctl reload hbgd`\n", s->who);
}

static void fix_too_many(const struct self *s, const char *msg) {
        (void)msg;
        fprintf(stderr, "hbgctl: close some of %s's connections to hbgd (`hbgctl sessions` lists its sessions), "
                "or ask the administrator to raise the limit named above\n", s->who);
}

static void fix_not_admin(const struct self *s, const char *msg) {
        (void)msg;
        fprintf(stderr, "hbgctl: only the session's own user, root and [access] admin_groups of hbgd.conf(5) may "
                "do this; %s is neither\n", s->who);
}

static void fix_stopping(const struct self *s, const char *msg) {
        (void)msg;
        (void)s;
        fprintf(stderr, "hbgctl: try again once hbgd has started again (`systemctl status hbgd`)\n");
}

/* hbgd's refusals of a connection (docs/PROTOCOL.md): exit status and fix. */
static const struct refusal {
        int code;
        int exit;
        void (*fix)(const struct self *s, const char *msg); /* msg: hbgd's, may be NULL */
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

void ctl_explain_refusal(int err, const char *msg) {
        const struct refusal *r = find_refusal(err);
        if (!r)
                return;
        struct self s;
        self_get(&s);
        r->fix(&s, msg);
}

/* The exit status of a failure where no refusal decides it: by stage,
 * then errno (0: any other). */
static const struct exit_rule {
        enum ctl_stage at;
        int err;
        int exit;
} exit_rules[] = {
        { CTL_AT_CONNECT, -EACCES, EXIT_ACCESS },
        { CTL_AT_CONNECT, -EPERM, EXIT_ACCESS },
        { CTL_AT_CONNECT, -ENAMETOOLONG, EXIT_USAGE },
        { CTL_AT_CONNECT, 0, EXIT_NOT_RUNNING },
        /* hung up without an Error: hbgd went away (stopped, killed) while
         * we waited, which is "not running" as much as finding it gone */
        { CTL_AT_EXCHANGE, -EPIPE, EXIT_NOT_RUNNING },
        { CTL_AT_EXCHANGE, -ECONNRESET, EXIT_NOT_RUNNING },
        { CTL_AT_LIBRARY, -ENOENT, EXIT_NOT_RUNNING },
        { CTL_AT_LIBRARY, -ECONNREFUSED, EXIT_NOT_RUNNING },
};

int ctl_exit_status(const struct ctl_failure *f) {
        const struct refusal *r = f->at == CTL_AT_HBGD || f->at == CTL_AT_LIBRARY ? find_refusal(f->err) : NULL;
        if (r)
                return r->exit;
        for (size_t i = 0; i < sizeof(exit_rules) / sizeof(exit_rules[0]); i++)
                if (exit_rules[i].at == f->at && (exit_rules[i].err == f->err || exit_rules[i].err == 0))
                        return exit_rules[i].exit;
        return EXIT_FAIL;
}

/* An Error from hbgd: print it (a refusal with its fix). Its code. */
static int print_error(const Hbg__Error *e, struct ctl_failure *ret_fail) {
        char buf[128];
        const char *msg = e->message && e->message[0] ? e->message : errtext(e->code < 0 ? e->code : -EPROTO, buf, sizeof(buf));
        *ret_fail = (struct ctl_failure){ .at = CTL_AT_HBGD, .err = e->code < 0 ? e->code : -EPROTO };
        snprintf(ret_fail->message, sizeof(ret_fail->message), "%s", msg);
        if (!find_refusal(e->code)) {
                ctl_error(e->code, "hbgd: %s", msg);
                return ret_fail->err;
        }
        ctl_error(e->code, "hbgd refused %s: %s", e->code == -EPERM ? "the request" : "the connection", msg);
        ctl_explain_refusal(e->code, msg);
        return ret_fail->err;
}

/* A send or receive failed: hbgd's queued Error if it hung up, else err. */
static int print_failure(int fd, int err, const char *what, struct ctl_failure *ret_fail) {
        Hbg__Envelope *env = NULL;
        if ((err == -EPIPE || err == -ECONNRESET) && wire_recv_queued_error(fd, &env) == 0) {
                err = print_error(env->error, ret_fail);
                wire_free(env);
                return err;
        }
        bool gone = err == -ECONNRESET || err == -EPIPE;
        ctl_error(err, "%s: %s", what, gone ? "hbgd closed the connection (it stopped)" : strerror(-err));
        *ret_fail = (struct ctl_failure){ .at = CTL_AT_EXCHANGE, .err = err };
        return err;
}

/* ------------------------------------------------------------ requests */

int ctl_connect(const char *path) {
        struct sockaddr_un sa = { .sun_family = AF_UNIX };
        if (strlen(path) >= sizeof(sa.sun_path))
                return ctl_error(-ENAMETOOLONG, "socket path too long: %s", path);
        strcpy(sa.sun_path, path);
        int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
        if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
                int err = errno;
                if (fd >= 0)
                        close(fd);
                if (err == EACCES || err == EPERM) {
                        explain_permission(path);
                        return -err;
                }
                return ctl_error(-err, "hbgd is not running on %s: %s", path, strerror(err));
        }
        return fd;
}

/* Send one envelope, receive one (blocking with a timeout). */
int ctl_roundtrip(int fd, Hbg__Envelope *env, int send_fd, int timeout_ms, Hbg__Envelope **ret,
                  struct ctl_failure *ret_fail) {
        int err = wire_send(fd, env, send_fd >= 0 ? &send_fd : NULL, send_fd >= 0, HBG_WIRE_MAX_MSG_DEFAULT);
        if (err < 0)
                return print_failure(fd, err, "cannot talk to hbgd", ret_fail);
        struct pollfd p = { .fd = fd, .events = POLLIN };
        int ready;
        /* A signal hbgctl handles (trace's SIGINT) is no reason to give up. */
        while ((ready = poll(&p, 1, timeout_ms)) < 0 && errno == EINTR)
                ;
        if (ready <= 0) {
                *ret_fail = (struct ctl_failure){ .at = CTL_AT_EXCHANGE, .err = -ETIMEDOUT };
                return ctl_error(-ETIMEDOUT, "hbgd did not answer within %d s", timeout_ms / 1000);
        }
        Hbg__Envelope *reply = NULL;
        int fds[HBG_WIRE_MAX_FDS];
        unsigned nfds = 0;
        err = wire_recv(fd, 16u << 20, &reply, fds, 0, &nfds);
        if (err < 0)
                return print_failure(fd, err, "bad reply from hbgd", ret_fail);
        if (reply->msg_case == HBG__ENVELOPE__MSG_ERROR) {
                err = print_error(reply->error, ret_fail);
                wire_free(reply);
                return err;
        }
        *ret = reply;
        return 0;
}

int ctl_open(const char *path, uint32_t *ret_minor, struct ctl_failure *ret_fail) {
        int fd = ctl_connect(path);
        if (fd < 0) {
                *ret_fail = (struct ctl_failure){ .at = CTL_AT_CONNECT, .err = fd };
                return fd;
        }
        Hbg__Hello hello;
        Hbg__Envelope env;
        wire_hello(&env, &hello, "hbgctl");
        Hbg__Envelope *reply = NULL;
        int err = ctl_roundtrip(fd, &env, -1, CTL_REPLY_TIMEOUT_MS, &reply, ret_fail);
        if (err == 0 && reply->msg_case != HBG__ENVELOPE__MSG_HELLO) {
                *ret_fail = (struct ctl_failure){ .at = CTL_AT_EXCHANGE, .err = -EPROTO };
                err = ctl_error(-EPROTO, "hbgd did not answer the hello with one (message %d)", (int)reply->msg_case);
        }
        if (err == 0 && ret_minor)
                *ret_minor = reply->hello->version_minor;
        wire_free(reply);
        if (err < 0) {
                close(fd);
                return err;
        }
        return fd;
}

int ctl_request(const char *path, Hbg__Envelope *rq, Hbg__Envelope__MsgCase want, Hbg__Envelope **ret,
                struct ctl_failure *ret_fail) {
        int fd = ctl_open(path, NULL, ret_fail);
        if (fd < 0)
                return fd;
        Hbg__Envelope *reply = NULL;
        int err = ctl_roundtrip(fd, rq, -1, CTL_REPLY_TIMEOUT_MS, &reply, ret_fail);
        close(fd);
        if (err < 0)
                return err;
        if (reply->msg_case != want) {
                *ret_fail = (struct ctl_failure){ .at = CTL_AT_EXCHANGE, .err = -EPROTO };
                ctl_error(-EPROTO, "unexpected reply from hbgd (message %d)", (int)reply->msg_case);
                wire_free(reply);
                return -EPROTO;
        }
        *ret = reply;
        return 0;
}

int ctl_status(const char *path, Hbg__StatusKind kind, Hbg__Envelope **ret, struct ctl_failure *ret_fail) {
        Hbg__StatusRequest rq = HBG__STATUS_REQUEST__INIT;
        rq.kind = kind;
        Hbg__Envelope env = HBG__ENVELOPE__INIT;
        env.msg_case = HBG__ENVELOPE__MSG_STATUS_REQUEST;
        env.status_request = &rq;
        return ctl_request(path, &env, HBG__ENVELOPE__MSG_STATUS_REPLY, ret, ret_fail);
}
