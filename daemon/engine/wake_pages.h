/* SPDX-License-Identifier: MIT */
/* wake_pages.c: the wake pages clients wake parked scheduler threads
 * through (RUNTIME_LOGIC.md §9.4): one per uid, WAKE_PAGES_OWN of them,
 * and one shared by the uids past those. */
#pragma once

#include <linux/futex.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "shm/layout.h"

/* Uids with a page of their own at once. A parked thread waits on every
 * page in use and hbgd's private word in one futex_waitv (at most 128
 * words); past this many uids with sessions, the next ones share a page,
 * whose clients ring the doorbell after every wake. */
#define WAKE_PAGES_OWN 32
/* WAKE_PAGES_OWN own pages, the shared one, the private word. */
#define WAKE_PAGES_WAITV (WAKE_PAGES_OWN + 2)

struct wake_page {
        /* Written under the table's lock; read by parking threads
         * (acquire): the mapping stays until the engine goes, or until
         * a later uid takes the slot, when the old one is unmapped (a
         * thread that read it then waits on it or fails with EFAULT, and
         * sleeps on the private word either way). */
        _Atomic(struct hbg_wake_page *) page;
        int fd;                           /* read-only, sent to the uid's clients */
        uid_t uid;
        _Atomic uint32_t sessions;        /* the uid's sessions holding it */
};

struct wake_pages {
        pthread_mutex_t lock;             /* taking and replacing slots */
        bool lock_ready;
        uint32_t wake_n;                  /* sleepers a client's wake asks for */
        struct wake_page shared;          /* sessions == 0: always in use */
        struct wake_page own[WAKE_PAGES_OWN];
        /* A fresh page made ahead (off a connect's path) for the next uid
         * new here, or page NULL; no thread waits on it, no client has
         * it. Under the lock. */
        struct wake_page ahead;
        _Atomic unsigned used;            /* slots of own[] ever taken (release) */
        /* A page was made that the threads parked before it do not wait
         * on: the next ring served wakes one, which parks again on it
         * (engine_ring_serve()). Relaxed: a hint for speed only (a
         * client's wake that finds nobody rings the doorbell). */
        _Atomic bool unwaited;
};

/* The shared page, and whether futex_waitv works (*ret_waits): 0 or -errno. */
int wake_pages_init(struct wake_pages *w, uint32_t wake_n, bool *ret_waits);
void wake_pages_free(struct wake_pages *w);
/* A page for a session of uid: its handle (0..WAKE_PAGES_OWN-1, the uid's
 * own; -1 the shared one) and its fd (the table's: do not close). Never
 * fails: the shared page stands in when a page cannot be made. */
int wake_pages_acquire(struct wake_pages *w, uid_t uid, int *ret_fd);
void wake_pages_release(struct wake_pages *w, int handle);
/* A page made ahead for the next uid new here, if there is none (made
 * outside the lock): 1 made, 0 one was there, -errno. */
int wake_pages_make_ahead(struct wake_pages *w);
/* The page made ahead, if any, unmapped and closed. */
void wake_pages_drop_ahead(struct wake_pages *w);
/* Whether a page was made since the last call (and no longer). */
bool wake_pages_take_unwaited(struct wake_pages *w);
/* The pages in use, as futex_waitv entries from w[0] on (at most
 * WAKE_PAGES_OWN + 1): their count. */
unsigned wake_pages_waitv(struct wake_pages *w, struct futex_waitv *v);
