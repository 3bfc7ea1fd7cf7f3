/* SPDX-License-Identifier: MIT */
/* Processes the benchmark talks to by lines (bench/child.h). */
#include "bench/child.h"

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bench/bench_util.h"

int bench_child_start(struct bench_child *c, const char *name, const char *const *argv) {
        return bench_child_start_as(c, name, argv, (uid_t)-1);
}

int bench_child_start_as(struct bench_child *c, const char *name, const char *const *argv, uid_t uid) {
        int in[2], out[2];

        memset(c, 0, sizeof(*c));
        c->pid = -1;
        c->to_fd = c->from_fd = -1;
        snprintf(c->name, sizeof(c->name), "%s", name);
        if (pipe2(in, O_CLOEXEC) < 0)
                return -errno;
        if (pipe2(out, O_CLOEXEC) < 0) {
                int err = -errno;
                close(in[0]);
                close(in[1]);
                return err;
        }
        fflush(NULL);
        pid_t parent = getpid();
        pid_t pid = fork();
        if (pid < 0) {
                int err = -errno;
                close(in[0]), close(in[1]), close(out[0]), close(out[1]);
                return err;
        }
        if (pid == 0) {
                if (uid != (uid_t)-1 && (setgroups(0, NULL) < 0 || setresgid(uid, uid, uid) < 0 ||
                                         setresuid(uid, uid, uid) < 0)) {
                        fprintf(stderr, "hbg-bench: cannot run %s as uid %u: %s\n", argv[0], (unsigned)uid,
                                strerror(errno));
                        _exit(126);
                }
                /* Ends with the bench, however the bench ends (set after
                 * the uid change, which clears it). */
                prctl(PR_SET_PDEATHSIG, SIGTERM);
                if (getppid() != parent) /* the bench died before the line above */
                        _exit(127);
                /* dup2 clears O_CLOEXEC on the copies: they survive exec. */
                if (dup2(in[0], 0) < 0 || dup2(out[1], 1) < 0)
                        _exit(127);
                execvp(argv[0], (char *const *)argv);
                fprintf(stderr, "hbg-bench: cannot run %s: %s\n", argv[0], strerror(errno));
                _exit(127);
        }
        close(in[0]);
        close(out[1]);
        c->pid = pid;
        c->to_fd = in[1];
        c->from_fd = out[0];
        return 0;
}

int bench_child_send(struct bench_child *c, const char *s) {
        char line[512];
        int n = snprintf(line, sizeof(line), "%s\n", s);
        if (n < 0 || (size_t)n >= sizeof(line))
                return -EINVAL;
        for (int done = 0; done < n;) {
                ssize_t w = write(c->to_fd, line + done, (size_t)(n - done));
                if (w < 0) {
                        if (errno == EINTR)
                                continue;
                        return -errno;
                }
                done += (int)w;
        }
        return 0;
}

int bench_child_line(struct bench_child *c, char *line, size_t len, int timeout_ms) {
        int64_t deadline = timeout_ms < 0 ? INT64_MAX : bench_now_ns() + (int64_t)timeout_ms * 1000000;
        for (;;) {
                char *nl = memchr(c->buf, '\n', c->len);
                if (nl) {
                        size_t n = (size_t)(nl - c->buf);
                        size_t keep = n < len - 1 ? n : len - 1;
                        memcpy(line, c->buf, keep);
                        line[keep] = 0;
                        memmove(c->buf, nl + 1, c->len - n - 1);
                        c->len -= n + 1;
                        return 1;
                }
                if (c->len == sizeof(c->buf)) {
                        /* A line longer than the buffer: return its start. */
                        size_t keep = len - 1 < c->len ? len - 1 : c->len;
                        memcpy(line, c->buf, keep);
                        line[keep] = 0;
                        c->len = 0;
                        return 1;
                }
                int64_t left = deadline == INT64_MAX ? -1 : (deadline - bench_now_ns()) / 1000000;
                if (deadline != INT64_MAX && left <= 0)
                        return -ETIMEDOUT;
                struct pollfd p = { .fd = c->from_fd, .events = POLLIN };
                int r = poll(&p, 1, left < 0 || left > 1000 ? 1000 : (int)left);
                if (r < 0 && errno != EINTR)
                        return -errno;
                if (r <= 0)
                        continue;
                ssize_t n = read(c->from_fd, c->buf + c->len, sizeof(c->buf) - c->len);
                if (n < 0) {
                        if (errno == EINTR)
                                continue;
                        return -errno;
                }
                if (n == 0)
                        return 0;
                c->len += (size_t)n;
        }
}

int bench_child_finish(struct bench_child *c, int timeout_ms) {
        int st = 0, ret;
        if (c->to_fd >= 0)
                close(c->to_fd);
        c->to_fd = -1;
        if (c->pid <= 0)
                ret = -ECHILD;
        else {
                int64_t deadline = bench_now_ns() + (int64_t)timeout_ms * 1000000;
                for (;;) {
                        pid_t p = waitpid(c->pid, &st, WNOHANG);
                        if (p == c->pid)
                                break;
                        if (p < 0 && errno != EINTR) {
                                st = -1;
                                break;
                        }
                        if (bench_now_ns() > deadline) {
                                fprintf(stderr, "hbg-bench: %s did not exit; killed\n", c->name);
                                kill(c->pid, SIGKILL);
                                waitpid(c->pid, &st, 0);
                                break;
                        }
                        usleep(1000);
                }
                ret = st < 0 ? -ECHILD : WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
        }
        c->pid = -1;
        if (c->from_fd >= 0)
                close(c->from_fd);
        c->from_fd = -1;
        return ret;
}

long bench_self_peak_rss_kib(void) {
        struct rusage ru;
        return getrusage(RUSAGE_SELF, &ru) == 0 ? ru.ru_maxrss : 0;
}
