/* SPDX-License-Identifier: MIT */
/*
 * `hbgctl metrics` as Prometheus reads it, against a real hbgd
 * (docs/OPERATIONS.md, "Metrics"):
 *   prometheus --format=prometheus: Debian's promtool check metrics has
 *              nothing to say about it; counters' families carry _total,
 *              no UNIT, no EOF; the same samples as the OpenMetrics text.
 *   exporter   --listen 127.0.0.1:0: GET /metrics negotiated by Accept
 *              (OpenMetrics with the exporter's process_* families, or
 *              0.0.4), fresh values at each scrape, 404, 405, 400, 431,
 *              503 while hbgd is down, exit 0 on SIGTERM; no rows per uid
 *              without --per-uid; the request line exactly, a NUL, a head
 *              of 8 KiB with and without its end, a pipelined request.
 *   exporter_conns  idle connections hold up no scrape, the oldest idle
 *              ones dropped when all are taken; --per-uid; its start time
 *              with btime far into /proc/stat.
 *   listen_refused  --listen that is not ADDR:PORT: refused, exit 2.
 * The OpenMetrics text's counts: test_e2e_metrics.
 * $HBGCTL overrides the hbgctl binary (default: ../bin/hbgctl next to this
 * test).
 */
#include <check.h>
#include <sched.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <netinet/in.h>
#include <arpa/inet.h>
#include <time.h>
#include <unistd.h>

#include "hbg/hbg.h"
#include "tests/e2e/daemon_util.h"
#include "tests/e2e/e2e_util.h"
#include "tests/e2e/metrics_util.h"
#include "tests/check_main.h"

/* ------------------------------------------------------------ --format=prometheus */

/* `promtool check metrics` on text: its exit status, what it said in *ret_said. */
static int promtool_check(const char *text, char **ret_said) {
        FILE *in = tmpfile(), *o = tmpfile();
        ck_assert(in && o);
        ck_assert_uint_eq(fwrite(text, 1, strlen(text), in), strlen(text));
        fflush(in);
        lseek(fileno(in), 0, SEEK_SET);
        pid_t pid = fork();
        ck_assert_int_ge(pid, 0);
        if (pid == 0) {
                if (dup2(fileno(in), 0) < 0 || dup2(fileno(o), 1) < 0 || dup2(fileno(o), 2) < 0)
                        _exit(126);
                execlp("promtool", "promtool", "check", "metrics", (char *)NULL);
                _exit(127);
        }
        int st;
        ck_assert_int_eq(waitpid(pid, &st, 0), pid);
        *ret_said = slurp_fd(fileno(o));
        fclose(in);
        fclose(o);
        return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

/* Check text as Prometheus' 0.0.4 format the way hbgctl writes it: every
 * family has TYPE and HELP; a counter's family is named as its sample
 * (with _total); no UNIT, no EOF. Then promtool has nothing to say. */
static void check_prometheus_text(struct hbgd_proc *d, const char *text) {
        ck_assert_msg(!strstr(text, "# EOF") && !strstr(text, "# UNIT"), "OpenMetrics-only lines in 0.0.4 text");
        ck_assert_msg(strstr(text, "# TYPE hbg_graphs_submitted_total counter\n# HELP hbg_graphs_submitted_total ") &&
                              strstr(text, "\nhbg_graphs_submitted_total "),
                      "a counter's family is not named as its sample");
        ck_assert_msg(strstr(text, "# TYPE hbg_build_info gauge\n"), "0.0.4 has no info type: a gauge");
        char *said = NULL;
        int code = promtool_check(text, &said);
        D_ASSERT(d, code != 127, "promtool not found (Debian's prometheus package; make deps installs it)");
        D_ASSERT(d, code == 0 && said[0] == 0, "promtool check metrics: exit %d: %s", code, said);
        free(said);
}

/* --listen that is not ADDR:PORT, a port above 65535 included (which the
 * resolver would have cut to its low 16 bits): refused, exit 2. */
START_TEST(listen_refused) {
        struct hbgd_proc *d = start_hbgd(MODE_URING, NULL);
        static const char *const bad[] = { "127.0.0.1:99999", "127.0.0.1:65536", "127.0.0.1:80x",
                                           "127.0.0.1:+80", "127.0.0.1:", "9464" };
        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
                struct result r = ctl(d->socket_path, "metrics", "--listen", bad[i]);
                ck_assert_msg(r.code == 2 && strstr(r.err, "is not ADDR:PORT"), "--listen %s: exit %d, %s", bad[i],
                              r.code, r.err);
                result_free(&r);
        }
        stop_hbgd(d);
}
END_TEST

