/* SPDX-License-Identifier: MIT */
/*
 * hbgd against a client that attacks it through shared memory, as
 * test_e2e_shm_attack.c (which lists what each attack is checked for),
 * at the ring's control words and the regions themselves: (c) the cursors
 * moved, and the failure list overflowed by unwritten tasks; (d) graph
 * records and the mailbox forged; (f) an attacker holding its sealed
 * regions' memfds, by raw records; (g) a session's sleepers words held at
 * 0xffffffff: hbgd then makes a futex wake per publication for that
 * session's ring (fewer while its ext_looking, flipped by a writer,
 * claims a worker looks), and nothing else changes (SECURITY.md). The
 * helpers: shm_attack_util.h. As there, hbgd runs with stall_timeout_ms =
 * 1000, so that a graph record promising tasks never submitted ends in
 * one second.
 *
 * HBG_TEST_SCALE divides the work (default 10); HBG_TEST_SEED fixes the
 * random attacks; HBG_TEST_VERBOSE=1 shows hbgd's log (whose checks are
 * then skipped: it is not kept in a file).
 */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "hbg/hbg.h"
#include "proto/wire.h"
#include "common/kernel_sig.h"
#include "shm/layout.h"
#include "tests/e2e/e2e_kid.h"
#include "tests/e2e/e2e_util.h"
#include "tests/e2e/shm_attack_util.h"
#include "tests/module_util.h"
#include "tests/test_util.h"
#include "tests/check_main.h"

/* ------------------------------------------------------------ c. cursors */

/* For arg/1000 ms: the producer cursors set to values that are behind,
 * far ahead, or random, in quick turns. */
static void move_cursors(const void *ctx, uint64_t ms) {
        const struct victim *v = ctx;
        uint64_t s = kid_seed() | 1;
        long long end = daemon_now_ms() + (long long)ms;
        for (unsigned i = 0; daemon_now_ms() < end; i++) {
                uint64_t sub = atomic_load_explicit(&v->sh->submitted, memory_order_relaxed);
                uint64_t r = xorshift(&s), to;
                switch (i % 6) {
                case 0: to = 0; break;
                case 1: to = UINT64_MAX; break;
                case 2: to = sub + v->D * (1 + r % 4); break;
                case 3: to = sub ? sub - 1 - r % sub : 0; break;
                case 4: to = r; break;
                default: to = sub + 1; break;
                }
                atomic_store(&v->sh->submitted, to);
                atomic_store(&v->sh->window_waiting, xorshift(&s) % 4 ? xorshift(&s) : 0);
                atomic_store(&v->sh->mailbox_tail, xorshift(&s));
                if (i % 16 == 0) {
                        ring_doorbell(v);
                        sleep_us(200);
                }
        }
}

/* More failures than the ring's list keeps (below, on a raw session). */
static int failures_overflow(int sock, const struct target *tg);

static bool claimed_far(const struct victim *v) {
        return atomic_load(&v->ch->classified) >= atomic_load(&v->sh->submitted);
}

