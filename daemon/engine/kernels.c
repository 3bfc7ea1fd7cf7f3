/* SPDX-License-Identifier: MIT */
/* hbgd's kernel table (kernels.h): registration, the run context's slow
 * path, validation and its messages. The built-ins' code is
 * kernels_builtin.c's. */
#include "daemon/engine/kernels.h"

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/clock.h"
#include "common/text.h"
#include "daemon/engine/kernels_builtin.h"

/* ------------------------------------------------------------ the run contract */

static int stop_code(enum kernel_stop why) {
        return why == KERNEL_STOP_CANCEL ? -ECANCELED : -ETIME;
}

int kernel_check_slow(struct hbg_kernel_ctx *kc) {
        /* kc is the first member of a kernel_run_ctx (the only contexts
         * hbgd hands a kernel). */
        struct kernel_run_ctx *ctx = (struct kernel_run_ctx *)(void *)kc;
        if (ctx->stopped != KERNEL_STOP_NONE)
                return stop_code(ctx->stopped);
        if (ctx->stop) {
                uint32_t v = atomic_load_explicit(ctx->stop, memory_order_relaxed);
                if (v != ctx->stop_seen) {
                        ctx->stop_seen = v;
                        if (!ctx->stop_applies || ctx->stop_applies(ctx->stop_arg)) {
                                ctx->k.credit = 0;
                                ctx->stopped = KERNEL_STOP_CANCEL;
                                return -ECANCELED;
                        }
                }
        }
        ctx->k.credit = KERNEL_CHECK_WORK;
        if (ctx->budget_ns == 0)
                return 0;
        int64_t now = clock_now_ns();
        if (ctx->deadline_ns == 0) {
                /* The first look at the clock, after at most
                 * KERNEL_CHECK_WORK units: no clock read for short runs. */
                ctx->deadline_ns = now + (int64_t)ctx->budget_ns;
                return 0;
        }
        if (now < ctx->deadline_ns)
                return 0;
        ctx->k.credit = 0;
        ctx->stopped = KERNEL_STOP_BUDGET;
        return -ETIME;
}


/* ------------------------------------------------------------ messages */

/*
 * Every message is static and names the kernel (and the tensors) from its
 * signature: built when the kernel is registered, into pools that live as
 * long as hbgd. Messages of the generic checks per kernel, per tensor, per
 * scalar and per pair of tensors, and of each kernel's own checks.
 */
#define MAX_CHECK_MSGS HBG_KERNEL_MAX_REASONS

enum { TM_DIR, TM_RESERVED, TM_ALIGN, TM_EMPTY, TM_OVERFLOW, TM_RANGE, TM_COUNT };

struct kernel_msgs {
        const char *n_tensors, *n_scalars, *cost;
        const char *tensor[HBG_MAX_TENSOR_ARGS][TM_COUNT];
        const char *f32_high[HBG_MAX_SCALAR_ARGS];
        const char *overlap[HBG_MAX_TENSOR_ARGS][HBG_MAX_TENSOR_ARGS];
        const char *length[HBG_MAX_TENSOR_ARGS];
        const char *check[MAX_CHECK_MSGS];
        const char *bad_reason;         /* its check gave no reason of its list */
};

/* The pool: the built-ins' messages fit the static first block (a test
 * runs every message); module kernels add blocks. Never freed: a kernel
 * that was refused leaves its messages behind (hbgd then exits). */
#define POOL_BLOCK (48 * 1024)
static char pool0[POOL_BLOCK];
static char *pool = pool0;
static size_t pool_used;
static bool pool_failed;