START_TEST(prometheus) {
        const char *const args[] = { "--threads", "2", NULL };
        struct hbgd_proc *d = start_hbgd(MODE_URING, args);
        hbg_client *c = NULL;
        int err = hbg_connect(&c, d->socket_path);
        D_ASSERT(d, err == 0, "hbg_connect: %s", hbg_strerror(err));
        hbg_tensor x;
        ck_assert_int_eq(hbg_tensor_alloc(c, 4 * sizeof(float), &x), 0);
        good_graphs(d, c, x, 3);
        hbg_task k = fail_task(-EIO);
        ck_assert_int_eq(hbg_graph_add(c, &k, NULL), 0);
        err = finish(d, c);
        D_ASSERT(d, err == -EIO, "the failing kernel's graph: %s", hbg_strerror(err));

        struct result r = ctl(d->socket_path, "metrics", "--format=prometheus");
        D_ASSERT(d, r.code == 0, "metrics --format=prometheus: exit %d: %s", r.code, r.err);
        check_prometheus_text(d, r.out);
        /* The same figures as the OpenMetrics text. */
        struct scrape *om = scrape(d);
        D_ASSERT(d, strstr(r.out, "\nhbg_graphs_retired_total 4\n") && value_of(om, "hbg_graphs_retired_total", "") == 4,
                 "graphs retired in both formats");
        D_ASSERT(d, strstr(r.out, "\nhbg_tasks_failed_total{errno=\"EIO\"} 1\n"), "tasks failed in 0.0.4");
        free(om);
        result_free(&r);
        /* An explicit --format=openmetrics is the default's text. */
        r = ctl(d->socket_path, "metrics", "--format=openmetrics");
        D_ASSERT(d, r.code == 0 && ends_with(r.out, "# EOF\n"), "metrics --format=openmetrics: exit %d", r.code);
        result_free(&r);
        r = ctl(d->socket_path, "metrics", "--format=json");
        ck_assert_int_eq(r.code, 2);
        ck_assert_msg(strstr(r.err, "openmetrics, prometheus"), "stderr: %s", r.err);
        result_free(&r);
        hbg_disconnect(c);
        stop_hbgd(d);
}
END_TEST

/* ------------------------------------------------------------ --listen */

/* hbgctl --socket sock metrics --listen 127.0.0.1:0 [--per-uid]: its
 * pid; the port it says it bound in *ret_port. With fake_stat, the
 * exporter runs in its own mount namespace with that file over
 * /proc/stat. */
static pid_t start_exporter(const char *sock, bool per_uid, const char *fake_stat, int *ret_port) {
        int p[2];
        ck_assert_int_eq(pipe2(p, O_CLOEXEC), 0);
        pid_t pid = fork();
        ck_assert_int_ge(pid, 0);
        if (pid == 0) {
                /* Ended with this test, whatever way it ends. */
                if (dup2(p[1], 2) < 0 || prctl(PR_SET_PDEATHSIG, SIGKILL) < 0)
                        _exit(126);
                if (fake_stat && (unshare(CLONE_NEWNS) < 0 || mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0 ||
                                  mount(fake_stat, "/proc/stat", NULL, MS_BIND, NULL) < 0)) {
                        fprintf(stderr, "cannot put %s over /proc/stat: %s\n", fake_stat, strerror(errno));
                        _exit(125);
                }
                execl(hbgctl_bin, hbgctl_bin, "--socket", sock, "metrics", "--listen", "127.0.0.1:0",
                      per_uid ? "--per-uid" : (char *)NULL, (char *)NULL);
                _exit(127);
        }
        close(p[1]);
        char line[512];
        size_t n = 0;
        while (n < sizeof(line) - 1) {
                ssize_t r = read(p[0], line + n, 1);
                if (r <= 0 || line[n] == '\n')
                        break;
                n++;
        }
        line[n] = 0;
        close(p[0]); /* later lines (failed scrapes) get EPIPE: stderr only */
        const char *at = strstr(line, "http://127.0.0.1:");
        ck_assert_msg(at && sscanf(at, "http://127.0.0.1:%d/metrics", ret_port) == 1, "exporter said: %s", line);
        return pid;
}

