/* SPDX-License-Identifier: MIT */
/* hbgd's log (daemon/log.h). */
#include "daemon/log.h"

#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <syslog.h>
#define SD_JOURNAL_SUPPRESS_LOCATION 1 /* no CODE_FILE= etc.: not useful here */
#include <systemd/sd-journal.h>
#include <time.h>
#include <unistd.h>

#include "shm/util.h"

/* ------------------------------------------------------------ logging */

/*
 * Log lines go to the journal with structured fields when stderr is the
 * journal's stream (JOURNAL_STREAM names stderr's device:inode), else to
 * stderr with <N> priority prefixes. Lines about one session are rate
 * limited (LOG_BURST per LOG_INTERVAL_MS per session, then one
 * "N messages suppressed" line), so a misbehaving client cannot flood
 * the log. The engine logs from its threads: everything here is
 * serialised by log_lock.
 */
#define LOG_BURST 10
#define LOG_INTERVAL_MS 10000
#define LOG_SLOTS 64

struct log_fields {
        uint64_t session;      /* 0: none */
        int pid;
        long uid;              /* -1: none */
        bool has_graph;
        uint64_t graph;        /* the session's graph record number */
};

static pthread_mutex_t log_lock = PTHREAD_MUTEX_INITIALIZER;
static int log_to_journal = -1; /* -1: not checked yet */
static struct log_slot {
        uint64_t session;
        int64_t window_start_ms;
        unsigned count;
        unsigned suppressed;
} log_slots[LOG_SLOTS];


static bool journal_stream(void) {
        const char *e = getenv("JOURNAL_STREAM");
        unsigned long long dev, ino;
        struct stat st;
        if (!e || sscanf(e, "%llu:%llu", &dev, &ino) != 2 || fstat(STDERR_FILENO, &st) < 0)
                return false;
        /* sd_journal_send() drops lines silently when journald is not there. */
        if (access("/run/systemd/journal/socket", F_OK) < 0)
                return false;
        return (unsigned long long)st.st_dev == dev && (unsigned long long)st.st_ino == ino;
}

static void log_emit(int priority, const struct log_fields *f, const char *msg) {
        if (log_to_journal < 0)
                log_to_journal = journal_stream();
        if (log_to_journal) {
                char session[40] = "", pid[32] = "", uid[32] = "", graph[40] = "";
                if (f && f->session)
                        snprintf(session, sizeof(session), "HBG_SESSION=%" PRIu64, f->session);
                if (f && f->pid > 0)
                        snprintf(pid, sizeof(pid), "HBG_PID=%d", f->pid);
                if (f && f->uid >= 0)
                        snprintf(uid, sizeof(uid), "HBG_UID=%ld", f->uid);
                if (f && f->has_graph)
                        snprintf(graph, sizeof(graph), "HBG_GRAPH=%" PRIu64, f->graph);
                /* Empty strings end the list early: put present fields first. */
                const char *extra[4];
                unsigned n = 0;
                if (session[0])
                        extra[n++] = session;
                if (pid[0])
                        extra[n++] = pid;
                if (uid[0])
                        extra[n++] = uid;
                if (graph[0])
                        extra[n++] = graph;
                for (unsigned i = n; i < 4; i++)
                        extra[i] = NULL;
                if (sd_journal_send("MESSAGE=%s", msg, "PRIORITY=%d", priority,
                                    "SYSLOG_IDENTIFIER=hbgd", extra[0] ? "%s" : NULL, extra[0],
                                    extra[1] ? "%s" : NULL, extra[1], extra[2] ? "%s" : NULL,
                                    extra[2], extra[3] ? "%s" : NULL, extra[3], NULL) >= 0)
                        return;
        }
        fprintf(stderr, "<%d>hbgd: %s\n", priority, msg);
}

