"""A Reduce over one block of dimensions that kept dimensions follow (x as [A, R, B], B > 1:
a softmax along axis 0, a variance over the batch) folds the columns of the fused loop
whose value it reads as the loop computes them (``numba_executor._fused_cols``,
``cpu.fused.compile_reduce_cols_loop``): one pass over the value less, and none at all
where the Reduce is its only reader.  The folds are ``reduction._arb_pass``'s -- the same
parts of the rows (``row_parts``), the same order -- so every result keeps the bits of the
run without it (``_COLUMN_FOLDS`` off), serial and parallel, and agrees with the NumPy
reference."""
import numpy as np
import pytest

import xla_explorer as xe

pytest.importorskip("numba")

from xla_explorer.executors import numba_executor  # noqa: E402
from xla_explorer.executors.cpu import fused, reduction  # noqa: E402


def _bits(a):
    a = np.asarray(a)
    return a.dtype, a.shape, a.reshape(-1).view(np.uint8).tobytes()


_COMBINERS = {
    "add": (lambda a, c: xe.Add(a, c), lambda t: 0),
    "max": (lambda a, c: xe.Max(a, c), lambda t: -np.inf if t[0] == "f" else -(2 ** 31)),
    "min": (lambda a, c: xe.Min(a, c), lambda t: np.inf if t[0] == "f" else 2 ** 31 - 1),
    "mul": (lambda a, c: xe.Mul(a, c), lambda t: 1),
}


def _program(t, dims, reduced, combiner, also_loop):
    """A loop (floats: x * x - 0.5, or exp(x - 1) for sums; integers: x * 3 + 1) reduced over
    ``reduced``; its value also a result (so the loop writes it), or not."""
    b = xe.XlaBuilder("loop_cols")
    dt = xe.Shape(t, ()).dtype
    x = xe.Parameter(b, 0, xe.Shape(t, dims), "x")
    if t[0] != "f":
        e = xe.Add(xe.Mul(x, xe.Constant(b, dt.type(3))), xe.Constant(b, dt.type(1)))
    elif combiner == "add":
        e = xe.Exp(xe.Sub(x, xe.Constant(b, dt.type(1))))
    else:
        e = xe.Sub(xe.Mul(x, x), xe.Constant(b, dt.type(0.5)))
    fn, init = _COMBINERS[combiner]
    r = xe.Reduce(e, xe.Constant(b, dt.type(init(t))), fn, reduced)
    return b.build(xe.Tuple(r, e) if also_loop else r)


def _labels(comp):
    return [lab for p in numba_executor._programs(comp.entry).values() for lab in p.labels]


