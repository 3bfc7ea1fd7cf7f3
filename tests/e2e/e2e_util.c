/* SPDX-License-Identifier: MIT */
/* Helpers of the end-to-end tests against a real hbgd: tests/e2e/e2e_util.h. */
#include "tests/e2e/e2e_util.h"

#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <libgen.h>
#include <linux/io_uring.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
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

/* ------------------------------------------------------------ workload */

/* The workload of tests/e2e/e2e_util.h. */
static int wl_fail(struct workload *w, int err, const char *what, uint64_t g) {
        snprintf(w->msg, sizeof(w->msg), "%s (graph %" PRIu64 "): %s [%s]", what, g, hbg_strerror(err),
                 hbg_last_error(w->c));
        return err;
}

int wl_init(struct workload *w, hbg_client *c, unsigned k) {
        memset(w, 0, sizeof(*w));
        w->c = c;
        w->k = k;
        int err;
        if ((err = hbg_tensor_alloc(c, WL_N * 4, &w->a)) < 0 || (err = hbg_tensor_alloc(c, WL_N * 4, &w->b)) < 0 ||
            (err = hbg_tensor_alloc(c, WL_N * 4, &w->s)) < 0 ||
            (err = hbg_tensor_alloc(c, WL_SLOTS * 4, &w->res)) < 0)
                return wl_fail(w, err, "hbg_tensor_alloc", 0);
        if (!hbg_tensor_data(c, w->a) || !hbg_tensor_data(c, w->res))
                return wl_fail(w, -EFAULT, "hbg_tensor_data returned NULL", 0);
        return 0;
}

static float wl_expect(const struct workload *w, uint64_t g) {
        return 2.0f * (float)(w->k + g % 7 + 1) * WL_N;
}

static int wl_add(struct workload *w, hbg_task *t, uint64_t g, const char *what) {
        int err = hbg_graph_add(w->c, t, NULL);
        return err < 0 ? wl_fail(w, err, what, g) : 0;
}

static int wl_submit(struct workload *w, uint64_t g, uint64_t *ret_graph) {
        float *res = hbg_tensor_data(w->c, w->res);
        /* Sentinel: a graph that "succeeds" without writing is caught. The
         * slot's previous writer (graph g - WL_SLOTS) was waited for. */
        res[g % WL_SLOTS] = -1.0f;
        hbg_tensor slot;
        int err = hbg_tensor_slice_f32(w->res, g % WL_SLOTS, g % WL_SLOTS + 1, &slot);
        if (err < 0)
                return wl_fail(w, err, "hbg_tensor_slice_f32", g);

        hbg_task t = HBG_TASK_INIT("fill_f32");
        t.blocks = 2;
        t.n_args = 1;
        t.args[0].tensor = w->a;
        t.args[0].dir = HBG_OUT;
        t.n_scalars = 1;
        t.scalars[0] = hbg_f32((float)w->k);
        if ((err = wl_add(w, &t, g, "hbg_graph_add(fill a)")) < 0)
                return err;
        t.args[0].tensor = w->b;
        t.scalars[0] = hbg_f32((float)(g % 7 + 1));
        if ((err = wl_add(w, &t, g, "hbg_graph_add(fill b)")) < 0)
                return err;

        t = HBG_TASK_INIT("add_f32");
        t.blocks = 3;
        t.n_args = 3;
        t.args[0].tensor = w->a;
        t.args[0].dir = HBG_IN;
        t.args[1].tensor = w->b;
        t.args[1].dir = HBG_IN;
        t.args[2].tensor = w->s;
        t.args[2].dir = HBG_OUT;
        if ((err = wl_add(w, &t, g, "hbg_graph_add(add)")) < 0)
                return err;

        t = HBG_TASK_INIT("scale_f32");
        t.lanes = HBG_LANES_MIX;
        t.n_args = 1;
        t.args[0].tensor = w->s;
        t.args[0].dir = HBG_INOUT;
        t.n_scalars = 1;
        t.scalars[0] = hbg_f32(2.0f);
        if ((err = wl_add(w, &t, g, "hbg_graph_add(scale)")) < 0)
                return err;

        t = HBG_TASK_INIT("reduce_sum_f32");
        t.n_args = 2;
        t.args[0].tensor = w->s;
        t.args[0].dir = HBG_IN;
        t.args[1].tensor = slot;
        t.args[1].dir = HBG_OUT;
        if ((err = wl_add(w, &t, g, "hbg_graph_add(reduce)")) < 0)
                return err;

        if ((err = hbg_graph_submit(w->c, ret_graph)) < 0)
                return wl_fail(w, err, "hbg_graph_submit", g);
        return 0;
}

