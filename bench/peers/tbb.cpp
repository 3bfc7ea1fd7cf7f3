// SPDX-License-Identifier: MIT
/*
 * oneTBB flow graph (bench/peers/peer.h): per run, a tbb::flow::graph with
 * one continue_node per task and one edge per fanin, built inside a
 * task_arena of --threads threads, the roots started with try_put, then
 * wait_for_all. A continue_node fires once it has received as many
 * continue_msg as it has predecessors (counted by make_edge), which is
 * exactly "after every fanin ran".
 *
 * C++ only here: peer.h and dag.h are C headers with extern "C" guards;
 * no exception crosses into peer_main.c.
 */
#include <cerrno>
#include <memory>
#include <new>
#include <vector>

#include <tbb/flow_graph.h>
#include <tbb/global_control.h>
#include <tbb/task_arena.h>

#include "bench/peers/peer.h"

extern "C" const char *const peer_name = "tbb";

namespace {

/* The global_control lifts TBB's process-wide cap on threads (by default
 * the number of CPUs) so that --threads means the same for every peer,
 * also above the CPU count; the arena then has exactly that many slots
 * (the thread calling execute() takes one). */
std::unique_ptr<tbb::global_control> parallelism;
std::unique_ptr<tbb::task_arena> arena;

using task_node = tbb::flow::continue_node<tbb::flow::continue_msg>;

int build_and_run(peer_ctx *ctx) {
        const dag *d = ctx->d;
        tbb::flow::graph g;
        // Nodes keep a reference to g and edges to each other: reserved
        // once so that no node ever moves, destroyed before g.
        std::vector<task_node> nodes;
        nodes.reserve(d->n);
        for (uint32_t t = 0; t < d->n; t++)
                nodes.emplace_back(g, [ctx, t](const tbb::flow::continue_msg &) {
                        peer_body(ctx, t);
                });
        for (uint32_t t = 0; t < d->n; t++)
                for (uint32_t e = d->fanin_start[t]; e < d->fanin_start[t + 1]; e++)
                        tbb::flow::make_edge(nodes[d->fanins[e]], nodes[t]);
        for (uint32_t t = 0; t < d->n; t++)
                if (d->fanin_start[t] == d->fanin_start[t + 1])
                        nodes[t].try_put(tbb::flow::continue_msg());
        g.wait_for_all();
        return 0;
}

/* --rerun: the graph built once and kept; each call puts the roots and
 * waits (a flow graph runs again once wait_for_all returned). */
std::unique_ptr<tbb::flow::graph> kept;
std::unique_ptr<std::vector<task_node>> kept_nodes;
std::vector<uint32_t> kept_roots;

int rerun(peer_ctx *ctx) {
        const dag *d = ctx->d;
        if (!kept) {
                kept = std::make_unique<tbb::flow::graph>();
                kept_nodes = std::make_unique<std::vector<task_node>>();
                kept_nodes->reserve(d->n);
                for (uint32_t t = 0; t < d->n; t++)
                        kept_nodes->emplace_back(*kept, [ctx, t](const tbb::flow::continue_msg &) {
                                peer_body(ctx, t);
                        });
                for (uint32_t t = 0; t < d->n; t++) {
                        for (uint32_t e = d->fanin_start[t]; e < d->fanin_start[t + 1]; e++)
                                tbb::flow::make_edge((*kept_nodes)[d->fanins[e]], (*kept_nodes)[t]);
                        if (d->fanin_start[t] == d->fanin_start[t + 1])
                                kept_roots.push_back(t);
                }
        }
        for (uint32_t t : kept_roots)
                (*kept_nodes)[t].try_put(tbb::flow::continue_msg());
        kept->wait_for_all();
        return 0;
}

} // namespace

extern "C" int peer_init(unsigned threads) {
        try {
                parallelism = std::make_unique<tbb::global_control>(
                        tbb::global_control::max_allowed_parallelism, threads);
                arena = std::make_unique<tbb::task_arena>(static_cast<int>(threads));
                arena->initialize();
        } catch (const std::bad_alloc &) {
                return -ENOMEM;
        } catch (...) {
                return -EIO;
        }
        return 0;
}

extern "C" void peer_fini(void) {
        kept_nodes.reset();
        kept.reset();
        arena.reset();
        parallelism.reset();
}

extern "C" int peer_run(peer_ctx *ctx) {
        try {
                // The graph is made inside execute() so that it (and every
                // task it spawns) belongs to our arena.
                return arena->execute([ctx] { return build_and_run(ctx); });
        } catch (const std::bad_alloc &) {
                return -ENOMEM;
        } catch (...) {
                return -EIO;
        }
}

extern "C" int peer_rerun(peer_ctx *ctx) {
        try {
                return arena->execute([ctx] { return rerun(ctx); });
        } catch (const std::bad_alloc &) {
                return -ENOMEM;
        } catch (...) {
                return -EIO;
        }
}
