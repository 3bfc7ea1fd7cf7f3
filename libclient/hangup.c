/* SPDX-License-Identifier: MIT */
/*
 * Knowing that hbgd went away without a system call (docs/RUNTIME_LOGIC.md
 * §12.4). hbg_graph_submit() must fail once hbgd is gone, but a poll() per
 * submit costs ~300 ns, a sixth of a one-task graph's round trip. Instead
 * two one-shot io_uring polls wait for us: on the control socket (hbgd
 * closed the session, or sent something) and for the hang-up of the
 * completion pipe (hbgd's process exited: the pipe's write end closes then,
 * while its io_uring may keep the socket open a while longer). The kernel
 * posts a completion into the ring memory we map, and a look is one load
 * of the completion tail. Completed graphs make the pipe readable, which
 * the pipe's poll does not ask for: it completes only at the hang-up.
 *
 * The completion is posted by task work of the thread that armed the poll,
 * which the kernel runs (interrupting a sleep if need be) before that
 * thread next returns to user space; if that thread has exited, the poll
 * is cancelled, which also posts a completion. Any completion sends the
 * caller to the socket itself (hbgc_check_socket()); when the connection
 * is fine the watch is armed again from the calling thread.
 *
 * Where io_uring is not allowed (seccomp, kernel.io_uring_disabled) or
 * HBG_IO_URING=0 is set, there is no ring and every look asks the socket.
 *
 * The ring is set up by the first call that asks the socket itself (a
 * submit, a tensor allocation, a cancel, a recording's end), not at
 * connect: about 20 us of system calls that a connect of
 * many producers at once shares two cores for, and that a client which
 * only asks hbgd things never needs. Until then the per-task look is free
 * and says nothing, as without io_uring.
 */
#include <errno.h>
#include <linux/io_uring.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "libclient/client_private.h"
#include "libclient/hangup.h"
#include "libclient/session.h"

static void unmap(void *p, size_t n) {
        if (p && p != MAP_FAILED)
                munmap(p, n);
}

void hbgc_hangup_free(hbg_client *c) {
        struct hangup_watch *h = &c->hangup;
        if (h->cq_ring != h->sq_ring)
                unmap(h->cq_ring, h->cq_ring_bytes);
        unmap(h->sq_ring, h->sq_ring_bytes);
        unmap(h->sqes, h->sqes_bytes);
        if (h->ring_fd >= 0)
                close(h->ring_fd);
        *h = (struct hangup_watch){ .ring_fd = -1 };
}

enum { WATCH_SOCKET = 1u, WATCH_PIPE = 2u };
_Static_assert((WATCH_SOCKET | WATCH_PIPE) == HBGC_WATCH_BOTH, "both polls");

/* Queue a poll of fd for `events` as SQE `slot` (user_data: which). */
static void queue_poll(struct hangup_watch *h, unsigned slot, int fd, uint32_t events, uint64_t which) {
        struct io_uring_sqe *sqe = (struct io_uring_sqe *)h->sqes + slot;
        memset(sqe, 0, sizeof(*sqe));
        sqe->opcode = IORING_OP_POLL_ADD;
        sqe->fd = fd;
#if __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
        events = (events << 16) | (events >> 16); /* the kernel reads the halves swapped */
#endif
        sqe->poll32_events = events;
        sqe->user_data = which;
        /* The ring is ours alone (one thread uses a client at a time). */
        uint32_t tail = atomic_load_explicit(h->sq_tail, memory_order_relaxed);
        h->sq_array[tail & h->sq_mask] = slot;
        /* Release: the entry before the tail the kernel reads. */
        atomic_store_explicit(h->sq_tail, tail + 1, memory_order_release);
}

/* Arm the polls not in flight. false: no watch any more (ring closed). */
static bool arm(hbg_client *c) {
        struct hangup_watch *h = &c->hangup;
        unsigned n = 0;
        if (!(h->armed & WATCH_SOCKET))
                queue_poll(h, n++, c->sock, POLLIN | POLLRDHUP | POLLHUP | POLLERR, WATCH_SOCKET);
        if (!(h->armed & WATCH_PIPE))
                queue_poll(h, n++, c->completion_fd, POLLHUP | POLLERR, WATCH_PIPE);
        long r;
        do
                r = syscall(__NR_io_uring_enter, h->ring_fd, n, 0, 0, NULL, 0);
        while (r < 0 && errno == EINTR);
        if (r != (long)n) {
                hbgc_hangup_free(c);
                return false;
        }
        h->armed = HBGC_WATCH_BOTH;
        return true;
}