static int cursors_fn(int sock, void *arg) {
        struct victim v;
        if (attacker_start(sock, arg, &v) < 0)
                return 1;
        hbg_tensor t;
        if (hbg_tensor_alloc(v.c, 4096, &t) < 0) {
                kid_say(sock, "FAIL hbg_tensor_alloc: %s", hbg_last_error(v.c));
                return 1;
        }
        struct tally tl = { 0 };

        /* Backwards, between graphs: hbgd neither runs anything again nor
         * stops; the next graphs are right. */
        for (unsigned i = 0; i < 4; i++) {
                if (fill_graph(&v, t, 1.0f + (float)i, &tl) != 0 || tl.corrupted) {
                        kid_say(sock, "FAIL graph %u after the cursors went back: %d [%s]", i, tl.first_code,
                                tl.first_msg);
                        return 1;
                }
                uint64_t sub = atomic_load(&v.sh->submitted);
                atomic_store(&v.sh->submitted, i % 2 ? 0 : sub - 1);
                atomic_store(&v.sh->graphs_submitted, i % 2 ? 0 : atomic_load(&v.sh->graphs_submitted) - 1);
                atomic_store(&v.sh->mailbox_tail, UINT64_MAX - i);
                ring_doorbell(&v);
                sleep_us(20000);
        }
        kid_say(sock, "NOTE cursors moved backwards 4 times between graphs: every graph after them was right");

        /* Far ahead, once: hbgd claims ids never written (their stale or
         * zero descriptors fail) up to the window's end; the library's
         * next task lands on an id already claimed, and its graph fails
         * with the reason logged. */
        uint64_t next = atomic_load(&v.sh->submitted);
        atomic_store(&v.sh->submitted, next + v.D / 2);
        ring_doorbell(&v);
        if (!await(&v, claimed_far, IO_MS)) {
                kid_say(sock, "FAIL hbgd did not claim up to the forged cursor %" PRIu64 " (classified %" PRIu64 ")",
                        next + v.D / 2, atomic_load(&v.ch->classified));
                return 1;
        }
        struct tally ahead = { 0 };
        int err = fill_graph(&v, t, 9.0f, &ahead);
        /* Success is a race, and right: hbgd publishes `classified` as it
         * claims, before it copies the descriptors, so the library's
         * descriptor may land first and run as written (seen once, in the
         * -O3 run). Then the data must be the graph's. */
        if (err == 0 && !ahead.unclear && !ahead.corrupted) {
                kid_say(sock, "NOTE submitted moved D/2 ahead: the library's descriptor came before hbgd copied "
                        "it, and its graph ran as written");
        } else if (err != -EPROTO || ahead.unclear) {
                kid_say(sock, "FAIL a graph whose ids hbgd claimed before they were written: %d (%s) [%s], "
                        "expected -EPROTO", err, strerror(-err), hbg_last_error(v.c));
                return 1;
        } else {
                char a[160];
                snprintf(a, sizeof(a), "%s: graph %" PRIu64 " ", v.name, v.last_graph);
                expect_log(sock, a, "(descriptor id does not match its slot's id)");
                kid_say(sock, "NOTE submitted moved D/2 ahead: the next graph failed: %s", hbg_last_error(v.c));
        }

        /* Toggled in quick turns by another process while graphs run. */
        pid_t w = fork_writer(move_cursors, &v, 1000);
        graphs_while_writer(&v, t, w, &tl);
        tally_say(sock, &tl, "graphs while the cursors were toggled");

        /* graphs_submitted beyond the graph ring: the ring stops. A new
         * session, whose log lines are not used up by the failures above
         * (hbgd logs ten a session per 10 s). */
        victim_close(&v);
        const struct target *tg = arg;
        if (victim_open(&v, sock, tg->path) < 0 || hbg_tensor_alloc(v.c, 256, &t) < 0 ||
            fill_graph(&v, t, 1.0f, &tl) != 0) {
                kid_say(sock, "FAIL a second session: %s", v.c ? hbg_last_error(v.c) : "not opened");
                return 1;
        }
        atomic_store(&v.sh->graphs_submitted, atomic_load(&v.sh->graphs_submitted) + v.G + 1);
        ring_doorbell(&v);
        if (!await(&v, session_closed, IO_MS)) {
                kid_say(sock, "FAIL graphs_submitted G + 1 ahead did not stop the session");
                return 1;
        }
        if (expect_clear_failure(sock, &v, t, "graphs_submitted G + 1 ahead") < 0)
                return 1;
        expect_stop_logged(sock, &v, "graphs_submitted is more than the graph ring ahead");
        if (failures_overflow(sock, tg) < 0)
                return 1;
        return attacker_end(sock, &v, 0);
}

START_TEST(cursors_moved) {
        run_attack("cursors_moved", cursors_fn);
}
END_TEST

/* ------------------------------------------------------------ d. graph records and the mailbox */

static int host_ok(void *userdata) {
        (void)userdata;
        return 0;
}

static bool ext_ready(const struct victim *v) {
        return atomic_load(&v->ch->ext_ready_tail) > 0;
}

/* Post a forged mailbox entry at hbgd's head. */
static void forge_mailbox(const struct victim *v, uint64_t task, int32_t status, uint32_t reserved0) {
        uint64_t head = atomic_load(&v->ch->mailbox_consumed);
        struct hbg_mailbox_entry *e = &v->mailbox[head & (v->M - 1)];
        e->task_id = task;
        e->status = status;
        e->reserved0 = reserved0;
        e->reserved1 = 0;
        atomic_store_explicit(&e->seq, head + 1, memory_order_release);
        ring_doorbell(v);
}

