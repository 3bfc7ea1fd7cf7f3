/* SPDX-License-Identifier: MIT */
/* The benchmark's own hbgd (bench/hbgd_proc.h). */
#include "bench/hbgd_proc.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bench/bench_util.h"

const char *bench_self_dir(char *buf, size_t len) {
        ssize_t n = readlink("/proc/self/exe", buf, len - 1);
        if (n <= 0) {
                snprintf(buf, len, ".");
                return buf;
        }
        buf[n] = 0;
        char *slash = strrchr(buf, '/');
        if (slash)
                *slash = 0;
        return buf;
}

static int wait_ready(struct bench_hbgd *h, int timeout_ms) {
        int64_t deadline = bench_now_ns() + (int64_t)timeout_ms * 1000000;
        char buf[512];
        for (;;) {
                ssize_t n = recv(h->notify_fd, buf, sizeof(buf) - 1, MSG_DONTWAIT);
                if (n > 0) {
                        buf[n] = 0;
                        if (strstr(buf, "READY=1"))
                                return 0;
                        continue;
                }
                int st;
                if (waitpid(h->pid, &st, WNOHANG) == h->pid) {
                        h->pid = -1;
                        return -ECHILD;
                }
                int64_t left = (deadline - bench_now_ns()) / 1000000;
                if (left <= 0)
                        return -ETIMEDOUT;
                struct pollfd p = { .fd = h->notify_fd, .events = POLLIN };
                poll(&p, 1, left > 100 ? 100 : (int)left);
        }
}

int bench_hbgd_start(struct bench_hbgd *h, const char *hbgd, const char *mode, unsigned threads,
                     const char *const *wrap, int timeout_ms) {
        return bench_hbgd_start_config(h, hbgd, mode, threads, NULL, wrap, timeout_ms);
}

int bench_hbgd_open_to_all(const struct bench_hbgd *h) {
        if (chmod(h->dir, 0755) < 0 || chmod(h->socket, 0777) < 0)
                return -errno;
        return 0;
}

void bench_hbgd_close_to_others(const struct bench_hbgd *h) {
        (void)chmod(h->dir, 0700);
}

