/* SPDX-License-Identifier: MIT */
/*
 * Kernel modules and the real hbgd (docs/KERNELS.md, hbgd.conf(5)
 * [kernels]):
 *   refused   each refusal of a configured module (wrong owner, a file or
 *             directory writable by others, wrong API version, a name clash
 *             with a built-in and between two modules, bad definitions,
 *             init failing, a missing file, a relative path): hbgd does not
 *             start (exit 2) and says "hbgd: kernel module PATH: REASON" on
 *             stderr, the kernel named where there is one; `hbgd
 *             --check-config` loads the same and reports the same (exit 1);
 *   loaded    the example module in a test config: hbgd starts, logs its
 *             kernels with their ids, and --check-config lists them;
 *   reload    SIGHUP with a changed `modules` loads nothing and logs that
 *             the change is ignored until a restart.
 * Modules are copied into a fresh 0755 directory under /tmp (sticky): the
 * build tree may lie under a directory others may write.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tests/check_main.h"
#include "tests/e2e/daemon_util.h"
#include "tests/e2e/e2e_util.h"

static char dir[64];

static void copy_file(const char *src, const char *dst) {
        int in = open(src, O_RDONLY | O_CLOEXEC);
        ck_assert_msg(in >= 0, "cannot open %s (build the tests' modules)", src);
        int out = open(dst, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
        ck_assert_int_ge(out, 0);
        char buf[65536];
        ssize_t n;
        while ((n = read(in, buf, sizeof(buf))) > 0)
                ck_assert_int_eq(write(out, buf, (size_t)n), n);
        close(in);
        ck_assert_int_eq(fchmod(out, 0644), 0);
        close(out);
}

/* dir/VARIANT.so from the tests' modules (or the example for "example"). */
static void module(const char *variant, char *ret, size_t len) {
        char src[512];
        if (strcmp(variant, "example") == 0)
                snprintf(src, sizeof(src), "%s", HBG_TEST_EXAMPLE_MODULE);
        else
                snprintf(src, sizeof(src), "%s/%s.so", HBG_TEST_MODULES_DIR, variant);
        snprintf(ret, len, "%s/%s.so", dir, variant);
        copy_file(src, ret);
}

static void write_conf(const char *path, const char *modules) {
        FILE *f = fopen(path, "w");
        ck_assert_ptr_nonnull(f);
        fprintf(f, "[scheduler]\nthreads = 1\n\n[kernels]\nmodules = %s\n", modules);
        ck_assert_int_eq(fclose(f), 0);
}

static void setup_dir(void) {
        snprintf(dir, sizeof(dir), "/tmp/hbg-e2e-kmod-XXXXXX");
        ck_assert_ptr_nonnull(mkdtemp(dir));
        ck_assert_int_eq(chmod(dir, 0755), 0);
}

static void teardown_dir(void) {
        char cmd[128];
        snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
        if (system(cmd) != 0)
                fprintf(stderr, "cannot remove %s\n", dir);
}

/* Run hbgd with args; its stdout and stderr together into out; the exit
 * code (128 + signal if killed). hbgd must end within 30 s. */