enum forgery {
        RECORD_GAP,          /* first_id not the previous record's last + 1 */
        RECORD_RESERVED,
        RECORD_BACKWARDS,    /* last_id < first_id */
        RECORD_PROMISE,      /* tasks never submitted: the stall detector */
        MAILBOX_UNSUBMITTED, /* a task never submitted */
        MAILBOX_NOT_EXTERNAL,
        MAILBOX_RESERVED,    /* an external task's, a reserved field not zero */
        MAILBOX_BAD_STATUS,  /* an external task, status 7: the task fails */
        N_FORGERIES,
};

static const struct {
        const char *what;
        const char *why;        /* the stop's reason; NULL: no stop */
} forgeries[N_FORGERIES] = {
        [RECORD_GAP] = { "graph record not contiguous", "graph record is not the contiguous continuation" },
        [RECORD_RESERVED] = { "graph record reserved field", "graph record is not the contiguous continuation" },
        [RECORD_BACKWARDS] = { "graph record last_id < first_id", "graph record is not the contiguous continuation" },
        [RECORD_PROMISE] = { "graph record of tasks never submitted", NULL },
        [MAILBOX_UNSUBMITTED] = { "mailbox entry for a task never submitted",
                                  "mailbox completion for a task never submitted" },
        [MAILBOX_NOT_EXTERNAL] = { "mailbox entry for a kernel task", "mailbox completion for a task that is not a host task" },
        [MAILBOX_RESERVED] = { "mailbox entry with a reserved field set", "mailbox entry reserved field not zero" },
        [MAILBOX_BAD_STATUS] = { "mailbox entry with status 7", NULL },
};

/* Graph record k (the library's next) forged and published by hand. */
static void forge_record(const struct victim *v, enum forgery f, uint64_t first) {
        uint64_t k = atomic_load(&v->sh->graphs_submitted);
        struct hbg_graph_record *r = &v->records[k & (v->G - 1)];
        r->graph_id = 777;
        r->first_id = f == RECORD_GAP ? first + 5 : first;
        r->last_id = f == RECORD_BACKWARDS ? first - 1 : f == RECORD_PROMISE ? first + 100 : first;
        r->reserved = f == RECORD_RESERVED ? 1 : 0;
        atomic_store(&v->sh->graphs_submitted, k + 1);
        ring_doorbell(v);
}

