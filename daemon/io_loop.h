/* SPDX-License-Identifier: MIT */
/*
 * hbgd's io thread event loop: readiness of file descriptors (the listening
 * socket, client sockets, session doorbells, the signalfd, a timerfd), on
 * io_uring multishot polls, or on epoll where io_uring is unavailable or
 * HBGD_IO=epoll. Single-threaded: only the io thread calls these.
 */
#pragma once

#include <stdbool.h>
#include <stdint.h>

struct io_loop;
struct io_source;

/* Called with the poll events that fired (POLLIN, POLLHUP, ...). */
typedef void (*io_callback)(struct io_source *src, uint32_t events, void *userdata);

/* Prefers io_uring; falls back to epoll (and says why in *ret_note) when
 * it cannot be set up, or when force_epoll. */
int io_loop_new(struct io_loop **ret, bool force_epoll, const char **ret_note);
struct io_loop *io_loop_free(struct io_loop *l);
const char *io_loop_backend(const struct io_loop *l);

/* Watch fd for POLLIN (and errors/hang-ups). The fd stays owned by the
 * caller; io_source_del() before closing it. */
int io_loop_add(struct io_loop *l, int fd, io_callback cb, void *userdata, struct io_source **ret);
/* Stop watching; the callback will not run again. Safe inside a callback. */
void io_source_del(struct io_loop *l, struct io_source *src);
/* Call src's callback again (with POLLIN) in the next round, without waiting
 * for an event: for a source that stopped reading before it was drained so
 * that others get their turn. Each such source gets one call per round, in
 * the order they asked, and the round does not block while any is waiting. */
void io_source_again(struct io_loop *l, struct io_source *src);
/* Stop calling src's callback when it is readable, until
 * io_source_again(): for a source that leaves its data unread while it
 * waits for something else (a connection's slow job). Level-triggered
 * epoll would otherwise call it at every round, the io thread spinning;
 * io_uring's multishot poll reports new readiness only (nothing to do). */
void io_source_hold(struct io_loop *l, struct io_source *src);

/* io_uring operations (poll arms and removals) that found no free SQE and
 * waited for a later round; none is ever dropped. 0 on epoll. */
uint64_t io_loop_ops_deferred(const struct io_loop *l);

/* Wait for events (timeout_ms < 0: for ever) and dispatch them. Returns the
 * number dispatched or a negative errno. */
int io_loop_run_once(struct io_loop *l, int timeout_ms);
