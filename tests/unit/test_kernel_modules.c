/* SPDX-License-Identifier: MIT */
/*
 * Kernel modules through hbgd's own loader (daemon/kernel_modules.c) and
 * kernel table (daemon/engine/kernels.c), in this process: the example
 * module's kernels against references computed here, for several splits,
 * bit for bit; hostile arguments refused by the generic checks before a
 * module's check() runs; each refusal of the loader with its message; the
 * built-ins registered through the same definitions. hbgd itself refusing
 * to start is tests/e2e/test_e2e_modules.c.
 *
 * The build tree may lie under a directory writable by others: every test
 * copies the modules it loads into a fresh 0755 directory under /tmp
 * (sticky), which the loader accepts.
 */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "daemon/engine/kernels.h"
#include "daemon/kernel_modules.h"
#include "daemon/kernel_rows.h"
#include "proto/kernel_table.h"
#include "tests/check_main.h"
#include "tests/module_util.h"

static char dir[64];

/* Copy src to dir/name (0644), return the new path (static buffer per call
 * site: the caller copies). */
static void install(const char *src, const char *name, char *ret, size_t len) {
        snprintf(ret, len, "%s/%s", dir, name);
        module_copy(src, ret);
}

static void test_module(const char *variant, char *ret, size_t len) {
        char src[512], name[64];
        snprintf(src, sizeof(src), "%s/%s.so", HBG_TEST_MODULES_DIR, variant);
        snprintf(name, sizeof(name), "%s.so", variant);
        install(src, name, ret, len);
}

static void setup_dir(void) {
        snprintf(dir, sizeof(dir), "/tmp/hbg-kmod-XXXXXX");
        ck_assert_ptr_nonnull(mkdtemp(dir));
        ck_assert_int_eq(chmod(dir, 0755), 0);
}

static void teardown_dir(void) {
        char cmd[128];
        snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
        if (system(cmd) != 0)
                fprintf(stderr, "cannot remove %s\n", dir);
}

static int load(const char *list, char *err, size_t len) {
        return kernel_modules_load(list, err, len);
}

/* ------------------------------------------------------------ built-ins */

/* The built-ins came in through kernel_register()'s definitions: ids,
 * signatures (the shared table's own entries) and order unchanged. */
START_TEST(builtins_registered) {
        ck_assert_uint_eq(kernel_count(), HBG_KERNEL_COUNT - 1);
        for (uint16_t id = 1; id < HBG_KERNEL_COUNT; id++) {
                const struct kernel_info *k = kernel_lookup(id);
                ck_assert_ptr_nonnull(k);
                ck_assert_ptr_eq(k->sig, kernel_sig_by_id(id));
                ck_assert_ptr_eq(kernel_at(id - 1u), k);
                ck_assert_uint_eq(k->index, id - 1u);
                ck_assert_ptr_null(k->sig->module);
                ck_assert_ptr_eq(kernel_lookup_name(k->sig->name), k);
        }
        ck_assert_ptr_null(kernel_lookup(HBG_KERNEL_MODULE_FIRST));
        ck_assert_ptr_null(kernel_at(HBG_KERNEL_COUNT - 1));
}
END_TEST

/* Without modules hbgd's table is a client's built-in one: the packed
 * rows' digest is the client's (libclient sends it, and the reply carries
 * no rows), and a reply to a client without it carries them all. Any
 * field of a row changed, the digest changes. */
