# SPDX-License-Identifier: MIT
"""The Python section of hbg-bench (hbg-bench --python, docs/PERFORMANCE.md).

The comparison's shapes (bench/dag.c, ported here task for task) built and
run from Python through the hbg package, and replayed (recorded once,
launched), beside Dask's threaded scheduler (dask.threaded.get on the same
graph as a dict) and concurrent.futures (a ThreadPoolExecutor, each task
waiting for the futures of the tasks before it), in two bodies:

    empty   hbg: the noop kernel (the tasks of the C producers); the peers:
            a Python function that does nothing
    add     every task writes an array of its own, out = a + b on 16384
            floats (64 KiB): hbg's add_f32 on arrays of the session heap,
            the peers' numpy.add(a, b, out=out); a and b are shared inputs

py-floor is the same bodies called one after the other in a plain loop
(no scheduler, one thread): what the work itself costs from Python.

The shape's edges are the only ones (hbg: after=, derived dependencies add
none: every output is a task's own). Every row runs in processes forked
for it (1, 2 or 4 for hbg's build-and-run rows: each its own client on the
one hbgd, all starting each repetition together; one for the others), so
that its peak RSS is its own.

Run by hbg-bench, which starts hbgd and turns the lines this prints on
stdout into results.csv and metrics.csv rows:

    row SHAPE SYSTEM CLIENTS TASKS NS_PER_TASK TASKS_PER_S P50_US P99_US RSS_KIB
    metric NAME SHAPE SYSTEM CLIENTS VALUE UNIT
    note TEXT
    skip TEXT        (nothing measured: the reason; exit 0)

P50_US and P99_US are "-" for one client (they are the latencies of the
clients' graphs otherwise). Figures are medians over --repeat repetitions
after --warmup ones (replays: 4 x --repeat, at most 64). Any failure prints "error TEXT" and exits 1.
"""
import argparse
import multiprocessing
import os
import resource
import statistics
import sys
import time
import traceback

FLOATS = 16384                  # 64 KiB of float32 per array
NOW = time.monotonic_ns         # CLOCK_MONOTONIC: comparable across processes


def out(*words):
    print(*words, flush=True)


# ---------------------------------------------------------------- shapes
# bench/dag.c, task for task: fanins[i] are the tasks task i waits for,
# every index below i.

MASK = (1 << 64) - 1


def splitmix64(state):
    state[0] = (state[0] + 0x9E3779B97F4A7C15) & MASK
    z = state[0]
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK
    return z ^ (z >> 31)


def make_chain(size, seed):
    return [()] + [(i - 1,) for i in range(1, size)]


def make_independent(size, seed):
    return [()] * size


def make_tree(size, seed):
    levels = 1
    while (2 << levels) - 1 <= size and levels < 24:
        levels += 1
    first = {}
    at = 0
    for lv in range(levels - 1, -1, -1):
        first[lv] = at
        at += 1 << lv
    fan = []
    for lv in range(levels - 1, -1, -1):
        for j in range(1 << lv):
            if lv + 1 < levels:
                fan.append((first[lv + 1] + 2 * j, first[lv + 1] + 2 * j + 1))
            else:
                fan.append(())
    return fan


def make_wavefront(size, seed):
    side = max(2, int(size ** 0.5))
    fan = []
    for i in range(side):
        for j in range(side):
            f = []
            if i:
                f.append((i - 1) * side + j)
            if j:
                f.append(i * side + j - 1)
            fan.append(tuple(f))
    return fan


