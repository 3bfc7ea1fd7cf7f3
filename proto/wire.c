/* SPDX-License-Identifier: MIT */
#include "proto/wire.h"

#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

int wire_send(int sock, const Hbg__Envelope *env, const int *fds, unsigned nfds, size_t max_msg) {
        size_t len = hbg__envelope__get_packed_size(env);
        if (len > max_msg || nfds > HBG_WIRE_MAX_FDS)
                return -EMSGSIZE;
        uint8_t *buf = malloc(len ? len : 1);
        if (!buf)
                return -ENOMEM;
        hbg__envelope__pack(env, buf);

        struct iovec iov = { .iov_base = buf, .iov_len = len };
        union {
                char buf[CMSG_SPACE(sizeof(int) * HBG_WIRE_MAX_FDS)];
                struct cmsghdr align;
        } control;
        struct msghdr msg = { .msg_iov = &iov, .msg_iovlen = 1 };
        if (nfds > 0) {
                memset(&control, 0, sizeof(control));
                msg.msg_control = control.buf;
                msg.msg_controllen = CMSG_SPACE(sizeof(int) * nfds);
                struct cmsghdr *c = CMSG_FIRSTHDR(&msg);
                c->cmsg_level = SOL_SOCKET;
                c->cmsg_type = SCM_RIGHTS;
                c->cmsg_len = CMSG_LEN(sizeof(int) * nfds);
                memcpy(CMSG_DATA(c), fds, sizeof(int) * nfds);
        }
        ssize_t n;
        do
                n = sendmsg(sock, &msg, MSG_NOSIGNAL);
        while (n < 0 && errno == EINTR);
        int err = n < 0 ? -errno : 0;
        free(buf);
        if (err == 0 && (size_t)n != len)
                err = -EIO; /* a SEQPACKET record is sent whole or not at all */
        return err;
}

/* The unpacked envelope's memory (wire_recv()): protobuf-c allocates every
 * message, string and array of a record separately; the small ones here
 * come from a few blocks freed together by wire_free(), which saves a
 * malloc and a free each (a session reply's unpack and free took a third
 * fewer instructions; docs/PERFORMANCE.md). Larger ones are mallocs of
 * their own that protobuf-c's free does free: merging a repeated singular
 * field's copies frees the last merge's arrays, and kept, they would grow
 * with the square of the copies. The small ones together stay within
 * WIRE_SMALL_PER_BYTE times the record's bytes and WIRE_SMALL_SLACK (no
 * real record comes near: a few times its bytes), so a hostile record
 * costs hbgd memory in proportion to its size only. The envelope is
 * unpack's first allocation (protobuf_c_message_unpack() allocates the
 * message before its fields), small: it sits right after the arena's
 * header, which is how wire_free() finds the arena; a tag before it
 * catches an envelope from anywhere else. */
struct wire_block {
        struct wire_block *next;
        size_t used, cap;
        _Alignas(16) unsigned char mem[];
};

struct wire_big {
        struct wire_big *prev, *next;
        _Alignas(16) unsigned char mem[];
};

struct wire_arena {
        struct wire_block *blocks;      /* the first block (holding this) last */
        struct wire_big *big;
        size_t small, small_max;        /* bytes of the blocks handed out, their cap */
        uint64_t tag;
};

#define WIRE_ARENA_TAG UINT64_C(0x68626777697265e1)
#define WIRE_ALIGN 16u
/* Larger allocations are mallocs of their own. */
#define WIRE_BIG 512u
#define WIRE_SMALL_PER_BYTE 64u
#define WIRE_SMALL_SLACK ((size_t)1 << 20)
/* No record is larger (16 MiB at most are received): no sum wraps. */
#define WIRE_UNPACK_MAX ((size_t)1 << 32)
/* The arena's header within the first block, rounded to WIRE_ALIGN: the
 * envelope's offset. */
#define WIRE_ARENA_HEAD ((sizeof(struct wire_arena) + WIRE_ALIGN - 1) / WIRE_ALIGN * WIRE_ALIGN)
_Static_assert(sizeof(Hbg__Envelope) <= WIRE_BIG, "the envelope is a small allocation");

static struct wire_block *block_new(size_t cap) {
        struct wire_block *b = malloc(sizeof(*b) + cap);
        if (b) {
                b->next = NULL;
                b->used = 0;
                b->cap = cap;
        }
        return b;
}

