/* SPDX-License-Identifier: MIT */
/* The io side's worker for slow jobs (daemon/slow_work.h). */
#include "daemon/slow_work.h"

#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include "common/clock.h"

enum job_state {
        JOB_IDLE,                      /* not submitted, done, or cancelled */
        JOB_QUEUED,
        JOB_RUNNING,
        JOB_FINISHED,                  /* ran; its done is due on the io thread */
};

struct slow_work {
        struct io_loop *loop;
        int event_fd;                  /* the worker's "finished" signal to the io thread */
        struct io_source *event_src;
        pthread_t thread;
        bool thread_started;
        /* Everything below under lock. */
        pthread_mutex_t lock;
        pthread_cond_t wake;           /* the worker: a job or stop */
        pthread_cond_t ran;            /* slow_work_cancel(): a job finished */
        struct slow_job *queued;       /* FIFO */
        struct slow_job *finished;     /* LIFO; order is restored when taken */
        bool stop;
        /* Per class (its rank): the uid served last, round robin. */
        bool served_any[SLOW_CLASSES];
        uid_t last_uid[SLOW_CLASSES];
        unsigned setups_in_row;        /* set-ups taken since the last request */
        bool worker_busy;              /* the worker runs a job */
        bool running_here;             /* the io thread runs one (slow_work_run_here()): the worker waits */
        unsigned pending;
        int64_t hold_until_ns;         /* background jobs wait until then (CLOCK_MONOTONIC) */
};

/* Set-ups taken in a row before a waiting request gets its turn: set-ups
 * come first, but a user who connects in a loop must not starve other
 * users' recordings. */
#define SETUPS_BEFORE_A_REQUEST 8u

/* The next job: of the jobs of the first class with any queued (a request
 * after SETUPS_BEFORE_A_REQUEST set-ups in a row), the oldest of the
 * lowest uid above the last one of that class served, else the oldest of
 * the lowest uid. Background work is held until hold_until_ns: then NULL,
 * and *ret_wait_until says until when (0 otherwise). Under lock. */
static const struct {
        unsigned rank;                 /* the order classes are taken in */
        bool waited_for;               /* a client waits for it: none may be queued for a job run here */
        bool may_run_here;             /* short enough for the io thread (slow_work_run_here()) */
} classes[SLOW_CLASSES] = {
        [SLOW_SETUP] = { 0, true, true },
        [SLOW_REQUEST] = { 1, true, false },
        [SLOW_BACKGROUND] = { 2, false, false },
};
#define class_rank(c) classes[(c) % SLOW_CLASSES].rank

static struct slow_job *take_next(struct slow_work *w, int64_t *ret_wait_until) {
        unsigned first = SLOW_CLASSES;
        bool request = false;
        *ret_wait_until = 0;
        for (struct slow_job *j = w->queued; j; j = j->next) {
                if (class_rank(j->class) < first)
                        first = class_rank(j->class);
                request = request || j->class == SLOW_REQUEST;
        }
        if (first == class_rank(SLOW_SETUP) && request && w->setups_in_row >= SETUPS_BEFORE_A_REQUEST)
                first = class_rank(SLOW_REQUEST);
        if (first == class_rank(SLOW_BACKGROUND) && w->hold_until_ns > 0) {
                if (clock_now_ns() < w->hold_until_ns) {
                        *ret_wait_until = w->hold_until_ns;
                        return NULL;
                }
                w->hold_until_ns = 0;
        }
        struct slow_job **best = NULL, **lowest = NULL;
        for (struct slow_job **p = &w->queued; *p; p = &(*p)->next) {
                if (class_rank((*p)->class) != first)
                        continue;
                uid_t u = (*p)->uid;
                if (!lowest || u < (*lowest)->uid)
                        lowest = p;
                if (w->served_any[first] && u > w->last_uid[first] && (!best || u < (*best)->uid))
                        best = p;
        }
        struct slow_job **pick = best ? best : lowest;
        if (!pick)
                return NULL;
        struct slow_job *job = *pick;
        *pick = job->next;
        job->next = NULL;
        w->served_any[first] = true;
        w->last_uid[first] = job->uid;
        w->setups_in_row = job->class == SLOW_SETUP ? w->setups_in_row + 1 : 0;
        return job;
}

