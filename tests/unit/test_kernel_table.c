/* SPDX-License-Identifier: MIT */
/*
 * A hostile hbgd's kernel table (SessionReply.kernels, STATUS_KERNELS), as
 * libhbgclient and hbgctl import it (proto/kernel_table.c): every kind of
 * bad table is refused with its reason and leaves nothing behind, and the
 * largest table a client accepts crosses the wire whole.
 */
#include <check.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "hbg/hbg.h"
#include "common/kernel_sig.h"
#include "proto/kernel_table.h"
#include "proto/wire.h"
#include "shm/layout.h"
#include "tests/check_main.h"

/* The built-ins as hbgd's rows (as daemon/kernel_rows.c sends them), with
 * room for `extra` more rows; everything in one struct to mutate. */
#define TABLE_ROOM (KERNEL_TABLE_MAX + 2)
struct rows {
        Hbg__KernelInfo k[TABLE_ROOM];
        Hbg__KernelInfo *p[TABLE_ROOM];
        Hbg__KernelArg a[HBG_KERNEL_COUNT][HBG_MAX_TENSOR_ARGS + HBG_MAX_SCALAR_ARGS + 1];
        Hbg__KernelArg *ap[HBG_KERNEL_COUNT][HBG_MAX_TENSOR_ARGS + HBG_MAX_SCALAR_ARGS + 1];
        char names[TABLE_ROOM][24];
        size_t n;
};

static struct rows *builtin_rows(void) {
        struct rows *r = calloc(1, sizeof(*r));
        ck_assert_ptr_nonnull(r);
        r->n = kernel_sig_count();
        for (size_t i = 0; i < r->n; i++) {
                const struct hbg_kernel_sig *k = kernel_sig_at(i);
                Hbg__KernelInfo *x = &r->k[i];
                hbg__kernel_info__init(x);
                x->id = k->id;
                x->name = (char *)k->name;
                x->summary = (char *)k->summary;
                x->length_rule = (char *)k->length_rule;
                x->module = (char *)"";
                x->length = (Hbg__KernelLength)k->length;
                x->in_place = k->in_place;
                x->splittable = k->splittable;
                x->args = r->ap[i];
                for (unsigned a = 0; a < k->n_tensors + k->n_scalars; a++) {
                        bool t = a < k->n_tensors;
                        hbg__kernel_arg__init(&r->a[i][a]);
                        r->a[i][a].name = (char *)(t ? k->tensors[a].name : k->scalars[a - k->n_tensors].name);
                        r->a[i][a].kind = (char *)(t ? kernel_sig_dir_name(k->tensors[a].dir)
                                                     : kernel_sig_scalar_kind_name(k->scalars[a - k->n_tensors].kind));
                        r->ap[i][a] = &r->a[i][a];
                        x->n_args++;
                }
                r->p[i] = x;
        }
        return r;
}

/* Append module kernel rows with ids from `first` (names "m0", "m1", ...). */
static void add_module_rows(struct rows *r, size_t n, uint32_t first) {
        for (size_t i = 0; i < n; i++) {
                Hbg__KernelInfo *x = &r->k[r->n];
                hbg__kernel_info__init(x);
                x->id = first + (uint32_t)i;
                snprintf(r->names[r->n], sizeof(r->names[0]), "m%zu", i);
                x->name = r->names[r->n];
                x->module = (char *)"/usr/lib/hbg/kernels/example.so";
                r->p[r->n] = x;
                r->n++;
        }
}

/* Import must fail with -EPROTO and a message containing `why`. */
static void refused(struct rows *r, const char *why, const char *what) {
        struct kernel_table t;
        char buf[256] = "";
        int err = kernel_table_import(&t, r->p, r->n, buf, sizeof(buf));
        ck_assert_msg(err == -EPROTO, "%s: imported (%d)", what, err);
        ck_assert_msg(strstr(buf, why), "%s: message \"%s\" lacks \"%s\"", what, buf, why);
        ck_assert_ptr_null(t.owned);
        ck_assert_uint_eq(t.n, 0);
        kernel_table_free(&t);
        free(r);
}

