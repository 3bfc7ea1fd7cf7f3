/* SPDX-License-Identifier: MIT */
/*
 * Fuzz target: the graph-file compiler (ctl/graph_file.c, json-c
 * underneath) on arbitrary file contents: read and check the whole
 * document (pass 1), then, if it passes, give every tensor a heap range
 * the way `hbgctl run` does after allocating them and build every task
 * (pass 2). A document that passes pass 1 must build; any error must say
 * why.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ctl/graph_file.h"
#include "tests/fuzz/fuzz.h"

#ifndef FUZZ_GRAPHS_DIR
#define FUZZ_GRAPHS_DIR "tests/graphs"
#endif


static int compile(struct plan *p) {
        uint64_t heap = 0;
        for (size_t i = 0; i < p->n_tensors; i++) {
                p->tensors[i].t.offset = heap;
                p->tensors[i].t.bytes = p->tensors[i].len * 4;
                heap += (p->tensors[i].t.bytes + 63) & ~UINT64_C(63);
        }
        p->resolved = true;
        p->compiled = calloc(p->n_tasks, sizeof(*p->compiled));
        p->ids = calloc(p->n_tasks, sizeof(*p->ids));
        if (!p->compiled || !p->ids)
                abort();
        for (size_t i = 0; i < p->n_tasks; i++) {
                if (graph_file_task(p, i, &p->compiled[i]) < 0)
                        return -1;
                for (unsigned d = 0; d < p->compiled[i].n_deps; d++)
                        if (p->compiled[i].deps[d] >= i)
                                abort(); /* a dependency must be an earlier task */
        }
        return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        int fd = fuzz_memfd("graph.json", data, size);
        if (fd < 0)
                abort();
        char path[64];
        snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
        struct plan p = { .file = path };
        if (graph_file_load(&p) < 0 || graph_file_parse(&p) < 0) {
                if (p.err[0] == '\0')
                        abort();
        } else if (compile(&p) < 0) {
                abort(); /* pass 1 accepted what pass 2 cannot build */
        }
        graph_file_free(&p);
        close(fd);
        return 0;
}

/* The example and error files of the graph-file tests. */
int fuzz_write_seeds(const char *dir) {
        (void)dir;
        fprintf(stderr, "the graph-file seeds are %s/*.json: copy them\n", FUZZ_GRAPHS_DIR);
        return 0;
}
