/* SPDX-License-Identifier: MIT */
/*
 * hostile_util.c: what the hostile-client tests share (hostile_util.h).
 */
#include "tests/e2e/hostile_util.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "hbg.pb-c.h"
#include "proto/wire.h"
#include "shm/layout.h"
#include "tests/check_main.h"
#include "tests/e2e/e2e_kid.h"
#include "tests/e2e/e2e_util.h"

int kid_session(int sock, const char *path, int fds[SESSION_FDS]) {
        int fd = cx_connect(path, false);
        if (fd < 0) {
                kid_say(sock, "FAIL connect: %s", strerror(-fd));
                return -1;
        }
        char why[256];
        if (cx_send(fd, HBG__ENVELOPE__MSG_HELLO, 0, 0) < 0 ||
            cx_expect(fd, HBG__ENVELOPE__MSG_HELLO, IO_MS, why, sizeof(why)) < 0 ||
            cx_send(fd, HBG__ENVELOPE__MSG_SESSION_REQUEST, 0, 0) < 0) {
                kid_say(sock, "FAIL hello/session request");
                return -1;
        }
        struct rx r;
        rx(fd, IO_MS, &r);
        if (r.kind != RX_RECORD || !r.env || r.env->msg_case != HBG__ENVELOPE__MSG_SESSION_REPLY ||
            r.nfds != SESSION_FDS) {
                kid_say(sock, "FAIL no session reply");
                return -1;
        }
        memcpy(fds, r.fds, SESSION_FDS * sizeof(int));
        return fd;
}

int recording_of(size_t n) {
        size_t bytes = n * sizeof(struct hbg_recorded_task);
        struct hbg_recorded_task one = noop_recorded();
        int mfd = memfd_create("hostile-recording", MFD_CLOEXEC | MFD_ALLOW_SEALING);
        struct hbg_recorded_task *tasks = mfd >= 0 && ftruncate(mfd, (off_t)bytes) == 0
                                                  ? mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, mfd, 0)
                                                  : MAP_FAILED;
        if (tasks == MAP_FAILED)
                return -1;
        for (size_t i = 0; i < n; i++) {
                tasks[i] = one;
                tasks[i].desc.id = i + 1; /* task i of a recording has id i + 1 */
        }
        munmap(tasks, bytes);
        return fcntl(mfd, F_ADD_SEALS, F_SEAL_WRITE | F_SEAL_GROW | F_SEAL_SHRINK) == 0 ? mfd : -1;
}

void session_request(int fd) {
        Hbg__SessionRequest sr = HBG__SESSION_REQUEST__INIT;
        Hbg__Envelope env = HBG__ENVELOPE__INIT;
        env.msg_case = HBG__ENVELOPE__MSG_SESSION_REQUEST;
        env.session_request = &sr;
        send_env(fd, &env, NULL, 0);
}

static unsigned n_skipped;

TCase *hostile_case(Suite *s, const char *name) {
        TCase *tc = tcase_create(name);
        tcase_set_timeout(tc, 300);
        suite_add_tcase(s, tc);
        return tc;
}

void hostile_add(TCase *tc, const TTest *t, bool needs_root, int loops) {
        if (needs_root && geteuid() != 0) {
                fprintf(stderr, "%s: %s skipped: it acts as uid 65534 and needs root\n",
                        program_invocation_short_name, t->name);
                n_skipped++;
                return;
        }
        if (loops > 0)
                tcase_add_loop_test(tc, t, 0, loops);
        else
                tcase_add_test(tc, t);
}

int hostile_skipped(void) {
        if (!n_skipped)
                return 0;
        fprintf(stderr, "%s: %u tests skipped (not root); the others passed\n", program_invocation_short_name,
                n_skipped);
        return CHECK_SKIP;
}
