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
 *             kernels with their ids, and --check-config lists them; with
 *             a second module, each module's own kernels;
 *   reload    SIGHUP with a changed `modules` loads nothing and logs that
 *             the change is ignored until a restart;
 *   producer  a C producer (the public API only) finds the example's
 *             kernels in hbgd's table (ids from 256, their module; the
 *             built-ins without one), runs graphs mixing them with
 *             built-ins, by name and by id, for several block counts, and
 *             gets the bits of a reference computed here with the
 *             module's arithmetic; rownorm_f32's own check refusing a
 *             shape comes back as the graph's error, naming the kernel;
 *   files     a graph file using the example's kernels runs through
 *             `hbgctl run` (same reference) and `--dry-run` checks it
 *             (and refuses wrong arguments, naming the kernel); `hbgctl
 *             kernels` (text and --json) gives each kernel's module;
 *   table     a module whose kernels fill most of the session reply
 *             loads and a client gets the whole table; one whose table
 *             would not fit the 64 KiB a client reads stops hbgd from
 *             starting, and --check-config says the same, with the sizes;
 *   unsplit   a module kernel declared not splittable, with no guard of
 *             its own, runs once as part 0 of 1 in tasks of 8 blocks (AIV,
 *             MIX, launched from a recording).
 * Modules are copied into a fresh 0755 directory under /tmp (sticky): the
 * build tree may lie under a directory others may write.
 */
#include <errno.h>
#include <fcntl.h>
#include <json-c/json.h>
#include <math.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/kernel_sig.h"
#include "hbg/hbg.h"
#include "tests/check_main.h"
#include "tests/e2e/daemon_util.h"
#include "tests/e2e/e2e_util.h"
#include "tests/module_util.h"

static char dir[64];

