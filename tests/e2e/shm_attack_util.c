/* SPDX-License-Identifier: MIT */
/*
 * shm_attack_util.c: what the shared-memory attack tests share
 * (shm_attack_util.h).
 */
#include "tests/e2e/shm_attack_util.h"

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

unsigned scale(void) {
        return hostile_scale();
}

/* ------------------------------------------------------------ the attacker's view of its session */

static int socket_type(int fd) {
        int type = 0;
        socklen_t len = sizeof(type);
        return getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &len) == 0 ? type : -1;
}

/* A small session through the library, and where its parts are. 0, or -1
 * with "FAIL ..." said. */
int victim_open(struct victim *v, int sock, const char *path) {
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

void victim_close(struct victim *v) {
        hbg_disconnect(v->c);
        v->c = NULL;
}

void ring_doorbell(const struct victim *v) {
        ssize_t n = send(v->doorbell, "x", 1, MSG_DONTWAIT | MSG_NOSIGNAL);
        (void)n; /* full: hbgd has wake-ups queued already */
}

/* Poll until cond(v) or timeout_ms: true if it held. */
bool await(const struct victim *v, bool (*cond)(const struct victim *), int timeout_ms) {
        long long deadline = daemon_now_ms() + timeout_ms;
        while (!cond(v)) {
                if (daemon_now_ms() >= deadline)
                        return false;
                sleep_us(1000);
        }
        return true;
}

/* hbgd closed the session (it does so once it stopped the ring). */
bool session_closed(const struct victim *v) {
        struct pollfd p = { .fd = v->control, .events = POLLRDHUP };
        return poll(&p, 1, 0) == 1 && (p.revents & (POLLRDHUP | POLLHUP | POLLERR));
}

/* Log lines the parent must find: one line containing both a and b. */
void expect_log(int sock, const char *a, const char *b) {
        kid_say(sock, "LOG %s\t%s", a, b);
}

/* ... and for a ring hbgd stopped: its reason, and the session closed. */
void expect_stop_logged(int sock, const struct victim *v, const char *why) {
        char a[160], b[160];
        snprintf(a, sizeof(a), "%s: stopped: ", v->name);
        expect_log(sock, a, why);
        snprintf(a, sizeof(a), "session %" PRIu64 " (pid %d uid %u): closed: ", v->session, (int)getpid(),
                 (unsigned)getuid());
        snprintf(b, sizeof(b), "session stopped: %s", hbg_strerror(-EPROTO));
        expect_log(sock, a, b);
}

/* ------------------------------------------------------------ the attacker's graphs */

hbg_task fill_task(hbg_tensor t, float value) {
        hbg_task task = HBG_TASK_INIT("fill_f32");
        task.n_args = 1;
        task.args[0].tensor = t;
        task.args[0].dir = HBG_OUT;
        task.n_scalars = 1;
        task.scalars[0] = hbg_f32(value);
        return task;
}

void tally_note(struct tally *t, hbg_client *c, int err) {
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

void tally_say(int sock, const struct tally *t, const char *what) {
        kid_say(sock, "NOTE %s: %u ok, %u failed, %u timed out, %u after hbgd closed the session, %u ok but "
                "read back wrong; first error %d: %s", what, t->ok, t->failed, t->timed_out, t->gone,
                t->corrupted, t->first_code, t->first_msg);
        if (t->unclear)
                kid_say(sock, "FAIL %s: %u results without a negative errno and a message", what, t->unclear);
}

/* One fill graph on t, waited for; its result noted, the values checked
 * when it succeeded (only counted: the attacks may overwrite them). */
int fill_graph(struct victim *v, hbg_tensor t, float value, struct tally *tl) {
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
int expect_clear_failure(int sock, struct victim *v, hbg_tensor t, const char *what) {
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

pid_t fork_writer(writer_fn *fn, const void *ctx, uint64_t arg) {
        fflush(NULL);
        pid_t pid = fork();
        if (pid == 0) {
                prctl(PR_SET_PDEATHSIG, SIGKILL);
                fn(ctx, arg);
                _exit(0);
        }
        return pid;
}

bool writer_running(pid_t pid) {
        return pid > 0 && waitpid(pid, NULL, WNOHANG) == 0;
}

/* The attacker runs fill graphs until the writer is done (or WAIT_MS
 * passed, then the writer is killed). */
void graphs_while_writer(struct victim *v, hbg_tensor t, pid_t writer, struct tally *tl) {
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

uint64_t kid_seed(void) {
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

/*
 * One attack: hbgd with STALL_CONF; its fd and RSS baselines after a
 * warm-up; the honest client running; the attacker started, told 'G',
 * and read until "DONE" (NOTE lines are shown, LOG lines are needles for
 * hbgd's log, FAIL lines fail the test); hbgd answers meanwhile; then the
 * honest client's results, the attacker gone, and the checks above.
 */
void run_attack_conf(const char *name, kid_fn fn, const char *conf, const void *extra) {
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

void run_attack(const char *name, kid_fn fn) {
        run_attack_conf(name, fn, STALL_CONF, NULL);
}

/* The attacker's start: its session, READY, then the parent's 'G'. */
int attacker_start(int sock, void *arg, struct victim *v) {
        const struct target *tg = arg;
        if (victim_open(v, sock, tg->path) < 0)
                return -1;
        kid_say(sock, "READY");
        if (kid_cmd(sock) != 'G')
                return -1;
        return 0;
}

/* The attacker's end: DONE, then the parent's 'Q'. */
int attacker_end(int sock, struct victim *v, int ret) {
        kid_say(sock, "DONE");
        kid_cmd(sock);
        if (v->c)
                victim_close(v);
        return ret;
}

int raw_open(struct raw_victim *s, int sock, const char *path) {
        char why[256];
        *s = (struct raw_victim){ .fds = { -1, -1, -1, -1, -1 } };
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

void raw_close(struct raw_victim *s) {
        munmap(s->sub, s->sub_size);
        munmap((void *)(uintptr_t)s->cpl, s->cpl_size);
        for (unsigned i = 0; i < SESSION_FDS; i++)
                close(s->fds[i]);
        close(s->sock);
}

bool raw_gone(const struct raw_victim *s) {
        char b;
        ssize_t n = recv(s->sock, &b, 1, MSG_DONTWAIT | MSG_PEEK);
        return n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK);
}

/* Task id written: fill_f32 of value into the heap's 256 bytes at
 * offset. */
void raw_write_fill(struct raw_victim *s, uint64_t id, float value, uint64_t offset) {
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

/* One graph of one fill task, waited for: its status, -ETIMEDOUT, or
 * -ECONNRESET once hbgd closed the session. */
int raw_graph(struct raw_victim *s, float value, int timeout_ms, bool *ret_right) {
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
bool raw_wm_reaches(const struct raw_victim *s, uint64_t upto, int timeout_ms) {
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
int raw_submit_upto(int sock, struct raw_victim *s, uint64_t upto) {
        atomic_store(&s->sh->submitted, upto);
        ssize_t n = send(s->fds[2], "x", 1, MSG_DONTWAIT | MSG_NOSIGNAL);
        (void)n;
        if (!raw_wm_reaches(s, upto, IO_MS)) {
                kid_say(sock, "FAIL failure list: the ids up to %" PRIu64 " did not complete", upto);
                return -1;
        }
        return 0;
}
