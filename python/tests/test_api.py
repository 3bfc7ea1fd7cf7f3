# SPDX-License-Identifier: MIT
"""Every call of the API, and every error: bad arguments are refused
before anything reaches hbgd (TypeError/ValueError naming the argument),
refused connections carry hbgd's reason, failed graphs raise GraphError."""
import errno
import os
import pwd
import subprocess
import sys
import time

import numpy as np
import pytest

import hbg
from conftest import Hbgd


# ---------------------------------------------------------------- connect


def test_connect_context_manager(hbgd):
    with hbg.connect(hbgd.socket, name="pytest-session") as c:
        assert isinstance(c, hbg.Client) and not c.closed
        assert "connected" in repr(c)
        assert c.host_threads == 0
    assert c.closed
    c.close()  # twice: nothing
    with pytest.raises(ValueError, match="closed"):
        c.graph()
    with pytest.raises(ValueError, match="closed"):
        c.empty(4)


def test_connect_from_environment(hbgd, monkeypatch):
    monkeypatch.setenv("HBG_SOCKET", hbgd.socket)
    with hbg.connect() as c:
        assert len(c.kernels()) > 10


def test_connect_options_checked_before_sending(hbgd):
    s = hbgd.socket
    time.sleep(0.2)  # hbgd's log writer caught up with earlier sessions
    sessions = hbgd.log().count(" D=")
    with pytest.raises(TypeError, match="heap"):
        hbg.connect(s, heap="big")
    with pytest.raises(ValueError, match="heap"):
        hbg.connect(s, heap=0)
    with pytest.raises(ValueError, match="window must be a power of two"):
        hbg.connect(s, window=1000)
    with pytest.raises(ValueError, match="stall_timeout"):
        hbg.connect(s, stall_timeout=-1)
    with pytest.raises(TypeError, match="stall_timeout"):
        hbg.connect(s, stall_timeout="1s")
    with pytest.raises(ValueError, match="host_threads"):
        hbg.connect(s, host_threads=hbg.MAX_HOST_THREADS + 1)
    with pytest.raises(TypeError, match="host_threads"):
        hbg.connect(s, host_threads=1.5)
    with pytest.raises(TypeError):
        hbg.connect(s, 1 << 20)  # options are keywords only
    # None of them reached hbgd: no session was opened.
    time.sleep(0.2)
    assert hbgd.log().count(" D=") == sessions


def test_connect_options_used(hbgd):
    with hbg.connect(hbgd.socket, heap=1 << 20, window=256, stall_timeout=2.5, host_threads=2) as c:
        assert c.host_threads == 2
        with pytest.raises(MemoryError, match="hbg_tensor_alloc"):
            c.empty(2 << 20, dtype=np.uint8)  # more than the 1 MiB heap
        x = c.zeros(1000)
        g = c.graph()
        for _ in range(1000):  # four windows of 256
            g.add("scale_f32", x, scalars=(1.0,))
        g.run()


def test_numpy_integers_taken_as_ints(hbgd):
    """Sizes and counts given as numpy integers, as from numpy arithmetic."""
    with hbg.connect(hbgd.socket, heap=np.int64(1 << 20), window=np.uint32(256), host_threads=np.int8(1)) as c:
        assert c.host_threads == 1
        x = c.zeros(np.int64(64))
        g = c.graph()
        g.add("scale_f32", x, scalars=(2.0,), blocks=np.int64(2))
        g.run()
        with pytest.raises(ValueError, match="blocks must be an int from 1 to 4096"):
            g.add("scale_f32", x, scalars=(2.0,), blocks=True)


def test_bad_shape_and_dtype_name_the_argument(client):
    for bad, name in ((lambda: client.empty("abc"), "Client.empty: shape: "),
                      (lambda: client.zeros(3.5), "Client.zeros: shape: "),
                      (lambda: client.empty(3, dtype="nonsense"), "Client.empty: dtype: "),
                      (lambda: client.asarray([1.0], dtype="nonsense"), "Client.asarray: dtype: ")):
        with pytest.raises((TypeError, ValueError), match=name):
            bad()


def test_connect_refused_no_socket(tmp_path):
    with pytest.raises(FileNotFoundError) as e:
        hbg.connect(str(tmp_path / "none.sock"))
    assert "none.sock" in str(e.value) or "hbg.connect" in str(e.value)


