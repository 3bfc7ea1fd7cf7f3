/* SPDX-License-Identifier: MIT */
/*
 * Fair share against one user with many sessions (as test_e2e_hostile.c,
 * which says what each test checks after its attack): another user's
 * tasks wait for a bounded number of kernels whatever the number of the
 * first user's sessions (shared helpers: hostile_util.h).
 *
 * Tests of per-uid limits act as uid 65534 (nobody) from a forked child
 * and need root: without root they are left out and the binary exits 77
 * when everything else passed. HBG_TEST_VERBOSE=1 shows hbgd's log.
 */
#include <check.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <linux/futex.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/userfaultfd.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/clock.h"
#include "hbg/hbg.h"
#include "proto/wire.h"
#include "shm/layout.h"
#include "daemon/engine/wakeup.h"
#include "tests/e2e/e2e_kid.h"
#include "tests/e2e/e2e_util.h"
#include "tests/e2e/hostile_util.h"
#include "tests/test_util.h"
#include "tests/check_main.h"

/* ------------------------------------------------------------ 11. one uid, many sessions */

/*
 * Fair share is per uid (docs/SECURITY.md, "The guarantee between
 * sessions"): one uid's N sessions of long kernels together get one
 * share, and another uid's ready task waits for at most FAIR_THREADS x
 * (the other uids' weights: 1 here) of their kernels to *start* — counted,
 * not timed: every heavy item is timestamp_ns -> spin_ns, the light graph
 * one timestamp_ns, and the heavy stamps between the return of the light
 * submit and the light stamp are counted (at most the heavy kernels that
 * started in the light task's wait: the clock only orders). _i: 1, 5 or
 * 20 heavy sessions.
 */
#define FAIR_THREADS 4u
#define FAIR_OTHER_WEIGHTS 1u
#define FAIR_LIGHT_UID ((uid_t)65533)
#define FAIR_ITEMS 8u           /* items (stamp -> spin) per heavy graph */
#define FAIR_INFLIGHT 2u        /* heavy graphs in flight per session */
#define FAIR_SPIN_NS 10000000u  /* 10 ms */
#define FAIR_MAX_SESSIONS 20u
#define FAIR_ROUNDS 4u

static const unsigned fair_sessions[] = { 1, 5, FAIR_MAX_SESSIONS };

struct fair_heavy {
        const char *path;
        unsigned sessions;
};

struct heavy_graph {
        hbg_tensor stamp[FAIR_ITEMS];
        uint64_t graph;
};

static int64_t mono_ns(void) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* hbgd writes the stamps while we may read (its kernels, our mapping). */
static int64_t stamp_read(hbg_client *c, hbg_tensor t) {
        return __atomic_load_n((const int64_t *)hbg_tensor_data(c, t), __ATOMIC_RELAXED);
}

static int heavy_submit(hbg_client *c, struct heavy_graph *g) {
        int err = 0;
        for (unsigned i = 0; i < FAIR_ITEMS && err == 0; i++) {
                __atomic_store_n((int64_t *)hbg_tensor_data(c, g->stamp[i]), 0, __ATOMIC_RELAXED);
                hbg_task s = HBG_TASK_INIT("timestamp_ns");
                s.n_args = 1;
                s.args[0].tensor = g->stamp[i];
                s.args[0].dir = HBG_OUT;
                uint64_t id;
                if ((err = hbg_graph_add(c, &s, &id)) < 0)
                        break;
                hbg_task k = HBG_TASK_INIT("spin_ns");
                k.n_scalars = 1;
                k.scalars[0] = FAIR_SPIN_NS;
                k.n_deps = 1;
                k.deps[0] = id;
                err = hbg_graph_add(c, &k, NULL);
        }
        if (err == 0)
                err = hbg_graph_submit(c, &g->graph);
        return err;
}

/* Report the stamps of g written so far, several to a line. */
static void heavy_report(int sock, hbg_client *c, const struct heavy_graph *g) {
        char line[FAIR_ITEMS * 24 + 8];
        int o = snprintf(line, sizeof(line), "S");
        for (unsigned i = 0; i < FAIR_ITEMS; i++) {
                int64_t v = stamp_read(c, g->stamp[i]);
                if (v != 0)
                        o += snprintf(line + o, sizeof(line) - (size_t)o, " %lld", (long long)v);
        }
        if (o > 1)
                kid_say(sock, "%s", line);
}

/* The heavy uid: `sessions` sessions, each keeping FAIR_INFLIGHT graphs of
 * FAIR_ITEMS long items in flight until 'Q'; then every stamp ("S ..."
 * lines) and "END". */
