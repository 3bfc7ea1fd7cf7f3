/* SPDX-License-Identifier: MIT */
/* Validate-only requests: a dry run's tasks checked, nothing kept
 * (daemon/validate_request.c). */
#pragma once

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "daemon/config.h"
#include "daemon/engine/engine.h"
#include "daemon/slow_work.h"
#include "proto/wire.h"

/*
 * Like a recording (daemon/record.h), in three steps so that the
 * validation runs on the slow-work thread: validate_start() checks what is
 * cheap (count, where the piece begins (first: its first task's number in
 * the graph), the session geometry task_window and heap_size would get
 * (session_geometry(): 0 the defaults), seals, size) and maps the memfd (the caller
 * keeps and closes the fd); its job validates every task; validate_reply()
 * fills the reply (valid until validate_free()). Errors are a negative
 * errno with a message for the client in msg[]. All but the job's run on
 * the io thread.
 */
struct validate_job;

int validate_start(struct validate_job **ret, const struct hbg_engine *e, const struct hbgd_config *cfg,
                   uid_t uid, int fd, uint64_t first, uint64_t tasks, uint64_t task_window, uint64_t heap_size,
                   char *msg, size_t msg_len);
struct slow_job *validate_job_work(struct validate_job *j);
/* The reply of a job that ran (0), or its error with msg[] (-ENOMEM). */
int validate_reply(struct validate_job *j, Hbg__ValidateReply *ret, char *msg, size_t msg_len);
/* Accepts NULL. */
void validate_free(struct validate_job *j);
