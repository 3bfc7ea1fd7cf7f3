/* SPDX-License-Identifier: MIT */
/*
 * Fuzz target: hbgd's config parser (daemon/config.c) on
 * arbitrary file contents. Besides "no crash, no leak" it checks the
 * parser's promise (daemon/config.h): a file that fails applies nothing,
 * and one that loads loads again to the same settings.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "daemon/config.h"
#include "tests/fuzz/fuzz.h"

static int load(struct hbgd_config *cfg, int fd, char *err, size_t errlen) {
        char path[64];
        snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
        return hbgd_config_load(cfg, path, err, errlen);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        int fd = fuzz_memfd("hbgd.conf", data, size);
        if (fd < 0)
                abort();
        static struct hbgd_config cfg, before, again;
        char err[512];
        hbgd_config_default(&cfg);
        memcpy(&before, &cfg, sizeof(cfg));
        int rc = load(&cfg, fd, err, sizeof(err));
        if (rc < 0) {
                if (memchr(err, '\0', sizeof(err)) == NULL || err[0] == '\0')
                        abort(); /* a failure always says why */
                if (memcmp(&before, &cfg, sizeof(cfg)) != 0)
                        abort(); /* a failed load applied something */
        } else {
                hbgd_config_default(&again);
                if (load(&again, fd, err, sizeof(err)) < 0)
                        abort();
                if (memcmp(&again, &cfg, sizeof(cfg)) != 0)
                        abort(); /* the same file, different settings */
        }
        close(fd);
        return 0;
}

int fuzz_write_seeds(const char *dir) {
        static const struct {
                const char *name, *text;
        } seeds[] = {
                { "empty", "" },
                { "limits", "[limits]\nmax_sessions = 4\nmax_sessions_per_uid = 2\nmax_memory = 1G\n"
                            "max_message_size = 65536\nmax_task_window = 4096\n" },
                { "scheduler", "[scheduler]\nthreads = 2\ncompletion = lazy\n"
                               "session_weights = root:4 65534:2\n" },
                { "access", "[access]\nallowed_users = root 1000\nallowed_groups = 0 users\n" },
                { "bad_key", "[limits]\nno_such_key = 1\n" },
                { "bad_number", "[limits]\nmax_sessions = 12x\n" },
                { "comment", "; a comment\n# another\n\n[daemon]\n" },
        };
        for (size_t i = 0; i < sizeof(seeds) / sizeof(seeds[0]); i++) {
                int err = fuzz_seed(dir, seeds[i].name, seeds[i].text, strlen(seeds[i].text));
                if (err < 0)
                        return err;
        }
        return 0;
}
