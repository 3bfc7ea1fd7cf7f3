/* SPDX-License-Identifier: MIT */
/* A process's own resource figures (common/procstat.h). */
#include "common/procstat.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

/* A small /proc file into buf (NUL-terminated). Bytes read or -errno. */
static ssize_t read_small(const char *path, char *buf, size_t size) {
        int fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd < 0)
                return -errno;
        size_t n = 0;
        while (n < size - 1) {
                ssize_t r = read(fd, buf + n, size - 1 - n);
                if (r < 0 && errno == EINTR)
                        continue;
                if (r <= 0)
                        break;
                n += (size_t)r;
        }
        close(fd);
        buf[n] = 0;
        return (ssize_t)n;
}

static int memory(uint64_t *ret_resident, uint64_t *ret_virtual) {
        char buf[256];
        unsigned long long size, pages;
        if (read_small("/proc/self/statm", buf, sizeof(buf)) < 0 || sscanf(buf, "%llu %llu", &size, &pages) != 2)
                return -ENOENT;
        long page = sysconf(_SC_PAGESIZE);
        *ret_resident = (uint64_t)pages * (uint64_t)(page > 0 ? page : 4096);
        *ret_virtual = (uint64_t)size * (uint64_t)(page > 0 ? page : 4096);
        return 0;
}

/* Entries of /proc/self/fd, less ".", ".." and the directory's own fd. */
static int open_fds(uint64_t *ret) {
        DIR *dir = opendir("/proc/self/fd");
        if (!dir)
                return -errno;
        uint64_t n = 0;
        for (struct dirent *e; (e = readdir(dir));)
                if (e->d_name[0] != '.')
                        n++;
        closedir(dir);
        *ret = n ? n - 1 : 0;
        return 0;
}

/* The btime line of /proc/stat (s since the epoch), read line by line:
 * the per-cpu lines before it take more than a page on a large machine. */
static int boot_time(unsigned long long *ret) {
        FILE *f = fopen("/proc/stat", "re");
        if (!f)
                return -errno;
        char *line = NULL;
        size_t cap = 0;
        int err = -ENOENT;
        while (getline(&line, &cap, f) > 0)
                if (strncmp(line, "btime ", 6) == 0) {
                        err = sscanf(line + 6, "%llu", ret) == 1 ? 0 : -ENOENT;
                        break;
                }
        free(line);
        fclose(f);
        return err;
}

/* Boot time plus field 22 of /proc/self/stat (clock ticks after boot).
 * The command field (2) may hold spaces and parentheses: the fields after
 * it follow the last ')'. */
static int start_time(uint64_t *ret_ms) {
        char buf[4096];
        unsigned long long btime;
        if (boot_time(&btime) < 0)
                return -ENOENT;
        if (read_small("/proc/self/stat", buf, sizeof(buf)) < 0)
                return -ENOENT;
        const char *p = strrchr(buf, ')');
        if (!p)
                return -ENOENT;
        /* Fields 3 .. 21 skipped, field 22 read. */
        unsigned long long ticks;
        if (sscanf(p + 1, " %*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %*u %*u %*d %*d %*d %*d %*d %*d %llu",
                   &ticks) != 1)
                return -ENOENT;
        long hz = sysconf(_SC_CLK_TCK);
        if (hz <= 0)
                return -ENOENT;
        *ret_ms = (uint64_t)btime * 1000 + (uint64_t)ticks * 1000 / (uint64_t)hz;
        return 0;
}

int procstat_self(struct procstat *ret) {
        *ret = (struct procstat){ 0 };
        int err = 0;
        struct rusage ru;
        if (getrusage(RUSAGE_SELF, &ru) == 0)
                ret->cpu_us = (uint64_t)ru.ru_utime.tv_sec * 1000000 + (uint64_t)ru.ru_utime.tv_usec +
                              (uint64_t)ru.ru_stime.tv_sec * 1000000 + (uint64_t)ru.ru_stime.tv_usec;
        struct rlimit rl;
        if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY)
                ret->max_fds = rl.rlim_cur;
        int r;
        if ((r = memory(&ret->resident_bytes, &ret->virtual_bytes)) < 0)
                err = r;
        if ((r = open_fds(&ret->open_fds)) < 0)
                err = r;
        if ((r = start_time(&ret->start_time_ms)) < 0)
                err = r;
        return err;
}