static int wl_check(struct workload *w, uint64_t g, uint64_t graph) {
        int err = hbg_graph_wait(w->c, graph, WAIT_MS);
        if (err != 0)
                return wl_fail(w, err, "hbg_graph_wait", g);
        const float *res = hbg_tensor_data(w->c, w->res);
        float want = wl_expect(w, g);
        if (res[g % WL_SLOTS] != want) {
                snprintf(w->msg, sizeof(w->msg), "graph %" PRIu64 ": result %g, expected %g", g,
                         (double)res[g % WL_SLOTS], (double)want);
                return -EBADMSG;
        }
        return 0;
}

static bool stop_requested(int stop_fd) {
        if (stop_fd < 0)
                return false;
        struct pollfd p = { .fd = stop_fd, .events = POLLIN };
        return poll(&p, 1, 0) > 0;
}

/* n graphs (n == 0: until stop_fd is readable or hangs up; for ever if
 * stop_fd < 0). Returns the number of graphs verified, or -errno with
 * w->msg set. */
long wl_run(struct workload *w, uint64_t n, int stop_fd) {
        uint64_t ids[WL_DEPTH];
        uint64_t g = 0, checked = 0;
        int err;
        for (;; g++) {
                bool more = n ? g < n : !stop_requested(stop_fd);
                if (!more)
                        break;
                if (g >= WL_DEPTH) {
                        if ((err = wl_check(w, g - WL_DEPTH, ids[g % WL_DEPTH])) < 0)
                                return err;
                        checked++;
                }
                if ((err = wl_submit(w, g, &ids[g % WL_DEPTH])) < 0)
                        return err;
        }
        for (uint64_t j = g > WL_DEPTH ? g - WL_DEPTH : 0; j < g; j++) {
                if ((err = wl_check(w, j, ids[j % WL_DEPTH])) < 0)
                        return err;
                checked++;
        }
        if (g > 0) {
                /* The last graph's sum tensor, element by element. */
                const float *s = hbg_tensor_data(w->c, w->s);
                float want = 2.0f * (float)(w->k + (g - 1) % 7 + 1);
                for (unsigned i = 0; i < WL_N; i++)
                        if (s[i] != want) {
                                snprintf(w->msg, sizeof(w->msg), "s[%u] = %g after graph %" PRIu64 ", expected %g",
                                         i, (double)s[i], g - 1, (double)want);
                                return -EBADMSG;
                        }
        }
        return (long)checked;
}

/* The daemon serves: a new client connects and runs a few graphs. */
void assert_serving(struct hbgd_proc *d) {
        assert_alive(d);
        hbg_client *c = NULL;
        int err = hbg_connect(&c, d->socket_path);
        D_ASSERT(d, err == 0, "hbgd no longer serves: hbg_connect: %s [%s]", hbg_strerror(err),
                 hbg_last_error(NULL));
        struct workload w;
        err = wl_init(&w, c, 5);
        long r = err < 0 ? err : wl_run(&w, 3, -1);
        char msg[sizeof(w.msg)];
        snprintf(msg, sizeof(msg), "%s", w.msg);
        hbg_disconnect(c);
        D_ASSERT(d, r == 3, "hbgd no longer serves: %s", msg);
}

