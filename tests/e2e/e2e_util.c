/* SPDX-License-Identifier: MIT */
/* Helpers of the end-to-end tests against a real hbgd: tests/e2e/e2e_util.h. */
#include "tests/e2e/e2e_util.h"

#include <dirent.h>
#include <errno.h>
#include <libgen.h>
#include <linux/io_uring.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "proto/wire.h"

const char *mode_name(int mode) {
        return mode == MODE_EPOLL ? "epoll" : "io_uring";
}

/* On failure: hbgd's log to stderr (it is removed afterwards), and
 * whether hbgd still runs at the end of the message (a crash shows up as
 * a refusal that never came, a connection closed early...). */
const char *d_state(struct hbgd_proc *d) {
        static char buf[128];
        daemon_dump_log(d);
        if (daemon_wait_exit(d, 0) == -ETIMEDOUT)
                return "";
        if (WIFSIGNALED(d->wstatus))
                snprintf(buf, sizeof(buf), " [hbgd died: signal %d]", WTERMSIG(d->wstatus));
        else
                snprintf(buf, sizeof(buf), " [hbgd exited with status %d]", WEXITSTATUS(d->wstatus));
        return buf;
}

struct hbgd_proc *start_hbgd(int mode, const char *const *args) {
        static const char *const epoll_env[] = { "HBGD_IO=epoll", NULL };
        struct hbgd_proc *d = NULL;
        int err = daemon_start(&d, args, mode == MODE_EPOLL ? epoll_env : NULL);
        ck_assert_msg(err == 0, "hbgd (%s) did not start: %s", mode_name(mode), strerror(-err));
        return d;
}

struct hbgd_proc *start_hooks_hbgd(const char *const *env) {
        struct hbgd_proc *d = NULL;
        setenv("HBGD", HBG_TEST_HBGD_HOOKS, 1);
        int err = daemon_start(&d, NULL, env);
        unsetenv("HBGD");
        ck_assert_msg(err == 0, "hbgd (%s) did not start: %s", HBG_TEST_HBGD_HOOKS, strerror(-err));
        return d;
}

#define MAX_COMPLETIONS 16
static char completion_names[MAX_COMPLETIONS][64];
static unsigned n_completions;

/* Asked once, while the suite is built (its cases, forked, inherit the
 * names): outside a test, so a failure ends the program. */
static void completions_load(void) {
        if (n_completions)
                return;
        char cmd[600];
        snprintf(cmd, sizeof(cmd), "'%s' --completion=help", daemon_binary());
        FILE *f = popen(cmd, "r");
        char line[64];
        while (f && n_completions < MAX_COMPLETIONS && fgets(line, sizeof(line), f)) {
                line[strcspn(line, "\n")] = 0;
                if (line[0])
                        snprintf(completion_names[n_completions++], sizeof(completion_names[0]), "%s", line);
        }
        if (!f || pclose(f) != 0 || n_completions == 0) {
                fprintf(stderr, "%s listed no completion policy\n", cmd);
                exit(1);
        }
}

unsigned completion_count(void) {
        completions_load();
        return n_completions;
}

const char *completion_name(unsigned i) {
        completions_load();
        return i < n_completions ? completion_names[i] : NULL;
}

struct hbgd_proc *start_hbgd_completion(int mode, const char *completion) {
        char opt[64];
        snprintf(opt, sizeof(opt), "--completion=%s", completion);
        const char *const args[] = { opt, NULL };
        struct hbgd_proc *d = start_hbgd(mode, args);
        /* The policy under test is the one running, as hbgd's status says
         * (not just the option passed). */
        Hbg__Envelope *e = daemon_status_fresh(d);
        char running[64] = "(no daemon status)";
        if (e->status_reply->daemon && e->status_reply->daemon->completion_mode)
                snprintf(running, sizeof(running), "%s", e->status_reply->daemon->completion_mode);
        wire_free(e);
        D_ASSERT(d, strcmp(running, completion) == 0,
                 "hbgd started with --completion=%s reports completion_mode %s", completion, running);
        return d;
}

