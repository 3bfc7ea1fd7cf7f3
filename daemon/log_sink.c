/* SPDX-License-Identifier: MIT */
/* Where hbgd's log lines go, and the writer thread (daemon/log_sink.h). */
#include "daemon/log_sink.h"

#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <syslog.h>
#include <time.h>
#include <unistd.h>

#include "common/text.h"
#include "common/clock.h"

/*
 * Where a line goes, decided at the first line (and again when the
 * journal socket is configured):
 *   - [log] journal_socket set, or stderr is the journal's stream
 *     (JOURNAL_STREAM names stderr's device:inode, systemd's convention):
 *     one datagram per line in the journal's native protocol, with the
 *     structured fields (below);
 *   - otherwise, or when that send fails, stderr: "hbgd: message" on a
 *     terminal (with "warning: ", "error: " ... for the serious ones), or
 *     "<N>hbgd: message" (N the syslog priority) on a pipe or file, which
 *     journald and syslog daemons read as the line's priority.
 *
 * Who writes: any thread may log, and none may wait for the log (a pipe
 * nobody drains, a journald that fell behind). A line passes the rate
 * limits and is copied into a bounded queue under log_lock, which is never
 * held across a write; one writer thread takes lines off the queue and
 * does the writing, blocking there if it must. A full queue drops the line
 * and counts it (hbgctl status); the writer reports the count once it has
 * caught up. Before the writer starts (early startup errors) and after it
 * stopped, the logging thread writes the line itself, under log_lock.
 *
 * The rate limits (log_limit.c) decide, under the same lock, before a
 * line is queued.
 */
/* A line with its controls and stray bytes escaped (common/text.h): at
 * most 4 bytes for each of its own. */
#define CLEAN_LINE_MAX (4 * LOG_LINE_MAX)
#define LOG_QUEUE_LINES 256     /* lines waiting for the writer, at most */
#define LOG_KERNEL_NAME_MAX 64

#define SYSTEMD_JOURNAL_SOCKET "/run/systemd/journal/socket"

static pthread_mutex_t log_lock = PTHREAD_MUTEX_INITIALIZER;

void log_sink_lock(void) {
        pthread_mutex_lock(&log_lock);
}

/* The sink: the writer thread's own (before it runs and after it stopped,
 * the logging thread's, under log_lock). */
static bool sink_known;                   /* the fields below are decided */
static bool to_journal;                   /* native protocol to journal_addr */
static bool stderr_tty;                   /* plain lines on stderr */
static char journal_path[sizeof(((struct sockaddr_un *)0)->sun_path)]; /* in use; "" none */
static int journal_fd = -1;

/* Under log_lock. */
static char journal_path_set[sizeof(journal_path)]; /* configured, taken over by the sink */
static bool journal_path_changed;


static bool journal_stream(void) {
        const char *e = getenv("JOURNAL_STREAM");
        unsigned long long dev, ino;
        struct stat st;
        if (!e || sscanf(e, "%llu:%llu", &dev, &ino) != 2 || fstat(STDERR_FILENO, &st) < 0)
                return false;
        return (unsigned long long)st.st_dev == dev && (unsigned long long)st.st_ino == ino;
}

/* Under log_lock, by whoever writes the next line: a new journal_socket. */
static void sink_configure_locked(void) {
        if (!journal_path_changed)
                return;
        memcpy(journal_path, journal_path_set, sizeof(journal_path));
        journal_path_changed = false;
        sink_known = false;
}

static void decide_sink(void) {
        if (sink_known)
                return;
        sink_known = true;
        stderr_tty = isatty(STDERR_FILENO) == 1;
        to_journal = journal_path[0] || journal_stream();
}

/* ------------------------------------------------------------ the journal's native protocol */

/*
 * One journal entry is one datagram of FIELD=value lines; a value holding
 * a newline is written as FIELD, a newline, its length (64 bits, little
 * endian) and the bytes, then a newline (systemd's JOURNAL_NATIVE_PROTOCOL
 * document). An entry here is at most an escaped line (CLEAN_LINE_MAX) and
 * a few short fields, far below the datagram size limit, so the memfd form
 * the protocol also has for large entries is never needed.
 */
struct entry {
        char buf[CLEAN_LINE_MAX + LOG_LINE_MAX];
        size_t len;
        bool overflow;
};

