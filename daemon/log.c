/* SPDX-License-Identifier: MIT */
/* hbgd's log (daemon/log.h). */
#include "daemon/log.h"

#include <errno.h>
#include <inttypes.h>
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
#include <unistd.h>

#include "common/text.h"
#include "shm/util.h"

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
 * Lines about one session are rate limited (log_burst per log_interval_ms
 * per session, then one "N messages suppressed" line). The engine logs
 * from its threads: everything here is serialised by log_lock.
 */
#define LOG_SLOTS 64
#define LOG_LINE_MAX 1024
/* A line with its controls and stray bytes escaped (common/text.h): at
 * most 4 bytes for each of its own. */
#define CLEAN_LINE_MAX (4 * LOG_LINE_MAX)

#define SYSTEMD_JOURNAL_SOCKET "/run/systemd/journal/socket"

static pthread_mutex_t log_lock = PTHREAD_MUTEX_INITIALIZER;
static bool sink_known;                   /* the fields below are decided */
static bool to_journal;                   /* native protocol to journal_addr */
static bool stderr_tty;                   /* plain lines on stderr */
static char journal_path[sizeof(((struct sockaddr_un *)0)->sun_path)]; /* configured; "" none */
static int journal_fd = -1;
static unsigned log_interval_ms = 10000, log_burst = 10; /* [log] ratelimit_* */
static struct log_slot {
        uint64_t session;
        struct hbgd_ratelimit rl;
} log_slots[LOG_SLOTS];