struct http_reply {
        int status;
        char *head;      /* status line and headers */
        char *body;
};

/* A connection to 127.0.0.1:port. */
static int connect_to(int port) {
        int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        ck_assert_int_ge(fd, 0);
        struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port) };
        a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        ck_assert_int_eq(connect(fd, (struct sockaddr *)&a, sizeof(a)), 0);
        return fd;
}

/* Send len bytes of request to 127.0.0.1:port (the write side left
 * open), read the reply to the end (the exporter closes). */
static struct http_reply http_n(int port, const char *request, size_t len) {
        int fd = connect_to(port);
        ck_assert_int_eq(send(fd, request, len, MSG_NOSIGNAL), (ssize_t)len);
        char *all = slurp_fd(fd);
        close(fd);
        struct http_reply r = { 0 };
        char *split = strstr(all, "\r\n\r\n");
        ck_assert_msg(split && sscanf(all, "HTTP/1.1 %d ", &r.status) == 1, "not an HTTP reply: %s", all);
        *split = 0;
        r.head = all;
        r.body = strdup(split + 4);
        return r;
}

static struct http_reply http(int port, const char *request) {
        return http_n(port, request, strlen(request));
}

static void http_free(struct http_reply *r) {
        free(r->head);
        free(r->body);
}

#define PROM_ACCEPT                                                                                            \
        "application/openmetrics-text;version=1.0.0,application/openmetrics-text;version=0.0.1;q=0.75,"      \
        "text/plain;version=0.0.4;q=0.5,*/*;q=0.1"

