/* SPDX-License-Identifier: MIT */
/* Run the real hbgd for end-to-end tests: tests/e2e/daemon_util.h. */
#include "tests/e2e/daemon_util.h"
#include "common/clock.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#ifndef HBG_TEST_HBGD
#define HBG_TEST_HBGD "build/bin/hbgd"
#endif

#define READY_TIMEOUT_MS 20000
#define MAX_DAEMONS 16
#define MAX_ARGS 32
#define MAX_ENV_ADD 16

extern char **environ;

/* Daemons started by this process, for the atexit() handler. */
static struct hbgd_proc *live[MAX_DAEMONS];
static pid_t live_owner;        /* the process the live[] entries belong to */
static pid_t atexit_pid;        /* the process that registered kill_all() */

static char base_dir[200];      /* daemon_util_init(): parent of every DIR */
static pid_t base_owner;

long long daemon_now_ms(void) {
        return clock_now_ms();
}

static void sleep_ms(long ms) {
        struct timespec ts = { .tv_sec = ms / 1000, .tv_nsec = (ms % 1000) * 1000000L };
        while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
                ;
}

/* ---------------------------------------------------------------- dirs */

static int rm_entry(const char *path, const struct stat *st, int type, struct FTW *ftw) {
        (void)st;
        (void)type;
        (void)ftw;
        remove(path);
        return 0;
}