static int fair_heavy_fn(int sock, void *arg) {
        const struct fair_heavy *h = arg;
        hbg_client *c[FAIR_MAX_SESSIONS];
        struct heavy_graph g[FAIR_MAX_SESSIONS][FAIR_INFLIGHT];
        int err = 0;
        for (unsigned s = 0; s < h->sessions; s++) {
                if ((err = hbg_connect(&c[s], h->path)) < 0) {
                        kid_say(sock, "FAIL session %u: %s [%s]", s, hbg_strerror(err), hbg_last_error(NULL));
                        return 1;
                }
                for (unsigned j = 0; j < FAIR_INFLIGHT; j++)
                        for (unsigned i = 0; i < FAIR_ITEMS; i++)
                                if ((err = hbg_tensor_alloc(c[s], sizeof(int64_t), &g[s][j].stamp[i])) < 0) {
                                        kid_say(sock, "FAIL tensor: %s", hbg_strerror(err));
                                        return 1;
                                }
        }
        for (unsigned s = 0; s < h->sessions; s++)
                for (unsigned j = 0; j < FAIR_INFLIGHT; j++)
                        if ((err = heavy_submit(c[s], &g[s][j])) < 0) {
                                kid_say(sock, "FAIL submit: %s [%s]", hbg_strerror(err), hbg_last_error(c[s]));
                                return 1;
                        }
        kid_say(sock, "READY");
        while (!kid_cmd_pending(sock)) {
                for (unsigned s = 0; s < h->sessions; s++)
                        for (unsigned j = 0; j < FAIR_INFLIGHT; j++) {
                                int st = hbg_graph_status(c[s], g[s][j].graph, NULL);
                                if (st == 1)
                                        continue;
                                if (st < 0) {
                                        kid_say(sock, "FAIL heavy graph: %s [%s]", hbg_strerror(st),
                                                hbg_last_error(c[s]));
                                        return 1;
                                }
                                heavy_report(sock, c[s], &g[s][j]);
                                if ((err = heavy_submit(c[s], &g[s][j])) < 0) {
                                        kid_say(sock, "FAIL submit: %s [%s]", hbg_strerror(err),
                                                hbg_last_error(c[s]));
                                        return 1;
                                }
                        }
                usleep(1000);
        }
        /* What started of the graphs still in flight counts too. */
        for (unsigned s = 0; s < h->sessions; s++)
                for (unsigned j = 0; j < FAIR_INFLIGHT; j++)
                        heavy_report(sock, c[s], &g[s][j]);
        kid_say(sock, "END");
        kid_cmd(sock);
        for (unsigned s = 0; s < h->sessions; s++)
                hbg_disconnect(c[s]);
        return 0;
}

/* The light uid: on each 'G', a 1-task graph (timestamp_ns): "ROUND
 * submitted stamp", `submitted` read once hbg_graph_submit() returned
 * (the task was published by then). 'Q' ends. */
static int fair_light_fn(int sock, void *arg) {
        hbg_client *c = NULL;
        int err = hbg_connect(&c, (const char *)arg);
        hbg_tensor t;
        if (err == 0)
                err = hbg_tensor_alloc(c, sizeof(int64_t), &t);
        if (err < 0) {
                kid_say(sock, "FAIL connect: %s [%s]", hbg_strerror(err), hbg_last_error(c));
                return 1;
        }
        kid_say(sock, "READY");
        while (kid_cmd(sock) == 'G') {
                hbg_task s = HBG_TASK_INIT("timestamp_ns");
                s.n_args = 1;
                s.args[0].tensor = t;
                s.args[0].dir = HBG_OUT;
                uint64_t graph;
                err = hbg_graph_add(c, &s, NULL);
                if (err == 0)
                        err = hbg_graph_submit(c, &graph);
                int64_t submitted = mono_ns();
                if (err == 0)
                        err = hbg_graph_wait(c, graph, WAIT_MS);
                if (err < 0) {
                        kid_say(sock, "FAIL light graph: %s [%s]", hbg_strerror(err), hbg_last_error(c));
                        return 1;
                }
                kid_say(sock, "ROUND %lld %lld", (long long)submitted, (long long)stamp_read(c, t));
        }
        hbg_disconnect(c);
        return 0;
}