def test_connect_refused_not_listening(tmp_path):
    import socket as so
    path = str(tmp_path / "dead.sock")
    s = so.socket(so.AF_UNIX, so.SOCK_SEQPACKET)
    s.bind(path)  # bound, never listening
    try:
        with pytest.raises(ConnectionRefusedError) as e:
            hbg.connect(path)
        assert e.value.errno == errno.ECONNREFUSED
    finally:
        s.close()


def test_connect_refused_by_hbgd_limits(hbgd):
    # hbgd's refusal is ConnectionRefusedError with its errno and reason:
    # a heap above its max_heap_size.
    with pytest.raises(ConnectionRefusedError) as e:
        hbg.connect(hbgd.socket, heap=1 << 50)
    assert e.value.errno == errno.E2BIG
    assert "heap" in str(e.value)


def test_connect_refused_too_many_sessions():
    d = Hbgd(conf="\n[limits]\nmax_sessions = 1\n")
    try:
        with hbg.connect(d.socket):
            with pytest.raises(ConnectionRefusedError) as e:
                hbg.connect(d.socket)
            assert e.value.errno == errno.EUSERS
            assert "max_sessions" in str(e.value)
    finally:
        d.stop()


def test_connect_socket_not_a_path():
    with pytest.raises(TypeError) as e:
        hbg.connect(123)
    assert "socket" in str(e.value)


NOBODY = pwd.getpwnam("nobody").pw_uid if os.getuid() == 0 else None


@pytest.mark.skipif(NOBODY is None, reason="switching uid needs root (CI runs as root)")
def test_connect_permission_error_with_reason():
    """hbgd allows only the uids of its config: another uid gets
    PermissionError carrying hbgd's reason."""
    d = Hbgd(conf="\n[access]\nallowed_users = root\n")
    try:
        os.chmod(d.socket, 0o777)
        code = ("import hbg, sys\n"
                "try:\n    hbg.connect(sys.argv[1])\nexcept PermissionError as e:\n"
                "    print('PermissionError', e.errno, e)\n    sys.exit(0)\n"
                "print('connected'); sys.exit(1)\n")
        env = dict(os.environ)
        r = subprocess.run(["setpriv", "--reuid=%d" % NOBODY, "--regid=%d" % NOBODY, "--clear-groups",
                            sys.executable, "-c", code, d.socket], capture_output=True, text=True,
                           env=env, timeout=60)
        assert r.returncode == 0, r.stdout + r.stderr
        assert "PermissionError" in r.stdout and "uid" in r.stdout, r.stdout
    finally:
        d.stop()


# ---------------------------------------------------------------- arrays


def test_empty_zeros_asarray(client):
    x = client.empty((3, 4), dtype=np.float64)
    assert x.shape == (3, 4) and x.dtype == np.float64 and x.flags.c_contiguous and x.flags.writeable
    assert x.ctypes.data % 64 == 0
    z = client.zeros(10)
    assert z.dtype == np.float32 and not z.any()
    src = np.arange(12, dtype=np.int32).reshape(3, 4)
    a = client.asarray(src)
    assert a is not src and np.array_equal(a, src) and a.dtype == np.int32
    assert client.asarray(a) is a  # already in the heap: no copy
    f = client.asarray(a, dtype=np.float32)
    assert f is not a and f.dtype == np.float32 and np.array_equal(f, src)
    nc = client.asarray(a[:, ::2])  # not contiguous: a copy
    assert nc.flags.c_contiguous and np.array_equal(nc, src[:, ::2])
    assert client.asarray([1.5, 2.5]).dtype == np.float64
    e = client.empty(0)
    assert e.size == 0


def test_array_errors(client):
    with pytest.raises(TypeError, match="Python objects"):
        client.empty(3, dtype=object)
    with pytest.raises(TypeError, match="Python objects"):
        client.asarray(np.array([object()]))
    with pytest.raises(ValueError, match="negative"):
        client.empty((2, -1))
    with pytest.raises(ValueError, match="too large"):
        client.empty((1 << 40, 1 << 40))
    with pytest.raises(TypeError):
        client.zeros("ten")


# ---------------------------------------------------------------- graph.add errors


