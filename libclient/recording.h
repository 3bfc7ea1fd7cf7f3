/* SPDX-License-Identifier: MIT */
/* libclient/recording.c for the other files of libhbgclient: the graph being recorded. */
#pragma once

#include "libclient/client_private.h"

/* Start recording: tasks added go to c->rec, dependencies to its
 * tracker. 0 or -ENOMEM. */
int hbgc_rec_begin(hbg_client *c);
/* Append a task with its fanins (recording ids); *ret_id its recording
 * id. 0 or a negative errno (message set). */
int hbgc_rec_append(hbg_client *c, const struct hbg_task_record *t, const uint64_t *fanins, size_t n_fanins,
                    uint64_t *ret_id);
/* The host function of recorded task id; the accesses of a task. 0 or
 * -ENOMEM. */
int hbgc_rec_host(hbg_client *c, uint64_t id, hbg_host_fn fn, void *userdata);
int hbgc_rec_accesses(hbg_client *c, const struct access *a, size_t na);
/* Stop recording and drop what was recorded (replay.c took what it
 * keeps). */
void hbgc_rec_end(hbg_client *c);
void hbgc_rec_free(struct recording *r);