/* One forgery on a fresh session. 0, or -1 with "FAIL" said. */
static int forge_one(int sock, const struct target *tg, enum forgery f) {
        struct victim v;
        if (victim_open(&v, sock, tg->path) < 0)
                return -1;
        hbg_tensor t;
        struct tally tl = { 0 };
        if (hbg_tensor_alloc(v.c, 256, &t) < 0 || fill_graph(&v, t, 2.0f, &tl) != 0) {
                kid_say(sock, "FAIL %s: the first graph: %s", forgeries[f].what, hbg_last_error(v.c));
                return -1;
        }
        uint64_t next = atomic_load(&v.sh->submitted), host = 0, kernel = 0, graph = 0;
        if (f >= MAILBOX_NOT_EXTERNAL) {
                /* A host task and a kernel task waiting for it, submitted;
                 * hbg_graph_status runs no host function, so the host task
                 * stays with hbgd's mailbox as the only way to complete. */
                hbg_task h = HBG_TASK_INIT(NULL), k = HBG_TASK_INIT("noop");
                h.host_fn = host_ok;
                int err = hbg_graph_add(v.c, &h, &host);
                k.n_deps = 1;
                k.deps[0] = host;
                if (err == 0)
                        err = hbg_graph_add(v.c, &k, &kernel);
                if (err == 0)
                        err = hbg_graph_submit(v.c, &graph);
                if (err < 0 || !await(&v, ext_ready, IO_MS)) {
                        kid_say(sock, "FAIL %s: host task graph: %d [%s]", forgeries[f].what, err,
                                hbg_last_error(v.c));
                        return -1;
                }
        }
        switch (f) {
        case RECORD_GAP:
        case RECORD_RESERVED:
        case RECORD_BACKWARDS:
        case RECORD_PROMISE:
                forge_record(&v, f, next);
                break;
        case MAILBOX_UNSUBMITTED:
                forge_mailbox(&v, next + 3, 0, 0);
                break;
        case MAILBOX_NOT_EXTERNAL:
                forge_mailbox(&v, kernel, 0, 0);
                break;
        case MAILBOX_RESERVED:
                forge_mailbox(&v, host, 0, 1);
                break;
        case MAILBOX_BAD_STATUS:
                forge_mailbox(&v, host, 7, 0);
                break;
        case N_FORGERIES:
                break;
        }
        if (f == MAILBOX_BAD_STATUS) {
                /* Only the host task's graph fails, as with -EINVAL. */
                long long deadline = daemon_now_ms() + IO_MS;
                uint64_t task = 0;
                int st;
                while ((st = hbg_graph_status(v.c, graph, &task)) == 1 && daemon_now_ms() < deadline)
                        sleep_us(1000);
                if (st != -EINVAL || task != host || !hbg_last_error(v.c)[0]) {
                        kid_say(sock, "FAIL %s: the graph came to %d (%s) at task %" PRIu64 ", expected -EINVAL at "
                                "%" PRIu64 " [%s]", forgeries[f].what, st, strerror(-st), task, host,
                                hbg_last_error(v.c));
                        return -1;
                }
                char a[160], b[200];
                snprintf(a, sizeof(a), "%s: graph ", v.name);
                snprintf(b, sizeof(b), "failed: %s at task %" PRIu64 " (host task reported failure)",
                         hbg_strerror(-EINVAL), host);
                expect_log(sock, a, b);
                if (fill_graph(&v, t, 6.0f, &tl) != 0 || tl.corrupted) {
                        kid_say(sock, "FAIL %s: the next good graph: %s", forgeries[f].what, tl.first_msg);
                        return -1;
                }
                kid_say(sock, "NOTE %s: that graph failed with EINVAL, the session went on", forgeries[f].what);
                victim_close(&v);
                return 0;
        }
        /* The ring stops and hbgd closes the session (a graph that can
         * never complete: the stall detector, after stall_timeout_ms). */
        if (!await(&v, session_closed, IO_MS)) {
                kid_say(sock, "FAIL %s: the session was not stopped", forgeries[f].what);
                return -1;
        }
        int code = atomic_load(&v.ch->error_code);
        int want = f == RECORD_PROMISE ? -ETIME : -EPROTO;
        if (code != want) {
                kid_say(sock, "FAIL %s: the ring's error is %d (%s), expected %d", forgeries[f].what, code,
                        strerror(-code), want);
                return -1;
        }
        if (expect_clear_failure(sock, &v, t, forgeries[f].what) < 0)
                return -1;
        if (forgeries[f].why) {
                expect_stop_logged(sock, &v, forgeries[f].why);
        } else {
                char a[160];
                snprintf(a, sizeof(a), "session %" PRIu64 " (pid %d uid %u): closed: ", v.session, (int)getpid(),
                         (unsigned)getuid());
                expect_log(sock, a, hbg_strerror(-ETIME));
        }
        kid_say(sock, "NOTE %s: ring stopped with %s", forgeries[f].what, strerror(-code));
        victim_close(&v);
        return 0;
}

/* A session per forgery: most of them stop it. */
static int records_fn(int sock, void *arg) {
        kid_say(sock, "READY");
        if (kid_cmd(sock) != 'G')
                return 1;
        for (int f = 0; f < N_FORGERIES; f++)
                if (forge_one(sock, arg, (enum forgery)f) < 0)
                        return 1;
        kid_say(sock, "DONE");
        kid_cmd(sock);
        return 0;
}

START_TEST(forged_records_and_mailbox) {
        run_attack("forged_records_and_mailbox", records_fn);
}
END_TEST

#define OVERFLOW_GOOD 10u /* the clean graph's tasks */

