"""A fused loop's add / subtract whose only reader is exp (or its own square) (softmax's exp(x - max)) reads its
operands unflushed under the flushing environment (``emit.sum_before_blind``): exp of the
unflushed sum must be exp of the flushed one, bit for bit, for denormal operands on either
side or both, against every kind of other operand (zeros, the smallest normals, values
around 2^-100 where a denormal stops being below half an ulp, ordinary values, NaN,
infinities); a sum another op reads too keeps its flushes."""
import numpy as np
import pytest

import xla_explorer as xe

pytest.importorskip("numba")

from xla_explorer.executors import emit  # noqa: E402


def _values(t):
    dt = np.float64 if t == "f64" else np.float32
    f = np.finfo(np.float64 if t == "f64" else np.float32)
    tiny = float(f.tiny)
    e = -100 if t != "f64" else -970
    v = [0.0, -0.0, tiny, -tiny, tiny / 2, -tiny / 2, tiny / 1024, tiny * 3, 2.0 ** (e - 2), 2.0 ** e, 2.0 ** (e + 1),
         -(2.0 ** e), 1.5 * 2.0 ** (e + 1), 2.0 ** -60, 1e-30, 1e-8, 0.5, 1.0, -1.0, 3.0, 80.0, -80.0, -104.0,
         np.inf, -np.inf, np.nan]
    v += [float(np.nextafter(dt(tiny), dt(0))), -float(np.nextafter(dt(tiny), dt(0)))]
    return np.array(v, np.float64)


def _grid(t):
    v = _values(t)
    a, b = np.meshgrid(v, v, indexing="ij")
    dt = xe.Shape(t, ()).dtype
    return a.astype(dt), b.astype(dt)


def _build(t, shape, body):
    b = xe.XlaBuilder("blind")
    x = xe.Parameter(b, 0, xe.Shape(t, shape), "x")
    y = xe.Parameter(b, 1, xe.Shape(t, shape), "y")
    return b.build(body(x, y))


BODIES = {
    "exp(x - y)": lambda x, y: xe.Exp(xe.Sub(x, y)),
    "exp(x + y)": lambda x, y: xe.Exp(xe.Add(x, y)),
    "exp(y - x) * 2": lambda x, y: xe.Mul(xe.Exp(xe.Sub(y, x)), xe.Add(x, x)),
    # the sum read by exp and by a multiply: its flushes stay
    "exp(x + y) * (x + y)": lambda x, y: (lambda s: xe.Mul(xe.Exp(s), s))(xe.Add(x, y)),
    # a sum only its square reads (a variance's (x - mean)^2): no flush of it nor of its operands
    "(x - y)^2 + 1": lambda x, y: (lambda s: xe.Add(xe.Mul(s, s), xe.Mul(y, y)))(xe.Sub(x, y)),
    "(x * y)^2 * x": lambda x, y: (lambda s: xe.Mul(xe.Mul(s, s), x))(xe.Mul(x, y)),
    # the square and another reader: the flushes stay
    "(x - y)^2 + (x - y)": lambda x, y: (lambda s: xe.Add(xe.Mul(s, s), s))(xe.Sub(x, y)),
}


@pytest.mark.parametrize("t", ["f32", "f64", "bf16"])
@pytest.mark.parametrize("name", list(BODIES))
def test_sums_only_exp_reads_give_the_flushed_sums_bits(t, name, monkeypatch):
    x, y = _grid(t)
    shape = x.shape
    got = {}
    for on in (True, False):
        monkeypatch.setattr(emit, "_SUM_BEFORE_BLIND", on)
        comp = _build(t, shape, BODIES[name])   # (a new computation: its loop generated again)
        with xe.float_env(denormals="flush"):
            got[on] = [comp.run(x, y, backend="numba") for _ in range(2)]
            want = comp.run(x, y)
    for r in got[True] + got[False]:
        bits = lambda a: np.asarray(a).view(np.uint16 if t == "bf16" else (np.uint64 if t == "f64" else np.uint32))
        np.testing.assert_array_equal(bits(r), bits(got[False][0]))
        # and the reference's values (its exp may round the last bit differently)
        np.testing.assert_allclose(np.asarray(r, np.float64), np.asarray(want, np.float64), rtol=2e-7 if t == "f32"
                                   else (1e-2 if t == "bf16" else 1e-15), equal_nan=True)


def test_the_loop_reads_x_unflushed_only_where_exp_alone_reads_the_sum():
    from xla_explorer.executors import fusion
    from xla_explorer.executors.loopgen import LoopSource
    for name, flushes_x in (("exp(x - y)", False), ("exp(x + y) * (x + y)", True), ("(x - y)^2 + 1", False),
                            ("(x - y)^2 + (x - y)", True)):
        comp = _build("f32", (4, 4), BODIES[name])
        with xe.float_env(denormals="flush"):
            groups = fusion.fusion_plan(comp.entry).groups
            assert len(groups) == 1
            src = "\n".join(LoopSource(groups[0]).body)
        assert ("ftz32(in0" in src) == flushes_x, src