START_TEST(kernel_table_hostile) {
        /* The honest table: built-ins and a module's kernels, by id and
         * by name, strings copied. */
        struct rows *r = builtin_rows();
        add_module_rows(r, 3, HBG_KERNEL_MODULE_FIRST);
        struct kernel_table t;
        char buf[256];
        ck_assert_int_eq(kernel_table_import(&t, r->p, r->n, buf, sizeof(buf)), 0);
        ck_assert_uint_eq(t.n, kernel_sig_count() + 3);
        ck_assert(t.from_hbgd);
        for (size_t i = 0; i < kernel_sig_count(); i++) {
                const struct hbg_kernel_sig *k = kernel_sig_at(i), *c = kernel_table_by_id(&t, k->id);
                ck_assert_ptr_nonnull(c);
                ck_assert_ptr_eq(kernel_table_by_name(&t, k->name), c);
                ck_assert_ptr_ne(c->name, k->name);
                ck_assert_str_eq(c->name, k->name);
                char u1[160], u2[160];
                ck_assert_str_eq(kernel_sig_usage(c, u1, sizeof(u1)), kernel_sig_usage(k, u2, sizeof(u2)));
                ck_assert_int_eq(c->length, k->length);
                ck_assert_int_eq(c->in_place, k->in_place);
                ck_assert_ptr_null(c->module);
        }
        const struct hbg_kernel_sig *m = kernel_table_by_id(&t, HBG_KERNEL_MODULE_FIRST + 2);
        ck_assert_ptr_nonnull(m);
        ck_assert_str_eq(m->name, "m2");
        ck_assert_str_eq(m->module, "/usr/lib/hbg/kernels/example.so");
        ck_assert_ptr_null(kernel_table_by_id(&t, HBG_KERNEL_MODULE_FIRST + 3));
        ck_assert_ptr_null(kernel_table_by_id(&t, HBG_KERNEL_COUNT));
        ck_assert_ptr_null(kernel_table_by_id(&t, 0));
        ck_assert_ptr_null(kernel_table_by_name(&t, "nope"));
        kernel_table_free(&t);
        free(r);

        /* An hbgd older than the table: the built-ins as compiled. */
        kernel_table_builtin(&t);
        ck_assert(!t.from_hbgd);
        ck_assert_uint_eq(t.n, kernel_sig_count());
        ck_assert_ptr_eq(kernel_table_by_id(&t, HBG_KERNEL_GEMM_F32), kernel_sig_by_id(HBG_KERNEL_GEMM_F32));
        ck_assert_ptr_eq(kernel_table_by_name(&t, "noop"), kernel_sig_by_id(HBG_KERNEL_NOOP));
        kernel_table_free(&t);

        /* Every rule broken once. */
        r = builtin_rows();
        r->n = 0;
        refused(r, "0 kernels", "an empty table");
        r = builtin_rows();
        add_module_rows(r, KERNEL_TABLE_MAX + 1 - r->n, HBG_KERNEL_MODULE_FIRST);
        refused(r, "kernels (1 to", "too many kernels");
        r = builtin_rows();
        add_module_rows(r, HBG_KERNEL_MODULE_MAX + 1, HBG_KERNEL_MODULE_FIRST);
        refused(r, "id out of range for a module kernel", "a module id past the range");
        r = builtin_rows();
        r->k[3].id = r->k[2].id;
        refused(r, "not unique", "a duplicate id");
        r = builtin_rows();
        r->p[2] = &r->k[5];
        refused(r, "not unique", "ids out of order");
        r = builtin_rows();
        r->k[4].name = r->k[3].name;
        refused(r, "is also row 3", "a duplicate name");
        static const char *const bad_names[] = { "", "Add_f32", "add-f32", "add f32", "a23456789012345678901234567890123" };
        for (size_t i = 0; i < sizeof(bad_names) / sizeof(bad_names[0]); i++) {
                r = builtin_rows();
                r->k[1].name = (char *)bad_names[i];
                refused(r, "kernel name is not", bad_names[i]);
        }
        r = builtin_rows();
        r->k[0].id = 0;
        refused(r, "id out of range for a built-in", "id 0");
        r = builtin_rows();
        add_module_rows(r, 1, HBG_KERNEL_MODULE_FIRST);
        r->k[r->n - 1].module = (char *)"";
        refused(r, "id out of range for a built-in", "a built-in with a module's id");
        r = builtin_rows();
        add_module_rows(r, 1, HBG_KERNEL_MODULE_FIRST - 1);
        refused(r, "id out of range for a module", "a module kernel with a built-in's id");
        r = builtin_rows();
        r->a[HBG_KERNEL_AXPY_F32 - 1][1].kind = (char *)"sideways";
        refused(r, "unknown kind", "an unknown direction");
        r = builtin_rows();
        r->a[HBG_KERNEL_GEMM_F32 - 1][4].kind = (char *)"f64";
        refused(r, "unknown kind", "an unknown scalar kind");
        r = builtin_rows();
        r->a[HBG_KERNEL_AXPY_F32 - 1][0].kind = (char *)"f32"; /* a scalar, then the tensor y */
        refused(r, "a tensor after a scalar", "a tensor after a scalar");
        r = builtin_rows();
        r->a[HBG_KERNEL_AXPY_F32 - 1][0].name = (char *)"x y";
        refused(r, "argument 0: name", "a bad argument name");
        r = builtin_rows();
        Hbg__KernelInfo *noop = &r->k[HBG_KERNEL_NOOP - 1];
        for (unsigned a = 0; a <= HBG_MAX_TENSOR_ARGS; a++) {
                r->a[HBG_KERNEL_NOOP - 1][a] = r->a[HBG_KERNEL_COPY_F32 - 1][0];
                r->ap[HBG_KERNEL_NOOP - 1][a] = &r->a[HBG_KERNEL_NOOP - 1][a];
        }
        noop->args = r->ap[HBG_KERNEL_NOOP - 1];
        noop->n_args = HBG_MAX_TENSOR_ARGS + 1;
        refused(r, "more than 8 tensors", "too many tensors");
        r = builtin_rows();
        r->k[2].length = (Hbg__KernelLength)7;
        refused(r, "unknown length rule", "an unknown length rule");
        r = builtin_rows();
        r->k[2].summary = (char *)"out[i] = v\033[2J";
        refused(r, "control characters", "a control character");
        r = builtin_rows();
        r->k[2].summary = (char *)"out[i] = \xff";
        refused(r, "not UTF-8", "invalid UTF-8");
        r = builtin_rows();
        r->k[2].summary = (char *)"out[i] = \xc2\x9b" "2J"; /* U+009B, CSI */
        refused(r, "control characters", "a C1 control character");
        r = builtin_rows();
        char *longtext = malloc(HBG_KERNEL_TEXT_MAX + 1);
        memset(longtext, 'x', HBG_KERNEL_TEXT_MAX);
        longtext[HBG_KERNEL_TEXT_MAX] = 0;
        r->k[2].length_rule = longtext;
        refused(r, "too long", "a long length rule");
        free(longtext);
}
END_TEST