/*
 * More failures than the ring's list keeps, none with a graph record
 * yet: submitted moved a window ahead with nothing written (D ids fail:
 * the list is full), again (D more fail, left out), then OVERFLOW_GOOD
 * written tasks, then a window ahead once more (D more left out). The
 * graphs recorded then: G0, the first window (its kept failures); G1, the
 * second (the lowest failure left out, kept whole); G2, the good tasks,
 * which must succeed although failures left out lie on both sides of it
 * (the failure tags say it has none); G3, the last window, whose
 * failures were all left out: it must fail at its first id, and reported
 * success before the list's overflow was tracked. The session goes on:
 * the next graph is right. 0, or -1 with "FAIL" said.
 */
static int failures_overflow(int sock, const struct target *tg) {
        struct raw_victim s;
        if (raw_open(&s, sock, tg->path) < 0)
                return -1;
        uint64_t D = s.D, good = 2 * D, last_first = good + OVERFLOW_GOOD;
        if (raw_submit_upto(sock, &s, D) < 0 || raw_submit_upto(sock, &s, 2 * D) < 0)
                return -1;
        /* Each its own bytes: they have no dependencies between them. */
        for (uint64_t id = good; id < last_first; id++)
                raw_write_fill(&s, id, 1.25f, 256 * (1 + id - good));
        if (raw_submit_upto(sock, &s, last_first) < 0 || raw_submit_upto(sock, &s, last_first + D) < 0)
                return -1;
        static const struct {
                int code;        /* 0: success */
                const char *says;
        } want[] = {
                { -ERANGE, "block_num" }, /* id 0's zeroed descriptor has the right id */
                { -EPROTO, "descriptor id does not match" },
                { 0, "" },
                { -EPROTO, "more failed tasks awaited their graphs" },
        };
        const uint64_t firsts[] = { 0, D, good, last_first, last_first + D };
        for (uint64_t k = 0; k < 4; k++)
                s.records[k] = (struct hbg_graph_record){ .graph_id = k, .first_id = firsts[k],
                                                          .last_id = firsts[k + 1] - 1 };
        atomic_store(&s.sh->graphs_submitted, 4);
        s.next_id = last_first + D;
        s.graphs = 4;
        bool right = false;
        int err = raw_graph(&s, 7.5f, IO_MS, &right);
        if (err != 0 || !right) {
                kid_say(sock, "FAIL failure list: the good graph after the overflow: %d (%s)", err, strerror(-err));
                return -1;
        }
        for (uint64_t k = 0; k < 4; k++) {
                const struct hbg_graph_entry *e = &s.table[k & (s.G - 1)];
                uint64_t at = want[k].code ? firsts[k] : 0;
                if (atomic_load(&e->seq) != k + 1 || e->status != want[k].code ||
                    (want[k].code && (e->first_error_task != at || !strstr(e->message, want[k].says)))) {
                        kid_say(sock, "FAIL failure list: graph %" PRIu64 " [%" PRIu64 ", %" PRIu64 "] came to %d "
                                "(%s) at task %" PRIu64 " [%s], expected %d (%s) at %" PRIu64, k, firsts[k],
                                firsts[k + 1] - 1, e->status, strerror(-e->status), e->first_error_task, e->message,
                                want[k].code, strerror(-want[k].code), at);
                        return -1;
                }
        }
        kid_say(sock, "NOTE failure list: 3D unwritten tasks around a clean graph: the clean graph succeeded, each "
                "other failed (the last: %s), the next graph was right", s.table[3].message);
        raw_close(&s);
        return 0;
}

/* ------------------------------------------------------------ f. sealed regions */

/* The completion region cannot be written, by any way a client has.
 * 0, or -1 with "FAIL" said. */
