# SPDX-License-Identifier: MIT
"""The GIL and threads: released around waits and around adds that wait
for window room (host functions take it), host functions in parallel on
the client's worker threads, Ctrl-C during a wait, a client shared by
threads. Cases that would deadlock if the GIL were held run in a child
interpreter with a time limit, so that a regression fails, not hangs."""
import errno
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time

import numpy as np
import pytest

import hbg
from conftest import run_child


def spin_graph(c, seconds, tasks=1):
    g = c.graph()
    t = g.add("spin_ns", scalars=(int(seconds * 1e9 / tasks),))
    for _ in range(tasks - 1):
        t = g.add("spin_ns", scalars=(int(seconds * 1e9 / tasks),), after=[t])
    return g.submit()


def test_wait_releases_the_gil(client):
    counted = [0]
    stop = threading.Event()

    def count():
        while not stop.is_set():
            counted[0] += 1

    h = spin_graph(client, 0.3)
    t = threading.Thread(target=count)
    t.start()
    try:
        time.sleep(0.01)
        at_wait = counted[0]
        h.wait(timeout=30)
        during = counted[0] - at_wait
    finally:
        stop.set()
        t.join()
    assert during > 1000, "the other thread counted %d while hbgd ran the graph" % during


@pytest.mark.parametrize("threads", [0, 2])
def test_adds_beyond_the_window_with_host_functions(hbgd, threads):
    """8 windows of host tasks: the adds wait for room that only the host
    functions (which need the GIL) can make."""
    out = run_child("""
        import sys, hbg
        done = []
        with hbg.connect(sys.argv[1], window=256, host_threads=%d) as c:
            g = c.graph()
            for i in range(2048):
                g.add_host(lambda i=i: done.append(i))
            g.run(timeout=60)
        print(len(done), sorted(done) == list(range(2048)))
    """ % threads, hbgd.socket)
    assert out.split() == ["2048", "True"]


def test_host_functions_in_parallel(hbgd):
    active, peak = [0], [0]
    lock = threading.Lock()

    def work():
        with lock:
            active[0] += 1
            peak[0] = max(peak[0], active[0])
        time.sleep(0.05)  # releases the GIL, as real work in numpy would
        with lock:
            active[0] -= 1

    with hbg.connect(hbgd.socket, host_threads=4) as c:
        assert c.host_threads == 4
        g = c.graph()
        for _ in range(16):
            g.add_host(work)
        g.run(timeout=60)
    assert active[0] == 0 and peak[0] >= 2, "at most %d host functions ran at once" % peak[0]


def test_host_functions_on_workers_see_arrays(hbgd):
    with hbg.connect(hbgd.socket, host_threads=3) as c:
        xs = [c.zeros(1000) for _ in range(6)]
        g = c.graph()
        for i, x in enumerate(xs):
            g.add("fill_f32", x, scalars=(float(i),))
            g.add_host(lambda x=x: np.multiply(x, 10, out=x), writes=[x])
            g.add("scale_f32", x, scalars=(0.5,))
        g.run(timeout=60)
        for i, x in enumerate(xs):
            assert (x == i * 5).all()
        # A worker's host function may not call its client.
        errors = []

        def misuse():
            try:
                c.zeros(4)
            except RuntimeError as e:
                errors.append(str(e))

        g = c.graph()
        g.add_host(misuse)
        g.run(timeout=60)
        assert errors and "worker threads" in errors[0]


def test_ctrl_c_during_wait(client):
    # Python's handler, whatever the interpreter inherited: a shell
    # without job control starts a background job with SIGINT ignored,
    # and Python then installs none (the test would wait out the graph).
    # A handler installed from C reads back as None: the default then.
    inherited = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        h = spin_graph(client, 3.0, tasks=30)
        timer = threading.Timer(0.2, os.kill, (os.getpid(), signal.SIGINT))
        timer.start()
        start = time.monotonic()
        try:
            with pytest.raises(KeyboardInterrupt):
                h.wait()
        finally:
            timer.cancel()
            timer.join()  # no SIGINT after the handler is put back
    finally:
        signal.signal(signal.SIGINT, inherited if inherited is not None else signal.SIG_DFL)
    assert time.monotonic() - start < 2.5  # raised during the wait, not after the graph
    assert not h.done()
    h.cancel()
    with pytest.raises(hbg.GraphError):
        h.wait(timeout=30)


