/* SPDX-License-Identifier: MIT */
/*
 * hbgd under systemd's protocols, without systemd as pid 1:
 *
 *   units     systemd-analyze verify on systemd/hbgd.service and
 *             hbgd.socket (skipped when systemd-analyze is missing)
 *   activate  hbgd started by systemd-socket-activate --seqpacket on a
 *             socket named "hbgd", with NOTIFY_SOCKET (ours) and
 *             WATCHDOG_USEC: READY=1, STATUS=, periodic WATCHDOG=1, a graph
 *             through libhbgclient, hbgctl status through the socket
 *   stall     HBGD_TEST_STALL_THREAD wedges a scheduler thread of the
 *             test build tests/hbgd-hooks: the WATCHDOG=1 pings stop
 *   reload    SIGHUP re-reads --config: max_sessions=1 refuses a second
 *             session with -EUSERS; a broken file keeps the old settings
 *
 * systemd-socket-activate binds the socket, and execs hbgd at the first
 * connection: its stderr ("Listening on ...") is read through a pipe to
 * know when to connect. Every wait is a bounded poll().
 * HBG_TEST_VERBOSE=1 copies hbgd's log to stderr.
 */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "hbg/hbg.h"
#include "proto/wire.h"
#include "tests/e2e/daemon_util.h"
#include "tests/check_main.h"

#define START_MS 20000
#define WATCHDOG_USEC 400000 /* hbgd pings every 200 ms */

static const char *sa_binary(void) {
        static const char *const paths[] = { "/usr/bin/systemd-socket-activate",
                                             "/bin/systemd-socket-activate",
                                             "/usr/lib/systemd/systemd-socket-activate" };
        for (size_t i = 0; i < sizeof(paths) / sizeof(paths[0]); i++)
                if (access(paths[i], X_OK) == 0)
                        return paths[i];
        return NULL;
}

static const char *analyze_binary(void) {
        if (access("/usr/bin/systemd-analyze", X_OK) == 0)
                return "/usr/bin/systemd-analyze";
        if (access("/bin/systemd-analyze", X_OK) == 0)
                return "/bin/systemd-analyze";
        return NULL;
}

/* build/bin/hbgctl next to hbgd */
static const char *hbgctl_binary(void) {
        static char buf[PATH_MAX];
        char tmp[PATH_MAX];
        snprintf(tmp, sizeof(tmp), "%s", daemon_binary());
        snprintf(buf, sizeof(buf), "%s/hbgctl", dirname(tmp));
        return buf;
}

struct sa {
        pid_t pid;
        int notify_fd;
        int err_fd;              /* read end of the child's stderr */
        int log_fd;              /* DIR/hbgd.log: what err_fd gave */
        char dir[80];
        char sock[108];
        char notify[108];
        char log[300];
        char logbuf[65536];      /* the first 64 KiB of the log */
        size_t log_len;
        char seen[8192];         /* notifications seen so far */
        size_t seen_len;
        bool listening;
};

/* Move what the child wrote to its stderr into the log. */
static void pump(struct sa *s) {
        char buf[4096];
        ssize_t n = -1;
        while (s->err_fd >= 0 && (n = read(s->err_fd, buf, sizeof(buf))) > 0) {
                if (write(s->log_fd, buf, (size_t)n) < 0) {
                }
                if (getenv("HBG_TEST_VERBOSE") && write(2, buf, (size_t)n) < 0) {
                }
                size_t room = sizeof(s->logbuf) - 1 - s->log_len;
                size_t take = (size_t)n < room ? (size_t)n : room;
                memcpy(s->logbuf + s->log_len, buf, take);
                s->log_len += take;
                s->logbuf[s->log_len] = 0;
                if (!s->listening && strstr(s->logbuf, "Listening on"))
                        s->listening = true;
        }
        if (n == 0 && s->err_fd >= 0) {
                close(s->err_fd);
                s->err_fd = -1;
        }
}