def test_add_argument_errors(client):
    a, b, out = client.zeros(8), client.zeros(8), client.zeros(8)
    g = client.graph()
    with pytest.raises(TypeError, match="needs a kernel"):
        g.add()
    with pytest.raises(ValueError, match="unknown kernel 'nope'"):
        g.add("nope", a)
    with pytest.raises(ValueError, match="unknown kernel id"):
        g.add(999, a)
    with pytest.raises(TypeError, match="kernel must be"):
        g.add(1.5)
    with pytest.raises(TypeError, match="add_f32 takes 3 arrays, 2 given"):
        g.add("add_f32", a, b)
    with pytest.raises(TypeError, match=r"argument 2 \(b\) of add_f32 must be a numpy array"):
        g.add("add_f32", a, [1, 2], out)
    with pytest.raises(ValueError, match=r"argument 1 \(a\) of add_f32 is not in this client's session heap"):
        g.add("add_f32", np.zeros(8, np.float32), b, out)
    with pytest.raises(TypeError, match=r"argument 3 \(out\) of add_f32 must be float32"):
        g.add("add_f32", a, b, client.zeros(8, dtype=np.float64))
    with pytest.raises(ValueError, match="C-contiguous"):
        g.add("copy_f32", client.zeros(16)[::2], out)
    ro = client.zeros(8)
    ro.flags.writeable = False
    with pytest.raises(ValueError, match="read-only"):
        g.add("copy_f32", a, ro)
    g.add("copy_f32", ro, a)  # read-only input: fine
    with pytest.raises(ValueError, match="is empty"):
        g.add("copy_f32", a[:0], out[:0])
    with pytest.raises(ValueError, match="takes 1 scalars, 0 given"):
        g.add("scale_f32", a)
    with pytest.raises(TypeError, match=r"scalar 1 \(alpha\) of scale_f32 must be a number"):
        g.add("scale_f32", a, scalars=("x",))
    with pytest.raises(TypeError, match=r"scalar 1 \(ns\) of spin_ns must be a non-negative int"):
        g.add("spin_ns", scalars=(-1,))
    with pytest.raises(TypeError, match=r"after\[0\] must be a task id"):
        g.add(None, after=["x"])
    with pytest.raises(ValueError, match="at most 16"):
        g.add(None, after=list(range(17)))
    with pytest.raises(ValueError, match="negative"):
        g.add(None, after=-1)
    with pytest.raises(ValueError, match="blocks"):
        g.add("noop", blocks=0)
    with pytest.raises(ValueError, match="blocks must be an int from 1 to 4096"):
        g.add("noop", blocks=4097)
    with pytest.raises(TypeError, match="unexpected keyword argument 'scalar'"):
        g.add("noop", scalar=())
    with pytest.raises(TypeError, match="empty task"):
        g.add(None, a)
    # Refused by the library, named by its message: a length the kernel
    # does not take; an output overlapping an input.
    with pytest.raises(ValueError, match="hbg_graph_add"):
        g.add("add_f32", a, client.zeros(9), out)
    with pytest.raises(ValueError, match="overlap"):
        g.add("copy_f32", a[:6], a[2:8])
    assert len(g) == 1  # only the good one went in
    g.run()


def test_add_host_argument_errors(client):
    g = client.graph()
    with pytest.raises(TypeError, match="callable"):
        g.add_host(42)
    with pytest.raises(TypeError, match="reads must be a sequence"):
        g.add_host(print, reads=client.zeros(2))
    with pytest.raises(ValueError, match=r"writes\[0\] of Graph.add_host is not in this client's session heap"):
        g.add_host(print, writes=[np.zeros(2)])
    with pytest.raises(TypeError, match="reads must be a sequence"):
        g.add_host(print, client.zeros(2))  # positional reads, not a sequence


def test_add_host_positional(client):
    # add_host(fn, reads, writes, after), as its signature reads.
    x, y = client.zeros(4), client.zeros(4)
    g = client.graph()
    g.add("fill_f32", x, scalars=(2.0,))

    def double():
        y[:] = x * 2

    t = g.add_host(double, [x], [y])
    seen = []
    g.add_host(lambda: seen.append(float(y[0])), (y,), (), (t,))
    g.run()
    assert (y == 4).all() and seen == [4.0]


def test_signatures():
    # help() and inspect see every call's parameters.
    import inspect
    params = lambda f: list(inspect.signature(f).parameters)  # noqa: E731
    assert params(hbg.connect) == ["socket", "heap", "window", "stall_timeout", "host_threads", "name"]
    assert params(hbg.Client) == ["socket", "heap", "window", "stall_timeout", "host_threads", "name"]
    assert params(hbg.Graph.add) == ["self", "kernel", "arrays", "scalars", "after", "blocks"]
    assert params(hbg.Graph.add_host) == ["self", "fn", "reads", "writes", "after"]
    assert params(hbg.Handle.wait) == ["self", "timeout"]
    assert params(hbg.Client.empty) == ["self", "shape", "dtype"]
    assert params(hbg.Client.zeros) == ["self", "shape", "dtype"]
    for cls in (hbg.Client, hbg.Graph, hbg.Handle, hbg.Recording):
        for name, member in vars(cls).items():
            if callable(member) and (not name.startswith("_") or name in ("__enter__", "__exit__")):
                inspect.signature(member)  # ValueError where a call has none


