/* SPDX-License-Identifier: MIT */
/*
 * `hbgctl metrics --listen ADDR:PORT`: a Prometheus exporter for hbgd
 * (docs/OPERATIONS.md, "Metrics"). A separate, unprivileged process: hbgd
 * itself has no HTTP listener; this one is hbgd's client like any
 * `hbgctl metrics`, asking for fresh values at every scrape.
 *
 * A small HTTP/1.1 server: up to MAX_CONNS connections at once in one
 * poll() loop, so that an idle or slow one holds up nobody (when all are
 * taken, a new connection drops the oldest one that is not being
 * answered). One request per connection (answered with Connection:
 * close): at most REQUEST_MAX bytes of request line and headers, read
 * within IO_TIMEOUT_MS of the accept, else the connection is closed; the
 * reply written within IO_TIMEOUT_MS of its making (after hbgd answered),
 * else the same; then up to DRAIN_MS more to read what the client still
 * sends before the close (not after a read that saw nothing or timed
 * out). Only the head is read: what follows the blank line (a body, a
 * pipelined request) changes nothing. GET /metrics (a query string is
 * ignored) answers the metrics in the format the Accept header prefers
 * (OpenMetrics when it ranks application/openmetrics-text at least as high
 * as what else it takes, else text 0.0.4), without the rows per uid
 * unless --per-uid (HEAD: the same head alone); other paths 404, other
 * methods 405, a request line
 * that is not exactly "METHOD SP TARGET SP HTTP/x.y" or a head with a NUL
 * 400, an HTTP version other than 1.x 505, a head that fills REQUEST_MAX
 * 431. hbgd not answering: 503 with the reason; Prometheus then records
 * up 0 for the target. SIGTERM or SIGINT stops it (through a pipe the
 * handler writes, which the loop polls: a signal at any moment ends the
 * wait).
 */
#include "ctl/exporter.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/procstat.h"
#include "ctl/ctl.h"
#include "ctl/daemon_conn.h"
#include "ctl/error.h"
#include "ctl/metrics.h"

#define REQUEST_MAX 8192
#define IO_TIMEOUT_MS 5000
#define MAX_CONNS 16
/* After the reply: what the client still sends (a request refused
 * unread) is read for at most DRAIN_MS and DRAIN_MAX bytes, else closing
 * with unread data resets the connection and the client may lose the
 * reply. */
#define DRAIN_MS 1000
#define DRAIN_MAX (64 * 1024)

static volatile sig_atomic_t stop_signal;
static int stop_pipe = -1; /* the write end; the loop polls the read end */

static void on_stop(int sig) {
        int saved = errno;
        stop_signal = sig;
        if (stop_pipe >= 0 && write(stop_pipe, "", 1) < 0) {
                /* full: a byte is there already */
        }
        errno = saved;
}

/* ------------------------------------------------------------ listening */

/* "127.0.0.1:9464", "[::1]:9464", ":9464" (every address) into a bound,
 * listening socket. The fd, or a negative errno with a message printed
 * (-EINVAL: not an address). */
static int listen_on(const char *spec) {
        char host[128];
        const char *colon = strrchr(spec, ':');
        if (!colon || !colon[1] || (size_t)(colon - spec) >= sizeof(host))
                return ctl_error(-EINVAL, "--listen: '%s' is not ADDR:PORT", spec);
        /* getaddrinfo() takes any number for the port and keeps its low
         * 16 bits: 99999 would serve on 34463. */
        size_t pl = strspn(colon + 1, "0123456789");
        if (colon[1 + pl] || pl > 5 || strtoul(colon + 1, NULL, 10) > 65535)
                return ctl_error(-EINVAL, "--listen: '%s' is not ADDR:PORT (the port a number from 0 to 65535)",
                                 spec);
        size_t hl = (size_t)(colon - spec);
        memcpy(host, spec, hl);
        host[hl] = 0;
        if (hl >= 2 && host[0] == '[' && host[hl - 1] == ']') {
                memmove(host, host + 1, hl - 2);
                host[hl - 2] = 0;
        }
        struct addrinfo hints = { .ai_socktype = SOCK_STREAM,
                                  .ai_flags = AI_PASSIVE | AI_NUMERICHOST | AI_NUMERICSERV };
        struct addrinfo *ai = NULL;
        int gai = getaddrinfo(host[0] ? host : NULL, colon + 1, &hints, &ai);
        if (gai != 0)
                return ctl_error(-EINVAL, "--listen: '%s' is not ADDR:PORT (numeric): %s", spec, gai_strerror(gai));
        int fd = socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
        int err = fd < 0 ? -errno : 0;
        int one = 1;
        if (!err && (setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) < 0 ||
                     bind(fd, ai->ai_addr, ai->ai_addrlen) < 0 || listen(fd, 64) < 0))
                err = -errno;
        freeaddrinfo(ai);
        if (err) {
                if (fd >= 0)
                        close(fd);
                return ctl_error(err, "--listen %s: %s", spec, strerror(-err));
        }
        return fd;
}

