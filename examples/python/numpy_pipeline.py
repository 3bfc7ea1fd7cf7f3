#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""A numpy pipeline run by hbgd, checked against numpy.

    HBG_SOCKET=/tmp/hbg.sock python3 numpy_pipeline.py [--size N] [--steps S]

1. Arrays in the session heap: client.asarray() copies numpy data there once;
   client.zeros()/empty() make new ones. hbgd's kernels work on them in place,
   and this process reads the results with no copy back.
2. One graph: C = A @ B (gemm_f32, split into blocks), a softmax of each row
   of C, a host function (Python, in this process) that takes each row's
   largest value, and a sum of all of C. No task names another: the order
   comes from the arrays each one reads and writes.
3. A recorded graph launched in a loop: an exponential moving average over a
   stream of batches, a host function feeding the next batch each time.
   hbgd checks the recorded tasks once; each launch costs a few records.
4. Every result is compared with numpy; the exit status is 1 if one differs.
"""
import argparse
import sys
import time

import numpy as np

import hbg


def softmax_rows(x):
    e = np.exp(x - x.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def check(name, got, want, rtol=1e-5, atol=1e-6):
    """Print one line per comparison; True when got matches want."""
    err = float(np.max(np.abs(np.asarray(got, np.float64) - np.asarray(want, np.float64))))
    ok = np.allclose(got, want, rtol=rtol, atol=atol)
    print("  %-34s max |hbg - numpy| = %.3g  %s" % (name, err, "ok" if ok else "WRONG"))
    return ok


def one_graph(client, rng, m, k, n):
    """gemm -> softmax -> host function -> sum, dependencies from the arrays."""
    a_np = rng.standard_normal((m, k), dtype=np.float32)
    b_np = rng.standard_normal((k, n), dtype=np.float32) / np.float32(np.sqrt(k))
    a = client.asarray(a_np)               # one copy into the heap
    b = client.asarray(b_np)
    c = client.zeros((m, n))               # float32 unless dtype= says otherwise
    row_max = np.zeros(m, np.float32)      # a plain numpy array: only the host function touches it
    total = client.zeros(1)

    def largest_per_row():                 # runs in this process once the softmax is done
        row_max[:] = c.max(axis=1)

    g = client.graph()
    g.add("gemm_f32", a, b, c, scalars=(m, n, k), blocks=4)   # C += A @ B, 4 blocks in parallel
    g.add("softmax_rows_f32", c, scalars=(m, n))               # after the gemm: it writes c
    g.add_host(largest_per_row, reads=(c,))                    # after the softmax
    g.add("reduce_sum_f32", c, total)                          # after the softmax, beside the host task
    t0 = time.perf_counter()
    g.run(timeout=60)
    dt = time.perf_counter() - t0
    print("graph of %d tasks: gemm %dx%dx%d, softmax, host function, sum: %.2f ms" % (len(g), m, k, n, dt * 1e3))

    want = softmax_rows(a_np.astype(np.float64) @ b_np.astype(np.float64))
    ok = check("softmax(A @ B)", c, want, rtol=1e-4, atol=1e-6)
    ok &= check("largest per row (host function)", row_max, want.max(axis=1), rtol=1e-4, atol=1e-6)
    ok &= check("sum of all rows (= rows)", total[0], float(m), rtol=1e-4, atol=0)
    return ok


def recorded_loop(client, rng, size, steps):
    """avg = 0.9 * avg + 0.1 * batch over a stream of batches, as one recorded
    graph launched once per batch."""
    stream = rng.standard_normal((steps, size), dtype=np.float32)
    batch = client.empty(size)
    avg = client.zeros(size)
    fed = 0

    def next_batch():                      # the graph's first task, in this process
        nonlocal fed
        batch[:] = stream[fed]
        fed += 1

    with client.record() as rec:
        rec.graph.add_host(next_batch, writes=(batch,))
        rec.graph.add("scale_f32", avg, scalars=(0.9,))               # avg *= 0.9
        rec.graph.add("axpy_f32", batch, avg, scalars=(0.1,))         # avg += 0.1 * batch
    # Launches queue up behind each other: launch i+1's host task writes
    # batch only after launch i's axpy read it (derived, as for added tasks).
    t0 = time.perf_counter()
    handles = [rec.launch() for _ in range(steps)]
    for h in handles:
        h.wait(timeout=60)                 # host functions run inside the waits
    dt = time.perf_counter() - t0
    print("recorded graph of %d tasks launched %d times: %.1f us per launch" % (len(rec.graph), steps,
                                                                                dt / steps * 1e6))

    want = np.zeros(size, np.float32)
    for x in stream:                       # the same float32 arithmetic as the kernels
        want *= np.float32(0.9)
        want += np.float32(0.1) * x
    ok = fed == steps
    print("  %-34s %d of %d  %s" % ("batches fed by the host function", fed, steps, "ok" if ok else "WRONG"))
    ok &= check("moving average", avg, want)
    return ok


def elementwise_chain(client, rng, size, chunks):
    """y = (a * x + y) * x + x on chunks of the arrays: each chunk's tasks in a
    chain, the chunks beside each other (views are arrays of the heap too)."""
    x_np = rng.standard_normal(size, dtype=np.float32)
    y_np = rng.standard_normal(size, dtype=np.float32)
    x, y = client.asarray(x_np), client.asarray(y_np)
    t = client.empty(size)
    step = size // chunks
    g = client.graph()
    for i in range(chunks):
        s = slice(i * step, size if i == chunks - 1 else (i + 1) * step)
        g.add("axpy_f32", x[s], y[s], scalars=(2.0,))    # y = 2x + y
        g.add("mul_f32", y[s], x[s], t[s])              # t = y * x     (after the axpy of this chunk)
        g.add("add_f32", t[s], x[s], y[s])              # y = t + x     (after the mul: reads t, writes y)
    g.run(timeout=60)
    print("graph of %d element-wise tasks on %d chunks of %d floats" % (len(g), chunks, size))
    want = (np.float32(2.0) * x_np + y_np) * x_np + x_np
    return check("(2x + y) * x + x", y, want)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--size", type=int, default=1 << 16, help="floats per vector (default 65536)")
    p.add_argument("--steps", type=int, default=100, help="launches of the recorded graph (default 100)")
    p.add_argument("--socket", default=None, help="hbgd's socket (default: $HBG_SOCKET, else /run/hbgd/hbgd.sock)")
    args = p.parse_args()
    if args.size < 16 or args.steps < 1:
        p.error("--size must be at least 16 and --steps at least 1")

    rng = np.random.default_rng(1)
    try:
        client = hbg.connect(args.socket)
    except OSError as e:     # no hbgd there, or it refused us: its reason is in e
        print("numpy_pipeline: %s" % e, file=sys.stderr)
        return 2
    with client:
        print("connected: hbgd has %d kernels; libhbgclient %s" % (len(client.kernels()), hbg.library_version()))
        ok = one_graph(client, rng, 96, 64, 80)
        ok &= elementwise_chain(client, rng, args.size, 8)
        ok &= recorded_loop(client, rng, args.size, args.steps)
    print("numpy_pipeline: %s" % ("all results match numpy" if ok else "RESULTS DIFFER from numpy"))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