static void dump_log(const struct sa *s) {
        char cmd[400];
        snprintf(cmd, sizeof(cmd), "cat '%s' >&2", s->log);
        if (system(cmd) < 0) {
        }
}

/* Read the notifications queued (hbgd blocks when the queue is full, as
 * with a real service manager that stops reading). True when one contains
 * `what` (NULL: none wanted); reading stops after it. */
static bool drain_notify(struct sa *s, const char *what) {
        char buf[4096];
        ssize_t n;
        while ((n = recv(s->notify_fd, buf, sizeof(buf) - 1, MSG_DONTWAIT)) > 0) {
                buf[n] = 0;
                if (s->seen_len + (size_t)n + 2 < sizeof(s->seen)) {
                        memcpy(s->seen + s->seen_len, buf, (size_t)n);
                        s->seen_len += (size_t)n;
                        s->seen[s->seen_len++] = '\n';
                        s->seen[s->seen_len] = 0;
                }
                if (what && strstr(buf, what))
                        return true;
        }
        return false;
}

/* Wait up to ms for the log or a notification (bounded). */
static void service(struct sa *s, int ms) {
        struct pollfd p[2] = { { .fd = s->notify_fd, .events = POLLIN }, { .fd = s->err_fd, .events = POLLIN } };
        poll(p, s->err_fd >= 0 ? 2 : 1, ms);
        pump(s);
        drain_notify(s, NULL);
}

/* Wait up to timeout_ms for a notification containing `what`; it must come
 * after the ones seen so far. ret_ms: when it came. 0 or -ETIMEDOUT. */
static int wait_note(struct sa *s, const char *what, int timeout_ms, long long *ret_ms) {
        long long end = daemon_now_ms() + timeout_ms;
        for (;;) {
                long long left = end - daemon_now_ms();
                if (left <= 0)
                        return -ETIMEDOUT;
                struct pollfd p[2] = { { .fd = s->notify_fd, .events = POLLIN },
                                       { .fd = s->err_fd, .events = POLLIN } };
                if (poll(p, s->err_fd >= 0 ? 2 : 1, (int)left) < 0 && errno != EINTR)
                        return -errno;
                pump(s);
                if (drain_notify(s, what)) {
                        if (ret_ms)
                                *ret_ms = daemon_now_ms();
                        return 0;
                }
        }
}

/* Wait up to timeout_ms for `what` in the log. 0 or -ETIMEDOUT. */
static int wait_log(struct sa *s, const char *what, int timeout_ms) {
        long long end = daemon_now_ms() + timeout_ms;
        pump(s);
        while (!strstr(s->logbuf, what)) {
                long long left = end - daemon_now_ms();
                if (left <= 0 || s->err_fd < 0)
                        return -ETIMEDOUT;
                service(s, (int)left);
        }
        return 0;
}

static unsigned count_log(const struct sa *s, const char *what) {
        unsigned n = 0;
        for (const char *p = s->logbuf; (p = strstr(p, what)); p++)
                n++;
        return n;
}

/* Wait for the listening line of systemd-socket-activate. */
static int wait_listening(struct sa *s, int timeout_ms) {
        long long end = daemon_now_ms() + timeout_ms;
        while (!s->listening) {
                long long left = end - daemon_now_ms();
                if (left <= 0 || s->err_fd < 0)
                        return -ETIMEDOUT;
                struct pollfd p = { .fd = s->err_fd, .events = POLLIN };
                poll(&p, 1, (int)left);
                pump(s);
        }
        return 0;
}

/*
 * systemd-socket-activate --seqpacket -l DIR/s.sock --fdname=hbgd
 *   -E NOTIFY_SOCKET=DIR/notify -E WATCHDOG_USEC=... [-E extra] hbgd [args]
 * then trigger the start with a connection and wait for READY=1.
 */
