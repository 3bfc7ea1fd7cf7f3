// SPDX-License-Identifier: MIT
/*
 * Taskflow (bench/peers/peer.h), header-only and not packaged by Debian:
 * built only when TASKFLOW_INC names the directory holding taskflow/
 * (make bench-peers TASKFLOW_INC=DIR). Per run, a tf::Taskflow with one
 * task per graph task and one precede() per fanin, run on a tf::Executor of
 * --threads workers made once; the calling thread waits on the run's
 * future. A task runs once all its predecessors ran, which is "after
 * every fanin ran".
 */
#include <cerrno>
#include <memory>
#include <new>
#include <vector>

#include <taskflow/taskflow.hpp>

#include "bench/peers/peer.h"

extern "C" const char *const peer_name = "taskflow";

namespace {

std::unique_ptr<tf::Executor> executor;

int build_and_run(peer_ctx *ctx) {
        const dag *d = ctx->d;
        tf::Taskflow flow;
        std::vector<tf::Task> tasks;
        tasks.reserve(d->n);
        for (uint32_t t = 0; t < d->n; t++)
                tasks.push_back(flow.emplace([ctx, t]() { peer_body(ctx, t); }));
        for (uint32_t t = 0; t < d->n; t++)
                for (uint32_t e = d->fanin_start[t]; e < d->fanin_start[t + 1]; e++)
                        tasks[d->fanins[e]].precede(tasks[t]);
        executor->run(flow).wait();
        return 0;
}

} // namespace

extern "C" int peer_init(unsigned threads) {
        try {
                executor = std::make_unique<tf::Executor>(threads);
        } catch (const std::bad_alloc &) {
                return -ENOMEM;
        } catch (...) {
                return -EIO;
        }
        return 0;
}

extern "C" void peer_fini(void) {
        executor.reset();
}

extern "C" int peer_run(peer_ctx *ctx) {
        try {
                return build_and_run(ctx);
        } catch (const std::bad_alloc &) {
                return -ENOMEM;
        } catch (...) {
                return -EIO;
        }
}

/* A kept tf::Taskflow could run again; not measured here (the rerun rows
 * stand beside hbg's replay for oneTBB only). */
extern "C" int peer_rerun(peer_ctx *ctx) {
        (void)ctx;
        return -ENOTSUP;
}