START_TEST(builtin_digest) {
        struct kernel_rows_packed p;
        ck_assert_int_eq(kernel_rows_pack(&p), 0);
        uint64_t mine = kernel_table_builtin_digest();
        ck_assert_uint_ne(mine, 0);
        ck_assert_uint_eq(p.digest, mine);
        ck_assert_uint_eq(kernel_table_builtin_digest(), mine); /* worked out once, the same */
        Hbg__SessionReply r = HBG__SESSION_REPLY__INIT;
        kernel_rows_attach(&p, mine, &r);
        ck_assert(r.kernels_by_digest);
        ck_assert_uint_eq(r.base.n_unknown_fields, 0);
        const uint64_t others[] = { 0, mine ^ 1 };
        for (size_t i = 0; i < 2; i++) {
                Hbg__SessionReply o = HBG__SESSION_REPLY__INIT;
                kernel_rows_attach(&p, others[i], &o);
                ck_assert(!o.kernels_by_digest);
                ck_assert_uint_eq(o.base.n_unknown_fields, kernel_count());
        }
        kernel_rows_packed_free(&p);

        /* Each change to one row, alone. */
        uint64_t base = KERNEL_SIG_DIGEST_START;
        for (size_t i = 0; i < kernel_sig_count(); i++)
                base = kernel_sig_digest(base, kernel_sig_at(i));
        ck_assert_uint_eq(kernel_sig_digest_end(base, kernel_sig_count()), mine);
        const struct hbg_kernel_sig *gemm = kernel_sig_by_name("gemm_f32");
        ck_assert_ptr_nonnull(gemm);
        ck_assert_uint_ge(gemm->n_tensors, 2);
        ck_assert_uint_ge(gemm->n_scalars, 1);
        for (unsigned change = 0; change < 14; change++) {
                struct hbg_kernel_sig k = *gemm;
                switch (change) {
                case 0: k.id++; break;
                case 1: k.name = "gemm_f33"; break;
                case 2: k.summary = "another summary"; break;
                case 3: k.length_rule = ""; break;
                case 4: k.module = "/usr/lib/hbg/kernels/x.so"; break;
                case 5: k.splittable = !k.splittable; break;
                case 6: k.in_place = !k.in_place; break;
                case 7: k.tensors[1].dir = k.tensors[1].dir == HBG_DIR_IN ? HBG_DIR_OUT : HBG_DIR_IN; break;
                case 8: k.scalars[0].name = "q"; break;
                case 9: k.n_scalars--; break;
                case 10: k.length = k.length == HBG_LENGTH_ANY ? HBG_LENGTH_EQUAL : HBG_LENGTH_ANY; break;
                case 11: k.tensors[0].name = "z"; break;
                case 12: k.scalars[0].kind = k.scalars[0].kind == HBG_SCALAR_U64 ? HBG_SCALAR_I64 : HBG_SCALAR_U64; break;
                case 13: k.n_tensors--; break;
                }
                uint64_t h = KERNEL_SIG_DIGEST_START;
                for (size_t i = 0; i < kernel_sig_count(); i++)
                        h = kernel_sig_digest(h, kernel_sig_at(i) == gemm ? &k : kernel_sig_at(i));
                ck_assert_msg(kernel_sig_digest_end(h, kernel_sig_count()) != mine, "change %u kept the digest",
                              change);
        }
        /* A row fewer. */
        uint64_t h = KERNEL_SIG_DIGEST_START;
        for (size_t i = 0; i + 1 < kernel_sig_count(); i++)
                h = kernel_sig_digest(h, kernel_sig_at(i));
        ck_assert_uint_ne(kernel_sig_digest_end(h, kernel_sig_count() - 1), mine);
}
END_TEST

/* ------------------------------------------------------------ the example */

#define ROWS 13u
#define COLS 37u

static float input(unsigned i) {
        /* Negative, positive, zero and a subnormal among them. */
        static const float special[] = { 0.0f, -0.0f, 1e-40f, -3.5f };
        if (i % 17 == 0)
                return special[(i / 17) % 4];
        return (float)((int)(i * 7919u % 201u) - 100) / 16.0f;
}

static int run_parts(const struct kernel_info *k, uint8_t *heap, const struct hbg_kernel_args *a, uint32_t parts) {
        struct kernel_run_ctx ctx;
        kernel_run_ctx_init(&ctx, kernel_budget_ns(0), NULL);
        /* Last part first: any order gives the same bits. */
        for (uint32_t p = parts; p-- > 0;) {
                int r = k->run(&ctx.k, heap, a, p, parts);
                if (r < 0)
                        return r;
        }
        return 0;
}

static struct hbg_kernel_tensor_arg T(uint64_t off, uint64_t len, uint32_t dir_) {
        return (struct hbg_kernel_tensor_arg){ .offset = off, .length = len, .direction = dir_ };
}

