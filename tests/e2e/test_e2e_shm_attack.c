/* SPDX-License-Identifier: MIT */
/*
 * hbgd against a client that attacks it through shared memory: each test
 * makes one attack from a forked attacker (tests/e2e/e2e_kid.h) on a real
 * hbgd while an honest client runs alongside, then checks that
 *   - hbgd answers a status request during the attack and after it, and
 *     exits 0 on SIGTERM at the end;
 *   - the honest client got every graph right, each within
 *     HONEST_BOUND_MS, and a multi-task workload after the attack too;
 *   - hbgd's fds return to their baseline and its RSS to within
 *     RSS_MARGIN_KB of it once the attacker is gone;
 *   - the attacker got clear errors (a failed graph with its code and a
 *     message, or its session stopped) and hbgd logged why.
 *
 * The attacker opens a session through libhbgclient and finds its own
 * regions in /proc/self/maps (hbgd names its memfds hbg-sub-N and
 * hbg-cpl-N, N the session), or (sealed regions) opens one by raw
 * protocol records to hold the memfds themselves. Writers that race the
 * attacker's own library calls (scribbler, flipper, cursor mover, hole
 * puncher) are forked processes sharing the mapping: hbgd sees the same
 * as from a thread, and the sanitizers do not report the attacker's
 * deliberate races on its own memory.
 *
 * The last test (g) holds a session's sleepers words at 0xffffffff: hbgd
 * then makes a futex wake per publication for that session's ring (fewer
 * while its ext_looking, flipped by a writer, claims a worker looks), and
 * nothing else changes (SECURITY.md).
 *
 * Every test starts hbgd with stall_timeout_ms = 1000, so that tasks an
 * attack leaves waiting for ever (a forged external task, a graph record
 * promising tasks never submitted) end in one second, not ten.
 *
 * forged_module_descriptors forges the descriptors of module kernels'
 * tasks (the example module and tests/modules' counting module, copied
 * into a fresh 0755 directory under /tmp and named in hbgd's config).
 *
 * HBG_TEST_SCALE divides the work (default 10: 10^5 scribbled words; 1:
 * the 10^6 of the hardening issue, as `make hostile` runs it);
 * HBG_TEST_SEED fixes the random attacks; HBG_TEST_VERBOSE=1 shows hbgd's
 * log (whose checks are then skipped: it is not kept in a file).
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
#include "tests/module_util.h"
#include "tests/test_util.h"
#include "tests/check_main.h"

#define HONEST_BOUND_MS 10000   /* "in time" for one honest graph, loaded CI included */
#define WAIT_GRAPH_MS 2000      /* the attacker's own waits: it may have wedged its graphs */
#define STALL_CONF "[scheduler]\nstall_timeout_ms = 1000\n"
#define ATTACK_HEAP (1u << 20)  /* the attacker's small session: 1 MiB heap, D = 1024 */
#define ATTACK_WINDOW 1024u
#define MAX_NEEDLES 64

/*
 * How far above its baseline hbgd's RSS may stay once the attacker is
 * gone: 8 MiB. The attacker's session is ~1.5 MiB of regions plus hbgd's
 * private arrays for D = 1024, all unmapped when it closes; what may
 * legitimately stay is malloc's (per-thread arenas keep freed memory) and
 * the honest clients' leftovers: ~100 kB here, ~2 MiB under ASan (its
 * quarantine). A leak per attacker session (up to 40 in a test) or per
 * forged task would not fit. Under TSan the check is left out: its own
 * bookkeeping (sync objects, traces) grows with the work done and is not
 * returned, ~75 MiB after the 10 s attacks of HBG_TEST_SCALE=1.
 */
#if defined(__SANITIZE_THREAD__)
#define RSS_CHECKED 0
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define RSS_CHECKED 0
#endif
#endif
#ifndef RSS_CHECKED
#define RSS_CHECKED 1
#endif
#define RSS_MARGIN_KB (8 * 1024)

static unsigned scale(void) {
        return hostile_scale();
}

/* ------------------------------------------------------------ the attacker's view of its session */

struct victim {
        hbg_client *c;
        uint64_t session;          /* hbgd's session id (the memfds' names) */
        uint8_t *sub;
        uint64_t sub_size;
        const uint8_t *cpl;
        struct hbg_sub_header *sh;
        const struct hbg_cpl_header *ch;
        struct hbg_task_desc *descs;
        struct hbg_task_fanins *fanins;
        struct hbg_task_args *args;
        struct hbg_graph_record *records;
        struct hbg_mailbox_entry *mailbox;
        uint64_t heap_size, D, G, M;
        int doorbell;              /* the library's end of the doorbell */
        int control;               /* the library's control connection */
        uint64_t last_graph;       /* the last graph fill_graph submitted */
        char name[96];             /* "session S (pid P)", as hbgd's log names the ring */
};

static int socket_type(int fd) {
        int type = 0;
        socklen_t len = sizeof(type);
        return getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &len) == 0 ? type : -1;
}

/* A small session through the library, and where its parts are. 0, or -1
 * with "FAIL ..." said. */
static int victim_open(struct victim *v, int sock, const char *path) {
        *v = (struct victim){ .doorbell = -1, .control = -1 };
        bool had[1024];
        for (int fd = 0; fd < 1024; fd++)
                had[fd] = socket_type(fd) >= 0;
        hbg_connect_options o = HBG_CONNECT_OPTIONS_INIT;
        o.socket_path = path;
        o.name = "shm-attacker";
        o.heap_bytes = ATTACK_HEAP;
        o.task_window = ATTACK_WINDOW;
        int err = hbg_connect_opts(&v->c, &o);
        if (err < 0) {
                kid_say(sock, "FAIL hbg_connect_opts: %s [%s]", hbg_strerror(err), hbg_last_error(NULL));
                return -1;
        }
        /* The sockets hbg_connect added: the doorbell is a datagram
         * socket, the control connection a seqpacket one. */
        for (int fd = 0; fd < 1024; fd++) {
                int type = had[fd] ? -1 : socket_type(fd);
                if (type == SOCK_DGRAM)
                        v->doorbell = fd;
                else if (type == SOCK_SEQPACKET)
                        v->control = fd;
        }
        uint64_t cpl_size = 0;
        v->sub = find_session_mapping("sub", &v->session, &v->sub_size);
        v->cpl = v->sub ? find_session_mapping("cpl", &v->session, &cpl_size) : NULL;
        if (!v->sub || !v->cpl || v->doorbell < 0 || v->control < 0) {
                kid_say(sock, "FAIL the session's regions or sockets not found (sub %p cpl %p doorbell %d "
                        "control %d)", (void *)v->sub, (const void *)v->cpl, v->doorbell, v->control);
                return -1;
        }
        v->sh = (struct hbg_sub_header *)(void *)v->sub;
        v->ch = (const struct hbg_cpl_header *)(const void *)v->cpl;
        /* The mapping is whole pages. */
        if (v->sh->magic != HBG_SUB_MAGIC || v->sh->region_size > v->sub_size ||
            v->sub_size - v->sh->region_size >= 4096) {
                kid_say(sock, "FAIL the mapping found is not the submission region");
                return -1;
        }
        v->descs = (struct hbg_task_desc *)(void *)(v->sub + v->sh->descs_offset);
        v->fanins = (struct hbg_task_fanins *)(void *)(v->sub + v->sh->fanins_offset);
        v->args = (struct hbg_task_args *)(void *)(v->sub + v->sh->args_offset);
        v->records = (struct hbg_graph_record *)(void *)(v->sub + v->sh->graphs_offset);
        v->mailbox = (struct hbg_mailbox_entry *)(void *)(v->sub + v->sh->mailbox_offset);
        v->sub_size = v->sh->region_size;
        v->heap_size = v->sh->heap_size;
        v->D = UINT64_C(1) << v->sh->task_window_log2;
        v->G = UINT64_C(1) << v->sh->graph_ring_log2;
        v->M = UINT64_C(1) << v->sh->mailbox_log2;
        snprintf(v->name, sizeof(v->name), "session %" PRIu64 " (pid %d)", v->session, (int)getpid());
        return 0;
}

