// SPDX-License-Identifier: MIT
/*
 * Taskflow (bench/peers/peer.h), header-only and not packaged by Debian:
 * built only when TASKFLOW_INC names the directory holding taskflow/
 * (make bench-peers TASKFLOW_INC=DIR). Per run, a tf::Taskflow with one
 * task per graph task and one precede() per fanin, run on a tf::Executor of
 * --threads workers made once; the calling thread waits on the run's
 * future. With --rerun, one tf::Taskflow built in the first run and run
 * again. A task runs once all its predecessors ran, which is "after
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

void build(peer_ctx *ctx, tf::Taskflow &flow) {
        const dag *d = ctx->d;
        std::vector<tf::Task> tasks;
        tasks.reserve(d->n);
        for (uint32_t t = 0; t < d->n; t++)
                tasks.push_back(flow.emplace([ctx, t]() { peer_body(ctx, t); }));
        for (uint32_t t = 0; t < d->n; t++)
                for (uint32_t e = d->fanin_start[t]; e < d->fanin_start[t + 1]; e++)
                        tasks[d->fanins[e]].precede(tasks[t]);
}

int build_and_run(peer_ctx *ctx) {
        tf::Taskflow flow;
        build(ctx, flow);
        executor->run(flow).wait();
        return 0;
}

/* --rerun: the taskflow built once (in the first, warm-up, run) and kept;
 * each call runs it again (Taskflow's own way to run a graph again,
 * beside hbg's replay). */
std::unique_ptr<tf::Taskflow> kept;

int rerun(peer_ctx *ctx) {
        if (!kept) {
                auto flow = std::make_unique<tf::Taskflow>();
                build(ctx, *flow);
                kept = std::move(flow);
        }
        executor->run(*kept).wait();
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
        kept.reset();
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

extern "C" int peer_rerun(peer_ctx *ctx) {
        try {
                return rerun(ctx);
        } catch (const std::bad_alloc &) {
                return -ENOMEM;
        } catch (...) {
                return -EIO;
        }
}