static void *worker_main(void *arg) {
        struct slow_work *w = arg;
        pthread_mutex_lock(&w->lock);
        for (;;) {
                struct slow_job *job = NULL;
                int64_t until;
                /* (Nothing starts while the io thread runs a job itself:
                 * the job's exclusion is the same on either thread.) */
                while (!w->stop && (w->running_here || !(job = take_next(w, &until)))) {
                        if (w->running_here || until == 0) {
                                pthread_cond_wait(&w->wake, &w->lock);
                                continue;
                        }
                        /* Only held background work: wait for the end of
                         * the hold (w->wake's clock is CLOCK_MONOTONIC),
                         * a request's job, or stop. */
                        struct timespec ts = { .tv_sec = until / 1000000000, .tv_nsec = until % 1000000000 };
                        pthread_cond_timedwait(&w->wake, &w->lock, &ts);
                }
                if (w->stop)
                        break;
                job->state = JOB_RUNNING;
                w->worker_busy = true;
                pthread_mutex_unlock(&w->lock);
                job->run(job);
                pthread_mutex_lock(&w->lock);
                w->worker_busy = false;
                job->state = JOB_FINISHED;
                job->next = w->finished;
                w->finished = job;
                pthread_cond_broadcast(&w->ran);
                /* The counter cannot overflow: the io thread reads it to
                 * zero, and a write that would block is one it will see.
                 * Written unlocked: the io thread it wakes takes the lock
                 * at once, and would wait for the write's end. The job is
                 * on the finished list already: an io thread's pass that
                 * read the eventfd before this write runs it, or the
                 * write's count brings a next pass. */
                pthread_mutex_unlock(&w->lock);
                uint64_t one = 1;
                ssize_t n = write(w->event_fd, &one, sizeof(one));
                (void)n;
                pthread_mutex_lock(&w->lock);
        }
        pthread_mutex_unlock(&w->lock);
        return NULL;
}

/* io thread: run the finished jobs' done, oldest first, one at a time:
 * each is taken off the list under the lock just before its done runs,
 * so a done that cancels (or frees) another finished job finds it still
 * on the list, where slow_work_cancel() takes it off; none is run after
 * it was cancelled. (The list is short: one job per connection at most
 * and a session's background piece.) */
static void on_finished(struct io_source *src, uint32_t events, void *userdata) {
        struct slow_work *w = userdata;
        uint64_t n;
        (void)src;
        (void)events;
        while (read(w->event_fd, &n, sizeof(n)) > 0)
                ;
        /* Only the jobs finished by now: those that finish meanwhile (a
         * done may queue its next piece) signal again, and the io thread
         * serves other sources in between. */
        unsigned due = 0;
        pthread_mutex_lock(&w->lock);
        for (struct slow_job *p = w->finished; p; p = p->next)
                due++;
        pthread_mutex_unlock(&w->lock);
        for (; due > 0; due--) {
                pthread_mutex_lock(&w->lock);
                struct slow_job **oldest = NULL;
                for (struct slow_job **p = &w->finished; *p; p = &(*p)->next)
                        oldest = p;
                struct slow_job *j = oldest ? *oldest : NULL;
                if (j) {
                        *oldest = NULL; /* the last of the LIFO list */
                        j->state = JOB_IDLE;
                        w->pending--;
                }
                pthread_mutex_unlock(&w->lock);
                if (!j)
                        return;
                j->done(j);
        }
}

int slow_work_new(struct slow_work **ret, struct io_loop *loop) {
        struct slow_work *w = calloc(1, sizeof(*w));
        int err;
        if (!w)
                return -ENOMEM;
        w->loop = loop;
        w->event_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
        pthread_mutex_init(&w->lock, NULL);
        pthread_condattr_t attr;
        pthread_condattr_init(&attr);
        pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
        pthread_cond_init(&w->wake, &attr);
        pthread_condattr_destroy(&attr);
        pthread_cond_init(&w->ran, NULL);
        if (w->event_fd < 0) {
                err = -errno;
                goto fail;
        }
        if ((err = io_loop_add(loop, w->event_fd, on_finished, w, &w->event_src)) < 0)
                goto fail;
        if ((err = -pthread_create(&w->thread, NULL, worker_main, w)) < 0)
                goto fail;
        w->thread_started = true;
        (void)pthread_setname_np(w->thread, "hbgd-slow");
        *ret = w;
        return 0;
fail:
        slow_work_free(w);
        return err;
}