def make_layered(size, seed):
    width = 1000
    layers = max(2, (size + width - 1) // width)
    s = [seed ^ 0x1A7E7ED]
    fan = []
    for lv in range(layers):
        for _ in range(width):
            if lv == 0:
                fan.append(())
                continue
            # dag.c's operands in the order gcc evaluates them.
            k = 1 + splitmix64(s) % 6
            k += 1 if splitmix64(s) % 10 < 3 else 0
            lo, hi = (lv - 2 if lv >= 2 else 0) * width, lv * width
            picked = []
            while len(picked) < k:
                f = lo + splitmix64(s) % (hi - lo)
                if f not in picked:
                    picked.append(f)
            fan.append(tuple(sorted(picked)))
    return fan


def make_attention(size, seed):
    blocks = 64
    batches = max(1, size // (2 * blocks))
    fan = []
    for _ in range(batches):
        scores = len(fan)
        fan.extend([()] * blocks)
        for j in range(blocks):
            fan.append((scores + j, len(fan) - 1) if j else (scores + j,))
    return fan


# gemm has a body of its own (a gemm_f32 tile per task): not here.
SHAPES = {
    "chain": make_chain,
    "independent": make_independent,
    "tree": make_tree,
    "wavefront": make_wavefront,
    "layered": make_layered,
    "attention": make_attention,
}


# ---------------------------------------------------------------- workers
# A worker is a forked process that sets its row up, says ("ready",), then
# answers each command: "run" / "replay" with (start_ns, added_ns, end_ns,
# tasks), "quit" with its peak RSS in KiB. Any exception: ("error", text).

class HbgWorker:
    """One client of hbgd building (and replaying) the row's graph."""

    def __init__(self, socket, fan, body):
        import numpy
        import hbg
        self.fan = fan
        self.body = body
        n = len(fan)
        heap = None
        if body == "add":
            heap = ((n + 2) * FLOATS * 4 + (1 << 20) + (1 << 20) - 1) & ~((1 << 20) - 1)
        self.client = hbg.connect(socket, heap=heap)
        kernels = {k.name: k for k in self.client.kernels()}
        self.kernel = kernels["add_f32" if body == "add" else "noop"]
        if body == "add":
            self.a = self.client.asarray(numpy.full(FLOATS, 0.5, dtype=numpy.float32))
            self.b = self.client.asarray(numpy.full(FLOATS, 0.25, dtype=numpy.float32))
            self.outs = [self.client.empty(FLOATS) for _ in range(n)]
        self.recording = None

    def build(self, graph):
        """The timed part of a run: one graph.add per task."""
        add = graph.add
        k = self.kernel
        ids = [0] * len(self.fan)
        if self.body == "add":
            a, b, outs = self.a, self.b, self.outs
            for i, f in enumerate(self.fan):
                if f:
                    ids[i] = add(k, a, b, outs[i], after=[ids[j] for j in f])
                else:
                    ids[i] = add(k, a, b, outs[i])
        else:
            for i, f in enumerate(self.fan):
                if f:
                    ids[i] = add(k, after=[ids[j] for j in f])
                else:
                    ids[i] = add(k)

    def run(self):
        start = NOW()
        g = self.client.graph()
        self.build(g)
        added = NOW()
        g.submit().wait()
        return start, added, NOW(), len(self.fan)

    def replay(self):
        if self.recording is None:
            with self.client.record() as rec:
                self.build(rec.graph)
            self.recording = rec
        start = NOW()
        self.recording.launch().wait()
        end = NOW()
        return start, start, end, len(self.fan)


def _noop(*deps):
    return None


def _make_add(numpy):
    def add(a, b, c, *deps):
        numpy.add(a, b, out=c)
    return add


class PeerWorker:
    """Dask's threaded scheduler or a ThreadPoolExecutor on the same graph,
    or the floor: the bodies called in a plain loop, one thread."""

    def __init__(self, system, fan, body, threads):
        import numpy
        self.system, self.fan, self.body, self.threads = system, fan, body, threads
        n = len(fan)
        if body == "add":
            self.a = numpy.full(FLOATS, 0.5, dtype=numpy.float32)
            self.b = numpy.full(FLOATS, 0.25, dtype=numpy.float32)
            self.outs = [numpy.empty(FLOATS, dtype=numpy.float32) for _ in range(n)]
            self.fn = _make_add(numpy)
        if system == "py-floor":
            pass
        elif system == "dask-threaded":
            import dask.threaded
            self.get = dask.threaded.get
            self.keys = ["t%d" % i for i in range(n)]
        else:
            import concurrent.futures
            self.pool = concurrent.futures.ThreadPoolExecutor(threads)

    def run_dask(self):
        keys, fan = self.keys, self.fan
        start = NOW()
        if self.body == "add":
            fn, a, b, outs = self.fn, self.a, self.b, self.outs
            dsk = {keys[i]: (fn, a, b, outs[i], *[keys[j] for j in f]) for i, f in enumerate(fan)}
        else:
            dsk = {keys[i]: (_noop, *[keys[j] for j in f]) for i, f in enumerate(fan)}
        added = NOW()
        self.get(dsk, keys, num_workers=self.threads)
        return start, added, NOW(), len(fan)

    def run_futures(self):
        fan, submit = self.fan, self.pool.submit
        futs = [None] * len(fan)

        def empty(deps):
            for d in deps:
                d.result()

        if self.body == "add":
            fn, a, b, outs = self.fn, self.a, self.b, self.outs

            def task(deps, c):
                for d in deps:
                    d.result()
                fn(a, b, c)
        start = NOW()
        if self.body == "add":
            for i, f in enumerate(fan):
                futs[i] = submit(task, [futs[j] for j in f], outs[i])
        else:
            for i, f in enumerate(fan):
                futs[i] = submit(empty, [futs[j] for j in f])
        added = NOW()
        for fu in futs:
            fu.result()
        return start, added, NOW(), len(fan)

    def run_floor(self):
        # The bodies one after the other in this thread: no scheduler.
        start = NOW()
        if self.body == "add":
            fn, a, b = self.fn, self.a, self.b
            for c in self.outs:
                fn(a, b, c)
        else:
            for f in self.fan:
                _noop(*f)
        end = NOW()
        return start, start, end, len(self.fan)

    def run(self):
        if self.system == "py-floor":
            return self.run_floor()
        return self.run_dask() if self.system == "dask-threaded" else self.run_futures()


def worker_main(conn, spec):
    try:
        system, socket, shape, size, seed, body, threads = spec
        fan = SHAPES[shape](size, seed)
        if system.startswith("hbg"):
            w = HbgWorker(socket, fan, body)
        else:
            w = PeerWorker(system, fan, body, threads)
        conn.send(("ready",))
        while True:
            cmd = conn.recv()
            if cmd == "quit":
                break
            conn.send(w.replay() if cmd == "replay" else w.run())
        conn.send(("rss", resource.getrusage(resource.RUSAGE_SELF).ru_maxrss))
    except BaseException:
        conn.send(("error", traceback.format_exc().strip().splitlines()[-1]))
    finally:
        conn.close()


class RowError(Exception):
    pass


def reply(conn, timeout):
    if not conn.poll(timeout):
        raise RowError("a worker said nothing for %d s" % timeout)
    r = conn.recv()
    if r[0] == "error":
        raise RowError(r[1])
    return r


def run_row(ctx, args, system, shape, size, body, clients, command):
    """clients workers, warmup + repeat repetitions started together: per
    measured repetition the wall time (first start to last end), and per
    client the build and submit-to-done times; the workers' peak RSS."""
    procs, conns = [], []
    try:
        for i in range(clients):
            parent, child = ctx.Pipe()
            spec = (system, args.socket, shape, size, args.seed + i, body, args.threads)
            p = ctx.Process(target=worker_main, args=(child, spec), daemon=True)
            p.start()
            child.close()
            procs.append(p)
            conns.append(parent)
        for c in conns:
            reply(c, 600)
        walls, builds, dones, graphs = [], [], [], []
        tasks = 0
        # A replay takes a few ms: four times the repetitions (at most 64,
        # hbg-bench's for the C replay beside it), for a steadier median.
        repeat = min(64, 4 * args.repeat) if command == "replay" else args.repeat
        for r in range(args.warmup + repeat):
            for c in conns:
                c.send(command)
            reps = [reply(c, 600) for c in conns]
            if r < args.warmup:
                continue
            walls.append(max(e for _, _, e, _ in reps) - min(s for s, _, _, _ in reps))
            tasks = sum(t for _, _, _, t in reps)
            for s, a, e, t in reps:
                builds.append((a - s) / t)
                dones.append((e - a) / t)
                graphs.append(e - s)
        rss = 0
        for c in conns:
            c.send("quit")
            rss += reply(c, 60)[1]
        for p in procs:
            p.join(60)
        return walls, tasks, builds, dones, graphs, rss
    finally:
        for p in procs:
            if p.is_alive():
                p.kill()
                p.join()


def quantile(v, q):
    s = sorted(v)
    return s[min(len(s) - 1, int(q * (len(s) - 1) + 0.5))]


# ---------------------------------------------------------------- the rows

def label(shape, body):
    return "py-%s" % shape if body == "empty" else "py-%s-64KiB" % shape


def measure(ctx, args, system, shape, size, body, clients, command="run"):
    """One row: printed, and its median ns per task returned."""
    walls, tasks, builds, dones, graphs, rss = run_row(ctx, args, system, shape, size, body, clients, command)
    lab = label(shape, body)
    med = statistics.median(walls)
    ns = med / tasks
    p50 = p99 = "-"
    if clients > 1:
        p50 = "%.3f" % (quantile(graphs, 0.50) / 1e3)
        p99 = "%.3f" % (quantile(graphs, 0.99) / 1e3)
    out("row", lab, system, clients, tasks, "%.3f" % ns, "%.1f" % (tasks / (med / 1e9)), p50, p99, rss)
    out("metric", "ns_per_task_min", lab, system, clients, "%.3f" % (min(walls) / tasks), "ns")
    out("metric", "repetitions", lab, system, clients, len(walls), "count")
    if command == "run" and system != "py-floor":
        # The build (graph.add, dict, submit calls) and the rest, per task.
        name = "add_ns_per_task" if system.startswith("hbg") else "build_ns_per_task"
        out("metric", name, lab, system, clients, "%.3f" % statistics.median(builds), "ns")
        out("metric", "submit_to_done_ns_per_task", lab, system, clients, "%.3f" % statistics.median(dones), "ns")
    return ns, tasks, statistics.median(builds)


def goal(name, lab, system, clients, met, value, unit, text):
    out("metric", name, lab, system, clients, "%.3f" % value, unit)
    out("metric", name + "_met", lab, system, clients, 1 if met else 0, "bool")
    out("note", "%-22s %-13s %s: %s" % (lab, system, text, "met" if met else "MISSED"))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--socket", required=True)
    ap.add_argument("--shapes", default=",".join(SHAPES))
    ap.add_argument("--size", type=int, default=10000, help="tasks of the empty-task graphs")
    ap.add_argument("--kernel-size", type=int, default=1000, help="tasks of the 64 KiB graphs")
    ap.add_argument("--threads", type=int, default=4, help="the peers' worker threads")
    ap.add_argument("--clients", default="1,2,4", help="processes of hbg's build-and-run rows")
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--warmup", type=int, default=1)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--no-kernels", action="store_true", help="empty tasks only")
    args = ap.parse_args()

    try:
        import numpy  # noqa: F401
        import hbg  # noqa: F401
    except ImportError as e:
        out("skip", "the hbg package or numpy cannot be imported (%s)" % e)
        return 0
    import importlib.util
    peers = ["futures", "py-floor"]
    if importlib.util.find_spec("dask") is not None:
        peers.insert(0, "dask-threaded")
    else:
        out("note", "dask is not installed (Debian: python3-dask): no dask-threaded rows")
    clients = [int(x) for x in args.clients.split(",") if x]
    shapes = [s for s in args.shapes.split(",") if s]
    for s in shapes:
        if s not in SHAPES:
            out("note", "shape %s: not in the Python section (a body of its own, or unknown)" % s)
    shapes = [s for s in shapes if s in SHAPES]
    bodies = ["empty"] if args.no_kernels else ["empty", "add"]
    # A process started fresh per row: fork is cheap, and this process
    # holds no client (nothing of hbg's is shared with the workers).
    ctx = multiprocessing.get_context("fork")
    try:
        for body in bodies:
            size = args.size if body == "empty" else args.kernel_size
            for shape in shapes:
                lab = label(shape, body)
                per = {}
                for n in clients:
                    per[n] = measure(ctx, args, "hbg-py", shape, size, body, n)
                replay, _, _ = measure(ctx, args, "hbg-py-replay", shape, size, body, 1, "replay")
                peer_ns = {p: measure(ctx, args, p, shape, size, body, 1)[0] for p in peers}
                if 1 not in per:
                    continue
                one, tasks, add = per[1]
                goal("py_add_ns_per_task", lab, "hbg-py", 1, add <= 1000.0, add, "ns",
                     "graph.add %.0f ns per task (goal <= 1000)" % add)
                if "dask-threaded" in peer_ns:
                    ratio = peer_ns["dask-threaded"] / one
                    goal("py_dask_over_hbg", lab, "hbg-py", 1, ratio >= 20.0, ratio, "ratio",
                         "Dask threaded %.0f ns / hbg %.0f ns per task = %.1fx (goal >= 20x)"
                         % (peer_ns["dask-threaded"], one, ratio))
                out("metric", "futures_over_hbg", lab, "hbg-py", 1, "%.3f" % (peer_ns["futures"] / one), "ratio")
                out("metric", "py_replay_ns_per_task", lab, "hbg-py-replay", 1, "%.3f" % replay, "ns")
                for n in clients:
                    if n == 1:
                        continue
                    # Aggregate tasks/s of n processes over one process's.
                    scale = one / per[n][0]
                    goal("py_scaling", lab, "hbg-py", n, scale >= 1.0, scale, "ratio",
                         "%d processes: aggregate %.2fx one process's tasks/s (goal >= 1)" % (n, scale))
    except RowError as e:
        out("error", str(e))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