/* SIGTERM; hbgd must exit 0. */
void stop_hbgd(struct hbgd_proc *d) {
        int st = daemon_stop(d, 30000);
        if (!(WIFEXITED(st) && WEXITSTATUS(st) == 0))
                daemon_dump_log(d);
        bool ok = WIFEXITED(st) && WEXITSTATUS(st) == 0;
        int sig = WIFSIGNALED(st) ? WTERMSIG(st) : 0, code = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
        daemon_destroy(d);
        ck_assert_msg(ok, "hbgd did not exit 0 on SIGTERM: exit code %d, signal %d", code, sig);
}

void assert_alive(struct hbgd_proc *d) {
        D_ASSERT(d, daemon_wait_exit(d, 0) == -ETIMEDOUT, "hbgd died (wait status 0x%x)",
                 (unsigned)d->wstatus);
}

bool uring_available(void) {
        struct io_uring_params p;
        memset(&p, 0, sizeof(p));
        int fd = (int)syscall(__NR_io_uring_setup, 4, &p);
        if (fd < 0)
                return false;
        close(fd);
        return true;
}

uint64_t seed_value(void) {
        static uint64_t seed;
        if (!seed) {
                const char *s = getenv("HBG_TEST_SEED");
                seed = s && s[0] ? strtoull(s, NULL, 0) : (uint64_t)time(NULL) ^ ((uint64_t)getpid() << 20);
                if (!seed)
                        seed = 1;
        }
        return seed;
}

uint64_t xorshift(uint64_t *s) {
        uint64_t x = *s;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        return *s = x;
}

void sleep_us(long us) {
        struct timespec ts = { .tv_sec = us / 1000000, .tv_nsec = (us % 1000000) * 1000 };
        while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
                ;
}


/* ------------------------------------------------------------ fds */

void list_fds(pid_t pid) {
        char path[64];
        snprintf(path, sizeof(path), "/proc/%d/fd", (int)pid);
        DIR *dir = opendir(path);
        if (!dir)
                return;
        struct dirent *e;
        while ((e = readdir(dir))) {
                if (e->d_name[0] == '.')
                        continue;
                char link[330], target[256];
                snprintf(link, sizeof(link), "%s/%s", path, e->d_name);
                ssize_t n = readlink(link, target, sizeof(target) - 1);
                target[n > 0 ? n : 0] = 0;
                fprintf(stderr, "  hbgd fd %s -> %s\n", e->d_name, target);
                /* The io_uring's state: its queues and the polls in flight. */
                if (strcmp(target, "anon_inode:[io_uring]") == 0) {
                        char info[330], line[256];
                        snprintf(info, sizeof(info), "/proc/%d/fdinfo/%s", (int)pid, e->d_name);
                        FILE *f = fopen(info, "r");
                        while (f && fgets(line, sizeof(line), f))
                                fprintf(stderr, "    %s", line);
                        if (f)
                                fclose(f);
                }
        }
        closedir(dir);
        /* And where each of its threads waits (an io thread blocked in a
         * write, say). */
        snprintf(path, sizeof(path), "/proc/%d/task", (int)pid);
        if (!(dir = opendir(path)))
                return;
        while ((e = readdir(dir))) {
                if (e->d_name[0] == '.')
                        continue;
                char file[330], comm[64] = "", wchan[64] = "";
                snprintf(file, sizeof(file), "%s/%s/comm", path, e->d_name);
                FILE *f = fopen(file, "r");
                if (f) {
                        if (!fgets(comm, sizeof(comm), f))
                                comm[0] = 0;
                        fclose(f);
                }
                comm[strcspn(comm, "\n")] = 0;
                snprintf(file, sizeof(file), "%s/%s/wchan", path, e->d_name);
                if ((f = fopen(file, "r"))) {
                        if (!fgets(wchan, sizeof(wchan), f))
                                wchan[0] = 0;
                        fclose(f);
                }
                fprintf(stderr, "  hbgd thread %s (%s) waits in %s\n", e->d_name, comm, wchan[0] ? wchan : "?");
        }
        closedir(dir);
}