static int completion_refuses(int sock, struct raw_victim *s) {
        const struct hbg_cpl_header *ch = (const void *)s->cpl;
        int fd = s->fds[1];
        uint64_t wm = atomic_load(&ch->completed_watermark);
        char bad[96] = "";
        uint8_t ones[8];
        memset(ones, 0xff, sizeof(ones));

        void *p = mmap(NULL, s->cpl_size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
        if (p != MAP_FAILED) {
                munmap(p, s->cpl_size);
                snprintf(bad, sizeof(bad), "a writable shared mapping");
        }
        if (!bad[0] && mprotect((void *)(uintptr_t)s->cpl, s->cpl_size, PROT_READ | PROT_WRITE) == 0)
                snprintf(bad, sizeof(bad), "mprotect(PROT_WRITE) of the read-only mapping");
        /* /proc/self/mem writes with FOLL_FORCE: a shared mapping of a
         * memfd sealed F_SEAL_FUTURE_WRITE may not be written so. */
        int mem = open("/proc/self/mem", O_RDWR | O_CLOEXEC);
        int mem_errno = 0;
        if (mem >= 0) {
                ssize_t n = pwrite(mem, ones, sizeof(ones), (off_t)(uintptr_t)&ch->completed_watermark);
                mem_errno = errno;
                close(mem);
                if (!bad[0] && n >= 0)
                        snprintf(bad, sizeof(bad), "a write through /proc/self/mem");
        }
        /* A private writable mapping is a copy: the shared pages stay. */
        void *priv = mmap(NULL, s->cpl_size, PROT_READ | PROT_WRITE, MAP_PRIVATE, fd, 0);
        if (priv != MAP_FAILED) {
                memset((uint8_t *)priv + 64, 0xff, 8);
                munmap(priv, s->cpl_size);
        }
        if (!bad[0] && (write(fd, ones, 8) >= 0 || pwrite(fd, ones, 8, 64) >= 0))
                snprintf(bad, sizeof(bad), "write() on the memfd");
        if (!bad[0] && (ftruncate(fd, (off_t)s->cpl_size / 2) == 0 || ftruncate(fd, (off_t)s->cpl_size + 4096) == 0))
                snprintf(bad, sizeof(bad), "ftruncate of the memfd");
        if (!bad[0] && fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, 0, (off_t)s->cpl_size) == 0)
                snprintf(bad, sizeof(bad), "punching a hole in the memfd");
        if (!bad[0] && fallocate(fd, 0, (off_t)s->cpl_size, 4096) == 0)
                snprintf(bad, sizeof(bad), "fallocate past the memfd's end");
        struct stat st;
        if (!bad[0] && (fstat(fd, &st) < 0 || (uint64_t)st.st_size != s->cpl_size))
                snprintf(bad, sizeof(bad), "the memfd's size changed");
        if (!bad[0] && (ch->magic != HBG_CPL_MAGIC || atomic_load(&ch->completed_watermark) < wm ||
                        atomic_load(&ch->completed_watermark) == UINT64_MAX))
                snprintf(bad, sizeof(bad), "the region's contents changed");
        if (bad[0]) {
                kid_say(sock, "FAIL the completion region: %s succeeded", bad);
                return -1;
        }
        kid_say(sock, "NOTE completion region: writable mmap, mprotect, /proc/self/mem (%s), write, ftruncate, "
                "hole punching and growing all refused; a private mapping's writes stayed private",
                strerror(mem_errno));
        return 0;
}

/* The submission region of a served session: sealed (F_SEAL_FUTURE_WRITE,
 * by hbgd at the first doorbell of this raw client, which did not seal it
 * itself): no hole can be punched in it (a fault of hbgd's on a page being
 * punched would wait for the whole punch), no new writable mapping made,
 * no write(2); its size is sealed. The mapping we have still writes.
 * 0, or -1 with "FAIL" said. */
static int submission_refuses(int sock, struct raw_victim *s) {
        int fd = s->fds[0];
        char bad[96] = "";
        uint8_t ones[8];
        memset(ones, 0xff, sizeof(ones));
        int seals = fcntl(fd, F_GET_SEALS);
        if (seals < 0 || !(seals & F_SEAL_FUTURE_WRITE))
                snprintf(bad, sizeof(bad), "serving it unsealed (seals 0x%x)", seals);
        if (!bad[0] && fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, 0, (off_t)s->sub_size) == 0)
                snprintf(bad, sizeof(bad), "punching a hole in the memfd");
        if (!bad[0] && madvise(s->sub, s->sub_size, MADV_REMOVE) == 0)
                snprintf(bad, sizeof(bad), "MADV_REMOVE on the mapping");
        void *p = mmap(NULL, s->sub_size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
        if (p != MAP_FAILED) {
                munmap(p, s->sub_size);
                if (!bad[0])
                        snprintf(bad, sizeof(bad), "a second writable shared mapping");
        }
        if (!bad[0] && (write(fd, ones, 8) >= 0 || pwrite(fd, ones, 8, 64) >= 0))
                snprintf(bad, sizeof(bad), "write() on the memfd");
        if (!bad[0] && (ftruncate(fd, (off_t)s->sub_size / 2) == 0 || ftruncate(fd, 0) == 0 ||
                        ftruncate(fd, (off_t)s->sub_size + 4096) == 0 ||
                        fallocate(fd, 0, (off_t)s->sub_size, 4096) == 0))
                snprintf(bad, sizeof(bad), "changing the memfd's size");
        struct stat st;
        if (!bad[0] && (fstat(fd, &st) < 0 || (uint64_t)st.st_size != s->sub_size))
                snprintf(bad, sizeof(bad), "the memfd's size changed");
        if (bad[0]) {
                kid_say(sock, "FAIL the submission region: %s succeeded", bad);
                return -1;
        }
        kid_say(sock, "NOTE submission region once served: hole punching (fallocate, MADV_REMOVE), a new "
                "writable mapping, write and resizing all refused");
        return 0;
}