static int sa_start(struct sa *s, const char *const *env, const char *const *args) {
        memset(s, 0, sizeof(*s));
        s->err_fd = s->notify_fd = s->log_fd = -1;
        const char *tmp = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
        if (strlen(tmp) > sizeof(s->dir) - 16)
                tmp = "/tmp";
        snprintf(s->dir, sizeof(s->dir), "%.60s/hbg-sd-XXXXXX", tmp);
        if (!mkdtemp(s->dir))
                return -errno;
        snprintf(s->sock, sizeof(s->sock), "%s/s.sock", s->dir);
        snprintf(s->notify, sizeof(s->notify), "%s/notify", s->dir);
        snprintf(s->log, sizeof(s->log), "%s/hbgd.log", s->dir);
        s->log_fd = open(s->log, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
        s->notify_fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
        struct sockaddr_un sa = { .sun_family = AF_UNIX };
        snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", s->notify);
        if (s->log_fd < 0 || s->notify_fd < 0 || bind(s->notify_fd, (struct sockaddr *)&sa, sizeof(sa)) < 0)
                return -errno;
        int pfd[2];
        if (pipe2(pfd, O_CLOEXEC) < 0)
                return -errno;

        char listen_arg[140], notify_env[140], wd_env[64];
        snprintf(listen_arg, sizeof(listen_arg), "--listen=%s", s->sock);
        snprintf(notify_env, sizeof(notify_env), "--setenv=NOTIFY_SOCKET=%s", s->notify);
        snprintf(wd_env, sizeof(wd_env), "--setenv=WATCHDOG_USEC=%d", WATCHDOG_USEC);
        const char *argv[40];
        unsigned n = 0;
        argv[n++] = sa_binary();
        argv[n++] = "--seqpacket";
        argv[n++] = listen_arg;
        argv[n++] = "--fdname=hbgd";
        argv[n++] = notify_env;
        argv[n++] = wd_env;
        char extra[8][200];
        for (unsigned i = 0; env && env[i] && i < 8; i++) {
                snprintf(extra[i], sizeof(extra[i]), "--setenv=%s", env[i]);
                argv[n++] = extra[i];
        }
        argv[n++] = daemon_binary();
        for (unsigned i = 0; args && args[i] && n < 38; i++)
                argv[n++] = args[i];
        argv[n] = NULL;

        pid_t parent = getpid();
        s->pid = fork();
        if (s->pid < 0)
                return -errno;
        if (s->pid == 0) {
                prctl(PR_SET_PDEATHSIG, SIGKILL);
                if (getppid() != parent)
                        _exit(127);
                dup2(pfd[1], 1);
                dup2(pfd[1], 2);
                unsetenv("HBGD_IO");
                unsetenv("NOTIFY_SOCKET");
                unsetenv("LISTEN_FDS");
                unsetenv("LISTEN_PID");
                execv(argv[0], (char *const *)argv);
                _exit(127);
        }
        close(pfd[1]);
        s->err_fd = pfd[0];
        fcntl(s->err_fd, F_SETFL, O_NONBLOCK);
        int err = wait_listening(s, START_MS);
        if (err < 0) {
                fprintf(stderr, "systemd-socket-activate did not listen within %d ms\n", START_MS);
                dump_log(s);
                return err;
        }
        /* The first connection makes systemd-socket-activate exec hbgd. */
        int trig = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
        struct sockaddr_un ss = { .sun_family = AF_UNIX };
        snprintf(ss.sun_path, sizeof(ss.sun_path), "%s", s->sock);
        if (trig < 0 || connect(trig, (struct sockaddr *)&ss, sizeof(ss)) < 0) {
                err = -errno;
                fprintf(stderr, "connect %s: %s\n", s->sock, strerror(-err));
                return err;
        }
        err = wait_note(s, "READY=1", START_MS, NULL);
        close(trig);
        if (err < 0) {
                fprintf(stderr, "no READY=1 from hbgd within %d ms\n", START_MS);
                dump_log(s);
        }
        return err;
}

static void rm_rf(const char *dir) {
        char cmd[400];
        snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
        if (system(cmd) < 0) {
        }
}

/* SIGTERM, wait (bounded), SIGKILL; returns the wait status. */
static int sa_stop(struct sa *s) {
        int st = -1;
        if (s->pid > 0) {
                kill(s->pid, SIGTERM);
                long long end = daemon_now_ms() + 10000;
                while (waitpid(s->pid, &st, WNOHANG) == 0) {
                        if (daemon_now_ms() > end) {
                                kill(s->pid, SIGKILL);
                                waitpid(s->pid, &st, 0);
                                break;
                        }
                        service(s, 20);
                }
                s->pid = 0;
        }
        return st;
}

static void sa_destroy(struct sa *s) {
        if (s->pid > 0) {
                kill(s->pid, SIGKILL);
                waitpid(s->pid, NULL, 0);
                s->pid = 0;
        }
        if (s->err_fd >= 0)
                close(s->err_fd);
        if (s->notify_fd >= 0)
                close(s->notify_fd);
        if (s->log_fd >= 0)
                close(s->log_fd);
        s->err_fd = s->notify_fd = s->log_fd = -1;
        if (s->dir[0])
                rm_rf(s->dir);
        s->dir[0] = 0;
}

/* On failure: the log to stderr, then hbgd killed and its directory
 * removed before Check ends the test. */
#define SA_ASSERT(s, cond, ...)                              \
        do {                                                 \
                if (!(cond)) {                               \
                        dump_log(s);                         \
                        sa_destroy(s);                       \
                        ck_abort_msg(__VA_ARGS__);           \
                }                                            \
        } while (0)

/* One graph: fill a tensor and check it. */
static int run_graph(hbg_client *c) {
        hbg_tensor t;
        int err = hbg_tensor_alloc(c, 1024 * 4, &t);
        if (err < 0)
                return err;
        hbg_task task = HBG_TASK_INIT("fill_f32");
        task.blocks = 2;
        task.n_args = 1;
        task.args[0].tensor = t;
        task.args[0].dir = HBG_OUT;
        task.n_scalars = 1;
        task.scalars[0] = hbg_f32(3.0f);
        uint64_t g;
        if ((err = hbg_graph_add(c, &task, NULL)) < 0 || (err = hbg_graph_submit(c, &g)) < 0 ||
            (err = hbg_graph_wait(c, g, 20000)) < 0)
                return err;
        const float *v = hbg_tensor_data(c, t);
        for (unsigned i = 0; i < 1024; i++)
                if (v[i] != 3.0f)
                        return -EBADMSG;
        return 0;
}

static int run_hbgctl(struct sa *s) {
        pid_t pid = fork();
        if (pid == 0) {
                int null = open("/dev/null", O_WRONLY);
                dup2(null, 1);
                execl(hbgctl_binary(), "hbgctl", "--socket", s->sock, "status", (char *)NULL);
                _exit(127);
        }
        int st = 0;
        long long end = daemon_now_ms() + 20000;
        while (waitpid(pid, &st, WNOHANG) == 0) {
                if (daemon_now_ms() > end) {
                        kill(pid, SIGKILL);
                        waitpid(pid, &st, 0);
                        return -ETIMEDOUT;
                }
                service(s, 10);
        }
        return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

/* ------------------------------------------------------------ units */

static int write_file(const char *path, const char *text) {
        FILE *f = fopen(path, "we");
        if (!f)
                return -errno;
        fputs(text, f);
        return fclose(f) == 0 ? 0 : -errno;
}

/* A new private directory in dir, and the path of hbgd.conf in it. */
static void conf_path(char *dir, size_t dir_len, char *conf, size_t conf_len) {
        const char *tmp = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
        snprintf(dir, dir_len, "%s/hbg-conf-XXXXXX", tmp);
        ck_assert_ptr_nonnull(mkdtemp(dir));
        snprintf(conf, conf_len, "%s/hbgd.conf", dir);
}

START_TEST(units_verify) {
        const char *analyze = analyze_binary();
        if (!analyze) {
                fprintf(stderr, "units: SKIP: systemd-analyze not found (package systemd)\n");
                return;
        }
        char dir[256];
        const char *tmp = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
        snprintf(dir, sizeof(dir), "%s/hbg-units-XXXXXX", tmp);
        ck_assert_ptr_nonnull(mkdtemp(dir));
        char bindir[PATH_MAX], tmpb[PATH_MAX];
        snprintf(tmpb, sizeof(tmpb), "%s", daemon_binary());
        snprintf(bindir, sizeof(bindir), "%s", dirname(tmpb));
        /* The installed units, with ExecStart at the binary of this build. */
        char cmd[8192 + 4 * PATH_MAX];
        snprintf(cmd, sizeof(cmd),
                 "sed -e 's|@BINDIR@|%s|g' -e 's|@SYSCONFDIR@|/etc|g' -e 's|@DOCDIR@|/usr/share/doc/hbg|g' "
                 "%s/systemd/hbgd.service.in > %s/hbgd.service && cp %s/systemd/hbgd.socket %s/ && "
                 "%s verify %s/hbgd.socket %s/hbgd.service 2>%s/verify.log; rc=$?; cat %s/verify.log >&2; "
                 "exit $rc",
                 bindir, HBG_SRCDIR, dir, HBG_SRCDIR, dir, analyze, dir, dir, dir, dir);
        int st = system(cmd);
        char log[400];
        snprintf(log, sizeof(log), "%s/verify.log", dir);
        struct stat sb;
        bool quiet = stat(log, &sb) == 0 && sb.st_size == 0;
        rm_rf(dir);
        ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "systemd-analyze verify failed (status %d)", st);
        ck_assert_msg(quiet, "systemd-analyze verify printed warnings (above)");

        /* The sysusers snippet parses and creates user and group hbg. */
        if (access("/usr/bin/systemd-sysusers", X_OK) == 0 || access("/bin/systemd-sysusers", X_OK) == 0) {
                snprintf(dir, sizeof(dir), "%s/hbg-sysusers-XXXXXX", tmp);
                ck_assert_ptr_nonnull(mkdtemp(dir));
                snprintf(cmd, sizeof(cmd),
                         "mkdir -p %s/etc && systemd-sysusers --root=%s --dry-run %s/systemd/hbg.sysusers "
                         "2>&1 | grep -q \"Creating user 'hbg'\"",
                         dir, dir, HBG_SRCDIR);
                st = system(cmd);
                rm_rf(dir);
                ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0,
                              "systemd-sysusers --dry-run does not create user hbg from systemd/hbg.sysusers");
        }
}
END_TEST