static void victim_close(struct victim *v) {
        hbg_disconnect(v->c);
        v->c = NULL;
}

static void ring_doorbell(const struct victim *v) {
        ssize_t n = send(v->doorbell, "x", 1, MSG_DONTWAIT | MSG_NOSIGNAL);
        (void)n; /* full: hbgd has wake-ups queued already */
}

/* Poll until cond(v) or timeout_ms: true if it held. */
static bool await(const struct victim *v, bool (*cond)(const struct victim *), int timeout_ms) {
        long long deadline = daemon_now_ms() + timeout_ms;
        while (!cond(v)) {
                if (daemon_now_ms() >= deadline)
                        return false;
                sleep_us(1000);
        }
        return true;
}

/* hbgd closed the session (it does so once it stopped the ring). */
static bool session_closed(const struct victim *v) {
        struct pollfd p = { .fd = v->control, .events = POLLRDHUP };
        return poll(&p, 1, 0) == 1 && (p.revents & (POLLRDHUP | POLLHUP | POLLERR));
}

/* Log lines the parent must find: one line containing both a and b. */
static void expect_log(int sock, const char *a, const char *b) {
        kid_say(sock, "LOG %s\t%s", a, b);
}

/* ... and for a ring hbgd stopped: its reason, and the session closed. */
static void expect_stop_logged(int sock, const struct victim *v, const char *why) {
        char a[160], b[160];
        snprintf(a, sizeof(a), "%s: stopped: ", v->name);
        expect_log(sock, a, why);
        snprintf(a, sizeof(a), "session %" PRIu64 " (pid %d uid %u): closed: ", v->session, (int)getpid(),
                 (unsigned)getuid());
        snprintf(b, sizeof(b), "session stopped: %s", hbg_strerror(-EPROTO));
        expect_log(sock, a, b);
}

/* ------------------------------------------------------------ the attacker's graphs */

static hbg_task fill_task(hbg_tensor t, float value) {
        hbg_task task = HBG_TASK_INIT("fill_f32");
        task.n_args = 1;
        task.args[0].tensor = t;
        task.args[0].dir = HBG_OUT;
        task.n_scalars = 1;
        task.scalars[0] = hbg_f32(value);
        return task;
}

/* What the attacker's own graphs came to. Every failure must be clear: a
 * negative errno and a message from the library. A graph may succeed and
 * read back wrong: the attack overwrote its output, or (cursors) hbgd had
 * failed its task as garbage before it was written and that failure fell
 * out of the ring's failure list (D entries, the lowest ids kept). Only
 * the attacker's own results, so only counted. */
struct tally {
        unsigned ok, failed, timed_out, gone, corrupted, unclear;
        int first_code;
        char first_msg[200];
};

static void tally_note(struct tally *t, hbg_client *c, int err) {
        if (err == 0) {
                t->ok++;
                return;
        }
        const char *msg = hbg_last_error(c);
        if (err == -ETIMEDOUT)
                t->timed_out++;
        else if (err == -ECONNRESET)
                t->gone++;
        else
                t->failed++;
        if (err > 0 || !msg || !msg[0])
                t->unclear++;
        if (!t->first_code && err != -ETIMEDOUT) {
                t->first_code = err;
                snprintf(t->first_msg, sizeof(t->first_msg), "%s", msg ? msg : "");
        }
}

static void tally_say(int sock, const struct tally *t, const char *what) {
        kid_say(sock, "NOTE %s: %u ok, %u failed, %u timed out, %u after hbgd closed the session, %u ok but "
                "read back wrong; first error %d: %s", what, t->ok, t->failed, t->timed_out, t->gone,
                t->corrupted, t->first_code, t->first_msg);
        if (t->unclear)
                kid_say(sock, "FAIL %s: %u results without a negative errno and a message", what, t->unclear);
}

/* One fill graph on t, waited for; its result noted, the values checked
 * when it succeeded (only counted: the attacks may overwrite them). */
static int fill_graph(struct victim *v, hbg_tensor t, float value, struct tally *tl) {
        hbg_task task = fill_task(t, value);
        uint64_t graph;
        int err = hbg_graph_add(v->c, &task, NULL);
        if (err == 0)
                err = hbg_graph_submit(v->c, &graph);
        if (err == 0) {
                v->last_graph = graph;
                err = hbg_graph_wait(v->c, graph, WAIT_GRAPH_MS);
        }
        tally_note(tl, v->c, err);
        if (err == 0) {
                const float *x = hbg_tensor_data(v->c, t);
                for (uint64_t i = 0; i < t.bytes / sizeof(float); i++)
                        if (x[i] != value) {
                                tl->corrupted++;
                                break;
                        }
        }
        return err;
}

/* After the attacker's ring was stopped: the library's next graph must
 * fail clearly. 0, or -1 with "FAIL" said. */
static int expect_clear_failure(int sock, struct victim *v, hbg_tensor t, const char *what) {
        struct tally tl = { 0 };
        int err = fill_graph(v, t, 1.0f, &tl);
        /* -ETIME is the stall detector's failure of the graph; -ETIMEDOUT
         * only the wait running out, which is no answer. */
        bool failed = err < 0 && err != -ETIMEDOUT;
        if (!failed || tl.unclear) {
                kid_say(sock, "FAIL %s: the library's next graph: %d (%s) [%s], expected a failure", what, err,
                        strerror(-err), hbg_last_error(v->c));
                return -1;
        }
        kid_say(sock, "NOTE %s: the library's next graph: %s [%s]", what, strerror(-err), hbg_last_error(v->c));
        return 0;
}

/* A forked process sharing this one's mappings, running fn(ctx, arg)
 * until it returns (it dies with us). */
typedef void writer_fn(const void *ctx, uint64_t arg);

static pid_t fork_writer(writer_fn *fn, const void *ctx, uint64_t arg) {
        fflush(NULL);
        pid_t pid = fork();
        if (pid == 0) {
                prctl(PR_SET_PDEATHSIG, SIGKILL);
                fn(ctx, arg);
                _exit(0);
        }
        return pid;
}

static bool writer_running(pid_t pid) {
        return pid > 0 && waitpid(pid, NULL, WNOHANG) == 0;
}

/* The attacker runs fill graphs until the writer is done (or
 * deadline_ms passed, then the writer is killed). */
static void graphs_while_writer(struct victim *v, hbg_tensor t, pid_t writer, struct tally *tl) {
        long long deadline = daemon_now_ms() + WAIT_MS;
        unsigned g = 0;
        while (writer_running(writer) && daemon_now_ms() < deadline) {
                if (tl->gone) {
                        sleep_us(10000);
                        continue;
                }
                fill_graph(v, t, (float)(g++ % 1000) + 0.5f, tl);
        }
        if (writer_running(writer))
                kill(writer, SIGKILL);
        waitpid(writer, NULL, 0);
}

static uint64_t kid_seed(void) {
        return seed_value() ^ ((uint64_t)getpid() << 32);
}

/* ------------------------------------------------------------ the parent's checks */

static long rss_kb(pid_t pid) {
        char path[64], line[256];
        snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
        FILE *f = fopen(path, "re");
        long kb = -1;
        while (f && fgets(line, sizeof(line), f))
                if (sscanf(line, "VmRSS: %ld kB", &kb) == 1)
                        break;
        if (f)
                fclose(f);
        return kb;
}

/* hbgd's RSS comes back to within the margin of base (it frees a closed
 * session's ring at a later tick). */
static void assert_rss_back(struct hbgd_proc *d, long base, const char *what) {
        long long deadline = daemon_now_ms() + FD_SETTLE_MS;
        long now = rss_kb(d->pid);
        while (RSS_CHECKED && now > base + RSS_MARGIN_KB && daemon_now_ms() < deadline) {
                sleep_us(50000);
                now = rss_kb(d->pid);
        }
        fprintf(stderr, "%s: hbgd's RSS %ld kB, %ld kB before the attack%s\n", what, now, base,
                RSS_CHECKED ? "" : " (not checked under TSan)");
        D_ASSERT(d, now > 0, "%s: cannot read hbgd's VmRSS", what);
        D_ASSERT(d, !RSS_CHECKED || now <= base + RSS_MARGIN_KB,
                 "%s: hbgd's RSS is %ld kB after the attacker left, %ld kB before (margin %d kB)", what, now, base,
                 RSS_MARGIN_KB);
}

