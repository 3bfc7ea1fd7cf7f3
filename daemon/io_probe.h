/* SPDX-License-Identifier: MIT */
/*
 * What hbgd's io loop needs of the kernel's io_uring, probed once when the
 * loop is set up (daemon/io_loop.c). Its own object, so that a test build
 * of hbgd can replace the probe's answer at link time (tests/e2e/hbgd_hooks.c)
 * to exercise the epoll fallback on a kernel that has everything.
 */
#pragma once

struct io_uring;

/* NULL when multishot poll works on ring (Linux 5.13), else why not, as a
 * note for the log ("...; using epoll"). Leaves the ring as it found it. */
const char *io_probe_multishot(struct io_uring *ring);
