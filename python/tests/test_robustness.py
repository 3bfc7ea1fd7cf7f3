# SPDX-License-Identifier: MIT
"""Odd but legal programs: objects dropped at awkward moments, code that
runs inside a call of the client (__del__, weakref callbacks, a nested
client's host function), the collector clearing a cycle through a host
function while a worker waits to run it, a client closed while host
functions hold its arrays. Each must neither crash, nor hang, nor keep
a session open. Cases that could crash or hang run in a child."""
import textwrap
import time

import numpy as np
import pytest

import hbg
from conftest import run_child


def test_graph_dropped_where_it_cannot_submit(hbgd):
    out = run_child("""
        import os, sys, hbg
        c = hbg.connect(sys.argv[1])
        a = c.zeros(4)
        g = c.graph(); g.add(None)
        c.close()           # an array is alive: the session stays
        del g               # cannot submit: closed
        c2 = hbg.connect(sys.argv[1])
        g = c2.graph(); g.add(None)
        pid = os.fork()
        if pid == 0:
            del g           # a forked child's copy: never submitted from here
            os._exit(0)
        _, st = os.waitpid(pid, 0)
        assert os.WIFEXITED(st) and os.WEXITSTATUS(st) == 0, st
        g.run()
        def inner():
            gi = c2.graph()
            try:
                gi.add(None)
            except RuntimeError:
                pass
            del gi          # inside the wait that runs it: nothing to submit
        g = c2.graph(); g.add_host(inner); g.run()
        print("ok")
    """, hbgd.socket)
    assert out.split()[-1] == "ok"


def test_collector_clears_a_cycle_while_a_worker_waits(hbgd):
    out = run_child("""
        import functools, gc, operator, sys, time, hbg
        gc.disable()
        def scope():
            c = None
            def fn():
                return c    # the cycle: client -> host call -> fn -> cell -> client
            c = hbg.connect(sys.argv[1], host_threads=1)
            g = c.graph()
            t = g.add("spin_ns", scalars=[100_000_000])
            g.add_host(fn, after=t)
            g.submit()      # not waited for
        # Hold the GIL in C until the worker waits for it, then collect:
        # a sum long enough for about a second, ten times the spin before
        # the host call, whatever this interpreter's speed (under ASan,
        # a sum takes ten times longer than plain; under TSan, no longer).
        t0 = time.perf_counter()
        sum(range(1_000_000))
        n = int(1_000_000 / max(time.perf_counter() - t0, 1e-6))
        for _ in range(3):
            scope()
            list(map(operator.call, [functools.partial(sum, range(n)), gc.collect]))
        print("ok")
    """, hbgd.socket)
    assert out.split()[-1] == "ok"


def test_code_run_inside_a_call_of_the_client(hbgd):
    out = run_child("""
        import sys, hbg
        c = hbg.connect(sys.argv[1])
        seen = []
        class D:
            def __del__(self):      # runs when the wait drops the host call
                seen.append(c.zeros(1).shape)
        g = c.graph(); g.add_host(lambda d=D(): None); g.run()
        # A host function of c2 inside a host function of c1 uses c1 (as
        # c1's host function may): it works, no hang; and c2's own wait
        # from inside it is refused.
        c1, c2 = hbg.connect(sys.argv[1]), hbg.connect(sys.argv[1])
        def inner():
            seen.append(c1.zeros(4).shape)
            try:
                c2.graph().submit()
            except (RuntimeError, ValueError) as e:
                seen.append(type(e).__name__)
        def outer():
            g2 = c2.graph(); g2.add_host(inner); g2.run()
        g1 = c1.graph(); g1.add_host(outer); g1.run(timeout=30)
        print(seen)
    """, hbgd.socket, timeout=60)
    assert out.strip() == "[(1,), (4,), 'ValueError']"


def test_wait_and_done_inside_a_host_function(client):
    g0 = client.graph()
    g0.add(None)
    h0 = g0.submit()
    h0.wait()
    ran = []

    def first():
        for call in (h0.wait, h0.done):
            try:
                call()
            except RuntimeError as e:
                ran.append("host function" in str(e))

    g = client.graph()
    t = g.add_host(first)
    g.add_host(lambda: ran.append("second"), after=t)
    g.run(timeout=30)  # the second host task was not lost to a sweep
    assert ran == [True, True, "second"]


# A child's check that its session ended, in hbgd's log, while it lives.
SESSION_ENDED = textwrap.dedent("""
    def session_ended(log_path, name, seconds=10):
        import re, time
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            log = open(log_path).read()
            m = re.search(r"session (\\d+) \\(pid (\\d+) uid \\d+, " + re.escape(name) + r"\\)", log)
            if m and "session %s (pid %s uid 0): closed" % (m.group(1), m.group(2)) in log:
                return True
            time.sleep(0.02)
        return False
""")