static int sealed_fn(int sock, void *arg) {
        const struct target *tg = arg;
        struct raw_victim s;
        if (raw_open(&s, sock, tg->path) < 0)
                return 1;
        kid_say(sock, "READY");
        if (kid_cmd(sock) != 'G')
                return 1;
        bool right;
        int err = raw_graph(&s, 1.5f, IO_MS, &right);
        if (err != 0 || !right) {
                kid_say(sock, "FAIL a graph of the raw session: %d (%s)", err, strerror(-err));
                return 1;
        }
        if (completion_refuses(sock, &s) < 0)
                return 1;
        err = raw_graph(&s, 2.5f, IO_MS, &right);
        if (err != 0 || !right) {
                kid_say(sock, "FAIL a graph after the completion region was attacked: %d (%s)", err, strerror(-err));
                return 1;
        }

        if (submission_refuses(sock, &s) < 0)
                return 1;
        err = raw_graph(&s, 3.5f, IO_MS, &right);
        if (err != 0 || !right) {
                kid_say(sock, "FAIL a graph after the submission region was attacked: %d (%s)", err,
                        strerror(-err));
                return 1;
        }
        kid_say(sock, "DONE");
        kid_cmd(sock);
        raw_close(&s);
        return 0;
}

START_TEST(sealed_regions) {
        run_attack("sealed_regions", sealed_fn);
}
END_TEST

/* ------------------------------------------------------------ g. the sleepers words */

/* The sleepers counts (RUNTIME_LOGIC §10.7) held at 0xffffffff by another
 * process, over and over: hbgd believes somebody always sleeps. */
static void garbage_sleepers(const void *ctx, uint64_t ms) {
        const struct victim *v = ctx;
        long long end = daemon_now_ms() + (long long)ms;
        for (unsigned i = 0; daemon_now_ms() < end; i++) {
                atomic_store(&v->sh->ext_sleepers, UINT32_MAX);
                atomic_store(&v->sh->graph_sleepers, UINT32_MAX);
                atomic_store(&v->sh->pipe_wanted, UINT32_MAX);
                /* Lookers claimed half the time, looking for ever (hbgd
                 * clamps that to a look): hbgd then skips the wakes and
                 * looks again later; the other half it makes them. */
                atomic_store(&v->sh->ext_look_until_ns, UINT64_MAX);
                atomic_store(&v->sh->ext_looking, i % 2 ? UINT32_MAX : 0);
                sleep_us(100);
        }
}

static int host_count(void *userdata) {
        atomic_fetch_add((_Atomic unsigned *)userdata, 1);
        return 0;
}

/* Host tasks and fills while the sleepers words are garbage: every result
 * right, every host function run once. */
static int sleepers_graphs(int sock, struct victim *v, hbg_tensor t, unsigned rounds, struct tally *tl) {
        static _Atomic unsigned ran;
        atomic_store(&ran, 0);
        for (unsigned r = 0; r < rounds; r++) {
                for (unsigned i = 0; i < 8; i++) {
                        hbg_task h = HBG_TASK_INIT(NULL);
                        h.host_fn = host_count;
                        h.host_userdata = (void *)&ran;
                        if (hbg_graph_add(v->c, &h, NULL) < 0) {
                                kid_say(sock, "FAIL hbg_graph_add(host): %s", hbg_last_error(v->c));
                                return -1;
                        }
                }
                int err = fill_graph(v, t, 2.0f + (float)r, tl);
                if (err != 0 || tl->corrupted) {
                        kid_say(sock, "FAIL graph %u with the sleepers words garbage: %d [%s]", r, err,
                                hbg_last_error(v->c));
                        return -1;
                }
        }
        if (atomic_load(&ran) != 8 * rounds) {
                kid_say(sock, "FAIL %u host functions ran, %u were added", atomic_load(&ran), 8 * rounds);
                return -1;
        }
        return 0;
}