static bool journal_stream(void) {
        const char *e = getenv("JOURNAL_STREAM");
        unsigned long long dev, ino;
        struct stat st;
        if (!e || sscanf(e, "%llu:%llu", &dev, &ino) != 2 || fstat(STDERR_FILENO, &st) < 0)
                return false;
        return (unsigned long long)st.st_dev == dev && (unsigned long long)st.st_ino == ino;
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
        static struct entry e; /* under log_lock; too big for a thread's stack frame */
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

static void stderr_line(int priority, const char *msg) {
        /* A message may quote what a client sent (a session's name): valid
         * UTF-8, every control and stray byte escaped, so none starts a
         * line of its own or reaches the terminal of whoever reads it. */
        char clean[CLEAN_LINE_MAX];
        text_copy_str(clean, sizeof(clean), msg, TEXT_TERMINAL);
        if (stderr_tty)
                fprintf(stderr, "hbgd: %s%s\n", level_word(priority), clean);
        else
                fprintf(stderr, "<%d>hbgd: %s\n", priority, clean);
}

static void log_emit(int priority, const struct hbg_log_fields *f, const char *msg) {
        decide_sink();
        if (to_journal && journal_send(priority, f, msg) == 0)
                return;
        stderr_line(priority, msg);
}

/* ------------------------------------------------------------ rate limit */

static void report_suppressed(uint64_t session, unsigned n) {
        char msg[128];
        struct hbg_log_fields f = { .session = session };
        snprintf(msg, sizeof(msg), "session %" PRIu64 ": %u messages suppressed", session, n);
        log_emit(LOG_NOTICE, &f, msg);
}

/* hbgd_ratelimit_allow() under log_lock. */
static bool ratelimit_allow(struct hbgd_ratelimit *rl, int64_t now, unsigned *ret_ended) {
        *ret_ended = 0;
        if (log_interval_ms == 0)
                return true;
        if (now - rl->window_start_ms >= log_interval_ms) {
                *ret_ended = rl->suppressed;
                *rl = (struct hbgd_ratelimit){ .window_start_ms = now };
        }
        if (rl->count >= log_burst) {
                rl->suppressed++;
                return false;
        }
        rl->count++;
        return true;
}

bool hbgd_ratelimit_allow(struct hbgd_ratelimit *rl, int64_t now_ms, unsigned *ret_ended) {
        pthread_mutex_lock(&log_lock);
        bool ok = ratelimit_allow(rl, now_ms, ret_ended);
        pthread_mutex_unlock(&log_lock);
        return ok;
}

/* Rate limit per session; returns false when the line is to be dropped. */
static bool log_allow(const struct hbg_log_fields *f, int64_t now) {
        if (!f->session || log_interval_ms == 0)
                return true;
        struct log_slot *s = &log_slots[f->session % LOG_SLOTS];
        if (s->session != f->session) {
                if (s->rl.suppressed)
                        report_suppressed(s->session, s->rl.suppressed);
                *s = (struct log_slot){ .session = f->session, .rl.window_start_ms = now };
        }
        unsigned ended;
        bool ok = ratelimit_allow(&s->rl, now, &ended);
        if (ended)
                report_suppressed(s->session, ended);
        return ok;
}

/* Report what a window that ended suppressed, also for sessions that went
 * quiet (from the io thread's timer). */
void hbgd_log_flush_suppressed(void) {
        int64_t now = hbg_now_ms();
        pthread_mutex_lock(&log_lock);
        for (unsigned i = 0; i < LOG_SLOTS; i++) {
                struct log_slot *s = &log_slots[i];
                if (!s->rl.suppressed || now - s->rl.window_start_ms < log_interval_ms)
                        continue;
                report_suppressed(s->session, s->rl.suppressed);
                s->rl = (struct hbgd_ratelimit){ .window_start_ms = now };
        }
        pthread_mutex_unlock(&log_lock);
}

/* ------------------------------------------------------------ entry points */

static _Atomic int log_level = LOG_INFO;

void hbgd_set_log_level(int priority) {
        atomic_store(&log_level, priority);
}

void hbgd_log_set_ratelimit(unsigned interval_ms, unsigned burst) {
        pthread_mutex_lock(&log_lock);
        log_interval_ms = interval_ms;
        log_burst = burst ? burst : 1;
        pthread_mutex_unlock(&log_lock);
}

void hbgd_log_set_journal_socket(const char *path) {
        pthread_mutex_lock(&log_lock);
        snprintf(journal_path, sizeof(journal_path), "%s", path ? path : "");
        sink_known = false;
        pthread_mutex_unlock(&log_lock);
}

static void log_v(int priority, const struct hbg_log_fields *f, const char *fmt, va_list ap)
        __attribute__((format(printf, 3, 0)));
static void log_v(int priority, const struct hbg_log_fields *f, const char *fmt, va_list ap) {
        static const struct hbg_log_fields none;
        if (priority > atomic_load_explicit(&log_level, memory_order_relaxed))
                return;
        if (!f)
                f = &none;
        char buf[LOG_LINE_MAX];
        vsnprintf(buf, sizeof(buf), fmt, ap);
        pthread_mutex_lock(&log_lock);
        if (log_allow(f, hbg_now_ms()))
                log_emit(priority, f, buf);
        pthread_mutex_unlock(&log_lock);
}

void hbgd_log(int priority, const char *fmt, ...) {
        va_list ap;
        va_start(ap, fmt);
        log_v(priority, NULL, fmt, ap);
        va_end(ap);
}

void hbgd_log_session(int priority, uint64_t session, int pid, uid_t uid, const char *fmt, ...) {
        struct hbg_log_fields f = { .session = session, .pid = pid, .has_uid = true, .uid = (uint32_t)uid };
        va_list ap;
        va_start(ap, fmt);
        log_v(priority, &f, fmt, ap);
        va_end(ap);
}

void hbgd_log_fields(int priority, const struct hbg_log_fields *f, const char *fmt, ...) {
        va_list ap;
        va_start(ap, fmt);
        log_v(priority, f, fmt, ap);
        va_end(ap);
}

void hbgd_log_engine(void *userdata, int priority, const struct hbg_log_fields *f, const char *fmt, va_list ap) {
        (void)userdata;
        log_v(priority, f, fmt, ap);
}