START_TEST(example_module) {
        char path[256], err[1024];
        setup_dir();
        install(HBG_TEST_EXAMPLE_MODULE, "hbg-nn.so", path, sizeof(path));
        ck_assert_msg(load(path, err, sizeof(err)) == 0, "%s", err);
        const struct kernel_info *relu = kernel_lookup_name("relu_f32"), *rn = kernel_lookup_name("rownorm_f32");
        ck_assert_ptr_nonnull(relu);
        ck_assert_ptr_nonnull(rn);
        ck_assert_uint_eq(relu->sig->id, HBG_KERNEL_MODULE_FIRST);
        ck_assert_uint_eq(rn->sig->id, HBG_KERNEL_MODULE_FIRST + 1);
        ck_assert_ptr_eq(kernel_lookup(HBG_KERNEL_MODULE_FIRST + 1), rn);
        ck_assert_uint_eq(kernel_count(), HBG_KERNEL_COUNT + 1);
        ck_assert_ptr_eq(kernel_at(HBG_KERNEL_COUNT), rn);
        ck_assert_str_eq(rn->sig->module, path);
        ck_assert(relu->sig->in_place && relu->sig->splittable);

        const size_t n = ROWS * COLS, bytes = n * sizeof(float);
        float *heap = aligned_alloc(64, (3 * bytes + 63) / 64 * 64), ref[ROWS * COLS];
        uint8_t *h = (uint8_t *)heap;
        for (uint32_t parts = 1; parts <= 9; parts++) {
                /* relu_f32, out of place and in place. */
                for (unsigned i = 0; i < n; i++)
                        heap[i] = input(i), ref[i] = input(i) > 0.0f ? input(i) : 0.0f;
                struct hbg_kernel_args a = { .n_tensors = 2, .tensors = { T(0, bytes, HBG_DIR_IN),
                                                                           T(bytes, bytes, HBG_DIR_OUT) } };
                const char *why;
                ck_assert_msg(kernel_validate(relu, &a, 3 * bytes, &why) == 0, "%s", why);
                ck_assert_uint_eq(kernel_cost(relu, &a, parts), n + 1);
                ck_assert_int_eq(run_parts(relu, h, &a, parts), 0);
                ck_assert_msg(memcmp(heap + n, ref, bytes) == 0, "relu_f32, %u parts", parts);
                a.tensors[1] = T(0, bytes, HBG_DIR_OUT);
                ck_assert_msg(kernel_validate(relu, &a, 3 * bytes, &why) == 0, "in place: %s", why);
                ck_assert_int_eq(run_parts(relu, h, &a, parts), 0);
                ck_assert_msg(memcmp(heap, ref, bytes) == 0, "relu_f32 in place, %u parts", parts);

                /* rownorm_f32: the row's sum of squares in double, in
                 * column order, then each element divided in double. */
                for (unsigned i = 0; i < n; i++)
                        heap[i] = input(i);
                for (unsigned r = 0; r < ROWS; r++) {
                        double sum = 0.0;
                        for (unsigned c = 0; c < COLS; c++)
                                sum += (double)input(r * COLS + c) * (double)input(r * COLS + c);
                        for (unsigned c = 0; c < COLS; c++)
                                ref[r * COLS + c] =
                                        sum == 0.0 ? input(r * COLS + c)
                                                   : (float)((double)input(r * COLS + c) / sqrt(sum));
                }
                struct hbg_kernel_args b = { .n_tensors = 1, .n_scalars = 2,
                                             .tensors = { T(0, bytes, HBG_DIR_INOUT) }, .scalars = { ROWS, COLS } };
                ck_assert_msg(kernel_validate(rn, &b, 3 * bytes, &why) == 0, "%s", why);
                ck_assert_int_eq(run_parts(rn, h, &b, parts), 0);
                ck_assert_msg(memcmp(heap, ref, bytes) == 0, "rownorm_f32, %u parts", parts);
        }
        /* Its own check, named by hbgd. */
        struct hbg_kernel_args b = { .n_tensors = 1, .n_scalars = 2, .tensors = { T(0, 64, HBG_DIR_INOUT) },
                                     .scalars = { 4, 5 } };
        const char *why;
        ck_assert_int_eq(kernel_validate(rn, &b, 3 * bytes, &why), -EINVAL);
        ck_assert_str_eq(why, "rownorm_f32: shape does not fit X");
        b.scalars[0] = 0;
        ck_assert_int_eq(kernel_validate(rn, &b, 3 * bytes, &why), -EINVAL);
        ck_assert_str_eq(why, "rownorm_f32: rows and cols must be at least 1");
        /* Bounded like a built-in: a stop word seen at the first slow check. */
        for (unsigned i = 0; i < n; i++)
                heap[i] = 1.0f;
        _Atomic uint32_t stop = 1;
        struct kernel_run_ctx ctx;
        kernel_run_ctx_init(&ctx, kernel_budget_ns(0), &stop);
        ctx.k.credit = 1;
        b.scalars[0] = ROWS;
        b.scalars[1] = COLS;
        ck_assert_int_eq(rn->run(&ctx.k, h, &b, 0, 1), -ECANCELED);
        ck_assert_int_eq(ctx.stopped, KERNEL_STOP_CANCEL);
        free(heap);
        teardown_dir();
}
END_TEST