static int sleepers_fn(int sock, void *arg) {
        const struct target *tg = arg;
        struct victim v = { .doorbell = -1, .control = -1 };
        /* A session without host workers: its library never touches the
         * words, so hbgd reads exactly what this attacker writes. (A
         * library with workers counts itself in with +1/-1: garbage there
         * can only lose that client's own wake-ups, or, ext_looking's,
         * delay them, RUNTIME_LOGIC §10.7.) */
        hbg_connect_options o = HBG_CONNECT_OPTIONS_INIT;
        o.socket_path = tg->path;
        o.name = "shm-attacker";
        o.heap_bytes = ATTACK_HEAP;
        o.task_window = ATTACK_WINDOW;
        if (hbg_connect_opts(&v.c, &o) < 0) {
                kid_say(sock, "FAIL hbg_connect_opts: %s", hbg_last_error(NULL));
                return 1;
        }
        uint64_t session = 0, cpl_size = 0;
        v.sub = find_session_mapping("sub", &session, &v.sub_size);
        v.cpl = v.sub ? find_session_mapping("cpl", &session, &cpl_size) : NULL;
        if (!v.sub || !v.cpl) {
                kid_say(sock, "FAIL the session's regions not found");
                return 1;
        }
        v.sh = (struct hbg_sub_header *)(void *)v.sub;
        v.ch = (const struct hbg_cpl_header *)(const void *)v.cpl;
        kid_say(sock, "READY");
        if (kid_cmd(sock) != 'G')
                return 1;
        hbg_tensor t;
        if (hbg_tensor_alloc(v.c, 4096, &t) < 0) {
                kid_say(sock, "FAIL hbg_tensor_alloc: %s", hbg_last_error(v.c));
                return 1;
        }
        struct tally tl = { 0 };
        /* Set once, between graphs: every publication now wakes. */
        atomic_store(&v.sh->ext_sleepers, UINT32_MAX);
        atomic_store(&v.sh->graph_sleepers, UINT32_MAX);
        atomic_store(&v.sh->pipe_wanted, UINT32_MAX);
        if (sleepers_graphs(sock, &v, t, 2, &tl) < 0)
                return 1;
        /* And rewritten by another process while graphs run. */
        pid_t w = fork_writer(garbage_sleepers, &v, 200);
        while (writer_running(w))
                if (sleepers_graphs(sock, &v, t, 1, &tl) < 0)
                        return 1;
        uint32_t ext = atomic_load(&v.ch->ext_wake), graph = atomic_load(&v.ch->graph_wake);
        if (ext == 0 || graph == 0) {
                kid_say(sock, "FAIL hbgd never bumped the wake words (ext_wake %u, graph_wake %u)", ext, graph);
                return 1;
        }
        tally_say(sock, &tl, "graphs with the sleepers words at 0xffffffff");
        kid_say(sock, "NOTE ext_wake %u, graph_wake %u bumps; every host function ran once", ext, graph);
        return attacker_end(sock, &v, 0);
}

START_TEST(garbage_sleepers_words) {
        run_attack("garbage_sleepers_words", sleepers_fn);
}
END_TEST

static Suite *suite(void) {
        Suite *s = suite_create("e2e_shm_control");
        TCase *tc = tcase_create("shm");
        tcase_set_timeout(tc, 300);
        tcase_add_test(tc, cursors_moved);
        tcase_add_test(tc, forged_records_and_mailbox);
        tcase_add_test(tc, sealed_regions);
        tcase_add_test(tc, garbage_sleepers_words);
        suite_add_tcase(s, tc);
        return s;
}

const struct check_main check_main = {
        .suite = suite,
        .ignore_sigpipe = true,
        .setup = daemon_util_setup,
        .teardown = daemon_util_cleanup,
};