/* Rate limit per session; returns false when the line is to be dropped. */
static bool log_allow(const struct log_fields *f, int64_t now) {
        if (!f || !f->session)
                return true;
        struct log_slot *s = &log_slots[f->session % LOG_SLOTS];
        if (s->session != f->session) {
                if (s->suppressed) {
                        char msg[128];
                        struct log_fields old = { .session = s->session, .uid = -1 };
                        snprintf(msg, sizeof(msg), "session %" PRIu64 ": %u messages suppressed",
                                 s->session, s->suppressed);
                        log_emit(LOG_NOTICE, &old, msg);
                }
                *s = (struct log_slot){ .session = f->session, .window_start_ms = now };
        } else if (now - s->window_start_ms >= LOG_INTERVAL_MS) {
                if (s->suppressed) {
                        char msg[128];
                        snprintf(msg, sizeof(msg), "session %" PRIu64 ": %u messages suppressed",
                                 f->session, s->suppressed);
                        log_emit(LOG_NOTICE, f, msg);
                }
                s->window_start_ms = now;
                s->count = 0;
                s->suppressed = 0;
        }
        if (s->count >= LOG_BURST) {
                s->suppressed++;
                return false;
        }
        s->count++;
        return true;
}

/* Report what a window that ended suppressed, also for sessions that went
 * quiet (from the io thread's timer). */
void hbgd_log_flush_suppressed(void) {
        int64_t now = hbg_now_ms();
        pthread_mutex_lock(&log_lock);
        for (unsigned i = 0; i < LOG_SLOTS; i++) {
                struct log_slot *s = &log_slots[i];
                if (!s->suppressed || now - s->window_start_ms < LOG_INTERVAL_MS)
                        continue;
                char msg[128];
                struct log_fields f = { .session = s->session, .uid = -1 };
                snprintf(msg, sizeof(msg), "session %" PRIu64 ": %u messages suppressed", s->session,
                         s->suppressed);
                log_emit(LOG_NOTICE, &f, msg);
                s->window_start_ms = now;
                s->count = 0;
                s->suppressed = 0;
        }
        pthread_mutex_unlock(&log_lock);
}

static _Atomic int log_level = LOG_INFO;

void hbgd_set_log_level(int priority) {
        atomic_store(&log_level, priority);
}

static void log_v(int priority, const struct log_fields *f, const char *fmt, va_list ap)
        __attribute__((format(printf, 3, 0)));
static void log_v(int priority, const struct log_fields *f, const char *fmt, va_list ap) {
        if (priority > atomic_load_explicit(&log_level, memory_order_relaxed))
                return;
        char buf[1024];
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
        struct log_fields f = { .session = session, .pid = pid, .uid = (long)uid };
        va_list ap;
        va_start(ap, fmt);
        log_v(priority, &f, fmt, ap);
        va_end(ap);
}

/* Engine lines about a ring name it "ring session-N-pid-P": recover the
 * session for the fields and the rate limit. */
void hbgd_log_engine(void *userdata, int priority, const char *fmt, va_list ap) {
        (void)userdata;
        if (priority > atomic_load_explicit(&log_level, memory_order_relaxed))
                return;
        char buf[1024];
        vsnprintf(buf, sizeof(buf), fmt, ap);
        struct log_fields f = { .uid = -1 };
        const char *p = strstr(buf, "session-");
        unsigned long long id;
        int pid;
        if (p && sscanf(p, "session-%llu-pid-%d", &id, &pid) == 2) {
                f.session = id;
                f.pid = pid;
        }
        /* Lines about one graph say "graph N" (ring.c publish_graph). */
        const char *g = strstr(buf, ": graph ");
        unsigned long long graph;
        if (g && sscanf(g, ": graph %llu", &graph) == 1) {
                f.has_graph = true;
                f.graph = graph;
        }
        pthread_mutex_lock(&log_lock);
        if (log_allow(&f, hbg_now_ms()))
                log_emit(priority, &f, buf);
        pthread_mutex_unlock(&log_lock);
}