/* ------------------------------------------------------------ hostile arguments */

/* tm_count(in in, out out, u64 k, f32 f): check() counts its calls and
 * run() writes the count. Every generic refusal comes before it. */
START_TEST(generic_checks_first) {
        char path[256], err[1024];
        setup_dir();
        test_module("counting", path, sizeof(path));
        ck_assert_msg(load(path, err, sizeof(err)) == 0, "%s", err);
        const struct kernel_info *k = kernel_lookup_name("tm_count");
        ck_assert_ptr_nonnull(k);
        const uint64_t heap_size = 4096;
        const struct hbg_kernel_args good = { .n_tensors = 2, .n_scalars = 2,
                                              .tensors = { T(0, 64, HBG_DIR_IN), T(64, 64, HBG_DIR_OUT) },
                                              .scalars = { 7, 0 } };
        struct hbg_kernel_args bad[12];
        for (unsigned i = 0; i < 12; i++)
                bad[i] = good;
        bad[0].n_tensors = 1;                           /* count */
        bad[1].n_scalars = 3;
        bad[2].tensors[0].direction = HBG_DIR_OUT;      /* direction */
        bad[3].tensors[1].offset = heap_size;           /* outside the heap */
        bad[4].tensors[0].offset = UINT64_MAX - 3;      /* overflow */
        bad[5].tensors[1].offset = 32;                  /* overlap */
        bad[6].tensors[0].length = 32;                  /* length rule */
        bad[7].tensors[1].reserved = 1;
        bad[8].tensors[0].offset = 2;                   /* alignment */
        bad[9].tensors[1].length = 0;
        bad[10].scalars[1] = UINT64_C(1) << 32;         /* f32 upper bits */
        bad[11].tensors[1] = T(0, 64, HBG_DIR_OUT);     /* in place: not allowed */
        uint8_t *heap = aligned_alloc(64, heap_size);
        for (unsigned i = 0; i < 12; i++) {
                const char *why;
                ck_assert_msg(kernel_validate(k, &bad[i], heap_size, &why) < 0, "hostile case %u accepted", i);
                ck_assert_msg(strncmp(why, "tm_count: ", 10) == 0, "case %u: %s", i, why);
                ck_assert_msg(strstr(why, "k must be 7") == NULL, "case %u reached the module's check: %s", i,
                              why);
        }
        /* No call of check() so far. */
        ck_assert_int_eq(run_parts(k, heap, &good, 1), 0);
        ck_assert(((float *)(void *)(heap + 64))[0] == 0.0f);
        /* Then its own check, with hbgd's prefix, and its count. */
        struct hbg_kernel_args own = good;
        own.scalars[0] = 6;
        const char *why;
        ck_assert_int_eq(kernel_validate(k, &own, heap_size, &why), -ERANGE);
        ck_assert_str_eq(why, "tm_count: k must be 7");
        ck_assert_int_eq(kernel_validate(k, &good, heap_size, &why), 0);
        ck_assert_int_eq(run_parts(k, heap, &good, 1), 0);
        ck_assert(((float *)(void *)(heap + 64))[0] == 2.0f);
        free(heap);
        teardown_dir();
}
END_TEST