/* ------------------------------------------------------------ connections */

enum conn_state {
        CONN_FREE,
        CONN_READING,  /* the head, until the blank line */
        CONN_WRITING,  /* the reply, from out */
        CONN_DRAINING, /* after the reply, what the client still sends */
};

struct conn {
        enum conn_state state;
        int fd;
        uint64_t seq;           /* accept order: the lowest is the oldest */
        int64_t deadline;       /* of the current state (ms, clock_now_ms) */
        size_t n;               /* head bytes read */
        size_t drained;
        bool head_only;         /* a HEAD request: the reply's head alone */
        char *out;              /* the reply */
        size_t out_len, out_done;
        char head[REQUEST_MAX + 1];
};

struct server {
        const char *path;       /* hbgd's socket */
        bool per_uid;
        uint64_t accepted;
        struct conn conns[MAX_CONNS];
};

static void conn_close(struct conn *c) {
        close(c->fd);
        free(c->out);
        c->out = NULL;
        c->state = CONN_FREE;
}

/* The reply, ready for writing (a fresh deadline: hbgd's answer may have
 * taken a while); out of memory: closed. */
static void respond(struct conn *c, const char *status, const char *type, const char *extra, const char *body,
                    size_t len) {
        char head[512];
        int n = snprintf(head, sizeof(head),
                         "HTTP/1.1 %s\r\nContent-Type: %s\r\nContent-Length: %zu\r\n%sConnection: close\r\n\r\n",
                         status, type, len, extra);
        c->out = n > 0 && (size_t)n < sizeof(head) ? malloc((size_t)n + len) : NULL;
        if (!c->out) {
                conn_close(c);
                return;
        }
        /* HEAD: the same head (Content-Length the body's), no body. */
        if (c->head_only)
                len = 0;
        memcpy(c->out, head, (size_t)n);
        memcpy(c->out + n, body, len);
        c->out_len = (size_t)n + len;
        c->out_done = 0;
        c->state = CONN_WRITING;
        c->deadline = clock_now_ms() + IO_TIMEOUT_MS;
}

static void respond_text(struct conn *c, const char *status, const char *extra, const char *msg) {
        respond(c, status, "text/plain; charset=utf-8", extra, msg, strlen(msg));
}

/* ------------------------------------------------------------ one request */

/* The value of header `name` in the head (case-insensitive name), cut at
 * the line's end, into buf; false if absent. */
static bool header(const char *head, const char *name, char *buf, size_t size) {
        size_t nl = strlen(name);
        for (const char *l = strchr(head, '\n'); l && l[1]; l = strchr(l + 1, '\n')) {
                const char *h = l + 1;
                if (strncasecmp(h, name, nl) != 0 || h[nl] != ':')
                        continue;
                h += nl + 1;
                h += strspn(h, " \t");
                size_t len = strcspn(h, "\r\n");
                snprintf(buf, size, "%.*s", (int)(len < size ? len : size - 1), h);
                return true;
        }
        return false;
}

/* Does the Accept value prefer OpenMetrics? Its highest q among the
 * media ranges naming application/openmetrics-text, against the highest
 * of the others (text/plain, wildcards); q=0 refuses. */
static bool wants_openmetrics(const char *accept) {
        double om = 0, other = 0;
        char copy[1024];
        snprintf(copy, sizeof(copy), "%s", accept);
        char *save = NULL;
        for (char *range = strtok_r(copy, ",", &save); range; range = strtok_r(NULL, ",", &save)) {
                range += strspn(range, " \t");
                double q = 1;
                const char *qp = strstr(range, ";q=");
                if (!qp)
                        qp = strstr(range, "; q=");
                if (qp)
                        q = strtod(strchr(qp, '=') + 1, NULL);
                if (!(q >= 0 && q <= 1))
                        q = 0;
                bool is_om = strncasecmp(range, "application/openmetrics-text", 28) == 0;
                if (is_om && q > om)
                        om = q;
                else if (!is_om && q > other)
                        other = q;
        }
        return om > 0 && om >= other;
}

