/* SPDX-License-Identifier: MIT */
/*
 * Framing of the control protocol: one hbg.Envelope per AF_UNIX
 * SOCK_SEQPACKET record, file descriptors by SCM_RIGHTS. Shared by hbgd,
 * libhbgclient and hbgctl. docs/PROTOCOL.md.
 */
#pragma once

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include "hbg.pb-c.h"

#define HBG_PROTO_MAJOR 1u
#define HBG_PROTO_MINOR 8u  /* 1: RecordRequest (graph replay); 2: CancelRequest, KillRequest,
                               ValidateRequest (dry runs); 3: the kernel table (SessionReply.kernels,
                               KernelInfo's full signature); 4: TraceRequest (the task timeline);
                               5: the wake page (a 5th fd in SessionReply); 6: the client seals
                               its submission region once mapped, then rings (served from then);
                               7: every completion policy answers task_waiting (a tensor wait
                               sleeps until its writer's byte, not 1 ms at a time); 8:
                               ValidateRequest.first_task (a dry run in pieces of at most
                               HBG_VALIDATE_MAX_TASKS tasks, whatever max_recorded_tasks) */
#define HBG_PROTO_MINOR_WAKE_PAGE 5u
/* The oldest client hbgd opens a session for: every older one maps the
 * regions of another shared-memory layout (7 came with 1.6.1, protocol
 * 1.6), and is refused with both sides' versions (docs/PROTOCOL.md). */
#define HBG_PROTO_MINOR_OLDEST_SESSION 6u
#define HBG_PROTO_MINOR_SEALED_SUB 6u
#define HBG_PROTO_MINOR_TASK_WAKE 7u
#define HBG_PROTO_MINOR_VALIDATE_PIECES 8u
/* The most tasks of one ValidateRequest (protocol 1.8; before, at most
 * max_recorded_tasks): what one piece of a dry run may cost the slow-work
 * thread. */
#define HBG_VALIDATE_MAX_TASKS 65536u
#define HBG_WIRE_MAX_FDS 5u
#define HBG_WIRE_MAX_MSG_DEFAULT 65536u
/* The largest session reply: what every client reads of one record
 * (libhbgclient and hbgctl receive within HBG_WIRE_MAX_MSG_DEFAULT),
 * whatever hbgd's max_message_size says. The reply carries hbgd's whole
 * kernel table, so hbgd refuses to start with modules whose table would
 * not fit (daemon/kernel_rows.h, docs/KERNELS.md). */
#define HBG_WIRE_SESSION_REPLY_MAX HBG_WIRE_MAX_MSG_DEFAULT

/* hbg's version: the build passes it (-DHBG_VERSION=...). */
#ifndef HBG_VERSION
#define HBG_VERSION "0.0.0"
#endif

/* Where hbgd listens unless told otherwise. */
#define HBG_DEFAULT_SOCKET "/run/hbgd/hbgd.sock"

/* The socket a client uses: `path` if given, else $HBG_SOCKET, else the
 * default (hbg_connect(), hbgctl). */
static inline const char *wire_socket_path(const char *path) {
        if (path && path[0])
                return path;
        const char *env = getenv("HBG_SOCKET");
        return env && env[0] ? env : HBG_DEFAULT_SOCKET;
}

/* Send one envelope with up to HBG_WIRE_MAX_FDS fds. 0 or -errno
 * (-EMSGSIZE if it packs larger than max_msg). */
int wire_send(int sock, const Hbg__Envelope *env, const int *fds, unsigned nfds, size_t max_msg);

/*
 * Receive one record. The size cap is enforced before unpacking; fds come
 * with MSG_CMSG_CLOEXEC and every received fd is closed on every error
 * path. Returns 0 with *ret_env and *ret_nfds fds in fds[], or:
 *   -ECONNRESET  orderly end of stream (or reset)
 *   -EMSGSIZE    record longer than max_msg
 *   -EPROTO      control data truncated, more than max_fds fds, a
 *                non-SCM_RIGHTS control message, or bytes that do not
 *                unpack as an Envelope
 *   -EAGAIN      nothing to read (non-blocking socket)
 */
int wire_recv(int sock, size_t max_msg, Hbg__Envelope **ret_env, int *fds, unsigned max_fds,
              unsigned *ret_nfds);
/* One record's bytes unpacked as wire_recv() does (an Envelope whatever
 * its case): free with wire_free(); NULL if they do not unpack. */
Hbg__Envelope *wire_unpack(const uint8_t *buf, size_t len);

/* Frees an envelope of wire_recv()'s or wire_unpack()'s (NULL: nothing),
 * and only such a one: its messages and strings are one arena of blocks, not protobuf-c's
 * separate allocations (hbg__envelope__free_unpacked() must not see it;
 * an envelope from anywhere else aborts here). */
void wire_free(Hbg__Envelope *env);

/* Read one record and drop it, closing every fd it carried (a refused
 * client's, daemon/refusal.c). 1: dropped, 0: end of stream (an empty
 * record reads the same), -EAGAIN: nothing queued, else -errno. */
int wire_discard(int sock);

/* The hello of this build's protocol version (HBG_PROTO_MAJOR.MINOR)
 * naming the sender: *env carries *hello. name is not copied: it must
 * live until the envelope is sent. Every side opens (or answers) with it. */
void wire_hello(Hbg__Envelope *env, Hbg__Hello *hello, const char *name);

/* Build and send an Error envelope. */
int wire_send_error(int sock, int code, const char *message);

/*
 * After a send failed with -EPIPE or a receive with -ECONNRESET: the Error
 * record the peer queued before it closed, if there is one (hbgd's reason
 * for refusing the connection). On Linux, a unix socket closed with
 * records of ours unread resets us: our next send or receive fails with
 * ECONNRESET once, and what the peer sent before its close is still
 * there to read. Reads at most a few records, never waits. 0 and
 * *ret_env (an Error; free with wire_free()), or -ENOMSG.
 */
int wire_recv_queued_error(int sock, Hbg__Envelope **ret_env);