def test_ctrl_c_in_a_host_function(client):
    """Ctrl-C while a host function runs inside the wait (no worker
    threads): the wait raises KeyboardInterrupt, not a GraphError of the
    task it stopped, which failed with EINTR."""
    inherited = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        g = client.graph()
        g.add_host(lambda: time.sleep(3))
        h = g.submit()
        timer = threading.Timer(0.3, os.kill, (os.getpid(), signal.SIGINT))
        timer.start()
        start = time.monotonic()
        try:
            with pytest.raises(KeyboardInterrupt):
                h.wait(timeout=30)
        finally:
            timer.cancel()
            timer.join()
    finally:
        signal.signal(signal.SIGINT, inherited if inherited is not None else signal.SIG_DFL)
    assert time.monotonic() - start < 2.5
    with pytest.raises(hbg.GraphError) as e:
        h.wait(timeout=30)
    assert e.value.errno == errno.EINTR
    assert isinstance(e.value.__cause__, KeyboardInterrupt)


def test_sys_exit_in_a_host_function(client):
    """sys.exit() in a host function: SystemExit from the call it ran in
    (here Handle.done()), then from nothing else."""
    g = client.graph()
    g.add_host(lambda: sys.exit(3))
    h = g.submit()
    with pytest.raises(SystemExit) as e:
        while not h.done():
            time.sleep(0.001)
    assert e.value.code == 3
    with pytest.raises(hbg.GraphError):
        h.wait(timeout=30)


def test_interrupt_from_a_worker_waits_for_a_wait(hbgd):
    """A SystemExit a host function raised on a worker is raised by the
    client's next wait; an add meanwhile is not refused, and its host
    function runs."""
    with hbg.connect(hbgd.socket, host_threads=1) as c:
        exiting = threading.Event()

        def stop():
            exiting.set()
            sys.exit(3)

        g1 = c.graph()
        g1.add_host(stop)
        h1 = g1.submit()
        assert exiting.wait(30)
        time.sleep(0.2)  # its SystemExit noted (done() would raise it)
        ran = []
        g2 = c.graph()
        g2.add_host(lambda: ran.append(1))
        h2 = g2.submit()
        with pytest.raises(SystemExit):
            h2.wait(timeout=30)
        h2.wait(timeout=30)
        assert ran == [1]
        with pytest.raises(hbg.GraphError) as e:
            h1.wait(timeout=30)
        assert e.value.errno == errno.EINTR


def test_client_shared_by_threads(client):
    """One thread waits; another uses the client meanwhile (the wait lets
    it in between its slices); results of both are right."""
    h = spin_graph(client, 0.4, tasks=4)
    made = []

    def other():
        x = client.zeros(100)
        made.append(x)

    t = threading.Thread(target=other)
    t.start()
    h.wait(timeout=30)
    t.join(30)
    assert made and made[0].shape == (100,)


def test_threads_with_clients_of_their_own(hbgd):
    results = {}

    def run(k):
        with hbg.connect(hbgd.socket) as c:
            x = c.zeros(4096)
            g = c.graph()
            g.add("fill_f32", x, scalars=(float(k),))
            for _ in range(200):
                g.add("add_f32", x, x, x)
                g.add("scale_f32", x, scalars=(0.5,))
            g.run(timeout=60)
            results[k] = float(x[0]) if (x == x[0]).all() else None

    ts = [threading.Thread(target=run, args=(k,)) for k in range(4)]
    for t in ts:
        t.start()
    for t in ts:
        t.join(60)
    assert results == {k: float(k) for k in range(4)}
