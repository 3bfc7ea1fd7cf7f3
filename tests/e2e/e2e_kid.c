/* SPDX-License-Identifier: MIT */
/* Forked clients for the end-to-end tests: tests/e2e/e2e_kid.h. */
#include "tests/e2e/e2e_kid.h"

#include <errno.h>
#include <grp.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "hbg/hbg.h"
#include "tests/e2e/e2e_util.h"

void kid_say(int sock, const char *fmt, ...) {
        char buf[512];
        va_list ap;
        va_start(ap, fmt);
        int n = vsnprintf(buf, sizeof(buf) - 1, fmt, ap);
        va_end(ap);
        if (n < 0)
                return;
        if ((size_t)n > sizeof(buf) - 2)
                n = (int)sizeof(buf) - 2;
        buf[n++] = '\n';
        for (int off = 0; off < n;) {
                ssize_t w = send(sock, buf + off, (size_t)(n - off), MSG_NOSIGNAL);
                if (w <= 0 && errno != EINTR)
                        return;
                off += w > 0 ? (int)w : 0;
        }
}

/* A command byte from the parent; 0 once it hung up. */
char kid_cmd(int sock) {
        char c;
        ssize_t n;
        while ((n = read(sock, &c, 1)) < 0 && errno == EINTR)
                ;
        return n == 1 ? c : 0;
}

bool kid_cmd_pending(int sock) {
        struct pollfd p = { .fd = sock, .events = POLLIN };
        return poll(&p, 1, 0) > 0;
}

void kid_start(struct kid *k, uid_t uid, kid_fn fn, void *arg) {
        int sv[2];
        ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
        fflush(NULL);
        pid_t parent = getpid();
        pid_t pid = fork();
        ck_assert_int_ge(pid, 0);
        if (pid == 0) {
                close(sv[0]);
                if (uid != SAME_UID &&
                    (setgroups(0, NULL) < 0 || setresgid(uid, uid, uid) < 0 || setresuid(uid, uid, uid) < 0)) {
                        kid_say(sv[1], "FAIL cannot become uid %u: %s", (unsigned)uid, strerror(errno));
                        _exit(2);
                }
                /* After the uid change, which clears it. */
                if (prctl(PR_SET_PDEATHSIG, SIGKILL) < 0 || getppid() != parent)
                        _exit(3);
                _exit(fn(sv[1], arg));
        }
        close(sv[1]);
        *k = (struct kid){ .pid = pid, .sock = sv[0] };
}

void kid_tell(struct kid *k, char c) {
        ssize_t n = send(k->sock, &c, 1, MSG_NOSIGNAL);
        (void)n; /* a child gone is seen at its next line or exit */
}

/* The child's exit within timeout_ms (else SIGKILL). */
int kid_reap(struct kid *k, int timeout_ms) {
        long long deadline = daemon_now_ms() + timeout_ms;
        while (!k->reaped) {
                pid_t r = waitpid(k->pid, &k->status, WNOHANG);
                if (r == k->pid) {
                        k->reaped = true;
                        break;
                }
                if (daemon_now_ms() >= deadline) {
                        kill(k->pid, SIGKILL);
                        while (waitpid(k->pid, &k->status, 0) < 0 && errno == EINTR)
                                ;
                        k->reaped = true;
                        return -ETIMEDOUT;
                }
                sleep_us(2000);
        }
        return 0;
}

void kid_kill(struct kid *k) {
        if (!k->reaped)
                kill(k->pid, SIGKILL);
        kid_reap(k, WAIT_MS);
        if (k->sock >= 0)
                close(k->sock);
        k->sock = -1;
}

/* One line from the child: 0, -ETIMEDOUT, -ECONNRESET (it hung up). */
int kid_line(struct kid *k, int timeout_ms, char *buf, size_t size) {
        long long deadline = daemon_now_ms() + timeout_ms;
        size_t n = 0;
        for (;;) {
                long long left = deadline - daemon_now_ms();
                struct pollfd p = { .fd = k->sock, .events = POLLIN };
                if (left <= 0 || poll(&p, 1, (int)left) == 0) {
                        buf[n] = 0;
                        return -ETIMEDOUT;
                }
                char c;
                ssize_t r = read(k->sock, &c, 1);
                if (r < 0 && errno == EINTR)
                        continue;
                if (r <= 0) {
                        buf[n] = 0;
                        return -ECONNRESET;
                }
                if (c == '\n') {
                        buf[n] = 0;
                        return 0;
                }
                if (n + 1 < size)
                        buf[n++] = c;
        }
}

/* The next line must start with tag (e.g. "READY"): what follows it. A
 * "FAIL ..." line, silence or an early exit fail the test. */