static void *arena_alloc(void *data, size_t size) {
        struct wire_arena *a = data;
        if (size > WIRE_UNPACK_MAX)
                return NULL; /* protobuf-c's sizes come from the record's: never near this */
        if (size > WIRE_BIG) {
                struct wire_big *g = malloc(sizeof(*g) + size);
                if (!g)
                        return NULL;
                g->prev = NULL;
                g->next = a->big;
                if (a->big)
                        a->big->prev = g;
                a->big = g;
                return g->mem;
        }
        size = (size + WIRE_ALIGN - 1) / WIRE_ALIGN * WIRE_ALIGN;
        if (size > a->small_max - a->small)
                return NULL; /* far past any real record's: refused */
        struct wire_block *b = a->blocks;
        if (size > b->cap - b->used) {
                /* A new block twice the last: few blocks for a large reply. */
                struct wire_block *n = block_new(b->cap * 2);
                if (!n)
                        return NULL;
                n->next = b;
                a->blocks = b = n;
        }
        void *p = b->mem + b->used;
        b->used += size;
        a->small += size;
        return p;
}

/* A small allocation's memory goes with the blocks; a large one now. */
static void arena_free(void *data, void *ptr) {
        struct wire_arena *a = data;
        if (!ptr)
                return;
        for (struct wire_block *b = a->blocks; b; b = b->next)
                if ((unsigned char *)ptr >= b->mem && (unsigned char *)ptr < b->mem + b->cap)
                        return;
        struct wire_big *g = (struct wire_big *)(void *)((unsigned char *)ptr - offsetof(struct wire_big, mem));
        if (g->prev)
                g->prev->next = g->next;
        else
                a->big = g->next;
        if (g->next)
                g->next->prev = g->prev;
        free(g);
}

static void arena_release(struct wire_arena *a) {
        struct wire_big *g = a->big;
        while (g) {
                struct wire_big *next = g->next;
                free(g);
                g = next;
        }
        struct wire_block *b = a->blocks;
        while (b) {
                struct wire_block *next = b->next;
                free(b); /* the first block, holding *a, comes last */
                b = next;
        }
}

Hbg__Envelope *wire_unpack(const uint8_t *buf, size_t n) {
        if (n > WIRE_UNPACK_MAX)
                return NULL;
        /* Room for what an unpacked record takes, mostly: its bytes
         * again, each field's pointer and each string's terminator. */
        struct wire_block *first = block_new(WIRE_ARENA_HEAD + 4 * n + 1024);
        if (!first)
                return NULL;
        struct wire_arena *a = (struct wire_arena *)(void *)first->mem;
        *a = (struct wire_arena){
                .blocks = first,
                .small_max = WIRE_SMALL_PER_BYTE * n + WIRE_SMALL_SLACK,
                .tag = WIRE_ARENA_TAG,
        };
        first->used = WIRE_ARENA_HEAD;
        ProtobufCAllocator alloc = { .alloc = arena_alloc, .free = arena_free, .allocator_data = a };
        Hbg__Envelope *env = hbg__envelope__unpack(&alloc, n, buf);
        if (env && (void *)env != first->mem + WIRE_ARENA_HEAD)
                env = NULL; /* not the layout wire_free() relies on: refused, never freed wrong */
        if (!env)
                arena_release(a);
        return env;
}

static void close_fds(int *fds, unsigned n) {
        for (unsigned i = 0; i < n; i++)
                if (fds[i] >= 0)
                        close(fds[i]);
}

/* Room for more fds than we accept, so that "too many" is seen as such
 * (and closed) rather than as MSG_CTRUNC. */
#define RECV_FDS (HBG_WIRE_MAX_FDS + 4)

/*
 * One recvmsg() of a record into buf (cap bytes), non-blocking, fds with
 * MSG_CMSG_CLOEXEC, every fd collected into got[] (beyond RECV_FDS closed
 * at once) so that each caller's error path can close them. Returns the
 * bytes read (the record's length is not told: MSG_TRUNC in *ret_flags),
 * or -EAGAIN, -ECONNRESET (for EPIPE too), -errno; *ret_bad_control: a
 * control message other than SCM_RIGHTS came.
 */
static ssize_t recv_record(int sock, void *buf, size_t cap, int got[static RECV_FDS], unsigned *ret_ngot,
                           bool *ret_bad_control, int *ret_flags) {
        union {
                char buf[CMSG_SPACE(sizeof(int) * RECV_FDS)];
                struct cmsghdr align;
        } control;
        struct iovec iov = { .iov_base = buf, .iov_len = cap };
        struct msghdr msg = {
                .msg_iov = &iov,
                .msg_iovlen = 1,
                .msg_control = control.buf,
                .msg_controllen = sizeof(control.buf),
        };
        ssize_t n;
        do
                n = recvmsg(sock, &msg, MSG_CMSG_CLOEXEC | MSG_DONTWAIT);
        while (n < 0 && errno == EINTR);
        if (n < 0) {
                int err = -errno;
                return err == -EWOULDBLOCK ? -EAGAIN : err == -EPIPE ? -ECONNRESET : err;
        }
        unsigned ngot = 0;
        bool bad_control = false;
        for (struct cmsghdr *c = CMSG_FIRSTHDR(&msg); c; c = CMSG_NXTHDR(&msg, c)) {
                if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) {
                        bad_control = true;
                        continue;
                }
                size_t k = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
                for (size_t i = 0; i < k; i++) {
                        int fd;
                        memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof(int));
                        if (ngot < RECV_FDS)
                                got[ngot++] = fd;
                        else
                                close(fd);
                }
        }
        *ret_ngot = ngot;
        *ret_bad_control = bad_control;
        *ret_flags = msg.msg_flags;
        return n;
}