static void entry_add(struct entry *e, const char *key, const char *value, size_t vlen) {
        size_t klen = strlen(key);
        bool binary = memchr(value, '\n', vlen) != NULL;
        size_t need = klen + 1 + (binary ? 8 : 0) + vlen + 1;
        if (e->overflow || need > sizeof(e->buf) - e->len) {
                e->overflow = true;
                return;
        }
        char *p = e->buf + e->len;
        memcpy(p, key, klen);
        p += klen;
        if (binary) {
                *p++ = '\n';
                uint64_t n = vlen;
                for (unsigned i = 0; i < 8; i++)
                        *p++ = (char)(n >> (8 * i));
        } else {
                *p++ = '=';
        }
        memcpy(p, value, vlen);
        p += vlen;
        *p++ = '\n';
        e->len = (size_t)(p - e->buf);
}

/* A value that may quote what a client sent (a session's name): valid
 * UTF-8 with every control escaped, the same text as on stderr. */
static void entry_add_text(struct entry *e, const char *key, const char *value) {
        char v[CLEAN_LINE_MAX];
        entry_add(e, key, v, text_copy_str(v, sizeof(v), value, TEXT_TERMINAL));
}

static void entry_addf(struct entry *e, const char *key, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void entry_addf(struct entry *e, const char *key, const char *fmt, ...) {
        char v[64];
        va_list ap;
        va_start(ap, fmt);
        int n = vsnprintf(v, sizeof(v), fmt, ap);
        va_end(ap);
        if (n > 0)
                entry_add(e, key, v, (size_t)n < sizeof(v) ? (size_t)n : sizeof(v) - 1);
}

/* 0, or -errno (the caller then writes to stderr). Never blocks: a journal
 * that does not keep up loses lines to stderr rather than stall a
 * scheduler thread. */
static int journal_send(int priority, const struct hbg_log_fields *f, const char *msg) {
        static struct entry e; /* the sink's; too big for a thread's stack frame */
        e.len = 0;
        e.overflow = false;
        entry_add_text(&e, "MESSAGE", msg);
        entry_addf(&e, "PRIORITY", "%d", priority);
        entry_add(&e, "SYSLOG_IDENTIFIER", "hbgd", 4);
        if (f->session)
                entry_addf(&e, "HBG_SESSION", "%" PRIu64, f->session);
        if (f->pid > 0)
                entry_addf(&e, "HBG_PID", "%d", f->pid);
        if (f->has_uid)
                entry_addf(&e, "HBG_UID", "%" PRIu32, f->uid);
        if (f->has_graph)
                entry_addf(&e, "HBG_GRAPH", "%" PRIu64, f->graph);
        if (f->has_task)
                entry_addf(&e, "HBG_TASK", "%" PRIu64, f->task);
        if (f->kernel)
                entry_add_text(&e, "HBG_KERNEL", f->kernel);
        if (f->err < 0)
                entry_addf(&e, "ERRNO", "%d", -f->err);
        if (e.overflow)
                return -EMSGSIZE;

        if (journal_fd < 0) {
                journal_fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
                if (journal_fd < 0)
                        return -errno;
        }
        /* Addressed each time, not connected: a journald that restarted
         * has a new socket at the same path. */
        struct sockaddr_un sa = { .sun_family = AF_UNIX };
        const char *path = journal_path[0] ? journal_path : SYSTEMD_JOURNAL_SOCKET;
        memcpy(sa.sun_path, path, strlen(path) + 1); /* fits: checked by the config */
        if (sendto(journal_fd, e.buf, e.len, MSG_DONTWAIT | MSG_NOSIGNAL, (struct sockaddr *)&sa,
                   sizeof(sa)) < 0)
                return -errno;
        return 0;
}

/* ------------------------------------------------------------ stderr */

static const char *level_word(int priority) {
        static const char *const words[] = { "emergency: ", "alert: ", "critical: ", "error: ", "warning: " };
        return priority >= 0 && priority <= LOG_WARNING ? words[priority] : "";
}

/* All of buf to stderr, with write(2): the writer may block here (that is
 * what it is for), and no stdio lock is held meanwhile that exit() could
 * wait for. A stderr that is closed or fails loses the line. */
static void stderr_write(const char *buf, size_t len) {
        while (len) {
                ssize_t n = write(STDERR_FILENO, buf, len);
                if (n > 0) {
                        buf += n;
                        len -= (size_t)n;
                } else if (n < 0 && errno == EAGAIN) { /* a non-blocking stderr */
                        struct pollfd p = { .fd = STDERR_FILENO, .events = POLLOUT };
                        if (poll(&p, 1, -1) < 0 && errno != EINTR)
                                return;
                } else if (n == 0 || errno != EINTR) {
                        return;
                }
        }
}

static void stderr_print(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void stderr_print(const char *fmt, ...) {
        char line[LOG_LINE_MAX + 64];
        va_list ap;
        va_start(ap, fmt);
        int n = vsnprintf(line, sizeof(line), fmt, ap);
        va_end(ap);
        if (n < 0)
                return;
        if ((size_t)n >= sizeof(line)) { /* cut: still one line */
                n = sizeof(line) - 1;
                line[n - 1] = '\n';
        }
        stderr_write(line, (size_t)n);
}

static void stderr_line(int priority, const char *msg) {
        /* A message may quote what a client sent (a session's name): valid
         * UTF-8, every control and stray byte escaped, so none starts a
         * line of its own or reaches the terminal of whoever reads it. */
        char clean[CLEAN_LINE_MAX];
        text_copy_str(clean, sizeof(clean), msg, TEXT_TERMINAL);
        if (stderr_tty)
                stderr_print("hbgd: %s%s\n", level_word(priority), clean);
        else
                stderr_print("<%d>hbgd: %s\n", priority, clean);
}

static void log_emit(int priority, const struct hbg_log_fields *f, const char *msg) {
        decide_sink();
        if (to_journal && journal_send(priority, f, msg) == 0)
                return;
        stderr_line(priority, msg);
}


/* ------------------------------------------------------------ the queue and its writer */

struct queued_line {
        int priority;
        struct hbg_log_fields f; /* f.kernel points to kernel[]; f.limit NULL */
        char kernel[LOG_KERNEL_NAME_MAX];
        char msg[LOG_LINE_MAX];
};

/* Under log_lock, except the head line while the writer writes it: the
 * lines are queue[queue_head] .. queue_len of them on. Producers fill the
 * slot past the tail only while queue_len < LOG_QUEUE_LINES, so they never
 * touch the head slot, which the writer reads unlocked and frees (moving
 * queue_head) only under the lock once the line is written. */
static struct queued_line queue[LOG_QUEUE_LINES];
static unsigned queue_head, queue_len;
static bool writer_running;    /* lines go to the queue (false: written at once) */
static bool writer_busy;       /* writing a line taken off the queue, unlocked */
static bool writer_stopping, writer_exited;
static uint64_t dropped_unreported;
static pthread_t writer_thread;
static pthread_cond_t queue_filled = PTHREAD_COND_INITIALIZER; /* the writer waits for lines */
static pthread_cond_t queue_drained;   /* CLOCK_MONOTONIC; sync and stop wait for the writer */
/* Lines dropped since start. Relaxed: a counter read for status only. */
static _Atomic uint64_t lines_dropped;

/* Under log_lock: a line was queued since the lock was taken. The writer
 * is signalled after the unlock (log_sink_unlock()), not under it: woken under
 * the lock, it would wait for it at once (two more futex calls and a
 * switch each way, for every line). */
static bool writer_signal;

/* Unlock log_lock, then wake the writer if a line was queued. */
void log_sink_unlock(void) {
        bool signal = writer_signal;
        writer_signal = false;
        pthread_mutex_unlock(&log_lock);
        if (signal)
                pthread_cond_signal(&queue_filled);
}

/* Under log_lock: queue the line for the writer, or write it now when
 * there is none. Never waits for a write while a writer runs. */
void log_sink_emit_locked(int priority, const struct hbg_log_fields *f, const char *msg) {
        if (!writer_running) {
                sink_configure_locked();
                log_emit(priority, f, msg);
                return;
        }
        if (queue_len == LOG_QUEUE_LINES) {
                atomic_fetch_add_explicit(&lines_dropped, 1, memory_order_relaxed);
                dropped_unreported++;
                return;
        }
        struct queued_line *q = &queue[(queue_head + queue_len) % LOG_QUEUE_LINES];
        q->priority = priority;
        q->f = *f;
        q->f.limit = NULL; /* may be freed before the line is written */
        if (f->kernel) {
                snprintf(q->kernel, sizeof(q->kernel), "%s", f->kernel);
                q->f.kernel = q->kernel;
        }
        size_t n = strnlen(msg, sizeof(q->msg) - 1);
        memcpy(q->msg, msg, n);
        q->msg[n] = 0;
        queue_len++;
        writer_signal = true;
}

static void *writer_main(void *arg) {
        (void)arg;
        log_sink_lock();
        for (;;) {
                if (queue_len > 0) {
                        struct queued_line *q = &queue[queue_head];
                        sink_configure_locked();
                        writer_busy = true;
                        pthread_mutex_unlock(&log_lock);
                        log_emit(q->priority, &q->f, q->msg);
                        log_sink_lock();
                        writer_busy = false;
                        queue_head = (queue_head + 1) % LOG_QUEUE_LINES;
                        queue_len--;
                } else if (dropped_unreported) {
                        /* Caught up: say what was lost on the way. */
                        char msg[96];
                        snprintf(msg, sizeof(msg), "%" PRIu64 " log lines dropped: the log writer fell behind",
                                 dropped_unreported);
                        dropped_unreported = 0;
                        sink_configure_locked();
                        writer_busy = true;
                        pthread_mutex_unlock(&log_lock);
                        log_emit(LOG_WARNING, &(struct hbg_log_fields){ 0 }, msg);
                        log_sink_lock();
                        writer_busy = false;
                } else if (writer_stopping) {
                        break;
                } else {
                        pthread_cond_broadcast(&queue_drained);
                        pthread_cond_wait(&queue_filled, &log_lock);
                }
        }
        writer_exited = true;
        pthread_cond_broadcast(&queue_drained);
        pthread_mutex_unlock(&log_lock);
        return NULL;
}

int hbgd_log_start(void) {
        pthread_condattr_t ca;
        int err = pthread_condattr_init(&ca);
        if (err)
                return -err;
        pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
        err = pthread_cond_init(&queue_drained, &ca);
        pthread_condattr_destroy(&ca);
        if (err)
                return -err;
        log_sink_lock();
        writer_stopping = writer_exited = false;
        err = pthread_create(&writer_thread, NULL, writer_main, NULL);
        writer_running = err == 0;
        if (writer_running)
                (void)pthread_setname_np(writer_thread, "hbgd-log");
        log_sink_unlock();
        return -err;
}

static bool queue_written(void) {
        return queue_len == 0 && !writer_busy && !dropped_unreported;
}

static bool writer_gone(void) {
        return writer_exited;
}

/* Under log_lock: wait on queue_drained until done() or timeout_ms
 * passed. 0 or -ETIMEDOUT. */
static int wait_writer_locked(bool (*done)(void), int timeout_ms) {
        struct timespec end;
        clock_gettime(CLOCK_MONOTONIC, &end);
        end.tv_sec += timeout_ms / 1000;
        end.tv_nsec += (long)(timeout_ms % 1000) * 1000000L;
        if (end.tv_nsec >= 1000000000L) {
                end.tv_sec++;
                end.tv_nsec -= 1000000000L;
        }
        while (!done())
                if (pthread_cond_timedwait(&queue_drained, &log_lock, &end) == ETIMEDOUT)
                        return done() ? 0 : -ETIMEDOUT;
        return 0;
}

int hbgd_log_sync(int timeout_ms) {
        log_sink_lock();
        int err = writer_running ? wait_writer_locked(queue_written, timeout_ms) : 0;
        log_sink_unlock();
        return err;
}

int hbgd_log_stop(int timeout_ms) {
        log_sink_lock();
        if (!writer_running) {
                log_sink_unlock();
                return 0;
        }
        writer_stopping = true;
        pthread_cond_signal(&queue_filled);
        int err = wait_writer_locked(writer_gone, timeout_ms);
        /* A writer still blocked keeps the queue: whatever is logged from
         * here on is queued or dropped, never written by this thread. */
        if (err == 0)
                writer_running = false;
        log_sink_unlock();
        if (err == 0)
                pthread_join(writer_thread, NULL);
        return err;
}

uint64_t hbgd_log_dropped(void) {
        return atomic_load_explicit(&lines_dropped, memory_order_relaxed);
}


void hbgd_log_set_journal_socket(const char *path) {
        log_sink_lock();
        snprintf(journal_path_set, sizeof(journal_path_set), "%s", path ? path : "");
        journal_path_changed = true;
        log_sink_unlock();
}