struct needle {
        char a[200], b[200];
};

static bool log_has_needle(const char *log, const struct needle *n) {
        for (const char *line = log; line && *line;) {
                const char *end = strchr(line, '\n');
                size_t len = end ? (size_t)(end - line) : strlen(line);
                char buf[1024];
                snprintf(buf, sizeof(buf), "%.*s", (int)(len < sizeof(buf) ? len : sizeof(buf) - 1), line);
                if (strstr(buf, n->a) && strstr(buf, n->b))
                        return true;
                line = end ? end + 1 : NULL;
        }
        return false;
}

static char *read_log(const struct hbgd_proc *d) {
        FILE *f = fopen(d->log_path, "re");
        if (!f)
                return NULL;
        size_t cap = 1 << 16, n = 0;
        char *buf = malloc(cap);
        size_t got;
        while (buf && (got = fread(buf + n, 1, cap - n - 1, f)) > 0) {
                n += got;
                if (cap - n - 1 == 0) {
                        char *more = realloc(buf, cap * 2);
                        if (!more)
                                break;
                        buf = more;
                        cap *= 2;
                }
        }
        fclose(f);
        if (buf)
                buf[n] = 0;
        return buf;
}

/* Every needle is in hbgd's log within IO_MS (a stopped session is closed
 * at the next tick). */
static void assert_logged(struct hbgd_proc *d, const struct needle *needles, unsigned n, const char *what) {
        if (n == 0)
                return;
        if (getenv("HBG_TEST_VERBOSE") && getenv("HBG_TEST_VERBOSE")[0]) {
                fprintf(stderr, "%s: %u log lines not checked (HBG_TEST_VERBOSE: the log is on stderr)\n", what, n);
                return;
        }
        long long deadline = daemon_now_ms() + IO_MS;
        for (;;) {
                char *log = read_log(d);
                unsigned missing = n;
                const struct needle *first = NULL;
                for (unsigned i = 0; i < n; i++) {
                        if (log && log_has_needle(log, &needles[i]))
                                missing--;
                        else if (!first)
                                first = &needles[i];
                }
                free(log);
                if (!missing) {
                        fprintf(stderr, "%s: hbgd logged all %u reasons expected\n", what, n);
                        return;
                }
                D_ASSERT(d, daemon_now_ms() < deadline, "%s: %u of %u expected log lines missing, e.g. one with "
                         "\"%s\" and \"%s\"", what, missing, n, first->a, first->b);
                sleep_us(50000);
        }
}

struct target {
        const char *path;
        const void *extra;      /* the attack's own (run_attack_conf()) */
};

/*
 * One attack: hbgd with STALL_CONF; its fd and RSS baselines after a
 * warm-up; the honest client running; the attacker started, told 'G',
 * and read until "DONE" (NOTE lines are shown, LOG lines are needles for
 * hbgd's log, FAIL lines fail the test); hbgd answers meanwhile; then the
 * honest client's results, the attacker gone, and the checks above.
 */
static void run_attack_conf(const char *name, kid_fn fn, const char *conf, const void *extra) {
        struct hbgd_proc *d = start_hbgd_conf(MODE_URING, conf);
        int base = fd_baseline(d);
        honest_graphs(d, 4, "warm-up");
        assert_fd_baseline(d, base, "after the warm-up");
        /* The spare ring the warm-up took made again, its pre-fault done. */
        wait_slow_work_idle(d);
        long rss0 = rss_kb(d->pid);
        D_ASSERT(d, rss0 > 0, "cannot read hbgd's VmRSS");

        struct kid honest, attacker;
        honest_start(d, &honest);
        kid_tell(&honest, 'G');
        struct target tg = { .path = d->socket_path, .extra = extra };
        char who[96], buf[640];
        snprintf(who, sizeof(who), "%s: the attacker", name);
        kid_start(&attacker, SAME_UID, fn, &tg);
        kid_expect(d, &attacker, "READY", IO_MS, buf, sizeof(buf), who);
        long long t0 = daemon_now_ms();
        kid_tell(&attacker, 'G');
        long long status_ms = fresh_status(d, LIVE_MS, name);

        static struct needle needles[MAX_NEEDLES];
        unsigned n_needles = 0;
        for (;;) {
                int err = kid_line(&attacker, WAIT_MS, buf, sizeof(buf));
                if (err == -ECONNRESET) {
                        char how[96];
                        kid_reap(&attacker, IO_MS);
                        describe(attacker.status, how, sizeof(how));
                        D_ASSERT(d, false, "%s exited before it was done: %s", who, how);
                }
                D_ASSERT(d, err == 0, "%s said nothing for %d ms", who, WAIT_MS);
                D_ASSERT(d, strncmp(buf, "FAIL", 4) != 0, "%s: %s", who, buf + 4);
                if (strncmp(buf, "DONE", 4) == 0)
                        break;
                if (strncmp(buf, "LOG ", 4) == 0) {
                        D_ASSERT(d, n_needles < MAX_NEEDLES, "%s: too many log lines expected", name);
                        struct needle *nd = &needles[n_needles++];
                        const char *tab = strchr(buf + 4, '\t');
                        snprintf(nd->a, sizeof(nd->a), "%.*s", tab ? (int)(tab - buf - 4) : 199, buf + 4);
                        snprintf(nd->b, sizeof(nd->b), "%s", tab ? tab + 1 : "");
                        continue;
                }
                fprintf(stderr, "%s: %s\n", name, strncmp(buf, "NOTE ", 5) == 0 ? buf + 5 : buf);
        }
        long long attack_ms = daemon_now_ms() - t0;
        long long worst = 0;
        unsigned graphs = honest_stop(d, &honest, &worst);
        fprintf(stderr, "%s: attack took %lld ms; a status request was answered in %lld ms meanwhile; the honest "
                "client ran %u graphs, the slowest in %lld ms\n", name, attack_ms, status_ms, graphs, worst);
        D_ASSERT(d, worst <= HONEST_BOUND_MS, "%s: an honest graph took %lld ms (bound %d ms)", name, worst,
                 HONEST_BOUND_MS);
        kid_tell(&attacker, 'Q');
        kid_end(d, &attacker, IO_MS, who);

        assert_alive(d);
        assert_fd_baseline(d, base, name);
        assert_rss_back(d, rss0, name);
        assert_logged(d, needles, n_needles, name);
        honest_graphs(d, 20, name);
        fresh_status(d, LIVE_MS, name);
        stop_hbgd(d);
}

static void run_attack(const char *name, kid_fn fn) {
        run_attack_conf(name, fn, STALL_CONF, NULL);
}

/* The attacker's start: its session, READY, then the parent's 'G'. */
static int attacker_start(int sock, void *arg, struct victim *v) {
        const struct target *tg = arg;
        if (victim_open(v, sock, tg->path) < 0)
                return -1;
        kid_say(sock, "READY");
        if (kid_cmd(sock) != 'G')
                return -1;
        return 0;
}

/* The attacker's end: DONE, then the parent's 'Q'. */
static int attacker_end(int sock, struct victim *v, int ret) {
        kid_say(sock, "DONE");
        kid_cmd(sock);
        if (v->c)
                victim_close(v);
        return ret;
}

/* ------------------------------------------------------------ a. scribble */

/* n random 8-byte writes over the whole region, in 1000 bursts 1 ms
 * apart (about a second whatever n): uniform over the region, and every
 * 64th on the header's cursor lines (a few of 200000 words, which at 10^5
 * writes would otherwise be hit by chance only). */
static void scribble(const void *ctx, uint64_t n) {
        const struct victim *v = ctx;
        uint64_t s = kid_seed() | 1;
        uint64_t words = v->sub_size / 8, header_words = sizeof(struct hbg_sub_header) / 8;
        uint64_t burst = n / 1000 ? n / 1000 : 1;
        volatile uint64_t *w = (volatile uint64_t *)(void *)v->sub;
        for (uint64_t i = 0; i < n; i++) {
                uint64_t r = xorshift(&s);
                uint64_t at = i % 64 == 0 ? 16 + r % (header_words - 16) : r % words;
                w[at] = xorshift(&s);
                if ((i + 1) % burst == 0)
                        sleep_us(1000);
        }
}

