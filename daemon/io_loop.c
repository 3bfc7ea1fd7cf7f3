/* SPDX-License-Identifier: MIT */
#include "daemon/io_loop.h"

#include <errno.h>
#include <liburing.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "daemon/io_probe.h"

/* An io_uring operation a source still owes the kernel: one that found no
 * free SQE waits on the loop's deferred list and is retried every round,
 * never dropped (a lost re-arm is a connection nobody serves again; a lost
 * poll removal keeps a closed socket open in the kernel for good). */
enum uring_op {
        OP_NONE,
        OP_ARM,             /* arm its multishot poll */
        OP_REMOVE,          /* cancel its multishot poll */
};

struct io_source {
        int fd;
        io_callback cb;
        void *userdata;
        bool dead;          /* deleted: free once the kernel is done with it */
        bool armed;         /* io_uring: a multishot poll is outstanding (or its arm is deferred) */
        bool again;         /* on the again list */
        bool held;          /* epoll: disarmed by io_source_hold() */
        bool deferred;      /* on the deferred list (io_uring) */
        enum uring_op op;   /* what it waits there for; OP_NONE: nothing any more */
        unsigned cancels;   /* io_uring: cancels of its poll not completed yet */
        struct io_source *next_again;
        struct io_source *next_dead;
        struct io_source *next_deferred;
        struct io_source *next_all;
};

struct io_loop {
        bool uring;
        struct io_uring ring;
        int epfd;
        struct io_source *dead; /* freed after the current dispatch */
        struct io_source *again_head, **again_tail; /* io_source_again(), FIFO */
        struct io_source *deferred_head, **deferred_tail; /* io_uring ops awaiting an SQE, FIFO */
        struct io_source *all;  /* every source not freed yet, for io_loop_free */
        uint64_t ops_deferred;  /* operations that had to wait for an SQE */
};

#define POLL_MASK (POLLIN | POLLERR | POLLHUP | POLLRDHUP)
/* The low bit of a cancel's user data (sources are aligned): its own
 * completion, not its poll's. */
#define CANCEL_TAG 1u
/* How soon a round with deferred operations comes back to retry them. */
#define DEFERRED_RETRY_MS 1

static void free_source(struct io_loop *l, struct io_source *s) {
        for (struct io_source **p = &l->all; *p; p = &(*p)->next_all)
                if (*p == s) {
                        *p = s->next_all;
                        break;
                }
        free(s);
}

/* A source still on the deferred list or the again list (a callback
 * run by run_again() asked for another call and then deleted it), or
 * with a cancel in flight, is freed once it has left them and the
 * cancel has completed. */
static void free_dead(struct io_loop *l) {
        struct io_source *keep = NULL;
        while (l->dead) {
                struct io_source *s = l->dead;
                l->dead = s->next_dead;
                if (s->deferred || s->again || s->cancels) {
                        s->next_dead = keep;
                        keep = s;
                } else {
                        free_source(l, s);
                }
        }
        l->dead = keep;
}

int io_loop_new(struct io_loop **ret, bool force_epoll, const char **ret_note) {
        struct io_loop *l = calloc(1, sizeof(*l));
        if (!l)
                return -ENOMEM;
        l->epfd = -1;
        l->again_tail = &l->again_head;
        l->deferred_tail = &l->deferred_head;
        *ret_note = NULL;
        if (!force_epoll) {
                int err = io_uring_queue_init(256, &l->ring, 0);
                if (err == 0) {
                        const char *why = io_probe_multishot(&l->ring);
                        if (!why) {
                                l->uring = true;
                                *ret = l;
                                return 0;
                        }
                        io_uring_queue_exit(&l->ring);
                        *ret_note = why;
                } else {
                        *ret_note = err == -ENOSYS || err == -EPERM
                                            ? "io_uring is disabled on this host; using epoll"
                                            : "io_uring setup failed; using epoll";
                }
        } else {
                *ret_note = "HBGD_IO=epoll: using epoll";
        }
        l->epfd = epoll_create1(EPOLL_CLOEXEC);
        if (l->epfd < 0) {
                int err = -errno;
                free(l);
                return err;
        }
        *ret = l;
        return 0;
}

struct io_loop *io_loop_free(struct io_loop *l) {
        if (!l)
                return NULL;
        if (l->uring)
                io_uring_queue_exit(&l->ring);
        if (l->epfd >= 0)
                close(l->epfd);
        /* Sources whose io_uring cancellation never came back (the ring is
         * gone now) are freed here with the rest. */
        while (l->all) {
                struct io_source *s = l->all;
                l->all = s->next_all;
                free(s);
        }
        free(l);
        return NULL;
}

const char *io_loop_backend(const struct io_loop *l) {
        return l->uring ? "io_uring" : "epoll";
}

/* A free SQE, submitting what is queued if the SQ is full; NULL if the
 * kernel takes none now (the caller defers its operation). */
static struct io_uring_sqe *uring_sqe(struct io_loop *l) {
        struct io_uring_sqe *sqe = io_uring_get_sqe(&l->ring);
        if (!sqe) {
                io_uring_submit(&l->ring);
                sqe = io_uring_get_sqe(&l->ring);
        }
        return sqe;
}

