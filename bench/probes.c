/* SPDX-License-Identifier: MIT */
/* Measurements that are not graph runs (bench/probes.h). */
#include "bench/probes.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "bench/bench_util.h"
#include <hbg/hbg.h>

/* One record of len bytes (an eventfd's count, a pipe's record written
 * whole), or -errno (-EIO: a short one). */
static int read_record(int fd, void *buf, size_t len) {
        for (;;) {
                ssize_t n = read(fd, buf, len);
                if (n == (ssize_t)len)
                        return 0;
                if (n < 0 && errno == EINTR)
                        continue;
                return n < 0 ? -errno : -EIO;
        }
}

static int read_full(int fd, uint64_t *v) {
        return read_record(fd, v, sizeof(*v));
}

int probe_eventfd_pingpong(unsigned rounds, unsigned idle_us, double *ret_ns) {
        int ping = eventfd(0, EFD_CLOEXEC), pong = eventfd(0, EFD_CLOEXEC);
        if (ping < 0 || pong < 0) {
                int err = -errno;
                if (ping >= 0)
                        close(ping);
                return err;
        }
        fflush(NULL);
        pid_t pid = fork();
        if (pid < 0) {
                int err = -errno;
                close(ping), close(pong);
                return err;
        }
        if (pid == 0) {
                uint64_t v;
                for (unsigned r = 0; r < rounds; r++)
                        if (read_full(ping, &v) < 0 || write(pong, &v, sizeof(v)) != sizeof(v))
                                _exit(1);
                _exit(0);
        }
        int err = 0;
        for (unsigned r = 0; r < rounds && err == 0; r++) {
                if (idle_us) {
                        struct timespec ts = { .tv_sec = idle_us / 1000000,
                                               .tv_nsec = (long)(idle_us % 1000000) * 1000 };
                        nanosleep(&ts, NULL);
                }
                uint64_t one = 1, v;
                int64_t t0 = bench_now_ns();
                if (write(ping, &one, sizeof(one)) != sizeof(one))
                        err = -EIO;
                else
                        err = read_full(pong, &v);
                ret_ns[r] = (double)(bench_now_ns() - t0);
        }
        if (err < 0)
                kill(pid, SIGKILL);
        int st;
        waitpid(pid, &st, 0);
        close(ping);
        close(pong);
        if (err == 0 && (!WIFEXITED(st) || WEXITSTATUS(st) != 0))
                err = -EIO;
        return err;
}

/* A producer's record after its disconnect, with hold. */
#define CONNECT_BURST_GONE UINT64_MAX

/* What a producer of a burst sends per connect: one write, so that the
 * producers' records never interleave (PIPE_BUF). */
struct connect_record {
        uint64_t ns;     /* hbg_connect()'s time, 0 when it failed; or GONE */
        uint64_t cpu_ns; /* the process's CPU time in it, kernel included */
};

static int64_t process_cpu_ns(void) {
        struct timespec t;
        clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
        return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}

/* One producer of a burst: per round, wait for the go byte, connect,
 * report the time and CPU time (a time of 0 when the connect failed),
 * then disconnect: at once, or (release >= 0) once the round's release
 * byte says every producer of the burst has connected. */
static void connect_burst_child(const char *socket, int go, int release, int results, unsigned rounds) {
        for (unsigned r = 0; r < rounds; r++) {
                char b;
                if (read(go, &b, 1) != 1)
                        _exit(1);
                hbg_client *c = NULL;
                int64_t cpu0 = process_cpu_ns();
                int64_t t0 = bench_now_ns();
                int err = hbg_connect(&c, socket);
                struct connect_record rec = { .ns = err < 0 ? 0 : (uint64_t)(bench_now_ns() - t0),
                                              .cpu_ns = (uint64_t)(process_cpu_ns() - cpu0) };
                if (err < 0)
                        fprintf(stderr, "hbg-bench: connect burst: hbg_connect: %s (%s)\n", hbg_strerror(err),
                                hbg_last_error(NULL));
                if (write(results, &rec, sizeof(rec)) != sizeof(rec))
                        _exit(1);
                if (release >= 0 && read(release, &b, 1) != 1)
                        _exit(1);
                if (err == 0)
                        hbg_disconnect(c);
                /* Disconnected: the next round's bytes are not taken
                 * before every producer has its own (CONNECT_BURST_GONE). */
                struct connect_record gone = { .ns = CONNECT_BURST_GONE };
                if (release >= 0 && write(results, &gone, sizeof(gone)) != sizeof(gone))
                        _exit(1);
        }
        _exit(0);
}

