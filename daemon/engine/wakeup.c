/* SPDX-License-Identifier: MIT */
/*
 * Waking parked scheduler threads (RUNTIME_LOGIC.md §9.4): the private
 * word they sleep on, which only hbgd bumps and wakes, the wake page whose
 * word clients may wake them through as well, the doorbell's kick; the
 * completion policy's own thread, if it has one, through the policy's
 * wake_all.
 */
#include "daemon/engine/wakeup.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/futex.h>
#include <stdio.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "common/clock.h"

#include "daemon/engine/completion.h"
#include "daemon/engine/engine_state.h"
#include "daemon/engine/ring.h"

static long futex(_Atomic uint32_t *word, int op, uint32_t val, const struct timespec *timeout) {
        return syscall(SYS_futex, word, op, val, timeout, NULL, 0);
}

/*
 * The wake page: a memfd mapped writable here once, then sealed against
 * resizing and against any later writable mapping (F_SEAL_FUTURE_WRITE:
 * a client's PROT_WRITE shared mmap fails with EPERM, and so does
 * mprotect to write and write(2); F_SEAL_SEAL: no seal comes off). The
 * seals are what protect it: a client can reopen its fd read-write
 * through /proc, and gets nothing more by it. Clients get a read-only
 * reopen (mode 0400 first), or the sealed fd itself where /proc is not
 * there. Nothing hbgd needs rests on the page: parked threads also sleep
 * on the private word, which every wake of hbgd's own uses, and clients
 * ring the doorbell as well (§9.4); a client's wake of the page only
 * makes a parked thread start sooner.
 */
int wakeup_page_init(struct hbg_engine *e) {
        e->wake_fd = -1;
        int fd = memfd_create("hbgd-wake", MFD_CLOEXEC | MFD_ALLOW_SEALING);
        if (fd < 0)
                return -errno;
        int err = 0;
        void *p = MAP_FAILED;
        if (ftruncate(fd, HBG_WAKE_PAGE_SIZE) < 0 ||
            (p = mmap(NULL, HBG_WAKE_PAGE_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0)) == MAP_FAILED ||
            fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_FUTURE_WRITE | F_SEAL_SEAL) < 0) {
                err = -errno;
                if (p != MAP_FAILED)
                        munmap(p, HBG_WAKE_PAGE_SIZE);
                close(fd);
                return err;
        }
        e->wake_page = p;
        e->wake_page->magic = HBG_WAKE_MAGIC;
        e->wake_page->wake_n = e->all_execute ? 1u : (uint32_t)INT_MAX;
        /* futex_waitv (Linux 5.16): a real wait on a word that does not
         * hold the value asked for answers -EAGAIN where the call works;
         * anything else (-ENOSYS, a seccomp filter's -EPERM) and threads
         * sleep on the private word alone: clients' wakes of the page find
         * nobody and their doorbells wake hbgd, as before the page. */
        _Atomic uint32_t probe = 1;
        struct futex_waitv w = { .val = 0, .uaddr = (uintptr_t)&probe, .flags = FUTEX_32 | FUTEX_PRIVATE_FLAG };
        atomic_store_explicit(&e->page_waits,
                              syscall(SYS_futex_waitv, &w, 1, 0, NULL, CLOCK_MONOTONIC) < 0 && errno == EAGAIN,
                              memory_order_relaxed);
        (void)fchmod(fd, 0400);
        char path[64];
        snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
        int ro = open(path, O_RDONLY | O_CLOEXEC);
        if (ro >= 0) {
                close(fd);
                fd = ro;
        }
        e->wake_fd = fd;
        return 0;
}

void wakeup_page_free(struct hbg_engine *e) {
        if (e->wake_page)
                munmap(e->wake_page, HBG_WAKE_PAGE_SIZE);
        if (e->wake_fd >= 0)
                close(e->wake_fd);
        e->wake_page = NULL;
        e->wake_fd = -1;
}

/* Wake up to n sleepers of the private word (the caller bumped it). */
static void wake_sleepers(struct hbg_engine *e, int n) {
        futex(&e->wake_seq, FUTEX_WAKE_PRIVATE, (uint32_t)n, NULL);
}

/* Bump the word (seq_cst) before looking for sleepers: a thread going to
 * park reads the word, counts itself idle and re-reads the rings, so
 * either it sees the work, or we see it idle and its wait finds the word
 * moved or is woken (§9.4). Wakes at most n. */
static void kick(struct hbg_engine *e, int n) {
        atomic_fetch_add(&e->wake_seq, 1);
        if (atomic_load(&e->idle) > 0)
                wake_sleepers(e, n);
}

void wakeup_kick(struct hbg_engine *e) {
        kick(e, INT_MAX);
}

/* The doorbell: one thread is enough (it wakes a peer if it finds more
 * work than it takes, §9.4); waking all of them on a 2-CPU machine only
 * makes them fight the producer for the CPUs. All of them when some own
 * no cluster (wakeup_executor's reason). None when need_wakeup is clear
 * already: a client rings only after it read it set (after its publish,
 * seq_cst), so a clear one means a thread woke since, and it clears the
 * flag (seq_cst) before it visits the rings: it sees the publish (the
 * client's direct wake has usually woken it; §9.4, model/wake.pml). */
void hbg_ring_kick(struct hbg_ring *r) {
        if (atomic_exchange(&r->cpl->need_wakeup, 0))
                kick(r->engine, r->engine->all_execute ? 1 : INT_MAX);
}