static int scribble_fn(int sock, void *arg) {
        struct victim v;
        if (attacker_start(sock, arg, &v) < 0)
                return 1;
        hbg_tensor t;
        if (hbg_tensor_alloc(v.c, 4096, &t) < 0) {
                kid_say(sock, "FAIL hbg_tensor_alloc: %s", hbg_last_error(v.c));
                return 1;
        }
        struct tally tl = { 0 };
        fill_graph(&v, t, 0.5f, &tl); /* graphs before ... */
        uint64_t n = 1000000 / scale();
        pid_t w = fork_writer(scribble, &v, n);
        graphs_while_writer(&v, t, w, &tl); /* ... and during */
        kid_say(sock, "NOTE %" PRIu64 " random 8-byte writes over the %" PRIu64 "-byte submission region", n,
                v.sub_size);
        tally_say(sock, &tl, "the attacker's graphs");
        /* The first failure hbgd reported is in its log (a session's first
         * ten lines always are); else a stop is. */
        char a[160], b[160];
        if (tl.failed) {
                snprintf(a, sizeof(a), "%s: graph ", v.name);
                snprintf(b, sizeof(b), "failed: %s at task", hbg_strerror(tl.first_code));
                expect_log(sock, a, b);
        } else if (tl.gone) {
                snprintf(a, sizeof(a), "%s: stopped: ", v.name);
                expect_log(sock, a, "");
        }
        return attacker_end(sock, &v, 0);
}

START_TEST(scribble_submission_region) {
        run_attack("scribble_submission_region", scribble_fn);
}
END_TEST

/* ------------------------------------------------------------ b. forged descriptors */

enum field {
        F_ID,           /* id += value */
        F_RESERVED2,
        F_RESERVED0,    /* reserved0[value] = 1 */
        F_KERNEL,       /* kernel[lane AIV0] = value */
        F_KERNEL_AIC,   /* kernel[lane AIC] (inactive) = value */
        F_LANE_MASK,
        F_FLAGS,        /* flags = value */
        F_BLOCK_NUM,
        F_N_FANINS,
        F_N_TENSORS,
        F_N_SCALARS,
        F_FANIN,        /* one inline fanin: own id + (int64_t)value */
        F_FANIN_ABS,    /* one inline fanin: value */
        F_INLINE_STRAY, /* fanins_inline[2] = value with no fanins */
        F_SLOT_FANINS, /* four fanins in the slot's fanins, the last own id + value */
        F_T_OFFSET,     /* tensor `index` (0 unless said): offset = value */
        F_T_OFFSET_ADD, /* tensor index: offset += value */
        F_T_LENGTH,
        F_T_DIRECTION,
        F_T_RESERVED,
        F_T_OVERLAP,    /* tensor index: offset = tensor 0's + value */
        F_SCALAR,       /* scalar index |= value */
        F_PREDICATE,    /* HAS_PREDICATE, predicate_offset = value */
        F_PREDICATE_AT_HEAP_END,
        F_T_AT_HEAP_END, /* tensor index ends 128 bytes past the heap */
        F_CYCLE,        /* two tasks, each the other's fanin */
};

struct mutation {
        const char *what;
        enum field field;
        uint64_t value;
        int code;               /* the graph's status */
        const char *why;        /* hbgd's reason in its log */
        const char *kernel;     /* the forged task's kernel as built (NULL: fill_f32) */
        unsigned index;         /* the tensor or scalar the F_T_ and F_SCALAR fields change */
};

#define TENSOR "fill_f32: tensor out "

static const struct mutation mutations[] = {
        { "kernel id out of range", F_KERNEL, 0xffff, -ENOENT, "unknown kernel" },
        { "kernel id HBG_KERNEL_COUNT", F_KERNEL, HBG_KERNEL_COUNT, -ENOENT, "unknown kernel" },
        { "kernel id 0 on an active lane", F_KERNEL, 0, -ENOENT, "unknown kernel" },
        { "another kernel's signature (spin_ns)", F_KERNEL, HBG_KERNEL_SPIN_NS, -EINVAL,
          "spin_ns: wrong number of tensor arguments (takes 0)" },
        { "a kernel on an inactive lane", F_KERNEL_AIC, HBG_KERNEL_FILL_F32, -EINVAL, "kernel given for an inactive lane" },
        { "lane mask bit 3", F_LANE_MASK, 0x0a, -EINVAL, "lane mask has bits beyond the three lanes" },
        { "lane mask 0xff", F_LANE_MASK, 0xff, -EINVAL, "lane mask has bits beyond the three lanes" },
        { "no lanes but a kernel", F_LANE_MASK, 0, -EINVAL, "dummy, host-inline and host tasks have no lanes or kernels" },
        { "block_num 0", F_BLOCK_NUM, 0, -ERANGE, "block_num out of range (1..4096)" },
        { "block_num 4097", F_BLOCK_NUM, HBG_MAX_BLOCKS + 1, -ERANGE, "block_num out of range (1..4096)" },
        { "block_num 65535", F_BLOCK_NUM, 0xffff, -ERANGE, "block_num out of range (1..4096)" },
        { "17 fanins", F_N_FANINS, HBG_MAX_FANINS + 1, -E2BIG, "too many fanins, tensors or scalars" },
        { "9 tensors", F_N_TENSORS, HBG_MAX_TENSOR_ARGS + 1, -E2BIG, "too many fanins, tensors or scalars" },
        { "255 scalars", F_N_SCALARS, 255, -E2BIG, "too many fanins, tensors or scalars" },
        { "no tensor for fill_f32", F_N_TENSORS, 0, -EINVAL, "fill_f32: wrong number of tensor arguments (takes 1)" },
        { "2 scalars for fill_f32", F_N_SCALARS, 2, -EINVAL, "fill_f32: wrong number of scalar arguments (takes 1)" },
        { "tensor offset + length overflows", F_T_OFFSET, UINT64_MAX - 255, -EOVERFLOW, TENSOR "offset + length overflows" },
        { "tensor past the heap's end", F_T_AT_HEAP_END, 0, -ERANGE, TENSOR "extends past the end of the heap" },
        { "tensor length 2^64 - 4", F_T_LENGTH, UINT64_MAX - 3, -EOVERFLOW, TENSOR "offset + length overflows" },
        { "tensor length 0", F_T_LENGTH, 0, -EINVAL, TENSOR "is empty" },
        { "tensor offset misaligned", F_T_OFFSET_ADD, 2, -EINVAL, TENSOR "offset or length is not a multiple of 4" },
        { "tensor direction IN for an output", F_T_DIRECTION, HBG_DIR_IN, -EINVAL, TENSOR "has the wrong direction" },
        { "tensor direction 2^32 - 1", F_T_DIRECTION, UINT32_MAX, -EINVAL, TENSOR "has the wrong direction" },
        { "tensor reserved field", F_T_RESERVED, 1, -EINVAL, TENSOR "reserved field is not zero" },
        { "f32 scalar with high bits", F_SCALAR, UINT64_C(1) << 40, -EINVAL,
          "fill_f32: f32 scalar v has its upper 32 bits set" },
        { "fanin equal to its own id", F_FANIN, 0, -EINVAL, "fanin is not an earlier task of this ring" },
        { "fanin own id + 1", F_FANIN, 1, -EINVAL, "fanin is not an earlier task of this ring" },
        { "fanin 2^64 - 1", F_FANIN_ABS, UINT64_MAX, -EINVAL, "fanin is not an earlier task of this ring" },
        { "fanin beyond the inline ones equal to its own id", F_SLOT_FANINS, 0, -EINVAL, "fanin is not an earlier task of this ring" },
        { "fanin beyond the inline ones own id + 1000", F_SLOT_FANINS, 1000, -EINVAL, "fanin is not an earlier task of this ring" },
        { "a cycle of two tasks", F_CYCLE, 0, -EINVAL, "fanin is not an earlier task of this ring" },
        { "inline fanin slot beyond the count", F_INLINE_STRAY, 1, -EPROTO, "inline fanin slot beyond the task's fanins not zero" },
        { "id of the next lap", F_ID, ATTACK_WINDOW, -EPROTO, "descriptor id does not match its slot's id" },
        { "id of the previous lap", F_ID, (uint64_t)-(int64_t)ATTACK_WINDOW, -EPROTO, "descriptor id does not match its slot's id" },
        { "reserved2", F_RESERVED2, 1, -EPROTO, "descriptor reserved field not zero" },
        { "reserved0[0]", F_RESERVED0, 0, -EPROTO, "descriptor reserved field not zero" },
        { "reserved0[1]", F_RESERVED0, 1, -EPROTO, "descriptor reserved field not zero" },
        { "reserved0[2]", F_RESERVED0, 2, -EPROTO, "descriptor reserved field not zero" },
        { "unknown flag 0x40", F_FLAGS, 0x40, -EINVAL, "unknown task flag" },
        { "launch flag in a ring without recorded graphs", F_FLAGS, HBG_DESC_LAUNCH, -EINVAL, "unknown task flag" },
        { "host-inline and external", F_FLAGS, HBG_TASK_HOST_INLINE | HBG_TASK_EXTERNAL, -EINVAL,
          "a task cannot be both host-inline and a host task" },
        { "external with a kernel", F_FLAGS, HBG_TASK_EXTERNAL, -EINVAL,
          "dummy, host-inline and host tasks have no lanes or kernels" },
        { "predicate past the heap", F_PREDICATE_AT_HEAP_END, 0, -ERANGE, "predicate element outside the heap or misaligned" },
        { "predicate offset overflows", F_PREDICATE, UINT64_MAX - 3, -ERANGE, "predicate element outside the heap or misaligned" },
        { "predicate misaligned", F_PREDICATE, 2, -ERANGE, "predicate element outside the heap or misaligned" },
};
#define N_MUTATIONS (sizeof(mutations) / sizeof(mutations[0]))

