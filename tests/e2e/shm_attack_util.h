/* SPDX-License-Identifier: MIT */
/*
 * shm_attack_util.c: what the shared-memory attack tests share
 * (test_e2e_shm_attack, test_e2e_shm_control): the attacker's session,
 * through the library or by raw records, its graphs, writers that race
 * it, and run_attack(), which runs one attack beside an honest client
 * and checks hbgd after it (the checks are listed in
 * test_e2e_shm_attack.c).
 */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "hbg/hbg.h"
#include "shm/layout.h"
#include "tests/e2e/e2e_kid.h"
#include "tests/e2e/e2e_util.h"

#define HONEST_BOUND_MS 10000   /* "in time" for one honest graph, loaded CI included */
#define WAIT_GRAPH_MS 2000      /* the attacker's own waits: it may have wedged its graphs */
#define STALL_CONF "[scheduler]\nstall_timeout_ms = 1000\n"
#define ATTACK_HEAP (1u << 20)  /* the attacker's small session: 1 MiB heap, D = 1024 */
#define ATTACK_WINDOW 1024u

/* What HBG_TEST_SCALE divides the work by (hostile_scale(): 10 unless set). */
unsigned scale(void);

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

/* A small session through the library, and where its parts are. 0, or -1
 * with "FAIL ..." said. */
int victim_open(struct victim *v, int sock, const char *path);

/* The library's session ended (hbg_disconnect()). */
void victim_close(struct victim *v);

/* One doorbell datagram, as the library sends it (full: dropped). */
void ring_doorbell(const struct victim *v);

/* Poll until cond(v) or timeout_ms: true if it held. */
bool await(const struct victim *v, bool (*cond)(const struct victim *), int timeout_ms);

/* hbgd closed the session (it does so once it stopped the ring). */
bool session_closed(const struct victim *v);

/* Log lines the parent must find: one line containing both a and b. */
void expect_log(int sock, const char *a, const char *b);

/* ... and for a ring hbgd stopped: its reason, and the session closed. */
void expect_stop_logged(int sock, const struct victim *v, const char *why);

/* ------------------------------------------------------------ the attacker's graphs */

/* fill_f32 of `value` into t. */
hbg_task fill_task(hbg_tensor t, float value);

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

/* err, the result of one of c's graphs, into t (the library's message
 * read from c). */
void tally_note(struct tally *t, hbg_client *c, int err);
/* t as a NOTE line to the parent on sock, and a FAIL line if a result
 * came without a negative errno and a message. */
void tally_say(int sock, const struct tally *t, const char *what);

/* One fill graph on t, waited for; its result noted, the values checked
 * when it succeeded (only counted: the attacks may overwrite them). */
int fill_graph(struct victim *v, hbg_tensor t, float value, struct tally *tl);

/* After the attacker's ring was stopped: the library's next graph must
 * fail clearly. 0, or -1 with "FAIL" said. */
int expect_clear_failure(int sock, struct victim *v, hbg_tensor t, const char *what);

/* A forked process sharing this one's mappings, running fn(ctx, arg)
 * until it returns (it dies with us). */
typedef void writer_fn(const void *ctx, uint64_t arg);

pid_t fork_writer(writer_fn *fn, const void *ctx, uint64_t arg);

/* The writer has not exited yet. */
bool writer_running(pid_t pid);

/* The attacker runs fill graphs until the writer is done (or WAIT_MS
 * passed, then the writer is killed). */
void graphs_while_writer(struct victim *v, hbg_tensor t, pid_t writer, struct tally *tl);

/* The attacker's random seed: HBG_TEST_SEED's value and its pid. */
uint64_t kid_seed(void);

/* ------------------------------------------------------------ the parent's checks */

struct target {
        const char *path;
        const void *extra;      /* the attack's own (run_attack_conf()) */
};

/*
 * One attack: hbgd with STALL_CONF; its fd and RSS baselines after a
 * warm-up; the honest client running; the attacker started, told 'G',
 * and read until "DONE" (NOTE lines are shown, LOG lines are needles for
 * hbgd's log, FAIL lines fail the test); hbgd answers meanwhile; then the
 * honest client's results, the attacker gone, and the checks
 * test_e2e_shm_attack.c lists.
 */
void run_attack_conf(const char *name, kid_fn fn, const char *conf, const void *extra);

void run_attack(const char *name, kid_fn fn);

/* The attacker's start: its session, READY, then the parent's 'G'. */
int attacker_start(int sock, void *arg, struct victim *v);

/* The attacker's end: DONE, then the parent's 'Q'. */
int attacker_end(int sock, struct victim *v, int ret);

/* A session opened by raw records, holding the memfds, with a producer
 * of one-task graphs of its own (fill_f32 into the heap's first 256
 * bytes). */
struct raw_victim {
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

/* Hello and a session by raw records on a connection of its own, its
 * regions mapped. 0, or -1 with "FAIL" said. */
int raw_open(struct raw_victim *s, int sock, const char *path);

/* Its mappings, fds and connection closed. */
void raw_close(struct raw_victim *s);

/* hbgd closed the connection. */
bool raw_gone(const struct raw_victim *s);

/* Task id written: fill_f32 of value into the heap's 256 bytes at
 * offset. */
void raw_write_fill(struct raw_victim *s, uint64_t id, float value, uint64_t offset);

/* One graph of one fill task, waited for: its status, -ETIMEDOUT, or
 * -ECONNRESET once hbgd closed the session. */
int raw_graph(struct raw_victim *s, float value, int timeout_ms, bool *ret_right);

/* The completion watermark of s at `upto` within timeout_ms. */
bool raw_wm_reaches(const struct raw_victim *s, uint64_t upto, int timeout_ms);

/* submitted moved to `upto` (the ids between written or not), and all of
 * them complete. 0, or -1 with "FAIL" said. */
int raw_submit_upto(int sock, struct raw_victim *s, uint64_t upto);
