/* SPDX-License-Identifier: MIT */
/* Recording a graph for replay (daemon/record.c). */
#pragma once

#include <stddef.h>
#include <stdint.h>

#include "daemon/config.h"
#include "daemon/session.h"
#include "daemon/slow_work.h"

/*
 * A recording in three steps, so that validating its tasks (up to
 * max_recorded_tasks) runs on the slow-work thread, not the io thread:
 * record_start() checks what is cheap (count, budget, seals, size),
 * charges the memory and maps the memfd (the caller keeps and closes the
 * fd); its job (record_job_work(), `run` set) validates; record_finish()
 * keeps the graph and says its number, record_abandon() drops it (the
 * session goes). Errors are a negative errno with a message for the client
 * in msg[]. All but the job's run on the io thread; the session must live
 * until finish or abandon (conn.c cancels the job before it closes one).
 */
struct record_job;

/* The memfd of a RecordRequest or a ValidateRequest: sealed against
 * writing, growing and shrinking (what we read cannot change, the mapping
 * cannot fault), exactly `tasks` hbg_recorded_task records. 0, or -EBADF
 * or -EINVAL with msg[]. */
int record_memfd_check(int fd, uint64_t tasks, char *msg, size_t msg_len);

int record_start(struct record_job **ret, struct session *s, const struct hbgd_config *cfg, int fd,
                 uint64_t tasks, char *msg, size_t msg_len);
struct slow_job *record_job_work(struct record_job *j);
/* 0 and the graph's number, or the error; frees j. */
int record_finish(struct record_job *j, uint32_t *ret_graph, char *msg, size_t msg_len);
/* Frees j, refunding its charge. */
void record_abandon(struct record_job *j);