/* ------------------------------------------------------------ a recorded task; hbgd's fds at rest */

struct hbg_recorded_task noop_recorded(void) {
        struct hbg_recorded_task t;
        memset(&t, 0, sizeof(t));
        t.desc.id = 1;
        t.desc.kernel[1] = 1; /* noop */
        t.desc.lane_mask = 2;
        t.desc.block_num = 1;
        t.desc.n_fanins = 1;
        return t;
}

void assert_fd_baseline(struct hbgd_proc *d, int base, const char *what) {
        int n = daemon_wait_fd_count(d->pid, base, FD_SETTLE_MS);
        if (n != base)
                list_fds(d->pid);
        D_ASSERT(d, n == base, "%s: hbgd holds %d fds, %d before (waited %d ms)", what, n, base, FD_SETTLE_MS);
}

/* Each abuse case: hbgd refuses, closes, leaks no fd and goes on serving. */
void abuse_epilogue(struct hbgd_proc *d, int base, const char *what) {
        int n = daemon_wait_fd_count(d->pid, base, FD_SETTLE_MS);
        if (n != base)
                list_fds(d->pid);
        D_ASSERT(d, n == base, "%s: hbgd holds %d fds after the connection ended, %d before", what, n, base);
        assert_serving(d);
        n = daemon_wait_fd_count(d->pid, base, FD_SETTLE_MS);
        D_ASSERT(d, n == base, "%s: hbgd holds %d fds after a normal client left, %d before", what, n, base);
        stop_hbgd(d);
}


/*
 * hbgd's fds when idle. Not simply a count right after READY=1: sd_notify()
 * closes its socket only after sending. A hello answered on a connection
 * proves the io thread is past that, and the connection is exactly one fd.
 * The sets of regions made ahead ([session] spare_regions) are made first:
 * they are part of what an idle hbgd holds.
 */
int fd_baseline(struct hbgd_proc *d) {
        wait_slow_work_idle(d);
        int fd = raw_connect(d->socket_path);
        raw_hello(fd);
        int with = daemon_fd_count(d->pid);
        close(fd);
        D_ASSERT(d, with > 1, "cannot count hbgd's fds: %s", strerror(-with));
        int n = daemon_wait_fd_count(d->pid, with - 1, FD_SETTLE_MS);
        D_ASSERT(d, n == with - 1, "hbgd holds %d fds after an idle connection closed, %d with it", n, with);
        return n;
}

/* ------------------------------------------------------------ hbgd with a config file */

/* hbgd with a config file (INI text), removed once hbgd has read it. */
struct hbgd_proc *start_hbgd_conf(int mode, const char *conf) {
        return start_hbgd_conf_fd(mode, conf, -1);
}

struct hbgd_proc *start_hbgd_conf_fd(int mode, const char *conf, int out_fd) {
        static const char *const epoll_env[] = { "HBGD_IO=epoll", NULL };
        const char *tmp = getenv("TMPDIR");
        char path[256];
        snprintf(path, sizeof(path), "%s/hbg-e2e-XXXXXX.conf", tmp && tmp[0] ? tmp : "/tmp");
        int fd = mkstemps(path, 5);
        ck_assert_msg(fd >= 0, "mkstemps %s: %s", path, strerror(errno));
        size_t len = strlen(conf);
        ssize_t n = write(fd, conf, len);
        close(fd);
        ck_assert_msg(n == (ssize_t)len, "writing %s failed", path);
        const char *const args[] = { "--config", path, NULL };
        struct hbgd_proc *d = NULL;
        int err = daemon_start_fd(&d, args, mode == MODE_EPOLL ? epoll_env : NULL, out_fd);
        unlink(path);
        ck_assert_msg(err == 0, "hbgd (%s) did not start with config:\n%s\n: %s", mode_name(mode), conf,
                      strerror(-err));
        return d;
}