static const char *msg(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static const char *msg(const char *fmt, ...) {
        va_list ap;
        va_start(ap, fmt);
        int n = vsnprintf(NULL, 0, fmt, ap);
        va_end(ap);
        if (n < 0 || (size_t)n >= POOL_BLOCK) {
                pool_failed = true;
                return "kernel: message too long";
        }
        if ((size_t)n >= POOL_BLOCK - pool_used) {
                char *b = malloc(POOL_BLOCK);
                if (!b) {
                        pool_failed = true;
                        return "kernel: out of memory";
                }
                pool = b;
                pool_used = 0;
        }
        char *at = pool + pool_used;
        va_start(ap, fmt);
        vsnprintf(at, POOL_BLOCK - pool_used, fmt, ap);
        va_end(ap);
        pool_used += (size_t)n + 1;
        return at;
}

static void build_msgs(struct kernel_msgs *m, const struct hbg_kernel_sig *s, const struct hbg_kernel_def *d) {
        static const char *const tm[TM_COUNT] = {
                [TM_DIR] = "has the wrong direction",
                [TM_RESERVED] = "reserved field is not zero",
                [TM_ALIGN] = "offset or length is not a multiple of 4",
                [TM_EMPTY] = "is empty",
                [TM_OVERFLOW] = "offset + length overflows",
                [TM_RANGE] = "extends past the end of the heap",
        };
        const char *kn = s->name;
        m->n_tensors = msg("%s: wrong number of tensor arguments (takes %u)", kn, s->n_tensors);
        m->n_scalars = msg("%s: wrong number of scalar arguments (takes %u)", kn, s->n_scalars);
        m->cost = msg("%s: work above the per-task limit ([limits] max_task_cost)", kn);
        for (unsigned t = 0; t < s->n_tensors; t++) {
                const char *tn = s->tensors[t].name;
                for (unsigned k = 0; k < TM_COUNT; k++)
                        m->tensor[t][k] = msg("%s: tensor %s %s", kn, tn, tm[k]);
                for (unsigned j = 0; j < s->n_tensors; j++)
                        if (j != t)
                                m->overlap[t][j] = msg(s->in_place ? "%s: output %s overlaps tensor %s (only an "
                                                                     "input of the very same range may be shared)"
                                                                   : "%s: output %s overlaps tensor %s",
                                                       kn, tn, s->tensors[j].name);
                if (t + 1 < s->n_tensors)
                        m->length[t] = msg("%s: tensor %s is not as long as %s (%s)", kn, tn,
                                           s->tensors[s->n_tensors - 1].name, s->length_rule);
        }
        for (unsigned i = 0; i < s->n_scalars; i++)
                if (s->scalars[i].kind == HBG_SCALAR_F32)
                        m->f32_high[i] = msg("%s: f32 scalar %s has its upper 32 bits set", kn, s->scalars[i].name);
        for (unsigned i = 0; i < d->n_reasons && i < MAX_CHECK_MSGS; i++)
                m->check[i] = msg("%s: %s", kn, d->reasons[i]);
        m->bad_reason = msg("%s: its check refused the task without a reason of its own", kn);
}

/* A kernel's own reason, with the kernel's name. */
static const char *check_message(const struct kernel_info *k, unsigned i) {
        if (i >= k->n_check_msgs || i >= MAX_CHECK_MSGS)
                return k->msgs->bad_reason;
        return k->msgs->check[i];
}

/* ------------------------------------------------------------ the table */

/* Built-ins by id - 1; module kernels by id - HBG_KERNEL_MODULE_FIRST,
 * each with the signature made from its definition. Written only while
 * hbgd starts (before its threads), read-only after. */
static struct kernel_info builtins[HBG_KERNEL_COUNT - 1];
static struct kernel_msgs builtin_msgs[HBG_KERNEL_COUNT - 1];
static struct module_kernel {
        struct kernel_info info;
        struct hbg_kernel_sig sig;
        struct kernel_msgs msgs;
} modules[KERNEL_MODULE_MAX];
static size_t n_modules;

const struct kernel_info *kernel_lookup(uint16_t id) {
        if (id != HBG_KERNEL_NONE && id < HBG_KERNEL_COUNT)
                return &builtins[id - 1];
        if (id >= HBG_KERNEL_MODULE_FIRST && id - HBG_KERNEL_MODULE_FIRST < n_modules)
                return &modules[id - HBG_KERNEL_MODULE_FIRST].info;
        return NULL;
}

const struct kernel_info *kernel_lookup_name(const char *name) {
        if (!name)
                return NULL;
        const struct kernel_info *k;
        for (size_t i = 0; (k = kernel_at(i)) != NULL; i++)
                if (k->sig && strcmp(k->sig->name, name) == 0) /* no sig: a built-in not yet registered */
                        return k;
        return NULL;
}

size_t kernel_count(void) {
        return HBG_KERNEL_COUNT - 1 + n_modules;
}

const struct kernel_info *kernel_at(size_t i) {
        if (i < HBG_KERNEL_COUNT - 1)
                return &builtins[i];
        i -= HBG_KERNEL_COUNT - 1;
        return i < n_modules ? &modules[i].info : NULL;
}

const struct hbg_kernel_sig *engine_kernel_sig(size_t i) {
        const struct kernel_info *k = kernel_at(i);
        return k ? k->sig : NULL;
}

size_t kernel_module_kernels(void) {
        return n_modules;
}

void kernel_unregister_to(size_t n) {
        if (n < n_modules)
                n_modules = n;
}

/* The version 1 definition ends with run. */
#define DEF_V1_SIZE (offsetof(struct hbg_kernel_def, run) + sizeof(((struct hbg_kernel_def *)0)->run))
/* A size beyond this is not a definition's (a module passing garbage). */
#define DEF_MAX_SIZE 4096u

static int refuse(char *why, size_t len, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int refuse(char *why, size_t len, const char *fmt, ...) {
        va_list ap;
        va_start(ap, fmt);
        if (len)
                vsnprintf(why, len, fmt, ap);
        va_end(ap);
        return -EINVAL;
}

/* The name of a definition refused before its fields are copied, where it
 * has one to read (size and name come first in every version of the
 * header): NULL otherwise. */
static const char *def_name(const struct hbg_kernel_def *def) {
        size_t named = offsetof(struct hbg_kernel_def, name) + sizeof(def->name);
        return def && def->size >= named && def->size <= DEF_MAX_SIZE && kernel_sig_name_ok(def->name, false)
                       ? def->name
                       : NULL;
}

/* A refusal of def as a whole: "kernel 'NAME': " first where it has a name. */
#define REFUSE_DEF(def, why, len, fmt, ...)                                                                     \
        refuse(why, len, "%s%s%s" fmt, def_name(def) ? "kernel '" : "", def_name(def) ? def_name(def) : "",      \
               def_name(def) ? "': " : "", __VA_ARGS__)

/* def's fields, each checked; *d the copy kernel_register() keeps. */
static int check_def(const struct hbg_kernel_def *def, uint32_t api_version, struct hbg_kernel_def *d, char *why,
                     size_t len) {
        /* A module built against an older header keeps working: its
         * definitions are shorter (size) and mean what they meant. */
        if (api_version == 0 || api_version > HBG_KERNEL_API_VERSION) {
                REFUSE_DEF(def, why, len, "built for kernel API version %u; this hbgd speaks versions 1 to %u",
                           api_version, HBG_KERNEL_API_VERSION);
                return -EPROTONOSUPPORT;
        }
        if (!def)
                return refuse(why, len, "a NULL kernel definition");
        if (def->size < DEF_V1_SIZE)
                return REFUSE_DEF(def, why, len,
                                  "kernel definition size %zu is smaller than version 1's %zu "
                                  "(initialise it with HBG_KERNEL_DEF_INIT)",
                                  def->size, (size_t)DEF_V1_SIZE);
        if (def->size > DEF_MAX_SIZE)
                return refuse(why, len, "kernel definition size %zu is not a definition's (at most %u)", def->size,
                              DEF_MAX_SIZE);
        for (size_t i = sizeof(*d); i < def->size; i++)
                if (((const unsigned char *)def)[i] != 0)
                        return REFUSE_DEF(def, why, len,
                                          "kernel definition of size %zu has non-zero fields this hbgd does not "
                                          "know (it knows %zu bytes)",
                                          def->size, sizeof(*d));
        memset(d, 0, sizeof(*d));
        memcpy(d, def, def->size < sizeof(*d) ? def->size : sizeof(*d));
        if (!kernel_sig_name_ok(d->name, false))
                return refuse(why, len, "kernel name '%.40s' is not [a-z0-9_]{1,31}", d->name ? d->name : "(null)");
        const char *kn = d->name;
        if (strcmp(kn, HBG_KERNEL_NAME_DUMMY) == 0)
                return refuse(why, len, "kernel '%s': the name is reserved (graph files give it to a task that "
                              "runs nothing)", kn);
        const struct kernel_info *other = kernel_lookup_name(kn);
        if (other && !other->sig->module)
                return refuse(why, len, "kernel '%s': name clash with the built-in kernel %s", kn, kn);
        if (other)
                return refuse(why, len, "kernel '%s': name clash with kernel %s of module %s", kn, kn,
                              other->sig->module);
        /* Texts as every client checks hbgd's table (a text it refuses
         * would fail every connect). */
        if (!d->summary || !d->summary[0] || !kernel_sig_text_ok(d->summary, HBG_KERNEL_TEXT_MAX))
                return refuse(why, len, "kernel '%s': the summary is not one line of text shorter than %u bytes", kn,
                              HBG_KERNEL_TEXT_MAX);
        if (d->n_tensors > HBG_KERNEL_MAX_TENSORS)
                return refuse(why, len, "kernel '%s': too many tensor arguments (%u; at most %u)", kn, d->n_tensors,
                              HBG_KERNEL_MAX_TENSORS);
        if (d->n_scalars > HBG_KERNEL_MAX_SCALARS)
                return refuse(why, len, "kernel '%s': too many scalar arguments (%u; at most %u)", kn, d->n_scalars,
                              HBG_KERNEL_MAX_SCALARS);
        const char *names[HBG_KERNEL_MAX_TENSORS + HBG_KERNEL_MAX_SCALARS];
        unsigned n_names = 0;
        for (unsigned i = 0; i < d->n_tensors; i++) {
                if (!kernel_sig_name_ok(d->tensors[i].name, true))
                        return refuse(why, len, "kernel '%s': tensor argument %u has no name [A-Za-z0-9_]{1,31}",
                                      kn, i);
                if (d->tensors[i].dir < HBG_KERNEL_IN || d->tensors[i].dir > HBG_KERNEL_INOUT)
                        return refuse(why, len, "kernel '%s': tensor %s: bad direction %u (in 1, out 2, inout 3)",
                                      kn, d->tensors[i].name, d->tensors[i].dir);
                names[n_names++] = d->tensors[i].name;
        }
        for (unsigned i = 0; i < d->n_scalars; i++) {
                if (!kernel_sig_name_ok(d->scalars[i].name, true))
                        return refuse(why, len, "kernel '%s': scalar argument %u has no name [A-Za-z0-9_]{1,31}",
                                      kn, i);
                if (d->scalars[i].kind < HBG_KERNEL_F32 || d->scalars[i].kind > HBG_KERNEL_I64)
                        return refuse(why, len, "kernel '%s': scalar %s: bad kind %u (f32 1, u64 2, i64 3)", kn,
                                      d->scalars[i].name, d->scalars[i].kind);
                names[n_names++] = d->scalars[i].name;
        }
        for (unsigned i = 0; i < n_names; i++)
                for (unsigned j = 0; j < i; j++)
                        if (strcmp(names[i], names[j]) == 0)
                                return refuse(why, len, "kernel '%s': argument name %s given twice", kn, names[i]);
        if (d->length > HBG_KERNEL_LENGTH_SHAPE)
                return refuse(why, len, "kernel '%s': bad length rule %u (any 0, equal 1, shape 2)", kn, d->length);
        if (!d->length_rule || !d->length_rule[0] || !kernel_sig_text_ok(d->length_rule, HBG_KERNEL_TEXT_MAX))
                return refuse(why, len, "kernel '%s': the length rule is not one line of words shorter than %u bytes",
                              kn, HBG_KERNEL_TEXT_MAX);
        if (!d->run)
                return refuse(why, len, "kernel '%s': no run function", kn);
        if (!d->cost)
                return refuse(why, len, "kernel '%s': no cost function", kn);
        if (d->n_reasons > HBG_KERNEL_MAX_REASONS)
                return refuse(why, len, "kernel '%s': too many check reasons (%u; at most %u)", kn, d->n_reasons,
                              HBG_KERNEL_MAX_REASONS);
        if (d->check && d->n_reasons == 0)
                return refuse(why, len, "kernel '%s': a check function needs at least one reason", kn);
        if (!d->check && d->length == HBG_KERNEL_LENGTH_SHAPE)
                return refuse(why, len, "kernel '%s': length rule shape needs a check function", kn);
        for (unsigned i = 0; i < d->n_reasons; i++)
                if (!d->reasons || !d->reasons[i] || !d->reasons[i][0] ||
                    !kernel_sig_text_ok(d->reasons[i], HBG_KERNEL_TEXT_MAX))
                        return refuse(why, len, "kernel '%s': check reason %u is not one line of text", kn, i);
        return 0;
}

static int check_none(const struct hbg_kernel_args *a, unsigned *ret_msg) {
        (void)a;
        (void)ret_msg;
        return 0;
}

static void make_info(struct kernel_info *k, const struct hbg_kernel_sig *s, const struct hbg_kernel_def *d,
                      struct kernel_msgs *m, size_t index) {
        *k = (struct kernel_info){
                .sig = s, .check = d->check ? d->check : check_none, .check_msgs = d->reasons,
                .n_check_msgs = d->n_reasons, .explain = d->explain, .run = d->run, .cost = d->cost,
                .index = (uint32_t)index, .msgs = m,
        };
        build_msgs(m, s, d);
}

int kernel_register(const struct hbg_kernel_def *def, uint32_t api_version, const char *module, char *why,
                    size_t len) {
        struct hbg_kernel_def d;
        int r = check_def(def, api_version, &d, why, len);
        if (r < 0)
                return r;
        if (n_modules == KERNEL_MODULE_MAX)
                return refuse(why, len, "kernel '%s': more than %u module kernels (hbgd's limit)", d.name,
                              KERNEL_MODULE_MAX);
        struct module_kernel *mk = &modules[n_modules];
        struct hbg_kernel_sig *s = &mk->sig;
        *s = (struct hbg_kernel_sig){
                .id = (uint16_t)(HBG_KERNEL_MODULE_FIRST + n_modules), .name = d.name, .summary = d.summary,
                .splittable = d.splittable, .n_tensors = d.n_tensors, .n_scalars = d.n_scalars,
                .length = (enum hbg_length_rule)d.length, .in_place = d.in_place, .length_rule = d.length_rule,
                .module = module ? module : "?",
        };
        for (unsigned i = 0; i < d.n_tensors; i++) {
                s->tensors[i].name = d.tensors[i].name;
                s->tensors[i].dir = d.tensors[i].dir;
        }
        for (unsigned i = 0; i < d.n_scalars; i++) {
                s->scalars[i].name = d.scalars[i].name;
                s->scalars[i].kind = d.scalars[i].kind;
        }
        pool_failed = false;
        make_info(&mk->info, s, &d, &mk->msgs, HBG_KERNEL_COUNT - 1 + n_modules);
        if (pool_failed)
                return refuse(why, len, "kernel '%s': out of memory for its messages", d.name);
        n_modules++;
        return 0;
}

/* The module "built-in": every built-in kernel through the definition
 * and its checks, at program start (before main(): the table is complete
 * before anything looks a kernel up, and nothing on the dispatch path
 * asks whether it is). Its signature is the shared table's own entry. */
__attribute__((constructor)) static void register_builtins(void) {
        for (uint16_t id = 1; id < HBG_KERNEL_COUNT; id++) {
                struct hbg_kernel_def def, d;
                char why[256];
                if (kernel_builtin_def(id, &def) < 0 ||
                    check_def(&def, HBG_KERNEL_API_VERSION, &d, why, sizeof(why)) < 0) {
                        /* A wrong built-in is a bug of this build (a test
                         * registers them all): no hbgd without its table. */
                        fprintf(stderr, "hbgd: built-in kernel %u: %s\n", id, why);
                        abort();
                }
                make_info(&builtins[id - 1], kernel_sig_by_id(id), &d, &builtin_msgs[id - 1], id - 1u);
        }
}

uint64_t kernel_cost(const struct kernel_info *k, const struct hbg_kernel_args *a, uint32_t parts) {
        return k->cost(a, parts ? parts : 1);
}

const char *kernel_cost_message(const struct kernel_info *k) {
        return k->msgs->cost;
}

/* ------------------------------------------------------------ validation */

static int check_tensor(const struct hbg_kernel_tensor_arg *t, uint8_t dir, uint64_t heap_size,
                        const char *const *m, const char **why) {
        uint64_t end;

        if (t->direction != dir) {
                *why = m[TM_DIR];
                return -EINVAL;
        }
        if (t->reserved != 0) {
                *why = m[TM_RESERVED];
                return -EINVAL;
        }
        if (t->offset % sizeof(float) != 0 || t->length % sizeof(float) != 0) {
                *why = m[TM_ALIGN];
                return -EINVAL;
        }
        if (t->length == 0) {
                *why = m[TM_EMPTY];
                return -EINVAL;
        }
        if (__builtin_add_overflow(t->offset, t->length, &end)) {
                *why = m[TM_OVERFLOW];
                return -EOVERFLOW;
        }
        if (end > heap_size) {
                *why = m[TM_RANGE];
                return -ERANGE;
        }
        return 0;
}

int kernel_validate(const struct kernel_info *k, const struct hbg_kernel_args *a, uint64_t heap_size,
                    const char **why) {
        const char *dummy;

        if (!why)
                why = &dummy;
        *why = NULL;
        if (!k || !k->sig || kernel_lookup(k->sig->id) != k) {
                *why = "kernel: not an entry of the kernel table";
                return -EINVAL;
        }
        return kernel_validate_entry(k, a, heap_size, why);
}

int kernel_validate_entry(const struct kernel_info *k, const struct hbg_kernel_args *a, uint64_t heap_size,
                          const char **why) {
        int r;
        *why = NULL;
        const struct hbg_kernel_sig *s = k->sig;
        const struct kernel_msgs *m = k->msgs;

        if (a->n_tensors != s->n_tensors) {
                *why = m->n_tensors;
                return -EINVAL;
        }
        if (a->n_scalars != s->n_scalars) {
                *why = m->n_scalars;
                return -EINVAL;
        }
        struct hbg_kernel_tensor t[HBG_MAX_TENSOR_ARGS];
        for (unsigned i = 0; i < s->n_tensors; i++) {
                r = check_tensor(&a->tensors[i], s->tensors[i].dir, heap_size, m->tensor[i], why);
                if (r < 0)
                        return r;
                t[i] = (struct hbg_kernel_tensor){ a->tensors[i].offset, a->tensors[i].length };
        }
        unsigned i = 0, j = 0;
        /* One tensor or none: no pair to overlap or differ in length. */
        switch (s->n_tensors > 1 ? kernel_sig_check_tensors(s, t, &i, &j) : HBG_TENSORS_OK) {
        case HBG_TENSORS_OVERLAP:
                *why = m->overlap[i][j];
                return -EINVAL;
        case HBG_TENSORS_LENGTH:
                *why = m->length[i];
                return -EINVAL;
        case HBG_TENSORS_OK:
                break;
        }
        for (i = 0; i < s->n_scalars; i++) {
                if (s->scalars[i].kind == HBG_SCALAR_F32 && (a->scalars[i] >> 32) != 0) {
                        *why = m->f32_high[i];
                        return -EINVAL;
                }
        }
        /* The kernel's own check, built-in or a module's, only now: it sees
         * arguments the generic checks passed. A module's code answering
         * outside the contract still refuses the task, as -EINVAL. */
        unsigned cm = 0;
        r = k->check(a, &cm);
        if (r != 0) {
                *why = check_message(k, cm);
                if (r != -EINVAL && r != -ERANGE && r != -EOVERFLOW)
                        r = -EINVAL;
        }
        return r;
}

/* snprintf's count, kept inside the buffer. */
static size_t advance(size_t used, int n, size_t len) {
        if (n < 0)
                return used;
        return used + (size_t)n < len ? used + (size_t)n : (len ? len - 1 : 0);
}

int kernel_explain(const struct kernel_info *k, const struct hbg_kernel_args *a, uint64_t heap_size, char *buf,
                   size_t len) {
        const char *why;
        int err = kernel_validate(k, a, heap_size, &why);
        if (len)
                buf[0] = '\0';
        if (err == 0)
                return 0;
        size_t used = advance(0, snprintf(buf, len, "%s", why), len);
        if (!k || !k->sig || kernel_lookup(k->sig->id) != k)
                return err;
        const struct hbg_kernel_sig *s = k->sig;
        const struct kernel_msgs *m = k->msgs;
        for (unsigned i = 0; i < s->n_tensors; i++) {
                const struct hbg_kernel_tensor_arg *t = &a->tensors[i];
                if (why == m->tensor[i][TM_RANGE])
                        snprintf(buf + used, len - used,
                                 ": it needs elements %" PRIu64 "..%" PRIu64 " of a heap of %" PRIu64 " elements",
                                 t->offset / sizeof(float), (t->offset + t->length) / sizeof(float),
                                 heap_size / sizeof(float));
                if (why == m->length[i]) {
                        struct hbg_kernel_tensor kt[HBG_MAX_TENSOR_ARGS];
                        for (unsigned x = 0; x < s->n_tensors; x++)
                                kt[x] = (struct hbg_kernel_tensor){ a->tensors[x].offset, a->tensors[x].length };
                        unsigned p, q;
                        if (kernel_sig_check_tensors(s, kt, &p, &q) == HBG_TENSORS_LENGTH && p < s->n_tensors &&
                            q < s->n_tensors)
                                snprintf(buf + used, len - used, ": %s has %" PRIu64 " elements, %s %" PRIu64,
                                         s->tensors[p].name, kt[p].length / sizeof(float), s->tensors[q].name,
                                         kt[q].length / sizeof(float));
                }
        }
        for (unsigned i = 0; k->explain && i < k->n_check_msgs && i < MAX_CHECK_MSGS; i++)
                if (why == m->check[i] && used + 1 < len) {
                        /* A module's words: into a buffer of our own, cut
                         * and NUL-terminated whatever it returns, then only
                         * plain UTF-8 kept (this goes to a client and to
                         * hbgd's log). */
                        char said[256] = { 0 };
                        k->explain(a, i, said, sizeof(said) - 1);
                        said[sizeof(said) - 1] = 0;
                        text_copy_str(buf + used, len - used, said, TEXT_JSON);
                }
        return err;
}