/* ------------------------------------------------------------ activation */

START_TEST(activate_serve) {
        struct sa s;
        const char *args[] = { "--threads", "2", NULL };
        int err = sa_start(&s, NULL, args);
        SA_ASSERT(&s, err == 0, "start under systemd-socket-activate: %s", strerror(-err));
        SA_ASSERT(&s, strstr(s.seen, "STATUS="), "READY=1 came without STATUS=: %s", s.seen);

        /* Periodic watchdog pings, about every 200 ms. */
        long long t0, t1;
        SA_ASSERT(&s, wait_note(&s, "WATCHDOG=1", 2000, &t0) == 0, "no WATCHDOG=1 (seen: %s)", s.seen);
        SA_ASSERT(&s, wait_note(&s, "WATCHDOG=1", 2000, &t1) == 0, "WATCHDOG=1 not repeated");
        SA_ASSERT(&s, wait_note(&s, "WATCHDOG=1", 2000, &t1) == 0, "WATCHDOG=1 not repeated");

        hbg_client *c;
        err = hbg_connect(&c, s.sock);
        SA_ASSERT(&s, err == 0, "hbg_connect on the activated socket: %s [%s]", hbg_strerror(err),
                  hbg_last_error(NULL));
        err = run_graph(c);
        SA_ASSERT(&s, err == 0, "graph: %s [%s]", hbg_strerror(err), hbg_last_error(c));

        /* Live STATUS= with the session counted (refreshed every 2 s). */
        SA_ASSERT(&s, wait_note(&s, "STATUS=serving: 1 session, ", 5000, NULL) == 0,
                  "no periodic STATUS= with 1 session (seen: %s)", s.seen);
        int rc = run_hbgctl(&s);
        SA_ASSERT(&s, rc == 0, "hbgctl --socket %s status: exit %d", s.sock, rc);
        hbg_disconnect(c);

        int st = sa_stop(&s);
        SA_ASSERT(&s, WIFEXITED(st) && WEXITSTATUS(st) == 0, "hbgd exit status %d", st);
        SA_ASSERT(&s, strstr(s.seen, "STOPPING=1") || wait_note(&s, "STOPPING=1", 1000, NULL) == 0,
                  "no STOPPING=1");
        sa_destroy(&s);
}
END_TEST

