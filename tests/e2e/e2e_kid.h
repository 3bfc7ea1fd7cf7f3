/* SPDX-License-Identifier: MIT */
/*
 * Forked clients for the end-to-end tests (tests/e2e/e2e_util.h): a child
 * process, as this user or as another uid, reporting to the test by lines
 * on a socketpair; and an honest client process that times its graphs.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "tests/e2e/daemon_util.h"

/*
 * A child process, as this user (SAME_UID) or as another uid (setgroups,
 * setresgid, setresuid), running fn(sock, arg) and _exit()ing with what it
 * returns. sock is its end of a stream socketpair: lines to the parent
 * (kid_say(); "FAIL ..." for a failure), command bytes from it. It dies
 * with the test (PR_SET_PDEATHSIG, set after the uid change). Children
 * report; only the parent asserts (kid_expect, kid_end).
 */
#define SAME_UID ((uid_t)-1)

struct kid {
        pid_t pid;
        int sock;
        bool reaped;
        int status;
};

typedef int (*kid_fn)(int sock, void *arg);

void kid_start(struct kid *k, uid_t uid, kid_fn fn, void *arg);

/* In the child: one line to the parent; the next command byte (0 once the
 * parent hung up); whether one is waiting. */
void kid_say(int sock, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
char kid_cmd(int sock);
bool kid_cmd_pending(int sock);

/* In the parent. */
void kid_tell(struct kid *k, char c);
/* One line from the child: 0, -ETIMEDOUT, -ECONNRESET (it hung up). */
int kid_line(struct kid *k, int timeout_ms, char *buf, size_t size);
/* The next line must start with tag (e.g. "READY"): returns what follows
 * it. A "FAIL ..." line, silence or an early exit fail the test. */
const char *kid_expect(struct hbgd_proc *d, struct kid *k, const char *tag, int timeout_ms, char *buf,
                       size_t size, const char *who);
/* Reap within timeout_ms (else SIGKILL and -ETIMEDOUT). */
int kid_reap(struct kid *k, int timeout_ms);
/* The child must exit 0 within timeout_ms. */
void kid_end(struct hbgd_proc *d, struct kid *k, int timeout_ms, const char *who);
/* SIGKILL, reap, close. */
void kid_kill(struct kid *k);

/* ------------------------------------------------------------ honest client process */

/*
 * An honest client (fn for kid_start, arg: the socket path): connects
 * ("READY"), and on 'G' runs 1-task fill graphs back to back, at least one,
 * until it gets 'Q', timing each from hbg_graph_add to the end of
 * hbg_graph_wait and checking the values: "DONE graphs worst_ms".
 */
int honest_fn(int sock, void *arg);
/* Start honest_fn; returns once it is connected. */
void honest_start(struct hbgd_proc *d, struct kid *k);
/* Stop it ('Q'; it must have run a graph): the number of graphs, and the
 * worst latency in *ret_worst_ms. */
unsigned honest_stop(struct hbgd_proc *d, struct kid *k, long long *ret_worst_ms);