def test_graph_rules(client):
    g1, g2 = client.graph(), client.graph()
    g1.add(None)
    with pytest.raises(RuntimeError, match="another graph of this client has tasks not submitted"):
        g2.add(None)
    h = g1.submit()
    assert isinstance(h, hbg.Handle) and h.id == 0 or h.id >= 0
    with pytest.raises(RuntimeError, match="was submitted"):
        g1.add(None)
    with pytest.raises(RuntimeError, match="submitted already"):
        g1.submit()
    with pytest.raises(ValueError, match="empty"):
        g2.submit()
    g2.add(None)
    h2 = g2.submit()
    h.wait()
    h2.wait(timeout=10)
    assert h.done() and h2.done()
    assert h2.id == h.id + 1
    assert "submitted" in repr(g1) and "Handle" in repr(h)


def test_dropped_graph_is_submitted(client):
    x = client.zeros(4)
    g = client.graph()
    g.add("fill_f32", x, scalars=(3.0,))
    del g  # its task was handed to hbgd already: submitted, not lost
    g2 = client.graph()
    g2.add("scale_f32", x, scalars=(2.0,))
    g2.run()
    assert (x == 6).all()


def test_dependencies_derived_and_explicit(client):
    x = client.zeros(1000)
    g = client.graph()
    g.add("fill_f32", x, scalars=(1.0,))
    for _ in range(10):
        g.add("add_f32", x, x, x)  # x = 2x, in order
    seen = []
    t = g.add_host(lambda: seen.append(float(x[0])), reads=[x])
    g.add_host(lambda: seen.append("after"), after=[t])
    g.run()
    assert (x == 1024).all() and seen == [1024.0, "after"]


# ---------------------------------------------------------------- failures


def test_graph_error(client):
    g = client.graph()
    g.add(None)
    bad = g.add("fail", scalars=(-errno.ENOSPC,))
    h = g.submit()
    with pytest.raises(hbg.GraphError) as e:
        h.wait()
    err = e.value
    assert err.errno == errno.ENOSPC and err.task == bad and err.kernel == "fail"
    assert err.graph == h.id and err.message and "fail" in str(err)
    assert str(err) == f"graph {h.id} failed: task {bad} (fail): {err.message}"
    assert isinstance(err, RuntimeError)
    assert h.done()
    # The client goes on after a failed graph.
    g = client.graph()
    g.add("noop")
    g.run()


def test_host_function_exception_is_the_cause(client):
    def boom():
        raise KeyError("missing")

    def oserr():
        raise OSError(errno.EPIPE, "pipe")

    g = client.graph()
    t = g.add_host(boom)
    with pytest.raises(hbg.GraphError) as e:
        g.run()
    assert e.value.task == t and e.value.errno == errno.EIO and e.value.kernel == ""
    assert isinstance(e.value.__cause__, KeyError)
    g = client.graph()
    g.add_host(oserr)
    with pytest.raises(hbg.GraphError) as e:
        g.run()
    assert e.value.errno == errno.EPIPE and isinstance(e.value.__cause__, OSError)


def test_host_function_may_not_use_its_client(client):
    x = client.zeros(4)
    caught = []

    def inner():
        try:
            client.graph().add(None)
        except RuntimeError as e:
            caught.append(str(e))
        x[:] = 7  # its arrays, yes

    g = client.graph()
    g.add_host(inner, writes=[x])
    g.run()
    assert caught and "host function" in caught[0] and (x == 7).all()


def test_wait_timeout_and_cancel(client):
    g = client.graph()
    first = g.add("spin_ns", scalars=(200_000_000,))  # 0.2 s
    for _ in range(20):
        first = g.add("spin_ns", scalars=(200_000_000,), after=[first])
    h = g.submit()
    with pytest.raises(TimeoutError, match="still running after 0.05 s"):
        h.wait(timeout=0.05)
    assert not h.done()
    assert h.cancel() is True
    with pytest.raises(hbg.GraphError) as e:
        h.wait(timeout=30)
    assert e.value.errno == errno.ECANCELED
    assert h.cancel() is False  # finished: nothing to cancel
    with pytest.raises(ValueError, match="timeout"):
        h.wait(timeout=-1)


