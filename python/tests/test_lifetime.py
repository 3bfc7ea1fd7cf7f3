# SPDX-License-Identifier: MIT
"""Array lifetimes: heap memory is reused only once the array and every
view of it are gone and the tasks added before then completed; arrays
outlive close(); the session ends with the last of them."""
import time

import numpy as np
import pytest

import hbg

N = 16384  # floats: 64 KiB arrays


def addr(a):
    return a.__array_interface__["data"][0]


def gated_copy(c, x, y, value):
    """A graph whose host function (run only inside a wait, the client has
    no host threads) writes value into x, then y = x by hbgd."""
    g = c.graph()

    def gate():
        x[:] = value

    g.add_host(gate, writes=[x])
    g.add("copy_f32", x, y)
    return g.submit()


def test_memory_reused_only_after_its_graph_finished(hbgd):
    with hbg.connect(hbgd.socket, heap=512 * 1024) as c:
        x, y = c.zeros(N), c.zeros(N)
        old = addr(x)
        h = gated_copy(c, x, y, 5.0)
        view = x[100:200]
        del x  # a view keeps the memory
        z1 = c.zeros(N)
        assert addr(z1) != old
        del view  # the last view gone while the graph is pending
        z2 = c.zeros(N)
        assert addr(z2) != old and addr(z2) != addr(z1)
        z2[:] = -1.0
        h.wait()
        assert (y == 5.0).all() and (z2 == -1.0).all()  # nobody wrote over anybody
        # Finished: the bytes are free for the next array of that size.
        reused = [c.empty(N) for _ in range(4)]
        assert old in [addr(a) for a in reused]


def test_heap_recycled_many_times(hbgd):
    with hbg.connect(hbgd.socket, heap=1 << 20) as c:
        for i in range(300):  # 300 x 256 KiB through a 1 MiB heap
            a = c.zeros(65536)
            b = c.asarray(np.full(65536, i, dtype=np.float32))
            g = c.graph()
            g.add("add_f32", a, b, a)
            g.run()
            assert a[0] == i and a[-1] == i
            del a, b


def test_array_dropped_inside_host_function(hbgd):
    """The host function runs inside the wait, where the client is busy:
    its frees wait for the client's next call, and are not lost."""
    with hbg.connect(hbgd.socket, heap=1 << 20) as c:
        for _ in range(40):
            box = [c.zeros(65536)]  # 256 KiB: 40 of them would not fit
            g = c.graph()
            g.add_host(lambda: box.clear())
            g.run()
            assert not box


def test_arrays_outlive_close(hbgd):
    c = hbg.connect(hbgd.socket, name="outlive")
    a = c.asarray(np.arange(N, dtype=np.float32))
    g = c.graph()
    g.add("scale_f32", a, scalars=(2.0,))
    g.run()
    before = hbgd.log().count("closed: disconnected")
    c.close()
    assert c.closed and "closing" in repr(c)
    a[0] = 42  # still the session heap, still mapped
    assert a[0] == 42 and a[1] == 2.0 and a[-1] == 2 * (N - 1)
    with pytest.raises(ValueError, match="closed"):
        c.graph()
    with pytest.raises(ValueError, match="closed"):
        g.add(None)
    time.sleep(0.2)
    assert hbgd.log().count("closed: disconnected") == before  # the session waits for a
    del a
    assert "closed" in repr(c)
    deadline = time.monotonic() + 10
    while hbgd.log().count("closed: disconnected") == before and time.monotonic() < deadline:
        time.sleep(0.01)
    assert hbgd.log().count("closed: disconnected") == before + 1


def test_views_and_slices_as_task_arguments(client):
    x = client.asarray(np.arange(100, dtype=np.float32))
    y = client.zeros(100)
    g = client.graph()
    g.add("copy_f32", x[10:20], y[50:60])  # views: their own byte ranges
    g.add("scale_f32", y[50:60], scalars=(3.0,))
    g.run()
    assert np.array_equal(y[50:60], np.arange(10, 20, dtype=np.float32) * 3)
    assert not y[:50].any() and not y[60:].any()
    m = client.zeros((4, 25))
    g = client.graph()
    g.add("copy_f32", x, m.reshape(-1))
    g.run()
    assert np.array_equal(m.ravel(), x)
