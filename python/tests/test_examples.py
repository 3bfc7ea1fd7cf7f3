# SPDX-License-Identifier: MIT
"""The examples of examples/python/, run as a user runs them: a separate
Python process with HBG_SOCKET naming the fixture's hbgd and this test's
PYTHONPATH (so they import the package under test)."""
import os
import re
import subprocess
import sys
import time

import pytest

import hbg
from conftest import HERE, SCALE

EXAMPLES = os.path.abspath(os.path.join(HERE, "..", "..", "examples", "python"))
PACKAGE_DIR = os.path.dirname(os.path.dirname(os.path.abspath(hbg.__file__)))


def run_example(name, socket, *args, timeout=300):
    env = dict(os.environ)
    env["HBG_SOCKET"] = socket
    # This test's PYTHONPATH, led by where it found hbg: the examples
    # import the very package under test.
    env["PYTHONPATH"] = os.pathsep.join(p for p in (PACKAGE_DIR, os.environ.get("PYTHONPATH")) if p)
    return subprocess.run([sys.executable, os.path.join(EXAMPLES, name), *args], env=env,
                          stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=timeout)


def test_numpy_pipeline(hbgd):
    steps = max(10, int(100 / SCALE))
    r = run_example("numpy_pipeline.py", hbgd.socket, "--size", "8192", "--steps", str(steps))
    assert r.returncode == 0, r.stdout + r.stderr
    out = r.stdout
    # Every comparison printed, each one matching numpy.
    checks = re.findall(r"^  (.+?)\s{2,}.*\s(ok|WRONG)$", out, re.M)
    assert [name for name, _ in checks] == [
        "softmax(A @ B)", "largest per row (host function)", "sum of all rows (= rows)",
        "(2x + y) * x + x", "batches fed by the host function", "moving average",
    ], out
    assert all(verdict == "ok" for _, verdict in checks), out
    assert "graph of 4 tasks" in out
    assert "graph of 24 element-wise tasks on 8 chunks of 8192 floats" in out
    assert "recorded graph of 3 tasks launched %d times" % steps in out
    assert "batches fed by the host function   %d of %d  ok" % (steps, steps) in out
    assert out.rstrip().endswith("numpy_pipeline: all results match numpy"), out


@pytest.mark.parametrize("start", ["spawn", "fork"])
def test_multiprocess(hbgd, start):
    procs, graphs, tasks = 3, max(5, int(40 / SCALE)), 16
    log_start = len(hbgd.log())
    r = run_example("multiprocess.py", hbgd.socket, "--procs", str(procs), "--graphs", str(graphs),
                    "--tasks", str(tasks), "--start", start)
    assert r.returncode == 0, r.stdout + r.stderr
    out = r.stdout
    per_worker = re.findall(r"^worker (\d+): (\d+) tasks in .* results match numpy$", out, re.M)
    assert sorted(int(rank) for rank, _ in per_worker) == list(range(procs)), out
    assert all(int(n) == graphs * tasks for _, n in per_worker), out
    total = re.search(r"^(\d+) processes on one hbgd: (\d+) tasks in [0-9.]+ s, aggregate \d+ tasks/s \((\w+) start\)$",
                      out, re.M)
    assert total, out
    assert total.groups() == (str(procs), str(procs * graphs * tasks), start), out
    assert out.rstrip().endswith("multiprocess: all results match numpy"), out
    # Each worker had a session of its own, from a process of its own
    # (hbgd logs a session once its reply is sent: give the line time).
    pattern = re.compile(r"\(pid (\d+) uid \d+, multiprocess-(\d+)\)")
    deadline = time.monotonic() + 10
    while True:
        sessions = pattern.findall(hbgd.log()[log_start:])
        if len(sessions) >= procs or time.monotonic() > deadline:
            break
        time.sleep(0.01)
    assert sorted(int(rank) for _, rank in sessions) == list(range(procs)), hbgd.log()[log_start:]
    assert len({pid for pid, _ in sessions}) == procs


@pytest.mark.parametrize("name", ["numpy_pipeline.py", "multiprocess.py"])
def test_example_without_hbgd(hbgd, name):
    """No hbgd at the socket: a non-zero exit and hbg.connect's reason."""
    missing = os.path.join(hbgd.dir, "no-such.sock")
    args = ("--procs", "2") if name == "multiprocess.py" else ()
    r = run_example(name, missing, *args, timeout=120)
    assert r.returncode != 0, r.stdout + r.stderr
    assert "cannot connect to hbgd at %s" % missing in r.stderr, r.stderr