/*
 * The same against module kernels (hbgd with the example module, then
 * tests/modules' "counting": relu_f32 256, rownorm_f32 257, tm_count 258):
 * the generic checks are hbgd's, whoever defined the kernel, and run
 * before the module's own check (tm_count counts its calls).
 */
#define MOD_RELU 256u
#define MOD_TM_COUNT 258u
static const struct mutation module_mutations[] = {
        { "relu_f32: x past the heap's end", F_T_AT_HEAP_END, 0, -ERANGE,
          "relu_f32: tensor x extends past the end of the heap", "relu_f32", 0 },
        { "relu_f32: y offset + length overflows", F_T_OFFSET, UINT64_MAX - 255, -EOVERFLOW,
          "relu_f32: tensor y offset + length overflows", "relu_f32", 1 },
        { "rownorm_f32: X past the heap's end", F_T_AT_HEAP_END, 0, -ERANGE,
          "rownorm_f32: tensor X extends past the end of the heap", "rownorm_f32", 0 },
        { "tm_count: out past the heap's end", F_T_AT_HEAP_END, 0, -ERANGE,
          "tm_count: tensor out extends past the end of the heap", "tm_count", 1 },
        { "relu_f32: y direction IN", F_T_DIRECTION, HBG_DIR_IN, -EINVAL, "relu_f32: tensor y has the wrong direction",
          "relu_f32", 1 },
        { "relu_f32: x direction OUT", F_T_DIRECTION, HBG_DIR_OUT, -EINVAL,
          "relu_f32: tensor x has the wrong direction", "relu_f32", 0 },
        { "rownorm_f32: X direction IN", F_T_DIRECTION, HBG_DIR_IN, -EINVAL,
          "rownorm_f32: tensor X has the wrong direction", "rownorm_f32", 0 },
        { "relu_f32: one tensor", F_N_TENSORS, 1, -EINVAL, "relu_f32: wrong number of tensor arguments (takes 2)",
          "relu_f32", 0 },
        { "relu_f32: three tensors", F_N_TENSORS, 3, -EINVAL, "relu_f32: wrong number of tensor arguments (takes 2)",
          "relu_f32", 0 },
        { "rownorm_f32: two tensors", F_N_TENSORS, 2, -EINVAL,
          "rownorm_f32: wrong number of tensor arguments (takes 1)", "rownorm_f32", 0 },
        { "rownorm_f32: one scalar", F_N_SCALARS, 1, -EINVAL,
          "rownorm_f32: wrong number of scalar arguments (takes 2)", "rownorm_f32", 0 },
        { "relu_f32: y overlaps x, not in place", F_T_OVERLAP, 4, -EINVAL,
          "relu_f32: output y overlaps tensor x (only an input of the very same range may be shared)", "relu_f32",
          1 },
        { "tm_count: out overlaps in", F_T_OVERLAP, 128, -EINVAL, "tm_count: output out overlaps tensor in",
          "tm_count", 1 },
        { "relu_f32: x shorter than y", F_T_LENGTH, 128, -EINVAL,
          "relu_f32: tensor x is not as long as y (every tensor exactly as long as the output)", "relu_f32", 0 },
        { "relu_f32: x empty", F_T_LENGTH, 0, -EINVAL, "relu_f32: tensor x is empty", "relu_f32", 0 },
        { "rownorm_f32: X misaligned", F_T_OFFSET_ADD, 2, -EINVAL,
          "rownorm_f32: tensor X offset or length is not a multiple of 4", "rownorm_f32", 0 },
        { "tm_count: f32 scalar with high bits", F_SCALAR, UINT64_C(1) << 40, -EINVAL,
          "tm_count: f32 scalar f has its upper 32 bits set", "tm_count", 1 },
        { "tm_count: f32 scalar with bit 63", F_SCALAR, UINT64_C(1) << 63, -EINVAL,
          "tm_count: f32 scalar f has its upper 32 bits set", "tm_count", 1 },
        { "relu_f32 task relabelled tm_count", F_KERNEL, MOD_TM_COUNT, -EINVAL,
          "tm_count: wrong number of scalar arguments (takes 2)", "relu_f32", 0 },
        { "unknown module kernel id 256 + 50", F_KERNEL, MOD_RELU + 50, -ENOENT, "unknown kernel", "relu_f32", 0 },
        { "unknown module kernel id one past the last", F_KERNEL, MOD_TM_COUNT + 1, -ENOENT, "unknown kernel",
          "tm_count", 0 },
        { "module kernel on an inactive lane", F_KERNEL_AIC, MOD_RELU, -EINVAL, "kernel given for an inactive lane",
          "relu_f32", 0 },
};

struct mutation_set {
        const struct mutation *m;
        size_t n;
};
static const struct mutation_set builtin_mutations = { mutations, N_MUTATIONS };
static const struct mutation_set module_set = { module_mutations,
                                                sizeof(module_mutations) / sizeof(module_mutations[0]) };

/* The task a mutation forges, before the forgery: fill_f32 on t1, or the
 * module kernel it names: relu_f32 and tm_count t1 -> t2 (tm_count with
 * k 7 and f 1.0), rownorm_f32 on t1 as 8 rows of 8. */
static hbg_task forged_task(const struct mutation *m, hbg_tensor t1, hbg_tensor t2) {
        if (!m->kernel)
                return fill_task(t1, 3.0f);
        hbg_task t = HBG_TASK_INIT(m->kernel);
        t.n_args = 1;
        t.args[0].tensor = t1;
        if (strcmp(m->kernel, "rownorm_f32") == 0) {
                t.args[0].dir = HBG_INOUT;
                t.n_scalars = 2;
                t.scalars[0] = 8;
                t.scalars[1] = 8;
                return t;
        }
        t.args[0].dir = HBG_IN;
        t.args[1].tensor = t2;
        t.args[1].dir = HBG_OUT;
        t.n_args = 2;
        if (strcmp(m->kernel, "tm_count") == 0) {
                t.n_scalars = 2;
                t.scalars[0] = 7;
                t.scalars[1] = hbg_f32(1.0f);
        }
        return t;
}
/* A session per few mutations: each failing graph is one line of hbgd's
 * log, of which it keeps ten per session per 10 s. */
#define MUTATIONS_PER_SESSION 5

