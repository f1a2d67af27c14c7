"""Float sums, maxima and minima of one f32 / f64 operand over one block of dimensions
(column sums: a dense layer's bias gradient; row sums; size-1 dimensions only), as the
walk's first run and the run plan's later runs compute them (a plan may prepare the
kernel's set-up once): the same bits, whatever the shape, the environment (denormals
flushed or not: in the operand, the init value, the result) and the thread count; against
the reference within the accumulation tolerance."""
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import xla_explorer as xe

pytest.importorskip("numba")

from test_numba_reduction_linalg import assert_same, param  # noqa: E402

SETTINGS = settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])


_INITS = {"add": 0, "max": -np.inf, "min": np.inf}
_OPS = {"add": xe.Add, "max": xe.Max, "min": xe.Min}


def _sum(t, dims, reduced, init_param=False, op="add"):
    b = xe.XlaBuilder("sum")
    x = param(b, 0, t, dims)
    init = param(b, 1, t, ()) if init_param else np.asarray(_INITS[op], xe.Shape(t, ()).dtype)
    return b.build(xe.Reduce(x, init, lambda a, c: _OPS[op](a, c), reduced))


def _runs(comp, args, **kw):
    runs = [comp.run(*args, backend="numba", **kw) for _ in range(3)]
    for r in runs[1:]:
        assert r.dtype == runs[0].dtype and r.shape == runs[0].shape
        np.testing.assert_array_equal(np.signbit(r), np.signbit(runs[0]))   # -0.0 included
        np.testing.assert_array_equal(r, runs[0])
    return runs[0]


@SETTINGS
@given(dims=st.lists(st.integers(0, 6), min_size=0, max_size=4), data=st.data(),
       t=st.sampled_from(["f32", "f64"]), op=st.sampled_from(["add", "max", "min"]), seed=st.integers(0, 99))
def test_prepared_reduce_same_bits_as_the_kernel(dims, data, t, op, seed):
    reduced = sorted(data.draw(st.sets(st.integers(0, max(len(dims) - 1, 0)), max_size=len(dims))) if dims else [])
    comp = _sum(t, dims, reduced, op=op)
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(dims).astype(xe.Shape(t, ()).dtype)
    if x.size:
        x.reshape(-1)[0] = -0.0
        if seed % 3 == 0:   # NaNs and infinities: the first NaN, as the reference's tree
            x.reshape(-1)[rng.integers(0, x.size, 2)] = [np.nan, -np.inf]
    assert_same(comp.run(x), _runs(comp, [x]), rtol=1e-5)


@pytest.mark.parametrize("dims,reduced", [
    ((256, 10), [0]), ((256, 512), [0]), ((1, 512), [0]), ((3, 1, 5), [1]), ((4, 5, 6), [1]), ((4, 5, 6), [0, 1]),
    ((4, 5, 6), [1, 2]), ((256, 10), [1]), ((600, 700), [0]), ((700, 600), [1]), ((2, 300, 1000), [1]),
])
@pytest.mark.parametrize("op", ["add", "max"])
def test_column_and_row_sums(dims, reduced, op):
    comp = _sum("f32", dims, reduced, op=op)
    x = np.random.default_rng(sum(dims)).standard_normal(dims).astype(np.float32)
    got = _runs(comp, [x])
    assert_same(comp.run(x), got, rtol=1e-4)


def test_two_blocks_and_integers_keep_the_kernel():
    comp = _sum("f32", (4, 5, 6), [0, 2])
    x = np.random.default_rng(0).standard_normal((4, 5, 6)).astype(np.float32)
    assert_same(comp.run(x), _runs(comp, [x]), rtol=1e-5)
    comp = _sum("s32", (7, 9), [0])
    xi = np.arange(63, dtype=np.int32).reshape(7, 9)
    np.testing.assert_array_equal(_runs(comp, [xi]), xi.sum(0))


@pytest.mark.parametrize("mode", ["flush", "ieee"])
def test_prepared_sum_denormals(mode):
    """A denormal in the operand reads as zero under flushing (the pass finds it, the
    kernel flushes and sums again); a denormal init value too; a sum that ends denormal
    is written as zero; in ieee all three stay."""
    tiny = np.float32(1e-39)
    comp = _sum("f32", (3, 4), [0], init_param=True)
    x = np.ones((3, 4), np.float32)
    x[1, 2] = tiny
    x[:, 3] = [tiny, tiny, -tiny / 2]     # a denormal column sum
    x[:, 0] = [1.0, -1.0, 0.0]
    for init in (np.float32(0), np.float32(tiny)):
        want = comp.run(x, init, denormals=mode)
        got = _runs(comp, [x, init], denormals=mode)   # the walk's kernel and the prepared path: one result
        assert_same(want, got)
        if mode == "flush":   # the denormal column sum, and every denormal read, as zeros
            np.testing.assert_array_equal(got.view(np.uint32), np.float32([0, 3, 2, 0]).view(np.uint32))
        else:
            assert got[3] != 0   # a denormal sum kept
    for op in ("max", "min"):   # only the result flushed: a denormal maximum is a zero
        comp = _sum("f32", (3, 4), [0], init_param=True, op=op)
        y = np.full((3, 4), -tiny if op == "max" else tiny, np.float32)
        y[:, 1] = [1, 2, 3] if op == "max" else [-1, -2, -3]
        want = comp.run(y, np.float32(_INITS[op]), denormals=mode)
        got = _runs(comp, [y, np.float32(_INITS[op])], denormals=mode)
        np.testing.assert_array_equal(got.view(np.uint32), want.view(np.uint32))
        assert (got[0] == 0) == (mode == "flush")
    clean = np.random.default_rng(1).standard_normal((64, 33)).astype(np.float32)
    comp = _sum("f32", (64, 33), [0], init_param=True)
    want = comp.run(clean, np.float32(0), denormals=mode)
    assert_same(want, _runs(comp, [clean, np.float32(0)], denormals=mode), rtol=1e-5)


def test_prepared_sum_keeps_its_bits_across_thread_counts():
    """Large column sums are cut into parts by Numba's thread count, not the load: the
    prepared path cuts them as the kernel does."""
    import numba
    comp = _sum("f32", (4096, 96), [0])
    x = np.random.default_rng(3).standard_normal((4096, 96)).astype(np.float32)
    want = comp.run(x, backend="numba")   # the walk: the kernel
    before = numba.get_num_threads()
    try:
        for threads in (1, min(2, numba.config.NUMBA_NUM_THREADS)):
            numba.set_num_threads(threads)
            np.testing.assert_array_equal(comp.run(x, backend="numba"), want)
    finally:
        numba.set_num_threads(before)