/* Exit codes of the forked clients. */

const char *kid_code(int code) {
        switch (code) {
        case KID_OK: return "ok";
        case KID_CONNECT: return "hbg_connect failed";
        case KID_INIT: return "tensor setup failed";
        case KID_RUN: return "a graph failed or computed a wrong result";
        case KID_PIPE: return "pipe to the test failed";
        }
        return "unexpected exit code";
}

void describe(int st, char *buf, size_t size) {
        if (WIFEXITED(st))
                snprintf(buf, size, "exit %d (%s)", WEXITSTATUS(st), kid_code(WEXITSTATUS(st)));
        else if (WIFSIGNALED(st))
                snprintf(buf, size, "signal %d (%s)", WTERMSIG(st), strsignal(WTERMSIG(st)));
        else
                snprintf(buf, size, "status 0x%x", (unsigned)st);
}

/* A client process: connect, tensors, then `ready_fd` gets 'R', then n
 * graphs (see wl_run). Never returns. */
void __attribute__((noreturn)) client_main(const char *socket_path, unsigned k, uint64_t n,
                                                  int ready_fd, int stop_fd, const char *who) {
        hbg_client *c = NULL;
        int err = hbg_connect(&c, socket_path);
        if (err < 0) {
                fprintf(stderr, "%s: hbg_connect: %s [%s]\n", who, hbg_strerror(err), hbg_last_error(NULL));
                _exit(KID_CONNECT);
        }
        struct workload w;
        if (wl_init(&w, c, k) < 0) {
                fprintf(stderr, "%s: %s\n", who, w.msg);
                _exit(KID_INIT);
        }
        if (ready_fd >= 0) {
                if (write(ready_fd, "R", 1) != 1)
                        _exit(KID_PIPE);
                close(ready_fd);
        }
        long r = wl_run(&w, n, stop_fd);
        if (r < 0) {
                fprintf(stderr, "%s: %s\n", who, w.msg);
                _exit(KID_RUN);
        }
        if (n == 0 && stop_fd >= 0)
                fprintf(stderr, "%s: %ld graphs verified\n", who, r);
        hbg_disconnect(c);
        _exit(KID_OK);
}