/* ------------------------------------------------------------ stall */

START_TEST(watchdog_stall) {
        struct sa s;
        const char *env[] = { "HBGD_TEST_STALL_THREAD=1:1500", NULL };
        const char *args[] = { "--threads", "2", NULL };
        /* The test build of hbgd reads the hook (tests/e2e/hbgd_hooks.c). */
        setenv("HBGD", HBG_TEST_HBGD_HOOKS, 1);
        int err = sa_start(&s, env, args);
        unsetenv("HBGD");
        SA_ASSERT(&s, err == 0, "start: %s", strerror(-err));
        long long ready = daemon_now_ms();
        /* Pings while every thread is fine. */
        long long t;
        SA_ASSERT(&s, wait_note(&s, "WATCHDOG=1", 1000, &t) == 0, "no WATCHDOG=1 before the stall");
        /* Then the thread stops (1.5 s after start): the pings must stop
         * within two intervals and not come back. */
        long long last = t;
        while (wait_note(&s, "WATCHDOG=1", 4 * WATCHDOG_USEC / 1000, &t) == 0) {
                last = t;
                SA_ASSERT(&s, t - ready < 1500 + 2 * WATCHDOG_USEC / 1000 + 1000,
                          "WATCHDOG=1 still sent %lld ms after start", t - ready);
        }
        /* No ping for > 2 intervals: and none for a while longer. */
        SA_ASSERT(&s, wait_note(&s, "WATCHDOG=1", 3 * WATCHDOG_USEC / 1000, NULL) == -ETIMEDOUT,
                  "WATCHDOG=1 came back");
        (void)last;
        sa_stop(&s);
        pump(&s);
        char cmd[400];
        snprintf(cmd, sizeof(cmd), "grep -q 'not pinging the watchdog' '%s'", s.log);
        int st = system(cmd);
        SA_ASSERT(&s, WIFEXITED(st) && WEXITSTATUS(st) == 0, "hbgd did not log the withheld ping");
        sa_destroy(&s);
}
END_TEST

