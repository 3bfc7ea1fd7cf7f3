/* SPDX-License-Identifier: MIT */
/* A session's regions, channels and ring (daemon/session.h). */
#include "daemon/session.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <syslog.h>
#include <unistd.h>

#include "daemon/log.h"
#include "daemon/region_seal.h"
#include "daemon/spare_regions.h"
#include "shm/layout.h"

uint64_t session_memory(const struct hbg_engine *e, const struct hbg_geometry *g) {
        return engine_ring_memory(e, g) + g->sub_region_size + g->cpl_region_size;
}

/* Takes any half-built session; refunds its charge. */
static void session_free(struct session *s) {
        if (!s)
                return;
        /* Still sealing only when hbgd stops (the engine let go of a held
         * ring): the thread cleans up after itself, and hbgd's exit waits
         * for it (region_seal.h). */
        if (s->seal)
                hbgd_log(LOG_WARNING, "session %" PRIu64 " (pid %d uid %u): its client still holds its "
                         "submission region's lock, which hbgd's seal of it waits for: hbgd cannot exit "
                         "before it lets go (end that process to let it)", s->id, (int)s->pid, (unsigned)s->uid);
        region_seal_abandon(s->seal);
        s->seal = NULL;
        session_regions_free(&s->regions, &s->g);
        if (s->wake_fd >= 0)
                engine_wake_page_release(s->engine, s->wake_page);
        acct_remove_session(s->acct, s->uid, s->memory);
        hbgd_log_limit_unref(s->log_limit);
        free(s);
}

/* From engine_collect(): no scheduler thread touches the ring now. */
static void session_released(void *userdata) {
        session_free(userdata);
}

static void session_served(struct session *s) {
        s->serving = SESSION_SERVED;
        engine_ring_serve(s->ring);
        /* Then the pre-fault, behind what the client still does to connect. */
        s->prefault.class = SLOW_BACKGROUND;
        session_prefault_hold(s->slow);
        slow_work_submit(s->slow, &s->prefault);
}

/* The session closed while its pre-fault piece or hbgd's seal ran, which
 * is done now: let its ring go, which may free it and, through
 * session_released(), the session. Collected at once, through hbgd's
 * collect (session_on_release()), so that the memory and fds it gives
 * back ask for spares now, not at the next connect. Returns whether it
 * did: s may be gone then. */
static bool release_held_ring(struct session *s) {
        if (!s->held_ring)
                return false;
        struct hbg_engine *e = s->engine;
        struct hbg_ring *r = s->held_ring;
        void (*collect)(void *) = s->collect;
        void *arg = s->collect_arg;
        s->held_ring = NULL;
        ring_unhold(e, r);
        if (collect)
                collect(arg); /* s may be freed from here on */
        else
                engine_collect(e);
        return true;
}

/* hbgd's seal of the region is done (io thread). */
static void region_sealed(void *userdata, int result) {
        struct session *s = userdata;
        s->seal = NULL;
        if (release_held_ring(s))
                return;
        if (result < 0) {
                /* Only the client can have made the seal impossible
                 * (F_SEAL_SEAL without it): its graphs never run. */
                s->serving = SESSION_UNSERVABLE;
                hbgd_log_session(LOG_WARNING, s->log_limit,
                                 "session %" PRIu64 ": cannot seal its submission region against writes (%s): "
                                 "not served; its graphs never run", s->id, strerror(-result));
                return;
        }
        hbgd_log_session(LOG_DEBUG, s->log_limit,
                         "session %" PRIu64 ": its client rang before it sealed its submission region "
                         "(protocol 1.5 or older): sealed by hbgd", s->id);
        session_served(s);
}

/*
 * The first doorbell: serve the ring once the submission region is sealed
 * F_SEAL_FUTURE_WRITE. Before, the client could punch holes in it, and a
 * scheduler thread's fault on a page being punched waits for the whole
 * punch (docs/SECURITY.md); after, no writable mapping can be made, and
 * fallocate(2) and MADV_REMOVE fail. A protocol 1.6 client seals it
 * itself, once it has mapped it, and then rings (docs/PROTOCOL.md).
 * Another (an older client, or one that did not) is sealed by hbgd, on a
 * thread of its own (region_seal.h: the client can hold the lock that
 * takes for as long as it likes). A client that rang before it mapped its
 * region can then map it read-only only: its own loss.
 */