def test_stall_timeout_fails_host_task(hbgd):
    import threading
    release = threading.Event()
    with hbg.connect(hbgd.socket, stall_timeout=0.3, host_threads=1) as c:
        g = c.graph()
        g.add_host(lambda: release.wait(5))
        with pytest.raises(hbg.GraphError) as e:
            g.run(timeout=20)
        release.set()
        assert e.value.errno == errno.ETIME


# ---------------------------------------------------------------- recordings


def test_record_and_launch(client):
    a = client.asarray(np.arange(64, dtype=np.float32))
    b = client.asarray(np.ones(64, dtype=np.float32))
    calls = []
    with client.record() as rec:
        assert rec.id is None
        rec.graph.add("add_f32", a, b, a)
        rec.graph.add_host(lambda: calls.append(float(a[0])), reads=[a])
        with pytest.raises(RuntimeError, match="recording of this client is open"):
            client.graph().add(None)
    assert rec.id is not None and len(rec.graph) == 2
    with pytest.raises(RuntimeError, match="recording is over"):
        rec.graph.add(None)
    for _ in range(5):
        rec.launch().wait()
    assert np.array_equal(a, np.arange(64, dtype=np.float32) + 5)
    assert calls == [1.0, 2.0, 3.0, 4.0, 5.0]
    # Arrays a recording uses stay: dropping them frees nothing it needs.
    del b
    rec.launch().wait()
    assert a[0] == 6
    with pytest.raises(RuntimeError, match="used once"):
        with rec:
            pass


def test_record_refused(client):
    x = client.zeros(4)
    g = client.graph()
    g.add(None)
    with pytest.raises(RuntimeError, match="submit it first"):
        with client.record():
            pass
    g.run()
    with pytest.raises(hbg.GraphError) as e:
        with client.record() as rec:
            pass  # empty: refused when it ends
    assert e.value.errno and e.value.graph is None and e.value.task is None and e.value.kernel == ""
    assert e.value.message and str(e.value) == e.value.message
    with pytest.raises(RuntimeError, match="recording failed"):
        rec.launch()
    with pytest.raises(ZeroDivisionError):  # the body's exception goes on
        with client.record() as rec2:
            rec2.graph.add("fill_f32", x, scalars=(1.0,))
            1 / 0
    g = client.graph()
    g.add(None)
    g.run()


def test_help_texts():
    for obj in (hbg.connect, hbg.Client, hbg.Client.empty, hbg.Client.zeros, hbg.Client.asarray,
                hbg.Client.graph, hbg.Client.record, hbg.Client.kernels, hbg.Client.close, hbg.Graph.add,
                hbg.Graph.add_host, hbg.Graph.submit, hbg.Graph.run, hbg.Handle.wait, hbg.Handle.done,
                hbg.Handle.cancel, hbg.Recording.launch, hbg.GraphError, hbg.Kernel):
        assert obj.__doc__ and len(obj.__doc__) > 20, obj


def test_graph_errors_of_any_errno(client):
    """A task failing with EINVAL or ECONNRESET fails its graph like any
    other errno: GraphError, not the exception of a call's error."""
    for code in (errno.EINVAL, errno.ECONNRESET, errno.ETIMEDOUT, errno.ENOENT):
        g = client.graph()
        t = g.add("fail", scalars=(-code,))
        with pytest.raises(hbg.GraphError) as e:
            g.run(timeout=30)
        assert e.value.errno == code and e.value.task == t
    g = client.graph()
    g.add("noop")
    g.run()


def test_threads_building_graphs_on_one_client(client):
    """Two threads add to graphs of one shared client: one graph takes
    tasks at a time, checked under the client's lock; no thread's tasks
    end up in the other's graph."""
    import threading
    outcomes = []

    def build(k):
        for _ in range(50):
            g = client.graph()
            try:
                for _ in range(20):
                    g.add(None)
            except RuntimeError as e:
                assert "another graph" in str(e)
            if len(g):
                g.run(timeout=30)
                outcomes.append(len(g))

    ts = [threading.Thread(target=build, args=(k,)) for k in range(2)]
    for t in ts:
        t.start()
    for t in ts:
        t.join(60)
    assert outcomes and all(0 < n <= 20 for n in outcomes)
