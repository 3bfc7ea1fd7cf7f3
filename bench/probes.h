/* SPDX-License-Identifier: MIT */
/*
 * The comparison's small measurements that are not a graph run: the
 * eventfd ping-pong between two processes (the floor under any graph
 * latency), connects, sessions held open, percentiles. (Callgrind
 * profiles: bench/callgrind_files.h.)
 */
#pragma once

#include <stdbool.h>
#include <stdint.h>

/*
 * `rounds` round trips between this process and a forked child over two
 * eventfds (write one, block in read on the other), sleeping idle_us
 * before each round (0: back to back). ret_ns[0..rounds) gets each round
 * trip's time. 0 or -errno.
 */
int probe_eventfd_pingpong(unsigned rounds, unsigned idle_us, double *ret_ns);

/*
 * `rounds` bursts of `producers` forked processes calling hbg_connect() on
 * socket at once (released together through a pipe), 20 ms apart. With
 * `hold`, each stays connected until every producer of its burst has (the
 * producers of a service starting together); without, each disconnects
 * as soon as it has connected (teardowns among the connects).
 * ret_ns[0..rounds*producers) gets each hbg_connect()'s time, ret_cpu_ns
 * the CPU time its producer spent in it (kernel included). 0 or -errno
 * (a failed connect: -EIO).
 */
int probe_connect_burst(const char *socket, unsigned producers, unsigned rounds, bool hold, double *ret_ns,
                        double *ret_cpu_ns);

/* `n` sessions opened on socket from this process, held doing nothing
 * until probe_sessions_close(). 0 or -errno (none left open). */
struct probe_sessions;
int probe_sessions_open(const char *socket, unsigned n, struct probe_sessions **ret);
void probe_sessions_close(struct probe_sessions *s);

/* The q-quantile (0..1, nearest rank) of v[0..n), n >= 1; sorts v. */
double probe_quantile(double *v, unsigned n, double q);