/* ------------------------------------------------------------ reload */

START_TEST(sighup_reload) {
        struct sa s = { .pid = 0 };
        char dir[256], conf[300];
        conf_path(dir, sizeof(dir), conf, sizeof(conf));
        /* Our sessions get fair-share weight 5 (and the log says so). */
        char text[200];
        snprintf(text, sizeof(text), "[scheduler]\nthreads = 2\nsession_weights = %u:5\n\n[limits]\nmax_sessions = 4\n",
                 (unsigned)getuid());
        ck_assert_int_eq(write_file(conf, text), 0);
        const char *args[] = { "--config", conf, NULL };
        int err = sa_start(&s, NULL, args);
        SA_ASSERT(&s, err == 0, "start: %s", strerror(-err));

        hbg_client *a, *b;
        err = hbg_connect(&a, s.sock);
        SA_ASSERT(&s, err == 0, "first session: %s", hbg_strerror(err));
        SA_ASSERT(&s, wait_log(&s, "MiB charged, weight 5", 5000) == 0, "the session's weight 5 was not logged");
        err = hbg_connect(&b, s.sock);
        SA_ASSERT(&s, err == 0, "second session before the reload: %s", hbg_strerror(err));
        hbg_disconnect(b);

        /* A broken file: every error reported with file:line, nothing changes. */
        ck_assert_int_eq(write_file(conf, "[limits]\nmax_sessions = 1\nbogus = 3\n[log]\nlevel = chatty\n"), 0);
        kill(s.pid, SIGHUP);
        SA_ASSERT(&s, wait_note(&s, "RELOADING=1", 5000, NULL) == 0, "no RELOADING=1");
        SA_ASSERT(&s, wait_note(&s, "READY=1", 5000, NULL) == 0, "no READY=1 after the reload");
        /* hbgd's log writer may write them a moment after READY=1. */
        char bad3[400], bad5[400];
        snprintf(bad3, sizeof(bad3), "SIGHUP: %s:3: unknown key 'bogus' in section [limits]", conf);
        snprintf(bad5, sizeof(bad5), "SIGHUP: %s:5: level: 'chatty' is not one of", conf);
        SA_ASSERT(&s, wait_log(&s, bad3, 5000) == 0 && wait_log(&s, bad5, 5000) == 0 &&
                              wait_log(&s, "keeping the current configuration", 5000) == 0,
                  "the bad lines were not reported as %s:3 and :5", conf);
        err = hbg_connect(&b, s.sock);
        SA_ASSERT(&s, err == 0, "second session after a failed reload: %s", hbg_strerror(err));
        hbg_disconnect(b);

        /* max_sessions = 1 (and a threads change, which is only logged). */
        ck_assert_int_eq(write_file(conf, "[scheduler]\nthreads = 3\n[limits]\nmax_sessions = 1\n"), 0);
        kill(s.pid, SIGHUP);
        SA_ASSERT(&s, wait_note(&s, "RELOADING=1", 5000, NULL) == 0, "no RELOADING=1");
        SA_ASSERT(&s, wait_note(&s, "READY=1", 5000, NULL) == 0, "no READY=1 after the reload");
        err = hbg_connect(&b, s.sock);
        SA_ASSERT(&s, err == -EUSERS, "second session after max_sessions=1: %s, want -EUSERS",
                  err == 0 ? "accepted" : hbg_strerror(err));
        err = run_graph(a);
        SA_ASSERT(&s, err == 0, "the first session after the reload: %s", hbg_strerror(err));
        hbg_disconnect(a);
        SA_ASSERT(&s, wait_log(&s, "threads: 3 in the file, running with 2", 5000) == 0,
                  "the ignored threads change was not logged");
        int st = sa_stop(&s);
        SA_ASSERT(&s, WIFEXITED(st) && WEXITSTATUS(st) == 0, "hbgd exit status %d", st);
        sa_destroy(&s);
        rm_rf(dir);
}
END_TEST