const char *kid_expect(struct hbgd_proc *d, struct kid *k, const char *tag, int timeout_ms, char *buf,
                              size_t size, const char *who) {
        int err = kid_line(k, timeout_ms, buf, size);
        if (err == -ECONNRESET) {
                char how[96];
                kid_reap(k, IO_MS);
                describe(k->status, how, sizeof(how));
                D_ASSERT(d, false, "%s exited before saying %s: %s", who, tag, how);
        }
        D_ASSERT(d, err == 0, "%s said nothing for %d ms (waiting for %s)", who, timeout_ms, tag);
        D_ASSERT(d, strncmp(buf, "FAIL", 4) != 0, "%s: %s", who, buf + 4);
        D_ASSERT(d, strncmp(buf, tag, strlen(tag)) == 0, "%s said \"%s\", expected %s", who, buf, tag);
        const char *rest = buf + strlen(tag);
        return *rest == ' ' ? rest + 1 : rest;
}

/* The child must exit 0 within timeout_ms. */
void kid_end(struct hbgd_proc *d, struct kid *k, int timeout_ms, const char *who) {
        int err = kid_reap(k, timeout_ms);
        char line[512] = "", how[96];
        if (err == 0 && !(WIFEXITED(k->status) && WEXITSTATUS(k->status) == 0))
                while (kid_line(k, 100, line, sizeof(line)) == 0 && strncmp(line, "FAIL", 4) != 0)
                        ;
        describe(k->status, how, sizeof(how));
        close(k->sock);
        k->sock = -1;
        D_ASSERT(d, err == 0, "%s still ran after %d ms", who, timeout_ms);
        D_ASSERT(d, WIFEXITED(k->status) && WEXITSTATUS(k->status) == 0, "%s failed: %s %s", who, how, line);
}

/* ------------------------------------------------------------ honest client process */

int honest_fn(int sock, void *arg) {
        hbg_client *c = NULL;
        hbg_tensor t;
        int err = hbg_connect(&c, arg);
        if (err < 0 || (err = hbg_tensor_alloc(c, 1024 * sizeof(float), &t)) < 0) {
                kid_say(sock, "FAIL hbg_connect/alloc: %s [%s]", hbg_strerror(err),
                        hbg_last_error(c));
                return 1;
        }
        const float *v = hbg_tensor_data(c, t);
        kid_say(sock, "READY");
        if (kid_cmd(sock) != 'G')
                return 0;
        long long worst = 0;
        unsigned g;
        for (g = 0; g == 0 || !kid_cmd_pending(sock); g++) {
                float want = (float)(g % 1000) + 0.5f;
                hbg_task task = HBG_TASK_INIT("fill_f32");
                task.n_args = 1;
                task.args[0].tensor = t;
                task.args[0].dir = HBG_OUT;
                task.n_scalars = 1;
                task.scalars[0] = hbg_f32(want);
                uint64_t graph;
                long long t0 = daemon_now_ms();
                if ((err = hbg_graph_add(c, &task, NULL)) < 0 || (err = hbg_graph_submit(c, &graph)) < 0 ||
                    (err = hbg_graph_wait(c, graph, WAIT_MS)) < 0) {
                        kid_say(sock, "FAIL graph %u: %s [%s]", g, hbg_strerror(err), hbg_last_error(c));
                        return 1;
                }
                long long took = daemon_now_ms() - t0;
                worst = took > worst ? took : worst;
                for (unsigned i = 0; i < 1024; i++)
                        if (v[i] != want) {
                                kid_say(sock, "FAIL graph %u: element %u is %g, expected %g", g, i, (double)v[i],
                                        (double)want);
                                return 1;
                        }
        }
        kid_say(sock, "DONE %u %lld", g, worst);
        hbg_disconnect(c);
        return 0;
}

/* Start honest_fn; returns once it is connected. */
void honest_start(struct hbgd_proc *d, struct kid *k) {
        char buf[256];
        kid_start(k, SAME_UID, honest_fn, (void *)d->socket_path);
        kid_expect(d, k, "READY", IO_MS, buf, sizeof(buf), "the honest client");
}

/* Stop it ('Q'): the number of graphs, and the worst latency. */
unsigned honest_stop(struct hbgd_proc *d, struct kid *k, long long *ret_worst_ms) {
        char buf[256];
        unsigned graphs = 0;
        kid_tell(k, 'Q');
        const char *done = kid_expect(d, k, "DONE", WAIT_MS, buf, sizeof(buf), "the honest client");
        sscanf(done, "%u %lld", &graphs, ret_worst_ms);
        kid_end(d, k, IO_MS, "the honest client");
        D_ASSERT(d, graphs > 0, "the honest client ran no graph");
        return graphs;
}