/* Surplus work any thread can do appeared: wake one parked peer (§9.4). */
void wakeup_one(struct hbg_engine *e) {
        if (atomic_load_explicit(&e->idle, memory_order_relaxed) == 0)
                return;
        atomic_fetch_add(&e->wake_seq, 1);
        wake_sleepers(e, 1);
}

/* Ready tasks appeared that need a core: make sure a parked thread that
 * owns clusters wakes. When some threads own none, a single futex wake may
 * land on one of those, which cannot run the task: wake them all then
 * (such configurations are the unusual ones). */
void wakeup_executor(struct hbg_engine *e) {
        if (atomic_load_explicit(&e->idle_executors, memory_order_relaxed) == 0)
                return;
        atomic_fetch_add(&e->wake_seq, 1);
        wake_sleepers(e, e->all_execute ? 1 : INT_MAX);
}

void wakeup_futex_wait(_Atomic uint32_t *word, uint32_t val, const struct timespec *timeout) {
        futex(word, FUTEX_WAIT_PRIVATE, val, timeout);
}

void wakeup_futex_wake(_Atomic uint32_t *word, int n) {
        futex(word, FUTEX_WAKE_PRIVATE, (uint32_t)n, NULL);
}

/* futex_waitv on the private word (while it holds val) and the page's
 * word (while it holds 0, which it always does): the index of the word
 * woken, or -errno. The timeout is absolute there. */
static long wait_both(struct hbg_engine *e, uint32_t val, const struct timespec *timeout) {
        struct futex_waitv w[2] = {
                { .val = val, .uaddr = (uintptr_t)&e->wake_seq, .flags = FUTEX_32 | FUTEX_PRIVATE_FLAG },
                { .val = 0, .uaddr = (uintptr_t)&e->wake_page->word, .flags = FUTEX_32 },
        };
        struct timespec until, *at = NULL;
        if (timeout) {
                int64_t ns = clock_now_ns() + (int64_t)timeout->tv_sec * 1000000000 + timeout->tv_nsec;
                until = (struct timespec){ .tv_sec = ns / 1000000000, .tv_nsec = ns % 1000000000 };
                at = &until;
        }
        long r = syscall(SYS_futex_waitv, w, 2, 0, at, CLOCK_MONOTONIC);
        return r < 0 ? -errno : r;
}

/* Around a sleep: counted, traced, shown parked. */
static void sleep_begin(struct sched_thread *t) {
        struct trace_state *ts = &t->engine->trace;
        uint32_t trace = trace_epoch(ts);
        stat_add(&t->stats.parks, 1);
        if (trace)
                trace_instant(ts, trace, HBG_TRACE_PARK);
        atomic_store_explicit(&t->parked, true, memory_order_relaxed);
}

static void sleep_end(struct sched_thread *t) {
        struct trace_state *ts = &t->engine->trace;
        uint32_t trace;
        atomic_store_explicit(&t->parked, false, memory_order_relaxed);
        stat_add(&t->stats.wakeups, 1);
        if ((trace = trace_epoch(ts)) != 0)
                trace_instant(ts, trace, HBG_TRACE_WAKE);
}

void wakeup_thread_sleep(struct sched_thread *t, _Atomic uint32_t *word, uint32_t val,
                         const struct timespec *timeout) {
        sleep_begin(t);
        futex(word, FUTEX_WAIT_PRIVATE, val, timeout);
        sleep_end(t);
}

int wakeup_thread_park(struct sched_thread *t, bool page, uint32_t val, const struct timespec *timeout) {
        struct hbg_engine *e = t->engine;
        long r = -EAGAIN;
        sleep_begin(t);
        if (page && atomic_load_explicit(&e->page_waits, memory_order_relaxed)) {
                r = wait_both(e, val, timeout);
                /* Refused now (a seccomp filter, say): never again, and
                 * sleep the plain way, or an idle thread would spin. */
                if (r < 0 && r != -EAGAIN && r != -ETIMEDOUT && r != -EINTR) {
                        atomic_store_explicit(&e->page_waits, false, memory_order_relaxed);
                        futex(&e->wake_seq, FUTEX_WAIT_PRIVATE, val, timeout);
                }
        } else {
                futex(&e->wake_seq, FUTEX_WAIT_PRIVATE, val, timeout);
        }
        sleep_end(t);
        return r == 1;
}

/* A client's wake that found no work: counted; past WAKEUP_SPURIOUS_MAX of
 * them in one window of WAKEUP_SPURIOUS_WINDOW_MS the thread sleeps on the
 * private word alone for the rest of the window, where only hbgd's own
 * wakes (and the doorbell's) reach it. */
void wakeup_spurious(struct sched_thread *t, int64_t now_ms) {
        stat_add(&t->stats.spurious, 1);
        if (now_ms - t->spurious_window_ms >= WAKEUP_SPURIOUS_WINDOW_MS) {
                t->spurious_window_ms = now_ms;
                t->spurious_in_window = 0;
        }
        if (++t->spurious_in_window > WAKEUP_SPURIOUS_MAX)
                t->calm_until_ms = t->spurious_window_ms + WAKEUP_SPURIOUS_WINDOW_MS;
}

/* Stopping: the schedulers, and the completion policy's own thread
 * wherever it sleeps. */
void wakeup_all(struct hbg_engine *e) {
        wakeup_kick(e);
        if (e->completion->wake_all)
                e->completion->wake_all(e);
}