/* dir/VARIANT.so from the tests' modules (or the example for "example"). */
static void module(const char *variant, char *ret, size_t len) {
        char src[512];
        if (strcmp(variant, "example") == 0)
                snprintf(src, sizeof(src), "%s", HBG_TEST_EXAMPLE_MODULE);
        else
                snprintf(src, sizeof(src), "%s/%s.so", HBG_TEST_MODULES_DIR, variant);
        snprintf(ret, len, "%s/%s.so", dir, variant);
        module_copy(src, ret);
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

/* Run bin with args; its stdout and stderr together into out; the exit
 * code (128 + signal if killed). It must end within 30 s. */
static int run_prog(const char *bin, const char *const *args, char *out, size_t len) {
        int p[2];
        ck_assert_int_eq(pipe2(p, O_CLOEXEC), 0);
        const char *argv[16] = { bin };
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

static int run_hbgd(const char *const *args, char *out, size_t len) {
        return run_prog(daemon_binary(), args, out, len);
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
        { "bad_version", "kernel 'tm_count': built for kernel API version 2; this hbgd speaks versions 1 to 1" },
        { "clash_builtin", "kernel 'add_f32': name clash with the built-in kernel add_f32" },
        { "too_many_args", "kernel 'tm_count': too many tensor arguments (9; at most 8)" },
        { "no_run", "kernel 'tm_count': no run function" },
        { "bad_name", "kernel name 'Bad-Name' is not [a-z0-9_]{1,31}" },
        /* A kernel no graph file could call. */
        { "dummy_name", "kernel 'dummy': the name is reserved" },
        { "init_fail", "hbg_kernel_module_init failed: Operation not supported" },
        /* A text every client would refuse in hbgd's table. */
        { "long_summary", "kernel 'tm_count': the summary is not one line of text shorter than 512 bytes" },
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

/* Two modules: each its own kernels (the second loaded through the same
 * fd number the first one was). */
START_TEST(two_modules) {
        char a[256], b[256], conf[128], list[600], out[8192], want[1024];
        setup_dir();
        module("example", a, sizeof(a));
        module("counting", b, sizeof(b));
        snprintf(conf, sizeof(conf), "%s/hbgd.conf", dir);
        snprintf(list, sizeof(list), "%s %s", a, b);
        write_conf(conf, list);
        ck_assert_int_eq(run_hbgd((const char *const[]){ "--check-config", conf, NULL }, out, sizeof(out)), 0);
        snprintf(want, sizeof(want),
                 "# module kernel relu_f32 (id 256) from %s\n# module kernel rownorm_f32 (id 257) from %s\n"
                 "# module kernel tm_count (id 258) from %s\n",
                 a, a, b);
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

/* ------------------------------------------------------------ the example's kernels in use */

/* hbgd with `threads` scheduler threads and the test module built as
 * `variant` ("example", "unsplit"...); its path in path. */
static struct hbgd_proc *start_with_module_threads(const char *variant, unsigned threads, char *path, size_t len) {
        char conf[128];
        setup_dir();
        module(variant, path, len);
        snprintf(conf, sizeof(conf), "%s/hbgd.conf", dir);
        FILE *f = fopen(conf, "w");
        ck_assert_ptr_nonnull(f);
        fprintf(f, "[scheduler]\nthreads = %u\n\n[kernels]\nmodules = %s\n", threads, path);
        ck_assert_int_eq(fclose(f), 0);
        struct hbgd_proc *d;
        ck_assert_int_eq(daemon_start(&d, (const char *const[]){ "--config", conf, NULL }, NULL), 0);
        return d;
}

/* The same with two scheduler threads. */
static struct hbgd_proc *start_with_module(const char *variant, char *path, size_t len) {
        return start_with_module_threads(variant, 2, path, len);
}

/* The reference: examples/kernels_nn.c's arithmetic, element by element. */
static void ref_relu(const float *x, float *y, size_t n) {
        for (size_t i = 0; i < n; i++)
                y[i] = x[i] > 0.0f ? x[i] : 0.0f;
}

static void ref_rownorm(float *X, uint64_t rows, uint64_t cols) {
        for (uint64_t r = 0; r < rows; r++) {
                float *x = X + r * cols;
                double sum = 0.0;
                for (uint64_t j = 0; j < cols; j++)
                        sum += (double)x[j] * (double)x[j];
                if (sum == 0.0)
                        continue;
                double norm = sqrt(sum);
                for (uint64_t j = 0; j < cols; j++)
                        x[j] = (float)((double)x[j] / norm);
        }
}

/* reduce_sum_f32: in index order, in double. */
static float ref_sum(const float *x, size_t n) {
        double sum = 0.0;
        for (size_t i = 0; i < n; i++)
                sum += (double)x[i];
        return (float)sum;
}

static void assert_bits(const float *got, const float *want, size_t n, const char *what) {
        for (size_t i = 0; i < n; i++)
                ck_assert_msg(memcmp(&got[i], &want[i], sizeof(float)) == 0, "%s: element %zu is %a, want %a", what,
                              i, (double)got[i], (double)want[i]);
}

enum { ROWS = 7, COLS = 1031, N_ELEMS = ROWS * COLS };

/* Inputs with what relu and rownorm must get right: negatives, -0.0,
 * NaN, subnormals, large values, a row of negatives (all zero after relu). */
static void fill_input(float *x, uint64_t *seed) {
        for (size_t i = 0; i < N_ELEMS; i++) {
                uint64_t r = xorshift(seed);
                switch (r % 16) {
                case 0: x[i] = -0.0f; break;
                case 1: x[i] = NAN; break;
                case 2: x[i] = 1e-41f; break;     /* subnormal */
                case 3: x[i] = 3e37f; break;
                default: x[i] = ((float)(int)(r >> 40 & 0xffff) - 32768.0f) / 1024.0f; break;
                }
        }
        for (size_t j = 0; j < COLS; j++)
                x[3 * COLS + j] = -1.0f - (float)j;
}

static hbg_task task_of(hbg_client *c, const char *kernel, bool by_id) {
        hbg_task t = HBG_TASK_INIT(kernel);
        if (by_id) {
                int id = hbg_client_kernel_id(c, kernel);
                ck_assert_int_gt(id, 0);
                t.kernel = NULL;
                t.kernel_id = (uint16_t)id;
        }
        return t;
}

static void arg(hbg_task *t, hbg_tensor x, enum hbg_dir how) {
        t->args[t->n_args].tensor = x;
        t->args[t->n_args++].dir = how;
}

START_TEST(producer) {
        char path[256];
        struct hbgd_proc *d = start_with_module("example", path, sizeof(path));
        hbg_client *c;
        ck_assert_msg(hbg_connect(&c, d->socket_path) == 0, "%s", hbg_last_error(NULL));

        /* The table: the built-ins without a module, the example's two
         * with it, ids from 256. */
        int relu = hbg_client_kernel_id(c, "relu_f32"), rownorm = hbg_client_kernel_id(c, "rownorm_f32");
        ck_assert_int_ge(relu, HBG_KERNEL_MODULE_FIRST);
        ck_assert_int_ge(rownorm, HBG_KERNEL_MODULE_FIRST);
        ck_assert_int_ne(relu, rownorm);
        ck_assert_int_eq(hbg_kernel_id("relu_f32"), -ENOENT); /* the library's built-ins only */
        size_t nk = hbg_client_kernel_count(c);
        ck_assert_uint_eq(nk, HBG_KERNEL_COUNT - 1 + 2);
        unsigned builtins = 0, modules = 0;
        for (size_t i = 0; i < nk; i++) {
                hbg_kernel_desc k = HBG_KERNEL_DESC_INIT;
                ck_assert_int_eq(hbg_client_kernel_info(c, i, &k), 0);
                ck_assert_int_eq(hbg_client_kernel_id(c, k.name), k.id);
                if (k.id < (int)HBG_KERNEL_MODULE_FIRST) {
                        ck_assert_msg(k.module == NULL, "built-in %s has module %s", k.name, k.module);
                        builtins++;
                        continue;
                }
                ck_assert_msg(k.module && strcmp(k.module, path) == 0, "%s: module %s", k.name,
                              k.module ? k.module : "NULL");
                modules++;
                if (k.id == relu) {
                        ck_assert_str_eq(k.name, "relu_f32");
                        ck_assert_uint_eq(k.n_tensors, 2);
                        ck_assert_int_eq(k.tensor_dirs[0], HBG_IN);
                        ck_assert_int_eq(k.tensor_dirs[1], HBG_OUT);
                        ck_assert_uint_eq(k.n_scalars, 0);
                        ck_assert(k.in_place && k.splittable);
                        ck_assert_int_eq(k.length, HBG_LENGTH_RULE_EQUAL);
                } else {
                        ck_assert_int_eq(k.id, rownorm);
                        ck_assert_str_eq(k.name, "rownorm_f32");
                        ck_assert_uint_eq(k.n_tensors, 1);
                        ck_assert_int_eq(k.tensor_dirs[0], HBG_INOUT);
                        ck_assert_uint_eq(k.n_scalars, 2);
                        ck_assert_int_eq(k.scalar_types[0], HBG_SCALAR_TYPE_U64);
                        ck_assert_str_eq(k.scalar_names[1], "cols");
                        ck_assert(!k.in_place && k.splittable);
                        ck_assert_int_eq(k.length, HBG_LENGTH_RULE_SHAPE);
                }
        }
        ck_assert_uint_eq(builtins, HBG_KERNEL_COUNT - 1);
        ck_assert_uint_eq(modules, 2);

        /* fill the first row, copy, relu in place, relu out of place,
         * rownorm, reduce_sum: each graph's bits against the reference. */
        hbg_tensor x, y, z, s;
        ck_assert_int_eq(hbg_tensor_alloc(c, N_ELEMS * sizeof(float), &x), 0);
        ck_assert_int_eq(hbg_tensor_alloc(c, N_ELEMS * sizeof(float), &y), 0);
        ck_assert_int_eq(hbg_tensor_alloc(c, N_ELEMS * sizeof(float), &z), 0);
        ck_assert_int_eq(hbg_tensor_alloc(c, sizeof(float), &s), 0);
        static float in[N_ELEMS], want_y[N_ELEMS], want_z[N_ELEMS];
        uint64_t seed = seed_value() | 1;
        static const uint16_t blocks[] = { 1, 2, 3, 5, 8 };
        unsigned graphs = 0;
        for (size_t b = 0; b < sizeof(blocks) / sizeof(blocks[0]); b++)
                for (int by_id = 0; by_id < 2; by_id++) {
                        fill_input(in, &seed);
                        memcpy(hbg_tensor_data(c, x), in, sizeof(in));
                        memcpy(want_y, in, sizeof(in));
                        for (size_t j = 0; j < COLS; j++)
                                want_y[j] = -2.0f;
                        ref_relu(want_y, want_y, N_ELEMS);
                        ref_relu(in, want_z, N_ELEMS);
                        ref_rownorm(want_y, ROWS, COLS);
                        float want_s = ref_sum(want_y, N_ELEMS);

                        hbg_task t[6];
                        uint64_t ids[6];
                        t[0] = task_of(c, "copy_f32", by_id);
                        arg(&t[0], x, HBG_IN);
                        arg(&t[0], y, HBG_OUT);
                        hbg_tensor row0;
                        ck_assert_int_eq(hbg_tensor_slice_f32(y, 0, COLS, &row0), 0);
                        t[1] = task_of(c, "fill_f32", by_id);
                        arg(&t[1], row0, HBG_OUT);
                        t[1].n_scalars = 1;
                        t[1].scalars[0] = hbg_f32(-2.0f);
                        t[2] = task_of(c, "relu_f32", by_id); /* in place */
                        arg(&t[2], y, HBG_IN);
                        arg(&t[2], y, HBG_OUT);
                        t[3] = task_of(c, "relu_f32", !by_id);
                        arg(&t[3], x, HBG_IN);
                        arg(&t[3], z, HBG_OUT);
                        t[4] = task_of(c, "rownorm_f32", by_id);
                        arg(&t[4], y, HBG_INOUT);
                        t[4].n_scalars = 2;
                        t[4].scalars[0] = ROWS;
                        t[4].scalars[1] = COLS;
                        t[5] = task_of(c, "reduce_sum_f32", by_id);
                        arg(&t[5], y, HBG_IN);
                        arg(&t[5], s, HBG_OUT);
                        for (unsigned i = 0; i < 6; i++) {
                                t[i].blocks = blocks[b];
                                if (i == 4) { /* and an explicit dependency */
                                        t[i].n_deps = 1;
                                        t[i].deps[0] = ids[3];
                                }
                                ck_assert_msg(hbg_graph_add(c, &t[i], &ids[i]) == 0, "task %u: %s", i,
                                              hbg_last_error(c));
                        }
                        uint64_t g;
                        ck_assert_int_eq(hbg_graph_submit(c, &g), 0);
                        ck_assert_msg(hbg_graph_wait(c, g, WAIT_MS) == 0, "blocks %u: %s", blocks[b],
                                      hbg_last_error(c));
                        char what[64];
                        snprintf(what, sizeof(what), "blocks %u%s: y", blocks[b], by_id ? " by id" : "");
                        assert_bits(hbg_tensor_data(c, y), want_y, N_ELEMS, what);
                        snprintf(what, sizeof(what), "blocks %u%s: z", blocks[b], by_id ? " by id" : "");
                        assert_bits(hbg_tensor_data(c, z), want_z, N_ELEMS, what);
                        snprintf(what, sizeof(what), "blocks %u%s: sum", blocks[b], by_id ? " by id" : "");
                        assert_bits(hbg_tensor_data(c, s), &want_s, 1, what);
                        graphs++;
                }

        /* rownorm_f32's own check: the graph fails with its reason, the
         * kernel named; the session goes on. */
        static const struct {
                uint64_t rows, cols;
                int code;
                const char *message;
        } refused[] = {
                { ROWS + 1, COLS, -EINVAL, "rownorm_f32: shape does not fit X" },
                { 0, COLS, -EINVAL, "rownorm_f32: rows and cols must be at least 1" },
                { UINT64_MAX / 2, 3, -EOVERFLOW, "rownorm_f32: size of X (rows*cols*4) overflows" },
        };
        for (size_t i = 0; i < sizeof(refused) / sizeof(refused[0]); i++) {
                hbg_task t = task_of(c, "rownorm_f32", i % 2);
                arg(&t, y, HBG_INOUT);
                t.n_scalars = 2;
                t.scalars[0] = refused[i].rows;
                t.scalars[1] = refused[i].cols;
                uint64_t id, g;
                ck_assert_msg(hbg_graph_add(c, &t, &id) == 0, "%s", hbg_last_error(c));
                ck_assert_int_eq(hbg_graph_submit(c, &g), 0);
                ck_assert_int_eq(hbg_graph_wait(c, g, WAIT_MS), refused[i].code);
                hbg_graph_error_info e = HBG_GRAPH_ERROR_INFO_INIT;
                ck_assert_int_eq(hbg_graph_error(c, g, &e), 0);
                ck_assert_int_eq(e.code, refused[i].code);
                ck_assert_uint_eq(e.task, id);
                ck_assert_int_eq(e.kernel_id, rownorm);
                ck_assert_str_eq(e.kernel, "rownorm_f32");
                ck_assert_msg(strstr(e.message, refused[i].message), "message '%s', want '%s'", e.message,
                              refused[i].message);
                /* A good one after it. */
                t.scalars[0] = ROWS;
                t.scalars[1] = COLS;
                ck_assert_int_eq(hbg_graph_add(c, &t, NULL), 0);
                ck_assert_int_eq(hbg_graph_submit(c, &g), 0);
                ck_assert_msg(hbg_graph_wait(c, g, WAIT_MS) == 0, "%s", hbg_last_error(c));
        }
        fprintf(stderr, "producer: %u graphs matched the reference; %zu shapes refused by rownorm_f32's check\n",
                graphs, sizeof(refused) / sizeof(refused[0]));
        hbg_disconnect(c);
        ck_assert_int_eq(daemon_stop(d, 10000), 0);
        daemon_destroy(d);
        teardown_dir();
}
END_TEST

/* hbgctl: $HBGCTL, else the one beside this build's hbgd. */
static const char *hbgctl_binary(char *buf, size_t len) {
        const char *e = getenv("HBGCTL");
        if (e && e[0])
                return e;
        snprintf(buf, len, "%s", daemon_binary());
        char *slash = strrchr(buf, '/');
        ck_assert_ptr_nonnull(slash);
        snprintf(slash + 1, len - (size_t)(slash + 1 - buf), "hbgctl");
        return buf;
}

static void write_file(const char *path, const char *text) {
        FILE *f = fopen(path, "w");
        ck_assert_ptr_nonnull(f);
        fputs(text, f);
        ck_assert_int_eq(fclose(f), 0);
}

/* x = -1.5, -1, ..., 2; y = relu(x) in 3 blocks, rownorm of 4 rows of 2
 * in 3 blocks: all 8 values are in the output's head. */
static const char graph_ok[] =
        "{\"tensors\": {\"x\": {\"len\": 8, \"init\": \"iota\", \"start\": -1.5, \"step\": 0.5},\n"
        "              \"y\": {\"len\": 8}},\n"
        " \"tasks\": [{\"kernel\": \"copy_f32\", \"args\": [\"x\", \"y\"]},\n"
        "           {\"name\": \"relu\", \"kernel\": \"relu_f32\", \"args\": [\"y\", \"y\"], \"blocks\": 3},\n"
        "           {\"kernel\": \"rownorm_f32\", \"args\": [\"y\"], \"scalars\": [4, 2], \"blocks\": 3,\n"
        "            \"after\": [\"relu\"]}],\n"
        " \"outputs\": [\"y\"]}\n";
/* A wrong argument count for each (hbgctl's check against hbgd's table)
 * and a shape rownorm_f32's own check refuses (hbgd's). */
static const char graph_bad[] =
        "{\"tensors\": {\"x\": {\"len\": 8}, \"y\": {\"len\": 8}},\n"
        " \"tasks\": [{\"kernel\": \"relu_f32\", \"args\": [\"x\"]},\n"
        "           {\"kernel\": \"rownorm_f32\", \"args\": [\"y\"], \"scalars\": [4]},\n"
        "           {\"kernel\": \"rownorm_f32\", \"args\": [\"y\"], \"scalars\": [5, 2]}]}\n";

static json_object *get(json_object *o, const char *key) {
        json_object *v = NULL;
        ck_assert_msg(json_object_object_get_ex(o, key, &v), "no \"%s\" in %s", key, json_object_to_json_string(o));
        return v;
}

START_TEST(graph_files) {
        char path[256], bin[512], file[128], out[65536];
        struct hbgd_proc *d = start_with_module("example", path, sizeof(path));
        const char *ctl = hbgctl_binary(bin, sizeof(bin));
        const char *S = d->socket_path;

        /* hbgctl run: the reference's bits. */
        float want[8];
        for (int i = 0; i < 8; i++)
                want[i] = -1.5f + 0.5f * (float)i;
        ref_relu(want, want, 8);
        ref_rownorm(want, 4, 2);
        snprintf(file, sizeof(file), "%s/ok.json", dir);
        write_file(file, graph_ok);
        int code = run_prog(ctl, (const char *const[]){ "--socket", S, "--json", "run", file, NULL }, out,
                            sizeof(out));
        ck_assert_msg(code == 0, "hbgctl run: %d:\n%s", code, out);
        json_object *o = json_tokener_parse(out);
        ck_assert_msg(o, "not JSON:\n%s", out);
        ck_assert_str_eq(json_object_get_string(get(o, "status")), "ok");
        json_object *y = get(get(o, "outputs"), "y"), *head = get(y, "head");
        ck_assert_int_eq(json_object_get_int64(get(y, "len")), 8);
        ck_assert_uint_eq(json_object_array_length(head), 8);
        float got[8];
        for (size_t i = 0; i < 8; i++)
                got[i] = (float)json_object_get_double(json_object_array_get_idx(head, i));
        assert_bits(got, want, 8, "hbgctl run");
        json_object_put(o);

        /* --dry-run: checked by hbgctl and hbgd; wrong counts named. */
        code = run_prog(ctl, (const char *const[]){ "--socket", S, "run", "--dry-run", file, NULL }, out,
                        sizeof(out));
        ck_assert_msg(code == 0 && strncmp(out, "ok: 3 tasks checked by hbgctl and hbgd", 38) == 0, "%d:\n%s", code,
                      out);
        /* --dot alone: the module's kernels from hbgd's table too. */
        code = run_prog(ctl, (const char *const[]){ "--socket", S, "run", "--dot", "-", file, NULL }, out,
                        sizeof(out));
        ck_assert_msg(code == 0 && strstr(out, "digraph") && strstr(out, "relu_f32"), "--dot: %d:\n%s", code, out);
        snprintf(file, sizeof(file), "%s/bad.json", dir);
        write_file(file, graph_bad);
        code = run_prog(ctl, (const char *const[]){ "--socket", S, "run", "--dry-run", file, NULL }, out,
                        sizeof(out));
        ck_assert_msg(code == 1, "dry run of bad.json: %d:\n%s", code, out);
        static const char *const errors[] = {
                "$.tasks[0]: kernel relu_f32 takes 2 tensor arguments, got 1",
                "$.tasks[1]: kernel rownorm_f32 takes 2 scalars, got 1",
                "$.tasks[2]: rownorm_f32: shape does not fit X",
                "3 errors in ",
        };
        for (size_t i = 0; i < sizeof(errors) / sizeof(errors[0]); i++)
                ck_assert_msg(strstr(out, errors[i]), "no '%s' in:\n%s", errors[i], out);
        /* ... and a run refuses it before anything runs. */
        code = run_prog(ctl, (const char *const[]){ "--socket", S, "run", file, NULL }, out, sizeof(out));
        ck_assert_msg(code == 1 && strstr(out, errors[0]), "run of bad.json: %d:\n%s", code, out);

        /* hbgctl kernels: each kernel's module, "built-in" for hbgd's own. */
        code = run_prog(ctl, (const char *const[]){ "--socket", S, "kernels", NULL }, out, sizeof(out));
        ck_assert_msg(code == 0, "%d:\n%s", code, out);
        unsigned rows = 0, from_module = 0;
        for (char *save = NULL, *line = strtok_r(out, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
                unsigned id;
                char name[64], module_[300];
                if (sscanf(line, "%u %63s %299s", &id, name, module_) != 3)
                        continue; /* the header */
                rows++;
                if (id < HBG_KERNEL_MODULE_FIRST) {
                        ck_assert_msg(strcmp(module_, "built-in") == 0, "%s", line);
                        continue;
                }
                ck_assert_msg(strcmp(module_, path) == 0, "%s", line);
                ck_assert_msg(strcmp(name, "relu_f32") == 0 ? strstr(line, "in x, out y") != NULL
                                                            : strstr(line, "inout X, u64 rows, u64 cols") != NULL,
                              "%s", line);
                from_module++;
        }
        ck_assert_uint_eq(rows, HBG_KERNEL_COUNT - 1 + 2);
        ck_assert_uint_eq(from_module, 2);
        code = run_prog(ctl, (const char *const[]){ "--socket", S, "--json", "kernels", NULL }, out, sizeof(out));
        ck_assert_msg(code == 0, "%d:\n%s", code, out);
        o = json_tokener_parse(out);
        ck_assert_msg(o, "not JSON:\n%s", out);
        json_object *ks = get(o, "kernels");
        ck_assert_uint_eq(json_object_array_length(ks), HBG_KERNEL_COUNT - 1 + 2);
        from_module = 0;
        for (size_t i = 0; i < json_object_array_length(ks); i++) {
                json_object *k = json_object_array_get_idx(ks, i);
                const char *name = json_object_get_string(get(k, "name")),
                           *mod = json_object_get_string(get(k, "module"));
                if (json_object_get_int64(get(k, "id")) < HBG_KERNEL_MODULE_FIRST) {
                        ck_assert_msg(strcmp(mod, "built-in") == 0, "%s: %s", name, mod);
                        continue;
                }
                ck_assert_msg(strcmp(mod, path) == 0, "%s: %s", name, mod);
                ck_assert(strcmp(name, "relu_f32") == 0 || strcmp(name, "rownorm_f32") == 0);
                from_module++;
        }
        ck_assert_uint_eq(from_module, 2);
        json_object_put(o);
        ck_assert_int_eq(daemon_stop(d, 10000), 0);
        daemon_destroy(d);
        teardown_dir();
}
END_TEST

/* ------------------------------------------------------------ the run contract */

/* A module's kernel that ignores a stop, or returns what is no errno,
 * fails its task all the same: -ETIME past the time budget (never a
 * success with half its outputs), -EIO; the next graph runs. */
START_TEST(run_contract) {
        char path[256], conf[128];
        setup_dir();
        module("misbehaving", path, sizeof(path));
        snprintf(conf, sizeof(conf), "%s/hbgd.conf", dir);
        write_conf(conf, path);
        FILE *f = fopen(conf, "a");
        ck_assert_ptr_nonnull(f);
        fprintf(f, "\n[limits]\nkernel_time_budget_ms = 1\n");
        ck_assert_int_eq(fclose(f), 0);
        struct hbgd_proc *d;
        ck_assert_int_eq(daemon_start(&d, (const char *const[]){ "--config", conf, NULL }, NULL), 0);
        hbg_client *c;
        ck_assert_msg(hbg_connect(&c, d->socket_path) == 0, "%s", hbg_last_error(NULL));
        static const struct {
                const char *kernel;
                int code;
        } cases[] = { { "tm_ignore_stop", -ETIME }, { "tm_bad_return", -EIO } };
        for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
                hbg_task t = HBG_TASK_INIT(cases[i].kernel);
                uint64_t g;
                ck_assert_msg(hbg_graph_add(c, &t, NULL) == 0, "%s", hbg_last_error(c));
                ck_assert_int_eq(hbg_graph_submit(c, &g), 0);
                ck_assert_int_eq(hbg_graph_wait(c, g, WAIT_MS), cases[i].code);
                hbg_graph_error_info e = HBG_GRAPH_ERROR_INFO_INIT;
                ck_assert_int_eq(hbg_graph_error(c, g, &e), 0);
                ck_assert_str_eq(e.kernel, cases[i].kernel);
                hbg_task ok = HBG_TASK_INIT("noop");
                ck_assert_int_eq(hbg_graph_add(c, &ok, NULL), 0);
                ck_assert_int_eq(hbg_graph_submit(c, &g), 0);
                ck_assert_int_eq(hbg_graph_wait(c, g, WAIT_MS), 0);
        }
        hbg_disconnect(c);
        ck_assert_int_eq(daemon_stop(d, 10000), 0);
        daemon_destroy(d);
        teardown_dir();
}
END_TEST

/* ------------------------------------------------------------ splitting, from the kernel table */

/* The counters tm_calls and tm_calls_split leave (tests/modules): calls,
 * the sum of the parts they were run as, the sum of the part counts. */
struct calls {
        uint32_t calls, part_sum, parts_sum;
};

/* One graph of `kernel` on counts (zeroed first), or a launch of recorded
 * graph `recorded` (UINT32_MAX: none) `launches` times: the counters. */
static struct calls run_counting(hbg_client *c, hbg_tensor counts, const char *kernel, uint8_t lanes,
                                 uint16_t blocks, uint32_t recorded, unsigned launches) {
        memset(hbg_tensor_data(c, counts), 0, sizeof(struct calls));
        uint64_t g;
        if (recorded == UINT32_MAX) {
                hbg_task t = HBG_TASK_INIT(kernel);
                arg(&t, counts, HBG_INOUT);
                t.lanes = lanes;
                t.blocks = blocks;
                ck_assert_msg(hbg_graph_add(c, &t, NULL) == 0, "%s", hbg_last_error(c));
                ck_assert_int_eq(hbg_graph_submit(c, &g), 0);
                ck_assert_msg(hbg_graph_wait(c, g, WAIT_MS) == 0, "%s: %s", kernel, hbg_last_error(c));
        }
        for (unsigned i = 0; recorded != UINT32_MAX && i < launches; i++) {
                ck_assert_msg(hbg_graph_launch(c, recorded, &g) == 0, "%s", hbg_last_error(c));
                ck_assert_msg(hbg_graph_wait(c, g, WAIT_MS) == 0, "launch: %s", hbg_last_error(c));
        }
        struct calls n;
        memcpy(&n, hbg_tensor_data(c, counts), sizeof(n));
        return n;
}

static void assert_calls(struct calls got, uint32_t calls, uint32_t part_sum, uint32_t parts_sum, const char *what) {
        ck_assert_msg(got.calls == calls && got.part_sum == part_sum && got.parts_sum == parts_sum,
                      "%s: %u calls, parts summing to %u, part counts to %u; want %u, %u, %u", what, got.calls,
                      got.part_sum, got.parts_sum, calls, part_sum, parts_sum);
}

/* A module kernel declared not splittable runs once, as part 0 of 1,
 * whatever the task's blocks and lanes say, with no guard of its own
 * (validation takes it from the kernel table): submitted, on a MIX task
 * and launched from a recording. Its splittable twin, the same code, is
 * run as every part, which shows the counters count. */
START_TEST(unsplit_runs_once) {
        char path[256];
        struct hbgd_proc *d = start_with_module("unsplit", path, sizeof(path));
        hbg_client *c;
        ck_assert_msg(hbg_connect(&c, d->socket_path) == 0, "%s", hbg_last_error(NULL));
        int unsplit = -1;
        for (size_t i = 0; i < hbg_client_kernel_count(c); i++) {
                hbg_kernel_desc k = HBG_KERNEL_DESC_INIT;
                ck_assert_int_eq(hbg_client_kernel_info(c, i, &k), 0);
                if (strcmp(k.name, "tm_calls") == 0)
                        unsplit = k.splittable;
        }
        ck_assert_int_eq(unsplit, 0);
        hbg_tensor counts;
        ck_assert_int_eq(hbg_tensor_alloc(c, sizeof(struct calls), &counts), 0);

        assert_calls(run_counting(c, counts, "tm_calls", HBG_LANES_AIV, 8, UINT32_MAX, 0), 1, 0, 1, "8 blocks");
        assert_calls(run_counting(c, counts, "tm_calls", HBG_LANES_MIX, 8, UINT32_MAX, 0), 1, 0, 1,
                     "8 blocks of 3 lanes");
        assert_calls(run_counting(c, counts, "tm_calls_split", HBG_LANES_AIV, 8, UINT32_MAX, 0), 8, 28, 64,
                     "splittable, 8 blocks");
        assert_calls(run_counting(c, counts, "tm_calls_split", HBG_LANES_MIX, 8, UINT32_MAX, 0), 24, 276, 576,
                     "splittable, 8 blocks of 3 lanes");

        uint32_t rec;
        ck_assert_int_eq(hbg_graph_record_begin(c), 0);
        hbg_task t = HBG_TASK_INIT("tm_calls");
        arg(&t, counts, HBG_INOUT);
        t.blocks = 8;
        ck_assert_msg(hbg_graph_add(c, &t, NULL) == 0, "%s", hbg_last_error(c));
        ck_assert_msg(hbg_graph_record_end(c, &rec) == 0, "%s", hbg_last_error(c));
        assert_calls(run_counting(c, counts, "tm_calls", 0, 0, rec, 2), 2, 0, 2, "two launches of 8 blocks");

        hbg_disconnect(c);
        ck_assert_int_eq(daemon_stop(d, 10000), 0);
        daemon_destroy(d);
        teardown_dir();
}
END_TEST

/* A task of many blocks whose block 0 failed runs no more of its blocks
 * (§10.6): one scheduler thread, 256 blocks of tm_calls_fail_first (part
 * 0 fails, every part counts its call). The first run takes a batch of
 * blocks (at most 2 x 8 clusters), and the task's later batches are not
 * run: far fewer than 256 calls, the graph failed with part 0's -EIO. */
START_TEST(failed_task_runs_no_more_blocks) {
        char path[256];
        struct hbgd_proc *d = start_with_module_threads("unsplit", 1, path, sizeof(path));
        hbg_client *c;
        ck_assert_msg(hbg_connect(&c, d->socket_path) == 0, "%s", hbg_last_error(NULL));
        hbg_tensor counts;
        ck_assert_int_eq(hbg_tensor_alloc(c, sizeof(struct calls), &counts), 0);
        memset(hbg_tensor_data(c, counts), 0, sizeof(struct calls));
        hbg_task t = HBG_TASK_INIT("tm_calls_fail_first");
        arg(&t, counts, HBG_INOUT);
        t.blocks = 256;
        ck_assert_msg(hbg_graph_add(c, &t, NULL) == 0, "%s", hbg_last_error(c));
        uint64_t g;
        ck_assert_int_eq(hbg_graph_submit(c, &g), 0);
        int err = hbg_graph_wait(c, g, WAIT_MS);
        ck_assert_msg(err == -EIO, "the graph: %s [%s]", hbg_strerror(err), hbg_last_error(c));
        struct calls n;
        memcpy(&n, hbg_tensor_data(c, counts), sizeof(n));
        ck_assert_msg(n.calls >= 1 && n.calls <= 16, "%u of 256 blocks ran after block 0 failed", n.calls);
        hbg_disconnect(c);
        ck_assert_int_eq(daemon_stop(d, 10000), 0);
        daemon_destroy(d);
        teardown_dir();
}
END_TEST

/* ------------------------------------------------------------ the session reply's limit */

START_TEST(table_limit) {
        char path[256], conf[128], out[8192], sock[128];
        setup_dir();
        snprintf(conf, sizeof(conf), "%s/hbgd.conf", dir);

        /* 30 kernels of long texts (about 45 KB of table): hbgd starts and
         * a client gets them all; so does hbgctl kernels, even with the
         * smallest max_message_size. */
        module("many_fit", path, sizeof(path));
        write_conf(conf, path);
        FILE *f = fopen(conf, "a");
        ck_assert_ptr_nonnull(f);
        fprintf(f, "\n[limits]\nmax_message_size = 1024\n");
        ck_assert_int_eq(fclose(f), 0);
        struct hbgd_proc *d;
        ck_assert_int_eq(daemon_start(&d, (const char *const[]){ "--config", conf, NULL }, NULL), 0);
        hbg_client *c;
        ck_assert_msg(hbg_connect(&c, d->socket_path) == 0, "%s", hbg_last_error(NULL));
        ck_assert_uint_eq(hbg_client_kernel_count(c), HBG_KERNEL_COUNT - 1 + 30);
        ck_assert_int_eq(hbg_client_kernel_id(c, "tm_many_bd"), HBG_KERNEL_MODULE_FIRST + 29);
        hbg_disconnect(c);
        char bin[512];
        static char big[262144];
        int got = run_prog(hbgctl_binary(bin, sizeof(bin)),
                           (const char *const[]){ "--socket", d->socket_path, "--json", "kernels", NULL }, big,
                           sizeof(big));
        ck_assert_msg(got == 0, "hbgctl kernels: %d:\n%.2000s", got, big);
        json_object *o = json_tokener_parse(big);
        ck_assert_msg(o, "not JSON:\n%.2000s", big);
        ck_assert_uint_eq(json_object_array_length(get(o, "kernels")), HBG_KERNEL_COUNT - 1 + 30);
        json_object_put(o);
        ck_assert_int_eq(daemon_stop(d, 10000), 0);
        daemon_destroy(d);

        /* 60 of them: the session reply could not carry the table. */
        module("many_over", path, sizeof(path));
        write_conf(conf, path);
        snprintf(sock, sizeof(sock), "%s/hbgd.sock", dir);
        static const char *const want[] = {
                "hbgd: the kernel table (73 kernels, 60 from modules) packs to ",
                " bytes in the session reply; a client reads at most 65536 bytes: load fewer module kernels",
        };
        int code = run_hbgd((const char *const[]){ "--config", conf, "--socket", sock, NULL }, out, sizeof(out));
        ck_assert_msg(code == 2, "hbgd started (or died: %d):\n%s", code, out);
        ck_assert_msg(strstr(out, want[0]) && strstr(out, want[1]), "start:\n%s", out);
        ck_assert_msg(access(sock, F_OK) != 0, "hbgd bound its socket");
        code = run_hbgd((const char *const[]){ "--check-config", conf, NULL }, out, sizeof(out));
        ck_assert_msg(code == 1, "--check-config: %d:\n%s", code, out);
        ck_assert_msg(strstr(out, want[0]) && strstr(out, want[1]), "--check-config:\n%s", out);
        /* The size said is above the limit. */
        unsigned long bytes = strtoul(strstr(out, want[0]) + strlen(want[0]), NULL, 10);
        ck_assert_uint_gt(bytes, HBG_WIRE_SESSION_REPLY_MAX);
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
        tcase_add_test(tc, two_modules);
        tcase_add_test(tc, producer);
        tcase_add_test(tc, graph_files);
        tcase_add_test(tc, table_limit);
        tcase_add_test(tc, run_contract);
        tcase_add_test(tc, unsplit_runs_once);
        tcase_add_test(tc, failed_task_runs_no_more_blocks);
        suite_add_tcase(s, tc);
        return s;
}

const struct check_main check_main = {
        .suite = suite,
        .setup = daemon_util_setup,
};
