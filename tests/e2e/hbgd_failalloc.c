/* SPDX-License-Identifier: MIT */
/*
 * hbgd with failing allocations: linked into tests/hbgd-failalloc with
 * hbgd's own objects (main included) and -Wl,--wrap=malloc,calloc,realloc
 * (hbgd's code as shipped; the libraries it uses allocate as usual). Once
 * hbgd is ready (its READY=1 notification), one in HBGD_FAIL_ALLOC_EVERY
 * allocations of hbgd's code fails (scattered), for the next HBGD_FAIL_ALLOC_CALLS
 * allocations; after those, none (so that recovery can be seen).
 */
#include <errno.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void *__real_malloc(size_t n);
void *__real_calloc(size_t n, size_t size);
void *__real_realloc(void *p, size_t n);
void __real_hbgd_notify(const char *fmt, ...);

void *__wrap_malloc(size_t n);
void *__wrap_calloc(size_t n, size_t size);
void *__wrap_realloc(void *p, size_t n);
void __wrap_hbgd_notify(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

static atomic_bool armed;
static atomic_ulong calls;
static unsigned long every, budget;

static bool fail_now(void) {
        if (!atomic_load_explicit(&armed, memory_order_relaxed))
                return false;
        unsigned long k = atomic_fetch_add_explicit(&calls, 1, memory_order_relaxed) + 1;
        /* One call in `every`, scattered (a multiplicative hash of k): a
         * fixed stride would keep hitting the same allocation site. */
        if (k > budget || (k * 2654435761ul >> 7) % every != 0)
                return false;
        errno = ENOMEM;
        return true;
}

void *__wrap_malloc(size_t n) {
        return fail_now() ? NULL : __real_malloc(n);
}

void *__wrap_calloc(size_t n, size_t size) {
        return fail_now() ? NULL : __real_calloc(n, size);
}

void *__wrap_realloc(void *p, size_t n) {
        return fail_now() ? NULL : __real_realloc(p, n);
}

/* READY=1 arms the failures: start-up allocations are not the point. */
void __wrap_hbgd_notify(const char *fmt, ...) {
        char msg[512];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(msg, sizeof(msg), fmt, ap);
        va_end(ap);
        __real_hbgd_notify("%s", msg);
        if (strncmp(msg, "READY=1", 7) == 0 && !atomic_load(&armed)) {
                const char *e = getenv("HBGD_FAIL_ALLOC_EVERY"), *b = getenv("HBGD_FAIL_ALLOC_CALLS");
                every = e ? strtoul(e, NULL, 10) : 0;
                budget = b ? strtoul(b, NULL, 10) : 0;
                if (every > 0)
                        atomic_store(&armed, true);
        }
}