/* ------------------------------------------------------------ refusals */

static const struct refusal {
        const char *variant;
        const char *reason;     /* after "kernel module PATH: " */
} refusals[] = {
        { "init_fail", "hbg_kernel_module_init failed: Operation not supported" },
        { "clash_builtin", "kernel 'add_f32': name clash with the built-in kernel add_f32" },
        { "bad_name", "kernel name 'Bad-Name' is not [a-z0-9_]{1,31}" },
        { "dummy_name", "kernel 'dummy': the name is reserved (graph files give it to a task that runs nothing)" },
        { "no_run", "kernel 'tm_count': no run function" },
        { "too_many_args", "kernel 'tm_count': too many tensor arguments (9; at most 8)" },
        { "bad_dir", "kernel 'tm_count': tensor out: bad direction 9 (in 1, out 2, inout 3)" },
        { "bad_version", "kernel 'tm_count': built for kernel API version 2; this hbgd speaks versions 1 to 1" },
        { "bad_size", "kernel 'tm_count': kernel definition of size " },
        { "small_size", "kernel 'tm_count': kernel definition size " },
        { "empty", "registers no kernel" },
        { "no_init", "no function hbg_kernel_module_init (not an hbg kernel module)" },
};

START_TEST(refused) {
        const struct refusal *c = &refusals[_i];
        char path[256], err[1024], want[512];
        setup_dir();
        test_module(c->variant, path, sizeof(path));
        ck_assert_int_eq(load(path, err, sizeof(err)), -EINVAL);
        snprintf(want, sizeof(want), "kernel module %s: ", path);
        ck_assert_msg(strncmp(err, want, strlen(want)) == 0 && strstr(err, c->reason), "%s: %s", c->variant, err);
        /* Nothing of it stays in the table. */
        ck_assert_uint_eq(kernel_count(), HBG_KERNEL_COUNT - 1);
        ck_assert_ptr_null(kernel_lookup_name("tm_count"));
        teardown_dir();
}
END_TEST

/* Two modules with one name: the second is refused, naming the first. */
START_TEST(clash_between_modules) {
        char a[256], b[256], list[600], err[1024], want[800];
        setup_dir();
        test_module("clash_a", a, sizeof(a));
        test_module("clash_b", b, sizeof(b));
        snprintf(list, sizeof(list), "%s %s", a, b);
        ck_assert_int_eq(load(list, err, sizeof(err)), -EINVAL);
        snprintf(want, sizeof(want), "kernel module %s: kernel 'tm_clash': name clash with kernel tm_clash of module %s",
                 b, a);
        ck_assert_str_eq(err, want);
        teardown_dir();
}
END_TEST

