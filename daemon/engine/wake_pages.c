/* SPDX-License-Identifier: MIT */
/*
 * The wake pages (RUNTIME_LOGIC.md §9.4): sealed memfds hbgd alone can
 * write, mapped read-only by clients, whose futex word a client wakes to
 * start a parked scheduler thread at once. A uid's sessions share one
 * page of its own, so a client that waits on its page's word (taking the
 * wakes meant for hbgd) or requeues hbgd's sleepers off it reaches only
 * its own uid's sessions; that is what lets an honest client trust a wake
 * that woke somebody and skip the doorbell. The uids past WAKE_PAGES_OWN
 * share a page marked so, whose clients ring the doorbell after every
 * wake, as every client did before pages were per uid.
 */
#include "daemon/engine/wake_pages.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

/*
 * A page: a memfd mapped writable here once, then sealed against resizing
 * and against any later writable mapping (F_SEAL_FUTURE_WRITE: a client's
 * PROT_WRITE shared mmap fails with EPERM, and so does mprotect to write
 * and write(2); F_SEAL_SEAL: no seal comes off). The seals are what
 * protect it: a client can reopen its fd read-write through /proc, and
 * gets nothing more by it. Clients get a read-only reopen (mode 0400
 * first), or the sealed fd itself where /proc is not there.
 */
static int page_make(struct hbg_wake_page **ret, int *ret_fd, uint32_t wake_n, uint32_t flags) {
        int fd = memfd_create("hbgd-wake", MFD_CLOEXEC | MFD_ALLOW_SEALING);
        if (fd < 0)
                return -errno;
        void *p = MAP_FAILED;
        if (ftruncate(fd, HBG_WAKE_PAGE_SIZE) < 0 ||
            (p = mmap(NULL, HBG_WAKE_PAGE_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0)) == MAP_FAILED) {
                int err = -errno;
                close(fd);
                return err;
        }
        struct hbg_wake_page *page = p;
        page->magic = HBG_WAKE_MAGIC;
        page->wake_n = wake_n;
        page->flags = flags;
        if (fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_FUTURE_WRITE | F_SEAL_SEAL) < 0) {
                int err = -errno;
                munmap(p, HBG_WAKE_PAGE_SIZE);
                close(fd);
                return err;
        }
        (void)fchmod(fd, 0400);
        char path[64];
        snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
        int ro = open(path, O_RDONLY | O_CLOEXEC);
        if (ro >= 0) {
                close(fd);
                fd = ro;
        }
        *ret = page;
        *ret_fd = fd;
        return 0;
}

/* Out of use. A parking thread may have read the page just before: its
 * futex_waitv then fails with EFAULT (it sleeps the plain way once), or
 * waits on whatever is mapped there next, which at worst wakes it for
 * nothing. Either way it also sleeps on the private word. */
static void page_unmake(struct wake_page *s) {
        struct hbg_wake_page *p = atomic_load_explicit(&s->page, memory_order_relaxed);
        atomic_store_explicit(&s->page, NULL, memory_order_relaxed);
        if (p)
                munmap(p, HBG_WAKE_PAGE_SIZE);
        if (s->fd >= 0)
                close(s->fd);
        s->fd = -1;
}

int wake_pages_init(struct wake_pages *w, uint32_t wake_n, bool *ret_waits) {
        *w = (struct wake_pages){ .wake_n = wake_n, .shared = { .fd = -1 }, .ahead = { .fd = -1 } };
        for (unsigned i = 0; i < WAKE_PAGES_OWN; i++)
                w->own[i].fd = -1;
        *ret_waits = false;
        if (pthread_mutex_init(&w->lock, NULL) != 0)
                return -ENOMEM;
        w->lock_ready = true;
        struct hbg_wake_page *p;
        int err = page_make(&p, &w->shared.fd, wake_n, 0);
        if (err < 0)
                return err;
        atomic_store_explicit(&w->shared.page, p, memory_order_relaxed);
        /* futex_waitv (Linux 5.16): a real wait on a word that does not
         * hold the value asked for answers -EAGAIN where the call works;
         * anything else (-ENOSYS, a seccomp filter's -EPERM) and threads
         * sleep on the private word alone: clients' wakes of the pages
         * find nobody and their doorbells wake hbgd. */
        _Atomic uint32_t probe = 1;
        struct futex_waitv v = { .val = 0, .uaddr = (uintptr_t)&probe, .flags = FUTEX_32 | FUTEX_PRIVATE_FLAG };
        *ret_waits = syscall(SYS_futex_waitv, &v, 1, 0, NULL, CLOCK_MONOTONIC) < 0 && errno == EAGAIN;
        return 0;
}

void wake_pages_free(struct wake_pages *w) {
        if (!w->lock_ready) /* never set up (the fds are not -1 yet) */
                return;
        page_unmake(&w->shared);
        page_unmake(&w->ahead);
        for (unsigned i = 0; i < WAKE_PAGES_OWN; i++)
                page_unmake(&w->own[i]);
        pthread_mutex_destroy(&w->lock);
        w->lock_ready = false;
}