/* hbgd's metrics, fresh, in fmt, with this process's own: a 200, or a
 * 503 when hbgd does not answer. */
static void serve_metrics(struct server *sv, struct conn *c, const struct metrics_format *fmt) {
        Hbg__Envelope *reply = NULL;
        struct ctl_failure fail;
        if (metrics_fetch(sv->path, &reply, &fail) < 0) {
                char msg[160];
                snprintf(msg, sizeof(msg), "hbgd at %s did not answer (hbgctl exit status %d); see the exporter's log\n",
                         sv->path, ctl_exit_status(&fail));
                respond_text(c, "503 Service Unavailable", "", msg);
                return;
        }
        struct procstat self;
        procstat_self(&self);
        char *text = NULL;
        size_t len = 0;
        FILE *out = open_memstream(&text, &len);
        int err = out ? metrics_write(out, reply->status_reply, &self, sv->per_uid, fmt) : -ENOMEM;
        wire_free(reply);
        if (out && fclose(out) != 0 && !err)
                err = -ENOMEM;
        if (err) {
                ctl_error(err, "%s", err == -EPROTO ? "malformed metrics from hbgd" : "out of memory");
                respond_text(c, "500 Internal Server Error", "", "malformed metrics from hbgd\n");
        } else {
                respond(c, "200 OK", fmt->media_type, "", text, len);
        }
        free(text);
}

/* RFC 9110's tchar: what a method (a token) is made of. */
static bool tchar(char ch) {
        return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
               (ch && strchr("!#$%&'*+-.^_`|~", ch));
}

static bool digit(char ch) {
        return ch >= '0' && ch <= '9';
}

/* The request line, exactly "METHOD SP TARGET SP HTTP/D.D" then CRLF (or
 * LF): the method and target copied out (cut to their buffers: a longer
 * one is refused as no method or path this server knows), the major
 * version in *major. false: not a request line. */
static bool request_line(const char *l, char *method, size_t msize, char *target, size_t tsize, int *major) {
        size_t n = 0;
        while (tchar(l[n]))
                n++;
        if (n == 0 || n >= msize || l[n] != ' ')
                return false;
        snprintf(method, msize, "%.*s", (int)n, l);
        l += n + 1;
        for (n = 0; l[n] > ' ' && l[n] < 0x7f;)
                n++;
        if (n == 0 || n >= tsize || l[n] != ' ')
                return false;
        snprintf(target, tsize, "%.*s", (int)n, l);
        l += n + 1;
        if (strncmp(l, "HTTP/", 5) != 0 || !digit(l[5]) || l[6] != '.' || !digit(l[7]))
                return false;
        *major = l[5] - '0';
        return strncmp(l + 8, "\r\n", 2) == 0 || l[8] == '\n';
}

/* The head (NUL-terminated after its last header line) is complete:
 * the reply. */
static void serve(struct server *sv, struct conn *c) {
        char method[16], target[1024];
        int major;
        if (!request_line(c->head, method, sizeof(method), target, sizeof(target), &major)) {
                respond_text(c, "400 Bad Request", "", "not an HTTP/1.x request\n");
                return;
        }
        /* HEAD: every reply's head alone, errors' included. */
        c->head_only = strcmp(method, "HEAD") == 0;
        if (major != 1) {
                respond_text(c, "505 HTTP Version Not Supported", "", "HTTP/1.x only\n");
                return;
        }
        target[strcspn(target, "?#")] = 0;
        if (strcmp(target, "/metrics") != 0) {
                respond_text(c, "404 Not Found", "", "not found; the metrics are at /metrics\n");
                return;
        }
        if (strcmp(method, "GET") != 0 && !c->head_only) {
                respond_text(c, "405 Method Not Allowed", "Allow: GET, HEAD\r\n", "only GET and HEAD\n");
                return;
        }
        char accept[1024];
        bool om = header(c->head, "Accept", accept, sizeof(accept)) && wants_openmetrics(accept);
        serve_metrics(sv, c, metrics_format_find(om ? "openmetrics" : "prometheus"));
}

/* Where the head ends in buf[0, n): the length up to and with the last
 * header line's end (the blank line left out), or 0 while there is no
 * blank line yet. */
