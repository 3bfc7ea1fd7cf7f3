/* SPDX-License-Identifier: MIT */
/* The operator's kernel modules (daemon/kernel_modules.h). */
#include "daemon/kernel_modules.h"

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <hbg/kernel.h>

#include "common/kernel_sig.h"
#include "daemon/engine/engine_kernels.h"

/* One module being loaded: its path and the first problem found. */
struct loading {
        const char *path;
        char why[400];
        int err;                /* 0 until something is refused */
        unsigned added;         /* kernels registered */
};

static int fail(struct loading *l, int err, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int fail(struct loading *l, int err, const char *fmt, ...) {
        if (l->err == 0) {
                va_list ap;
                va_start(ap, fmt);
                vsnprintf(l->why, sizeof(l->why), fmt, ap);
                va_end(ap);
                l->err = err;
        }
        return l->err;
}

static bool trusted_owner(uid_t uid) {
        return uid == 0 || uid == geteuid();
}

/*
 * Every directory above the file on path p, from the top: owned by root
 * or hbgd's user, and writable by group or others only when sticky (like
 * /tmp: nobody else can rename or remove what root or hbgd owns there),
 * never the file's own directory. Checked on the path as configured (where
 * a component may be a symbolic link, owned by root or hbgd's user) and on
 * the path with no link left. Then nobody but root and hbgd's user can
 * change what the configured path names.
 */
static int check_dirs(struct loading *l, const char *p, bool configured) {
        char dir[PATH_MAX];
        size_t n = strlen(p);
        if (n >= sizeof(dir))
                return fail(l, -ENAMETOOLONG, "path too long");
        const char *last = strrchr(p, '/');
        for (size_t end = 0; p + end <= last; end++) {
                if (p[end] != '/')
                        continue;
                /* The prefix up to this slash ("/" for the first). */
                memcpy(dir, p, end ? end : 1);
                dir[end ? end : 1] = 0;
                bool own_dir = p + end == last;
                struct stat st;
                if (lstat(dir, &st) < 0)
                        return fail(l, -errno, "directory %s: %s", dir, strerror(errno));
                if (configured && S_ISLNK(st.st_mode)) {
                        if (!trusted_owner(st.st_uid))
                                return fail(l, -EPERM, "symbolic link %s is owned by uid %u, not by root or hbgd's uid %u",
                                            dir, (unsigned)st.st_uid, (unsigned)geteuid());
                        continue;
                }
                if (!S_ISDIR(st.st_mode))
                        return fail(l, -ENOTDIR, "%s is not a directory", dir);
                if (!trusted_owner(st.st_uid))
                        return fail(l, -EPERM, "directory %s is owned by uid %u, not by root or hbgd's uid %u", dir,
                                    (unsigned)st.st_uid, (unsigned)geteuid());
                if ((st.st_mode & (S_IWGRP | S_IWOTH)) && (own_dir || !(st.st_mode & S_ISVTX)))
                        return fail(l, -EPERM, "directory %s is writable by group or others (mode %04o%s)", dir,
                                    (unsigned)(st.st_mode & 07777), own_dir ? "" : ", not sticky");
        }
        return 0;
}

/* Open path for loading: fd of the checked file (O_PATH), or -errno. */
static int open_checked(struct loading *l) {
        const char *path = l->path;
        if (path[0] != '/')
                return fail(l, -EINVAL, "not an absolute path");
        /* The path names the module in hbgd's kernel table: a text every
         * client must accept (common/kernel_sig.h). */
        if (!kernel_sig_text_ok(path, HBG_KERNEL_MODULE_TEXT_MAX))
                return fail(l, -EINVAL, "the path is longer than %u bytes, not UTF-8 or has control characters",
                            HBG_KERNEL_MODULE_TEXT_MAX - 1);
        char real[PATH_MAX];
        if (!realpath(path, real))
                return fail(l, -errno, "cannot open: %s", strerror(errno));
        /* The file as it is now, never a link (real has none): every later
         * step uses this open file, not the name again. */
        int fd = open(real, O_PATH | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0)
                return fail(l, -errno, "cannot open: %s", strerror(errno));
        struct stat st, again;
        int r = 0;
        if (fstat(fd, &st) < 0)
                r = fail(l, -errno, "cannot stat: %s", strerror(errno));
        else if (!S_ISREG(st.st_mode))
                r = fail(l, -EINVAL, "not a regular file");
        else if (!trusted_owner(st.st_uid))
                r = fail(l, -EPERM, "owned by uid %u, not by root or hbgd's uid %u", (unsigned)st.st_uid,
                         (unsigned)geteuid());
        else if (st.st_mode & (S_IWGRP | S_IWOTH))
                r = fail(l, -EPERM, "writable by group or others (mode %04o)", (unsigned)(st.st_mode & 07777));
        else if ((r = check_dirs(l, real, false)) < 0 || (r = check_dirs(l, path, true)) < 0)
                ;
        /* What the checked directories name is still the open file (they
         * cannot have changed since unless root or hbgd changed them). */
        else if (lstat(real, &again) < 0 || again.st_dev != st.st_dev || again.st_ino != st.st_ino)
                r = fail(l, -EAGAIN, "changed while being checked");
        if (r < 0) {
                close(fd);
                return r;
        }
        return fd;
}

static int host_add(struct hbg_kernel_host *host, uint32_t api_version, const struct hbg_kernel_def *def) {
        struct loading *l = host->hbgd;
        if (l->err)
                return l->err;
        int r = kernel_register(def, api_version, l->path, l->why, sizeof(l->why));
        if (r < 0)
                return l->err = r;
        l->added++;
        return 0;
}

/* Load one module: 0, or the refusal in l. */
static int load_one(struct loading *l) {
        int fd = open_checked(l);
        if (fd < 0)
                return fd;
        /* dlopen() opens /proc/self/fd/N: the file checked above, whatever
         * the path names by now. The fd stays open while the module is
         * loaded (for hbgd's life): the dynamic loader knows an object by
         * that name, and would hand the next module loaded through the
         * same fd number the first one's handle instead of its own. */
        char proc[64];
        snprintf(proc, sizeof(proc), "/proc/self/fd/%d", fd);
        dlerror();
        void *h = dlopen(proc, RTLD_NOW | RTLD_LOCAL);
        if (!h) {
                const char *e = dlerror();
                close(fd);
                return fail(l, -ENOEXEC, "dlopen: %s", e ? e : "failed");
        }
        typedef int init_fn(struct hbg_kernel_host *);
        init_fn *init;
        *(void **)&init = dlsym(h, HBG_KERNEL_MODULE_INIT_NAME);
        /* From here a refused module's fd stays open too: dlclose() may
         * leave it loaded (-z nodelete, unique symbols), and its name must
         * not come back for another module (hbgd exits anyway). */
        if (!init) {
                dlclose(h);
                return fail(l, -ENOEXEC, "no function " HBG_KERNEL_MODULE_INIT_NAME " (not an hbg kernel module)");
        }
        size_t mark = kernel_module_kernels();
        struct hbg_kernel_host host = {
                .size = sizeof(host), .api_version = HBG_KERNEL_API_VERSION, .add = host_add, .hbgd = l,
        };
        int r = init(&host);
        if (l->err == 0 && r < 0 && r >= -4095)
                fail(l, r, HBG_KERNEL_MODULE_INIT_NAME " failed: %s", strerror(-r));
        else if (l->err == 0 && r != 0)
                fail(l, -EINVAL, HBG_KERNEL_MODULE_INIT_NAME " returned %d, not 0 or a negative errno", r);
        else if (l->err == 0 && l->added == 0)
                fail(l, -EINVAL, "registers no kernel");
        if (l->err) {
                kernel_unregister_to(mark);
                dlclose(h);
                return l->err;
        }
        return 0;
}

int kernel_modules_load(const char *list, char *err, size_t errlen) {
        size_t used = 0;
        int ret = 0;
        if (errlen)
                err[0] = 0;
        char *copy = strdup(list ? list : "");
        if (!copy) {
                snprintf(err, errlen, "kernel modules: out of memory");
                return -ENOMEM;
        }
        for (char *save = NULL, *tok = strtok_r(copy, " \t", &save); tok; tok = strtok_r(NULL, " \t", &save)) {
                /* The path is kept as long as its kernels (hbgd's life). */
                char *path = strdup(tok);
                struct loading l = { .path = path ? path : tok };
                if (!path)
                        fail(&l, -ENOMEM, "out of memory");
                else
                        load_one(&l);
                if (l.err == 0)
                        continue;
                free(path);
                ret = -EINVAL;
                int n = snprintf(err + used, errlen > used ? errlen - used : 0, "%skernel module %s: %s",
                                 used ? "\n" : "", tok, l.why);
                if (n > 0)
                        used = used + (size_t)n < errlen ? used + (size_t)n : (errlen ? errlen - 1 : 0);
        }
        free(copy);
        return ret;
}