int wire_recv(int sock, size_t max_msg, Hbg__Envelope **ret_env, int *fds, unsigned max_fds,
              unsigned *ret_nfds) {
        /* One byte more than allowed: a record that fills it is too long
         * even if the kernel did not flag MSG_TRUNC. */
        uint8_t *buf = malloc(max_msg + 1);
        if (!buf)
                return -ENOMEM;
        int got[RECV_FDS];
        unsigned ngot = 0;
        bool bad_control = false;
        int flags = 0;
        ssize_t n = recv_record(sock, buf, max_msg + 1, got, &ngot, &bad_control, &flags);
        if (n < 0) {
                free(buf);
                return (int)n;
        }
        int err = 0;
        if (n == 0 && ngot == 0)
                err = -ECONNRESET;
        else if (flags & MSG_CTRUNC)
                err = -EPROTO; /* fds were dropped by the kernel: never trust the rest */
        else if ((flags & MSG_TRUNC) || (size_t)n > max_msg)
                err = -EMSGSIZE;
        else if (bad_control || ngot > max_fds)
                err = -EPROTO;
        if (err < 0) {
                close_fds(got, ngot);
                free(buf);
                return err;
        }
        Hbg__Envelope *env = wire_unpack(buf, (size_t)n);
        free(buf);
        if (!env || env->msg_case == HBG__ENVELOPE__MSG__NOT_SET) {
                wire_free(env);
                close_fds(got, ngot);
                return -EPROTO;
        }
        memcpy(fds, got, ngot * sizeof(int));
        *ret_nfds = ngot;
        *ret_env = env;
        return 0;
}

int wire_discard(int sock) {
        /* A longer record is dropped whole (SOCK_SEQPACKET); fds beyond
         * the control buffer are closed by the kernel (MSG_CTRUNC). */
        char buf[256];
        int got[RECV_FDS];
        unsigned ngot = 0;
        bool bad_control = false;
        int flags = 0;
        ssize_t n = recv_record(sock, buf, sizeof(buf), got, &ngot, &bad_control, &flags);
        if (n < 0)
                return (int)n;
        close_fds(got, ngot);
        /* An empty record reads like the end. */
        return n == 0 && ngot == 0 && !(flags & MSG_TRUNC) ? 0 : 1;
}

void wire_free(Hbg__Envelope *env) {
        if (!env)
                return;
        struct wire_arena *a = (struct wire_arena *)(void *)((unsigned char *)env - WIRE_ARENA_HEAD);
        if (a->tag != WIRE_ARENA_TAG)
                abort(); /* not wire_recv()'s: freeing it here would corrupt the heap */
        a->tag = 0;
        arena_release(a);
}

void wire_hello(Hbg__Envelope *env, Hbg__Hello *hello, const char *name) {
        *hello = (Hbg__Hello)HBG__HELLO__INIT;
        hello->version_major = HBG_PROTO_MAJOR;
        hello->version_minor = HBG_PROTO_MINOR;
        hello->name = (char *)name;
        *env = (Hbg__Envelope)HBG__ENVELOPE__INIT;
        env->msg_case = HBG__ENVELOPE__MSG_HELLO;
        env->hello = hello;
}

int wire_send_error(int sock, int code, const char *message) {
        Hbg__Error e = HBG__ERROR__INIT;
        Hbg__Envelope env = HBG__ENVELOPE__INIT;
        e.code = code;
        e.message = (char *)message;
        env.msg_case = HBG__ENVELOPE__MSG_ERROR;
        env.error = &e;
        return wire_send(sock, &env, NULL, 0, HBG_WIRE_MAX_MSG_DEFAULT);
}

int wire_recv_queued_error(int sock, Hbg__Envelope **ret_env) {
        /* Bounded: a reset is reported once; an end of stream every time. */
        for (unsigned i = 0; i < 4; i++) {
                Hbg__Envelope *env = NULL;
                int fds[HBG_WIRE_MAX_FDS];
                unsigned nfds = 0;
                int err = wire_recv(sock, HBG_WIRE_MAX_MSG_DEFAULT, &env, fds, 0, &nfds);
                if (err == 0 && env->msg_case == HBG__ENVELOPE__MSG_ERROR) {
                        *ret_env = env;
                        return 0;
                }
                if (err == 0)
                        wire_free(env);
                else if (err != -ECONNRESET && err != -EPROTO && err != -EMSGSIZE)
                        break; /* -EAGAIN: the peer is there and sent nothing more */
        }
        return -ENOMSG;
}
