/* SPDX-License-Identifier: MIT */
/* Sealing a client's submission memfd on a thread of its own
 * (daemon/region_seal.h). */
#include "daemon/region_seal.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/eventfd.h>
#include <unistd.h>

/* The thread needs little: two fcntl calls. */
#define SEAL_THREAD_STACK ((size_t)256 << 10)

struct region_seal {
        /* Two owners, the sealing thread and the io thread: the last one
         * out closes the descriptors and frees (acq_rel: the other's
         * accesses are done before). */
        _Atomic unsigned refs;
        int fd;                        /* a duplicate of the memfd */
        int event_fd;                  /* the thread's "done" to the io loop */
        struct io_loop *loop;
        struct io_source *src;         /* the io thread's */
        region_seal_done done;
        void *userdata;
        /* Stored by the thread before it signals, loaded by the io thread
         * when the eventfd fired: the release/acquire pair orders the
         * result (the eventfd's write and read do too, but unseen by
         * ThreadSanitizer). */
        _Atomic int result;
        _Atomic bool finished;
};

static void seal_unref(struct region_seal *s) {
        if (atomic_fetch_sub_explicit(&s->refs, 1, memory_order_acq_rel) != 1)
                return;
        close(s->fd);
        close(s->event_fd);
        free(s);
}

static void *seal_main(void *arg) {
        struct region_seal *s = arg;
        /* Named from within: the thread is detached. A seal that waits
         * long shows as this name in ps -L, in state D. */
        (void)pthread_setname_np(pthread_self(), "hbgd-seal");
        int err = fcntl(s->fd, F_ADD_SEALS, F_SEAL_FUTURE_WRITE) < 0 ? -errno : 0;
        /* The client may have sealed it meanwhile, and the seals with it
         * (then the add fails): the seal is what counts. */
        int seals = fcntl(s->fd, F_GET_SEALS);
        int result = seals >= 0 && (seals & F_SEAL_FUTURE_WRITE) ? 0 : err < 0 ? err : -EPERM;
        atomic_store_explicit(&s->result, result, memory_order_relaxed);
        atomic_store_explicit(&s->finished, true, memory_order_release);
        /* Our own eventfd, written once: it cannot be full. */
        uint64_t one = 1;
        ssize_t n = write(s->event_fd, &one, sizeof(one));
        (void)n;
        seal_unref(s);
        return NULL;
}

static void on_sealed(struct io_source *src, uint32_t events, void *userdata) {
        struct region_seal *s = userdata;
        (void)src;
        (void)events;
        uint64_t v;
        ssize_t n = read(s->event_fd, &v, sizeof(v));
        (void)n;
        if (!atomic_load_explicit(&s->finished, memory_order_acquire))
                return;
        int result = atomic_load_explicit(&s->result, memory_order_relaxed);
        region_seal_done done = s->done;
        void *done_userdata = s->userdata;
        io_source_del(s->loop, s->src);
        seal_unref(s);
        done(done_userdata, result);
}

int region_seal_start(struct io_loop *loop, int fd, region_seal_done done, void *userdata,
                      struct region_seal **ret) {
        struct region_seal *s = calloc(1, sizeof(*s));
        if (!s)
                return -ENOMEM;
        s->loop = loop;
        s->done = done;
        s->userdata = userdata;
        atomic_init(&s->refs, 2);
        s->fd = fcntl(fd, F_DUPFD_CLOEXEC, 0);
        s->event_fd = s->fd < 0 ? -1 : eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
        int err = s->event_fd < 0 ? -errno : io_loop_add(loop, s->event_fd, on_sealed, s, &s->src);
        if (err == 0) {
                pthread_attr_t attr;
                pthread_t thread;
                pthread_attr_init(&attr);
                pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
                pthread_attr_setstacksize(&attr, SEAL_THREAD_STACK);
                err = -pthread_create(&thread, &attr, seal_main, s);
                pthread_attr_destroy(&attr);
                if (err == 0) {
                        *ret = s;
                        return 0;
                }
                io_source_del(loop, s->src);
        }
        if (s->fd >= 0)
                close(s->fd);
        if (s->event_fd >= 0)
                close(s->event_fd);
        free(s);
        return err;
}

void region_seal_abandon(struct region_seal *s) {
        if (!s)
                return;
        io_source_del(s->loop, s->src);
        seal_unref(s);
}