def _operand(rng, t, dims, combiner):
    dt = xe.Shape(t, ()).dtype
    if t[0] != "f":
        return rng.integers(-40, 50, dims).astype(dt)
    x = rng.standard_normal(dims).astype(dt) * (0.02 if combiner == "mul" else 1.5)
    if combiner in ("max", "min"):   # zeros of both signs (x * x - 0.5 of +-sqrt(0.5)), NaNs, infinities
        flat = x.reshape(-1)
        k = flat.size
        flat[rng.integers(0, k, max(1, k // 50))] = dt.type(np.sqrt(dt.type(0.5)))
        flat[rng.integers(0, k, max(1, k // 50))] = -dt.type(np.sqrt(dt.type(0.5)))
        flat[rng.integers(0, k, max(1, k // 500))] = np.nan
        flat[rng.integers(0, k, max(1, k // 500))] = np.inf
    if combiner == "add" and t == "f32":   # exp(x - 1) denormal (flushed in the flushing environment)
        x.reshape(-1)[rng.integers(0, x.size, max(1, x.size // 100))] = -88
    return x


_CASES = [((40, 9), [0]), ((3000, 64), [0]), ((8, 300, 70), [1]), ((2, 5000, 24), [1]),
          ((4, 6, 50), [0, 1]), ((1, 7, 33), [1]), ((5, 1, 3, 17), [2]), ((6, 2), [0])]


@pytest.mark.parametrize("t", ["f32", "f64", "s32"])
@pytest.mark.parametrize("parallel", [False, True])
def test_a_column_reduce_of_a_loop_folds_in_it_with_the_same_bits(t, parallel, monkeypatch):
    if parallel:   # every loop big enough for the threads; long columns cut in parts (``row_parts``)
        monkeypatch.setattr(fused, "PARALLEL_THRESHOLD", 1 << 10)
        monkeypatch.setattr(fused, "COLS_BLOCK", 16)
        monkeypatch.setattr(reduction, "MOVE_PARALLEL_THRESHOLD", 1 << 12)
        assert reduction.row_parts(1, 3000, 3000 * 64) > 1 or reduction.split_threads() == 1
    rng = np.random.default_rng(31)
    for dims, reduced in _CASES:
        for combiner in _COMBINERS:
            if t[0] != "f" and combiner == "mul":
                continue
            x = _operand(rng, t, dims, combiner)
            also = combiner in ("add", "max")
            for env in ("flush", "ieee"):
                runs = []
                with xe.float_env(denormals=env):
                    for on in (False, True):
                        monkeypatch.setattr(numba_executor, "_COLUMN_FOLDS", on)
                        comp = _program(t, dims, reduced, combiner, also)
                        comp.run(x, backend="numba")
                        runs.append(comp.run(x, backend="numba"))
                        if on:
                            assert any("folding its columns" in lab for lab in _labels(comp)), (dims, _labels(comp))
                    want = comp.run(x)
                off, on = ((v,) if not also else v for v in runs)
                for a, c, w in zip(off, on, (want,) if not also else want):
                    assert _bits(c) == _bits(a), (dims, reduced, combiner, env)
                    np.testing.assert_allclose(np.asarray(c, np.float64), np.asarray(w, np.float64),
                                               rtol=1e-4 if t[0] == "f" else 0, err_msg=f"{dims} {combiner} {env}")


def test_a_softmax_along_the_major_dimension_folds_its_exp_columns():
    rng = np.random.default_rng(5)
    b = xe.XlaBuilder("softmax0")
    x = xe.Parameter(b, 0, xe.Shape("f32", (300, 200)), "x")
    m = xe.Reduce(x, xe.Constant(b, np.float32(-np.inf)), lambda p, q: xe.Max(p, q), [0])
    e = xe.Exp(xe.Sub(x, xe.BroadcastInDim(m, (300, 200), [1])))
    s = xe.Reduce(e, xe.Constant(b, np.float32(0)), lambda p, q: xe.Add(p, q), [0])
    comp = b.build(xe.Div(e, xe.BroadcastInDim(s, (300, 200), [1])))
    v = rng.standard_normal((300, 200)).astype(np.float32) * 4
    comp.run(v, backend="numba")
    got = comp.run(v, backend="numba")
    assert any("folding its columns" in lab for lab in _labels(comp)), _labels(comp)
    np.testing.assert_allclose(got, comp.run(v), rtol=2e-6, atol=1e-9)
    np.testing.assert_allclose(got.sum(0), 1, rtol=1e-5)


def test_a_fold_of_the_columns_alone_writes_no_value(monkeypatch):
    """The Reduce the loop value's only reader: the loop's step makes no array of it."""
    made = []
    real = fused.run_reduce_cols_loop

    def spy(compiled, n, out, *args, **kw):
        made.append(out.size)
        return real(compiled, n, out, *args, **kw)

    monkeypatch.setattr(fused, "run_reduce_cols_loop", spy)
    comp = _program("f32", (500, 40), [0], "add", also_loop=False)
    x = np.random.default_rng(2).standard_normal((500, 40)).astype(np.float32)
    comp.run(x, backend="numba")
    got = comp.run(x, backend="numba")
    assert made == [0]
    np.testing.assert_allclose(got, comp.run(x), rtol=1e-5)


def test_reduces_of_one_loop_value_over_rows_and_columns():
    """Several Reduces of one loop's value: the last one planned folds in the loop's step
    (its label says which), the others reduce the value the loop writes; every result the
    reference's."""
    b = xe.XlaBuilder("two_folds")
    x = xe.Parameter(b, 0, xe.Shape("f32", (300, 70)), "x")
    e = xe.Exp(x)
    s0 = xe.Reduce(e, xe.Constant(b, np.float32(0)), lambda p, q: xe.Add(p, q), [0])
    m0 = xe.Reduce(e, xe.Constant(b, np.float32(-np.inf)), lambda p, q: xe.Max(p, q), [0])
    s1 = xe.Reduce(e, xe.Constant(b, np.float32(0)), lambda p, q: xe.Add(p, q), [1])
    comp = b.build(xe.Tuple(s0, m0, s1))
    v = np.random.default_rng(3).standard_normal((300, 70)).astype(np.float32)
    want = comp.run(v)
    for _ in range(3):
        for g, w in zip(comp.run(v, backend="numba"), want):
            np.testing.assert_allclose(g, w, rtol=1e-5)
    folds = [lab for lab in _labels(comp) if "folding" in lab]
    assert folds == ["a fused loop of 1 ops folding its rows"], folds