static void mutate(const struct victim *v, const struct mutation *m, uint64_t id, uint64_t partner) {
        struct hbg_task_desc *d = &v->descs[id & (v->D - 1)];
        struct hbg_task_args *p = &v->args[id & (v->D - 1)];
        uint64_t *fanins = v->fanins[id & (v->D - 1)].ids;
        uint64_t value = m->value;
        unsigned ix = m->index;
        switch (m->field) {
        case F_ID: d->id += value; break;
        case F_RESERVED2: d->reserved2 = value; break;
        case F_RESERVED0: d->reserved0[value] = 1; break;
        case F_KERNEL: d->kernel[HBG_LANE_AIV0] = (uint16_t)value; break;
        case F_KERNEL_AIC: d->kernel[HBG_LANE_AIC] = (uint16_t)value; break;
        case F_LANE_MASK: d->lane_mask = (uint8_t)value; break;
        case F_FLAGS: d->flags = (uint8_t)value; break;
        case F_BLOCK_NUM: d->block_num = (uint16_t)value; break;
        case F_N_FANINS: d->n_fanins = (uint8_t)value; break;
        case F_N_TENSORS: d->n_tensors = (uint8_t)value; break;
        case F_N_SCALARS: d->n_scalars = (uint8_t)value; break;
        case F_FANIN: d->n_fanins = 1; d->fanins_inline[0] = id + value; break;
        case F_FANIN_ABS: d->n_fanins = 1; d->fanins_inline[0] = value; break;
        case F_INLINE_STRAY: d->fanins_inline[2] = value; break;
        case F_SLOT_FANINS:
                d->n_fanins = 4;
                for (unsigned i = 0; i < 3; i++)
                        fanins[i] = id - 1;
                fanins[3] = id + value;
                break;
        case F_T_OFFSET: p->tensors[ix].offset = value; break;
        case F_T_OFFSET_ADD: p->tensors[ix].offset += value; break;
        case F_T_LENGTH: p->tensors[ix].length = value; break;
        case F_T_DIRECTION: p->tensors[ix].direction = (uint32_t)value; break;
        case F_T_RESERVED: p->tensors[ix].reserved = (uint32_t)value; break;
        case F_T_OVERLAP: p->tensors[ix].offset = p->tensors[0].offset + value; break;
        case F_SCALAR: p->scalars[ix] |= value; break;
        case F_PREDICATE: d->flags |= HBG_TASK_HAS_PREDICATE; d->predicate_offset = value; break;
        case F_PREDICATE_AT_HEAP_END:
                d->flags |= HBG_TASK_HAS_PREDICATE;
                d->predicate_offset = v->heap_size;
                break;
        case F_T_AT_HEAP_END: p->tensors[ix].offset = v->heap_size - p->tensors[ix].length + 128; break;
        case F_CYCLE:
                d->n_fanins = 1;
                d->fanins_inline[0] = partner;
                v->descs[partner & (v->D - 1)].n_fanins = 1;
                v->descs[partner & (v->D - 1)].fanins_inline[0] = id;
                break;
        }
}

/* One forged graph: written by the library, forged before it is
 * published (hbg_graph_submit publishes), then waited for. 0, or -1 with
 * "FAIL" said. */
static int forged_graph(int sock, struct victim *v, const struct mutation *m, hbg_tensor t1, hbg_tensor t2) {
        hbg_task a = forged_task(m, t1, t2), b = fill_task(t2, 4.0f);
        uint64_t id = 0, partner = 0, graph = 0, task = 0;
        int err = hbg_graph_add(v->c, &a, &id);
        if (err == 0 && m->field == F_CYCLE)
                err = hbg_graph_add(v->c, &b, &partner);
        if (err < 0) {
                kid_say(sock, "FAIL %s: hbg_graph_add: %s [%s]", m->what, hbg_strerror(err), hbg_last_error(v->c));
                return -1;
        }
        mutate(v, m, id, partner);
        err = hbg_graph_submit(v->c, &graph);
        if (err == 0)
                err = hbg_graph_wait(v->c, graph, WAIT_MS);
        const char *msg = hbg_last_error(v->c);
        int st = hbg_graph_status(v->c, graph, &task);
        if (err != m->code || st != m->code || task != id || !msg[0]) {
                kid_say(sock, "FAIL %s: graph %" PRIu64 " came to %d (%s), status %d, first failing task %" PRIu64
                        "; expected %d (%s) at task %" PRIu64 " with a message [%s]", m->what, graph, err,
                        strerror(-err), st, task, m->code, strerror(-m->code), id, msg);
                return -1;
        }
        /* A kernel's message names the kernel, and so does the graph's
         * error (a module kernel's name too). */
        hbg_graph_error_info e = HBG_GRAPH_ERROR_INFO_INIT;
        const char *colon = strchr(m->why, ':');
        if (m->kernel && colon &&
            (hbg_graph_error(v->c, graph, &e) != 0 || strncmp(e.kernel, m->why, (size_t)(colon - m->why)) != 0 ||
             e.kernel[colon - m->why] || !strstr(e.message, m->why))) {
                kid_say(sock, "FAIL %s: the graph's error names kernel \"%s\" [%s]; expected \"%.*s\" [%s]", m->what,
                        e.kernel ? e.kernel : "(null)", e.message, (int)(colon - m->why), m->why, m->why);
                return -1;
        }
        char lb[200], lr[300];
        snprintf(lb, sizeof(lb), "%s: graph %" PRIu64 " ", v->name, graph);
        /* The reason, then the numbers behind it where it has some. */
        snprintf(lr, sizeof(lr), "failed: %s at task %" PRIu64 " (%s", hbg_strerror(m->code), id, m->why);
        expect_log(sock, lb, lr);
        return 0;
}

/* A good relu_f32 graph x -> y: 0, or -1 with "FAIL" said. */
static int relu_graph(int sock, struct victim *v, hbg_tensor x, hbg_tensor y, const char *after) {
        float *in = hbg_tensor_data(v->c, x);
        size_t n = x.bytes / sizeof(float);
        for (size_t i = 0; i < n; i++)
                in[i] = (float)i - (float)(n / 2);
        hbg_task t = forged_task(&(struct mutation){ .kernel = "relu_f32" }, x, y);
        uint64_t graph;
        int err = hbg_graph_add(v->c, &t, NULL);
        if (err == 0)
                err = hbg_graph_submit(v->c, &graph);
        if (err == 0)
                err = hbg_graph_wait(v->c, graph, WAIT_MS);
        const float *out = hbg_tensor_data(v->c, y);
        for (size_t i = 0; err == 0 && i < n; i++)
                if (out[i] != (in[i] > 0.0f ? in[i] : 0.0f))
                        err = -EILSEQ;
        if (err == 0)
                return 0;
        kid_say(sock, "FAIL after \"%s\": a good relu_f32 graph of the same session: %d [%s]", after, err,
                hbg_last_error(v->c));
        return -1;
}

/* tm_count's out[0] after one good task: how many times its check() ran
 * in hbgd, this task's included. 0, or -1 with "FAIL" said. */
static int module_checks(int sock, struct victim *v, hbg_tensor in, hbg_tensor out, float *ret) {
        hbg_task t = forged_task(&(struct mutation){ .kernel = "tm_count" }, in, out);
        uint64_t graph;
        int err = hbg_graph_add(v->c, &t, NULL);
        if (err == 0)
                err = hbg_graph_submit(v->c, &graph);
        if (err == 0)
                err = hbg_graph_wait(v->c, graph, WAIT_MS);
        if (err < 0) {
                kid_say(sock, "FAIL a good tm_count graph: %d [%s]", err, hbg_last_error(v->c));
                return -1;
        }
        *ret = ((const float *)hbg_tensor_data(v->c, out))[0];
        return 0;
}