START_TEST(fair_share_per_uid) {
        ck_assert_msg(geteuid() == 0, "fair_share_per_uid needs root");
        unsigned sessions = fair_sessions[_i];
        char conf[512];
        snprintf(conf, sizeof(conf),
                 SMALL_SESSIONS "[scheduler]\nthreads = %u\nclusters = %u\n[limits]\nmax_sessions_per_uid = %u\n",
                 FAIR_THREADS, FAIR_THREADS, FAIR_MAX_SESSIONS);
        struct hbgd_proc *d = start_hbgd_conf(MODE_URING, conf);
        open_to_all(d);
        int base = fd_baseline(d);
        int mon = raw_connect(d->socket_path);
        raw_hello(mon);
        char buf[1024];
        struct kid heavy, light;
        kid_start(&light, FAIR_LIGHT_UID, fair_light_fn, (void *)d->socket_path);
        kid_expect(d, &light, "READY", IO_MS, buf, sizeof(buf), "the light uid");
        struct fair_heavy h = { .path = d->socket_path, .sessions = sessions };
        kid_start(&heavy, NOBODY, fair_heavy_fn, &h);
        kid_expect(d, &heavy, "READY", IO_MS, buf, sizeof(buf), "the heavy uid");
        /* The heavy kernels hold every thread before the first round. */
        uint64_t classified, dispatched;
        long long deadline = daemon_now_ms() + IO_MS;
        while (thread_counts(d, mon, &classified, &dispatched), dispatched < 2 * FAIR_THREADS &&
               daemon_now_ms() < deadline)
                sleep_us(2000);

        long long rounds[FAIR_ROUNDS][2];
        for (unsigned r = 0; r < FAIR_ROUNDS; r++) {
                kid_tell(&light, 'G');
                const char *v = kid_expect(d, &light, "ROUND", WAIT_MS, buf, sizeof(buf), "the light uid");
                D_ASSERT(d, sscanf(v, "%lld %lld", &rounds[r][0], &rounds[r][1]) == 2, "ROUND %s", v);
        }
        kid_tell(&light, 'Q');
        kid_end(d, &light, IO_MS, "the light uid");

        /* The heavy stamps, and how many fall in each round's wait. */
        kid_tell(&heavy, 'Q');
        unsigned in_round[FAIR_ROUNDS] = { 0 }, total = 0;
        for (;;) {
                int err = kid_line(&heavy, IO_MS, buf, sizeof(buf));
                D_ASSERT(d, err == 0, "the heavy uid's stamps: %s", strerror(-err));
                D_ASSERT(d, strncmp(buf, "FAIL", 4) != 0, "the heavy uid: %.200s", buf);
                if (strcmp(buf, "END") == 0)
                        break;
                D_ASSERT(d, buf[0] == 'S', "the heavy uid: unexpected line '%.200s'", buf);
                char *p = buf + 1, *end;
                for (long long v = strtoll(p, &end, 10); end != p; v = strtoll(p, &end, 10)) {
                        p = end;
                        total++;
                        for (unsigned r = 0; r < FAIR_ROUNDS; r++)
                                in_round[r] += v > rounds[r][0] && v < rounds[r][1];
                }
        }
        kid_tell(&heavy, 'Q');
        kid_end(d, &heavy, IO_MS, "the heavy uid");
        unsigned bound = FAIR_THREADS * FAIR_OTHER_WEIGHTS, worst = 0;
        for (unsigned r = 0; r < FAIR_ROUNDS; r++) {
                fprintf(stderr, "fair_share_per_uid: %u heavy sessions, round %u: the light task started %.1f ms "
                        "after its submit returned; %u heavy kernels started in between (bound %u)\n",
                        sessions, r, (double)(rounds[r][1] - rounds[r][0]) / 1e6, in_round[r], bound);
                worst = in_round[r] > worst ? in_round[r] : worst;
        }
        D_ASSERT(d, total > FAIR_THREADS, "the heavy uid ran only %u kernels", total);
        D_ASSERT(d, worst <= bound,
                 "%u sessions of one uid: %u of their kernels started while another uid's ready task waited "
                 "(docs/SECURITY.md: at most threads x the other uids' weights = %u)", sessions, worst, bound);
        close(mon);
        assert_fd_baseline(d, base, "fair_share_per_uid: after both uids left");
        assert_serving(d);
        stop_hbgd(d);
}
END_TEST

static Suite *suite(void) {
        Suite *s = suite_create("e2e_hostile_fair");
        TCase *tc = hostile_case(s, "fair_share");
        hostile_add(tc, fair_share_per_uid, true, (int)(sizeof(fair_sessions) / sizeof(fair_sessions[0])));
        return s;
}

HOSTILE_CHECK_MAIN(suite);