START_TEST(exporter) {
        struct hbgd_proc *d = start_hbgd(MODE_URING, NULL);
        int port;
        pid_t exp = start_exporter(d->socket_path, false, NULL, &port);

        /* As Prometheus asks: OpenMetrics, with the exporter's process. */
        struct http_reply r = http(port, "GET /metrics HTTP/1.1\r\nHost: x\r\nAccept: " PROM_ACCEPT "\r\n\r\n");
        D_ASSERT(d, r.status == 200, "status %d", r.status);
        D_ASSERT(d, strstr(r.head, "\r\nContent-Type: application/openmetrics-text; version=1.0.0; charset=utf-8"),
                 "head: %s", r.head);
        struct scrape *sc = malloc(sizeof(*sc));
        ck_assert_ptr_nonnull(sc);
        parse_openmetrics(r.body, sc);
        D_ASSERT(d, value_of(sc, "process_open_fds", "") >= 3 && value_of(sc, "process_resident_memory_bytes", "") > 0 &&
                            value_of(sc, "process_virtual_memory_bytes", "") >=
                                    value_of(sc, "process_resident_memory_bytes", "") &&
                            value_of(sc, "process_cpu_seconds_total", "") >= 0,
                 "the exporter's process_* families");
        D_ASSERT(d, value_of(sc, "hbg_sessions_opened_total", "") == 0, "sessions opened");
        http_free(&r);

        /* Fresh at each scrape: a session opened in between shows. */
        hbg_client *c = NULL;
        int err = hbg_connect(&c, d->socket_path);
        D_ASSERT(d, err == 0, "hbg_connect: %s", hbg_strerror(err));
        r = http(port, "GET /metrics?x=1 HTTP/1.1\r\nHost: x\r\nAccept: application/openmetrics-text\r\n\r\n");
        D_ASSERT(d, r.status == 200, "status %d", r.status);
        parse_openmetrics(r.body, sc);
        D_ASSERT(d, value_of(sc, "hbg_sessions_opened_total", "") == 1 && value_of(sc, "hbg_sessions", "") == 1,
                 "a second scrape without the session opened since");
        /* Whoever reaches the port: no rows per uid without --per-uid;
         * the budget per uid (a setting, no uid in it) is served. */
        D_ASSERT(d, !strstr(r.body, "uid=\"") && !strstr(r.body, "hbg_user_memory_charged") &&
                            !strstr(r.body, "hbg_user_sessions") && value_of(sc, "hbg_memory_charged_bytes", "") > 0,
                 "rows per uid served without --per-uid");
        D_ASSERT(d, value_of(sc, "hbg_user_memory_limit_bytes", "") > 0, "no hbg_user_memory_limit_bytes");
        http_free(&r);
        hbg_disconnect(c);

        /* No Accept, or one ranking text/plain higher: text 0.0.4. */
        const char *plain[] = { "GET /metrics HTTP/1.1\r\n\r\n",
                                "GET /metrics HTTP/1.0\r\naccept: text/plain;q=0.9, application/openmetrics-text;q=0.5\r\n\r\n",
                                "GET /metrics HTTP/1.1\r\nAccept: application/openmetrics-text;q=0\r\n\r\n" };
        for (size_t i = 0; i < sizeof(plain) / sizeof(plain[0]); i++) {
                r = http(port, plain[i]);
                D_ASSERT(d, r.status == 200 && strstr(r.head, "\r\nContent-Type: text/plain; version=0.0.4; charset=utf-8"),
                         "request %zu: %d %s", i, r.status, r.head);
                check_prometheus_text(d, r.body);
                D_ASSERT(d, strstr(r.body, "\nprocess_open_fds "), "request %zu: no process_open_fds", i);
                http_free(&r);
        }

        /* HEAD: GET's head, with its Content-Length, and no body. */
        r = http(port, "HEAD /metrics HTTP/1.1\r\n\r\n");
        const char *cl = strstr(r.head, "\r\nContent-Length: ");
        D_ASSERT(d, r.status == 200 && strstr(r.head, "\r\nContent-Type: text/plain; version=0.0.4") && cl &&
                            strtoull(cl + 18, NULL, 10) > 1000 && r.body[0] == 0,
                 "HEAD: %d %s [body %zu bytes]", r.status, r.head, strlen(r.body));
        http_free(&r);
        r = http(port, "HEAD /nothing HTTP/1.1\r\n\r\n");
        D_ASSERT(d, r.status == 404 && r.body[0] == 0, "HEAD of another path: %d [body %zu bytes]", r.status,
                 strlen(r.body));
        http_free(&r);

        /* What else it answers. */
        static const struct {
                const char *request;
                int status;
        } other[] = {
                { "GET / HTTP/1.1\r\n\r\n", 404 },
                { "GET /metricsx HTTP/1.1\r\n\r\n", 404 },
                { "POST /metrics HTTP/1.1\r\nContent-Length: 0\r\n\r\n", 405 },
                { "DELETE /metrics HTTP/1.1\r\n\r\n", 405 },
                { "hello\r\n\r\n", 400 },
                { "GET /metrics SPDY/3\r\n\r\n", 400 },
                /* Exactly METHOD SP TARGET SP HTTP/x.y. */
                { "GET\t/metrics HTTP/1.1\r\n\r\n", 400 },
                { "GET  /metrics HTTP/1.1\r\n\r\n", 400 },
                { "GET /metrics HTTP/1.1 x\r\n\r\n", 400 },
                { "GET /metrics HTTP/1.x\r\n\r\n", 400 },
                { "GET /metrics HTTP/1.10\r\n\r\n", 400 },
                { " GET /metrics HTTP/1.1\r\n\r\n", 400 },
                { "GET /metrics HTTP/2.0\r\n\r\n", 505 },
        };
        for (size_t i = 0; i < sizeof(other) / sizeof(other[0]); i++) {
                r = http(port, other[i].request);
                D_ASSERT(d, r.status == other[i].status, "request %zu: %d, not %d", i, r.status, other[i].status);
                http_free(&r);
        }
        /* A head larger than the exporter reads: 431, and it serves on. */
        size_t big = 16384;
        char *huge = malloc(big + 64);
        ck_assert_ptr_nonnull(huge);
        int n = snprintf(huge, big + 64, "GET /metrics HTTP/1.1\r\nX-Big: ");
        memset(huge + n, 'a', big - (size_t)n);
        snprintf(huge + big, 64, "\r\n\r\n");
        r = http(port, huge);
        D_ASSERT(d, r.status == 431, "a huge request: %d", r.status);
        http_free(&r);
        /* A head of exactly 8 KiB, blank line included, is read whole; 8
         * KiB without its end is too large at once (the exporter waits
         * for no more). */
        const size_t max = 8192;
        n = snprintf(huge, big, "GET /metrics HTTP/1.1\r\nX-Big: ");
        memset(huge + n, 'a', max - (size_t)n - 4);
        memcpy(huge + max - 4, "\r\n\r\n", 4);
        r = http_n(port, huge, max);
        D_ASSERT(d, r.status == 200, "a head of 8 KiB: %d", r.status);
        http_free(&r);
        huge[max - 4] = 'a';
        r = http_n(port, huge, max);
        D_ASSERT(d, r.status == 431, "8 KiB and no end of the head: %d", r.status);
        http_free(&r);
        free(huge);
        /* A NUL in the head: 400 at once. */
        static const char nul[] = "GET /metrics HTTP/1.1\r\nX-A: a\0b\r\n\r\n";
        r = http_n(port, nul, sizeof(nul) - 1);
        D_ASSERT(d, r.status == 400, "a NUL in the head: %d", r.status);
        http_free(&r);
        /* Only the first request's head counts: a pipelined second one
         * asking for OpenMetrics changes nothing. */
        r = http(port, "GET /metrics HTTP/1.1\r\n\r\nGET /metrics HTTP/1.1\r\nAccept: application/openmetrics-text\r\n\r\n");
        D_ASSERT(d, r.status == 200 && strstr(r.head, "\r\nContent-Type: text/plain; version=0.0.4;"),
                 "a pipelined request: %d %s", r.status, r.head);
        http_free(&r);

        /* hbgd gone: 503 with the reason, until it is back. */
        char sock[sizeof(d->socket_path)];
        snprintf(sock, sizeof(sock), "%s", d->socket_path);
        stop_hbgd(d);
        r = http(port, "GET /metrics HTTP/1.1\r\n\r\n");
        ck_assert_msg(r.status == 503 && strstr(r.body, "did not answer"), "hbgd down: %d %s", r.status, r.body);
        http_free(&r);

        /* SIGTERM: exit 0. */
        ck_assert_int_eq(kill(exp, SIGTERM), 0);
        int st;
        ck_assert_int_eq(waitpid(exp, &st, 0), exp);
        ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "exporter exit status %#x", st);
        free(sc);
}
END_TEST