int bench_hbgd_start_config(struct bench_hbgd *h, const char *hbgd, const char *mode, unsigned threads,
                            const char *config, const char *const *wrap, int timeout_ms) {
        memset(h, 0, sizeof(*h));
        h->pid = -1;
        h->notify_fd = -1;
        const char *tmp = getenv("TMPDIR");
        snprintf(h->dir, sizeof(h->dir), "%s/hbg-bench-XXXXXX", tmp && strlen(tmp) < 64 ? tmp : "/tmp");
        if (!mkdtemp(h->dir)) {
                int err = -errno;
                fprintf(stderr, "hbg-bench: mkdtemp: %s\n", strerror(-err));
                h->dir[0] = 0;
                return err;
        }
        snprintf(h->socket, sizeof(h->socket), "%s/hbgd.sock", h->dir);
        snprintf(h->log, sizeof(h->log), "%s/hbgd.log", h->dir);
        struct sockaddr_un sa = { .sun_family = AF_UNIX };
        int len = snprintf(NULL, 0, "%s/notify", h->dir);
        if (len < 0 || (size_t)len >= sizeof(sa.sun_path)) {
                fprintf(stderr, "hbg-bench: %s: path too long for a socket\n", h->dir);
                bench_hbgd_stop(h, 0);
                return -ENAMETOOLONG;
        }
        snprintf(sa.sun_path, sizeof(sa.sun_path), "%.80s/notify", h->dir);
        h->notify_fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
        if (h->notify_fd < 0 || bind(h->notify_fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
                int err = -errno;
                fprintf(stderr, "hbg-bench: notify socket: %s\n", strerror(-err));
                bench_hbgd_stop(h, 0);
                return err;
        }
        char threads_s[16], mode_s[48], env_notify[160], conf[160];
        snprintf(conf, sizeof(conf), "%.120s/hbgd.conf", h->dir);
        if (config) {
                FILE *f = fopen(conf, "w");
                if (!f || fputs(config, f) < 0 || fclose(f) != 0) {
                        int err = -EIO;
                        fprintf(stderr, "hbg-bench: cannot write %s\n", conf);
                        bench_hbgd_stop(h, 0);
                        return err;
                }
        }
        snprintf(threads_s, sizeof(threads_s), "%u", threads);
        snprintf(mode_s, sizeof(mode_s), "--completion=%s", mode);
        snprintf(env_notify, sizeof(env_notify), "NOTIFY_SOCKET=%s", sa.sun_path);
        const char *argv[32];
        unsigned n = 0;
        for (unsigned i = 0; wrap && wrap[i] && n < 20; i++)
                argv[n++] = wrap[i];
        argv[n++] = hbgd;
        argv[n++] = "--socket";
        argv[n++] = h->socket;
        argv[n++] = "--threads";
        argv[n++] = threads_s;
        argv[n++] = mode_s;
        if (config) {
                argv[n++] = "--config";
                argv[n++] = conf;
        }
        argv[n] = NULL;
        fflush(NULL);
        h->pid = fork();
        if (h->pid < 0) {
                int err = -errno;
                bench_hbgd_stop(h, 0);
                return err;
        }
        if (h->pid == 0) {
                prctl(PR_SET_PDEATHSIG, SIGTERM); /* ends with the bench, however the bench ends */
                int log = open(h->log, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
                if (log >= 0) {
                        dup2(log, 1);
                        dup2(log, 2);
                }
                putenv(env_notify);
                execvp(argv[0], (char *const *)argv);
                _exit(127);
        }
        int err = wait_ready(h, timeout_ms);
        if (err < 0) {
                fprintf(stderr, "hbg-bench: hbgd (%s, %u threads) did not start (%s); its log:\n", mode,
                        threads, strerror(-err));
                char cmd[300];
                snprintf(cmd, sizeof(cmd), "cat '%s' >&2", h->log);
                if (system(cmd) != 0)
                        fprintf(stderr, "  (none)\n");
                bench_hbgd_stop(h, 1000);
        }
        return err;
}

int bench_hbgd_stop(struct bench_hbgd *h, int timeout_ms) {
        int st = 0, ret = 0;
        if (h->pid > 0) {
                kill(h->pid, SIGTERM);
                int64_t deadline = bench_now_ns() + (int64_t)timeout_ms * 1000000;
                for (;;) {
                        pid_t p = waitpid(h->pid, &st, WNOHANG);
                        if (p == h->pid) {
                                ret = st;
                                break;
                        }
                        if (bench_now_ns() > deadline) {
                                kill(h->pid, SIGKILL);
                                waitpid(h->pid, &st, 0);
                                ret = -ETIMEDOUT;
                                break;
                        }
                        usleep(2000);
                }
                h->pid = -1;
        }
        if (h->notify_fd >= 0)
                close(h->notify_fd);
        h->notify_fd = -1;
        if (h->dir[0]) {
                char path[256];
                const char *names[] = { "hbgd.sock", "hbgd.log", "notify", "hbgd.conf" };
                for (unsigned i = 0; i < 4; i++) {
                        snprintf(path, sizeof(path), "%s/%s", h->dir, names[i]);
                        unlink(path);
                }
                rmdir(h->dir);
                h->dir[0] = 0;
        }
        return ret;
}

uint64_t bench_proc_peak_rss_kib(pid_t pid) {
        char path[64], line[256];
        snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
        FILE *f = fopen(path, "r");
        uint64_t kib = 0;
        if (!f)
                return 0;
        while (fgets(line, sizeof(line), f))
                if (sscanf(line, "VmHWM: %lu kB", &kib) == 1)
                        break;
        fclose(f);
        return kib;
}

int64_t bench_proc_cpu_ns(pid_t pid) {
        /* The first field of each thread's schedstat: its time on a CPU, in
         * ns (utime and stime in /proc/PID/stat count 10 ms ticks). */
        char path[64];
        snprintf(path, sizeof(path), "/proc/%d/task", (int)pid);
        DIR *d = opendir(path);
        if (!d)
                return -1;
        int64_t total = 0;
        struct dirent *e;
        while ((e = readdir(d))) {
                if (e->d_name[0] == '.')
                        continue;
                char stat[300];
                unsigned long long ns;
                snprintf(stat, sizeof(stat), "/proc/%d/task/%s/schedstat", (int)pid, e->d_name);
                FILE *f = fopen(stat, "r");
                if (!f)
                        continue; /* the thread exited */
                if (fscanf(f, "%llu", &ns) == 1)
                        total += (int64_t)ns;
                fclose(f);
        }
        closedir(d);
        return total;
}

void bench_proc_settle(pid_t pid, int max_ms) {
        for (int waited = 0; waited < max_ms; waited += 100) {
                int64_t cpu0 = bench_proc_cpu_ns(pid);
                usleep(100 * 1000);
                int64_t cpu1 = bench_proc_cpu_ns(pid);
                if (cpu0 < 0 || cpu1 < 0 || cpu1 - cpu0 < 1000 * 1000)
                        return;
        }
}
