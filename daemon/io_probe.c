/* SPDX-License-Identifier: MIT */
#include "daemon/io_probe.h"

#include <liburing.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

/*
 * What the io loop needs of io_uring: multishot poll (Linux 5.13). An opcode
 * probe cannot tell (POLL_ADD exists since 5.6, without the flag), so arm
 * one on an eventfd that is readable and see a completion that says more
 * will come (IORING_CQE_F_MORE). NULL if it works, else why not.
 */
const char *io_probe_multishot(struct io_uring *ring) {
        const char *why = "io_uring lacks multishot poll (Linux 5.13); using epoll";
        int efd = eventfd(1, EFD_CLOEXEC | EFD_NONBLOCK);
        if (efd < 0)
                return why;
        struct io_uring_sqe *sqe = io_uring_get_sqe(ring);
        struct io_uring_cqe *cqe = NULL;
        if (sqe) {
                io_uring_prep_poll_multishot(sqe, efd, POLLIN);
                io_uring_sqe_set_data64(sqe, 1);
                struct __kernel_timespec ts = { .tv_sec = 1 };
                if (io_uring_submit(ring) == 1 && io_uring_wait_cqe_timeout(ring, &cqe, &ts) == 0) {
                        if (cqe->res > 0 && (cqe->flags & IORING_CQE_F_MORE))
                                why = NULL;
                        io_uring_cqe_seen(ring, cqe);
                }
                /* Cancel it: the ring goes on, the eventfd goes. */
                sqe = io_uring_get_sqe(ring);
                if (sqe) {
                        io_uring_prep_poll_remove(sqe, 1);
                        io_uring_submit_and_wait(ring, 1);
                }
                unsigned head, n = 0;
                io_uring_for_each_cqe(ring, head, cqe)
                        n++;
                io_uring_cq_advance(ring, n);
        }
        close(efd);
        return why;
}