static size_t head_end(const char *buf, size_t n) {
        const char *crlf = memmem(buf, n, "\r\n\r\n", 4), *lf = memmem(buf, n, "\n\n", 2);
        if (crlf && (!lf || crlf < lf))
                return (size_t)(crlf - buf) + 2;
        return lf ? (size_t)(lf - buf) + 1 : 0;
}

/* ------------------------------------------------------------ the loop */

static void conn_read(struct server *sv, struct conn *c) {
        ssize_t r = recv(c->fd, c->head + c->n, REQUEST_MAX - c->n, MSG_DONTWAIT);
        if (r < 0 && (errno == EINTR || errno == EAGAIN))
                return;
        if (r <= 0) { /* gone before a whole head: nothing to answer */
                conn_close(c);
                return;
        }
        c->n += (size_t)r;
        size_t end = head_end(c->head, c->n);
        if (memchr(c->head, 0, end ? end : c->n)) {
                respond_text(c, "400 Bad Request", "", "a NUL byte in the request\n");
                return;
        }
        if (!end) {
                if (c->n == REQUEST_MAX)
                        respond_text(c, "431 Request Header Fields Too Large", "", "request too large\n");
                return;
        }
        c->head[end] = 0;
        serve(sv, c);
}

static void conn_write(struct conn *c) {
        ssize_t w = send(c->fd, c->out + c->out_done, c->out_len - c->out_done, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (w < 0 && (errno == EINTR || errno == EAGAIN))
                return;
        if (w <= 0) {
                conn_close(c);
                return;
        }
        c->out_done += (size_t)w;
        if (c->out_done < c->out_len)
                return;
        free(c->out);
        c->out = NULL;
        shutdown(c->fd, SHUT_WR);
        c->state = CONN_DRAINING;
        c->drained = 0;
        c->deadline = clock_now_ms() + DRAIN_MS;
}

static void conn_drain(struct conn *c) {
        char buf[4096];
        ssize_t r = recv(c->fd, buf, sizeof(buf), MSG_DONTWAIT);
        if (r < 0 && (errno == EINTR || errno == EAGAIN))
                return;
        if (r <= 0 || (c->drained += (size_t)r) >= DRAIN_MAX)
                conn_close(c);
}

/* A slot for a new connection: a free one, else the oldest draining one,
 * else the oldest still sending its request, else the oldest of all;
 * that one is closed. */
static struct conn *conn_slot(struct server *sv) {
        static const enum conn_state order[] = { CONN_FREE, CONN_DRAINING, CONN_READING, CONN_WRITING };
        for (size_t k = 0; k < sizeof(order) / sizeof(order[0]); k++) {
                struct conn *best = NULL;
                for (size_t i = 0; i < MAX_CONNS; i++) {
                        struct conn *c = &sv->conns[i];
                        if (c->state == order[k] && (!best || c->seq < best->seq))
                                best = c;
                }
                if (best) {
                        if (best->state != CONN_FREE)
                                conn_close(best);
                        return best;
                }
        }
        return NULL; /* not reached: every state is in order[] */
}

/* Accept what waits (at most MAX_CONNS at a time). */
static void accept_some(struct server *sv, int lfd) {
        for (unsigned k = 0; k < MAX_CONNS; k++) {
                int fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
                if (fd < 0) {
                        if (errno == EAGAIN || errno == EINTR || errno == ECONNABORTED)
                                return;
                        /* EMFILE and the like: pass, don't spin. */
                        ctl_error(-errno, "accept: %s", strerror(errno));
                        struct timespec ts = { 0, 100 * 1000 * 1000 };
                        nanosleep(&ts, NULL);
                        return;
                }
                struct conn *c = conn_slot(sv);
                if (!c) {
                        close(fd);
                        return;
                }
                c->fd = fd;
                c->state = CONN_READING;
                c->seq = sv->accepted++;
                c->n = 0;
                c->head_only = false;
                c->deadline = clock_now_ms() + IO_TIMEOUT_MS;
        }
}

static void serve_loop(struct server *sv, int lfd, int stop_fd) {
        while (!stop_signal) {
                struct pollfd p[2 + MAX_CONNS];
                size_t idx[MAX_CONNS], np = 2;
                p[0] = (struct pollfd){ .fd = stop_fd, .events = POLLIN };
                p[1] = (struct pollfd){ .fd = lfd, .events = POLLIN };
                int64_t now = clock_now_ms(), first = INT64_MAX;
                for (size_t i = 0; i < MAX_CONNS; i++) {
                        struct conn *c = &sv->conns[i];
                        if (c->state == CONN_FREE)
                                continue;
                        p[np] = (struct pollfd){ .fd = c->fd,
                                                 .events = c->state == CONN_WRITING ? POLLOUT : POLLIN };
                        idx[np++ - 2] = i;
                        if (c->deadline < first)
                                first = c->deadline;
                }
                int timeout = first == INT64_MAX ? -1 : first <= now ? 0 : (int)(first - now);
                if (poll(p, np, timeout) < 0 && errno != EINTR) {
                        ctl_error(-errno, "poll: %s", strerror(errno));
                        return;
                }
                if (stop_signal)
                        return;
                for (size_t k = 2; k < np; k++) {
                        struct conn *c = &sv->conns[idx[k - 2]];
                        if (!p[k].revents)
                                continue;
                        if (c->state == CONN_READING)
                                conn_read(sv, c);
                        else if (c->state == CONN_WRITING)
                                conn_write(c);
                        else if (c->state == CONN_DRAINING)
                                conn_drain(c);
                }
                /* Too slow to send its request, to take its reply or to
                 * stop sending: closed (a read that timed out, no drain). */
                now = clock_now_ms();
                for (size_t i = 0; i < MAX_CONNS; i++)
                        if (sv->conns[i].state != CONN_FREE && sv->conns[i].deadline <= now)
                                conn_close(&sv->conns[i]);
                if (p[1].revents & POLLIN)
                        accept_some(sv, lfd);
        }
}

/* Serve on lfd (listen_on()'s, closed here) until SIGTERM or SIGINT: 0
 * after a signal, or a negative errno when it cannot (said). */
static int exporter_run(const char *path, int lfd, bool per_uid) {
        int sp[2];
        struct server *sv = calloc(1, sizeof(*sv));
        if (!sv || pipe2(sp, O_CLOEXEC | O_NONBLOCK) < 0 || fcntl(lfd, F_SETFL, O_NONBLOCK) < 0) {
                int err = sv ? -errno : -ENOMEM;
                free(sv);
                close(lfd);
                return ctl_error(err, "cannot serve: %s", strerror(-err));
        }
        sv->path = path;
        sv->per_uid = per_uid;
        stop_pipe = sp[1];
        struct sigaction sa = { .sa_handler = on_stop };
        sigemptyset(&sa.sa_mask);
        sigaction(SIGTERM, &sa, NULL);
        sigaction(SIGINT, &sa, NULL);
        signal(SIGPIPE, SIG_IGN);
        /* The address as bound (port 0: the one the kernel chose). */
        struct sockaddr_storage ss;
        socklen_t sl = sizeof(ss);
        char host[NI_MAXHOST] = "?", port[NI_MAXSERV] = "?";
        if (getsockname(lfd, (struct sockaddr *)&ss, &sl) == 0)
                getnameinfo((struct sockaddr *)&ss, sl, host, sizeof(host), port, sizeof(port),
                            NI_NUMERICHOST | NI_NUMERICSERV);
        bool v6 = ss.ss_family == AF_INET6;
        fprintf(stderr, "hbgctl: serving hbgd's metrics (%s) on http://%s%s%s:%s/metrics\n", path, v6 ? "[" : "", host,
                v6 ? "]" : "", port);
        serve_loop(sv, lfd, sp[0]);
        for (size_t i = 0; i < MAX_CONNS; i++)
                if (sv->conns[i].state != CONN_FREE)
                        conn_close(&sv->conns[i]);
        free(sv);
        stop_pipe = -1;
        close(sp[0]);
        close(sp[1]);
        close(lfd);
        return 0;
}

int cmd_metrics_listen(const struct ctl_opts *o) {
        if (o->metrics_format) { /* --format=help lists; a bad name is a usage error */
                const struct metrics_format *fmt;
                if (metrics_check_format(o->metrics_format, &fmt) < 0)
                        return EXIT_USAGE;
                if (!fmt)
                        return 0;
        }
        int lfd = listen_on(o->listen);
        if (lfd < 0) /* -EINVAL: not an address */
                return lfd == -EINVAL ? EXIT_USAGE : EXIT_FAIL;
        return exporter_run(o->socket, lfd, o->per_uid) < 0 ? EXIT_FAIL : 0;
}