static void session_serve(struct session *s) {
        int seals = fcntl(s->regions.sub_fd, F_GET_SEALS);
        if (seals >= 0 && (seals & F_SEAL_FUTURE_WRITE)) {
                session_served(s);
                return;
        }
        int err = region_seal_start(s->loop, s->regions.sub_fd, region_sealed, s, &s->seal);
        if (err < 0) {
                /* Out of threads or descriptors now: the next doorbell or
                 * housekeeping tick tries again (session_tick()). */
                if (!s->seal_retry)
                        hbgd_log_session(LOG_WARNING, s->log_limit,
                                         "session %" PRIu64 ": cannot start sealing its submission region: %s; "
                                         "trying again", s->id, strerror(-err));
                s->seal_retry = true;
                return;
        }
        s->seal_retry = false;
        s->serving = SESSION_SEALING;
}

const char *session_serving_name(const struct session *s) {
        static const char *const names[] = {
                [SESSION_UNSERVED] = "unserved",
                [SESSION_SEALING] = "sealing",
                [SESSION_SERVED] = "served",
                [SESSION_UNSERVABLE] = "unservable",
        };
        unsigned i = (unsigned)s->serving;
        return i < sizeof(names) / sizeof(names[0]) && names[i] ? names[i] : "?";
}

bool session_tick(struct session *s) {
        if (s->seal_retry && s->serving == SESSION_UNSERVED)
                session_serve(s);
        return s->seal_retry && s->serving == SESSION_UNSERVED;
}

static void doorbell_rang(struct session *s) {
        if (s->serving == SESSION_SERVED)
                ring_kick(s->ring);
        else if (s->serving == SESSION_UNSERVED)
                session_serve(s);
        /* Sealing: served (and kicked) when that is done. Unservable: the
         * client's own doing (region_sealed()). */
}

/* Datagrams read from a doorbell per turn before the other sources go. */
#define DOORBELL_READS_PER_TURN 64

/* The doorbell: drain what the client wrote (never blocking: MSG_DONTWAIT
 * on our own end), then wake the schedulers. A client that rings without
 * end gets its own ring kicked, nothing more.
 *
 * Read until EAGAIN: io_uring's multishot poll fires once for data that
 * is already queued, so a doorbell left half-read would never be read
 * again, and what it holds would stay queued for good: a client can put
 * its own control socket in a datagram (SCM_RIGHTS), and a socket in
 * flight never hangs up, so its session would never close. After a
 * turn's worth we come back in the next round (fairness).
 *
 * No descriptor ever reaches hbgd: with no control buffer the kernel
 * closes whatever a datagram carries as it is read (MSG_CTRUNC); we
 * only count it. */
static void on_doorbell(struct io_source *src, uint32_t events, void *userdata) {
        struct session *s = userdata;
        char buf[64];
        (void)events;
        for (unsigned i = 0; i < DOORBELL_READS_PER_TURN; i++) {
                struct iovec iov = { .iov_base = buf, .iov_len = sizeof(buf) };
                struct msghdr m = { .msg_iov = &iov, .msg_iovlen = 1 };
                ssize_t n = recvmsg(s->regions.doorbell_fd, &m, MSG_DONTWAIT);
                if (n >= 0) {
                        if ((m.msg_flags & MSG_CTRUNC) && s->doorbell_fds_dropped++ == 0)
                                hbgd_log_session(LOG_WARNING, s->log_limit,
                                                 "session %" PRIu64 ": a doorbell datagram carried file "
                                                 "descriptors; they were closed unread",
                                                 s->id);
                        continue;
                }
                if (errno == EINTR)
                        continue;
                /* EAGAIN: drained. Another error: the hang-up of the
                 * control socket closes the session. */
                doorbell_rang(s);
                return;
        }
        doorbell_rang(s);
        io_source_again(s->loop, src);
}