/* The file's and its directories' checks, each naming what failed. */
START_TEST(file_checks) {
        char path[256], err[1024], want[1200], list[600];
        setup_dir();
        test_module("counting", path, sizeof(path));

        ck_assert_int_eq(load("relative/counting.so", err, sizeof(err)), -EINVAL);
        ck_assert_str_eq(err, "kernel module relative/counting.so: not an absolute path");

        snprintf(list, sizeof(list), "%s/missing.so", dir);
        ck_assert_int_eq(load(list, err, sizeof(err)), -EINVAL);
        snprintf(want, sizeof(want), "kernel module %s: cannot open: No such file or directory", list);
        ck_assert_str_eq(err, want);

        ck_assert_int_eq(load(dir, err, sizeof(err)), -EINVAL);
        snprintf(want, sizeof(want), "kernel module %s: not a regular file", dir);
        ck_assert_str_eq(err, want);

        ck_assert_int_eq(chmod(path, 0666), 0);
        ck_assert_int_eq(load(path, err, sizeof(err)), -EINVAL);
        snprintf(want, sizeof(want), "kernel module %s: writable by group or others (mode 0666)", path);
        ck_assert_str_eq(err, want);
        ck_assert_int_eq(chmod(path, 0644), 0);

        ck_assert_int_eq(chmod(dir, 0777), 0);
        ck_assert_int_eq(load(path, err, sizeof(err)), -EINVAL);
        snprintf(want, sizeof(want), "kernel module %s: directory %s is writable by group or others (mode 0777)",
                 path, dir);
        ck_assert_str_eq(err, want);
        /* Sticky is no excuse for the module's own directory. */
        ck_assert_int_eq(chmod(dir, 01777), 0);
        ck_assert_int_eq(load(path, err, sizeof(err)), -EINVAL);
        ck_assert_int_eq(chmod(dir, 0755), 0);

        if (geteuid() == 0) {
                ck_assert_int_eq(chown(path, 65534, 65534), 0);
                ck_assert_int_eq(load(path, err, sizeof(err)), -EINVAL);
                snprintf(want, sizeof(want), "kernel module %s: owned by uid 65534, not by root or hbgd's uid 0",
                         path);
                ck_assert_str_eq(err, want);
                ck_assert_int_eq(chown(path, 0, 0), 0);
        }
        /* A directory above writable by others and not sticky. */
        char sub[128], inner[256];
        snprintf(sub, sizeof(sub), "%s/sub", dir);
        ck_assert_int_eq(mkdir(sub, 0755), 0);
        snprintf(inner, sizeof(inner), "%s/m.so", sub);
        ck_assert_int_eq(rename(path, inner), 0);
        ck_assert_int_eq(chmod(dir, 0757), 0);
        ck_assert_int_eq(load(inner, err, sizeof(err)), -EINVAL);
        snprintf(want, sizeof(want),
                 "kernel module %s: directory %s is writable by group or others (mode 0757, not sticky)", inner, dir);
        ck_assert_str_eq(err, want);
        ck_assert_int_eq(chmod(dir, 0755), 0);
        if (geteuid() == 0) {
                /* A directory above owned by another user, who could swap
                 * what is below it. */
                ck_assert_int_eq(chown(dir, 65534, 65534), 0);
                ck_assert_int_eq(load(inner, err, sizeof(err)), -EINVAL);
                snprintf(want, sizeof(want),
                         "kernel module %s: directory %s is owned by uid 65534, not by root or hbgd's uid 0", inner,
                         dir);
                ck_assert_str_eq(err, want);
                ck_assert_int_eq(chown(dir, 0, 0), 0);
                /* A symbolic link on the configured path owned by another
                 * user (the real path is fine). */
                char link[256], via[300];
                snprintf(link, sizeof(link), "%s/link", dir);
                ck_assert_int_eq(symlink(sub, link), 0);
                ck_assert_int_eq(lchown(link, 65534, 65534), 0);
                snprintf(via, sizeof(via), "%s/m.so", link);
                ck_assert_int_eq(load(via, err, sizeof(err)), -EINVAL);
                snprintf(want, sizeof(want),
                         "kernel module %s: symbolic link %s is owned by uid 65534, not by root or hbgd's uid 0", via,
                         link);
                ck_assert_str_eq(err, want);
                ck_assert_int_eq(unlink(link), 0);
        }
        /* Sticky above (like /tmp): fine. */
        ck_assert_int_eq(chmod(dir, 01757), 0);
        ck_assert_msg(load(inner, err, sizeof(err)) == 0, "%s", err);
        ck_assert_ptr_nonnull(kernel_lookup_name("tm_count"));
        ck_assert_int_eq(chmod(dir, 0755), 0);
        teardown_dir();
}
END_TEST

/* The session reply's kernel table, packed once at start
 * (kernel_rows_pack()), is byte for byte the table packed as rows, with a
 * module's kernels too, and reads back as every kernel. */