static int forged_fn(int sock, void *arg) {
        struct victim v;
        if (attacker_start(sock, arg, &v) < 0)
                return 1;
        const struct target *tg = arg;
        const struct mutation_set *set = tg->extra ? tg->extra : &builtin_mutations;
        bool modules = set != &builtin_mutations;
        if (modules && (hbg_client_kernel_id(v.c, "relu_f32") != (int)MOD_RELU ||
                        hbg_client_kernel_id(v.c, "tm_count") != (int)MOD_TM_COUNT)) {
                kid_say(sock, "FAIL hbgd's module kernels have other ids: relu_f32 %d, tm_count %d",
                        hbg_client_kernel_id(v.c, "relu_f32"), hbg_client_kernel_id(v.c, "tm_count"));
                return 1;
        }
        unsigned sessions = 1;
        for (size_t i = 0; i < set->n; i++) {
                hbg_tensor t[3];
                if (i % MUTATIONS_PER_SESSION == 0 && i > 0) {
                        victim_close(&v);
                        if (victim_open(&v, sock, tg->path) < 0)
                                return 1;
                        sessions++;
                }
                for (unsigned k = 0; k < 3; k++)
                        if (hbg_tensor_alloc(v.c, 256, &t[k]) < 0) {
                                kid_say(sock, "FAIL hbg_tensor_alloc: %s", hbg_last_error(v.c));
                                return 1;
                        }
                if (forged_graph(sock, &v, &set->m[i], t[0], t[1]) < 0)
                        return 1;
                /* Only that graph failed: the session goes on. */
                struct tally tl = { 0 };
                if (fill_graph(&v, t[2], 5.0f, &tl) != 0 || tl.corrupted) {
                        kid_say(sock, "FAIL after \"%s\": a good graph of the same session: %d [%s]",
                                set->m[i].what, tl.first_code, tl.first_msg);
                        return 1;
                }
                if (modules && relu_graph(sock, &v, t[0], t[1], set->m[i].what) < 0)
                        return 1;
        }
        kid_say(sock, "NOTE %zu forged descriptors in %u sessions: each failed its graph with the expected code "
                "at the forged task, the good graph after it succeeded", set->n, sessions);
        if (modules) {
                /* No forged task reached tm_count's check(): only the good
                 * one's call is counted. */
                hbg_tensor t[2];
                float calls = -1.0f;
                if (hbg_tensor_alloc(v.c, 256, &t[0]) < 0 || hbg_tensor_alloc(v.c, 256, &t[1]) < 0 ||
                    module_checks(sock, &v, t[0], t[1], &calls) < 0)
                        return 1;
                if (calls != 1.0f) {
                        kid_say(sock, "FAIL tm_count's check() ran %g times for one good task: forged tasks reached "
                                "it", (double)calls);
                        return 1;
                }
                kid_say(sock, "NOTE tm_count's check() ran once, for the good task only");
        }
        return attacker_end(sock, &v, 0);
}

START_TEST(forged_descriptors) {
        run_attack("forged_descriptors", forged_fn);
}
END_TEST

/* The module's file copied into dir (a fresh 0755 directory: the build
 * tree may lie under one others may write, which hbgd refuses). */
static void copy_module(const char *src, const char *dir, const char *name, char *ret, size_t len) {
        snprintf(ret, len, "%s/%s", dir, name);
        module_copy(src, ret);
}

START_TEST(forged_module_descriptors) {
        char dir[] = "/tmp/hbg-e2e-kmod-XXXXXX", a[128], b[128], conf[512], cmd[128];
        ck_assert_ptr_nonnull(mkdtemp(dir));
        ck_assert_int_eq(chmod(dir, 0755), 0);
        copy_module(HBG_TEST_EXAMPLE_MODULE, dir, "hbg-nn.so", a, sizeof(a));
        copy_module(HBG_TEST_MODULES_DIR "/counting.so", dir, "counting.so", b, sizeof(b));
        snprintf(conf, sizeof(conf), STALL_CONF "\n[kernels]\nmodules = %s %s\n", a, b);
        run_attack_conf("forged_module_descriptors", forged_fn, conf, &module_set);
        snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
        if (system(cmd) != 0)
                fprintf(stderr, "cannot remove %s\n", dir);
}
END_TEST

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

/* ------------------------------------------------------------ e. flipping published descriptors */

/* For arg ms: random bits flipped in the descriptors, fanins and arguments of the
 * last ids published (those hbgd is copying), now and then anywhere. */
static void flip_published(const void *ctx, uint64_t ms) {
        const struct victim *v = ctx;
        uint64_t s = kid_seed() | 1;
        long long end = daemon_now_ms() + (long long)ms;
        for (unsigned i = 0; (i & 1023) || daemon_now_ms() < end; i++) {
                uint64_t sub = atomic_load_explicit(&v->sh->submitted, memory_order_relaxed);
                uint64_t r = xorshift(&s);
                uint64_t id = i % 8 == 0 ? r >> 20 : sub - 1 - (r >> 20) % 8;
                volatile uint8_t *bytes;
                size_t size;
                if (r & 1) {
                        bytes = (volatile uint8_t *)(void *)&v->descs[id & (v->D - 1)];
                        size = sizeof(struct hbg_task_desc);
                } else if (r & 2) {
                        bytes = (volatile uint8_t *)(void *)&v->fanins[id & (v->D - 1)];
                        size = sizeof(struct hbg_task_fanins);
                } else {
                        bytes = (volatile uint8_t *)(void *)&v->args[id & (v->D - 1)];
                        size = sizeof(struct hbg_task_args);
                }
                bytes[(r >> 8) % size] ^= (uint8_t)(1u << ((r >> 4) % 8));
                if ((i & 1023) == 1023)
                        sched_yield();
        }
}

static int flip_fn(int sock, void *arg) {
        struct victim v;
        if (attacker_start(sock, arg, &v) < 0)
                return 1;
        hbg_tensor t, r[3];
        int err = hbg_tensor_alloc(v.c, 4096, &t);
        for (unsigned i = 0; err == 0 && i < 3; i++)
                err = hbg_tensor_alloc(v.c, 1024, &r[i]);
        /* A recorded graph too: its launch records are descriptors. */
        uint32_t rec = 0;
        if (err == 0)
                err = hbg_graph_record_begin(v.c);
        for (unsigned i = 0; err == 0 && i < 3; i++) {
                hbg_task task = fill_task(r[i], 2.0f);
                err = hbg_graph_add(v.c, &task, NULL);
        }
        if (err == 0)
                err = hbg_graph_record_end(v.c, &rec);
        if (err < 0) {
                kid_say(sock, "FAIL setting up: %s [%s]", hbg_strerror(err), hbg_last_error(v.c));
                return 1;
        }
        struct tally plain = { 0 }, launched = { 0 };
        pid_t w = fork_writer(flip_published, &v, 10000 / scale());
        long long deadline = daemon_now_ms() + WAIT_MS;
        for (unsigned g = 0; writer_running(w) && daemon_now_ms() < deadline; g++) {
                if (plain.gone || launched.gone) {
                        sleep_us(10000);
                        continue;
                }
                if (g % 2) {
                        fill_graph(&v, t, (float)(g % 1000), &plain);
                        continue;
                }
                uint64_t graph;
                err = hbg_graph_launch(v.c, rec, &graph);
                if (err == 0)
                        err = hbg_graph_wait(v.c, graph, WAIT_GRAPH_MS);
                tally_note(&launched, v.c, err);
        }
        if (writer_running(w))
                kill(w, SIGKILL);
        waitpid(w, NULL, 0);
        tally_say(sock, &plain, "plain graphs while published descriptors were flipped");
        tally_say(sock, &launched, "launches while published descriptors were flipped");
        if (plain.failed) {
                char a[160], b[160];
                snprintf(a, sizeof(a), "%s: graph ", v.name);
                snprintf(b, sizeof(b), "failed: ");
                expect_log(sock, a, b);
        }
        return attacker_end(sock, &v, 0);
}

START_TEST(flip_published_descriptors) {
        run_attack("flip_published_descriptors", flip_fn);
}
END_TEST

/* ------------------------------------------------------------ f. sealed regions */

/* A session opened by raw records, holding the memfds, with a producer
 * of one-task graphs of its own (fill_f32 into the heap's first 256
 * bytes). */