/* Read one byte from fd within timeout_ms: 1, 0 on EOF, -ETIMEDOUT. */
int read_byte(int fd, int timeout_ms, char *ret) {
        struct pollfd p = { .fd = fd, .events = POLLIN };
        int n;
        do
                n = poll(&p, 1, timeout_ms);
        while (n < 0 && errno == EINTR);
        if (n == 0)
                return -ETIMEDOUT;
        ssize_t r = read(fd, ret, 1);
        return r < 0 ? -errno : (int)r;
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

void wait_slow_work_idle(struct hbgd_proc *d) {
        int fd = raw_connect(d->socket_path);
        D_ASSERT(d, fd >= 0, "cannot connect to hbgd");
        raw_hello(fd);
        unsigned idle = 0;
        for (int i = 0; i < 3000 && idle < 2; i++) {
                send_status_request(fd, HBG__STATUS_KIND__STATUS_DAEMON, NULL, 0);
                Hbg__Envelope *e = expect_env(fd, HBG__ENVELOPE__MSG_STATUS_REPLY, NULL, 0);
                idle = e->status_reply->daemon && e->status_reply->daemon->slow_jobs == 0 ? idle + 1 : 0;
                wire_free(e);
                if (idle < 2)
                        sleep_us(10000);
        }
        close(fd);
        D_ASSERT(d, idle >= 2, "hbgd's slow-work thread still busy after 30 s");
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

/* ------------------------------------------------------------ liveness */

/* A fresh connection gets hbgd's Hello and a status reply within bound_ms.
 * Returns the milliseconds it took. With *ret_shed, a connection hbgd
 * closes unanswered (shed while it is out of descriptors) is retried, and
 * counted there. */
long long fresh_status_shed(struct hbgd_proc *d, int bound_ms, const char *what, unsigned *ret_shed) {
        long long t0 = daemon_now_ms(), deadline = t0 + bound_ms;
        char why[256] = "";
        int r;
        for (;;) {
                why[0] = 0;
                int fd = cx_connect_until(d->socket_path, deadline);
                D_ASSERT(d, fd >= 0, "%s: cannot connect to hbgd within %d ms: %s", what, bound_ms, strerror(-fd));
                r = cx_send(fd, HBG__ENVELOPE__MSG_HELLO, 0, 0);
                if (r == 0)
                        r = cx_expect(fd, HBG__ENVELOPE__MSG_HELLO, (int)(deadline - daemon_now_ms()), why,
                                      sizeof(why));
                bool shed = r != 0 && (strcmp(why, "no reply: EOF") == 0 || r == -EPIPE || r == -ECONNRESET);
                if (r == 0 && (r = cx_send(fd, HBG__ENVELOPE__MSG_STATUS_REQUEST, 0, 0)) == 0)
                        r = cx_expect(fd, HBG__ENVELOPE__MSG_STATUS_REPLY, (int)(deadline - daemon_now_ms()), why,
                                      sizeof(why));
                close(fd);
                if (!(shed && ret_shed && daemon_now_ms() < deadline))
                        break;
                ++*ret_shed;
                sleep_us(1000);
        }
        long long took = daemon_now_ms() - t0;
        D_ASSERT(d, r == 0, "%s: a fresh client got no hello and status reply within %d ms: %s", what, bound_ms,
                 why[0] ? why : strerror(-r));
        return took;
}

long long fresh_status(struct hbgd_proc *d, int bound_ms, const char *what) {
        return fresh_status_shed(d, bound_ms, what, NULL);
}

/* One status request on fd (hello done): the reply (free it). */
Hbg__Envelope *status_of(struct hbgd_proc *d, int fd, Hbg__StatusKind kind) {
        Hbg__Envelope env = HBG__ENVELOPE__INIT;
        Hbg__StatusRequest rq = HBG__STATUS_REQUEST__INIT;
        rq.kind = kind;
        env.msg_case = HBG__ENVELOPE__MSG_STATUS_REQUEST;
        env.status_request = &rq;
        int err = wire_send(fd, &env, NULL, 0, HBG_WIRE_MAX_MSG_DEFAULT);
        D_ASSERT(d, err == 0, "status request: %s", strerror(-err));
        Hbg__Envelope *r = NULL;
        err = cx_recv(fd, IO_MS, &r);
        D_ASSERT(d, err == 0, "no status reply: %s", strerror(-err));
        D_ASSERT(d, r->msg_case == HBG__ENVELOPE__MSG_STATUS_REPLY, "status request answered with message %d",
                 (int)r->msg_case);
        return r;
}

Hbg__Envelope *daemon_status_fresh(struct hbgd_proc *d) {
        int sock = raw_connect(d->socket_path);
        raw_hello(sock);
        Hbg__Envelope *e = status_of(d, sock, HBG__STATUS_KIND__STATUS_DAEMON);
        close(sock);
        return e;
}

unsigned spare_regions_now(struct hbgd_proc *d, uint64_t *ret_taken) {
        Hbg__Envelope *e = daemon_status_fresh(d);
        unsigned n = e->status_reply->daemon->spare_regions;
        *ret_taken = e->status_reply->daemon->spare_regions_taken;
        wire_free(e);
        return n;
}

uint64_t memory_charged_now(struct hbgd_proc *d, int fd) {
        Hbg__Envelope *r = status_of(d, fd, HBG__STATUS_KIND__STATUS_METRICS);
        D_ASSERT(d, r->status_reply->metrics, "no metrics in the status reply");
        uint64_t bytes = r->status_reply->metrics->memory_charged;
        wire_free(r);
        return bytes;
}

/* Sums of the scheduler threads' counters. */
void thread_counts(struct hbgd_proc *d, int fd, uint64_t *classified, uint64_t *dispatched) {
        Hbg__Envelope *r = status_of(d, fd, HBG__STATUS_KIND__STATUS_THREADS);
        *classified = *dispatched = 0;
        for (size_t i = 0; i < r->status_reply->n_threads; i++) {
                *classified += r->status_reply->threads[i]->classified;
                *dispatched += r->status_reply->threads[i]->dispatched;
        }
        wire_free(r);
}

void thread_wakes(struct hbgd_proc *d, int fd, uint64_t *wakeups, uint64_t *spurious, bool *all_parked) {
        Hbg__Envelope *r = status_of(d, fd, HBG__STATUS_KIND__STATUS_THREADS);
        *wakeups = *spurious = 0;
        *all_parked = true;
        for (size_t i = 0; i < r->status_reply->n_threads; i++) {
                const Hbg__ThreadStatus *t = r->status_reply->threads[i];
                *wakeups += t->wakeups;
                *spurious += t->spurious_wakeups;
                *all_parked = *all_parked && t->parks == t->wakeups + 1;
        }
        wire_free(r);
}

/* The kernels of pid's session are running: its tasks were classified,
 * none completed (failed validation counts as completed) and none failed. */
void assert_running(struct hbgd_proc *d, int fd, pid_t pid, const char *what) {
        Hbg__Envelope *r = status_of(d, fd, HBG__STATUS_KIND__STATUS_SESSIONS);
        const Hbg__SessionStatus *s = NULL;
        for (size_t i = 0; i < r->status_reply->n_sessions; i++)
                if (r->status_reply->sessions[i]->pid == (uint32_t)pid)
                        s = r->status_reply->sessions[i];
        bool found = s, idle = s && s->completed == 0 && s->failed == 0 && s->error == 0;
        uint64_t completed = s ? s->completed : 0, failed = s ? s->failed : 0;
        int error = s ? s->error : 0;
        wire_free(r);
        D_ASSERT(d, found, "%s: no session of pid %d", what, (int)pid);
        D_ASSERT(d, idle, "%s: the long kernels are not running: %" PRIu64 " tasks completed, %" PRIu64
                 " failed, error %d", what, completed, failed, error);
}

/* Poll until the scheduler threads classified at least n tasks. */
void wait_classified(struct hbgd_proc *d, int fd, uint64_t n, const char *what) {
        long long deadline = daemon_now_ms() + IO_MS;
        uint64_t c = 0, disp;
        while (thread_counts(d, fd, &c, &disp), c < n && daemon_now_ms() < deadline)
                sleep_us(2000);
        D_ASSERT(d, c >= n, "%s: hbgd classified %" PRIu64 " tasks, expected %" PRIu64, what, c, n);
}

void honest_graphs(struct hbgd_proc *d, unsigned n, const char *what) {
        hbg_client *c = NULL;
        int err = hbg_connect(&c, d->socket_path);
        D_ASSERT(d, err == 0, "%s: honest client: hbg_connect: %s [%s]", what, hbg_strerror(err),
                 hbg_last_error(NULL));
        struct workload w;
        long r = wl_init(&w, c, 4) < 0 ? -1 : wl_run(&w, n, -1);
        char msg[sizeof(w.msg)];
        snprintf(msg, sizeof(msg), "%s", w.msg);
        hbg_disconnect(c);
        D_ASSERT(d, r == (long)n, "%s: honest client: %s", what, msg);
}

bool session_listed(struct hbgd_proc *d, int fd, pid_t pid) {
        Hbg__Envelope *r = status_of(d, fd, HBG__STATUS_KIND__STATUS_SESSIONS);
        bool found = false;
        for (size_t i = 0; i < r->status_reply->n_sessions; i++)
                found = found || r->status_reply->sessions[i]->pid == (uint32_t)pid;
        wire_free(r);
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
