/* SPDX-License-Identifier: MIT */
/*
 * `hbgctl metrics --listen ADDR:PORT`: a Prometheus exporter for hbgd
 * (docs/OPERATIONS.md, "Metrics"). A separate, unprivileged process: hbgd
 * itself has no HTTP listener; this one is hbgd's client like any
 * `hbgctl metrics`, asking for fresh values at every scrape.
 *
 * A small HTTP/1.1 server for one client at a time (a scraper): one
 * request per connection (answered with Connection: close), at most
 * REQUEST_MAX bytes of request line and headers, read within
 * IO_TIMEOUT_MS in all and written within the same, else the connection
 * is dropped (then up to DRAIN_MS more to read what the client still
 * sends before the close). GET /metrics (a query string is ignored) answers the
 * metrics in the format the Accept header prefers (OpenMetrics when it
 * ranks application/openmetrics-text at least as high as what else it
 * takes, else text 0.0.4); other paths 404, other methods 405, a request
 * that is not HTTP 400, one too large 431. hbgd not answering: 503 with
 * the reason; Prometheus then records up 0 for the target.
 */
#include "ctl/exporter.h"

#include <arpa/inet.h>
#include <errno.h>
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
#include "ctl/error.h"
#include "ctl/metrics.h"

#define REQUEST_MAX 8192
#define IO_TIMEOUT_MS 5000

static volatile sig_atomic_t stop_signal;

static void on_stop(int sig) {
        stop_signal = sig;
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
                     bind(fd, ai->ai_addr, ai->ai_addrlen) < 0 || listen(fd, 16) < 0))
                err = -errno;
        freeaddrinfo(ai);
        if (err) {
                if (fd >= 0)
                        close(fd);
                return ctl_error(err, "--listen %s: %s", spec, strerror(-err));
        }
        return fd;
}

/* ------------------------------------------------------------ one request */

/* Read the request's head (up to the blank line) into buf within the
 * deadline. Its length, 0 if the peer closed or was too slow, -E2BIG if
 * it does not fit. */
static ssize_t read_head(int fd, char *buf, size_t size, int64_t deadline) {
        size_t n = 0;
        for (;;) {
                int64_t left = deadline - clock_now_ms();
                struct pollfd p = { .fd = fd, .events = POLLIN };
                if (left <= 0 || poll(&p, 1, (int)left) <= 0)
                        return 0;
                if (n == size - 1)
                        return -E2BIG;
                ssize_t r = recv(fd, buf + n, size - 1 - n, 0);
                if (r < 0 && errno == EINTR)
                        continue;
                if (r <= 0)
                        return 0;
                n += (size_t)r;
                buf[n] = 0;
                if (strstr(buf, "\r\n\r\n") || strstr(buf, "\n\n"))
                        return (ssize_t)n;
        }
}

/* Write all of data within the deadline; false if the peer went away or
 * was too slow. */
static bool write_all(int fd, const char *data, size_t len, int64_t deadline) {
        while (len) {
                int64_t left = deadline - clock_now_ms();
                struct pollfd p = { .fd = fd, .events = POLLOUT };
                if (left <= 0 || poll(&p, 1, (int)left) <= 0)
                        return false;
                ssize_t w = send(fd, data, len, MSG_NOSIGNAL | MSG_DONTWAIT);
                if (w < 0 && (errno == EINTR || errno == EAGAIN))
                        continue;
                if (w <= 0)
                        return false;
                data += w;
                len -= (size_t)w;
        }
        return true;
}

static void respond(int fd, int64_t deadline, const char *status, const char *type, const char *extra,
                    const char *body, size_t len) {
        char head[512];
        int n = snprintf(head, sizeof(head),
                         "HTTP/1.1 %s\r\nContent-Type: %s\r\nContent-Length: %zu\r\n%sConnection: close\r\n\r\n",
                         status, type, len, extra);
        if (n > 0 && (size_t)n < sizeof(head) && write_all(fd, head, (size_t)n, deadline))
                write_all(fd, body, len, deadline);
}

