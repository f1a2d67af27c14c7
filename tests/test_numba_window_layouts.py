"""Maximum / minimum pooling over the two minor dimensions with every window inside the
operand (NCHW VALID pooling) runs both separable passes fused per image (``_pool2d``):
the separable passes' bits and the reference's values on every case -- strides that divide the row or not (the image's
phases at once, or row by row), windows as long as the dimension, stride larger than the
window, size-1 dimensions, NaNs (payloads, signalling), signed zeros, infinities, an init
that is not the identity, denormals under flushing, f32 / f64 / s32 / f16."""
import numpy as np
import pytest

import xla_explorer as xe

pytest.importorskip("numba")

from xla_explorer.executors.cpu import reduction as R  # noqa: E402

COMBINE = {"max": xe.Max, "min": xe.Min}
SPECIAL = [0.0, -0.0, 1.0, -1.0, np.inf, -np.inf, np.nan, -np.nan, 1e-40, -1e-40]


def _values(rng, dt, dims):
    dt = np.dtype(dt)
    if dt.kind != "f":
        return rng.integers(-50, 50, dims).astype(dt)
    x = rng.standard_normal(dims).astype(dt)
    f = x.reshape(-1)
    k = rng.integers(0, f.size, max(1, f.size // 20))
    sp = np.array(SPECIAL, dt)
    if dt == np.float32:   # a NaN with a payload and a signalling NaN
        sp = np.concatenate([sp, np.array([0x7fc00123, 0x7f800001], np.uint32).view(np.float32)])
    f[k] = sp[rng.integers(0, sp.size, k.size)]
    return x


def _rw(dims, t, name, init, wd, ws):
    b = xe.XlaBuilder("pool")
    x = xe.Parameter(b, 0, xe.Shape(t, tuple(dims)), "x")
    return b.build(xe.ReduceWindow(x, xe.Constant(b, np.array(init, dtype=xe.Shape(t, ()).dtype)),
                                   lambda a, c: COMBINE[name](a, c), wd, ws, "VALID"))


CASES = [((2, 3, 16, 16), (1, 1, 3, 3), (1, 1, 2, 2)),    # the image's phases at once
         ((2, 3, 17, 15), (1, 1, 3, 3), (1, 1, 2, 2)),    # rows of odd length: row by row
         ((3, 9, 10), (1, 2, 4), (1, 3, 3)),
         ((2, 7, 7), (1, 7, 7), (1, 1, 1)),               # the window is the image
         ((4, 8, 9), (1, 2, 2), (1, 1, 1)),               # stride 1
         ((2, 11, 12), (1, 2, 3), (1, 4, 5)),              # stride past the window
         ((1, 1, 5, 1), (1, 1, 3, 1), (1, 1, 2, 1)),       # a column
         ((5, 1, 9), (1, 1, 3), (1, 1, 2)),                # one row
         ((3, 5, 33, 40), (1, 1, 5, 3), (1, 1, 3, 2))]


@pytest.mark.parametrize("dims, wd, ws", CASES)
@pytest.mark.parametrize("t, name, init", [("f32", "max", -np.inf), ("f32", "min", np.inf), ("f32", "max", 0.25),
                                           ("f32", "min", -0.0), ("f64", "max", -np.inf), ("s32", "max", -7),
                                           ("s32", "min", 2 ** 31 - 1), ("f16", "max", -np.inf)])
@pytest.mark.parametrize("runs", [True, False])
def test_fused_pooling_has_the_separable_passes_bits(dims, wd, ws, t, name, init, runs, monkeypatch):
    """The bits of the separable passes (whose folds tests/test_numba_windows.py checks),
    signalling NaNs and signed zeros included; the reference's values; short result rows
    folded as one long run or row by row (``POOL_RUNS``)."""
    monkeypatch.setattr(R, "POOL_RUNS", runs)
    rng = np.random.default_rng(len(dims) * 31 + sum(wd) + len(t))
    x = _values(rng, xe.Shape(t, ()).dtype, dims)
    comp = _rw(dims, t, name, init, wd, ws)
    got = [comp.run(x, backend="numba") for _ in range(3)]   # the walk, then the run plan
    with monkeypatch.context() as m:
        m.setattr(R, "_pool_minor2", lambda *a: False)
        want = comp.run(x, backend="numba")
    for g in got:
        assert g.dtype == want.dtype and g.shape == want.shape
        assert g.tobytes() == want.tobytes()
    np.testing.assert_array_equal(got[0], comp.run(x, backend="numpy"))


def test_the_benchmarks_pooling_takes_the_fused_path():
    """(So that the cases above test ``_pool2d``, not the separable passes.)"""
    dims, out = (2, 3, 16, 16), (2, 3, 7, 7)
    items, item_in, item_out, passes, _ = R.separable_plan(dims, out, (1, 1, 3, 3), (1, 1, 2, 2), ((0, 0),) * 4,
                                                           (1,) * 4, (1,) * 4)
    assert R._pool_minor2(passes, R.MAX, items, item_in, item_out, 2 * 3 * 16 * 16)
    assert not R._pool_minor2(passes, R.ADD, items, item_in, item_out, 2 * 3 * 16 * 16)
    _, _, _, padded, _ = R.separable_plan(dims, (2, 3, 8, 8), (1, 1, 3, 3), (1, 1, 2, 2), ((0, 0),) * 2 + ((1, 1),) * 2,
                                          (1,) * 4, (1,) * 4)
    assert not R._pool_minor2(padded, R.MAX, items, item_in, 2 * 3 * 64, 2 * 3 * 16 * 16)


@pytest.mark.parametrize("where", ["none", "one", "many"])
def test_fused_pooling_flushes_denormal_operands(where):
    """Under flushing a denormal read by a maximum is -0.0 / +0.0 (found as the images are
    read, then the pooling runs again on the flushed operand): the reference's bits."""
    rng = np.random.default_rng(len(where))
    dims = (3, 4, 20, 20)
    x = -np.abs(rng.standard_normal(dims)).astype(np.float32)
    f = x.reshape(-1)
    for k in {"none": [], "one": [f.size // 2 + 3], "many": list(range(7, f.size, 97))}[where]:
        f[k] = np.float32(-3e-39 if k % 2 else 1e-45)
    for name, init in (("max", -np.inf), ("min", np.inf)):
        comp = _rw(dims, "f32", name, init, (1, 1, 3, 3), (1, 1, 2, 2))
        want = comp.run(x, backend="numpy")
        for _ in range(2):
            np.testing.assert_array_equal(comp.run(x, backend="numba"), want)
        if where != "none" and name == "max":
            assert comp.run(x, backend="numba", denormals="ieee").tobytes() != comp.run(x, backend="numba").tobytes()
