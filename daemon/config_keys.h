/* SPDX-License-Identifier: MIT */
/* hbgd.conf's keys: the one table (daemon/config_keys.c), what config.c
 * reads and hbgd --check-config prints; each key's type reads its value
 * and says it back (config_keys.c's key_types[]). */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "daemon/config.h"

enum key_type {
        KEY_NUMBER,      /* decimal, optional K/M/G suffix (powers of 1024) */
        KEY_US_AS_NS,    /* microseconds in the file, nanoseconds in the field */
        KEY_USERS,       /* names or uids */
        KEY_WEIGHTS,     /* user:weight pairs */
        KEY_GROUPS,      /* names or gids */
        KEY_LOG_LEVEL,   /* emerg .. debug */
        KEY_COMPLETION,  /* completion_mode_list() */
        KEY_SOCKET_PATH, /* an absolute AF_UNIX socket path (a char array field) */
        KEY_MODE,        /* permission bits in octal, 0 .. 0777 */
        KEY_NAME,        /* a user or group name or number, not looked up (a char array field) */
        KEY_GROUP_LIST,  /* names or gids into a struct hbgd_gids field */
        KEY_VISIBILITY,  /* own, all */
        KEY_PATHS,       /* absolute paths separated by spaces (a char array field) */
        KEY_TYPES        /* how many there are */
};

struct config_key {
        struct hbgd_config_key name;
        enum key_type type;
        size_t offset;   /* in struct hbgd_config */
        size_t width;    /* bytes of the field (numbers) */
        uint64_t min, max;
};

/* At most this many keys (config.c's per-key arrays). */
#define CONFIG_KEYS_MAX 64
extern const struct config_key config_keys[];
extern const size_t config_n_keys;

/* Read value, as the file gives it, into k's field of cfg: true, or
 * false with why in msg (most messages start "KEY: "). */
bool config_key_parse(struct hbgd_config *cfg, const struct config_key *k, const char *value, char *msg,
                      size_t msglen);

/* The table's keys by index, for tests and documentation checks. */
const struct hbgd_config_key *hbgd_config_key_at(size_t i); /* NULL past the end */
/* Key i's value in cfg as hbgd.conf would say it (names for users and
 * groups where known, microseconds for spin_before_park_us). 0, or
 * -EINVAL past the end. */
int hbgd_config_format(const struct hbgd_config *cfg, size_t i, char *buf, size_t len);
