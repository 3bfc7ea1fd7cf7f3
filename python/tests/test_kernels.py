# SPDX-License-Identifier: MIT
"""Every built-in kernel and the example module's, run by hbgd on heap
arrays, compared with numpy (subnormal, signed-zero, infinite and huge
inputs included). Elementwise results are compared bit for bit: hbgd's
kernels round as numpy does (no fused multiply-add)."""
import math

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import hbg
from conftest import SCALE

EXAMPLES = max(5, int(25 * SCALE))
SETTINGS = settings(max_examples=EXAMPLES, deadline=None, database=None,
                    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])

SUBNORMAL = np.float32(1e-40)
# Exactly representable in float32 (hypothesis checks the round trip).
SPECIAL = [float(np.float32(v)) for v in (0.0, -0.0, 1.0, -1.0, SUBNORMAL, -SUBNORMAL, np.finfo(np.float32).tiny,
                                          3.4e38, -3.4e38, float("inf"), float("-inf"))]


def f32_arrays(min_size=1, max_size=600):
    """float32 vectors, often with subnormals and the other special values;
    no NaN (NaN != NaN; relu's NaN rule has its own test)."""
    elements = st.one_of(
        st.floats(width=32, allow_nan=False),
        st.sampled_from(SPECIAL),
        st.floats(width=32, min_value=float(np.float32(-1e-37)), max_value=float(np.float32(1e-37))),
    )
    return hnp.arrays(np.float32, st.integers(min_size, max_size), elements=elements)


def same_bits(got, want):
    got = np.asarray(got, dtype=np.float32)
    want = np.asarray(want, dtype=np.float32)
    assert got.shape == want.shape
    bad = np.flatnonzero(got.view(np.uint32) != want.view(np.uint32))
    assert bad.size == 0, "first difference at %d: got %r, want %r (of %d)" % (
        bad[0], got[bad[0]], want[bad[0]], bad.size)


def run1(client, kernel, *arrays, scalars=()):
    g = client.graph()
    g.add(kernel, *arrays, scalars=scalars)
    g.run(timeout=30)


@SETTINGS
@given(pair=st.integers(1, 600).flatmap(lambda n: st.tuples(
    hnp.arrays(np.float32, n, elements=st.one_of(st.floats(width=32, allow_nan=False), st.sampled_from(SPECIAL))),
    hnp.arrays(np.float32, n, elements=st.one_of(st.floats(width=32, allow_nan=False), st.sampled_from(SPECIAL))))))
def test_add_mul_copy(client, pair):
    x, y = pair
    a, b = client.asarray(x), client.asarray(y)
    out = client.empty(len(x))
    with np.errstate(all="ignore"):
        run1(client, "add_f32", a, b, out)
        same_bits(out, x + y)
        run1(client, "mul_f32", a, b, out)
        same_bits(out, x * y)
    run1(client, "copy_f32", a, out)
    same_bits(out, x)


@SETTINGS
@given(x=f32_arrays(), alpha=st.floats(width=32, allow_nan=False))
def test_axpy_scale_fill(client, x, alpha):
    y0 = np.linspace(-3, 3, len(x), dtype=np.float32)
    a, y = client.asarray(x), client.asarray(y0)
    with np.errstate(all="ignore"):
        run1(client, "axpy_f32", a, y, scalars=(alpha,))
        same_bits(y, np.float32(alpha) * x + y0)
        run1(client, "scale_f32", y, scalars=(alpha,))
        same_bits(y, np.float32(alpha) * (np.float32(alpha) * x + y0))
    run1(client, "fill_f32", y, scalars=(alpha,))
    same_bits(y, np.full(len(x), alpha, dtype=np.float32))


@SETTINGS
@given(x=f32_arrays())
def test_reduce_sum(client, x):
    s = client.zeros(4)
    run1(client, "reduce_sum_f32", client.asarray(x), s)
    total = 0.0  # in double, in index order, then rounded once
    for v in x:
        total += float(v)
    with np.errstate(all="ignore"):
        same_bits(s[:1], np.array([total], dtype=np.float64).astype(np.float32))
    assert s[1] == 0 and s[3] == 0  # only s[0] is written


@SETTINGS
@given(m=st.integers(1, 9), n=st.integers(1, 9), k=st.integers(1, 9), seed=st.integers(0, 2**32 - 1))
def test_gemm(client, m, n, k, seed):
    rng = np.random.default_rng(seed)
    A = rng.standard_normal((m, k)).astype(np.float32)
    B = rng.standard_normal((k, n)).astype(np.float32)
    C0 = rng.standard_normal((m, n)).astype(np.float32)
    C = client.asarray(C0)
    run1(client, "gemm_f32", client.asarray(A), client.asarray(B), C, scalars=(m, n, k))
    np.testing.assert_allclose(C, C0 + A.astype(np.float64) @ B.astype(np.float64), rtol=1e-5, atol=1e-5)