static void defer_op(struct io_loop *l, struct io_source *s, enum uring_op op) {
        s->op = op;
        l->ops_deferred++;
        if (s->deferred)
                return;
        s->deferred = true;
        s->next_deferred = NULL;
        *l->deferred_tail = s;
        l->deferred_tail = &s->next_deferred;
}

static bool prep_op(struct io_loop *l, struct io_source *s, enum uring_op op) {
        struct io_uring_sqe *sqe = uring_sqe(l);
        if (!sqe)
                return false;
        if (op == OP_ARM) {
                io_uring_prep_poll_multishot(sqe, s->fd, POLL_MASK);
                io_uring_sqe_set_data(sqe, s);
        } else {
                /* An async cancel, not a poll removal: POLL_REMOVE gives up
                 * with -EALREADY while the poll is busy posting a wakeup
                 * (a client that sends without pause keeps it busy), and
                 * the poll, holding the file, would keep a closed socket
                 * open for good; a cancel marks the poll and its owner
                 * ends it. The poll ends with -ECANCELED (no F_MORE); the
                 * cancel's own completion is tagged (the source's address
                 * | 1) and the source lives until both have come. */
                io_uring_prep_cancel64(sqe, (__u64)(uintptr_t)s, 0);
                io_uring_sqe_set_data64(sqe, (__u64)(uintptr_t)s | CANCEL_TAG);
                s->cancels++;
        }
        return true;
}

/* Queue op for s now, or on the deferred list when no SQE is free. Ops
 * of one source keep their order: while one waits, later ones wait too. */
static void uring_op(struct io_loop *l, struct io_source *s, enum uring_op op) {
        if (op == OP_ARM)
                s->armed = true;
        if (s->deferred || !prep_op(l, s, op))
                defer_op(l, s, op);
}

/* Retry the deferred operations, oldest first, while SQEs are free. A
 * source deleted before its arm went out needs nothing any more. */
static void flush_deferred(struct io_loop *l) {
        while (l->deferred_head) {
                struct io_source *s = l->deferred_head;
                if (s->op == OP_ARM && s->dead) {
                        s->armed = false;
                        s->op = OP_NONE;
                }
                if (s->op != OP_NONE && !prep_op(l, s, s->op))
                        return;
                l->deferred_head = s->next_deferred;
                if (!l->deferred_head)
                        l->deferred_tail = &l->deferred_head;
                s->deferred = false;
                s->op = OP_NONE;
        }
}

uint64_t io_loop_ops_deferred(const struct io_loop *l) {
        return l->ops_deferred;
}

int io_loop_add(struct io_loop *l, int fd, io_callback cb, void *userdata, struct io_source **ret) {
        struct io_source *s = calloc(1, sizeof(*s));
        if (!s)
                return -ENOMEM;
        s->fd = fd;
        s->cb = cb;
        s->userdata = userdata;
        int err;
        if (l->uring) {
                uring_op(l, s, OP_ARM);
                io_uring_submit(&l->ring); /* if it fails, the next round submits */
                err = 0;
        } else {
                struct epoll_event ev = { .events = EPOLLIN | EPOLLRDHUP, .data.ptr = s };
                err = epoll_ctl(l->epfd, EPOLL_CTL_ADD, fd, &ev) < 0 ? -errno : 0;
        }
        if (err < 0) {
                free(s);
                return err;
        }
        s->next_all = l->all;
        l->all = s;
        if (ret)
                *ret = s;
        return 0;
}

void io_source_hold(struct io_loop *l, struct io_source *s) {
        if (!s || s->dead || s->held || l->uring)
                return;
        /* No events asked for, and one-shot: even the hang-up and error
         * that epoll always reports come once, then nothing until the
         * source is re-armed. */
        struct epoll_event ev = { .events = EPOLLONESHOT, .data.ptr = s };
        if (epoll_ctl(l->epfd, EPOLL_CTL_MOD, s->fd, &ev) == 0)
                s->held = true;
}

void io_source_again(struct io_loop *l, struct io_source *s) {
        if (!s || s->dead)
                return;
        if (s->held) {
                struct epoll_event ev = { .events = EPOLLIN | EPOLLRDHUP, .data.ptr = s };
                /* If it fails the source stays held: its callback, called
                 * below, still reads what is there. */
                if (epoll_ctl(l->epfd, EPOLL_CTL_MOD, s->fd, &ev) == 0)
                        s->held = false;
        }
        if (s->again)
                return;
        s->again = true;
        s->next_again = NULL;
        *l->again_tail = s;
        l->again_tail = &s->next_again;
}

/* Run the sources that asked to be called again, as they stood when the
 * round began (those that ask again now wait for the next round). A source
 * deleted meanwhile is skipped; it is freed only after this (free_dead()). */
static int run_again(struct io_loop *l) {
        struct io_source *s = l->again_head;
        int n = 0;
        l->again_head = NULL;
        l->again_tail = &l->again_head;
        while (s) {
                struct io_source *next = s->next_again;
                s->again = false;
                if (!s->dead) {
                        s->cb(s, POLLIN, s->userdata);
                        n++;
                }
                s = next;
        }
        return n;
}