int wake_pages_acquire(struct wake_pages *w, uid_t uid, int *ret_fd) {
        int handle = -1;
        pthread_mutex_lock(&w->lock);
        unsigned used = atomic_load_explicit(&w->used, memory_order_relaxed), free_slot = used;
        for (unsigned i = 0; i < used && handle < 0; i++) {
                struct wake_page *s = &w->own[i];
                if (!atomic_load_explicit(&s->page, memory_order_relaxed)) {
                        if (free_slot == used)
                                free_slot = i;
                } else if (s->uid == uid) {
                        handle = (int)i;
                }
        }
        if (handle < 0 && free_slot < WAKE_PAGES_OWN) {
                /* A fresh page for a uid new here: a page is never
                 * handed to a second uid (a client of the first may
                 * still map it). */
                struct hbg_wake_page *p = atomic_load_explicit(&w->ahead.page, memory_order_relaxed);
                int fd = w->ahead.fd;
                if (p) { /* made ahead: fresh, nobody's yet */
                        atomic_store_explicit(&w->ahead.page, NULL, memory_order_relaxed);
                        w->ahead.fd = -1;
                }
                if (p || page_make(&p, &fd, w->wake_n, HBG_WAKE_OWN) == 0) {
                        struct wake_page *s = &w->own[free_slot];
                        s->fd = fd;
                        s->uid = uid;
                        /* Release: a parking thread that reads the page
                         * (acquire) sees it initialised. */
                        atomic_store_explicit(&s->page, p, memory_order_release);
                        atomic_store_explicit(&w->unwaited, true, memory_order_relaxed);
                        if (free_slot == used)
                                atomic_store_explicit(&w->used, used + 1, memory_order_release);
                        handle = (int)free_slot;
                }
        }
        struct wake_page *s = handle < 0 ? &w->shared : &w->own[handle];
        if (handle >= 0)
                atomic_fetch_add_explicit(&s->sessions, 1, memory_order_relaxed);
        *ret_fd = s->fd;
        pthread_mutex_unlock(&w->lock);
        return handle;
}

/* The uid's last session gone: its page goes (hbgd holds no fd for a
 * uid without sessions), and the slot waits for the next uid. */
void wake_pages_release(struct wake_pages *w, int handle) {
        if (handle < 0 || handle >= WAKE_PAGES_OWN)
                return;
        pthread_mutex_lock(&w->lock);
        struct wake_page *s = &w->own[handle];
        if (atomic_fetch_sub_explicit(&s->sessions, 1, memory_order_relaxed) == 1)
                page_unmake(s);
        pthread_mutex_unlock(&w->lock);
}

int wake_pages_make_ahead(struct wake_pages *w) {
        pthread_mutex_lock(&w->lock);
        bool there = atomic_load_explicit(&w->ahead.page, memory_order_relaxed) != NULL;
        pthread_mutex_unlock(&w->lock);
        if (there)
                return 0;
        struct wake_page made = { .fd = -1 };
        struct hbg_wake_page *p;
        int err = page_make(&p, &made.fd, w->wake_n, HBG_WAKE_OWN);
        if (err < 0)
                return err;
        atomic_store_explicit(&made.page, p, memory_order_relaxed);
        pthread_mutex_lock(&w->lock);
        there = atomic_load_explicit(&w->ahead.page, memory_order_relaxed) != NULL;
        if (!there) {
                atomic_store_explicit(&w->ahead.page, p, memory_order_relaxed);
                w->ahead.fd = made.fd;
        }
        pthread_mutex_unlock(&w->lock);
        if (there)
                page_unmake(&made); /* made meanwhile by another call: one is enough */
        return !there;
}

void wake_pages_drop_ahead(struct wake_pages *w) {
        pthread_mutex_lock(&w->lock);
        page_unmake(&w->ahead);
        pthread_mutex_unlock(&w->lock);
}

bool wake_pages_take_unwaited(struct wake_pages *w) {
        return atomic_load_explicit(&w->unwaited, memory_order_relaxed) &&
               atomic_exchange_explicit(&w->unwaited, false, memory_order_relaxed);
}

/* Which pages a parking thread waits on is a matter of speed alone: a
 * client whose wake finds nobody rings the doorbell (§9.4), so a page
 * left out (its uid's first session arriving now) only means the slower
 * wake-up. A slot holds a page exactly while its uid has sessions. */
unsigned wake_pages_waitv(struct wake_pages *w, struct futex_waitv *v) {
        unsigned n = 0;
        struct hbg_wake_page *p = atomic_load_explicit(&w->shared.page, memory_order_acquire);
        if (p)
                v[n++] = (struct futex_waitv){ .val = 0, .uaddr = (uintptr_t)&p->word, .flags = FUTEX_32 };
        unsigned used = atomic_load_explicit(&w->used, memory_order_acquire);
        for (unsigned i = 0; i < used && i < WAKE_PAGES_OWN; i++) {
                p = atomic_load_explicit(&w->own[i].page, memory_order_acquire);
                if (p)
                        v[n++] = (struct futex_waitv){ .val = 0, .uaddr = (uintptr_t)&p->word, .flags = FUTEX_32 };
        }
        return n;
}
