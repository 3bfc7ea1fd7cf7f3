# SPDX-License-Identifier: MIT
"""Processes: a forked child never uses its parent's client (it connects
its own), several processes feed one hbgd, and 1,000 connect/close leave
no fd or memory behind."""
import multiprocessing
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import hbg
from conftest import SCALE


def chain(c, n, value):
    """x = value, then n times x += 1, by hbgd; returns x."""
    x = c.zeros(1024)
    g = c.graph()
    g.add("fill_f32", x, scalars=(value,))
    one = c.asarray(np.ones(1024, dtype=np.float32))
    for _ in range(n):
        g.add("add_f32", x, one, x)
    g.run(timeout=60)
    return x


def test_forked_child_connects_its_own(hbgd):
    c = hbg.connect(hbgd.socket)
    a = chain(c, 10, 0.0)
    pid = os.fork()
    if pid == 0:  # the child: report by exit code, never raise into pytest
        code = 1
        try:
            try:
                c.graph()
            except RuntimeError as e:
                if "forked child" in str(e):
                    code = 2
            if code == 2:
                with hbg.connect(hbgd.socket) as mine:
                    x = chain(mine, 100, 1.0)
                    code = 0 if (x == 101).all() and (a == 10).all() else 3
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.WEXITSTATUS(status) == 0, "child exit %d" % os.WEXITSTATUS(status)
    # The parent's session is untouched by the child's.
    x = chain(c, 50, 2.0)
    assert (x == 52).all()
    c.close()


def _child_exits_normally(socket, q):
    # A child that ends the Python way: its copy of the parent's client is
    # finalised and must leave the parent's session alone.
    with hbg.connect(socket) as mine:
        q.put(float(chain(mine, 20, 0.0)[0]))


def test_forked_child_exits_normally(hbgd):
    c = hbg.connect(hbgd.socket)
    a = chain(c, 5, 0.0)
    ctx = multiprocessing.get_context("fork")
    q = ctx.Queue()
    p = ctx.Process(target=_child_exits_normally, args=(hbgd.socket, q))
    p.start()
    assert q.get(timeout=60) == 20.0
    p.join(60)
    assert p.exitcode == 0
    assert (a == 5).all()
    assert (chain(c, 5, 1.0) == 6).all()  # still connected
    c.close()


def _worker(socket, n, value, q):
    with hbg.connect(socket) as c:
        q.put(float(chain(c, n, value)[-1]))


@pytest.mark.parametrize("procs", [2, 4])
def test_processes_on_one_hbgd(hbgd, procs):
    ctx = multiprocessing.get_context("spawn")
    q = ctx.Queue()
    n = max(200, int(3000 * SCALE))
    ps = [ctx.Process(target=_worker, args=(hbgd.socket, n, float(i), q)) for i in range(procs)]
    for p in ps:
        p.start()
    # The parent is a client too, at the same time.
    with hbg.connect(hbgd.socket) as c:
        mine = chain(c, n, 100.0)
    got = sorted(q.get(timeout=120) for _ in ps)
    for p in ps:
        p.join(60)
        assert p.exitcode == 0
    assert got == [float(i + n) for i in range(procs)]
    assert (mine == 100 + n).all()


def test_second_process_with_its_own_interpreter(hbgd):
    code = textwrap.dedent("""
        import sys, numpy as np, hbg
        with hbg.connect(sys.argv[1]) as c:
            x = c.asarray(np.arange(8, dtype=np.float32))
            g = c.graph()
            g.add("add_f32", x, x, x)
            g.run()
            print(list(map(int, x)))
    """)
    r = subprocess.run([sys.executable, "-c", code, hbgd.socket], capture_output=True, text=True, timeout=60,
                       env=dict(os.environ))
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == str([2 * i for i in range(8)])


def _fds():
    return len(os.listdir("/proc/self/fd"))


def _rss_kib():
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def test_no_leak_across_1000_connects(hbgd):
    def once():
        with hbg.connect(hbgd.socket, heap=1 << 20) as c:
            x = c.zeros(256)
            g = c.graph()
            g.add("fill_f32", x, scalars=(1.0,))
            g.add_host(lambda: None, reads=[x])
            g.run()
            del x

    for _ in range(50):  # warm up: allocator pools, numpy caches
        once()
    fds, rss = _fds(), _rss_kib()
    for _ in range(1000):
        once()
    assert _fds() == fds
    # Under ASan freed memory waits in its quarantine (up to 256 MB) before
    # it is reused, so RSS there grows with what connects free, leak or not
    # (36 MB in one run once the default window was 4096; the plain build
    # stayed within the bound): the plain build's run checks it.
    if "libasan" in os.environ.get("LD_PRELOAD", ""):
        return
    grown = _rss_kib() - rss
    assert grown < 4096, "RSS grew by %d KiB over 1000 connect/close" % grown