void io_source_del(struct io_loop *l, struct io_source *s) {
        if (!s || s->dead)
                return;
        s->dead = true;
        if (l->uring) {
                if (s->deferred && s->op == OP_ARM) {
                        /* Its poll never went out: nothing to remove. */
                        s->op = OP_NONE;
                        s->armed = false;
                }
                if (s->armed) {
                        uring_op(l, s, OP_REMOVE);
                        io_uring_submit(&l->ring);
                } else {
                        s->next_dead = l->dead;
                        l->dead = s;
                }
                return;
        }
        epoll_ctl(l->epfd, EPOLL_CTL_DEL, s->fd, NULL);
        s->next_dead = l->dead;
        l->dead = s;
}

static int run_uring(struct io_loop *l, int timeout_ms) {
        struct io_uring_cqe *cqe;
        int err;

        flush_deferred(l);
        io_uring_submit(&l->ring);
        if (l->deferred_head && (timeout_ms < 0 || timeout_ms > DEFERRED_RETRY_MS))
                timeout_ms = DEFERRED_RETRY_MS; /* come back to retry them */
        if (l->again_head) {
                /* Sources are waiting for their next turn: only look. */
                err = io_uring_peek_cqe(&l->ring, &cqe);
                if (err == -EAGAIN)
                        err = -ETIME;
        } else if (timeout_ms < 0) {
                err = io_uring_wait_cqe(&l->ring, &cqe);
        } else {
                struct __kernel_timespec ts = { .tv_sec = timeout_ms / 1000,
                                                .tv_nsec = (long long)(timeout_ms % 1000) * 1000000 };
                err = io_uring_wait_cqe_timeout(&l->ring, &cqe, &ts);
        }
        if (err == -ETIME || err == -EINTR) {
                int n = run_again(l);
                free_dead(l);
                return n;
        }
        if (err < 0)
                return err;

        int n = 0;
        unsigned head;
        unsigned seen = 0;
        struct io_uring_cqe *c;
        io_uring_for_each_cqe(&l->ring, head, c) {
                seen++;
                uint64_t data = io_uring_cqe_get_data64(c);
                if (data & CANCEL_TAG) {
                        /* A cancel's own completion: the poll's -ECANCELED
                         * ends it (or it had ended: -ENOENT). Refused while
                         * the poll lives: ask again. */
                        struct io_source *t = (struct io_source *)(uintptr_t)(data & ~(uint64_t)CANCEL_TAG);
                        t->cancels--;
                        if (c->res == -EALREADY && t->armed)
                                uring_op(l, t, OP_REMOVE);
                        continue;
                }
                struct io_source *s = (struct io_source *)(uintptr_t)data;
                if (!s)
                        continue; /* none of ours */
                bool more = c->flags & IORING_CQE_F_MORE;
                if (!more)
                        s->armed = false;
                if (s->dead) {
                        if (!more) {
                                if (s->op == OP_REMOVE)
                                        s->op = OP_NONE; /* the poll is gone already */
                                s->next_dead = l->dead;
                                l->dead = s;
                        }
                        continue;
                }
                if (c->res < 0) {
                        /* cqe->res carries a negative errno: report it as an
                         * error event so the owner closes the fd. */
                        if (c->res != -ECANCELED)
                                s->cb(s, POLLERR, s->userdata);
                } else if (!s->again || (c->res & (POLLHUP | POLLERR | POLLRDHUP))) {
                        /* (A source waiting for its turn gets it in
                         * run_again(): one call per round.) */
                        s->cb(s, (uint32_t)c->res, s->userdata);
                        n++;
                }
                /* Multishot ended (overflow, error): re-arm if still wanted. */
                if (!more && !s->dead && !s->armed)
                        uring_op(l, s, OP_ARM);
        }
        io_uring_cq_advance(&l->ring, seen);
        n += run_again(l);
        free_dead(l);
        return n;
}

static int run_epoll(struct io_loop *l, int timeout_ms) {
        struct epoll_event evs[64];
        int k = epoll_wait(l->epfd, evs, 64, l->again_head ? 0 : timeout_ms);
        if (k < 0)
                return errno == EINTR ? 0 : -errno;
        for (int i = 0; i < k; i++) {
                struct io_source *s = evs[i].data.ptr;
                /* (A source waiting for its turn gets it in run_again():
                 * level-triggered epoll reports it every round.) */
                if (s->dead || s->again)
                        continue;
                uint32_t ev = 0;
                if (evs[i].events & EPOLLIN)
                        ev |= POLLIN;
                if (evs[i].events & EPOLLERR)
                        ev |= POLLERR;
                if (evs[i].events & EPOLLHUP)
                        ev |= POLLHUP;
                if (evs[i].events & EPOLLRDHUP)
                        ev |= POLLRDHUP;
                s->cb(s, ev, s->userdata);
        }
        k += run_again(l);
        free_dead(l);
        return k;
}

int io_loop_run_once(struct io_loop *l, int timeout_ms) {
        return l->uring ? run_uring(l, timeout_ms) : run_epoll(l, timeout_ms);
}