int probe_connect_burst(const char *socket, unsigned producers, unsigned rounds, bool hold, double *ret_ns,
                        double *ret_cpu_ns) {
        /* go, release and results: [0] read end, [1] write end. */
        int go[2], release[2] = { -1, -1 }, results[2];
        pid_t pids[64];
        unsigned started = 0;
        int err = 0;
        if (producers == 0 || producers > 64)
                return -EINVAL;
        if (pipe2(go, O_CLOEXEC) < 0)
                return -errno;
        if (hold && pipe2(release, O_CLOEXEC) < 0) {
                err = -errno;
                close(go[0]), close(go[1]);
                return err;
        }
        if (pipe2(results, O_CLOEXEC) < 0) {
                err = -errno;
                close(go[0]), close(go[1]);
                if (hold)
                        close(release[0]), close(release[1]);
                return err;
        }
        fflush(NULL);
        for (; started < producers; started++) {
                pid_t pid = fork();
                if (pid < 0) {
                        err = -errno;
                        break;
                }
                if (pid == 0) {
                        close(go[1]);
                        close(results[0]);
                        if (hold)
                                close(release[1]);
                        connect_burst_child(socket, go[0], release[0], results[1], rounds);
                }
                pids[started] = pid;
        }
        close(go[0]);
        close(results[1]);
        if (hold)
                close(release[0]);
        char bytes[64];
        memset(bytes, 'g', sizeof(bytes));
        for (unsigned r = 0; r < rounds && err == 0; r++) {
                /* From an hbgd at rest: the last burst's sessions released
                 * (their hang-ups are read asynchronously; without a pause
                 * max_sessions may refuse the next burst). */
                struct timespec rest = { .tv_nsec = 20 * 1000000L };
                nanosleep(&rest, NULL);
                if (write(go[1], bytes, producers) != (ssize_t)producers) {
                        err = -EIO;
                        break;
                }
                for (unsigned i = 0; i < producers && err == 0; i++) {
                        struct connect_record rec;
                        if ((err = read_record(results[0], &rec, sizeof(rec))) < 0)
                                break;
                        if (rec.ns == 0 || rec.ns == CONNECT_BURST_GONE)
                                err = -EIO;
                        ret_ns[r * producers + i] = (double)rec.ns;
                        ret_cpu_ns[r * producers + i] = (double)rec.cpu_ns;
                }
                if (err == 0 && hold && write(release[1], bytes, producers) != (ssize_t)producers)
                        err = -EIO;
                for (unsigned i = 0; i < producers && err == 0 && hold; i++) {
                        struct connect_record gone;
                        err = read_record(results[0], &gone, sizeof(gone));
                        if (err == 0 && gone.ns != CONNECT_BURST_GONE)
                                err = -EIO;
                }
        }
        close(go[1]);
        close(results[0]);
        if (hold)
                close(release[1]);
        for (unsigned i = 0; i < started; i++) {
                int st;
                if (err < 0)
                        kill(pids[i], SIGKILL);
                waitpid(pids[i], &st, 0);
                if (err == 0 && (!WIFEXITED(st) || WEXITSTATUS(st) != 0))
                        err = -EIO;
        }
        return err;
}

struct probe_sessions {
        unsigned n;
        hbg_client *c[];
};

int probe_sessions_open(const char *socket, unsigned n, struct probe_sessions **ret) {
        struct probe_sessions *s = calloc(1, sizeof(*s) + (size_t)n * sizeof(s->c[0]));
        if (!s)
                return -ENOMEM;
        int err = 0;
        while (s->n < n && (err = hbg_connect(&s->c[s->n], socket)) == 0)
                s->n++;
        if (err < 0) {
                probe_sessions_close(s);
                return err;
        }
        *ret = s;
        return 0;
}

void probe_sessions_close(struct probe_sessions *s) {
        while (s->n > 0)
                hbg_disconnect(s->c[--s->n]);
        free(s);
}

static int cmp_double(const void *a, const void *b) {
        double x = *(const double *)a, y = *(const double *)b;
        return (x > y) - (x < y);
}

double probe_quantile(double *v, unsigned n, double q) {
        qsort(v, n, sizeof(*v), cmp_double);
        /* Nearest rank: the smallest value with at least q of the samples
         * at or below it. */
        double rank = q * n;
        unsigned k = (unsigned)rank;
        if ((double)k < rank)
                k++;
        if (k == 0)
                k = 1;
        return v[k > n ? n - 1 : k - 1];
}