/* Tables of many sizes through the wire, up to one with every module id
 * a client accepts (more than hbgd loads): each fits the reply, is read
 * whole by wire_recv() and imports as the rows sent did. The same record
 * cut short anywhere is refused (the reply is one length-prefixed field:
 * no shorter record is an envelope), leaving nothing behind (the
 * sanitizer builds check for leaks). */
START_TEST(kernel_table_through_the_wire) {
        static const size_t extras[] = { 0, 1, 100, HBG_KERNEL_MODULE_MAX / 2, HBG_KERNEL_MODULE_MAX };
        for (size_t e = 0; e < sizeof(extras) / sizeof(extras[0]); e++) {
                size_t extra = extras[e];
                struct rows *r = builtin_rows();
                add_module_rows(r, extra, HBG_KERNEL_MODULE_FIRST);
                Hbg__SessionReply sr = HBG__SESSION_REPLY__INIT;
                sr.kernels = r->p;
                sr.n_kernels = r->n;
                Hbg__Envelope env = HBG__ENVELOPE__INIT;
                env.msg_case = HBG__ENVELOPE__MSG_SESSION_REPLY;
                env.session_reply = &sr;
                int sv[2];
                ck_assert_int_eq(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv), 0);
                ck_assert_int_eq(wire_send(sv[0], &env, NULL, 0, HBG_WIRE_SESSION_REPLY_MAX), 0);
                Hbg__Envelope *got = NULL;
                int fds[HBG_WIRE_MAX_FDS];
                unsigned nfds = 9;
                ck_assert_int_eq(wire_recv(sv[1], HBG_WIRE_SESSION_REPLY_MAX, &got, fds, 0, &nfds), 0);
                ck_assert_uint_eq(nfds, 0);
                ck_assert_int_eq(got->msg_case, HBG__ENVELOPE__MSG_SESSION_REPLY);
                ck_assert_uint_eq(got->session_reply->n_kernels, r->n);
                struct kernel_table sent, recv;
                char why[256];
                ck_assert_msg(kernel_table_import(&sent, r->p, r->n, why, sizeof(why)) == 0, "%zu rows: %s", r->n, why);
                ck_assert_int_eq(kernel_table_import(&recv, got->session_reply->kernels, got->session_reply->n_kernels,
                                                     why, sizeof(why)), 0);
                ck_assert_uint_eq(recv.n, sent.n);
                for (size_t i = 0; i < sent.n; i++) {
                        const struct hbg_kernel_sig *a = kernel_table_at(&sent, i), *b = kernel_table_at(&recv, i);
                        char u1[160], u2[160];
                        ck_assert_uint_eq(a->id, b->id);
                        ck_assert_str_eq(a->name, b->name);
                        ck_assert_str_eq(kernel_sig_usage(a, u1, sizeof(u1)), kernel_sig_usage(b, u2, sizeof(u2)));
                }
                kernel_table_free(&sent);
                kernel_table_free(&recv);
                wire_free(got);
                /* cut short: every prefix (every 97th of a large one) */
                size_t len = hbg__envelope__get_packed_size(&env), step = len < 4096 ? 1 : 97;
                ck_assert_uint_le(len, HBG_WIRE_SESSION_REPLY_MAX);
                uint8_t *bytes = malloc(len);
                ck_assert_ptr_nonnull(bytes);
                hbg__envelope__pack(&env, bytes);
                for (size_t cut = len - 1; cut > 0; cut = cut > step ? cut - step : cut - 1) {
                        ck_assert_int_eq(send(sv[0], bytes, cut, 0), (ssize_t)cut);
                        got = NULL;
                        int err = wire_recv(sv[1], HBG_WIRE_SESSION_REPLY_MAX, &got, fds, 0, &nfds);
                        ck_assert_msg(err == -EPROTO && !got, "cut at %zu of %zu: %d", cut, len, err);
                }
                free(bytes);
                close(sv[0]);
                close(sv[1]);
                free(r);
        }
}
END_TEST

static Suite *suite(void) {
        Suite *s = suite_create("kernel_table");
        TCase *tc = tcase_create("import");
        tcase_add_test(tc, kernel_table_hostile);
        tcase_add_test(tc, kernel_table_through_the_wire);
        suite_add_tcase(s, tc);
        return s;
}

const struct check_main check_main = {
        .suite = suite,
};