static void respond_text(int fd, int64_t deadline, const char *status, const char *extra, const char *msg) {
        respond(fd, deadline, status, "text/plain; charset=utf-8", extra, msg, strlen(msg));
}

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
static void serve_metrics(int fd, int64_t deadline, const char *path, const struct metrics_format *fmt) {
        Hbg__Envelope *reply = NULL;
        int rc = metrics_fetch(path, &reply);
        if (rc) {
                char msg[160];
                snprintf(msg, sizeof(msg), "hbgd at %s did not answer (hbgctl exit status %d); see the exporter's log\n",
                         path, rc);
                respond_text(fd, deadline, "503 Service Unavailable", "", msg);
                return;
        }
        struct procstat self;
        procstat_self(&self);
        char *text = NULL;
        size_t len = 0;
        FILE *out = open_memstream(&text, &len);
        int err = out ? metrics_write(out, reply->status_reply, &self, fmt) : -ENOMEM;
        wire_free(reply);
        if (out && fclose(out) != 0 && !err)
                err = -ENOMEM;
        if (err) {
                ctl_error(err, "%s", err == -EPROTO ? "malformed metrics from hbgd" : "out of memory");
                respond_text(fd, deadline, "500 Internal Server Error", "", "malformed metrics from hbgd\n");
        } else {
                respond(fd, deadline, "200 OK", fmt->media_type, "", text, len);
        }
        free(text);
}

static void serve(int fd, const char *path) {
        int64_t deadline = clock_now_ms() + IO_TIMEOUT_MS;
        char head[REQUEST_MAX];
        ssize_t n = read_head(fd, head, sizeof(head), deadline);
        if (n == -E2BIG) {
                respond_text(fd, deadline, "431 Request Header Fields Too Large", "", "request too large\n");
                return;
        }
        if (n <= 0)
                return;
        char method[16], target[1024], version[16];
        if (sscanf(head, "%15[A-Z] %1023[^ \r\n] %15[^ \r\n]", method, target, version) != 3 ||
            strncmp(version, "HTTP/1.", 7) != 0) {
                respond_text(fd, deadline, "400 Bad Request", "", "not an HTTP/1.x request\n");
                return;
        }
        target[strcspn(target, "?#")] = 0;
        if (strcmp(target, "/metrics") != 0) {
                respond_text(fd, deadline, "404 Not Found", "", "not found; the metrics are at /metrics\n");
                return;
        }
        if (strcmp(method, "GET") != 0) {
                respond_text(fd, deadline, "405 Method Not Allowed", "Allow: GET\r\n", "only GET\n");
                return;
        }
        char accept[1024];
        bool om = header(head, "Accept", accept, sizeof(accept)) && wants_openmetrics(accept);
        serve_metrics(fd, deadline, path, metrics_format_find(om ? "openmetrics" : "prometheus"));
}

/* Close after the reply: first read what the client still sends (a
 * request we refused unread), for at most DRAIN_MS and DRAIN_MAX bytes,
 * else closing with unread data resets the connection and the client may
 * lose the reply. */
#define DRAIN_MS 1000
#define DRAIN_MAX (64 * 1024)
static void linger_close(int fd) {
        shutdown(fd, SHUT_WR);
        int64_t deadline = clock_now_ms() + DRAIN_MS;
        char buf[4096];
        for (size_t total = 0; total < DRAIN_MAX;) {
                int64_t left = deadline - clock_now_ms();
                struct pollfd p = { .fd = fd, .events = POLLIN };
                if (left <= 0 || poll(&p, 1, (int)left) <= 0)
                        break;
                ssize_t r = recv(fd, buf, sizeof(buf), MSG_DONTWAIT);
                if (r < 0 && (errno == EINTR || errno == EAGAIN))
                        continue;
                if (r <= 0)
                        break;
                total += (size_t)r;
        }
        close(fd);
}

int exporter_run(const char *path, const char *listen) {
        int lfd = listen_on(listen);
        if (lfd < 0)
                return lfd == -EINVAL ? EXIT_USAGE : EXIT_FAIL;
        /* No SA_RESTART: a signal ends the wait in accept(). */
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
        while (!stop_signal) {
                int fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
                if (fd < 0) {
                        if (errno == EINTR || errno == ECONNABORTED)
                                continue;
                        /* EMFILE and the like: pass, don't spin. */
                        ctl_error(-errno, "accept: %s", strerror(errno));
                        struct timespec ts = { 0, 100 * 1000 * 1000 };
                        nanosleep(&ts, NULL);
                        continue;
                }
                serve(fd, path);
                linger_close(fd);
        }
        close(lfd);
        return 0;
}