@SETTINGS
@given(rows=st.integers(1, 6), cols=st.integers(1, 40), seed=st.integers(0, 2**32 - 1))
def test_softmax_rows(client, rows, cols, seed):
    X0 = (np.random.default_rng(seed).standard_normal((rows, cols)) * 10).astype(np.float32)
    X = client.asarray(X0)
    run1(client, "softmax_rows_f32", X, scalars=(rows, cols))
    e = np.exp(X0.astype(np.float64) - X0.max(axis=1, keepdims=True))
    np.testing.assert_allclose(X, e / e.sum(axis=1, keepdims=True), rtol=1e-5, atol=1e-7)


def test_spin_noop_timestamp(client):
    g = client.graph()
    first = g.add("noop")
    g.add("spin_ns", scalars=(1000,), after=[first])
    t = client.zeros(2, dtype=np.int64)
    g.add("timestamp_ns", t)
    g.run(timeout=30)
    assert t[0] > 0


# ---------------------------------------------------------------- the example module


@SETTINGS
@given(x=f32_arrays())
def test_module_relu(client, x):
    out = client.empty(len(x))
    run1(client, "relu_f32", client.asarray(x), out)
    same_bits(out, np.where(x > 0, x, np.float32(0)))


def test_module_relu_nan_and_in_place(client):
    x = client.asarray(np.array([np.nan, -0.0, -1, 2, SUBNORMAL], dtype=np.float32))
    run1(client, "relu_f32", x, x)  # in place, as numpy's out=
    same_bits(x, [0, 0, 0, 2, SUBNORMAL])


@SETTINGS
@given(rows=st.integers(1, 5), cols=st.integers(1, 50), seed=st.integers(0, 2**32 - 1))
def test_module_rownorm(client, rows, cols, seed):
    X0 = np.random.default_rng(seed).standard_normal((rows, cols)).astype(np.float32)
    X0[0, :] = 0  # a row of zeros stays
    X = client.asarray(X0)
    run1(client, "rownorm_f32", X, scalars=(rows, cols))
    x64 = X0.astype(np.float64)
    norm = np.sqrt((x64 * x64).sum(axis=1, keepdims=True))
    want = np.where(norm == 0, 0, x64 / np.where(norm == 0, 1, norm)).astype(np.float32)
    np.testing.assert_allclose(X, want, rtol=1e-6, atol=0)
    assert not X[0].any()


def test_kernels_listing(client):
    ks = {k.name: k for k in client.kernels()}
    assert ks["add_f32"].tensors == (("a", "in"), ("b", "in"), ("out", "out"))
    assert ks["add_f32"].module is None and ks["add_f32"].in_place
    assert ks["axpy_f32"].scalars == (("alpha", "f32"),)
    assert ks["fail"].scalars == (("code", "i64"),)
    relu = ks["relu_f32"]
    assert relu.module and "hbg-nn" in relu.module and relu.id >= 256
    assert relu.tensors == (("x", "in"), ("y", "out")) and relu.length == "equal"
    assert ks["rownorm_f32"].scalars == (("rows", "u64"), ("cols", "u64"))
    assert [k.id for k in client.kernels()] == sorted(k.id for k in client.kernels())
    # A kernel by id and by hbg.Kernel, not only by name.
    x = client.asarray(np.arange(4, dtype=np.float32) - 2)
    g = client.graph()
    g.add(relu, x, x)
    g.add(ks["scale_f32"].id, x, scalars=(2.0,))
    g.run()
    same_bits(x, [0, 0, 0, 2])
    assert math.isfinite(float(x.sum()))


def test_blocks_split_same_result(client):
    x0 = np.random.default_rng(1).standard_normal(10000).astype(np.float32)
    a = client.asarray(x0)
    outs = []
    for blocks in (1, 3, 7):
        out = client.empty(len(x0))
        g = client.graph()
        g.add("add_f32", a, a, out, blocks=blocks)
        g.run()
        outs.append(out)
    for out in outs:
        same_bits(out, x0 + x0)


def test_subnormals_survive_a_chain(client):
    x = client.asarray(np.full(1000, SUBNORMAL, dtype=np.float32))
    g = client.graph()
    for _ in range(20):
        g.add("add_f32", x, x, x)  # doubles each time: subnormal -> normal
    g.run()
    same_bits(x, np.full(1000, SUBNORMAL * np.float32(2**20), dtype=np.float32))


def test_hbg_module_imports():
    assert hbg.library_version().startswith("1.")