void hbgc_hangup_start(hbg_client *c) {
        struct hangup_watch *h = &c->hangup;
        *h = (struct hangup_watch){ .ring_fd = -1 };
        const char *env = getenv("HBG_IO_URING");
        if (env && strcmp(env, "0") == 0)
                return;
        struct io_uring_params p;
        memset(&p, 0, sizeof(p));
        long fd = syscall(__NR_io_uring_setup, 2, &p);
        if (fd < 0)
                return; /* ENOSYS, EPERM (disabled), ENOMEM: poll instead */
        h->ring_fd = (int)fd;
        /* O_CLOEXEC: io_uring fds are created close-on-exec. */
        h->sq_ring_bytes = p.sq_off.array + p.sq_entries * sizeof(uint32_t);
        h->cq_ring_bytes = p.cq_off.cqes + p.cq_entries * sizeof(struct io_uring_cqe);
        if (p.features & IORING_FEAT_SINGLE_MMAP) {
                if (h->cq_ring_bytes > h->sq_ring_bytes)
                        h->sq_ring_bytes = h->cq_ring_bytes;
                h->cq_ring_bytes = h->sq_ring_bytes;
        }
        h->sq_ring = mmap(NULL, h->sq_ring_bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, h->ring_fd,
                          IORING_OFF_SQ_RING);
        if (h->sq_ring == MAP_FAILED) {
                h->sq_ring = NULL;
                goto fail;
        }
        if (p.features & IORING_FEAT_SINGLE_MMAP) {
                h->cq_ring = h->sq_ring;
        } else {
                h->cq_ring = mmap(NULL, h->cq_ring_bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE,
                                  h->ring_fd, IORING_OFF_CQ_RING);
                if (h->cq_ring == MAP_FAILED) {
                        h->cq_ring = NULL;
                        goto fail;
                }
        }
        h->sqes_bytes = p.sq_entries * sizeof(struct io_uring_sqe);
        h->sqes = mmap(NULL, h->sqes_bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, h->ring_fd,
                       IORING_OFF_SQES);
        if (h->sqes == MAP_FAILED) {
                h->sqes = NULL;
                goto fail;
        }
        h->sq_tail = (_Atomic uint32_t *)((char *)h->sq_ring + p.sq_off.tail);
        h->sq_array = (uint32_t *)((char *)h->sq_ring + p.sq_off.array);
        h->sq_mask = *(const uint32_t *)((const char *)h->sq_ring + p.sq_off.ring_mask);
        h->cq_head = (_Atomic uint32_t *)((char *)h->cq_ring + p.cq_off.head);
        h->cq_tail = (_Atomic uint32_t *)((char *)h->cq_ring + p.cq_off.tail);
        h->cq_mask = *(const uint32_t *)((const char *)h->cq_ring + p.cq_off.ring_mask);
        h->cqes = (char *)h->cq_ring + p.cq_off.cqes;
        arm(c);
        return;
fail:
        hbgc_hangup_free(c);
}

void hbgc_hangup_rearm(hbg_client *c) {
        struct hangup_watch *h = &c->hangup;
        if (h->ring_fd < 0 || hbgc_hangup_quiet(c))
                return;
        /* Take the completions (at most one per poll in flight), noting
         * which polls ended; arm those again. The CQ has room for both. */
        uint32_t head = atomic_load_explicit(h->cq_head, memory_order_relaxed);
        uint32_t tail = atomic_load_explicit(h->cq_tail, memory_order_acquire);
        for (unsigned i = 0; head != tail && i < 8; i++, head++) {
                const struct io_uring_cqe *cqe = (const struct io_uring_cqe *)h->cqes + (head & h->cq_mask);
                h->armed &= ~(unsigned)cqe->user_data;
        }
        /* Release: we are done with the entries before the kernel reuses them. */
        atomic_store_explicit(h->cq_head, tail, memory_order_release);
        arm(c);
}