/* ------------------------------------------------------------ log flood */

static Hbg__Envelope *recv_env(struct sa *s, int fd) {
        struct pollfd p = { .fd = fd, .events = POLLIN };
        long long end = daemon_now_ms() + 20000;
        while (poll(&p, 1, 0) == 0) {
                if (daemon_now_ms() > end)
                        return NULL;
                service(s, 10);
        }
        Hbg__Envelope *env = NULL;
        unsigned nfds = 0;
        int fds[8];
        int err = wire_recv(fd, 1 << 20, &env, fds, 8, &nfds);
        return err < 0 ? NULL : env;
}

/* One connection asks 30 times for a session that is too large: hbgd
 * answers each, logs the first ratelimit_burst (4) and reports the other
 * 26 as one line after its window ([log] ratelimit_interval_ms, 1 s here;
 * the defaults, 10 per 10 s, are seen by test_e2e_access). */
START_TEST(log_ratelimit) {
        struct sa s = { .pid = 0 };
        char dir[256], conf[300];
        conf_path(dir, sizeof(dir), conf, sizeof(conf));
        ck_assert_int_eq(write_file(conf, "[log]\nratelimit_interval_ms = 1000\nratelimit_burst = 4\n"), 0);
        const char *args[] = { "--config", conf, NULL };
        int err = sa_start(&s, NULL, args);
        unlink(conf);
        rmdir(dir);
        SA_ASSERT(&s, err == 0, "start: %s", strerror(-err));
        int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
        struct sockaddr_un sa = { .sun_family = AF_UNIX };
        snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", s.sock);
        SA_ASSERT(&s, fd >= 0 && connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0, "connect: %s",
                  strerror(errno));
        Hbg__Hello hello = HBG__HELLO__INIT;
        hello.version_major = HBG_PROTO_MAJOR;
        hello.version_minor = HBG_PROTO_MINOR;
        hello.name = (char *)"flood";
        Hbg__Envelope env = HBG__ENVELOPE__INIT;
        env.msg_case = HBG__ENVELOPE__MSG_HELLO;
        env.hello = &hello;
        SA_ASSERT(&s, wire_send(fd, &env, NULL, 0, 1 << 20) == 0, "send hello");
        Hbg__Envelope *r = recv_env(&s, fd);
        SA_ASSERT(&s, r && r->msg_case == HBG__ENVELOPE__MSG_HELLO, "no hello back");
        wire_free(r);

        Hbg__SessionRequest rq = HBG__SESSION_REQUEST__INIT;
        rq.task_window = UINT64_C(1) << 24; /* above max_task_window */
        env.msg_case = HBG__ENVELOPE__MSG_SESSION_REQUEST;
        env.session_request = &rq;
        for (int i = 0; i < 30; i++) {
                SA_ASSERT(&s, wire_send(fd, &env, NULL, 0, 1 << 20) == 0, "send request %d", i);
                r = recv_env(&s, fd);
                SA_ASSERT(&s, r && r->msg_case == HBG__ENVELOPE__MSG_ERROR && r->error->code == -E2BIG,
                          "request %d: no -E2BIG back", i);
                wire_free(r);
        }
        /* The 4 logged lines were written before the 5th answer. */
        SA_ASSERT(&s, wait_log(&s, "suppressed", 6000) == 0, "no 'messages suppressed' line");
        unsigned n = count_log(&s, "): refused: task_window");
        SA_ASSERT(&s, n == 4, "%u refusals logged, want 4", n);
        SA_ASSERT(&s, strstr(s.logbuf, ": 26 messages suppressed"), "want 26 suppressed");
        close(fd);
        int st = sa_stop(&s);
        SA_ASSERT(&s, WIFEXITED(st) && WEXITSTATUS(st) == 0, "hbgd exit status %d", st);
        sa_destroy(&s);
}
END_TEST