struct slow_work *slow_work_free(struct slow_work *w) {
        if (!w)
                return NULL;
        if (w->thread_started) {
                pthread_mutex_lock(&w->lock);
                w->stop = true;
                pthread_cond_signal(&w->wake);
                pthread_mutex_unlock(&w->lock);
                pthread_join(w->thread, NULL);
        }
        if (w->event_src)
                io_source_del(w->loop, w->event_src);
        if (w->event_fd >= 0)
                close(w->event_fd);
        pthread_cond_destroy(&w->ran);
        pthread_cond_destroy(&w->wake);
        pthread_mutex_destroy(&w->lock);
        free(w);
        return NULL;
}

void slow_work_submit(struct slow_work *w, struct slow_job *job) {
        pthread_mutex_lock(&w->lock);
        job->state = JOB_QUEUED;
        job->next = NULL;
        struct slow_job **p = &w->queued;
        while (*p)
                p = &(*p)->next;
        *p = job;
        w->pending++;
        pthread_mutex_unlock(&w->lock);
        /* After the unlock: a worker woken under the lock would wait for
         * it at once (two more futex calls and a switch each way). The
         * worker looks at the queue under the lock before it waits, so
         * the job is seen either way. */
        pthread_cond_signal(&w->wake);
}

/* The io thread's job over (ran: it is finished, else nothing of it
 * changed): the worker may take jobs again. */
static void end_run_here(struct slow_work *w, struct slow_job *job, bool ran) {
        pthread_mutex_lock(&w->lock);
        w->running_here = false;
        job->state = ran ? JOB_FINISHED : JOB_IDLE;
        if (ran) {
                job->next = w->finished;
                w->finished = job;
                w->pending++;
        }
        bool queued = w->queued != NULL;
        pthread_mutex_unlock(&w->lock);
        /* A worker that waited for the io thread's job has its turn. */
        if (queued)
                pthread_cond_signal(&w->wake);
}

bool slow_work_run_here(struct slow_work *w, struct slow_job *job, bool (*cheap)(void *arg), void *arg) {
        if (!classes[job->class % SLOW_CLASSES].may_run_here)
                return false;
        pthread_mutex_lock(&w->lock);
        bool idle = !w->worker_busy;
        for (const struct slow_job *j = w->queued; idle && j; j = j->next)
                idle = !classes[j->class % SLOW_CLASSES].waited_for;
        w->running_here = idle;
        if (idle)
                job->state = JOB_RUNNING;
        pthread_mutex_unlock(&w->lock);
        if (!idle)
                return false;
        /* Asked with the worker held off: no job of its (a fill) changes
         * the answer between here and the run. */
        if (cheap && !cheap(arg)) {
                end_run_here(w, job, false);
                return false;
        }
        job->run(job);
        end_run_here(w, job, true);
        /* Its done from the loop, as a worker's job's: never inside the
         * caller's own callback. */
        io_source_again(w->loop, w->event_src);
        return true;
}

static void unlink_job(struct slow_job **head, struct slow_job *job) {
        for (struct slow_job **p = head; *p; p = &(*p)->next)
                if (*p == job) {
                        *p = job->next;
                        job->next = NULL;
                        return;
                }
}

/* Take back a job that is not running (w->lock held); did it run? */
static bool take_back_locked(struct slow_work *w, struct slow_job *job) {
        bool ran = job->state == JOB_FINISHED;
        if (job->state == JOB_QUEUED)
                unlink_job(&w->queued, job);
        else if (job->state == JOB_FINISHED)
                unlink_job(&w->finished, job);
        if (job->state != JOB_IDLE)
                w->pending--;
        job->state = JOB_IDLE;
        return ran;
}

bool slow_work_cancel(struct slow_work *w, struct slow_job *job) {
        pthread_mutex_lock(&w->lock);
        while (job->state == JOB_RUNNING)
                pthread_cond_wait(&w->ran, &w->lock);
        bool ran = take_back_locked(w, job);
        pthread_mutex_unlock(&w->lock);
        return ran;
}

bool slow_work_detach(struct slow_work *w, struct slow_job *job) {
        pthread_mutex_lock(&w->lock);
        bool running = job->state == JOB_RUNNING;
        if (!running)
                take_back_locked(w, job);
        pthread_mutex_unlock(&w->lock);
        return !running;
}

void slow_work_hold_background(struct slow_work *w, int64_t ns) {
        int64_t until = clock_now_ns() + ns;
        pthread_mutex_lock(&w->lock);
        /* A longer hold needs no wake-up: the worker wakes at the old
         * end, finds the new one and waits again. */
        if (until > w->hold_until_ns)
                w->hold_until_ns = until;
        pthread_mutex_unlock(&w->lock);
}

unsigned slow_work_pending(const struct slow_work *w) {
        return w->pending; /* the io thread's own count */
}