static void rm_tree(const char *path) {
        if (path[0])
                nftw(path, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
}

static void base_cleanup_at_exit(void) {
        if (getpid() == base_owner)
                daemon_util_cleanup();
}

static const char *tmp_root(void) {
        const char *t = getenv("TMPDIR");
        /* Leave room for "/hbg-e2e-XXXXXX/hbgd-XXXXXX/hbgd.sock" in 108 bytes. */
        if (!t || !t[0] || strlen(t) > 60)
                t = "/tmp";
        return t;
}

int daemon_util_init(void) {
        if (base_dir[0] && base_owner == getpid())
                return 0;
        snprintf(base_dir, sizeof(base_dir), "%s/hbg-e2e-XXXXXX", tmp_root());
        if (!mkdtemp(base_dir)) {
                int err = -errno;
                fprintf(stderr, "daemon_util: mkdtemp %s: %s\n", base_dir, strerror(errno));
                base_dir[0] = 0;
                return err;
        }
        base_owner = getpid();
        atexit(base_cleanup_at_exit);
        return 0;
}

void daemon_util_cleanup(void) {
        if (base_dir[0] && base_owner == getpid()) {
                rm_tree(base_dir);
                base_dir[0] = 0;
        }
}

int daemon_util_write_file(char *path, size_t len, const char *name, const char *text) {
        if (len)
                path[0] = 0;
        if (!base_dir[0])
                return -ENOENT; /* daemon_util_init() first: never a fixed name in a shared directory */
        int n = snprintf(path, len, "%s/%s", base_dir, name);
        if (n < 0 || (size_t)n >= len)
                return -ENAMETOOLONG;
        FILE *f = fopen(path, "w");
        if (!f)
                return -errno;
        int err = fputs(text, f) < 0 ? -EIO : 0;
        if (fclose(f) != 0 && !err)
                err = -errno;
        return err;
}

/* ---------------------------------------------------------------- registry */

static void kill_all(void) {
        if (getpid() != live_owner)
                return; /* a forked child of the test: not its daemons */
        for (unsigned i = 0; i < MAX_DAEMONS; i++) {
                struct hbgd_proc *d = live[i];
                if (!d)
                        continue;
                if (!d->reaped) {
                        kill(d->pid, SIGKILL);
                        waitpid(d->pid, &d->wstatus, 0);
                        d->reaped = true;
                }
                rm_tree(d->dir);
                live[i] = NULL;
        }
}

static void track(struct hbgd_proc *d) {
        if (live_owner != getpid()) {
                /* Inherited entries belong to the parent process. */
                memset(live, 0, sizeof(live));
                live_owner = getpid();
        }
        if (atexit_pid != getpid()) {
                atexit(kill_all);
                atexit_pid = getpid();
        }
        for (unsigned i = 0; i < MAX_DAEMONS; i++)
                if (!live[i]) {
                        live[i] = d;
                        return;
                }
        fprintf(stderr, "daemon_util: more than %d daemons at once; no clean-up at exit for pid %d\n",
                MAX_DAEMONS, (int)d->pid);
}

static void untrack(struct hbgd_proc *d) {
        if (live_owner != getpid())
                return;
        for (unsigned i = 0; i < MAX_DAEMONS; i++)
                if (live[i] == d)
                        live[i] = NULL;
}

/* ---------------------------------------------------------------- start */

const char *daemon_binary(void) {
        const char *p = getenv("HBGD");
        return p && p[0] ? p : HBG_TEST_HBGD;
}

int daemon_util_setup(void) {
        if (access(daemon_binary(), X_OK) < 0) {
                int err = errno;
                fprintf(stderr, "%s: %s: %s; build it or set HBGD\n", program_invocation_short_name,
                        daemon_binary(), strerror(err));
                return -err;
        }
        return daemon_util_init();
}

static bool env_is(const char *entry, const char *name) {
        size_t n = strlen(name);
        return strncmp(entry, name, n) == 0 && entry[n] == '=';
}

static bool env_overridden(const char *entry, const char *const *env) {
        static const char *const removed[] = { "NOTIFY_SOCKET", "HBGD_IO", "LISTEN_FDS", "LISTEN_PID",
                                               "LISTEN_FDNAMES", NULL };
        for (unsigned i = 0; removed[i]; i++)
                if (env_is(entry, removed[i]))
                        return true;
        for (unsigned i = 0; env && env[i]; i++) {
                const char *eq = strchr(env[i], '=');
                size_t n = eq ? (size_t)(eq - env[i]) : strlen(env[i]);
                if (strncmp(entry, env[i], n) == 0 && entry[n] == '=')
                        return true;
        }
        return false;
}

/* Does one notification datagram hold the assignment `what` on a line? */
static bool notify_has(const char *msg, const char *what) {
        size_t n = strlen(what);
        for (const char *p = msg; p && *p; p = strchr(p, '\n') ? strchr(p, '\n') + 1 : NULL)
                if (strncmp(p, what, n) == 0 && (p[n] == '\n' || p[n] == 0))
                        return true;
        return false;
}

static int reap(struct hbgd_proc *d, bool block) {
        if (d->reaped)
                return 1;
        pid_t r;
        do
                r = waitpid(d->pid, &d->wstatus, block ? 0 : WNOHANG);
        while (r < 0 && errno == EINTR);
        if (r == d->pid) {
                d->reaped = true;
                return 1;
        }
        return r < 0 ? -errno : 0;
}

static void describe_status(int st, char *buf, size_t size) {
        if (WIFEXITED(st))
                snprintf(buf, size, "exit status %d", WEXITSTATUS(st));
        else if (WIFSIGNALED(st))
                snprintf(buf, size, "killed by signal %d (%s)", WTERMSIG(st), strsignal(WTERMSIG(st)));
        else
                snprintf(buf, size, "wait status 0x%x", (unsigned)st);
}

void daemon_dump_log(const struct hbgd_proc *d) {
        FILE *f = fopen(d->log_path, "r");
        if (!f)
                return;
        fprintf(stderr, "---- %s ----\n", d->log_path);
        char line[1024];
        while (fgets(line, sizeof(line), f))
                fputs(line, stderr);
        fprintf(stderr, "---- end of hbgd log ----\n");
        fclose(f);
}

static int wait_notify(struct hbgd_proc *d, const char *what, int timeout_ms, bool fail_on_exit) {
        long long deadline = daemon_now_ms() + timeout_ms;
        for (;;) {
                char buf[4096];
                ssize_t n;
                while ((n = recv(d->notify_fd, buf, sizeof(buf) - 1, MSG_DONTWAIT)) >= 0) {
                        buf[n] = 0;
                        if (notify_has(buf, what))
                                return 0;
                }
                if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
                        return -errno;
                if (fail_on_exit && reap(d, false) == 1)
                        return -ECHILD;
                long long left = deadline - daemon_now_ms();
                if (left <= 0)
                        return -ETIMEDOUT;
                struct pollfd p[2] = {
                        { .fd = d->notify_fd, .events = POLLIN },
                        { .fd = fail_on_exit && !d->reaped ? d->pidfd : -1, .events = POLLIN },
                };
                /* Without a pidfd, look at the child every 100 ms. */
                int slice = d->pidfd < 0 && left > 100 ? 100 : (int)left;
                if (poll(p, 2, slice) < 0 && errno != EINTR)
                        return -errno;
        }
}

int daemon_wait_notify(struct hbgd_proc *d, const char *what, int timeout_ms) {
        return wait_notify(d, what, timeout_ms, false);
}

int daemon_start(struct hbgd_proc **ret, const char *const *args, const char *const *env) {
        return daemon_start_fd(ret, args, env, -1);
}

int daemon_start_fd(struct hbgd_proc **ret, const char *const *args, const char *const *env, int out_fd) {
        const char *bin = daemon_binary();
        struct hbgd_proc *d = calloc(1, sizeof(*d));
        const char *argv[MAX_ARGS + 4];
        char **envp = NULL;
        int log_fd = -1, err;
        unsigned argc = 0;

        *ret = NULL;
        if (!d)
                return -ENOMEM;
        d->pid = -1;
        d->pidfd = d->notify_fd = -1;

        if (access(bin, X_OK) < 0) {
                err = -errno;
                fprintf(stderr, "daemon_util: cannot execute %s: %s (build it, or set HBGD)\n", bin,
                        strerror(errno));
                free(d);
                return err;
        }

        snprintf(d->dir, sizeof(d->dir), "%s/hbgd-XXXXXX", base_dir[0] ? base_dir : tmp_root());
        if (!mkdtemp(d->dir)) {
                err = -errno;
                fprintf(stderr, "daemon_util: mkdtemp %s: %s\n", d->dir, strerror(errno));
                free(d);
                return err;
        }
        int len1 = snprintf(d->socket_path, sizeof(d->socket_path), "%s/hbgd.sock", d->dir);
        int len2 = snprintf(d->notify_path, sizeof(d->notify_path), "%s/notify", d->dir);
        snprintf(d->log_path, sizeof(d->log_path), "%s/hbgd.log", d->dir);
        if (len1 < 0 || (size_t)len1 >= sizeof(d->socket_path) || len2 < 0 ||
            (size_t)len2 >= sizeof(d->notify_path)) {
                fprintf(stderr, "daemon_util: %s: path too long for a unix socket\n", d->dir);
                err = -ENAMETOOLONG;
                goto fail;
        }

        /* NOTIFY_SOCKET: ours, bound before hbgd exists. */
        d->notify_fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
        if (d->notify_fd < 0) {
                err = -errno;
                goto fail;
        }
        struct sockaddr_un sa = { .sun_family = AF_UNIX };
        memcpy(sa.sun_path, d->notify_path, strlen(d->notify_path) + 1);
        if (bind(d->notify_fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
                err = -errno;
                fprintf(stderr, "daemon_util: bind %s: %s\n", d->notify_path, strerror(errno));
                goto fail;
        }

        /* argv */
        argv[argc++] = bin;
        argv[argc++] = "--socket";
        argv[argc++] = d->socket_path;
        for (unsigned i = 0; args && args[i]; i++) {
                if (argc >= MAX_ARGS + 3) {
                        err = -E2BIG;
                        goto fail;
                }
                argv[argc++] = args[i];
        }
        argv[argc] = NULL;

        /* envp: ours without NOTIFY_SOCKET, HBGD_IO, LISTEN_* and what env
         * sets, then NOTIFY_SOCKET and env. Built before fork(). */
        size_t n_env = 0, n_add = 0;
        while (environ && environ[n_env])
                n_env++;
        while (env && env[n_add])
                n_add++;
        envp = calloc(n_env + n_add + 2, sizeof(*envp));
        char notify_env[160];
        snprintf(notify_env, sizeof(notify_env), "NOTIFY_SOCKET=%s", d->notify_path);
        if (!envp) {
                err = -ENOMEM;
                goto fail;
        }
        size_t k = 0;
        for (size_t i = 0; i < n_env; i++)
                if (!env_overridden(environ[i], env))
                        envp[k++] = environ[i];
        envp[k++] = notify_env;
        for (size_t i = 0; i < n_add; i++)
                envp[k++] = (char *)env[i];
        envp[k] = NULL;

        bool verbose = getenv("HBG_TEST_VERBOSE") && getenv("HBG_TEST_VERBOSE")[0];
        if (out_fd >= 0) {
                log_fd = fcntl(out_fd, F_DUPFD_CLOEXEC, 3);
                if (log_fd < 0) {
                        err = -errno;
                        goto fail;
                }
        } else if (!verbose) {
                log_fd = open(d->log_path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
                if (log_fd < 0) {
                        err = -errno;
                        goto fail;
                }
        }
        int null_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);

        fflush(NULL);
        pid_t parent = getpid();
        pid_t pid = fork();
        if (pid < 0) {
                err = -errno;
                if (null_fd >= 0)
                        close(null_fd);
                goto fail;
        }
        if (pid == 0) {
                /* Die with the test: SIGKILL when the forking thread exits. */
                if (prctl(PR_SET_PDEATHSIG, SIGKILL) < 0 || getppid() != parent)
                        _exit(127);
                sigset_t all;
                sigemptyset(&all);
                sigprocmask(SIG_SETMASK, &all, NULL);
                signal(SIGPIPE, SIG_DFL);
                signal(SIGTERM, SIG_DFL);
                signal(SIGINT, SIG_DFL);
                signal(SIGHUP, SIG_DFL);
                signal(SIGCHLD, SIG_DFL);
                if (null_fd >= 0)
                        dup2(null_fd, 0);
                if (log_fd >= 0) {
                        dup2(log_fd, 1);
                        dup2(log_fd, 2);
                }
                /* Nothing of the test leaks into hbgd (client sockets,
                 * Check's pipes): they would keep peers from seeing EOF. */
                syscall(SYS_close_range, 3u, ~0u, 0u);
                execve(bin, (char *const *)argv, envp);
                dprintf(2, "daemon_util: execve %s: %s\n", bin, strerror(errno));
                _exit(127);
        }
        if (null_fd >= 0)
                close(null_fd);
        d->pid = pid;
        d->pidfd = (int)syscall(SYS_pidfd_open, pid, 0);
        track(d);
        free(envp);
        envp = NULL;
        if (log_fd >= 0)
                close(log_fd);
        log_fd = -1;

        err = wait_notify(d, "READY=1", READY_TIMEOUT_MS, true);
        if (err < 0) {
                char st[96] = "still running";
                if (err == -ECHILD) {
                        describe_status(d->wstatus, st, sizeof(st));
                } else {
                        kill(d->pid, SIGKILL);
                        reap(d, true);
                }
                fprintf(stderr, "daemon_util: %s did not become ready (%s): %s\n", bin,
                        err == -ETIMEDOUT ? "no READY=1 within 20 s" : strerror(-err), st);
                daemon_dump_log(d);
                daemon_destroy(d);
                return err;
        }
        *ret = d;
        return 0;

fail:
        if (log_fd >= 0)
                close(log_fd);
        free(envp);
        if (d->notify_fd >= 0)
                close(d->notify_fd);
        rm_tree(d->dir);
        free(d);
        return err;
}

/* ---------------------------------------------------------------- stop */

int daemon_wait_exit(struct hbgd_proc *d, int timeout_ms) {
        long long deadline = daemon_now_ms() + timeout_ms;
        for (;;) {
                int r = reap(d, false);
                if (r == 1)
                        return 0;
                if (r < 0)
                        return r;
                long long left = deadline - daemon_now_ms();
                if (timeout_ms >= 0 && left <= 0)
                        return -ETIMEDOUT;
                if (d->pidfd >= 0) {
                        struct pollfd p = { .fd = d->pidfd, .events = POLLIN };
                        int slice = timeout_ms < 0 || left > INT_MAX ? -1 : (int)left;
                        if (poll(&p, 1, slice) < 0 && errno != EINTR)
                                return -errno;
                } else {
                        sleep_ms(10);
                }
        }
}

int daemon_stop(struct hbgd_proc *d, int timeout_ms) {
        if (!d->reaped) {
                kill(d->pid, SIGTERM);
                if (daemon_wait_exit(d, timeout_ms) < 0) {
                        fprintf(stderr, "daemon_util: hbgd pid %d still runs %d ms after SIGTERM: SIGKILL\n",
                                (int)d->pid, timeout_ms);
                        kill(d->pid, SIGKILL);
                        reap(d, true);
                }
        }
        return d->wstatus;
}

void daemon_destroy(struct hbgd_proc *d) {
        if (!d)
                return;
        if (d->pid > 0 && !d->reaped)
                daemon_stop(d, 20000);
        untrack(d);
        if (d->pidfd >= 0)
                close(d->pidfd);
        if (d->notify_fd >= 0)
                close(d->notify_fd);
        rm_tree(d->dir);
        free(d);
}

/* ---------------------------------------------------------------- fds */

int daemon_fd_count(pid_t pid) {
        char path[64];
        snprintf(path, sizeof(path), "/proc/%d/fd", (int)pid);
        DIR *dir = opendir(path);
        if (!dir)
                return -errno;
        int n = 0;
        struct dirent *e;
        while ((e = readdir(dir)))
                if (e->d_name[0] != '.')
                        n++;
        closedir(dir);
        return n;
}

/* Call fn(task_dir, arg) for each thread of pid named `name`; the count,
 * or -errno. */
static int for_threads_named(pid_t pid, const char *name, void (*fn)(const char *task_dir, void *arg), void *arg) {
        char path[64];
        snprintf(path, sizeof(path), "/proc/%d/task", (int)pid);
        DIR *dir = opendir(path);
        if (!dir)
                return -errno;
        int n = 0;
        struct dirent *e;
        while ((e = readdir(dir))) {
                if (e->d_name[0] == '.')
                        continue;
                char task_dir[sizeof(path) + sizeof(e->d_name) + 2], comm_path[sizeof(task_dir) + 8], comm[32] = "";
                snprintf(task_dir, sizeof(task_dir), "%s/%s", path, e->d_name);
                snprintf(comm_path, sizeof(comm_path), "%s/comm", task_dir);
                FILE *f = fopen(comm_path, "re");
                if (!f)
                        continue; /* the thread ended meanwhile */
                if (fgets(comm, sizeof(comm), f)) {
                        comm[strcspn(comm, "\n")] = '\0';
                        if (strcmp(comm, name) == 0) {
                                n++;
                                if (fn)
                                        fn(task_dir, arg);
                        }
                }
                fclose(f);
        }
        closedir(dir);
        return n;
}

int daemon_threads_named(pid_t pid, const char *name) {
        return for_threads_named(pid, name, NULL, NULL);
}

/* schedstat's first field: the thread's time on a CPU, ns. */
static void add_cpu_ns(const char *task_dir, void *arg) {
        char path[128];
        snprintf(path, sizeof(path), "%s/schedstat", task_dir);
        FILE *f = fopen(path, "re");
        unsigned long long ns;
        if (f && fscanf(f, "%llu", &ns) == 1)
                *(long long *)arg += (long long)ns;
        if (f)
                fclose(f);
}

long long daemon_threads_cpu_ns(pid_t pid, const char *name) {
        long long ns = 0;
        int n = for_threads_named(pid, name, add_cpu_ns, &ns);
        return n < 0 ? n : ns;
}

long daemon_status_kib(pid_t pid, const char *field) {
        char path[64], line[256];
        snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
        FILE *f = fopen(path, "re");
        if (!f)
                return -errno;
        size_t len = strlen(field);
        long kib = -ENOENT;
        while (fgets(line, sizeof(line), f))
                if (strncmp(line, field, len) == 0 && line[len] == ':' && sscanf(line + len + 1, "%ld", &kib) == 1)
                        break;
        fclose(f);
        return kib;
}

int daemon_wait_fd_count(pid_t pid, int want, int timeout_ms) {
        long long deadline = daemon_now_ms() + timeout_ms;
        for (;;) {
                int n = daemon_fd_count(pid);
                if (n == want || n < 0 || daemon_now_ms() >= deadline)
                        return n;
                sleep_ms(5);
        }
}
