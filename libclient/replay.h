/* SPDX-License-Identifier: MIT */
/* libclient/replay.c for the other files of libhbgclient: recording graphs in hbgd, launching them. */
#pragma once

#include "libclient/client_private.h"

/* Free the recorded graphs and any recording (hbg_disconnect). */
void hbgc_recorded_free_all(hbg_client *c);
