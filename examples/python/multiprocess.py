#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Several Python processes feeding one hbgd, each with its own session.

    HBG_SOCKET=/tmp/hbg.sock python3 multiprocess.py [--procs P] [--graphs G] [--tasks T]

Each worker process connects its own hbg.Client (a client belongs to the
process that connected it: a child never uses its parent's), puts its
arrays in its own session heap, and submits G graphs of T element-wise
tasks. The processes share no GIL and no lock in the library: their tasks
meet only in hbgd's scheduler. Every worker checks its results against
numpy; the parent prints each worker's rate and the aggregate one, and
exits 1 if a result was wrong or a worker failed.

--start picks multiprocessing's start method: spawn (the default) starts
fresh interpreters; with fork the children are copies of this process,
which is fine as long as each connects its own client, as here.
"""
import argparse
import multiprocessing
import sys
import time
import traceback

import numpy as np

import hbg

CHUNK = 4096  # floats per task: 16 KiB


def worker(rank, socket, graphs, tasks, barrier, results):
    """One producer process: connect, wait for the others, submit, check."""
    try:
        with hbg.connect(socket, name="multiprocess-%d" % rank) as client:
            rng = np.random.default_rng(rank)
            chains = max(1, tasks // 2)        # each chain: an axpy, then a scale
            x_np = rng.standard_normal(chains * CHUNK, dtype=np.float32)
            x = client.asarray(x_np)
            y = client.zeros(chains * CHUNK)
            alpha = np.float32(1.0 + rank)      # each process computes its own thing
            barrier.wait()                      # all connected: start together
            start = time.monotonic()            # CLOCK_MONOTONIC: one clock for every process
            n_tasks = 0
            handles = []
            for _ in range(graphs):
                g = client.graph()
                for c in range(chains):
                    s = slice(c * CHUNK, (c + 1) * CHUNK)
                    g.add("axpy_f32", x[s], y[s], scalars=(alpha,))  # y += alpha * x
                    g.add("scale_f32", y[s], scalars=(0.5,))          # y *= 0.5, after that axpy
                n_tasks += len(g)
                handles.append(g.submit())      # the next graph's tasks follow this one's on y
                if len(handles) > 4:            # a few graphs in flight
                    handles.pop(0).wait(timeout=120)
            for h in handles:
                h.wait(timeout=120)
            end = time.monotonic()

            want = np.zeros_like(x_np)
            for _ in range(graphs):             # the kernels' float32 arithmetic, in numpy
                want += alpha * x_np
                want *= np.float32(0.5)
            ok = bool(np.array_equal(y, want))
            results.put((rank, ok, n_tasks, start, end, ""))
    except Exception:                           # reported by the parent, not lost in a child
        barrier.abort()
        results.put((rank, False, 0, 0.0, 0.0, traceback.format_exc()))


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--procs", type=int, default=4, help="worker processes (default 4)")
    p.add_argument("--graphs", type=int, default=200, help="graphs per process (default 200)")
    p.add_argument("--tasks", type=int, default=64, help="tasks per graph (default 64)")
    p.add_argument("--start", choices=multiprocessing.get_all_start_methods(), default="spawn",
                   help="multiprocessing start method (default spawn)")
    p.add_argument("--socket", default=None, help="hbgd's socket (default: $HBG_SOCKET, else /run/hbgd/hbgd.sock)")
    args = p.parse_args()
    if args.procs < 1 or args.graphs < 1 or args.tasks < 2:
        p.error("--procs and --graphs must be at least 1, --tasks at least 2")

    ctx = multiprocessing.get_context(args.start)
    barrier = ctx.Barrier(args.procs)
    results = ctx.Queue()
    procs = [ctx.Process(target=worker, args=(r, args.socket, args.graphs, args.tasks, barrier, results))
             for r in range(args.procs)]
    for proc in procs:
        proc.start()
    got = []
    for _ in procs:
        try:
            got.append(results.get(timeout=300))
        except Exception:                       # queue.Empty: a worker died without a word
            break
    for proc in procs:
        proc.join(timeout=60)

    ok = len(got) == args.procs and all(proc.exitcode == 0 for proc in procs)
    total = 0
    for rank, good, n_tasks, start, end, error in sorted(got):
        if error:
            print("worker %d failed:\n%s" % (rank, error), file=sys.stderr)
        elif not good:
            print("worker %d: results differ from numpy" % rank, file=sys.stderr)
        else:
            print("worker %d: %d tasks in %.3f s, %.0f tasks/s, results match numpy" %
                  (rank, n_tasks, end - start, n_tasks / max(end - start, 1e-9)))
        ok &= good
        total += n_tasks
    if got and ok:
        span = max(r[4] for r in got) - min(r[3] for r in got)
        print("%d processes on one hbgd: %d tasks in %.3f s, aggregate %.0f tasks/s (%s start)" %
              (args.procs, total, span, total / max(span, 1e-9), args.start))
    print("multiprocess: %s" % ("all results match numpy" if ok else "FAILED"))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