/* Is fd still open at the other end (nothing to read, no EOF)? */
static bool still_open(int fd) {
        char b;
        ssize_t r = recv(fd, &b, 1, MSG_DONTWAIT);
        return r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK);
}

#define EXPORTER_CONNS 16 /* MAX_CONNS of ctl/exporter.c */

/*
 * Connections that send half a request line and wait hold up no scrape:
 * with 3 of them open the scrape is answered while they are all still
 * open (the exporter has closed none of them for its read deadline yet);
 * with more than the exporter serves at once, each new connection drops
 * the oldest idle one, and the rest stay open. Then --per-uid serves the
 * rows per uid, and an exporter that finds btime past the first 4 KiB of
 * /proc/stat knows its start time.
 */
START_TEST(exporter_conns) {
        struct hbgd_proc *d = start_hbgd(MODE_URING, NULL);
        int port;
        pid_t exp = start_exporter(d->socket_path, false, NULL, &port);
        int idle[EXPORTER_CONNS + 2];
        for (unsigned i = 0; i < 3; i++) {
                idle[i] = connect_to(port);
                ck_assert_int_eq(send(idle[i], "GET /metrics HTTP/1.1\r\n", 23, MSG_NOSIGNAL), 23);
        }
        struct http_reply r = http(port, "GET /metrics HTTP/1.1\r\n\r\n");
        D_ASSERT(d, r.status == 200, "a scrape beside 3 idle connections: %d", r.status);
        http_free(&r);
        for (unsigned i = 0; i < 3; i++)
                D_ASSERT(d, still_open(idle[i]), "idle connection %u closed before the scrape was answered", i);
        /* Two more than it takes: the three oldest make room for the two
         * and the scrape. */
        for (unsigned i = 3; i < EXPORTER_CONNS + 2; i++) {
                idle[i] = connect_to(port);
                ck_assert_int_eq(send(idle[i], "GET /", 5, MSG_NOSIGNAL), 5);
        }
        r = http(port, "GET /metrics HTTP/1.1\r\n\r\n");
        D_ASSERT(d, r.status == 200, "a scrape beside %u idle connections: %d", EXPORTER_CONNS + 2, r.status);
        http_free(&r);
        for (unsigned i = 0; i < EXPORTER_CONNS + 2; i++) {
                D_ASSERT(d, still_open(idle[i]) == (i >= 3), "idle connection %u: %s", i,
                         i >= 3 ? "closed" : "still open");
                close(idle[i]);
        }
        ck_assert_int_eq(kill(exp, SIGTERM), 0);
        int st;
        ck_assert_int_eq(waitpid(exp, &st, 0), exp);
        ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "exporter exit status %#x", st);

        /* --per-uid: this uid's rows, with a session open. A /proc/stat
         * with btime after 300 more cpu lines. */
        char fake[] = "/tmp/hbg-test-stat-XXXXXX";
        int fd = mkstemp(fake);
        ck_assert_int_ge(fd, 0);
        FILE *in = fopen("/proc/stat", "re"), *out = fdopen(fd, "w");
        ck_assert(in && out);
        char line[4096];
        while (fgets(line, sizeof(line), in)) {
                if (strncmp(line, "btime ", 6) == 0)
                        for (unsigned i = 0; i < 300; i++)
                                fprintf(out, "cpu%u 1000 20 300 400000 50 0 6 0 0 0\n", 1000 + i);
                fputs(line, out);
        }
        fclose(in);
        ck_assert_int_eq(fclose(out), 0);
        exp = start_exporter(d->socket_path, true, fake, &port);
        hbg_client *c = NULL;
        int err = hbg_connect(&c, d->socket_path);
        D_ASSERT(d, err == 0, "hbg_connect: %s", hbg_strerror(err));
        r = http(port, "GET /metrics HTTP/1.1\r\nAccept: application/openmetrics-text\r\n\r\n");
        D_ASSERT(d, r.status == 200, "status %d", r.status);
        struct scrape *sc = malloc(sizeof(*sc));
        ck_assert_ptr_nonnull(sc);
        parse_openmetrics(r.body, sc);
        char uid[32];
        snprintf(uid, sizeof(uid), "uid=\"%u\"", (unsigned)geteuid());
        D_ASSERT(d, value_of(sc, "hbg_user_sessions", uid) == 1 && value_of(sc, "hbg_user_memory_charged_bytes", uid) > 0,
                 "--per-uid: no rows of %s", uid);
        double started = value_of(sc, "process_start_time_seconds", ""), now = (double)time(NULL);
        D_ASSERT(d, started > now - 3600 && started <= now + 1, "the exporter started at %f, now is %f", started, now);
        http_free(&r);
        free(sc);
        hbg_disconnect(c);
        ck_assert_int_eq(kill(exp, SIGTERM), 0);
        ck_assert_int_eq(waitpid(exp, &st, 0), exp);
        ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "exporter exit status %#x", st);
        unlink(fake);
        stop_hbgd(d);
}
END_TEST

static Suite *suite(void) {
        Suite *s = suite_create("e2e_exporter");
        TCase *tc = tcase_create("exporter");
        tcase_set_timeout(tc, 120);
        tcase_add_test(tc, listen_refused);
        tcase_add_test(tc, prometheus);
        tcase_add_test(tc, exporter);
        tcase_add_test(tc, exporter_conns);
        suite_add_tcase(s, tc);
        return s;
}

static int setup(void) {
        return hbgctl_util_setup();
}

const struct check_main check_main = {
        .suite = suite,
        .ignore_sigpipe = true,
        .setup = setup,
        .teardown = daemon_util_cleanup,
};
