/* SPDX-License-Identifier: MIT */
/*
 * The end-to-end tests' workload: small verified graphs over libhbgclient
 * (wl_*), a forked client running it (client_main) and the words for its
 * exit, assert_serving() and honest_graphs(). tests/e2e/e2e_util.h
 * includes it. assert_serving() and honest_graphs() make Check assertions
 * (a test's own thread); wl_* and client_main() return results.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "hbg/hbg.h"
#include "tests/e2e/daemon_util.h"

/*
 * Small graphs over one client's tensors, dependencies all derived:
 *   fill a = k; fill b = (g % 7) + 1; s = a + b; s *= 2; res[g % R] = sum(s)
 * so res[g % R] = 2 (k + g % 7 + 1) WL_N, exact in f32. Graphs are kept
 * WL_DEPTH deep in flight (the fills of graph g+1 wait for the add of
 * graph g: WAR), each one's result checked once it is waited for.
 */
#define WL_N 1024
#define WL_SLOTS 256
#define WL_DEPTH 8

struct workload {
        hbg_client *c;
        hbg_tensor a, b, s, res;
        unsigned k;
        char msg[512];
};

/* Tensors of c. 0, or -errno with w->msg set. */
int wl_init(struct workload *w, hbg_client *c, unsigned k);
/* n graphs (n == 0: until stop_fd is readable or hangs up; for ever if
 * stop_fd < 0). Returns the number of graphs verified, or -errno with
 * w->msg set. */
long wl_run(struct workload *w, uint64_t n, int stop_fd);

/* The daemon serves: a new client connects and runs a few graphs. */
void assert_serving(struct hbgd_proc *d);

/* Exit codes of the forked clients. */
enum { KID_OK = 0, KID_CONNECT = 10, KID_INIT = 11, KID_RUN = 12, KID_PIPE = 13 };

const char *kid_code(int code);
/* A wait status of a forked client, in words. */
void describe(int st, char *buf, size_t size);

/* A client process: connect, tensors, then `ready_fd` gets 'R', then n
 * graphs (see wl_run). Never returns. */
void __attribute__((noreturn)) client_main(const char *socket_path, unsigned k, uint64_t n, int ready_fd,
                                           int stop_fd, const char *who);

/* Read one byte from fd within timeout_ms: 1, 0 on EOF, -ETIMEDOUT. */
int read_byte(int fd, int timeout_ms, char *ret);

/* An honest client in this process: n verified graphs (wl_run). */
void honest_graphs(struct hbgd_proc *d, unsigned n, const char *what);
