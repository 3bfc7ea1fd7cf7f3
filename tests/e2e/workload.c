/* SPDX-License-Identifier: MIT */
/* The end-to-end tests' verified workload and the clients that run it:
 * tests/e2e/workload.h. */
#include "tests/e2e/workload.h"

#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tests/e2e/e2e_util.h"

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

/* An honest client in this process: n verified graphs (wl_run). */
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