int session_new(struct session **ret, struct hbg_engine *e, struct io_loop *loop, struct slow_work *slow,
                struct accounting *acct, const struct hbg_geometry *g, uint64_t memory, uint64_t id, uid_t uid,
                pid_t pid, struct hbg_log_limit *log_limit, unsigned weight, uint64_t stall_timeout_ms) {
        struct session *s = calloc(1, sizeof(*s));
        if (!s) {
                acct_remove_session(acct, uid, memory);
                return -ENOMEM;
        }
        s->id = id;
        s->uid = uid;
        s->pid = pid;
        s->g = *g;
        s->first_id = 0;
        s->memory = memory;
        s->acct = acct;
        s->engine = e;
        s->loop = loop;
        s->slow = slow;
        s->weight = weight;
        s->stall_timeout_ms = stall_timeout_ms;
        session_regions_clear(&s->regions);
        s->wake_fd = -1;
        s->log_limit = hbgd_log_limit_ref(log_limit);
        *ret = s;
        return 0;
}

/* The build (the slow-work thread's job; a lone connect's runs on the io
 * thread, with the worker held off: slow_work_run_here()): everything a
 * session is made of but the doorbell's watch, the engine ring published. Touches the session, which
 * nothing else does until done, and the engine (its ring table is
 * locked). A failure leaves what was made for session_close(). */
static int session_build(struct session *s, const char **why) {
        const struct hbg_geometry *g = &s->g;
        char label[24];
        snprintf(label, sizeof(label), "%" PRIu64, s->id);
        int err;

        /* A set made ahead if one of this geometry is ready (a fresh
         * one: never handed out), else made now. */
        if (spare_regions_take(s->spare_regions, g, &s->regions))
                layout_cpl_region_init(s->regions.cpl, g, s->first_id);
        else if ((err = session_regions_make(&s->regions, g, label, s->first_id, why)) < 0)
                return err;

        /* The uid's wake page (§9.4): its sessions share it with no
         * other uid's. */
        s->wake_page = engine_wake_page_acquire(s->engine, s->uid, &s->wake_fd);

        char ring_name[96];
        snprintf(ring_name, sizeof(ring_name), "session %" PRIu64 " (pid %d)", s->id, (int)s->pid);
        struct hbg_ring_params p = {
                .geometry = *g,
                .sub_region = s->regions.sub,
                .sub_fd = s->regions.sub_fd,
                .cpl_region = s->regions.cpl,
                .first_id = s->first_id,
                .completion_fd = s->regions.completion_fd,
                .name = ring_name,
                .log_fields = hbgd_log_limit_fields(s->log_limit),
                /* One share per uid: a user's sessions take turns
                 * together, whatever their number (§9.5). */
                .share_id = (uint32_t)s->uid,
                .weight = s->weight,
                .stall_timeout_ms = s->stall_timeout_ms,
                .released = session_released,
                .released_userdata = s,
                /* Not before its region is sealed (session_serve()). */
                .serve_later = true,
        };
        *why = "cannot start the session";
        return engine_ring_add(s->engine, &p, &s->ring);
}

#define SESSION_OF(job, member) ((struct session *)((char *)(job) - offsetof(struct session, member)))

static void build_run(struct slow_job *job) {
        struct session *s = SESSION_OF(job, build);
        s->build_err = session_build(s, &s->build_why);
}

void session_on_release(struct session *s, void (*collect)(void *arg), void *arg) {
        s->collect = collect;
        s->collect_arg = arg;
}

struct slow_job *session_build_job(struct session *s, struct spare_regions *spares) {
        s->spare_regions = spares;
        s->build.run = build_run;
        s->build.uid = s->uid;
        s->build.class = SLOW_SETUP;
        return &s->build;
}

bool session_build_cheap(void *session) {
        const struct session *s = session;
        return s->spare_regions && spare_regions_have(s->spare_regions, &s->g);
}

/* How long the pre-fault holds back after the last sign of a connect
 * (session_prefault_hold()). A connect's own work after hbgd's reply (the
 * client maps its regions, sets up its hang-up watch) takes about a
 * millisecond here, several while eight connect at once; a pre-fault
 * running meanwhile took one of the two cores from them and made the p99
 * of a burst of connects 4-6x longer (docs/PERFORMANCE.md). */
#define PREFAULT_QUIET_NS ((int64_t)5 * 1000000)

void session_prefault_hold(struct slow_work *slow) {
        slow_work_hold_background(slow, PREFAULT_QUIET_NS);
}

