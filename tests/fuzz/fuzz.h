/* SPDX-License-Identifier: MIT */
/*
 * The fuzz targets (tests/fuzz/fuzz_*.c): each defines the libFuzzer entry
 * point and, for tests/fuzz/replay_main.c, how to write its seed corpus.
 * `make fuzz` links them with libFuzzer under ASan+UBSan; `make test`
 * links them with replay_main.c, which runs the committed corpus
 * (tests/fuzz/corpus/NAME/) through the same entry point, so every input
 * a fuzzing run kept (and every crash, once fixed) is replayed by every
 * build of the suite.
 */
#pragma once

#include <stddef.h>
#include <stdint.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Write the target's hand-made seeds into dir (replay_main --write-seeds);
 * 0 or -errno. */
int fuzz_write_seeds(const char *dir);

/* Helpers shared by the targets (replay_main.c). */
/* A memfd holding data: for code that reads a path (/proc/self/fd/N). */
int fuzz_memfd(const char *name, const void *data, size_t size);
/* Write one seed file dir/name. 0 or -errno. */
int fuzz_seed(const char *dir, const char *name, const void *data, size_t size);