START_TEST(session_reply_table_packed_once) {
        char path[256], err[1024];
        setup_dir();
        install(HBG_TEST_EXAMPLE_MODULE, "hbg-nn.so", path, sizeof(path));
        ck_assert_msg(load(path, err, sizeof(err)) == 0, "%s", err);
        ck_assert_uint_gt(kernel_module_kernels(), 0);
        /* The rows go after the reply's own fields (protobuf-c writes a
         * message's unknown fields last): the same bytes only while
         * kernels is its highest-numbered field set with them
         * (kernels_by_digest never is). */
        const ProtobufCMessageDescriptor *desc = &hbg__session_reply__descriptor;
        const ProtobufCFieldDescriptor *kf = protobuf_c_message_descriptor_get_field_by_name(desc, "kernels");
        ck_assert_ptr_nonnull(kf);
        for (unsigned i = 0; i < desc->n_fields; i++)
                ck_assert_msg(desc->fields[i].id <= kf->id || strcmp(desc->fields[i].name, "kernels_by_digest") == 0,
                              "SessionReply.%s (%u) comes after kernels (%u)", desc->fields[i].name,
                              desc->fields[i].id, kf->id);
        Hbg__SessionReply rows = HBG__SESSION_REPLY__INIT, packed = HBG__SESSION_REPLY__INIT;
        rows.session_id = packed.session_id = 7;
        rows.first_id = packed.first_id = 1u << 20;
        rows.fds = packed.fds = 5;
        void *mem = kernel_rows_new(&rows.kernels, &rows.n_kernels);
        ck_assert_ptr_nonnull(mem);
        struct kernel_rows_packed p;
        ck_assert_int_eq(kernel_rows_pack(&p), 0);
        /* With a module's kernels, the table is no client's built-in one. */
        ck_assert_uint_ne(p.digest, kernel_table_builtin_digest());
        kernel_rows_attach(&p, kernel_table_builtin_digest(), &packed);
        ck_assert(!packed.kernels_by_digest);
        Hbg__Envelope a = HBG__ENVELOPE__INIT, b = HBG__ENVELOPE__INIT;
        a.msg_case = b.msg_case = HBG__ENVELOPE__MSG_SESSION_REPLY;
        a.session_reply = &rows;
        b.session_reply = &packed;
        size_t na = hbg__envelope__get_packed_size(&a), nb = hbg__envelope__get_packed_size(&b);
        ck_assert_uint_eq(na, nb);
        uint8_t *ba = malloc(na), *bb = malloc(nb);
        ck_assert_uint_eq(hbg__envelope__pack(&a, ba), na);
        ck_assert_uint_eq(hbg__envelope__pack(&b, bb), nb);
        ck_assert(memcmp(ba, bb, na) == 0);
        Hbg__Envelope *back = hbg__envelope__unpack(NULL, nb, bb);
        ck_assert_ptr_nonnull(back);
        ck_assert_uint_eq(back->session_reply->n_kernels, kernel_count());
        ck_assert_uint_eq(back->session_reply->base.n_unknown_fields, 0);
        for (size_t i = 0; i < kernel_count(); i++) {
                ck_assert_uint_eq(back->session_reply->kernels[i]->id, kernel_at(i)->sig->id);
                ck_assert_str_eq(back->session_reply->kernels[i]->name, kernel_at(i)->sig->name);
        }
        hbg__envelope__free_unpacked(back, NULL);
        kernel_rows_packed_free(&p);
        free(mem);
        free(ba);
        free(bb);
        teardown_dir();
}
END_TEST

static Suite *suite(void) {
        Suite *s = suite_create("kernel_modules");
        TCase *tc = tcase_create("kernel_modules");
        tcase_add_test(tc, builtins_registered);
        tcase_add_test(tc, builtin_digest);
        tcase_add_test(tc, example_module);
        tcase_add_test(tc, generic_checks_first);
        tcase_add_loop_test(tc, refused, 0, (int)(sizeof(refusals) / sizeof(refusals[0])));
        tcase_add_test(tc, clash_between_modules);
        tcase_add_test(tc, file_checks);
        tcase_add_test(tc, session_reply_table_packed_once);
        suite_add_tcase(s, tc);
        return s;
}

const struct check_main check_main = { .suite = suite };