static void prefault_run(struct slow_job *job) {
        struct session *s = SESSION_OF(job, prefault);
        s->prefault_more = ring_prefault(s->prefault_ring, &s->prefault_cursor, SESSION_PREFAULT_PIECE,
                                         &s->prefault_stop, SESSION_PREFAULT_REGION_NS);
        s->prefault_pieces++;
}

/* io thread: the next piece, behind the jobs queued meanwhile (round robin
 * by uid). A kernel that cannot (-EINVAL, before Linux 5.14) or memory
 * short now (-ENOMEM) ends it: the pages then come on first touch. */
static void prefault_done(struct slow_job *job) {
        struct session *s = SESSION_OF(job, prefault);
        if (release_held_ring(s))
                return;
        if (s->prefault_more > 0) {
                slow_work_submit(s->slow, &s->prefault);
                return;
        }
        if (s->prefault_more < 0)
                hbgd_log_session(LOG_DEBUG, s->log_limit,
                                 "session %" PRIu64 ": pre-faulting stopped after %" PRIu64 " bytes: %s; the rest "
                                 "comes on first touch", s->id, s->prefault_cursor, strerror(-s->prefault_more));
}

int session_start(struct session *s, const char **why) {
        int err = s->build_err;
        *why = s->build_why;
        if (err < 0)
                return err;
        *why = "cannot start the session";
        err = io_loop_add(s->loop, s->regions.doorbell_fd, on_doorbell, s, &s->doorbell_src);
        if (err < 0)
                return err;
        *why = NULL;
        s->prefault_ring = s->ring;
        s->prefault.run = prefault_run;
        s->prefault.done = prefault_done;
        s->prefault.uid = s->uid;
        s->prefault_more = 1;
        /* Submitted at the first doorbell (session_serve()): nothing of
         * the regions is read before they are sealed. */
        return 0;
}
void session_client_fds(const struct session *s, int ret_fds[5]) {
        ret_fds[0] = s->regions.sub_fd;
        ret_fds[1] = s->regions.cpl_fd;
        ret_fds[2] = s->regions.doorbell_peer_fd;
        ret_fds[3] = s->regions.completion_peer_fd;
        ret_fds[4] = s->wake_fd;
}

void session_client_fds_sent(struct session *s) {
        session_regions_sent(&s->regions);
}

bool session_close(struct session *s, int reason) {
        if (!s)
                return false;
        /* Nothing new runs on its behalf from here on. A pre-fault piece
         * running now is not waited for (the io thread waits for no
         * fault): it stops before its next page; the ring it works on
         * stays held until its done (prefault_done()). Relaxed: the flag
         * only shortens the piece. */
        atomic_store_explicit(&s->prefault_stop, true, memory_order_relaxed);
        slow_work_cancel(s->slow, &s->build);
        if (!s->ring) {
                /* Never built (its build failed, or never ran): no engine
                 * to wait for, and no prefault job was ever submitted. */
                session_free(s);
                return false;
        }
        bool piece_running = !slow_work_detach(s->slow, &s->prefault);
        if (s->doorbell_src) {
                io_source_del(s->loop, s->doorbell_src);
                s->doorbell_src = NULL;
        }
        /* The fds the client never got go now; the rest of the session
         * lives until the engine releases the ring. */
        session_client_fds_sent(s);
        struct hbg_ring *r = s->ring;
        s->ring = NULL;
        /* hbgd's seal of the region, under way, is not waited for either
         * (region_seal.h): the ring, and with it the session and its
         * charge, stays until it is done (region_sealed()). At most one
         * of the two runs: the pre-fault starts once the seal is on. */
        if (piece_running || s->seal) {
                ring_hold(s->engine, r);
                s->held_ring = r;
        }
        if (s->seal)
                hbgd_log_session(LOG_NOTICE, s->log_limit,
                                 "session %" PRIu64 " (pid %d uid %u) closed while hbgd's seal of its submission "
                                 "region waits for the client to let go of the region's lock: its memory stays "
                                 "charged to uid %u until then", s->id, (int)s->pid, (unsigned)s->uid,
                                 (unsigned)s->uid);
        engine_ring_remove(s->engine, r, reason);
        return engine_collect(s->engine) > 0;
}