static Suite *suite(bool activate) {
        Suite *s = suite_create("e2e_systemd");
        TCase *tc = tcase_create("units");
        tcase_add_test(tc, units_verify);
        suite_add_tcase(s, tc);
        if (activate) {
                struct {
                        const char *name;
                        const TTest *test;
                } cases[] = { { "activate", activate_serve },
                              { "stall", watchdog_stall },
                              { "reload", sighup_reload },
                              { "ratelimit", log_ratelimit } };
                for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
                        tc = tcase_create(cases[i].name);
                        tcase_set_timeout(tc, 120);
                        tcase_add_test(tc, cases[i].test);
                        suite_add_tcase(s, tc);
                }
        }
        return s;
}

static bool activate;

static int setup(void) {
        if (access(daemon_binary(), X_OK) < 0) {
                fprintf(stderr, "test_e2e_systemd: %s: %s; build it or set HBGD\n", daemon_binary(),
                        strerror(errno));
                return -1;
        }
        activate = sa_binary() != NULL;
        if (!activate && !analyze_binary()) {
                fprintf(stderr, "test_e2e_systemd: SKIP: neither systemd-socket-activate nor "
                                "systemd-analyze is installed (package systemd)\n");
                return CHECK_SKIP;
        }
        if (!activate)
                fprintf(stderr, "test_e2e_systemd: systemd-socket-activate not found: "
                                "only the unit checks run\n");
        return 0;
}

static Suite *activate_suite(void) {
        return suite(activate);
}

const struct check_main check_main = {
        .suite = activate_suite,
        .ignore_sigpipe = true,
        .setup = setup,
};