struct raw_session {
        int sock, fds[SESSION_FDS]; /* sub, cpl, doorbell, completion, wake page */
        uint8_t *sub;
        const uint8_t *cpl;
        uint64_t sub_size, cpl_size, heap_size, D, G;
        struct hbg_sub_header *sh;
        struct hbg_task_desc *descs;
        struct hbg_task_args *args;
        struct hbg_graph_record *records;
        uint8_t *heap;
        uint64_t sh_descs_offset, sh_graphs_offset, sh_heap_offset;
        const struct hbg_graph_entry *table;
        uint64_t next_id, graphs, session;
};

static int raw_open(struct raw_session *s, int sock, const char *path) {
        char why[256];
        *s = (struct raw_session){ .fds = { -1, -1, -1, -1, -1 } };
        s->sock = cx_connect(path, false);
        if (s->sock < 0 || cx_send(s->sock, HBG__ENVELOPE__MSG_HELLO, 0, 0) < 0 ||
            cx_expect(s->sock, HBG__ENVELOPE__MSG_HELLO, IO_MS, why, sizeof(why)) < 0 ||
            cx_send(s->sock, HBG__ENVELOPE__MSG_SESSION_REQUEST, ATTACK_WINDOW, ATTACK_HEAP) < 0) {
                kid_say(sock, "FAIL raw handshake: %s", s->sock < 0 ? strerror(-s->sock) : why);
                return -1;
        }
        struct pollfd p = { .fd = s->sock, .events = POLLIN };
        Hbg__Envelope *env = NULL;
        unsigned nfds = 0;
        int err = poll(&p, 1, IO_MS) == 1
                          ? wire_recv(s->sock, HBG_WIRE_MAX_MSG_DEFAULT, &env, s->fds, SESSION_FDS, &nfds)
                          : -ETIMEDOUT;
        if (err < 0 || env->msg_case != HBG__ENVELOPE__MSG_SESSION_REPLY || nfds != SESSION_FDS) {
                kid_say(sock, "FAIL no session reply with its fds: %s", err < 0 ? strerror(-err) : "other message");
                return -1;
        }
        s->sub_size = env->session_reply->sub_region_size;
        s->cpl_size = env->session_reply->cpl_region_size;
        s->session = env->session_reply->session_id;
        wire_free(env);
        void *sub = mmap(NULL, s->sub_size, PROT_READ | PROT_WRITE, MAP_SHARED, s->fds[0], 0);
        void *cpl = mmap(NULL, s->cpl_size, PROT_READ, MAP_SHARED, s->fds[1], 0);
        if (sub == MAP_FAILED || cpl == MAP_FAILED) {
                kid_say(sock, "FAIL mapping the regions: %s", strerror(errno));
                return -1;
        }
        s->sub = sub;
        s->cpl = cpl;
        /* Offsets read once, before any attack on the region. */
        s->sh = sub;
        const struct hbg_cpl_header *ch = cpl;
        s->descs = (struct hbg_task_desc *)(void *)(s->sub + s->sh->descs_offset);
        s->args = (struct hbg_task_args *)(void *)(s->sub + s->sh->args_offset);
        s->records = (struct hbg_graph_record *)(void *)(s->sub + s->sh->graphs_offset);
        s->heap = s->sub + s->sh->heap_offset;
        s->sh_descs_offset = s->sh->descs_offset;
        s->sh_graphs_offset = s->sh->graphs_offset;
        s->sh_heap_offset = s->sh->heap_offset;
        s->heap_size = s->sh->heap_size;
        s->D = UINT64_C(1) << s->sh->task_window_log2;
        s->G = UINT64_C(1) << s->sh->graph_ring_log2;
        s->table = (const struct hbg_graph_entry *)(const void *)(s->cpl + ch->graphs_offset);
        return 0;
}

static void raw_close(struct raw_session *s) {
        munmap(s->sub, s->sub_size);
        munmap((void *)(uintptr_t)s->cpl, s->cpl_size);
        for (unsigned i = 0; i < SESSION_FDS; i++)
                close(s->fds[i]);
        close(s->sock);
}

static bool raw_gone(const struct raw_session *s) {
        char b;
        ssize_t n = recv(s->sock, &b, 1, MSG_DONTWAIT | MSG_PEEK);
        return n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK);
}

/* One graph of one fill task, waited for: its status, -ETIMEDOUT, or
 * -ECONNRESET once hbgd closed the session. */
/* Task id written: fill_f32 of value into the heap's 256 bytes at
 * offset. */
static void raw_write_fill(struct raw_session *s, uint64_t id, float value, uint64_t offset) {
        uint32_t bits;
        memcpy(&bits, &value, sizeof(bits));
        s->descs[id & (s->D - 1)] = (struct hbg_task_desc){
                .id = id, .kernel = { [HBG_LANE_AIV0] = HBG_KERNEL_FILL_F32 },
                .lane_mask = 1u << HBG_LANE_AIV0, .block_num = 1, .n_tensors = 1, .n_scalars = 1,
        };
        struct hbg_task_args *p = &s->args[id & (s->D - 1)];
        p->tensors[0] = (struct hbg_tensor_arg){ .offset = offset, .length = 256, .direction = HBG_DIR_OUT };
        p->scalars[0] = bits;
}

static int raw_graph(struct raw_session *s, float value, int timeout_ms, bool *ret_right) {
        uint64_t id = s->next_id++, k = s->graphs++;
        raw_write_fill(s, id, value, 0);
        atomic_store(&s->sh->submitted, s->next_id);
        s->records[k & (s->G - 1)] = (struct hbg_graph_record){ .graph_id = k, .first_id = id, .last_id = id };
        atomic_store(&s->sh->graphs_submitted, s->graphs);
        ssize_t n = send(s->fds[2], "x", 1, MSG_DONTWAIT | MSG_NOSIGNAL);
        (void)n;
        const struct hbg_graph_entry *e = &s->table[k & (s->G - 1)];
        long long deadline = daemon_now_ms() + timeout_ms;
        *ret_right = false;
        while (atomic_load_explicit(&e->seq, memory_order_acquire) != k + 1) {
                if (raw_gone(s))
                        return -ECONNRESET;
                if (daemon_now_ms() >= deadline)
                        return -ETIMEDOUT;
                sleep_us(200);
        }
        const float *x = (const float *)(const void *)s->heap;
        *ret_right = true;
        for (unsigned i = 0; i < 64; i++)
                *ret_right = *ret_right && x[i] == value;
        return e->status;
}

/* The completion watermark of s at `upto` within timeout_ms. */
static bool raw_wm_reaches(const struct raw_session *s, uint64_t upto, int timeout_ms) {
        const struct hbg_cpl_header *ch = (const void *)s->cpl;
        long long deadline = daemon_now_ms() + timeout_ms;
        while (atomic_load(&ch->completed_watermark) < upto) {
                if (daemon_now_ms() >= deadline)
                        return false;
                sleep_us(1000);
        }
        return true;
}

/* submitted moved to `upto` (the ids between written or not), and all of
 * them complete. 0, or -1 with "FAIL" said. */
static int raw_submit_upto(int sock, struct raw_session *s, uint64_t upto) {
        atomic_store(&s->sh->submitted, upto);
        ssize_t n = send(s->fds[2], "x", 1, MSG_DONTWAIT | MSG_NOSIGNAL);
        (void)n;
        if (!raw_wm_reaches(s, upto, IO_MS)) {
                kid_say(sock, "FAIL failure list: the ids up to %" PRIu64 " did not complete", upto);
                return -1;
        }
        return 0;
}

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
        struct raw_session s;
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

/* The completion region cannot be written, by any way a client has.
 * 0, or -1 with "FAIL" said. */
static int completion_refuses(int sock, struct raw_session *s) {
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
static int submission_refuses(int sock, struct raw_session *s) {
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
        struct raw_session s;
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

/* ------------------------------------------------------------ main */

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
        Suite *s = suite_create("e2e_shm_attack");
        TCase *tc = tcase_create("shm");
        tcase_set_timeout(tc, 300);
        tcase_add_test(tc, scribble_submission_region);
        tcase_add_test(tc, forged_descriptors);
        tcase_add_test(tc, forged_module_descriptors);
        tcase_add_test(tc, cursors_moved);
        tcase_add_test(tc, forged_records_and_mailbox);
        tcase_add_test(tc, flip_published_descriptors);
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