/* SIGTERM; hbgd must exit 0 within the grace period (and some slack). */
void stop_within_grace(struct hbgd_proc *d, const char *what) {
        long long t0 = daemon_now_ms();
        ck_assert_int_eq(kill(d->pid, SIGTERM), 0);
        int w = daemon_wait_exit(d, GRACE_MS + 5000);
        long long took = daemon_now_ms() - t0;
        D_ASSERT(d, w == 0, "%s: hbgd still runs %lld ms after SIGTERM", what, took);
        D_ASSERT(d, WIFEXITED(d->wstatus) && WEXITSTATUS(d->wstatus) == 0,
                 "%s: hbgd did not exit 0 on SIGTERM (wait status 0x%x)", what, (unsigned)d->wstatus);
        fprintf(stderr, "%s: hbgd exited 0 %lld ms after SIGTERM\n", what, took);
        daemon_destroy(d);
}

/* Let uid 65534 reach the socket: daemon_util makes its directories 0700. */
void open_to_all(struct hbgd_proc *d) {
        char parent[sizeof(d->dir)];
        snprintf(parent, sizeof(parent), "%s", d->dir);
        ck_assert_int_eq(chmod(d->dir, 0755), 0);
        ck_assert_int_eq(chmod(dirname(parent), 0755), 0);
        ck_assert_int_eq(chmod(d->socket_path, 0777), 0);
}

/* ------------------------------------------------------------ session mappings */

void *find_session_mapping(const char *what, uint64_t *session, uint64_t *ret_size) {
        FILE *f = fopen("/proc/self/maps", "re");
        if (!f)
                return NULL;
        char line[512], needle[32];
        void *found = NULL;
        snprintf(needle, sizeof(needle), "/memfd:hbg-%s-", what);
        while (!found && fgets(line, sizeof(line), f)) {
                unsigned long lo, hi;
                const char *p = strstr(line, needle);
                if (!p || sscanf(line, "%lx-%lx", &lo, &hi) != 2)
                        continue;
                uint64_t id = strtoull(p + strlen(needle), NULL, 10);
                if (*session && id != *session)
                        continue;
                *session = id;
                *ret_size = hi - lo;
                found = (void *)lo;
        }
        fclose(f);
        return found;
}


/* ------------------------------------------------------------ test conditions */

bool skip_mode(int mode, const char *test) {
        if (mode == MODE_URING && !uring_available()) {
                fprintf(stderr, "%s (io_uring): skipped: io_uring is unavailable here\n", test);
                return true;
        }
        return false;
}

void freeze(struct hbgd_proc *d) {
        int st;
        ck_assert_int_eq(kill(d->pid, SIGSTOP), 0);
        ck_assert_int_eq(waitpid(d->pid, &st, WUNTRACED), d->pid);
        ck_assert_msg(WIFSTOPPED(st), "hbgd did not stop (wait status 0x%x)", (unsigned)st);
}

void thaw(struct hbgd_proc *d) {
        ck_assert_int_eq(kill(d->pid, SIGCONT), 0);
}

/* hbgd's log holds `needle` (it may take a moment to be written). */
bool log_has(struct hbgd_proc *d, const char *needle) {
        long long deadline = daemon_now_ms() + IO_MS;
        do {
                FILE *f = fopen(d->log_path, "r");
                if (f) {
                        char line[1024];
                        bool found = false;
                        while (!found && fgets(line, sizeof(line), f))
                                found = strstr(line, needle) != NULL;
                        fclose(f);
                        if (found)
                                return true;
                }
                sleep_us(20000);
        } while (daemon_now_ms() < deadline);
        return false;
}