static int run_hbgd(const char *const *args, char *out, size_t len) {
        int p[2];
        ck_assert_int_eq(pipe2(p, O_CLOEXEC), 0);
        const char *argv[16] = { daemon_binary() };
        size_t n = 1;
        for (; args[n - 1] && n < 15; n++)
                argv[n] = args[n - 1];
        argv[n] = NULL;
        pid_t pid = fork();
        ck_assert_int_ge(pid, 0);
        if (pid == 0) {
                dup2(p[1], 1);
                dup2(p[1], 2);
                execv(argv[0], (char *const *)argv);
                _exit(127);
        }
        close(p[1]);
        size_t used = 0;
        long long end = daemon_now_ms() + 30000;
        for (;;) {
                struct pollfd pfd = { p[0], POLLIN, 0 };
                int left = (int)(end - daemon_now_ms());
                ck_assert_msg(left > 0 && poll(&pfd, 1, left) > 0, "hbgd did not exit");
                ssize_t r = read(p[0], out + used, len - 1 - used);
                if (r <= 0)
                        break;
                used += (size_t)r;
                if (used == len - 1)
                        break;
        }
        out[used] = 0;
        close(p[0]);
        int st;
        ck_assert_int_eq(waitpid(pid, &st, 0), pid);
        return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

/* hbgd refuses to start with conf, and --check-config says the same:
 * "hbgd: kernel module PATH: REASON" (REASON contains reason). */
static void assert_refused(const char *conf, const char *path, const char *reason) {
        char out[8192], want[1024], sock[128];
        snprintf(sock, sizeof(sock), "%s/hbgd.sock", dir);
        snprintf(want, sizeof(want), "hbgd: kernel module %s: ", path);
        int code = run_hbgd((const char *const[]){ "--config", conf, "--socket", sock, NULL }, out, sizeof(out));
        ck_assert_msg(code == 2, "hbgd started (or died: %d) with %s:\n%s", code, path, out);
        const char *line = strstr(out, want);
        ck_assert_msg(line && strstr(line, reason), "start: want '%s...%s':\n%s", want, reason, out);
        ck_assert_msg(access(sock, F_OK) != 0, "hbgd bound its socket");
        code = run_hbgd((const char *const[]){ "--check-config", conf, NULL }, out, sizeof(out));
        ck_assert_msg(code == 1, "--check-config: %d:\n%s", code, out);
        line = strstr(out, want);
        ck_assert_msg(line && strstr(line, reason), "--check-config: want '%s...%s':\n%s", want, reason, out);
}

static const struct refusal {
        const char *variant;
        const char *reason;
} refusals[] = {
        { "bad_version", "built for kernel API version 2; this hbgd speaks version 1" },
        { "clash_builtin", "kernel 'add_f32': name clash with the built-in kernel add_f32" },
        { "too_many_args", "kernel 'tm_count': too many tensor arguments (9; at most 8)" },
        { "no_run", "kernel 'tm_count': no run function" },
        { "bad_name", "kernel name 'Bad-Name' is not [a-z0-9_]{1,31}" },
        { "init_fail", "hbg_kernel_module_init failed: Operation not supported" },
};

START_TEST(refused_definitions) {
        const struct refusal *c = &refusals[_i];
        char path[256], conf[128];
        setup_dir();
        module(c->variant, path, sizeof(path));
        snprintf(conf, sizeof(conf), "%s/hbgd.conf", dir);
        write_conf(conf, path);
        assert_refused(conf, path, c->reason);
        teardown_dir();
}
END_TEST

START_TEST(refused_files) {
        char path[256], conf[128], list[600], want[600];
        setup_dir();
        module("counting", path, sizeof(path));
        snprintf(conf, sizeof(conf), "%s/hbgd.conf", dir);
        write_conf(conf, path);

        /* Another user's file. */
        ck_assert_int_eq(chown(path, NOBODY, NOBODY), 0);
        snprintf(want, sizeof(want), "owned by uid %u, not by root or hbgd's uid 0", (unsigned)NOBODY);
        assert_refused(conf, path, want);
        ck_assert_int_eq(chown(path, 0, 0), 0);
        /* Writable by others. */
        ck_assert_int_eq(chmod(path, 0646), 0);
        assert_refused(conf, path, "writable by group or others (mode 0646)");
        ck_assert_int_eq(chmod(path, 0644), 0);
        /* Its directory writable by others, not sticky. */
        ck_assert_int_eq(chmod(dir, 0777), 0);
        snprintf(want, sizeof(want), "directory %s is writable by group or others (mode 0777)", dir);
        assert_refused(conf, path, want);
        ck_assert_int_eq(chmod(dir, 0755), 0);
        /* Missing. */
        snprintf(list, sizeof(list), "%s/missing.so", dir);
        write_conf(conf, list);
        assert_refused(conf, list, "cannot open: No such file or directory");
        /* A clash between two modules: the second is refused. */
        char a[256], b[256];
        module("clash_a", a, sizeof(a));
        module("clash_b", b, sizeof(b));
        snprintf(list, sizeof(list), "%s %s", a, b);
        write_conf(conf, list);
        snprintf(want, sizeof(want), "kernel 'tm_clash': name clash with kernel tm_clash of module %s", a);
        assert_refused(conf, b, want);
        teardown_dir();
}
END_TEST

/* A relative path is the configuration's error, at its line. */
START_TEST(refused_relative) {
        char conf[128], out[8192], want[256];
        setup_dir();
        snprintf(conf, sizeof(conf), "%s/hbgd.conf", dir);
        write_conf(conf, "lib/hbg-nn.so");
        snprintf(want, sizeof(want), "hbgd: %s:5: modules: 'lib/hbg-nn.so' is not an absolute path", conf);
        ck_assert_int_eq(run_hbgd((const char *const[]){ "--config", conf, NULL }, out, sizeof(out)), 2);
        ck_assert_msg(strstr(out, want), "%s", out);
        ck_assert_int_eq(run_hbgd((const char *const[]){ "--check-config", conf, NULL }, out, sizeof(out)), 1);
        ck_assert_msg(strstr(out, want), "%s", out);
        teardown_dir();
}
END_TEST

static bool log_within(const struct hbgd_proc *d, const char *what, int timeout_ms) {
        long long end = daemon_now_ms() + timeout_ms;
        do {
                FILE *f = fopen(d->log_path, "r");
                if (f) {
                        static char buf[1 << 16];
                        size_t n = fread(buf, 1, sizeof(buf) - 1, f);
                        fclose(f);
                        buf[n] = 0;
                        if (strstr(buf, what))
                                return true;
                }
                usleep(10000);
        } while (daemon_now_ms() < end);
        return false;
}

START_TEST(loaded_and_reload) {
        char path[256], conf[128], out[8192], want[1024];
        setup_dir();
        module("example", path, sizeof(path));
        snprintf(conf, sizeof(conf), "%s/hbgd.conf", dir);
        write_conf(conf, path);
        ck_assert_int_eq(run_hbgd((const char *const[]){ "--check-config", conf, NULL }, out, sizeof(out)), 0);
        snprintf(want, sizeof(want), "# module kernel relu_f32 (id 256) from %s\n# module kernel rownorm_f32 (id 257) from %s\n",
                 path, path);
        ck_assert_msg(strstr(out, want), "%s", out);

        struct hbgd_proc *d;
        ck_assert_int_eq(daemon_start(&d, (const char *const[]){ "--config", conf, NULL }, NULL), 0);
        snprintf(want, sizeof(want), "kernel module %s: kernel rownorm_f32 (id 257)", path);
        ck_assert_msg(log_within(d, want, 5000), "no line '%s'", want);
        /* SIGHUP: nothing loaded, the change said to be ignored. */
        char other[256];
        module("counting", other, sizeof(other));
        char list[600];
        snprintf(list, sizeof(list), "%s %s", path, other);
        write_conf(conf, list);
        ck_assert_int_eq(kill(d->pid, SIGHUP), 0);
        ck_assert_msg(log_within(d, "[kernels] modules: '", 5000) &&
                              log_within(d, "ignored (modules are loaded only at start: needs a restart)", 5000),
                      "no reload line");
        ck_assert(log_within(d, "kernel modules are not reloaded", 5000));
        ck_assert(!log_within(d, "tm_count", 0));
        ck_assert_int_eq(daemon_stop(d, 10000), 0);
        daemon_destroy(d);
        teardown_dir();
}
END_TEST

static Suite *suite(void) {
        Suite *s = suite_create("e2e_modules");
        TCase *tc = tcase_create("e2e_modules");
        tcase_set_timeout(tc, 120);
        tcase_add_loop_test(tc, refused_definitions, 0, (int)(sizeof(refusals) / sizeof(refusals[0])));
        tcase_add_test(tc, refused_files);
        tcase_add_test(tc, refused_relative);
        tcase_add_test(tc, loaded_and_reload);
        suite_add_tcase(s, tc);
        return s;
}

const struct check_main check_main = {
        .suite = suite,
        .setup = daemon_util_setup,
};