@pytest.mark.parametrize("kind", ["abandoned", "recorded", "raised"])
def test_close_ends_the_session_despite_host_functions(hbgd, kind):
    """Host functions (and their exceptions' tracebacks) that refer to an
    array of the client would keep the array, and the session, alive."""
    out = run_child(SESSION_ENDED + textwrap.dedent("""
        import gc, sys, hbg
        kind, name = sys.argv[2], sys.argv[3]
        def main():  # a local array: the host functions hold it in a closure
            c = hbg.connect(sys.argv[1], name=name)
            a = c.zeros(4)
            if kind == "abandoned":
                g = c.graph(); g.add_host(lambda: a.fill(1), writes=[a]); g.add(None); g.submit()
            elif kind == "recorded":
                with c.record() as rec:
                    rec.graph.add_host(lambda: a.fill(1), writes=[a])
                rec.launch().wait()
            else:
                def f():
                    a.sum(); raise ValueError("x")
                g = c.graph(); g.add_host(f)
                try:
                    g.run()
                except hbg.GraphError:
                    pass
            return c
        c = main()  # now only the client's host calls hold the array
        c.close()
        gc.collect()
        print("ended" if session_ended(sys.argv[4], name) else "still open", repr(c))
    """), hbgd.socket, kind, "cycle-" + kind, hbgd.log_path)
    assert out.startswith("ended"), out


def test_last_array_dies_on_a_worker_after_close(hbgd):
    """The last array of a closed client goes inside a host function on a
    worker thread (where a session cannot end): it ends just after, on the
    main thread."""
    out = run_child(SESSION_ENDED + textwrap.dedent("""
        import sys, threading, time, hbg
        c = hbg.connect(sys.argv[1], host_threads=1, name="worker-last")
        holder = [c.zeros(4)]
        go, running = threading.Event(), threading.Event()
        def fn():
            running.set(); go.wait(10); holder.clear()
        g = c.graph(); g.add_host(fn); h = g.submit()
        running.wait(10)
        c.close()           # the array is alive: the session stays
        go.set()
        print("ended" if session_ended(sys.argv[2], "worker-last") else "still open", repr(c))
    """), hbgd.socket, hbgd.log_path)
    assert out.startswith("ended"), out


def test_reads_from_a_generator(client):
    x = client.zeros(1000)
    g = client.graph()
    g.add("fill_f32", x, scalars=(2.0,))
    seen = []
    # The arrays exist only in the sequence add_host builds from it.
    g.add_host(lambda: seen.append(1), reads=list(client.asarray(np.ones(10)) for _ in range(3)))
    g.add_host(lambda: seen.append(float(x.sum())), reads=[x])
    g.run()
    assert seen == [1, 2000.0]


def test_numpy_integers_as_scalars_and_ids(client):
    g = client.graph()
    t = g.add("spin_ns", scalars=[np.uint64(5)])
    t = g.add("spin_ns", scalars=[np.int64(5)], after=np.int64(t))
    g.add(None, after=[np.uint32(t)])
    with pytest.raises(TypeError, match="must be a non-negative int"):
        g.add("spin_ns", scalars=[1.5])
    g.run()
    x = client.zeros(8)
    g = client.graph()
    g.add("scale_f32", x, scalars=[np.float32(2)])
    g.run()


def test_recording_dropped_inside_its_block(client):
    def gen():
        with client.record() as rec:
            rec.graph.add(None)
            yield
    it = gen()
    next(it)
    del it  # the with block never ends normally: GeneratorExit
    g = client.graph()
    g.add(None)  # added to a graph, not recorded
    g.run()


def test_close_from_a_nested_host_function(hbgd):
    """c1's host function waits on c2, whose host function closes c1: c1's
    wait is below on the stack, so the close is refused, not a crash."""
    out = run_child("""
        import sys, hbg
        c1, c2 = hbg.connect(sys.argv[1]), hbg.connect(sys.argv[1])
        seen = []
        def inner():
            for call in (c1.close, lambda: c1.graph().add(None)):
                try:
                    call()
                except RuntimeError as e:
                    seen.append("host function" in str(e))
        def outer():
            g2 = c2.graph(); g2.add_host(inner); g2.run()
        g1 = c1.graph(); g1.add_host(outer); g1.add(None); g1.run()
        print(seen, c1.closed)
    """, hbgd.socket, timeout=60)
    assert out.strip() == "[True, True] False"
